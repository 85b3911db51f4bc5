"""Forward semantics of the ops issue 32 added, against numpy references written from
PaddlePaddle's op documentation (gradients: tests/test_grad_added_ops.py)."""
import numpy as np
import pytest

from oprun import run

X = np.random.default_rng(0).uniform(-0.9, 0.9, (3, 4))

UNARY = {"tan": np.tan, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh, "atanh": np.arctanh}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("op_type", sorted(UNARY) + ["acosh"])
def test_hyperbolic_and_tan(op_type, dtype):
    x = (X + 2.0 if op_type == "acosh" else X).astype(dtype)
    want = np.arccosh(x.astype(np.float64)) if op_type == "acosh" else UNARY[op_type](x.astype(np.float64))
    got = run(op_type, {"X": x})["Out"]
    assert got.dtype == dtype
    np.testing.assert_allclose(got, want, rtol=2e-7 if dtype == np.float32 else 1e-15)


@pytest.mark.parametrize("threshold", [0.5, 0.2])
def test_hard_shrink(threshold):
    x = np.array([-1.0, -0.5, -0.3, 0.0, 0.2, 0.5, 0.51, 2.0])
    got = run("hard_shrink", {"X": x}, {"threshold": threshold})["Out"]
    want = np.array([v if abs(v) > np.float32(threshold) else 0.0 for v in x])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("lam", [0.5, 0.25])
def test_softshrink(lam):
    x = np.array([-1.0, -0.5, -0.3, 0.0, 0.2, 0.5, 0.51, 2.0])
    got = run("softshrink", {"X": x}, {"lambda": lam})["Out"]
    lam32 = float(np.float32(lam))
    want = np.array([v - lam32 if v > lam32 else v + lam32 if v < -lam32 else 0.0 for v in x])
    np.testing.assert_allclose(got, want, rtol=1e-15)


@pytest.mark.parametrize("attrs,axes", [({"dim": [1]}, (1,)), ({"dim": [0, 1]}, None),
                                       ({"dim": [-1], "keep_dim": True}, (1,)),
                                       ({"dim": [0], "reduce_all": True}, None)])
def test_frobenius_norm(attrs, axes):
    got = run("frobenius_norm", {"X": X}, attrs)["Out"]
    want = np.sqrt((X * X).sum(axis=axes, keepdims=attrs.get("keep_dim", False)))
    np.testing.assert_allclose(got, want, rtol=1e-14)
