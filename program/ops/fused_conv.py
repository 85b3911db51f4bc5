"""PaddlePaddle's `fused_conv2d`: a 2-D convolution with its bias, a residual add and an
activation in one op (the op PaddlePaddle's oneDNN fusion passes write; kernels/fused_conv.py).

    Output = act(conv2d(Input, Filter) + Bias + ResidualData)

Bias is one value per output channel; ResidualData (read when fuse_residual_connection)
has the output's shape; fuse_activation is one of FUSED_CONV_ACTIVATIONS, parameterised by
the extra attributes fuse_alpha and fuse_beta as PaddlePaddle 3.x's oneDNN kernel reads
them (relu6: threshold in fuse_beta; hard_sigmoid: slope, offset; hard_swish:
x * min(max(alpha x + beta, 0), 1), 1/6 and 1/2 for the hard_swish op's defaults; swish:
beta in fuse_alpha). Keel writes it only from the inference pass
program/passes/fuse_conv.py; not differentiable.
"""
from __future__ import annotations

from keel.program.ops.nn import _CONV_ATTRS, _infer_conv2d
from keel.program.ops.registry import BOOL, FLOAT, NOT_DIFFERENTIABLE, STRING, define, opt

FUSED_CONV_ACTIVATIONS = ("", "relu", "relu6", "sigmoid", "tanh", "hard_sigmoid", "hard_swish", "swish")


def _infer_fused_conv2d(ctx):
    _infer_conv2d(ctx)
    act = ctx.attr("fuse_activation")
    if act not in FUSED_CONV_ACTIVATIONS:
        ctx.fail(f"fuse_activation {act!r} is not one Keel implements: {list(FUSED_CONV_ACTIVATIONS)}")
    x, w = ctx.input("Input"), ctx.input("Filter")
    bias = ctx.input("Bias")
    if bias is not None and w.shape[0] >= 0 and bias.shape and -1 not in bias.shape:
        size = 1
        for d in bias.shape:
            size *= d
        if size != w.shape[0]:
            ctx.fail(f"Bias {bias} must hold one value per output channel ({w.shape[0]}; Filter {w})")
    residual = ctx.input("ResidualData")
    if ctx.attr("fuse_residual_connection") and residual is None:
        ctx.fail("fuse_residual_connection is set but ResidualData is empty")
    if residual is not None and ctx.attr("fuse_residual_connection"):
        if residual.dtype != x.dtype:
            ctx.dtype_fail(f"ResidualData {residual} must have Input's dtype ({x})")


define("fused_conv2d", inputs=["Input", "Filter", opt("Bias"), opt("ResidualData")], outputs=["Output"],
       attrs={**_CONV_ATTRS, "fuse_activation": STRING(""), "fuse_residual_connection": BOOL(False),
              "force_fp32_output": BOOL(False)},
       extra_attrs={"fuse_alpha": FLOAT(0.0), "fuse_beta": FLOAT(0.0)},
       infer=_infer_fused_conv2d,
       # PaddlePaddle registers no gradient for it: an inference-only fusion.
       grad=NOT_DIFFERENTIABLE,
       doc="A 2-D convolution, its per-channel Bias, the ResidualData add (with "
           "fuse_residual_connection) and the activation fuse_activation (relu, relu6, sigmoid, "
           "tanh, hard_sigmoid, hard_swish, swish; fuse_alpha/fuse_beta as PaddlePaddle's oneDNN "
           "kernel reads them) in one op. Inference only.")
