"""Vision ops beyond conv2d/pool2d, as PaddlePaddle's model suites (PaddleSeg,
PaddleDetection, PaddleOCR, PaddleClas) export them: conv3d, conv3d_transpose, pool3d,
max_pool2d_with_index / max_pool3d_with_index, unpool / unpool3d, affine_grid,
grid_sampler, deformable_conv (DCNv2, with Mask) and deformable_conv_v1.

Slots, attributes and shape rules follow PaddlePaddle 3.3.1's legacy ops (ConvInferMeta,
ConvTransposeInferMeta, PoolInferMeta, MaxPoolWithIndexInferMeta, UnpoolInferMeta,
AffineGridInferMeta, GridSampleBaseInferMeta, DeformableConvInferMeta). The padding and
layout helpers are nn.py's, written for any number of spatial dims.
"""
from __future__ import annotations

from keel.program.ops.infer import dims_match
from keel.program.ops.nn import (_IS_TEST, transpose_output_dims, _attr_fail, _conv_inputs, _channel_last, _check_positive, _conv_out, _int_list,
                            _require_rank, _resolve_padding)
from keel.program.ops.registry import BOOL, INT, INTS, STRING, define, grad_op, opt
from keel.proto import pb

_T = pb.VarType


def _spatial(shape, last, nd):
    return list(shape[1:1 + nd] if last else shape[2:2 + nd])


def _layout(shape, n, c, spatial, last):
    return [n, *spatial, c] if last else [n, c, *spatial]


# -- conv3d -----------------------------------------------------------------------------------
def _conv3d_inputs(ctx, filter_layout, transpose=False):
    last = None
    if transpose:
        # PaddlePaddle 3.3.1's legacy conv3d_transpose is channel-last only for "NHWC" (what its
        # layers write); any other value, "NDHWC" included, is channel-first
        last = ctx.attr("data_format") == "NHWC"
    return _conv_inputs(ctx, filter_layout, spatial=3, last=last)


def _infer_conv3d(ctx):
    x, w, dtype, last, groups, strides, dilations, in_c = _conv3d_inputs(
        ctx, "out_channels, in_channels/groups, kd, kh, kw")
    out_c, w_c = w.shape[0], w.shape[1]
    if in_c >= 0 and w_c >= 0 and in_c != w_c * groups:
        ctx.fail(f"input channels ({in_c}) must equal filter channels ({w_c}) * groups ({groups}): "
                 f"Input {x} ({ctx.attr('data_format')}), Filter {w}")
    if out_c >= 0 and out_c % groups:
        ctx.fail(f"filter's output channels ({out_c}) must be divisible by groups ({groups}): Filter {w}")
    spatial, ksize = _spatial(x.shape, last, 3), list(w.shape[2:])
    pads, dil = _resolve_padding(ctx, spatial, ksize, strides, ctx.attr("paddings"), dilations,
                                 ctx.attr("padding_algorithm"))
    out = [_conv_out(ctx, x, w, i, spatial[i], ksize[i], pads[2 * i], pads[2 * i + 1], dil[i], strides[i])
           for i in range(3)]
    ctx.set_output("Output", _layout(x.shape, x.shape[0], out_c, out, last), dtype)


_CONV3D_ATTRS = {
    "strides": INTS([1, 1, 1]),
    "paddings": INTS([0, 0, 0]),
    "padding_algorithm": STRING("EXPLICIT"),
    "dilations": INTS([1, 1, 1]),
    "groups": INT(1),
}
_CONV_GRAD = grad_op(["Input", "Filter", "Output@GRAD"], ["Input@GRAD", "Filter@GRAD"])

define("conv3d", inputs=["Input", "Filter"], outputs=["Output"],
       attrs={**_CONV3D_ATTRS, "data_format": STRING("NCDHW")}, extra_attrs=_IS_TEST,
       infer=_infer_conv3d, grad=_CONV_GRAD,
       doc="3-D convolution: Output = Input (*) Filter, Filter [out_c, in_c/groups, kd, kh, kw]; "
           "NCDHW or NDHWC.")


