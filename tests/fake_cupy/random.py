"""cupy.random, the parts of it the stand-in imitates: default_rng and cupy's Generator.

cupy's Generator (cupy/random/_generator_api.pyx) has fewer methods than numpy's (no
normal, choice, permutation, shuffle, bytes, spawn: tests/fake_cupy/_names.py), returns
device arrays even for size=None, draws float32 directly for float32 dtypes, and its
`bit_generator` (XORWOW) has no serializable state: `state` is a method returning a
device pointer, and assigning `bit_generator.state = ...` just shadows it. The stand-in's
streams come from numpy's Philox (seeded from the same SeedSequence cupy builds), so a
seed gives a reproducible stream that differs from numpy's default_rng(seed), as cupy's does.
"""
import threading as _threading

import numpy as _np

from . import _core


def _param(x, where):
    """A distribution parameter: a device array, or a Python/numpy scalar."""
    if type(x) is _core.ndarray:
        _core._check_devices([x])
        return x._a
    if isinstance(x, _np.ndarray):
        raise _core._host_error(where)
    return x


def _out(y):
    return _core._new(_np.asarray(y))


class BitGenerator:
    """Generic BitGenerator (cupy/random/_bit_generator.pyx): seeded through numpy's
    SeedSequence, tied to the device current when it was made."""

    def __init__(self, seed=None):
        self.lock = _threading.Lock()
        if isinstance(seed, _np.random.SeedSequence):
            self._seed_seq = seed
        else:
            if isinstance(seed, _core.ndarray):
                seed = seed.get()
            self._seed_seq = _np.random.SeedSequence(seed)
        self._current_device_id = _core.STATE.device

    def random_raw(self, size=None, output=True):
        raise NotImplementedError("Not implemented in base BitGenerator")

    def _state_size(self):
        return 0

    def _check_device(self):
        if _core.STATE.device != self._current_device_id:
            raise RuntimeError("This Generator state is allocated in a different device")


class _cuRANDGenerator(BitGenerator):
    def __init__(self, seed=None, *, size=-1):
        super().__init__(seed)
        self._seed = self._seed_seq.generate_state(1, _np.uint32)[0]
        self._size = size if size >= 0 else 8 * 256 * 132
        self._np = _np.random.Generator(_np.random.Philox(self._seed_seq))

    def random_raw(self, size=None, output=True):
        self.state()
        y = _out(self._np.integers(0, 2 ** 31, size=size, dtype=_np.int32))
        return y if output else None

    def state(self):
        """A pointer to the cuRAND states in device memory (not a serializable state)."""
        self._check_device()
        return id(self) * 64

    def _state_size(self):
        return self._size


class XORWOW(_cuRANDGenerator):
    """cuRAND's XORWOW (the default BitGenerator of cupy.random.default_rng)."""


class MRG32k3a(_cuRANDGenerator):
    """cuRAND's MRG32k3a."""


class Philox4x3210(_cuRANDGenerator):
    """cuRAND's Philox4_32_10."""


def _float_draw(draw, size, dtype):
    """cupy's float path: float64 for 'd', otherwise float32, then astype(dtype)."""
    dt = _np.dtype(dtype)
    y = draw(size, _np.float64 if dt.char == "d" else _np.float32)
    return _np.asarray(y).astype(dt, copy=False)


