"""Activation and math kernels (kernels/activation.py, kernels/math.py) against independent
float64 references: Python's `math` module element by element, explicit loops for
reductions, scans and matrix products. Awkward attributes are covered (num_col_dims > 1,
1-D and broadcast matmul operands, negative and empty reduce dims, exclusive+reverse
cumsum, ties in top_k, halfway rounding, every cast dtype, axis-broadcast comparisons) as
is dtype preservation. Kernels run through `call_kernel`; attributes the test does not set
take PaddlePaddle's defaults from the op-signature snapshot, so these tests do not depend
on the op definitions being written."""
import bisect
import decimal
import fractions
import itertools
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest

from keel import kernels  # noqa: F401  (registry.all_kernels() below imports every family)
from keel.executor.kernel_call import call_kernel
from keel.kernels import registry as kernel_registry
from keel.program.ops import registry as op_registry

SNAPSHOT = json.loads((Path(__file__).parent / "fixtures" / "paddle_op_signatures.json").read_text())
OWN_MODULES = ("keel.kernels.activation", "keel.kernels.math")
OWN_KERNELS = {t: k for t, k in kernel_registry.all_kernels().items()
               if k.fn.__module__ in OWN_MODULES and not t.endswith("_grad")}

# PaddlePaddle's defaults for the runtime-extra attributes some kernels still honour.
EXTRA_DEFAULTS = {("relu6", "threshold"): 6.0, ("swish", "beta"): 1.0}


def run(op_type, inputs, **attrs):
    """Run one kernel; unset attributes get PaddlePaddle's defaults. Returns the outputs dict."""
    kdef = kernel_registry.get(op_type)
    full = {}
    for name in kdef.attrs:
        if name in attrs:
            full[name] = attrs[name]
        elif (op_type, name) in EXTRA_DEFAULTS:
            full[name] = EXTRA_DEFAULTS[op_type, name]
        elif "default" in SNAPSHOT[op_type]["attrs"].get(name, {}):
            full[name] = SNAPSHOT[op_type]["attrs"][name]["default"]
    unknown = set(attrs) - set(kdef.attrs) - set(SNAPSHOT[op_type]["attrs"])
    assert not unknown, f"test passes attributes {op_type} does not have: {unknown}"
    return call_kernel(op_type, inputs, full)


def out(op_type, inputs, **attrs):
    return run(op_type, inputs, **attrs)["Out"]


def tol(dtype):
    return {np.float16: dict(rtol=2e-3, atol=2e-3), np.float32: dict(rtol=1e-5, atol=1e-6),
            np.float64: dict(rtol=1e-6, atol=1e-12)}[np.dtype(dtype).type]


def elementwise_ref(fn, x):
    """fn applied to each element as a Python float, in float64."""
    return np.array([fn(float(v)) for v in np.asarray(x, dtype=np.float64).reshape(-1)]).reshape(np.shape(x))


# ---------------------------------------------------------------------------------------------
# Registry consistency
# ---------------------------------------------------------------------------------------------

EXPECTED_KERNELS = set("""
relu relu6 leaky_relu gelu tanh sigmoid hard_swish hard_sigmoid swish silu mish elu selu celu softplus
softsign logsigmoid tanh_shrink thresholded_relu exp expm1 log log2 log10 log1p sqrt rsqrt abs square
reciprocal floor ceil round sign sin cos erf softmax log_softmax
scale clip cast pow sum mean reduce_sum reduce_mean reduce_max reduce_min reduce_prod reduce_all reduce_any
matmul matmul_v2 mul bmm fc equal not_equal less_than less_equal greater_than greater_equal logical_and
logical_or logical_xor logical_not cumsum arg_max arg_min top_k_v2 where p_norm isfinite_v2 isinf_v2
isnan_v2 increment squared_l2_norm l1_norm
acos asin atan brelu stanh
tan sinh cosh asinh acosh atanh hard_shrink softshrink frobenius_norm
""".split())


def test_kernels_are_registered():
    assert set(OWN_KERNELS) == EXPECTED_KERNELS


@pytest.mark.parametrize("op_type", sorted(OWN_KERNELS))
def test_kernel_is_a_paddle_op_with_paddles_slots(op_type):
    kdef, ref = OWN_KERNELS[op_type], SNAPSHOT[op_type]
    assert set(kdef.inputs) <= set(ref["inputs"]), "input slots Paddle's op does not have"
    assert set(kdef.outputs) <= set(ref["outputs"]), "output slots Paddle's op does not have"
    paddle_attrs = set(ref["attrs"]) | set(ref["extra_attrs"])
    assert set(kdef.attrs) <= paddle_attrs, "attributes Paddle's op does not have"


@pytest.mark.parametrize("op_type", sorted(OWN_KERNELS))
def test_kernel_matches_op_definition(op_type):
    opdef = op_registry.lookup(op_type)
    if opdef is None:
        pytest.skip(f"op {op_type!r} is not defined in program/ops yet")
    kdef = OWN_KERNELS[op_type]
    assert set(kdef.inputs) <= set(opdef.input_slots), f"kernel {kdef.inputs}, op {list(opdef.input_slots)}"
    assert set(kdef.outputs) <= set(opdef.output_slots), f"kernel {kdef.outputs}, op {list(opdef.output_slots)}"
    ref = SNAPSHOT[op_type]
    for name in kdef.attrs:
        spec = opdef.attr_spec(name)
        assert spec is not None, f"the op definition lacks attribute {name!r} the kernel reads"
        if "default" in ref["attrs"].get(name, {}) or name in ref["extra_attrs"]:
            assert not spec.required, f"{name!r} has a default in PaddlePaddle, so a kernel may rely on it"


# ---------------------------------------------------------------------------------------------
# Unary activations and math
# ---------------------------------------------------------------------------------------------

def _sigmoid(v):
    return 1 / (1 + math.exp(-v))


def _softplus(v):
    return math.log1p(math.exp(v))


GENERAL = np.concatenate([np.linspace(-6, 6, 49), [-2.5, -0.5, -1e-3, 0.0, 1e-3, 0.5, 2.5, 7.0, 21.0]])
POSITIVE = np.concatenate([np.linspace(0.05, 8, 40), [1e-3, 1.0, 100.0]])

