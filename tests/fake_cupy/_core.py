"""The stand-in's device array, ufuncs and array functions: numpy underneath, cupy's rules on
top (tests/fake_cupy/__init__.py says which rules).

A device array (`ndarray`) wraps a numpy array (`_a`) and the id of the device it was made
on (`_dev`). Functions unwrap their device-array arguments, refuse host (numpy) arrays, run
numpy and wrap what comes back: an array result that is one of the arguments' arrays comes
back as that argument itself (so `add(x, y, out=x) is x`, as in cupy), a numpy scalar
becomes a 0-d device array (cupy's reductions and scalar indexing give 0-d arrays).
"""
from __future__ import annotations

import collections
import inspect
import threading

import numpy as np

from . import _names

IMPLICIT = ("Implicit conversion to a NumPy array is not allowed. "
            "Please use `.get()` to construct a NumPy array explicitly.")

# Host synchronisations by kind: "float", "int", "bool", "complex", "item", "tolist", "get"
# (also asnumpy), "repr", "format", "pickle", and "shape" for operations whose result's
# shape depends on the values (nonzero, unique, boolean masks, ...), which cupy computes
# by reading a count back. Tests read and clear them through tests/standin.py.
SYNCS: collections.Counter = collections.Counter()
# Host -> device copies: "asarray" (host data given to array/asarray), "index" (a host
# index array, which cupy copies in), "set" (ndarray.set).
UPLOADS: collections.Counter = collections.Counter()
# Set by tests/standin.py's install: how many devices cuda.runtime.getDeviceCount() reports.
CONFIG = {"device_count": 1}

_KINDS = "biufc"  # cupy has no object, string, datetime or void arrays


class _ThreadState(threading.local):
    """cupy's current device (and stream) are per thread."""
    device = 0
    stream = None


STATE = _ThreadState()


def _new(a, dev=None):
    """A device array wrapping numpy array `a` (on the current device)."""
    if a.dtype.kind not in _KINDS:
        raise TypeError(f"Unsupported dtype {a.dtype}")
    obj = object.__new__(ndarray)
    obj._a = a
    obj._dev = STATE.device if dev is None else dev
    return obj


def _host_error(where):
    return TypeError(f"Unsupported type <class 'numpy.ndarray'> given to {where}: a host (numpy) "
                     f"array must be copied to the device first (cupy.asarray); the cupy stand-in "
                     f"refuses it where cupy refuses it or would copy it silently on every call")


def _unwrap(obj, devs, where):
    """obj with device arrays replaced by their numpy arrays (appended to `devs`), inside
    lists and tuples too; a host numpy array is refused."""
    t = type(obj)
    if t is ndarray:
        devs.append(obj)
        return obj._a
    if t is list or t is tuple:
        return t([_unwrap(o, devs, where) for o in obj])
    if isinstance(obj, np.ndarray):
        raise _host_error(where)
    return obj


def _check_devices(devs):
    dev = STATE.device
    for f in devs:
        if f._dev != dev:
            raise ValueError(f"The device where the array resides ({f._dev}) is different from the "
                             f"current device ({dev}). Peer access is unavailable between these devices.")


def _wrap(res, devs=()):
    """numpy's result as cupy gives it: arrays wrapped (an argument's own array as that
    argument), numpy scalars as 0-d arrays, inside tuples and lists too."""
    if isinstance(res, np.ndarray):
        for f in devs:
            if f._a is res:
                return f
        return _new(res)
    if isinstance(res, np.generic):
        return _new(np.asarray(res))
    if isinstance(res, (tuple, list)):
        items = [_wrap(r, devs) for r in res]
        return type(res)(*items) if hasattr(res, "_fields") else type(res)(items)
    return res


def _dtype(dtype):
    if dtype is None:
        return None
    d = np.dtype(dtype)
    if d.kind not in _KINDS:
        raise TypeError(f"Unsupported dtype {d}")
    return d


_P = inspect.Parameter


