"""Interpolation (issue 32): every mode on integer inputs (PaddlePaddle resizes uint8, and
nearest also int32/int64, in float32 and truncates back; other integer dtypes are refused
when the program is built), 3-D/5-D inputs (linear, nearest and trilinear), and the 1.x
nearest_interp op. References: a separable numpy resize written from PaddlePaddle's
documented source-index rules, in float64."""
import numpy as np
import pytest

from keel.program.errors import DTypeError
from oprun import run
from paddle_static import run_in_paddle  # (imported before PaddlePaddle: selects its legacy IR)


def _source(in_size, out_size, align_corners, align_mode, nearest, scale=None):
    """Per output index: the fractional source position (PaddlePaddle's interpolate docs)."""
    k = np.arange(out_size, dtype=np.float64)
    if align_corners:
        return k * ((in_size - 1) / (out_size - 1)) if out_size > 1 else k * 0
    ratio = 1 / scale if scale else in_size / out_size
    if not nearest and align_mode == 0:
        return np.maximum((k + 0.5) * ratio - 0.5, 0)
    return k * ratio


def resize_ref(x, sizes, nearest, align_corners=True, align_mode=1, scale=None):
    """x [N, C, *spatial] resized to `sizes`, in float64."""
    out = x.astype(np.float64)
    for axis, size in zip(range(2, x.ndim), sizes):
        n_in = out.shape[axis]
        src = _source(n_in, size, align_corners, align_mode, nearest, scale)
        if nearest:
            idx = np.floor(src + 0.5) if align_corners else np.floor(src)
            out = np.take(out, np.minimum(idx.astype(int), n_in - 1), axis=axis)
            continue
        lo = np.minimum(np.floor(src).astype(int), n_in - 1)
        hi = np.minimum(lo + 1, n_in - 1)
        w = (src - lo).reshape([-1 if a == axis else 1 for a in range(out.ndim)])
        out = np.take(out, lo, axis=axis) * (1 - w) + np.take(out, hi, axis=axis) * w
    return out


_ATTRS = {3: ("linear_interp_v2", "linear", ["out_w"]), 4: ("bilinear_interp_v2", "bilinear", ["out_h", "out_w"]),
          5: ("trilinear_interp_v2", "trilinear", ["out_d", "out_h", "out_w"])}


def _linear(x, sizes, **attrs):
    op, method, names = _ATTRS[x.ndim]
    return run(op, {"X": x}, {"interp_method": method, **dict(zip(names, sizes)), **attrs})["Out"]


def _nearest(x, sizes, op="nearest_interp_v2", **attrs):
    names = ["out_d", "out_h", "out_w"][5 - x.ndim:]
    return run(op, {"X": x}, {"interp_method": "nearest", **dict(zip(names, sizes)), **attrs})["Out"]


MODES = [dict(align_corners=True, align_mode=1), dict(align_corners=False, align_mode=0),
         dict(align_corners=False, align_mode=1)]
SHAPES = [((2, 3, 7), (11,)), ((1, 2, 5, 7), (9, 4)), ((1, 2, 3, 5, 4), (5, 3, 7))]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,sizes", SHAPES)
def test_linear_modes_float(shape, sizes, mode):
    x = np.random.default_rng(0).uniform(-3, 3, shape)
    # PaddlePaddle's weights are float32 values: within 1e-5 of float64's on values up to 3
    np.testing.assert_allclose(_linear(x, sizes, **mode), resize_ref(x, sizes, False, **mode),
                               rtol=0, atol=1e-5)


@pytest.mark.parametrize("mode", MODES[:2])
@pytest.mark.parametrize("shape,sizes", SHAPES)
def test_nearest_modes_float(shape, sizes, mode):
    x = np.random.default_rng(1).uniform(-3, 3, shape)
    np.testing.assert_array_equal(_nearest(x, sizes, **mode), resize_ref(x, sizes, True, **mode))


@pytest.mark.parametrize("mode", MODES)
def test_1d_linear_on_uint8_takes_the_lower_neighbour(mode):
    # PaddlePaddle's linear_interp_v2 kernel holds its weights in the input type: on uint8
    # they truncate to 1 for the lower source index and 0 for the upper one
    x = np.random.default_rng(7).integers(0, 256, (2, 3, 7)).astype(np.uint8)
    got = _linear(x, (11,), **mode)
    src = _source(7, 11, mode["align_corners"], mode["align_mode"], nearest=False)
    lower = np.minimum(np.floor(src).astype(int), 6)
    exact = np.isclose(src, np.round(src))           # weight 1 on the upper index when exact
    lower[exact] = np.minimum(np.round(src[exact]).astype(int), 6)
    np.testing.assert_array_equal(got, x[..., lower])


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,sizes", SHAPES[1:])
def test_linear_on_uint8_is_float32_truncated(shape, sizes, mode):
    x = np.random.default_rng(2).integers(0, 256, shape).astype(np.uint8)
    got = _linear(x, sizes, **mode)
    assert got.dtype == np.uint8
    np.testing.assert_array_equal(got, _linear(x.astype(np.float32), sizes, **mode).astype(np.uint8))
    ref = resize_ref(x, sizes, False, **mode)
    assert np.all(np.abs(got - np.trunc(ref)) <= 1)   # within float32's rounding of the weights
    assert np.mean(got == np.trunc(ref)) > 0.9


