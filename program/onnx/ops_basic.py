"""Converters of the ops every network has: elementwise math (one ONNX op, or a short
composition where PaddlePaddle's definition differs from ONNX's), elementwise arithmetic
with PaddlePaddle's `axis` broadcasting, matmul/mul/fc, reshape, softmax, convolution."""
from __future__ import annotations

import numpy as np

from keel.program.onnx.registry import converts

# op type -> the ONNX op computing it exactly
_UNARY = {"relu": "Relu", "sigmoid": "Sigmoid", "tanh": "Tanh", "exp": "Exp", "abs": "Abs", "sqrt": "Sqrt",
          "log": "Log", "sin": "Sin", "cos": "Cos", "tan": "Tan", "asin": "Asin", "acos": "Acos",
          "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh", "asinh": "Asinh", "acosh": "Acosh",
          "atanh": "Atanh", "floor": "Floor", "ceil": "Ceil", "reciprocal": "Reciprocal", "erf": "Erf",
          "sign": "Sign", "softsign": "Softsign", "isnan_v2": "IsNaN", "logical_not": "Not",
          "assign": "Identity", "share_data": "Identity"}


@converts(*_UNARY)
def unary(g, op):
    x = g.x(op, "X")
    if op.type == "logical_not":
        x = as_bool(g, x, g.dtype(op, "X"))
    g.node(_UNARY[op.type], [x], g.y(op, "Out"))


def as_bool(g, value, dtype):
    """PaddlePaddle's logical ops read any dtype as "nonzero": ONNX's take bool only."""
    return value if np.dtype(dtype) == np.bool_ else g.cast(value, np.bool_)


@converts("rsqrt", "square", "log2", "log10", "log1p", "expm1", "isinf_v2", "isfinite_v2")
def unary_composed(g, op):
    x, dtype, out = g.x(op, "X"), g.dtype(op, "X"), g.y(op, "Out")
    if op.type == "rsqrt":
        g.node("Reciprocal", [g.node("Sqrt", [x])], out)
    elif op.type == "square":
        g.node("Mul", [x, x], out)
    elif op.type in ("log2", "log10"):
        base = 2.0 if op.type == "log2" else 10.0
        g.node("Div", [g.node("Log", [x]), g.scalar(np.log(base), dtype)], out)
    elif op.type == "log1p":
        g.node("Log", [g.node("Add", [x, g.scalar(1, dtype)])], out)
    elif op.type == "expm1":
        g.node("Sub", [g.node("Exp", [x]), g.scalar(1, dtype)], out)
    elif op.type == "isinf_v2":
        g.node("IsInf", [x], out)
    else:  # isfinite_v2: neither NaN nor +-inf
        g.node("Not", [g.node("Or", [g.node("IsNaN", [x]), g.node("IsInf", [x])])], out)


@converts("round")
def round_(g, op):
    """PaddlePaddle rounds halves away from zero (ONNX's Round: to even): sign(x) *
    floor(|x| * 10**d + 0.5) / 10**d."""
    x, dtype = g.x(op, "X"), g.dtype(op, "X")
    if np.issubdtype(dtype, np.integer):
        g.identity(x, g.y(op, "Out"))
        return
    scale = 10.0 ** op.attr("decimals", 0)
    magnitude = g.node("Abs", [x])
    if scale != 1.0:
        magnitude = g.node("Mul", [magnitude, g.scalar(scale, dtype)])
    rounded = g.node("Floor", [g.node("Add", [magnitude, g.scalar(0.5, dtype)])])
    if scale != 1.0:
        rounded = g.node("Div", [rounded, g.scalar(scale, dtype)])
    g.node("Mul", [g.node("Sign", [x]), rounded], g.y(op, "Out"))


_BINARY = {"elementwise_add": "Add", "elementwise_sub": "Sub", "elementwise_mul": "Mul",
           "elementwise_div": "Div", "elementwise_pow": "Pow", "elementwise_max": "Max",
           "elementwise_min": "Min", "equal": "Equal", "greater_than": "Greater",
           "greater_equal": "GreaterOrEqual", "less_than": "Less", "less_equal": "LessOrEqual",
           "bitwise_and": "BitwiseAnd", "bitwise_or": "BitwiseOr", "bitwise_xor": "BitwiseXor"}
_LOGICAL = {"logical_and": "And", "logical_or": "Or", "logical_xor": "Xor"}
_BOOL_BITWISE = {"bitwise_and": "And", "bitwise_or": "Or", "bitwise_xor": "Xor"}


@converts(*_BINARY, "not_equal")
def binary(g, op):
    x, y = g.x(op, "X"), aligned_y(g, op)
    if op.type in _BOOL_BITWISE and g.dtype(op, "X") == np.bool_:
        g.node(_BOOL_BITWISE[op.type], [x, y], g.y(op, "Out"))
    elif op.type in _BOOL_BITWISE and g.opset < 18:
        raise g.error(f"ONNX has Bitwise{_BOOL_BITWISE[op.type]} from opset 18 on (asked for {g.opset})")
    elif op.type == "not_equal":
        g.node("Not", [g.node("Equal", [x, y])], g.y(op, "Out"))
    else:
        g.node(_BINARY[op.type], [x, y], g.y(op, "Out"))


