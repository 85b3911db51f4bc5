"""Tensor layers: creating tensors from constants, reshaping and reordering, joining and
splitting, slicing (indexing, `x[...]`, is program/layers/indexing.py), broadcasting.

Each layer appends the op PaddlePaddle's static-graph API appends, with the same
attributes, and names its outputs `<layer>_N.tmp_K`."""
from __future__ import annotations

import builtins
import math
import numbers

import numpy as np

from keel.program import callsite, dtypes, unique_name
from keel.program.errors import AttrError, OpError, ShapeError
from keel.program.layers.helper import LayerHelper
from keel.program.ops.tensor import INT_MAX
from keel.program.variable import Variable
from keel.proto import pb

_T = pb.VarType

__all__ = [
    "fill_constant", "full", "zeros", "ones", "full_like", "zeros_like", "ones_like", "assign",
    "reshape", "transpose", "concat", "split", "slice", "strided_slice", "flatten", "squeeze",
    "unsqueeze", "gather", "gather_nd", "scatter", "expand", "expand_as", "tile", "stack",
    "unstack", "arange", "linspace", "shape", "one_hot", "pad", "nonzero",
]

# Integer dtypes whose fill value PaddlePaddle records exactly in str_value.
_INT_DTYPES = frozenset({_T.INT8, _T.UINT8, _T.INT16, _T.INT32, _T.INT64})


def _fail(layer: str, message: str, cls=ShapeError):
    """A build-time error of a layer, raised before it appends anything. A Python exception
    class (ValueError, TypeError: what PaddlePaddle raises for bad arguments) carries the
    layer and the user's line in its message, as Keel's OpErrors do in their fields."""
    where = callsite.describe(callsite.user_frame_lines())
    if issubclass(cls, OpError):
        raise cls(message, op_type=layer, callsite=where)
    raise cls(f"{layer}: {message}" + (f"\n  {where}" if where else ""))


def _is_scalar(value) -> bool:
    return isinstance(value, (numbers.Number, np.number, np.bool_)) and not isinstance(value, complex)


def _ints(value) -> list[int]:
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(value)]


def _int_tensor_list(items, dtype="int32") -> list[Variable]:
    """One 1-element int tensor per item (Variables as they are, ints via fill_constant), the
    form of PaddlePaddle's `XxxTensorList` inputs."""
    out = []
    for item in items:
        if isinstance(item, Variable):
            out.append(item)
        else:
            out.append(fill_constant([1], dtype, int(item), force_cpu=True))
    return out


# -- constants ----------------------------------------------------------------------------------
def fill_constant(shape, dtype, value, force_cpu=False, out=None, name=None):
    """A tensor of `shape` filled with `value` (op fill_constant). `shape` may be a list
    (items may be 1-element int Variables) or an int Variable; `value` may be a 1-element
    Variable."""
    helper = LayerHelper("fill_constant", name)
    code = dtypes.to_code(dtype)
    inputs, attrs = {}, {"force_cpu": bool(force_cpu), "dtype": code}
    if isinstance(value, Variable):
        inputs["ValueTensor"] = value
    else:
        if code in _INT_DTYPES:
            attrs["str_value"], attrs["value"] = str(int(value)), float(int(value))
        else:
            attrs["str_value"], attrs["value"] = str(float(value)), float(value)
    if isinstance(shape, Variable):
        inputs["ShapeTensor"] = shape
    else:
        items = list(shape) if isinstance(shape, (list, tuple)) else [shape]
        if any(isinstance(d, Variable) for d in items):
            inputs["ShapeTensorList"] = _int_tensor_list(items)
            attrs["shape"] = [-1 if isinstance(d, Variable) else int(d) for d in items]
        else:
            attrs["shape"] = [int(d) for d in items]
    if out is None:
        out = helper.create_tmp(code, stop_gradient=True)
    helper.append_op("fill_constant", inputs, {"Out": out}, attrs)
    out.stop_gradient = True
    return out


