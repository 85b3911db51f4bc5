"""Collective kernels (PaddlePaddle's legacy `c_*` ops): each calls the communicator of
its `ring_id` for the backend of its array module (kernels/communicators.py: MPI for
numpy, NCCL for cupy).

`use_calc_stream=False` is PaddlePaddle's "run on the communication stream": the kernel
starts the collective and returns its output buffer at once; the value is there after the
ring's `c_sync_comm_stream`. `use_calc_stream=True` waits (MPI) or enqueues on the compute
stream (NCCL). Gradient all-reduces written by `fleet.distributed_optimizer` start each
bucket as soon as its gradients exist and wait once, before the optimizer, so
communication overlaps the rest of the backward pass.
"""
from __future__ import annotations

from kernels import communicators
from kernels.registry import kernel


def _allreduce(op: str):
    op_type = f"c_allreduce_{op}"

    @kernel(op_type, inputs=["X"], outputs=["Out"], attrs=["ring_id", "use_calc_stream"],
            inplace={"Out": "X"})
    def allreduce(xp, x, *, ring_id, use_calc_stream):
        comm = communicators.lookup(ring_id, xp, op_type)
        return comm.allreduce(x, op, f"{op_type} (ring {ring_id})", wait=use_calc_stream)
    return allreduce


for _op in communicators.REDUCE_OPS:
    _allreduce(_op)


@kernel("c_broadcast", inputs=["X"], outputs=["Out"], attrs=["ring_id", "root", "use_calc_stream"],
        inplace={"Out": "X"})
def c_broadcast(xp, x, *, ring_id, root, use_calc_stream):
    comm = communicators.lookup(ring_id, xp, "c_broadcast")
    return comm.broadcast(x, root, f"c_broadcast (ring {ring_id}, root {root})", wait=use_calc_stream)


def _check_nranks(comm, nranks, op_type):
    if nranks != comm.size:
        raise communicators.CommError(f"{op_type}: attribute nranks is {nranks} but ring has {comm.size} ranks")


@kernel("c_allgather", inputs=["X"], outputs=["Out"], attrs=["ring_id", "nranks", "use_calc_stream"])
def c_allgather(xp, x, *, ring_id, nranks, use_calc_stream):
    comm = communicators.lookup(ring_id, xp, "c_allgather")
    _check_nranks(comm, nranks, "c_allgather")
    return comm.allgather(x, f"c_allgather (ring {ring_id})", wait=use_calc_stream)


@kernel("c_reducescatter", inputs=["X"], outputs=["Out"], attrs=["ring_id", "nranks", "use_calc_stream"])
def c_reducescatter(xp, x, *, ring_id, nranks, use_calc_stream):
    comm = communicators.lookup(ring_id, xp, "c_reducescatter")
    _check_nranks(comm, nranks, "c_reducescatter")
    return comm.reducescatter(x, f"c_reducescatter (ring {ring_id})", wait=use_calc_stream)


@kernel("c_identity", inputs=["X"], outputs=["Out"], attrs=["ring_id"])
def c_identity(xp, x, *, ring_id):
    """The identity in the forward pass (model parallelism's all-reduce marker)."""
    return x.copy()


@kernel("c_sync_calc_stream", inputs=["X"], outputs=["Out"], inplace={"Out": "X"})
def c_sync_calc_stream(xp, x):
    """Wait for the compute stream (a no-op on the CPU, where kernels run synchronously)."""
    if xp is not communicators.np:
        xp.cuda.get_current_stream().synchronize()
    return x


@kernel("c_sync_comm_stream", inputs=["X"], outputs=["Out"], attrs=["ring_id"], inplace={"Out": "X"})
def c_sync_comm_stream(xp, xs, *, ring_id):
    """Complete the ring's collectives started with use_calc_stream=False; X are their
    outputs (the names the program orders this op after), returned as they are."""
    communicators.lookup(ring_id, xp, "c_sync_comm_stream").wait_all()
    return list(xs)


@kernel("barrier", inputs=["X"], outputs=["Out"], attrs=["ring_id"], inplace={"Out": "X"})
def barrier(xp, x, *, ring_id):
    communicators.lookup(ring_id, xp, "barrier").barrier(f"barrier (ring {ring_id})")
    return x