# op type, attrs, element reference, input values
UNARY = [
    ("relu", {}, lambda v: max(v, 0.0), GENERAL),
    ("relu6", {}, lambda v: min(max(v, 0.0), 6.0), GENERAL),
    ("relu6", {"threshold": 3.0}, lambda v: min(max(v, 0.0), 3.0), GENERAL),
    ("leaky_relu", {"alpha": 0.1}, lambda v: v if v > 0 else 0.1 * v, GENERAL),
    ("leaky_relu", {"alpha": 1.5}, lambda v: v if v > 0 else 1.5 * v, GENERAL),
    ("gelu", {"approximate": False}, lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))), GENERAL),
    ("gelu", {"approximate": True},
     lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v ** 3))), GENERAL),
    ("tanh", {}, math.tanh, GENERAL),
    ("sigmoid", {}, _sigmoid, GENERAL),
    ("hard_swish", {}, lambda v: v * min(max(v + 3, 0), 6) / 6, GENERAL),
    ("hard_swish", {"threshold": 4.0, "scale": 5.0, "offset": 1.0},
     lambda v: v * min(max(v + 1, 0), 4) / 5, GENERAL),
    ("hard_sigmoid", {}, lambda v: min(max(0.2 * v + 0.5, 0), 1), GENERAL),
    ("hard_sigmoid", {"slope": 0.1, "offset": 0.3}, lambda v: min(max(0.1 * v + 0.3, 0), 1), GENERAL),
    ("swish", {}, lambda v: v * _sigmoid(v), GENERAL),
    ("swish", {"beta": 2.0}, lambda v: v * _sigmoid(2 * v), GENERAL),
    ("silu", {}, lambda v: v / (1 + math.exp(-v)), GENERAL),
    ("mish", {}, lambda v: v * math.tanh(v if v > 20 else _softplus(v)), GENERAL),
    ("mish", {"threshold": 1.0}, lambda v: v * math.tanh(v if v > 1 else _softplus(v)), GENERAL),
    ("elu", {}, lambda v: v if v >= 0 else math.exp(v) - 1, GENERAL),
    ("elu", {"alpha": 0.5}, lambda v: v if v >= 0 else 0.5 * (math.exp(v) - 1), GENERAL),
    ("selu", {}, lambda v: 1.0507009873554805 * (v if v > 0 else 1.6732632423543772 * (math.exp(v) - 1)),
     GENERAL),
    ("celu", {"alpha": 2.0}, lambda v: max(0.0, v) + min(0.0, 2 * (math.exp(v / 2) - 1)), GENERAL),
    ("softplus", {}, lambda v: v if v > 20 else _softplus(v), GENERAL),
    ("softplus", {"beta": 2.0, "threshold": 3.0},
     lambda v: v if 2 * v > 3 else math.log1p(math.exp(2 * v)) / 2, GENERAL),
    ("softsign", {}, lambda v: v / (1 + abs(v)), GENERAL),
    ("logsigmoid", {}, lambda v: -math.log1p(math.exp(-v)), GENERAL),
    ("tanh_shrink", {}, lambda v: v - math.tanh(v), GENERAL),
    ("thresholded_relu", {}, lambda v: v if v > 1 else 0.0, GENERAL),
    ("thresholded_relu", {"threshold": 0.5, "value": -1.0}, lambda v: v if v > 0.5 else -1.0, GENERAL),
    ("exp", {}, math.exp, GENERAL),
    ("expm1", {}, math.expm1, GENERAL),
    ("log", {}, math.log, POSITIVE),
    ("log2", {}, math.log2, POSITIVE),
    ("log10", {}, math.log10, POSITIVE),
    ("log1p", {}, math.log1p, np.concatenate([POSITIVE, [-0.5, -0.9, 1e-8]])),
    ("sqrt", {}, math.sqrt, np.concatenate([POSITIVE, [0.0]])),
    ("rsqrt", {}, lambda v: 1 / math.sqrt(v), POSITIVE),
    ("abs", {}, abs, GENERAL),
    ("square", {}, lambda v: v * v, GENERAL),
    ("reciprocal", {}, lambda v: 1 / v, np.concatenate([POSITIVE, -POSITIVE])),
    ("floor", {}, math.floor, GENERAL),
    ("ceil", {}, math.ceil, GENERAL),
    ("sign", {}, lambda v: (v > 0) - (v < 0), GENERAL),
    ("sin", {}, math.sin, GENERAL),
    ("cos", {}, math.cos, GENERAL),
    ("erf", {}, math.erf, GENERAL),
]


def _unary_id(case):
    op, attrs = case[0], case[1]
    return op + "".join(f"-{k}={v}" for k, v in attrs.items())


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", UNARY, ids=[_unary_id(c) for c in UNARY])
def test_unary_against_reference(case, dtype):
    op, attrs, fn, values = case
    x = values.astype(dtype).reshape(-1, 1)[:, [0, 0]]  # a 2-D input
    y = out(op, {"X": x}, **attrs)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, elementwise_ref(fn, x), **tol(dtype))


@pytest.mark.parametrize("case", UNARY, ids=[_unary_id(c) for c in UNARY])
def test_unary_float16(case):
    op, attrs, fn, values = case
    x = values[np.abs(values) < 8].astype(np.float16)
    y = out(op, {"X": x}, **attrs)
    assert y.dtype == np.float16 and y.shape == x.shape
    ref = elementwise_ref(fn, x)
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("op", ["relu", "relu6", "abs", "square", "sign", "floor", "ceil", "round"])
def test_integer_inputs_keep_their_dtype(op):
    x = np.array([[-7, -1, 0], [1, 5, 9]], dtype=np.int32)
    y = out(op, {"X": x})
    assert y.dtype == np.int32
    expected = {"relu": np.maximum(x, 0), "relu6": np.clip(x, 0, 6), "abs": np.abs(x), "square": x * x,
                "sign": np.sign(x), "floor": x, "ceil": x, "round": x}[op]
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize("op,fn", [("exp", math.exp), ("sqrt", math.sqrt), ("gelu", None), ("log1p", math.log1p)])
def test_integer_inputs_of_float_ops_keep_their_dtype(op, fn):
    # Out has X's dtype; the float result is truncated toward zero (C++ conversion).
    x = np.array([0, 1, 4, 7], dtype=np.int64)
    y = out(op, {"X": x})
    fn = fn or (lambda v: 0.5 * v * (1 + math.erf(v / math.sqrt(2))))
    assert y.dtype == np.int64 and y.tolist() == [math.trunc(fn(v)) for v in [0, 1, 4, 7]]


UNARY_OPS = sorted({case[0] for case in UNARY} | {"round", "softmax", "log_softmax"})


@pytest.mark.parametrize("op", UNARY_OPS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_unary_0d_input_gives_0d_array(op, dtype):
    y = out(op, {"X": np.array(2, dtype=dtype)})
    assert isinstance(y, np.ndarray) and y.shape == () and y.dtype == dtype


def test_relu_maps_nan_to_zero_like_paddle():
    # Paddle's functor is `x > 0 ? x : 0`, so NaN -> 0 and -0.0 -> +0.0.
    y = out("relu", {"X": np.array([np.nan, -0.0, 2.0], dtype=np.float32)})
    np.testing.assert_array_equal(y, [0.0, 0.0, 2.0])
    assert not np.signbit(y[1])


def test_erf_is_accurate_to_double_precision():
    x = np.concatenate([np.linspace(-7, 7, 2001), np.logspace(-20, 0.9, 200), [0.84375, 1.25, 1 / 0.35, 6.0]])
    y = out("erf", {"X": x})
    ref = elementwise_ref(math.erf, x)
    np.testing.assert_allclose(y, ref, rtol=1e-15, atol=1e-300)
    special = out("erf", {"X": np.array([np.inf, -np.inf, np.nan, -0.0])})
    assert special[0] == 1 and special[1] == -1 and np.isnan(special[2]) and np.signbit(special[3])


def test_erf_float32_is_eigens_approximation():
    """float32 erf is Eigen's rational approximation, which PaddlePaddle 3.3.1's erf op
    computes bit for bit (checked on 200,001 points in [-5, 5]): max abs error 4.2e-7."""
    x = np.concatenate([np.linspace(-5, 5, 4001), np.logspace(-30, 0.6, 100),
                        [np.inf, -np.inf]]).astype(np.float32)
    y = out("erf", {"X": x})
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, elementwise_ref(math.erf, x), rtol=0, atol=4.5e-7)
    small = x[(np.abs(x) < 1e-3) & (x != 0)]
    np.testing.assert_allclose(out("erf", {"X": small}), elementwise_ref(math.erf, small), rtol=2e-7)
    assert np.isnan(out("erf", {"X": np.array([np.nan], np.float32)})).all()


