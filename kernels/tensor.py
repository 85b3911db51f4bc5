"""Tensor-manipulation kernels: shape changes, slicing, gathers and scatters, fills,
constants, padding. Semantics follow PaddlePaddle's legacy ops (phi kernels).

Conventions shared by this module:
- Outputs never alias inputs: view-producing numpy operations (reshape, transpose,
  basic slicing, broadcast_to) are followed by a copy, as PaddlePaddle's phi kernels
  copy too. The executor may therefore run in-place kernels (optimizers) on a buffer
  whose earlier views were fetched without changing those fetched values.
- `XShape` outputs (kept by PaddlePaddle only for gradients) are returned as None.
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

from kernels.registry import kernel

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


def to_bf16_bits(xp, a):
    """float array -> bfloat16 bit patterns (uint16), rounding to nearest even."""
    f = xp.ascontiguousarray(a.astype(np.float32))
    u = f.view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    out = rounded.astype(np.uint16)
    return xp.where(xp.isnan(f), np.uint16(0x7FC0), out)


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


@kernel("reshape2", inputs=["X", "Shape", "ShapeTensor"], outputs=["Out", "XShape"],
        attrs=["shape"])
def reshape2(xp, x, shape_t, shape_list, *, shape=()):
    target = _from_list_first(shape_list, shape_t, shape)
    return x.reshape(reshape_target(x.shape, target)).copy(), None


@kernel("transpose2", inputs=["X"], outputs=["Out", "XShape"], attrs=["axis"])
def transpose2(xp, x, *, axis):
    return xp.transpose(x, [int(a) for a in axis]).copy(), None


@kernel("flatten_contiguous_range", inputs=["X"], outputs=["Out", "XShape"],
        attrs=["start_axis", "stop_axis"])
def flatten_contiguous_range(xp, x, *, start_axis, stop_axis):
    if x.ndim == 0:
        return x.reshape((1,)).copy(), None
    start, stop = _axis(start_axis, x.ndim), _axis(stop_axis, x.ndim)
    if start > stop:
        raise ValueError(f"flatten: start_axis {start_axis} is after stop_axis {stop_axis}")
    shape = x.shape[:start] + (math.prod(x.shape[start:stop + 1]),) + x.shape[stop + 1:]
    return x.reshape(shape).copy(), None


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


@kernel("squeeze2", inputs=["X"], outputs=["Out", "XShape"], attrs=["axes"])
def squeeze2(xp, x, *, axes=()):
    return x.reshape(squeeze_shape(x.shape, [int(a) for a in axes])).copy(), None


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


@kernel("unsqueeze2", inputs=["X", "AxesTensor", "AxesTensorList"], outputs=["Out", "XShape"],
        attrs=["axes"])
def unsqueeze2(xp, x, axes_t, axes_list, *, axes=()):
    axes = _from_list_first(axes_list, axes_t, axes)
    return x.reshape(unsqueeze_shape(x.shape, axes)).copy(), None


# -- joining and splitting -----------------------------------------------------------

@kernel("concat", inputs=["X", "AxisTensor"], outputs=["Out"], attrs=["axis"])
def concat(xp, xs, axis_t, *, axis=0):
    if present(axis_t):
        axis = host_int(axis_t)
    xs = list(xs)
    return xp.concatenate(xs, axis=_axis(axis, xs[0].ndim))


@kernel("split", inputs=["X", "AxisTensor", "SectionsTensorList"], outputs=["Out"],
        attrs=["sections", "num", "axis"])
def split(xp, x, axis_t, sections_list, *, sections=(), num=0, axis=0):
    if present(axis_t):
        axis = host_int(axis_t)
    axis = _axis(axis, x.ndim)
    size = x.shape[axis]
    if present(sections_list):
        sections = [host_int(t) for t in sections_list]
    if num > 0 and not sections:
        if size % num:
            raise ValueError(f"split: dimension {size} is not divisible by num={num}")
        sections = [size // num] * num
    sections = [int(s) for s in sections]
    if sections.count(-1) > 1:
        raise ValueError(f"split: only one section can be -1, got {sections}")
    if -1 in sections:
        sections[sections.index(-1)] = size - (sum(sections) + 1)
    if sum(sections) != size or any(s < 0 for s in sections):
        raise ValueError(f"split: sections {sections} do not add up to dimension {size}")
    bounds = np.cumsum(sections)[:-1].tolist()
    return [part.copy() for part in xp.split(x, bounds, axis=axis)]


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
    starts = _from(starts_t, starts_list, starts)
    ends = _from(ends_t, ends_list, ends)
    index = [slice(None)] * x.ndim
    for a, s, e in zip(axes, starts, ends):
        a = _axis(int(a), x.ndim)
        lo, hi = slice_bounds(s, e, x.shape[a])
        index[a] = slice(lo, hi)
    return _decrease(x[tuple(index)], list(decrease_axis)).copy()


def strided_bounds(start: int, end: int, stride: int, dim: int, decrease: bool) -> slice:
    """Paddle's StridedSliceFunctor normalisation as a Python slice. Differences from
    Python: a negative start clamps to 0 after adding dim; with a negative stride,
    end == -1 means "through index 0" (None) while other negative ends add dim and clamp
    to 0; `decrease` (start -1, end 0, infer flag -1 on a decrease axis) picks one element."""
    if stride == 0:
        raise ValueError("strided_slice: stride is 0")
    if start < 0:
        start = max(start + dim, 0)
    if end < 0 and not (end == -1 and stride < 0):
        end = max(end + dim, 0)
    if decrease:
        end = start - 1 if stride < 0 else start + 1
    if stride > 0:
        return slice(start, max(end, start), stride)
    start = min(start, dim - 1)
    if end >= start:
        return slice(0, 0, 1)
    return slice(start, None if end < 0 else end, stride)


@kernel("strided_slice",
        inputs=["Input", "StartsTensor", "StartsTensorList", "EndsTensor", "EndsTensorList",
                "StridesTensor", "StridesTensorList"],
        outputs=["Out"], attrs=["axes", "starts", "ends", "strides", "infer_flags", "decrease_axis"])
def strided_slice(xp, x, starts_t, starts_list, ends_t, ends_list, strides_t, strides_list, *,
                  axes, starts=(), ends=(), strides=(), infer_flags=(), decrease_axis=()):
    starts = _from(starts_t, starts_list, starts)
    ends = _from(ends_t, ends_list, ends)
    strides = _from(strides_t, strides_list, strides)
    flags = list(infer_flags) + [1] * (len(axes) - len(infer_flags))
    dec = {int(a) for a in decrease_axis}
    index = [slice(None)] * x.ndim
    for i, a in enumerate(axes):
        a = _axis(int(a), x.ndim)
        affect = starts[i] == -1 and ends[i] == 0 and flags[i] == -1 and a in dec
        index[a] = strided_bounds(starts[i], ends[i], strides[i], x.shape[a], affect)
    return _decrease(x[tuple(index)], list(decrease_axis)).copy()


# -- gathers and scatters ------------------------------------------------------------

def _index_vector(index):
    """gather/scatter accept a 1-D index or an [N, 1] one."""
    if index.ndim == 2 and index.shape[1] == 1:
        return index.reshape(-1)
    return index


@kernel("gather", inputs=["X", "Index", "Axis"], outputs=["Out"], attrs=["axis"])
def gather(xp, x, index, axis_t, *, axis=0):
    if present(axis_t):
        axis = host_int(axis_t)
    return xp.take(x, _index_vector(index), axis=_axis(axis, x.ndim))


@kernel("gather_nd", inputs=["X", "Index"], outputs=["Out"])
def gather_nd(xp, x, index):
    k = index.shape[-1]
    if k == 0:
        return xp.broadcast_to(x, index.shape[:-1] + x.shape).copy()
    if k > x.ndim:
        raise ValueError(f"gather_nd: index depth {k} exceeds input rank {x.ndim}")
    return x[tuple(index[..., i] for i in range(k))]


def scatter_add(xp, out, idx, values):
    """out[idx] += values with duplicate indices accumulating (in place)."""
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
    update is added, so duplicates accumulate and the original rows are discarded."""
    out = x.copy()
    ids = _index_vector(ids)
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


@kernel("fill_zeros_like", inputs=["X"], outputs=["Out"])
def fill_zeros_like(xp, x):
    return xp.zeros_like(x)


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
    if not allow_out_of_range and x.size and bool(((x < 0) | (x >= depth)).any()):
        raise ValueError(f"one_hot_v2: an index is outside [0, {depth}) and "
                         "allow_out_of_range is False")
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