def signature(spec):
    """An inspect.Signature from a _names signature string ("a, axis=, *, dtype=, **kw")."""
    params, kind = [], _P.POSITIONAL_OR_KEYWORD
    for tok in (t.strip() for t in spec.split(",")):
        if not tok:
            continue
        if tok == "/":
            params = [p.replace(kind=_P.POSITIONAL_ONLY) for p in params]
        elif tok == "*":
            kind = _P.KEYWORD_ONLY
        elif tok.startswith("**"):
            params.append(_P(tok[2:], _P.VAR_KEYWORD))
        elif tok.startswith("*"):
            params.append(_P(tok[1:], _P.VAR_POSITIONAL))
            kind = _P.KEYWORD_ONLY
        else:
            params.append(_P(tok.rstrip("="), kind, default=None if tok.endswith("=") else _P.empty))
    return inspect.Signature(params)


def _check_signature(where, sig, args, kwargs):
    """cupy's own parameters only: numpy's extra keywords (where=, initial=, like=) refused."""
    try:
        sig.bind(*args, **kwargs)
    except TypeError as e:
        raise TypeError(f"{where}(): {e} (cupy's parameters are {sig})") from None


# -- indexing: cupy wraps out-of-range index arrays ------------------------------------------


def _index(key, shape):
    """A numpy index equivalent to what cupy does with `key` on an array of `shape`: device
    index arrays unwrapped, host ones (and lists) copied in, integer index arrays taken
    modulo their axis' length (cupy's take/scatter kernels wrap instead of checking
    bounds), an Ellipsis appended so all-integer keys give a 0-d view, as in cupy.
    Scalar integer indices are bounds-checked (as cupy does). Returns (index, device arrays)."""
    items = list(key) if type(key) is tuple else [key]
    devs = []
    for i, s in enumerate(items):
        if type(s) is ndarray:
            devs.append(s)
            items[i] = s._a
        elif isinstance(s, np.ndarray):
            UPLOADS["index"] += 1
        elif isinstance(s, (list, tuple)):
            a = np.asarray(_unwrap(s, devs, "an index"))
            items[i] = a.astype(np.intp) if a.size == 0 else a
            UPLOADS["index"] += 1

    def takes(s):  # how many axes of the array an index item consumes
        if s is None or s is Ellipsis or isinstance(s, (bool, np.bool_)):
            return 0
        if isinstance(s, np.ndarray) and s.dtype.kind == "b":
            return s.ndim
        return 1

    if not any(s is Ellipsis for s in items):
        items.append(Ellipsis)
    rest = len(shape) - sum(takes(s) for s in items)
    axis = 0
    for i, s in enumerate(items):
        if s is Ellipsis:
            axis += max(rest, 0)
            continue
        if isinstance(s, np.ndarray):
            if s.dtype.kind in "iu":
                if axis < len(shape) and shape[axis] > 0:
                    items[i] = np.mod(s, shape[axis])
            elif s.dtype.kind == "b":
                SYNCS["shape"] += 1  # the count of True values is read back
            else:
                raise IndexError(f"arrays used as indices must be of integer or boolean type. "
                                 f"(actual: {s.dtype.type})")
        axis += takes(s)
    return tuple(items), devs


def _value(value, devs, where):
    """A value to write into a device array: a device array, a scalar or a list."""
    if type(value) is ndarray:
        devs.append(value)
        return value._a
    if isinstance(value, np.ndarray):
        raise _host_error(where)
    if isinstance(value, (list, tuple)):
        UPLOADS["asarray"] += 1
        return np.asarray(_unwrap(value, devs, where))
    return value


def scatter(a, slices, value, op):
    """a[slices] op= value with every duplicate index applied (numpy's ufunc.at; cupy's
    scatter kernels with atomics): index arrays wrap, and with integer index arrays only
    the dtypes CUDA's atomics support are accepted, as in cupy."""
    if type(a) is not ndarray:
        raise TypeError(f"cupy.{op}.at / cupyx.scatter_* need a cupy.ndarray, got {type(a).__name__}")
    key, devs = _index(slices, a._a.shape)
    advanced = any(isinstance(s, np.ndarray) and s.dtype.kind in "iu" for s in key)
    allowed = _names.UFUNC_AT_DTYPES[op]
    if advanced and a.dtype.name not in allowed:
        raise TypeError(f"cupy.{op}.at only supports {', '.join(allowed)} as data type (got {a.dtype})")
    v = _value(value, devs, f"cupy.{op}.at")
    _check_devices(devs + [a])
    getattr(np, op).at(a._a, key, v)


# -- ufuncs ---------------------------------------------------------------------------------


