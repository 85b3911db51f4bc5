"""paddle.distributed's collective functions for static programs: each appends its
collective op to the current block of the default main program, as PaddlePaddle's do in
static mode, and runs when the program runs (on ring 0, the global group).

    dist.init_parallel_env()
    with pg.program_guard(main, startup):
        loss = ...
        dist.all_reduce(loss)                  # c_allreduce_sum: loss summed over the ranks
        parts = []
        dist.all_gather(parts, pred)           # c_allgather + split: one part per rank

`sync_op=False` starts the collective on the communication stream (nonblocking MPI); a
later `wait(tensor, use_calc_stream=False)` (c_sync_comm_stream) completes it before the
tensor is read. Only the
global group exists here (`group=None`): new_group's sub-communicators are not built.
"""
from __future__ import annotations

from keel.distributed.parallel import get_world_size
from keel.program import default
from keel.program.layers.tensor import concat, split

RING = 0


class ReduceOp:
    """PaddlePaddle's reduction codes.

    Examples:
        >>> import keel.program as pg
        >>> import keel.distributed as dist
        >>> dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.MIN, dist.ReduceOp.PROD
        (0, 1, 2, 3)
        >>> with pg.program_guard(pg.Program(), pg.Program()):
        ...     y = pg.data("x", [-1, 4])
        ...     dist.all_reduce(y, op=dist.ReduceOp.MAX)
        >>> y.block.ops[-1].type
        'c_allreduce_max'
    """
    SUM = 0
    MAX = 1
    MIN = 2
    PROD = 3


_REDUCTIONS = {ReduceOp.SUM: "sum", ReduceOp.MAX: "max", ReduceOp.MIN: "min", ReduceOp.PROD: "prod"}


def _block(api: str, group):
    if group is not None:
        raise NotImplementedError(f"distributed.{api}: only the global group (group=None) exists here; "
                                  f"new_group's sub-communicators are not supported")
    return default.default_main_program().current_block()


def _reduction(api: str, op) -> str:
    if op not in _REDUCTIONS:
        raise ValueError(f"distributed.{api}: op must be ReduceOp.SUM, MAX, MIN or PROD, got {op!r}")
    return _REDUCTIONS[op]


def all_reduce(tensor, op=ReduceOp.SUM, group=None, sync_op=True):
    """Replace `tensor` by its reduction over the ranks (c_allreduce_<op>).

    Examples:
        >>> import keel.program as pg
        >>> import keel.distributed as dist
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 4])
        ...     y = pg.scale(x, 2.0)
        ...     dist.all_reduce(y, op=dist.ReduceOp.SUM)   # y becomes the sum over the ranks
        >>> [op.type for op in main.global_block().ops]   # runs on every rank after dist.init_parallel_env()
        ['scale', 'c_allreduce_sum']
    """
    _block("all_reduce", group).append_op(f"c_allreduce_{_reduction('all_reduce', op)}", {"X": [tensor]},
                                          {"Out": [tensor]}, {"ring_id": RING, "use_calc_stream": bool(sync_op)})


def reduce(tensor, dst, op=ReduceOp.SUM, group=None, sync_op=True):
    """On rank `dst`, replace `tensor` by its reduction over the ranks; elsewhere it keeps
    its value (c_reduce_<op>).

    Examples:
        >>> import keel.program as pg
        >>> import keel.distributed as dist
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 4])
        ...     y = pg.scale(x, 2.0)
        ...     dist.reduce(y, dst=0, op=dist.ReduceOp.MAX)   # rank 0 gets the maximum
        >>> [op.type for op in main.global_block().ops]   # runs on every rank after dist.init_parallel_env()
        ['scale', 'c_reduce_max']
    """
    _block("reduce", group).append_op(f"c_reduce_{_reduction('reduce', op)}", {"X": [tensor]}, {"Out": [tensor]},
                                      {"ring_id": RING, "root_id": int(dst), "use_calc_stream": bool(sync_op)})


