"""The inference Predictor, modelled on PaddlePaddle's `paddle.inference`.

    from keel.executor.inference import Config, create_predictor
    config = Config("out/digits")                  # out/digits.pdmodel + out/digits.pdiparams
    predictor = create_predictor(config)
    x = predictor.get_input_handle(predictor.get_input_names()[0])
    x.copy_from_cpu(images)
    predictor.run()
    probs = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
    probs, = predictor.run([images])               # the same in one call

`create_predictor` loads the program and its parameters once (`load_inference_model`,
which lists every op, slot or attribute Keel cannot run at once) into a private Scope.
With `ir_optim` on (the default, as in PaddlePaddle), `program.passes.optimize_inference`
rewrites the program and its parameters once, at load (batch_norm folding, fc fusion,
...; on a GPU not column_major_weights, a layout for the CPU's BLAS). The executor
compiles the program on the first `run`. `clone()` gives a predictor that reads the same
parameter arrays through a child scope but has its own executor and input/output
handles, so one clone per thread runs concurrently. The Config and what each of its
settings does: executor/inference_config.py. The module has every name PaddlePaddle
3.3.1's `paddle.inference` has (tests/fixtures/paddle_inference_api_3.3.1.json).

Differences from PaddlePaddle, on purpose: `copy_from_cpu` checks the array against the
declared input (dtype castable without loss of kind, rank, fixed dims) and names the
input when it does not fit; `run()` names the inputs that were never set;
`Tensor.shape()` before any data is the declared shape (-1: any size), not [0];
`DataType`'s values are dtype names, not PaddlePaddle's numbers; `get_version()` gives
Keel's version.
"""
from __future__ import annotations

import copy
import difflib
import enum
import os
import sys
import warnings

import numpy as np

from keel.executor.executor import Executor
from keel.executor.inference_config import PASSES, Config, PassBuilder, PlaceType, PrecisionType  # noqa: F401
from keel.executor.kernel_call import call_kernel
from keel.executor.lod import LoDTensor
from keel.executor.onnx_engine import (CPU, ONNX_PASSES, TENSORRT, OrtEngine, OrtFallbackWarning, OrtUnavailable,
                                       import_onnxruntime, providers)
from keel.executor.place import CPUPlace
from keel.executor.profiler import Profiler
from keel.kernels import parallel
from keel.executor.scope import Scope
from keel.program import dtypes
from keel.program.errors import KeelError
from keel.program.io.inference_model import load_inference_model, write_model_pair
from keel.program.io.program_file import persistable_specs
from keel.program.passes import DEFAULT_KEEP_FP32, optimize_inference


class PredictorError(KeelError, ValueError):
    """Misuse of the Predictor API: an unknown input or output name, `run()` before every
    input is set, reading an output before `run()`, or a device that is not available."""


class DataType(enum.Enum):
    """What `Tensor.type()` returns: PaddlePaddle's `paddle.inference.DataType` members,
    plus Keel's other element types.

    Examples:
        >>> import keel as paddle
        >>> from keel.inference import DataType
        >>> DataType.FLOAT32, paddle.inference.get_num_bytes_of_data_type(DataType.FLOAT32)
        (<DataType.FLOAT32: 'float32'>, 4)
        >>> spec = [paddle.static.InputSpec([None, 4], "float32", "x")]
        >>> _ = paddle.jit.save(paddle.nn.Linear(4, 2), "out/linear", input_spec=spec)
        >>> predictor = paddle.inference.create_predictor(paddle.inference.Config("out/linear"))
        >>> predictor.get_input_handle("x").type()
        <DataType.FLOAT32: 'float32'>
    """
    FLOAT64 = "float64"
    FLOAT32 = "float32"
    FLOAT16 = "float16"
    BFLOAT16 = "bfloat16"
    INT64 = "int64"
    INT32 = "int32"
    INT16 = "int16"
    INT8 = "int8"
    UINT8 = "uint8"
    BOOL = "bool"
    UINT16 = "uint16"
    UINT32 = "uint32"
    UINT64 = "uint64"
    COMPLEX64 = "complex64"
    COMPLEX128 = "complex128"


# Precisions the Predictor cannot run yet, and what they need.
_PRECISION_PASS = {
    PrecisionType.Bfloat16: "a bfloat16 pass (PaddlePaddle's auto_mixed_precision_pass) and bfloat16 kernels",
    PrecisionType.Int8: "int8 quantization passes",
}


