"""PaddlePaddle's `fused_conv2d` (program/ops/fused_conv.py): a convolution, its bias, a
residual add and an activation in one kernel call.

The order is PaddlePaddle's oneDNN kernel's (conv_mkldnn_op / fused_conv2d): Output =
act(conv(Input, Filter) + Bias + ResidualData), Bias per output channel, ResidualData of
the output's shape (when fuse_residual_connection). The activations and how fuse_alpha /
fuse_beta parameterise them (phi/backends/onednn/onednn_reuse.h AppendActivation, the
forms PaddlePaddle 3.x's fusion passes write; program/legacy.py reads the same table):

    relu          x > 0 ? x : x * 0                      (fuse_alpha 0: oneDNN's eltwise_relu)
    relu6         min(max(x, 0), fuse_beta)              (fuse_alpha 0)
    sigmoid, tanh
    hard_sigmoid  min(max(fuse_alpha * x + fuse_beta, 0), 1)
    hard_swish    x * min(max(fuse_alpha * x + fuse_beta, 0), 1)
    swish         x * sigmoid(fuse_alpha * x)

relu is max(x, 0) against an array of zeros (kernels/constants.py), 2.2-2.6x oneDNN's
x * (x > 0) on the mobile CNNs' maps: the relu op's numbers (a negative x gives +0.0) except that
NaN stays NaN (relu: 0), as in oneDNN's form (fused_elemwise_activation's relu functor,
kernels/fused.py, keeps that form; -0.0 may stay -0.0 in either). The others are evaluated by
the activation op's own Keel formula (kernels/activation.py) with the matching attributes
(hard_swish with fuse_alpha 1/6 and fuse_beta 1/2 is the hard_swish op's default
threshold 6, scale 6, offset 3; other values take the oneDNN formula above), so they give
the separate ops' numbers bit for bit (float32 and float64).

Speed (NCHW on numpy): float32/float64 NCHW calls are specialized per shape (`_specialize`:
the geometry and the path worked out once, as for conv2d); a 1x1 convolution widening the
channels adds its bias inside its GEMM (kernels/conv.py `pointwise_with_bias`); the
epilogue runs on each part of the output as soon as the convolution path (kernels/conv.py)
has written it, in the thread that wrote it, while it is in cache; the bias, the residual
add and the activation write in place. float16 computes in float32 and rounds once at the end.
"""
from __future__ import annotations

import numpy as np

from keel.kernels.activation import IN_PLACE_FORMULAS
from keel.kernels.constants import filled
from keel.kernels.conv import bias_in_gemm, nchw_path, pointwise_with_bias
from keel.kernels.nn import _channel_last, _conv_geometry, _per_shape, conv2d_finish
from keel.kernels.parallel import MIN_WORK_PER_PART
from keel.kernels.registry import kernel

ACTIVATIONS = ("", "relu", "relu6", "sigmoid", "tanh", "hard_sigmoid", "hard_swish", "swish")
_HARD_SWISH_ALPHA = float(np.float32(1 / 6))