def _infer_conv3d_transpose(ctx):
    x, w, dtype, last, groups, strides, dilations, in_c = _conv3d_inputs(
        ctx, "in_channels, out_channels/groups, kd, kh, kw", transpose=True)
    if not dims_match(in_c, w.shape[0]):
        ctx.fail(f"input channels ({in_c}) must equal the filter's first dim ({w.shape[0]}): "
                 f"Input {x} ({ctx.attr('data_format')}), Filter {w}")
    out_c = w.shape[1] * groups if w.shape[1] >= 0 else -1
    spatial, ksize = _spatial(x.shape, last, 3), list(w.shape[2:])
    pads, dil = _resolve_padding(ctx, spatial, ksize, strides, ctx.attr("paddings"), dilations,
                                 ctx.attr("padding_algorithm"))
    out = transpose_output_dims(ctx, spatial, ksize, strides, pads, dil, x, w)
    ctx.set_output("Output", _layout(x.shape, x.shape[0], out_c, out, last), dtype)


define("conv3d_transpose", inputs=["Input", "Filter"], outputs=["Output"],
       # PaddlePaddle's default data_format for conv3d_transpose is "NCHW" (channel-first)
       attrs={"output_padding": INTS([]), "output_size": INTS([]), **_CONV3D_ATTRS,
              "data_format": STRING("NCHW")},
       infer=_infer_conv3d_transpose, grad=_CONV_GRAD,
       doc="3-D transposed convolution, Filter [in_c, out_c/groups, kd, kh, kw].")


# -- pool3d -------------------------------------------------------------------------------------
def _pool_out(ctx, x, spatial, ksize, strides, pads, ceil):
    out = []
    for i, d in enumerate(spatial):
        if d < 0:
            out.append(-1)
            continue
        span = d - ksize[i] + pads[2 * i] + pads[2 * i + 1]
        o = (span + (strides[i] - 1 if ceil else 0)) // strides[i] + 1
        if o <= 0:
            ctx.fail(f"output spatial dim {i} would be {o} (input {d}, ksize {ksize[i]}, paddings "
                     f"{pads[2 * i]}+{pads[2 * i + 1]}, stride {strides[i]}): X {x}")
        out.append(o)
    return out


def _infer_pool3d(ctx):
    x = ctx.input("X")
    _require_rank(ctx, x, (5,), "X")
    ctx.require_float(x)
    if ctx.attr("pooling_type") not in ("max", "avg"):
        _attr_fail(ctx, f"pooling_type must be 'max' or 'avg', got {ctx.attr('pooling_type')!r}")
    last = _channel_last(ctx, ctx.attr("data_format"))
    ksize = list(ctx.attr("ksize"))
    if len(ksize) != 3:
        _attr_fail(ctx, f"ksize must have 3 values for a 5-d input, got {ksize} (X {x})")
    spatial = _spatial(x.shape, last, 3)
    n, c = x.shape[0], (x.shape[4] if last else x.shape[1])
    if ctx.attr("global_pooling"):
        out = [1, 1, 1]
    elif ctx.attr("adaptive"):
        _check_positive(ctx, "ksize (the adaptive output size)", ksize)
        out = ksize
    else:
        _check_positive(ctx, "ksize", ksize)
        strides = _int_list(ctx, "strides", 3)
        _check_positive(ctx, "strides", strides)
        pads, _ = _resolve_padding(ctx, spatial, ksize, strides, ctx.attr("paddings"), [1, 1, 1],
                                   ctx.attr("padding_algorithm"))
        out = _pool_out(ctx, x, spatial, ksize, strides, pads, ctx.attr("ceil_mode"))
    ctx.set_output("Out", _layout(x.shape, n, c, out, last), x.dtype)


define("pool3d", inputs=["X"], outputs=["Out"],
       attrs={"pooling_type": STRING(""), "ksize": INTS(), "global_pooling": BOOL(False),
              "strides": INTS([1, 1, 1]), "paddings": INTS([0, 0, 0]), "exclusive": BOOL(True),
              "adaptive": BOOL(False), "ceil_mode": BOOL(False), "data_format": STRING("NCDHW"),
              "padding_algorithm": STRING("EXPLICIT"), "use_cudnn": BOOL(False)},
       infer=_infer_pool3d, grad=grad_op(["X", "Out", "Out@GRAD"], ["X@GRAD"]),
       doc="3-D max/avg pooling (also global and adaptive); `exclusive` avg ignores padding.")


