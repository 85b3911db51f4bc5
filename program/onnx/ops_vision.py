"""Converters of the sampling ops of vision models: interpolation (ONNX Resize), grid_sampler
(GridSample), affine_grid (a MatMul over a constant base grid), and the embedding lookup
lookup_table_v2 (Gather)."""
from __future__ import annotations

import numpy as np

from keel.program.onnx.registry import converts

# -- interpolation -------------------------------------------------------------------------------
_INTERP_OPS = ("linear_interp_v2", "bilinear_interp_v2", "trilinear_interp_v2", "nearest_interp_v2")
_CHANNEL_LAST = ("NHWC", "NDHWC", "NLC")


@converts(*_INTERP_OPS)
def interp(g, op):
    """PaddlePaddle's source position of output index k (kernels/nn.py, `_interp`), ratio being
    (in-1)/(out-1) with align_corners, else 1/scale when a scale is given, else in/out:
    - linear, align_corners: k*ratio: ONNX `align_corners`;
    - linear, align_mode 0: (k+0.5)*ratio-0.5 clamped at 0, and 0 when out is 1: ONNX
      `pytorch_half_pixel` (whose out-1 case is -0.5, clamped to 0 by linear Resize too);
    - linear, align_mode 1 and nearest without align_corners: k*ratio: ONNX `asymmetric`;
      nearest truncates (ONNX nearest_mode `floor`: the positions are never negative);
    - nearest, align_corners: trunc(k*ratio + 0.5): `round_prefer_ceil`.
    ONNX's ratio is 1/scale where Resize gets scales and in/out where it gets sizes, so a
    size-given Paddle op gets sizes and a scale-given one gets scales."""
    x = g.x(op, "X")
    rank = len(g.shape(op, "X"))
    nd = rank - 2
    channel_last = op.attr("data_layout", "NCHW") in _CHANNEL_LAST
    nearest = op.attr("interp_method") == "nearest"
    align_corners = op.attr("align_corners", True)
    if align_corners:
        mode = "align_corners"
    elif not nearest and op.attr("align_mode", 1) == 0:
        mode = "pytorch_half_pixel"
    else:
        mode = "asymmetric"
    if channel_last:
        x = g.node("Transpose", [x], perm=[0, rank - 1, *range(1, rank - 1)])
    scales, sizes = _resize_target(g, op, x, nd)
    dtype = g.dtype(op, "X")
    compute = x if nearest or dtype.kind == "f" else g.node("Cast", [x], to=g.onnx.TensorProto.FLOAT)
    if not nearest and dtype.kind != "f" and nd == 1:
        raise g.error(f"linear interpolation of {dtype} in 1-D: PaddlePaddle's kernel truncates its weights to "
                      f"integers there, which ONNX's Resize cannot express")
    out = g.node("Resize", [compute, "", scales or "", sizes or ""], mode="linear" if not nearest else "nearest",
                 coordinate_transformation_mode=mode,
                 nearest_mode=("round_prefer_ceil" if align_corners else "floor") if nearest else None)
    if compute is not x:  # integers: resized in float32 and truncated back, as PaddlePaddle's kernels
        out = g.node("Cast", [out], to=g.onnx.helper.np_dtype_to_tensor_dtype(dtype))
    if channel_last:
        out = g.node("Transpose", [out], perm=[0, *range(2, rank), 1])
    g.node("Identity", [out], g.y(op, "Out"))


def _resize_target(g, op, x, nd):
    """(scales, sizes) inputs of Resize, one of them None. PaddlePaddle's precedence:
    SizeTensor, then OutSize, then the Scale input or the scale attribute, then out_d/h/w."""
    size_tensors, out_size, scale_t = op.input("SizeTensor"), g.x(op, "OutSize"), g.x(op, "Scale")
    scale_attr = op.attr("scale") or []
    has_scale = scale_t is not None or (len(scale_attr) > 1 or (nd == 1 and len(scale_attr) == 1)) and all(
        s > 0 for s in scale_attr)
    if size_tensors or out_size is not None:
        if has_scale and not op.attr("align_corners", True):
            raise g.error("both an output size and a scale: PaddlePaddle sizes the output by the one and "
                          "places the source points by the other, which one ONNX Resize cannot")
        spatial = (g.node("Concat", [g.node("Reshape", [g.value(n), g.ints([1])]) for n in size_tensors], axis=0)
                   if size_tensors else g.node("Slice", [out_size, g.ints([0]), g.ints([nd]), g.ints([0])]))
        return None, _full_sizes(g, x, g.node("Cast", [spatial], to=g.onnx.TensorProto.INT64))
    if scale_t is not None:
        spatial = g.node("Expand", [g.node("Reshape", [g.node("Cast", [scale_t], to=g.onnx.TensorProto.FLOAT),
                                                       g.ints([-1])]), g.ints([nd])])
        spatial = g.node("Slice", [spatial, g.ints([0]), g.ints([nd]), g.ints([0])])
        return g.node("Concat", [g.const(np.ones(2, np.float32)), spatial], axis=0), None
    if has_scale:
        return g.const(np.array([1, 1, *scale_attr[:nd]], np.float32), hint="scales"), None
    sizes = [op.attr("out_d", 0), op.attr("out_h", 0), op.attr("out_w", 0)][3 - nd:]
    return None, _full_sizes(g, x, g.ints(sizes, "sizes"))


