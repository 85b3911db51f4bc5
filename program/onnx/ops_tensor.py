"""Converters of the ops that move, index and make tensors: reshape/transpose/flatten/
squeeze/unsqueeze, concat/split/stack/unstack, slice/strided_slice/gather/index_select,
expand/tile, shape/size, range, constants (fill_constant, fill_any_like, assign_value),
cast, one_hot, tril_triu, flip, where_index.

PaddlePaddle lets many of these take an attribute from a tensor (ShapeTensor, StartsTensorList,
AxisTensor, ...): where ONNX takes that value as an input, the tensor is used at run time;
where ONNX needs it as an attribute (an axis), it must be known when exporting (a parameter
or a constant op's result: GraphBuilder.constant), else the converter says so."""
from __future__ import annotations

import numpy as np

from keel.program import dtypes
from keel.program.onnx.registry import converts

INT64_MAX = np.iinfo(np.int64).max


# -- shape-like inputs -----------------------------------------------------------------------

def int64_list(g, op, tensor_slot: str | None, list_slot: str | None, attr_values):
    """An int64 1-D ONNX value: the tensor `tensor_slot`, else the 1-element tensors of
    `list_slot` joined (PaddlePaddle's -2/-1 placeholders in `attr_values` then mark which
    entries they fill), else the constant `attr_values`."""
    if tensor_slot and g.has(op, tensor_slot):
        return g.int64s(g.x(op, tensor_slot), g.dtype(op, tensor_slot))
    if list_slot and g.has(op, list_slot):
        parts = [g.node("Reshape", [g.int64s(v, g.dtype(op, list_slot, i)), g.ints([1])])
                 for i, v in enumerate(g.xs(op, list_slot))]
        return parts[0] if len(parts) == 1 else g.node("Concat", parts, axis=0)
    return g.ints(attr_values)


def known_int(g, op, slot: str, attr: str):
    """An int attribute, replaced by input `slot` when the op has it: that input must be a
    value known when exporting (ONNX takes it as an attribute)."""
    if not g.has(op, slot):
        return op.attr(attr)
    value = g.constant(op, slot)
    if value is None:
        raise g.error(f"{attr} given by the run-time tensor {op.input(slot)[0]!r}: ONNX needs it when the "
                      f"model is written")
    return int(np.asarray(value).reshape(-1)[0])


def normal_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


# -- reshaping ---------------------------------------------------------------------------------

@converts("reshape2")
def reshape2(g, op):
    """PaddlePaddle's 0 copies the input's dimension, as ONNX's Reshape (allowzero=0) does."""
    shape = int64_list(g, op, "Shape", "ShapeTensor", op.attr("shape"))
    g.node("Reshape", [g.x(op, "X"), shape], g.y(op, "Out"))


@converts("transpose2")
def transpose2(g, op):
    g.node("Transpose", [g.x(op, "X")], g.y(op, "Out"), perm=list(op.attr("axis")))


@converts("flatten_contiguous_range")
def flatten_contiguous_range(g, op):
    x, rank = g.x(op, "X"), g.rank(op, "X")
    if rank == 0:
        g.node("Reshape", [x, g.ints([1])], g.y(op, "Out"))
        return
    start, stop = normal_axis(op.attr("start_axis"), rank), normal_axis(op.attr("stop_axis"), rank)
    if start == 1 and stop == rank - 1:
        g.node("Flatten", [x], g.y(op, "Out"), axis=1)
        return
    parts = [g.ints([-1])]
    if start > 0:
        parts.insert(0, g.shape_of(x, 0, start))
    if stop < rank - 1:
        parts.append(g.shape_of(x, stop + 1))
    shape = parts[0] if len(parts) == 1 else g.node("Concat", parts, axis=0)
    g.node("Reshape", [x, shape], g.y(op, "Out"))


@converts("squeeze2")
def squeeze2(g, op):
    """The dims Keel's shape rule drops: listed dims of size 1 (or unknown, taken as 1, as
    PaddlePaddle does); all size-1 dims when `axes` is empty. Listed dims of another size stay."""
    shape = g.shape(op, "X")
    axes = op.attr("axes") or []
    if axes:
        drop = sorted({normal_axis(a, len(shape)) for a in axes if shape[normal_axis(a, len(shape))] in (1, -1)})
    else:
        drop = [i for i, d in enumerate(shape) if d == 1]
    if drop:
        g.squeeze(g.x(op, "X"), drop, g.y(op, "Out"))
    else:
        g.identity(g.x(op, "X"), g.y(op, "Out"))


