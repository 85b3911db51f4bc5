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

import numpy as np

from keel.kernels import communicators, nn, registry
from keel.kernels.registry import kernel
from keel.kernels.tensor import np_dtype


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


def _reduce(op: str):
    op_type = f"c_reduce_{op}"

    @kernel(op_type, inputs=["X"], outputs=["Out"], attrs=["ring_id", "root_id", "use_calc_stream"],
            inplace={"Out": "X"})
    def reduce(xp, x, *, ring_id, root_id, use_calc_stream):
        comm = communicators.lookup(ring_id, xp, op_type)
        return comm.reduce(x, op, root_id, f"{op_type} (ring {ring_id}, root {root_id})", wait=use_calc_stream)
    return reduce


for _op in communicators.REDUCE_OPS:
    _reduce(_op)


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
    if xp is not np:
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


# -- coalesce_tensor -------------------------------------------------------------------------------

# PaddlePaddle's default alignment of each part (bytes): CpuMinChunkSize, GpuMinChunkSize
_DEFAULT_ALIGNMENT = {"numpy": 1 << 12, "cupy": 1 << 8}


def _padded(numel: int, itemsize: int, alignment: int) -> int:
    """numel elements of itemsize bytes rounded up to a multiple of `alignment` bytes, in elements."""
    nbytes = numel * itemsize
    return (nbytes + (-nbytes) % alignment) // itemsize


def _check_concated_shapes(inputs, shapes, ranks):
    """concated_shapes/concated_ranks, when given, must describe the inputs' shapes."""
    if not ranks and not shapes:
        return
    if len(ranks) != len(inputs) or sum(ranks) != len(shapes):
        raise ValueError(f"coalesce_tensor: concated_ranks {list(ranks)} and concated_shapes {list(shapes)} "
                         f"do not describe {len(inputs)} inputs")
    start = 0
    for i, (x, rank) in enumerate(zip(inputs, ranks)):
        if tuple(shapes[start:start + rank]) != x.shape:
            raise ValueError(f"coalesce_tensor: Input {i} has shape {list(x.shape)}, concated_shapes says "
                             f"{list(shapes[start:start + rank])}")
        start += rank


@kernel("coalesce_tensor", inputs=["Input"], outputs=["Output", "FusedOutput"],
        attrs=["dtype", "copy_data", "set_constant", "persist_output", "constant", "use_align", "align_size",
               "user_defined_size_of_dtype", "concated_shapes", "concated_ranks"])
def coalesce_tensor(xp, inputs, *, dtype, copy_data=False, set_constant=False, persist_output=False,
                    constant=0.0, use_align=True, align_size=-1, user_defined_size_of_dtype=-1,
                    concated_shapes=(), concated_ranks=()):
    """PaddlePaddle's coalesce_tensor: one fresh 1-D buffer of `dtype` with room for every
    input flattened, in order (with use_align each part padded to `align_size` bytes, by
    default 4 KiB on the CPU and 256 B on a GPU), filled with the inputs (copy_data, or
    persist_output, which PaddlePaddle reads from Output: the same variables as Input
    wherever it writes this op), else `constant` (set_constant), else zeros (PaddlePaddle
    leaves it uninitialized); padding is zeros. Output[i] is a view of Input[i]'s part, in
    Input[i]'s shape, as PaddlePaddle's outputs share the buffer. One copy for a bucket of
    gradients that then travel as one all-reduce (fleet.distributed_optimizer)."""
    inputs = list(inputs)
    dt = np_dtype(dtype)
    if not inputs:
        raise ValueError("coalesce_tensor: Input is empty")
    for i, x in enumerate(inputs):
        if x.dtype != dt:
            raise TypeError(f"coalesce_tensor: Input {i} is {x.dtype}, not the fused dtype {dt}")
        if x.size == 0:
            raise ValueError(f"coalesce_tensor: Input {i} has no elements (shape {list(x.shape)})")
    _check_concated_shapes(inputs, list(concated_shapes), list(concated_ranks))
    itemsize = int(user_defined_size_of_dtype) if user_defined_size_of_dtype > 0 else dt.itemsize
    alignment = int(align_size) if align_size > 0 else _DEFAULT_ALIGNMENT["numpy" if xp is np else "cupy"]
    lengths = [_padded(x.size, itemsize, alignment) if use_align else x.size for x in inputs]
    copied = copy_data or persist_output
    fill = constant if set_constant and not copied else 0
    # no fill where the inputs cover every element (fresh pages would be written twice)
    fused = xp.empty(sum(lengths), dt) if copied and not use_align else xp.full(sum(lengths), fill, dt)
    outputs, offset = [], 0
    for x, length in zip(inputs, lengths):
        part = fused[offset:offset + x.size].reshape(x.shape)
        if copied:
            part[...] = x
        outputs.append(part)
        offset += length
    return outputs, fused


# -- sync_batch_norm ------------------------------------------------------------------------------

_BN, _BN_GRAD = registry.get("batch_norm"), registry.get("batch_norm_grad")  # the same signatures


def _group(xp):
    """Ring 0's communicator when it joins several ranks; None for a single process, where
    sync_batch_norm is batch_norm (as PaddlePaddle's on one device)."""
    comm = communicators.find(0, xp)
    return comm if comm is not None and comm.size > 1 else None