# -- max_pool2d_with_index / max_pool3d_with_index ----------------------------------------------------
def _infer_max_pool_with_index(nd):
    def infer(ctx):
        x = ctx.input("X")
        _require_rank(ctx, x, (nd + 2,), "X")
        ctx.require_float(x)
        ksize = list(ctx.attr("ksize"))
        if len(ksize) != nd:
            _attr_fail(ctx, f"ksize must have {nd} values, got {ksize} (X {x})")
        spatial = list(x.shape[2:])
        if ctx.attr("global_pooling"):
            ksize = spatial
            paddings = [0] * nd
        else:
            paddings = list(ctx.attr("paddings"))
        if ctx.attr("adaptive"):
            _check_positive(ctx, "ksize (the adaptive output size)", ksize)
            out = ksize
        else:
            strides = list(ctx.attr("strides"))
            if len(strides) != nd or len(paddings) != nd:
                _attr_fail(ctx, f"strides and paddings must have {nd} values each, got {strides} and "
                                f"{paddings}")
            _check_positive(ctx, "strides", strides)
            if any(k == 0 for k in ksize):
                _attr_fail(ctx, f"ksize must be > 0, got {ksize}")
            pads = [p for p in paddings for _ in range(2)]
            out = _pool_out(ctx, x, spatial, ksize, strides, pads, ctx.attr("ceil_mode"))
        shape = [x.shape[0], x.shape[1], *out]
        ctx.set_output("Out", shape, x.dtype)
        ctx.set_output("Mask", shape, _T.INT32)
    return infer


_WITH_INDEX_GRAD = grad_op(["X", "Mask", "Out@GRAD"], ["X@GRAD"])
for _nd in (2, 3):
    define(f"max_pool{_nd}d_with_index", inputs=["X"], outputs=["Out", "Mask"],
           attrs={"ksize": INTS(), "strides": INTS([1] * _nd), "paddings": INTS([0] * _nd),
                  "global_pooling": BOOL(False), "adaptive": BOOL(False), "ceil_mode": BOOL(False)},
           infer=_infer_max_pool_with_index(_nd), grad=_WITH_INDEX_GRAD,
           doc=f"{_nd}-D max pooling that also returns Mask (int32): the row-major index of each "
               "window's maximum in its input plane (for unpool).")


# -- unpool / unpool3d -------------------------------------------------------------------------------
def _infer_unpool(nd):
    def infer(ctx):
        x, idx = ctx.input("X"), ctx.input("Indices")
        _require_rank(ctx, x, (nd + 2,), "X")
        if idx.ndim != x.ndim or not all(dims_match(a, b) for a, b in zip(x.shape, idx.shape)):
            ctx.fail(f"Indices must have X's shape, got X {x}, Indices {idx}")
        if idx.dtype not in (_T.INT32, _T.INT64):
            ctx.dtype_fail(f"Indices must be int32 or int64, got {idx}")
        if ctx.op_type == "unpool" and ctx.attr("unpooling_type") != "max":
            _attr_fail(ctx, f"unpooling_type must be 'max', got {ctx.attr('unpooling_type')!r}")
        size = list(ctx.attr("output_size"))
        if len(size) != nd:
            _attr_fail(ctx, f"output_size must have {nd} values, got {size}")
        out = [-1 if d < 0 else s for d, s in zip(x.shape[2:], size)]
        ctx.set_output("Out", [x.shape[0], x.shape[1], *out], x.dtype)
    return infer


_UNPOOL_GRAD = grad_op(["X", "Indices", "Out", "Out@GRAD"], ["X@GRAD"])
define("unpool", inputs=["X", "Indices"], outputs=["Out"],
       attrs={"unpooling_type": STRING(), "ksize": INTS(), "strides": INTS([1, 1]),
              "paddings": INTS([0, 0]), "output_size": INTS([0, 0]), "data_format": STRING("NCHW")},
       infer=_infer_unpool(2), grad=_UNPOOL_GRAD,
       doc="Max unpooling: Out [N, C, *output_size] is zero except Out.plane[Indices] = X.")
define("unpool3d", inputs=["X", "Indices"], outputs=["Out"],
       attrs={"ksize": INTS(), "strides": INTS([1, 1, 1]), "paddings": INTS([0, 0, 0]),
              "output_size": INTS([0, 0, 0]), "data_format": STRING("NCDHW")},
       infer=_infer_unpool(3), grad=_UNPOOL_GRAD,
       doc="3-D max unpooling: Out [N, C, *output_size] is zero except Out.plane[Indices] = X.")