def _activation(xp, name: str, alpha: float, beta: float):
    """fn(part): the activation applied to `part` in place, or None for "". Where the
    oneDNN form is an activation op's with attributes fuse_alpha / fuse_beta, that op's own
    formula (kernels/activation.py IN_PLACE_FORMULAS) runs in place: the separate op's
    numbers bit for bit, with no array allocated for the result."""
    if name not in ACTIVATIONS:
        raise ValueError(f"fused_conv2d: fuse_activation {name!r} is not one of {list(ACTIVATIONS)}")
    if name == "":
        return None
    if name == "relu":
        if alpha != 0:
            raise ValueError(f"fused_conv2d: relu with fuse_alpha={alpha} (a leaky relu) is not supported")

        def relu(part):  # max(x, 0) against an array of zeros (kernels/constants.py), in place
            xp.maximum(part, filled(xp, 0, part), out=part)
        return relu
    if name == "tanh":
        return lambda part: xp.tanh(part, out=part)
    if name == "relu6" and (alpha != 0 or beta <= 0):
        raise ValueError(f"fused_conv2d: relu6 needs fuse_alpha 0 and the threshold in fuse_beta, "
                         f"got {alpha}, {beta}")
    if name == "hard_swish" and (alpha, beta) != (_HARD_SWISH_ALPHA, 0.5):
        def general_hard_swish(part):
            gate = xp.minimum(xp.maximum(part * alpha + beta, 0), 1)
            part *= gate
        return general_hard_swish
    attrs = {"relu6": {"threshold": beta},
             "hard_sigmoid": {"slope": alpha, "offset": beta},
             "hard_swish": {"threshold": 6.0, "scale": 6.0, "offset": 3.0},
             "swish": {"beta": alpha}}.get(name, {})
    formula = IN_PLACE_FORMULAS[name]
    return lambda part: formula(xp, part, part, **attrs)


def _epilogue(bias, residual, act):
    """epilogue(part, lo, hi): bias, residual and activation on output channels [lo, hi)
    (NCHW) in place; bias [O] or None, residual of the output's shape or None."""
    def epilogue(part, lo, hi):
        if bias is not None:
            part += bias[lo:hi, None, None]
        if residual is not None:
            part += residual[:, lo:hi]
        if act is not None:
            act(part)
    return epilogue


def _specialize(xp, attrs, present, donated):
    """float32/float64 NCHW with every bound input of one dtype: the geometry, the checks of
    Bias and ResidualData and the path worked out once per shape (kernels/nn.py
    `_per_shape`); a call is the path and the epilogue. The activation is bound once."""
    dtype = present[0]
    if (dtype is None or dtype.kind != "f" or dtype.itemsize < 4 or _channel_last(attrs["data_format"])
            or any(p is not None and p != dtype for p in present)):
        return None
    has_bias = present[2] is not None
    residual_slot = present[3] is not None
    if attrs["fuse_residual_connection"] and not residual_slot:
        return None  # the general kernel says what is missing
    act = _activation(xp, attrs["fuse_activation"], float(np.float32(attrs["fuse_alpha"])),
                      float(np.float32(attrs["fuse_beta"])))

    def general(x, w, *rest):
        rest = iter(rest)
        bias = next(rest) if has_bias else None
        residual = next(rest) if residual_slot else None
        return fused_conv2d(xp, x, w, bias, residual, **attrs)

    def plan_for(x, w, *rest):
        geo = _conv_geometry(xp, x, w, attrs["strides"], attrs["paddings"], attrs["padding_algorithm"],
                             attrs["dilations"], attrs["groups"], attrs["data_format"], "fused_conv2d")
        o = w.shape[0]
        bias = rest[0] if has_bias else None
        residual = rest[-1] if residual_slot and attrs["fuse_residual_connection"] else None
        if (x.dtype != dtype or any(a.dtype != dtype for a in rest) or (bias is not None and bias.size != o)
                or (residual is not None and tuple(residual.shape) != geo.out_shape)):
            return general  # it converts, or says what is wrong
        path = nchw_path(x.shape, w.shape, geo.strides, geo.dilations, geo.pads, geo.groups)
        folded = has_bias and bias_in_gemm(x.shape, w.shape, geo.strides, geo.pads, geo.groups)
        shape, strides, uses_residual = geo.out_shape, geo.strides, residual is not None
        if _one_gemm(x.shape, w.shape, geo, folded):
            return _one_gemm_plan(xp, x.shape[1], shape, dtype, has_bias, uses_residual, act)

        def plan(x, w, *rest):
            bias = rest[0].reshape(o) if has_bias else None
            residual = rest[-1] if uses_residual else None
            out = xp.empty(shape, dtype=dtype)
            if folded:
                pointwise_with_bias(xp, x, w, bias, strides, out)
                if residual is not None or act is not None:
                    _epilogue(None, residual, act)(out, 0, o)
            else:
                path(xp, x, w, out, _epilogue(bias, residual, act))
            return out
        return plan
    return _per_shape(plan_for)


