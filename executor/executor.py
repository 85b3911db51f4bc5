"""The Executor: runs a program's block through a compiled, cached Plan."""
from __future__ import annotations

import os
import time
import types
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from keel.executor import feeds, lod
from keel.executor import profiler as profiling
from keel.executor.static_program import CompiledProgram
from keel.executor.errors import ExecutionError, FeedError, NonFiniteError
from keel.executor.memory import tune_malloc
from keel.executor.place import default_place
from keel.executor.plan import compile_plan, generate
from keel.executor.random_state import RandomState
from keel.executor.scope import global_scope
from keel.program.default import default_main_program
from keel.program.program import Program
from keel.program.variable import Variable


class Executor:
    """Run programs on a place (CPUPlace(), or CUDAPlace(i) where cupy and a GPU exist; by
    default the one `set_device` chose, else the CPU).

    `run` compiles (program, block, feed names, fetch names) once into a plan and caches it
    until the program changes. `num_threads` > 1 runs independent ops concurrently on a
    CPUPlace (numpy releases the GIL in heavy kernels), those large enough to repay the
    hand-off (executor/plan.py `threaded_steps`); the default, serial, is faster for
    small ops. A GPU place always runs serially: its kernels are asynchronous launches on
    cupy's one stream, which threads would only contend for (docs/architecture.md). Each
    run selects the place's device in the calling thread and restores that thread's
    previous device after it.
    `check_nan_inf=True` (or KEEL_CHECK_NAN_INF=1) stops at the first op that produces a
    NaN or Inf and names it. `keep_intermediates=True` turns off freeing and leaves every
    computed value in the scope after `run` (for debugging; costs memory). `profile=True`
    times every op: `last_profile` then holds the last run's [(op index, op type, seconds)].
    `profiler=Profiler()` records every run into that Profiler (executor/profiler.py: tables
    per op type and per op, Chrome traces); a started Profiler records every executor's.
    `reuse_buffers=False` gives every op's result a new buffer (by default an op may write
    into an input that dies with it: executor/plan.py `donated`).
    `plan_source` shows the Python function a block runs as. `max_loop_iterations=n` stops
    any `while` op that runs more than n iterations with an ExecutionError naming it (a
    bound for serving programs from untrusted files; the default, None, is no limit, as in
    PaddlePaddle).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     x = paddle.static.data("x", [None, 4], "float32")
        ...     y = paddle.static.nn.fc(x, 2)
        >>> exe = paddle.static.Executor(paddle.CPUPlace())
        >>> _ = exe.run(startup)                                   # initialize the parameters
        >>> out, = exe.run(main, feed={"x": np.ones((3, 4), "float32")}, fetch_list=[y])
        >>> out.shape
        (3, 2)
    """

    def __init__(self, place=None, *, num_threads: int = 1, check_nan_inf: bool | None = None,
                 seed: int | None = None, keep_intermediates: bool = False, profile: bool = False,
                 profiler=None, reuse_buffers: bool = True, max_loop_iterations: int | None = None):
        tune_malloc()  # freed arrays stay mapped for the next step (executor/memory.py)
        self.keep_intermediates = keep_intermediates
        self.reuse_buffers = reuse_buffers
        self.place = place or default_place()  # set_device's, else the CPU
        self.xp = self.place.xp
        self._device_context = self.place.device_context  # bound once; a shared no-op on CPUPlace
        self.num_threads = int(num_threads)
        if check_nan_inf is None:
            check_nan_inf = os.environ.get("KEEL_CHECK_NAN_INF", "0") not in ("", "0", "false", "False")
        self.check_nan_inf = check_nan_inf
        self.profile, self.last_profile = profile, None
        self.profiler = profiler
        if max_loop_iterations is not None and (isinstance(max_loop_iterations, bool)
                                                or not isinstance(max_loop_iterations, int) or max_loop_iterations < 1):
            raise ValueError(f"max_loop_iterations must be a positive int or None, got {max_loop_iterations!r}")
        self.max_loop_iterations = max_loop_iterations
        self._seed = seed
        self.rng = None  # a RandomState, made on first run: seeded by `seed`, else the program's random_seed
        self._plans: dict = {}
        concurrent = self.num_threads > 1 and getattr(self.place, "device", "cpu") == "cpu"
        self._pool = ThreadPoolExecutor(self.num_threads) if concurrent else None

    # -- public API ---------------------------------------------------------------------
    def run(self, program: Program | None = None, feed: dict | None = None, fetch_list=None,
            scope=None, return_numpy: bool = True, block_idx: int = 0):
        """Run block `block_idx` of `program`; return the values of `fetch_list` (Variables or
        names; None fetches the targets of an inference program's fetch ops).

        Examples:
            >>> import numpy as np
            >>> import keel.program as pg
            >>> from keel.executor import Executor
            >>> main = pg.Program()
            >>> with pg.program_guard(main):
            ...     x = pg.data("x", [-1, 3])
            ...     y = pg.scale(x, scale=2.0)
            >>> out, = Executor().run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y])
            >>> out.tolist()
            [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
        """
        program = program if program is not None else default_main_program()
        if isinstance(program, CompiledProgram):  # paddle.static.CompiledProgram runs as its program
            program = program.program
        scope = scope if scope is not None else global_scope()
        feed = feed or {}
        block = program.block(block_idx)
        if any(isinstance(k, int) for k in feed):  # inference programs: feed by column
            targets = self._feed_targets(block)
            feed = {targets.get(k, k) if isinstance(k, int) else k: v for k, v in feed.items()}
        feed = lod.split_feed(feed)  # a LoDTensor: its array, and its LoD as sequence lengths
        if fetch_list is None:  # an inference program: its fetch ops say what to return
            fetch_names = self._fetch_targets(block)
        else:
            fetch_names = tuple(item.name if isinstance(item, Variable) else item for item in fetch_list)

        with self._device_context():  # compiling may make arrays too (constants)
            plan = self._plan(program, block_idx, feed, fetch_names)
            return self._run_plan(plan, program, feed, scope, return_numpy)

    def prepare(self, program: Program, feed_names, fetch_list, scope=None, *, return_numpy: bool = True,
                block_idx: int = 0, check_feed: bool = True):
        """`run` for one program, set of feed names and fetch targets, resolved once: returns
        `call(feed) -> [values]`, for loops that run the same thing many times (a server's
        requests). The plan is recompiled should the program change. `check_feed=False`
        skips the feed checks, for callers that checked the values with `check_feed`
        already (the Predictor's input handles do)."""
        scope = scope if scope is not None else global_scope()
        feed_names = frozenset(feed_names)
        fetch_names = tuple(item.name if isinstance(item, Variable) else item for item in fetch_list)
        compiled = [None, None]  # (program revision, the feeds that carry a LoD), plan

        def call(feed: dict) -> list:
            if feed.keys() != feed_names:
                raise FeedError(f"this prepared run takes feeds {sorted(feed_names)}, got {sorted(feed)}")
            feed = lod.split_feed(feed)
            with self._device_context():
                if compiled[0] != (program.revision, frozenset(feed)):
                    compiled[:] = (program.revision, frozenset(feed)), self._plan(program, block_idx, feed, fetch_names)
                return self._run_plan(compiled[1], program, feed, scope, return_numpy, check_feed)
        return call

    def plan_source(self, program: Program, feed_names=(), fetch_list=None, block_idx: int = 0) -> str:
        """The source of the function `run` executes for these feeds and fetches (None: an
        inference program's fetch targets), each op's lines annotated with the op (index,
        type, variables, the user's line). The annotations are for reading only: the
        executed text carries generated names alone."""
        fetch_names = (self._fetch_targets(program.block(block_idx)) if fetch_list is None else
                       tuple(item.name if isinstance(item, Variable) else item for item in fetch_list))
        with self._device_context():
            plan = self._plan(program, block_idx, dict.fromkeys(feed_names), fetch_names)
            function = self._function(plan)
        lines, shown = [], set()
        for line, pos in zip(function.source.splitlines(), function.line_steps):
            if pos is None and line.startswith("def "):
                line += "  # " + ", ".join(map(_shown, plan.inputs))
            elif pos is not None:
                step = plan.steps[pos]
                line += f"  # op {step.index}"
                if pos not in shown:
                    shown.add(pos)
                    site = step.op.callsite
                    line += (f" {_shown(step.op.type)}: {', '.join(map(_shown, step.writes))} <- "
                             f"{', '.join(map(_shown, step.reads))}" + (f"; {_shown(site)}" if site else ""))
            lines.append(line)
        lines += [f"# {k}: {_shown(_describe(v))}" for k, v in function.constants.items() if k[0] == "k"]
        for sub_plan, sub in function.subs.values():  # control flow: each sub-block's function
            lines += ["", f"# block {sub_plan.block.idx} (a sub-block)"] + sub.source.splitlines()
        return "\n".join(lines) + "\n"

    def _function(self, plan, profile=None):
        """The plan's function for this executor's settings, generated on first use.
        `profile`: False, True (clock readings) or "shapes" (input shapes too); by default
        the executor's `profile`. The functions of sub-blocks (control flow) are made by the
        same settings, unprofiled: a control-flow op is timed as one."""
        profile = self.profile if profile is None else profile
        parallel = self._pool is not None and plan.has_parallel_levels
        key = (self.check_nan_inf, profile, parallel, self.max_loop_iterations)
        function = plan.functions.get(key)
        if function is None:
            def check(value, pos, j):
                self._check_output(plan.steps[pos], plan.steps[pos].writes[j], value)
            function = plan.functions[key] = generate(
                plan, check=check if self.check_nan_inf else None, profile=bool(profile),
                shapes=profile == "shapes", pool=self._pool if parallel else None,
                sub=lambda p: self._function(p, profile=False), max_loop_iterations=self.max_loop_iterations)
        return function

    def _run_plan(self, plan, program, feed, scope, return_numpy, check_feed=True):
        timed = self.profile or profiling.started or self.profiler is not None  # off: this check alone
        if timed:
            begin, recording = time.perf_counter(), profiling.listeners(self.profiler)
            variant = "shapes" if any(p.record_shapes for p in recording) else True
        if program.lr_schedules:
            self._write_learning_rates(program, scope)
        env = self._prepare_env(plan, feed, scope, check_feed)
        function = self._function(plan, variant) if timed else self._function(plan)
        try:
            if plan.overflow_expected:  # float16 overflow is a value there (AMP skips the step), not news
                with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
                    values = function.run(*[env[n] for n in plan.inputs])
            else:
                values = function.run(*[env[n] for n in plan.inputs])
        except Exception as e:
            error = self._step_error(plan, function, e)
            if error is e:
                raise
            raise error from e
        if timed:
            values, readings = values[0], values[1:]
        for name, value in zip(plan.outputs, values):  # fetches, persistable writes (or everything)
            if value is not None:
                scope.set(name, value)
        results = []
        for i, copy in zip(plan.fetch_positions, plan.fetch_copies):
            value = values[i]
            if copy:
                value = value.copy()  # a persistable: later runs may update the scope's array in place
            results.append(self.to_host(value) if return_numpy else value)
        if timed:
            self._profiled(plan, readings, recording, begin)
        return results

    def _profiled(self, plan, readings, recording, begin):
        """A profiled run's clock readings (and input shapes) into `last_profile` and the
        recording profilers; the run took from `begin` until now."""
        end = time.perf_counter()
        clock, shapes = readings[0], readings[1] if len(readings) > 1 else None
        parallel = self._pool is not None and plan.has_parallel_levels
        if self.profile:
            self.last_profile = sorted((plan.steps[pos].index, plan.steps[pos].op.type, (end - start) / shared)
                                       for pos, start, end, shared in profiling.op_intervals(plan, clock, parallel))
        for profiler in recording:
            profiler.record(plan, clock, shapes, parallel, begin, end)

    @staticmethod
    def global_scope():
        """The scope `run` uses when given none (loaders take it from here)."""
        return global_scope()

    def random_state(self, program=None) -> RandomState:
        """The executor's random stream (dropout masks, random init ops), made on first use:
        seeded by the executor's `seed`, else `program.random_seed` (0: fresh entropy)."""
        if self.rng is None:
            seed = self._seed if self._seed is not None else (getattr(program, "random_seed", 0) or None)
            self.rng = RandomState(self.xp, seed)
        return self.rng

    def _write_learning_rates(self, program, scope):
        """A scheduled learning rate is a persistable variable: write its current value."""
        for name, current in program.lr_schedules.items():
            scope.set(name, self.xp.asarray(current(), dtype=self.xp.float32))

    def close(self):
        if self._pool is not None:
            self._pool.shutdown()

    # -- compilation ----------------------------------------------------------------------
    def _plan(self, program, block_idx, feed, fetch_names):
        key = (block_idx, frozenset(feed), tuple(fetch_names))
        entry = self._plans.get(id(program))
        if entry is None or entry[0] is not program or entry[1] != program.revision:
            entry = (program, program.revision, {})
            self._plans[id(program)] = entry
        try:
            plan = entry[2].get(key)
        except TypeError:  # an unhashable fetch_list item: say which
            self._check_fetch_names(program.block(block_idx), fetch_names)
            raise
        if plan is None:
            self._check_fetch_names(program.block(block_idx), fetch_names)
            if self.rng is None:
                self.random_state(program)
            plan = compile_plan(program, block_idx, feed.keys(), fetch_names, self.xp, self.rng,
                                free_intermediates=not self.keep_intermediates,
                                reuse_buffers=self.reuse_buffers)
            entry[2][key] = plan
        return plan

    @staticmethod
    def _fetch_targets(block) -> tuple[str, ...]:
        fetch_ops = sorted((op for op in block.ops if op.type == "fetch"), key=lambda op: op.attr("col"))
        return tuple(op.input("X")[0] for op in fetch_ops)

    @staticmethod
    def _check_fetch_names(block, fetch_names) -> None:
        for name in fetch_names:
            if not isinstance(name, str):
                raise TypeError(f"fetch_list items must be Variables or names, got {name!r}")
            if block.find_var(name) is None:
                raise FeedError(f"cannot fetch {name!r}: the program has no such variable"
                                f"{block._suggest_var(name)}")

    @staticmethod
    def _feed_targets(block) -> dict[int, str]:
        return {op.attr("col"): op.output("Out")[0] for op in block.ops if op.type == "feed"}

    # -- feeding ----------------------------------------------------------------------------
    def _prepare_env(self, plan, feed, scope, check_feed=True) -> dict:
        if check_feed:
            env = {name: self.check_feed(name, plan.feed_specs[name], value) for name, value in feed.items()}
        else:  # checked already, on this place; the lengths of a LoD are made here, on the host
            env = {name: self.check_feed(name, lod.LENGTHS_SPEC, value) if lod.is_lengths_feed(name, feed)
                   else value for name, value in feed.items()}
        for name in plan.inputs:
            if name in env:
                continue
            holder = scope.find_scope(name)
            if holder is not None and holder._vars[name] is not None:
                env[name] = holder._vars[name]
                continue
            var = plan.block.find_var(name)
            if var is not None and var.need_check_feed:
                raise FeedError(f"missing feed for {name!r} ({var.type_string()}), which the fetched "
                                f"results need; feed it: exe.run(..., feed={{{name!r}: array}})")
            if var is not None and var.persistable:
                raise ExecutionError(f"persistable variable {name!r} has no value in the scope: run "
                                     f"the startup program first (or load a checkpoint)")
            raise ExecutionError(f"variable {name!r} is read but never computed, fed or set")
        if self.check_nan_inf:
            feeds.check_finite(self.xp, env, plan.feed_specs)
        return env

    def check_feed(self, name, spec, value):
        """`value` as the executor feeds it (numpy or cupy), or a FeedError naming the
        variable (executor/feeds.py: only casts that keep every value are made)."""
        value = feeds.checked(name, spec, value)
        return self.to_device(value) if self.xp is not np else value

    # -- running ----------------------------------------------------------------------------
    def _check_output(self, step, name, value) -> None:
        """check_nan_inf: called by the generated code after each op, per value it wrote."""
        if getattr(value, "dtype", None) is not None and value.dtype.kind == "f":
            if not bool(self.xp.isfinite(value).all()):
                raise NonFiniteError(f"{_op_name(step)} produced a non-finite "
                                     f"value in {name!r} (shape {list(value.shape)})" + _where(step))

    @staticmethod
    def _step_error(plan, function, error) -> Exception:
        """`error` raised by a kernel, re-raised naming its op: the line of the generated
        function that raised it gives the step, the function's locals its input shapes."""
        if isinstance(error, ExecutionError):
            return error
        functions = {function.run.__code__: (plan, function), **function.subs}
        tb, frame, line = error.__traceback__, None, None
        while tb is not None:  # the innermost generated function's frame: a sub-block's, if any
            if tb.tb_frame.f_code in functions:
                frame, line = tb.tb_frame, tb.tb_lineno
                plan, function = functions[tb.tb_frame.f_code]
            tb = tb.tb_next
        pos = function.line_steps[line - 1] if frame is not None else None
        if pos is None:
            return error
        step, values = plan.steps[pos], frame.f_locals
        shapes = ", ".join(f"{n}{list(values[function.local_of[n]].shape)}"
                           if hasattr(values.get(function.local_of.get(n)), "shape") else n for n in step.reads)
        return ExecutionError(f"{_op_name(step)} failed with inputs {shapes}: "
                              f"{type(error).__name__}: {error}" + _where(step))

    def to_device(self, value):
        """`value` as an array of this executor's place (made on its GPU when it is one,
        whichever device the calling thread has current)."""
        with self._device_context():
            return self.xp.asarray(value)

    def to_host(self, value):
        """A fetched value as a numpy array (copied off the GPU when the place is one)."""
        if self.xp is np:
            return np.asarray(value)
        return self.xp.asnumpy(value)


def _shown(text: str) -> str:
    """`text` for a one-line comment: as it is when printable, else its repr."""
    return text if text.isprintable() else repr(text)


def _describe(obj) -> str:
    """What a constant of a generated function is, for plan_source."""
    if isinstance(obj, (bool, int, float, str, type(None))):
        return repr(obj)[:80]
    if isinstance(getattr(obj, "shape", None), tuple):
        return f"{type(obj).__module__.split('.')[0]}.ndarray {obj.dtype}{list(obj.shape)}"
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None)
    if isinstance(obj, types.ModuleType) or name is None:
        return name or f"{type(obj).__module__}.{type(obj).__qualname__} object"
    module = getattr(obj, "__module__", None) or type(obj).__module__
    return f"{module}.{name.split('.<locals>')[0]}" + (" (specialized)" if "<locals>" in name else "")


def _op_name(step) -> str:
    """`type (op i)`, or `type (op i of block b)` inside a sub-block."""
    block = step.op.block.idx
    return f"{step.op.type} (op {step.index}" + (f" of block {block})" if block else ")")


def _where(step) -> str:
    site = step.op.callsite
    return f"\n  op created at {site}" if site else ""
