"""Tensor-manipulation kernels: shape changes, slicing, gathers and scatters, fills,
constants, padding. Semantics follow PaddlePaddle's legacy ops (phi kernels).

Conventions shared by this module:
- Outputs never alias inputs: view-producing numpy operations (reshape, transpose,
  basic slicing, broadcast_to) are followed by a copy, as PaddlePaddle's phi kernels
  copy too. The executor may therefore run in-place kernels (optimizers) on a buffer
  whose earlier views were fetched without changing those fetched values.
- `XShape` outputs (kept by PaddlePaddle only for gradients) are zero-size arrays of
  shape [0] + X.shape (no data, as PaddlePaddle's): the gradient kernels read X's shape
  from them. They are produced only when the op binds XShape.
- Gradient kernels (`<op>_grad`, at the end) return arrays of the forward input's shape
  and Out@GRAD's dtype; index accumulation (gather, gather_nd, pad3d's reflect/replicate/
  circular modes) goes through `scatter_add`, which uses cupyx.scatter_add on a GPU.
- Shape-like tensor inputs (ShapeTensor, StartsTensor, ...) are read to the host
  (`tolist()`), which on a GPU is a device synchronisation; PaddlePaddle does the same.
- Precedence of tensor inputs over attributes follows PaddlePaddle's argument mappings:
  reshape2 ShapeTensor(list) > Shape > shape; slice StartsTensor > StartsTensorList >
  starts (same for ends/strides); expand_v2 Shape > expand_shapes_tensor > shape;
  tile RepeatTimes > repeat_times_tensor > repeat_times; fill_constant ShapeTensor >
  ShapeTensorList > shape and ValueTensor > str_value (when non-empty) > value.
"""
from __future__ import annotations

import math

import numpy as np

from keel.kernels.bf16_bits import from_bf16_bits, to_bf16_bits
from keel.kernels.registry import kernel

# VarType number -> numpy dtype. BF16 travels as its uint16 bit pattern (as in program/dtypes).
BF16 = 22
_DTYPES = {
    0: np.dtype(np.bool_), 1: np.dtype(np.int16), 2: np.dtype(np.int32), 3: np.dtype(np.int64),
    4: np.dtype(np.float16), 5: np.dtype(np.float32), 6: np.dtype(np.float64),
    20: np.dtype(np.uint8), 21: np.dtype(np.int8), BF16: np.dtype(np.uint16),
    23: np.dtype(np.complex64), 24: np.dtype(np.complex128),
    36: np.dtype(np.uint16), 37: np.dtype(np.uint32), 38: np.dtype(np.uint64),
}


def np_dtype(code: int) -> np.dtype:
    """VarType number -> numpy dtype (BF16 -> uint16 bit pattern)."""
    try:
        return _DTYPES[int(code)]
    except KeyError:
        raise TypeError(f"unsupported dtype number {code}") from None


def cast(xp, a, code: int):
    """Cast array `a` to VarType `code` (BF16 -> uint16 bits from the float value)."""
    if int(code) == BF16:
        return to_bf16_bits(xp, a)
    return a.astype(np_dtype(code), copy=False)


def full(xp, shape, value, code: int):
    """An array of `shape` filled with the Python scalar `value` cast to VarType `code`."""
    if int(code) == BF16:
        return to_bf16_bits(xp, xp.full(tuple(shape), value, dtype=np.float32))
    return xp.full(tuple(shape), value, dtype=np_dtype(code))


# -- reading shape-like tensors ------------------------------------------------------

def present(t) -> bool:
    """An optional input is given (duplicable empty slots may arrive as None or [])."""
    if t is None:
        return False
    if isinstance(t, (list, tuple)):
        return len(t) > 0
    return True


def host_ints(t) -> list[int]:
    """A tensor's values as Python ints (host transfer)."""
    return [int(v) for v in np.asarray(t.tolist()).reshape(-1).tolist()]


def host_int(t) -> int:
    vals = host_ints(t)
    if len(vals) != 1:
        raise ValueError(f"expected a 1-element tensor, got {len(vals)} elements")
    return vals[0]


def _from(tensor, tensor_list, attr):
    """Paddle's precedence: a 1-D tensor input, then a list of 1-element tensors, then the attr."""
    if present(tensor):
        return host_ints(tensor)
    if present(tensor_list):
        return [host_int(t) for t in tensor_list]
    return [int(v) for v in attr]


def _from_list_first(tensor_list, tensor, attr):
    if present(tensor_list):
        return [host_int(t) for t in tensor_list]
    if present(tensor):
        return host_ints(tensor)
    return [int(v) for v in attr]


def _axis(axis: int, ndim: int) -> int:
    a = axis + ndim if axis < 0 else axis
    if not 0 <= a < max(ndim, 1):
        raise ValueError(f"axis {axis} out of range for a {ndim}-D tensor")
    return a


# -- reshape family ------------------------------------------------------------------

def _xshape(xp, x, need):
    """XShape: a zero-size array of shape [0] + X.shape recording X's shape for the
    gradient (PaddlePaddle's XShape holds no data either), or None when the op does not
    bind it."""
    if need is not None and "XShape" not in need:
        return None
    return xp.empty((0,) + tuple(x.shape), dtype=x.dtype)


def reshape_target(in_shape, shape) -> tuple[int, ...]:
    """Paddle's ValidateShape: 0 copies the input dim at that index, one -1 is inferred."""
    out, unknown = [], None
    for i, s in enumerate(shape):
        if s == -1:
            if unknown is not None:
                raise ValueError(f"reshape: only one dimension can be -1, got {list(shape)}")
            unknown = i
            out.append(1)
        elif s == 0:
            if i >= len(in_shape):
                raise ValueError(f"reshape: shape[{i}] is 0 but the input has rank {len(in_shape)}")
            out.append(in_shape[i])
        elif s > 0:
            out.append(s)
        else:
            raise ValueError(f"reshape: invalid dimension {s} in {list(shape)}")
    size = math.prod(in_shape)
    if unknown is not None:
        known = math.prod(out)
        if known == 0 or size % known:
            raise ValueError(f"reshape: cannot infer -1 in {list(shape)} for input {list(in_shape)}")
        out[unknown] = size // known
    if math.prod(out) != size:
        raise ValueError(f"reshape: cannot reshape {list(in_shape)} to {list(shape)}")
    return tuple(out)


