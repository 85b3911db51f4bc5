"""A stand-in for cupy, on numpy, so the GPU path (kernels on `xp = cupy`, the executor on
CUDAPlace, the Predictor with enable_use_gpu) runs in every test run, GPU or not.

Test-only: tests/standin.py installs it as `cupy` (and tests/fake_cupyx as `cupyx`) in
sys.modules for one test and takes it out afterwards; nothing else imports it, so
`kernels.array_module.cupy_available()` stays False elsewhere. It imitates what catches
GPU-path bugs, following cupy 14 (cupy-cuda12x 14.2.0):

- Names: only names real cupy has (tests/fake_cupy/_names.py); a cupy name the stand-in
  does not imitate raises AttributeError saying so.
- Device arrays are their own type (`ndarray`, wrapping a numpy array). Implicit conversion
  to numpy raises TypeError (`__array__`, so `np.asarray(x)`), and so does every numpy
  function or ufunc given one (cupy dispatches some numpy functions to itself; the stand-in
  refuses them all: a kernel must call `xp.`). Reading values back works as in cupy but is
  counted (`float()`, `int()`, `bool()`, `.item()`, `.tolist()`, `.get()`, `asnumpy`,
  printing; and operations whose result's shape depends on the values: nonzero, unique,
  boolean masks), so tests can assert a path does not synchronise.
- Functions, ufuncs and operators take device arrays and Python/numpy scalars; a host numpy
  array raises TypeError, as cupy's ufuncs and operators do (where cupy would copy one in
  silently, as `a[i] = host_array`, the stand-in refuses too). Only array/asarray/
  asanyarray take host data (and indices may be host arrays or lists, which cupy copies in).
- Results are arrays: reductions and scalar indexing give 0-d device arrays, not numpy
  scalars; `out=` and no-op conversions return the argument itself.
- Indexing: integer index arrays wrap around (cupy's take/scatter kernels compute the index
  modulo the axis length instead of raising), in `x[i]`, `x[i] = v`, take, take_along_axis,
  put_along_axis, ufunc.at and cupyx.scatter_*; scalar integer indices are bounds-checked.
  ufunc.at (and scatter_add) with integer index arrays accept only the dtypes CUDA's
  atomics support (no int64 add).
- Sorting is stable and `kind` other than None/'stable' is refused.
- `random.default_rng` gives cupy's Generator: cupy's methods only (no normal, choice,
  permutation, ...), arrays even for size=None, a stream different from numpy's for the
  same seed, and a `bit_generator` whose `state` is a method (no serializable state).
- `cuda`: Device(i).use() and `with Device(i):` (per thread, as cupy's current device),
  runtime.getDeviceCount(), Stream/get_current_stream; arrays remember their device and an
  operation mixing devices raises, as cupy does without peer access.
"""
import types as _types

import numpy as _np

from . import _core, _names, cuda, lib, linalg, random  # noqa: F401
from ._core import (array, asanyarray, asarray, asnumpy, ascontiguousarray, asfortranarray,  # noqa: F401
                    argsort, fuse, get_array_module, ndarray, nonzero, put, put_along_axis, sort, take,
                    take_along_axis, ufunc, where)

# numpy objects that are not cupy's: they would build numpy arrays (or need cupy's own class)
_NOT_IMITATED = {"broadcast", "vectorize", "poly1d", "c_", "r_", "mgrid", "ogrid", "flatiter",
                 "nditer", "ndindex", "DataSource", "format_parser", "exceptions", "testing"}


def _namespace():
    ns = {}
    own = {"array", "asanyarray", "asarray", "asnumpy", "ascontiguousarray", "asfortranarray", "argsort",
           "fuse", "get_array_module", "ndarray", "nonzero", "put", "put_along_axis", "sort", "take",
           "take_along_axis", "ufunc", "where", "cuda", "lib", "linalg", "random"}
    for name in _names.CUPY:
        if name in own or name in _NOT_IMITATED or name.startswith("_"):
            continue
        obj = getattr(_np, name, None)
        if obj is None or isinstance(obj, _types.ModuleType):
            continue  # gone from numpy 2, or a numpy submodule: not imitated
        if isinstance(obj, _np.ufunc):
            ns[name] = _core.ufunc_named(name) if obj.__name__ == name else _core.ufunc(obj, name)
        elif callable(obj) and not isinstance(obj, type):
            ns[name] = _core.function(name, obj, shape_sync=name in _core.SHAPE_SYNCING)
        else:
            ns[name] = obj  # constants, numpy's scalar types and dtype classes (cupy's are numpy's)
    for name in ("allclose", "array_equal", "array_equiv"):  # cupy gives 0-d device arrays
        ns[name] = _as_array_result(ns[name])
    return ns


def _as_array_result(fn):
    def wrapped(*args, **kwargs):
        res = fn(*args, **kwargs)
        return res if isinstance(res, ndarray) else _core._new(_np.asarray(res))
    wrapped.__name__ = fn.__name__
    return wrapped


globals().update(_namespace())


def __getattr__(name):
    if name in _names.CUPY:
        raise AttributeError(f"cupy.{name} exists in cupy but the cupy stand-in (tests/fake_cupy) does not "
                             f"imitate it")
    raise AttributeError(f"module 'cupy' has no attribute {name!r}")

# Named as cupy names itself: kernels may tell cupy apart by `xp.__name__` (and error
# messages show cupy's names).
__name__ = "cupy"
ndarray.__module__ = ufunc.__module__ = "cupy"
random.__name__, cuda.__name__, cuda.runtime.__name__ = "cupy.random", "cupy.cuda", "cupy.cuda.runtime"
lib.__name__, lib.stride_tricks.__name__ = "cupy.lib", "cupy.lib.stride_tricks"
linalg.__name__ = "cupy.linalg"
