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

from program import op_role

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
    """{variable: parameter}: the persistable per-parameter state of `program`'s update
    ops (every persistable input of an optimize op with a Param, except the parameter,
    its gradient and the learning rate), read from the ops, so it holds for programs
    built here and loaded from files alike."""
    state = {}
    for block in program.blocks:
        for op in block.ops:
            if not op.attr("op_role", 0) & op_role.OPTIMIZE or not op.input("Param"):
                continue
            param = op.input("Param")[0]
            for slot, names in op.inputs.items():
                if slot in _NOT_STATE:
                    continue
                for name in names:
                    var = block.find_var(name)
                    if var is not None and var.persistable:
                        state.setdefault(name, param)
    return state
