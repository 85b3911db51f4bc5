"""Compiling (program, block, feed names, fetch names) into a Plan: one generated function.

Compilation does everything that does not depend on the fed values, once:
- prune to the ops the fetch targets need, plus every op that writes a persistable
  variable (parameter updates, running statistics);
- resolve each op's kernel and bind its attributes (a kernel's `specialize` may give a
  faster callable, or a `UfuncCall`, writing into its first input's buffer when that
  input is an intermediate nobody reads afterwards: `y = y + 1` chains allocate nothing);
- find each variable's last use, so intermediates are deleted right after their last
  reader and peak memory tracks the live set;
- group steps into dependency levels (read-after-write, write-after-read and
  write-after-write on variable names) for the thread pool;
- write the block as the source of one straight-line Python function (`generate`): each
  op a direct call of its kernel on locals, each dead local `del`eted;
- compile the sub-block of each `conditional_block` / `while` op into a Plan of its own,
  whose function the block's function calls under an `if` / a `while` (`SubBlock`).

Safety: the generated text holds only generated identifiers (`v3` for a variable, `k3`
for an object such as a kernel or a constant) and integers; the program's names,
attribute values and source lines never enter it. Kernels and constants reach the
function through its globals dict; `plan_source` adds the ops' own descriptions as
display-only annotations, after the fact.
"""
from __future__ import annotations

import contextvars
import functools
import keyword
import time
from dataclasses import dataclass, field

import numpy as np

from keel.executor import bf16, lod
from keel.executor.errors import ExecutionError, FeedError, LoopLimitError
from keel.executor.kernel_call import MissingKernelError, bind, specialize
from keel.kernels.control_flow import sum_arrays
from keel.kernels.registry import KEEPS_INPUTS, UfuncCall
from keel.program import dtypes
from keel.program.ops import registry as op_registry
from keel.program.ops.control_flow import CONTROL_FLOW_OPS, block_io, control_io
from keel.proto import pb

FEED_FETCH = ("feed", "fetch")
EMPTY = "@EMPTY@"  # PaddlePaddle's placeholder for "no variable" in a duplicable slot


@dataclass
class Step:
    index: int        # op index in the block (for error messages)
    op: object        # program.Operator
    fn: object        # the bound kernel, its specialized callable, or a UfuncCall
    ins: list         # per argument: a name, a list of names (None: @EMPTY@), or None
    outs: list        # per result: the same (None: not bound)
    reads: tuple      # variable names read
    writes: tuple     # variable names written
    frees: tuple      # names deleted after this step
    clobbers: tuple = ()  # a donated input, whose buffer the step may overwrite
    inline: bool = False  # fn is a UfuncCall the generated code makes itself
    sub: "SubBlock | None" = None  # a conditional_block / while: its compiled sub-block


@dataclass
class SubBlock:
    """A control-flow op's sub-block, compiled: `plan.inputs` are the outer variables it
    reads (the call's arguments), `plan.outputs` those it writes (the call's results).
    The step runs `if test(cond...): outputs = block_<i>(inputs)`, or `while test(cond):`,
    the condition among the outputs. `presets`: outputs that have no value yet in the
    enclosing function (a branch not taken, a loop run zero times leaves them None)."""
    loop: bool
    plan: "Plan"
    cond: tuple
    scalar: bool  # the condition is one element (while; conditional_block's is_scalar_condition)
    presets: tuple
    results: tuple = None  # the enclosing function's names for plan.outputs (None: the same)
    otherwise: tuple = ()  # (result, input) pairs set to zeros like the input when the branch is not taken
    record: str = None     # while: the StepScopes variable that keeps each step's inputs (for while_grad)
    backward: "WhileGrad | None" = None  # while_grad: runs the plan once per recorded step, last first


