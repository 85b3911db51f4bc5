"""Indexing: `x[item]` (getitem: slice / strided_slice ops) and `x[item] = value` (setitem:
a set_value op), as PaddlePaddle's static graph writes them, for Variables and eager
Tensors alike. One parser reads the index (ints, slices with steps, negative indices,
None and Ellipsis) into the axes/starts/ends/steps both ops take.

`x[item] = value` on a Variable appends set_value writing a new variable, which the
Python object x names from then on (a persistable x, or one of an enclosing block, is
written in place, PaddlePaddle's form); on a Tensor it runs set_value at once and the
tensor takes the result (program/tensor.py Tensor.__setitem__ keeps the tape right).
"""
from __future__ import annotations

import builtins
from dataclasses import dataclass, field

import numpy as np

from keel.program import callsite, unique_name
from keel.program.errors import OpError
from keel.program.ops.tensor import INT_MAX
from keel.program.variable import Variable

__all__ = ["getitem", "setitem"]


class IndexingError(OpError, IndexError):
    """An index out of range, or too many indices, for `x[...]` (an IndexError, as Python's)."""


class IndexTypeError(OpError, TypeError):
    """An index of a kind `x[...]` does not take (a TypeError, as Python's)."""


class IndexValueError(OpError, ValueError):
    """A slice step of zero (a ValueError, as Python's)."""


@dataclass
class _Index:
    axes: list = field(default_factory=list)
    starts: list = field(default_factory=list)
    ends: list = field(default_factory=list)
    steps: list = field(default_factory=list)
    decrease: list = field(default_factory=list)   # dims an int index drops
    new_dims: list = field(default_factory=list)   # result dims a None index inserts


def _fail(op_type: str, message: str, cls=IndexingError):
    raise cls(message, op_type=op_type, callsite=callsite.describe(callsite.user_frame_lines()))


def parse_index(x, item, op_type: str, for_set: bool = False) -> _Index:
    """The slice bounds of `x[item]`. `for_set`: set_value's convention, where an end of -1
    with a negative step reaches element 0 (a Python stop of -1 there is written dim - 1)."""
    items = list(item) if isinstance(item, tuple) else [item]
    n_ellipsis = builtins.sum(1 for it in items if it is Ellipsis)
    if n_ellipsis > 1:
        _fail(op_type, "an index can only have a single ellipsis ('...')")
    used = builtins.sum(1 for it in items if it is not None and it is not Ellipsis)
    if used > x.ndim:
        _fail(op_type, f"too many indices for {x.name} {x.type_string()}: {used} given")
    if n_ellipsis:
        at = items.index(Ellipsis)
        items[at:at + 1] = [builtins.slice(None)] * (x.ndim - used)
    index = _Index()
    dim = out_dim = 0
    for it in items:
        if it is None:
            index.new_dims.append(out_dim)
            out_dim += 1
            continue
        if for_set and isinstance(it, Variable):
            it = _one_int(x, it)
            if isinstance(it, Variable):  # known when the program runs: StartsTensorList
                index.axes.append(dim), index.starts.append(it), index.ends.append(it + 1)
                index.steps.append(1), index.decrease.append(dim)
                dim += 1
                continue
        if isinstance(it, (bool, np.bool_)) or not isinstance(it, (int, np.integer, builtins.slice)):
            _fail(op_type, f"unsupported index {it!r} for {x.name}: use ints, slices, None, ... "
                           f"{'a one-element int tensor' if for_set else 'or a 1-D int Variable'}", IndexTypeError)
        size = x.shape[dim]
        if isinstance(it, builtins.slice):
            step = 1 if it.step is None else int(it.step)
            if step == 0:
                _fail(op_type, f"slice step cannot be zero (index {it!r} of {x.name})", IndexValueError)
            if it.start is None and it.stop is None and step == 1:
                dim += 1
                out_dim += 1
                continue
            if step > 0:
                start = 0 if it.start is None else int(it.start)
                stop = INT_MAX if it.stop is None else int(it.stop)
            else:
                start = INT_MAX if it.start is None else int(it.start)
                stop = -INT_MAX if it.stop is None else int(it.stop)
                if for_set and stop == -1 and size >= 0:
                    stop = size - 1
            index.axes.append(dim), index.starts.append(start), index.ends.append(stop)
            index.steps.append(step)
            out_dim += 1
        else:
            i = int(it)
            if size >= 0 and not -size <= i < size:
                _fail(op_type, f"index {i} is out of range for dim {dim} of {x.name} {x.type_string()}")
            index.axes.append(dim), index.starts.append(i), index.ends.append(i + 1 if i != -1 else INT_MAX)
            index.steps.append(1), index.decrease.append(dim)
        dim += 1
    return index


