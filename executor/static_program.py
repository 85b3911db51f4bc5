"""What PaddlePaddle's `paddle.static` offers for running programs, beyond the Executor:
`CompiledProgram` (accepted and run as the program it wraps: Keel compiles every program
into a plan itself), `BuildStrategy`/`ExecutionStrategy` (their settings are accepted and
change nothing), `cpu_places`, and `save`/`load` of a program's persistable values.

`save(program, path)` writes `path.pdmodel` (the program), `path.pdparams` (its parameters)
and `path.pdopt` (its other persistables: optimizer moments, learning rates, ...), as
PaddlePaddle's does, all three or none (program/io/atomic.py). PaddlePaddle pickles the two
value files; Keel never pickles, so they are Keel state files (NumPy .npz, as `keel.save`):
`load` reads Keel's, and refuses a PaddlePaddle pickle saying how to convert it."""
from __future__ import annotations

import os

from keel.executor.checkpoint import _host, _persistables  # one walk over a program's persistables
from keel.executor.place import CPUPlace, CUDAPlace
from keel.executor.scope import global_scope
from keel.program.errors import KeelError
from keel.program.io import state_file
from keel.program.io.atomic import FileSet, atomic_write

__all__ = ["CompiledProgram", "BuildStrategy", "ExecutionStrategy", "cpu_places", "cuda_places", "save", "load",
           "load_program_state", "set_program_state"]


class BuildStrategy:
    """PaddlePaddle's graph-building switches (fuse_*, enable_inplace, ...): accepted, stored,
    and without effect (Keel's plan compiler decides its own fusions).

    Examples:
        >>> import keel as paddle
        >>> build_strategy = paddle.static.BuildStrategy()
        >>> build_strategy.enable_inplace = True
        >>> build_strategy.fuse_elewise_add_act_ops = True
        >>> program = paddle.static.CompiledProgram(paddle.static.Program(), build_strategy=build_strategy)
    """

    def __setattr__(self, name, value):
        object.__setattr__(self, name, value)


ExecutionStrategy = BuildStrategy


class CompiledProgram:
    """`paddle.static.CompiledProgram(program)`: the Executor runs it as `program`.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     x = paddle.static.data("x", [None, 4], "float32")
        ...     loss = paddle.mean(paddle.static.nn.fc(x, 2))
        >>> exe = paddle.static.Executor()
        >>> _ = exe.run(startup)
        >>> compiled = paddle.static.CompiledProgram(main)
        >>> exe.run(compiled, feed={"x": np.ones((3, 4), "float32")}, fetch_list=[loss])[0].shape
        ()
    """

    def __init__(self, program_or_graph, build_strategy: BuildStrategy | None = None):
        self._program = program_or_graph
        self._build_strategy = build_strategy

    def with_data_parallel(self, loss_name=None, build_strategy=None, exec_strategy=None, share_vars_from=None,
                           places=None):
        """Accepted for old scripts: one device runs the program (Keel's data parallelism is
        keel.distributed's)."""
        return self

    @property
    def program(self):
        return self._program


def cpu_places(device_count: int | None = None) -> list:
    """`device_count` CPU places (default: the CPU_NUM environment variable, else 1).

    Examples:
        >>> import keel as paddle
        >>> paddle.static.cpu_places(2)
        [CPUPlace(), CPUPlace()]
    """
    if device_count is None:
        device_count = int(os.environ.get("CPU_NUM", "1"))
    return [CPUPlace() for _ in range(int(device_count))]


def cuda_places(device_ids=None) -> list:
    """CUDA places for `device_ids` (default: every GPU cupy sees; cupy is needed then).

    Examples:
        >>> import keel as paddle
        >>> paddle.static.cuda_places([0])          # the places of GPUs 0 (running on them needs cupy and a GPU)
        [CUDAPlace(0)]
    """
    if device_ids is None:
        device_ids = range(CUDAPlace(0).xp.cuda.runtime.getDeviceCount())
    return [CUDAPlace(int(i)) for i in device_ids]


class StaticStateError(KeelError, ValueError):
    """A static.save/load file set that is missing, damaged or does not fit the program."""


def save(program, model_path, protocol=4, **configs) -> None:
    """Write `program`'s persistable values from the global scope to model_path.pdparams
    (parameters) and .pdopt (the rest), and the program to model_path.pdmodel.

    Examples:
        >>> import os
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     y = paddle.static.nn.fc(paddle.static.data("x", [None, 4]), 2)
        >>> exe = paddle.static.Executor()
        >>> _ = exe.run(startup)
        >>> paddle.static.save(main, "out/model")
        >>> sorted(os.listdir("out"))
        ['model.pdmodel', 'model.pdopt', 'model.pdparams']
    """
    scope = global_scope()
    params, others, missing = {}, {}, []
    for var in _persistables(program):
        name = var.name
        if scope.find_var(name) is None:
            if var.is_parameter:
                missing.append(name)
            continue
        (params if var.is_parameter else others)[name] = _host(scope.get(name))
    if missing:
        raise StaticStateError(f"static.save: no value in the global scope for parameter(s) {sorted(missing)}; "
                               "run the startup program first")
    prefix = os.fspath(model_path)
    if os.path.dirname(prefix):
        os.makedirs(os.path.dirname(prefix), exist_ok=True)
    files = [prefix + ".pdparams", prefix + ".pdopt", prefix + ".pdmodel"]
    with FileSet(files) as fs:
        state_file.save(params, fs.temp(files[0]))
        state_file.save(others, fs.temp(files[1]))
        atomic_write(fs.temp(files[2]), program.serialize_to_string())
        fs.commit()