def _view_when_donated(view):
    """A specialize hook for the reshape family, whose Out is `view(x, **attrs)` copied:
    when X is an intermediate nobody reads afterwards (donated), only X is bound and the
    op binds just Out (an inference program's XShape is read by no gradient), Out is the
    view itself, sharing X's buffer instead of copying it (a transposed view is strided;
    numpy's kernels and BLAS take strides). Safe because nothing else holds X, and an
    array that is a view (`base` set) is never written into by a later op's fast path."""
    def specialize(xp, attrs, present, donated):
        if not donated or any(p is not None for p in present[1:]):
            return None
        return lambda x: view(x, **attrs)
    return specialize


def _reshape_view(x, *, shape):
    return x.reshape(reshape_target(x.shape, [int(v) for v in shape]))


def _transpose_view(x, *, axis):
    return x.transpose([int(a) for a in axis])


def _flatten_view(x, *, start_axis, stop_axis):
    if x.ndim == 0:
        return x.reshape((1,))
    start, stop = _axis(start_axis, x.ndim), _axis(stop_axis, x.ndim)
    if start > stop:
        raise ValueError(f"flatten: start_axis {start_axis} is after stop_axis {stop_axis}")
    return x.reshape(x.shape[:start] + (math.prod(x.shape[start:stop + 1]),) + x.shape[stop + 1:])


@kernel("reshape2", inputs=["X", "Shape", "ShapeTensor"], outputs=["Out", "XShape"],
        attrs=["shape"], specialize=_view_when_donated(_reshape_view))
def reshape2(xp, x, shape_t, shape_list, *, shape=(), need=None):
    return _reshape_view(x, shape=_from_list_first(shape_list, shape_t, shape)).copy(), _xshape(xp, x, need)


@kernel("transpose2", inputs=["X"], outputs=["Out", "XShape"], attrs=["axis"],
        specialize=_view_when_donated(_transpose_view))
def transpose2(xp, x, *, axis, need=None):
    return _transpose_view(x, axis=axis).copy(), _xshape(xp, x, need)


@kernel("flatten_contiguous_range", inputs=["X"], outputs=["Out", "XShape"],
        attrs=["start_axis", "stop_axis"], specialize=_view_when_donated(_flatten_view))
def flatten_contiguous_range(xp, x, *, start_axis, stop_axis, need=None):
    return _flatten_view(x, start_axis=start_axis, stop_axis=stop_axis).copy(), _xshape(xp, x, need)


def squeeze_shape(in_shape, axes) -> tuple[int, ...]:
    """Paddle's GetOutputSqueezeShape at run time: no axes -> drop every size-1 dim; else
    drop the named dims that are 1 and silently keep named dims that are not 1."""
    n = len(in_shape)
    drop = [False] * n
    if not axes:
        drop = [d == 1 for d in in_shape]
    elif n:
        for a in axes:
            cur = a + n if a < 0 else a
            if not 0 <= cur < n:
                raise ValueError(f"squeeze: axis {a} out of range for rank {n}")
            if in_shape[cur] == 1:
                drop[cur] = True
    return tuple(d for d, gone in zip(in_shape, drop) if not gone)


def _squeeze_view(x, *, axes):
    return x.reshape(squeeze_shape(x.shape, [int(a) for a in axes]))


@kernel("squeeze2", inputs=["X"], outputs=["Out", "XShape"], attrs=["axes"],
        specialize=_view_when_donated(_squeeze_view))
def squeeze2(xp, x, *, axes=(), need=None):
    return _squeeze_view(x, axes=axes).copy(), _xshape(xp, x, need)


def unsqueeze_shape(in_shape, axes) -> tuple[int, ...]:
    """Paddle's GetUnsqueezeShape: axes are applied one after another; a negative axis
    counts from the end of the current (growing) rank + 1."""
    out_rank = len(in_shape) + len(axes)
    marks = [0] * (out_rank + 1)
    cur_rank = len(in_shape)
    for a in axes:
        cur = a + cur_rank + 1 if a < 0 else a
        if not 0 <= cur <= cur_rank:
            raise ValueError(f"unsqueeze: axis {a} out of range for rank {cur_rank}")
        for i in range(cur_rank, cur - 1, -1):
            if marks[i] == 1:
                marks[i + 1], marks[i] = 1, 0
        marks[cur] = 1
        cur_rank += 1
    dims = iter(in_shape)
    return tuple(1 if m == 1 else next(dims) for m in marks[:out_rank])


def _unsqueeze_view(x, *, axes):
    return x.reshape(unsqueeze_shape(x.shape, [int(a) for a in axes]))


@kernel("unsqueeze2", inputs=["X", "AxesTensor", "AxesTensorList"], outputs=["Out", "XShape"],
        attrs=["axes"], specialize=_view_when_donated(_unsqueeze_view))
def unsqueeze2(xp, x, axes_t, axes_list, *, axes=(), need=None):
    return _unsqueeze_view(x, axes=_from_list_first(axes_list, axes_t, axes)).copy(), _xshape(xp, x, need)


# -- joining and splitting -----------------------------------------------------------

@kernel("concat", inputs=["X", "AxisTensor"], outputs=["Out"], attrs=["axis"])
def concat(xp, xs, axis_t, *, axis=0):
    if present(axis_t):
        axis = host_int(axis_t)
    xs = list(xs)
    return xp.concatenate(xs, axis=_axis(axis, xs[0].ndim))


