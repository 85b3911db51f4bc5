"""Gradient checks: convolution, pooling, normalization, dropout, embedding, prelu, lrn,
pixel_shuffle and interpolation (program/ops/nn.py, kernels/nn.py), plus direct kernel
tests of the conventions a finite difference cannot see (max-pool ties, padding_idx rows,
prelu at 0, batch_norm's running-statistics mode) and of the gradient ops' slots."""
import json
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope
from keel.executor.kernel_call import call_kernel
from gradcheck import Case, away_from, rand, run_case
from keel.program.ops import registry

_POS = dict(low=0.5, high=2.0)
_CONV = dict(strides=[1, 1], paddings=[0, 0], padding_algorithm="EXPLICIT", dilations=[1, 1], groups=1,
             data_format="NCHW")
_POOL = dict(pooling_type="max", ksize=[2, 2], strides=[1, 1], paddings=[0, 0], global_pooling=False,
             exclusive=True, adaptive=False, ceil_mode=False, data_format="NCHW",
             padding_algorithm="EXPLICIT")
_INTERP = dict(data_layout="NCHW", out_h=0, out_w=0, scale=[], interp_method="bilinear",
               align_corners=True, align_mode=1)


def _conv(x, w, op="conv2d", **attrs):
    return dict(op_type=op, inputs={"Input": x, "Filter": w}, attrs=dict(_CONV, **attrs))


def _bn_inputs(shape, layout="NCHW", seed=0):
    c = shape[1] if layout == "NCHW" or len(shape) == 2 else shape[-1]
    return {"X": rand(*shape, seed=seed) * 2 + 0.5, "Scale": rand(c, seed=seed + 1),
            "Bias": rand(c, seed=seed + 2), "Mean": rand(c, seed=seed + 3),
            "Variance": rand(c, seed=seed + 4, **_POS)}


def _norm(op, x, c, **attrs):
    return Case(op, {"X": x, "Scale": rand(c, seed=11), "Bias": rand(c, seed=12)}, attrs,
                id=f"{op} {attrs}")


def _interp(op, x, **attrs):
    return Case(op, {"X": x}, dict(_INTERP, interp_method="nearest" if op.startswith("nearest") else "bilinear",
                                   **attrs), id=f"{op} {attrs}")