class Tensor:
    """An input or output of a Predictor, by name (`get_input_handle` / `get_output_handle`).

    Inputs: `copy_from_cpu(array)` (checked against the declared variable) or `reshape`.
    Outputs: `copy_to_cpu()` after `run()`. Both: `shape()`, `type()`, `dtype`, `name`.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.inference import Config, create_predictor
        >>> spec = [paddle.static.InputSpec([None, 4], "float32", "x")]
        >>> _ = paddle.jit.save(paddle.nn.Linear(4, 2), "out/linear", input_spec=spec)
        >>> predictor = create_predictor(Config("out/linear"))
        >>> x = predictor.get_input_handle("x")
        >>> x.copy_from_cpu(np.ones((3, 4), "float32"))
        >>> x.name, x.shape(), x.type()
        ('x', [3, 4], <DataType.FLOAT32: 'float32'>)
        >>> predictor.run()
        >>> out = predictor.get_output_handle(predictor.get_output_names()[0])
        >>> out.copy_to_cpu().shape, out.shape()
        ((3, 2), [3, 2])
    """

    def __init__(self, predictor: "Predictor", var, is_input: bool):
        self.name = var.name
        self._predictor = predictor
        self._is_input = is_input
        self._feed_spec = (dtypes.to_numpy(var.dtype), tuple(var.shape), var.type_string())
        self._data_type = DataType(dtypes.name(var.dtype))
        self._value = None   # an array on the predictor's device
        self._shape = None   # set by reshape() until data arrives
        self._lod = []       # an input's LoD (offsets), fed with its data

    @property
    def dtype(self) -> np.dtype:
        return self._feed_spec[0]

    def type(self) -> DataType:
        return self._data_type

    def shape(self) -> list[int]:
        """The held data's shape; before any data, the `reshape` shape or the declared one."""
        if self._value is not None:
            return list(self._value.shape)
        return list(self._shape if self._shape is not None else self._feed_spec[1])

    def reshape(self, shape) -> None:
        """Set an input's shape ahead of its data (PaddlePaddle habit); held data of
        another shape is dropped. `copy_from_cpu` takes the shape of the array it gets."""
        self._require_input("reshape")
        shape = [int(d) for d in shape]
        if self._value is not None and list(self._value.shape) != shape:
            self._value = None
        self._shape = shape

    def copy_from_cpu(self, data) -> None:
        """Copy `data` in; a FeedError names this input when its dtype or shape does not fit
        the declaration (a same-kind dtype, e.g. float64 for float32, is cast)."""
        self._require_input("copy_from_cpu")
        value = self._predictor._executor.check_feed(self.name, self._feed_spec, data)
        self._value = value.copy() if value is data else value
        self._shape = None

    def set_lod(self, lod) -> None:
        """An input's level-1 LoD, as offsets ([[0, 2, 5]]: rows 0-1 and 2-4), for the ops
        that read one (executor/lod.py); [] clears it."""
        self._require_input("set_lod")
        LoDTensor(lod=lod)  # checked now, where the caller's line is
        self._lod = [list(level) for level in lod]

    def lod(self) -> list:
        return [list(level) for level in self._lod]

    def copy_to_cpu(self) -> np.ndarray:
        """A numpy copy of the value (an output's: after `run()`)."""
        if self._value is None:
            what = "call predictor.run() first" if not self._is_input else "copy_from_cpu() first"
            raise PredictorError(f"{'input' if self._is_input else 'output'} {self.name!r} holds no value: {what}")
        host = self._predictor._executor.to_host(self._value)
        return host.copy() if host is self._value else host

    def share_external_data(self, data) -> None:
        """Use `data` (a numpy array on the CPU, a cupy array on the predictor's GPU) as this
        input without a copy when it already has the declared dtype; it is read at each
        `run()`, so later changes to it are seen. Checked as `copy_from_cpu` checks."""
        self._require_input("share_external_data")
        self._value = self._predictor._executor.check_feed(self.name, self._feed_spec, data)
        self._shape = None

    def share_external_data_by_ptr_name(self, *args, **kwargs):
        raise PredictorError(f"share_external_data_by_ptr_name: Keel takes arrays, not raw device "
                             f"pointers; pass the array to {self.name!r}.share_external_data(array)")

    def _require_input(self, method: str) -> None:
        if not self._is_input:
            raise PredictorError(f"{method}: {self.name!r} is an output; run() writes it")

    def __repr__(self):
        return f"Tensor({self.name!r}, {self.type().name}, shape={self.shape()})"


