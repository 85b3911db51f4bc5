"""Reverse-mode differentiation of a program: gradient ops appended as ordinary ops.

    params_grads = pg.append_backward(loss)            # [(param, param@GRAD), ...]
    dx, = pg.gradients([y], [x])

The result reads like a training program written by PaddlePaddle: a `fill_constant`
seeds `loss@GRAD` with ones, every differentiated op gets its gradient op from the
op's `GradRule` (program/ops/registry.py; `<op>_grad` with slots `Out@GRAD` -> `X@GRAD`),
gradients are named `<var>@GRAD`, and a variable read by several ops gets its partial
gradients under `<var>@GRAD@RENAME@block<b>@<k>`, added up by a `sum` op.

Only what the requested gradients need is appended: ops are differentiated when they
lie on a path from a wanted variable (trainable parameters, or `gradients`' inputs) to
a target, skipping variables with `stop_gradient`, those in `no_grad_set` and inputs
an op's rule does not differentiate (labels, indices).
"""
from __future__ import annotations

from collections import defaultdict

from keel.program import dtypes, op_role
from keel.program.errors import OpError, ProgramError
from keel.program.ops import registry
from keel.program.ops.registry import NOT_DIFFERENTIABLE, GradOp, GradRule, grad_name
from keel.program.variable import Parameter, Variable

EMPTY = "@EMPTY@"  # PaddlePaddle's name for "no variable" in a duplicable slot


# Ops whose output may be a variable an earlier differentiated op wrote: a while updates its
# loop variables in place; write_to_array writes one entry of an array other writes filled
# (each write's gradient reads its entry of the one array gradient, as PaddlePaddle's does:
# an entry written twice gives the earlier write the later one's gradient there too).
_IN_PLACE_DIFFERENTIABLE = ("while", "write_to_array")


class GradNames:
    """What a custom gradient maker sees: gradient variable names by forward slot."""

    def __init__(self, out_grads: dict[str, list[str]], in_grads: dict[str, list[str]]):
        self._out, self._in = out_grads, in_grads

    def out(self, slot: str) -> list[str]:
        """Gradients of forward output `slot` (always present)."""
        return self._out[slot]

    def inp(self, slot: str) -> list[str]:
        """Gradients to write for forward input `slot`; "" where none is wanted."""
        return self._in[slot]


def append_backward(loss: Variable, parameter_list=None, no_grad_set=None) -> list[tuple[Parameter, Variable]]:
    """Append the ops computing d(loss)/d(param) to loss's program and return
    `[(param, grad_var)]` for every trainable parameter (or those in `parameter_list`,
    given as Parameters or names) that the loss depends on.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     x = paddle.static.data("x", [None, 4], "float32")
        ...     loss = paddle.mean(paddle.static.nn.fc(x, 2))
        ...     params_grads = paddle.static.append_backward(loss)
        >>> [(p.name, g.name) for p, g in params_grads]
        [('fc_0.w_0', 'fc_0.w_0@GRAD'), ('fc_0.b_0', 'fc_0.b_0@GRAD')]
    """
    block = loss.block
    program = block.program
    if parameter_list is None:
        params = [p for p in program.all_parameters() if p.trainable]
    else:
        # by name: Parameters, names, or a Layer's parameters (program.nn.LayerParameter)
        params = [block.var(p if isinstance(p, str) else p.name) for p in parameter_list]
    _mark_loss_op(block, loss)
    seed = _ones_like(loss, attrs_role=op_role.BACKWARD | op_role.LOSS)
    grads = _differentiate(block, [loss.name], [seed], [p.name for p in params], no_grad_set)
    return [(p, block.var(grads[p.name])) for p in params if p.name in grads]