@converts("unsqueeze2")
def unsqueeze2(g, op):
    """PaddlePaddle inserts the axes one at a time (a negative one counts from the end of the
    shape built so far); ONNX's Unsqueeze takes the final positions."""
    if g.has(op, "AxesTensor") or g.has(op, "AxesTensorList"):
        slot = "AxesTensor" if g.has(op, "AxesTensor") else "AxesTensorList"
        values = [g.constant(op, slot, i) for i in range(len(op.input(slot)))]
        if any(v is None for v in values):
            raise g.error(f"axes given by run-time tensors ({slot}): ONNX's Unsqueeze needs them when the "
                          "model is written")
        axes = [int(a) for v in values for a in np.asarray(v).reshape(-1)]
    else:
        axes = list(op.attr("axes"))
    dims = [False] * g.rank(op, "X")  # False: an input dim, True: an inserted one
    for axis in axes:
        dims.insert(axis + len(dims) + 1 if axis < 0 else axis, True)
    g.unsqueeze(g.x(op, "X"), [i for i, new in enumerate(dims) if new], g.y(op, "Out"))


# -- joining and splitting -----------------------------------------------------------------------

@converts("concat")
def concat(g, op):
    axis = normal_axis(known_int(g, op, "AxisTensor", "axis"), g.rank(op, "X"))
    g.node("Concat", g.xs(op, "X"), g.y(op, "Out"), axis=axis)


@converts("split")
def split(g, op):
    x, shape = g.x(op, "X"), g.shape(op, "X")
    axis = normal_axis(known_int(g, op, "AxisTensor", "axis"), len(shape))
    outputs = g.ys(op, "Out")
    if g.has(op, "SectionsTensorList"):
        sizes = int64_list(g, op, None, "SectionsTensorList", [])
    elif op.attr("sections"):
        sections = list(op.attr("sections"))
        if -1 in sections:  # the rest of the dim
            if shape[axis] < 0:
                raise g.error(f"sections {sections} with -1 over a dim of unknown size")
            sections[sections.index(-1)] = shape[axis] - (sum(sections) + 1)
        sizes = g.ints(sections)
    else:
        sizes = None  # `num` equal pieces: ONNX's Split without sizes
    g.node("Split", [x] + ([sizes] if sizes else []), outputs, axis=axis,
           num_outputs=len(outputs) if sizes is None and g.opset >= 18 else None)


@converts("stack")
def stack(g, op):
    axis = normal_axis(op.attr("axis", 0), g.rank(op, "X") + 1)
    g.node("Concat", [g.unsqueeze(x, [axis]) for x in g.xs(op, "X")], g.y(op, "Y"), axis=axis)


@converts("unstack")
def unstack(g, op):
    axis = normal_axis(op.attr("axis", 0), g.rank(op, "X"))
    outputs = g.ys(op, "Y")
    pieces = g.node("Split", [g.x(op, "X"), g.ints([1] * len(outputs))], len(outputs), axis=axis)
    for piece, out in zip([pieces] if len(outputs) == 1 else pieces, outputs):
        g.squeeze(piece, [axis], out)


# -- slicing and indexing ------------------------------------------------------------------------

@converts("slice", "strided_slice")
def slice_(g, op):
    """Input[starts:ends(:strides)] along `axes` (both clamp like Python's slices), then the
    decrease_axis dims dropped."""
    axes = list(op.attr("axes"))
    starts = int64_list(g, op, "StartsTensor", "StartsTensorList", op.attr("starts"))
    ends = int64_list(g, op, "EndsTensor", "EndsTensorList", _clamped(op.attr("ends")))
    inputs = [g.x(op, "Input"), starts, ends, g.ints(axes)]
    if op.type == "strided_slice":
        inputs.append(int64_list(g, op, "StridesTensor", "StridesTensorList", op.attr("strides")))
    decrease = list(op.attr("decrease_axis") or [])
    out = g.y(op, "Out")
    if not decrease:
        g.node("Slice", inputs, out)
        return
    sliced = g.node("Slice", inputs)
    if len(decrease) == g.rank(op, "Input") and g.rank(op, "Out", output=True) == 1:
        g.node("Reshape", [sliced, g.ints([1])], out)  # a program that keeps a 1-element result 1-D
    else:
        g.squeeze(sliced, decrease, out)


def _clamped(values):
    """Ends as int64 (PaddlePaddle writes "to the end" as a large int, at times past int64)."""
    return [min(int(v), INT64_MAX) for v in values]


@converts("gather", "index_select")
def gather(g, op):
    rank = g.rank(op, "X")
    if op.type == "index_select":
        axis = op.attr("dim", 0)
    else:
        axis = known_int(g, op, "Axis", "axis")
    g.node("Gather", [g.x(op, "X"), g.x(op, "Index")], g.y(op, "Out"), axis=normal_axis(axis, rank))


