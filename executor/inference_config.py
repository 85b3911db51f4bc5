"""`paddle.inference.Config` (PaddlePaddle 3.3.1's every method) and its enums.

Settings fall in two kinds. Those that change what the Predictor runs are attributes the
Predictor reads (executor/inference.py): the model files, `switch_ir_optim`, `delete_pass`
(Keel's pass names, or PaddlePaddle's for the passes Keel has: `PADDLE_PASS_NAMES`),
`enable_use_gpu` / `enable_tensorrt_engine` (Keel's GPU path through cupy, at the precision
asked for; without a usable GPU a warning and the CPU), `enable_memory_optim` (writing a
result into its dying input's buffer), `set_cpu_math_library_num_threads` (the executor's
and the kernels' threads), `enable_profile`, `enable_low_precision_io`,
`exp_disable_mixed_precision_ops` (ops the float16 conversion keeps in float32),
`enable_onnxruntime` / `enable_ort_optimization` (ONNX Runtime as the engine, with the GPU
and TensorRT settings choosing its execution providers: executor/onnx_engine.py).
Everything else (TensorRT's tuning knobs, XPU/IPU/oneDNN/OpenVINO switches,
logging, caches) is accepted and recorded as the `_RECORDED` table lists it: `summary()`
shows it, the matching getter returns it, and it changes nothing Keel runs, because Keel
has no such engine or device.
"""
from __future__ import annotations

import enum
import os
import warnings

from keel.executor.place import CPUPlace, CUDAPlace
from keel.program.io.program_file import model_files
from keel.program.passes import PASSES


class PrecisionType(enum.Enum):
    """PaddlePaddle's `paddle.inference.PrecisionType` (same members and numbers).

    Examples:
        >>> import keel as paddle
        >>> from keel.inference import Config, PrecisionType
        >>> config = Config()
        >>> config.enable_use_gpu(256, 0, PrecisionType.Half)     # float16 on GPU 0, 256 MB initial memory pool
        >>> config.use_gpu(), config.gpu_device_id()
        (True, 0)
        >>> list(PrecisionType.__members__)
        ['Float32', 'Int8', 'Half', 'Bfloat16']
    """
    Float32 = 0
    Int8 = 1
    Half = 2
    Bfloat16 = 3


class PlaceType(enum.Enum):
    """PaddlePaddle's `paddle.inference.PlaceType` (same members and numbers).

    Examples:
        >>> import keel as paddle
        >>> from keel.inference import PlaceType
        >>> PlaceType.CPU, PlaceType.GPU.value
        (<PlaceType.CPU: 0>, 1)
    """
    UNK = -1
    CPU = 0
    GPU = 1
    XPU = 2
    CUSTOM = 4


# PaddlePaddle's pass names for the work Keel's passes do (program/passes): delete_pass
# with either name leaves Keel's pass out.
PADDLE_PASS_NAMES = {
    "identity_op_clean_pass": "remove_identity", "delete_dropout_op_pass": "remove_identity",
    "delete_dropout_op_x_pass": "remove_identity", "simplify_with_basic_ops_pass": "remove_identity",
    "constant_folding_pass": "fold_constants",
    "conv_bn_fuse_pass": "fold_batch_norm", "conv_eltwiseadd_bn_fuse_pass": "fold_batch_norm",
    "fc_fuse_pass": "fuse_fc", "repeated_fc_relu_fuse_pass": "fuse_fc",
    "conv_elementwise_add_act_fuse_pass": "fuse_conv_bias_activation",
    "conv_elementwise_add_fuse_pass": "fuse_conv_bias_activation",
    "conv_bias_onednn_fuse_pass": "fuse_conv_bias_activation",
    "conv_activation_onednn_fuse_pass": "fuse_conv_bias_activation",
    "elementwise_act_fuse_pass": "fuse_elementwise_activation",
    "auto_mixed_precision_pass": "convert_to_fp16",
}

_TRT_PRECISION_NAMES = {PrecisionType.Float32: "fp32", PrecisionType.Half: "fp16",
                        PrecisionType.Int8: "int8", PrecisionType.Bfloat16: "bf16"}