def broadcast(tensor, src, group=None, sync_op=True):
    """Replace `tensor` by rank `src`'s (c_broadcast).

    Examples:
        >>> import keel.program as pg
        >>> import keel.distributed as dist
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 4])
        ...     dist.broadcast(x, src=0)              # every rank gets rank 0's x
        >>> [op.type for op in main.global_block().ops]   # runs on every rank after dist.init_parallel_env()
        ['c_broadcast']
    """
    _block("broadcast", group).append_op("c_broadcast", {"X": [tensor]}, {"Out": [tensor]},
                                         {"ring_id": RING, "root": int(src), "use_calc_stream": bool(sync_op)})


def all_gather(tensor_list, tensor, group=None, sync_op=True):
    """Fill `tensor_list` (emptied first) with every rank's `tensor`, in rank order
    (c_allgather along axis 0, then split).

    Examples:
        >>> import keel.program as pg
        >>> import keel.distributed as dist
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 4])
        ...     parts = []
        ...     dist.all_gather(parts, x)             # parts[r] is rank r's x
        >>> [op.type for op in main.global_block().ops]   # runs on every rank after dist.init_parallel_env()
        ['c_allgather']
        >>> len(parts)                                      # one part per rank (a split op for several)
        1
    """
    nranks = get_world_size()
    block = _block("all_gather", group)
    out = block.create_var(None, None, tensor.dtype)
    block.append_op("c_allgather", {"X": [tensor]}, {"Out": [out]},
                    {"ring_id": RING, "nranks": nranks, "use_calc_stream": bool(sync_op)})
    if not sync_op:
        wait(out, use_calc_stream=False)
    tensor_list.clear()
    tensor_list.extend(split(out, nranks, axis=0) if nranks > 1 else [out])


def reduce_scatter(tensor, tensor_list, op=ReduceOp.SUM, group=None, sync_op=True):
    """Set `tensor` to this rank's part of the sum over the ranks of `tensor_list` (one
    tensor per rank, in rank order: c_reducescatter of their concatenation).

    Examples:
        >>> import keel.program as pg
        >>> import keel.distributed as dist
        >>> main = pg.Program()
        >>> with pg.program_guard(main, pg.Program()):
        ...     parts = [pg.data(f"x{r}", [2, 4]) for r in range(dist.get_world_size())]   # one per rank
        ...     out = pg.data("out", [2, 4])
        ...     dist.reduce_scatter(out, parts)                 # out: this rank's part of the sum
        >>> [op.type for op in main.global_block().ops]
        ['concat', 'c_reducescatter']
    """
    if op != ReduceOp.SUM:
        raise ValueError(f"distributed.reduce_scatter: only ReduceOp.SUM is supported (c_reducescatter sums), "
                         f"got {op!r}")
    block = _block("reduce_scatter", group)
    if len(tensor_list) != get_world_size():
        raise ValueError(f"distributed.reduce_scatter: tensor_list holds {len(tensor_list)} tensor(s); it needs "
                         f"one per rank ({get_world_size()})")
    joined = concat(list(tensor_list), axis=0)
    block.append_op("c_reducescatter", {"X": [joined]}, {"Out": [tensor]},
                    {"ring_id": RING, "nranks": len(tensor_list), "use_calc_stream": bool(sync_op)})
    if not sync_op:
        wait(tensor, use_calc_stream=False)


def wait(tensor, group=None, use_calc_stream=True):
    """PaddlePaddle's wait: with use_calc_stream, `tensor` once the compute stream is done
    with it (c_sync_calc_stream); without, once the collectives started with sync_op=False
    are complete (c_sync_comm_stream): call `wait(tensor, use_calc_stream=False)` before
    reading the result of such a collective.

    Examples:
        >>> import keel.program as pg
        >>> import keel.distributed as dist
        >>> main = pg.Program()
        >>> with pg.program_guard(main, pg.Program()):
        ...     y = pg.scale(pg.data("x", [-1, 4]), 2.0)
        ...     dist.all_reduce(y)
        ...     dist.wait(y)                      # y once the compute stream is done with it
        >>> [op.type for op in main.global_block().ops]
        ['scale', 'c_allreduce_sum', 'c_sync_calc_stream']
    """
    op = "c_sync_calc_stream" if use_calc_stream else "c_sync_comm_stream"
    attrs = {"ring_id": RING} if op == "c_sync_comm_stream" else {}
    _block("wait", group).append_op(op, {"X": [tensor]}, {"Out": [tensor]}, attrs)