def _one_int(x, index):
    """A one-element int tensor as an index of set_value: an eager Tensor's value, else the
    Variable (int64) whose value the program reads."""
    from keel.program import dtypes
    if not dtypes.is_integer(index.dtype) or (index.shape is not None and numel_known(index.shape) > 1):
        _fail("set_value", f"a tensor index of x[index] = value must be one int, got {index.name} "
                           f"{index.type_string()}; for many indices use paddle.scatter", IndexTypeError)
    if index.eager:
        return int(index)
    if index.dtype != dtypes.to_code("int64"):
        from keel.program.layers.math import cast
        index = cast(index, "int64")
    return index


def numel_known(shape) -> int:
    return int(np.prod([d for d in shape if d >= 0])) if len(shape) else 1


def getitem(x, item):
    """x[item] for ints, slices (steps too), None and Ellipsis, as PaddlePaddle's static
    graph does it: one `slice` op (a `strided_slice` when a step is not 1), ints dropping
    their dim through decrease_axis, then `unsqueeze2` for the None entries. A 1-D int
    Variable index gathers along dim 0."""
    from keel.program.layers.tensor import gather, unsqueeze
    if isinstance(item, Variable):
        return gather(x, item)
    index = parse_index(x, item, "slice")
    out = x
    if index.axes:
        strided = any(s != 1 for s in index.steps)
        op_type = "strided_slice" if strided else "slice"
        block = x.block.program.current_block()
        out = block.create_var(unique_name.generate(f"{x.name}_{op_type}"), (), x.dtype)
        attrs = {"axes": index.axes, "starts": index.starts, "ends": index.ends,
                 "infer_flags": [1] * len(index.axes), "decrease_axis": index.decrease}
        if strided:
            attrs["strides"] = index.steps
        block.append_op(op_type, {"Input": x}, {"Out": out}, attrs)
    if index.new_dims:
        out = unsqueeze(out, index.new_dims)
    return out


def setitem(x, item, value, output=None):
    """Append (or, eagerly, run) `set_value`: `output` (default x itself) = x with x[item] =
    value. `value` is a Variable/Tensor (cast to x's dtype when it differs; op input
    ValueTensor) or a number, list or numpy array (the op's `values` attribute); it
    broadcasts to the indexed region."""
    if isinstance(item, (list, np.ndarray)):
        _fail("set_value", f"x[index] = value takes ints, slices, None, ... and one-element int tensors as "
                           f"index, got {type(item).__name__}; for many indices use paddle.scatter", IndexTypeError)
    if x.ndim == 0:
        _fail("set_value", f"{x.name} is 0-D: write x.set_value(value) (or paddle.assign) to replace its value")
    index = parse_index(x, item, "set_value", for_set=True)
    axes = index.axes or [0]  # a full-tensor write (x[...] = v): the whole of dim 0
    starts, ends, steps = (index.starts, index.ends, index.steps) if index.axes else ([0], [INT_MAX], [1])
    attrs = {"axes": axes, "starts": starts, "ends": ends, "steps": steps, "decrease_axes": index.decrease,
             "none_axes": index.new_dims, "dtype": x.dtype}
    inputs = {"Input": x}
    if any(isinstance(v, Variable) for v in starts):   # a tensor index: every bound as a tensor
        from keel.program.layers.tensor import fill_constant
        for name, values in (("Starts", starts), ("Ends", ends), ("Steps", steps)):
            inputs[f"{name}TensorList"] = [v if isinstance(v, Variable) else fill_constant([1], "int64", v)
                                           for v in values]
            attrs[name.lower()] = [0] * len(values)
    if isinstance(value, Variable):
        if value.dtype != x.dtype:
            from keel.program.layers.math import cast
            value = cast(value, x.dtype)
        inputs["ValueTensor"] = value
    else:
        array = np.asarray(value)
        if array.dtype.kind not in "biufc":
            _fail("set_value", f"cannot assign a {type(value).__name__} ({array.dtype}) to {x.name}", IndexTypeError)
        attrs.update(shape=list(array.shape), values=array.ravel().tolist())
    block = x.block.program.current_block()
    if output is not None or x.eager or x.persistable or x.block is not block:
        target = x if output is None else output
        block.append_op("set_value", inputs, {"Out": target}, attrs)
        return target
    # A program variable: the write goes to a new variable, which x's Python object then
    # names (the old value keeps its name for the ops that read it): one writer per
    # variable, so backward differentiates through the write.
    new = block.create_var(unique_name.generate(f"{x.name}_set_value"), x.shape, x.dtype)
    block.append_op("set_value", inputs, {"Out": new}, attrs)
    _swap_names(x, new)
    return x


def _swap_names(a: Variable, b: Variable) -> None:
    """Python object `a` takes `b`'s variable and `b` takes `a`'s, in their block too."""
    block = a.block
    a.desc, b.desc = b.desc, a.desc
    block.vars[a.name], block.vars[b.name] = a, b