def gradients(targets, inputs, target_gradients=None, no_grad_set=None) -> list[Variable | None]:
    """Gradients of sum(targets) with respect to each of `inputs` (None where a target
    does not depend on it). `target_gradients` (optional, one per target) seed the targets'
    gradients instead of ones.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     x = paddle.static.data("x", [3], "float32")
        ...     x.stop_gradient = False
        ...     y = paddle.sum(x * x)
        ...     dx, = paddle.static.gradients([y], [x])
        >>> paddle.static.Executor().run(main, feed={"x": np.array([1.0, 2.0, 3.0], "float32")}, fetch_list=[dx])[0]
        array([2., 4., 6.], dtype=float32)
    """
    targets = _as_list(targets)
    inputs = _as_list(inputs)
    block = targets[0].block
    tgrads = _as_list(target_gradients) if target_gradients is not None else [None] * len(targets)
    if len(tgrads) != len(targets):
        raise ValueError(f"gradients: {len(targets)} targets but {len(tgrads)} target_gradients")
    seeds = []
    for t, tg in zip(targets, tgrads):
        if tg is None:
            seeds.append(_ones_like(t, attrs_role=op_role.BACKWARD))
        else:
            if tuple(tg.shape) != tuple(t.shape) and -1 not in (tuple(tg.shape) + tuple(t.shape)):
                raise ProgramError(f"gradients: target_gradient {tg.name} {list(tg.shape)} does not match "
                                   f"target {t.name} {list(t.shape)}")
            seeds.append(GradOp("assign", {"X": [tg.name]}, {"Out": [grad_name(t.name)]}))
    grads = _differentiate(block, [t.name for t in targets], seeds, [v.name for v in inputs], no_grad_set)
    return [block.var(grads[v.name]) if v.name in grads else None for v in inputs]


# -- the engine -----------------------------------------------------------------------
def _differentiate(block, targets, seeds, wanted, no_grad_set, *, into=None, available=()) -> dict[str, str]:
    """Append `seeds` and the gradient ops of every op of `block` between `wanted` and
    `targets` (to block `into`, default `block`: a control-flow op's gradient block);
    return {wanted var: its gradient var} for those reached. `available`: gradient
    variables given from outside (a sub-block's output gradients)."""
    ops = list(block.ops)
    no_grad = _no_grad_names(block, no_grad_set, set(wanted))
    reach = _forward_reach(ops, wanted, no_grad)
    chosen, need = _ops_to_differentiate(ops, targets, reach, no_grad)

    specs = list(seeds)
    produced = {n for s in seeds for names in s.outputs.values() for n in names} | set(available)
    for op in chosen:
        rule = op.opdef.grad
        out_grads = {}
        for slot in rule.output_grads_read():
            names = []
            for n in op.output(slot):
                g = grad_name(n)
                if g not in produced:  # an output no target depends on: its gradient is zero
                    specs.append(GradOp("fill_any_like", {"X": [n]}, {"Out": [g]},
                                        {"value": 0.0, "dtype": -1}, forward=op))
                    produced.add(g)
                names.append(g)
            out_grads[slot] = names
        in_grads = {slot: [grad_name(n) if n in need and n in reach and n not in no_grad else ""
                           for n in op.input(slot)]
                    for slot in rule.differentiable_inputs()}
        names = GradNames(out_grads, in_grads)
        made = rule.maker(op, names) if rule.maker else [_make_default(op, rule, names)]
        for spec in made:
            spec.forward = op
            produced.update(n for ns in spec.outputs.values() for n in ns if n and n != EMPTY)
        specs.extend(made)

    into = into if into is not None else block
    specs = _accumulate(specs, into.idx)
    _append(into, specs)
    return {n: grad_name(n) for n in wanted if grad_name(n) in produced}


def differentiate_block(block, grad_block, output_grads: dict, wanted) -> dict[str, str]:
    """The gradient ops of sub-block `block`'s ops, appended to `grad_block`: given the
    gradients of what it writes outside (`output_grads`: {var: its gradient var}, read
    from outside), those of `wanted` (what it reads from outside). For control-flow
    gradient makers (program/ops/control_flow.py)."""
    return _differentiate(block, list(output_grads), [], list(wanted), None, into=grad_block,
                          available=output_grads.values())