def _split_view(x, *, sections=(), num=0, axis=0):
    """split's outputs as views of x (slices along `axis`)."""
    axis = _axis(axis, x.ndim)
    size = x.shape[axis]
    sections = [int(s) for s in sections]
    if num > 0 and not sections:
        if size % num:
            raise ValueError(f"split: dimension {size} is not divisible by num={num}")
        sections = [size // num] * num
    if sections.count(-1) > 1:
        raise ValueError(f"split: only one section can be -1, got {sections}")
    if -1 in sections:
        sections[sections.index(-1)] = size - (sum(sections) + 1)
    if sum(sections) != size or any(s < 0 for s in sections):
        raise ValueError(f"split: sections {sections} do not add up to dimension {size}")
    lead = (slice(None),) * axis
    bounds = np.cumsum([0] + sections).tolist()
    return [x[lead + (slice(a, b),)] for a, b in zip(bounds[:-1], bounds[1:])]


@kernel("split", inputs=["X", "AxisTensor", "SectionsTensorList"], outputs=["Out"],
        attrs=["sections", "num", "axis"], specialize=_view_when_donated(_split_view))
def split(xp, x, axis_t, sections_list, *, sections=(), num=0, axis=0):
    """Copies; views of X when X is donated (an intermediate read by nobody else: the
    gradient buckets fleet.distributed_optimizer splits after their all-reduce)."""
    if present(axis_t):
        axis = host_int(axis_t)
    if present(sections_list):
        sections = [host_int(t) for t in sections_list]
    return [part.copy() for part in _split_view(x, sections=sections, num=num, axis=axis)]


@kernel("stack", inputs=["X"], outputs=["Y"], attrs=["axis"])
def stack(xp, xs, *, axis=0):
    xs = list(xs)
    return xp.stack(xs, axis=_axis(axis, xs[0].ndim + 1))


@kernel("unstack", inputs=["X"], outputs=["Y"], attrs=["axis", "num"])
def unstack(xp, x, *, axis=0, num=0):
    axis = _axis(axis, x.ndim)
    moved = xp.moveaxis(x, axis, 0).copy()
    return [moved[i] for i in range(moved.shape[0])]


# -- slicing -------------------------------------------------------------------------

def _decrease(out, decrease_axis):
    """Drop the `decrease_axis` dims (each must be 1); all dims dropped gives a 0-D tensor."""
    if not decrease_axis:
        return out
    drop = {_axis(a, out.ndim) for a in decrease_axis}
    for a in drop:
        if out.shape[a] != 1:
            raise ValueError(f"decrease_axis {a} has size {out.shape[a]}, expected 1")
    return out.reshape(tuple(d for i, d in enumerate(out.shape) if i not in drop))


def slice_bounds(start: int, end: int, dim: int) -> tuple[int, int]:
    """Paddle's CheckAndUpdateSliceAttrs for step 1: negatives count from the end, then
    clamp to [0, dim]. Paddle rejects end < start; Keel returns an empty range there."""
    if dim <= 0:
        return 0, 0
    start = start + dim if start < 0 else start
    start = min(max(start, 0), dim)
    end = end + dim if end < 0 else end
    end = max(min(end, dim), 0)
    return start, max(end, start)


@kernel("slice", inputs=["Input", "StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList"],
        outputs=["Out"], attrs=["axes", "starts", "ends", "infer_flags", "decrease_axis"])
def slice_(xp, x, starts_t, ends_t, starts_list, ends_list, *, axes, starts=(), ends=(),
           infer_flags=(), decrease_axis=()):
    index = _slice_index(x.shape, axes, _from(starts_t, starts_list, starts),
                         _from(ends_t, ends_list, ends))
    return _decrease(x[index], list(decrease_axis)).copy()


def _slice_index(shape, axes, starts, ends) -> tuple:
    """The basic-slicing index of a slice op on an input of `shape`."""
    index = [slice(None)] * len(shape)
    for a, s, e in zip(axes, starts, ends):
        a = _axis(int(a), len(shape))
        lo, hi = slice_bounds(s, e, shape[a])
        index[a] = slice(lo, hi)
    return tuple(index)


def strided_bounds(start: int, end: int, stride: int, dim: int, decrease: bool) -> slice:
    """PaddlePaddle 3.3.1's strided_slice bounds as a Python slice. They are Python's slice
    semantics (checked against Paddle 3.3.1's static-graph executor for every start and end
    in [-8, 6] + {INT_MIN, INT_MAX} and stride in +-1..3 on a dim of 5; e.g. x[::-1] is
    written as end INT_MIN and reaches index 0, and end -1 with a negative stride means
    dim - 1, giving an empty slice from the last element), except `decrease` (start -1,
    end 0, infer flag -1 on a decrease axis), which picks one element."""
    if stride == 0:
        raise ValueError("strided_slice: stride is 0")
    if decrease:
        if start < 0:
            start = max(start + dim, 0)
        if stride > 0:
            return slice(start, start + 1, stride)
        start = min(start, dim - 1)
        return slice(start, None if start == 0 else start - 1, stride)
    picked = range(*slice(start, end, stride).indices(dim))
    if not picked:
        return slice(0, 0, 1)
    return slice(picked.start, picked.stop if picked.stop >= 0 else None, picked.step)


@kernel("strided_slice",
        inputs=["Input", "StartsTensor", "StartsTensorList", "EndsTensor", "EndsTensorList",
                "StridesTensor", "StridesTensorList"],
        outputs=["Out"], attrs=["axes", "starts", "ends", "strides", "infer_flags", "decrease_axis"])
def strided_slice(xp, x, starts_t, starts_list, ends_t, ends_list, strides_t, strides_list, *,
                  axes, starts=(), ends=(), strides=(), infer_flags=(), decrease_axis=()):
    index = _strided_index(x.shape, axes, _from(starts_t, starts_list, starts),
                           _from(ends_t, ends_list, ends), _from(strides_t, strides_list, strides),
                           infer_flags, decrease_axis)
    return _decrease(x[index], list(decrease_axis)).copy()


def _strided_index(shape, axes, starts, ends, strides, infer_flags, decrease_axis) -> tuple:
    """The basic-slicing index of a strided_slice op on an input of `shape`."""
    flags = list(infer_flags) + [1] * (len(axes) - len(infer_flags))
    dec = {int(a) for a in decrease_axis}
    index = [slice(None)] * len(shape)
    for i, a in enumerate(axes):
        a = _axis(int(a), len(shape))
        affect = starts[i] == -1 and ends[i] == 0 and flags[i] == -1 and a in dec
        index[a] = strided_bounds(starts[i], ends[i], strides[i], shape[a], affect)
    return tuple(index)


# -- gathers and scatters ------------------------------------------------------------

class IndexRangeError(IndexError, ValueError):
    """An index-taking kernel got an index value outside the op's valid range. An
    IndexError, and a ValueError too (PaddlePaddle reports one_hot's and embedding's as
    InvalidArgument, gather's and scatter's as OutOfRange)."""


def check_index_range(xp, op: str, slot: str, idx, size, *, negative: bool, exempt=None,
                      note: str = "") -> None:
    """Raise IndexRangeError naming the first bad value of `idx` unless every value lies in
    [-size, size) (`negative`: PaddlePaddle 3.x's gather, gather_nd and scatter count a
    negative index from the end) or in [0, size). `size` is an int, or a tuple with one
    size per position of idx's last axis (gather_nd's index depth). Values equal to
    `exempt` pass (embedding's padding id); `note` ends the message.

    numpy raises for a positive index past the end but wraps negative ones silently, and
    cupy wraps both, so every index-taking kernel checks its op's rule here. One device-side
    reduction per call, not a loop over elements; on cupy the `bool()` of it is one host
    synchronisation per call, which these ops accept (a silently wrong row is worse)."""
    if idx.size == 0:
        return
    high = size if isinstance(size, int) else xp.asarray(size, dtype=np.int64)
    bad = (idx >= high) | ((idx < -high) if negative else (idx < 0))
    if exempt is not None:
        bad &= idx != exempt
    if not bool(bad.any()):
        return
    flat = int(xp.argmax(bad.reshape(-1)))  # the first bad position (error path only)
    pos = tuple(int(i) for i in np.unravel_index(flat, idx.shape))
    value = int(idx.reshape(-1)[flat])
    n = size if isinstance(size, int) else int(size[pos[-1]])
    where = f"{slot}[{', '.join(map(str, pos))}]" if pos else slot
    raise IndexRangeError(f"{op}: {where} = {value} is out of range: valid values are "
                          f"[{-n if negative else 0}, {n}){note}")


def _index_vector(index):
    """gather/scatter accept a 1-D index or an [N, 1] one."""
    if index.ndim == 2 and index.shape[1] == 1:
        return index.reshape(-1)
    return index


@kernel("gather", inputs=["X", "Index", "Axis"], outputs=["Out"], attrs=["axis"])
def gather(xp, x, index, axis_t, *, axis=0):
    """Out = X's slices at Index along `axis`; an index in [-n, n) for an axis of n, a
    negative one counted from the end (PaddlePaddle 3.x), anything else an error."""
    if present(axis_t):
        axis = host_int(axis_t)
    axis = _axis(axis, x.ndim)
    index = _index_vector(index)
    check_index_range(xp, "gather", "Index", index, x.shape[axis], negative=True)
    return xp.take(x, index, axis=axis)


@kernel("gather_nd", inputs=["X", "Index"], outputs=["Out"])
def gather_nd(xp, x, index):
    """Out[i...] = X[Index[i..., :]]; component j in [-X.shape[j], X.shape[j]), a negative
    one counted from the end (PaddlePaddle 3.x)."""
    k = index.shape[-1]
    if k == 0:
        return xp.broadcast_to(x, index.shape[:-1] + x.shape).copy()
    if k > x.ndim:
        raise ValueError(f"gather_nd: index depth {k} exceeds input rank {x.ndim}")
    check_index_range(xp, "gather_nd", "Index", index, tuple(x.shape[:k]), negative=True)
    return x[tuple(index[..., i] for i in range(k))]


def _scatter_add_rows(out, idx, values):
    """out[idx] += values for numpy rows (idx 1-D, values [len(idx), ...]): the indices
    sorted (stably), each run of equal ones summed by one add.reduceat. numpy's add.at
    handles one element at a time: for an embedding gradient of 4096 rows of 128 (103
    distinct ids) 3.4 ms of CPU against 1.2 ms this way (numpy 2.4, one core). Sums in a
    different order than add.at (the same values to float rounding)."""
    idx = np.where(idx < 0, idx + out.shape[0], idx)  # -1 and n-1 are one row: one group
    order = np.argsort(idx, kind="stable")
    ordered = idx[order]
    starts = np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))
    out[ordered[starts]] += np.add.reduceat(values[order], starts, axis=0)
    return out