class ufunc:
    """cupy.ufunc: device arrays and Python/numpy scalars only (no lists, no host arrays),
    keywords out, dtype and casting only; methods reduce/accumulate/reduceat/at only for
    the ufuncs cupy has them for (tests/fake_cupy/_names.py)."""

    def __init__(self, np_ufunc, name):
        self._np = np_ufunc
        self.__name__ = self.name = name
        self.nin, self.nout, self.nargs = np_ufunc.nin, np_ufunc.nout, np_ufunc.nargs
        self.types = np_ufunc.types
        self.identity = np_ufunc.identity

    def __repr__(self):
        return f"<ufunc '{self.name}'>"

    def _operand(self, x, devs):
        t = type(x)
        if t is ndarray:
            devs.append(x)
            return x._a
        if t in (int, float, bool, complex) or isinstance(x, np.generic):
            return x
        raise TypeError(f"Unsupported type {t} (cupy.{self.name} takes cupy arrays and scalars)")

    def __call__(self, *args, out=None, dtype=None, casting="same_kind", **kwargs):
        if kwargs:
            raise TypeError(f"Wrong arguments {kwargs}")
        if len(args) not in (self.nin, self.nargs):
            raise TypeError(f"Wrong number of arguments for {self.name!r}")
        if len(args) > self.nin:
            if out is not None:
                raise ValueError("Cannot specify 'out' as both a positional and keyword argument")
            out = args[self.nin:] if self.nout > 1 else args[self.nin]
            args = args[:self.nin]
        devs = []
        ins = [self._operand(x, devs) for x in args]
        outs = None
        if out is not None:
            for o in (out if isinstance(out, tuple) else (out,)):
                if type(o) is not ndarray:
                    raise TypeError(f"Output arguments of cupy.{self.name} must be cupy.ndarray, got {type(o)}")
            outs = tuple(o._a for o in out) if isinstance(out, tuple) else out._a
            devs.extend(out if isinstance(out, tuple) else (out,))
        _check_devices(devs)
        return _wrap(self._np(*ins, out=outs, dtype=dtype, casting=casting), devs)

    def _method(self, method, allowed, args, kwargs):
        if self.name not in allowed:
            raise NotImplementedError(f"cupy.{self.name}.{method} is not supported by cupy")
        devs = []
        a = [_unwrap(x, devs, f"cupy.{self.name}.{method}") for x in args]
        k = {key: _unwrap(v, devs, f"cupy.{self.name}.{method}") for key, v in kwargs.items()}
        _check_devices(devs)
        return _wrap(getattr(self._np, method)(*a, **k), devs)

    def reduce(self, *args, **kwargs):
        return self._method("reduce", _names.UFUNC_REDUCE, args, kwargs)

    def accumulate(self, *args, **kwargs):
        return self._method("accumulate", _names.UFUNC_ACCUMULATE, args, kwargs)

    def reduceat(self, *args, **kwargs):
        return self._method("reduceat", _names.UFUNC_REDUCEAT, args, kwargs)

    def outer(self, a, b, **kwargs):
        return self._method("outer", (self.name,), (a, b), kwargs)

    def at(self, a, indices, b=None):
        if self.name not in _names.UFUNC_AT_DTYPES:
            raise NotImplementedError(f"cupy.{self.name}.at is not supported by cupy")
        scatter(a, indices, b, self.name)


# -- array functions --------------------------------------------------------------------------


def function(name, np_fn, shape_sync=False):
    """cupy.<name> as numpy's on the unwrapped arguments (host arrays refused), with cupy's
    parameters (where _names knows them)."""
    spec = _names.FUNCTION_SIGNATURES.get(name)
    sig = signature(spec) if spec is not None else None

    def fn(*args, **kwargs):
        if sig is not None:
            _check_signature(f"cupy.{name}", sig, args, kwargs)
        devs = []
        a = [_unwrap(x, devs, f"cupy.{name}") for x in args]
        k = {key: _unwrap(v, devs, f"cupy.{name}") for key, v in kwargs.items()}
        _check_devices(devs)
        if shape_sync:
            SYNCS["shape"] += 1
        return _wrap(np_fn(*a, **k), devs)
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"cupy.{name}: numpy.{name} on the device arrays' data (the cupy stand-in)."
    return fn


def _require_device(x, where):
    if type(x) is not ndarray:
        raise TypeError(f"{where} needs a cupy.ndarray, got {type(x).__name__}")
    _check_devices([x])
    return x._a