class Generator:
    """cupy.random.Generator: cupy's methods only (see the module docstring)."""

    def __init__(self, bit_generator):
        self.bit_generator = bit_generator
        self._binomial_state = None

    @property
    def _g(self):
        self.bit_generator.state()  # cupy launches on the bit generator's state: same device only
        return self.bit_generator._np

    def _check_output_array(self, dtype, size, out):
        dtype = _np.dtype(dtype)
        if type(out) is not _core.ndarray:
            raise TypeError(f"Supplied output array is not a cupy.ndarray: {type(out)}")
        if out.dtype.char != dtype.char:
            raise TypeError(f"Supplied output array has the wrong type. Expected {dtype.name}, got {out.dtype.name}")
        if not (out.flags.c_contiguous or out.flags.f_contiguous):
            raise ValueError("Supplied output array is not contiguous, writable or aligned.")
        if size is not None and (tuple(size) if _np.iterable(size) else (size,)) != out.shape:
            raise ValueError("size must match out.shape when used together")

    def _into(self, y, out):
        if out is None:
            return _out(y)
        out._a[...] = y
        return out

    def random(self, size=None, dtype=_np.float64, out=None):
        if out is not None:
            self._check_output_array(dtype, size, out)
            size = out.shape
        g = self._g
        return self._into(_float_draw(lambda s, d: g.random(s, dtype=d), size, dtype), out)

    def uniform(self, low=0.0, high=1.0, size=None, dtype=_np.float64):
        lo = _np.asarray(_param(low, "Generator.uniform"))
        hi = _np.asarray(_param(high, "Generator.uniform"))
        if size is None:
            size = _np.broadcast_shapes(lo.shape, hi.shape)
        g = self._g
        dt = _np.dtype(dtype)
        y = g.random(size, dtype=_np.float64 if dt.char == "d" else _np.float32)
        return _out((lo + (hi - lo) * y).astype(dt, copy=False))

    def integers(self, low, high=None, size=None, dtype=_np.int64, endpoint=False):
        lo, hi = (0, int(low)) if high is None else (int(low), int(high))
        if not endpoint:
            hi -= 1
        if lo > hi:
            raise ValueError("low >= high")
        info = _np.iinfo(dtype)
        if lo < info.min:
            raise ValueError(f"low is out of bounds for {_np.dtype(dtype).name}")
        if hi > info.max:
            raise ValueError(f"high is out of bounds for {_np.dtype(dtype).name}")
        y = self._g.integers(lo, hi, size=size, dtype=_np.int64 if hi <= _np.iinfo(_np.int64).max else _np.uint64,
                             endpoint=True)
        return _out(_np.asarray(y).astype(dtype))

    def standard_normal(self, size=None, dtype=_np.float64, out=None):
        if out is not None:
            self._check_output_array(dtype, size, out)
            size = out.shape
        g = self._g
        return self._into(_float_draw(lambda s, d: g.standard_normal(s, dtype=d), size, dtype), out)

    def standard_exponential(self, size=None, dtype=_np.float64, method="inv", out=None):
        if out is not None:
            self._check_output_array(dtype, size, out)
            size = out.shape
        g = self._g
        return self._into(_float_draw(lambda s, d: g.standard_exponential(s, dtype=d), size, dtype), out)

    def standard_gamma(self, shape, size=None, dtype=_np.float64, out=None):
        if out is not None:
            self._check_output_array(dtype, size, out)
            size = out.shape
        y = self._g.standard_gamma(_param(shape, "Generator.standard_gamma"), size)
        return self._into(_np.asarray(y).astype(dtype, copy=False), out)

    def beta(self, a, b, size=None, dtype=_np.float64):
        y = self._g.beta(_param(a, "Generator.beta"), _param(b, "Generator.beta"), size)
        return _out(_np.asarray(y).astype(dtype, copy=False))

    def _dist(self, name, params, size):
        return _out(getattr(self._g, name)(*[_param(p, f"Generator.{name}") for p in params], size))

    def binomial(self, n, p, size=None):
        return self._dist("binomial", (n, p), size)

    def chisquare(self, df, size=None):
        return self._dist("chisquare", (df,), size)

    def dirichlet(self, alpha, size=None):
        return self._dist("dirichlet", (alpha,), size)

    def exponential(self, scale=1.0, size=None):
        return self._dist("exponential", (scale,), size)

    def f(self, dfnum, dfden, size=None):
        return self._dist("f", (dfnum, dfden), size)

    def gamma(self, shape, scale=1.0, size=None):
        return self._dist("gamma", (shape, scale), size)

    def geometric(self, p, size=None):
        return self._dist("geometric", (p,), size)

    def hypergeometric(self, ngood, nbad, nsample, size=None):
        return self._dist("hypergeometric", (ngood, nbad, nsample), size)

    def logseries(self, p, size=None):
        return self._dist("logseries", (p,), size)

    def poisson(self, lam=1.0, size=None):
        return self._dist("poisson", (lam,), size)

    def power(self, a, size=None):
        return self._dist("power", (a,), size)


def default_rng(seed=None):
    """A Generator on XORWOW seeded by `seed` (an int, ints, a SeedSequence, a BitGenerator
    or a Generator, as cupy takes)."""
    if isinstance(seed, BitGenerator):
        return Generator(seed)
    if isinstance(seed, Generator):
        return seed
    return Generator(XORWOW(seed))


def __getattr__(name):
    from ._names import CUPY_RANDOM
    if name in CUPY_RANDOM:
        raise AttributeError(f"cupy.random.{name} exists in cupy but the cupy stand-in does not imitate it")
    raise AttributeError(f"module 'cupy.random' has no attribute {name!r}")