class Predictor:
    """A loaded inference model, ready to run (see the module doc). Make one with
    `create_predictor(config)`, more sharing its parameters with `clone()`.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.inference import Config, create_predictor
        >>> spec = [paddle.static.InputSpec([None, 4], "float32", "x")]
        >>> _ = paddle.jit.save(paddle.nn.Linear(4, 2), "out/linear", input_spec=spec)
        >>> predictor = create_predictor(Config("out/linear.pdmodel", "out/linear.pdiparams"))
        >>> x = predictor.get_input_handle(predictor.get_input_names()[0])
        >>> x.copy_from_cpu(np.ones((3, 4), "float32"))
        >>> predictor.run()
        >>> predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu().shape
        (3, 2)
    """

    def __init__(self, config: Config, _shared=None, _profiler=None):
        self._config = config
        # config.enable_profile(): a Profiler recording every run (shared with the clones)
        self.profiler = _profiler or (Profiler() if config.profile_enabled() else None)
        self._report = None  # the inference passes' report, when they ran at load
        self._hooks = {"input": [], "output": []}  # register_input_hook / register_output_hook
        if _shared is None:
            _shared = self._load()
        else:  # a clone: ONNX Runtime's session takes host arrays, Keel's engine runs on the place asked for
            self._executor = self._new_executor(CPUPlace() if _shared[4] is not None else config._place())
        self._program, self._params, self._input_names, self._output_names, self._ort = _shared
        self._scope = self._params.new_scope()  # fetched values land here; parameters stay shared
        block = self._program.global_block()
        self._inputs = {n: Tensor(self, block.var(n), True) for n in self._input_names}
        self._outputs = {n: Tensor(self, block.var(n), False) for n in self._output_names}
        self._stored_outputs, self._computed_outputs = _split_outputs(self._program, self._output_names)
        self._prepare()

    def _new_executor(self, place) -> Executor:
        config = self._config
        return Executor(place, num_threads=config.cpu_math_library_num_threads(), profiler=self.profiler,
                        reuse_buffers=config._memory_optim, max_loop_iterations=config.max_loop_iterations())

    def _prepare(self) -> None:
        if self._ort is not None:  # the hooks (keep_intermediates) read what the observing session returns
            self._run_program = self._ort.runner(self._scope, observe=self._executor.keep_intermediates,
                                                 profiler=self.profiler)
            return
        # the input handles check what they are given, so the run does not check again
        self._run_program = self._executor.prepare(self._program, self._input_names, self._computed_outputs,
                                                   self._scope, return_numpy=False, check_feed=False)

    def _load(self):
        config = self._config
        if config.model_from_memory():
            raise PredictorError("create_predictor: Config.set_model_buffer() was called, but Keel loads "
                                 "models from files only; write the buffers to .pdmodel/.pdiparams files "
                                 "and call config.set_model(model_file, params_file)")
        if not config.prog_file():
            raise PredictorError("create_predictor: the Config names no model: Config(prefix), "
                                 "Config(model_file, params_file) or config.set_model(...)")
        use_ort = config.onnxruntime_enabled()
        self._executor = self._new_executor(CPUPlace() if use_ort else config._place())
        params = Scope()
        program, feeds, fetches = load_inference_model("", self._executor, scope=params,
                                                       model_filename=config.prog_file(),
                                                       params_filename=config.params_file())
        feeds, fetches = list(feeds), [v.name for v in fetches]
        if use_ort:
            try:
                return self._load_onnxruntime(program, params, feeds, fetches)
            except OrtUnavailable as e:
                warnings.warn(f"Config.enable_onnxruntime(): {e}; Keel's engine runs this model instead",
                              OrtFallbackWarning, stacklevel=4)
                self._report = None
                self._executor = self._new_executor(config._place())
                for name in params.local_var_names():  # onto the GPU, when Keel's engine runs on one
                    params.set(name, self._executor.to_device(params.get(name)))
        program, values = self._optimize(program, params, config._run_precision() is PrecisionType.Half,
                                         cpu=self._executor.place.device == "cpu")
        self._install(params, values)
        return program, params, feeds, fetches, None

    def _load_onnxruntime(self, program, params, feeds, fetches):
        """(program, params, feeds, fetches, OrtEngine): the program after the passes whose
        results ONNX expresses (onnx_engine.ONNX_PASSES), in one ONNX Runtime session."""
        config = self._config
        ort = import_onnxruntime()
        chain, gpu_fallback = providers(config, ort)
        # float16 on CUDA is Keel's conversion; TensorRT converts itself (trt_fp16_enable)
        half = config._precision is PrecisionType.Half and chain[0] != CPU and chain[0][0] != TENSORRT
        optimized, values = self._optimize(program, params, half, cpu=False, allowed=ONNX_PASSES)
        if values is None:  # no pass ran
            values = {name: params.get(name) for name, _, _ in persistable_specs(program)}
        _, computed = _split_outputs(optimized, fetches)
        engine = OrtEngine(config, optimized, values, feeds, computed, chain, gpu_fallback)
        self._install(params, values)  # only now: a fallback runs the loaded program on the loaded parameters
        return optimized, params, feeds, fetches, engine

    def _optimize(self, program, scope, half: bool, cpu: bool, allowed=None):
        """The inference passes (program.passes), when `ir_optim` is on, on the program and
        (host copies of) the parameters in `scope`; `half` adds the float16 conversion (alone
        when `ir_optim` is off); `allowed`: the only passes that may run (None: all). Returns
        (the program to run, its parameters: name -> host array, None when no pass ran); the
        passes' report is kept as `_report` (None when no pass ran)."""
        config = self._config
        if not config.ir_optim() and not half:
            return program, None
        disabled = config._disabled_passes()
        if not config.ir_optim():
            disabled |= set(PASSES) - {"convert_to_fp16"}
        if allowed is not None:
            disabled |= set(PASSES) - set(allowed)
        exe = self._executor
        names = [name for name, _, _ in persistable_specs(program)]
        params = {name: exe.to_host(scope.get(name)) for name in names}
        program, params, self._report = optimize_inference(
            program, params, evaluate=call_kernel, disabled=tuple(sorted(disabled)), fp16=half,
            keep_io_types=not config._low_precision_io, cpu=cpu,
            fuse_conv=True, in_memory=True,  # fused_conv2d never reaches a file from here
            keep_fp32=(DEFAULT_KEEP_FP32 | config._fp32_ops) - config._fp16_ops)
        return program, params

    def _install(self, scope, params) -> None:
        """Replace the parameters in `scope` by `params` (the passes' result; folded
        constants are new parameters), on the executor's device; None: keep them."""
        if params is None:
            return
        scope.erase(scope.local_var_names())
        for name, value in params.items():
            scope.set(name, self._executor.to_device(value))

    # -- names and handles ----------------------------------------------------------------
    def get_input_names(self) -> list[str]:
        """Input names in feed `col` order."""
        return list(self._input_names)

    def get_output_names(self) -> list[str]:
        """Output names in fetch `col` order."""
        return list(self._output_names)

    def get_input_handle(self, name: str) -> Tensor:
        return self._handle(name, self._inputs, "input", self._outputs)

    def get_output_handle(self, name: str) -> Tensor:
        return self._handle(name, self._outputs, "output", self._inputs)

    @staticmethod
    def _handle(name, handles, kind, others) -> Tensor:
        if name in handles:
            return handles[name]
        if name in others:
            other = "output" if kind == "input" else "input"
            raise PredictorError(f"{name!r} is an {other}, not an {kind}: use get_{other}_handle")
        close = difflib.get_close_matches(str(name), list(handles), n=3)
        hint = f" (did you mean {', '.join(map(repr, close))}?)" if close else ""
        raise PredictorError(f"the model has no {kind} named {name!r}{hint}; its {kind}s: {list(handles)}")

    # -- running --------------------------------------------------------------------------
    def run(self, inputs=None):
        """Run with the input handles' data, filling the output handles. `run(arrays)`
        first copies `arrays` (in `get_input_names()` order) into the input handles and
        returns the outputs as numpy arrays, in `get_output_names()` order."""
        if inputs is not None:
            if not isinstance(inputs, (list, tuple)) or len(inputs) != len(self._input_names):
                raise PredictorError(f"run(inputs): expected a list of {len(self._input_names)} array(s) "
                                     f"for {self._input_names}, got {_describe(inputs)}")
            for name, value in zip(self._input_names, inputs):
                self._inputs[name].copy_from_cpu(value)
        # ONNX Runtime reads no LoD (a program whose ops read one cannot be exported)
        feed = {n: handle._value if handle._value is None or not handle._lod or self._ort is not None
                else LoDTensor(handle._value, handle._lod) for n, handle in self._inputs.items()}
        if any(value is None for value in feed.values()):
            missing = [n for n, value in feed.items() if value is None]
            raise PredictorError(f"run(): input(s) {missing} not set; call "
                                 f"get_input_handle(name).copy_from_cpu(array) first, or run([arrays])")
        threads = self._config.cpu_math_library_num_threads()
        if threads > 1 and self._ort is None:  # ORT's session has its own threads
            with parallel.using_threads(threads):
                outs = self._run_program(feed)
        else:
            outs = self._run_program(feed)
        for name, value in zip(self._computed_outputs, outs):
            self._outputs[name]._value = value
        for name in self._stored_outputs:
            self._outputs[name]._value = self._scope.get(name)
        if self._hooks["input"] or self._hooks["output"]:
            self._call_hooks(feed)
        if inputs is not None:
            return [self._outputs[n].copy_to_cpu() for n in self._output_names]
        return None

    def clone(self) -> "Predictor":
        """A predictor on the same program and the same parameter arrays (not copies), with
        its own executor and handles: use one per thread. With enable_onnxruntime the clones
        share the one ONNX Runtime session (its run is thread-safe)."""
        return Predictor(self._config, (self._program, self._params, self._input_names, self._output_names,
                                        self._ort), self.profiler)

    # -- memory and hooks -------------------------------------------------------------------
    def clear_intermediate_tensor(self) -> None:
        """Drop every value the last run left in this predictor's scope but the parameters
        (kept intermediates, when hooks asked for them; outputs stay in their handles)."""
        self._scope.erase(self._scope.local_var_names())  # the parameters live in the parent scope

    def try_shrink_memory(self) -> int:
        """Give the GPU memory pool's free blocks back to the device; returns the bytes the
        pool held before (0 on the CPU, whose freed memory malloc keeps: executor/memory.py)."""
        if self._executor.place.device == "cpu":
            return 0
        pool = self._executor.xp.get_default_memory_pool()
        held = int(pool.total_bytes())
        pool.free_all_blocks()
        return held

    def register_input_hook(self, hook) -> None:
        """After each run, `hook(op_type, variable_name, tensor)` for every input of every op
        that ran, in op order (`tensor`: a Tensor handle holding the value). While a hook is
        registered the run keeps its intermediates (they are freed at last use otherwise)."""
        self._register_hook("input", hook)

    def register_output_hook(self, hook) -> None:
        """As `register_input_hook`, for every output of every op that ran."""
        self._register_hook("output", hook)

    def _register_hook(self, kind, hook) -> None:
        if not callable(hook):
            raise PredictorError(f"register_{kind}_hook: expected a callable (op_type, name, tensor), got "
                                 f"{type(hook).__name__}")
        self._hooks[kind].append(hook)
        if not self._executor.keep_intermediates:  # the hooks read every value after the run
            self._executor.keep_intermediates = True
            self._executor._plans.clear()
            try:
                self._prepare()
            except OrtUnavailable as e:
                raise PredictorError(f"register_{kind}_hook: {e}") from None

    def _call_hooks(self, feed) -> None:
        block = self._program.global_block()
        for op in block.ops:
            if op.type in ("feed", "fetch"):
                continue
            for kind, names in (("input", op.input_arg_names), ("output", op.output_arg_names)):
                for name in names:
                    # an ONNX graph computes no XShape-like outputs nothing reads: those are absent
                    value = feed.get(name) if name in feed else self._scope.get(name) if name in self._scope else None
                    if value is None or not self._hooks[kind]:
                        continue
                    handle = Tensor(self, block.var(name), is_input=False)
                    handle._value = value
                    for hook in self._hooks[kind]:
                        hook(op.type, name, handle)