CASES = [
    # -- conv2d / depthwise_conv2d: strides, paddings (2 and 4 values), SAME/VALID, dilations,
    #    groups, NCHW/NHWC
    Case(**_conv(rand(2, 3, 5, 5), rand(4, 3, 3, 3, seed=1), paddings=[1, 1]), id="conv2d pad 1"),
    Case(**_conv(rand(2, 4, 7, 6), rand(6, 2, 3, 2, seed=1), strides=[2, 1], paddings=[1, 0, 2, 1],
                 groups=2, dilations=[2, 1]), id="conv2d stride asym-pad groups dilation"),
    Case(**_conv(rand(2, 3, 7, 6), rand(4, 3, 2, 3, seed=1), strides=[2, 2], paddings=[3, 3],
                 padding_algorithm="VALID"), id="conv2d VALID"),
    Case(**_conv(rand(2, 7, 6, 4), rand(6, 4, 3, 3, seed=1), strides=[2, 2], padding_algorithm="SAME",
                 dilations=[2, 2], data_format="NHWC"), id="conv2d SAME NHWC"),
    Case(**_conv(rand(2, 6, 5, 4), rand(6, 2, 3, 2, seed=1), strides=[1, 2], paddings=[0, 1, 1, 0],
                 groups=2, data_format="NHWC"), id="conv2d groups NHWC"),
    Case(**_conv(rand(2, 4, 4, 5), rand(3, 4, 1, 1, seed=1)), id="conv2d 1x1"),
    Case(**_conv(rand(2, 3, 6, 6), rand(3, 1, 3, 3, seed=1), "depthwise_conv2d", strides=[2, 2],
                 paddings=[1, 1], groups=3), id="depthwise"),
    Case(**_conv(rand(2, 2, 5, 5), rand(4, 1, 3, 3, seed=1), "depthwise_conv2d", paddings=[1, 2, 0, 1],
                 groups=2, dilations=[1, 2]), id="depthwise multiplier 2"),
    Case(**_conv(rand(2, 5, 6, 3), rand(3, 1, 3, 3, seed=1), "depthwise_conv2d", paddings=[1, 1],
                 groups=3, data_format="NHWC"), id="depthwise NHWC"),
    # -- conv2d_transpose: output_size / output_padding, groups, NHWC
    Case(**_conv(rand(2, 4, 3, 3), rand(4, 3, 3, 3, seed=1), "conv2d_transpose", strides=[2, 2],
                 paddings=[1, 1]), id="conv2d_transpose"),
    Case(**_conv(rand(2, 4, 3, 4), rand(4, 2, 3, 2, seed=1), "conv2d_transpose", strides=[2, 2],
                 paddings=[1, 0, 0, 1], groups=2, dilations=[1, 2], output_size=[6, 8]),
         id="conv2d_transpose groups output_size"),
    Case(**_conv(rand(2, 3, 4, 4), rand(4, 2, 3, 3, seed=1), "conv2d_transpose", strides=[2, 3],
                 paddings=[1, 1], output_padding=[1, 2], data_format="NHWC"),
         id="conv2d_transpose output_padding NHWC"),
    Case(**_conv(rand(2, 2, 3, 3), rand(2, 3, 2, 2, seed=1), "conv2d_transpose", padding_algorithm="SAME",
                 strides=[2, 2]), id="conv2d_transpose SAME"),
    # -- pool2d: max/avg, global, adaptive, ceil_mode, exclusive, paddings, NHWC
    Case("pool2d", {"X": rand(2, 3, 6, 6)}, dict(_POOL, strides=[2, 2]), id="max 2x2/2"),
    Case("pool2d", {"X": rand(2, 3, 6, 5)}, dict(_POOL, ksize=[3, 3], strides=[2, 2], paddings=[1, 1],
                                                  ceil_mode=True), id="max 3x3/2 pad ceil"),
    Case("pool2d", {"X": rand(2, 2, 6, 6)}, dict(_POOL, ksize=[3, 2], strides=[1, 1]), id="max overlapping"),
    Case("pool2d", {"X": rand(2, 7, 6, 3)}, dict(_POOL, ksize=[3, 3], strides=[2, 2], paddings=[1, 0, 0, 1],
                                                  data_format="NHWC"), id="max asym-pad NHWC"),
    Case("pool2d", {"X": rand(2, 3, 7, 6)}, dict(_POOL, ksize=[3, 3], strides=[2, 2], padding_algorithm="SAME"),
         id="max SAME"),
    Case("pool2d", {"X": rand(2, 3, 4, 5)}, dict(_POOL, global_pooling=True), id="max global"),
    Case("pool2d", {"X": rand(2, 3, 7, 5)}, dict(_POOL, ksize=[3, 2], adaptive=True), id="max adaptive"),
    # (adaptive max windows are ksize cells from i*stride, as PaddlePaddle's kernel: an output
    # larger than the input has empty windows at -FLT_MAX, which finite differences cannot
    # see through; test_kernels_nn checks those against PaddlePaddle's recorded gradients)
    Case("pool2d", {"X": rand(1, 2, 7, 8)}, dict(_POOL, ksize=[3, 2], strides=[2, 3], paddings=[1, 1],
                                                 adaptive=True), id="max adaptive strided"),
    Case("pool2d", {"X": rand(2, 7, 5, 3)}, dict(_POOL, ksize=[4, 3], adaptive=True, data_format="NHWC"),
         id="max adaptive NHWC"),
    Case("pool2d", {"X": rand(2, 3, 6, 6)}, dict(_POOL, pooling_type="avg", strides=[2, 2]), id="avg 2x2/2"),
    Case("pool2d", {"X": rand(2, 3, 7, 6)}, dict(_POOL, pooling_type="avg", ksize=[3, 3], strides=[2, 2],
                                                  paddings=[1, 1]), id="avg exclusive pad"),
    Case("pool2d", {"X": rand(2, 3, 7, 6)}, dict(_POOL, pooling_type="avg", ksize=[3, 3], strides=[2, 2],
                                                  paddings=[1, 1], exclusive=False), id="avg non-exclusive pad"),
    # ceil_mode's extra window and a trailing padding larger than the leading one: the
    # divisor stops at the input's end plus the leading padding, as in PaddlePaddle
    Case("pool2d", {"X": rand(2, 3, 6, 7)}, dict(_POOL, pooling_type="avg", ksize=[3, 3], strides=[2, 2],
                                                  paddings=[0, 1, 1, 1], ceil_mode=True, exclusive=False),
         id="avg non-exclusive ceil asymmetric"),
    Case("pool2d", {"X": rand(2, 3, 7, 6)}, dict(_POOL, pooling_type="avg", ksize=[3, 2], strides=[2, 2],
                                                  paddings=[0, 1], ceil_mode=True), id="avg exclusive ceil"),
    Case("pool2d", {"X": rand(2, 7, 6, 3)}, dict(_POOL, pooling_type="avg", ksize=[3, 3], strides=[1, 2],
                                                  paddings=[1, 1], exclusive=False, data_format="NHWC"),
         id="avg non-exclusive overlapping NHWC"),
    Case("pool2d", {"X": rand(2, 3, 4, 5)}, dict(_POOL, pooling_type="avg", global_pooling=True), id="avg global"),
    Case("pool2d", {"X": rand(2, 3, 7, 5)}, dict(_POOL, pooling_type="avg", ksize=[3, 2], adaptive=True),
         id="avg adaptive"),
    Case("pool2d", {"X": rand(2, 3, 5, 4)}, dict(_POOL, pooling_type="avg", ksize=[2, 3], adaptive=True,
                                                  data_format="NHWC"), id="avg adaptive NHWC"),
    # -- batch_norm (run with MeanOut/VarianceOut bound to Mean/Variance: see _run)
    Case("batch_norm", _bn_inputs((4, 3, 3, 2)), {}, id="batch_norm train"),
    Case("batch_norm", _bn_inputs((4, 3, 2, 5), "NHWC"), {"data_layout": "NHWC"}, id="batch_norm train NHWC"),
    Case("batch_norm", _bn_inputs((6, 4)), {}, id="batch_norm train 2-D"),
    Case("batch_norm", _bn_inputs((3, 2, 5)), {}, id="batch_norm train 3-D"),
    Case("batch_norm", _bn_inputs((4, 3, 3, 2)), {"is_test": True}, id="batch_norm is_test"),
    Case("batch_norm", _bn_inputs((4, 3, 2, 3), "NHWC"), {"use_global_stats": True, "data_layout": "NHWC"},
         id="batch_norm use_global_stats NHWC"),
    # -- layer_norm, group_norm, instance_norm, affine_channel, lrn
    _norm("layer_norm", rand(2, 3, 4), 12, begin_norm_axis=1),
    _norm("layer_norm", rand(2, 3, 4), 4, begin_norm_axis=2),
    Case("layer_norm", {"X": rand(3, 5)}, {"begin_norm_axis": 1}, id="layer_norm no scale/bias"),
    Case("layer_norm", {"X": rand(2, 3, 4), "Scale": rand(4, seed=1)}, {"begin_norm_axis": 2},
         id="layer_norm scale only"),
    _norm("group_norm", rand(2, 4, 3, 2), 4, groups=2),
    _norm("group_norm", rand(2, 3, 2, 6), 6, groups=3, data_layout="NHWC"),
    Case("group_norm", {"X": rand(2, 4, 5)}, {"groups": 4}, id="group_norm no scale/bias"),
    _norm("instance_norm", rand(2, 3, 3, 2), 3),
    Case("instance_norm", {"X": rand(2, 3, 4)}, {}, id="instance_norm no scale/bias"),
    _norm("affine_channel", rand(2, 3, 3, 2), 3),
    _norm("affine_channel", rand(2, 3, 2, 4), 4, data_layout="NHWC"),
    _norm("affine_channel", rand(5, 3), 3),
    Case("lrn", {"X": rand(2, 6, 3, 2)}, {"n": 5, "k": 1.0, "alpha": 0.3, "beta": 0.75}, id="lrn n=5"),
    Case("lrn", {"X": rand(2, 3, 2, 4)}, {"n": 3, "k": 2.0, "alpha": 0.5, "beta": 0.6, "data_format": "NHWC"},
         id="lrn NHWC"),
    # -- dropout (fixed seed: the same mask on every run)
    Case("dropout", {"X": rand(3, 4, 5)}, {"dropout_prob": 0.4, "fix_seed": True, "seed": 3,
                                           "dropout_implementation": "upscale_in_train"}, id="dropout upscale"),
    Case("dropout", {"X": rand(3, 4, 5)}, {"dropout_prob": 0.3, "fix_seed": True, "seed": 5},
         id="dropout downgrade_in_infer"),
    # -- embedding (Ids are not differentiated), prelu
    Case("lookup_table_v2", {"W": rand(6, 3), "Ids": np.array([[1, 2, 1], [0, 5, 2]])}, {"padding_idx": 2},
         id="lookup_table_v2 padding_idx"),
    Case("lookup_table_v2", {"W": rand(5, 4), "Ids": np.array([3, 3, 0, 3], dtype=np.int32)}, {},
         id="lookup_table_v2 repeated ids"),
    Case("prelu", {"X": away_from(rand(2, 3, 2, 2), 0), "Alpha": rand(1, seed=1)}, {"mode": "all"}, id="prelu all"),
    Case("prelu", {"X": away_from(rand(2, 3, 2, 2), 0), "Alpha": rand(3, seed=1)}, {"mode": "channel"},
         id="prelu channel"),
    Case("prelu", {"X": away_from(rand(2, 2, 2, 3), 0), "Alpha": rand(3, seed=1)},
         {"mode": "channel", "data_format": "NHWC"}, id="prelu channel NHWC"),
    Case("prelu", {"X": away_from(rand(2, 3, 2, 2), 0), "Alpha": rand(1, 3, 2, 2, seed=1)}, {"mode": "element"},
         id="prelu element"),
    # -- pixel_shuffle, interpolation (the size/scale tensors are not differentiated)
    Case("pixel_shuffle", {"X": rand(2, 8, 2, 3)}, {"upscale_factor": 2}, id="pixel_shuffle"),
    Case("pixel_shuffle", {"X": rand(2, 2, 3, 9)}, {"upscale_factor": 3, "data_format": "NHWC"},
         id="pixel_shuffle NHWC"),
    _interp("bilinear_interp_v2", rand(2, 2, 3, 4), out_h=5, out_w=7),
    _interp("bilinear_interp_v2", rand(2, 2, 3, 4), out_h=5, out_w=7, align_corners=False, align_mode=0),
    _interp("bilinear_interp_v2", rand(2, 2, 5, 4), out_h=3, out_w=7, align_corners=False, align_mode=1),
    _interp("bilinear_interp_v2", rand(2, 2, 3, 4), scale=[1.7, 2.5], align_corners=False, align_mode=0),
    _interp("bilinear_interp_v2", rand(2, 6, 7, 2), data_layout="NHWC", out_h=4, out_w=3, align_corners=False),
    _interp("nearest_interp_v2", rand(2, 2, 3, 4), out_h=5, out_w=7, align_corners=False),
    _interp("nearest_interp_v2", rand(2, 2, 3, 4), out_h=5, out_w=7, align_corners=True),
    _interp("nearest_interp_v2", rand(2, 2, 7, 6), scale=[0.6, 0.5], align_corners=False),
    _interp("nearest_interp_v2", rand(2, 3, 4, 2), data_layout="NHWC", out_h=7, out_w=5, align_corners=False),
]