def _recorder(key: str, params=(), doc: str = ""):
    """A Config method that records its arguments under `key` (PaddlePaddle's positional
    order and defaults: `params` is [(name, default)], a default of `_REQUIRED` must be
    given). A method of no parameters records True."""
    names = [name for name, _ in params]

    def method(self, *args, **kwargs):
        if len(args) > len(names):
            raise TypeError(f"Config.{method.__name__}() takes {len(names)} argument(s), got {len(args)}")
        values = dict(params)
        values.update(zip(names, args))
        unknown = sorted(set(kwargs) - set(names))
        if unknown:
            raise TypeError(f"Config.{method.__name__}() got unexpected argument(s) {unknown}; "
                            f"it takes {names}")
        values.update(kwargs)
        missing = [name for name, value in values.items() if value is _REQUIRED]
        if missing:
            raise TypeError(f"Config.{method.__name__}() is missing argument(s) {missing}")
        self._recorded[key] = True if not names else values[names[0]] if len(names) == 1 else values
    method.__doc__ = doc or f"Accepted and recorded as `{key}` (summary() shows it); Keel runs the same either way."
    return method


def _getter(key: str, default):
    def method(self):
        value = self._recorded.get(key, default)
        return bool(value) if isinstance(default, bool) else value
    method.__doc__ = f"The recorded `{key}` setting ({default!r} until set)."
    return method


_REQUIRED = object()