class PredictorPool:
    """`PredictorPool(config, size)`: `size` predictors sharing one loaded model (the first
    made by create_predictor, the rest its clones); `retrieve(i)` gives the i-th.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.inference import Config, PredictorPool
        >>> spec = [paddle.static.InputSpec([None, 4], "float32", "x")]
        >>> _ = paddle.jit.save(paddle.nn.Linear(4, 2), "out/linear", input_spec=spec)
        >>> pool = PredictorPool(Config("out/linear"), size=2)       # one model, two predictors (one per thread)
        >>> a, b = pool.retrieve(0), pool.retrieve(1)
        >>> out_a, = a.run([np.ones((1, 4), "float32")])
        >>> out_b, = b.run([np.ones((1, 4), "float32")])
        >>> np.array_equal(out_a, out_b)
        True
    """

    def __init__(self, config: Config, size: int = 1):
        if int(size) < 1:
            raise PredictorError(f"PredictorPool: size must be at least 1, got {size}")
        first = create_predictor(config)
        self._predictors = [first] + [first.clone() for _ in range(int(size) - 1)]

    def retrieve(self, idx: int) -> Predictor:
        if not 0 <= idx < len(self._predictors):
            raise PredictorError(f"PredictorPool.retrieve({idx}): the pool holds {len(self._predictors)} "
                                 f"predictor(s)")
        return self._predictors[idx]