def scatter_add(xp, out, idx, values):
    """out[idx] += values with duplicate indices accumulating (in place). On a GPU this is
    cupyx.scatter_add; on numpy rows (a 1-D idx into the first axis) sorted runs summed at
    once (_scatter_add_rows); elsewhere ufunc.at, or a one-hot product for modules without
    it."""
    if (xp is np and isinstance(idx, np.ndarray) and idx.ndim == 1 and idx.size and idx.dtype.kind in "iu"
            and getattr(values, "ndim", 0) >= 2 and values.shape[0] == idx.shape[0]):
        return _scatter_add_rows(out, idx, values)
    if getattr(xp, "__name__", "") == "cupy":
        try:
            import cupyx
            cupyx.scatter_add(out, idx, values)
            return out
        except (ImportError, AttributeError, TypeError, NotImplementedError):
            pass
    at = getattr(xp.add, "at", None)
    if at is not None:
        try:
            at(out, idx, values)
            return out
        except (TypeError, NotImplementedError):  # e.g. a dtype without atomic add on a GPU
            pass
    # Fallback for array modules without ufunc.at: a one-hot matrix product.
    uniq, inv = xp.unique(idx, return_inverse=True)
    onehot = (inv.reshape(1, -1) == xp.arange(uniq.shape[0]).reshape(-1, 1)).astype(values.dtype)
    sums = (onehot @ values.reshape(values.shape[0], -1)).reshape((uniq.shape[0],) + values.shape[1:])
    out[uniq] += sums
    return out


