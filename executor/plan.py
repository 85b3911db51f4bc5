"""Compiling (program, block, feed names, fetch names) into a Plan: a flat list of steps.

Compilation does everything that does not depend on the fed values, once:
- prune to the ops the fetch targets need, plus every op that writes a persistable
  variable (parameter updates, running statistics);
- resolve each op's kernel and bind its attributes (a kernel's `specialize` may give a
  faster callable, writing into its first input's buffer when that input is an
  intermediate nobody reads afterwards: `y = y + 1` chains allocate nothing);
- find each variable's last use, so non-persistable intermediates are dropped right after
  their last reader and peak memory tracks the live set;
- group steps into dependency levels (read-after-write, write-after-read and
  write-after-write on variable names) for the concurrent runner.
At run time a step is one closure call (see `_make_step`).
"""
from __future__ import annotations

import functools
import operator
from dataclasses import dataclass, field

import numpy as np

from executor.errors import ExecutionError, FeedError
from executor.kernel_call import MissingKernelError, bind, specialize
from kernels.registry import UfuncCall
from program import dtypes
from program.ops import registry as op_registry
from proto import pb

FEED_FETCH = ("feed", "fetch")
EMPTY = "@EMPTY@"  # PaddlePaddle's placeholder for "no variable" in a duplicable slot


@dataclass
class Step:
    index: int        # op index in the block (for error messages)
    op: object        # program.Operator
    run: object       # closure: run(env) executes the kernel and drops dead values
    run_keep: object  # the same without dropping (the concurrent runner frees per level)
    reads: tuple      # variable names read
    writes: tuple     # variable names written
    frees: tuple      # names dropped after this step
    ufunc: tuple | None = None  # (UfuncCall, X, Y or None, Out, drop Y after) when the step inlines one
    clobbers: tuple = ()        # a donated input, whose buffer the step may overwrite


@dataclass
class Plan:
    steps: list
    feed_names: frozenset
    fetch_names: tuple
    scope_reads: tuple          # names read before any step writes them (scope or feed)
    persistable_writes: tuple   # persistable names written (written back to the scope)
    block: object = None
    feed_specs: dict = field(default_factory=dict)  # name -> (numpy dtype, declared shape, "float32[-1, 3]")
    fetch_copies: tuple = ()    # per fetch: copy it out (a persistable the scope may update in place)
    levels: list = field(default_factory=list)  # lists of step positions that may run together
    level_frees: list = field(default_factory=list)  # names to drop after each level

    def __post_init__(self):
        # The serial hot loop calls `runs`: one per step, except that a run of inlined ufunc
        # steps, each consuming the previous one's dead output, is one chained call
        # (`_chain_step`). run_starts[i]: the position of runs[i]'s first step.
        self.runs, self.run_starts = [], []
        pos = 0
        while pos < len(self.steps):
            end = pos + 1
            while end < len(self.steps) and _chains(self.steps[end - 1], self.steps[end]):
                end += 1
            self.runs.append(self.steps[pos].run if end == pos + 1 else _chain_step(self.steps[pos:end]))
            self.run_starts.append(pos)
            pos = end

    @property
    def has_parallel_levels(self) -> bool:
        return any(len(level) > 1 for level in self.levels)


def _resolve(spec, env):
    if spec is None:
        return None
    if isinstance(spec, str):
        return env[spec]
    return [env[n] for n in spec]


def _make_step(fn, in_specs, out_specs, frees):
    """A closure for one op. The common shapes (1-2 plain inputs, one output) get a
    dedicated closure: this is the executor's hot path."""
    simple_ins = all(isinstance(s, str) for s in in_specs)
    single_out = len(out_specs) == 1 and isinstance(out_specs[0], str)
    if simple_ins and single_out and len(in_specs) > 2:  # fc(Input, W, Bias), ...
        out, get = out_specs[0], operator.itemgetter(*in_specs)

        def step(env):
            env[out] = fn(*get(env))
            for f in frees:
                del env[f]
        return step
    if simple_ins and single_out and len(in_specs) in (1, 2):
        out = out_specs[0]
        if len(in_specs) == 1:
            (a,) = in_specs
            if not frees:
                def step(env):
                    env[out] = fn(env[a])
            elif len(frees) == 1:
                (f,) = frees
                def step(env):
                    env[out] = fn(env[a])
                    del env[f]
            else:
                def step(env):
                    env[out] = fn(env[a])
                    for f in frees:
                        del env[f]
        else:
            a, b = in_specs
            if not frees:
                def step(env):
                    env[out] = fn(env[a], env[b])
            elif len(frees) == 1:
                (f,) = frees
                def step(env):
                    env[out] = fn(env[a], env[b])
                    del env[f]
            else:
                def step(env):
                    env[out] = fn(env[a], env[b])
                    for f in frees:
                        del env[f]
        return step

    def step(env):
        result = fn(*[_resolve(s, env) for s in in_specs])
        if len(out_specs) == 1:
            result = (result,)
        for spec, value in zip(out_specs, result):
            if spec is None or value is None:
                continue
            if isinstance(spec, str):
                env[spec] = value
            else:
                for name, v in zip(spec, value):
                    if name is not None:
                        env[name] = v
        for name in frees:
            env.pop(name, None)
    return step