def create_predictor(config: Config) -> Predictor:
    """Load `config`'s model once and return a Predictor for it. Errors: the loader's
    (ParseError for an unreadable model file, ProgramError for a missing parameter file,
    one error listing every unsupported op), PredictorError for a device that is not
    there, NotImplementedError for precision Bfloat16 or Int8.

    Examples:
        >>> import numpy as np
        >>> import keel.program as pg
        >>> from keel.executor import Config, Executor, create_predictor
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 4])
        ...     y = pg.nn.fc(x, 2, activation="softmax")
        >>> exe = Executor()
        >>> _ = exe.run(startup)
        >>> _ = pg.io.save_inference_model("out/clf", [x], [y], exe, program=main)
        >>> predictor = create_predictor(Config("out/clf"))   # out/clf.pdmodel + .pdiparams
        >>> predictor.get_input_names()
        ['x']
        >>> probs, = predictor.run([np.ones((3, 4), "float32")])
        >>> probs.shape
        (3, 2)
    """
    config = copy.deepcopy(config)  # later changes to the caller's Config do not apply
    if config._precision in _PRECISION_PASS:
        raise NotImplementedError(f"precision {config._precision.name} needs {_PRECISION_PASS[config._precision]}, "
                                  f"which Keel does not have yet; use PrecisionType.Float32")
    return Predictor(config)


