"""Complex inputs (issue 32): the unary ops PaddlePaddle's CPU kernels register complex64/128
for are computed in complex (numpy's complex functions as the reference); the others refuse a
complex input when the program is built; gradients follow PaddlePaddle's convention
X@GRAD = Out@GRAD * conj(dOut/dX), checked by finite differences of a real loss
(tests/oprun.py numeric_grads); a real operand meets a complex one as PaddlePaddle promotes."""
import json
from pathlib import Path

import numpy as np
import pytest

from keel.program.errors import DTypeError
from keel.program.ops.activation import COMPLEX_UNARY
from oprun import check_grads, grads, run

PADDLE_DTYPES = json.loads((Path(__file__).parent / "fixtures" / "paddle_cpu_dtypes.json").read_text())

# Values away from the branch cuts of log, sqrt, acos, asin, atan, acosh, atanh.
X = np.array([[0.3 + 0.8j, -0.5 - 0.2j], [0.7 - 0.4j, -0.25 + 0.6j]])

REFERENCE = {
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "tanh": np.tanh, "exp": np.exp, "expm1": np.expm1, "log": np.log, "log2": np.log2,
    "log10": np.log10, "log1p": np.log1p, "sqrt": np.sqrt, "abs": np.abs, "square": np.square,
    "reciprocal": lambda x: 1 / x, "sin": np.sin, "cos": np.cos, "tan": np.tan,
    "acos": np.arccos, "asin": np.arcsin, "atan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "asinh": np.arcsinh, "acosh": np.arccosh, "atanh": np.arctanh,
    "softsign": lambda x: x / (1 + np.abs(x)),
    "stanh": lambda x: np.float32(1.7159) * np.tanh(np.float32(0.67) * x),
    # PaddlePaddle's formulas at its default attributes, complex numbers compared by their
    # real parts (phi::dtype::complex's operator<), the principal log
    "hard_swish": lambda x: x * np.where((x + 3).real < 0, 0, np.where((x + 3).real > 6, 6, x + 3)) / 6,
    "softplus": lambda x: np.where(x.real > 20, x, np.log(1 + np.exp(x))),
    "logsigmoid": lambda x: np.log(1 / (1 + np.exp(-x))),
    "round": np.round,                       # each part, halves to even (std::rint)
    "sign": lambda x: np.where(x == 0, 0, x / np.where(x == 0, 1, np.abs(x))),
}


def _defined(op_type):
    from keel.program.ops import registry
    return registry.lookup(op_type) is not None


COMPLEX_OPS = sorted(t for t in COMPLEX_UNARY if _defined(t))


def test_complex_ops_are_ones_paddle_runs_on_complex():
    for op_type in COMPLEX_UNARY:
        assert "complex128" in PADDLE_DTYPES[op_type]["forward"], op_type


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
@pytest.mark.parametrize("op_type", COMPLEX_OPS)
def test_forward_in_complex(op_type, dtype):
    x = X.astype(dtype)
    got = run(op_type, {"X": x})["Out"]
    want = REFERENCE[op_type](X)
    expect = np.float32 if dtype == np.complex64 else np.float64
    assert got.dtype == (np.dtype(expect) if op_type == "abs" else np.dtype(dtype))
    tol = 2e-6 if dtype == np.complex64 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_issue_examples():
    # acos(x) of the issue had lost its imaginary part (0.8598+0j)
    got = run("acos", {"X": np.array([0.3 + 0.8j])})["Out"]
    np.testing.assert_allclose(got, np.arccos(np.array([0.3 + 0.8j])), rtol=1e-14)
    assert abs(got[0].imag) > 0.5
    got = run("exp", {"X": np.array([1.4878 - 1.9819j])})["Out"]
    np.testing.assert_allclose(got, [np.exp(1.4878 - 1.9819j)], rtol=1e-14)


REAL_ONLY = sorted(t for t, d in PADDLE_DTYPES.items()
                   if _defined(t) and t not in COMPLEX_UNARY
                   and t in {"relu", "relu6", "gelu", "leaky_relu", "elu", "selu", "celu", "mish",
                             "softplus", "logsigmoid", "hard_swish", "hard_sigmoid", "swish",
                             "tanh_shrink", "thresholded_relu", "rsqrt", "erf", "floor", "ceil",
                             "round", "sign", "brelu", "softmax", "log_softmax"})


