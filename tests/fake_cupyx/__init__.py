"""A stand-in for cupyx, the companion of tests/fake_cupy: the scatter functions, rsqrt and
empty_pinned.

scatter_add/max/min(a, slices, value) add (take the max, min of) every value into a at
its index, duplicates included, as numpy's ufunc.at; integer index arrays wrap around
and only the dtypes of CUDA's atomics are accepted, as in cupy (no int64 scatter_add)."""
from fake_cupy import _core
from fake_cupy._names import CUPYX as _CUPYX


def scatter_add(a, slices, value):
    _core.scatter(a, slices, value, "add")


def scatter_max(a, slices, value):
    _core.scatter(a, slices, value, "maximum")


def scatter_min(a, slices, value):
    _core.scatter(a, slices, value, "minimum")


def empty_pinned(shape, dtype=float, order="C"):
    """A numpy array (in cupy, over page-locked host memory)."""
    import numpy
    return numpy.empty(shape, dtype, order)


def rsqrt(x, out=None):
    return _core.ufunc_named("reciprocal")(_core.ufunc_named("sqrt")(x), out=out)


def __getattr__(name):
    if name in _CUPYX:
        raise AttributeError(f"cupyx.{name} exists in cupyx but the cupy stand-in does not imitate it")
    raise AttributeError(f"module 'cupyx' has no attribute {name!r}")



__name__ = "cupyx"  # as cupyx names itself