def _host_data(obj, devs):
    """What array()/asarray() may take: host data (copied in) or device arrays."""
    if type(obj) is ndarray:
        devs.append(obj)
        return obj._a
    if isinstance(obj, (list, tuple)):
        items = [_host_data(o, devs) for o in obj]
        return items if isinstance(obj, list) else tuple(items)
    return obj


def array(obj, dtype=None, copy=True, order="K", subok=False, ndmin=0, *, blocking=False):
    """A device array of `obj`: host data is copied to the device (always a copy: device
    memory is not the host's), a device array copied unless copy=False lets it be itself."""
    devs = []
    data = _host_data(obj, devs)
    _check_devices(devs)
    if type(obj) is ndarray:
        res = np.array(data, dtype=_dtype(dtype), copy=True if copy else None, order=order, ndmin=ndmin)
        return _wrap(res, devs)
    UPLOADS["asarray"] += 1
    return _new(np.array(data, dtype=_dtype(dtype), copy=True, order=order, ndmin=ndmin))


def asarray(a, dtype=None, order=None, *, copy=None, blocking=False):
    """array(a, copy=False): a device array stays itself when no conversion is asked for."""
    devs = []
    data = _host_data(a, devs)
    _check_devices(devs)
    if type(a) is ndarray:
        return _wrap(np.asarray(data, dtype=_dtype(dtype), order=order, copy=copy), devs)
    UPLOADS["asarray"] += 1
    return _new(np.array(data, dtype=_dtype(dtype), order=order or "K", copy=True))


def asanyarray(a, dtype=None, order=None, *, copy=None, blocking=False):
    return asarray(a, dtype, order, copy=copy, blocking=blocking)


def ascontiguousarray(a, dtype=None):
    return _wrap(np.ascontiguousarray(_require_device(a, "cupy.ascontiguousarray"), dtype=_dtype(dtype)), [a])


def asfortranarray(a, dtype=None):
    return _wrap(np.asfortranarray(_require_device(a, "cupy.asfortranarray"), dtype=_dtype(dtype)), [a])


def asnumpy(a, stream=None, order="C", out=None, *, blocking=True):
    """A host copy of device array `a` (a host array or other data is returned as numpy
    gives it, as cupy does)."""
    if type(a) is ndarray:
        return a.get(stream, order, out, blocking=blocking)
    if out is not None:
        out[...] = a
        return out
    return np.asarray(a, order=order)


def get_array_module(*args):
    import fake_cupy
    return fake_cupy if any(type(a) is ndarray for a in args) else np


def fuse(*args, **kwargs):
    """cupy.fuse: the function itself (the stand-in has no kernels to fuse)."""
    if len(args) == 1 and callable(args[0]) and not kwargs:
        return args[0]
    return lambda f: f


def take(a, indices, axis=None, out=None):
    _require_device(a, "cupy.take")
    return a.take(indices, axis, out)


def take_along_axis(a, indices, axis):
    arr = _require_device(a, "cupy.take_along_axis")
    devs = [a]
    idx = _index_array(indices, devs)
    if idx.dtype.kind not in "iu":
        raise IndexError("`indices` must be an integer array")
    if axis is None:
        arr, axis = arr.reshape(-1), 0
    axis = _normalize_axis(axis, arr.ndim)
    if arr.ndim != idx.ndim:
        raise ValueError("`indices` and `a` must have the same number of dimensions")
    _check_devices(devs)
    n = arr.shape[axis]
    return _new(np.take_along_axis(arr, np.mod(idx, n) if n else idx, axis))


def put_along_axis(arr, indices, values, axis):
    a = _require_device(arr, "cupy.put_along_axis")
    devs = [arr]
    idx = _index_array(indices, devs)
    if idx.dtype.kind not in "iu":
        raise IndexError("`indices` must be an integer array")
    if axis is None:
        raise NotImplementedError("the cupy stand-in does not imitate put_along_axis with axis=None")
    axis = _normalize_axis(axis, a.ndim)
    if a.ndim != idx.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    v = _value(values, devs, "cupy.put_along_axis")
    _check_devices(devs)
    n = a.shape[axis]
    np.put_along_axis(a, np.mod(idx, n) if n else idx, v, axis)


def put(a, ind, v, mode="wrap"):
    _require_device(a, "cupy.put")
    a.put(ind, v, mode)


