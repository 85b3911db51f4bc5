"""The random stream of an executor, shared by its random kernels (init ops, dropout).

Keel owns the stream's state, and it is plain data on every array module: a seed and a
counter of draws. Each draw (one `random`, `standard_normal` or `integers` call, which
is one random kernel call) gets a generator of its own, derived from (seed, counter):
the counter-th child of `numpy.random.SeedSequence(seed)` (`spawn_key=(counter,)`),
which seeds numpy's default PCG64 Generator on the CPU and cupy's default Generator on a
GPU. So `get_state()` is `{"scheme", "seed", "counter"}`, checkpoints save it as JSON
and a restored stream continues bit for bit on numpy and on cupy alike. (cupy's own
generator state lives on the device and has no host form: its `bit_generator.state` is
a method giving a device pointer.)

Deriving a generator costs about 7 us per draw on numpy (a SeedSequence hash and a PCG64
seeding), one draw per random op per run; on cupy it is a generator initialisation
kernel. cupy seeds its cuRAND generators with 32 bits of the SeedSequence, so on a GPU
two draws of a long run can get the same stream with probability about 2^-32 per pair,
which dropout masks and initialisers tolerate.

Plans bind this object once as the kernels' `rng`, so reseeding or restoring a state
takes effect without recompiling. Draws are numbered under a lock: ops running
concurrently (num_threads > 1) take distinct counters, in the order they reach it.

Checkpoints written before this scheme hold numpy's PCG64 state (`{"bit_generator":
"PCG64", "state": ...}`); `set_state` accepts one on numpy and continues that old stream
exactly, until the next `seed`. It cannot drive cupy's generators: a ValueError says so.
"""
from __future__ import annotations

import threading

import numpy as np

SCHEME = "seed-sequence-spawn-v1"  # generator of draw k: SeedSequence(seed, spawn_key=(k,))


class RandomState:
    """A stream of random draws for array module `xp`, seeded by `seed` (None: fresh
    entropy, itself kept in the state so a checkpoint still reproduces the stream)."""

    def __init__(self, xp, seed: int | None = None):
        self._xp = xp
        self._lock = threading.Lock()
        self.seed(seed)

    def seed(self, seed: int | None) -> None:
        """Restart the stream from `seed` (None: fresh entropy), counter 0."""
        if seed is None:
            seed = np.random.SeedSequence().entropy
        seed = int(seed)
        if seed < 0:
            raise ValueError(f"random seed must be a non-negative integer, got {seed}")
        with self._lock:
            self._seed, self._counter, self._legacy = seed, 0, None

    def get_state(self) -> dict:
        """The stream's position as JSON data (for checkpoints)."""
        with self._lock:
            if self._legacy is not None:
                return self._legacy.bit_generator.state
            return {"scheme": SCHEME, "seed": self._seed, "counter": self._counter}

    def set_state(self, state: dict) -> None:
        """Continue from a `get_state()` result. A ValueError says what does not fit."""
        if not isinstance(state, dict):
            raise ValueError(f"a random state is a dict, got {type(state).__name__}")
        if "bit_generator" in state:
            self._set_legacy_state(state)
            return
        if state.get("scheme") != SCHEME:
            raise ValueError(f"random state scheme {state.get('scheme')!r} is not this Keel's ({SCHEME!r})")
        seed, counter = state.get("seed"), state.get("counter")
        if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (seed, counter)):
            raise ValueError(f"random state needs non-negative integers 'seed' and 'counter', "
                             f"got {seed!r} and {counter!r}")
        with self._lock:
            self._seed, self._counter, self._legacy = seed, counter, None

    def _set_legacy_state(self, state: dict) -> None:
        if self._xp is not np:
            raise ValueError("this random state is numpy's generator state (a checkpoint written "
                             "by an older Keel); it cannot continue on a GPU: load it on a "
                             "CPUPlace executor, or reseed")
        bit_generator = getattr(np.random, str(state["bit_generator"]), None)
        if not (isinstance(bit_generator, type) and issubclass(bit_generator, np.random.BitGenerator)):
            raise ValueError(f"unknown numpy bit generator {state['bit_generator']!r} in the random state")
        legacy = np.random.Generator(bit_generator())
        try:
            legacy.bit_generator.state = state
        except (TypeError, ValueError, KeyError) as e:
            raise ValueError(f"damaged numpy random state: {e}") from None
        with self._lock:
            self._legacy = legacy

    def generator(self):
        """The generator of the next draw (and the counter moves past it)."""
        with self._lock:
            if self._legacy is not None:
                return self._legacy
            seed, counter = self._seed, self._counter
            self._counter += 1
        return self._xp.random.default_rng(np.random.SeedSequence(seed, spawn_key=(counter,)))

    # The Generator methods numpy and cupy share, one draw each.
    def random(self, size=None, dtype=np.float64):
        return self.generator().random(size, dtype=dtype)

    def standard_normal(self, size=None, dtype=np.float64):
        return self.generator().standard_normal(size, dtype=dtype)

    def integers(self, low, high=None, size=None, dtype=np.int64):
        return self.generator().integers(low, high, size=size, dtype=dtype)