def test_large_inputs_are_stable():
    x = np.array([-1000.0, -100.0, 0.0, 100.0, 1000.0], dtype=np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow / invalid-value warnings
        np.testing.assert_allclose(out("sigmoid", {"X": x}), [0, 0, 0.5, 1, 1], atol=1e-30)
        np.testing.assert_allclose(out("logsigmoid", {"X": x}), [-1000, -100, -math.log(2), -math.exp(-100), 0],
                                   rtol=1e-6, atol=1e-30)
        np.testing.assert_allclose(out("silu", {"X": x}), [0, 0, 0, 100, 1000], atol=1e-30)
        np.testing.assert_allclose(out("softplus", {"X": x}), [0, math.exp(-100), math.log(2), 100, 1000],
                                   rtol=1e-6, atol=1e-30)
        np.testing.assert_allclose(out("mish", {"X": x}), [0, 0, 0, 100, 1000], atol=1e-30)
        np.testing.assert_allclose(out("elu", {"X": x}), [-1, -1, 0, 100, 1000])
        np.testing.assert_allclose(out("softmax", {"X": x}), [0, 0, 0, 0, 1], atol=1e-30)


# -- round ----------------------------------------------------------------------------------------

def _round_half_away(v, decimals=0):
    q = decimal.Decimal(1).scaleb(-decimals)
    return float(decimal.Decimal(v).quantize(q, rounding=decimal.ROUND_HALF_UP))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_round_halfway_cases_go_away_from_zero(dtype):
    x = np.array([-3.5, -2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, -0.2, 0.7, 1e4 + 0.5], dtype=dtype)
    y = out("round", {"X": x})
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, elementwise_ref(_round_half_away, x))
    assert np.signbit(y[8])  # round(-0.2) is -0.0, as std::round


def test_round_just_below_one_half():
    x = np.array([0.49999999999999994, -0.49999999999999994, 2.5000000000000004])
    np.testing.assert_array_equal(out("round", {"X": x}), [0.0, -0.0, 3.0])


def test_round_integers_with_negative_decimals():
    x = np.array([1234, -1250, 1249, 5, -5, 0, 77], np.int64)
    y = out("round", {"X": x}, decimals=-2)
    assert y.dtype == np.int64 and y.tolist() == [1200, -1300, 1200, 0, 0, 0, 100]
    np.testing.assert_array_equal(out("round", {"X": x}, decimals=1), x)


@pytest.mark.parametrize("decimals", [1, 2, -1, -2])
def test_round_decimals(decimals):
    x = np.array([1234.5678, -1234.5678, 0.125, 15.0, -250.0, 0.0])
    y = out("round", {"X": x}, decimals=decimals)
    ten = 10.0 ** abs(decimals)
    ref = [_round_half_away(v * ten) / ten if decimals > 0 else _round_half_away(v / ten) * ten for v in x]
    np.testing.assert_allclose(y, ref, rtol=1e-15)


# -- softmax --------------------------------------------------------------------------------------

def _softmax_ref(x, axis, log=False):
    x = np.moveaxis(np.asarray(x, dtype=np.float64), axis, -1)
    res = np.empty_like(x)
    for idx in np.ndindex(x.shape[:-1]):
        row = [float(v) for v in x[idx]]
        m = max(row)
        total = sum(math.exp(v - m) for v in row)
        res[idx] = [(v - m - math.log(total)) if log else math.exp(v - m) / total for v in row]
    return np.moveaxis(res, -1, axis)


@pytest.mark.parametrize("op", ["softmax", "log_softmax"])
@pytest.mark.parametrize("axis", [-1, 0, 1, -2])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax(op, axis, dtype):
    x = (np.random.default_rng(0).standard_normal((3, 4, 5)) * 4).astype(dtype)
    y = out(op, {"X": x}, axis=axis)
    assert y.dtype == dtype and y.shape == x.shape
    np.testing.assert_allclose(y, _softmax_ref(x, axis, log=(op == "log_softmax")), **tol(dtype))


def test_softmax_0d_and_size1_axis():
    assert out("softmax", {"X": np.array(3.0, np.float32)}) == 1.0
    assert out("log_softmax", {"X": np.array(3.0, np.float32)}) == 0.0
    np.testing.assert_array_equal(out("softmax", {"X": np.ones((2, 1), np.float32)}), [[1.0], [1.0]])


# ---------------------------------------------------------------------------------------------
# scale, clip, cast, pow, increment
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("after", [True, False])
def test_scale(dtype, after):
    x = np.array([[-1.5, 0.0], [2.0, 3.25]], dtype=dtype)
    y = out("scale", {"X": x}, scale=2.0, bias=0.5, bias_after_scale=after)
    ref = elementwise_ref(lambda v: 2.0 * v + 0.5 if after else 2.0 * (v + 0.5), x)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, ref, **tol(dtype))


def test_scale_tensor_overrides_scale_and_integers_truncate():
    x = np.array([1.0, -2.0], np.float32)
    y = out("scale", {"X": x, "ScaleTensor": np.array([3.0], np.float32)}, scale=100.0, bias=1.0)
    np.testing.assert_array_equal(y, [4.0, -5.0])
    # static_cast<int>(2.7) == 2, static_cast<int>(1.9) == 1
    yi = out("scale", {"X": np.array([3, -4], np.int32)}, scale=2.7, bias=1.9)
    assert yi.dtype == np.int32
    np.testing.assert_array_equal(yi, [7, -7])


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_clip(dtype):
    x = np.array([-5, -1, 0, 2, 7], dtype=dtype)
    y = out("clip", {"X": x}, min=-1.5, max=2.5)
    expected = [max(min(float(v), 2.5), -1.5) for v in x]
    if dtype == np.int32:  # min/max are cast to int first: -1 and 2
        expected = [max(min(int(v), 2), -1) for v in x]
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, np.array(expected, dtype=dtype))


def test_clip_min_max_tensors_override_attrs_and_nan_passes():
    x = np.array([-5.0, 0.5, np.nan, 9.0], np.float32)
    y = out("clip", {"X": x, "Min": np.array([0.0], np.float32), "Max": np.array([1.0], np.float32)},
            min=-100.0, max=100.0)
    np.testing.assert_array_equal(y, [0.0, 0.5, np.nan, 1.0])


CAST_CODES = {0: np.bool_, 1: np.int16, 2: np.int32, 3: np.int64, 4: np.float16, 5: np.float32,
              6: np.float64, 20: np.uint8, 21: np.int8}


@pytest.mark.parametrize("code", sorted(CAST_CODES))
def test_cast_to_every_dtype(code):
    values = [-2.7, -1.0, -0.4, 0.0, 0.6, 3.9, 100.25]
    if CAST_CODES[code] is np.uint8:
        values = [v for v in values if v >= 0]
    x = np.array(values, np.float64)
    y = out("cast", {"X": x}, out_dtype=code, in_dtype=6)
    assert y.dtype == CAST_CODES[code]
    if code == 0:
        expected = [v != 0 for v in values]
    elif code in (4, 5, 6):
        expected = values
    else:
        expected = [math.trunc(v) for v in values]  # C++ static_cast truncates toward zero
    np.testing.assert_allclose(y.astype(np.float64), np.array(expected, np.float64), rtol=1e-3)


def test_cast_from_bool_and_int():
    np.testing.assert_array_equal(out("cast", {"X": np.array([True, False])}, out_dtype=5, in_dtype=0), [1.0, 0.0])
    y = out("cast", {"X": np.array([0, 3, -2], np.int64)}, out_dtype=0, in_dtype=3)
    assert y.dtype == np.bool_ and y.tolist() == [False, True, True]


# bfloat16 travels as uint16 bit patterns; the references below decode the fields
# arithmetically and round with exact fractions, independent of the kernel's bit tricks.
BF16, UINT16 = 22, 36
ALL_BF16_BITS = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)


def bf16_value(bits: int) -> float:
    """The value a bfloat16 bit pattern encodes: sign, 8 exponent bits (bias 127), 7
    fraction bits; exponent 0 is subnormal, 255 is inf (fraction 0) or NaN."""
    sign = -1.0 if bits & 0x8000 else 1.0
    exponent, fraction = (bits >> 7) & 0xFF, bits & 0x7F
    if exponent == 0xFF:
        return sign * math.inf if fraction == 0 else math.nan
    if exponent == 0:
        return sign * math.ldexp(fraction / 128, -126)
    return sign * math.ldexp(1 + fraction / 128, exponent - 127)


