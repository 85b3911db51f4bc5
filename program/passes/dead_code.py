"""Dead-code elimination."""
from __future__ import annotations

from keel.program.passes.graph import FEED, FETCH, written_names


def eliminate_dead_code(graph, options) -> dict:
    """Matches: every op (feed and fetch ops excepted) none of whose written outputs a fetch
    target needs, directly or through other ops; the walk goes backwards from the fetch
    ops' inputs. Variables and parameters no remaining op names are dropped afterwards.

    Safe because an inference program has no side effects other than its fetch targets:
    an op whose results nothing fetched reads cannot change them. In-place updates that
    do not change their variable (an inference batch_norm's MeanOut/VarianceOut) are not
    counted as writes. Feed ops stay, so the model keeps its inputs."""
    needed = set(graph.fetches)
    dead = []
    for op in reversed(graph.ops):
        if op.type in (FEED, FETCH):
            continue
        if any(name in needed for name in written_names(op)):
            needed.update(op.input_arg_names)
        else:
            dead.append(op)
    graph.remove_ops(dead)
    return {"ops_removed": len(dead)}