def full(shape, fill_value, dtype=None, name=None):
    """A tensor of `shape` filled with `fill_value` (float32 unless `dtype`).

    Examples:
        >>> import keel as paddle
        >>> print(paddle.full([2, 3], 2.5).numpy())
        [[2.5 2.5 2.5]
         [2.5 2.5 2.5]]
        >>> print(paddle.full([2], 7, dtype="int64").numpy())
        [7 7]
    """
    return fill_constant(shape, "float32" if dtype is None else dtype, fill_value, name=name)


def zeros(shape, dtype="float32", name=None):
    """A tensor of `shape` filled with 0 (float32 unless `dtype`).

    Examples:
        >>> import keel as paddle
        >>> print(paddle.zeros([2, 3]).numpy())
        [[0. 0. 0.]
         [0. 0. 0.]]
        >>> print(paddle.zeros([2], dtype="int64").numpy())
        [0 0]
    """
    return fill_constant(shape, dtype, 0.0, name=name)


def ones(shape, dtype="float32", name=None):
    """A tensor of `shape` filled with 1 (float32 unless `dtype`).

    Examples:
        >>> import keel as paddle
        >>> print(paddle.ones([2, 2]).numpy())
        [[1. 1.]
         [1. 1.]]
        >>> paddle.ones([3], dtype="int32").numpy().dtype
        dtype('int32')
    """
    return fill_constant(shape, dtype, 1.0, name=name)


def full_like(x, fill_value, dtype=None, name=None):
    """A tensor of x's shape filled with `fill_value` (op fill_any_like), of x's dtype
    unless `dtype`.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> print(paddle.full_like(x, 5.0).numpy())
        [[5. 5.]
         [5. 5.]]
    """
    helper = LayerHelper("full_like", name)
    code = x.dtype if dtype is None else dtypes.to_code(dtype)
    out = helper.create_tmp(code, stop_gradient=True)
    helper.append_op("fill_any_like", {"X": x}, {"Out": out},
                     {"value": float(fill_value), "dtype": code})
    return out


def zeros_like(x, dtype=None, name=None):
    """A tensor of x's shape filled with 0 (x's dtype unless `dtype`).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> print(paddle.zeros_like(x).numpy(), paddle.zeros_like(x, dtype="float32").numpy())
        [0 0 0] [0. 0. 0.]
    """
    return full_like(x, 0.0, dtype, name)


def ones_like(x, dtype=None, name=None):
    """A tensor of x's shape filled with 1 (x's dtype unless `dtype`).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.5, 2.5])
        >>> print(paddle.ones_like(x).numpy())
        [1. 1.]
    """
    return full_like(x, 1.0, dtype, name)


def assign(x, output=None, name=None):
    """Copy a Variable (op assign) or make a constant tensor from a numpy array, a list or a
    number (op assign_value; Python floats become float32).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> y = paddle.assign(np.array([[1.0, 2.0], [3.0, 4.0]], "float32"))
        >>> print(y.numpy())
        [[1. 2.]
         [3. 4.]]
        >>> z = paddle.assign(y)                      # a copy
        >>> print(z.numpy().sum())
        10.0
    """
    helper = LayerHelper("assign", name)
    if isinstance(x, Variable):
        if output is None:
            output = helper.create_tmp(x.dtype)
        helper.append_op("assign", {"X": x}, {"Out": output})
        return output
    if isinstance(x, np.ndarray):
        array = x
    else:
        array = np.asarray(x)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
    if array.dtype.kind not in "biuf":
        _fail("assign", f"cannot make a constant from a {array.dtype} array", AttrError)
    code = dtypes.to_code(array.dtype)
    if output is None:
        output = helper.create_tmp(code, stop_gradient=True)
    helper.append_op("assign_value", {}, {"Out": output},
                     {"shape": list(array.shape), "dtype": code, "values": array.ravel().tolist()})
    return output