def _full_sizes(g, x, spatial):
    """[N, C, *spatial]: the batch and channel sizes read from x at run time."""
    batch_channels = g.node("Slice", [g.node("Shape", [x]), g.ints([0]), g.ints([2]), g.ints([0])])
    return g.node("Concat", [batch_channels, spatial], axis=0)


# -- grid sampling -------------------------------------------------------------------------------
@converts("grid_sampler")
def grid_sampler(g, op):
    """ONNX GridSample (opset 16; 5-D inputs from opset 20, where `bilinear` is named
    `linear`): the same normalized grid, align_corners and padding modes. Nearest rounds
    halves to even in ONNX and away from zero in PaddlePaddle: grid points exactly between
    two pixels may differ."""
    rank = len(g.shape(op, "X"))
    need = 16 if rank == 4 else 20
    if g.opset < need:
        raise g.error(f"ONNX's GridSample for a {rank}-D input needs opset {need} or later (asked: {g.opset})")
    mode = op.attr("mode", "bilinear")
    if mode == "bilinear" and g.opset >= 20:
        mode = "linear"
    g.node("GridSample", [g.x(op, "X"), g.x(op, "Grid")], g.y(op, "Output"), mode=mode,
           padding_mode=op.attr("padding_mode", "zeros"), align_corners=int(op.attr("align_corners", True)))


@converts("affine_grid")
def affine_grid(g, op):
    """Output [N, *sizes, nd] = base [P, nd+1] @ Theta^T, the base grid (x, y[, z], 1) over the
    output's normalized cell positions being a constant of the static output_shape."""
    if op.input("OutputShape"):
        raise g.error("the output shape is a tensor (OutputShape): the base grid is built at export time from "
                      "the output_shape attribute, so the shape must be static")
    shape = list(op.attr("output_shape"))
    sizes = shape[2:]
    dtype = g.dtype(op, "Theta")
    base = _base_grid(sizes, op.attr("align_corners", True), dtype)
    theta_t = g.node("Transpose", [g.x(op, "Theta")], perm=[0, 2, 1])
    points = g.node("MatMul", [g.const(base, hint="base_grid"), theta_t])
    g.node("Reshape", [points, g.ints([0, *sizes, len(sizes)])], g.y(op, "Output"))


def _base_grid(sizes, align_corners, dtype):
    """(x, y[, z], 1) per output cell, x varying fastest, computed as PaddlePaddle's Linspace
    in `dtype` arithmetic: from -1 in steps of 2/(n-1) (align_corners), or from -(n-1)/n in
    steps of 2/n."""
    t = np.dtype(dtype).type
    axes = []
    for n in sizes:
        with np.errstate(divide="ignore", invalid="ignore"):  # one cell, align_corners: NaN as PaddlePaddle
            step = t(2) / t(n - 1) if align_corners else t(2) / t(n)
            first = t(-1) if align_corners else t(-1) * (t(n - 1) / t(n))
            axes.append((first + np.arange(n).astype(dtype) * step).astype(dtype))
    mesh = np.meshgrid(*axes, indexing="ij")
    columns = [m.reshape(-1) for m in reversed(mesh)]
    return np.stack(columns + [np.ones_like(columns[0])], axis=1)


# -- embeddings -----------------------------------------------------------------------------------
@converts("lookup_table_v2")
def lookup_table_v2(g, op):
    """Out = W[Ids]; rows whose id is padding_idx (-1: none) are zeros, whatever W holds there."""
    ids = g.x(op, "Ids")
    rows = g.node("Gather", [g.x(op, "W"), ids], axis=0)
    pad = op.attr("padding_idx", -1)
    if pad is None or pad == -1:
        g.node("Identity", [rows], g.y(op, "Out"))
        return
    padded = g.node("Unsqueeze", [g.node("Equal", [ids, g.const(pad, g.dtype(op, "Ids"))]), g.ints([-1])])
    zero = g.const(np.zeros((), g.dtype(op, "W")), hint="zero")
    g.node("Where", [padded, zero, rows], g.y(op, "Out"))