@kernel("scatter", inputs=["X", "Ids", "Updates"], outputs=["Out"], attrs=["overwrite"])
def scatter(xp, x, ids, updates, *, overwrite=True):
    """overwrite=True: rows are replaced (for duplicate ids the last update wins, as
    Paddle's CPU kernel). overwrite=False: the indexed rows are zeroed first, then every
    update is added, so duplicates accumulate and the original rows are discarded. Ids
    in [-n, n) for n rows, a negative one counted from the end (PaddlePaddle 3.x)."""
    out = x.copy()
    ids = _index_vector(ids)
    check_index_range(xp, "scatter", "Ids", ids, x.shape[0], negative=True)
    ids = _wrap(xp, ids, x.shape[0])  # -1 and n-1 are one row (for scatter_add's fallback)
    if overwrite:
        out[ids] = updates
    else:
        out[ids] = 0
        scatter_add(xp, out, ids, updates.astype(out.dtype, copy=False))
    return out


# -- broadcasting --------------------------------------------------------------------

def expand_target(in_shape, shape) -> tuple[int, ...]:
    """Paddle's expand rule: target rank >= input rank; -1 keeps the input's dim; an input
    dim that is not 1 must equal the target."""
    shape = [int(s) for s in shape]
    if len(shape) < len(in_shape):
        raise ValueError(f"expand: target {shape} has lower rank than input {list(in_shape)}")
    diff = len(shape) - len(in_shape)
    out = []
    for i, s in enumerate(shape):
        d = in_shape[i - diff] if i >= diff else 1
        if s == -1:
            if i < diff:
                raise ValueError(f"expand: -1 is not allowed for new leading dims: {shape}")
            s = d
        if d != 1 and d != s:
            raise ValueError(f"expand: cannot expand {list(in_shape)} to {shape}")
        out.append(s)
    return tuple(out)


@kernel("expand_v2", inputs=["X", "Shape", "expand_shapes_tensor"], outputs=["Out"],
        attrs=["shape"])
def expand_v2(xp, x, shape_t, shape_list, *, shape=()):
    target = _from(shape_t, shape_list, shape)
    return xp.broadcast_to(x, expand_target(x.shape, target)).copy()


@kernel("expand_as_v2", inputs=["X", "Y"], outputs=["Out"], attrs=["target_shape"])
def expand_as_v2(xp, x, y, *, target_shape=()):
    target = [int(s) for s in target_shape]
    if y is not None and (not target or -1 in target):
        target = list(y.shape)
    return xp.broadcast_to(x, expand_target(x.shape, target)).copy()


@kernel("tile", inputs=["X", "RepeatTimes", "repeat_times_tensor"], outputs=["Out"],
        attrs=["repeat_times"])
def tile(xp, x, repeat_t, repeat_list, *, repeat_times=()):
    reps = _from(repeat_t, repeat_list, repeat_times)
    if any(r <= 0 for r in reps):
        raise ValueError(f"tile: repeat_times must be positive, got {reps}")
    return xp.tile(x, tuple(reps)) if reps else x.copy()


# -- ranges and fills ----------------------------------------------------------------

