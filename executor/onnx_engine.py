"""ONNX Runtime as the Predictor's engine: `Config.enable_onnxruntime()` (Paddle Inference's switch).

The Predictor loads and optimizes the program as for Keel's own engine, with the passes
whose results are plain ops (ONNX_PASSES: no fused op, no weight layout only Keel's kernels
read), exports it in memory (keel.program.onnx.program_to_onnx; the feeds' -1 dimensions stay
symbolic) and hands the ModelProto to one `onnxruntime.InferenceSession`. ORT's own graph
optimizations fold what Keel's fusions would (batch_norm into conv, bias and activation into
conv/GEMM), so the plain program is what it gets.

Session settings, from the Config:
- threads: intra_op_num_threads = `set_cpu_math_library_num_threads` (1 unless set, as in
  Paddle Inference), inter_op_num_threads = 1 (ops run one after another);
- graph optimizations: left at ORT's default unless `enable_ort_optimization()` asks for
  ORT_ENABLE_ALL, as Paddle Inference does; ORT's default is ORT_ENABLE_ALL already, so the
  switch changes nothing with onnxruntime 1.x (in Paddle Inference neither);
- execution providers (`providers`): TensorrtExecutionProvider for `enable_tensorrt_engine`
  (trt_fp16_enable at precision Half), CUDAExecutionProvider for `enable_use_gpu`, each
  where the installed onnxruntime has it; otherwise the CPU, with the warning Keel's own GPU
  fallback gives. Precision Half on CUDA without TensorRT: Keel's float16 conversion
  (convert_to_fp16) runs before the export.

One session serves a predictor and all its clones (InferenceSession.run is thread-safe).
Anything that keeps the program from running on ORT (onnx or onnxruntime not installed, an op
with no ONNX translation, a model ORT refuses) is an OrtUnavailable carrying one line; the
Predictor then warns once and runs Keel's engine.
"""
from __future__ import annotations

import threading
import time
import warnings

from keel.executor.profiler import listeners
from keel.program.errors import KeelError

INSTALL = 'pip install onnx onnxruntime, or pip install -e ".[onnx]" in the Keel checkout'
# Keel's passes whose output is ops any converter knows; the others make fused ops
# (fused_conv2d, fc, fused_elementwise_*) or weight layouts only Keel's kernels read.
ONNX_PASSES = ("eliminate_dead_code", "remove_identity", "fold_constants", "fold_batch_norm", "convert_to_fp16")
CPU, CUDA, TENSORRT = "CPUExecutionProvider", "CUDAExecutionProvider", "TensorrtExecutionProvider"


class OrtUnavailable(Exception):
    """Why ONNX Runtime cannot run a program (one line, for the fallback warning)."""


class OrtRunError(KeelError, RuntimeError):
    """ONNX Runtime failed while running an exported program (its message names the node)."""


class OrtFallbackWarning(RuntimeWarning):
    """`enable_onnxruntime()` was asked for, but Keel's engine runs the model (the message says why)."""


def import_packages():
    """(onnx, onnxruntime): the export needs the one, the session the other; OrtUnavailable
    saying what to install when either is missing."""
    try:
        import onnx
        import onnxruntime
    except ImportError as e:
        raise OrtUnavailable(f"the {e.name or 'onnxruntime'} package is not installed ({INSTALL})") from None
    return onnx, onnxruntime


def import_onnxruntime():
    """The onnxruntime module, or OrtUnavailable saying what to install (onnx too)."""
    return import_packages()[1]