@dataclass
class WhileGrad:
    """while_grad's run: `plan` (the body's ops, then its gradient ops) once per step the
    forward while recorded, last step first. Per step, its inputs are the step's recorded
    body inputs, the gradients of the loop's outputs so far, and values constant over the
    loop; it returns the gradients of the body's outer inputs: a loop variable's becomes
    its output gradient for the step before, the others add up."""
    forward_inputs: tuple   # the forward body's inputs, as each recorded step holds them
    out_grads: tuple        # (loop output, its gradient's name) pairs
    constants: tuple        # other plan inputs (the same every step)
    wanted: tuple           # the inputs whose gradients the op returns, in order
    plan_inputs: tuple = ()  # the plan's inputs, in its function's order
    arrays: frozenset = frozenset()  # the gradients of tensor arrays among out_grads

    def __call__(self, run, steps, out_grads, constants, inputs):
        grads = dict(zip((g for _, g in self.out_grads), out_grads))
        carried = {o for o, _ in self.out_grads}
        total = {}
        names = self.plan_inputs
        for saved in reversed(steps):
            values = dict(zip(self.forward_inputs, saved))
            values.update(grads)
            values.update(zip(self.constants, constants))
            got = run(*[values[n] for n in names])
            for (o, g) in self.out_grads:  # overwritten by the step: no gradient before it
                if g not in self.arrays:     # (a tensor array's entries are written one per step: kept)
                    grads[g] = _zeros_like(values.get(o))
            for name, value in zip(self.wanted, got):
                if name in carried:
                    grads[_grad(name)] = value
                elif value is not None:
                    total[name] = value if total.get(name) is None else _add_gradients(total[name], value)
        out = []
        for name, x in zip(self.wanted, inputs):
            value = grads.get(_grad(name)) if name in carried else total.get(name)
            out.append(_zeros_like(x) if value is None else value)
        return out


_OVERFLOW_CHECKS = frozenset({"check_finite_and_unscale", "update_loss_scaling"})


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
    keep_all: bool = False      # keep_intermediates: the function returns every value
    functions: dict = field(default_factory=dict)  # variant -> Function (made on first use)
    fresh_arrays: tuple = ()    # tensor arrays of this block read before any write: start empty
    pooled: tuple = ()          # per level: its steps worth a thread (`threaded_steps`; empty: serial)

    def __post_init__(self):
        made = {n for s in self.steps for n in s.writes}
        # the function's parameters: what it reads, and fetched values no step makes
        self.inputs = self.scope_reads + tuple(n for n in self.fetch_names
                                               if n not in made and n not in self.scope_reads)
        names = self.fetch_names + self.persistable_writes
        if self.keep_all:
            names += self.inputs + tuple(n for s in self.steps for n in s.writes)
        self.outputs = tuple(dict.fromkeys(names))  # what it returns
        self.fetch_positions = tuple(self.outputs.index(n) for n in self.fetch_names)
        self.has_parallel_levels = any(self.pooled)
        # A block that checks its gradients for overflow itself (AMP's dynamic loss
        # scaling) overflows on purpose now and then: numpy's warnings would be noise.
        self.overflow_expected = any(s.op.type in _OVERFLOW_CHECKS for s in self.steps)


@dataclass
class Function:
    """A generated block function: `run(*values of plan.inputs)` returns the values of
    plan.outputs (and, profiling, the clock readings between steps)."""
    run: object
    source: str
    line_steps: list  # per source line (0-based): the step position it belongs to, or None
    local_of: dict    # variable name -> its local in the source
    constants: dict   # the objects the source names (its globals)
    subs: dict = field(default_factory=dict)  # code object -> (Plan, Function), sub-blocks at any depth