def _ufunc_step(call, a, b, out, pop_b):
    """The step of an op specialized to one ufunc call (kernels.registry.UfuncCall), made
    here rather than through the kernel: the hot path of cheap elementwise ops. A donated
    input `a` is popped (this is its last use) and written into if it owns its memory (a
    view may share its buffer with a live value) and the result has its shape. `b`: the
    second input of a binary call (dropped after when `pop_b`: its last use)."""
    ufunc, c = call.ufunc, call.operand
    if call.binary and call.into_input:
        def step(env):
            x, y = env.pop(a), env[b]
            try:
                env[out] = ufunc(x, y, out=x if x.base is None else None)
            except ValueError:  # y broadcasts x to a bigger shape
                env[out] = ufunc(x, y)
            if pop_b:
                del env[b]
    elif call.binary:
        def step(env):
            env[out] = ufunc(env[a], env[b])
            if pop_b:
                del env[b]
    elif call.into_input and c is not None:
        def step(env):
            x = env.pop(a)
            env[out] = ufunc(x, c, out=x if x.base is None else None)
    elif call.into_input:
        def step(env):
            x = env.pop(a)
            env[out] = ufunc(x, out=x if x.base is None else None)
    elif c is not None:
        def step(env):
            env[out] = ufunc(env[a], c)
    else:
        def step(env):
            env[out] = ufunc(env[a])
    return step


def _inlinable(call, in_specs, frees, block) -> bool:
    """Whether the plan makes `call` (a UfuncCall) in the step itself: X declared with a
    rank (so the result is an array, not a numpy scalar), a binary call's Y another
    variable, and the step frees only X (exactly when donated) and Y."""
    if not isinstance(call, UfuncCall) or not _declared_rank(block, in_specs[0]):
        return False
    a = in_specs[0]
    b = in_specs[1] if call.binary and len(in_specs) == 2 and isinstance(in_specs[1], str) else None
    if call.binary and (b is None or b == a):
        return False
    return (a in frees) == call.into_input and set(frees) <= {a, b}


def _chains(prev, step) -> bool:
    """`step` inlines a ufunc written into its first input, which is `prev`'s inlined
    output (dead after `step`: only a donated input is written into)."""
    return (prev.ufunc is not None and step.ufunc is not None and step.ufunc[0].into_input
            and step.ufunc[1] == prev.ufunc[3])


class ChainFailure(Exception):
    """A call of a chained step failed: `offset` says which of its steps."""

    def __init__(self, offset: int, error: Exception):
        super().__init__(offset, error)
        self.offset, self.error = offset, error


def _chain_step(steps):
    """One run for consecutive inlined ufunc steps, each writing into the previous one's
    output (so the values in between never enter the environment): one loop iteration and
    one ufunc call per op, about the cost of the floor. A failure is raised as
    ChainFailure with the failing step's offset, its input placed in the environment for
    the error message."""
    first, a = steps[0].ufunc[:2]
    into = first.into_input
    # per step: (ufunc, constant operand or None, second input or None, drop it after)
    calls = tuple((call.ufunc, call.operand, b if call.binary else None, pop_b)
                  for call, _, b, _, pop_b in (s.ufunc for s in steps))
    inputs = [s.ufunc[1] for s in steps]
    out = steps[-1].ufunc[3]

    def step(env):
        x = env.pop(a) if into else env[a]
        target = x if into and x.base is None else None  # after the first call: x itself
        call = None
        try:
            for call in calls:
                f, k, name, pop = call
                if name is None:
                    x = f(x, out=target) if k is None else f(x, k, out=target)
                else:
                    y = env[name]
                    try:
                        x = f(x, y, out=target)
                    except ValueError:  # y broadcasts x to a bigger shape
                        x = f(x, y)
                    if pop:
                        del env[name]
                target = x
        except Exception as e:
            offset = next(i for i, c in enumerate(calls) if c is call)
            env[inputs[offset]] = x
            raise ChainFailure(offset, e) from e
        env[out] = x
    return step


