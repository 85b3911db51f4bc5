"""`fleet`: PaddlePaddle's collective data-parallel training on a static program.

    fleet.init(is_collective=True)
    strategy = fleet.DistributedStrategy()
    optimizer = fleet.distributed_optimizer(pg.optimizer.Adam(1e-3), strategy)
    optimizer.minimize(loss)

The strategy (distributed/strategy.py) may first wrap the optimizer in PaddlePaddle's
meta-optimizers, innermost first: `amp` (static.amp.decorate with `amp_configs`), `recompute`
(RecomputeOptimizer with `recompute_configs["checkpoints"]`) and `gradient_merge`
(GradientMergeOptimizer; the gradients are all-reduced every step, which sums to the same
merged average). `minimize` appends the backward pass, then the gradient all-reduce, then
the updates:

- the backward pass is seeded with 1/N instead of 1 (a `scale` after the loss gradient's
  `fill_constant`, as PaddlePaddle's fleet writes it), so each rank's gradients are its
  share of the average and the all-reduce's sum is the average: no pass over them scales;
- the gradients are grouped, in the order backward produces them, into buckets of up to
  `fuse_grad_size_in_MB` (one dtype each); right after the op that completes a bucket come
  `coalesce_tensor` (the bucket's gradients copied into one flat buffer: one copy) and
  `c_allreduce_sum` with `use_calc_stream=False`, so the bucket's all-reduce is started
  while the rest of the backward pass computes (MPI's nonblocking Iallreduce; NCCL's
  communication stream);
- after the backward pass, one `c_sync_comm_stream` completes them all, and per bucket
  `split` and `reshape2` write each gradient back under its own name (views of the
  buffer, not copies), so the optimizer's ops are the single-process ones;
- the startup program broadcasts every parameter from rank 0 (`c_broadcast`), so all
  ranks start from the same values whatever their seeds.

With `strategy.sync_batch_norm` the forward pass's batch_norm ops become sync_batch_norm
first (the global batch's statistics; kernels/collective.py).

With `strategy.sharding` (ZeRO stage 1) each parameter gets an owner rank (greedily, the
largest first, to the least loaded rank). Each bucket's gradients are coalesced owner by
owner (each rank's segment zero-padded to the longest) and reduce-scattered
(`c_reducescatter`): a rank receives the sums of its own gradients only. It appends the
update ops, and so holds the accumulators (moments, velocities), of the parameters it
owns only; then one `c_allgather` per dtype of the owners' parameters (coalesced and
padded alike) brings every parameter back from its owner. The arithmetic is the same as
without sharding, so is the trajectory; each rank's optimizer state and update work are
about 1/N, its communication that of one all-reduce. What needs every gradient is
all-reduced inside the updates: ClipGradByGlobalNorm's sum of squares, and under AMP the
overflow flag (so all ranks skip the same steps and keep one loss scale). The program
records the owners (`program.sharding`): `save_checkpoint`, called on every rank, then
gathers the ranks' accumulators into one file on rank 0 (executor/checkpoint.py).
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np

from keel.distributed import parallel
from keel.distributed.strategy import DistributedStrategy
from keel.program import default, dtypes, op_role, unique_name
from keel.program.amp import AutoMixedPrecisionLists, OptimizerWithMixedPrecision, decorate
from keel.program.gradient_clip import ClipGradByGlobalNorm
from keel.program.gradient_merge import GradientMergeOptimizer
from keel.program.recompute import RecomputeOptimizer
from keel.program.sharding import Sharding
RING = 0


_STRATEGY: DistributedStrategy | None = None


def init(is_collective: bool = True, strategy: DistributedStrategy | None = None, role_maker=None):
    """Join the process group (init_parallel_env). Only collective training exists here."""
    global _STRATEGY
    if not is_collective:
        raise NotImplementedError("fleet.init: only collective (data-parallel) training is supported; "
                                  "parameter-server mode is not")
    _STRATEGY = strategy
    return parallel.init_parallel_env()


def worker_index() -> int:
    return parallel.get_rank()


def worker_num() -> int:
    return parallel.get_world_size()


def is_first_worker() -> bool:
    return parallel.get_rank() == 0


def barrier_worker() -> None:
    parallel.barrier()


def distributed_model(model):
    """The model wrapped for data-parallel training, Keel's one kind of parallelism:
    `paddle.DataParallel(model)`, as PaddlePaddle's fleet wraps it under a data-parallel
    strategy (in one process the model itself under that name; see data_parallel.py)."""
    from keel.distributed.data_parallel import DataParallel
    return DataParallel(model)


def distributed_optimizer(optimizer, strategy: DistributedStrategy | None = None):
    return DistributedOptimizer(optimizer, strategy or _STRATEGY or DistributedStrategy())


class DistributedOptimizer:
    """Wraps an optimizer: its `minimize` also averages the gradients over the ranks. The
    strategy's meta-optimizers wrap it first (`_with_meta_optimizers`)."""

    def __init__(self, optimizer, strategy: DistributedStrategy):
        self.user_optimizer, self.strategy = optimizer, strategy
        self.inner = _with_meta_optimizers(optimizer, strategy)
        self.owners: dict[str, int] = {}  # with sharding: parameter name -> owner rank

    def __getattr__(self, name):  # get_lr, set_lr, state_dict, ... of the user's optimizer
        return getattr(self.user_optimizer, name)

    def _amp(self):
        amp = _amp_layer(self.inner)
        if amp is None:
            raise RuntimeError("this distributed optimizer has no AMP: set strategy.amp = True")
        return amp

    def amp_init(self, place=None, scope=None, test_program=None, use_fp16_test=False):
        """strategy.amp with pure float16/bfloat16: after the startup program, the parameters
        into low precision (static.amp's amp_init)."""
        return self._amp().amp_init(place, scope, test_program, use_fp16_test)

    def get_loss_scaling(self):
        return self._amp().get_loss_scaling()

    def restore_master_weights(self, scope=None):
        return self._amp().restore_master_weights(scope)

    def minimize(self, loss, startup_program=None, parameters=None, no_grad_set=None):
        if not parallel.is_initialized():
            raise RuntimeError("distributed_optimizer: call fleet.init(is_collective=True) first")
        nranks = parallel.get_world_size()
        startup = startup_program or default.default_startup_program()
        if self.strategy.sync_batch_norm and nranks > 1:
            _use_sync_batch_norm(loss.block)
        params_grads = self.inner.backward(loss, startup, parameters, no_grad_set)
        params_grads = [(p, g) for p, g in params_grads if g is not None]
        if nranks == 1:
            return self.inner.apply_gradients(params_grads, startup), params_grads
        sharding = self.strategy.sharding
        block = loss.block
        _broadcast_from(startup.global_block(), [p.name for p, _ in params_grads], lambda name: 0)
        with op_role.role_guard(block.program, op_role.BACKWARD):
            _scale_loss_gradient(block, nranks)
            buckets = _buckets(block, [g for _, g in params_grads], self._bucket_bytes())
            if not sharding:
                _finish(block, _start_allreduces(block, buckets))
        if not sharding:
            return self.inner.apply_gradients(params_grads, startup), params_grads
        self.owners = _assign_owners([p for p, _ in params_grads], nranks)
        rank = parallel.get_rank()
        grad_owner = {g.name: self.owners[p.name] for p, g in params_grads}
        with op_role.role_guard(block.program, op_role.BACKWARD):
            _finish(block, _start_reduce_scatters(block, buckets, grad_owner, nranks, rank))
        mine = [(p, g) for p, g in params_grads if self.owners[p.name] == rank]
        with _over_all_ranks(self.inner) as collective_updates:
            idle = sorted(set(range(nranks)) - set(self.owners.values()))
            if idle and collective_updates:  # every rank finds it: none waits for the others
                raise ValueError(f"sharding: rank(s) {idle} of {nranks} own none of the {len(params_grads)} "
                                 f"parameter(s), but {collective_updates} all-reduce in the update ops, in "
                                 f"which every rank takes part; train with fewer ranks or without sharding")
            ops = self.inner.apply_gradients(mine, startup) if mine else []
        with op_role.role_guard(block.program, op_role.OPTIMIZE):
            _gather_parameters(block, [p for p, _ in params_grads], self.owners, nranks, rank)
        block.program.sharding = Sharding(rank, nranks, dict(self.owners))
        return ops, params_grads

    def _bucket_bytes(self) -> int:
        if not self.strategy.fuse_all_reduce_ops:
            return 0  # one gradient per bucket
        return int(self.strategy.fuse_grad_size_in_MB * (1 << 20))