def generate(plan, *, check=None, profile=False, shapes=False, pool=None, sub=None,
             max_loop_iterations=None) -> Function:
    """Write the plan's block as one Python function. Flags give the variants:
    `check(value, step position, write position)` called after each op (NaN/Inf check);
    `profile`: a clock reading after each op, returned with the values (a control-flow op
    is one reading); `shapes` (with `profile`): also each op's input shapes, read just
    before it runs, returned after the clock; `pool`: a ThreadPoolExecutor that runs each
    level's independent ops together; `sub(plan) -> Function`: the function of a
    sub-block's plan (default: made here, without variants); `max_loop_iterations`: each
    `while` counts its iterations and stops with LoopLimitError past that many."""
    sub = sub or generate
    subs: dict = {}
    names: dict[str, str] = {}   # variable name -> local
    consts: dict[str, object] = {}
    ids: dict[int, str] = {}
    owned: set[str] = set()      # locals known to own their memory (fresh ufunc results)

    def local(name):
        if name is None:
            return "None"
        if name not in names:
            names[name] = f"v{len(names)}"
        return names[name]

    def const(obj):
        if id(obj) not in ids:
            ids[id(obj)] = f"k{len(consts)}"
            consts[ids[id(obj)]] = obj
        return ids[id(obj)]

    def call(fn, specs, submit=False):
        """`fn(args)` (or `submit(fn, args)`). A bound kernel (a partial) is called directly,
        its bound arguments passed as constants, under the kernel's own parameter names."""
        args = [arg(spec) for spec in specs]
        if isinstance(fn, functools.partial) and all(k.isidentifier() and not keyword.iskeyword(k)
                                                     for k in fn.keywords):
            args = [const(a) for a in fn.args] + args + [f"{k}={const(v)}" for k, v in fn.keywords.items()]
            fn = fn.func
        return f"submit({', '.join([const(fn)] + args)})" if submit else f"{const(fn)}({', '.join(args)})"

    def arg(spec):
        return "[" + ", ".join(map(local, spec)) + "]" if isinstance(spec, list) else local(spec)

    def target(spec):
        if isinstance(spec, list) and any(n is not None for n in spec):
            return "[" + ", ".join("_" if n is None else local(n) for n in spec) + "]"
        # nothing of this slot is bound: the kernel may return None for it (its `need`)
        return "_" if spec is None or isinstance(spec, list) else local(spec)

    def lhs(step):
        return ", ".join(map(target, step.outs))

    def control_lines(step):
        """A conditional_block / while: its sub-block's function called under `if` / `while`."""
        block = step.sub
        function = sub(block.plan)
        subs[function.run.__code__] = (block.plan, function)
        subs.update(function.subs)
        results = "".join(local(n) + ", " for n in block.results or block.plan.outputs) or "_"
        test = f"{const(_holds if block.scalar else _all_nonempty)}({', '.join(map(local, block.cond))})"
        args = ", ".join(map(local, block.plan.inputs))
        if block.backward is not None:  # while_grad
            b = block.backward
            groups = [[g for _, g in b.out_grads], list(b.constants), list(b.wanted)]
            packed = ", ".join("(" + "".join(local(n) + ", " for n in group) + ")" for group in groups)
            return [f"{results} = {const(b)}({const(function.run)}, {local(block.record)}, {packed})"]
        otherwise = [f"    {local(n)} = {const(_zeros_like)}({local(x)})" for n, x in block.otherwise]
        record = ([f"{local(block.record)} = []"], [f"    {local(block.record)}.append(({args}, ))"]) \
            if block.record else ([], [])
        count = ([], [])
        if block.loop and max_loop_iterations is not None:
            counter, limit = f"n{len(lines)}", int(max_loop_iterations)  # an int of ours, never file text
            count = ([f"{counter} = 0"], [f"    {counter} += 1",
                                          f"    if {counter} > {limit}: {const(_loop_limit_reached)}({limit})"])
        return ([f"{local(n)} = None" for n in block.presets] + record[0] + count[0]
                + [f"{'while' if block.loop else 'if'} {test}:"] + record[1] + count[1]
                + [f"    {results} = {const(function.run)}({args})"]
                + (["else:"] + otherwise if otherwise else []))

    params = ", ".join(local(n) for n in plan.inputs)
    lines, line_steps = [f"def block_{plan.block.idx}({params}):"], [None]
    for n in plan.fresh_arrays:
        lines.append(f"    {local(n)} = []")
        line_steps.append(None)
    if profile:
        lines.append("    T = [now()]")
        line_steps.append(None)
        consts["now"] = time.perf_counter
    if profile and shapes:
        lines.append("    S = []")
        line_steps.append(None)
        consts["shape"] = _shape

    def emit(pos, *texts):
        for text in texts:
            lines.append("    " + text)
            line_steps.append(pos)

    def call_lines(step):
        """The lines computing one step's results."""
        if step.sub is not None:
            return control_lines(step)
        if not step.inline:
            return [f"{lhs(step)} = {call(step.fn, step.ins)}"]
        uf, x = step.fn, local(step.ins[0])
        f = const(uf.ufunc)
        operands = [x] + ([local(step.ins[1])] if uf.binary else [const(uf.operand)]
                          if uf.operand is not None else [])
        plain = f"{lhs(step)} = {f}({', '.join(operands)})"
        if not uf.into_input:
            return [plain]
        into = x if x in owned else f"{x} if {x}.base is None else None"
        written = f"{lhs(step)} = {f}({', '.join(operands)}, out={into})"
        if not uf.binary:
            return [written]
        return ["try:", "    " + written, "except ValueError:  # Y broadcasts X to a bigger shape",
                "    " + plain]

    def before(pos, step):
        if profile and shapes:  # the arguments' shapes, in the order of step.ins
            emit(pos, "S.append((" + "".join(f"shape({local(n)}), " for n in bound_names(step.ins)) + "))")

    def after(pos, step, frees):
        if check is not None:
            emit(pos, *(f"check({local(n)}, {pos}, {j})" for j, n in enumerate(step.writes)))
        if profile:
            emit(pos, "T.append(now())")
        if frees:
            emit(pos, "del " + ", ".join(local(n) for n in frees))

    def run_here(pos, step):
        emit(pos, *call_lines(step))
        for n in step.writes:
            owned.discard(local(n))
        if step.inline and step.outs[0] is not None:
            owned.add(local(step.outs[0]))

    for lv, level in enumerate(plan.levels if pool is not None else [[p] for p in range(len(plan.steps))]):
        steps = [(pos, plan.steps[pos]) for pos in level]
        threaded = plan.pooled[lv] if pool is not None else ()
        if not threaded:  # one at a time (a control-flow op is never submitted)
            for pos, step in steps:
                before(pos, step)
                run_here(pos, step)
                after(pos, step, step.frees if pool is None else ())
        else:  # the level's threaded steps through the pool, the rest here meanwhile
            for pos, step in steps:
                before(pos, step)
            for j, pos in enumerate(threaded):
                emit(pos, f"f{j} = {call(plan.steps[pos].fn, plan.steps[pos].ins, submit=True)}")
            for pos, step in steps:
                if pos not in threaded:
                    run_here(pos, step)
            for j, pos in enumerate(threaded):
                emit(pos, f"{lhs(plan.steps[pos])} = f{j}.result()")
                for n in plan.steps[pos].writes:
                    owned.discard(local(n))
            for pos, step in steps:
                after(pos, step, ())
        if pool is not None and plan.level_frees[lv]:
            emit(level[-1], "del " + ", ".join(local(n) for n in plan.level_frees[lv]))
    result = "(" + "".join(local(n) + ", " for n in plan.outputs) + ")"
    lines.append(f"    return {result}" + (", T" if profile else "") + (", S" if profile and shapes else ""))
    line_steps.append(None)
    source = "\n".join(lines) + "\n"
    if check is not None:
        consts["check"] = check
    if pool is not None:
        consts["submit"] = functools.partial(_submit_in_context, pool)
    return Function(_define(source, consts, f"block_{plan.block.idx}"), source, line_steps, names, consts,
                    subs)


