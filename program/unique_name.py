"""Unique names in PaddlePaddle's style: `fc_0`, then `fc_0.w_0`, `fc_0.tmp_0`, ...

One counter per key, shared by every program built in the process (as in PaddlePaddle),
so two layers never collide even across programs. `guard()` starts a fresh namespace,
which makes names reproducible in tests and lets one script build the same model twice.
"""
from __future__ import annotations

import contextlib
from collections import defaultdict

_counters: defaultdict[str, int] = defaultdict(int)


def generate(key: str) -> str:
    n = _counters[key]
    _counters[key] = n + 1
    return f"{key}_{n}"


@contextlib.contextmanager
def guard():
    """Use a fresh set of counters inside the block, restoring the old ones after."""
    global _counters
    saved, _counters = _counters, defaultdict(int)
    try:
        yield
    finally:
        _counters = saved