# -- affine_grid ---------------------------------------------------------------------------------------
def _infer_affine_grid(ctx):
    theta = ctx.input("Theta")
    ctx.require_float(theta)
    rows, cols = (list(theta.shape[1:]) + [-1, -1])[:2]
    if theta.ndim != 3 or rows not in (2, 3, -1) or (rows >= 0 and not dims_match(cols, rows + 1)):
        ctx.fail(f"expects Theta [N, 2, 3] (2-D) or [N, 3, 4] (3-D), got {theta}")
    if ctx.has_input("OutputShape"):
        nd = theta.shape[1] if theta.shape[1] in (2, 3) else 2
        out = [-1] * nd
    else:
        shape = list(ctx.attr("output_shape"))
        if len(shape) not in (4, 5):
            _attr_fail(ctx, "needs output_shape [N, C, H, W] or [N, C, D, H, W], or an OutputShape "
                            f"input; got {shape}")
        nd = len(shape) - 2
        if theta.shape[1] >= 0 and theta.shape[1] != nd:
            ctx.fail(f"output_shape {shape} needs Theta [N, {nd}, {nd + 1}], got {theta}")
        out = shape[2:]
    ctx.set_output("Output", [theta.shape[0], *out, nd], theta.dtype)


def _infer_affine_grid_grad(ctx):
    dout = ctx.input("Output@GRAD")
    nd = dout.shape[-1]
    ctx.set_output("Theta@GRAD", [dout.shape[0], nd, nd + 1 if nd >= 0 else -1], dout.dtype)


define("affine_grid", inputs=["Theta", opt("OutputShape")], outputs=["Output"],
       attrs={"output_shape": INTS([]), "align_corners": BOOL(True)},
       infer=_infer_affine_grid,
       # OutputShape is read again for the grid's size, never differentiated
       grad=grad_op(["Theta", "OutputShape", "Output@GRAD"], ["Theta@GRAD"]),
       doc="Sampling grid of an affine transform: Output [N, H, W, 2] (or [N, D, H, W, 3]) = "
           "Theta @ (x, y[, z], 1) over normalized output coordinates in [-1, 1].")


# -- grid_sampler --------------------------------------------------------------------------------------
def _infer_grid_sampler(ctx):
    x, grid = ctx.input("X"), ctx.input("Grid")
    _require_rank(ctx, x, (4, 5), "X")
    ctx.same_dtype(x, grid)
    ctx.require_float(x)
    nd = x.ndim - 2
    if grid.ndim != x.ndim or not dims_match(grid.shape[-1], nd):
        ctx.fail(f"Grid must be [N, *out, {nd}] for X {x}, got {grid}")
    if not dims_match(x.shape[0], grid.shape[0]):
        ctx.fail(f"X and Grid must have one batch size, got X {x}, Grid {grid}")
    if ctx.attr("mode") not in ("bilinear", "nearest"):
        _attr_fail(ctx, f"mode must be 'bilinear' or 'nearest', got {ctx.attr('mode')!r}")
    if ctx.attr("padding_mode") not in ("zeros", "border", "reflection"):
        _attr_fail(ctx, f"padding_mode must be 'zeros', 'border' or 'reflection', "
                        f"got {ctx.attr('padding_mode')!r}")
    ctx.set_output("Output", [x.shape[0], x.shape[1], *grid.shape[1:-1]], x.dtype)


define("grid_sampler", inputs=["X", "Grid"], outputs=["Output"],
       attrs={"align_corners": BOOL(True), "mode": STRING("bilinear"), "padding_mode": STRING("zeros")},
       infer=_infer_grid_sampler,
       grad=grad_op(["X", "Grid", "Output@GRAD"], ["X@GRAD", "Grid@GRAD"]),
       doc="Sample X at Grid's normalized (x, y[, z]) points: bilinear or nearest; padding_mode "
           "zeros, border or reflection.")