@pytest.mark.parametrize("op_type", REAL_ONLY)
def test_real_only_ops_refuse_complex_when_built(op_type):
    with pytest.raises(DTypeError, match=f"{op_type}: .*complex128"):
        run(op_type, {"X": X})


# (round's and sign's gradients are zero by PaddlePaddle's definition, not their derivative:
# test_paddle_values_across_branches; softsign's is PaddlePaddle's own formula)
@pytest.mark.parametrize("op_type", [t for t in COMPLEX_OPS if t not in ("softsign", "round", "sign")])
def test_unary_gradients_by_finite_differences(op_type):
    # acosh: where Re(x) > 0 (see test_acosh_gradient_is_paddles for the rest)
    x = np.abs(X.real) + 1j * X.imag if op_type == "acosh" else X
    check_grads(op_type, {"X": x}, ["X"], rtol=1e-6, atol=1e-8)


def test_acosh_gradient_is_paddles():
    # PaddlePaddle 3.3.1 evaluates dout / sqrt(x^2 - 1) at conj(x), which is the conjugate
    # derivative of the principal arccosh only where Re(x) > 0; its values, for dout = 1:
    x = np.array([0.3 + 0.8j, -0.5 - 0.2j, 0.7 - 0.4j, -0.25 + 0.6j])
    got = grads("acosh", {"X": x}, {"Out": np.ones(4, complex)})["X"]
    np.testing.assert_allclose(got, [0.11743564 + 0.7762059j, 0.1369844 + 1.09924729j,
                                     0.36503982 - 1.00595358j, 0.09823711 - 0.86096j], rtol=1e-7)


def test_softsign_gradient_is_paddles():
    # PaddlePaddle 3.3.1's values (paddle.grad of F.softsign at these x with these output
    # gradients): not the conjugate convention, see kernels/activation.py _softsign_grad.
    x = np.array([0.3 + 0.8j, -0.5 - 0.2j])
    dout = np.array([0.6 - 0.3j, -0.2 + 0.5j])
    got = grads("softsign", {"X": x}, {"Out": dout})["X"]
    np.testing.assert_allclose(got, [0.28067005 - 0.20159884j, -0.05154468 + 0.24261518j], rtol=1e-7)


# PaddlePaddle 3.3.1's outputs and gradients (paddle.grad with output gradients DOUT) of the
# ops it computes in complex whose formulas compare or round, at points on every side of
# their branches: hard_swish's clip at Re(x + 3) 0 and 6, softplus's threshold 20,
# logsigmoid's Re(x) > 0, round's halves (to even: -0.5 -> -0, 2.5 -> 2).
XS = np.array([0.3 + 0.8j, -0.5 - 0.2j, -3.5 + 0.6j, 4.0 + 1j, -2.6 + 2.5j, 25 + 1j, 1.5 - 0.5j])
DOUT = np.array([0.6 - 0.3j, -0.2 + 0.5j, 0.5 + 0.5j, 1 - 1j, 0.3 + 0.1j, 1 + 1j, -1 + 0.2j])
PADDLE_VALUES = {
    "hard_swish": ([0.058333333 + 0.48j, -0.215 - 0.066666667j, 0, 4 + 1j, -1.215 - 0.916666667j, 25 + 1j,
                    1.083333333 - 0.5j],
                   [0.28 - 0.34j, -0.1 + 0.153333333j, 0, 1 - 1j, -0.026666667 - 0.286666667j, 1 + 1j,
                    -1.033333333 + 0.033333333j]),
    "softplus": ([0.7741035414 + 0.462864646j, 0.4693704856 - 0.07543111j, 0.0247558258 + 0.01663457j,
                  4.009963704 + 0.984740137j, -0.06023202848 + 0.047227854j, 25 + 1j, 1.682813425 - 0.410780282j],
                 [0.290673424 - 0.299757807j, -0.098841293 + 0.178765343j, 0.020406977 + 0.004179903j,
                  0.974862432 - 1.005078419j, -0.013255485 - 0.021132248j, 1 + 1j, -0.844453551 + 0.091707461j]),
    "logsigmoid": ([-0.4741035 + 0.3371353537j, -0.9693704662 - 0.124568885j, -3.524755835 + 0.5833654393j,
                    -0.009963773419 + 0.01525987084j, -2.539767817 + 2.452772145j,
                    -7.503775379e-12 + 1.168630131e-11j, -0.1828134508 - 0.08921973315j],
                   [0.3093265757 - 2.421929709e-04j, -0.1011587068 + 0.3212346571j, 0.4795930225 + 0.4958200967j,
                    0.02513756828 + 0.005078418812j, 0.3132554855 + 0.121132248j,
                    -4.182613688e-12 + 1.918998894e-11j, -0.1555464491 + 0.1082925391j]),
    "round": ([1j, 0, -4 + 1j, 4 + 1j, -3 + 2j, 25 + 1j, 2], [0] * 7),
    "sign": ([0.351123442 + 0.936329178j, -0.928476691 - 0.371390676j, -0.985622255 + 0.168963815j,
              0.9701425 + 0.242535625j, -0.720833065 + 0.693108716j, 0.999200959 + 0.039968038j,
              0.948683298 - 0.316227766j], [0] * 7),
}


