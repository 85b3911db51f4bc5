"""Converters of the network layers besides convolution: pooling, normalizations (batch,
layer, instance, group, local response, L2), dropout at inference, padding, channel shuffles."""
from __future__ import annotations

import numpy as np

from keel.program.onnx.ops_basic import onnx_pads, same_pads
from keel.program.onnx.registry import converts

_CHANNELS_FIRST = ("NCHW", "NCDHW", "NCL", "AnyLayout")


@converts("pool2d")
def pool2d(g, op):
    if op.attr("data_format", "NCHW") not in _CHANNELS_FIRST:
        raise g.error(f"data_format {op.attr('data_format')!r}: only NCHW is translated")
    kind = op.attr("pooling_type")
    if kind not in ("max", "avg"):
        raise g.error(f"pooling_type {kind!r}: 'max' and 'avg' are pool2d's")
    x, out = g.x(op, "X"), g.y(op, "Out")
    spatial = list(g.shape(op, "X")[2:])
    ksize = list(op.attr("ksize"))
    strides = list(op.attr("strides", [1, 1]))
    adaptive = op.attr("adaptive", False)
    if op.attr("global_pooling", False):
        if not adaptive:
            g.node("GlobalMaxPool" if kind == "max" else "GlobalAveragePool", [x], out)
            return
        ksize = _known_spatial(g, spatial, "global adaptive pooling")  # Paddle's UpdateKernelSize
    if adaptive and kind == "max":
        _paddle_adaptive_max(g, x, g.dtype(op, "X"), ksize, strides, out)
        return
    if adaptive:  # average over bins [floor(i * in / out), ceil((i + 1) * in / out))
        if ksize == [1, 1]:
            g.node("GlobalAveragePool", [x], out)
            return
        spatial = _known_spatial(g, spatial, f"adaptive pooling to {ksize}")
        if any(d % s for d, s in zip(spatial, ksize)):
            _adaptive_bins(g, x, kind, spatial, ksize, out)
            return
        ksize = strides = [d // s for d, s in zip(spatial, ksize)]  # equal bins: a plain window
        pads, ceil_mode = [0, 0, 0, 0], 0
    else:
        pads, ceil_mode = _pool_pads(g, op, spatial, ksize, strides), int(op.attr("ceil_mode", False))
    attrs = dict(kernel_shape=ksize, strides=strides, pads=pads, ceil_mode=ceil_mode)
    if kind == "max":
        g.node("MaxPool", [x], out, **attrs)
    else:
        # exclusive: the divisor counts the window's cells inside the input only; else it is
        # the whole window, also for one hanging over the padded input's end (ceil_mode),
        # where ONNX's AveragePool counts only the padded input's cells
        include_pad = int(not op.attr("exclusive", True))
        if include_pad and ceil_mode and _overhangs(spatial, ksize, strides, pads):
            raise g.error("avg pooling with exclusive=False and ceil_mode=True over this input divides the "
                          "windows that hang over the padded input by the full window size, which ONNX's "
                          "AveragePool does not")
        g.node("AveragePool", [x], out, count_include_pad=include_pad, **attrs)


def _overhangs(spatial, ksize, strides, pads) -> bool:
    """Whether ceil_mode adds a window reaching past the padded input (True where the input's
    size is unknown)."""
    n = len(spatial)
    for i, (size, k, s) in enumerate(zip(spatial, ksize, strides)):
        if size < 0:
            return True
        padded = size + pads[i] + pads[i + n]
        if (padded - k) % s:
            return True
    return False


def _adaptive_bins(g, x, kind, spatial, size, out):
    """Adaptive pooling whose bins differ in size (an input dim not a multiple of the
    output's): bin i of a dim spans [floor(i * in / out), ceil((i + 1) * in / out)). A bin is
    a rectangle, so its max (or mean) is the max (mean) over the rows of the per-row one:
    each dim is pooled in turn, one slice and reduction per bin, joined by Concat."""
    reduce_op = "ReduceMax" if kind == "max" else "ReduceMean"
    for dim, (length, bins) in enumerate(zip(spatial, size)):
        axis = dim + 2
        pieces = []
        for i in range(bins):
            start, end = (i * length) // bins, -(-((i + 1) * length) // bins)
            window = g.node("Slice", [x, g.ints([start]), g.ints([end]), g.ints([axis])])
            pieces.append(g.reduce(reduce_op, window, [axis], True))
        x = g.node("Concat", pieces, out if dim == len(spatial) - 1 else 1, axis=axis)


def _known_spatial(g, spatial, what):
    if any(d < 0 for d in spatial):
        raise g.error(f"{what} needs the input's height and width, unknown here ({spatial})")
    return spatial


def _paddle_adaptive_max(g, x, dtype, size, strides, out):
    """pool2d's max with adaptive=True as PaddlePaddle 3.3.1 computes it (and Keel's kernel,
    kernels/nn.py): output `size`, window (i, j) is `size` cells from (i * stride_h, j *
    stride_w), clipped to the input (-FLT_MAX where empty): not adaptive bins. The input is
    padded after its end by enough -FLT_MAX cells for `size` windows whatever its size, then
    max-pooled and the first `size` windows kept."""
    lowest = -np.inf if np.dtype(dtype) == np.float16 else float(-np.finfo(np.float32).max)
    extra = [(k - 1) * s + k - 1 for k, s in zip(size, strides)]
    padded = g.node("Pad", [x, g.ints([0, 0, 0, 0, 0, 0] + extra), g.scalar(lowest, dtype)])
    pooled = g.node("MaxPool", [padded], kernel_shape=list(size), strides=list(strides))
    g.node("Slice", [pooled, g.ints([0, 0]), g.ints(size), g.ints([2, 3])], out)


def _pool_pads(g, op, spatial, ksize, strides):
    algorithm = op.attr("padding_algorithm", "EXPLICIT")
    if algorithm == "VALID":
        return [0, 0, 0, 0]
    if algorithm == "SAME":
        if any(d < 0 for d in spatial):
            raise g.error(f"padding_algorithm SAME needs the input's height and width, unknown here ({spatial})")
        return same_pads(spatial, ksize, strides, [1, 1])
    return onnx_pads(op.attr("paddings", [0, 0]))


@converts("batch_norm")
def batch_norm(g, op):
    """Inference batch normalization with the stored statistics (the program's Mean and
    Variance; MeanOut/VarianceOut are those, unchanged)."""
    if not (op.attr("is_test", False) or op.attr("use_global_stats", False)):
        raise g.error("batch_norm in training mode (is_test and use_global_stats false) normalizes with the "
                      "batch's own statistics and updates the running ones: export an inference program")
    x = g.x(op, "X")
    channels_last = op.attr("data_layout", "NCHW") == "NHWC" and g.rank(op, "X") > 2
    if channels_last:
        x = g.node("Transpose", [x], perm=_to_channels_first(g.rank(op, "X")))
    channels = g.shape(op, "Mean")[0]
    dtype = g.dtype(op, "Mean")
    scale = g.x(op, "Scale") if g.has(op, "Scale") else g.const(np.ones(channels, dtype))
    bias = g.x(op, "Bias") if g.has(op, "Bias") else g.const(np.zeros(channels, dtype))
    y = g.y(op, "Y") if not channels_last else g.fresh("batch_norm")
    g.node("BatchNormalization", [x, scale, bias, g.x(op, "Mean"), g.x(op, "Variance")], y,
           epsilon=float(op.attr("epsilon", 1e-5)))
    if channels_last:
        g.node("Transpose", [y], g.y(op, "Y"), perm=_to_channels_last(g.rank(op, "X")))
    # at inference the running statistics pass through unchanged
    for slot, source in (("MeanOut", "Mean"), ("VarianceOut", "Variance")):
        for name in op.output(slot):
            if name not in op.input(source):
                g.bind(name, g.x(op, source))


def _to_channels_first(rank):
    return [0, rank - 1] + list(range(1, rank - 1))


def _to_channels_last(rank):
    return [0] + list(range(2, rank)) + [1]


@converts("layer_norm")
def layer_norm(g, op):
    """Normalized over the dims from begin_norm_axis on; Scale and Bias hold their product
    flattened (reshaped here to those dims when there are several)."""
    x, dtype, rank = g.x(op, "X"), g.dtype(op, "X"), g.rank(op, "X")
    axis = op.attr("begin_norm_axis", 1)
    axis += rank if axis < 0 else 0
    normalized = g.shape(op, "X")[axis:]
    size = int(np.prod(normalized)) if all(d >= 0 for d in normalized) else -1

    def affine(slot, fill):
        if not g.has(op, slot):
            if size < 0:
                raise g.error(f"layer_norm without {slot} over dims {list(normalized)} of unknown size")
            return g.const(np.full(normalized, fill, dtype))
        value = g.x(op, slot)
        if len(normalized) == 1:
            return value
        return g.node("Reshape", [value, g.ints(normalized) if size >= 0 else g.shape_of(x, axis)])

    scale, bias = affine("Scale", 1.0), affine("Bias", 0.0)
    epsilon = float(op.attr("epsilon", 1e-5))
    if g.opset >= 17:
        g.node("LayerNormalization", [x, scale, bias], g.y(op, "Y"), axis=axis, epsilon=epsilon)
        return
    axes = list(range(axis, rank))
    centered = g.node("Sub", [x, g.reduce("ReduceMean", x, axes, True)])
    variance = g.reduce("ReduceMean", g.node("Mul", [centered, centered]), axes, True)
    deviation = g.node("Sqrt", [g.node("Add", [variance, g.scalar(epsilon, dtype)])])
    normal = g.node("Div", [centered, deviation])
    g.node("Add", [g.node("Mul", [normal, scale]), bias], g.y(op, "Y"))


def _per_channel(g, op, slot, fill, channels, dtype):
    """Input `slot` (a [C] scale or shift), or C copies of `fill` where the op has none."""
    if g.has(op, slot):
        return g.x(op, slot)
    if channels < 0:
        raise g.error(f"{op.type} without {slot} over an unknown number of channels")
    return g.const(np.full([channels], fill, dtype))


@converts("instance_norm")
def instance_norm(g, op):
    x, dtype = g.x(op, "X"), g.dtype(op, "X")
    channels = g.shape(op, "X")[1]
    scale = _per_channel(g, op, "Scale", 1.0, channels, dtype)
    bias = _per_channel(g, op, "Bias", 0.0, channels, dtype)
    g.node("InstanceNormalization", [x, scale, bias], g.y(op, "Y"), epsilon=float(op.attr("epsilon", 1e-5)))


@converts("group_norm")
def group_norm(g, op):
    """Normalized per sample over each group of channels: the channels folded into
    [N, groups, rest] and instance-normalized there, then scaled and shifted per channel."""
    if op.attr("data_layout", "NCHW") not in _CHANNELS_FIRST:
        raise g.error(f"data_layout {op.attr('data_layout')!r}: only NCHW is translated")
    x, dtype, rank = g.x(op, "X"), g.dtype(op, "X"), g.rank(op, "X")
    groups = op.attr("groups")
    folded = g.node("Reshape", [x, g.ints([0, groups, -1])])
    unit = g.const(np.ones([groups], dtype)), g.const(np.zeros([groups], dtype))
    normal = g.node("InstanceNormalization", [folded, *unit], epsilon=float(op.attr("epsilon", 1e-5)))
    normal = g.node("Reshape", [normal, g.shape_of(x)])
    per_channel = g.ints([-1] + [1] * (rank - 2))
    if g.has(op, "Scale"):
        normal = g.node("Mul", [normal, g.node("Reshape", [g.x(op, "Scale"), per_channel])])
    if g.has(op, "Bias"):
        normal = g.node("Add", [normal, g.node("Reshape", [g.x(op, "Bias"), per_channel])])
    g.identity(normal, g.y(op, "Y"))


@converts("affine_channel")
def affine_channel(g, op):
    x, rank = g.x(op, "X"), g.rank(op, "X")
    shape = g.ints([-1] + [1] * (rank - 2)) if op.attr("data_layout", "AnyLayout") != "NHWC" else g.ints([-1])
    scaled = g.node("Mul", [x, g.node("Reshape", [g.x(op, "Scale"), shape])])
    g.node("Add", [scaled, g.node("Reshape", [g.x(op, "Bias"), shape])], g.y(op, "Out"))


@converts("lrn")
def lrn(g, op):
    """PaddlePaddle's alpha multiplies the plain sum of squares; ONNX's LRN divides it by
    the window size first, so alpha is scaled by n."""
    n = op.attr("n", 5)
    g.node("LRN", [g.x(op, "X")], g.y(op, "Out"), size=n, alpha=float(op.attr("alpha", 1e-4)) * n,
           beta=float(op.attr("beta", 0.75)), bias=float(op.attr("k", 2.0)))


@converts("norm")
def l2_normalize(g, op):
    """Out = X / sqrt(sum(X^2, axis) + epsilon); Norm the denominator."""
    x, dtype = g.x(op, "X"), g.dtype(op, "X")
    total = g.reduce("ReduceSum", g.node("Mul", [x, x]), [op.attr("axis")], True)
    norm = g.node("Sqrt", [g.node("Add", [total, g.scalar(op.attr("epsilon", 1e-10), dtype)])],
                  g.y(op, "Norm") or 1)
    g.node("Div", [x, norm], g.y(op, "Out"))


@converts("dropout")
def dropout(g, op):
    """At inference: `downgrade_in_infer` scales by 1 - p, `upscale_in_train` is the identity
    (it scaled while training)."""
    x, out = g.x(op, "X"), g.y(op, "Out")
    if op.attr("dropout_implementation", "downgrade_in_infer") == "upscale_in_train":
        g.identity(x, out)
    else:
        g.node("Mul", [x, g.scalar(1.0 - op.attr("dropout_prob", 0.5), g.dtype(op, "X"))], out)


_PAD_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}