def _submit_in_context(pool, fn, *args, **kwargs):
    """pool.submit with the caller's context (numpy's errstate lives in a contextvar: a
    plan run with its floating-point warnings off keeps them off in the pool's threads)."""
    return pool.submit(contextvars.copy_context().run, fn, *args, **kwargs)


def _loop_limit_reached(limit):
    raise LoopLimitError(f"the loop did not end within {limit} iterations (the executor's max_loop_iterations; "
                         f"raise it, or None for no limit, if the program's loop is meant to run longer)")


def _holds(cond) -> bool:
    """A one-element condition's truth (while; conditional_block with is_scalar_condition)."""
    if getattr(cond, "size", 1) != 1:
        raise ValueError(f"the condition must hold one element, got shape {list(cond.shape)}")
    return bool(cond.reshape(()))


def _grad(name):
    return op_registry.grad_name(name)


def _add_gradients(a, b):
    """Two steps' gradients of what a loop body only reads; a tensor array's add entrywise."""
    if isinstance(a, list):
        return sum_arrays(lambda entries: functools.reduce(lambda x, y: x + y, entries), [a, b])
    return a + b


def _zeros_like(x):
    """The gradient of an input of a branch not taken (conditional_block_grad)."""
    return None if x is None or isinstance(x, list) else np.zeros_like(x)


def _all_nonempty(*conds) -> bool:
    """conditional_block without is_scalar_condition: runs when every Cond tensor has elements."""
    return all(c is not None and c.size != 0 for c in conds)


def bound_names(specs):
    """The variable names a step's argument specs bind, in order."""
    for spec in specs:
        for name in spec if isinstance(spec, list) else [spec]:
            if name is not None:
                yield name