# -- reshaping and reordering ------------------------------------------------------------------
def reshape(x, shape, name=None):
    """Out = x with a new shape (op reshape2, with its XShape output). In `shape`, 0 copies
    x's dim and one -1 is inferred. `shape` may be an int Variable or a list holding
    1-element int Variables.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([2, 4, 6])
        >>> paddle.reshape(x, [-1, 0, 3, 2]).shape     # 0 keeps x's dim, -1 is inferred
        [2, 4, 3, 2]
        >>> print(paddle.reshape(paddle.arange(6), [2, 3]).numpy())
        [[0 1 2]
         [3 4 5]]
    """
    helper = LayerHelper("reshape2", name)
    inputs, attrs = {"X": x}, {}
    if isinstance(shape, Variable):
        inputs["Shape"] = shape
    else:
        items = list(shape)
        if any(isinstance(d, Variable) for d in items):
            inputs["ShapeTensor"] = _int_tensor_list(items)
        attrs["shape"] = [-1 if isinstance(d, Variable) else int(d) for d in items]
    out = helper.create_tmp(x.dtype)
    xshape = helper.create_tmp(x.dtype)
    helper.append_op("reshape2", inputs, {"Out": out, "XShape": xshape}, attrs)
    return out


def transpose(x, perm, name=None):
    """Out.shape[i] = x.shape[perm[i]] (op transpose2).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([2, 3, 4])
        >>> paddle.transpose(x, perm=[1, 0, 2]).shape
        [3, 2, 4]
        >>> print(paddle.transpose(paddle.to_tensor([[1, 2, 3], [4, 5, 6]]), [1, 0]).numpy())
        [[1 4]
         [2 5]
         [3 6]]
    """
    helper = LayerHelper("transpose", name)
    out = helper.create_tmp(x.dtype)
    xshape = helper.create_tmp(x.dtype)
    helper.append_op("transpose2", {"X": x}, {"Out": out, "XShape": xshape}, {"axis": _ints(perm)})
    return out


def flatten(x, start_axis=1, stop_axis=-1, name=None):
    """Merge dims start_axis..stop_axis into one (op flatten_contiguous_range).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([2, 3, 4, 4])
        >>> paddle.flatten(x, start_axis=1, stop_axis=2).shape
        [2, 12, 4]
        >>> paddle.flatten(x, start_axis=0, stop_axis=-1).shape
        [96]
    """
    helper = LayerHelper("flatten", name)
    nd = x.ndim
    if nd > 0:
        if -nd <= start_axis < 0:
            start_axis += nd
        if -nd <= stop_axis < 0:
            stop_axis += nd
    out = helper.create_tmp(x.dtype)
    xshape = helper.create_tmp(x.dtype)
    helper.append_op("flatten_contiguous_range", {"X": x}, {"Out": out, "XShape": xshape},
                     {"start_axis": int(start_axis), "stop_axis": int(stop_axis)})
    return out


def squeeze(x, axis=None, name=None):
    """Remove size-1 dims: those in `axis`, or all of them (op squeeze2).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([5, 1, 10])
        >>> paddle.squeeze(x, axis=1).shape
        [5, 10]
        >>> paddle.squeeze(paddle.rand([1, 3, 1])).shape          # every size-1 dim
        [3]
    """
    helper = LayerHelper("squeeze", name)
    out = helper.create_tmp(x.dtype)
    xshape = helper.create_tmp(x.dtype)
    helper.append_op("squeeze2", {"X": x}, {"Out": out, "XShape": xshape},
                     {"axes": [] if axis is None else _ints(axis)})
    return out


def unsqueeze(x, axis, name=None):
    """Insert size-1 dims at `axis` (an int or a list, applied in order; op unsqueeze2).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([5, 10])
        >>> paddle.unsqueeze(x, axis=0).shape
        [1, 5, 10]
        >>> paddle.unsqueeze(x, axis=[0, 2]).shape
        [1, 5, 1, 10]
    """
    helper = LayerHelper("unsqueeze2", name)
    out = helper.create_tmp(x.dtype)
    xshape = helper.create_tmp(x.dtype)
    helper.append_op("unsqueeze2", {"X": x}, {"Out": out, "XShape": xshape}, {"axes": _ints(axis)})
    return out


