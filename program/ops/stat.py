"""Counting ops: histogram, unique, and the bitwise ops over integer and bool tensors
(PaddlePaddle's legacy ops of those names, same slots and attributes). None is
differentiable: their outputs are counts, positions or bit patterns."""
from __future__ import annotations

from keel.program import dtypes
from keel.program.ops.infer import broadcast_shapes
from keel.program.ops.registry import BOOL, FLOAT, INT, INTS, LONG, NOT_DIFFERENTIABLE, define, opt
from keel.proto import pb

_T = pb.VarType
_BITWISE_DTYPES = frozenset({_T.BOOL, _T.UINT8, _T.INT8, _T.INT16, _T.INT32, _T.INT64})


def _infer_histogram(ctx):
    x = ctx.input("X")
    bins = ctx.attr("bins")
    if bins < 1:
        ctx.fail(f"bins must be at least 1, got {bins}")
    if ctx.attr("min") > ctx.attr("max"):
        ctx.fail(f"min ({ctx.attr('min')}) must not exceed max ({ctx.attr('max')})")
    weight = ctx.input("Weight")
    if weight is not None and list(weight.shape) != list(x.shape):
        ctx.fail(f"Weight {weight} must have X's shape {x}")
    floating = ctx.attr("density") or weight is not None
    ctx.set_output("Out", [bins], (weight.dtype if weight is not None else _T.FP32) if floating else _T.INT64)


define("histogram", inputs=["X", opt("Weight")], outputs=["Out"],
       attrs={"bins": LONG(100), "min": FLOAT(0.0), "max": FLOAT(0.0), "density": BOOL(False)},
       infer=_infer_histogram, grad=NOT_DIFFERENTIABLE,
       doc="Out[bins] = the count (or summed Weight; with density, the density) of X's values in "
           "each of `bins` equal bins over [min, max] (X's own range when both are 0; a range of "
           "one value is widened by 1 each side); values outside are not counted")


def _infer_unique(ctx):
    x = ctx.input("X")
    axis = ctx.attr("axis")
    if len(axis) > 1:
        ctx.fail(f"axis must be empty (flatten) or one axis, got {axis}")
    index_dtype = ctx.attr("dtype")
    if index_dtype not in (_T.INT32, _T.INT64):
        ctx.dtype_fail(f"dtype (of the indices) must be int32 or int64, got {dtypes.name(index_dtype)}")
    if axis:
        a = axis[0] + x.ndim if axis[0] < 0 else axis[0]
        if not 0 <= a < x.ndim:
            ctx.fail(f"axis {axis[0]} is out of range for {x}")
        out_shape = [-1 if i == a else d for i, d in enumerate(x.shape)]
        inverse_len = x.shape[a]
    else:
        out_shape = [-1]
        inverse_len = -1 if any(d < 0 for d in x.shape) else int(_prod(x.shape))
    ctx.set_output("Out", out_shape, x.dtype)
    for slot, shape in (("Indices", [-1]), ("Index", [inverse_len]), ("Counts", [-1])):  # Index too: fluid's
        if ctx.has_output(slot):
            ctx.set_output(slot, shape, index_dtype)


def _prod(dims):
    n = 1
    for d in dims:
        n *= d
    return n


define("unique", inputs=["X"], outputs=["Out", opt("Indices"), "Index", opt("Counts")],
       attrs={"dtype": INT(_T.INT64), "return_index": BOOL(False), "return_inverse": BOOL(False),
              "return_counts": BOOL(False), "axis": INTS([]), "is_sorted": BOOL(False)},
       infer=_infer_unique, grad=NOT_DIFFERENTIABLE,
       doc="Out = X's distinct values (slices along `axis`; flattened when empty), ascending, or "
           "without is_sorted (fluid's unique) in the order they first occur; Indices = where each "
           "first occurs, Index = each element's position in Out, Counts = how often each occurs")


def _bitwise_dtype(ctx, x):
    if x.dtype not in _BITWISE_DTYPES:
        ctx.dtype_fail(f"{x} must be bool or an integer type (uint8, int8, int16, int32, int64)")


def _infer_bitwise_not(ctx):
    x = ctx.input("X")
    _bitwise_dtype(ctx, x)
    ctx.set_output("Out", x.shape, x.dtype)


def _infer_bitwise_binary(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    _bitwise_dtype(ctx, x)
    if y.dtype != x.dtype:
        ctx.dtype_fail(f"X {x} and Y {y} must have the same dtype")
    ctx.set_output("Out", broadcast_shapes(ctx, x, y), x.dtype)


define("bitwise_not", inputs=["X"], outputs=["Out"], infer=_infer_bitwise_not, grad=NOT_DIFFERENTIABLE,
       doc="Out = ~X bit by bit (two's complement for signed types; logical not for bool)")
for _type, _what in (("bitwise_and", "&"), ("bitwise_or", "|"), ("bitwise_xor", "^")):
    define(_type, inputs=["X", "Y"], outputs=["Out"], infer=_infer_bitwise_binary, grad=NOT_DIFFERENTIABLE,
           doc=f"Out = X {_what} Y bit by bit; numpy broadcasting")