@kernel("range", inputs=["Start", "End", "Step"], outputs=["Out"])
def range_(xp, start, end, step):
    """arange in Start's dtype. Size as Paddle's GetSize: integers ceil(|end-start|/|step|),
    floats ceil(|(end-start)/step|) evaluated in the dtype; values start + i*step."""
    dt = start.dtype
    s = np.asarray(start.tolist(), dtype=dt).reshape(-1)[0]
    e = np.asarray(end.tolist(), dtype=dt).reshape(-1)[0]
    k = np.asarray(step.tolist(), dtype=dt).reshape(-1)[0]
    if k == 0:
        raise ValueError("range: step must not be 0")
    if (s < e and k < 0) or (s > e and k > 0):
        raise ValueError(f"range: step {k} moves away from end (start {s}, end {e})")
    if dt.kind in "iu":
        size = int((abs(int(e) - int(s)) + abs(int(k)) - 1) // abs(int(k)))
    else:
        size = int(np.ceil(np.abs((e - s) / k)))
    return xp.arange(size, dtype=dt) * dt.type(k) + dt.type(s)


@kernel("linspace", inputs=["Start", "Stop", "Num"], outputs=["Out"], attrs=["dtype"])
def linspace(xp, start, stop, num, *, dtype):
    """Paddle's linspace: start/stop cast to dtype first; step = (stop - start)/(num - 1)
    in double; the first half counts up from start, the second half down from stop."""
    dt = np_dtype(dtype)
    n = host_int(num)
    s = np.asarray(start.tolist()).reshape(-1)[:1].astype(dt)
    e = np.asarray(stop.tolist()).reshape(-1)[:1].astype(dt)
    if n <= 0:
        return xp.zeros((0,), dtype=dt)
    if n == 1:
        return xp.asarray(s)
    step = float((e - s)[0]) / (n - 1)
    i = xp.arange(n, dtype=np.float64)
    up = float(s[0]) + step * i
    down = float(e[0]) - step * (n - 1 - i)
    return xp.where(i < n // 2, up, down).astype(dt)


def parse_str_value(s: str) -> float:
    """Paddle's Scalar(std::string): "inf", "-inf", "nan", else std::stod (a double)."""
    if s == "inf":
        return math.inf
    if s == "-inf":
        return -math.inf
    if s == "nan":
        return math.nan
    return float(s)


def _fill_value(value, str_value):
    return parse_str_value(str_value) if str_value else value


@kernel("fill_constant", inputs=["ValueTensor", "ShapeTensor", "ShapeTensorList"], outputs=["Out"],
        attrs=["dtype", "shape", "value", "str_value"])
def fill_constant(xp, value_t, shape_t, shape_list, *, dtype=5, shape=(), value=0.0, str_value=""):
    target = _from(shape_t, shape_list, shape)
    if present(value_t):
        v = value_t.reshape(-1)[:1]
        return xp.broadcast_to(cast(xp, v, dtype).reshape(()), tuple(target)).copy()
    return full(xp, target, _fill_value(value, str_value), dtype)


@kernel("fill_any_like", inputs=["X"], outputs=["Out"], attrs=["value", "dtype"])
def fill_any_like(xp, x, *, value=0.0, dtype=-1):
    if dtype is None or int(dtype) == -1:
        return xp.full(x.shape, value, dtype=x.dtype)
    return full(xp, x.shape, value, dtype)


@kernel("fill_constant_batch_size_like", inputs=["Input"], outputs=["Out"],
        attrs=["shape", "input_dim_idx", "output_dim_idx", "dtype", "value", "str_value"])
def fill_constant_batch_size_like(xp, x, *, shape, input_dim_idx=0, output_dim_idx=0, dtype=5,
                                  value=0.0, str_value=""):
    target = [int(s) for s in shape]
    target[output_dim_idx] = x.shape[input_dim_idx]
    return full(xp, target, _fill_value(value, str_value), dtype)


@kernel("assign", inputs=["X"], outputs=["Out"])
def assign(xp, x):
    if x is None:
        return None
    if isinstance(x, (list, tuple)):
        return [t.copy() for t in x]
    return x.copy()


@kernel("assign_value", inputs=["ValuesTensor"], outputs=["Out"], attrs=["shape", "dtype", "values"])
def assign_value(xp, values_t, *, shape, dtype, values=(), bool_values=None, fp32_values=None,
                 int32_values=None, int64_values=None, fp64_values=None):
    """Out = `values` (SCALARS, PaddlePaddle >= 2.6) reshaped to `shape` in `dtype`. The
    pre-2.6 per-type attributes (bool_values, fp32_values, ...) are accepted as keywords
    when the op definition carries them; the first non-empty one is used."""
    shape = tuple(int(s) for s in shape)
    if values_t is not None:
        return cast(xp, values_t, dtype).reshape(shape).copy()
    data = list(values)
    if not data:
        for legacy in (bool_values, fp32_values, int32_values, int64_values, fp64_values):
            if legacy:
                data = list(legacy)
                break
    if int(dtype) == BF16:
        arr = to_bf16_bits(xp, xp.asarray(np.asarray(data, dtype=np.float32)))
    else:
        dt = np_dtype(dtype)
        if dt.kind in "biuf":
            data = [v.real if isinstance(v, complex) else v for v in data]
        arr = xp.asarray(np.asarray(data).astype(dt))
    return arr.reshape(shape)


@kernel("shape", inputs=["Input"], outputs=["Out"])
def shape_(xp, x):
    return xp.asarray(np.asarray(x.shape, dtype=np.int32).reshape(-1))


@kernel("one_hot_v2", inputs=["X", "depth_tensor"], outputs=["Out"],
        attrs=["depth", "dtype", "allow_out_of_range"])
def one_hot_v2(xp, x, depth_t, *, depth=-1, dtype=5, allow_out_of_range=False):
    if present(depth_t):
        depth = host_int(depth_t)
    if depth < 0:
        raise ValueError(f"one_hot_v2: depth must be given, got {depth}")
    if not allow_out_of_range:  # else an id outside [0, depth) gives a row of zeros
        check_index_range(xp, "one_hot_v2", "X", x, int(depth), negative=False,
                          note=" (the depth; allow_out_of_range is False)")
    hot = x[..., None] == xp.arange(depth, dtype=x.dtype)
    return cast(xp, hot, dtype)


@kernel("where_index", inputs=["Condition"], outputs=["Out"])
def where_index(xp, cond):
    """Coordinates of the true (non-zero) elements, int64 [N, rank]."""
    if cond.ndim == 0:
        n = 1 if bool(cond) else 0
        return xp.zeros((n, 0), dtype=np.int64)
    return xp.stack(xp.nonzero(cond), axis=1).astype(np.int64)


# -- padding -------------------------------------------------------------------------

@kernel("pad", inputs=["X"], outputs=["Out"], attrs=["paddings", "pad_value"])
def pad(xp, x, *, paddings, pad_value=0.0):
    p = [int(v) for v in paddings]
    if len(p) != 2 * x.ndim:
        raise ValueError(f"pad: {len(p)} paddings for a {x.ndim}-D input")
    width = [(p[2 * i], p[2 * i + 1]) for i in range(x.ndim)]
    return xp.pad(x, width, mode="constant", constant_values=x.dtype.type(pad_value))


_PAD3D_MODES = {"constant": "constant", "reflect": "reflect", "replicate": "edge",
                "circular": "wrap"}


@kernel("pad3d", inputs=["X", "Paddings"], outputs=["Out"],
        attrs=["paddings", "mode", "value", "data_format"])
def pad3d(xp, x, paddings_t, *, paddings=(), mode="constant", value=0.0, data_format="NCDHW"):
    """paddings = [left, right, top, bottom, front, back] for W, H, D of a 5-D input."""
    p = host_ints(paddings_t) if present(paddings_t) else [int(v) for v in paddings]
    if len(p) != 6:
        raise ValueError(f"pad3d: expected 6 paddings, got {p}")
    if x.ndim != 5:
        raise ValueError(f"pad3d: expected a 5-D input, got {x.ndim}-D")
    d, h, w = (2, 3, 4) if data_format == "NCDHW" else (1, 2, 3)
    width = [(0, 0)] * 5
    width[w], width[h], width[d] = (p[0], p[1]), (p[2], p[3]), (p[4], p[5])
    if mode not in _PAD3D_MODES:
        raise ValueError(f"pad3d: unknown mode {mode!r}")
    if mode == "constant":
        return xp.pad(x, width, mode="constant", constant_values=x.dtype.type(value))
    return xp.pad(x, width, mode=_PAD3D_MODES[mode])


# -- gradients -----------------------------------------------------------------------
# PaddlePaddle's gradient kernels of the ops above. Each returns the gradient of the
# forward input (its shape, Out@GRAD's dtype) and never aliases Out@GRAD.

def _shape_back(xp, xshape, dout):
    """X@GRAD of an op that only changes the shape: Out@GRAD in XShape[1:]'s shape."""
    return dout.reshape(tuple(xshape.shape[1:])).copy()


@kernel("reshape2_grad", inputs=["XShape", "Out@GRAD"], outputs=["X@GRAD"])
def reshape2_grad(xp, xshape, dout):
    return _shape_back(xp, xshape, dout)


@kernel("flatten_contiguous_range_grad", inputs=["XShape", "Out@GRAD"], outputs=["X@GRAD"])
def flatten_contiguous_range_grad(xp, xshape, dout):
    return _shape_back(xp, xshape, dout)


@kernel("squeeze2_grad", inputs=["XShape", "Out@GRAD"], outputs=["X@GRAD"])
def squeeze2_grad(xp, xshape, dout):
    return _shape_back(xp, xshape, dout)


@kernel("unsqueeze2_grad", inputs=["XShape", "Out@GRAD"], outputs=["X@GRAD"])
def unsqueeze2_grad(xp, xshape, dout):
    return _shape_back(xp, xshape, dout)


@kernel("transpose2_grad", inputs=["XShape", "Out@GRAD"], outputs=["X@GRAD"], attrs=["axis"])
def transpose2_grad(xp, xshape, dout, *, axis):
    perm = [_axis(int(a), dout.ndim) for a in axis]
    return xp.transpose(dout, np.argsort(perm).tolist()).copy()


@kernel("concat_grad", inputs=["X", "AxisTensor", "Out@GRAD"], outputs=["X@GRAD"], attrs=["axis"])
def concat_grad(xp, xs, axis_t, dout, *, axis=0):
    """X@GRAD[i] = the piece of Out@GRAD where X[i] was (X read for the sizes)."""
    if present(axis_t):
        axis = host_int(axis_t)
    axis = _axis(axis, dout.ndim)
    bounds = np.cumsum([x.shape[axis] for x in xs])[:-1].tolist()
    return [part.copy() for part in xp.split(dout, bounds, axis=axis)]


@kernel("stack_grad", inputs=["X", "Y@GRAD"], outputs=["X@GRAD"], attrs=["axis"])
def stack_grad(xp, xs, dy, *, axis=0):
    moved = xp.moveaxis(dy, _axis(axis, dy.ndim), 0)
    return [moved[i].copy() for i in range(moved.shape[0])]


@kernel("unstack_grad", inputs=["Y@GRAD"], outputs=["X@GRAD"], attrs=["axis"])
def unstack_grad(xp, dys, *, axis=0):
    dys = list(dys)
    some = next(d for d in dys if d is not None)
    dys = [xp.zeros_like(some) if d is None else d for d in dys]
    return xp.stack(dys, axis=_axis(axis, some.ndim + 1))


def _slice_back(xp, shape, index, dout):
    """Zeros of `shape` with Out@GRAD written at `index` (decreased dims restored)."""
    dx = xp.zeros(tuple(shape), dtype=dout.dtype)
    dx[index] = dout.reshape(dx[index].shape)
    return dx


@kernel("slice_grad",
        inputs=["Input", "StartsTensor", "EndsTensor", "StartsTensorList", "EndsTensorList", "Out@GRAD"],
        outputs=["Input@GRAD"], attrs=["axes", "starts", "ends", "infer_flags", "decrease_axis"])
def slice_grad(xp, x, starts_t, ends_t, starts_list, ends_list, dout, *, axes, starts=(), ends=(),
               infer_flags=(), decrease_axis=()):
    index = _slice_index(x.shape, axes, _from(starts_t, starts_list, starts),
                         _from(ends_t, ends_list, ends))
    return _slice_back(xp, x.shape, index, dout)


@kernel("strided_slice_grad",
        inputs=["Input", "StartsTensor", "StartsTensorList", "EndsTensor", "EndsTensorList",
                "StridesTensor", "StridesTensorList", "Out@GRAD"],
        outputs=["Input@GRAD"], attrs=["axes", "starts", "ends", "strides", "infer_flags", "decrease_axis"])
def strided_slice_grad(xp, x, starts_t, starts_list, ends_t, ends_list, strides_t, strides_list, dout, *,
                       axes, starts=(), ends=(), strides=(), infer_flags=(), decrease_axis=()):
    index = _strided_index(x.shape, axes, _from(starts_t, starts_list, starts),
                           _from(ends_t, ends_list, ends), _from(strides_t, strides_list, strides),
                           infer_flags, decrease_axis)
    return _slice_back(xp, x.shape, index, dout)


def _wrap(xp, idx, dim):
    """Indices with negative values counted from the end (as the forward indexing does)."""
    return xp.where(idx < 0, idx + dim, idx).astype(np.int64)


def _index_add_axis(xp, n, g, idx, axis):
    """out (g's shape with `n` along `axis`) = zeros, then out[.., idx[i], ..] += g[.., i, ..]
    along `axis`, duplicates accumulating."""
    moved = xp.moveaxis(g, axis, 0)
    out = xp.zeros((n,) + moved.shape[1:], dtype=g.dtype)
    scatter_add(xp, out, idx, moved)
    return xp.ascontiguousarray(xp.moveaxis(out, 0, axis))


@kernel("gather_grad", inputs=["X", "Index", "Axis", "Out@GRAD"], outputs=["X@GRAD"], attrs=["axis"])
def gather_grad(xp, x, index, axis_t, dout, *, axis=0):
    """X@GRAD = zeros with Out@GRAD added at the gathered positions (repeats accumulate)."""
    if present(axis_t):
        axis = host_int(axis_t)
    axis = _axis(axis, x.ndim)
    idx = _index_vector(index)
    check_index_range(xp, "gather_grad", "Index", idx, x.shape[axis], negative=True)
    if idx.ndim == 0:  # a 0-d index dropped the axis
        dout, idx = xp.expand_dims(dout, axis), idx.reshape(1)
    return _index_add_axis(xp, x.shape[axis], dout, _wrap(xp, idx, x.shape[axis]), axis)


@kernel("gather_nd_grad", inputs=["X", "Index", "Out@GRAD"], outputs=["X@GRAD"])
def gather_nd_grad(xp, x, index, dout):
    """X@GRAD = zeros with Out@GRAD[i...] added at X[Index[i..., :]] (repeats accumulate)."""
    k = index.shape[-1]
    rest = tuple(x.shape[k:])
    count = math.prod(index.shape[:-1])
    if k == 0:  # every index picks all of X
        return dout.reshape((count,) + tuple(x.shape)).sum(axis=0).astype(dout.dtype, copy=False)
    check_index_range(xp, "gather_nd_grad", "Index", index, tuple(x.shape[:k]), negative=True)
    flat = xp.zeros(index.shape[:-1], dtype=np.int64)
    for i in range(k):  # the index depth: a handful of dims
        flat = flat * x.shape[i] + _wrap(xp, index[..., i], x.shape[i])
    out = xp.zeros((math.prod(x.shape[:k]),) + rest, dtype=dout.dtype)
    scatter_add(xp, out, flat.reshape(-1), dout.reshape((count,) + rest))
    return out.reshape(x.shape)


@kernel("scatter_grad", inputs=["Ids", "Updates", "Out@GRAD"], outputs=["X@GRAD", "Updates@GRAD"],
        attrs=["overwrite"])
def scatter_grad(xp, ids, updates, dout, *, overwrite=True, need=None):
    """PaddlePaddle's: X@GRAD = Out@GRAD with the rows Ids zeroed; Updates@GRAD = the rows
    Ids of Out@GRAD, in both modes (with repeated Ids and overwrite, every repeat gets its
    row's gradient, although only the last one was written)."""
    ids = _index_vector(ids)
    check_index_range(xp, "scatter_grad", "Ids", ids, dout.shape[0], negative=True)
    dx = du = None
    if need is None or "X@GRAD" in need:
        dx = dout.copy()
        dx[ids] = 0
    if need is None or "Updates@GRAD" in need:
        du = xp.take(dout, ids, axis=0).reshape(updates.shape)
    return dx, du


def _reduce_to(xp, g, shape):
    """Sum a broadcast gradient down to `shape` (X aligned to the right)."""
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and g.shape[lead + i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape).astype(g.dtype, copy=True)


@kernel("expand_v2_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"])
def expand_v2_grad(xp, x, dout):
    return _reduce_to(xp, dout, x.shape)


@kernel("expand_as_v2_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"])
def expand_as_v2_grad(xp, x, dout):
    return _reduce_to(xp, dout, x.shape)