def _bind_empty_inputs(fn, kdef, in_specs):
    """Bind empty optional inputs (None) by keyword when they all come after the given
    ones, so `scale(X)` is called as fn(x) and takes the fast path."""
    first_empty = next((i for i, s in enumerate(in_specs) if s is None), len(in_specs))
    if first_empty == len(in_specs) or any(s is not None for s in in_specs[first_empty:]):
        return fn, in_specs
    names = kdef.input_params()[first_empty:]
    return functools.partial(fn, **{n: None for n in names}), in_specs[:first_empty]


def compile_plan(program, block_idx: int, feed_names, fetch_names, xp, rng_source,
                 free_intermediates: bool = True) -> Plan:
    block = program.block(block_idx)
    fetch_set = set(fetch_names)
    feed_set = set(feed_names)

    def persistable(name):
        v = block.find_var(name)
        return v is not None and v.persistable

    # 1. prune, walking backwards from the fetch targets and the persistable writes
    needed = set(fetch_set)
    kept = []
    for i in range(len(block.ops) - 1, -1, -1):
        op = block.ops[i]
        if op.type in FEED_FETCH:
            continue
        outs = [n for n in op.output_arg_names]
        if outs and all(n in feed_set and not persistable(n) for n in outs):
            continue  # its results are fed
        if any(n in needed for n in outs) or any(persistable(n) for n in outs):
            kept.append(i)
            needed.update(op.input_arg_names)
    kept.reverse()

    # 2. kernels
    missing = sorted({block.ops[i].type for i in kept if _kernel_missing(block.ops[i].type)})
    if missing:
        raise ExecutionError(f"no kernel for op type(s) {', '.join(missing)}: this program cannot run yet")

    # 3. last uses
    last_use: dict[str, int] = {}
    for pos, i in enumerate(kept):
        op = block.ops[i]
        for n in op.input_arg_names + op.output_arg_names:
            if n != EMPTY:
                last_use[n] = pos
    frees_at: dict[int, list[str]] = {}
    for name, pos in last_use.items():
        if free_intermediates and name not in fetch_set and not persistable(name):
            frees_at.setdefault(pos, []).append(name)

    # 4. steps, and what must come from the scope or the feed
    steps, produced, scope_reads, p_writes = [], set(), [], []
    for pos, i in enumerate(kept):
        op = block.ops[i]
        # outputs nothing reads, fetches or keeps (an inference reshape2's XShape): not
        # stored, and the kernel is told they are not needed
        dead = {n for n in op.output_arg_names
                if free_intermediates and n != EMPTY and last_use.get(n) == pos and n not in fetch_set
                and not persistable(n) and n not in op.input_arg_names}
        try:
            fn, kdef = bind(op.type, op.attrs, xp, rng_source,
                            need={s for s, names in op.outputs.items()
                                  if any(n != EMPTY and n not in dead for n in names)})
        except (MissingKernelError, KeyError) as e:
            raise ExecutionError(f"{op.type} (op {i}): {e}") from None
        opdef = op_registry.lookup(op.type)
        in_specs = [_slot_spec(op.input(s), opdef.input_slots.get(s) if opdef else None) for s in kdef.inputs]
        out_specs = [_drop_names(_slot_spec(op.output(s), opdef.output_slots.get(s) if opdef else None), dead)
                     for s in kdef.outputs]
        reads = tuple(op.input_arg_names)
        writes = tuple(n for s in kdef.outputs for n in op.output(s) if n != EMPTY and n not in dead)
        fast, clobbers = None, ()
        # a specialized callable gives the first output only: for ops that bind just that one
        if kdef.specialize is not None and all(spec is None for spec in out_specs[1:]):
            first = in_specs[0] if in_specs else None
            donated = (free_intermediates and isinstance(first, str) and first in produced
                       and last_use.get(first) == pos and first not in fetch_set
                       and first not in feed_set and first not in writes and not persistable(first))
            present = tuple(_declared_dtype(block, s) for s in in_specs)
            fast = specialize(kdef, op.attrs, present, donated, xp)
        if fast is not None:  # it takes the bound inputs only
            fn, in_specs, out_specs = fast, [s for s, p in zip(in_specs, present) if p is not None], out_specs[:1]
            clobbers = (first,) if donated else ()  # its buffer may be overwritten
        else:
            fn, in_specs = _bind_empty_inputs(fn, kdef, in_specs)
        frees = tuple(n for n in frees_at.get(pos, ()) if n not in dead)
        ufunc = None
        if _inlinable(fn, in_specs, frees, block):
            b = in_specs[1] if fn.binary else None
            ufunc = (fn, in_specs[0], b, out_specs[0], b in frees)
            # the concurrent runner's variant drops nothing (it frees per level)
            step_fns = (_ufunc_step(*ufunc), _make_step(fn, in_specs, out_specs, ()))
        else:
            step_fns = (_make_step(fn, in_specs, out_specs, frees), _make_step(fn, in_specs, out_specs, ()))
        for n in reads:
            if n not in produced and n not in scope_reads:
                scope_reads.append(n)
        produced.update(writes)
        p_writes.extend(n for n in writes if persistable(n) and n not in p_writes)
        steps.append(Step(i, op, *step_fns, reads, writes, frees, ufunc, clobbers))

    levels = _levels(steps)
    level_of = {pos: lv for lv, members in enumerate(levels) for pos in members}
    last_level: dict[str, int] = {}
    for pos, step in enumerate(steps):
        for n in step.reads + step.writes:
            last_level[n] = max(last_level.get(n, -1), level_of[pos])
    level_frees = [[] for _ in levels]
    for name, lv in last_level.items():
        if free_intermediates and name not in fetch_set and not persistable(name):
            level_frees[lv].append(name)
    return Plan(steps, frozenset(feed_set), tuple(fetch_names), tuple(scope_reads), tuple(p_writes),
                block, _feed_specs(block, feed_set), tuple(persistable(n) for n in fetch_names),
                levels, level_frees)


