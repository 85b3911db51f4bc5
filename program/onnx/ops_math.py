"""Converters of arithmetic with attributes and of reductions: scale, clip, pow, increment,
sum/mean, reduce_*, arg_max/arg_min, cumsum, top_k/argsort, norms, where, einsum, determinant."""
from __future__ import annotations

import numpy as np

from keel.program import dtypes
from keel.program.onnx.ops_tensor import normal_axis
from keel.program.onnx.registry import converts


@converts("scale")
def scale(g, op):
    """scale * X + bias, or scale * (X + bias) when not bias_after_scale."""
    x, dtype, out = g.x(op, "X"), g.dtype(op, "X"), g.y(op, "Out")
    factor = (g.cast(g.x(op, "ScaleTensor"), dtype) if g.has(op, "ScaleTensor")
              else None if op.attr("scale", 1.0) == 1.0 else g.scalar(op.attr("scale"), dtype))
    bias = op.attr("bias", 0.0)
    if g.has(op, "BiasTensor"):
        raise g.error("a BiasTensor input: only the `bias` attribute is translated")
    steps = [("Mul", factor), ("Add", None if bias == 0.0 else g.scalar(bias, dtype))]
    if not op.attr("bias_after_scale", True):
        steps.reverse()
    steps = [(kind, value) for kind, value in steps if value is not None]
    if not steps:
        g.identity(x, out)
    for i, (kind, value) in enumerate(steps):
        x = g.node(kind, [x, value], out if i == len(steps) - 1 else 1)


@converts("clip")
def clip(g, op):
    dtype = g.dtype(op, "X")

    def bound(slot, attr):
        if g.has(op, slot):
            return g.node("Reshape", [g.cast(g.x(op, slot), dtype), g.ints([])])
        return g.scalar(op.attr(attr), dtype)

    g.node("Clip", [g.x(op, "X"), bound("Min", "min"), bound("Max", "max")], g.y(op, "Out"))


@converts("pow")
def pow_(g, op):
    dtype = g.dtype(op, "X")
    factor = (g.cast(g.x(op, "FactorTensor"), dtype) if g.has(op, "FactorTensor")
              else g.scalar(op.attr("factor", 1.0), dtype))
    g.node("Pow", [g.x(op, "X"), factor], g.y(op, "Out"))


@converts("increment")
def increment(g, op):
    g.node("Add", [g.x(op, "X"), g.scalar(op.attr("step", 1.0), g.dtype(op, "X"))], g.y(op, "Out"))


@converts("sum")
def sum_(g, op):
    inputs = g.xs(op, "X")
    if len(inputs) == 1:
        g.identity(inputs[0], g.y(op, "Out"))
    else:
        g.node("Sum", inputs, g.y(op, "Out"))


@converts("mean")
def mean(g, op):
    reduced = g.reduce("ReduceMean", g.x(op, "X"), None, False)
    _shaped_like_output(g, op, reduced, "Out")


def _shaped_like_output(g, op, value, slot):
    """`value` reshaped to the output's static rank where that differs (a program that
    keeps a full reduction 1-D, as PaddlePaddle before 2.5 did)."""
    rank = g.rank(op, slot, output=True)
    if rank == 1 and g.shape(op, slot, output=True) == (1,):
        g.node("Reshape", [value, g.ints([1])], g.y(op, slot))
    else:
        g.identity(value, g.y(op, slot))


_REDUCE = {"reduce_sum": "ReduceSum", "reduce_mean": "ReduceMean", "reduce_max": "ReduceMax",
           "reduce_min": "ReduceMin", "reduce_prod": "ReduceProd", "reduce_all": "ReduceMin",
           "reduce_any": "ReduceMax", "frobenius_norm": "ReduceL2"}


@converts(*_REDUCE)
def reduce(g, op):
    """Over `dim` (all dims with reduce_all, or when `dim` lists them all); reduce_all/any as
    the min/max of the input cast to an integer."""
    x, dtype, rank = g.x(op, "X"), g.dtype(op, "X"), g.rank(op, "X")
    if g.has(op, "AxisTensor") or g.has(op, "AxisTensorList"):
        raise g.error("axes given by tensors: only the `dim` attribute is translated")
    axes = sorted({normal_axis(a, max(rank, 1)) for a in (op.attr("dim") or [])})
    if op.attr("reduce_all", False) or not axes or rank == 0:
        axes = None
    logical = op.type in ("reduce_all", "reduce_any")
    if logical:
        x = g.cast(x, np.int32)
    elif op.type == "reduce_sum" and op.attr("out_dtype", -1) not in (-1, None):
        x = g.cast(x, dtypes.to_numpy(op.attr("out_dtype")))
    keep = op.attr("keep_dim", False) or op.attr("keepdim", False)
    reduced = g.reduce(_REDUCE[op.type], x, axes, keep)
    if logical:
        reduced = g.cast(reduced, np.bool_)
    elif op.type == "reduce_sum" and np.dtype(dtype) == np.bool_:
        reduced = g.cast(reduced, g.dtype(op, "Out", output=True))
    _shaped_like_output(g, op, reduced, "Out")