@kernel("tile_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"])
def tile_grad(xp, x, dout):
    """Out = X repeated in blocks: view Out@GRAD as [r0, d0, r1, d1, ...] and sum the r's
    (the repeat counts follow from the shapes, whichever input gave them)."""
    shape = (1,) * (dout.ndim - x.ndim) + tuple(x.shape)
    if dout.size == 0:
        return xp.zeros(x.shape, dtype=dout.dtype)
    blocks = []
    for o, d in zip(dout.shape, shape):
        blocks += [o // d, d]
    summed = dout.reshape(blocks).sum(axis=tuple(range(0, 2 * dout.ndim, 2)))
    return summed.reshape(x.shape).astype(dout.dtype, copy=False)


@kernel("pad_grad", inputs=["Out@GRAD"], outputs=["X@GRAD"], attrs=["paddings"])
def pad_grad(xp, dout, *, paddings):
    p = [int(v) for v in paddings]
    index = tuple(slice(p[2 * i], dout.shape[i] - p[2 * i + 1]) for i in range(dout.ndim))
    return dout[index].copy()


def pad_source(n: int, before: int, after: int, mode: str) -> np.ndarray:
    """For each position of a dim of size `n` padded by (before, after): the input index
    it copies (host ints), -1 for a constant."""
    j = np.arange(-before, n + after)
    if mode == "constant":
        return np.where((j >= 0) & (j < n), j, -1)
    if mode == "replicate":
        return np.clip(j, 0, n - 1)
    if mode == "circular":
        return np.mod(j, n)
    if mode == "reflect":
        if n == 1:
            return np.zeros_like(j)
        period = 2 * (n - 1)
        j = np.mod(j, period)
        return np.where(j >= n, period - j, j)
    raise ValueError(f"unknown pad mode {mode!r}")


@kernel("pad3d_grad", inputs=["X", "Paddings", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["paddings", "mode", "data_format"])
def pad3d_grad(xp, x, paddings_t, dout, *, paddings=(), mode="constant", data_format="NCDHW"):
    """constant: the interior of Out@GRAD. reflect/replicate/circular: the interior plus each
    padded position's gradient added to the input position it copies, one dim at a time."""
    p = host_ints(paddings_t) if present(paddings_t) else [int(v) for v in paddings]
    d, h, w = (2, 3, 4) if data_format == "NCDHW" else (1, 2, 3)
    g = dout
    for axis, before, after in ((w, p[0], p[1]), (h, p[2], p[3]), (d, p[4], p[5])):
        if not before and not after:
            continue
        n = x.shape[axis]
        moved = xp.moveaxis(g, axis, 0)
        out = moved[before:before + n].copy()
        if mode != "constant":
            pos = np.concatenate([np.arange(before), np.arange(before + n, before + n + after)])
            src = pad_source(n, before, after, mode)[pos]
            scatter_add(xp, out, xp.asarray(src), moved[xp.asarray(pos)])
        g = xp.moveaxis(out, 0, axis)
    return xp.ascontiguousarray(g) if g is not dout else dout.copy()
