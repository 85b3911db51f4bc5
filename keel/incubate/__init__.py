"""`paddle.incubate`: the names of it Keel has: `optimizer` (the large-model optimizer
wrappers)."""
from keel.incubate import optimizer

__all__ = ["optimizer"]
