"""Where Keel's and ONNX Runtime's time goes on the same model, side by side, in op classes
both runtimes share: the mobile CNN benchmark's --profile (bench_inference.py).

The two runtimes name their ops differently (Keel runs PaddlePaddle's ops, fused at load;
ONNX Runtime its own, fused and laid out as NCHWc blocks on AVX-512 machines), so each op
is put in a class by what it computes: convolutions by their filter (depthwise, 1x1, the
other dense kernels), pooling, elementwise work (activations, adds, multiplies: fused into
convolutions where either runtime could), fc / matmul, resizing, ONNX Runtime's layout
reorders (it converts maps to and from its blocked layout; Keel has none), and the rest.

Keel's side comes from executor/profiler.py (per op, with input shapes); ONNX Runtime's
from its own profiler (SessionOptions.enable_profiling: a JSON event per node per run,
with the op type and input shapes). Both profilers add their own cost per op, so the
class shares, and the ratios between classes, are what to read; each side's median call
time, unprofiled, is printed with its table.
"""
from __future__ import annotations

import json
import os
import tempfile
from collections import defaultdict

CONV_TYPES = {"conv2d", "depthwise_conv2d", "fused_conv2d", "Conv", "FusedConv"}
CLASSES = {
    "pooling": {"pool2d", "MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool"},
    "conv transpose": {"conv2d_transpose", "ConvTranspose"},
    "elementwise": {"relu", "relu6", "sigmoid", "tanh", "hard_swish", "hard_sigmoid", "swish", "scale",
                    "elementwise_add", "elementwise_mul", "elementwise_sub", "elementwise_div",
                    "fused_elemwise_activation", "Relu", "Sigmoid", "Tanh", "HardSwish", "HardSigmoid", "Clip",
                    "Add", "Mul", "Sub", "Div", "Sum"},
    "fc / matmul": {"fc", "mul", "matmul", "matmul_v2", "Gemm", "MatMul", "FusedGemm", "FusedMatMul"},
    "resize": {"nearest_interp_v2", "bilinear_interp_v2", "Resize", "Upsample"},
    "layout reorder (ORT)": {"ReorderInput", "ReorderOutput"},
}
ORDER = ("conv depthwise", "conv 1x1", "conv dense kxk", "conv transpose", "pooling", "elementwise",
         "fc / matmul", "resize", "layout reorder (ORT)", "other")


def op_class(op_type: str, shapes) -> str:
    """The class of an op of `op_type` whose input shapes are `shapes` (the input, then
    the filter, for a convolution; ONNX Runtime's blocked filters keep kh, kw at 2 and 3)."""
    if op_type in CONV_TYPES:
        x, w = shapes[0], shapes[1]
        if w[1] == 1 and x[1] > 1:
            return "conv depthwise"
        return "conv 1x1" if tuple(w[2:4]) == (1, 1) else "conv dense kxk"
    return next((name for name, types in CLASSES.items() if op_type in types), "other")


def keel_classes(profiler, runs: int) -> dict[str, float]:
    """Class -> seconds per run, from a Profiler that recorded `runs` runs."""
    seconds = defaultdict(float)
    for stats in profiler.ops().values():
        seconds[op_class(stats.name.split(" -> ")[0], stats.shapes)] += stats.total / runs
    return dict(seconds)


def ort_classes(make_session, feed: dict, runs: int) -> dict[str, float]:
    """Class -> seconds per run of ONNX Runtime's node kernels over `runs` profiled runs
    (after 5 unprofiled ones): `make_session(options)` builds the session with the
    benchmark's options plus profiling on."""
    import onnxruntime as ort
    with tempfile.TemporaryDirectory() as tmp:
        options = ort.SessionOptions()
        options.enable_profiling = True
        options.profile_file_prefix = os.path.join(tmp, "ort")
        session = make_session(options)
        for _ in range(runs):
            session.run(None, feed)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    seconds = defaultdict(float)
    for event in events:
        if event.get("cat") != "Node" or not event["name"].endswith("_kernel_time"):
            continue
        args = event["args"]
        shapes = [next(iter(s.values())) for s in args.get("input_type_shape", [])]
        seconds[op_class(args["op_name"], shapes)] += event["dur"] * 1e-6 / runs
    return dict(seconds)


def rows(keel: dict, ort: dict) -> list[tuple]:
    """Table rows: class, Keel ms / run and share, ORT ms / run and share, Keel / ORT."""
    keel_total, ort_total = sum(keel.values()), sum(ort.values())
    out = []
    for name in ORDER:
        k, o = keel.get(name, 0.0), ort.get(name, 0.0)
        if k or o:
            out.append((name, f"{k * 1e3:.3f}", f"{k / keel_total:.1%}", f"{o * 1e3:.3f}", f"{o / ort_total:.1%}",
                        f"{k / o:.2f}x" if o else "-"))
    out.append(("all ops", f"{keel_total * 1e3:.3f}", "100%", f"{ort_total * 1e3:.3f}", "100%",
                f"{keel_total / ort_total:.2f}x"))
    return out


HEADERS = ("op class", "Keel ms/run", "share", "ORT ms/run", "share", "Keel/ORT")