# -- joining and splitting -----------------------------------------------------------------------
def concat(x, axis=0, name=None):
    """Join a list of tensors along `axis` (an int or a 1-element int Variable; op concat).

    Examples:
        >>> import keel as paddle
        >>> x1 = paddle.to_tensor([[1, 2, 3], [4, 5, 6]])
        >>> x2 = paddle.to_tensor([[11, 12, 13], [14, 15, 16]])
        >>> paddle.concat([x1, x2], axis=0).shape
        [4, 3]
        >>> print(paddle.concat([x1, x2], axis=1).numpy())
        [[ 1  2  3 11 12 13]
         [ 4  5  6 14 15 16]]
    """
    helper = LayerHelper("concat", name)
    xs = list(x)
    if not xs:
        _fail("concat", "needs at least one input")
    inputs, attrs = {"X": xs}, {}
    if isinstance(axis, Variable):
        inputs["AxisTensor"] = axis
    else:
        attrs["axis"] = int(axis)
    out = helper.create_tmp(xs[0].dtype)
    helper.append_op("concat", inputs, {"Out": out}, attrs)
    return out


def split(x, num_or_sections, axis=0, name=None):
    """Split x along `axis` into `num_or_sections` equal pieces (an int) or pieces of the
    given sizes (a list; one -1 takes the rest). Returns the list of pieces (op split).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([3, 9, 5])
        >>> [part.shape for part in paddle.split(x, num_or_sections=3, axis=1)]
        [[3, 3, 5], [3, 3, 5], [3, 3, 5]]
        >>> [part.shape for part in paddle.split(x, num_or_sections=[2, 3, -1], axis=1)]   # -1: the rest
        [[3, 2, 5], [3, 3, 5], [3, 4, 5]]
    """
    helper = LayerHelper("split", name)
    inputs = {"X": x}
    if isinstance(axis, Variable):
        inputs["AxisTensor"] = axis
        attrs = {"axis": 0}
    else:
        axis = int(axis)
        attrs = {"axis": axis + x.ndim if axis < 0 and x.ndim else axis}
    if isinstance(num_or_sections, (list, tuple)):
        sections = _ints(num_or_sections)
        attrs.update(num=0, sections=sections)
        n = len(sections)
    else:
        n = int(num_or_sections)
        if n <= 0:
            _fail("split", f"num_or_sections must be positive, got {num_or_sections}", AttrError)
        attrs.update(num=n, sections=[])
    outs = [helper.create_tmp(x.dtype) for _ in range(n)]
    helper.append_op("split", inputs, {"Out": outs}, attrs)
    return outs


def stack(x, axis=0, name=None):
    """Stack tensors of one shape along a new dim at `axis` (op stack).

    Examples:
        >>> import keel as paddle
        >>> x1 = paddle.to_tensor([[1.0, 2.0]])
        >>> x2 = paddle.to_tensor([[3.0, 4.0]])
        >>> x3 = paddle.to_tensor([[5.0, 6.0]])
        >>> paddle.stack([x1, x2, x3], axis=0).shape
        [3, 1, 2]
        >>> print(paddle.stack([x1, x2, x3], axis=-1).numpy())
        [[[1. 3. 5.]
          [2. 4. 6.]]]
    """
    helper = LayerHelper("stack", name)
    xs = list(x)
    if not xs:
        _fail("stack", "needs at least one input")
    out = helper.create_tmp(xs[0].dtype)
    helper.append_op("stack", {"X": xs}, {"Y": out}, {"axis": int(axis)})
    return out


def unstack(x, axis=0, num=None, name=None):
    """Split x along `axis` into x.shape[axis] tensors without that dim (op unstack).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 2, 3], [4, 5, 6]])
        >>> [part.numpy().tolist() for part in paddle.unstack(x, axis=1)]
        [[1, 4], [2, 5], [3, 6]]
    """
    helper = LayerHelper("unstack", name)
    if num is None:
        if not -x.ndim <= axis < x.ndim or x.shape[axis] < 0:
            _fail("unstack", f"give `num`: dim {axis} of {x.name} {x.type_string()} is not known")
        num = x.shape[axis]
    outs = [helper.create_tmp(x.dtype) for _ in range(num)]
    helper.append_op("unstack", {"X": x}, {"Y": outs}, {"axis": int(axis), "num": int(num)})
    return outs


