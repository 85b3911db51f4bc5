"""Which rank keeps each parameter's optimizer state, in a program whose optimizer state
is sharded over data-parallel ranks (ZeRO stage 1: `fleet.DistributedStrategy(sharding=True)`).

fleet's sharded `minimize` records it as `program.sharding`; a rank's program then holds
the accumulators (moments, velocities, beta powers, float32 master weights) of the
parameters it owns only. Checkpoints read it (executor/checkpoint.py): saving gathers
every rank's share into one file on rank 0, loading takes this rank's share from a file
written with any number of ranks, sharded or not.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from keel.program import op_role

# Input slots of an update op that are not state of its parameter.
_NOT_STATE = frozenset({"Param", "Grad", "LearningRate", "SkipUpdate"})


@dataclass(frozen=True)
class Sharding:
    rank: int
    nranks: int
    owners: dict[str, int] = field(default_factory=dict)  # parameter name -> owner rank

    def owns(self, param_name: str) -> bool:
        return self.owners.get(param_name) == self.rank


def optimizer_state(program) -> dict[str, str]:
    """{variable: parameter}: the persistable per-parameter state of `program`'s training:
    every persistable input of an optimize op with a Param except the parameter, its
    gradient and the learning rate (moments, velocities, beta powers, master weights), and
    the persistable variables ops tie to a parameter by `op_role_var` pairs (gradient
    merge's accumulated gradients). Read from the ops, so it holds for programs built here
    and loaded from files alike."""
    state = {}
    for block in program.blocks:
        for op in block.ops:
            pairs = op.attr("op_role_var") or []
            tied = list(zip(pairs[0::2], pairs[1::2]))
            if op.attr("op_role", 0) & op_role.OPTIMIZE and op.input("Param"):
                param = op.input("Param")[0]
                tied += [(param, name) for slot, names in op.inputs.items() if slot not in _NOT_STATE
                         for name in names]
            for param, name in tied:
                var = block.find_var(name)
                if var is not None and var.persistable and name != param:
                    state.setdefault(name, param)
    return state