# -- deformable_conv / deformable_conv_v1 ------------------------------------------------------------------
def _infer_deformable_conv(ctx):
    x, offset, w = ctx.input("Input"), ctx.input("Offset"), ctx.input("Filter")
    mask = ctx.input("Mask")
    _require_rank(ctx, x, (4,), "Input")
    if w.ndim != 4 or offset.ndim != 4:
        ctx.fail(f"expects 4-d Offset and Filter, got Offset {offset}, Filter {w}")
    dtype = ctx.same_dtype(x, offset, w)
    ctx.require_float(x)
    groups, dg = ctx.attr("groups"), ctx.attr("deformable_groups")
    if groups <= 0 or dg <= 0:
        _attr_fail(ctx, f"groups and deformable_groups must be > 0, got {groups} and {dg}")
    strides, dilations = _int_list(ctx, "strides", 2), _int_list(ctx, "dilations", 2)
    paddings = _int_list(ctx, "paddings", 2)
    _check_positive(ctx, "strides", strides)
    _check_positive(ctx, "dilations", dilations)
    step = ctx.attr("im2col_step")
    if step <= 0:
        _attr_fail(ctx, f"im2col_step must be > 0, got {step}")
    if x.shape[0] > step and x.shape[0] % step:
        ctx.fail(f"the batch size ({x.shape[0]}) must be at most im2col_step ({step}) or divisible by it: "
                 f"Input {x}")
    c, out_c = x.shape[1], w.shape[0]
    if out_c >= 0 and (out_c % groups or out_c % dg):
        ctx.fail(f"the filter's output channels ({out_c}) must be divisible by groups ({groups}) and by "
                 f"deformable_groups ({dg}): Filter {w}")
    if c >= 0 and w.shape[1] >= 0 and c != w.shape[1] * groups:
        ctx.fail(f"input channels ({c}) must equal filter channels ({w.shape[1]}) * groups ({groups}): "
                 f"Input {x}, Filter {w}")
    if c >= 0 and c % dg:
        # (PaddlePaddle does not check this; its kernel then reads offsets past the tensor)
        ctx.fail(f"input channels ({c}) must be divisible by deformable_groups ({dg}): Input {x}")
    kh, kw = w.shape[2:]
    out = [_conv_out(ctx, x, w, i, x.shape[2 + i], (kh, kw)[i], paddings[i], paddings[i], dilations[i],
                     strides[i]) for i in range(2)]
    k = kh * kw if kh >= 0 and kw >= 0 else -1
    if k >= 0 and not dims_match(offset.shape[1], 2 * dg * k):
        ctx.fail(f"Offset must have 2 * deformable_groups * kh * kw = {2 * dg * k} channels, got {offset}")
    if not all(dims_match(a, b) for a, b in zip(offset.shape[2:], out)):
        ctx.fail(f"Offset's spatial dims must be the output's {out}, got {offset}")
    if mask is not None:
        if mask.ndim != 4 or (k >= 0 and not dims_match(mask.shape[1], dg * k)):
            ctx.fail(f"Mask must be [N, deformable_groups * kh * kw = {dg * k}, oh, ow], got {mask}")
    ctx.set_output("Output", [x.shape[0], out_c, *out], dtype)


_DEFORM_ATTRS = {"strides": INTS([1, 1]), "paddings": INTS([0, 0]), "dilations": INTS([1, 1]),
                 "groups": INT(1), "deformable_groups": INT(1), "im2col_step": INT(64)}

define("deformable_conv", inputs=["Input", "Offset", "Mask", "Filter"], outputs=["Output"],
       attrs=dict(_DEFORM_ATTRS), infer=_infer_deformable_conv,
       grad=grad_op(["Input", "Offset", "Mask", "Filter", "Output@GRAD"],
                    ["Input@GRAD", "Offset@GRAD", "Filter@GRAD", "Mask@GRAD"]),
       doc="Modulated deformable convolution (DCNv2): each kernel point sampled bilinearly at "
           "its learned Offset and scaled by Mask.")
define("deformable_conv_v1", inputs=["Input", "Offset", "Filter"], outputs=["Output"],
       attrs=dict(_DEFORM_ATTRS), infer=_infer_deformable_conv,
       grad=grad_op(["Input", "Offset", "Filter", "Output@GRAD"],
                    ["Input@GRAD", "Offset@GRAD", "Filter@GRAD"]),
       doc="Deformable convolution (DCNv1): kernel points sampled bilinearly at learned offsets.")