def get_version() -> str:
    """Keel's version, in Paddle Inference's layout ("version: ...").

    Examples:
        >>> import keel as paddle
        >>> print(paddle.inference.get_version())
        version: ...
        commit: keel
        branch: keel
    """
    from keel import __version__
    return f"version: {__version__}\ncommit: keel\nbranch: keel\n"


def get_trt_compile_version() -> tuple[int, int, int]:
    """(0, 0, 0): Keel is not built with TensorRT (PaddlePaddle's CPU builds answer the same).

    Examples:
        >>> import keel as paddle
        >>> paddle.inference.get_trt_compile_version(), paddle.inference.get_trt_runtime_version()
        ((0, 0, 0), (0, 0, 0))
    """
    return (0, 0, 0)


get_trt_runtime_version = get_trt_compile_version

_DATA_TYPE_BYTES = {DataType.BFLOAT16: 2}


def get_num_bytes_of_data_type(dtype: DataType) -> int:
    """Bytes per element of a `DataType`.

    Examples:
        >>> import keel as paddle
        >>> from keel.inference import DataType, get_num_bytes_of_data_type
        >>> get_num_bytes_of_data_type(DataType.FLOAT32), get_num_bytes_of_data_type(DataType.INT64)
        (4, 8)
    """
    dtype = DataType(dtype)
    return _DATA_TYPE_BYTES.get(dtype) or np.dtype(dtype.value).itemsize