@converts("gather_nd")
def gather_nd(g, op):
    g.node("GatherND", [g.x(op, "X"), g.int64s(g.x(op, "Index"), g.dtype(op, "Index"))], g.y(op, "Out"))


@converts("take_along_axis")
def take_along_axis(g, op):
    if g.shape(op, "Index")[:-1] != g.shape(op, "Input")[:-1] and g.rank(op, "Index") != g.rank(op, "Input"):
        raise g.error("an Index of another rank than Input: only equal ranks are translated")
    axis = normal_axis(op.attr("Axis"), g.rank(op, "Input"))
    g.node("GatherElements", [g.x(op, "Input"), g.x(op, "Index")], g.y(op, "Result"), axis=axis)


@converts("flip")
def flip(g, op):
    axes = [normal_axis(a, g.rank(op, "X")) for a in op.attr("axis")]
    n = len(axes)
    g.node("Slice", [g.x(op, "X"), g.ints([-1] * n), g.ints([-INT64_MAX] * n), g.ints(axes), g.ints([-1] * n)],
           g.y(op, "Out"))


@converts("where_index")
def where_index(g, op):
    """The [count, rank] int64 coordinates of the true (nonzero) elements."""
    g.node("Transpose", [g.node("NonZero", [g.x(op, "Condition")])], g.y(op, "Out"), perm=[1, 0])


# -- broadcasting and repeating --------------------------------------------------------------------

@converts("expand_v2")
def expand_v2(g, op):
    """ONNX's Expand broadcasts both ways, so PaddlePaddle's -1 (keep X's dim) is a 1. A Shape
    tensor or the expand_shapes_tensor list (one 1-element tensor per dim; `shape` then
    holds -2 for them) replaces `shape`; its -1s become 1s with Abs."""
    if g.has(op, "Shape") or g.has(op, "expand_shapes_tensor"):  # one entry per dim, -1s among them
        shape = g.node("Abs", [int64_list(g, op, "Shape", "expand_shapes_tensor", [])])
    else:
        shape = g.ints([1 if d == -1 else d for d in op.attr("shape")])
    g.node("Expand", [g.x(op, "X"), shape], g.y(op, "Out"))


@converts("expand_as_v2")
def expand_as_v2(g, op):
    shape = g.shape_of(g.x(op, "Y")) if g.has(op, "Y") else g.ints(op.attr("target_shape"))
    g.node("Expand", [g.x(op, "X"), shape], g.y(op, "Out"))


@converts("tile")
def tile(g, op):
    """X repeated; with more repeats than dims X gains leading unit dims, with fewer the
    repeats gain leading 1s (PaddlePaddle's rule)."""
    x, rank = g.x(op, "X"), g.rank(op, "X")
    if g.has(op, "RepeatTimes") or g.has(op, "repeat_times_tensor"):
        count = (g.shape(op, "RepeatTimes")[0] if g.has(op, "RepeatTimes")
                 else len(op.input("repeat_times_tensor")))
        if count < 0:
            raise g.error("repeat_times of unknown length")
        repeats = int64_list(g, op, "RepeatTimes", "repeat_times_tensor", [])
    else:
        count = len(op.attr("repeat_times"))
        repeats = g.ints(op.attr("repeat_times"))
    if count > rank:
        x = g.unsqueeze(x, range(count - rank))
    elif count < rank:
        repeats = g.node("Concat", [g.ints([1] * (rank - count)), repeats], axis=0)
    g.node("Tile", [x, repeats], g.y(op, "Out"))


# -- shapes and ranges -------------------------------------------------------------------------------

@converts("shape")
def shape(g, op):
    g.cast(g.shape_of(g.x(op, "Input")), g.dtype(op, "Out", output=True), g.y(op, "Out"))


@converts("size")
def size(g, op):
    g.cast(g.node("Size", [g.x(op, "Input")]), g.dtype(op, "Out", output=True), g.y(op, "Out"))


@converts("range")
def range_(g, op):
    """ONNX's Range takes scalars; PaddlePaddle's one-element tensors are reshaped to them."""
    bounds = [g.node("Reshape", [g.x(op, slot), g.ints([])]) for slot in ("Start", "End", "Step")]
    g.node("Range", bounds, g.y(op, "Out"))


# -- constants ---------------------------------------------------------------------------------------

def _fill_value(op):
    text = op.attr("str_value", "")
    return float(text) if text else op.attr("value", 0.0)


