"""Kernels of the control-flow ops that are plain functions: branch selection and tensor
arrays. (`conditional_block` and `while` are no kernels: the executor compiles their
sub-blocks, executor/plan.py.)

A tensor array is a Python list of arrays. `write_to_array` takes the array it writes as
an input too (its `Out` slot's current value, None before any write) and returns a new
list, so a value another variable holds is never changed under it; entries are shared,
never written into (`read_from_array` returns a copy, which later ops may overwrite)."""
from __future__ import annotations

from keel.kernels.registry import kernel


def _index(xp, i, length, op, what="index"):
    """The int of a one-element index tensor, checked against [0, length)."""
    if getattr(i, "size", 1) != 1:
        raise ValueError(f"{op}: {what} must hold one element, got shape {list(i.shape)}")
    k = int(i.reshape(()) if hasattr(i, "reshape") else i)
    if not 0 <= k < length:
        raise IndexError(f"{op}: {what} {k} is out of range [0, {length})")
    return k


def sum_arrays(add, arrays):
    """The entrywise sum of tensor arrays (the gradients of one array), as PaddlePaddle's
    `sum` of LoDTensorArrays: entry k adds the arrays' entries k (by `add`, given a list);
    an entry no array holds stays None."""
    out = []
    for k in range(max(len(a) for a in arrays)):
        entries = [a[k] for a in arrays if k < len(a) and a[k] is not None]
        out.append(add(entries) if entries else None)
    return out


@kernel("select_input", inputs=["X", "Mask"], outputs=["Out"])
def select_input(xp, xs, mask):
    return xs[_index(xp, mask, len(xs), "select_input", "Mask")]


@kernel("select_output", inputs=["X", "Mask"], outputs=["Out"])
def select_output(xp, x, mask, *, counts):
    """Out[Mask] = X; the other outputs are left unset (None): only the selected branch runs."""
    n = counts["Out"]
    out = [None] * n
    out[_index(xp, mask, n, "select_output", "Mask")] = x
    return out


@kernel("write_to_array", inputs=["X", "I", "Out"], outputs=["Out"])
def write_to_array(xp, x, i, array):
    array = list(array or ())
    if getattr(i, "size", 1) != 1:
        raise ValueError(f"write_to_array: I must hold one element, got shape {list(i.shape)}")
    k = int(i.reshape(()))
    if k < 0:
        raise IndexError(f"write_to_array: index {k} is negative")
    array.extend([None] * (k + 1 - len(array)))
    array[k] = x
    return array


@kernel("read_from_array", inputs=["X", "I", "X_W"], outputs=["Out"])
def read_from_array(xp, array, i, like=None):
    """X[I]; with X_W (write_to_array's gradient), an entry nothing wrote is zeros like X_W."""
    array = array or ()
    if like is not None:
        k = _index(xp, i, 1 << 62, "read_from_array")
        value = array[k] if k < len(array) else None
        return xp.zeros_like(like) if value is None else value.copy()
    value = array[_index(xp, i, len(array), "read_from_array")]
    if value is None:
        raise ValueError(f"read_from_array: entry {int(i.reshape(()))} was never written")
    return value.copy()


@kernel("lod_array_length", inputs=["X"], outputs=["Out"])
def lod_array_length(xp, array):
    return xp.asarray([len(array or ())], dtype=xp.int64)


@kernel("tensor_array_to_tensor", inputs=["X"], outputs=["Out", "OutIndex"], attrs=["axis", "use_stack"])
def tensor_array_to_tensor(xp, array, *, axis=0, use_stack=False):
    if not array or any(a is None for a in array):
        raise ValueError("tensor_array_to_tensor: the array is empty or has unwritten entries")
    out = xp.stack(array, axis=axis) if use_stack else xp.concatenate(array, axis=axis)
    sizes = [1 if use_stack else a.shape[axis] for a in array]
    return out, xp.asarray(sizes, dtype=xp.int32)


@kernel("tensor_array_to_tensor_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"], attrs=["axis", "use_stack"])
def tensor_array_to_tensor_grad(xp, array, dout, *, axis=0, use_stack=False):
    """Out@GRAD cut back into the entries' pieces (a tensor array)."""
    if use_stack:
        return [xp.take(dout, k, axis=axis) for k in range(len(array))]
    bounds = [0]
    for a in array:
        bounds.append(bounds[-1] + a.shape[axis])
    index = [slice(None)] * dout.ndim
    pieces = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        index[axis] = slice(lo, hi)
        pieces.append(dout[tuple(index)].copy())
    return pieces