@converts("pad3d")
def pad3d(g, op):
    """paddings [left, right, top, bottom, front, back] of the last three (spatial) dims."""
    mode = op.attr("mode", "constant")
    if mode == "circular" and g.opset < 19:
        raise g.error(f"mode 'circular' is ONNX Pad's 'wrap', from opset 19 on (asked for {g.opset})")
    paddings = list(op.attr("paddings")) if not g.has(op, "Paddings") else g.constant(op, "Paddings")
    if paddings is None:
        raise g.error("paddings given by a run-time tensor: ONNX's Pad takes them, but Keel translates "
                      "only paddings known when exporting")
    paddings = [int(p) for p in np.asarray(paddings).reshape(-1)]
    # ONNX: [x1_begin, x2_begin, ..., x1_end, ...] over all 5 dims
    width, height, depth = paddings[0:2], paddings[2:4], paddings[4:6]
    begin, end = [depth[0], height[0], width[0]], [depth[1], height[1], width[1]]
    if op.attr("data_format", "NCDHW") == "NDHWC":
        pads = [0] + begin + [0] + [0] + end + [0]
    else:
        pads = [0, 0] + begin + [0, 0] + end
    _pad(g, op, pads, _PAD_MODES[mode], op.attr("value", 0.0))


@converts("pad")
def pad(g, op):
    """paddings: [before, after] of each dim in turn."""
    paddings = list(op.attr("paddings"))
    _pad(g, op, paddings[0::2] + paddings[1::2], "constant", op.attr("pad_value", 0.0))


def _pad(g, op, pads, mode, value):
    inputs = [g.x(op, "X"), g.ints(pads, "pads")]
    if mode == "constant":
        inputs.append(g.scalar(value, g.dtype(op, "X")))
    g.node("Pad", inputs, g.y(op, "Out"), mode=mode)


@converts("pixel_shuffle")
def pixel_shuffle(g, op):
    if op.attr("data_format", "NCHW") != "NCHW":
        raise g.error(f"data_format {op.attr('data_format')!r}: only NCHW is translated")
    g.node("DepthToSpace", [g.x(op, "X")], g.y(op, "Out"), blocksize=op.attr("upscale_factor"), mode="CRD")


@converts("shuffle_channel")
def shuffle_channel(g, op):
    """Channels as [group, C / group], transposed to [C / group, group]."""
    x, channels = g.x(op, "X"), g.shape(op, "X")[1]
    group = op.attr("group", 1)
    if channels < 0:
        raise g.error("shuffle_channel over an unknown number of channels")
    grouped = g.node("Reshape", [x, g.ints([0, group, channels // group, -1])])
    swapped = g.node("Transpose", [grouped], perm=[0, 2, 1, 3])
    g.node("Reshape", [swapped, g.shape_of(x)], g.y(op, "Out"))