def _with_meta_optimizers(optimizer, strategy: DistributedStrategy):
    """The user's optimizer inside the meta-optimizers the strategy switches on, innermost
    first: amp (directly around the user's optimizer, whose update ops it makes keep
    float32 master weights), recompute, gradient_merge. Also refuses sharding configs
    Keel lacks."""
    opt = optimizer
    if strategy.amp:
        config = strategy.amp_configs
        if config["use_optimizer_fp16"]:
            raise NotImplementedError("amp_configs['use_optimizer_fp16']: optimizer state in float16 is not "
                                      "supported; pure float16 keeps float32 master weights and moments")
        pure = config["use_pure_fp16"] or config["use_pure_bf16"]
        dtype = "bfloat16" if config["use_pure_bf16"] else "float16"
        lists = AutoMixedPrecisionLists(set(config["custom_white_list"]), set(config["custom_black_list"]),
                                        set(config["custom_black_varnames"]), dtype=dtype)
        opt = decorate(opt, amp_lists=lists, level="O2" if pure else "O1", dtype=dtype,
                       init_loss_scaling=config["init_loss_scaling"],
                       incr_every_n_steps=config["incr_every_n_steps"],
                       decr_every_n_nan_or_inf=config["decr_every_n_nan_or_inf"],
                       incr_ratio=config["incr_ratio"], decr_ratio=config["decr_ratio"],
                       use_dynamic_loss_scaling=config["use_dynamic_loss_scaling"],
                       use_amp_guard=bool(pure and config["use_fp16_guard"]))
    if strategy.recompute:
        config = strategy.recompute_configs
        if config["enable_offload"]:
            raise NotImplementedError("recompute_configs['enable_offload']: offloading checkpoints to the host "
                                      "is not supported (there is no device memory to spare on the CPU)")
        if not config["checkpoints"]:
            raise ValueError("strategy.recompute needs recompute_configs = {'checkpoints': [...]}: the "
                             "variables (or names) that end the recomputed segments")
        opt = RecomputeOptimizer(opt)
        opt._set_checkpoints(list(config["checkpoints"]))
    if strategy.gradient_merge:
        config = strategy.gradient_merge_configs
        opt = GradientMergeOptimizer(opt, k_steps=config["k_steps"], avg=config["avg"])
    if strategy.sharding:
        config = strategy.sharding_configs
        if config["stage"] != 1 or config["mp_degree"] != 1 or config["pp_degree"] != 1:
            raise NotImplementedError(f"sharding_configs: only stage 1 (optimizer state) over all ranks is "
                                      f"supported, got stage {config['stage']}, mp_degree {config['mp_degree']}, "
                                      f"pp_degree {config['pp_degree']}")
    return opt