# Every finite non-negative bfloat16 (bits 0x0000-0x7F7F, increasing with the bits), and
# 2**128 where inf's pattern 0x7F80 sits: IEEE rounds to inf from half an ulp above the
# largest finite value, as if inf were the next step.
_POSITIVE = [fractions.Fraction(bf16_value(b)) for b in range(0x7F80)] + [fractions.Fraction(2) ** 128]


def nearest_bf16_bits(value: float) -> int:
    """bfloat16 bits of a finite float rounded to nearest, ties to the even pattern."""
    magnitude = abs(fractions.Fraction(value))
    hi = bisect.bisect_left(_POSITIVE, magnitude)
    if hi == 0 or _POSITIVE[hi] == magnitude:
        bits = hi
    else:
        below, above = magnitude - _POSITIVE[hi - 1], _POSITIVE[hi] - magnitude
        bits = hi - 1 if below < above or (below == above and (hi - 1) % 2 == 0) else hi
    return bits | (0x8000 if math.copysign(1.0, value) < 0 else 0)


def float32_of_bits(bits) -> np.ndarray:
    return np.asarray(bits, np.uint32).view(np.float32)


@pytest.mark.parametrize("code, dtype", [(5, np.float32), (6, np.float64), (4, np.float16)])
def test_cast_from_bfloat16_bits_is_exact(code, dtype):
    """Every one of the 65536 patterns, read as bfloat16 (not as the integer), to float32
    and float64 exactly and to float16 rounded once from that value."""
    with np.errstate(over="ignore", invalid="ignore"):  # float16 overflow; signalling NaNs
        y = out("cast", {"X": ALL_BF16_BITS}, in_dtype=BF16, out_dtype=code)
        want = np.array([bf16_value(int(b)) for b in ALL_BF16_BITS], np.float64).astype(dtype)
    assert y.dtype == dtype and y.shape == ALL_BF16_BITS.shape
    np.testing.assert_array_equal(y, want)  # NaN where NaN; exact for float32 and float64
    numbers = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(y[numbers]), np.signbit(want[numbers]))  # -0.0, -inf


def test_cast_to_bfloat16_rounds_to_nearest_even():
    one = 0x3F80  # 1.0; the bfloat16 step above 1 is 2**-7
    table = [  # (value, bits), worked by hand
        (1.0, one), (-2.0, 0xC000), (0.15625, 0x3E20),
        (1 + 2 ** -7, one + 1),
        (1 + 2 ** -8, one),                    # halfway: to the even pattern below
        (1 + 3 * 2 ** -8, one + 2),            # halfway: to the even pattern above
        (1 + 2 ** -8 + 2 ** -20, one + 1),     # just above halfway
        (-(1 + 2 ** -8 + 2 ** -20), 0x8000 | (one + 1)),
        (3.3895313892515355e38, 0x7F7F),       # the largest finite bfloat16
        (3.3961775292304957e38, 0x7F80),       # half an ulp above it: ties to even = inf
        (math.ldexp(1, -133), 0x0001),         # the smallest subnormal
        (math.ldexp(1, -134), 0x0000),         # half of it: ties to even = +0
        (math.ldexp(3, -134), 0x0002),         # 1.5 of it: to the even pattern above
    ]
    for code, dtype in ((5, np.float32), (6, np.float64)):
        x = np.array([v for v, _ in table], dtype)
        got = out("cast", {"X": x}, in_dtype=code, out_dtype=BF16)
        assert got.dtype == np.uint16
        assert [hex(b) for b in got.tolist()] == [hex(b) for _, b in table], dtype
    # the exact reference on random patterns, and on ones whose dropped half is at, just
    # under and just over the halfway point
    rng = np.random.default_rng(0)
    bits = rng.integers(0, 1 << 32, 4000, dtype=np.uint64).astype(np.uint32)
    bits = np.concatenate([bits, (bits[:1000] & 0xFFFF0000) | rng.choice([0x7FFF, 0x8000, 0x8001], 1000)])
    x = float32_of_bits(bits)
    x = x[np.isfinite(x)]
    got = out("cast", {"X": x}, in_dtype=5, out_dtype=BF16)
    np.testing.assert_array_equal(got, [nearest_bf16_bits(float(v)) for v in x])
    half = np.array([1.0, 1 + 2 ** -8, 65504.0, -6.1e-5], np.float16)  # float16 -> bfloat16 rounds once
    np.testing.assert_array_equal(out("cast", {"X": half}, in_dtype=4, out_dtype=BF16),
                                  [nearest_bf16_bits(float(v)) for v in half])


def test_float64_reaches_bfloat16_through_float32():
    """PaddlePaddle converts bfloat16(static_cast<float>(v)): a float64 just above a
    bfloat16 halfway point is first rounded to that point by float32, then to even."""
    x = np.array([1 + 2 ** -8 + 2 ** -30], np.float64)
    assert nearest_bf16_bits(float(x[0])) == 0x3F81  # what one rounding would give
    assert out("cast", {"X": x}, in_dtype=6, out_dtype=BF16).tolist() == [0x3F80]


def test_cast_to_bfloat16_nan_inf_and_signed_zero():
    nans = float32_of_bits([0x7F800001, 0x7FFFFFFF, 0xFFC00000, 0x7FC00000])  # round-up would make 0x7F800001 inf
    x = np.concatenate([nans, np.array([np.inf, -np.inf, -0.0, 0.0, np.finfo(np.float32).max], np.float32)])
    got = out("cast", {"X": x}, in_dtype=5, out_dtype=BF16)
    assert all(math.isnan(bf16_value(b)) for b in got[:4].tolist())
    assert [hex(b) for b in got[4:].tolist()] == ["0x7f80", "0xff80", "0x8000", "0x0", "0x7f80"]


def test_bfloat16_round_trips_through_float32_and_float64():
    for code in (5, 6):
        with np.errstate(invalid="ignore"):  # signalling NaNs widened to float64
            wide = out("cast", {"X": ALL_BF16_BITS}, in_dtype=BF16, out_dtype=code)
        back = out("cast", {"X": wide}, in_dtype=code, out_dtype=BF16)
        nan = np.isnan(wide)
        np.testing.assert_array_equal(back[~nan], ALL_BF16_BITS[~nan])
        assert all(math.isnan(bf16_value(b)) for b in back[nan].tolist())
    same = out("cast", {"X": ALL_BF16_BITS}, in_dtype=BF16, out_dtype=BF16)  # a copy, NaN payloads too
    np.testing.assert_array_equal(same, ALL_BF16_BITS)
    assert not np.shares_memory(same, ALL_BF16_BITS)


def test_uint16_integers_are_not_read_as_bfloat16():
    x = np.array([0x3F80, 7], np.uint16)
    np.testing.assert_array_equal(out("cast", {"X": x}, in_dtype=UINT16, out_dtype=5), [16256.0, 7.0])
    np.testing.assert_array_equal(out("cast", {"X": x}, in_dtype=BF16, out_dtype=5), [1.0, bf16_value(7)])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("factor", [2.0, 0.5, -1.0, 3.0])
def test_pow(dtype, factor):
    x = np.array([0.5, 1.0, 2.0, 3.5], dtype=dtype)
    y = out("pow", {"X": x}, factor=factor)
    assert y.dtype == dtype
    np.testing.assert_allclose(y, elementwise_ref(lambda v: v ** factor, x), **tol(dtype))


def test_pow_factor_tensor_and_integers():
    x = np.array([1.0, 2.0, 3.0], np.float32)
    np.testing.assert_allclose(out("pow", {"X": x, "FactorTensor": np.array([3.0], np.float32)}, factor=2.0),
                               [1.0, 8.0, 27.0])
    yi = out("pow", {"X": np.array([2, 3], np.int64)}, factor=2.0)
    assert yi.dtype == np.int64 and yi.tolist() == [4, 9]


@pytest.mark.parametrize("dtype,step,expected", [(np.float32, 1.0, 3.5), (np.float64, -0.25, 2.25),
                                                 (np.int64, 1.0, 3), (np.int32, 2.0, 4)])