def _shape(value):
    """A value's shape as a tuple, None for what has none (profiling's `shapes`)."""
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else None


def _define(source: str, namespace: dict, name: str):
    """The one place Keel turns text into code: `source` is written by `generate` from
    generated identifiers and integers only (nothing read from a program file), and the
    objects it uses come in through `namespace`, its globals."""
    namespace = {"__builtins__": {"ValueError": ValueError}, **namespace}
    exec(compile(source, f"<keel {name}>", "exec"), namespace)  # noqa: S102
    return namespace[name]


def compile_plan(program, block_idx: int, feed_names, fetch_names, xp, rng_source,
                 free_intermediates: bool = True, ops=None) -> Plan:
    """`ops`: the ops to run instead of the block's own (a conditional_block_grad runs its
    forward block's ops, then its gradient block's; names resolve from `block_idx`)."""
    block = program.block(block_idx)
    ops = block.ops if ops is None else ops
    fetch_set = set(fetch_names)
    feed_set = set(feed_names)

    def persistable(name):
        v = block.find_var(name)
        return v is not None and v.persistable

    # the lengths of fed LoDs, wired into the empty lengths slots of the ops that read them
    lod_bound = lod.bindings(ops, feed_set)
    io = [_op_io(program, op, lod_bound.get(i, {})) for i, op in enumerate(ops)]  # (reads, writes) of each op

    # 1. prune, walking backwards from the fetch targets and the persistable writes
    needed = set(fetch_set)
    kept = []
    for i in range(len(ops) - 1, -1, -1):
        op = ops[i]
        if op.type in FEED_FETCH:
            continue
        outs = [n for n in io[i][1]]
        if outs and all(n in feed_set and not persistable(n) for n in outs):
            continue  # its results are fed
        if any(n in needed for n in outs) or any(persistable(n) for n in outs):
            kept.append(i)
            needed.update(io[i][0])
    kept.reverse()

    # 2. kernels
    missing = sorted({ops[i].type for i in kept if ops[i].type not in CONTROL_FLOW_OPS and _kernel_missing(ops[i].type)})
    if missing:
        raise ExecutionError(f"no kernel for op type(s) {', '.join(missing)}: this program cannot run yet")

    # 3. last uses
    last_use: dict[str, int] = {}
    for pos, i in enumerate(kept):
        for n in io[i][0] + io[i][1]:
            if n != EMPTY:
                last_use[n] = pos
    frees_at: dict[int, list[str]] = {}
    for name, pos in last_use.items():
        if free_intermediates and name not in fetch_set and not persistable(name):
            frees_at.setdefault(pos, []).append(name)

    # 4. steps, and what must come from the scope or the feed
    steps, produced, scope_reads, p_writes, fresh_arrays = [], set(), [], [], []

    def read(names):
        for n in names:
            if n in produced or n in scope_reads or n in fresh_arrays or n == EMPTY:
                continue
            var = block.vars.get(n)
            if var is not None and var.type == pb.VarType.DENSE_TENSOR_ARRAY:
                fresh_arrays.append(n)  # this block's array, not written yet: empty
            else:
                scope_reads.append(n)

    for pos, i in enumerate(kept):
        op = ops[i]
        if op.type in CONTROL_FLOW_OPS:
            step = _control_step(program, i, op, io[i], produced, fetch_set, frees_at.get(pos, ()),
                                 xp, rng_source, free_intermediates, persistable)
            read(step.reads)
            produced.update(step.writes)
            p_writes.extend(n for n in step.writes if persistable(n) and n not in p_writes)
            steps.append(step)
            continue
        # outputs nothing reads, fetches or keeps (an inference reshape2's XShape): not
        # stored, and the kernel is told they are not needed
        dead = {n for n in io[i][1]
                if free_intermediates and n != EMPTY and last_use.get(n) == pos and n not in fetch_set
                and not persistable(n) and n not in op.input_arg_names}
        opdef = op_registry.lookup(op.type)
        bound = lod_bound.get(i, {})  # (lod.bindings found only ops with a definition)
        outputs = {**op.outputs, **{s: names for s, names in bound.items() if s in opdef.output_slots}}
        try:
            fn, kdef = bind(op.type, op.attrs, xp, rng_source,
                            need={s for s, names in outputs.items()
                                  if any(n != EMPTY and n not in dead for n in names)},
                            counts={s: len(names) for s, names in outputs.items()})
        except (MissingKernelError, KeyError) as e:
            raise ExecutionError(f"{op.type} (op {i}): {e}") from None
        in_specs = [_slot_spec(op.input(s) or bound.get(s, []) if s in op.inputs or s not in outputs
                               else outputs[s],
                               opdef.input_slots.get(s, opdef.output_slots.get(s)) if opdef else None)
                    for s in kdef.inputs]
        out_specs = [_drop_names(_slot_spec(outputs.get(s, []), opdef.output_slots.get(s) if opdef else None), dead)
                     for s in kdef.outputs]
        reads = tuple(io[i][0])
        writes = tuple(n for s in kdef.outputs for n in outputs.get(s, []) if n != EMPTY and n not in dead)
        fast, clobbers = None, ()
        bf16_in, bf16_out = _declared_bf16(block, in_specs), _declared_bf16(block, out_specs)
        if any(bf16_in) or any(bf16_out):  # no bfloat16 arithmetic in numpy: see executor/bf16.py
            fn = bf16.emulated(fn, xp, bf16_in, bf16_out, len(kdef.outputs) == 1)
        # a specialized callable gives the first output only: for ops that bind just that one
        elif kdef.specialize is not None and all(spec is None for spec in out_specs[1:]):
            first = in_specs[0] if in_specs else None
            donated = (free_intermediates and isinstance(first, str) and first in produced
                       and last_use.get(first) == pos and first not in fetch_set
                       and first not in feed_set and first not in writes and not persistable(first))
            present = tuple(_declared_dtype(block, s) for s in in_specs)
            fast = specialize(kdef, op.attrs, present, donated, xp)
        if fast is not None:  # it takes the bound inputs only
            fn, in_specs, out_specs = fast, [s for s, p in zip(in_specs, present) if p is not None], out_specs[:1]
            # its buffer may be overwritten, unless the callable says it never is
            clobbers = (first,) if donated and not getattr(fast, KEEPS_INPUTS, False) else ()
        # a UfuncCall is made in the generated code when its result is surely an array
        # (X declared with a rank; numpy gives a scalar for 0-d) and Y is one variable
        inline = (isinstance(fn, UfuncCall) and _declared_rank(block, in_specs[0]) > 0
                  and (not fn.binary or (len(in_specs) == 2 and isinstance(in_specs[1], str))))
        frees = tuple(n for n in frees_at.get(pos, ()) if n not in dead)
        read(reads)
        produced.update(writes)
        p_writes.extend(n for n in writes if persistable(n) and n not in p_writes)
        steps.append(Step(i, op, fn, in_specs, out_specs, reads, writes, frees, clobbers, inline))

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
                levels, level_frees, not free_intermediates, fresh_arrays=tuple(fresh_arrays),
                pooled=tuple(threaded_steps(block, [steps[pos] for pos in level], level) for level in levels))


