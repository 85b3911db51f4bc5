"""Program.clone: deep copies, and the evaluation program of `clone(for_test=True)`."""
from __future__ import annotations

from keel.program import op_role
from keel.program.variable import Parameter

# Ops with these op_role bits are not part of evaluation.
_TRAINING_ONLY = op_role.BACKWARD | op_role.OPTIMIZE | op_role.LRSCHED


def clone_program(program, for_test: bool):
    from keel.program.program import Program

    copy = Program.from_desc(program.to_desc(), verify=False)
    copy.random_seed = program.random_seed
    copy.lr_schedules = dict(program.lr_schedules)
    copy.sharding = program.sharding
    # Parameter settings are build-time Python state, not part of the file: carry them over.
    for block, src in zip(copy.blocks, program.blocks):
        for name, var in src.vars.items():
            if isinstance(var, Parameter) and isinstance(block.vars.get(name), Parameter):
                dst = block.vars[name]
                dst.trainable, dst.initializer = var.trainable, var.initializer
                dst.regularizer, dst.need_clip = var.regularizer, var.need_clip
                dst.optimize_attr = dict(var.optimize_attr)
    if for_test:
        for block in copy.blocks:
            for op in list(block.ops):
                role = op.attr("op_role", 0) or 0
                if role & _TRAINING_ONLY:
                    block.remove_op(op)
                elif op.has_attr("is_test") or (op.opdef and "is_test" in op.opdef.attrs):
                    op.set_attr("is_test", True)
    copy._revision = 0
    return copy