@converts(*_LOGICAL)
def logical(g, op):
    x = as_bool(g, g.x(op, "X"), g.dtype(op, "X"))
    y = as_bool(g, g.x(op, "Y"), g.dtype(op, "Y"))
    g.node(_LOGICAL[op.type], [x, y], g.y(op, "Out"))


@converts("bitwise_not")
def bitwise_not(g, op):
    if g.dtype(op, "X") == np.bool_:
        g.node("Not", [g.x(op, "X")], g.y(op, "Out"))
    elif g.opset < 18:
        raise g.error(f"ONNX has BitwiseNot from opset 18 on (asked for {g.opset})")
    else:
        g.node("BitwiseNot", [g.x(op, "X")], g.y(op, "Out"))


@converts("elementwise_mod", "elementwise_floordiv")
def floor_division(g, op):
    """Python's rounding (PaddlePaddle's kernels): the remainder takes the divisor's sign and
    the quotient rounds down. ONNX's integer Mod (fmod=0) already does; ONNX's float Mod is
    C's fmod and its integer Div truncates, so those are corrected where the signs differ."""
    x, y, dtype, out = g.x(op, "X"), aligned_y(g, op), g.dtype(op, "X"), g.y(op, "Out")
    integer = np.issubdtype(dtype, np.integer)
    if op.type == "elementwise_floordiv" and not integer:
        g.node("Floor", [g.node("Div", [x, y])], out)
        return
    if op.type == "elementwise_mod" and integer:
        g.node("Mod", [x, y], out, fmod=0)
        return
    zero = g.scalar(0, dtype)
    remainder = g.node("Mod", [x, y], fmod=1)  # truncated: the sign of x
    inexact = g.node("Not", [g.node("Equal", [remainder, zero])])
    signs_differ = g.node("Xor", [g.node("Less", [remainder, zero]), g.node("Less", [y, zero])])
    fix = g.node("And", [inexact, signs_differ])
    if op.type == "elementwise_mod":
        g.node("Add", [remainder, g.node("Where", [fix, y, zero])], out)
    else:
        g.node("Sub", [g.node("Div", [x, y]), g.node("Where", [fix, g.scalar(1, dtype), zero])], out)


def aligned_y(g, op) -> str:
    """Input Y reshaped for numpy broadcasting: PaddlePaddle's `axis` places a lower-rank Y
    at X's dimension `axis` (-1: trailing, numpy's rule), so Y gains trailing unit axes."""
    y = g.x(op, "Y")
    x_rank, y_rank = len(g.shape(op, "X")), len(g.shape(op, "Y"))
    axis = op.attr("axis", -1)
    if axis is None or axis < 0 or y_rank >= x_rank or axis + y_rank == x_rank:
        return y
    return g.unsqueeze(y, range(y_rank, x_rank - axis))


@converts("matmul_v2", "matmul", "bmm")
def matmul(g, op):
    x, y = g.x(op, "X"), g.x(op, "Y")
    if op.attr("trans_x", False) or op.attr("transpose_X", False):
        x = _swap_last_two(g, x, g.rank(op, "X"))
    if op.attr("trans_y", False) or op.attr("transpose_Y", False):
        y = _swap_last_two(g, y, g.rank(op, "Y"))
    alpha = op.attr("alpha", 1.0) if op.type == "matmul" else 1.0
    if alpha == 1.0:
        g.node("MatMul", [x, y], g.y(op, "Out"))
    else:
        g.node("Mul", [g.node("MatMul", [x, y]), g.scalar(alpha, g.dtype(op, "X"))], g.y(op, "Out"))


def _swap_last_two(g, value, rank):
    if rank < 2:
        return value
    perm = list(range(rank))
    perm[-2], perm[-1] = perm[-1], perm[-2]
    return g.node("Transpose", [value], perm=perm)


@converts("mul")
def mul(g, op):
    if g.rank(op, "Y") != 2 and op.attr("y_num_col_dims", 1) != 1:
        raise g.error(f"Y of rank {g.rank(op, 'Y')} flattened at y_num_col_dims "
                      f"{op.attr('y_num_col_dims')}: only a 2-D Y (or one flattened at 1) is translated")
    y = g.x(op, "Y")
    if g.rank(op, "Y") != 2:
        y = g.node("Flatten", [y], axis=1)
    _flattened_matmul(g, op, g.x(op, "X"), g.rank(op, "X"), op.attr("x_num_col_dims", 1), y,
                      g.shape(op, "Y")[1:], None, g.y(op, "Out"))


@converts("fc")
def fc(g, op):
    activation = op.attr("activation_type", "")
    if activation not in ("", "relu"):
        raise g.error(f"activation_type {activation!r}: only '' and 'relu' are fc's")
    out = g.y(op, "Out")
    product = out if not activation else g.fresh("fc")
    bias = g.x(op, "Bias") if g.has(op, "Bias") else None
    if bias is not None and g.rank(op, "Bias") != 1:
        bias = g.node("Reshape", [bias, g.ints([-1])])
    _flattened_matmul(g, op, g.x(op, "Input"), g.rank(op, "Input"), op.attr("in_num_col_dims", 1),
                      g.x(op, "W"), g.shape(op, "W")[1:], bias, product)
    if activation:
        g.node("Relu", [product], out)