@pytest.mark.parametrize("op_type", sorted(PADDLE_VALUES))
def test_paddle_values_across_branches(op_type):
    out, dx = PADDLE_VALUES[op_type]
    # (PaddlePaddle's complex exp and log are within 2e-7 of numpy's, the correctly rounded ones)
    np.testing.assert_allclose(run(op_type, {"X": XS})["Out"], out, rtol=2e-7, atol=1e-9)
    np.testing.assert_allclose(grads(op_type, {"X": XS}, {"Out": DOUT})["X"], dx, rtol=2e-7, atol=1e-9)
    np.testing.assert_allclose(run(op_type, {"X": XS})["Out"], REFERENCE[op_type](XS), rtol=1e-12, atol=1e-15)


def test_complex_round_and_sign_details():
    got = run("round", {"X": np.array([-0.5 - 2.5j, 0.35 + 0.84j, -1.25 + 2.5j])}, {"decimals": 1})["Out"]
    np.testing.assert_array_equal(got, [-0.5 - 2.5j, 0.4 + 0.8j, -1.2 + 2.5j])   # PaddlePaddle 3.3.1's
    got = run("round", {"X": np.array([15 + 25j, -5 + 35j])}, {"decimals": -1})["Out"]
    np.testing.assert_array_equal(got, [20 + 20j, 0 + 40j])
    assert np.signbit(run("round", {"X": np.array([-0.5 - 0.2j])})["Out"].real[0])  # -0, as std::rint
    np.testing.assert_array_equal(run("sign", {"X": np.array([0j, 3 + 4j], np.complex64)})["Out"],
                                  np.array([0, 0.6 + 0.8j], np.complex64))


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_frobenius_norm_of_complex_is_real(dtype):
    x = np.concatenate([X, Y], axis=0).astype(dtype)        # [4, 2]
    for attrs, axis in [({"dim": [0], "keep_dim": False, "reduce_all": False}, 0),
                        ({"dim": [1], "keep_dim": True, "reduce_all": False}, 1),
                        ({"dim": [0], "keep_dim": False, "reduce_all": True}, None)]:
        got = run("frobenius_norm", {"X": x}, attrs)["Out"]
        assert got.dtype == (np.float32 if dtype == np.complex64 else np.float64)
        want = np.sqrt(np.sum(np.abs(x.astype(np.complex128)) ** 2, axis=axis, keepdims=attrs["keep_dim"]))
        np.testing.assert_allclose(got, want, rtol=2e-6 if dtype == np.complex64 else 1e-14)
        if dtype == np.complex128:
            check_grads("frobenius_norm", {"X": x}, ["X"], attrs, rtol=1e-6, atol=1e-9)
    # PaddlePaddle 3.3.1: paddle.linalg.norm(x, "fro", axis=[0]) and its gradient for an
    # output gradient of 0.6 (no conjugate: dL/dRe + i dL/dIm of a real output)
    x = np.insert(XS, 2, 0.7 - 0.4j)
    attrs = {"dim": [0], "keep_dim": False, "reduce_all": False}
    np.testing.assert_allclose(run("frobenius_norm", {"X": x}, attrs)["Out"], 25.93819577380046, rtol=1e-15)
    g = grads("frobenius_norm", {"X": x}, {"Out": np.array(0.6)}, attrs)["X"]
    np.testing.assert_allclose(g[:3], [0.00693957 + 0.01850553j, -0.01156595 - 0.00462638j,
                                       0.01619234 - 0.00925276j], rtol=1e-6)