def test_increment(dtype, step, expected):
    x = np.array([2.5 if np.dtype(dtype).kind == "f" else 2], dtype=dtype)
    y = out("increment", {"X": x}, step=step)
    assert y.dtype == dtype and y.shape == (1,) and y[0] == expected


# ---------------------------------------------------------------------------------------------
# sum, mean, reductions, norms
# ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.int32])
def test_sum_of_list(dtype):
    xs = [np.arange(6).reshape(2, 3).astype(dtype) * (i + 1) for i in range(3)]
    y = out("sum", {"X": xs})
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, np.arange(6).reshape(2, 3) * 6)
    single = out("sum", {"X": xs[:1]})
    assert single is not xs[0] and np.array_equal(single, xs[0])


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_mean_is_0d(dtype):
    x = np.arange(12, dtype=np.float64).reshape(3, 4).astype(dtype)
    y = out("mean", {"X": x})
    assert y.shape == () and y.dtype == dtype
    np.testing.assert_allclose(float(y), 5.5, **tol(dtype))


def _reduce_ref(x, axes, keep, combine, start):
    """Reduce by visiting every element: axes is a set of non-negative axes."""
    x = np.asarray(x)
    acc = {}
    for idx in np.ndindex(x.shape):
        key = tuple(0 if i in axes else d for i, d in enumerate(idx)) if keep else \
            tuple(d for i, d in enumerate(idx) if i not in axes)
        acc[key] = combine(acc.get(key, start), x[idx].item())
    shape = tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if keep else \
        tuple(n for i, n in enumerate(x.shape) if i not in axes)
    res = np.empty(shape, dtype=object)
    for key, v in acc.items():
        res[key] = v
    return res


REDUCERS = {
    "reduce_sum": (lambda a, b: a + b, 0.0),
    "reduce_prod": (lambda a, b: a * b, 1.0),
    "reduce_max": (max, -math.inf),
    "reduce_min": (min, math.inf),
}

REDUCE_DIMS = [  # dim, reduce_all, expected axes of a rank-3 input
    ([1], False, {1}), ([-1], False, {2}), ([0, 2], False, {0, 2}), ([-3, -1], False, {0, 2}),
    ([], False, {0, 1, 2}), ([1], True, {0, 1, 2}), ([0, 1, 2], False, {0, 1, 2}), ([2, -2], False, {1, 2}),
]