_INPLACE = {"batch_norm": {"MeanOut": "Mean", "VarianceOut": "Variance"}}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    case.inplace = case.inplace or _INPLACE.get(case.op_type, {})
    run_case(case)


# ============================================================================ direct kernel tests

def _pool_grad(x, dout, **attrs):
    attrs = dict(_POOL, **attrs)
    out = call_kernel("pool2d", {"X": x}, attrs)["Out"]
    return out, call_kernel("pool2d_grad", {"X": x, "Out": out, "Out@GRAD": dout}, attrs)["X@GRAD"]


def test_max_pool_tie_goes_to_first_in_window():
    """Paddle's MaxPool2dGradFunctor: the first input equal to Out, scanning the window row
    by row, gets the whole gradient; the other equal inputs get none."""
    x = np.array([[[[1., 3., 3., 0.],
                    [3., 2., 0., 3.],
                    [5., 5., 1., 1.],
                    [5., 4., 1., 1.]]]])
    dout = np.array([[[[10., 20.], [30., 40.]]]])
    _, dx = _pool_grad(x, dout, strides=[2, 2])
    want = np.zeros_like(x)
    want[0, 0, 0, 1] = 10    # 3 at (0,1) before (1,0)
    want[0, 0, 0, 2] = 20    # 3 at (0,2) before (1,3)
    want[0, 0, 2, 0] = 30    # 5 at (2,0) before (2,1) and (3,0)
    want[0, 0, 2, 2] = 40    # all four equal: the first
    np.testing.assert_array_equal(dx, want)