def where(condition, x=None, y=None):
    if (x is None) != (y is None):
        raise ValueError("Must provide both 'x' and 'y' or neither.")
    if x is None:
        return nonzero(condition)
    return _where(condition, x, y)


_where = function("where", np.where)


def sort(a, axis=-1, kind=None):
    _require_device(a, "cupy.sort")
    out = a.copy()
    out.sort(axis=axis, kind=kind)
    return out


def argsort(a, axis=-1, kind=None):
    _require_device(a, "cupy.argsort")
    return a.argsort(axis=axis, kind=kind)


def _normalize_axis(axis, ndim):
    if not -ndim <= axis < max(ndim, 1):
        raise np.exceptions.AxisError(axis, ndim)
    return axis % max(ndim, 1)


def _index_array(indices, devs):
    if type(indices) is ndarray:
        devs.append(indices)
        return indices._a
    UPLOADS["index"] += 1  # cupy copies host indices in
    return np.asarray(indices)


def _kind_of_sort(kind):
    if kind is not None and kind != "stable":
        raise ValueError(f"Unsupported kind was specified: {kind!r} (cupy sorts are stable; "
                         f"kind must be None or 'stable')")
    return "stable"


SHAPE_SYNCING = ("argwhere", "bincount", "compress", "extract", "flatnonzero", "nonzero", "unique",
                 "unique_all", "unique_counts", "unique_inverse", "unique_values")
nonzero = function("nonzero", np.nonzero, shape_sync=True)


# -- the device array --------------------------------------------------------------------------


class _Flags:
    """cupy's ndarray.flags: c_contiguous, f_contiguous, owndata (no writeable)."""
    __slots__ = ("c_contiguous", "f_contiguous", "owndata")

    def __init__(self, flags):
        self.c_contiguous, self.f_contiguous, self.owndata = flags.c_contiguous, flags.f_contiguous, flags.owndata

    def __getitem__(self, name):
        return {"C_CONTIGUOUS": self.c_contiguous, "F_CONTIGUOUS": self.f_contiguous,
                "OWNDATA": self.owndata}[name]

    def __repr__(self):
        return (f"  C_CONTIGUOUS : {self.c_contiguous}\n  F_CONTIGUOUS : {self.f_contiguous}\n"
                f"  OWNDATA : {self.owndata}")


def _sync(kind):
    SYNCS[kind] += 1


