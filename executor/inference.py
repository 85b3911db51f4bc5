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
handles, so one clone per thread runs concurrently.

Differences from PaddlePaddle, on purpose: `copy_from_cpu` checks the array against the
declared input (dtype castable without loss of kind, rank, fixed dims) and names the
input when it does not fit; `run()` names the inputs that were never set;
`Tensor.shape()` before any data is the declared shape (-1: any size), not [0].
"""
from __future__ import annotations

import copy
import difflib
import enum
import os

import numpy as np

from keel.executor.executor import Executor
from keel.executor.kernel_call import call_kernel
from keel.executor.lod import LoDTensor
from keel.executor.place import CPUPlace, CUDAPlace
from keel.executor.profiler import Profiler
from keel.executor.scope import Scope
from keel.program import dtypes
from keel.program.errors import KeelError
from keel.program.io.inference_model import load_inference_model
from keel.program.io.program_file import model_files, persistable_specs
from keel.program.passes import PASSES, optimize_inference


class PredictorError(KeelError, ValueError):
    """Misuse of the Predictor API: an unknown input or output name, `run()` before every
    input is set, reading an output before `run()`, or a device that is not available."""


class PrecisionType(enum.Enum):
    """PaddlePaddle's `paddle.inference.PrecisionType` (same members and numbers)."""
    Float32 = 0
    Int8 = 1
    Half = 2
    Bfloat16 = 3


class DataType(enum.Enum):
    """What `Tensor.type()` returns: PaddlePaddle's `paddle.inference.DataType` members,
    plus Keel's other element types."""
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