def test_max_pool_overlapping_windows_accumulate_and_padding_gets_nothing():
    x = np.array([[[[-3., -1., -2.],
                    [-4., -5., -6.],
                    [-7., -8., -9.]]]])
    dout = np.arange(1., 10.).reshape(1, 1, 3, 3)
    out, dx = _pool_grad(x, dout, ksize=[3, 3], paddings=[1, 1])
    assert out.max() == -1.0  # the -FLT_MAX padding never wins
    want = np.zeros_like(x)
    # windows centred at (r, c) cover rows r-1..r+1, cols c-1..c+1 of x
    win_max = {(r, c): max(((x[0, 0, i, j], (i, j)) for i in range(max(r - 1, 0), min(r + 2, 3))
                            for j in range(max(c - 1, 0), min(c + 2, 3))), key=lambda t: t[0])[1]
               for r in range(3) for c in range(3)}
    for (r, c), (i, j) in win_max.items():
        want[0, 0, i, j] += dout[0, 0, r, c]
    np.testing.assert_array_equal(dx, want)


def test_max_pool_nhwc_ties_match_nchw():
    rng = np.random.default_rng(0)
    x = rng.integers(-2, 3, (2, 3, 7, 6)).astype(np.float64)  # many ties
    kw = dict(ksize=[3, 3], strides=[2, 2], paddings=[1, 1], ceil_mode=True)
    out = call_kernel("pool2d", {"X": x}, dict(_POOL, **kw))["Out"]
    dout = rng.uniform(size=out.shape)
    _, dx = _pool_grad(x, dout, **kw)
    t = (0, 2, 3, 1)
    _, dx_nhwc = _pool_grad(x.transpose(t).copy(), dout.transpose(t).copy(), data_format="NHWC", **kw)
    np.testing.assert_array_equal(dx_nhwc, dx.transpose(t))
    assert dx.sum() == pytest.approx(dout.sum())  # every window routes all of its gradient