def _layers(optimizer):
    """The chain of wrapped optimizers, outermost first."""
    while optimizer is not None:
        yield optimizer
        optimizer = getattr(optimizer, "_optimizer", None) or getattr(optimizer, "inner_optimizer", None)


def _amp_layer(optimizer):
    """The AMP decorator in the chain, or None."""
    return next((o for o in _layers(optimizer) if isinstance(o, OptimizerWithMixedPrecision)), None)


@contextmanager
def _over_all_ranks(optimizer):
    """While a rank appends the updates of its own shard: what depends on every gradient
    is computed over all ranks. ClipGradByGlobalNorm all-reduces its sum of squares; AMP's
    overflow check all-reduces found_inf, so every rank skips the same steps and keeps the
    same loss scale. Yields what of the updates is collective ("" if nothing)."""
    amp = _amp_layer(optimizer)
    base = list(_layers(optimizer))[-1]
    clip = base._grad_clip
    collective = []
    if isinstance(clip, ClipGradByGlobalNorm):
        base._grad_clip = ClipGradByGlobalNorm(clip.clip_norm, ring_id=RING)
        collective.append("ClipGradByGlobalNorm's sum of squares")
    if amp is not None:
        amp._found_inf_ring = RING
        collective.append("AMP's overflow check")
    try:
        yield " and ".join(collective)
    finally:
        base._grad_clip = clip
        if amp is not None:
            amp._found_inf_ring = None