def _global_sum(comm, *parts):
    """The per-rank vectors `parts`, each summed over the ranks, in one all-reduce."""
    xp = np if comm.backend == "mpi" else comm.cupy
    sizes = [p.size for p in parts]
    total = comm.allreduce(xp.concatenate([p.reshape(-1) for p in parts]), "sum", "sync_batch_norm (ring 0)")
    return xp.split(total, list(np.cumsum(sizes)[:-1]))


@kernel("sync_batch_norm", inputs=_BN.inputs, outputs=_BN.outputs, attrs=_BN.attrs, inplace=_BN.inplace)
def sync_batch_norm(xp, x, scale, bias, mean, variance, momentum_tensor=None, *, is_test, momentum,
                    epsilon, data_layout, use_global_stats, trainable_statistics):
    """batch_norm (kernels/nn.py) with the batch mean and biased variance of every rank's
    X together: two all-reduces (per-channel sums with the element count, then the sums of
    squared deviations from the global mean), as the two passes of batch_norm's."""
    comm = _group(xp)
    global_stats = (is_test and not trainable_statistics) or use_global_stats
    if comm is None or global_stats:
        return nn.batch_norm(xp, x, scale, bias, mean, variance, momentum_tensor, is_test=is_test,
                             momentum=momentum, epsilon=epsilon, data_layout=data_layout,
                             use_global_stats=use_global_stats, trainable_statistics=trainable_statistics)
    axis = nn._channel_axis(x.ndim, data_layout)
    cdt = nn._compute_dtype(xp, x.dtype)
    x3 = nn._chan_view(x, axis).astype(cdt, copy=False)
    c, stat_dtype = x3.shape[1], mean.dtype
    sums, count = _global_sum(comm, nn._chan_sum(x3), xp.full(1, x3.shape[0] * x3.shape[2], cdt))
    batch_mean = sums / count
    centered = x3 - batch_mean.reshape(1, c, 1)
    batch_var, = _global_sum(comm, nn._chan_sum(centered * centered))
    batch_var = batch_var / count
    m = float(momentum) if momentum_tensor is None else momentum_tensor.reshape(-1)[0].astype(cdt)
    mean[...] = (mean.astype(cdt) * m + batch_mean * (1 - m)).astype(stat_dtype)
    variance[...] = (variance.astype(cdt) * m + batch_var * (1 - m)).astype(stat_dtype)
    inv_std = 1.0 / xp.sqrt(batch_var + epsilon)
    scale = xp.ones(c, cdt) if scale is None else scale.astype(cdt, copy=False)
    bias = xp.zeros(c, cdt) if bias is None else bias.astype(cdt, copy=False)
    new_scale = inv_std * scale
    new_bias = bias - batch_mean * new_scale
    y = x3 * new_scale.reshape(1, c, 1) + new_bias.reshape(1, c, 1)
    return (y.reshape(x.shape).astype(x.dtype, copy=False), mean, variance, batch_mean.astype(stat_dtype),
            inv_std.astype(stat_dtype), None)


@kernel("sync_batch_norm_grad", inputs=_BN_GRAD.inputs, outputs=_BN_GRAD.outputs, attrs=_BN_GRAD.attrs)
def sync_batch_norm_grad(xp, x, scale, bias, mean, variance, saved_mean, saved_inv_std, mean_out,
                         variance_out, dy, *, epsilon, data_layout, is_test, use_global_stats):
    """batch_norm_grad with sum(dy), sum(dy * xhat) and the element count summed over the
    ranks (one all-reduce): Scale@GRAD and Bias@GRAD are the global sums, the same on
    every rank, and X@GRAD is this rank's part of the global batch's gradient."""
    comm = _group(xp)
    if comm is None or is_test or use_global_stats:
        return nn.batch_norm_grad(xp, x, scale, bias, mean, variance, saved_mean, saved_inv_std, mean_out,
                                  variance_out, dy, epsilon=epsilon, data_layout=data_layout,
                                  is_test=is_test, use_global_stats=use_global_stats)
    axis = nn._channel_axis(x.ndim, data_layout)
    cdt = nn._compute_dtype(xp, x.dtype)
    x3 = nn._chan_view(x, axis).astype(cdt, copy=False)
    dy3 = nn._chan_view(dy, axis).astype(cdt, copy=False)
    c = x3.shape[1]
    mu, inv_std = saved_mean.astype(cdt, copy=False), saved_inv_std.astype(cdt, copy=False)
    centered = x3 - mu.reshape(1, c, 1)
    dbias, dscale, count = _global_sum(comm, nn._chan_sum(dy3), nn._chan_sum(dy3 * centered) * inv_std,
                                       xp.full(1, x3.shape[0] * x3.shape[2], cdt))
    scale_c = xp.ones(c, cdt) if scale is None else scale.astype(cdt, copy=False)
    k1 = scale_c * inv_std
    dx = (dy3 * k1.reshape(1, c, 1) + centered * (-k1 * inv_std * dscale / count).reshape(1, c, 1)
          + (-k1 * dbias / count).reshape(1, c, 1))
    pdt = scale.dtype if scale is not None else cdt
    return (dx.reshape(x.shape).astype(x.dtype, copy=False), dscale.astype(pdt),
            dbias.astype(bias.dtype if bias is not None else pdt))