def test_adaptive_max_pool_ties_go_to_first_in_bin():
    x = np.ones((1, 1, 3, 3))
    _, dx = _pool_grad(x, np.array([[[[1., 2.], [3., 4.]]]]), ksize=[2, 2], adaptive=True)
    # bins [0, 2) x [0, 2), [0, 2) x [1, 3), [1, 3) x [0, 2), [1, 3) x [1, 3): first cells
    want = np.zeros((1, 1, 3, 3))
    want[0, 0, 0, 0], want[0, 0, 0, 1], want[0, 0, 1, 0], want[0, 0, 1, 1] = 1, 2, 3, 4
    np.testing.assert_array_equal(dx, want)


def test_avg_pool_exclusive_and_not():
    x = np.zeros((1, 1, 3, 3))
    dout = np.ones((1, 1, 2, 2))
    _, dx = _pool_grad(x, dout, pooling_type="avg", ksize=[2, 2], strides=[2, 2], paddings=[1, 1])
    # windows clipped to 1, 2, 2, 4 cells: each cell gets 1/size of every window it is in
    np.testing.assert_allclose(dx[0, 0], [[1, .5, .5], [.5, .25, .25], [.5, .25, .25]], rtol=1e-7)
    _, dx = _pool_grad(x, dout, pooling_type="avg", ksize=[2, 2], strides=[2, 2], paddings=[1, 1],
                       exclusive=False)
    np.testing.assert_allclose(dx, np.full_like(x, 0.25), rtol=1e-7)


def test_lookup_table_v2_grad_rows():
    w = np.zeros((5, 2), np.float32)
    ids = np.array([[1, 3, 1], [4, 1, 3]])
    dout = np.arange(12, dtype=np.float32).reshape(2, 3, 2)
    dw = call_kernel("lookup_table_v2_grad", {"Ids": ids, "W": w, "Out@GRAD": dout}, {"padding_idx": 3})["W@GRAD"]
    assert dw.dtype == np.float32 and dw.shape == w.shape
    want = np.zeros((5, 2), np.float32)
    want[1] = dout[0, 0] + dout[0, 2] + dout[1, 1]   # repeated ids accumulate
    want[4] = dout[1, 0]
    np.testing.assert_array_equal(dw, want)           # row 3 = padding_idx stays zero; 0 and 2 unused
    dw = call_kernel("lookup_table_v2_grad", {"Ids": ids, "W": w, "Out@GRAD": dout}, {"padding_idx": -1})["W@GRAD"]
    np.testing.assert_array_equal(dw[3], dout[0, 1] + dout[1, 2])


def test_prelu_grad_at_zero():
    """x == 0 takes the negative branch: dX = alpha * dOut, dAlpha += 0 * dOut."""
    x = np.array([[-2.0, 0.0, 3.0]])
    g = call_kernel("prelu_grad", {"X": x, "Alpha": np.array([0.25]), "Out@GRAD": np.array([[1.0, 2.0, 4.0]])},
                    {"mode": "all"})
    np.testing.assert_array_equal(g["X@GRAD"], [[0.25, 0.5, 4.0]])
    np.testing.assert_array_equal(g["Alpha@GRAD"], [-2.0])


def _bn_grad(attrs, x, dy, mean=None, variance=None, saved=None):
    c = x.shape[1]
    scale, bias = np.linspace(0.5, 1.5, c), np.zeros(c)
    mean = np.zeros(c) if mean is None else mean
    variance = np.ones(c) if variance is None else variance
    saved_mean, saved_inv = saved if saved is not None else (np.zeros(c), np.zeros(c))
    return scale, call_kernel("batch_norm_grad", {
        "X": x, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": variance, "SavedMean": saved_mean,
        "SavedVariance": saved_inv, "Y@GRAD": dy}, dict(attrs, epsilon=1e-5))


@pytest.mark.parametrize("attrs", [{"is_test": True}, {"use_global_stats": True},
                                   {"is_test": True, "trainable_statistics": True}])