def _use_sync_batch_norm(block) -> None:
    """Turn every batch_norm of the forward pass into sync_batch_norm (the same slots and
    attributes), so the batch statistics are the global batch's."""
    for i, op in enumerate(list(block.ops)):
        if op.type != "batch_norm":
            continue
        block.remove_op(i)
        new = block.insert_op(i, "sync_batch_norm", op.inputs, op.outputs, op.attrs, infer_shape=False)
        new.set_attr("op_callstack", op.callstack)


def _broadcast_from(block, names, root_of) -> None:
    for name in names:
        block.append_op("c_broadcast", {"X": [name]}, {"Out": [name]},
                        {"ring_id": RING, "root": root_of(name), "use_calc_stream": True})


def _last_writer(block, names) -> dict[str, int]:
    last = {}
    for i, op in enumerate(block.ops):
        for n in op.output_arg_names:
            if n in names:
                last[n] = i
    return last


def _numel(var) -> int:
    return int(np.prod(var.shape))


def _nbytes(var) -> int:
    return _numel(var) * np.dtype(dtypes.to_numpy(var.dtype)).itemsize


def _buckets(block, grads, limit: int) -> list[tuple[int, list]]:
    """[(index of the op completing the bucket, [grad vars])]: gradients in the order
    backward completes them, cut when a bucket reaches `limit` bytes or the dtype changes."""
    last = _last_writer(block, {g.name for g in grads})
    order = sorted(grads, key=lambda g: last[g.name])
    buckets, current, size = [], [], 0
    for g in order:
        if current and (size + _nbytes(g) > limit or g.dtype != current[0].dtype):
            buckets.append((last[current[-1].name], current))
            current, size = [], 0
        current.append(g)
        size += _nbytes(g)
    if current:
        buckets.append((last[current[-1].name], current))
    return buckets


def _scale_loss_gradient(block, nranks: int) -> None:
    """Seed the backward pass with 1/N instead of 1 (PaddlePaddle's fleet does the same):
    every gradient is then this rank's share of the average, so the all-reduce's sum is
    the average itself and no pass over the gradients scales them."""
    for i, op in enumerate(block.ops):
        if op.attr("op_role") == op_role.BACKWARD | op_role.LOSS and op.type in ("fill_constant", "fill_any_like"):
            seed = op.output("Out")[0]
            block.insert_op(i + 1, "scale", {"X": [seed]}, {"Out": [seed]},
                            {"scale": 1.0 / nranks, "bias": 0.0, "op_role": op_role.BACKWARD})
            return
    raise RuntimeError("distributed_optimizer: the backward pass has no loss gradient seed to scale")


def _start_allreduces(block, buckets) -> list:
    """Insert after each bucket's last gradient: coalesce_tensor (the bucket's gradients
    copied into one flat buffer), nonblocking all-reduce. Returns [(buffer, gradients)]."""
    started = []
    for after, grads in reversed(buckets):  # from the last back: earlier positions stay valid
        fused = _coalesce(block, after + 1, grads, "fused_grad")
        block.insert_op(after + 2, "c_allreduce_sum", {"X": [fused]}, {"Out": [fused]},
                        {"ring_id": RING, "use_calc_stream": False})
        started.append((fused, grads))
    return started[::-1]


def _finish(block, started) -> None:
    """Wait for the buckets' collectives, started as [(buffer, gradients)], and write each
    buffer's gradients back under their names."""
    buffers = [buffer for buffer, _ in started]
    block.append_op("c_sync_comm_stream", {"X": buffers}, {"Out": buffers}, {"ring_id": RING})
    for buffer, grads in started:
        _write_back(block, buffer, grads)


def _coalesce(block, pos: int, inputs, name: str, outputs=None):
    """Insert at `pos` a coalesce_tensor of `inputs` (one dtype) into a new flat buffer
    named after `name` (its Output: `outputs`, by default the inputs themselves)."""
    fused = block.create_var(unique_name.generate(name), [sum(_numel(v) for v in inputs)], inputs[0].dtype,
                             stop_gradient=True)
    block.insert_op(pos, "coalesce_tensor", {"Input": inputs}, {"Output": outputs or inputs, "FusedOutput": [fused]},
                    {"dtype": dtypes.to_code(inputs[0].dtype), "copy_data": True, "use_align": False})
    return fused