# method name -> (recorded key, [(parameter, default)]) for the settings Keel accepts and
# records without running anything differently (see the module doc).
_RECORDED = {
    "disable_glog_info": ("glog_info_disabled", ()),
    "switch_use_feed_fetch_ops": ("use_feed_fetch_ops", [("x", True)]),
    "switch_specify_input_names": ("specify_input_name", [("x", True)]),
    "switch_ir_debug": ("ir_debug", [("x", True), ("passes", [])]),
    "enable_new_executor": ("new_executor", [("x", True)]),
    "enable_new_ir": ("new_ir", [("x", True)]),
    "enable_cinn": ("use_cinn_compiler", ()),
    "enable_save_optim_model": ("save_optimized_model", [("save_optimized_model", False)]),
    "use_optimized_model": ("use_optimized_model", [("x", True)]),
    "set_optim_cache_dir": ("optim_cache_dir", [("opt_cache_dir", _REQUIRED)]),
    "set_optimization_level": ("optimization_level", [("opt_level", 2)]),
    "enable_custom_passes": ("custom_passes", [("passes", []), ("custom_pass_only", False)]),
    "collect_shape_range_info": ("collect_shape_range_info", [("shape_range_info_path", _REQUIRED)]),
    # oneDNN (Keel's CPU kernels are numpy's; it has no oneDNN)
    "enable_mkldnn": ("enable_mkldnn", ()),
    "enable_onednn": ("enable_mkldnn", ()),
    "set_mkldnn_cache_capacity": ("mkldnn_cache_capacity", [("capacity", 0)]),
    "set_onednn_cache_capacity": ("mkldnn_cache_capacity", [("capacity", 0)]),
    "set_mkldnn_op": ("mkldnn_op", [("op_list", _REQUIRED)]),
    "set_onednn_op": ("mkldnn_op", [("op_list", _REQUIRED)]),
    "set_bfloat16_op": ("bfloat16_op", [("op_list", _REQUIRED)]),
    "enable_mkldnn_bfloat16": ("mkldnn_bfloat16", ()),
    "enable_onednn_bfloat16": ("mkldnn_bfloat16", ()),
    "enable_mkldnn_int8": ("mkldnn_int8", [("op_types", set())]),
    "enable_onednn_int8": ("mkldnn_int8", [("op_types", set())]),
    "disable_mkldnn_fc_passes": ("mkldnn_fc_passes_disabled", ()),
    "disable_onednn_fc_passes": ("mkldnn_fc_passes_disabled", ()),
    # other engines and devices Keel does not have
    "enable_openvino_engine": ("use_openvino", [("inference_precision", PrecisionType.Float32)]),
    "enable_xpu": ("use_xpu", [("l3_size", 16 << 20), ("l3_locked", False), ("conv_autotune", False),
                               ("conv_autotune_file", ""), ("transformer_encoder_precision", "int16"),
                               ("transformer_encoder_adaptive_seqlen", False), ("enable_multi_stream", False)]),
    "set_xpu_device_id": ("xpu_device_id", [("device_id", 0)]),
    "set_xpu_config": ("xpu_config", [("config", _REQUIRED)]),
    "enable_ipu": ("use_ipu", [("ipu_device_num", 1), ("ipu_micro_batch_size", 1),
                               ("ipu_enable_pipelining", False), ("ipu_batches_per_step", 1)]),
    "set_ipu_config": ("ipu_config", [("ipu_enable_fp16", False), ("ipu_replica_num", 1),
                                      ("ipu_available_memory_proportion", 1.0),
                                      ("ipu_enable_half_partial", False),
                                      ("ipu_enable_model_runtime_executor", False)]),
    "set_ipu_custom_info": ("ipu_custom_info", [("ipu_custom_ops_info", []), ("ipu_custom_patterns", {})]),
    "load_ipu_config": ("ipu_config_path", [("config_path", _REQUIRED)]),
    "enable_custom_device": ("custom_device", [("device_type", _REQUIRED), ("device_id", 0),
                                               ("precision", PrecisionType.Float32)]),
    # TensorRT's tuning (enable_tensorrt_engine itself selects Keel's GPU path)
    "enable_tensorrt_dla": ("tensorrt_dla", [("dla_core", 0)]),
    "enable_tensorrt_explicit_quantization": ("tensorrt_explicit_quantization", ()),
    "enable_tensorrt_inspector": ("tensorrt_inspector", [("inspector_serialize", False)]),
    "enable_tensorrt_memory_optim": ("tensorrt_memory_optim", [("engine_memory_sharing", True),
                                                               ("sharing_identifier", 0)]),
    "enable_tensorrt_varseqlen": ("tensorrt_varseqlen", ()),
    "enable_tuned_tensorrt_dynamic_shape": ("tuned_tensorrt_dynamic_shape",
                                            [("shape_range_info_path", ""), ("allow_build_at_runtime", True)]),
    "set_trt_dynamic_shape_info": ("tensorrt_dynamic_shape", [("min_input_shape", {}), ("max_input_shape", {}),
                                                              ("optim_input_shape", {}),
                                                              ("disable_trt_plugin_fp16", False)]),
    "set_tensorrt_optimization_level": ("tensorrt_optimization_level", [("level", _REQUIRED)]),
    "mark_trt_engine_outputs": ("trt_engine_outputs", [("output_tensor_names", [])]),
    "exp_disable_tensorrt_ops": ("tensorrt_disabled_ops", [("ops", _REQUIRED)]),
    "exp_disable_tensorrt_subgraph": ("tensorrt_disabled_subgraph", [("var_names", _REQUIRED)]),
    "exp_disable_tensorrt_dynamic_shape_ops": ("tensorrt_disabled_dynamic_shape_ops", [("x", _REQUIRED)]),
    "exp_specify_tensorrt_subgraph_precision": ("tensorrt_subgraph_precision",
                                                [("fp16_vars", _REQUIRED), ("int8_vars", _REQUIRED),
                                                 ("fp32_vars", _REQUIRED)]),
    "exp_enable_use_cutlass": ("use_cutlass", ()),
    "exp_sparse_conv_using_buffer": ("sparse_conv_buffer", [("kernels", _REQUIRED), ("strides", _REQUIRED)]),
}

# getter name -> (recorded key, value until set: PaddlePaddle's default)
_GETTERS = {
    "glog_info_disabled": ("glog_info_disabled", False),
    "use_feed_fetch_ops_enabled": ("use_feed_fetch_ops", False),
    "specify_input_name": ("specify_input_name", False),
    "new_ir_enabled": ("new_ir", False),
    "shape_range_info_collected": ("collect_shape_range_info", False),
    "mkldnn_enabled": ("enable_mkldnn", False),
    "onednn_enabled": ("enable_mkldnn", False),
    "mkldnn_int8_enabled": ("mkldnn_int8", False),
    "onednn_int8_enabled": ("mkldnn_int8", False),
    "openvino_engine_enabled": ("use_openvino", False),
    "use_xpu": ("use_xpu", False),
    "xpu_device_id": ("xpu_device_id", 0),
    "xpu_config": ("xpu_config", None),
    "tensorrt_dla_enabled": ("tensorrt_dla", False),
    "tensorrt_explicit_quantization_enabled": ("tensorrt_explicit_quantization", False),
    "tensorrt_inspector_enabled": ("tensorrt_inspector", False),
    "tensorrt_varseqlen_enabled": ("tensorrt_varseqlen", False),
    "tuned_tensorrt_dynamic_shape": ("tuned_tensorrt_dynamic_shape", False),
    "tensorrt_dynamic_shape_enabled": ("tensorrt_dynamic_shape", False),
    "tensorrt_optimization_level": ("tensorrt_optimization_level", 3),
}