class ndarray:
    """cupy.ndarray, on numpy: refuses implicit conversion to numpy, takes part in no numpy
    function or ufunc, counts every read back to the host (SYNCS)."""
    __slots__ = ("_a", "_dev", "__weakref__")
    __array_priority__ = 100
    __array_ufunc__ = None  # numpy's operators return NotImplemented (so ours run), its ufuncs refuse us

    def __init__(self, shape, dtype=float, memptr=None, strides=None, order="C"):
        if memptr is not None or strides is not None:
            raise NotImplementedError("the cupy stand-in does not imitate ndarray(memptr=, strides=)")
        self._a = np.empty(shape, dtype=_dtype(dtype), order=order)
        self._dev = STATE.device

    # -- numpy interop: refused, as in cupy -----------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise TypeError(IMPLICIT)

    def __array_function__(self, func, types, args, kwargs):
        raise TypeError(f"numpy.{func.__name__}() was given a cupy array: call the array module's "
                        f"function (xp.{func.__name__}) or copy the array to the host with .get() "
                        f"(the cupy stand-in refuses every numpy function on device arrays)")

    # -- attributes ----------------------------------------------------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: _Flags(self._a.flags))
    T = property(lambda self: _new(self._a.T, self._dev))
    mT = property(lambda self: _new(np.swapaxes(self._a, -1, -2), self._dev))
    real = property(lambda self: _wrap(self._a.real, [self]))
    imag = property(lambda self: _new(self._a.imag, self._dev))

    @shape.setter
    def shape(self, value):
        self._a.shape = value

    @property
    def base(self):
        b = self._a.base
        if b is None:
            return None
        return _new(b, self._dev) if isinstance(b, np.ndarray) else b

    @property
    def device(self):
        from .cuda import Device
        return Device(self._dev)

    def __getattr__(self, name):
        if name in _names.NDARRAY_METHODS or name in _names.NDARRAY_PROPERTIES:
            raise AttributeError(f"cupy.ndarray.{name} exists in cupy but the cupy stand-in does not imitate it")
        raise AttributeError(f"'cupy.ndarray' object has no attribute {name!r}")

    # -- reading back to the host (counted) -----------------------------------------------------
    def get(self, stream=None, order="C", out=None, *, blocking=True):
        _sync("get")
        if out is not None:
            if not isinstance(out, np.ndarray) or out.shape != self.shape or out.dtype != self.dtype:
                raise ValueError("`out` must be a numpy array of the same shape and dtype")
            out[...] = self._a
            return out
        return np.array(self._a, order=order, copy=True)

    def set(self, arr, stream=None):
        if not isinstance(arr, np.ndarray):
            raise TypeError(f"Only numpy.ndarray can be set to cupy.ndarray, got {type(arr)}")
        if arr.shape != self.shape:
            raise ValueError(f"Shape mismatch. Old shape: {self.shape}, new shape: {arr.shape}")
        if arr.dtype != self.dtype:
            raise TypeError(f"{arr.dtype} array cannot be set to {self.dtype} array")
        UPLOADS["set"] += 1
        self._a[...] = arr

    def item(self):
        _sync("item")
        return self._a.item()

    def tolist(self):
        _sync("tolist")
        return self._a.tolist()

    def __bool__(self):
        _sync("bool")
        return bool(self._a)

    def __float__(self):
        _sync("float")
        return float(self._a.reshape(()) if self._a.size == 1 else self._a)

    def __int__(self):
        _sync("int")
        return int(self._a.reshape(()) if self._a.size == 1 else self._a)

    def __complex__(self):
        _sync("complex")
        return complex(self._a.reshape(()) if self._a.size == 1 else self._a)

    def __repr__(self):
        _sync("repr")
        return repr(self._a)

    def __str__(self):
        _sync("repr")
        return str(self._a)

    def __format__(self, spec):
        _sync("format")
        return format(self._a.item() if self._a.ndim == 0 else self._a, spec)

    def __reduce__(self):
        _sync("pickle")
        return _from_host, (self._a.copy(),)

    def __copy__(self):
        return _new(self._a.copy(), self._dev)

    def __deepcopy__(self, memo):
        return _new(self._a.copy(), self._dev)

    # -- containers ------------------------------------------------------------------------------
    def __len__(self):
        if self._a.ndim == 0:
            raise TypeError("len() of unsized object")
        return self._a.shape[0]

    def __iter__(self):
        if self._a.ndim == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(self._a.shape[0]))

    def __getitem__(self, key):
        k, devs = _index(key, self._a.shape)
        _check_devices(devs + [self])
        return _new(self._a[k])

    def __setitem__(self, key, value):
        k, devs = _index(key, self._a.shape)
        v = _value(value, devs, "cupy.ndarray.__setitem__")
        _check_devices(devs + [self])
        self._a[k] = v

    # -- methods with cupy's own rules ---------------------------------------------------------
    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        res = self._a.astype(_dtype(dtype), order=order, casting=casting or "unsafe", copy=copy)
        return _wrap(res, [self])

    def view(self, dtype=None, array_class=None):
        return _new(self._a.view() if dtype is None else self._a.view(_dtype(dtype)), self._dev)

    def fill(self, value):
        if isinstance(value, np.ndarray) and value.shape != ():
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")
        devs = [self]
        self._a.fill(_value(value, devs, "cupy.ndarray.fill"))
        _check_devices(devs)

    def take(self, indices, axis=None, out=None):
        devs = [self]
        if isinstance(indices, (int, np.integer)):
            idx = indices
        else:
            idx = _index_array(indices, devs)
        n = self._a.size if axis is None else self._a.shape[_normalize_axis(axis, self._a.ndim)]
        if n:
            idx = np.mod(idx, n)  # cupy's take kernel wraps
        o = None
        if out is not None:
            o = _require_device(out, "cupy.ndarray.take(out=)")
            devs.append(out)
        _check_devices(devs)
        return _wrap(np.take(self._a, idx, axis=axis, out=o), devs)

    def put(self, indices, values, mode="wrap"):
        if mode not in ("raise", "wrap", "clip"):
            raise ValueError("clipmode not understood")
        devs = [self]
        idx = _index_array(indices, devs)
        v = _value(values, devs, "cupy.ndarray.put")
        _check_devices(devs)
        np.put(self._a, idx, v, mode=mode)

    def sort(self, axis=-1, kind=None):
        self._a.sort(axis=axis, kind=_kind_of_sort(kind))

    def argsort(self, axis=-1, kind=None):
        return _new(self._a.argsort(axis=axis, kind=_kind_of_sort(kind)))

    def nonzero(self):
        _sync("shape")
        return _wrap(self._a.nonzero())

    def compress(self, condition, axis=None, out=None):
        _sync("shape")
        return _method_call(self, "compress", (condition, axis, out), {})

    def reduced_view(self, dtype=None):
        return _new(self._a.view(), self._dev)

    def scatter_add(self, slices, value):
        scatter(self, slices, value, "add")

    def scatter_max(self, slices, value):
        scatter(self, slices, value, "maximum")

    def scatter_min(self, slices, value):
        scatter(self, slices, value, "minimum")

    def tobytes(self, order="C"):
        _sync("get")
        return self._a.tobytes(order)