def _prefix(model_path) -> str:
    prefix = os.fspath(model_path)
    for suffix in (".pdparams", ".pdopt", ".pdmodel"):
        if prefix.endswith(suffix):
            return prefix[:-len(suffix)]
    return prefix


def load_program_state(model_path, var_list=None) -> dict:
    """{name: array} of the values static.save wrote at model_path (.pdparams, and .pdopt
    when present); only those of `var_list` when given.

    Examples:
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     y = paddle.static.nn.fc(paddle.static.data("x", [None, 4]), 2)
        >>> exe = paddle.static.Executor()
        >>> _ = exe.run(startup)
        >>> paddle.static.save(main, "out/model")
        >>> state = paddle.static.load_program_state("out/model")
        >>> sorted((name, value.shape) for name, value in state.items())
        [('fc_0.b_0', (2,)), ('fc_0.w_0', (4, 2))]
    """
    prefix = _prefix(model_path)
    if not os.path.exists(prefix + ".pdparams"):
        raise StaticStateError(f"static.load: {prefix}.pdparams does not exist")
    values = state_file.load(prefix + ".pdparams", return_numpy=True)
    if os.path.exists(prefix + ".pdopt"):
        values.update(state_file.load(prefix + ".pdopt", return_numpy=True))
    if var_list is not None:
        names = [getattr(v, "name", v) for v in var_list]
        missing = [n for n in names if n not in values]
        if missing:
            raise StaticStateError(f"static.load({prefix}): no value for {missing}")
        values = {n: values[n] for n in names}
    return values


def _fit(program, state: dict, source: str, require=None) -> dict:
    """The values of `state` for `program`'s persistables, checked: every problem (a value
    missing for a name of `require`, a shape that does not fit) reported at once."""
    wanted = {var.name: var for var in _persistables(program)}
    problems, ready = [], {}
    for name in require or ():
        if name not in state:
            problems.append(f"{name}: not in {source}")
    for name, value in state.items():
        var = wanted.get(name)
        if var is None:
            continue
        value = _host(value)
        shape = list(var.shape or ())
        if shape and (len(shape) != value.ndim or any(d >= 0 and d != s for d, s in zip(shape, value.shape))):
            problems.append(f"{name}: the file holds shape {list(value.shape)}, the program {shape}")
            continue
        ready[name] = value
    if problems:
        raise StaticStateError(f"static.load({source}): {len(problems)} problem(s):\n  - " + "\n  - ".join(problems))
    return ready


def set_program_state(program, state_dict: dict) -> None:
    """Put the values of `state_dict` ({name: array}) of `program`'s persistables in the
    global scope (names the program lacks are skipped; a shape that does not fit is an error).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     y = paddle.static.nn.fc(paddle.static.data("x", [None, 4]), 2)
        >>> exe = paddle.static.Executor()
        >>> _ = exe.run(startup)
        >>> state = {p.name: np.ones(p.shape, "float32") for p in main.all_parameters()}
        >>> paddle.static.set_program_state(main, state)
        >>> exe.run(main, feed={"x": np.ones((1, 4), "float32")}, fetch_list=[y])[0]
        array([[5., 5.]], dtype=float32)
    """
    scope = global_scope()
    for name, value in _fit(program, state_dict, "the state dict").items():
        scope.set(name, value)


def load(program, model_path, executor=None, var_list=None) -> None:
    """Read model_path.pdparams (and .pdopt when present) into the global scope: the values
    of `program`'s persistables (or of `var_list`'s). Every problem (a parameter missing, a
    shape that does not fit) is reported at once, and nothing is set then.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     y = paddle.static.nn.fc(paddle.static.data("x", [None, 4]), 2)
        >>> exe = paddle.static.Executor()
        >>> _ = exe.run(startup)
        >>> feed = {"x": np.ones((1, 4), "float32")}
        >>> before = exe.run(main, feed=feed, fetch_list=[y])[0]
        >>> paddle.static.save(main, "out/model")
        >>> _ = exe.run(startup)                                 # new random parameters
        >>> paddle.static.load(main, "out/model", exe)           # the saved ones back
        >>> np.array_equal(exe.run(main, feed=feed, fetch_list=[y])[0], before)
        True
    """
    prefix = _prefix(model_path)
    values = load_program_state(prefix)
    if var_list is not None:
        required = [getattr(v, "name", v) for v in var_list]
        values = {n: values[n] for n in required if n in values}
    else:
        required = [var.name for var in _persistables(program) if var.is_parameter]
    ready = _fit(program, values, f"{prefix}.pdparams/.pdopt", required)
    scope = global_scope()
    for name, value in ready.items():
        scope.set(name, value)