def _filled(g, shape_value, value, dtype, out):
    """A tensor of the run-time int64 shape `shape_value` filled with `value`."""
    tensor = g.onnx.numpy_helper.from_array(np.asarray([value], dtype=dtype))
    g.node("ConstantOfShape", [shape_value], out, value=tensor)


@converts("fill_constant")
def fill_constant(g, op):
    dtype = dtypes.to_numpy(op.attr("dtype"))
    out_name = op.output("Out")[0]
    if g.has(op, "ValueTensor"):
        shape = int64_list(g, op, "ShapeTensor", "ShapeTensorList", op.attr("shape"))
        value = g.cast(g.node("Reshape", [g.x(op, "ValueTensor"), g.ints([])]), dtype)
        g.node("Expand", [value, shape], g.y(op, "Out"))
    elif g.has(op, "ShapeTensor") or g.has(op, "ShapeTensorList"):
        shape = int64_list(g, op, "ShapeTensor", "ShapeTensorList", [])
        _filled(g, shape, _fill_value(op), dtype, g.y(op, "Out"))
    else:  # known when exporting: an initializer, which later converters may read
        g.bind(out_name, g.const(np.full(list(op.attr("shape")), _fill_value(op), dtype=dtype), hint=out_name))


@converts("fill_any_like")
def fill_any_like(g, op):
    dtype = g.dtype(op, "Out", output=True)
    _filled(g, g.shape_of(g.x(op, "X")), op.attr("value", 0.0), dtype, g.y(op, "Out"))


@converts("fill_constant_batch_size_like")
def fill_constant_batch_size_like(g, op):
    """`shape` with dim output_dim_idx taken from Input's dim input_dim_idx at run time."""
    shape = list(op.attr("shape"))
    at = op.attr("output_dim_idx", 0)
    i = normal_axis(op.attr("input_dim_idx", 0), g.rank(op, "Input"))
    parts = [g.ints(shape[:at]), g.shape_of(g.x(op, "Input"), i, i + 1), g.ints(shape[at + 1:])]
    target = g.node("Concat", parts, axis=0)
    _filled(g, target, _fill_value(op), dtypes.to_numpy(op.attr("dtype")), g.y(op, "Out"))


@converts("assign_value")
def assign_value(g, op):
    dtype = dtypes.to_numpy(op.attr("dtype"))
    if g.has(op, "ValuesTensor"):
        g.node("Reshape", [g.cast(g.x(op, "ValuesTensor"), dtype), g.ints(op.attr("shape"))], g.y(op, "Out"))
        return
    data = list(op.attr("values") or [])
    for legacy in ("bool_values", "fp32_values", "int32_values", "int64_values", "fp64_values"):
        if not data and op.attr(legacy, None):
            data = list(op.attr(legacy))
    data = [v.real if isinstance(v, complex) else v for v in data]
    value = np.asarray(data).astype(dtype).reshape([int(d) for d in op.attr("shape")])
    out_name = op.output("Out")[0]
    g.bind(out_name, g.const(value, hint=out_name))


@converts("cast")
def cast(g, op):
    g.cast(g.x(op, "X"), dtypes.to_numpy(op.attr("out_dtype")), g.y(op, "Out"))


@converts("one_hot_v2")
def one_hot_v2(g, op):
    """Indices out of [0, depth) give all-zero rows (PaddlePaddle's allow_out_of_range; ONNX
    has no error for them). ONNX's OneHot would count negative indices from the end, so
    they are moved out of range first."""
    x = g.int64s(g.x(op, "X"), g.dtype(op, "X"))  # ONNX Runtime's OneHot wants int64 indices with int64 depth
    depth = (g.int64s(g.node("Reshape", [g.x(op, "depth_tensor"), g.ints([1])]), g.dtype(op, "depth_tensor"))
             if g.has(op, "depth_tensor") else g.ints([op.attr("depth")]))
    dtype = g.dtype(op, "Out", output=True)
    past_the_end = g.node("Reshape", [depth, g.ints([])])
    x = g.node("Where", [g.node("Less", [x, g.scalar(0, np.int64)]), past_the_end, x])
    g.node("OneHot", [x, depth, g.const(np.asarray([0, 1], dtype))], g.y(op, "Out"), axis=-1)


@converts("tril_triu")
def tril_triu(g, op):
    if g.opset < 14:
        raise g.error(f"ONNX has Trilu from opset 14 on (asked for {g.opset})")
    g.node("Trilu", [g.x(op, "X"), g.scalar(op.attr("diagonal", 0), np.int64)], g.y(op, "Out"),
           upper=int(not op.attr("lower", False)))
