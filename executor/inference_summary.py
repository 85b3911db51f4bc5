"""`Config.summary()`: the settings as PaddlePaddle prints them, one table in sections
(the model; the CPU; the GPU and TensorRT; other devices; passes and runtime), plus the
rows that say what Keel will actually run: `keel_device` (the GPU through cupy, or the CPU
and why) and `keel_precision`, and the deleted passes Keel has no counterpart for."""
from __future__ import annotations

import warnings

from keel.program.passes import PASSES


def summary_table(config) -> str:
    from keel.executor.inference_config import (_TRT_PRECISION_NAMES, PADDLE_PASS_NAMES, PrecisionType,
                                                _gpu_unavailable)
    rec = config._recorded
    model = ([("model_dir", config.model_dir())] if config.model_dir() else
             [("model_file", config.prog_file()), ("params_file", config.params_file())]
             if config.prog_file() else [])
    if config.model_from_memory():
        model = [("model_from_memory", True)]
    cpu = [("cpu_math_thread", config.cpu_math_library_num_threads()),
           ("enable_mkldnn", f"{str(config.mkldnn_enabled()).lower()} (Keel: numpy kernels, no oneDNN)"
            if config.mkldnn_enabled() else False)]
    if config.mkldnn_enabled():
        cpu.append(("mkldnn_cache_capacity", rec.get("mkldnn_cache_capacity", 10)))
    openvino = rec.get("use_openvino")
    cpu += [("use_openvino", bool(openvino)),
            ("openvino_inference_precision",
             _TRT_PRECISION_NAMES[PrecisionType(openvino)] if openvino else "fp32")]

    gpu = [("use_gpu", config.use_gpu())]
    if config.use_gpu():
        gpu += [("gpu_device_id", config.gpu_device_id()),
                ("memory_pool_init_size", f"{config.memory_pool_init_size_mb()}MB"),
                ("enable_low_precision_io", config._low_precision_io),
                ("use_tensorrt", config.tensorrt_engine_enabled())]
        if config.tensorrt_engine_enabled():
            trt = config._tensorrt
            gpu += [("tensorrt_precision_mode", _TRT_PRECISION_NAMES[config._precision]),
                    ("tensorrt_workspace_size", trt["workspace_size"]),
                    ("tensorrt_max_batch_size", trt["max_batch_size"]),
                    ("tensorrt_min_subgraph_size", trt["min_subgraph_size"]),
                    ("tensorrt_use_static_engine", trt["use_static"]),
                    ("tensorrt_use_calib_mode", trt["use_calib_mode"]),
                    ("tensorrt_use_cuda_graph", trt["use_cuda_graph"]),
                    ("tensorrt_enable_dynamic_shape", config.tensorrt_dynamic_shape_enabled()),
                    ("tensorrt_tuned_dynamic_shape", config.tuned_tensorrt_dynamic_shape()),
                    ("tensorrt_use_varseqlen", config.tensorrt_varseqlen_enabled()),
                    ("tensorrt_use_dla", config.tensorrt_dla_enabled()),
                    ("tensorrt_optimization_level", config.tensorrt_optimization_level())]
        else:
            gpu.append(("precision", config._precision.name))
        reason = _gpu_unavailable(config.gpu_device_id())
        engine = "Keel's GPU path (cupy; no TensorRT)" if config.tensorrt_engine_enabled() else "cupy"
        gpu += [("keel_device", f"GPU {config.gpu_device_id()} through {engine}" if reason is None
                 else f"CPU (falls back, with a warning: {reason})"),
                ("keel_precision", config._precision.name if reason is None else "Float32")]
    engine = [("use_onnxruntime", config.onnxruntime_enabled())]
    if config.onnxruntime_enabled():
        engine += [("enable_ort_optimization", config._ort_optimization), ("keel_engine", _ort_engine_row(config))]
    other = engine + [("use_xpu", config.use_xpu())]
    if config.use_xpu() or rec.get("use_ipu") or rec.get("custom_device"):
        other.append(("keel_device_note", "Keel has no XPU/IPU/custom device backend; runs as above"))

    deleted = []
    for name in config._deleted_passes:
        keel_name = PADDLE_PASS_NAMES.get(name, name)
        deleted.append(name if keel_name == name and name in PASSES else
                       f"{name} (= {keel_name})" if keel_name in PASSES else f"{name} (no such pass in Keel)")
    runtime = [("use_cinn_compiler", bool(rec.get("use_cinn_compiler"))),
               ("save_optimized_model", bool(rec.get("save_optimized_model"))),
               ("ir_optim", config.ir_optim()),
               ("ir_debug", _first(rec.get("ir_debug", False))),
               ("use_optimized_model", bool(rec.get("use_optimized_model"))),
               ("memory_optim", config._memory_optim),
               ("enable_profile", config.profile_enabled()),
               ("enable_log", not config.glog_info_disabled()),
               ("collect_shape_range_info", bool(rec.get("collect_shape_range_info"))),
               ("max_loop_iterations", config.max_loop_iterations() or "-"),
               ("deleted_passes", ", ".join(deleted) or "-")]
    extra = sorted(k for k in rec if k not in _SHOWN)
    runtime += [(k, _cell(rec[k])) for k in extra]
    return _table([model, cpu, gpu, other, runtime])


def _ort_engine_row(config) -> str:
    """What runs with enable_onnxruntime: ONNX Runtime and its execution providers, or
    Keel's engine and why (a model that cannot be exported is found only when it is loaded)."""
    from keel.executor.onnx_engine import OrtUnavailable, import_onnxruntime, providers
    try:
        ort = import_onnxruntime()
    except OrtUnavailable as e:
        return f"Keel's (falls back, with a warning: {e})"
    with warnings.catch_warnings():  # the summary describes; create_predictor warns
        warnings.simplefilter("ignore")
        chain, _ = providers(config, ort)
    names = [p if isinstance(p, str) else p[0] for p in chain]
    return f"ONNX Runtime {ort.__version__} ({', '.join(names)}), where the model exports"


# recorded keys with rows of their own above; the others are listed after the runtime rows
_SHOWN = {"use_openvino", "mkldnn_cache_capacity", "enable_mkldnn", "use_xpu", "use_cinn_compiler",
          "save_optimized_model", "ir_debug", "use_optimized_model", "glog_info_disabled",
          "collect_shape_range_info", "model_from_memory", "tensorrt_dynamic_shape",
          "tuned_tensorrt_dynamic_shape", "tensorrt_varseqlen", "tensorrt_dla", "tensorrt_optimization_level"}


def _first(value):
    return value.get("x") if isinstance(value, dict) else value


def _cell(value) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, dict):
        return ", ".join(f"{k}={_cell(v)}" for k, v in value.items())
    if isinstance(value, (set, frozenset)):
        return str(sorted(value))
    if hasattr(value, "name") and hasattr(value, "value"):   # an enum member
        return value.name
    return str(value)


def _table(sections) -> str:
    cells = [[(k, _cell(v)) for k, v in rows] for rows in sections]
    flat = [c for rows in cells for c in rows]
    wk = max([len("Option")] + [len(k) for k, _ in flat])
    wv = max([len("Value")] + [len(v) for _, v in flat])
    rule = f"+{'-' * (wk + 2)}+{'-' * (wv + 2)}+"
    lines = [rule, f"| {'Option':<{wk}} | {'Value':<{wv}} |", rule]
    for rows in cells:
        lines += [f"| {k:<{wk}} | {v:<{wv}} |" for k, v in rows]
        lines.append(rule)
    return "\n".join(lines)