def providers(config, ort) -> tuple[list, str | None]:
    """(the execution providers for ORT, in preference order with their options; why a GPU
    request runs on the CPU, or None). Warns, as Keel's own GPU fallback does, when the GPU
    asked for is not one the installed onnxruntime can use (pointing at the caller of
    create_predictor, from which this is called 5 frames down)."""
    if not config.use_gpu():
        return [CPU], None
    available = set(ort.get_available_providers())
    device = {"device_id": config.gpu_device_id()}
    chain = []
    if config.tensorrt_engine_enabled() and TENSORRT in available:
        chain.append((TENSORRT, {**device, "trt_fp16_enable": config._precision.name == "Half"}))
    if CUDA in available:
        chain.append((CUDA, device))
    if chain:
        return chain + [CPU], None
    reason = (f"the installed onnxruntime has no {CUDA} (its providers: {', '.join(sorted(available))}; "
              f"pip install onnxruntime-gpu)")
    warnings.warn(f"{config._gpu_request()} with enable_onnxruntime(): {reason}; running on the CPU in float32",
                  RuntimeWarning, stacklevel=6)
    return [CPU], reason


def session_options(config, ort):
    options = ort.SessionOptions()
    options.intra_op_num_threads = config.cpu_math_library_num_threads()
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    if config._ort_optimization:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: ORT's warnings about unused initializers are noise here
    return options


class OrtEngine:
    """One exported program in one InferenceSession, shared by a predictor and its clones.
    `runner(scope, observe, profiler)` gives a predictor's run function; with `observe` (hooks
    registered) it runs a second session, made on first use, that also returns every
    intermediate value. `chain`: the execution providers (`providers`)."""

    def __init__(self, config, program, params: dict, feeds: list[str], fetches: list[str], chain: list,
                 gpu_fallback: str | None = None):
        self.onnx, self.ort = import_packages()
        self.providers, self.gpu_fallback = chain, gpu_fallback
        self._config, self._program, self._params = config, program, params
        self._feeds, self._fetches = list(feeds), list(fetches)
        self.session = self._session(intermediates=False)
        self._observing = None  # the session with intermediates, made when hooks ask for it
        self._lock = threading.Lock()

    def _session(self, intermediates: bool):
        from keel.program.onnx import OnnxExportError, program_to_onnx
        invalid = (self.onnx.checker.ValidationError, self.onnx.shape_inference.InferenceError)
        try:
            model = program_to_onnx(self._program, self._params, self._feeds, self._fetches,
                                    dynamic_batch=False, intermediates=intermediates)
        except OnnxExportError as e:
            raise OrtUnavailable(_one_line(e)) from None
        except invalid as e:  # a converter wrote a graph onnx.checker refuses: still Keel's engine can run it
            raise OrtUnavailable(f"the exported model fails onnx.checker: {_one_line(e)}") from None
        try:
            return self.ort.InferenceSession(model.SerializeToString(), session_options(self._config, self.ort),
                                             providers=self.providers)
        except Exception as e:  # noqa: BLE001  (onnxruntime's own exception classes: a model it refuses)
            raise OrtUnavailable(f"ONNX Runtime cannot load the exported model: {_one_line(e)}") from None

    def observing_session(self):
        with self._lock:
            if self._observing is None:
                self._observing = self._session(intermediates=True)
        return self._observing

    def runner(self, scope, observe: bool, profiler=None):
        """`run(feed) -> [values of the fetches]` (numpy arrays). With `observe`, the fetches
        and the intermediates the exported graph holds under their own names land in `scope`,
        where the Predictor's hooks read them."""
        session = self.observing_session() if observe else self.session
        names = [o.name for o in session.get_outputs()]
        count = len(self._fetches)

        def run(feed: dict) -> list:
            begin = time.perf_counter()
            try:
                outs = session.run(names, feed)
            except Exception as e:  # noqa: BLE001  (ORT's own classes; its text names the ONNX node)
                raise OrtRunError(f"run(): ONNX Runtime failed: {_one_line(e)}") from None
            recording = listeners(profiler)
            if recording:
                end = time.perf_counter()
                for p in recording:
                    p.record_span("onnxruntime_run", begin, end, self._program)
            if observe:  # every value the hooks may read, the fetched ones too (as Keel's engine leaves them)
                for name, value in zip(names, outs):
                    scope.set(name, value)
            return outs[:count]
        return run


def _one_line(e: Exception) -> str:
    return " ".join(line.strip() for line in str(e).splitlines() if line.strip())
