"""Gradient checks: activations and unary math (program/ops/activation.py), plus direct
kernel tests for what finite differences cannot see (the side PaddlePaddle picks at a kink,
dtypes) and the gradient ops' signatures against PaddlePaddle's."""
import json
import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from gradcheck import Case, away_from, rand, run_case
from keel.kernels import registry as kernels

_POS = dict(low=0.2, high=3.0)


def _x(*shape, low=-3.0, high=3.0, kinks=(0.0,), seed=None):
    """Uniform values kept away from the kinks of the function under test."""
    return away_from(rand(*shape, low=low, high=high, seed=seed), kinks, margin=0.05)


CASES = [
    Case("relu", {"X": _x(2, 3, 4)}),
    Case("relu6", {"X": _x(3, 8, low=-2, high=8, kinks=(0, 6))}, {"threshold": 6.0}),
    Case("leaky_relu", {"X": _x(3, 4)}, {"alpha": 0.1}),
    Case("leaky_relu", {"X": _x(3, 4)}, {"alpha": 1.5}, id="leaky_relu alpha>1"),
    Case("gelu", {"X": _x(3, 5)}, {"approximate": False}, id="gelu exact"),
    Case("gelu", {"X": _x(3, 5)}, {"approximate": True}, id="gelu tanh"),
    Case("tanh", {"X": _x(3, 4)}),
    Case("sigmoid", {"X": _x(3, 4, low=-6, high=6)}),
    Case("hard_swish", {"X": _x(4, 6, low=-5, high=5, kinks=(-3, 3))},
         {"threshold": 6.0, "scale": 6.0, "offset": 3.0}),
    Case("hard_swish", {"X": _x(4, 6, low=-4, high=4, kinks=(-1, 1))},
         {"threshold": 2.0, "scale": 3.0, "offset": 1.0}, id="hard_swish other attrs"),
    Case("hard_sigmoid", {"X": _x(4, 6, low=-4, high=4, kinks=(-2.5, 2.5))},
         {"slope": 0.2, "offset": 0.5}),
    Case("swish", {"X": _x(3, 4)}, {"beta": 1.0}),
    Case("swish", {"X": _x(3, 4)}, {"beta": 1.7}, id="swish beta"),
    Case("silu", {"X": _x(3, 4, low=-6, high=6)}),
    Case("mish", {"X": _x(3, 4, low=-5, high=5)}, {"threshold": 20.0}),
    Case("elu", {"X": _x(3, 4)}, {"alpha": 1.0}),
    Case("elu", {"X": _x(3, 4)}, {"alpha": 0.5}, id="elu alpha=0.5"),
    Case("elu", {"X": _x(3, 4)}, {"alpha": -0.5}, id="elu negative alpha"),
    Case("selu", {"X": _x(3, 4)}),
    Case("celu", {"X": _x(3, 4)}, {"alpha": 1.0}),
    Case("celu", {"X": _x(3, 4)}, {"alpha": 2.0}, id="celu alpha=2"),
    Case("celu", {"X": _x(3, 4, low=-1.5)}, {"alpha": -2.0}, id="celu negative alpha"),
    Case("softplus", {"X": _x(3, 4)}, {"beta": 1.0, "threshold": 20.0}),
    # beta * x > threshold takes the linear branch (x > 2.5 here)
    Case("softplus", {"X": _x(4, 5, low=-3, high=4, kinks=(2.5,))}, {"beta": 2.0, "threshold": 5.0},
         id="softplus linear branch"),
    Case("softsign", {"X": _x(3, 4)}),
    Case("logsigmoid", {"X": _x(3, 4, low=-6, high=6)}),
    Case("tanh_shrink", {"X": _x(3, 4)}),
    Case("thresholded_relu", {"X": _x(3, 4, kinks=(1.0,))}, {"threshold": 1.0, "value": 0.0}),
    Case("thresholded_relu", {"X": _x(3, 4, kinks=(-0.5,))}, {"threshold": -0.5, "value": 0.25},
         id="thresholded_relu value"),
    Case("exp", {"X": rand(3, 4)}),
    Case("expm1", {"X": rand(3, 4)}),
    Case("log", {"X": rand(3, 4, **_POS)}),
    Case("log2", {"X": rand(3, 4, **_POS)}),
    Case("log10", {"X": rand(3, 4, **_POS)}),
    Case("log1p", {"X": rand(3, 4, low=-0.8, high=2.0)}),
    Case("sqrt", {"X": rand(3, 4, **_POS)}),
    Case("rsqrt", {"X": rand(3, 4, **_POS)}),
    Case("abs", {"X": _x(3, 4)}),
    Case("square", {"X": rand(3, 4)}),
    Case("reciprocal", {"X": np.concatenate([rand(6, **_POS), -rand(6, **_POS)])}),
    Case("floor", {"X": _x(3, 4, kinks=(-3, -2, -1, 0, 1, 2, 3))}),
    Case("ceil", {"X": _x(3, 4, kinks=(-3, -2, -1, 0, 1, 2, 3))}),
    Case("round", {"X": _x(3, 4, kinks=(-2.5, -1.5, -0.5, 0.5, 1.5, 2.5))}),
    Case("round", {"X": np.round(rand(3, 4, low=-3, high=3), 1) + 0.02}, {"decimals": 1},
         id="round decimals=1"),
    Case("sign", {"X": _x(3, 4)}),
    Case("sin", {"X": rand(3, 4, low=-4, high=4)}),
    Case("cos", {"X": rand(3, 4, low=-4, high=4)}),
    Case("erf", {"X": rand(3, 4, low=-2.5, high=2.5)}),
    Case("softmax", {"X": rand(2, 3, 4)}, {"axis": -1}, id="softmax axis=-1"),
    Case("softmax", {"X": rand(2, 3, 4)}, {"axis": 1}, id="softmax axis=1"),
    Case("softmax", {"X": rand(2, 3, 4)}, {"axis": 0}, id="softmax axis=0"),
    Case("softmax", {"X": rand(5)}, {"axis": 0}, id="softmax 1-d"),
    Case("log_softmax", {"X": rand(2, 3, 4)}, {"axis": -1}, id="log_softmax axis=-1"),
    Case("log_softmax", {"X": rand(2, 3, 4)}, {"axis": 1}, id="log_softmax axis=1"),
    Case("log_softmax", {"X": rand(4, 3)}, {"axis": -2}, id="log_softmax axis=-2"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


# -- kernels at the kinks: PaddlePaddle's choices ----------------------------------------------


def _grad(op_type, *arrays, **attrs):
    k = kernels.get(op_type + "_grad")
    return k.fn(np, *arrays, **attrs)


def test_relu_family_at_the_kinks():
    dout = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    # relu_grad reads Out: Out == 0 gets nothing
    np.testing.assert_array_equal(_grad("relu", np.array([0.0, 0.0, 1.0, 0.0, 2.0]), dout),
                                  [0, 0, 3, 0, 5])
    # relu6 reads Out: Out == 0 and Out == threshold get nothing
    np.testing.assert_array_equal(_grad("relu6", np.array([0.0, 6.0, 3.0, 5.999, 6.0]), dout,
                                        threshold=6.0), [0, 0, 3, 4, 0])
    # leaky_relu: x == 0 counts as positive
    np.testing.assert_allclose(_grad("leaky_relu", np.array([0.0, -0.0, -1.0, 1.0, -2.0]), dout,
                                     alpha=0.1), [1, 2, 0.3, 4, 0.5])
    # thresholded_relu: x == threshold gets nothing
    np.testing.assert_array_equal(_grad("thresholded_relu", np.array([1.0, 1.5, 0.5, 1.0, 3.0]),
                                        dout, threshold=1.0), [0, 2, 0, 0, 5])
    # abs: zero at zero
    np.testing.assert_array_equal(_grad("abs", np.array([0.0, -1.0, 2.0, -0.0, 0.5]), dout),
                                  [0, -2, 3, 0, 5])


def test_hard_activations_at_the_kinks():
    dout = np.ones(5)
    # hard_swish (threshold 6, scale 6, offset 3): x + 3 <= 0 -> 0, x + 3 >= 6 -> 1,
    # between: (2x + 3) / 6
    got = _grad("hard_swish", np.array([-3.0, 3.0, 0.0, -4.0, 1.0]), dout,
                threshold=6.0, scale=6.0, offset=3.0)
    np.testing.assert_allclose(got, [0, 1, 0.5, 0, 5 / 6])
    # hard_sigmoid reads Out: 0 and 1 are saturated
    got = _grad("hard_sigmoid", np.array([0.0, 1.0, 0.5, 0.2, 1.0]), dout, slope=0.2)
    np.testing.assert_allclose(got, [0, 0, 0.2, 0.2, 0])


def test_elu_family_at_zero():
    dout = np.array([2.0, 2.0, 2.0])
    x = np.array([0.0, 1.0, -1.0])
    # alpha > 0 reads Out: out <= 0 -> dout * (out + alpha), so x == 0 gets alpha
    out = np.where(x > 0, x, 0.5 * np.expm1(x))
    np.testing.assert_allclose(_grad("elu", x, out, dout, alpha=0.5), [1.0, 2.0, 2 * 0.5 * np.exp(-1)])
    # alpha <= 0: x > 0 ? dout : dout * alpha * exp(x)
    out = np.where(x > 0, x, -0.5 * np.expm1(x))
    np.testing.assert_allclose(_grad("elu", x, out, dout, alpha=-0.5), [-1.0, 2.0, -np.exp(-1)])
    # celu: x == 0 takes the exponential side (exp(0) = 1, the same value)
    np.testing.assert_allclose(_grad("celu", x, dout, alpha=2.0), [2.0, 2.0, 2 * np.exp(-0.5)])
    # selu reads Out: out == 0 gets dout * scale * alpha
    s, a = 1.0507009873554805, 1.6732632423543772
    got = _grad("selu", np.array([0.0, 1.0, -1.0]), dout, scale=s, alpha=a)
    la = float(np.float32(s) * np.float32(a))
    np.testing.assert_allclose(got, [2 * la, 2 * s, 2 * (la - 1)])


def test_mish_and_softplus_above_threshold():
    x = np.array([21.0, 25.0, 3.0])
    dout = np.ones(3)
    # Paddle's mish_grad: sp = x above the threshold, dx = t + x (1 - t^2)(1 - exp(-sp))
    t = np.tanh(x)
    want = t + x * (1 - t * t) * (1 - np.exp(-x))
    sp3 = np.log1p(np.exp(3.0))
    t3 = np.tanh(sp3)
    want[2] = t3 + 3.0 * (1 - t3 * t3) * (1 - np.exp(-sp3))
    np.testing.assert_allclose(_grad("mish", x, dout, threshold=20.0), want, rtol=1e-12)
    # softplus: beta * x > threshold -> dout, else dout * sigmoid(beta x)
    got = _grad("softplus", np.array([2.6, 2.4]), np.ones(2), beta=2.0, threshold=5.0)
    np.testing.assert_allclose(got, [1.0, 1 / (1 + np.exp(-4.8))])


def test_gelu_grad_formulas():
    x = np.linspace(-4, 4, 33)
    dout = np.linspace(0.5, 1.5, 33)
    phi = 0.5 * (1 + np.array([math.erf(v / math.sqrt(2)) for v in x]))
    pdf = np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(_grad("gelu", x, dout, approximate=False), dout * (phi + x * pdf),
                               rtol=1e-13, atol=1e-15)
    k = math.sqrt(2 / math.pi)
    t = np.tanh(k * (x + 0.044715 * x ** 3))
    want = 0.5 * dout * (1 + t + (x - x * t * t) * (k + 3 * k * 0.044715 * x * x))
    np.testing.assert_allclose(_grad("gelu", x, dout, approximate=True), want, rtol=1e-13, atol=1e-15)


def test_zero_gradients():
    dout = np.arange(6.0).reshape(2, 3)
    for op in ("floor", "ceil", "round"):
        got = _grad(op, dout)
        assert got.shape == dout.shape and not got.any()


_CASES_BY_DTYPE = [
    ("relu", ["Out"], {}), ("relu6", ["Out"], {"threshold": 6.0}), ("tanh", ["Out"], {}),
    ("sigmoid", ["Out"], {}), ("gelu", ["X"], {"approximate": False}),
    ("gelu", ["X"], {"approximate": True}), ("silu", ["X", "Out"], {}), ("exp", ["Out"], {}),
    ("softmax", ["Out"], {"axis": -1}), ("log_softmax", ["Out"], {"axis": -1}),
    ("leaky_relu", ["X"], {"alpha": 0.02}), ("elu", ["X", "Out"], {"alpha": 1.0}),
]


@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("op_type,reads,attrs", _CASES_BY_DTYPE, ids=lambda v: str(v))
def test_gradient_keeps_the_dtype(op_type, reads, attrs, dtype):
    from keel.executor.kernel_call import call_kernel
    x = rand(3, 4, low=0.1, high=0.9).astype(dtype)
    out = call_kernel(op_type, {"X": x}, attrs)["Out"]
    dout = np.ones_like(out)
    ins = {"X": x, "Out": out, "Out@GRAD": dout}
    got = call_kernel(op_type + "_grad", {k: ins[k] for k in reads + ["Out@GRAD"]}, attrs)["X@GRAD"]
    want = call_kernel(op_type + "_grad", {k: ins[k].astype(np.float64) for k in reads + ["Out@GRAD"]},
                       attrs)["X@GRAD"]
    assert got.dtype == np.dtype(dtype) and got.shape == x.shape
    np.testing.assert_allclose(got, want, rtol=5e-3 if dtype == "float16" else 1e-5, atol=1e-3)


def test_gradient_kernels_do_not_mutate_inputs():
    from keel.executor.kernel_call import call_kernel
    x = rand(3, 4)
    for op_type, reads, attrs in _CASES_BY_DTYPE:
        out = call_kernel(op_type, {"X": x}, attrs)["Out"]
        ins = {"X": x.copy(), "Out": out.copy(), "Out@GRAD": rand(3, 4, seed=5)}
        before = {k: v.copy() for k, v in ins.items()}
        call_kernel(op_type + "_grad", {k: ins[k] for k in reads + ["Out@GRAD"]}, attrs)
        for k in ins:
            np.testing.assert_array_equal(ins[k], before[k], err_msg=f"{op_type}_grad changed {k}")


# -- the gradient ops PaddlePaddle writes --------------------------------------------------------

SIGNATURES = Path(__file__).resolve().parent / "fixtures" / "paddle_grad_signatures.json"
_OPS = sorted({c.op_type for c in CASES})


@dataclass(frozen=True)
class Var:
    """A forward input for `backward_roles`: float32 with a wanted gradient by default."""
    shape: tuple
    dtype: str = "float32"
    grad: bool = True


def backward_roles(op_type, inputs, attrs=None, outputs=None):
    """Build op_type on `inputs` (slot -> Var, or a list of Vars for a duplicable slot),
    take the gradient of its first output w.r.t. the inputs with `grad`, and describe the
    gradient ops appended for it in the fixture's terms ("in:X", "out:Out", "grad:out:Out",
    "grad:in:X", "empty")."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()), pg.unique_name.guard():
        block = main.global_block()
        roles, ins, wanted = {}, {}, []
        for slot, spec in inputs.items():
            names = []
            for i, v in enumerate(spec if isinstance(spec, list) else [spec]):
                name = f"{slot.lower()}{i}"
                var = block.create_var(name, list(v.shape), v.dtype, stop_gradient=not v.grad)
                if v.grad:
                    wanted.append(var)
                idx = f"[{i}]" if isinstance(spec, list) else ""
                roles[name] = f"in:{slot}{idx}"
                roles[name + "@GRAD"] = f"grad:in:{slot}{idx}"
                names.append(name)
            ins[slot] = names
        outs = {}
        for slot, dtype in (outputs or {"Out": "float32"}).items():
            name = f"{slot.lower()}_out"
            block.create_var(name, dtype=dtype)
            roles[name] = f"out:{slot}"
            roles[name + "@GRAD"] = f"grad:out:{slot}"
            outs[slot] = [name]
        block.append_op(op_type, ins, outs, attrs or {})
        first = block.var(next(iter(outs.values()))[0])
        n_before = len(block.ops)
        pg.gradients([first], wanted)
        grad_ops = block.ops[n_before + 1:]  # after the seed

    def describe(names):
        if not names:
            return "empty"
        rs = [roles.get(n, f"other:{n}") for n in names]
        return rs[0] if len(rs) == 1 and not rs[0].endswith("]") else rs

    return [{"type": op.type,
             "inputs": {s: describe(n) for s, n in op.inputs.items()},
             "outputs": {s: describe(n) for s, n in op.outputs.items()},
             "attrs": op.attrs} for op in grad_ops]


def assert_matches_paddle(got, entry):
    """`got` (backward_roles) has the grad ops of a fixture entry: types, slots with their
    roles, and the values of the attributes Paddle sets or changes on them."""
    assert [{k: g[k] for k in ("type", "inputs", "outputs")} for g in got] == \
        [{k: g[k] for k in ("type", "inputs", "outputs")} for g in entry["grad_ops"]]
    for mine, theirs in zip(got, entry["grad_ops"]):
        for name, value in theirs.get("attr_values", {}).items():
            assert mine["attrs"][name] == value, name
        for name, (_, value) in theirs.get("changed_attrs", {}).items():
            assert mine["attrs"][name] == value, name


def paddle_entry(op_type, variant=None):
    entry = json.loads(SIGNATURES.read_text())[op_type]
    return entry["variants"][variant] if variant else entry


@pytest.mark.skipif(not SIGNATURES.exists(), reason="no PaddlePaddle grad signature fixture")
@pytest.mark.parametrize("op_type", _OPS)
def test_grad_op_signature_matches_paddle(op_type):
    assert_matches_paddle(backward_roles(op_type, {"X": Var((2, 3))}), paddle_entry(op_type))