def _from_host(a):
    return _new(a)


def _method_call(self, name, args, kwargs):
    devs = [self]
    a = [_unwrap(x, devs, f"cupy.ndarray.{name}") for x in args]
    k = {key: _unwrap(v, devs, f"cupy.ndarray.{name}") for key, v in kwargs.items()}
    _check_devices(devs)
    return _wrap(getattr(self._a, name)(*a, **k), devs)


def _plain_method(name):
    sig = signature(_names.NDARRAY_SIGNATURES[name])

    def method(self, *args, **kwargs):
        _check_signature(f"cupy.ndarray.{name}", sig, args, kwargs)
        return _method_call(self, name, args, kwargs)
    method.__name__ = method.__qualname__ = name
    return method


for _m in ("all", "any", "argmax", "argmin", "argpartition", "byteswap", "choose", "clip", "conj",
           "conjugate", "copy", "cumprod", "cumsum", "diagonal", "dot", "flatten", "max", "mean", "min",
           "partition", "prod", "ravel", "repeat", "reshape", "round", "searchsorted", "squeeze",
           "std", "sum", "swapaxes", "trace", "transpose", "var"):
    if _m not in ndarray.__dict__:
        setattr(ndarray, _m, _plain_method(_m))


def _ptp(self, axis=None, out=None, keepdims=False):  # numpy 2 dropped ndarray.ptp
    return _method_call(self, "max", (axis, None, keepdims), {}) - _method_call(self, "min", (axis, None, keepdims), {})


ndarray.ptp = _ptp
assert set(n for n in vars(ndarray) if not n.startswith("_")) <= set(_names.NDARRAY_METHODS + _names.NDARRAY_PROPERTIES)


# -- operators: the ufuncs, so host arrays and lists are refused as cupy refuses them ----------

_UFUNCS: dict = {}


def ufunc_named(name):
    u = _UFUNCS.get(name)
    if u is None:
        u = _UFUNCS[name] = ufunc(getattr(np, name), name)
    return u


_BINARY = {"add": "add", "sub": "subtract", "mul": "multiply", "truediv": "true_divide",
           "floordiv": "floor_divide", "mod": "remainder", "pow": "power", "matmul": "matmul",
           "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "left_shift",
           "rshift": "right_shift"}


def _binary(u):
    def op(self, other):
        return u(self, other)

    def rop(self, other):
        return u(other, self)

    def iop(self, other):
        return u(self, other, out=self)
    return op, rop, iop


for _dunder, _name in _BINARY.items():
    _op, _rop, _iop = _binary(ufunc_named(_name))
    setattr(ndarray, f"__{_dunder}__", _op)
    setattr(ndarray, f"__r{_dunder}__", _rop)
    if _dunder != "matmul":
        setattr(ndarray, f"__i{_dunder}__", _iop)

for _dunder, _name in {"lt": "less", "le": "less_equal", "gt": "greater", "ge": "greater_equal",
                       "eq": "equal", "ne": "not_equal"}.items():
    setattr(ndarray, f"__{_dunder}__", _binary(ufunc_named(_name))[0])
ndarray.__hash__ = None

for _dunder, _name in {"neg": "negative", "pos": "positive", "abs": "absolute", "invert": "invert"}.items():
    setattr(ndarray, f"__{_dunder}__", lambda self, _u=ufunc_named(_name): _u(self))


def _divmod(self, other):
    return ufunc_named("divmod")(self, other)


ndarray.__divmod__ = _divmod