def _declared_dtype(block, spec):
    """The numpy dtype a bound input slot declares (its first variable's), None if empty or
    unknown. (Kernels' specializations use it only to choose a path; the values decide.)"""
    if spec is None:
        return None
    name = spec if isinstance(spec, str) else next((n for n in spec if n is not None), None)
    var = block.find_var(name) if name is not None else None
    if var is None or var.dtype is None:
        return np.dtype("V") if name is not None else None
    return np.dtype(dtypes.to_numpy(var.dtype))


def _declared_rank(block, name) -> int:
    """The declared rank of variable `name` (0 when unknown)."""
    var = block.find_var(name) if isinstance(name, str) else None
    return len(var.shape) if var is not None and var.shape is not None else 0


def _feed_specs(block, feed_names) -> dict:
    specs = {}
    for name in feed_names:
        var = block.find_var(name)
        if var is None:
            raise FeedError(f"feed {name!r} is not a variable of the program{block._suggest_var(name)}")
        if var.dtype is None:
            raise FeedError(f"feed {name!r} is a {var.type_string()} variable, not a tensor")
        specs[name] = (dtypes.to_numpy(var.dtype), tuple(var.shape), var.type_string())
    return specs


def _kernel_missing(op_type):
    from kernels import registry as kernel_registry
    return kernel_registry.get(op_type) is None


def _slot_spec(names, slot):
    """How a kernel receives a slot: a name, a list of names (duplicable; None for an
    @EMPTY@ placeholder), or None (empty)."""
    if slot is not None and slot.duplicable:
        return [None if n == EMPTY else n for n in names]
    return names[0] if names else None


def _drop_names(spec, dead):
    """A slot spec with the names in `dead` unbound (None)."""
    if isinstance(spec, str):
        return None if spec in dead else spec
    if isinstance(spec, list):
        return [None if n in dead else n for n in spec]
    return spec


def _levels(steps) -> list[list[int]]:
    """Group steps into waves that can run concurrently: a step waits for the last writer of
    what it reads (RAW), the readers of what it overwrites (WAR: its outputs, and a donated
    input whose buffer it writes into) and the previous writer of what it writes (WAW)."""
    level_of: list[int] = []
    last_write: dict[str, int] = {}
    last_reads: dict[str, int] = {}
    for pos, step in enumerate(steps):
        level = 0
        for n in step.reads:
            if n in last_write:
                level = max(level, level_of[last_write[n]] + 1)
        for n in step.writes:
            if n in last_write:
                level = max(level, level_of[last_write[n]] + 1)
            if n in last_reads:
                level = max(level, last_reads[n] + 1)
        for n in step.clobbers:  # overwriting a donated buffer: after its other readers (WAR)
            if n in last_reads:
                level = max(level, last_reads[n] + 1)
        level_of.append(level)
        for n in step.reads:
            last_reads[n] = max(last_reads.get(n, -1), level)
        for n in step.writes:
            last_write[n] = pos
    levels: list[list[int]] = [[] for _ in range(max(level_of, default=-1) + 1)]
    for pos, level in enumerate(level_of):
        levels[level].append(pos)
    return levels


def is_feed_var(var) -> bool:
    return var is not None and var.type == pb.VarType.DENSE_TENSOR and var.need_check_feed
