"""Converters of the ops every network has: activations, elementwise arithmetic with
PaddlePaddle's `axis` broadcasting, matmul, reshape, softmax, convolution."""
from __future__ import annotations

from keel.program.onnx.registry import converts

_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "abs": "Abs", "sqrt": "Sqrt"}


@converts(*_UNARY)
def unary(g, op):
    g.node(_UNARY[op.type], [g.x(op, "X")], g.y(op, "Out"))


_BINARY = {"elementwise_add": "Add", "elementwise_sub": "Sub", "elementwise_mul": "Mul",
           "elementwise_div": "Div", "elementwise_pow": "Pow"}


@converts(*_BINARY)
def binary(g, op):
    g.node(_BINARY[op.type], [g.x(op, "X"), aligned_y(g, op)], g.y(op, "Out"))


def aligned_y(g, op) -> str:
    """Input Y reshaped for numpy broadcasting: PaddlePaddle's `axis` places a lower-rank Y
    at X's dimension `axis` (-1: trailing, numpy's rule), so Y gains trailing unit axes."""
    y = g.x(op, "Y")
    x_rank, y_rank = len(g.shape(op, "X")), len(g.shape(op, "Y"))
    axis = op.attr("axis", -1)
    if axis is None or axis < 0 or y_rank >= x_rank or axis + y_rank == x_rank:
        return y
    return g.unsqueeze(y, range(y_rank, x_rank - axis))


@converts("matmul_v2")
def matmul_v2(g, op):
    x, y = g.x(op, "X"), g.x(op, "Y")
    if op.attr("trans_x", False):
        x = _swap_last_two(g, x, len(g.shape(op, "X")))
    if op.attr("trans_y", False):
        y = _swap_last_two(g, y, len(g.shape(op, "Y")))
    g.node("MatMul", [x, y], g.y(op, "Out"))


def _swap_last_two(g, value, rank):
    if rank < 2:
        return value
    perm = list(range(rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return g.node("Transpose", [value], perm=perm)


@converts("reshape2")
def reshape2(g, op):
    if op.input("ShapeTensor") or op.input("Shape"):
        raise g.error("a shape given by tensors is not translated yet")
    # PaddlePaddle's 0 copies the input's dimension, as ONNX's Reshape with allowzero=0 does
    g.node("Reshape", [g.x(op, "X"), g.ints(op.attr("shape"), "shape")], g.y(op, "Out"))


@converts("softmax")
def softmax(g, op):
    g.node("Softmax", [g.x(op, "X")], g.y(op, "Out"), axis=op.attr("axis", -1))


@converts("conv2d", "depthwise_conv2d")
def conv2d(g, op):
    if op.attr("data_format", "NCHW") not in ("NCHW", "AnyLayout"):
        raise g.error(f"data_format {op.attr('data_format')!r}: only NCHW is translated")
    kernel = g.shape(op, "Filter")[2:]
    pads = list(op.attr("paddings", [0, 0]))
    algorithm = op.attr("padding_algorithm", "EXPLICIT")
    if len(pads) == 2:
        pads = [pads[0], pads[1], pads[0], pads[1]]
    elif len(pads) == 4:  # PaddlePaddle: [top, bottom, left, right]; ONNX: [top, left, bottom, right]
        pads = [pads[0], pads[2], pads[1], pads[3]]
    attrs = dict(kernel_shape=list(kernel), strides=list(op.attr("strides", [1, 1])),
                 dilations=list(op.attr("dilations", [1, 1])), group=op.attr("groups", 1))
    if algorithm == "SAME":
        attrs["auto_pad"] = "SAME_UPPER"
    elif algorithm == "VALID":
        attrs["pads"] = [0, 0, 0, 0]
    else:
        attrs["pads"] = pads
    g.node("Conv", [g.x(op, "Input"), g.x(op, "Filter")], g.y(op, "Output"), **attrs)
