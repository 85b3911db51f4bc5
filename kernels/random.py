"""Random kernels (registered with rng=True): the uniform, normal, truncated-normal and
integer initialisers, and dropout.

Generators: the executor passes `rng`, its random stream (executor/random_state.py:
each call draws from a generator derived from a seed and a draw counter), or a plain
numpy/cupy Generator outside an executor. When an op's `seed` attribute is non-zero
(dropout: `fix_seed` with `seed`, or a non-zero `Seed` input), the kernel draws from a
generator at the start of that seed's stream instead, so such an op yields the same
numbers on every run, as in PaddlePaddle (see `seeded_generator` for what it costs).
Only Generator methods that numpy and cupy share are used: `random`,
`standard_normal` and `integers`; each kernel call draws once.

Values are not bit-identical to PaddlePaddle's (its engines are mt19937_64 / Philox);
the distributions, bounds, dtypes and the seed behaviour are what is reproduced.
"""
from __future__ import annotations

import math
import threading

import numpy as np

from keel.kernels.registry import kernel
from keel.kernels.tensor import BF16, present, cast, host_int, host_ints, np_dtype


def generator(xp, rng, seed: int):
    """The op's own generator for a non-zero seed, else the executor's."""
    if seed:
        return seeded_generator(xp, int(seed) % 2**64)
    if rng is None:
        raise ValueError("this random op has seed 0 and needs the executor's generator (rng=)")
    return rng


_SEEDED = threading.local()  # per thread: seed -> (numpy Generator, its initial state)
_SEEDED_MAX = 256            # distinct seeds kept per thread (programs use a handful)


def seeded_generator(xp, seed: int):
    """`xp.random.default_rng(seed)` at the start of its stream, for fixed-seed ops.

    On numpy the Generator is made once per thread and seed and rewound on each call
    (setting its bit generator's state: about 1 us, where making one hashes the seed
    through a SeedSequence: about 8 us). Per thread, because the executor's concurrent
    runner may run two ops with the same seed at once. cupy's generator state lives on
    the device and cupy has no call to rewind it, so there one is made per call (an
    initialisation kernel); fixed-seed ops are initialisers, which run once, and
    fixed-seed dropout."""
    if xp is not np:
        return xp.random.default_rng(seed)
    cache = getattr(_SEEDED, "cache", None)
    if cache is None:
        cache = _SEEDED.cache = {}
    entry = cache.get(seed)
    if entry is None:
        if len(cache) >= _SEEDED_MAX:
            cache.clear()
        made = np.random.default_rng(seed)
        entry = cache[seed] = (made, made.bit_generator.state)
    g, start = entry
    g.bit_generator.state = start
    return g


def _shape(shape_t, shape_list, shape):
    """ShapeTensor > ShapeTensorList > shape attribute (PaddlePaddle's precedence)."""
    if present(shape_t):
        return tuple(host_ints(shape_t))
    if present(shape_list):
        return tuple(host_int(t) for t in shape_list)
    return tuple(int(s) for s in shape)


def _float_work(code: int):
    """The float dtype random numbers are drawn in for output dtype `code`."""
    dt = np_dtype(code) if int(code) != BF16 else np.dtype(np.float32)
    if dt.kind != "f":
        raise TypeError(f"random op: dtype {dt} is not a floating type")
    return np.dtype(np.float64) if dt == np.float64 else np.dtype(np.float32)


@kernel("uniform_random", inputs=["ShapeTensor", "ShapeTensorList"], outputs=["Out"],
        attrs=["shape", "dtype", "min", "max", "seed", "diag_num", "diag_step", "diag_val"], rng=True)
def uniform_random(xp, shape_t, shape_list, *, shape=(), dtype=5, min=-1.0, max=1.0, seed=0,
                   diag_num=0, diag_step=0, diag_val=1.0, rng=None):
    """U[min, max); then, when diag_num > 0, flat positions i*(diag_step+1) for
    i < diag_num are set to diag_val (PaddlePaddle's diagonal initialisation)."""
    shape = _shape(shape_t, shape_list, shape)
    work = _float_work(dtype)
    g = generator(xp, rng, seed)
    u = g.random(shape, dtype=work)
    out = u * work.type(max - min) + work.type(min)
    if diag_num > 0:
        size = math.prod(shape)
        last = (diag_num - 1) * (diag_step + 1)
        if last >= size:
            raise ValueError(f"uniform_random: diagonal position {last} outside {size} elements")
        flat = out.reshape(-1)
        flat[xp.arange(diag_num) * (diag_step + 1)] = diag_val
    return cast(xp, out, dtype)