@pytest.mark.parametrize("op", list(REDUCERS) + ["reduce_mean"])
@pytest.mark.parametrize("dim,reduce_all,axes", REDUCE_DIMS)
@pytest.mark.parametrize("keep_dim", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reduce(op, dim, reduce_all, axes, keep_dim, dtype):
    x = np.random.default_rng(1).uniform(0.5, 1.5, size=(2, 1, 3)).astype(dtype)  # a size-1 dim
    y = out(op, {"X": x}, dim=dim, keep_dim=keep_dim, reduce_all=reduce_all)
    if op == "reduce_mean":
        total = _reduce_ref(x.astype(np.float64), axes, keep_dim, lambda a, b: a + b, 0.0)
        ref = total.astype(np.float64) / math.prod(x.shape[a] for a in axes)
    else:
        combine, start = REDUCERS[op]
        ref = _reduce_ref(x.astype(np.float64), axes, keep_dim, combine, start).astype(np.float64)
    assert y.dtype == dtype and y.shape == ref.shape
    np.testing.assert_allclose(y, ref, **tol(dtype))


def test_reduce_sum_dtypes():
    xi = np.array([[1, 2], [3, 4]], np.int32)
    y = out("reduce_sum", {"X": xi}, dim=[0])
    assert y.dtype == np.int64 and y.tolist() == [4, 6]  # int32 and bool sum to int64
    yb = out("reduce_sum", {"X": np.array([True, True, False])}, dim=[0])
    assert yb.dtype == np.int64 and yb.shape == () and yb == 2
    y64 = out("reduce_sum", {"X": np.full(3, 0.1, np.float32)}, dim=[0], out_dtype=6)
    assert y64.dtype == np.float64
    np.testing.assert_allclose(y64, 3 * float(np.float32(0.1)), rtol=1e-15)
    yh = out("reduce_sum", {"X": np.full(4096, 1.0, np.float16)}, dim=[0])  # float32 accumulation
    assert yh.dtype == np.float16 and yh == 4096


def test_reduce_mean_of_integers_truncates_toward_zero():
    y = out("reduce_mean", {"X": np.array([[-3, 0], [3, 4]], np.int32)}, dim=[1])
    assert y.dtype == np.int32 and y.tolist() == [-1, 3]


def test_reduce_0d_input():
    x = np.array(2.5, np.float32)
    for op in ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"]:
        y = out(op, {"X": x}, dim=[0])
        assert y.shape == () and y == 2.5
    assert out("reduce_sum", {"X": x}, dim=[-1], keep_dim=True).shape == ()


@pytest.mark.parametrize("op,fn", [("reduce_all", all), ("reduce_any", any)])
@pytest.mark.parametrize("dim,reduce_all,axes", REDUCE_DIMS)
@pytest.mark.parametrize("keep_dim", [False, True])
def test_reduce_all_any(op, fn, dim, reduce_all, axes, keep_dim):
    x = np.random.default_rng(2).uniform(size=(2, 1, 3)) > 0.4
    y = out(op, {"X": x}, dim=dim, keep_dim=keep_dim, reduce_all=reduce_all)
    combine = (lambda a, b: a and b) if fn is all else (lambda a, b: a or b)
    ref = _reduce_ref(x, axes, keep_dim, combine, fn is all).astype(bool)
    assert y.dtype == np.bool_ and y.shape == ref.shape
    np.testing.assert_array_equal(y, ref)


def test_reduce_any_axis_tensor_overrides_dim():
    x = np.array([[False, False, True], [False, False, False]])
    y = out("reduce_any", {"X": x, "AxisTensor": np.array([1], np.int64)}, dim=[0])
    np.testing.assert_array_equal(y, [True, False])
    y = out("reduce_all", {"X": ~x, "AxisTensorList": [np.array([0], np.int64)]}, dim=[1])
    np.testing.assert_array_equal(y, [True, True, False])


def test_squared_l2_norm_and_l1_norm_shapes():
    x = np.array([[1.0, -2.0], [3.0, -4.0]], np.float32)
    y = out("squared_l2_norm", {"X": x})
    assert y.shape == (1,) and y.dtype == np.float32 and y[0] == 30.0  # [1], not 0-d
    y = out("l1_norm", {"X": x})
    assert y.shape == () and y.dtype == np.float32 and y == 10.0


def _pnorm_ref(values, p):
    values = [abs(float(v)) for v in values]
    if p == 0:
        return float(sum(v != 0 for v in values))
    if p == math.inf:
        return max(values)
    if p == -math.inf:
        return min(values)
    return sum(v ** p for v in values) ** (1 / p)


@pytest.mark.parametrize("porder", [2.0, 1.0, 3.0, 0.0, math.inf, -math.inf, 0.5])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_p_norm(porder, axis, keepdim):
    x = np.array([[1.0, -2.0, 0.0], [3.0, 0.5, -4.0]], np.float32)
    y = out("p_norm", {"X": x}, porder=porder, axis=axis, keepdim=keepdim)
    a = axis % 2
    lanes = np.moveaxis(x, a, -1)
    ref = np.array([_pnorm_ref(lanes[i], porder) for i in range(lanes.shape[0])])
    ref = np.expand_dims(ref, a) if keepdim else ref
    assert y.dtype == np.float32 and y.shape == ref.shape
    np.testing.assert_allclose(y, ref, rtol=1e-5)


def test_p_norm_asvector():
    x = np.array([[1.0, -2.0], [3.0, -4.0]])
    y = out("p_norm", {"X": x}, porder=2.0, asvector=True)
    assert y.shape == () and abs(float(y) - math.sqrt(30)) < 1e-12
    assert out("p_norm", {"X": x}, porder=1.0, asvector=True, keepdim=True).shape == (1, 1)


# ---------------------------------------------------------------------------------------------
# Matrix products
# ---------------------------------------------------------------------------------------------

def _mm_ref(a, b):
    """2-D product by loops."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    assert a.shape[1] == b.shape[0]
    return np.array([[sum(a[i, k] * b[k, j] for k in range(a.shape[1])) for j in range(b.shape[1])]
                     for i in range(a.shape[0])]).reshape(a.shape[0], b.shape[1])


def _matmul_v2_ref(x, y, tx, ty):
    """numpy matmul semantics written out: vectors promoted and then squeezed, batch dims
    broadcast by hand."""
    xv, yv = x.ndim == 1, y.ndim == 1
    xm = x.reshape(1, -1) if xv else (np.swapaxes(x, -1, -2) if tx else x)
    ym = y.reshape(-1, 1) if yv else (np.swapaxes(y, -1, -2) if ty else y)
    batch = np.broadcast_shapes(xm.shape[:-2], ym.shape[:-2])
    xb = np.broadcast_to(xm, batch + xm.shape[-2:])
    yb = np.broadcast_to(ym, batch + ym.shape[-2:])
    res = np.empty(batch + (xm.shape[-2], ym.shape[-1]))
    for idx in np.ndindex(batch):
        res[idx] = _mm_ref(xb[idx], yb[idx])
    if xv:
        res = res[..., 0, :]
    if yv:
        res = res[..., 0]
    return res


MATMUL_V2_CASES = [  # x shape, y shape, trans_x, trans_y
    ((3, 4), (4, 5), False, False), ((4, 3), (4, 5), True, False), ((3, 4), (5, 4), False, True),
    ((4, 3), (5, 4), True, True), ((4,), (4,), False, False), ((4,), (4,), True, True),
    ((4,), (4, 5), False, False), ((4,), (5, 4), True, True), ((3, 4), (4,), False, False),
    ((4, 3), (4,), True, False), ((2, 3, 4), (4,), False, False), ((4,), (2, 4, 5), False, False),
    ((2, 3, 4), (2, 4, 5), False, False), ((2, 1, 3, 4), (5, 4, 2), False, False),
    ((2, 1, 4, 3), (5, 2, 4), True, True), ((3, 4), (2, 2, 5, 4), False, True), ((1, 3, 4), (6, 4, 2), False, False),
]


@pytest.mark.parametrize("xs,ys,tx,ty", MATMUL_V2_CASES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_matmul_v2(xs, ys, tx, ty, dtype):
    rng = np.random.default_rng(3)
    x, y = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ys).astype(dtype)
    res = out("matmul_v2", {"X": x, "Y": y}, trans_x=tx, trans_y=ty)
    ref = _matmul_v2_ref(x.astype(np.float64), y.astype(np.float64), tx, ty)
    assert isinstance(res, np.ndarray) and res.dtype == dtype and res.shape == ref.shape
    np.testing.assert_allclose(res, ref, **tol(dtype))


def test_matmul_v2_float16():
    rng = np.random.default_rng(4)
    x, y = rng.standard_normal((2, 3, 8)).astype(np.float16), rng.standard_normal((8, 5)).astype(np.float16)
    res = out("matmul_v2", {"X": x, "Y": y})
    assert res.dtype == np.float16
    np.testing.assert_allclose(res, _matmul_v2_ref(x.astype(np.float64), y.astype(np.float64), False, False),
                               rtol=1e-2, atol=1e-2)



@pytest.mark.parametrize("op_type", ["elementwise_add_grad", "elementwise_sub_grad", "elementwise_mul_grad"])
def test_float16_broadcast_gradients_are_summed_in_float32(op_type):
    # a bias gradient over 4096 rows (the GPT's batch x time under AMP): float16 addition
    # along the rows would stop at 2048 + ...; Paddle accumulates in float32 and rounds once
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4096, 8)).astype(np.float16)
    y = np.ones(8, np.float16)
    dout = np.ones((4096, 8), np.float16) + rng.uniform(0, 2 ** -8, (4096, 8)).astype(np.float16)
    grads = call_kernel(op_type, {"X": x, "Y": y, "Out@GRAD": dout}, {"axis": -1})
    dy = grads["Y@GRAD"]
    factor = x.astype(np.float64) if op_type == "elementwise_mul_grad" else 1.0
    sign = -1.0 if op_type == "elementwise_sub_grad" else 1.0
    ref = sign * (dout.astype(np.float64) * factor).sum(axis=0)
    assert dy.dtype == np.float16 and dy.shape == (8,)
    np.testing.assert_allclose(dy.astype(np.float64), ref, rtol=2 ** -10, atol=0.05)

LEGACY_MATMUL_CASES = [  # x shape, y shape, transpose_X, transpose_Y, expected out shape
    ((4,), (4,), False, False, ()),   # PaddlePaddle 3.3.1: a 0-D result
    ((4,), (4, 5), False, False, (5,)),
    ((2, 3, 4), (4,), False, False, (2, 3)),
    ((3, 4), (2, 4, 5), False, False, (2, 3, 5)),
    ((2, 3, 4), (2, 4, 5), False, False, (2, 3, 5)),
    ((2, 3, 4), (4, 5), False, False, (2, 3, 5)),
    ((2, 4, 3), (2, 5, 4), True, True, (2, 3, 5)),
    ((4,), (1, 5), True, False, (4, 5)),  # [K] transposed is a column: an outer product
    ((3, 1), (5,), False, True, (3, 5)),  # [N] transposed is a row [1, N]
    ((2, 3, 5, 4), (6, 4, 2), False, False, (2, 3, 5, 2)),  # stacks of equal size, X's leading dims
    ((2, 3, 4, 5), (2, 3, 5, 6), False, False, (2, 3, 4, 6)),
]


@pytest.mark.parametrize("xs,ys,tx,ty,out_shape", LEGACY_MATMUL_CASES)
@pytest.mark.parametrize("alpha", [1.0, 2.5])
def test_legacy_matmul(xs, ys, tx, ty, out_shape, alpha):
    rng = np.random.default_rng(5)
    x, y = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ys).astype(np.float32)
    res = out("matmul", {"X": x, "Y": y}, transpose_X=tx, transpose_Y=ty, alpha=alpha)
    assert res.dtype == np.float32 and res.shape == out_shape
    # Reference: X as stack of matrices ([K] -> [1, K]), Y likewise ([K] -> [K, 1]).
    xm = x.reshape(1, -1) if x.ndim == 1 else x.reshape((-1,) + x.shape[-2:])
    ym = y.reshape(-1, 1) if y.ndim == 1 else y.reshape((-1,) + y.shape[-2:])
    xm = np.swapaxes(xm, -1, -2) if tx else xm
    ym = np.swapaxes(ym, -1, -2) if ty else ym
    xs3 = xm if xm.ndim == 3 else xm[None]
    ys3 = ym if ym.ndim == 3 else ym[None]
    n = max(len(xs3), len(ys3))
    ref = np.stack([alpha * _mm_ref(xs3[i % len(xs3)], ys3[i % len(ys3)]) for i in range(n)])
    np.testing.assert_allclose(res.reshape(-1), ref.reshape(-1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("xs,xn,ys,yn", [((3, 4), 1, (4, 5), 1), ((2, 3, 4, 5), 2, (20, 6), 1),
                                         ((2, 3, 4, 5), 2, (4, 5, 6), 2), ((2, 3, 4), 1, (12, 2, 3), 1),
                                         ((6, 2, 2), 3, (1, 7), 1)])
def test_mul(xs, xn, ys, yn):
    rng = np.random.default_rng(6)
    x, y = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ys).astype(np.float32)
    res = out("mul", {"X": x, "Y": y}, x_num_col_dims=xn, y_num_col_dims=yn)
    assert res.shape == xs[:xn] + ys[yn:] and res.dtype == np.float32
    rows, inner = math.prod(xs[:xn]), math.prod(xs[xn:])
    ref = _mm_ref(x.reshape(rows, inner), y.reshape(inner, -1))
    np.testing.assert_allclose(res.reshape(rows, -1), ref, rtol=1e-5, atol=1e-5)


def test_bmm():
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 4, 5))
    res = out("bmm", {"X": x, "Y": y})
    ref = np.stack([_mm_ref(x[i], y[i]) for i in range(3)])
    assert res.shape == (3, 2, 5)
    np.testing.assert_allclose(res, ref, rtol=1e-12)


@pytest.mark.parametrize("in_shape,n", [((4, 6), 1), ((2, 3, 6), 2), ((2, 3, 2), 1)])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("act", ["", "relu"])
@pytest.mark.parametrize("padding", [False, True])
def test_fc(in_shape, n, with_bias, act, padding):
    rng = np.random.default_rng(8)
    x = rng.standard_normal(in_shape).astype(np.float32)
    k = math.prod(in_shape[n:])
    w = rng.standard_normal((k, 5)).astype(np.float32)
    b = rng.standard_normal((1, 5)).astype(np.float32)
    w_in = np.pad(w, ((0, 4), (0, 4)), constant_values=99.0) if padding else w
    inputs = {"Input": x, "W": w_in, **({"Bias": b} if with_bias else {})}
    res = out("fc", inputs, in_num_col_dims=n, activation_type=act, padding_weights=padding)
    rows = math.prod(in_shape[:n])
    ref = _mm_ref(x.reshape(rows, k), w) + (b if with_bias else 0)
    ref = np.maximum(ref, 0) if act == "relu" else ref
    assert res.shape == in_shape[:n] + (5,)
    np.testing.assert_allclose(res.reshape(rows, 5), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("rows", [1, 2, 6, 7, 32, 33])
@pytest.mark.parametrize("k,n", [(12, 9), (512, 512)])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_products_of_a_few_rows_by_row_and_column_major_matrices(rows, k, n, order, dtype):
    """Few-row products by a large right-hand matrix take other BLAS formulations (kernels/
    math.py `_gemm`: 2-6 rows one matrix-vector product each, 7-32 rows by a column-major
    matrix, as column_major_weights stores weights, the transposed product). Through
    matmul_v2, mul, matmul and fc, 2-D and stacked, they give the product (an einsum in
    float64, no BLAS) as row-major arrays of the input dtype."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal((rows, k)).astype(dtype)
    w = np.asarray(rng.standard_normal((k, n)).astype(dtype), order=order)
    b = rng.standard_normal(n).astype(dtype)
    ref = np.einsum("ik,kj->ij", x.astype(np.float64), w.astype(np.float64))
    results = [out("matmul_v2", {"X": x, "Y": w}), out("mul", {"X": x, "Y": w}),
               out("matmul", {"X": x, "Y": w}), out("matmul_v2", {"X": x.reshape(1, rows, k), "Y": w})[0],
               out("fc", {"Input": x, "W": w, "Bias": b}) - b]
    scale = np.sqrt(k)  # the size of an entry of the product
    for res in results:
        assert res.dtype == dtype and res.shape == (rows, n) and res.flags.c_contiguous
        np.testing.assert_allclose(res, ref, rtol=tol(dtype)["rtol"], atol=tol(dtype)["rtol"] * scale)


def test_many_rows_by_a_read_only_column_major_weight_use_a_kept_row_major_copy():
    """More than 32 rows by a read-only column-major weight (as column_major_weights leaves
    them) multiply a row-major copy made once and kept while the weight lives; a writeable
    one is never copied (it could change under the copy). Same products either way."""
    import gc
    from keel.kernels import math as kmath
    rng = np.random.default_rng(11)
    x = rng.standard_normal((40, 512)).astype(np.float32)
    w = np.asfortranarray(rng.standard_normal((512, 512)).astype(np.float32))
    ref = np.einsum("ik,kj->ij", x.astype(np.float64), w.astype(np.float64))
    before = len(kmath._ROW_MAJOR)
    writable = out("matmul_v2", {"X": x, "Y": w})
    assert len(kmath._ROW_MAJOR) == before
    w.flags.writeable = False
    first, second = out("matmul_v2", {"X": x, "Y": w}), out("fc", {"Input": x, "W": w})
    (ref_to_w, copy), = [v for k, v in kmath._ROW_MAJOR.items() if k == id(w)]
    assert ref_to_w() is w and copy.flags.c_contiguous and np.array_equal(copy, w)
    assert len(kmath._ROW_MAJOR) == before + 1    # one copy for both products
    for res in (writable, first, second):
        np.testing.assert_allclose(res, ref, rtol=1e-5, atol=1e-5 * np.sqrt(512))
    del w, ref_to_w, copy
    gc.collect()
    assert len(kmath._ROW_MAJOR) == before          # gone with its weight


# ---------------------------------------------------------------------------------------------
# Comparisons, logic, where, isfinite
# ---------------------------------------------------------------------------------------------

COMPARE = {"equal": lambda a, b: a == b, "not_equal": lambda a, b: a != b, "less_than": lambda a, b: a < b,
           "less_equal": lambda a, b: a <= b, "greater_than": lambda a, b: a > b,
           "greater_equal": lambda a, b: a >= b}


@pytest.mark.parametrize("op", sorted(COMPARE))
@pytest.mark.parametrize("y_shape,axis", [((2, 3, 4), -1), ((4,), -1), ((3,), 1), ((3, 4), 1), ((2,), 0),
                                          ((2, 3), 0), ((3, 1), 1), ((1, 4), -1)])
@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.int64])
def test_comparison_with_axis_broadcasting(op, y_shape, axis, dtype):
    rng = np.random.default_rng(9)
    x = rng.integers(0, 3, size=(2, 3, 4)).astype(dtype)
    y = rng.integers(0, 3, size=y_shape).astype(dtype)
    res = out(op, {"X": x, "Y": y}, axis=axis)
    assert res.dtype == np.bool_ and res.shape == x.shape
    # Paddle's rule by hand: y's dims sit at x's dims axis.. (right-aligned when axis == -1).
    start = x.ndim - y.ndim if axis == -1 else axis
    for idx in np.ndindex(x.shape):
        yidx = tuple(0 if y.shape[j] == 1 else idx[start + j] for j in range(y.ndim))
        assert res[idx] == COMPARE[op](x[idx].item(), y[yidx].item()), idx


