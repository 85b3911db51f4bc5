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
with the op type and input shapes). Each profiler adds a cost per op, ONNX Runtime's far
more than Keel's (its profiled runs take 1.6x-3.4x its unprofiled ones, Keel's 1.0x-1.3x),
so the table prints both runtimes' profiled and unprofiled totals: a class where Keel
takes several times ONNX Runtime's profiled time is slower still against its real one.
(Subtracting a mean added cost per op from each class was tried: the cost is not uniform,
and cheap classes came out negative.)
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


def _per_run(entries, runs: int) -> dict[str, tuple[float, float]]:
    """Class -> (seconds, calls) per run, from (class, seconds, calls) over `runs` runs."""
    totals = defaultdict(lambda: [0.0, 0.0])
    for name, seconds, calls in entries:
        totals[name][0] += seconds / runs
        totals[name][1] += calls / runs
    return {name: (seconds, calls) for name, (seconds, calls) in totals.items()}


def keel_classes(profiler, runs: int) -> dict[str, tuple[float, float]]:
    """Class -> (seconds, calls) per run, from a Profiler that recorded `runs` runs."""
    return _per_run(((op_class(stats.name.split(" -> ")[0], stats.shapes), stats.total, stats.calls)
                     for stats in profiler.ops().values()), runs)


def ort_classes(make_session, feed: dict, runs: int) -> dict[str, tuple[float, float]]:
    """Class -> (seconds, calls) per run of ONNX Runtime's node kernels over `runs`
    profiled runs: `make_session(options)` builds the session with the benchmark's options
    plus profiling on."""
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
    nodes = (e["args"] | {"dur": e["dur"]} for e in events
             if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"))
    return _per_run(((op_class(n["op_name"], [next(iter(s.values())) for s in n.get("input_type_shape", [])]),
                      n["dur"] * 1e-6, 1) for n in nodes), runs)


def rows(keel: dict, ort: dict) -> list[tuple]:
    """Table rows: class, then for Keel and ORT the ops and profiled ms per run and the
    share of the profiled total, and Keel / ORT; the last row all ops."""
    keel_all, ort_all = ((sum(t for t, _ in d.values()), sum(n for _, n in d.values())) for d in (keel, ort))
    out = []
    for name, (k, kn), (o, on) in [(name, keel.get(name, (0.0, 0.0)), ort.get(name, (0.0, 0.0)))
                                   for name in ORDER if name in keel or name in ort] + [("all ops", keel_all, ort_all)]:
        out.append((name, f"{kn:.0f}", f"{k * 1e3:.3f}", f"{k / keel_all[0]:.1%}", f"{on:.0f}", f"{o * 1e3:.3f}",
                    f"{o / ort_all[0]:.1%}", f"{k / o:.2f}x" if o else "-"))
    return out


HEADERS = ("op class", "Keel ops", "Keel ms", "share", "ORT ops", "ORT ms", "share", "Keel/ORT")
