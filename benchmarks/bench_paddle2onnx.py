"""Op coverage of Keel's ONNX exporter against paddle2onnx on the same legacy files: every
model of the zoo (tests/fixtures/zoo/, PaddlePaddle 3.3.1's `.pdmodel` files), exported by
both, each ONNX model run in ONNX Runtime on the zoo's recorded inputs and compared with
Paddle Inference's recorded outputs (passes off).

    PYTHONPATH=. $PADDLE_PYTHON benchmarks/bench_paddle2onnx.py [names] [--opset 17]

($PADDLE_PYTHON: a python with paddle2onnx 2.1.0 (and PaddlePaddle 3.3.1, which it may
import), onnx, onnxruntime and Keel's dependencies; paddle2onnx is a peer here, never a Keel
dependency. Not run by the tests.)

Per model: whether each exporter converts it ("ok"), or why not (the first line of its
error), and, where it does, max|onnx - paddle| over the outputs, and whether that is
within the zoo's bar (1e-4 + 1e-4 * max|paddle|, tests/test_model_zoo.py). An output whose
shape differs from Paddle's counts as a mismatch ("shape").
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "zoo"))
from common import table  # noqa: E402
from zoo_files import NAMES, feeds, unpack  # noqa: E402


def keel_export(prefix, opset):
    from keel.program.io import load_params, load_program
    from keel.program.onnx import program_to_onnx
    program = load_program(prefix.with_suffix(".pdmodel"))
    model = program_to_onnx(program, load_params(program, prefix.with_suffix(".pdiparams")),
                            opset_version=opset)
    return model.SerializeToString()


def paddle2onnx_export(prefix, opset):
    """paddle2onnx's model, converted in a child process: on an op it lacks, paddle2onnx
    aborts the whole process (SIGABRT), so the reason is read from the child's log."""
    out = prefix.with_suffix(".p2o.onnx")
    script = ("import sys, paddle2onnx; paddle2onnx.export(sys.argv[1], sys.argv[2], sys.argv[3], "
              "opset_version=int(sys.argv[4]), auto_upgrade_opset=True, verbose=True)")
    run = subprocess.run([sys.executable, "-c", script, str(prefix.with_suffix(".pdmodel")),
                          str(prefix.with_suffix(".pdiparams")), str(out), str(opset)],
                         capture_output=True, text=True, timeout=600)
    if run.returncode != 0 or not out.exists():
        raise RuntimeError(_p2o_reason(run.stdout + run.stderr) or f"exit status {run.returncode}")
    return out.read_bytes()


def _p2o_reason(log: str) -> str:
    """The ops paddle2onnx names as unsupported, else its first error line."""
    lines = [line.strip() for line in log.splitlines() if line.strip()]
    ops = [line.split("=")[-1].strip() for line in lines if line.startswith("NOT_IMPLEMENTED") or
           line.startswith("There's") or "is not supported" in line]
    if ops:
        return "unsupported: " + "; ".join(ops)
    errors = ([line.split("]")[-1].strip() for line in lines if line.startswith("[ERROR][Paddle2ONNX]")]
              or [line for line in lines if "Error" in line and "Summary" not in line])
    return errors[0] if errors else ""


def max_error(model_bytes, recorded):
    """(max |onnx - paddle| over the outputs, within the zoo's bar?) of the model in ORT,
    outputs matched to Paddle's in order."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(model_bytes, options, providers=["CPUExecutionProvider"])
    inputs = feeds(recorded)
    got = session.run(None, {i.name: inputs[i.name] for i in session.get_inputs()})
    worst, within = 0.0, True
    for i, value in enumerate(got[:len(recorded["output_names"])]):
        want = recorded[f"ir_off:{i}"]
        if value.shape != want.shape:
            return "shape", False
        if want.size:
            err = float(np.abs(value.astype(np.float64) - want).max())
            worst = max(worst, err)
            within &= err <= 1e-4 + 1e-4 * float(np.abs(want).max())
    return worst, within


def contender(export, prefix, recorded, opset):
    """(converted?, its error or why not, within the bar?)."""
    try:
        model = export(prefix, opset)
    except Exception as e:  # noqa: BLE001  (a converter's refusal is a result here)
        return "no", (str(e).strip().splitlines() or [type(e).__name__])[0][:90], False
    try:
        err, within = max_error(model, recorded)
    except Exception as e:  # noqa: BLE001  (ORT refusing the file is a result too)
        return "ort fails", (str(e).strip().splitlines() or [type(e).__name__])[0][:60], False
    return "ok", (err if isinstance(err, str) else f"{err:.2g}"), within


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="bench_paddle2onnx.py", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="zoo models (default: all)")
    parser.add_argument("--opset", type=int, default=17)
    args = parser.parse_args(argv)
    try:
        import onnxruntime  # noqa: F401
        import paddle2onnx
    except ImportError as e:
        print(f"bench_paddle2onnx: needs paddle2onnx 2.1.0 and onnxruntime ({e}); "
              f"pip install paddlepaddle==3.3.1 paddle2onnx==2.1.0 onnx onnxruntime")
        return 2
    rows, counts = [], {"keel": 0, "paddle2onnx": 0}
    for name in args.names or NAMES:
        with tempfile.TemporaryDirectory() as directory:
            prefix, recorded = unpack(name, directory)
            ours = contender(keel_export, prefix, recorded, args.opset)
            p2o = contender(paddle2onnx_export, prefix, recorded, args.opset)
        counts["keel"] += ours[2]
        counts["paddle2onnx"] += p2o[2]
        rows.append([name, ours[0], ours[1], "yes" if ours[2] else "no", p2o[0], p2o[1], "yes" if p2o[2] else "no"])
        print(f"{name}: keel {ours[0]} {ours[1]}, paddle2onnx {p2o[0]} {p2o[1]}", file=sys.stderr, flush=True)
    print(table(f"ONNX export of the zoo's legacy files, opset {args.opset}: Keel vs paddle2onnx "
                f"{paddle2onnx.__version__}, each run in ONNX Runtime against Paddle Inference's recorded outputs",
                rows, ("model", "Keel", "max err", "in bar", "paddle2onnx", "max err", "in bar")))
    print(f"within the zoo's bar: Keel {counts['keel']}/{len(rows)}, paddle2onnx {counts['paddle2onnx']}/{len(rows)}")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("FLAGS_enable_pir_api", "0")
    sys.exit(main())
