"""A/B of the mobile CNNs' kernels (issue 15) against another Keel checkout: the depthwise
convolutions, activations, squeeze-excitation pooling, softmax and nearest upsampling of
`benchmarks/mobile_cnns.py`'s three models, on their own shapes.

    mkdir ../keel-old && git archive <old commit> | tar -x -C ../keel-old
    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_mobile_kernels.py --base ../keel-old

Each kernel runs on the same inputs in one process, old and new alternating in blocks,
timed by process CPU time (the kernels are single-threaded; one BLAS thread keeps
OpenBLAS's spinning threads out of the figures); it prints the medians and old/new.
The old checkout's kernel modules are loaded under other names, their registrations
discarded, so both run side by side.
"""
from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

import numpy as np  # noqa: E402

HARD_SWISH = {"threshold": 6.0, "scale": 6.0, "offset": 3.0}
SE_POOL = dict(ksize=[1, 1], strides=[1, 1], paddings=[0, 0], ceil_mode=False, exclusive=True, data_format="NCHW",
               pooling_type="avg", global_pooling=False, adaptive=True, padding_algorithm="EXPLICIT")
# (x shape, kernel, strides, padding) of the models' depthwise convolutions
DEPTHWISE = [((1, 288, 2, 160), 5, (1, 1), 2), ((1, 120, 3, 160), 5, (1, 1), 2), ((1, 144, 3, 160), 5, (2, 1), 2),
             ((1, 48, 6, 160), 5, (2, 1), 2), ((1, 48, 6, 160), 3, (1, 1), 1), ((1, 40, 12, 160), 3, (2, 1), 1),
             ((1, 200, 2, 96), 5, (1, 1), 2), ((1, 88, 3, 96), 5, (1, 1), 2), ((1, 8, 160, 240), 3, (1, 1), 1),
             ((1, 32, 160, 240), 3, (2, 2), 1), ((1, 40, 80, 120), 3, (1, 1), 1), ((1, 40, 80, 120), 5, (2, 2), 2),
             ((1, 64, 40, 60), 5, (1, 1), 2), ((1, 336, 20, 30), 3, (1, 1), 1), ((1, 480, 10, 15), 5, (1, 1), 2)]
# (op, attrs, X shape) of the other kernels
UNARY = ([("hard_swish", HARD_SWISH, s) for s in [(1, 288, 2, 160), (1, 120, 3, 160), (1, 8, 160, 240),
                                                  (1, 336, 20, 30)]]
         + [("sigmoid", {}, (1, 1, 320, 480)), ("relu", {}, (1, 32, 160, 240)), ("relu", {}, (1, 10, 1, 1)),
            ("hard_sigmoid", {"slope": 0.2, "offset": 0.5}, (1, 240, 1, 1)),
            ("swish", {"beta": 1.0}, (1, 96, 20, 30)), ("relu6", {"threshold": 6.0}, (1, 96, 20, 30)),
            ("pool2d", SE_POOL, (1, 288, 2, 160)), ("pool2d", SE_POOL, (1, 64, 40, 60)),
            ("softmax", {"axis": -1}, (1, 80, 6625))])
NEAREST = [((1, 96, 40, 60), 2.0), ((1, 24, 20, 30), 4.0), ((1, 24, 10, 15), 8.0)]


def load_old(base: Path):
    """The old checkout's conv, nn and activation modules ({op type: kernel function} too),
    imported under other names with kernel registration switched off."""
    import keel.kernels.registry as registry
    kernels_of, real = {}, registry.kernel

    def record(op_type, **_):
        def keep(fn):
            kernels_of[op_type] = fn
            return fn
        return keep
    registry.kernel = record
    modules = {}
    try:
        for name in ("conv", "nn", "activation"):
            spec = importlib.util.spec_from_file_location(f"old_{name}", base / "kernels" / f"{name}.py")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
            modules[name] = module
    finally:
        registry.kernel = real
    return modules, kernels_of


def ab(old, new, blocks: int) -> tuple:
    """Medians (seconds) of old() and new() over alternating blocks of calls."""
    start = time.process_time()
    old()
    reps = min(2000, max(3, int(3e-3 / max(time.process_time() - start, 1e-7))))
    times = ([], [])
    for _ in range(blocks):
        for fn, acc in zip((old, new), times):
            start = time.process_time()
            for _ in range(reps):
                fn()
            acc.append((time.process_time() - start) / reps)
    return statistics.median(times[0]), statistics.median(times[1])


def report(label, old, new, blocks):
    t_old, t_new = ab(old, new, blocks)
    print(f"{label:44s} old {t_old * 1e6:9.1f} us  new {t_new * 1e6:9.1f} us  old/new {t_old / t_new:5.2f}",
          flush=True)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, type=Path, help="the other (old) checkout's root folder")
    parser.add_argument("--blocks", type=int, default=9, help="alternating blocks per kernel (default 9)")
    parser.add_argument("--only", nargs="*", default=[], help="only the rows whose label contains one of these")
    args = parser.parse_args(argv)
    if not (args.base / "kernels" / "conv.py").is_file():
        parser.error(f"--base {args.base}: no kernels/conv.py there")
    from keel.executor.kernel_call import bind
    from keel.executor.memory import tune_malloc
    from keel.kernels import conv, nn
    tune_malloc()  # as the executor does: freed blocks reused, not page-faulted in again
    old, old_kernels = load_old(args.base)
    rng = np.random.default_rng(0)

    def wanted(label):
        return not args.only or any(o in label for o in args.only)

    for shape, k, strides, p in DEPTHWISE:
        label = f"depthwise {list(shape)} {k}x{k} s{strides}"
        if not wanted(label):
            continue
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((shape[1], 1, k, k)).astype(np.float32)
        oh, ow = (shape[2] + 2 * p - k) // strides[0] + 1, (shape[3] + 2 * p - k) // strides[1] + 1
        call = (np, x, w, strides, (1, 1), [p] * 4, shape[1], oh, ow)
        np.testing.assert_allclose(old["conv"].conv2d_nchw(*call), conv.conv2d_nchw(*call), rtol=0, atol=1e-4)
        report(label, lambda: old["conv"].conv2d_nchw(*call), lambda: conv.conv2d_nchw(*call), args.blocks)
    for op, attrs, shape in UNARY:
        label = f"{op} {list(shape)}"
        if not wanted(label):
            continue
        x = (rng.standard_normal(shape) * 4).astype(np.float32)
        new_fn, _ = bind(op, attrs)
        np.testing.assert_allclose(old_kernels[op](np, x, **attrs), new_fn(x), rtol=2e-6, atol=1e-7)
        report(label, lambda: old_kernels[op](np, x, **attrs), lambda: new_fn(x), args.blocks)
    for shape, factor in NEAREST:
        label = f"nearest_interp_v2 {list(shape)} x{factor:g}"
        if not wanted(label):
            continue
        x = rng.standard_normal(shape).astype(np.float32)
        call = (np, x, None, None, None, "NCHW", -1, -1, -1, [factor, factor], "nearest", False, 0)
        np.testing.assert_array_equal(old["nn"]._interp(*call), nn._interp(*call))
        report(label, lambda: old["nn"]._interp(*call), lambda: nn._interp(*call), args.blocks)
    return 0


if __name__ == "__main__":
    sys.exit(main())