def _flattened_matmul(g, op, x, x_rank, num_col_dims, w, w_tail, bias, out):
    """x flattened to 2-D after its first `num_col_dims` dims, times the 2-D w (+ bias),
    reshaped to x's leading dims followed by `w_tail` (mul's and fc's rule)."""
    if num_col_dims < 0:
        num_col_dims += x_rank
    product_out = out if bias is None else g.fresh("matmul")
    if num_col_dims == x_rank - 1:  # the common case: a matmul over the last dim, as is
        g.node("MatMul", [x, w], product_out)
    else:
        flat = g.node("Flatten", [x], axis=num_col_dims)
        product = g.node("MatMul", [flat, w])
        if num_col_dims == 1:
            g.identity(product, product_out)
        else:
            shape = g.node("Concat", [g.shape_of(x, 0, num_col_dims), g.ints(w_tail)], axis=0)
            g.node("Reshape", [product, shape], product_out)
    if bias is not None:
        g.node("Add", [product_out, bias], out)


@converts("softmax", "log_softmax")
def softmax(g, op):
    onnx_op = "Softmax" if op.type == "softmax" else "LogSoftmax"
    g.node(onnx_op, [g.x(op, "X")], g.y(op, "Out"), axis=op.attr("axis", -1))


@converts("conv2d", "depthwise_conv2d", "conv2d_transpose")
def conv2d(g, op):
    if op.attr("data_format", "NCHW") not in ("NCHW", "AnyLayout"):
        raise g.error(f"data_format {op.attr('data_format')!r}: only NCHW is translated")
    kernel = list(g.shape(op, "Filter")[2:])
    strides, dilations = list(op.attr("strides", [1, 1])), list(op.attr("dilations", [1, 1]))
    attrs = dict(kernel_shape=kernel, strides=strides, dilations=dilations, group=op.attr("groups", 1))
    algorithm = op.attr("padding_algorithm", "EXPLICIT")
    spatial = g.shape(op, "Input")[2:]
    if algorithm == "VALID":
        pads = [0, 0, 0, 0]
    elif algorithm == "SAME":
        if op.type != "conv2d_transpose":
            attrs["auto_pad"] = "SAME_UPPER"
            pads = None
        else:  # PaddlePaddle pads the transposed convolution as it would the direct one
            if any(d < 0 for d in spatial):
                raise g.error("padding_algorithm SAME of a transposed convolution needs the input's "
                              f"height and width, unknown here ({list(spatial)})")
            pads = same_pads(spatial, kernel, strides, dilations)
    else:
        pads = onnx_pads(op.attr("paddings", [0, 0]))
    if pads is not None:
        attrs["pads"] = pads
    inputs = [g.x(op, "Input"), g.x(op, "Filter")]
    if op.type == "conv2d_transpose":
        attrs["output_padding"] = _output_padding(g, op, spatial, kernel, strides, dilations, pads)
        if g.has(op, "Bias"):
            inputs.append(g.x(op, "Bias"))
    g.node("ConvTranspose" if op.type == "conv2d_transpose" else "Conv", inputs, g.y(op, "Output"), **attrs)


def onnx_pads(paddings) -> list[int]:
    """PaddlePaddle's 2-D paddings ([h, w] or [top, bottom, left, right]) as ONNX's [top,
    left, bottom, right]."""
    pads = list(paddings)
    if len(pads) == 2:
        return [pads[0], pads[1], pads[0], pads[1]]
    return [pads[0], pads[2], pads[1], pads[3]]


def same_pads(spatial, kernel, strides, dilations) -> list[int]:
    """PaddlePaddle's SAME padding: out = ceil(in / stride), the extra row/column after."""
    before, after = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations):
        out = -(-size // s)
        total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
        before.append(total // 2)
        after.append(total - total // 2)
    return before + after


def _output_padding(g, op, spatial, kernel, strides, dilations, pads) -> list[int]:
    """conv2d_transpose's extra rows/columns after the output: `output_padding`, or what
    makes the output `output_size` (which needs the input's size)."""
    padding = list(op.attr("output_padding", []) or [0, 0])
    size = list(op.attr("output_size", []) or [])
    if not size:
        return padding
    if any(d < 0 for d in spatial):
        raise g.error(f"output_size {size} needs the input's height and width, unknown here ({list(spatial)})")
    n = len(spatial)
    natural = [(spatial[i] - 1) * strides[i] - pads[i] - pads[i + n] + dilations[i] * (kernel[i] - 1) + 1
               for i in range(n)]
    extra = [want - got for want, got in zip(size, natural)]
    if any(e < 0 or e >= max(s, d) for e, s, d in zip(extra, strides, dilations)):
        raise g.error(f"output_size {size} is not reachable from the input's {list(spatial)} "
                      f"(natural size {natural})")
    return extra