def test_comparison_lower_rank_x_and_trailing_ones():
    x = np.arange(3, dtype=np.float32)
    y = np.arange(6, dtype=np.float32).reshape(2, 3)
    res = out("less_than", {"X": x, "Y": y}, axis=-1)
    np.testing.assert_array_equal(res, [[False, False, False], [True, True, True]])
    # Y [4, 1] aligned at axis 2 of X [2, 3, 4] does not fit: its trailing 1 is dropped first.
    x3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y2 = np.array([[0.0], [5.0], [10.0], [15.0]], np.float32)
    res = out("equal", {"X": x3, "Y": y2}, axis=2)
    np.testing.assert_array_equal(res, x3 == y2.reshape(4))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_equal_uses_paddles_absolute_tolerance(dtype):
    x = np.array([1e-9, 0.0, 1.0, np.inf, np.inf, np.nan, 5e-9, 1.0], dtype=dtype)
    y = np.array([2e-9, -9e-9, 1.0 + 1e-6, np.inf, -np.inf, np.nan, -6e-9, 1.0], dtype=dtype)
    eq = out("equal", {"X": x, "Y": y})
    ref = [True, True, False, True, False, False, False, True]  # |x - y| < 1e-8, inf exact, NaN never
    np.testing.assert_array_equal(eq, ref)
    np.testing.assert_array_equal(out("not_equal", {"X": x, "Y": y}), ~np.array(ref))


