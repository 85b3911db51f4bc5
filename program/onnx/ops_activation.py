"""Converters of the parameterized activations: one ONNX op where its definition is
PaddlePaddle's (LeakyRelu, Elu, HardSigmoid, ...), else the formula PaddlePaddle's kernel
computes, written out in ONNX ops."""
from __future__ import annotations

import math

from keel.program.onnx.registry import converts


def _io(g, op):
    return g.x(op, "X"), g.dtype(op, "X"), g.y(op, "Out")


@converts("leaky_relu", "elu", "celu", "selu", "hard_sigmoid", "hard_shrink", "softshrink")
def single_onnx_op(g, op):
    x, _, out = _io(g, op)
    if op.type == "leaky_relu":
        g.node("LeakyRelu", [x], out, alpha=float(op.attr("alpha", 0.02)))
    elif op.type == "elu":
        g.node("Elu", [x], out, alpha=float(op.attr("alpha", 1.0)))
    elif op.type == "celu":
        g.node("Celu", [x], out, alpha=float(op.attr("alpha", 1.0)))
    elif op.type == "selu":
        g.node("Selu", [x], out, alpha=float(op.attr("alpha")), gamma=float(op.attr("scale")))
    elif op.type == "hard_sigmoid":
        g.node("HardSigmoid", [x], out, alpha=float(op.attr("slope", 0.2)), beta=float(op.attr("offset", 0.5)))
    elif op.type == "hard_shrink":
        g.node("Shrink", [x], out, lambd=float(op.attr("threshold", 0.5)), bias=0.0)
    else:  # softshrink: x -+ lambda outside [-lambda, lambda]
        lambd = float(op.attr("lambda", 0.5))
        g.node("Shrink", [x], out, lambd=lambd, bias=lambd)


@converts("relu6", "brelu")
def clipped_relu(g, op):
    x, dtype, out = _io(g, op)
    low, high = (0.0, op.attr("threshold", 6.0)) if op.type == "relu6" else (op.attr("t_min"), op.attr("t_max"))
    g.node("Clip", [x, g.scalar(low, dtype), g.scalar(high, dtype)], out)


@converts("hard_swish")
def hard_swish(g, op):
    """x * min(max(x + offset, 0), threshold) / scale (ONNX's HardSwish is the default 3/6/6)."""
    x, dtype, out = _io(g, op)
    threshold, scale, offset = op.attr("threshold", 6.0), op.attr("scale", 6.0), op.attr("offset", 3.0)
    if (threshold, scale, offset) == (6.0, 6.0, 3.0) and g.opset >= 14:
        g.node("HardSwish", [x], out)
        return
    gate = g.node("Clip", [g.node("Add", [x, g.scalar(offset, dtype)]), g.scalar(0, dtype),
                           g.scalar(threshold, dtype)])
    g.node("Div", [g.node("Mul", [x, gate]), g.scalar(scale, dtype)], out)


@converts("swish", "silu")
def swish(g, op):
    """x * sigmoid(beta * x) (silu: beta 1)."""
    x, dtype, out = _io(g, op)
    beta = op.attr("beta", 1.0) if op.type == "swish" else 1.0
    scaled = x if beta == 1.0 else g.node("Mul", [x, g.scalar(beta, dtype)])
    g.node("Mul", [x, g.node("Sigmoid", [scaled])], out)


@converts("gelu")
def gelu(g, op):
    """0.5 x (1 + erf(x / sqrt 2)), or with `approximate` PaddlePaddle's tanh form
    0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))."""
    x, dtype, out = _io(g, op)
    if op.attr("approximate", False):
        cube = g.node("Mul", [g.node("Mul", [x, x]), x])
        inner = g.node("Add", [x, g.node("Mul", [cube, g.scalar(0.044715, dtype)])])
        curve = g.node("Tanh", [g.node("Mul", [inner, g.scalar(math.sqrt(2 / math.pi), dtype)])])
    else:
        curve = g.node("Erf", [g.node("Div", [x, g.scalar(math.sqrt(2.0), dtype)])])
    half_x = g.node("Mul", [x, g.scalar(0.5, dtype)])
    g.node("Mul", [half_x, g.node("Add", [curve, g.scalar(1.0, dtype)])], out)


def _softplus(g, x, dtype, beta, threshold):
    """PaddlePaddle's softplus: log(1 + exp(beta x)) / beta, and x itself where beta x >
    threshold (where the former rounds to it)."""
    scaled = x if beta == 1.0 else g.node("Mul", [x, g.scalar(beta, dtype)])
    smooth = g.node("Softplus", [scaled])
    if beta != 1.0:
        smooth = g.node("Div", [smooth, g.scalar(beta, dtype)])
    linear = g.node("Greater", [scaled, g.scalar(threshold, dtype)])
    return g.node("Where", [linear, x, smooth])


@converts("softplus")
def softplus(g, op):
    x, dtype, out = _io(g, op)
    g.identity(_softplus(g, x, dtype, op.attr("beta", 1.0), op.attr("threshold", 20.0)), out)


@converts("mish")
def mish(g, op):
    """x tanh(softplus(x)), softplus with PaddlePaddle's threshold."""
    x, dtype, out = _io(g, op)
    g.node("Mul", [x, g.node("Tanh", [_softplus(g, x, dtype, 1.0, op.attr("threshold", 20.0))])], out)


@converts("logsigmoid")
def logsigmoid(g, op):
    """log(sigmoid(x)) = -softplus(-x)."""
    x, _, out = _io(g, op)
    g.node("Neg", [g.node("Softplus", [g.node("Neg", [x])])], out)


@converts("tanh_shrink")
def tanh_shrink(g, op):
    x, _, out = _io(g, op)
    g.node("Sub", [x, g.node("Tanh", [x])], out)


@converts("stanh")
def stanh(g, op):
    """scale_b * tanh(scale_a * x)."""
    x, dtype, out = _io(g, op)
    inner = g.node("Tanh", [g.node("Mul", [x, g.scalar(op.attr("scale_a", 0.67), dtype)])])
    g.node("Mul", [inner, g.scalar(op.attr("scale_b", 1.7159), dtype)], out)


@converts("thresholded_relu")
def thresholded_relu(g, op):
    """x where x > threshold, else `value`."""
    x, dtype, out = _io(g, op)
    keep = g.node("Greater", [x, g.scalar(op.attr("threshold", 1.0), dtype)])
    g.node("Where", [keep, x, g.scalar(op.attr("value", 0.0), dtype)], out)


@converts("prelu")
def prelu(g, op):
    """PRelu with Alpha shaped to broadcast as PaddlePaddle's `mode` means it: one value
    ('all'), one per channel ('channel', axis 1 or the last for NHWC), one per element of a
    sample ('element')."""
    x, alpha = g.x(op, "X"), g.x(op, "Alpha")
    rank, mode = g.rank(op, "X"), op.attr("mode", "all")
    if mode == "channel" and op.attr("data_format", "NCHW") in ("NCHW", "NCDHW", "NCL", "AnyLayout"):
        alpha = g.node("Reshape", [alpha, g.ints([-1] + [1] * (rank - 2))])
    elif mode == "channel":
        alpha = g.node("Reshape", [alpha, g.ints([-1])])
    elif mode == "element":
        sample = g.shape(op, "X")[1:]
        alpha = g.node("Reshape", [alpha, g.shape_of(x, 1) if any(d < 0 for d in sample) else g.ints(sample)])
    g.node("PRelu", [x, alpha], g.y(op, "Out"))