# -- slicing and indexing ------------------------------------------------------------------------
def _slice_bounds(helper_attrs, inputs, starts, ends, flags):
    """Constant bounds go in the attributes; Variable bounds in Starts/EndsTensor(List)."""
    for key, values in (("Starts", starts), ("Ends", ends)):
        if isinstance(values, Variable):
            inputs[f"{key}Tensor"] = values
            helper_attrs[key.lower()] = [-1] * len(flags)
            flags[:] = [-1] * len(flags)
            continue
        values = list(values)
        if any(isinstance(v, Variable) for v in values):
            inputs[f"{key}TensorList"] = _int_tensor_list(values)
            for i, v in enumerate(values):
                if isinstance(v, Variable):
                    flags[i] = -1
        helper_attrs[key.lower()] = [-1 if isinstance(v, Variable) else int(v) for v in values]


def slice(x, axes, starts, ends, name=None):
    """x[starts[i]:ends[i]] along each of `axes` (op slice). Indices count from the end when
    negative and clamp like Python's; starts/ends may hold 1-element int Variables.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.reshape(paddle.arange(12), [3, 4])
        >>> print(paddle.slice(x, axes=[0, 1], starts=[1, 0], ends=[3, 2]).numpy())
        [[4 5]
         [8 9]]
        >>> paddle.slice(paddle.rand([4, 5, 6]), axes=[0, 1, 2], starts=[-3, 0, 2], ends=[3, 2, 4]).shape
        [2, 2, 2]
    """
    helper = LayerHelper("slice", name)
    axes = _ints(axes)
    inputs, attrs, flags = {"Input": x}, {"axes": axes}, [1] * len(axes)
    _slice_bounds(attrs, inputs, starts, ends, flags)
    attrs.update(infer_flags=flags, decrease_axis=[])
    out = helper.create_tmp(x.dtype)
    helper.append_op("slice", inputs, {"Out": out}, attrs)
    return out


def strided_slice(x, axes, starts, ends, strides, name=None):
    """x[starts[i]:ends[i]:strides[i]] along each of `axes` (op strided_slice).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.arange(10)
        >>> print(paddle.strided_slice(x, axes=[0], starts=[1], ends=[8], strides=[3]).numpy())
        [1 4 7]
    """
    helper = LayerHelper("strided_slice", name)
    axes = _ints(axes)
    inputs, attrs, flags = {"Input": x}, {"axes": axes}, [1] * len(axes)
    _slice_bounds(attrs, inputs, starts, ends, flags)
    attrs.update(strides=_ints(strides), infer_flags=flags, decrease_axis=[])
    out = helper.create_tmp(x.dtype)
    helper.append_op("strided_slice", inputs, {"Out": out}, attrs)
    return out


def gather(x, index, axis=None, name=None):
    """Rows of x at the 1-D int `index` along `axis` (default 0; may be a Variable; op gather).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 2], [3, 4], [5, 6]])
        >>> print(paddle.gather(x, paddle.to_tensor([0, 2])).numpy())
        [[1 2]
         [5 6]]
        >>> print(paddle.gather(x, paddle.to_tensor([1]), axis=1).numpy())
        [[2]
         [4]
         [6]]
    """
    helper = LayerHelper("gather", name)
    inputs, attrs = {"X": x, "Index": index}, {}
    if isinstance(axis, Variable):
        inputs["Axis"] = axis
    else:
        attrs["axis"] = 0 if axis is None else int(axis)
    out = helper.create_tmp(x.dtype)
    helper.append_op("gather", inputs, {"Out": out}, attrs)
    return out