class Config:
    """Where the model is and how to run it (PaddlePaddle's `paddle.inference.Config`).

    `Config(model_file, params_file)`, `Config(prefix)` (prefix.json or prefix.pdmodel, +
    prefix.pdiparams), `Config(directory)` or `Config()` then `set_model(...)`. The
    parameter file may be absent when the model has no parameters. Which settings change
    what runs and which are recorded only: see the module doc. `summary()` prints them all.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.inference import Config, create_predictor
        >>> spec = [paddle.static.InputSpec([None, 4], "float32", "x")]
        >>> _ = paddle.jit.save(paddle.nn.Linear(4, 2), "out/linear", input_spec=spec)
        >>> config = Config("out/linear.pdmodel", "out/linear.pdiparams")
        >>> config.disable_gpu()
        >>> config.set_cpu_math_library_num_threads(2)
        >>> config.switch_ir_optim(True)
        >>> create_predictor(config).run([np.ones((3, 4), "float32")])[0].shape
        (3, 2)
    """

    Precision = PrecisionType
    Float32, Int8, Half, Bfloat16 = (PrecisionType.Float32, PrecisionType.Int8,
                                     PrecisionType.Half, PrecisionType.Bfloat16)

    def __init__(self, model_file: str | os.PathLike | None = None, params_file: str | os.PathLike | None = None):
        self._model_file = self._params_file = self._model_dir = None
        self._ir_optim = True
        self._deleted_passes: list[str] = []
        self._use_gpu = False
        self._gpu_device_id = 0
        self._memory_pool_init_size_mb = 100   # PaddlePaddle's default
        self._precision = PrecisionType.Float32
        self._tensorrt: dict | None = None      # enable_tensorrt_engine's arguments
        self._gpu_fallback: str | None = None   # why a GPU request runs on the CPU (set by _place)
        self._low_precision_io = False
        self._memory_optim = False
        self._cpu_math_threads = 1
        self._profile = False
        self._max_loop_iterations = None
        self._fp32_ops: set[str] = set()       # exp_disable_mixed_precision_ops
        self._fp16_ops: set[str] = set()       # exp_enable_mixed_precision_ops
        self._onnxruntime = False              # enable_onnxruntime: ONNX Runtime runs the model
        self._ort_optimization = False         # enable_ort_optimization
        self._recorded: dict = {}
        if model_file is not None:
            self.set_model(model_file, params_file)

    # -- the model ------------------------------------------------------------------------
    def set_model(self, model_file, params_file=None) -> None:
        """`set_model(model_file, params_file)`, or `set_model(path)`: a program file (`.json`
        or `.pdmodel`), a prefix (`prefix.json`, else `prefix.pdmodel`) or a directory holding
        one model (PaddleX's `inference.json`), with its `.pdiparams` next to it."""
        model_file = os.fspath(model_file)
        if params_file is None:
            if os.path.isdir(model_file):
                self._model_dir = model_file
            model_file, params_file = model_files(model_file)
        self._model_file, self._params_file = model_file, os.fspath(params_file)

    def set_prog_file(self, path) -> None:
        self._model_file = os.fspath(path)

    def set_params_file(self, path) -> None:
        self._params_file = os.fspath(path)

    def prog_file(self) -> str:
        return self._model_file or ""

    def params_file(self) -> str:
        return self._params_file or ""

    def model_dir(self) -> str:
        """The directory given to `set_model`/`Config` (empty when files were named)."""
        return self._model_dir or ""

    def set_model_buffer(self, prog_buffer, prog_size, params_buffer, params_size) -> None:
        """Recorded; `create_predictor` then says that Keel loads models from files only."""
        self._recorded["model_from_memory"] = True

    def model_from_memory(self) -> bool:
        return bool(self._recorded.get("model_from_memory"))

    # -- passes ---------------------------------------------------------------------------
    def switch_ir_optim(self, x: bool = True) -> None:
        """On (the default): the inference passes run at load; off: none run."""
        self._ir_optim = bool(x)

    def ir_optim(self) -> bool:
        return self._ir_optim

    def delete_pass(self, name: str) -> None:
        """Leave the pass `name` out (Keel's name, or PaddlePaddle's for a pass Keel has:
        PADDLE_PASS_NAMES). Another PaddlePaddle pass name is recorded: Keel runs no such
        pass, and summary() says so."""
        if name not in self._deleted_passes:
            self._deleted_passes.append(name)

    def pass_builder(self) -> "PassBuilder":
        return PassBuilder(self)

    def _disabled_passes(self) -> set[str]:
        """Keel's pass names that `delete_pass` left out."""
        return {PADDLE_PASS_NAMES.get(name, name) for name in self._deleted_passes} & set(PASSES)

    # -- memory and threads -------------------------------------------------------------------
    def enable_memory_optim(self, x: bool = True) -> None:
        """On: an op whose input dies with it may write its result into that input's
        buffer (executor/plan.py, `donated`), so a chain of elementwise ops needs no new
        buffer per op. Intermediates are freed after their last use either way (as
        PaddlePaddle's executor frees them). Off by default, as in PaddlePaddle."""
        self._memory_optim = bool(x)

    def set_cpu_math_library_num_threads(self, n: int) -> None:
        """Up to n threads on the CPU: independent ops at once (the executor's thread pool,
        for ops large enough to repay the hand-off: executor/plan.py `threaded_steps`), and
        the kernels that split their work (kernels/parallel.py) into up to n parts while
        this predictor runs. numpy's own BLAS threads are set by its environment variables
        before it is imported (`OPENBLAS_NUM_THREADS=1` where other processes hold the cores)."""
        if int(n) < 1:
            raise ValueError(f"set_cpu_math_library_num_threads: need at least 1 thread, got {n}")
        self._cpu_math_threads = int(n)

    def cpu_math_library_num_threads(self) -> int:
        return self._cpu_math_threads

    def enable_profile(self) -> None:
        """Profile every run: the predictor's `profiler` (executor/profiler.py) then sums up
        its runs per op type and per op, and exports Chrome traces."""
        self._profile = True

    def profile_enabled(self) -> bool:
        return self._profile

    def set_max_loop_iterations(self, n: int | None) -> None:
        """Stop any `while` of the model that runs more than `n` iterations, with an error
        naming it (Keel's own switch, for serving untrusted files whose loops may never
        end; default None: no limit, as in PaddlePaddle)."""
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 1):
            raise ValueError(f"set_max_loop_iterations: need a positive int or None, got {n!r}")
        self._max_loop_iterations = n

    def max_loop_iterations(self) -> int | None:
        return self._max_loop_iterations

    # -- devices and precision ----------------------------------------------------------------
    def enable_use_gpu(self, memory_pool_init_size_mb: int = 100, device_id: int = 0,
                       precision_mode: PrecisionType = PrecisionType.Float32) -> None:
        """Run on GPU `device_id` through cupy, at `precision_mode` (Half: the program is
        converted to float16 at load). Without cupy or that device, `create_predictor`
        warns and runs on the CPU in float32, as PaddlePaddle's CPU build does. The pool size
        is recorded only: cupy's pool grows on demand."""
        self._use_gpu = True
        self._memory_pool_init_size_mb = int(memory_pool_init_size_mb)
        self._gpu_device_id = int(device_id)
        self._precision = PrecisionType(precision_mode)

    def disable_gpu(self) -> None:
        self._use_gpu = False
        self._tensorrt = None
        self._precision = PrecisionType.Float32

    def use_gpu(self) -> bool:
        return self._use_gpu

    def gpu_device_id(self) -> int:
        return self._gpu_device_id

    def memory_pool_init_size_mb(self) -> int:
        return self._memory_pool_init_size_mb

    def fraction_of_gpu_memory_for_pool(self) -> float:
        """The initial pool's share of the GPU's memory (0.0 without a GPU, as PaddlePaddle's)."""
        if not self._use_gpu or _gpu_unavailable(self._gpu_device_id):
            return 0.0
        import cupy
        with cupy.cuda.Device(self._gpu_device_id):
            _, total = cupy.cuda.runtime.memGetInfo()
        return self._memory_pool_init_size_mb * (1 << 20) / total

    def enable_tensorrt_engine(self, workspace_size: int = 1 << 30, max_batch_size: int = 1,
                               min_subgraph_size: int = 3, precision_mode: PrecisionType = PrecisionType.Float32,
                               use_static: bool = False, use_calib_mode: bool = True,
                               use_cuda_graph: bool = False) -> None:
        """Keel has no TensorRT: this selects Keel's own GPU path at `precision_mode` (Half:
        float16 weights and compute on cupy), as `enable_use_gpu(..., precision_mode)` does,
        keeping `enable_use_gpu`'s device (GPU 0 if it was not called). The other arguments
        are recorded; summary() shows them and what runs."""
        self._tensorrt = {"workspace_size": int(workspace_size), "max_batch_size": int(max_batch_size),
                          "min_subgraph_size": int(min_subgraph_size), "use_static": bool(use_static),
                          "use_calib_mode": bool(use_calib_mode), "use_cuda_graph": bool(use_cuda_graph)}
        self._use_gpu = True
        self._precision = PrecisionType(precision_mode)

    def tensorrt_engine_enabled(self) -> bool:
        return self._tensorrt is not None

    def tensorrt_precision_mode(self) -> PrecisionType:
        return self._precision if self._tensorrt is not None else PrecisionType.Float32

    def trt_allow_build_at_runtime(self) -> bool:
        tuned = self._recorded.get("tuned_tensorrt_dynamic_shape")
        return tuned["allow_build_at_runtime"] if isinstance(tuned, dict) else True

    def shape_range_info_path(self) -> str:
        return self._recorded.get("collect_shape_range_info", "") or ""

    def enable_low_precision_io(self, x: bool = True) -> None:
        """Feed and fetch in the reduced precision (with Half/Bfloat16 only, as in PaddlePaddle)."""
        self._low_precision_io = bool(x)

    def exp_disable_mixed_precision_ops(self, ops) -> None:
        """Ops the float16 conversion keeps in float32 (besides its own keep list)."""
        self._fp32_ops |= set(ops)

    def exp_enable_mixed_precision_ops(self, ops) -> None:
        """Ops the float16 conversion converts even when its keep list would keep them."""
        self._fp16_ops |= set(ops)

    def disable_mkldnn(self) -> None:
        self._recorded["enable_mkldnn"] = False

    disable_onednn = disable_mkldnn

    def enable_onnxruntime(self) -> None:
        """Run the model in ONNX Runtime (executor/onnx_engine.py): the loaded program is
        exported to ONNX in memory and served by one InferenceSession (threads from
        `set_cpu_math_library_num_threads`; its CUDA or TensorRT execution provider for
        `enable_use_gpu` / `enable_tensorrt_engine` where the installed onnxruntime has it).
        Handles, run(), clone() and errors stay as with Keel's engine. A model that cannot be
        exported, or onnx/onnxruntime not installed: one warning, and Keel's engine runs it."""
        self._onnxruntime = True

    def disable_onnxruntime(self) -> None:
        self._onnxruntime = False

    def onnxruntime_enabled(self) -> bool:
        return self._onnxruntime

    def enable_ort_optimization(self) -> None:
        """ONNX Runtime's graph optimizations at ORT_ENABLE_ALL, as Paddle Inference sets
        them; without it the session keeps ORT's default, which is ORT_ENABLE_ALL too."""
        self._ort_optimization = True

    def to_native_config(self) -> "Config":
        """A copy (Keel has one kind of Config)."""
        import copy
        return copy.deepcopy(self)

    # -- what runs ----------------------------------------------------------------------------
    def _place(self):
        """The place to run on: the GPU asked for, else CPUPlace (with a warning, and the
        reason kept as `_gpu_fallback`, when a GPU was asked for but is not usable)."""
        self._gpu_fallback = None
        if not self._use_gpu:
            return CPUPlace()
        reason = _gpu_unavailable(self._gpu_device_id)
        if reason is None:
            return CUDAPlace(self._gpu_device_id)
        self._gpu_fallback = reason
        warnings.warn(f"{self._gpu_request()}: {reason}; running on the CPU in float32", RuntimeWarning,
                      stacklevel=4)
        return CPUPlace()

    def _run_precision(self) -> PrecisionType:
        """The precision that runs: Float32 when a GPU request fell back to the CPU."""
        return PrecisionType.Float32 if self._gpu_fallback else self._precision

    def _gpu_request(self) -> str:
        what = "enable_tensorrt_engine" if self._tensorrt is not None else "enable_use_gpu"
        return f"Config.{what}() (GPU {self._gpu_device_id}, {self._precision.name})"

    # -- the printout ---------------------------------------------------------------------------
    def summary(self) -> str:
        """Every setting as a table in PaddlePaddle's sections (model, CPU, GPU, other
        devices, passes and runtime), with rows saying what Keel runs where it differs."""
        from keel.executor.inference_summary import summary_table
        return summary_table(self)