@kernel("gaussian_random", inputs=["ShapeTensor", "ShapeTensorList"], outputs=["Out"],
        attrs=["shape", "mean", "std", "seed", "dtype"], rng=True)
def gaussian_random(xp, shape_t, shape_list, *, shape=(), mean=0.0, std=1.0, seed=0, dtype=5,
                    rng=None):
    shape = _shape(shape_t, shape_list, shape)
    work = _float_work(dtype)
    g = generator(xp, rng, seed)
    out = g.standard_normal(shape, dtype=work) * work.type(std) + work.type(mean)
    return cast(xp, out, dtype)


# Rational approximation of erfinv used by PaddlePaddle's truncated_gaussian_random
# (coefficients from the public-domain reference it cites, Wichura's AS241).
_A = (1.1975323115670912564578e0, 4.7072688112383978012285e1, 6.9706266534389598238465e2,
      4.8548868893843886794648e3, 1.6235862515167575384252e4, 2.3782041382114385731252e4,
      1.1819493347062294404278e4, 8.8709406962545514830200e2)
_B = (1.0, 4.2313330701600911252e1, 6.8718700749205790830e2, 5.3941960214247511077e3,
      2.1213794301586595867e4, 3.9307895800092710610e4, 2.8729085735721942674e4,
      5.2264952788528545610e3)
_C = (1.42343711074968357734e0, 4.63033784615654529590e0, 5.76949722146069140550e0,
      3.64784832476320460504e0, 1.27045825245236838258e0, 2.41780725177450611770e-1,
      2.27238449892691845833e-2, 7.74545014278341407640e-4)
_D = (1.4142135623730950488016887e0, 2.9036514445419946173133295e0, 2.3707661626024532365971225e0,
      9.7547832001787427186894837e-1, 2.0945065210512749128288442e-1, 2.1494160384252876777097297e-2,
      7.7441459065157709165577218e-4, 1.4859850019840355905497876e-9)
_E = (6.65790464350110377720e0, 5.46378491116411436990e0, 1.78482653991729133580e0,
      2.96560571828504891230e-1, 2.65321895265761230930e-2, 1.24266094738807843860e-3,
      2.71155556874348757815e-5, 2.01033439929228813265e-7)
_F = (1.414213562373095048801689e0, 8.482908416595164588112026e-1, 1.936480946950659106176712e-1,
      2.103693768272068968719679e-2, 1.112800997078859844711555e-3, 2.611088405080593625138020e-5,
      2.010321207683943062279931e-7, 2.891024605872965461538222e-15)


def _poly(coef, r):
    acc = coef[7]
    for c in coef[6::-1]:
        acc = acc * r + c
    return acc


def erfinv(xp, x):
    """Elementwise inverse error function (float64 array with values in (-1, 1))."""
    ax = xp.abs(x)
    r_center = 0.180625 - 0.25 * x * x
    center = x * _poly(_A, r_center) / _poly(_B, r_center)
    tail_ax = xp.minimum(ax, 1.0 - 2.0**-53)
    r = xp.sqrt(math.log(2.0) - xp.log(1.0 - tail_ax))
    near = _poly(_C, r - 1.6) / _poly(_D, r - 1.6)
    far = _poly(_E, r - 5.0) / _poly(_F, r - 5.0)
    tail = xp.where(r <= 5.0, near, far)
    tail = xp.where(x < 0, -tail, tail)
    return xp.where(ax <= 0.85, center, tail)


def _normal_cdf(z: float) -> float:
    return (1.0 + math.erf(z / math.sqrt(2.0))) / 2.0


@kernel("truncated_gaussian_random", inputs=[], outputs=["Out"],
        attrs=["shape", "mean", "std", "seed", "a", "b", "dtype"], rng=True)
