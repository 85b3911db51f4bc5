"""Counting kernels: histogram, unique and the bitwise ops (program/ops/stat.py)."""
from __future__ import annotations

import numpy as np

from keel.kernels.registry import kernel
from keel.kernels.tensor import cast


@kernel("histogram", inputs=["X", "Weight"], outputs=["Out"], attrs=["bins", "min", "max", "density"])
def histogram(xp, x, weight, *, bins=100, min=0.0, max=0.0, density=False):  # noqa: A002 (the op's names)
    """PaddlePaddle's binning: bin = floor((v - lo) * bins / (hi - lo)), a value equal to hi
    in the last bin (not numpy's edge comparisons, which round differently near edges)."""
    values = x.reshape(-1).astype(np.float64)
    lo, hi = float(min), float(max)
    if lo == 0.0 and hi == 0.0 and values.size:
        lo, hi = float(values.min()), float(values.max())
    if lo == hi:
        lo, hi = lo - 1.0, hi + 1.0
    inside = (values >= lo) & (values <= hi)
    index = xp.floor((values[inside] - lo) * bins / (hi - lo)).astype(np.int64)
    index = xp.minimum(index, bins - 1)
    if weight is None and not density:
        return xp.bincount(index, minlength=bins).astype(np.int64)
    w = None if weight is None else weight.reshape(-1)[inside].astype(np.float64)
    counts = xp.bincount(index, weights=w, minlength=bins)
    if density:
        total = counts.sum()
        counts = counts / (total * (hi - lo) / bins) if total else counts * np.nan
    return counts.astype(np.float32 if weight is None else weight.dtype)


@kernel("unique", inputs=["X"], outputs=["Out", "Indices", "Index", "Counts"],
        attrs=["dtype", "axis", "is_sorted"])
def unique(xp, x, *, dtype=3, axis=(), is_sorted=False):
    """Distinct values ascending (slices along `axis` in lexicographic order), with first
    occurrences, inverse positions and counts, as numpy's unique computes them; without
    is_sorted (fluid's unique), the distinct values in the order they first occur."""
    source, along = (x, int(axis[0])) if axis else (x.reshape(-1), 0)
    out, first, inverse, counts = xp.unique(source, return_index=True, return_inverse=True,
                                            return_counts=True, axis=along if axis else None)
    inverse = inverse.reshape(-1)
    if not is_sorted:
        order = xp.argsort(first, kind="stable")      # sorted position of the k-th value to appear
        rank = xp.empty_like(order)
        rank[order] = xp.arange(order.size)
        out, first, counts = xp.take(out, order, axis=along), first[order], counts[order]
        inverse = rank[inverse]
    return out, cast(xp, first, dtype), cast(xp, inverse, dtype), cast(xp, counts, dtype)


@kernel("bitwise_not", inputs=["X"], outputs=["Out"])
def bitwise_not(xp, x):
    return xp.asarray(xp.invert(x))


def _bitwise(op_type, ufunc_name):
    @kernel(op_type, inputs=["X", "Y"], outputs=["Out"])
    def run(xp, x, y):
        return xp.asarray(getattr(xp, ufunc_name)(x, y))
    run.__name__ = op_type
    return run


for _type, _ufunc in (("bitwise_and", "bitwise_and"), ("bitwise_or", "bitwise_or"),
                      ("bitwise_xor", "bitwise_xor")):
    _bitwise(_type, _ufunc)