def test_batch_norm_grad_running_statistics(attrs):
    """is_test or use_global_stats: the running Mean/Variance are constants (Paddle's grad
    kernel ignores trainable_statistics); SavedMean/SavedVariance are not read."""
    rng = np.random.default_rng(0)
    x, dy = rng.standard_normal((4, 3, 2, 2)), rng.standard_normal((4, 3, 2, 2))
    mean, var = rng.standard_normal(3), rng.uniform(0.5, 2, 3)
    scale, g = _bn_grad(attrs, x, dy, mean, var, saved=(np.full(3, 9.0), np.full(3, 9.0)))
    inv = 1 / np.sqrt(var + 1e-5)
    np.testing.assert_allclose(g["X@GRAD"], dy * (scale * inv)[None, :, None, None], rtol=1e-12)
    np.testing.assert_allclose(g["Scale@GRAD"],
                               (dy * (x - mean[None, :, None, None])).sum(axis=(0, 2, 3)) * inv, rtol=1e-12)
    np.testing.assert_allclose(g["Bias@GRAD"], dy.sum(axis=(0, 2, 3)), rtol=1e-12)


def test_batch_norm_grad_one_value_per_channel_copies_dy():
    x, dy = np.array([[1.0, 2.0, 3.0]]), np.array([[0.5, -1.0, 2.0]])
    _, g = _bn_grad({}, x, dy)
    np.testing.assert_array_equal(g["X@GRAD"], dy)


def test_batch_norm_grad_skips_unbound_outputs():
    from keel.executor.kernel_call import bind
    rng = np.random.default_rng(0)
    x, dy = rng.standard_normal((4, 3)), rng.standard_normal((4, 3))
    fn, _ = bind("batch_norm_grad", {"epsilon": 1e-5}, need={"Scale@GRAD", "Bias@GRAD"})
    dx, dscale, dbias = fn(x, np.ones(3), np.zeros(3), None, None, x.mean(0), 1 / np.sqrt(x.var(0) + 1e-5),
                           None, None, dy)
    assert dx is None and dscale.shape == (3,) and dbias.shape == (3,)


def test_group_norm_zero_scale_follows_paddle():
    """Paddle's CPU kernel recovers xhat from Y as (Y - Bias) / Scale, or as Y - Bias = 0
    where Scale == 0: that channel's Scale@GRAD is 0 and its X@GRAD has no xhat term."""
    rng = np.random.default_rng(0)
    x, dy = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 3))
    scale, bias = np.array([0.0, 0.5, 2.0, 1.0]), rng.standard_normal(4)
    attrs = {"groups": 2, "epsilon": 1e-5}
    fwd = call_kernel("group_norm", {"X": x, "Scale": scale, "Bias": bias}, attrs)
    g = call_kernel("group_norm_grad", {"X": x, "Scale": scale, "Bias": bias, "Y": fwd["Y"], "Mean": fwd["Mean"],
                                        "Variance": fwd["Variance"], "Y@GRAD": dy}, attrs)
    assert g["Scale@GRAD"][0] == 0.0 and g["Scale@GRAD"][1] != 0.0
    inv = 1 / np.sqrt(fwd["Variance"][0, 0] + 1e-5)
    gdy = dy[0, :2] * scale[:2, None]
    np.testing.assert_allclose(g["X@GRAD"][0, 0], inv * (gdy[0] - gdy.mean()), rtol=1e-12)


def test_dropout_grad():
    dout = np.arange(1.0, 7.0).reshape(2, 3).astype(np.float32)
    mask = np.array([[1, 0, 1], [0, 1, 1]], dtype=np.uint8)

    def grad(**attrs):
        return call_kernel("dropout_grad", {"Mask": mask, "Out@GRAD": dout},
                           dict({"dropout_prob": 0.25}, **attrs))["X@GRAD"]
    np.testing.assert_array_equal(grad(), dout * mask)
    np.testing.assert_allclose(grad(dropout_implementation="upscale_in_train"), dout * mask / 0.75, rtol=1e-6)
    np.testing.assert_array_equal(grad(dropout_prob=1.0, dropout_implementation="upscale_in_train"), 0 * dout)
    np.testing.assert_array_equal(grad(is_test=True, dropout_implementation="upscale_in_train"), dout)
    np.testing.assert_array_equal(grad(is_test=True), dout * np.float32(0.75))
    assert grad(is_test=True).dtype == np.float32


