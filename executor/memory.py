"""Keeping freed memory mapped, so the next step's arrays do not page-fault it back in.

A training step allocates and frees the same large arrays every step (activations,
gradients, im2col buffers of a few MiB each). glibc's malloc serves blocks above its mmap
threshold with fresh mmaps and returns freed memory at the heap's top to the OS once it
exceeds the trim threshold; either way the next step touches new pages, and every 4 KiB
page costs a fault. Measured here, that was a third of the CNN training step (54 ms ->
33 ms with the settings below) and a fifth of the MLP step.

`tune_malloc()` (called when the first Executor is made) raises the mmap threshold to its
maximum (32 MiB: larger blocks still get their own mmap and go back to the OS on free) and
the trim threshold to 1 GiB (at most that much freed heap stays mapped for reuse). The
settings are process-wide; set KEEL_TUNE_MALLOC=0 to leave malloc as it is. Only glibc
has mallopt: elsewhere (macOS, musl) this does nothing.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

M_TRIM_THRESHOLD = -1   # glibc's mallopt parameter numbers (malloc.h)
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20   # glibc's largest accepted value on 64-bit systems
TRIM_THRESHOLD = 1 << 30

_tuned: bool | None = None  # None: not tried yet


def tune_malloc() -> bool:
    """Apply the settings above once per process; True if they are in effect."""
    global _tuned
    if _tuned is None:
        _tuned = _apply()
    return _tuned


def _apply() -> bool:
    if os.environ.get("KEEL_TUNE_MALLOC", "1").lower() in ("0", "false", "no", "off"):
        return False
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))


def peak_bytes(fn, *args, **kwargs):
    """(fn's result, the peak of memory allocated through Python's allocators while it ran,
    above what was allocated when it started), in bytes. numpy reports its array buffers to
    tracemalloc, so on a CPU place this is the peak of live arrays during a run: what
    freeing intermediates after their last use (executor/plan.py) and recomputation save
    show up here. cupy's device memory is not counted (use its memory pool's figures)."""
    import tracemalloc
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        base = tracemalloc.get_traced_memory()[0]
        result = fn(*args, **kwargs)
        return result, tracemalloc.get_traced_memory()[1] - base
    finally:
        if started:
            tracemalloc.stop()