@converts("arg_max", "arg_min")
def arg_extreme(g, op):
    """The first index of the extreme value (ONNX's select_last_index=0), of type `dtype`."""
    x, rank = g.x(op, "X"), g.rank(op, "X")
    axis = op.attr("axis")
    if op.attr("flatten", False):
        x, axis, rank = g.node("Reshape", [x, g.ints([-1])]), 0, 1
    index = g.node("ArgMax" if op.type == "arg_max" else "ArgMin", [x], axis=normal_axis(axis, max(rank, 1)),
                   keepdims=int(bool(op.attr("keepdims", False))))
    out_type = g.dtype(op, "Out", output=True)
    if np.dtype(out_type) == np.int64:
        _shaped_like_output(g, op, index, "Out")
    else:
        _shaped_like_output(g, op, g.cast(index, out_type), "Out")


@converts("cumsum")
def cumsum(g, op):
    x, axis = g.x(op, "X"), op.attr("axis", -1)
    if op.attr("flatten", False):
        x, axis = g.node("Reshape", [x, g.ints([-1])]), 0
    g.node("CumSum", [x, g.scalar(axis, np.int64)], g.y(op, "Out"),
           exclusive=int(bool(op.attr("exclusive", False))), reverse=int(bool(op.attr("reverse", False))))


@converts("top_k_v2")
def top_k_v2(g, op):
    x = g.x(op, "X")
    k = (g.int64s(g.node("Reshape", [g.x(op, "K"), g.ints([1])]), g.dtype(op, "K")) if g.has(op, "K")
         else g.ints([op.attr("k", 1)]))
    axis = normal_axis(op.attr("axis", -1), g.rank(op, "X"))
    g.node("TopK", [x, k], [g.y(op, "Out"), g.y(op, "Indices")], axis=axis,
           largest=int(bool(op.attr("largest", True))), sorted=int(bool(op.attr("sorted", True))))


@converts("argsort")
def argsort(g, op):
    """A TopK over the whole axis (ascending unless `descending`)."""
    x = g.x(op, "X")
    axis = normal_axis(op.attr("axis", -1), g.rank(op, "X"))
    count = g.shape_of(x, axis, axis + 1)
    g.node("TopK", [x, count], [g.y(op, "Out"), g.y(op, "Indices")], axis=axis,
           largest=int(bool(op.attr("descending", False))), sorted=1)


@converts("p_norm")
def p_norm(g, op):
    """(sum |x|^p)^(1/p) over `axis` (all elements with asvector); p = inf/-inf: max/min |x|,
    p = 0: the count of nonzeros."""
    x, dtype = g.x(op, "X"), g.dtype(op, "X")
    p = float(op.attr("porder", 2.0))
    axes = None if op.attr("asvector", False) else [normal_axis(op.attr("axis", -1), g.rank(op, "X"))]
    keep = op.attr("keepdim", False)
    magnitude = g.node("Abs", [x])
    if p == 2.0:
        norm = g.reduce("ReduceL2", x, axes, keep)
    elif p == 1.0:
        norm = g.reduce("ReduceL1", x, axes, keep)
    elif np.isinf(p):
        norm = g.reduce("ReduceMax" if p > 0 else "ReduceMin", magnitude, axes, keep)
    elif p == 0.0:
        nonzero = g.cast(g.node("Not", [g.node("Equal", [x, g.scalar(0, dtype)])]), dtype)
        norm = g.reduce("ReduceSum", nonzero, axes, keep)
    else:
        powered = g.node("Pow", [magnitude, g.scalar(p, dtype)])
        norm = g.node("Pow", [g.reduce("ReduceSum", powered, axes, keep), g.scalar(1.0 / p, dtype)])
    _shaped_like_output(g, op, norm, "Out")


@converts("where")
def where(g, op):
    g.node("Where", [g.x(op, "Condition"), g.x(op, "X"), g.x(op, "Y")], g.y(op, "Out"))


@converts("einsum")
def einsum(g, op):
    g.node("Einsum", g.xs(op, "Operands"), g.y(op, "Out"), equation=op.attr("equation").replace(" ", ""))


@converts("determinant")
def determinant(g, op):
    g.node("Det", [g.x(op, "Input")], g.y(op, "Out"))