@pytest.mark.parametrize("op,tensors,attrs", [
    ("bilinear_interp_v2", {"OutSize": np.array([6, 5], dtype=np.int32)}, dict(out_h=2, out_w=2, align_corners=False)),
    ("bilinear_interp_v2", {"SizeTensor": [np.array([5], np.int32), np.array([2], np.int32)]}, dict(out_h=2, out_w=2)),
    ("bilinear_interp_v2", {"Scale": np.array([2.0, 1.5], np.float32)}, dict(align_corners=False, align_mode=0)),
    ("nearest_interp_v2", {"OutSize": np.array([2, 7], dtype=np.int32)}, dict(scale=[2.0, 2.0])),
    ("nearest_interp_v2", {"Scale": np.array([0.7], np.float32)}, dict(align_corners=False)),
])
def test_interp_grad_with_size_tensors_is_the_adjoint(op, tensors, attrs):
    """Run-time sizes (OutSize > SizeTensor > Scale tensor > attributes, as the forward):
    <resize(x), dy> == <x, resize_grad(dy)>. (gradcheck needs static output shapes.)"""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 2, 3, 4))
    attrs = dict(_INTERP, interp_method="nearest" if op.startswith("nearest") else "bilinear", **attrs)
    y = call_kernel(op, dict(tensors, X=x), attrs)["Out"]
    dy = rng.standard_normal(y.shape)
    dx = call_kernel(op + "_grad", dict(tensors, X=x, **{"Out@GRAD": dy}), attrs)["X@GRAD"]
    assert dx.shape == x.shape
    np.testing.assert_allclose((y * dy).sum(), (x * dx).sum(), rtol=1e-10)


def test_conv2d_grad_need():
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((2, 3, 5, 5)), rng.standard_normal((4, 3, 3, 3))
    dy = rng.standard_normal((2, 4, 3, 3))
    from keel.executor.kernel_call import bind
    fn, _ = bind("conv2d_grad", _CONV, need={"Filter@GRAD"})
    dx, dw = fn(x, w, dy)
    assert dx is None and dw.shape == w.shape
    full = call_kernel("conv2d_grad", {"Input": x, "Filter": w, "Output@GRAD": dy}, _CONV)
    np.testing.assert_allclose(dw, full["Filter@GRAD"], rtol=1e-12)


def test_grad_kernels_keep_float32():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 4, 3, 3)).astype(np.float32)
    y = call_kernel("conv2d", {"Input": x, "Filter": w}, _CONV)["Output"]
    g = call_kernel("conv2d_grad", {"Input": x, "Filter": w, "Output@GRAD": np.ones_like(y)}, _CONV)
    assert g["Input@GRAD"].dtype == np.float32 and g["Filter@GRAD"].dtype == np.float32
    out, dx = _pool_grad(x, np.ones((2, 4, 3, 3), np.float32), strides=[2, 2])
    assert dx.dtype == np.float32
    _, dx = _pool_grad(x, np.ones((2, 4, 3, 3), np.float32), pooling_type="avg", strides=[2, 2])
    assert dx.dtype == np.float32
    c = np.ones(4, np.float32)
    bn = call_kernel("batch_norm", {"X": x, "Scale": c, "Bias": c, "Mean": c * 0, "Variance": c}, {})
    g = call_kernel("batch_norm_grad", {"X": x, "Scale": c, "Bias": c, "SavedMean": bn["SavedMean"],
                                        "SavedVariance": bn["SavedVariance"], "Y@GRAD": x}, {})
    assert all(v.dtype == np.float32 for v in g.values())


# ============================================================================ program-level

def _first_conv_program():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 1, 8, 8])
        h = pg.nn.conv2d(x, 4, 3, padding=1)
        h = pg.nn.batch_norm(h, act="relu")
        h = pg.nn.pool2d(h, 2, "max", 2)
        loss = pg.mean(h)
        pg.append_backward(loss)
    return main, startup, loss


def test_first_conv_layer_gets_no_input_gradient():
    main, _, _ = _first_conv_program()
    conv_grad = [op for op in main.global_block().ops if op.type == "conv2d_grad"][0]
    assert conv_grad.output("Input@GRAD") == [] and conv_grad.output("Filter@GRAD") != []
    assert sorted(conv_grad.inputs) == ["Filter", "Input", "Output@GRAD"]


def test_conv_bn_pool_training_step_runs():
    main, startup, loss = _first_conv_program()
    exe, scope = Executor(CPUPlace()), Scope()
    exe.run(startup, scope=scope)
    x = np.random.default_rng(0).standard_normal((4, 1, 8, 8)).astype(np.float32)
    grads = [v for v in main.global_block().vars if v.endswith("@GRAD") and "w_0" in v]
    out = exe.run(main, feed={"x": x}, fetch_list=[loss] + grads, scope=scope)
    assert all(np.isfinite(o).all() for o in out)


