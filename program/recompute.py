"""Activation recomputation (checkpointing): PaddlePaddle's
`paddle.incubate.optimizer.RecomputeOptimizer`.

    opt = RecomputeOptimizer(pg.optimizer.Adam(1e-3))
    opt._set_checkpoints([layer1_out, layer2_out, ...])
    opt.minimize(loss)

The checkpoints cut the forward ops into segments: [start, the op producing the first
checkpoint], (that op, the op producing the second], ... The backward pass is appended as
usual, then rewritten: before the first gradient op that reads a value computed inside a
segment, the segment's forward ops are appended again with their outputs renamed
`<name>.subprog_<i>` (PaddlePaddle's names, i counting segments from the last), and the
segment's gradient ops read those instead. The forward values inside a segment then have
their last use in the forward pass, so the executor (which deletes every intermediate
after its last reader, executor/plan.py) frees them there, and only the checkpoints, the
values read across segments and the current segment's recomputed values are alive in the
backward pass. The recomputed ops are the same ops on the same inputs, so the gradients are
bit for bit those without recompute.

Kept, not recomputed (as PaddlePaddle keeps them): checkpoints, persistable variables,
inputs (values no forward op makes), values read outside their segment, and the outputs
of random ops (dropout, *_random: anything with a `seed` attribute), which would draw
differently a second time; the ops after the last checkpoint are not recomputed either.
Nor are ops that update a variable in place (batch_norm's running statistics): a second run
would update them twice (PaddlePaddle's recompute does), so their outputs are kept.
"""
from __future__ import annotations

from keel.program import op_role
from keel.program.errors import ProgramError
from keel.program.variable import Variable

__all__ = ["RecomputeOptimizer"]


class RecomputeOptimizer:
    """Wrap `optimizer`; `_set_checkpoints([...])` (variables or names) before `minimize`."""

    def __init__(self, optimizer):
        self._optimizer = optimizer
        self._checkpoints = None

    def _set_checkpoints(self, checkpoints) -> None:
        if not isinstance(checkpoints, list) or not all(isinstance(c, (Variable, str)) for c in checkpoints):
            raise TypeError("_set_checkpoints: checkpoints should be a list of Variable or a list of str")
        self._checkpoints = checkpoints

    def backward(self, loss, startup_program=None, parameter_list=None, no_grad_set=None, callbacks=None):
        if self._checkpoints is None:
            raise ProgramError("RecomputeOptimizer: call _set_checkpoints([...]) before minimize/backward")
        block = loss.block
        forward_count = len(block.ops)
        params_grads = self._optimizer.backward(loss, startup_program, parameter_list, no_grad_set)
        names = [c if isinstance(c, str) else c.name for c in self._checkpoints]
        recompute_segments(block, forward_count, names)
        return params_grads

    def apply_gradients(self, params_grads, startup_program=None):
        return self._optimizer.apply_gradients(params_grads, startup_program)

    def apply_optimize(self, loss, startup_program, params_grads):
        return self.apply_gradients(params_grads, startup_program)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        return self.apply_optimize(loss, startup_program, params_grads), params_grads


def _not_recomputable(op) -> bool:
    """A random op (it would draw differently), or one updating a variable in place (batch_norm's
    running statistics: a second run would read the updated value and update it again)."""
    opdef = op.opdef
    random = opdef is not None and ("seed" in opdef.attrs or "seed" in opdef.extra_attrs)
    return random or bool(set(op.output_arg_names) & set(op.input_arg_names))


def segments(ops, checkpoints: list[str]) -> list[tuple[int, int]]:
    """[start, end) op ranges, one per checkpoint, each ending with the op that produces it."""
    produced_at = {}
    for i, op in enumerate(ops):
        for n in op.output_arg_names:
            produced_at[n] = i
    missing = [c for c in checkpoints if c not in produced_at]
    if missing:
        raise ProgramError(f"RecomputeOptimizer: checkpoint(s) {missing} are not computed by the forward "
                           "ops of the loss's block (a checkpoint is an intermediate value, not an input "
                           "or a parameter)")
    ends = sorted({produced_at[c] + 1 for c in checkpoints})
    return [(start, end) for start, end in zip([0] + ends[:-1], ends) if end > start]


def recompute_segments(block, forward_count: int, checkpoints: list[str]) -> int:
    """Rewrite the backward ops after `forward_count` in `block` to recompute each segment's
    values; return the number of ops inserted."""
    forward, backward = block.ops[:forward_count], block.ops[forward_count:]
    ranges = segments(forward, checkpoints)
    segment_of = {}
    for s, (start, end) in enumerate(ranges):
        for i in range(start, end):
            for n in forward[i].output_arg_names:
                segment_of[n] = s
    held = set(checkpoints)
    for i, op in enumerate(forward):
        here = next((s for s, (a, b) in enumerate(ranges) if a <= i < b), None)
        for n in op.input_arg_names:  # read outside the segment that made it
            if n in segment_of and segment_of[n] != here:
                held.add(n)
        if _not_recomputable(op):
            held.update(op.output_arg_names)
    for n in list(segment_of):
        var = block.find_var(n)
        if var is None or var.persistable:
            held.add(n)
    inserted = 0
    for number, s in enumerate(reversed(range(len(ranges)))):
        start, end = ranges[s]
        recomputed = {n for n, seg in segment_of.items() if seg == s and n not in held}
        inserted += _recompute_one(block, forward[start:end], recomputed, f".subprog_{number}",
                                   [op for op in backward])
    return inserted


def _recompute_one(block, segment_ops, recomputed: set[str], suffix: str, backward_ops) -> int:
    """Insert the ops of one segment that the backward ops need again, before the first
    backward op reading one of `recomputed`, and make the backward ops read the copies."""
    readers = [op for op in backward_ops if any(n in recomputed for n in op.input_arg_names)]
    if not readers:
        return 0
    required = {n for op in readers for n in op.input_arg_names if n in recomputed}
    chosen = []
    for op in reversed(segment_ops):
        if not _not_recomputable(op) and any(n in required for n in op.output_arg_names):
            chosen.append(op)
            required.update(n for n in op.input_arg_names if n in recomputed)
    chosen.reverse()
    renamed = {}
    for op in chosen:
        for n in op.output_arg_names:
            if n not in renamed:
                var = block.var(n)
                renamed[n] = block.create_var(n + suffix, var.shape, var.dtype, stop_gradient=True).name
    at = block.ops.index(readers[0])
    with op_role.role_guard(block.program, op_role.BACKWARD):
        for op in chosen:
            inputs = {slot: [renamed.get(n, n) if n in recomputed else n for n in names]
                      for slot, names in op.inputs.items()}
            outputs = {slot: [renamed[n] for n in names] for slot, names in op.outputs.items()}
            attrs = {k: v for k, v in op.attrs.items() if k not in ("op_role", "op_role_var")}
            block.insert_op(at, op.type, inputs, outputs, attrs, all_input_slots=False)
            at += 1
    for op in readers:
        for n in set(op.input_arg_names):
            if n in renamed:
                op.rename_input(n, renamed[n])
    return len(chosen)
