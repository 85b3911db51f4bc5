"""set_value: `x[index] = value` as a pure function (Out is a new array; the static
builder writes Out back into Input's variable, the eager engine rebinds the tensor).

PaddlePaddle's semantics (phi SetValueKernel, slice_utils.h CheckAndUpdateSliceAttrs):
each of `axes` gets starts/ends/steps (StartsTensorList > starts, ...), bounds as Python's
slices (see _bounds). The value (ValueTensor,
else the `values` attribute reshaped to `shape`) broadcasts to the region with its
`decrease_axes` (int indices) dropped and size-1 dims inserted at `none_axes` (None
indices), and is cast to Input's dtype.

set_value_grad: Input@GRAD is Out@GRAD with the assigned region zeroed (those elements
of Input never reach Out); ValueTensor@GRAD is the region of Out@GRAD summed over the dims
the value was broadcast along.
"""
from __future__ import annotations

import numpy as np

from keel.kernels.registry import kernel
from keel.kernels.tensor import _axis, cast, host_int, present

_SLOTS = ["StartsTensorList", "EndsTensorList", "StepsTensorList"]
_ATTRS = ["axes", "starts", "ends", "steps", "decrease_axes", "none_axes", "shape", "dtype", "values"]


def _bounds(start: int, end: int, step: int) -> slice:
    """One axis' region as a Python slice. PaddlePaddle's bounds (CheckAndUpdateSliceAttrs)
    are Python's slice semantics but for an end of -1 with a negative step, which reaches
    element 0; Python's empty range where Paddle refuses end < start (step > 0) is kept,
    as Keel's slice kernel keeps it."""
    if step == 0:
        raise ValueError("set_value: step is 0")
    return slice(start, None if step < 0 and end == -1 else end, step)


def _listed(tensors, attr) -> list[int]:
    return [host_int(t) for t in tensors] if present(tensors) else [int(v) for v in attr]


def _region(shape, axes, starts, ends, steps) -> tuple:
    """The basic-slicing index of the assigned region of an input of `shape`."""
    steps = list(steps) if len(steps) else [1] * len(axes)
    if not len(starts) == len(ends) == len(steps) == len(axes):
        raise ValueError(f"set_value: axes {list(axes)}, starts {starts}, ends {ends} and steps {steps} "
                         "must have one entry each")
    index = [slice(None)] * len(shape)
    for a, s, e, st in zip(axes, starts, ends, steps):
        a = _axis(int(a), len(shape))
        index[a] = _bounds(int(s), int(e), int(st))
    return tuple(index)


def _value_shape(region_shape, decrease_axes, none_axes) -> tuple:
    """The shape the value broadcasts to: the region's dims less `decrease_axes`, with 1s
    inserted at `none_axes` (positions in the result, as PaddlePaddle counts them)."""
    drop = {int(a) for a in decrease_axes}
    dims = [d for i, d in enumerate(region_shape) if i not in drop]
    for a in sorted(int(a) for a in none_axes):
        dims.insert(min(a, len(dims)), 1)
    return tuple(dims)


def _index_and_shape(x, starts_l, ends_l, steps_l, axes, starts, ends, steps, decrease_axes, none_axes):
    index = _region(x.shape, axes, _listed(starts_l, starts), _listed(ends_l, ends), _listed(steps_l, steps))
    region = tuple(len(range(*s.indices(n))) for s, n in zip(index, x.shape))
    return index, region, _value_shape(region, decrease_axes, none_axes)


@kernel("set_value", inputs=["Input", "ValueTensor", *_SLOTS], outputs=["Out"], attrs=_ATTRS)
def set_value(xp, x, value, starts_l, ends_l, steps_l, *, axes, starts=(), ends=(), steps=(),
              decrease_axes=(), none_axes=(), shape=(), dtype=5, values=()):
    index, region, target = _index_and_shape(x, starts_l, ends_l, steps_l, axes, starts, ends, steps,
                                             decrease_axes, none_axes)
    if value is None:  # the `values` attribute: numbers of VarType `dtype`, row-major in `shape`
        data = [v.real if isinstance(v, complex) and x.dtype.kind != "c" else v for v in values]
        value = cast(xp, xp.asarray(np.asarray(data)), dtype).reshape(tuple(int(d) for d in shape))
    try:
        broadcast = xp.broadcast_to(value, target)
    except ValueError:
        raise ValueError(f"set_value: the value of shape {list(value.shape)} cannot be broadcast to the "
                         f"assigned region's shape {list(target)}") from None
    out = x.copy()
    out[index] = broadcast.reshape(region).astype(x.dtype, copy=False)
    return out


@kernel("set_value_grad", inputs=["Out@GRAD", "ValueTensor", *_SLOTS], outputs=["Input@GRAD", "ValueTensor@GRAD"],
        attrs=_ATTRS)
def set_value_grad(xp, dout, value, starts_l, ends_l, steps_l, *, axes, starts=(), ends=(), steps=(),
                   decrease_axes=(), none_axes=(), shape=(), dtype=5, values=(),
                   need=frozenset({"Input@GRAD", "ValueTensor@GRAD"})):
    index, region, target = _index_and_shape(dout, starts_l, ends_l, steps_l, axes, starts, ends, steps,
                                             decrease_axes, none_axes)
    dx = None
    if "Input@GRAD" in need:
        dx = dout.copy()
        dx[index] = 0
    dvalue = None
    if "ValueTensor@GRAD" in need and value is not None:
        dvalue = _reduce_to(xp, dout[index].reshape(target), value.shape)
    return dx, dvalue


def _reduce_to(xp, g, shape):
    """`g` summed over the dims a value of `shape` was broadcast along (numpy's rules)."""
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
    summed = g.sum(axis=axes, keepdims=True) if axes else g
    return xp.ascontiguousarray(summed.reshape(tuple(shape)))