for _name, (_key, _params) in _RECORDED.items():
    _method = _recorder(_key, _params)
    _method.__name__ = _method.__qualname__ = _name
    setattr(Config, _name, _method)
for _name, (_key, _default) in _GETTERS.items():
    _method = _getter(_key, _default)
    _method.__name__ = _method.__qualname__ = _name
    setattr(Config, _name, _method)


def _gpu_unavailable(device_id: int) -> str | None:
    """Why GPU `device_id` cannot run Keel's GPU path, or None when it can."""
    try:
        import cupy
    except ImportError:
        return 'cupy is not installed (pip install -e ".[gpu]" in the Keel checkout)'
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception:  # cupy without a driver or a device
        count = 0
    if device_id >= count:
        return f"GPU {device_id} was asked for, but cupy finds {count} CUDA device(s)"
    return None


class PassBuilder:
    """`config.pass_builder()`: the inference passes that will run, in order, editable by
    name (Keel's passes: program/passes)."""

    def __init__(self, config: Config):
        self._config = config

    def all_passes(self) -> list[str]:
        disabled = self._config._disabled_passes()
        return [name for name in PASSES if name not in disabled]

    def analysis_passes(self) -> list[str]:
        return []

    def delete_pass(self, name: str) -> None:
        self._config.delete_pass(name)

    def set_passes(self, names) -> None:
        """Run only `names` (of Keel's passes) from now on."""
        names = [PADDLE_PASS_NAMES.get(n, n) for n in names]
        self._require_known(names, "set_passes")
        self._config._deleted_passes = [n for n in PASSES if n not in names]

    def append_pass(self, name: str) -> None:
        """Bring back a deleted pass (Keel's passes run in one fixed order)."""
        keel_name = PADDLE_PASS_NAMES.get(name, name)
        self._require_known([keel_name], "append_pass")
        self._config._deleted_passes = [n for n in self._config._deleted_passes
                                        if PADDLE_PASS_NAMES.get(n, n) != keel_name]

    def insert_pass(self, index: int, name: str) -> None:
        """As append_pass: Keel's passes run in their one order, wherever a name is put."""
        self.append_pass(name)

    def append_analysis_pass(self, name: str) -> None:
        raise ValueError(f"append_analysis_pass({name!r}): Keel has no analysis passes")

    def turn_on_debug(self) -> None:
        self._config.switch_ir_debug(True)

    def debug_string(self) -> str:
        return "\n".join(self.all_passes())

    @staticmethod
    def _require_known(names, method):
        unknown = [n for n in names if n not in PASSES]
        if unknown:
            raise ValueError(f"PassBuilder.{method}: no pass named {unknown} in Keel; its passes are "
                             f"{list(PASSES)} (PaddlePaddle names it maps: {sorted(PADDLE_PASS_NAMES)})")