def _op_io(program, op, lod_bound=None) -> tuple[list, list]:
    """The variables an op reads and writes: its slots' (plus, for a kernel that takes an
    output slot's current value, that slot's: write_to_array's array; plus the LoD lengths
    `lod.bindings` wired in), or for a conditional_block / while what its sub-block reads
    and writes outside itself."""
    if op.type in CONTROL_FLOW_OPS:
        return control_io(program, op)
    reads = list(op.input_arg_names)
    if op.type not in FEED_FETCH and not _kernel_missing(op.type):
        from keel.kernels import registry as kernel_registry
        reads += [n for s in kernel_registry.get(op.type).inputs if s not in op.inputs for n in op.output(s)]
    writes = list(op.output_arg_names)
    for slot, names in (lod_bound or {}).items():
        (reads if slot in op_registry.get(op.type).input_slots else writes).extend(names)
    return reads, writes


def _control_step(program, i, op, io, produced, fetch_set, frees, xp, rng_source, free_intermediates,
                  persistable) -> Step:
    """The step of a conditional_block / while op: its sub-block compiled to a plan fetching
    what the block writes outside itself."""
    loop = op.type == "while"
    idx = op.attr("sub_block")
    cond = tuple(op.input("Condition" if loop else "Cond"))
    where = f"{op.type} (op {i} of block {op.block.idx}, sub-block {idx})"
    if not cond and op.type != "while_grad":
        raise ExecutionError(f"{where}: has no condition variable")
    results, otherwise, locals_, record, backward = None, (), set(program.block(idx).vars), None, None
    if op.type in ("conditional_block_grad", "while_grad"):  # the forward block's ops, then the gradient block's
        grad, forward = program.block(idx), program.block(idx).parent
        slot = "Input" if op.type == "conditional_block_grad" else "X"
        pairs = [(n, g) for n, g in zip(op.input(slot), op.output(slot + "@GRAD")) if g != EMPTY]
        sub = compile_plan(program, idx, (), [_grad(n) for n, _ in pairs], xp, rng_source,
                           free_intermediates, ops=_recomputed(program, forward) + list(grad.ops))
        results = tuple(g for _, g in pairs)
        locals_ |= set(forward.vars)
        if op.type == "conditional_block_grad":
            otherwise = tuple((g, n) for n, g in pairs)
        else:
            backward, record = _while_grad_run(program, op, forward, sub, pairs, xp, rng_source), \
                op.input("StepScopes")[0]
    else:
        outer = [n for n in io[1] if not (loop and n in op.output("StepScopes"))]
        sub = compile_plan(program, idx, (), outer, xp, rng_source, free_intermediates)
        if loop and any(_read_by_while_grad(op.block, o) for o in op.output("StepScopes")):
            record = op.output("StepScopes")[0]
    local = [n for n in sub.inputs if n in locals_]
    if local:
        raise ExecutionError(f"{where}: the block reads {', '.join(map(repr, local))} before any op "
                             f"of it writes them")
    if loop and not set(cond) & set(sub.outputs):
        raise ExecutionError(f"{where}: the loop body never writes its condition "
                             f"{', '.join(map(repr, cond))}, so it would never end")
    writes = tuple(results or sub.outputs) + ((record,) if record and backward is None else ())
    presets = tuple(n for n in writes if n not in produced and n not in sub.inputs and not persistable(n)
                    and not otherwise and backward is None and n != record)
    reads = cond + sub.inputs + tuple(x for _, x in otherwise)
    if backward is not None:
        reads = (record,) + tuple(g for _, g in backward.out_grads) + backward.constants + backward.wanted
        cond = ()
    reads = tuple(dict.fromkeys(reads))
    ins = list(reads) if backward is not None else list(sub.inputs)  # what the call's line passes
    bound = set(produced) | set(reads) | set(writes)  # what the enclosing function has as locals
    return Step(i, op, None, ins, list(writes), reads, tuple(writes),
                tuple(n for n in frees if n in bound),
                sub=SubBlock(loop, sub, cond, loop or bool(op.attr("is_scalar_condition")), presets,
                             results, otherwise, record, backward))


