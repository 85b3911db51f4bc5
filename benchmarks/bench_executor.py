"""Executor benchmarks: per-op overhead, fixed cost of a run, MLP forward vs hand-written
numpy, and peak memory with and without freeing intermediates.

    python benchmarks/bench_executor.py
"""
from __future__ import annotations

import argparse
import sys
import tracemalloc
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import blas_line, measure, table  # noqa: E402

import keel.program as pg  # noqa: E402
from keel.executor import Executor, Scope  # noqa: E402


def per_op_overhead(n_ops: int = 1000):
    """1,000 chained `y = y + 1` on a [4] tensor (each a `scale` op, as PaddlePaddle builds
    it) vs the floor: a Python loop over 1,000 pre-bound np.add(y, 1, out=y). The
    executor's generated function makes each such one-ufunc op a direct ufunc call into the
    previous op's dead buffer (executor/plan.py), so a second row gives the cost of an op
    through the generic path (a direct call of the bound kernel)."""
    main = pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, pg.Program()):
        y0 = pg.data("y", [4])
        y = y0
        for _ in range(n_ops):
            y = y + 1.0
    exe, scope = Executor(), Scope()
    feed = {"y": np.zeros(4, np.float32)}
    result, = exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    assert np.allclose(result, n_ops)

    one = pg.Program()
    with pg.unique_name.guard(), pg.program_guard(one, pg.Program()):
        a = pg.data("a", [4])
        b = a + 1.0
    exe.run(one, feed={"a": feed["y"]}, fetch_list=[b], scope=scope)

    buf = np.zeros(4, np.float32)
    adds = [np.add] * n_ops

    def floor():
        for f in adds:
            f(buf, 1, out=buf)

    # An op with no fast path (elementwise_max: the generic kernel, called with its bound
    # attributes by the generated function) vs np.maximum(y, one, out=y): what an op
    # costs that is a step of its own and not a single inlined ufunc call.
    main2 = pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main2, pg.Program()):
        y2 = pg.data("y", [4])
        step = pg.data("one", [4])
        for _ in range(n_ops):
            y2 = pg.maximum(y2, step)
    feed2 = {"y": feed["y"], "one": np.ones(4, np.float32)}
    result, = exe.run(main2, feed=feed2, fetch_list=[y2], scope=scope)
    assert np.allclose(result, 1)
    ones = np.ones(4, np.float32)
    maxes = [np.maximum] * n_ops

    def floor2():
        for f in maxes:
            f(buf, ones, out=buf)

    t = measure({"executor": lambda: exe.run(main, feed=feed, fetch_list=[y], scope=scope),
                 "floor": floor,
                 "executor2": lambda: exe.run(main2, feed=feed2, fetch_list=[y2], scope=scope),
                 "floor2": floor2}, repeat=30)
    # The fixed cost is timed on its own: right after 1,000 other calls the first few
    # microseconds go to cold caches, which is not what a run of a small program costs.
    t.update(measure({"one_op_run": lambda: exe.run(one, feed={"a": feed["y"]}, fetch_list=[b], scope=scope)},
                     repeat=200))
    ex, fl = t["executor"] / n_ops * 1e6, t["floor"] / n_ops * 1e6
    ex2, fl2 = t["executor2"] / n_ops * 1e6, t["floor2"] / n_ops * 1e6
    return [("per-op cost, 1000 chained scale ops", f"{ex:.2f} us", f"{fl:.2f} us", f"{ex / fl:.2f}x", "<= 2x"),
            ("per-op cost, 1000 y = max(y, one) (generic kernel)", f"{ex2:.2f} us", f"{fl2:.2f} us", f"{ex2 / fl2:.2f}x", ""),
            ("fixed cost of run() for a 1-op program", f"{t['one_op_run'] * 1e6:.1f} us", "", "", "< 20 us")]


def mlp_forward():
    """x[128,784] -> 1024 relu -> 1024 relu -> 10 softmax, vs the same math in numpy."""
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 1
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x = pg.data("x", [-1, 784])
        h = pg.nn.fc(x, 1024, activation="relu")
        h = pg.nn.fc(h, 1024, activation="relu")
        probs = pg.nn.softmax(pg.nn.fc(h, 10))
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    w = [scope.get(f"fc_{i}.w_0") for i in range(3)]
    b = [scope.get(f"fc_{i}.b_0") for i in range(3)]
    xb = np.random.default_rng(0).standard_normal((128, 784)).astype(np.float32)

    def numpy_floor():
        h = np.maximum(xb @ w[0] + b[0], 0)
        h = np.maximum(h @ w[1] + b[1], 0)
        z = h @ w[2] + b[2]
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    got, = exe.run(main, feed={"x": xb}, fetch_list=[probs], scope=scope)
    np.testing.assert_allclose(got, numpy_floor(), rtol=1e-4, atol=1e-6)
    t = measure({"keel": lambda: exe.run(main, feed={"x": xb}, fetch_list=[probs], scope=scope),
                 "numpy": numpy_floor}, repeat=40)
    return [("MLP forward (128x784 -> 1024 -> 1024 -> 10)", f"{t['keel'] * 1e3:.2f} ms",
             f"{t['numpy'] * 1e3:.2f} ms", f"{t['keel'] / t['numpy']:.2f}x", "<= 1.1x")]


def peak_memory(layers: int = 50, rows: int = 256, cols: int = 4096):
    """A deep chain of [256, 4096] float32 activations: peak traced memory with freeing vs
    without (keep_intermediates), against the largest live set (input + 2 activations)."""
    main = pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, pg.Program()):
        x = pg.data("x", [rows, cols])
        h = x
        for _ in range(layers):
            h = pg.tanh(h)
    xb = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    one = xb.nbytes
    peaks = {}
    for label, keep in (("freeing", False), ("keep_intermediates", True)):
        exe = Executor(keep_intermediates=keep)
        exe.run(main, feed={"x": xb}, fetch_list=[h], scope=Scope())  # compile outside the trace
        tracemalloc.start()
        exe.run(main, feed={"x": xb}, fetch_list=[h], scope=Scope())
        peaks[label] = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    live = 2 * one  # the value being read and the one being written (the feed is freed after use)
    return [(f"peak memory, {layers} x tanh on [{rows},{cols}] ({one / 2**20:.0f} MiB each)",
             f"{peaks['freeing'] / 2**20:.0f} MiB", f"{peaks['keep_intermediates'] / 2**20:.0f} MiB (no freeing)",
             f"{peaks['freeing'] / live:.2f}x live set", "<= 1.2x")]


def main(argv=None):
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)
    print(blas_line(), flush=True)
    rows = per_op_overhead() + mlp_forward() + peak_memory()
    print(table("Executor benchmarks (medians; ratio = Keel / floor)", rows,
                ("workload", "Keel", "floor", "ratio", "target")))


if __name__ == "__main__":
    main()