def _one_gemm(x_shape, w_shape, geo, folded) -> bool:
    """One sample, one group, a 1x1 kernel at stride 1 without padding, its bias not in the
    GEMM and too little work ever to split across threads (kernels/parallel.py): the convolution
    is one [O, C] x [C, H*W] GEMM and the epilogue three in-place passes over its result,
    so the plan calls them directly (`_one_gemm_plan`)."""
    o, cg, kh, kw = w_shape
    return (x_shape[0] == 1 and geo.groups == 1 and kh == kw == 1 and tuple(geo.strides) == (1, 1)
            and not any(geo.pads) and not folded and o * x_shape[2] * x_shape[3] < 2 * MIN_WORK_PER_PART)


def _one_gemm_plan(xp, c, shape, dtype, has_bias, uses_residual, act):
    """The `_one_gemm` case without the general path's layers: 2-D views, the GEMM, bias,
    residual and activation in place on its [O, H*W] result. The same BLAS call and the same
    passes as conv2d's 1x1 path and the epilogue (bit for bit); per call on a [1, 8, 2, 2]
    -> 8 relu convolution (nothing but overhead) 9.9 -> 3.8 us."""
    o, hw = shape[1], shape[2] * shape[3]

    def plan(x, w, *rest):
        out = xp.empty(shape, dtype=dtype)
        result = out.reshape(o, hw)
        xp.matmul(w.reshape(o, c), x.reshape(c, hw), out=result)
        if has_bias:
            result += rest[0].reshape(o, 1)
        if uses_residual:
            result += rest[-1].reshape(o, hw)
        if act is not None:
            act(result)
        return out
    return plan


@kernel("fused_conv2d", inputs=["Input", "Filter", "Bias", "ResidualData"], outputs=["Output"],
        attrs=["strides", "paddings", "padding_algorithm", "dilations", "groups", "data_format",
               "fuse_activation", "fuse_alpha", "fuse_beta", "fuse_residual_connection"], specialize=_specialize)
def fused_conv2d(xp, x, w, bias=None, residual=None, *, strides, paddings, padding_algorithm, dilations,
                 groups, data_format, fuse_activation, fuse_alpha=0.0, fuse_beta=0.0,
                 fuse_residual_connection=False):
    geo = _conv_geometry(xp, x, w, strides, paddings, padding_algorithm, dilations, groups, data_format,
                         "fused_conv2d")
    cdt, channel_last = geo.dtype, geo.channel_last
    o = w.shape[0]
    if bias is not None:
        if bias.size != o:
            raise ValueError(f"fused_conv2d: Bias has {bias.size} values for {o} output channels")
        bias = bias.astype(cdt, copy=False).reshape(o)
    if fuse_residual_connection:
        if residual is None:
            raise ValueError("fused_conv2d: fuse_residual_connection needs ResidualData")
        if tuple(residual.shape) != geo.out_shape:
            raise ValueError(f"fused_conv2d: ResidualData {tuple(residual.shape)} must have the output's "
                             f"shape {geo.out_shape}")
        residual = residual.astype(cdt, copy=False)
    else:
        residual = None
    act = _activation(xp, fuse_activation, float(np.float32(fuse_alpha)), float(np.float32(fuse_beta)))

    xc, wc = x.astype(cdt, copy=False), w.astype(cdt, copy=False)
    if not channel_last:
        return conv2d_finish(xp, geo.run(xp, xc, wc, _epilogue(bias, residual, act)), x.dtype)
    out = geo.run(xp, xc, wc)
    if residual is not None:
        residual = residual.transpose(0, 3, 1, 2)
    # NCHW views: the epilogue writes through them
    _epilogue(bias, residual, act)(out.transpose(0, 3, 1, 2), 0, o)
    return conv2d_finish(xp, out, x.dtype)
