"""Neural-network ops: convolution, pooling, normalization, dropout, embedding, resizing.

Slots, attributes and shape rules follow PaddlePaddle's legacy ops (ConvInferMeta,
PoolInferMeta, BatchNormInferMeta, ...). Spatial `paddings` are given as 2 values
(symmetric: [pad_h, pad_w]) or 4 values ([top, bottom, left, right]); `padding_algorithm`
"SAME" / "VALID" overrides them. Unknown (-1) input dims give -1 output dims.
"""
from __future__ import annotations

from keel.program import dtypes
from keel.program.errors import AttrError
from keel.program.ops.infer import dims_match, numel
from keel.program.ops.registry import (BOOL, FLOAT, FLOATS, INT, INTS, LONG, NOT_DIFFERENTIABLE, STRING,
                                  GradOp, Slot, define, grad_maker, grad_op, many, opt, side)
from keel.proto import pb

_T = pb.VarType
_FP32 = _T.FP32


# -- shared helpers ----------------------------------------------------------------------
def _attr_fail(ctx, message: str):
    raise AttrError(message, op_type=ctx.op_type, callsite=ctx.callsite)


def _channel_last(ctx, fmt: str, attr: str = "data_format") -> bool:
    """True for NHWC-style layouts; NCHW and PaddlePaddle's "AnyLayout" mean channel-first."""
    if fmt in ("NCHW", "AnyLayout", "NCDHW", "NCL", "NC"):
        return False
    if fmt in ("NHWC", "NDHWC", "NLC"):
        return True
    _attr_fail(ctx, f"{attr} must be 'NCHW' or 'NHWC', got {fmt!r}")


def _require_rank(ctx, info, ranks, what="input"):
    if info.ndim not in ranks:
        want = " or ".join(str(r) for r in ranks)
        ctx.fail(f"expects a {want}-d {what}, got {info}")


def _int_list(ctx, name: str, n: int) -> list[int]:
    v = list(ctx.attr(name))
    if len(v) == 1 and n > 1:
        v = v * n
    if len(v) != n:
        _attr_fail(ctx, f"{name} must have {n} values, got {v}")
    return v


def _expand_paddings(ctx, paddings, n: int) -> list[int]:
    """n-d paddings given as n values (symmetric) or 2n values (before/after per dim) ->
    2n values [d0_before, d0_after, d1_before, ...]."""
    p = list(paddings)
    if len(p) == n:
        return [v for v in p for _ in range(2)]
    if len(p) == 2 * n:
        return p
    _attr_fail(ctx, f"paddings must have {n} or {2 * n} values, got {p}")