def _no_grad_names(block, no_grad_set, wanted: set) -> set[str]:
    names = {v if isinstance(v, str) else v.name for v in (no_grad_set or ())}
    for b in block.program.blocks:
        for v in b.vars.values():
            if v.name in wanted:
                continue
            if v.stop_gradient or (isinstance(v, Parameter) and not v.trainable):
                names.add(v.name)
    return names


def _rule(op):
    opdef = op.opdef
    return opdef.grad if opdef is not None else None


def _forward_reach(ops, wanted, no_grad) -> set[str]:
    """Variables that depend on a wanted variable through differentiable slots."""
    reach = set(wanted)
    for op in ops:
        rule = _rule(op)
        if rule is NOT_DIFFERENTIABLE:
            continue
        if isinstance(rule, GradRule):
            ins, outs = rule.differentiable_inputs(), rule.output_grads_read()
        else:  # no rule yet: assume it propagates, and complain if it is ever needed
            ins, outs = op.inputs.keys(), op.outputs.keys()
        if any(n in reach for s in ins for n in op.input(s)):
            reach.update(n for s in outs for n in op.output(s) if n not in no_grad)
    return reach


def _ops_to_differentiate(ops, targets, reach, no_grad):
    """Walk back from the targets: the ops whose gradient is needed, last first, and the
    variables whose gradients they need."""
    need = set(targets)
    chosen = []
    written_by: dict[str, object] = {}
    for op in reversed(ops):
        rule = _rule(op)
        if rule is NOT_DIFFERENTIABLE:
            continue
        if not any(n in need for n in op.output_arg_names):
            continue
        if not isinstance(rule, GradRule):
            if any(n in reach for n in op.input_arg_names):
                raise OpError("has no gradient rule, so the loss cannot be differentiated through it "
                              "(mark its inputs stop_gradient or put them in no_grad_set)",
                              op_type=op.type, callsite=op.callsite)
            continue
        if not any(n in need and n in reach for s in rule.output_grads_read() for n in op.output(s)):
            continue
        ins = [n for s in rule.differentiable_inputs() for n in op.input(s) if n in reach and n not in no_grad]
        if not ins:
            continue
        for n in op.output_arg_names:
            # a while op updates its loop variables in place: its gradient maps the gradient
            # after the loop to the one before it, which the op that wrote them first reads
            if n in written_by and n in reach and written_by[n].type not in _IN_PLACE_DIFFERENTIABLE:
                raise OpError(f"writes {n!r}, which a later differentiated op "
                              f"({written_by[n].type}) overwrites; in-place updates on the gradient "
                              "path are not supported", op_type=op.type, callsite=op.callsite)
            written_by[n] = op
        chosen.append(op)
        need.update(ins)
    return chosen, need


def _make_default(op, rule: GradRule, g: GradNames) -> GradOp:
    """The `<op>_grad` op of a declarative rule: forward slots passed through, output
    gradients in, input gradients out (an unwanted one left empty, as PaddlePaddle does)."""
    gdef = registry.get(rule.type or op.type + "_grad")
    inputs = {}
    for slot in rule.inputs:
        if slot.endswith(registry.GRAD_SUFFIX):
            inputs[slot] = g.out(slot[:-len(registry.GRAD_SUFFIX)])
        elif slot in op.opdef.input_slots:
            inputs[slot] = op.input(slot)
        else:
            inputs[slot] = op.output(slot)
    outputs = {}
    for slot in rule.outputs:
        names = g.inp(slot[:-len(registry.GRAD_SUFFIX)])
        if gdef.output_slots[slot].duplicable:
            outputs[slot] = [n or EMPTY for n in names] if any(names) else []
        else:
            outputs[slot] = [n for n in names if n]
    attrs = {k: v for k, v in op.attrs.items() if k in gdef.attrs or k in gdef.extra_attrs}
    return GradOp(gdef.type, inputs, outputs, attrs)


