"""The specialized conv2d / depthwise_conv2d / pool2d callables (kernels/nn.py
`_specialize_conv`, `_specialize_pool`): a plan per input shape, made on the first call
with that shape and reused. Each must give the general kernel's result (call_kernel, which
the stand-in run moves to the device) for every shape it is called with, in any order,
beyond the plans it keeps, and fall back to the general kernel for other dtypes."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel, specialize
from keel.kernels import nn
from keel.kernels.registry import KEEPS_INPUTS
from keel.kernels.registry import get as kernel_of
from test_conv_paths import CASES, reference

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def _conv_attrs(strides, pads, dilations, groups, data_format="NCHW", algorithm="EXPLICIT"):
    return {"strides": list(strides), "paddings": list(pads), "padding_algorithm": algorithm,
            "dilations": list(dilations), "groups": groups, "data_format": data_format}


def _special(op_type, attrs, dtypes):
    return specialize(kernel_of(op_type), attrs, tuple(dtypes), False)


def _data(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_specialized_conv2d_is_the_general_kernel(case):
    _, _, xs, ws, strides, pads, dilations, g = case
    attrs = _conv_attrs(strides, pads, dilations, g)
    x, w = _data(xs), _data(ws, seed=1)
    fast = _special("conv2d", attrs, (F32, F32))
    for _ in range(2):  # the plan made, then reused
        got = fast(x, w)
        want = call_kernel("conv2d", {"Input": x, "Filter": w}, attrs)["Output"]
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, reference(x, w, strides, pads, dilations, g), rtol=0,
                               atol=1e-4 * np.abs(got).max())


def test_one_specialized_conv2d_many_shapes_and_dtypes():
    """Shapes alternating, more of them than the plans kept, a batch change, SAME padding,
    and float64 arrays through a float32-specialized op (the general kernel)."""
    attrs = _conv_attrs((1, 1), (0, 0), (1, 1), 1, algorithm="SAME")
    fast = _special("conv2d", attrs, (F32, F32))
    shapes = [((n, 4, h, h + 1), (6, 4, 3, 3)) for n in (1, 3) for h in range(5, 5 + nn._PLANS_KEPT)]
    for rnd in range(2):
        for i, (xs, ws) in enumerate(shapes):
            dtype = np.float64 if (i + rnd) % 5 == 0 else np.float32
            x, w = _data(xs, dtype, seed=i), _data(ws, dtype, seed=i + 100)
            got = fast(x, w)
            want = call_kernel("conv2d", {"Input": x, "Filter": w}, attrs)["Output"]
            assert got.dtype == dtype and got.shape == want.shape == (xs[0], 6, xs[2], xs[3])
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_specialized_depthwise_conv2d():
    attrs = _conv_attrs((2, 1), (1, 1, 2, 0), (1, 2), 1)  # groups is ignored: the input channels
    fast = _special("depthwise_conv2d", attrs, (F32, F32))
    for xs, ws in [((1, 4, 9, 12), (8, 1, 3, 3)), ((2, 3, 8, 7), (3, 1, 3, 2))]:
        x, w = _data(xs), _data(ws, seed=1)
        want = call_kernel("depthwise_conv2d", {"Input": x, "Filter": w}, attrs)["Output"]
        np.testing.assert_allclose(fast(x, w), want, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(want, reference(x, w, (2, 1), (1, 1, 2, 0), (1, 2), xs[1]), rtol=0, atol=1e-4)
    with pytest.raises(ValueError, match=r"depthwise_conv2d: Filter must be \[C\*multiplier, 1, kh, kw\]"):
        fast(_data((1, 4, 9, 12)), _data((6, 1, 3, 3)))


def test_specialized_conv2d_checks_like_the_kernel():
    fast = _special("conv2d", _conv_attrs((1, 1), (0, 0), (1, 1), 1), (F32, F32))
    with pytest.raises(ValueError, match=r"conv2d: Input has 3 channels"):
        fast(_data((1, 3, 5, 5)), _data((4, 2, 3, 3)))
    with pytest.raises(ValueError, match=r"conv2d: output size"):
        fast(_data((1, 3, 2, 2)), _data((4, 3, 3, 3)))


@pytest.mark.parametrize("dtypes, data_format", [((F32, F32), "NHWC"), ((np.dtype(np.float16),) * 2, "NCHW"),
                                                 ((F32, F64), "NCHW")])
def test_conv2d_not_specialized(dtypes, data_format):
    assert _special("conv2d", _conv_attrs((1, 1), (0, 0), (1, 1), 1, data_format), dtypes) is None


POOLS = [
    ("max 2x2 stride 2", (2, 3, 8, 9), dict(ksize=[2, 2], strides=[2, 2], paddings=[0, 0])),
    ("avg 2x2 stride 2", (1, 4, 7, 6), dict(ksize=[2, 2], strides=[2, 2], paddings=[0, 0], pooling_type="avg")),
    ("max 3x3 stride 1 padded", (1, 3, 7, 8), dict(ksize=[3, 3], strides=[1, 1], paddings=[1, 1])),
    ("avg 3x3 stride 2 padded, inclusive", (2, 2, 9, 7), dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1],
                                                              pooling_type="avg", exclusive=False)),
    ("avg 3x3 stride 2 padded, exclusive, ceil", (1, 2, 8, 8), dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1],
                                                                   pooling_type="avg", ceil_mode=True)),
    ("max global", (2, 5, 4, 3), dict(ksize=[1, 1], global_pooling=True)),
    ("avg global", (1, 5, 6, 7), dict(ksize=[1, 1], global_pooling=True, pooling_type="avg")),
    ("avg adaptive 2x3", (1, 3, 7, 8), dict(ksize=[2, 3], adaptive=True, pooling_type="avg")),
    ("max 2x2 NHWC", (2, 6, 8, 3), dict(ksize=[2, 2], strides=[2, 2], paddings=[0, 0], data_format="NHWC")),
]


def _pool_attrs(**given):
    attrs = {"ksize": [2, 2], "strides": [1, 1], "paddings": [0, 0], "ceil_mode": False, "exclusive": True,
             "data_format": "NCHW", "pooling_type": "max", "global_pooling": False, "adaptive": False,
             "padding_algorithm": "EXPLICIT"}
    attrs.update(given)
    return attrs


@pytest.mark.parametrize("name, shape, given", POOLS, ids=[p[0] for p in POOLS])
def test_specialized_pool2d_is_the_general_kernel(name, shape, given):
    attrs = _pool_attrs(**given)
    fast = _special("pool2d", attrs, (F32,))
    bigger = shape[:-2] + (shape[-2] + 2, shape[-1] + 3) if given.get("data_format") != "NHWC" else \
        (shape[0], shape[1] + 2, shape[2] + 3, shape[3])
    for xs in (shape, bigger, shape):
        for dtype in (np.float32, np.float64):
            x = _data(xs, dtype)
            got = fast(x)
            want = call_kernel("pool2d", {"X": x}, attrs)["Out"]
            assert got.dtype == dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=1e-7, atol=0)


def test_pool2d_max_2x2_against_a_loop():
    """An independent check of the plan's numbers: each window's max, written out."""
    x = _data((2, 3, 6, 8))
    got = _special("pool2d", _pool_attrs(strides=[2, 2]), (F32,))(x)
    want = np.array([[[[x[n, c, 2 * i:2 * i + 2, 2 * j:2 * j + 2].max() for j in range(4)] for i in range(3)]
                      for c in range(3)] for n in range(2)])
    np.testing.assert_array_equal(got, want)


def test_specialized_plans_say_they_keep_their_inputs():
    """Specialized with a donated input, conv2d / depthwise_conv2d / pool2d / fused_conv2d leave
    it as it was and say so (kernels/registry.py KEEPS_INPUTS), so the executor may run them
    beside the input's other readers."""
    conv = _conv_attrs((1, 1), (1, 1, 1, 1), (1, 1), 1)
    depthwise = _conv_attrs((1, 1), (2, 2, 2, 2), (1, 1), 4)
    fused = {**_conv_attrs((1, 1), (0, 0, 0, 0), (1, 1), 1), "fuse_activation": "relu", "fuse_alpha": 0.0,
             "fuse_beta": 0.0, "fuse_residual_connection": False}
    pool = {"pooling_type": "avg", "ksize": [1, 1], "global_pooling": False, "strides": [1, 1],
            "paddings": [0, 0], "exclusive": True, "adaptive": True, "ceil_mode": False, "data_format": "NCHW",
            "padding_algorithm": "EXPLICIT"}
    x = _data((1, 4, 3, 20))
    calls = [("conv2d", conv, (x, _data((6, 4, 3, 3), seed=1))),
             ("depthwise_conv2d", depthwise, (x, _data((4, 1, 5, 5), seed=2))),
             ("fused_conv2d", fused, (x, _data((9, 4, 1, 1), seed=3), _data((9,), seed=4))),
             ("pool2d", pool, (x,))]
    for op, attrs, args in calls:
        present = tuple(a.dtype for a in args) + (None,) * (len(kernel_of(op).inputs) - len(args))
        fast = specialize(kernel_of(op), attrs, present, True)
        before = x.copy()
        fast(*args)
        assert getattr(fast, KEEPS_INPUTS, False), op
        np.testing.assert_array_equal(x, before)