def _while_grad_run(program, op, forward, sub, pairs, xp, rng_source) -> WhileGrad:
    """How while_grad feeds its plan per step (see WhileGrad)."""
    while_op = _forward_while(op)
    outer = [n for n in control_io(program, while_op)[1] if n not in while_op.output("StepScopes")]
    body = compile_plan(program, forward.idx, (), outer, xp, rng_source)
    out_grads = tuple((o, g) for o, g in zip(op.input("Out"), op.input("Out@GRAD")) if g != EMPTY)
    given = set(body.inputs) | {g for _, g in out_grads}
    arrays = frozenset(g for o, g in out_grads
                       if op.block.find_var(o) is not None and op.block.find_var(o).type == pb.VarType.DENSE_TENSOR_ARRAY)
    return WhileGrad(tuple(body.inputs), out_grads, tuple(n for n in sub.inputs if n not in given),
                     tuple(n for n, _ in pairs), tuple(sub.inputs), arrays)


def _recomputed(program, forward) -> list:
    """The forward block's ops a gradient block runs after: all but those that only write
    outer variables the block also reads (a loop variable's or branch input's new value,
    `assign`ed at the end as the builders write it), so that the gradient ops read the
    values the forward ops read, not the ones the block wrote over them."""
    reads, writes = block_io(program, forward.idx)
    overwritten = set(reads) & set(writes)
    return [op for op in forward.ops
            if not (op.output_arg_names and all(n in overwritten for n in op.output_arg_names))]


