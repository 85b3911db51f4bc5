"""Shared helpers for the benchmarks: interleaved timing (machines here are noisy, so
contenders alternate within one process) and a small table printer."""
from __future__ import annotations

import os
import time
from statistics import median


def measure(contenders: dict, repeat: int = 30, warmup: int = 3, per_call: bool = False,
            clock=time.perf_counter) -> dict:
    """Median seconds per call of each zero-argument callable, interleaving them so that
    machine noise hits all alike (`per_call`: every call's seconds, not the median;
    `clock`: time.process_time counts the process's CPU seconds instead of the wall's)."""
    for fn in contenders.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in contenders}
    for _ in range(repeat):
        for name, fn in contenders.items():
            t0 = clock()
            fn()
            times[name].append(clock() - t0)
    return times if per_call else {name: median(ts) for name, ts in times.items()}


def measure_blocks(contenders: dict, repeat: int, rounds: int = 5, clock=time.perf_counter) -> dict[str, float]:
    """Median seconds per call, each contender timed in blocks of its own (repeat / rounds
    calls), the blocks alternating so that slow drifts of the machine hit all alike. Before
    a block: a pause, for the other's threads (OpenBLAS's, ORT's, PyTorch's OpenMP threads
    spin a while after work) to go idle, and 2 untimed calls to re-warm caches and thread
    pools. `clock=time.process_time` measures the process's CPU time instead of the wall's:
    on a machine other jobs share, with one thread per contender, it leaves out the time
    the others' jobs took the core."""
    times = {name: [] for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            time.sleep(0.2)
            fn(), fn()
            for _ in range(max(3, repeat // rounds)):
                t0 = clock()
                fn()
                times[name].append(clock() - t0)
    return {name: float(median(ts)) for name, ts in times.items()}


def table(title: str, rows: list[tuple], headers: tuple) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(headers, *rows)]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))  # noqa: E731
    out = [f"\n{title}", line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join(out)


def predictor_call(predictor, x):
    """A zero-argument callable running an inference predictor (Keel's or Paddle
    Inference's: the same handle API) on its first input `x`, returning its first output:
    copy in, run, copy out, as a server does per request."""
    inp = predictor.get_input_handle(predictor.get_input_names()[0])
    out = predictor.get_output_handle(predictor.get_output_names()[0])

    def call():
        inp.copy_from_cpu(x)
        predictor.run()
        return out.copy_to_cpu()
    call.predictor = predictor
    return call


def peer_skipped(peer: str, install: str) -> None:
    """The one line a benchmark prints for a peer that is not installed (the peers are
    benchmark-only, never Keel dependencies)."""
    print(f"{peer} is not installed: skipped ({install} to compare with it)", flush=True)


def peer_cell(t: dict, peer: str) -> str:
    """A table cell for a peer's median in `t` and Keel's ratio to it."""
    return f"{t[peer] * 1e3:.1f} ms ({t['keel'] / t[peer]:.2f}x)" if peer in t else "not installed"


def blas_line() -> str:
    """Which BLAS numpy runs and with which kernels: OpenBLAS picks its kernels by CPU
    unless OPENBLAS_CORETYPE forces a type (some machines here set Haswell, AVX2, on
    AVX-512 CPUs, which makes numpy's GEMMs 1.6-1.8x slower than its own choice: unset
    OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE in the benchmark's command to compare runtimes
    on the machine's best kernels, as the peers use theirs). threadpoolctl, where
    installed, reports what was loaded; it is no dependency."""
    forced = {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE") if k in os.environ}
    try:
        import threadpoolctl
        libs = [f"{i['internal_api']} {i.get('version') or ''} {i.get('architecture') or ''} kernels, "
                f"{i['num_threads']} threads".replace("  ", " ")
                for i in threadpoolctl.threadpool_info() if i.get("user_api") == "blas"]
        found = "; ".join(libs) or "none found"
    except ImportError:
        found = "(pip install threadpoolctl to show which kernels)"
    extra = f"; forced by {', '.join(f'{k}={v}' for k, v in forced.items())}" if forced else ""
    return f"numpy's BLAS: {found}{extra}"
