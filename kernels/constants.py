"""Read-only arrays of one value, for elementwise passes against a constant.

numpy 2.4's maximum, minimum and fmax have no vector loop for a broadcast scalar operand:
on [1, 200, 2, 96] float32, maximum(x, 0-d zero) measured 13.9 us, maximum(x, zeros
array) 2.8 us. `filled(xp, value, like)` gives such an operand without allocating and
filling one per call: a view of one cached buffer per (dtype, value), grown to the
largest size asked for (numpy only). The buffers are read-only, so the views can be shared by any
number of threads. (clip with scalars is one pass and stays faster than maximum + minimum
against two such arrays: 0.64-0.8x on hard_swish's maps.)
"""
from __future__ import annotations

import numpy

_buffers: dict = {}


def filled(xp, value, like):
    """A C-contiguous array of `like`'s shape and dtype whose every element is `value` (cast
    to that dtype): on numpy a read-only view of the cached buffer; on other array modules
    (cupy: no scalar-loop penalty there, and a buffer would belong to one device) a new one."""
    if xp is not numpy:
        return xp.full(like.shape, value, dtype=like.dtype)
    key = (like.dtype.str, float(value))
    flat = _buffers.get(key)
    size = like.size
    if flat is None or flat.size < size:
        flat = numpy.full(max(size, 1024), value, dtype=like.dtype)
        flat.flags.writeable = False
        _buffers[key] = flat
    return flat[:size].reshape(like.shape)