def _forward_while(grad_op):
    """The while op whose StepScopes a while_grad reads."""
    scopes = grad_op.input("StepScopes")
    for op in grad_op.block.ops:
        if op.type == "while" and op.output("StepScopes") == scopes:
            return op
    raise ExecutionError(f"while_grad (block {grad_op.block.idx}): no while op writes its StepScopes {scopes}")


def _read_by_while_grad(block, name) -> bool:
    """Whether a while_grad of `block` reads StepScopes variable `name` (so the while keeps
    each step's inputs)."""
    return any(op.type == "while_grad" and name in op.input("StepScopes") for op in block.ops)


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


def _declared_bf16(block, specs) -> list[bool]:
    """Per bound slot: whether a variable in it is declared bfloat16."""
    def bf16(name):
        var = block.find_var(name) if name is not None else None
        return var is not None and var.dtype == pb.VarType.BF16
    return [any(bf16(n) for n in spec) if isinstance(spec, list) else bf16(spec) for spec in specs]


def _declared_rank(block, name) -> int:
    """The declared rank of variable `name` (0 when unknown)."""
    var = block.find_var(name) if isinstance(name, str) else None
    return len(var.shape) if var is not None and var.shape is not None else 0


def _feed_specs(block, feed_names) -> dict:
    specs = {}
    for name in feed_names:
        if lod.is_lengths_feed(name, feed_names):
            specs[name] = lod.LENGTHS_SPEC
            continue
        var = block.find_var(name)
        if var is None:
            raise FeedError(f"feed {name!r} is not a variable of the program{block._suggest_var(name)}")
        if var.dtype is None:
            raise FeedError(f"feed {name!r} is a {var.type_string()} variable, not a tensor")
        specs[name] = (dtypes.to_numpy(var.dtype), tuple(var.shape), var.type_string())
    return specs


def _kernel_missing(op_type):
    from keel.kernels import registry as kernel_registry
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


# Handing an op to a pool thread and waiting for it costs tens of microseconds (two thread
# wake-ups, and the GIL passed back and forth), and an op gains from a thread only while
# its kernel runs without the GIL (numpy's loops, BLAS). An op whose work is below this
# many elements (`_elements_touched`: by its declared shapes) is done before that cost
# is repaid: on the zoo's small models submitting every level made runs 1.5-4x slower
# than serial.
THREAD_MIN_ELEMENTS = 1 << 16


def threaded_steps(block, steps, positions) -> tuple:
    """Which of one level's steps (at `positions`) to hand to the pool: those whose work
    is at least THREAD_MIN_ELEMENTS elements, less the largest, which the calling thread runs
    meanwhile with the small ones. Empty (the level runs serially) unless two steps are
    that large, or when a step is a control-flow op (its sub-block runs in the caller)."""
    if len(steps) < 2 or any(step.sub is not None for step in steps):
        return ()
    sizes = [_elements_touched(block, step) for step in steps]
    large = sorted((size, pos) for size, pos in zip(sizes, positions) if size >= THREAD_MIN_ELEMENTS)
    return tuple(sorted(pos for _, pos in large[:-1])) if len(large) >= 2 else ()


def _elements_touched(block, step) -> int:
    """A step's work in elements: those of its inputs and outputs by their declared shapes,
    plus, for a contraction (a conv's Filter, a matmul's X), its multiply-adds / 8 (BLAS
    does several per element's time). An unknown dimension (-1, the batch) counts as 1 and
    a variable without a shape as 0, so that the estimate errs towards running serially."""
    def size(shape):
        return int(np.prod([max(int(d), 1) for d in shape], dtype=np.int64)) if shape is not None else 0

    def shape_of(name):
        var = block.find_var(name)
        return var.shape if var is not None else None

    total = sum(size(shape_of(n)) for n in step.reads + step.writes)
    op = step.op
    if "Filter" in op.inputs and op.input("Filter"):   # conv: each output sums Cin/groups x kh x kw
        depth = size((shape_of(op.input("Filter")[0]) or ())[1:])
    elif op.type in _MATMULS and "X" in op.inputs and op.input("X"):   # each output sums X's last dim
        depth = size((shape_of(op.input("X")[0]) or (0,))[-1:])
    else:
        return total
    outputs = sum(size(shape_of(n)) for n in step.writes[:1])
    return total + outputs * depth // 8


_MATMULS = ("mul", "matmul", "matmul_v2", "fc", "bmm")


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