def gather_nd(x, index, name=None):
    """out[i...] = x[index[i..., :]] (op gather_nd).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[[1, 2], [3, 4], [5, 6]], [[7, 8], [9, 10], [11, 12]]])
        >>> print(paddle.gather_nd(x, paddle.to_tensor([[0, 1], [1, 2]])).numpy())
        [[ 3  4]
         [11 12]]
        >>> print(paddle.gather_nd(x, paddle.to_tensor([[1, 0, 1]])).numpy())
        [8]
    """
    helper = LayerHelper("gather_nd", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("gather_nd", {"X": x, "Index": index}, {"Out": out})
    return out


def scatter(x, index, updates, overwrite=True, name=None):
    """x with rows `index` replaced by (or, unless overwrite, summed with) `updates` (op scatter).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
        >>> index = paddle.to_tensor([2, 1, 0, 1])
        >>> updates = paddle.to_tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0], [4.0, 4.0]])
        >>> print(paddle.scatter(x, index, updates, overwrite=False).numpy())   # rows 1 get 2 + 4
        [[3. 3.]
         [6. 6.]
         [1. 1.]]
        >>> print(paddle.scatter(x, index, updates, overwrite=True).numpy())    # the last write wins
        [[3. 3.]
         [4. 4.]
         [1. 1.]]
    """
    helper = LayerHelper("scatter", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("scatter", {"X": x, "Ids": index, "Updates": updates}, {"Out": out},
                     {"overwrite": bool(overwrite)})
    return out


def nonzero(x, name=None):
    """The coordinates [N, rank] (int64) of the nonzero elements of x (op where_index).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, 3.0]])
        >>> print(paddle.nonzero(x).numpy())
        [[0 0]
         [1 1]
         [2 2]]
    """
    helper = LayerHelper("where_index", name)
    out = helper.create_tmp(_T.INT64, stop_gradient=True)
    helper.append_op("where_index", {"Condition": x}, {"Out": out})
    return out


# -- broadcasting ---------------------------------------------------------------------------------
def expand(x, shape, name=None):
    """Broadcast x to `shape` (-1 keeps x's dim; op expand_v2). `shape` may be an int
    Variable or hold 1-element int Variables.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> print(paddle.expand(x, shape=[2, 3]).numpy())
        [[1 2 3]
         [1 2 3]]
    """
    helper = LayerHelper("expand", name)
    inputs, attrs = {"X": x}, {}
    if isinstance(shape, Variable):
        inputs["Shape"] = shape
    else:
        items = list(shape)
        if any(isinstance(d, Variable) for d in items):
            inputs["expand_shapes_tensor"] = _int_tensor_list(items)
        attrs["shape"] = [-2 if isinstance(d, Variable) else int(d) for d in items]
    out = helper.create_tmp(x.dtype)
    helper.append_op("expand_v2", inputs, {"Out": out}, attrs)
    return out


def expand_as(x, y, name=None):
    """Broadcast x to y's shape (op expand_as_v2).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> y = paddle.zeros([2, 3], dtype="int64")
        >>> paddle.expand_as(x, y).shape
        [2, 3]
    """
    helper = LayerHelper("expand_as", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("expand_as_v2", {"X": x, "Y": y}, {"Out": out},
                     {"target_shape": list(y.shape)})
    return out


def tile(x, repeat_times, name=None):
    """Repeat x repeat_times[i] times along each dim (op tile).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> print(paddle.tile(x, repeat_times=[2, 1]).numpy())
        [[1 2 3]
         [1 2 3]]
        >>> print(paddle.tile(x, repeat_times=[2]).numpy())
        [1 2 3 1 2 3]
    """
    helper = LayerHelper("tile", name)
    inputs, attrs = {"X": x}, {}
    if isinstance(repeat_times, Variable):
        inputs["RepeatTimes"] = repeat_times
    else:
        items = list(repeat_times)
        if any(isinstance(r, Variable) for r in items):
            inputs["repeat_times_tensor"] = _int_tensor_list(items)
        attrs["repeat_times"] = [-1 if isinstance(r, Variable) else int(r) for r in items]
    out = helper.create_tmp(x.dtype)
    helper.append_op("tile", inputs, {"Out": out}, attrs)
    return out


# -- sequences, shape, one_hot, pad ---------------------------------------------------------------
def _bound(value, code):
    if isinstance(value, Variable):
        if value.dtype != code:
            from keel.program.layers.math import cast
            value = cast(value, code)
        return value
    return fill_constant([1], code, value, force_cpu=True)


def arange(start=0, end=None, step=1, dtype=None, name=None):
    """[start, start + step, ...) up to `end` (op range; constant bounds become fill_constant
    ops). With one argument it is the end. The dtype defaults to int64 for int bounds,
    float32 otherwise. The length is known when no bound is a Variable.

    Examples:
        >>> import keel as paddle
        >>> print(paddle.arange(5).numpy())
        [0 1 2 3 4]
        >>> print(paddle.arange(1, 2, 0.25).numpy())
        [1.   1.25 1.5  1.75]
        >>> paddle.arange(5).numpy().dtype, paddle.arange(5, dtype="float32").numpy().dtype
        (dtype('int64'), dtype('float32'))
    """
    if end is None:
        start, end = 0, start
    bounds = (start, end, step)
    if dtype is None:
        is_int = all(isinstance(b, (int, np.integer)) or (isinstance(b, Variable) and dtypes.is_integer(b.dtype))
                     for b in bounds)
        dtype = "int64" if is_int else "float32"
    code = dtypes.to_code(dtype)
    if not isinstance(step, Variable) and step == 0:
        _fail("arange", "step must not be 0", AttrError)
    helper = LayerHelper("range", name)
    ins = {k: _bound(v, code) for k, v in zip(("Start", "End", "Step"), bounds)}
    out = helper.create_tmp(code, stop_gradient=True)
    helper.append_op("range", ins, {"Out": out})
    if not any(isinstance(b, Variable) for b in bounds):
        out.shape = [_range_length(start, end, step, code)]
    return out


def _range_length(start, end, step, code) -> int:
    """The length of range(start, end, step) as the kernel computes it, in the output dtype
    (a float32 range can differ by one from the same range in Python floats)."""
    if dtypes.is_integer(code):
        start, end, step = int(start), int(end), int(step)
        n = (builtins.abs(end - start) + builtins.abs(step) - 1) // builtins.abs(step)
    else:
        t = dtypes.to_numpy(code).type
        n = math.ceil(builtins.abs(float((t(end) - t(start)) / t(step))))
    return n if (end - start) * step > 0 else 0


def linspace(start, stop, num, dtype="float32", name=None):
    """`num` evenly spaced values from start to stop inclusive (op linspace).

    Examples:
        >>> import keel as paddle
        >>> print(paddle.linspace(0, 1, 5).numpy())
        [0.   0.25 0.5  0.75 1.  ]
        >>> print(paddle.linspace(0, 10, 3, dtype="int32").numpy())
        [ 0  5 10]
    """
    code = dtypes.to_code(dtype)
    helper = LayerHelper("linspace", name)
    ins = {"Start": _bound(start, code), "Stop": _bound(stop, code), "Num": _bound(num, _T.INT32)}
    out = helper.create_tmp(code, stop_gradient=True)
    helper.append_op("linspace", ins, {"Out": out}, {"dtype": code})
    if not isinstance(num, Variable):
        out.shape = [int(num)]
    return out


def shape(x, name=None):
    """The run-time shape of x as an int32 tensor [rank] (op shape).

    Examples:
        >>> import keel as paddle
        >>> print(paddle.shape(paddle.rand([3, 2])).numpy())
        [3 2]
    """
    helper = LayerHelper("shape", name)
    out = helper.create_tmp(_T.INT32, stop_gradient=True)
    helper.append_op("shape", {"Input": x}, {"Out": out})
    return out


def one_hot(x, num_classes, name=None):
    """float32 x.shape + [num_classes]: 1 at each class id of int x (op one_hot_v2).

    Examples:
        >>> import keel as paddle
        >>> label = paddle.to_tensor([1, 1, 3, 0])
        >>> print(paddle.one_hot(label, num_classes=4).numpy())
        [[0. 1. 0. 0.]
         [0. 1. 0. 0.]
         [0. 0. 0. 1.]
         [1. 0. 0. 0.]]
    """
    helper = LayerHelper("one_hot_v2", name)
    inputs, attrs = {"X": x}, {"allow_out_of_range": False}
    if isinstance(num_classes, Variable):
        inputs["depth_tensor"] = num_classes
    else:
        attrs["depth"] = int(num_classes)
    out = helper.create_tmp(_T.FP32, stop_gradient=True)
    helper.append_op("one_hot_v2", inputs, {"Out": out}, attrs)
    return out


def pad(x, paddings, pad_value=0.0, name=None):
    """Pad x with pad_value: paddings[2i] before and paddings[2i+1] after dim i (op pad).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> print(paddle.pad(x, paddings=[1, 0, 0, 1], pad_value=9.0).numpy())   # [before, after] per dim
        [[9. 9. 9.]
         [1. 2. 9.]
         [3. 4. 9.]]
    """
    helper = LayerHelper("pad", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("pad", {"X": x}, {"Out": out},
                     {"paddings": _ints(paddings), "pad_value": float(pad_value)})
    return out