class Config:
    """Where the model is and how to run it.

    `Config(model_file, params_file)`, `Config(prefix)` (prefix.json or prefix.pdmodel, +
    prefix.pdiparams), `Config(directory)` or `Config()` then `set_model(...)`. The parameter file may be absent when the model
    has no parameters (the loader says so when it has some).

    Switches (PaddlePaddle's names): `switch_ir_optim` (default on: the inference passes
    run when `program.passes` provides them), `delete_pass(name)`, `enable_use_gpu(
    memory_pool_init_size_mb, device_id, precision_mode)` / `disable_gpu()`,
    `set_cpu_math_library_num_threads(n)` (how many independent ops may run at once),
    `enable_low_precision_io()` (only meaningful with a reduced precision, as in
    PaddlePaddle), `enable_profile()` (the predictor's `profiler` then records every run:
    executor/profiler.py), and `enable_mkldnn()`, accepted and ignored (Keel's CPU kernels are
    numpy; there is no oneDNN). Precision Float32, or Half: the program is converted at
    load by the convert_to_fp16 pass (PaddlePaddle's auto_mixed_precision_pass), with its
    inputs and outputs kept float32 unless `enable_low_precision_io()`; the conversion
    runs even with `switch_ir_optim(False)`, as the precision asks for it. Bfloat16 and
    Int8 are not implemented."""

    Precision = PrecisionType

    def __init__(self, model_file: str | os.PathLike | None = None, params_file: str | os.PathLike | None = None):
        self._model_file = self._params_file = None
        self._ir_optim = True
        self._deleted_passes: list[str] = []
        self._use_gpu = False
        self._gpu_device_id = 0
        self._memory_pool_init_size_mb = 0
        self._precision = PrecisionType.Float32
        self._low_precision_io = False
        self._cpu_math_threads = 1
        self._mkldnn = False
        self._profile = False
        self._max_loop_iterations = None
        if model_file is not None:
            self.set_model(model_file, params_file)

    def set_model(self, model_file, params_file=None) -> None:
        """`set_model(model_file, params_file)`, or `set_model(path)`: a program file (`.json`
        or `.pdmodel`), a prefix (`prefix.json`, else `prefix.pdmodel`) or a directory holding
        one model (PaddleX's `inference.json`), with its `.pdiparams` next to it."""
        model_file = os.fspath(model_file)
        if params_file is None:
            model_file, params_file = model_files(model_file)
        self._model_file, self._params_file = model_file, os.fspath(params_file)

    def prog_file(self) -> str | None:
        return self._model_file

    def params_file(self) -> str | None:
        return self._params_file

    # -- passes ---------------------------------------------------------------------------
    def switch_ir_optim(self, x: bool = True) -> None:
        self._ir_optim = bool(x)

    def ir_optim(self) -> bool:
        return self._ir_optim

    def delete_pass(self, name: str) -> None:
        """Leave the pass `name` out when the program is optimized."""
        if name not in self._deleted_passes:
            self._deleted_passes.append(name)

    # -- devices and precision ----------------------------------------------------------------
    def enable_use_gpu(self, memory_pool_init_size_mb: int = 100, device_id: int = 0,
                       precision_mode: PrecisionType = PrecisionType.Float32) -> None:
        """Run on GPU `device_id` (needs cupy and a CUDA device: `create_predictor` says
        which is missing). The pool size is recorded only: cupy's pool grows on demand."""
        self._use_gpu = True
        self._memory_pool_init_size_mb = int(memory_pool_init_size_mb)
        self._gpu_device_id = int(device_id)
        self._precision = PrecisionType(precision_mode)

    def disable_gpu(self) -> None:
        self._use_gpu = False
        self._precision = PrecisionType.Float32

    def use_gpu(self) -> bool:
        return self._use_gpu

    def gpu_device_id(self) -> int:
        return self._gpu_device_id

    def memory_pool_init_size_mb(self) -> int:
        return self._memory_pool_init_size_mb

    def enable_low_precision_io(self, x: bool = True) -> None:
        """Feed and fetch in the reduced precision (with Half/Bfloat16 only, as in PaddlePaddle)."""
        self._low_precision_io = bool(x)

    def set_cpu_math_library_num_threads(self, n: int) -> None:
        """The executor's `num_threads` (default 1, as in PaddlePaddle): up to this many
        independent ops run concurrently, only those large enough to repay a thread
        hand-off (executor/plan.py `threaded_steps`); small models run serially. numpy's
        own BLAS threads are set by its environment variables before it is imported
        (`OPENBLAS_NUM_THREADS=1` where other processes hold the cores)."""
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

    def enable_mkldnn(self) -> None:
        """Accepted for compatibility; does nothing (no oneDNN in Keel)."""
        self._mkldnn = True

    def mkldnn_enabled(self) -> bool:
        return self._mkldnn

    def summary(self) -> str:
        """The settings as a table, like PaddlePaddle's `Config.summary()`."""
        rows = [("model_file", self._model_file), ("params_file", self._params_file),
                ("cpu_math_thread", self._cpu_math_threads),
                ("enable_mkldnn", f"{str(self._mkldnn).lower()} (no-op)"),
                ("use_gpu", self._use_gpu), ("enable_profile", self._profile)]
        if self._use_gpu:
            rows += [("gpu_device_id", self._gpu_device_id),
                     ("memory_pool_init_size_mb", self._memory_pool_init_size_mb)]
        rows += [("precision", self._precision.name), ("low_precision_io", self._low_precision_io),
                 ("ir_optim", self._ir_optim),
                 ("deleted_passes", ", ".join(self._deleted_passes) or "-")]
        cells = [(k, str(v).lower() if isinstance(v, bool) else str(v)) for k, v in rows]
        wk = max(len("Option"), *(len(k) for k, _ in cells))
        wv = max(len("Value"), *(len(v) for _, v in cells))
        rule = f"+{'-' * (wk + 2)}+{'-' * (wv + 2)}+"
        lines = [rule, f"| {'Option':<{wk}} | {'Value':<{wv}} |", rule]
        lines += [f"| {k:<{wk}} | {v:<{wv}} |" for k, v in cells]
        return "\n".join(lines + [rule])

    def _place(self):
        """The place to run on; a PredictorError names what a GPU run lacks."""
        if not self._use_gpu:
            return CPUPlace()
        try:
            import cupy
        except ImportError:
            raise PredictorError("Config.enable_use_gpu(): GPU inference needs cupy, which is not "
                                 'installed (pip install -e ".[gpu]" in the Keel checkout); or call '
                                 "config.disable_gpu()") from None
        try:
            count = cupy.cuda.runtime.getDeviceCount()
        except Exception:  # cupy without a driver or a device
            count = 0
        if self._gpu_device_id >= count:
            raise PredictorError(f"Config.enable_use_gpu(): GPU {self._gpu_device_id} requested, but cupy "
                                 f"finds {count} CUDA device(s); or call config.disable_gpu()")
        return CUDAPlace(self._gpu_device_id)


class Tensor:
    """An input or output of a Predictor, by name (`get_input_handle` / `get_output_handle`).

    Inputs: `copy_from_cpu(array)` (checked against the declared variable) or `reshape`.
    Outputs: `copy_to_cpu()` after `run()`. Both: `shape()`, `type()`, `dtype`, `name`."""

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

    def _require_input(self, method: str) -> None:
        if not self._is_input:
            raise PredictorError(f"{method}: {self.name!r} is an output; run() writes it")

    def __repr__(self):
        return f"Tensor({self.name!r}, {self.type().name}, shape={self.shape()})"