def test_equal_float32_threshold_is_compared_in_double():
    t = np.float32(1e-8)  # 9.99999993922529e-09 < 1e-8, so it counts as equal
    assert float(t) < 1e-8
    x = np.array([t, np.nextafter(t, np.float32(1))], np.float32)
    np.testing.assert_array_equal(out("equal", {"X": x, "Y": np.zeros(2, np.float32)}), [True, False])


def test_equal_float16_is_exact():
    x = np.array([0.0, 1e-7], np.float16)
    np.testing.assert_array_equal(out("equal", {"X": x, "Y": np.zeros(2, np.float16)}), [True, False])


@pytest.mark.parametrize("op,fn", [("logical_and", lambda a, b: a and b), ("logical_or", lambda a, b: a or b),
                                   ("logical_xor", lambda a, b: a != b)])
@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.float32])
def test_logical_binary(op, fn, dtype):
    x = np.array([[0, 1, 2, 0], [3, 0, 1, 0]]).astype(dtype)
    y = np.array([0, 0, 5, 1]).astype(dtype)  # broadcasts over rows
    res = out(op, {"X": x, "Y": y})
    assert res.dtype == np.bool_
    ref = [[fn(bool(x[i, j]), bool(y[j])) for j in range(4)] for i in range(2)]
    np.testing.assert_array_equal(res, ref)


def test_logical_not_and_checks():
    res = out("logical_not", {"X": np.array([0, 2, -1], np.int32)})
    assert res.dtype == np.bool_ and res.tolist() == [True, False, False]
    x = np.array([1.0, np.inf, -np.inf, np.nan, 0.0], np.float32)
    assert out("isfinite_v2", {"X": x}).tolist() == [True, False, False, False, True]
    assert out("isinf_v2", {"X": x}).tolist() == [False, True, True, False, False]
    assert out("isnan_v2", {"X": x}).tolist() == [False, False, False, True, False]
    xi = np.array([1, 2], np.int64)
    assert out("isfinite_v2", {"X": xi}).tolist() == [True, True]
    assert out("isnan_v2", {"X": xi}).tolist() == [False, False]


@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_where(dtype):
    cond = np.array([[True, False, True], [False, False, True]])
    x = np.arange(6).reshape(2, 3).astype(dtype)
    y = -np.arange(6).reshape(2, 3).astype(dtype)
    res = out("where", {"Condition": cond, "X": x, "Y": y})
    assert res.dtype == dtype
    np.testing.assert_array_equal(res, [[0, -1, 2], [-3, -4, 5]])


# ---------------------------------------------------------------------------------------------
# cumsum, arg_max / arg_min, top_k_v2
# ---------------------------------------------------------------------------------------------

def _cumsum_ref(lane, exclusive, reverse):
    lane = list(lane)[::-1] if reverse else list(lane)
    res, total = [], 0.0
    for v in lane:
        if exclusive:
            res.append(total)
            total += v
        else:
            total += v
            res.append(total)
    return res[::-1] if reverse else res


@pytest.mark.parametrize("axis", [0, 1, -1, -3])
@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_cumsum(axis, exclusive, reverse, dtype):
    x = np.random.default_rng(10).integers(-5, 9, size=(2, 3, 4)).astype(dtype)
    res = out("cumsum", {"X": x}, axis=axis, exclusive=exclusive, reverse=reverse)
    assert res.dtype == dtype and res.shape == x.shape
    a = axis % 3
    lanes = np.moveaxis(x.astype(np.float64), a, -1)
    ref = np.empty_like(lanes)
    for idx in np.ndindex(lanes.shape[:-1]):
        ref[idx] = _cumsum_ref(lanes[idx], exclusive, reverse)
    np.testing.assert_array_equal(res, np.moveaxis(ref, -1, a))


@pytest.mark.parametrize("exclusive,reverse", list(itertools.product([False, True], repeat=2)))
def test_cumsum_flatten(exclusive, reverse):
    x = np.arange(1, 7, dtype=np.float32).reshape(2, 3)
    res = out("cumsum", {"X": x}, axis=0, flatten=True, exclusive=exclusive, reverse=reverse)
    assert res.shape == (6,)
    np.testing.assert_array_equal(res, _cumsum_ref(range(1, 7), exclusive, reverse))


def test_cumsum_0d():
    res = out("cumsum", {"X": np.array(4.0, np.float32)}, axis=-1)
    assert res.shape == () and res == 4.0


ARG_X = np.array([[3, 7, 7, 1], [2, 2, 0, 0], [5, 1, 9, 9]], np.float32)


def _argref(lane, op):
    best = None
    for i, v in enumerate(lane):  # first occurrence wins
        if best is None or (v > lane[best] if op == "arg_max" else v < lane[best]):
            best = i
    return best


@pytest.mark.parametrize("op", ["arg_max", "arg_min"])
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
@pytest.mark.parametrize("keepdims", [False, True])
@pytest.mark.parametrize("dtype_code,np_dtype", [(2, np.int32), (3, np.int64)])
def test_arg_max_min(op, axis, keepdims, dtype_code, np_dtype):
    res = out(op, {"X": ARG_X}, axis=axis, keepdims=keepdims, dtype=dtype_code)
    a = axis % 2
    lanes = np.moveaxis(ARG_X, a, -1)
    ref = np.array([_argref(list(lanes[i]), op) for i in range(lanes.shape[0])])
    ref = np.expand_dims(ref, a) if keepdims else ref
    assert res.dtype == np_dtype and res.shape == ref.shape
    np.testing.assert_array_equal(res, ref)


@pytest.mark.parametrize("op", ["arg_max", "arg_min"])
@pytest.mark.parametrize("keepdims", [False, True])
def test_arg_max_min_flatten(op, keepdims):
    res = out(op, {"X": ARG_X}, axis=0, flatten=True, keepdims=keepdims)
    assert res.dtype == np.int64 and res.shape == ((1, 1) if keepdims else ())
    assert res.reshape(-1)[0] == _argref(list(ARG_X.reshape(-1)), op)


def _topk_ref(lane, k, largest):
    order = sorted(range(len(lane)), key=lambda i: (-lane[i] if largest else lane[i], i))[:k]
    return [lane[i] for i in order], order


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("axis", [-1, 0, 1])
@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_top_k_v2(largest, axis, k, dtype):
    x = np.array([[4, 1, 4, 2, 1], [0, 3, 3, 3, 5], [7, 7, 7, 7, 7]]).astype(dtype)  # many ties
    res = run("top_k_v2", {"X": x}, k=k, axis=axis, largest=largest)
    values, indices = res["Out"], res["Indices"]
    a = axis % 2
    lanes = np.moveaxis(x, a, -1)
    ref_v = np.empty(lanes.shape[:-1] + (k,), dtype=np.float64)
    ref_i = np.empty(lanes.shape[:-1] + (k,), dtype=np.int64)
    for i in range(lanes.shape[0]):
        ref_v[i], ref_i[i] = _topk_ref(list(lanes[i]), k, largest)
    assert values.dtype == dtype and indices.dtype == np.int64
    np.testing.assert_array_equal(values, np.moveaxis(ref_v, -1, a))
    np.testing.assert_array_equal(indices, np.moveaxis(ref_i, -1, a))


def test_top_k_v2_k_tensor_and_nan():
    x = np.array([1.0, np.nan, 3.0, 2.0], np.float32)
    res = run("top_k_v2", {"X": x, "K": np.array([2], np.int32)}, k=1)
    assert res["Indices"].tolist() == [1, 2] and np.isnan(res["Out"][0]) and res["Out"][1] == 3.0
    res = run("top_k_v2", {"X": x}, k=2, largest=False)
    assert res["Indices"].tolist() == [0, 3]