def convert_to_mixed_precision(model_file, params_file, mixed_model_file, mixed_params_file,
                               mixed_precision=PrecisionType.Half, backend=PlaceType.GPU,
                               keep_io_types: bool = True, black_list=frozenset(), **kwargs) -> None:
    """Write a float16 copy of a model (the convert_to_fp16 pass: PaddlePaddle's
    auto_mixed_precision_pass), keeping the ops of `black_list` (and the pass's own keep
    list) in float32; `white_list=` ops are converted even where the keep list would keep
    them. Both files are written as one atomic pair.

    Examples:
        >>> import keel as paddle
        >>> from keel.inference import PlaceType, PrecisionType, convert_to_mixed_precision
        >>> spec = [paddle.static.InputSpec([None, 4], "float32", "x")]
        >>> _ = paddle.jit.save(paddle.nn.Linear(4, 2), "out/linear", input_spec=spec)
        >>> convert_to_mixed_precision("out/linear.pdmodel", "out/linear.pdiparams", "out/linear_fp16.pdmodel",
        ...                            "out/linear_fp16.pdiparams", PrecisionType.Half, PlaceType.GPU)
        >>> program = paddle.static.deserialize_program(paddle.static.load_from_file("out/linear_fp16.pdmodel"))
        >>> weights = [v for v in program.global_block().vars.values() if v.persistable and "linear" in v.name]
        >>> sorted({str(v.dtype) for v in weights})
        ['paddle.float16']
    """
    if PrecisionType(mixed_precision) is not PrecisionType.Half:
        raise NotImplementedError(f"convert_to_mixed_precision: {PrecisionType(mixed_precision).name} is not "
                                  f"implemented; Keel converts to PrecisionType.Half")
    unknown = sorted(set(kwargs) - {"white_list"})
    if unknown:
        raise TypeError(f"convert_to_mixed_precision: unexpected argument(s) {unknown}")
    exe = Executor()
    params = Scope()
    program, _, _ = load_inference_model("", exe, scope=params, model_filename=os.fspath(model_file),
                                         params_filename=os.fspath(params_file))
    names = [name for name, _, _ in persistable_specs(program)]
    keep = (DEFAULT_KEEP_FP32 | set(black_list)) - set(kwargs.get("white_list", ()))
    program, values, _ = optimize_inference(program, {n: params.get(n) for n in names}, fuse=False,
                                            disabled=tuple(sorted(set(PASSES) - {"convert_to_fp16"})),
                                            fp16=True, keep_io_types=keep_io_types, keep_fp32=keep)
    write_model_pair(program, os.fspath(mixed_model_file), os.fspath(mixed_params_file),
                     {n: exe.to_host(v) for n, v in values.items()})


class XpuConfig:
    """PaddlePaddle's XPU settings object, for `Config.set_xpu_config` (recorded: Keel has
    no XPU backend). Its fields, PaddlePaddle's defaults.

    Examples:
        >>> import keel as paddle
        >>> xpu = paddle.inference.XpuConfig()
        >>> xpu.device_id = 0
        >>> config = paddle.inference.Config()
        >>> config.set_xpu_config(xpu)           # recorded; Keel runs on the CPU or a CUDA GPU
    """

    def __init__(self):
        self.device_id, self.l3_size, self.l3_ptr, self.l3_autotune_size = 0, 0, None, 0
        self.context_gm_size, self.context, self.stream = 0, None, None
        self.conv_autotune_level, self.conv_autotune_file, self.conv_autotune_file_writeback = 0, "", False
        self.fc_autotune_level, self.fc_autotune_file, self.fc_autotune_file_writeback = 0, "", False
        self.gemm_compute_precision, self.transformer_softmax_optimize_level = 1, 0
        self.transformer_encoder_adaptive_seqlen = True
        self.quant_post_static_gelu_out_threshold = 10.0
        self.quant_post_dynamic_activation_method = 0
        self.quant_post_dynamic_weight_precision = 1
        self.quant_post_dynamic_op_types: list[str] = []


class InternalUtils:
    """PaddlePaddle's TensorRT helpers on a Config; recorded (Keel has no TensorRT)."""

    @staticmethod
    def set_transformer_posid(config: Config, tensor_name: str) -> None:
        config._recorded["transformer_posid"] = tensor_name

    @staticmethod
    def set_transformer_maskid(config: Config, tensor_name: str) -> None:
        config._recorded["transformer_maskid"] = tensor_name

    @staticmethod
    def disable_tensorrt_half_ops(config: Config, ops) -> None:
        config._recorded["tensorrt_half_ops_disabled"] = set(ops)


# PaddlePaddle's `paddle.inference.wrapper` is the module that adds Python methods to its
# C++ Tensor and Config; Keel's classes are Python already, so that module is this one.
wrapper = sys.modules[__name__]


def _split_outputs(program, output_names) -> tuple[set, list]:
    """(the outputs read from the scope: parameters no op computes, which a file may fetch;
    the outputs the run computes, in order)."""
    block = program.global_block()
    computed = {n for op in block.ops if op.type != "fetch" for n in op.output_arg_names}
    stored = {n for n in output_names if n not in computed and block.var(n).persistable}
    return stored, [n for n in output_names if n not in stored]


def _describe(value) -> str:
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of {len(value)}"
    return type(value).__name__