Y = np.array([[1.2 - 0.4j, 0.7 + 0.9j], [-0.3 + 0.2j, 0.5 - 1.1j]])


@pytest.mark.parametrize("op_type", ["elementwise_add", "elementwise_sub", "elementwise_mul",
                                     "elementwise_div"])
def test_elementwise_complex_gradients(op_type):
    check_grads(op_type, {"X": X, "Y": Y}, ["X", "Y"])
    check_grads(op_type, {"X": X, "Y": Y[0]}, ["X", "Y"])        # broadcast Y


@pytest.mark.parametrize("op_type", ["elementwise_add", "elementwise_mul", "elementwise_div"])
@pytest.mark.parametrize("real", [np.float32, np.float64])
def test_real_and_complex_operands_promote(op_type, real):
    x = X.real.astype(real)
    out = run(op_type, {"X": x, "Y": Y})["Out"]
    assert out.dtype == np.complex128
    ref = {"elementwise_add": np.add, "elementwise_mul": np.multiply, "elementwise_div": np.divide}[op_type]
    np.testing.assert_allclose(out, ref(x.astype(np.float64), Y), rtol=1e-6)
    out = run(op_type, {"X": X.astype(np.complex64), "Y": x})["Out"]
    assert out.dtype == (np.complex64 if real == np.float32 else np.complex128)


@pytest.mark.parametrize("op_type", ["elementwise_add", "elementwise_mul", "elementwise_div"])
def test_real_operand_of_complex_op_gets_real_gradient(op_type):
    # PaddlePaddle: the real operand's gradient is the real part of the promoted one
    check_grads(op_type, {"X": X.real.copy(), "Y": Y}, ["X", "Y"])


@pytest.mark.parametrize("trans_x,trans_y", [(False, False), (True, False), (False, True), (True, True)])
def test_matmul_v2_complex_gradients(trans_x, trans_y):
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 4)) + 1j * rng.normal(size=(2, 3, 4))
    y = rng.normal(size=(4, 3)) + 1j * rng.normal(size=(4, 3))
    x = np.swapaxes(x, -1, -2).copy() if trans_x else x
    y = y.T.copy() if trans_y else y
    check_grads("matmul_v2", {"X": x, "Y": y}, ["X", "Y"], {"trans_x": trans_x, "trans_y": trans_y})
    check_grads("matmul_v2", {"X": x.real.copy(), "Y": y}, ["X", "Y"], {"trans_x": trans_x, "trans_y": trans_y})


def test_matmul_v2_issue_values():
    # PaddlePaddle: dX = dOut conj(Y)^T, dY = conj(X)^T dOut
    x = np.array([[0.3 + 0.8j, -0.5 - 0.2j]])
    y = np.array([[1.2 - 0.4j], [0.7 + 0.9j]])
    g = grads("matmul_v2", {"X": x, "Y": y}, {"Out": np.array([[0.6 - 0.3j]])})
    np.testing.assert_allclose(g["X"], [[0.84 - 0.12j, 0.15 - 0.75j]], rtol=1e-12)
    np.testing.assert_allclose(g["Y"], [[-0.06 - 0.57j], [-0.24 + 0.27j]], rtol=1e-12)


@pytest.mark.paddle
@pytest.mark.parametrize("op_type", ["sigmoid", "tanh", "silu", "softsign", "reciprocal", "square",
                                     "abs", "acos", "exp", "sqrt"])
def test_unary_gradients_match_paddle(op_type):
    paddle = pytest.importorskip("paddle")
    x = np.array([0.3 + 0.8j, -0.5 - 0.2j])
    dout = np.array([0.6 - 0.3j, -0.2 + 0.5j])
    dout = dout.real.copy() if op_type == "abs" else dout
    fn = getattr(paddle.nn.functional, op_type, None) or getattr(paddle, op_type)
    t = paddle.to_tensor(x, stop_gradient=False)
    (want,) = paddle.grad([fn(t)], [t], [paddle.to_tensor(dout)])
    got = grads(op_type, {"X": x}, {"Out": dout})["X"]
    # PaddlePaddle's complex exp (so sigmoid and silu) is within 6e-8 of cmath's, Keel's numpy's
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-7, atol=1e-14)