def _accumulate(specs: list[GradOp], block_idx: int) -> list[GradOp]:
    """A gradient written by several ops: each writes a renamed partial gradient, and a
    `sum` op after the last of them adds them up under the real name. A gradient op that
    reads a gradient and writes it again (while_grad: a loop variable's gradient after the
    loop in, before the loop out) closes one such group and starts the next."""
    writers: dict[str, list[list[tuple[int, str, int]]]] = defaultdict(lambda: [[]])  # groups of (spec, slot, position)
    for i, spec in enumerate(specs):
        read = {n for names in spec.inputs.values() for n in names}
        for slot, names in spec.outputs.items():
            for j, n in enumerate(names):
                if n and n != EMPTY:
                    if n in read and writers[n][-1]:
                        writers[n].append([])
                    writers[n][-1].append((i, slot, j))
    sums_after: dict[int, list[GradOp]] = defaultdict(list)
    groups = [(g, places) for g, generations in writers.items() for places in generations]
    renamed: dict[str, int] = defaultdict(int)
    for g, places in groups:
        if len(places) < 2:
            continue
        parts = []
        for i, slot, j in places:
            part = f"{g}@RENAME@block{block_idx}@{renamed[g]}"
            renamed[g] += 1
            specs[i].outputs[slot][j] = part
            parts.append(part)
        last = places[-1][0]
        sums_after[last].append(GradOp("sum", {"X": parts}, {"Out": [g]}, forward=specs[last].forward))
    result = []
    for i, spec in enumerate(specs):
        result.append(spec)
        result.extend(sums_after.get(i, ()))
    return result


def _forward_name(grad_var: str) -> str:
    return grad_var.split(registry.GRAD_SUFFIX)[0]


def _append(block, specs: list[GradOp]) -> None:
    """Create the gradient variables (shaped like their forward variables) and append the
    ops as backward ops, each pointing at the user's line that created its forward op."""
    program = block.program
    for spec in specs:
        for names in spec.outputs.values():
            for n in names:
                if n and n != EMPTY and block.find_var(n) is None:
                    fwd = block.var(_forward_name(n))
                    block.create_var(n, fwd.shape, fwd.dtype, type=fwd.type)  # a tensor array's is one too
    with op_role.role_guard(program, op_role.BACKWARD):
        for spec in specs:
            attrs = dict(spec.attrs)
            role_var = []
            for names in spec.outputs.values():
                for n in names:
                    p = _forward_name(n)
                    if n == grad_name(p) and isinstance(block.find_var(p), Parameter):
                        role_var += [p, n]
            attrs["op_role_var"] = role_var
            op = block.append_op(spec.type, spec.inputs, spec.outputs, attrs, all_input_slots=False)
            if spec.forward is not None and spec.forward.callstack:
                op.set_attr("op_callstack", spec.forward.callstack)


def _ones_like(var: Variable, attrs_role: int) -> GradOp:
    """The op seeding var@GRAD with ones: `fill_constant` for a fully known shape (as
    PaddlePaddle writes for the loss), `fill_any_like` when a dim is unknown."""
    out = {"Out": [grad_name(var.name)]}
    shape = list(var.shape or ())
    if all(d >= 0 for d in shape):
        return GradOp("fill_constant", {}, out, {"shape": shape, "value": 1.0, "dtype": var.dtype,
                                                 "op_role": attrs_role})
    return GradOp("fill_any_like", {"X": [var.name]}, out,
                  {"value": 1.0, "dtype": var.dtype if dtypes.is_floating(var.dtype) else -1,
                   "op_role": attrs_role})


def _mark_loss_op(block, loss) -> None:
    for op in reversed(block.ops):
        if loss.name in op.output_arg_names:
            op.set_attr("op_role", op_role.LOSS)
            return


def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]