def _write_back(block, buffer, targets) -> None:
    """Append split + reshape2: `buffer`'s consecutive parts under the names of the
    variables `targets`, views of the buffer (the executor's donated-input fast path),
    not copies."""
    flats = [block.create_var(unique_name.generate(f"{t.name}@PART"), [_numel(t)], t.dtype, stop_gradient=True)
             for t in targets]
    block.append_op("split", {"X": [buffer]}, {"Out": flats},
                    {"sections": [_numel(t) for t in targets], "axis": 0, "num": 0})
    for flat, t in zip(flats, targets):
        xshape = block.create_var(unique_name.generate(f"{t.name}@XSHAPE"), [0, -1], t.dtype, stop_gradient=True)
        block.append_op("reshape2", {"X": [flat]}, {"Out": [t], "XShape": [xshape]}, {"shape": list(t.shape)})


# -- sharding (ZeRO-1): reduce-scatter the gradients, update a shard, all-gather the parameters --

def _shards(variables, owner, nranks: int, block, pos: int | None):
    """The variables laid out rank by rank (each rank's own, in the given order), every
    rank's segment padded with zeros to the longest: [segment of rank r], the segment
    length and the number of fill_constant ops making the padding, inserted at `pos`
    (None: appended)."""
    segments = [[v for v in variables if owner[v.name] == r] for r in range(nranks)]
    length = max(sum(_numel(v) for v in seg) for seg in segments)
    padded = 0
    for seg in segments:
        pad = length - sum(_numel(v) for v in seg)
        if pad:
            var = block.create_var(unique_name.generate("shard_padding"), [pad], variables[0].dtype,
                                   stop_gradient=True)
            attrs = {"shape": [pad], "value": 0.0, "dtype": dtypes.to_code(var.dtype)}
            if pos is None:
                block.append_op("fill_constant", {}, {"Out": [var]}, attrs)
            else:
                block.insert_op(pos, "fill_constant", {}, {"Out": [var]}, attrs)
            seg.append(var)
            padded += 1
    return segments, length, padded


def _start_reduce_scatters(block, buckets, owner, nranks: int, rank: int) -> list:
    """After each bucket's last gradient: its gradients coalesced rank by rank, each
    rank's segment padded to the same length, and a nonblocking reduce-scatter that leaves
    each rank the sum of its own segment: [(this rank's part, its gradients and padding)]."""
    started = []
    for after, grads in reversed(buckets):
        segments, length, padded = _shards(grads, owner, nranks, block, after + 1)
        pos = after + 1 + padded
        fused = _coalesce(block, pos, [v for seg in segments for v in seg], "fused_grad")
        part = block.create_var(unique_name.generate("fused_grad_shard"), [length], grads[0].dtype,
                                stop_gradient=True)
        block.insert_op(pos + 1, "c_reducescatter", {"X": [fused]}, {"Out": [part]},
                        {"ring_id": RING, "nranks": nranks, "use_calc_stream": False})
        started.append((part, segments[rank]))
    return started[::-1]


def _gather_parameters(block, params, owner, nranks: int, rank: int) -> None:
    """After the updates: every parameter from its owner, as one all-gather per dtype of
    the owners' segments (coalesced, padded alike), split back under the parameters' names."""
    for dtype in sorted({p.dtype for p in params}, key=str):
        group = sorted((p for p in params if p.dtype == dtype), key=lambda p: p.name)
        segments, length, _ = _shards(group, owner, nranks, block, None)
        own = segments[rank]
        copies = [block.create_var(unique_name.generate(f"{v.name}@SHARD"), list(v.shape), v.dtype,
                                   stop_gradient=True) for v in own]
        send = _coalesce(block, len(block.ops), own, "shard_params", outputs=copies)
        gathered = block.create_var(unique_name.generate("gathered_params"), [length * nranks], dtype,
                                    stop_gradient=True)
        block.append_op("c_allgather", {"X": [send]}, {"Out": [gathered]},
                        {"ring_id": RING, "nranks": nranks, "use_calc_stream": True})
        _write_back(block, gathered, [v for seg in segments for v in seg])


def _assign_owners(params, nranks: int) -> dict[str, int]:
    """Each parameter's owner rank: the largest first, each to the least loaded rank
    (ties to the lowest rank), so every rank holds about 1/N of the optimizer state."""
    load = [0] * nranks
    owners = {}
    for p in sorted(params, key=lambda p: (-_nbytes(p), p.name)):
        rank = min(range(nranks), key=lambda r: (load[r], r))
        owners[p.name] = rank
        load[rank] += _nbytes(p)
    return owners