@pytest.mark.parametrize("attrs,extra", [({}, set()), ({"is_test": True}, {"Mean", "Variance"}),
                                         ({"use_global_stats": True}, {"Mean", "Variance"})])
def test_batch_norm_grad_op_slots(attrs, extra):
    """PaddlePaddle's BatchNormGradMaker: Mean/Variance (bound to the MeanOut/VarianceOut
    variables) only when the running statistics normalize."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 3, 4, 4])
        x.stop_gradient = False
        y = pg.nn.batch_norm(x, **{k: v for k, v in attrs.items() if k != "is_test"},
                             is_test=attrs.get("is_test", False))
        pg.gradients([pg.mean(y)], [x])
    fwd = [op for op in main.global_block().ops if op.type == "batch_norm"][0]
    op = [op for op in main.global_block().ops if op.type == "batch_norm_grad"][0]
    base = {"X", "Scale", "Bias", "SavedMean", "SavedVariance", "MeanOut", "VarianceOut", "Y@GRAD"}
    if fwd.output("ReserveSpace"):
        base.add("ReserveSpace")
        assert op.input("ReserveSpace") == fwd.output("ReserveSpace")
    assert {s for s, names in op.inputs.items() if names} == base | extra
    for slot in extra:
        assert op.input(slot) == fwd.output(slot + "Out") == fwd.input(slot)
    assert op.input("MeanOut") == fwd.input("Mean")
    assert set(op.outputs) >= {"X@GRAD"} and op.output("X@GRAD") == ["x@GRAD"]


_SIGNATURES = Path(__file__).resolve().parent / "fixtures" / "paddle_grad_signatures.json"
_NN_OPS = ["conv2d", "depthwise_conv2d", "conv2d_transpose", "pool2d", "batch_norm", "layer_norm", "group_norm",
           "instance_norm", "affine_channel", "lrn", "dropout", "lookup_table_v2", "prelu",
           "bilinear_interp_v2", "nearest_interp_v2", "pixel_shuffle"]


def _roles(fwd, op, grad_op):
    """Each slot of the gradient op as PaddlePaddle's signature file names its role."""
    by_name = {}
    for slot, names in fwd.inputs.items():
        for n in names:
            by_name.setdefault(n, f"in:{slot}")
    for slot, names in fwd.outputs.items():
        for n in names:
            by_name.setdefault(n, f"out:{slot}")
            by_name.setdefault(n + "@GRAD", f"grad:out:{slot}")
    for slot, names in fwd.inputs.items():
        for n in names:
            by_name.setdefault(n + "@GRAD", f"grad:in:{slot}")
    ins = {s: (by_name.get(ns[0], ns[0]) if ns else "empty") for s, ns in grad_op.inputs.items()}
    outs = {s: by_name.get(ns[0], ns[0]) for s, ns in grad_op.outputs.items() if ns}
    return ins, outs


@pytest.mark.skipif(not _SIGNATURES.exists(), reason="no Paddle gradient signatures")
@pytest.mark.parametrize("op_type", _NN_OPS)
def test_grad_op_matches_paddle_signature(op_type):
    want = json.loads(_SIGNATURES.read_text())[op_type]["grad_ops"]
    case = next(c for c in CASES if c.op_type == op_type)
    main, startup = pg.Program(), pg.Program()
    inplace = _INPLACE.get(op_type, {})
    with pg.program_guard(main, startup), pg.unique_name.guard():
        block = main.global_block()
        ins, wrt = {}, []
        for slot, value in case.inputs.items():
            values = value if isinstance(value, list) else [value]
            names = []
            for i, arr in enumerate(values):
                var = block.create_var(f"{slot.lower()}{i}", arr.shape, str(arr.dtype), stop_gradient=True)
                if arr.dtype.kind == "f" and slot in registry.get(op_type).grad.differentiable_inputs():
                    var.stop_gradient = False
                    wrt.append(var)
                names.append(var.name)
            ins[slot] = names
        outs = {s.name: (ins[inplace[s.name]] if s.name in inplace else [f"{s.name.lower()}_out"])
                for s in registry.get(op_type).outputs}
        for names in outs.values():
            for n in names:
                if block.find_var(n) is None:
                    block.create_var(n, dtype="float64")
        fwd = block.append_op(op_type, ins, outs, case.attrs)
        first = [s for s in outs if s not in inplace][0]
        pg.gradients([pg.mean(block.var(outs[first][0]))], wrt)
    grad_ops = [op for op in block.ops if op.type.endswith("_grad") and op.type.startswith(op_type)]
    assert [op.type for op in grad_ops] == [g["type"] for g in want]
    ins, outs = _roles(fwd, op_type, grad_ops[0])
    assert ins == want[0]["inputs"]
    assert outs == want[0]["outputs"]