class Predictor:
    """A loaded inference model, ready to run (see the module doc). Make one with
    `create_predictor(config)`, more sharing its parameters with `clone()`."""

    def __init__(self, config: Config, _shared=None, _profiler=None):
        self._config = config
        # config.enable_profile(): a Profiler recording every run (shared with the clones)
        self.profiler = _profiler or (Profiler() if config.profile_enabled() else None)
        self._executor = Executor(config._place(), num_threads=config.cpu_math_library_num_threads(),
                                  profiler=self.profiler, max_loop_iterations=config.max_loop_iterations())
        self._report = None  # the inference passes' report, when they ran at load
        if _shared is None:
            _shared = self._load()
        self._program, self._params, self._input_names, self._output_names = _shared
        self._scope = self._params.new_scope()  # fetched values land here; parameters stay shared
        block = self._program.global_block()
        self._inputs = {n: Tensor(self, block.var(n), True) for n in self._input_names}
        self._outputs = {n: Tensor(self, block.var(n), False) for n in self._output_names}
        # An output that is a parameter no op computes (a file may fetch one) is read from
        # the scope; the plan computes the rest.
        computed = {n for op in block.ops if op.type != "fetch" for n in op.output_arg_names}
        self._stored_outputs = {n for n in self._output_names
                                if n not in computed and block.var(n).persistable}
        self._computed_outputs = [n for n in self._output_names if n not in self._stored_outputs]
        # the input handles check what they are given, so the run does not check again
        self._run_program = self._executor.prepare(self._program, self._input_names, self._computed_outputs,
                                                   self._scope, return_numpy=False, check_feed=False)

    def _load(self):
        config = self._config
        if config.prog_file() is None:
            raise PredictorError("create_predictor: the Config names no model: Config(prefix), "
                                 "Config(model_file, params_file) or config.set_model(...)")
        params = Scope()
        program, feeds, fetches = load_inference_model("", self._executor, scope=params,
                                                       model_filename=config.prog_file(),
                                                       params_filename=config.params_file())
        program = self._optimize(program, params)
        return program, params, list(feeds), [v.name for v in fetches]

    def _optimize(self, program, scope):
        """The inference passes (program.passes), when `ir_optim` is on, on the program and
        the parameters in `scope` (host copies; folded constants come back as new
        parameters, replacing the old ones); precision Half adds the float16 conversion
        (alone when `ir_optim` is off). Returns the program to run; the passes' report is
        kept as `_report` (None when no pass ran)."""
        config = self._config
        half = config._precision is PrecisionType.Half
        if not config.ir_optim() and not half:
            return program
        disabled = set(config._deleted_passes)
        if not config.ir_optim():
            disabled |= set(PASSES) - {"convert_to_fp16"}
        exe = self._executor
        names = [name for name, _, _ in persistable_specs(program)]
        params = {name: exe.to_host(scope.get(name)) for name in names}
        program, params, self._report = optimize_inference(
            program, params, evaluate=call_kernel, disabled=tuple(sorted(disabled)), fp16=half,
            keep_io_types=not config._low_precision_io, cpu=exe.place.device == "cpu",
            fuse_conv=True, in_memory=True)  # fused_conv2d never reaches a file from here
        scope.erase(names)
        for name, value in params.items():
            scope.set(name, exe.to_device(value))
        return program

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
        feed = {n: handle._value if handle._value is None or not handle._lod else LoDTensor(handle._value, handle._lod)
                for n, handle in self._inputs.items()}
        if any(value is None for value in feed.values()):
            missing = [n for n, value in feed.items() if value is None]
            raise PredictorError(f"run(): input(s) {missing} not set; call "
                                 f"get_input_handle(name).copy_from_cpu(array) first, or run([arrays])")
        outs = self._run_program(feed)
        for name, value in zip(self._computed_outputs, outs):
            self._outputs[name]._value = value
        for name in self._stored_outputs:
            self._outputs[name]._value = self._scope.get(name)
        if inputs is not None:
            return [self._outputs[n].copy_to_cpu() for n in self._output_names]
        return None

    def clone(self) -> "Predictor":
        """A predictor on the same program and the same parameter arrays (not copies), with
        its own executor and handles: use one per thread."""
        return Predictor(self._config, (self._program, self._params, self._input_names, self._output_names),
                         self.profiler)


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


def _describe(value) -> str:
    if isinstance(value, (list, tuple)):
        return f"{type(value).__name__} of {len(value)}"
    return type(value).__name__
