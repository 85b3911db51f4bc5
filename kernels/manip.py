"""Tensor-manipulation and small math kernels (program/ops/manip.py): tril_triu, argsort,
flip, index_select, roll, take_along_axis, put_along_axis, einsum, dist, maxout, norm,
scatter_nd_add, shuffle_channel, size, share_data, unfold, and their gradients, with
PaddlePaddle 3.3.1's semantics (paddle/phi/kernels/cpu/*, funcs/gather_scatter_functor).

Index-taking kernels (index_select, take_along_axis, put_along_axis, scatter_nd_add and
their gradients) accept an index in [-n, n) for a dim of n, a negative one counted from
the end, as PaddlePaddle 3.3.1's kernels do; anything else raises IndexRangeError
(kernels/tensor.py check_index_range: one device-side reduction per call). Outputs never
alias inputs.
"""
from __future__ import annotations

import math

import numpy as np

from keel.kernels.registry import kernel
from keel.kernels.tensor import check_index_range, host_ints, present, scatter_add


def _axis(axis: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= axis < n:
        raise ValueError(f"axis {axis} is out of range for a {ndim}-d input")
    return axis % n


def _wrap(xp, idx, dim):
    """int64 indices with negative values counted from the end."""
    idx = idx.astype(np.int64, copy=False)
    return xp.where(idx < 0, idx + dim, idx)


# -- tril_triu ---------------------------------------------------------------------------------

def _triangle(xp, x, diagonal, lower):
    rows, cols = x.shape[-2:]
    offset = xp.arange(cols, dtype=np.int64).reshape(1, cols) - xp.arange(rows, dtype=np.int64).reshape(rows, 1)
    keep = offset <= diagonal if lower else offset >= diagonal
    return xp.where(keep, x, xp.zeros((), dtype=x.dtype))


@kernel("tril_triu", inputs=["X"], outputs=["Out"], attrs=["diagonal", "lower"])
def tril_triu(xp, x, *, diagonal=0, lower=False):
    """lower: keep column - row <= diagonal (tril); else column - row >= diagonal (triu)."""
    return _triangle(xp, x, diagonal, lower)


@kernel("tril_triu_grad", inputs=["Out@GRAD"], outputs=["X@GRAD"], attrs=["diagonal", "lower"])
def tril_triu_grad(xp, dout, *, diagonal=0, lower=False):
    return _triangle(xp, dout, diagonal, lower)


# -- argsort -------------------------------------------------------------------------------------

def sort_indices(xp, x, axis, descending):
    """int64 positions sorting x along axis, equal elements in their original order; NaN
    last ascending and first descending (PaddlePaddle's comparators). Descending: a stable
    ascending sort of x reversed, mapped back and reversed again."""
    n = x.shape[axis]
    if not descending:
        return xp.argsort(x, axis=axis, kind="stable").astype(np.int64, copy=False)
    rev = xp.argsort(xp.flip(x, axis=axis), axis=axis, kind="stable").astype(np.int64, copy=False)
    return xp.flip((n - 1) - rev, axis=axis).copy()


@kernel("argsort", inputs=["X"], outputs=["Out", "Indices"], attrs=["axis", "descending", "stable"])
def argsort(xp, x, *, axis=-1, descending=False, stable=False):
    """Always stable: PaddlePaddle's unstable sort may order ties either way, the stable
    order is one of them (and what its `stable` mode gives)."""
    if x.ndim == 0:
        return x.copy(), xp.zeros((), dtype=np.int64)
    axis = _axis(axis, x.ndim)
    idx = sort_indices(xp, x, axis, descending)
    return xp.take_along_axis(x, idx, axis=axis), idx


@kernel("argsort_grad", inputs=["X", "Indices", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["axis", "descending", "stable"])
def argsort_grad(xp, x, indices, dout, *, axis=-1, descending=False, stable=False):
    """X@GRAD[Indices[i]] = Out@GRAD[i] along axis: Out@GRAD read through the inverse
    permutation (Indices is a permutation of each line)."""
    if x.ndim == 0:
        return dout.copy()
    axis = _axis(axis, x.ndim)
    inverse = xp.argsort(indices, axis=axis, kind="stable")
    return xp.take_along_axis(dout, inverse, axis=axis)


# -- flip, roll ---------------------------------------------------------------------------------

@kernel("flip", inputs=["X"], outputs=["Out"], attrs=["axis"])
def flip(xp, x, *, axis):
    axes = tuple(_axis(int(a), x.ndim) for a in axis)
    if not axes or x.ndim == 0:
        return x.copy()
    return xp.flip(x, axis=axes).copy()


def _roll(xp, x, shifts, axis):
    if x.size == 0:
        return x.copy()
    if not axis:
        return xp.roll(x.reshape(-1), int(shifts[0])).reshape(x.shape)
    if len(shifts) != len(axis):
        raise ValueError(f"roll: {len(shifts)} shifts for {len(axis)} axes")
    return xp.roll(x, tuple(int(s) for s in shifts), axis=tuple(_axis(int(a), x.ndim) for a in axis))


@kernel("roll", inputs=["X", "ShiftsTensor"], outputs=["Out"], attrs=["shifts", "axis"])
def roll(xp, x, shifts_t, *, shifts=(), axis=()):
    """Elements move `shifts` places toward higher indices (wrapping); ShiftsTensor, when
    given, replaces `shifts`; without axis X is rolled flat."""
    return _roll(xp, x, host_ints(shifts_t) if present(shifts_t) else list(shifts), list(axis))


@kernel("roll_grad", inputs=["X", "ShiftsTensor", "Out@GRAD"], outputs=["X@GRAD"], attrs=["shifts", "axis"])
def roll_grad(xp, x, shifts_t, dout, *, shifts=(), axis=()):
    s = host_ints(shifts_t) if present(shifts_t) else list(shifts)
    return _roll(xp, dout, [-v for v in s], list(axis))


# -- index_select ---------------------------------------------------------------------------------

def _index_vector(index):
    return index.reshape(-1) if index.ndim == 2 and index.shape[1] == 1 else index


@kernel("index_select", inputs=["X", "Index"], outputs=["Out"], attrs=["dim"])
def index_select(xp, x, index, *, dim=0):
    dim = _axis(dim, x.ndim)
    index = _index_vector(index)
    check_index_range(xp, "index_select", "Index", index, x.shape[dim], negative=True)
    return xp.take(x, _wrap(xp, index, x.shape[dim]), axis=dim)


@kernel("index_select_grad", inputs=["X", "Index", "Out@GRAD"], outputs=["X@GRAD"], attrs=["dim"])
def index_select_grad(xp, x, index, dout, *, dim=0):
    """X@GRAD = zeros with Out@GRAD's slices added at Index along dim (repeats accumulate),
    a negative index counted from the end of X's dim as in the forward op. (PaddlePaddle
    3.3.1's CPU grad kernel adds Out@GRAD's dim, the number of indices, to a negative index
    instead, which puts its gradient elsewhere unless the two sizes agree; Keel keeps the
    gradient of the forward op it runs.)"""
    dim = _axis(dim, x.ndim)
    index = _index_vector(index)
    check_index_range(xp, "index_select_grad", "Index", index, x.shape[dim], negative=True)
    moved = xp.moveaxis(dout, dim, 0)
    out = xp.zeros((x.shape[dim],) + moved.shape[1:], dtype=dout.dtype)
    scatter_add(xp, out, _wrap(xp, index.reshape(-1), x.shape[dim]), moved.reshape((-1,) + moved.shape[1:]))
    return xp.ascontiguousarray(xp.moveaxis(out, 0, dim))


# -- take_along_axis / put_along_axis ------------------------------------------------------------------

def _along_positions(xp, shape, index, axis, op, slot="Index"):
    """The flat (C-order) position in an array of `shape` of each element of `index`: its
    own coordinates, with the one along `axis` replaced by its value. Index dims other than
    axis may be smaller than the array's (PaddlePaddle reads the leading part)."""
    if index.ndim != len(shape):
        raise ValueError(f"{op}: Index has {index.ndim} dims, the input {len(shape)}")
    for d, (i, n) in enumerate(zip(index.shape, shape)):
        if d != axis and i > n:
            raise ValueError(f"{op}: Index dim {d} is {i}, larger than the input's {n}")
    check_index_range(xp, op, slot, index, shape[axis], negative=True)
    flat = xp.zeros(index.shape, dtype=np.int64)
    stride = 1
    for d in range(len(shape) - 1, -1, -1):
        if d == axis:
            coord = _wrap(xp, index, shape[d])
        else:
            view = [1] * len(shape)
            view[d] = index.shape[d]
            coord = xp.arange(index.shape[d], dtype=np.int64).reshape(view)
        flat = flat + coord * stride
        stride *= shape[d]
    return flat


@kernel("take_along_axis", inputs=["Input", "Index"], outputs=["Result"], attrs=["Axis"])
def take_along_axis(xp, x, index, *, Axis):
    axis = _axis(Axis, x.ndim)
    pos = _along_positions(xp, x.shape, index, axis, "take_along_axis")
    return xp.take(x.reshape(-1), pos)


@kernel("take_along_axis_grad", inputs=["Input", "Index", "Result@GRAD"], outputs=["Input@GRAD"],
        attrs=["Axis"])
def take_along_axis_grad(xp, x, index, dout, *, Axis):
    axis = _axis(Axis, x.ndim)
    pos = _along_positions(xp, x.shape, index, axis, "take_along_axis_grad")
    out = xp.zeros(x.size, dtype=dout.dtype)
    scatter_add(xp, out, pos.reshape(-1), dout.reshape(-1))
    return out.reshape(x.shape)


def _value_at_index(xp, value, index, dtype):
    """Value read at Index's positions: its leading part when it is larger (PaddlePaddle
    reads it with its own strides), broadcast when it is smaller (a scalar)."""
    if value.ndim == index.ndim and all(v >= i for v, i in zip(value.shape, index.shape)):
        value = value[tuple(slice(0, i) for i in index.shape)]
    else:
        value = xp.broadcast_to(value, index.shape)
    return value.astype(dtype, copy=False)


def scatter_reduce(xp, out, pos, values, ufunc: str):
    """out[pos] = ufunc(out[pos], values) with repeated positions applied one after another
    (in place; out, pos and values 1-D). numpy's ufunc.at; elsewhere (cupy has `at` for few
    ufuncs) in rounds, each over positions that are unique within the round."""
    op = getattr(xp, ufunc)
    at = getattr(op, "at", None)
    if at is not None:
        try:
            at(out, pos, values)
            return out
        except (TypeError, NotImplementedError):
            pass
    order = xp.argsort(pos, kind="stable")
    spos, svals = pos[order], values[order]
    first = xp.concatenate([xp.ones(1, dtype=bool), spos[1:] != spos[:-1]])
    group = xp.cumsum(first) - 1
    starts = xp.nonzero(first)[0]
    rank = xp.arange(spos.shape[0]) - starts[group]
    rounds = int(rank.max()) + 1 if rank.size else 0  # one read back (rare: cupy, mul)
    for r in range(rounds):
        sel = rank == r
        p = spos[sel]
        out[p] = op(out[p], svals[sel])
    return out


def _count_at(xp, size, pos, dtype):
    counts = xp.zeros(size, dtype=dtype)
    scatter_add(xp, counts, pos, xp.ones(pos.shape, dtype=dtype))
    return counts


def _extreme(xp, dtype, largest):
    if dtype.kind == "f":
        return xp.asarray(np.inf if largest else -np.inf, dtype=dtype)
    info = np.iinfo(dtype) if dtype.kind in "iu" else None
    return xp.asarray(info.max if largest else info.min, dtype=dtype)


@kernel("put_along_axis", inputs=["Input", "Index", "Value"], outputs=["Result"],
        attrs=["Axis", "Reduce", "Include_self"])
def put_along_axis(xp, x, index, value, *, Axis, Reduce="assign", Include_self=True):
    """Each index element writes Value (at the index element's coordinates) into Input at
    its position along Axis. assign: the last write wins; add/mul/multiply/amin/amax: the
    written values and (Include_self) the input's value combined; mean: their mean
    (Include_self counts the input's value as one more)."""
    axis = _axis(Axis, x.ndim)
    pos = _along_positions(xp, x.shape, index, axis, "put_along_axis").reshape(-1)
    vals = _value_at_index(xp, value, index, x.dtype).reshape(-1)
    out = x.copy().reshape(-1)
    if Reduce == "assign":
        out[pos] = vals
    elif Reduce == "add":
        if not Include_self:
            out[pos] = 0
        scatter_add(xp, out, pos, vals)
    elif Reduce in ("mul", "multiply"):
        if not Include_self:
            out[pos] = 1
        scatter_reduce(xp, out, pos, vals, "multiply")
    elif Reduce in ("amin", "amax"):
        if not Include_self:
            out[pos] = _extreme(xp, x.dtype, largest=Reduce == "amin")
        scatter_reduce(xp, out, pos, vals, "minimum" if Reduce == "amin" else "maximum")
    elif Reduce == "mean":
        work = np.float64 if x.dtype.kind != "f" else x.dtype
        sums = out.astype(work)
        counts = _count_at(xp, out.size, pos, work)
        if Include_self:
            counts += 1
        else:
            sums[pos] = 0
        scatter_add(xp, sums, pos, vals.astype(work, copy=False))
        touched = counts > 0
        mean = sums / xp.where(touched, counts, xp.ones((), dtype=work))
        if x.dtype.kind in "iu":  # PaddlePaddle's integer mean rounds down
            mean = xp.floor(mean)
        out = xp.where(touched, mean.astype(x.dtype), out)
    else:
        raise ValueError(f"put_along_axis: unknown Reduce {Reduce!r}")
    return out.reshape(x.shape)


@kernel("put_along_axis_grad", inputs=["Input", "Index", "Value", "Result", "Result@GRAD"],
        outputs=["Input@GRAD", "Value@GRAD"], attrs=["Axis", "Reduce", "Include_self"])
def put_along_axis_grad(xp, x, index, value, result, dout, *, Axis, Reduce="assign", Include_self=True,
                        need=None):
    """PaddlePaddle 3.3.1's put_along_axis_grad (funcs/gather_scatter_functor.cc):
    Input@GRAD = Result@GRAD, zero where written (assign, or no Include_self); mul:
    * Result / Input where written; mean: / (count + 1) where written; amin/amax: zero
    where Result != Input, else / (1 + the number of written values equal to Result).
    Value@GRAD (Index's shape, embedded in Value's): assign: Result@GRAD at the last write
    to each position, 0 for overwritten ones; add: Result@GRAD; mean: / count (plus one with
    Include_self); mul: Result@GRAD * Result / Value; amin/amax: Result@GRAD split evenly
    among the values equal to Result (and Input, when it is equal too)."""
    axis = _axis(Axis, x.ndim)
    pos = _along_positions(xp, x.shape, index, axis, "put_along_axis_grad").reshape(-1)
    g = dout.reshape(-1)
    res = result.reshape(-1)
    xf = x.reshape(-1)
    vals = _value_at_index(xp, value, index, dout.dtype).reshape(-1)
    one = xp.ones((), dtype=dout.dtype)
    extreme = Reduce in ("amin", "amax")
    if extreme:  # written values equal to the result, per position
        hits = res[pos] == vals
        ties = xp.zeros(xf.size, dtype=dout.dtype)
        scatter_add(xp, ties, pos, hits.astype(dout.dtype))
    dx = dv = None
    if need is None or "Input@GRAD" in need:
        dx = g.copy()
        if not Include_self or Reduce == "assign":
            dx[pos] = 0
        elif Reduce in ("mul", "multiply"):
            dx[pos] = g[pos] * res[pos] / xf[pos]
        elif extreme:
            dx = xp.where(res != xf, xp.zeros((), dtype=dout.dtype), g / (ties + one))
            written = xp.zeros(xf.size, dtype=bool)
            written[pos] = True
            dx = xp.where(written, dx, g)
        elif Reduce == "mean":
            counts = _count_at(xp, xf.size, pos, dout.dtype)
            dx[pos] = g[pos] / (counts[pos] + one)
        dx = dx.reshape(x.shape)
    if need is None or "Value@GRAD" in need:
        if Reduce == "assign":
            # the last write to each position gets its gradient: scan from the end
            last = xp.zeros(xf.size, dtype=np.int64) - 1
            order = xp.arange(pos.shape[0], dtype=np.int64)
            scatter_reduce(xp, last, pos, order, "maximum")
            gv = xp.where(last[pos] == order, g[pos], xp.zeros((), dtype=dout.dtype))
        elif Reduce == "add":
            gv = g[pos]
        elif Reduce == "mean":
            counts = _count_at(xp, xf.size, pos, dout.dtype)
            if Include_self:
                counts += 1
            gv = g[pos] / counts[pos]
        elif Reduce in ("mul", "multiply"):
            gv = g[pos] * (res[pos] / vals)
        else:
            share = xp.where(res[pos] == xf[pos], ties[pos] + one, ties[pos])
            gv = xp.where(hits, g[pos] / xp.where(hits, share, one), xp.zeros((), dtype=dout.dtype))
        gv = gv.reshape(index.shape)
        if tuple(value.shape) == tuple(index.shape):
            dv = gv
        else:  # Value larger than Index (its leading part was read) or broadcast
            dv = xp.zeros(value.shape, dtype=dout.dtype)
            if value.ndim == index.ndim and all(v >= i for v, i in zip(value.shape, index.shape)):
                dv[tuple(slice(0, i) for i in index.shape)] = gv
            else:
                dv = _sum_to(xp, gv, value.shape)
    return dx, dv


def _sum_to(xp, g, shape):
    """A broadcast gradient summed down to `shape` (right-aligned)."""
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    return g.reshape(shape).astype(g.dtype, copy=True)


# -- einsum ------------------------------------------------------------------------------------------

def _einsum_terms(equation, shapes):
    # program/ops/manip.py's parser, restated: kernels may not import program
    eq = equation.replace(" ", "")
    if "->" not in eq:
        raise ValueError(f"einsum: equation {equation!r} must have '->'")
    lhs, rhs = eq.split("->", 1)
    terms = lhs.split(",")
    if len(terms) != len(shapes) or not 1 <= len(shapes) <= 2:
        raise ValueError(f"einsum: equation {equation!r} for {len(shapes)} operands (1 or 2)")
    ell = max([len(s) - (len(t) - 3) for t, s in zip(terms, shapes) if "..." in t] or [0])
    broadcast = "".join(chr(ord("Z") - i) for i in range(ell))[::-1]
    out = []
    for t, s in zip(terms, shapes):
        if "..." in t:
            t = t.replace("...", broadcast[ell - (len(s) - (len(t) - 3)):])
        if len(t) != len(s):
            raise ValueError(f"einsum: {t!r} labels {len(t)} dims, the operand has {len(s)}")
        out.append(t)
    return out, rhs.replace("...", broadcast)


@kernel("einsum", inputs=["Operands"], outputs=["Out", "InnerCache", "XShape"], attrs=["equation"])
def einsum(xp, operands, *, equation, need=None):
    """Out = the summation; XShape[i] = a copy of operand i, which einsum_grad reads
    (PaddlePaddle's grad kernel reads its operands through that slot too, with InnerCache
    holding its own pre-transposed copies); InnerCache[i] is a zero-size placeholder."""
    operands = list(operands)
    terms, rhs = _einsum_terms(equation, [o.shape for o in operands])
    out = xp.asarray(xp.einsum(",".join(terms) + "->" + rhs, *operands))
    if out.dtype != operands[0].dtype or out.base is not None:  # 'ij->ji' is a view of the operand
        out = out.astype(operands[0].dtype, copy=True)
    cache = shapes = None
    if need is None or "InnerCache" in need:
        cache = [xp.zeros((0,), dtype=o.dtype) for o in operands]
    if need is None or "XShape" in need:
        shapes = [o.copy() for o in operands]
    return out, cache, shapes


def _einsum_operand_grad(xp, term, shape, dout, rhs, others):
    """d(sum)/d(operand): Out@GRAD summed with the other operands over the labels the
    operand lacks; labels only the operand has are broadcast back, broadcast ('...') dims
    of size 1 summed, and a label repeated in the operand (a diagonal) written on it."""
    avail = set(rhs).union(*[set(t) for t, _ in others])
    uniq = "".join(dict.fromkeys(c for c in term if c in avail))
    spec = ",".join([rhs] + [t for t, _ in others]) + "->" + uniq
    g = xp.einsum(spec, dout, *[o for _, o in others])
    size = dict(zip(term, shape))
    # broadcast dims (the operand's size 1, the result's larger): summed
    axes = tuple(i for i, c in enumerate(uniq) if size[c] == 1 and g.shape[i] != 1)
    if axes:
        g = g.sum(axis=axes, keepdims=True)
    full = "".join(dict.fromkeys(term))
    missing = [c for c in full if c not in uniq]
    if missing:  # labels summed in the forward pass by this operand alone: broadcast back
        g = g.reshape(g.shape + (1,) * len(missing))
        g = xp.broadcast_to(g, g.shape[:len(uniq)] + tuple(size[c] for c in missing))
        g = xp.einsum(uniq + "".join(missing) + "->" + full, g)
    if len(full) == len(term):
        return xp.ascontiguousarray(g).astype(dout.dtype, copy=True)
    # repeated labels: the gradient lives on the diagonal
    out = xp.zeros(tuple(shape), dtype=dout.dtype)
    grids = {c: xp.arange(size[c]).reshape([size[c] if k == j else 1 for k in range(len(full))])
             for j, c in enumerate(full)}
    out[tuple(grids[c] for c in term)] = g
    return out


@kernel("einsum_grad", inputs=["x_shape", "InnerCache", "Out@GRAD"], outputs=["Operands@GRAD"],
        attrs=["equation"])
def einsum_grad(xp, operands, cache, dout, *, equation):
    operands = list(operands)
    terms, rhs = _einsum_terms(equation, [o.shape for o in operands])
    grads = []
    for i, (term, x) in enumerate(zip(terms, operands)):
        others = [(t, o) for j, (t, o) in enumerate(zip(terms, operands)) if j != i]
        grads.append(_einsum_operand_grad(xp, term, x.shape, dout, rhs, others))
    return grads


# -- dist -------------------------------------------------------------------------------------------

@kernel("dist", inputs=["X", "Y"], outputs=["Out"], attrs=["p"])
def dist(xp, x, y, *, p=2.0):
    d = xp.abs(x - y)
    if p == 0:
        out = xp.sum(d != 0).astype(d.dtype)
    elif p == math.inf:
        out = xp.max(d)
    elif p == -math.inf:
        out = xp.min(d)
    else:
        # PaddlePaddle's p_norm: the root's exponent is 1.0f / p, in float32
        out = xp.sum(d ** d.dtype.type(p)) ** d.dtype.type(np.float32(1) / np.float32(p))
    return xp.asarray(out, dtype=x.dtype).reshape(())


@kernel("dist_grad", inputs=["X", "Y", "Out", "Out@GRAD"], outputs=["X@GRAD", "Y@GRAD"], attrs=["p"])
def dist_grad(xp, x, y, out, dout, *, p=2.0, need=None):
    """PaddlePaddle's: dZ = 0 (p = 0); sign(Z) * (|Z| == Out) * dOut (p = +-inf); else
    (|Z| / (Out + 1e-12))^(p-1) * sign(Z) * dOut, Z = X - Y; summed to each input's shape.
    (3.3.1's kernel adds 1e-12, as its results show; older sources read 1e-10.)"""
    z = x - y
    a = xp.abs(z)
    sign = xp.sign(z)
    if p == 0:
        g = xp.zeros(z.shape, dtype=dout.dtype)
    elif p in (math.inf, -math.inf):
        g = (a == out).astype(dout.dtype) * sign * dout
    else:
        g = (a / (out + out.dtype.type(1e-12))) ** z.dtype.type(np.float32(p) - 1) * sign * dout
    dx = _sum_to(xp, g, x.shape) if need is None or "X@GRAD" in need else None
    dy = _sum_to(xp, -g, y.shape) if need is None or "Y@GRAD" in need else None
    return dx, dy


# -- maxout -----------------------------------------------------------------------------------------

def _maxout_groups(x, groups, axis):
    """X viewed as [..., C/groups, groups, ...] with the group axis right after channels."""
    n, c = x.shape[0], x.shape[axis]
    if axis == 1:
        return x.reshape(n, c // groups, groups, *x.shape[2:]), 2
    return x.reshape(*x.shape[:3], c // groups, groups), 4


@kernel("maxout", inputs=["X"], outputs=["Out"], attrs=["groups", "axis"])
def maxout(xp, x, *, groups, axis=1):
    axis = 1 if axis == 1 else 3
    v, gaxis = _maxout_groups(x, groups, axis)
    return xp.max(v, axis=gaxis)


@kernel("maxout_grad", inputs=["X", "Out", "Out@GRAD"], outputs=["X@GRAD"], attrs=["groups", "axis"])
def maxout_grad(xp, x, out, dout, *, groups, axis=1):
    """Each output's gradient goes to the first input of its group equal to it."""
    axis = 1 if axis == 1 else 3
    v, gaxis = _maxout_groups(x, groups, axis)
    moved = xp.moveaxis(v, gaxis, 0)
    taken = xp.zeros(out.shape, dtype=bool)
    parts = []
    zero = xp.zeros((), dtype=dout.dtype)
    for k in range(groups):
        hit = (moved[k] == out) & ~taken
        taken |= hit
        parts.append(xp.where(hit, dout, zero))
    return xp.ascontiguousarray(xp.moveaxis(xp.stack(parts), 0, gaxis)).reshape(x.shape)


# -- norm ---------------------------------------------------------------------------------------------

@kernel("norm", inputs=["X"], outputs=["Out", "Norm"], attrs=["axis", "epsilon"])
def norm(xp, x, *, axis, epsilon=1e-10, need=None):
    axis = _axis(axis, x.ndim)
    n = xp.sqrt(xp.sum(x * x, axis=axis, keepdims=True) + x.dtype.type(epsilon))
    return x / n, n


@kernel("norm_grad", inputs=["X", "Norm", "Out@GRAD"], outputs=["X@GRAD"], attrs=["axis", "epsilon"])
def norm_grad(xp, x, n, dout, *, axis, epsilon=1e-10):
    """dX = (dOut - X * sum(X * dOut) / Norm^2) / Norm along axis."""
    axis = _axis(axis, x.ndim)
    s = xp.sum(x * dout, axis=axis, keepdims=True)
    return (dout - x * (s / (n * n))) / n


# -- scatter_nd_add -------------------------------------------------------------------------------------

def _nd_positions(xp, x_shape, index, op):
    k = index.shape[-1]
    if k > len(x_shape):
        raise ValueError(f"{op}: index depth {k} exceeds input rank {len(x_shape)}")
    check_index_range(xp, op, "Index", index, tuple(x_shape[:k]), negative=True)
    flat = xp.zeros(index.shape[:-1], dtype=np.int64)
    for i in range(k):
        flat = flat * x_shape[i] + _wrap(xp, index[..., i], x_shape[i])
    return flat.reshape(-1), k


@kernel("scatter_nd_add", inputs=["X", "Index", "Updates"], outputs=["Out"])
def scatter_nd_add(xp, x, index, updates):
    """Out = X with Updates[i...] added at X[Index[i..., :]], repeats accumulating."""
    pos, k = _nd_positions(xp, x.shape, index, "scatter_nd_add")
    rest = tuple(x.shape[k:])
    out = x.copy()
    flat = out.reshape((math.prod(x.shape[:k]),) + rest)
    scatter_add(xp, flat, pos, updates.reshape((pos.shape[0],) + rest).astype(x.dtype, copy=False))
    return out


@kernel("scatter_nd_add_grad", inputs=["Index", "Updates", "Out@GRAD"], outputs=["X@GRAD", "Updates@GRAD"])
def scatter_nd_add_grad(xp, index, updates, dout, need=None):
    """X@GRAD = Out@GRAD; Updates@GRAD = Out@GRAD gathered at Index."""
    pos, k = _nd_positions(xp, dout.shape, index, "scatter_nd_add_grad")
    dx = du = None
    if need is None or "X@GRAD" in need:
        dx = dout.copy()
    if need is None or "Updates@GRAD" in need:
        rest = tuple(dout.shape[k:])
        du = xp.take(dout.reshape((math.prod(dout.shape[:k]),) + rest), pos, axis=0).reshape(updates.shape)
    return dx, du


# -- shuffle_channel --------------------------------------------------------------------------------------

def _shuffle(xp, x, a, b):
    n, c = x.shape[:2]
    return x.reshape(n, a, b, *x.shape[2:]).swapaxes(1, 2).copy().reshape(x.shape)


@kernel("shuffle_channel", inputs=["X"], outputs=["Out"], attrs=["group"])
def shuffle_channel(xp, x, *, group=1):
    """Channels [group, C/group] -> [C/group, group]."""
    return _shuffle(xp, x, group, x.shape[1] // group)


@kernel("shuffle_channel_grad", inputs=["Out@GRAD"], outputs=["X@GRAD"], attrs=["group"])
def shuffle_channel_grad(xp, dout, *, group=1):
    """The inverse permutation. (PaddlePaddle 3.3.1's CPU grad kernel applies the forward
    permutation again, which is the gradient only when group * group == C.)"""
    return _shuffle(xp, dout, dout.shape[1] // group, group)


# -- size, share_data ---------------------------------------------------------------------------------------

@kernel("size", inputs=["Input"], outputs=["Out"])
def size(xp, x):
    return xp.asarray(np.int64(x.size)).reshape(())


@kernel("share_data", inputs=["X"], outputs=["Out"])
def share_data(xp, x):
    return x.copy()


# -- unfold (im2col) ------------------------------------------------------------------------------------------

def _unfold_geometry(x_shape, kernel_sizes, strides, paddings, dilations):
    kh, kw = (int(v) for v in kernel_sizes)
    sh, sw = (int(v) for v in strides)
    pt, pl, pb, pr = (int(v) for v in paddings)
    dh, dw = (int(v) for v in dilations)
    h, w = x_shape[2], x_shape[3]
    oh = (h + pt + pb - (dh * (kh - 1) + 1)) // sh + 1
    ow = (w + pl + pr - (dw * (kw - 1) + 1)) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"unfold: kernel {kh}x{kw} does not fit the padded {h}x{w} input")
    return (kh, kw), (sh, sw), (pt, pl, pb, pr), (dh, dw), (oh, ow)


def _block(i, j, k, s, d, o):
    return (slice(None), slice(None), slice(i * d[0], i * d[0] + s[0] * (o[0] - 1) + 1, s[0]),
            slice(j * d[1], j * d[1] + s[1] * (o[1] - 1) + 1, s[1]))


@kernel("unfold", inputs=["X"], outputs=["Y"], attrs=["kernel_sizes", "strides", "paddings", "dilations"])
def unfold(xp, x, *, kernel_sizes, strides, paddings, dilations):
    """Y[n, (c*kh + i)*kw + j, r*ow + q] = Xpad[n, c, r*sh + i*dh, q*sw + j*dw], X zero-padded
    by paddings = [top, left, bottom, right]."""
    k, s, p, d, o = _unfold_geometry(x.shape, kernel_sizes, strides, paddings, dilations)
    xpad = xp.pad(x, ((0, 0), (0, 0), (p[0], p[2]), (p[1], p[3])))
    n, c = x.shape[:2]
    cols = xp.empty((n, c, k[0], k[1], o[0], o[1]), dtype=x.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            cols[:, :, i, j] = xpad[_block(i, j, k, s, d, o)]
    return cols.reshape(n, c * k[0] * k[1], o[0] * o[1])


def _col2im(xp, cols, image_shape, kernel_sizes, strides, paddings, dilations):
    """The adjoint of unfold: each column entry added at the image position it copies."""
    k, s, p, d, o = _unfold_geometry(image_shape, kernel_sizes, strides, paddings, dilations)
    n, c, h, w = image_shape
    if cols.shape[1:] != (c * k[0] * k[1], o[0] * o[1]):
        raise ValueError(f"fold: input {list(cols.shape)} is not [N, C*{k[0]}*{k[1]}, {o[0] * o[1]}] "
                         f"for a {h}x{w} output")
    blocks = cols.reshape(n, c, k[0], k[1], o[0], o[1])
    pad = xp.zeros((n, c, h + p[0] + p[2], w + p[1] + p[3]), dtype=cols.dtype)
    for i in range(k[0]):
        for j in range(k[1]):
            pad[_block(i, j, k, s, d, o)] += blocks[:, :, i, j]
    return pad[:, :, p[0]:p[0] + h, p[1]:p[1] + w].copy()


@kernel("unfold_grad", inputs=["X", "Y@GRAD"], outputs=["X@GRAD"],
        attrs=["kernel_sizes", "strides", "paddings", "dilations"])
def unfold_grad(xp, x, dy, *, kernel_sizes, strides, paddings, dilations):
    """col2im of dY."""
    return _col2im(xp, dy, x.shape, kernel_sizes, strides, paddings, dilations)


def _fold_shape(x, output_sizes, kernel_sizes):
    kh, kw = (int(v) for v in kernel_sizes)
    return (x.shape[0], x.shape[1] // (kh * kw), int(output_sizes[0]), int(output_sizes[1]))


@kernel("fold", inputs=["X"], outputs=["Y"],
        attrs=["output_sizes", "kernel_sizes", "strides", "paddings", "dilations"])
def fold(xp, x, *, output_sizes, kernel_sizes, strides, paddings, dilations):
    """col2im (PaddlePaddle's fold): X [N, C*kh*kw, L] summed into Y [N, C, H, W], overlapping
    blocks adding up."""
    return _col2im(xp, x, _fold_shape(x, output_sizes, kernel_sizes), kernel_sizes, strides, paddings, dilations)


@kernel("fold_grad", inputs=["X", "Y@GRAD"], outputs=["X@GRAD"],
        attrs=["output_sizes", "kernel_sizes", "strides", "paddings", "dilations"])
def fold_grad(xp, x, dy, *, output_sizes, kernel_sizes, strides, paddings, dilations):
    """unfold of dY."""
    return unfold(xp, dy, kernel_sizes=kernel_sizes, strides=strides, paddings=paddings, dilations=dilations)