def truncated_gaussian_random(xp, *, shape, mean=0.0, std=1.0, seed=0, a=-2.0, b=2.0, dtype=5,
                              rng=None):
    """Normal(mean, std) restricted to [a, b] by inverse-CDF sampling, as PaddlePaddle:
    `a` and `b` are ABSOLUTE bounds (p = Phi((a-mean)/std) + (Phi((b-mean)/std) -
    Phi((a-mean)/std)) * u, x = sqrt(2) erfinv(2p-1) std + mean, clamped to [a, b]);
    with the defaults a=-2, b=2 and mean=0, std=1 that is +-2 standard deviations."""
    shape = tuple(int(s) for s in shape)
    g = generator(xp, rng, seed)
    u = g.random(shape, dtype=np.float64)
    u = xp.maximum(u, np.finfo(np.float32).tiny)  # PaddlePaddle draws from U(FLT_MIN, 1)
    ca, cb = _normal_cdf((a - mean) / std), _normal_cdf((b - mean) / std)
    p = ca + (cb - ca) * u
    z = 2.0 * p - 1.0
    z = xp.clip(z, -1.0 + 2.0**-53, 1.0 - 2.0**-53)
    out = math.sqrt(2.0) * erfinv(xp, z) * std + mean
    return cast(xp, xp.clip(out, a, b), dtype)


@kernel("randint", inputs=["ShapeTensor", "ShapeTensorList"], outputs=["Out"],
        attrs=["low", "high", "shape", "dtype", "seed"], rng=True)
def randint(xp, shape_t, shape_list, *, low, high, shape=(), dtype=3, seed=0, rng=None):
    """Integers uniform on [low, high), in dtype (int32 or int64)."""
    if high <= low:
        raise ValueError(f"randint: high ({high}) must be greater than low ({low})")
    shape = _shape(shape_t, shape_list, shape)
    g = generator(xp, rng, seed)
    return g.integers(low, high, size=shape, dtype=np.int64).astype(np_dtype(dtype))


@kernel("dropout", inputs=["X", "Seed"], outputs=["Out", "Mask"],
        attrs=["dropout_prob", "is_test", "dropout_implementation", "seed", "fix_seed"], rng=True)
def dropout(xp, x, seed_t, *, dropout_prob=0.5, is_test=False,
            dropout_implementation="downgrade_in_infer", seed=0, fix_seed=False, rng=None,
            need=frozenset({"Out", "Mask"})):
    """PaddlePaddle's dropout.

    Training (is_test False): an element is dropped when u < p, u ~ U[0, 1) (float32);
    Mask (uint8) is 1 where kept. "upscale_in_train": Out = X / (1 - p) where kept, 0
    elsewhere; "downgrade_in_infer": Out = X * Mask. p == 1 gives zeros and an all-zero
    Mask. Seed: the Seed input's value if given, else `seed` when fix_seed, else 0; a
    non-zero seed uses a generator of its own.
    Inference (is_test True): "upscale_in_train" Out = X; "downgrade_in_infer"
    Out = X * (1 - p); a Mask of ones only when the op binds one (a training program
    differentiating through an is_test dropout: dropout_grad reads it). (1 - p) is computed
    in float32 as PaddlePaddle does.
    """
    upscale = dropout_implementation == "upscale_in_train"
    keep = np.float32(1.0) - np.float32(dropout_prob)
    if is_test:
        mask = xp.ones(x.shape, dtype=np.uint8) if "Mask" in need else None
        if upscale:
            return x.copy(), mask
        return x * x.dtype.type(keep), mask
    if np.float32(dropout_prob) == np.float32(1.0):
        return xp.zeros_like(x), xp.zeros(x.shape, dtype=np.uint8)
    if seed_t is not None:
        seed_value = host_int(seed_t)
    else:
        seed_value = seed if fix_seed else 0
    g = generator(xp, rng, seed_value)
    u = g.random(x.shape, dtype=np.float32)
    kept = u >= np.float32(dropout_prob)
    mask = kept.astype(np.uint8)
    if upscale:
        out = xp.where(kept, x / x.dtype.type(keep), x.dtype.type(0))
    else:
        out = xp.where(kept, x, x.dtype.type(0))
    return out.astype(x.dtype, copy=False), mask