def test_issue_bilinear_uint8_case():
    # out_h=64, out_w=32, align_corners=True: nearly every output was 0
    x = np.random.default_rng(3).integers(0, 256, (2, 3, 8, 16)).astype(np.uint8)
    got = _linear(x, (64, 32), align_corners=True, align_mode=1)
    ref = np.trunc(resize_ref(x, (64, 32), False))
    assert np.all(np.abs(got - ref) <= 1) and np.mean(got == ref) > 0.9


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64])
@pytest.mark.parametrize("shape,sizes", SHAPES)
def test_nearest_on_integers(shape, sizes, dtype):
    x = np.random.default_rng(4).integers(0, 100, shape).astype(dtype)
    for mode in MODES[:2]:
        got = _nearest(x, sizes, **mode)
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, resize_ref(x, sizes, True, **mode).astype(dtype))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.bool_])
def test_linear_refuses_integers_paddle_does_not_run(dtype):
    with pytest.raises(DTypeError, match="bilinear_interp_v2: takes .*uint8 input.*int|bool"):
        _linear(np.zeros((1, 1, 2, 2), dtype), (3, 3))


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.bool_])
def test_nearest_refuses_integers_paddle_does_not_run(dtype):
    with pytest.raises(DTypeError, match="nearest_interp_v2: takes .*int32, int64, uint8 input"):
        _nearest(np.zeros((1, 1, 2, 2), dtype), (3, 3))


def test_nearest_interp_v1_scale_uses_in_over_out():
    # 1.x: out = int(in * scale), source index floor(k * in / out) (not k / scale)
    x = np.random.default_rng(5).uniform(size=(1, 2, 5, 3))
    got = run("nearest_interp", {"X": x}, {"interp_method": "nearest", "scale": 1.5,
                                          "align_corners": False})["Out"]
    assert got.shape == (1, 2, 7, 4)
    np.testing.assert_array_equal(got, resize_ref(x, (7, 4), True, align_corners=False))
    got = run("nearest_interp", {"X": x}, {"interp_method": "nearest", "out_h": 4, "out_w": 6})["Out"]
    np.testing.assert_array_equal(got, resize_ref(x, (4, 6), True, align_corners=True))


def test_shapes_inferred_for_5d():
    from shapecheck import out
    assert out("trilinear_interp_v2", {"X": ([2, 3, 4, 5, 6], "float32")},
               {"out_d": 3, "out_h": 7, "out_w": 2, "interp_method": "trilinear"}) == ([2, 3, 3, 7, 2], "float32")
    assert out("nearest_interp_v2", {"X": ([2, 4, 5, 6, 3], "uint8")},
               {"scale": [2.0], "interp_method": "nearest", "data_layout": "NDHWC"}) == ([2, 8, 10, 12, 3], "uint8")


@pytest.mark.paddle
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,sizes", SHAPES)
def test_uint8_matches_paddle(shape, sizes, mode):
    paddle = pytest.importorskip("paddle")
    x = np.random.default_rng(6).integers(0, 256, shape).astype(np.uint8)
    method = {3: "linear", 4: "bilinear", 5: "trilinear"}[x.ndim]
    want = paddle.nn.functional.interpolate(paddle.to_tensor(x), size=list(sizes), mode=method,
                                            align_corners=mode["align_corners"],
                                            align_mode=mode["align_mode"],
                                            data_format={3: "NCW", 4: "NCHW", 5: "NCDHW"}[x.ndim]).numpy()
    got = _linear(x, sizes, **mode)
    if x.ndim == 4:
        np.testing.assert_array_equal(got, want)
        return
    # trilinear: Keel's separable passes add in another order than PaddlePaddle's 8-term sum,
    # so a value within an ulp of an integer may truncate to its neighbour; 1-D: a source
    # position that is an integer in float64 may fall an ulp short of it in PaddlePaddle's
    # float32 (the lower neighbour then wins)
    if x.ndim == 5:
        assert np.all(np.abs(got.astype(int) - want) <= 1)
    assert np.mean(got == want) > 0.9


@pytest.mark.paddle
@pytest.mark.parametrize("attrs", [{"scale": 1.5, "align_corners": False}, {"out_h": 4, "out_w": 6},
                                   {"scale": 0.7}, {"scale": 1.7}])
def test_nearest_interp_v1_matches_paddle(attrs):
    paddle = pytest.importorskip("paddle")
    from oprun import build
    x = np.random.default_rng(5).uniform(size=(1, 2, 5, 3)).astype(np.float32)
    attrs = {"interp_method": "nearest", **attrs}
    main, feed, outs, _ = build("nearest_interp", {"X": x}, attrs)   # Keel's program, run by PaddlePaddle
    (want,), = run_in_paddle(paddle, main, {}, [feed], [outs["Out"][0].name])[0]
    np.testing.assert_array_equal(run("nearest_interp", {"X": x}, attrs)["Out"], want)
