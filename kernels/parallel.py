"""Splitting a kernel's independent work across the CPU's cores.

numpy's elementwise loops and copies run on one core while BLAS uses all of them; they
release the GIL, so parts of one large operation given to a few threads run at once.
`split_run(total, part, work)` cuts range(total) into one chunk per core when `work` (a
count of multiply-adds or element writes) is large enough to pay for the hand-off (about
20 us per part here), runs the chunks on a module-wide pool (the last in the calling
thread) and returns when all are done. Each `part(lo, hi)` must write only its own slice
of a preallocated output.

Only for numpy: a GPU's kernels are asynchronous launches on one stream, which threads
would contend for. Off by default: `KEEL_KERNEL_THREADS=N` turns it on with N threads
(`auto`: the cores this process may run on, at most 8). Measured on a 2-core machine
shared with other processes, alternating blocks in one process: at load average 4-5,
depthwise convolutions split in 2 ran 1.3-2x faster (wall time); at load 10-15 the
mobile CNNs' per-op medians summed to 0.55x of serial, each op waiting for a core the
other processes held. A machine of its own should enable it; that was not measured.
`using_threads(n)` sets the count for the calling thread while it runs a block (the
inference Predictor's `set_cpu_math_library_num_threads`, as PaddlePaddle sets its math
library's threads per running thread); the executor's pool threads keep their own count,
so ops already running side by side do not split further.
"""
from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import numpy as np

# Below this much work per part, the hand-off costs more than the second core gains
# (depthwise 3x3 on [1, 96, 12, 80]: 0.83 M multiply-adds, 0.15 ms serial, 0.17 ms split).
MIN_WORK_PER_PART = 600_000

_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None
_local = threading.local()  # .threads: this thread's count from using_threads (None: the environment's)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


_CORES = max(1, min(_cores(), 8))  # read once: a system call costs ~1 us per kernel call


def threads() -> int:
    """The calling thread's count (using_threads), else KEEL_KERNEL_THREADS's."""
    count = getattr(_local, "threads", None)
    if count is not None:
        return count
    env = os.environ.get("KEEL_KERNEL_THREADS", "1")
    return _CORES if env == "auto" else max(1, int(env))


@contextmanager
def using_threads(count: int):
    """`with using_threads(n):` kernels called from this thread split into up to n parts."""
    if int(count) < 1:
        raise ValueError(f"using_threads: need at least 1 thread, got {count}")
    previous = getattr(_local, "threads", None)
    _local.threads = int(count)
    try:
        yield
    finally:
        _local.threads = previous


def _get_pool(workers: int) -> ThreadPoolExecutor:
    global _pool
    with _lock:
        if _pool is None or _pool._max_workers < workers:
            _pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="keel-kernel")
        return _pool


def parts(xp, total: int, work: float) -> int:
    """How many parts to cut `total` items of `work` in all into (1: run serially)."""
    if xp is not np or total < 2 or work < 2 * MIN_WORK_PER_PART:
        return 1
    return int(max(1, min(threads(), total, work // MIN_WORK_PER_PART)))


def split_run(xp, total: int, part, work: float) -> None:
    """part(lo, hi) for consecutive chunks covering range(total), concurrently when it pays."""
    k = parts(xp, total, work)
    if k == 1:
        part(0, total)
        return
    bounds = [total * i // k for i in range(k + 1)]
    pool = _get_pool(k - 1)
    futures = [pool.submit(part, bounds[i], bounds[i + 1]) for i in range(k - 1)]
    error = None
    try:
        part(bounds[k - 1], bounds[k])
    except BaseException as exc:  # wait for the others before raising: they write into shared output
        error = exc
    for future in futures:
        try:
            future.result()
        except BaseException as exc:
            error = error or exc
    if error is not None:
        raise error