def _resolve_padding(ctx, in_dims, ksize, strides, paddings, dilations, algorithm):
    """PaddlePaddle's UpdatePaddingAndDilation: returns (paddings as 2n values, dilations).
    SAME pads so that out = ceil(in / stride) (dilations become 1); VALID pads nothing."""
    n = len(in_dims)
    pads = _expand_paddings(ctx, paddings, n)
    dil = list(dilations)
    if algorithm == "SAME":
        pads = []
        for d, k, s in zip(in_dims, ksize, strides):
            if d < 0 or k < 0:
                pads += [0, 0]  # unknown: the output dim is -1 anyway
                continue
            out = (d + s - 1) // s
            total = max((out - 1) * s + k - d, 0)
            pads += [total // 2, total - total // 2]
        dil = [1] * n
    elif algorithm == "VALID":
        pads = [0] * (2 * n)
    elif algorithm != "EXPLICIT":
        _attr_fail(ctx, f"padding_algorithm must be 'EXPLICIT', 'SAME' or 'VALID', got {algorithm!r}")
    if any(p < 0 for p in pads):
        _attr_fail(ctx, f"paddings must be >= 0, got {list(paddings)}")
    return pads, dil


def _check_positive(ctx, name, values):
    if any(v <= 0 for v in values):
        _attr_fail(ctx, f"{name} must be > 0, got {list(values)}")


# -- conv2d / depthwise_conv2d -------------------------------------------------------------
def _conv_out(ctx, x, w, i, d, k, pad0, pad1, dil, s):
    if d < 0 or k < 0:
        return -1
    dk = dil * (k - 1) + 1
    out = (d + pad0 + pad1 - dk) // s + 1
    if out <= 0:
        ctx.fail(f"output spatial dim {i} would be {out} (input {d}, padding {pad0}+{pad1}, "
                 f"kernel {k}, dilation {dil}, stride {s}): input {x}, filter {w}")
    return out


def _conv_inputs(ctx, filter_layout, spatial=2, last=None):
    """What convolutions (and their transposes) of `spatial` dims check alike: Input and
    Filter of rank spatial + 2 and one float dtype, data_format (or the given `last`),
    groups, strides and dilations. Returns (x, w, dtype, channel_last, groups, strides,
    dilations, input channels)."""
    rank = spatial + 2
    x, w = ctx.input("Input"), ctx.input("Filter")
    _require_rank(ctx, x, (rank,), "Input")
    if w.ndim != rank:
        ctx.fail(f"expects a {rank}-d Filter [{filter_layout}], got {w} (Input {x})")
    dtype = ctx.same_dtype(x, w)
    ctx.require_float(x)
    if last is None:
        last = _channel_last(ctx, ctx.attr("data_format"))
    groups = ctx.attr("groups")
    if groups <= 0:
        _attr_fail(ctx, f"groups must be > 0, got {groups}")
    strides, dilations = _int_list(ctx, "strides", spatial), _int_list(ctx, "dilations", spatial)
    _check_positive(ctx, "strides", strides)
    _check_positive(ctx, "dilations", dilations)
    in_c = x.shape[rank - 1] if last else x.shape[1]
    return x, w, dtype, last, groups, strides, dilations, in_c


def _infer_conv2d(ctx):
    x, w, dtype, last, groups, strides, dilations, in_c = _conv_inputs(
        ctx, "out_channels, in_channels/groups, kh, kw")
    out_c, w_c = w.shape[0], w.shape[1]
    if in_c >= 0 and in_c % groups:
        ctx.fail(f"input channels ({in_c}) must be divisible by groups ({groups}): "
                 f"Input {x} ({ctx.attr('data_format')}), Filter {w}")
    if in_c >= 0 and w_c >= 0 and in_c != w_c * groups:
        ctx.fail(f"input channels ({in_c}) must equal filter channels ({w_c}) * groups ({groups}): "
                 f"Input {x} ({ctx.attr('data_format')}), Filter {w}")
    if out_c >= 0 and out_c % groups:
        ctx.fail(f"filter's output channels ({out_c}) must be divisible by groups ({groups}): "
                 f"Input {x}, Filter {w}")
    spatial = list(x.shape[1:3] if last else x.shape[2:4])
    ksize = list(w.shape[2:4])
    pads, dil = _resolve_padding(ctx, spatial, ksize, strides, ctx.attr("paddings"), dilations,
                                 ctx.attr("padding_algorithm"))
    out_hw = [_conv_out(ctx, x, w, i, spatial[i], ksize[i], pads[2 * i], pads[2 * i + 1], dil[i],
                        strides[i]) for i in range(2)]
    n = x.shape[0]
    shape = [n, *out_hw, out_c] if last else [n, out_c, *out_hw]
    ctx.set_output("Output", shape, dtype)


_CONV_ATTRS = {
    "strides": INTS([1, 1]),
    "paddings": INTS([0, 0]),
    "padding_algorithm": STRING("EXPLICIT"),
    "dilations": INTS([1, 1]),
    "groups": INT(1),
    "data_format": STRING("NCHW"),
}
_IS_TEST = {"is_test": BOOL(False)}

# PaddlePaddle's conv2d_grad reads Input, Filter and Output@GRAD; Input@GRAD is left unbound
# (and not computed) for a first layer whose input needs no gradient.
_CONV_GRAD = grad_op(["Input", "Filter", "Output@GRAD"], ["Input@GRAD", "Filter@GRAD"])

define("conv2d", inputs=["Input", "Filter"], outputs=["Output"], attrs=dict(_CONV_ATTRS),
       extra_attrs=_IS_TEST, infer=_infer_conv2d, grad=_CONV_GRAD,
       doc="2-D convolution: Output = Input (*) Filter, Filter [out_c, in_c/groups, kh, kw].")
define("depthwise_conv2d", inputs=["Input", "Filter"], outputs=["Output"], attrs=dict(_CONV_ATTRS),
       extra_attrs=_IS_TEST, infer=_infer_conv2d, grad=_CONV_GRAD,
       doc="Grouped 2-D convolution with groups == in_channels (one filter group per channel).")


# -- conv2d_transpose ------------------------------------------------------------------------
def transpose_output_dims(ctx, spatial, ksize, strides, pads, dil, x, w) -> list[int]:
    """The spatial output dims of a transposed convolution (any rank): (d - 1) * stride -
    pads + dilation * (k - 1) + 1, or the `output_size` attribute (which must lie in
    [that, that + stride)), or that plus `output_padding`; -1 where unknown."""
    rank = len(spatial)
    output_size, output_padding = list(ctx.attr("output_size")), list(ctx.attr("output_padding"))
    for name, v in (("output_size", output_size), ("output_padding", output_padding)):
        if v and len(v) != rank:
            _attr_fail(ctx, f"{name} must have {rank} values, got {v}")
    out = []
    for i in range(rank):
        d, k = spatial[i], ksize[i]
        base = -1
        if d >= 0 and k >= 0:
            base = (d - 1) * strides[i] - pads[2 * i] - pads[2 * i + 1] + dil[i] * (k - 1) + 1
            if base <= 0:
                ctx.fail(f"output spatial dim {i} would be {base}: Input {x}, Filter {w}")
        if output_size:
            if base >= 0 and not base <= output_size[i] < base + strides[i]:
                ctx.fail(f"output_size[{i}] = {output_size[i]} must be in [{base}, "
                         f"{base + strides[i]}) for Input {x}, Filter {w}")
            out.append(output_size[i])
        elif output_padding:
            if not 0 <= output_padding[i] < max(strides[i], dil[i]):
                _attr_fail(ctx, f"output_padding[{i}] = {output_padding[i]} must be in "
                                f"[0, max(stride, dilation)) = [0, {max(strides[i], dil[i])})")
            out.append(base + output_padding[i] if base >= 0 else -1)
        else:
            out.append(base)
    return out


def _infer_conv2d_transpose(ctx):
    x, w, dtype, last, groups, strides, dilations, in_c = _conv_inputs(
        ctx, "in_channels, out_channels/groups, kh, kw")
    if not dims_match(in_c, w.shape[0]):
        ctx.fail(f"input channels ({in_c}) must equal the filter's first dim ({w.shape[0]}): "
                 f"Input {x} ({ctx.attr('data_format')}), Filter {w}")
    out_c = w.shape[1] * groups if w.shape[1] >= 0 else -1
    spatial = list(x.shape[1:3] if last else x.shape[2:4])
    ksize = list(w.shape[2:4])
    pads, dil = _resolve_padding(ctx, spatial, ksize, strides, ctx.attr("paddings"), dilations,
                                 ctx.attr("padding_algorithm"))
    out_hw = transpose_output_dims(ctx, spatial, ksize, strides, pads, dil, x, w)
    n = x.shape[0]
    shape = [n, *out_hw, out_c] if last else [n, out_c, *out_hw]
    ctx.set_output("Output", shape, dtype)


define("conv2d_transpose",
       inputs=["Input", "Filter", Slot("Bias", dispensable=True, extra=True)], outputs=["Output"],
       attrs={"output_padding": INTS([]), "output_size": INTS([]), **_CONV_ATTRS},
       extra_attrs=_IS_TEST, infer=_infer_conv2d_transpose,
       # Paddle lists the (oneDNN-only) Bias among the inputs but gives it no gradient
       grad=grad_op(["Input", "Filter", "Bias", "Output@GRAD"], ["Input@GRAD", "Filter@GRAD"]),
       doc="2-D transposed convolution (deconvolution), Filter [in_c, out_c/groups, kh, kw].")


# -- pool2d ------------------------------------------------------------------------------------
def _infer_pool2d(ctx):
    x = ctx.input("X")
    _require_rank(ctx, x, (4,), "X")
    ctx.require_float(x)
    if ctx.attr("pooling_type") not in ("max", "avg"):
        _attr_fail(ctx, f"pooling_type must be 'max' or 'avg', got {ctx.attr('pooling_type')!r}")
    last = _channel_last(ctx, ctx.attr("data_format"))
    ksize = list(ctx.attr("ksize"))
    if len(ksize) != 2:
        _attr_fail(ctx, f"ksize must have 2 values for a 4-d input, got {ksize} (X {x})")
    spatial = list(x.shape[1:3] if last else x.shape[2:4])
    n, c = x.shape[0], (x.shape[3] if last else x.shape[1])
    if ctx.attr("global_pooling"):
        out_hw = [1, 1]
    elif ctx.attr("adaptive"):
        _check_positive(ctx, "ksize (the adaptive output size)", ksize)
        out_hw = ksize
    else:
        _check_positive(ctx, "ksize", ksize)
        strides = _int_list(ctx, "strides", 2)
        _check_positive(ctx, "strides", strides)
        pads, _ = _resolve_padding(ctx, spatial, ksize, strides, ctx.attr("paddings"), [1, 1],
                                   ctx.attr("padding_algorithm"))
        ceil = ctx.attr("ceil_mode")
        out_hw = []
        for i in range(2):
            d = spatial[i]
            if d < 0:
                out_hw.append(-1)
                continue
            span = d - ksize[i] + pads[2 * i] + pads[2 * i + 1]
            out = (span + (strides[i] - 1 if ceil else 0)) // strides[i] + 1
            if out <= 0:
                ctx.fail(f"output spatial dim {i} would be {out} (input {d}, ksize {ksize[i]}, "
                         f"paddings {pads[2 * i]}+{pads[2 * i + 1]}, stride {strides[i]}): X {x}")
            out_hw.append(out)
    shape = [n, *out_hw, c] if last else [n, c, *out_hw]
    ctx.set_output("Out", shape, x.dtype)


define("pool2d", inputs=["X"], outputs=["Out"],
       attrs={"pooling_type": STRING(""), "ksize": INTS(), "global_pooling": BOOL(False),
              "strides": INTS([1, 1]), "paddings": INTS([0, 0]), "exclusive": BOOL(True),
              "adaptive": BOOL(False), "ceil_mode": BOOL(False), "data_format": STRING("NCHW"),
              "padding_algorithm": STRING("EXPLICIT"), "use_cudnn": BOOL(False)},
       extra_attrs=_IS_TEST, infer=_infer_pool2d,
       grad=grad_op(["X", "Out", "Out@GRAD"], ["X@GRAD"]),
       doc="2-D max/avg pooling (also global and adaptive); `exclusive` avg ignores padding.")


# -- normalization -------------------------------------------------------------------------------
def _param_dtype(x) -> int:
    """Normalization statistics/parameters are float32 for half-precision inputs."""
    return _FP32 if x.dtype in (_T.FP16, _T.BF16) else x.dtype


def _check_channel_vector(ctx, slot, c, x):
    v = ctx.input(slot)
    if v is None:
        return
    if v.ndim != 1 or not dims_match(v.shape[0], c):
        ctx.fail(f"{slot} must be a 1-d tensor of {c} (the channel count) values, got {v} (X {x})")


def _infer_batch_norm(ctx):
    x = ctx.input("X")
    if not 2 <= x.ndim <= 5:
        ctx.fail(f"expects a 2-d to 5-d X, got {x}")
    ctx.require_float(x)
    last = _channel_last(ctx, ctx.attr("data_layout"), "data_layout")
    c = x.shape[-1] if last else x.shape[1]
    for slot in ("Scale", "Bias", "Mean", "Variance"):
        _check_channel_vector(ctx, slot, c, x)
    for src, dst in (("Mean", "MeanOut"), ("Variance", "VarianceOut")):
        out = ctx.output_names(dst)
        if out and out[0] != ctx.input(src).name:
            ctx.fail(f"{dst} must be the same variable as {src} (running statistics are updated "
                     f"in place), got {src}={ctx.input(src).name!r}, {dst}={out[0]!r}")
    mean = ctx.input("Mean")
    c = c if c >= 0 else mean.shape[0]
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("MeanOut", mean.shape, mean.dtype)
    ctx.set_output("VarianceOut", ctx.input("Variance").shape, ctx.input("Variance").dtype)
    ctx.set_output("SavedMean", [c], _param_dtype(x))
    ctx.set_output("SavedVariance", [c], _param_dtype(x))
    ctx.set_output("ReserveSpace", [-1], x.dtype)


def _batch_norm_grad(op, g):
    """PaddlePaddle's BatchNormGradMaker: batch_norm_grad reads X, Scale, Bias, SavedMean,
    SavedVariance (the batch mean and 1/sqrt(var + eps)), ReserveSpace when the forward op
    has one, MeanOut/VarianceOut, and, when the running statistics normalize (is_test or
    use_global_stats), also Mean/Variance bound to the MeanOut/VarianceOut variables (the
    same variables: the running statistics are updated in place)."""
    ins = {"X": op.input("X"), "Scale": op.input("Scale"), "Bias": op.input("Bias"),
           "SavedMean": op.output("SavedMean"), "SavedVariance": op.output("SavedVariance")}
    if op.output("ReserveSpace"):
        ins["ReserveSpace"] = op.output("ReserveSpace")
    mean_out = op.output("MeanOut") or op.input("Mean")
    var_out = op.output("VarianceOut") or op.input("Variance")
    if op.attr("use_global_stats", False) or op.attr("is_test", False):
        ins["Mean"], ins["Variance"] = mean_out, var_out
    ins["MeanOut"], ins["VarianceOut"] = op.output("MeanOut"), op.output("VarianceOut")
    ins["Y@GRAD"] = g.out("Y")
    outs = {f"{s}@GRAD": [n for n in g.inp(s) if n] for s in ("X", "Scale", "Bias")}
    attrs = {k: v for k, v in op.attrs.items() if k in _BATCH_NORM_GRAD.attrs}
    return [GradOp("batch_norm_grad", ins, outs, attrs)]


_BATCH_NORM_ATTRS = {"is_test": BOOL(False), "momentum": FLOAT(0.9), "epsilon": FLOAT(1e-5),
                     "data_layout": STRING("NCHW"), "use_global_stats": BOOL(False),
                     "trainable_statistics": BOOL(False)}

define("batch_norm",
       inputs=["X", opt("Scale"), opt("Bias"), "Mean", "Variance", opt("MomentumTensor")],
       outputs=["Y", "MeanOut", "VarianceOut", side("SavedMean"), side("SavedVariance"),
                Slot("ReserveSpace", dispensable=True, extra=True)],
       attrs=dict(_BATCH_NORM_ATTRS),
       infer=_infer_batch_norm,
       grad=grad_maker(_batch_norm_grad, inputs=["Y@GRAD"], outputs=["X@GRAD", "Scale@GRAD", "Bias@GRAD"]),
       doc="Batch normalization over the channel axis; MeanOut/VarianceOut are Mean/Variance "
           "updated in place with `momentum`.")


def _infer_batch_norm_grad(ctx):
    for slot in ("X", "Scale", "Bias"):
        src = ctx.input(slot)
        if src is not None:
            ctx.set_output(slot + "@GRAD", src.shape, src.dtype)


# Defined by hand (not derived from a GradRule) because its inputs depend on the attributes.
_BATCH_NORM_GRAD = define(
    "batch_norm_grad",
    inputs=["X", opt("Scale"), opt("Bias"), opt("Mean"), opt("Variance"), "SavedMean",
            "SavedVariance", opt("ReserveSpace"), opt("MeanOut"), opt("VarianceOut"), "Y@GRAD"],
    outputs=[opt("X@GRAD"), opt("Scale@GRAD"), opt("Bias@GRAD")],
    attrs=dict(_BATCH_NORM_ATTRS), infer=_infer_batch_norm_grad, grad=NOT_DIFFERENTIABLE,
    doc="The gradient of batch_norm: through the batch statistics in training, through the "
        "running statistics (Mean/Variance) when is_test or use_global_stats.",
    grad_of="batch_norm")


def _infer_layer_norm(ctx):
    x = ctx.input("X")
    ctx.require_float(x)
    axis = ctx.attr("begin_norm_axis")
    if not 0 < axis < max(x.ndim, 1):
        _attr_fail(ctx, f"begin_norm_axis must be in [1, {x.ndim}) for X {x}, got {axis}")
    right = numel(x.shape[axis:])
    for slot in ("Scale", "Bias"):
        v = ctx.input(slot)
        if v is not None and (v.ndim != 1 or not dims_match(v.shape[0], right)):
            ctx.fail(f"{slot} must be a 1-d tensor of {right} values (the product of X's dims from "
                     f"begin_norm_axis {axis}), got {v} (X {x})")
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("Mean", x.shape[:axis], _param_dtype(x))
    ctx.set_output("Variance", x.shape[:axis], _param_dtype(x))


define("layer_norm", inputs=["X", opt("Scale"), opt("Bias")],
       outputs=["Y", side("Mean"), side("Variance")],
       attrs={"epsilon": FLOAT(1e-5), "begin_norm_axis": INT(1)},
       extra_attrs=_IS_TEST, infer=_infer_layer_norm,
       grad=grad_op(["X", "Scale", "Bias", "Mean", "Variance", "Y@GRAD"],
                    ["X@GRAD", "Scale@GRAD", "Bias@GRAD"]),
       doc="Layer normalization over the dims from begin_norm_axis on; Scale/Bias have their product.")


def _infer_group_norm(ctx):
    x = ctx.input("X")
    if x.ndim < 2:
        ctx.fail(f"expects an X of at least 2 dims, got {x}")
    ctx.require_float(x)
    last = _channel_last(ctx, ctx.attr("data_layout"), "data_layout")
    c = x.shape[-1] if last else x.shape[1]
    groups = ctx.attr("groups")
    if groups <= 0:
        _attr_fail(ctx, f"groups must be > 0, got {groups}")
    if c >= 0 and c % groups:
        ctx.fail(f"channels ({c}) must be divisible by groups ({groups}): X {x}")
    for slot in ("Scale", "Bias"):
        _check_channel_vector(ctx, slot, c, x)
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("Mean", [x.shape[0], groups], _param_dtype(x))
    ctx.set_output("Variance", [x.shape[0], groups], _param_dtype(x))


define("group_norm", inputs=["X", opt("Scale"), opt("Bias")],
       outputs=["Y", side("Mean"), side("Variance")],
       attrs={"epsilon": FLOAT(1e-5), "groups": INT(-1), "data_layout": STRING("NCHW")},
       infer=_infer_group_norm,
       grad=grad_op(["X", "Scale", "Bias", "Y", "Mean", "Variance", "Y@GRAD"],
                    ["X@GRAD", "Scale@GRAD", "Bias@GRAD"]),
       doc="Group normalization: channels split into `groups`, each normalized per sample.")


def _infer_instance_norm(ctx):
    x = ctx.input("X")
    if not 2 <= x.ndim <= 5:
        ctx.fail(f"expects a 2-d to 5-d X, got {x}")
    ctx.require_float(x)
    c = x.shape[1]
    for slot in ("Scale", "Bias"):
        _check_channel_vector(ctx, slot, c, x)
    nc = x.shape[0] * c if x.shape[0] >= 0 and c >= 0 else -1
    ctx.set_output("Y", x.shape, x.dtype)
    ctx.set_output("SavedMean", [nc], _param_dtype(x))
    ctx.set_output("SavedVariance", [nc], _param_dtype(x))


define("instance_norm", inputs=["X", opt("Scale"), opt("Bias")],
       outputs=["Y", side("SavedMean", extra=True),
                side("SavedVariance", extra=True)],
       attrs={"epsilon": FLOAT(1e-5)},
       infer=_infer_instance_norm,
       grad=grad_op(["X", "Scale", "Bias", "SavedMean", "SavedVariance", "Y@GRAD"],
                    ["X@GRAD", "Scale@GRAD", "Bias@GRAD"]),
       doc="Instance normalization: each (sample, channel) plane normalized on its own.")


def _infer_affine_channel(ctx):
    x = ctx.input("X")
    if x.ndim < 2:
        ctx.fail(f"expects an X of at least 2 dims, got {x}")
    last = _channel_last(ctx, ctx.attr("data_layout"), "data_layout")
    c = x.shape[-1] if last else x.shape[1]
    for slot in ("Scale", "Bias"):
        _check_channel_vector(ctx, slot, c, x)
    ctx.set_output("Out", x.shape, x.dtype)


define("affine_channel", inputs=["X", "Scale", "Bias"], outputs=["Out"],
       attrs={"data_layout": STRING("AnyLayout")},
       infer=_infer_affine_channel,
       grad=grad_op(["X", "Scale", "Bias", "Out@GRAD"], ["X@GRAD", "Scale@GRAD", "Bias@GRAD"]),
       doc="Out = X * Scale + Bias with per-channel Scale/Bias (a frozen batch_norm).")


def _infer_lrn(ctx):
    x = ctx.input("X")
    _require_rank(ctx, x, (4,), "X")
    ctx.require_float(x)
    _channel_last(ctx, ctx.attr("data_format"))
    n = ctx.attr("n")
    if n <= 0 or n % 2 == 0:
        _attr_fail(ctx, f"n must be a positive odd number, got {n}")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("MidOut", x.shape, x.dtype)


define("lrn", inputs=["X"], outputs=["Out", "MidOut"],
       attrs={"n": INT(5), "k": FLOAT(2.0), "alpha": FLOAT(1e-4), "beta": FLOAT(0.75),
              "data_format": STRING("AnyLayout")},
       extra_attrs=_IS_TEST, infer=_infer_lrn,
       grad=grad_op(["X", "Out", "MidOut", "Out@GRAD"], ["X@GRAD"]),
       doc="Local response normalization across n neighbouring channels: X / (k + alpha*sum(X^2))^beta.")


# -- dropout ------------------------------------------------------------------------------------
def _infer_dropout(ctx):
    x = ctx.input("X")
    p = ctx.attr("dropout_prob")
    if not 0.0 <= p <= 1.0:
        _attr_fail(ctx, f"dropout_prob must be in [0, 1], got {p}")
    impl = ctx.attr("dropout_implementation")
    if impl not in ("downgrade_in_infer", "upscale_in_train"):
        _attr_fail(ctx, "dropout_implementation must be 'downgrade_in_infer' or 'upscale_in_train', "
                        f"got {impl!r}")
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("Mask", x.shape, _T.UINT8)


define("dropout", inputs=["X", Slot("Seed", dispensable=True, extra=True)],
       outputs=["Out", side("Mask", extra=True)],
       attrs={"dropout_prob": FLOAT(0.5), "is_test": BOOL(False),
              "dropout_implementation": STRING("downgrade_in_infer")},
       extra_attrs={"fix_seed": BOOL(False), "seed": INT(0)},
       infer=_infer_dropout,
       grad=grad_op(["Mask", "Out@GRAD"], ["X@GRAD"], like={"X@GRAD": "Out@GRAD"}),
       doc="Zero elements with probability dropout_prob (Mask: uint8 keep mask); scaling per "
           "dropout_implementation.")


# -- embedding -----------------------------------------------------------------------------------
def _infer_lookup_table_v2(ctx):
    ids, w = ctx.input("Ids"), ctx.input("W")
    if w.ndim != 2:
        ctx.fail(f"expects a 2-d W [vocab, dim], got {w} (Ids {ids})")
    if ids.dtype not in (_T.INT32, _T.INT64):
        ctx.dtype_fail(f"Ids must be int32 or int64, got {ids}")
    vocab, pad = w.shape[0], ctx.attr("padding_idx")
    if vocab >= 0 and not -vocab <= pad < vocab:
        _attr_fail(ctx, f"padding_idx {pad} is out of range for a vocabulary of {vocab} (W {w})")
    ctx.set_output("Out", [*ids.shape, w.shape[1]], w.dtype)


define("lookup_table_v2", inputs=["W", "Ids"], outputs=["Out"],
       attrs={"padding_idx": LONG(-1)},
       infer=_infer_lookup_table_v2,
       grad=grad_op(["Ids", "W", "Out@GRAD"], ["W@GRAD"]),  # dense W@GRAD; Ids get none
       doc="Embedding lookup: Out[..., :] = W[Ids[...], :] (rows equal to padding_idx give zeros).")


# -- prelu ---------------------------------------------------------------------------------------
def _infer_prelu(ctx):
    x, alpha = ctx.input("X"), ctx.input("Alpha")
    ctx.same_dtype(x, alpha)
    mode = ctx.attr("mode")
    n_alpha = numel(alpha.shape)
    if mode == "all":
        want = 1
    elif mode == "channel":
        if x.ndim < 2:
            ctx.fail(f"mode 'channel' needs an X of at least 2 dims, got {x}")
        last = _channel_last(ctx, ctx.attr("data_format"))
        want = x.shape[-1] if last else x.shape[1]
    elif mode == "element":
        want = numel(x.shape[1:])
    else:
        _attr_fail(ctx, f"mode must be 'all', 'channel' or 'element', got {mode!r}")
    if n_alpha >= 0 and want >= 0 and n_alpha != want:
        ctx.fail(f"mode {mode!r} needs an Alpha of {want} element(s), got {alpha} (X {x})")
    ctx.set_output("Out", x.shape, x.dtype)


define("prelu", inputs=["X", "Alpha"], outputs=["Out"],
       attrs={"mode": STRING("all"), "data_format": STRING("NCHW")},
       extra_attrs=_IS_TEST, infer=_infer_prelu,
       grad=grad_op(["X", "Alpha", "Out@GRAD"], ["X@GRAD", "Alpha@GRAD"]),
       doc="Out = max(0, X) + Alpha * min(0, X); Alpha shared ('all'), per channel or per element.")


# -- interpolation ---------------------------------------------------------------------------------
# The input dtypes PaddlePaddle 3.3.1's CPU interpolation kernels register besides the floats
# (float16, bfloat16, float32, float64): integers are resized in float32 and truncated back,
# as its kernels instantiated for them compute (tests/fixtures/paddle_cpu_dtypes.json).
_INTERP_INT_DTYPES = {"nearest": {pb.VarType.UINT8, pb.VarType.INT32, pb.VarType.INT64},
                      "linear": {pb.VarType.UINT8}}
# op type -> (ranks of X it resizes, its kernel family)
_INTERP_OPS = {"linear_interp_v2": ((3,), "linear"), "bilinear_interp_v2": ((4,), "linear"),
               "trilinear_interp_v2": ((5,), "linear"), "nearest_interp_v2": ((3, 4, 5), "nearest"),
               "nearest_interp": ((3, 4, 5), "nearest")}


def _interp_scales(ctx, nd):
    """The positive scales of the `scale` attribute, one per resized dim ([] when unset):
    a list for the v2 ops (one value for every dim allowed), a float for nearest_interp (v1)."""
    scale = ctx.attr("scale")
    scale = [scale] if isinstance(scale, float) else list(scale)
    if len(scale) == 1:
        scale *= nd
    if not scale or all(s <= 0 for s in scale):
        return []
    if len(scale) != nd or any(s <= 0 for s in scale):
        _attr_fail(ctx, f"scale must be {nd} positive values, got {ctx.attr('scale')}")
    return scale


def _infer_interp(ctx):
    """The interpolation ops: X [N, C, *spatial] (or channel-last) resized to out_d/out_h/out_w,
    by `scale`, or by the OutSize/SizeTensor/Scale inputs (known only at run time)."""
    x = ctx.input("X")
    ranks, family = _INTERP_OPS[ctx.op_type]
    _require_rank(ctx, x, ranks, "X")
    if not (dtypes.is_floating(x.dtype) or x.dtype in _INTERP_INT_DTYPES[family]):
        ctx.dtype_fail(f"takes float16, bfloat16, float32, float64 or "
                       f"{', '.join(sorted(dtypes.name(d) for d in _INTERP_INT_DTYPES[family]))} input "
                       f"(PaddlePaddle's CPU kernels), got {x}")
    nd = x.ndim - 2
    last = _channel_last(ctx, ctx.attr("data_layout"), "data_layout")
    n, c = x.shape[0], (x.shape[-1] if last else x.shape[1])
    spatial = list(x.shape[1:-1] if last else x.shape[2:])
    if ctx.has_input("SizeTensor") or ctx.has_input("OutSize") or ctx.has_input("Scale"):
        out_sizes = [-1] * nd
    elif (scale := _interp_scales(ctx, nd)):
        out_sizes = [int(d * s) if d >= 0 else -1 for d, s in zip(spatial, scale)]
        if any(0 <= o < 1 for o in out_sizes):
            ctx.fail(f"scale {scale} gives an empty output for X {x}")
    else:
        names = ["out_d", "out_h", "out_w"][3 - nd:]
        out_sizes = [ctx.attr(name) for name in names]
        if any(o <= 0 for o in out_sizes):
            _attr_fail(ctx, f"needs {' and '.join(names)} > 0, a scale, or an OutSize/SizeTensor/Scale "
                            f"input; got {', '.join(f'{k}={v}' for k, v in zip(names, out_sizes))}, "
                            f"scale={ctx.attr('scale')}")
    shape = [n, *out_sizes, c] if last else [n, c, *out_sizes]
    ctx.set_output("Out", shape, x.dtype)


_INTERP_ATTRS = {
    "data_layout": STRING("NCHW"), "out_d": INT(0), "out_h": INT(0), "out_w": INT(0),
    "scale": FLOATS([]), "interp_method": STRING("bilinear"), "align_corners": BOOL(True),
    "align_mode": INT(1),
}
for _type, _doc in [("linear_interp_v2", "Linear resize of the W dim of a 3-D X"),
                    ("bilinear_interp_v2", "Bilinear resize of the H and W dims"),
                    ("trilinear_interp_v2", "Trilinear resize of the D, H and W dims of a 5-D X"),
                    ("nearest_interp_v2", "Nearest-neighbour resize of the spatial dims of a 3-, 4- or 5-D X"),
                    ("nearest_interp", "Nearest-neighbour resize (the 1.x op: one float `scale`, "
                                       "source positions in / out even with a scale)")]:
    attrs = dict(_INTERP_ATTRS, scale=FLOAT(0.0)) if _type == "nearest_interp" else dict(_INTERP_ATTRS)
    define(_type, inputs=["X", opt("OutSize"), many("SizeTensor", optional=True), opt("Scale")],
           outputs=["Out"], attrs=attrs, infer=_infer_interp,
           # the size/scale tensors are read again (for the output size), never differentiated
           grad=grad_op(["X", "OutSize", "SizeTensor", "Scale", "Out@GRAD"], ["X@GRAD"]),
           doc=f"{_doc}, to out_h x out_w or by `scale` (OutSize/SizeTensor/Scale inputs win).")


def _infer_pixel_shuffle(ctx):
    x = ctx.input("X")
    _require_rank(ctx, x, (4,), "X")
    r = ctx.attr("upscale_factor")
    if r <= 0:
        _attr_fail(ctx, f"upscale_factor must be > 0, got {r}")
    last = _channel_last(ctx, ctx.attr("data_format"))
    c = x.shape[3] if last else x.shape[1]
    if c >= 0 and c % (r * r):
        ctx.fail(f"channels ({c}) must be divisible by upscale_factor^2 ({r * r}): X {x}")
    oc = c // (r * r) if c >= 0 else -1
    h, w = (x.shape[1], x.shape[2]) if last else (x.shape[2], x.shape[3])
    oh, ow = (h * r if h >= 0 else -1), (w * r if w >= 0 else -1)
    shape = [x.shape[0], oh, ow, oc] if last else [x.shape[0], oc, oh, ow]
    ctx.set_output("Out", shape, x.dtype)


def _infer_pixel_shuffle_grad(ctx):
    """pixel_shuffle_grad reads only Out@GRAD: X@GRAD is [N, C*r*r, H/r, W/r]."""
    dout = ctx.input("Out@GRAD")
    r = ctx.attr("upscale_factor")
    last = _channel_last(ctx, ctx.attr("data_format"))
    n, oh, ow, oc = (dout.shape if last else
                     (dout.shape[0], dout.shape[2], dout.shape[3], dout.shape[1]))
    c = oc * r * r if oc >= 0 else -1
    h, w = (oh // r if oh >= 0 else -1), (ow // r if ow >= 0 else -1)
    ctx.set_output("X@GRAD", [n, h, w, c] if last else [n, c, h, w], dout.dtype)


define("pixel_shuffle", inputs=["X"], outputs=["Out"],
       attrs={"upscale_factor": INT(1), "data_format": STRING("NCHW")},
       infer=_infer_pixel_shuffle,
       grad=grad_op(["Out@GRAD"], ["X@GRAD"], infer=_infer_pixel_shuffle_grad),
       doc="Rearrange [N, C*r*r, H, W] into [N, C, H*r, W*r] (sub-pixel convolution).")

