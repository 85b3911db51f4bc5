"""The random stream of an executor, shared by its random kernels (init ops, dropout).

Plans bind this object once as the kernels' `rng`; it forwards to the current numpy/cupy
Generator, so reseeding or restoring a checkpointed state takes effect without
recompiling. Its state is plain data (see `get_state`), so checkpoints can save it."""
from __future__ import annotations


class RandomState:
    def __init__(self, xp, seed: int | None = None):
        self._xp = xp
        self.generator = xp.random.default_rng(seed)

    def seed(self, seed: int | None) -> None:
        self.generator = self._xp.random.default_rng(seed)

    def get_state(self) -> dict:
        return self.generator.bit_generator.state

    def set_state(self, state: dict) -> None:
        self.generator.bit_generator.state = state

    def __getattr__(self, name):  # random(), normal(), integers(), ... of the Generator
        return getattr(self.generator, name)
