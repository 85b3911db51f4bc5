"""Model-zoo latency: Keel's Predictor vs Paddle Inference on every model of the zoo
(tests/fixtures/zoo/), both with their graph passes on, in one process.

    FLAGS_enable_pir_api=0 PYTHONPATH=. $PADDLE_PYTHON benchmarks/bench_zoo.py [names] [--repeat 20] [--threads 2]

($PADDLE_PYTHON: a python with PaddlePaddle 3.3.1 and Keel's dependencies; PaddlePaddle is a
benchmark peer here, never a Keel dependency. Not run by the tests.)

Each model gets its recorded inputs (batch 2). A timed call is what a server does per request:
copy the inputs in, run, copy the outputs out. Keel: `switch_ir_optim(True)`; Paddle
Inference: `switch_ir_optim(True)` (its default CPU passes, oneDNN included),
`set_cpu_math_library_num_threads(threads)` for both. Contenders are timed in blocks of their
own, alternating (common.measure_blocks); medians and Keel's ratio are printed,
then the models over 3x Paddle Inference's time.

On a loaded machine, numpy's OpenBLAS threads dominate small models: Keel's VGG-BN here took
48 ms a call (median; min 0.39 ms) with OpenBLAS's default threads and 0.31 ms with
OPENBLAS_NUM_THREADS=1. For ratios that mean something there, run both single-threaded:
`OPENBLAS_NUM_THREADS=1 ... bench_zoo.py --threads 1`.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "zoo"))
from common import blas_line, measure_blocks, peer_skipped, table  # noqa: E402
from zoo_files import NAMES, feeds, unpack  # noqa: E402

from keel.executor.inference import Config, create_predictor  # noqa: E402


def keel_call(prefix, inputs, threads):
    config = Config(str(prefix.with_suffix(".pdmodel")), str(prefix.with_suffix(".pdiparams")))
    config.switch_ir_optim(True)
    config.set_cpu_math_library_num_threads(threads)
    predictor = create_predictor(config)
    return _call(predictor, inputs)


def paddle_call(paddle, prefix, inputs, threads):
    config = paddle.inference.Config(str(prefix.with_suffix(".pdmodel")), str(prefix.with_suffix(".pdiparams")))
    config.disable_gpu()
    config.disable_glog_info()
    config.switch_ir_optim(True)
    config.set_cpu_math_library_num_threads(threads)
    return _call(paddle.inference.create_predictor(config), inputs)


def _call(predictor, inputs):
    """One request: inputs in, run, outputs out (the same handle API in Keel and Paddle)."""
    ins = [(predictor.get_input_handle(n), inputs[n]) for n in predictor.get_input_names()]
    outs = [predictor.get_output_handle(n) for n in predictor.get_output_names()]

    def call():
        for handle, value in ins:
            handle.copy_from_cpu(value)
        predictor.run()
        return [h.copy_to_cpu() for h in outs]
    return call


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="zoo models (default: all)")
    parser.add_argument("--repeat", type=int, default=20)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args(argv)
    print(blas_line(), flush=True)
    try:
        import paddle
    except ImportError:
        peer_skipped("PaddlePaddle", "run with a python that has paddlepaddle 3.3.1")
        return 0
    rows, slow = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.names or NAMES:
            prefix, recorded = unpack(name, tmp)
            inputs = feeds(recorded)
            t = measure_blocks({"keel": keel_call(prefix, inputs, args.threads),
                                "paddle": paddle_call(paddle, prefix, inputs, args.threads)}, args.repeat)
            ratio = t["keel"] / t["paddle"]
            if ratio > 3:
                slow.append(f"{name} ({ratio:.1f}x)")
            rows.append((name, str(recorded["family"]), f"{t['keel'] * 1e3:.2f}", f"{t['paddle'] * 1e3:.2f}",
                         f"{ratio:.2f}x"))
            print(*rows[-1], flush=True)
    print(table(f"Model zoo, batch 2, {args.threads} threads, medians (ms)", rows,
                ("model", "family", "Keel", "Paddle Inference", "Keel / Paddle")))
    print("\nover 3x Paddle Inference's time: " + (", ".join(slow) if slow else "none"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
