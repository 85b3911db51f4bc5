"""What tests/test_distributed.py runs on every rank (`python -m keel.distributed.launch
--nproc_per_node N tests/distributed_script.py MODE OUT ...`), and on one process for the
reference runs. Each rank writes its results to OUT.<rank>.npz.

Modes (--gpu: each rank on its GPU, the collectives through NCCL; collectives and train):
  collectives OUT       every collective op on every dtype, inputs made from the rank
  api OUT               paddle.distributed's functions (all_reduce, ...) in one static program
  train OUT [options]   data-parallel training of an MLP (or, --bn, a CNN with batch norm):
                        global batch --batch split evenly over the ranks, --steps steps;
                        --sharding for ZeRO-1; --amp O1|O2 (float16, dynamic loss scale from
                        --loss-scale), --clip NORM (ClipGradByGlobalNorm), --sgd,
                        --merge K (gradient merge); --strategy-meta: amp and merge
                        through DistributedStrategy; --save/--load a
                        checkpoint (rank 0 writes; every rank calls save with --sharding),
                        --first-step to continue the data; --fault kill|hang|raise --fault-step K to make
                        rank --fault-rank misbehave at step K.
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time

import numpy as np

import keel.distributed as dist
import keel.program as pg
from keel.distributed import fleet
from keel.executor import CPUPlace, CUDAPlace, Executor, Scope
from keel.executor.checkpoint import load_checkpoint, save_checkpoint
from keel.program.gradient_merge import GradientMergeOptimizer

DTYPES = ["float32", "float64", "int32", "int64", "float16"]
REDUCE = ["sum", "max", "min", "prod"]


def rank_input(rank: int, dtype: str, shape=(2, 3)) -> np.ndarray:
    """Distinct small values per rank (exact in every dtype, products included)."""
    base = np.arange(int(np.prod(shape))).reshape(shape) % 3 + 1
    return ((base + rank) * (1 if rank % 2 == 0 else -1)).astype(dtype)


def _run_op(exe, op_type, x, attrs, sync=False):
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        xv = pg.data("x", list(x.shape), str(x.dtype))
        block = main.global_block()
        out = block.create_var("out", None, xv.dtype)
        block.append_op(op_type, {"X": [xv]}, {"Out": [out]}, attrs)
        if sync:
            block.append_op("c_sync_comm_stream", {"X": [out]}, {"Out": [out]}, {"ring_id": 0})
    result, = exe.run(main, feed={"x": x}, fetch_list=[out], scope=Scope())
    return result


def place(gpu: bool):
    """This rank's place: its GPU (init_parallel_env gave it one: FLAGS_selected_gpus), or the CPU."""
    return CUDAPlace(int(os.environ["FLAGS_selected_gpus"])) if gpu else CPUPlace()


def collectives(out_path: str, gpu: bool = False) -> None:
    dist.init_parallel_env(backend="nccl" if gpu else "auto")
    rank, n = dist.get_rank(), dist.get_world_size()
    exe, results = Executor(place(gpu)), {}
    for dtype in DTYPES:
        x = rank_input(rank, dtype)
        for op in REDUCE:
            results[f"{op}/{dtype}"] = _run_op(exe, f"c_allreduce_{op}", x, {"use_calc_stream": True})
            results[f"{op}/{dtype}/async"] = _run_op(exe, f"c_allreduce_{op}", x, {}, sync=True)
            # c_reduce_*: the reduction on the last rank, each rank's own X elsewhere
            results[f"reduce_{op}/{dtype}"] = _run_op(exe, f"c_reduce_{op}", x, {"root_id": n - 1,
                                                                                 "use_calc_stream": True})
            results[f"reduce_{op}/{dtype}/async"] = _run_op(exe, f"c_reduce_{op}", x, {"root_id": n - 1}, sync=True)
        results[f"broadcast/{dtype}"] = _run_op(exe, "c_broadcast", x, {"root": n - 1, "use_calc_stream": True})
        results[f"allgather/{dtype}"] = _run_op(exe, "c_allgather", x, {"nranks": n, "use_calc_stream": True})
        big = rank_input(rank, dtype, (2 * n, 3))
        results[f"reducescatter/{dtype}"] = _run_op(exe, "c_reducescatter", big, {"nranks": n}, sync=True)
        scalar = rank_input(rank, dtype, ())
        results[f"broadcast/{dtype}/0d"] = _run_op(exe, "c_broadcast", scalar, {"root": n - 1, "use_calc_stream": True})
        results[f"allgather/{dtype}/0d"] = _run_op(exe, "c_allgather", scalar, {"nranks": n, "use_calc_stream": True})
        results[f"identity/{dtype}"] = _run_op(exe, "c_identity", x, {})
        results[f"barrier/{dtype}"] = _run_op(exe, "barrier", x, {})
    np.savez(f"{out_path}.{rank}.npz", **results)


def api(out_path: str) -> None:
    """One program built with paddle.distributed's functions, each on its own copy of a
    rank-made input; the results by function name."""
    dist.init_parallel_env()
    rank = dist.get_rank()
    main = pg.Program()
    outs = {}
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [2, 3], "float32")

        def copy():
            return pg.scale(x, 1.0)
        for name, call in [("all_reduce_max", lambda t: dist.all_reduce(t, op=dist.ReduceOp.MAX)),
                           ("all_reduce_async", lambda t: (dist.all_reduce(t, sync_op=False),
                                                           dist.wait(t, use_calc_stream=False))),
                           ("reduce_to_1", lambda t: dist.reduce(t, dst=1)),
                           ("broadcast_from_1", lambda t: dist.broadcast(t, src=1))]:
            outs[name] = copy()
            call(outs[name])
        parts = []
        dist.all_gather(parts, copy())
        outs.update({f"all_gather_{i}": p for i, p in enumerate(parts)})
        mine = copy()
        dist.reduce_scatter(mine, [copy(), pg.scale(x, 10.0)])
        outs["reduce_scatter"] = mine
    values = Executor(CPUPlace()).run(main, feed={"x": rank_input(rank, "float32")}, fetch_list=list(outs.values()),
                                      scope=Scope())
    np.savez(f"{out_path}.{rank}.npz", **dict(zip(outs, values)))


MAX_STEPS = 32


def data(batch: int, bn: bool):
    """MAX_STEPS global batches (step k trains on batch k % MAX_STEPS), the same whatever
    the number of steps run."""
    rng = np.random.default_rng(7)
    shape = (MAX_STEPS, batch, 1, 6, 6) if bn else (MAX_STEPS, batch, 10)
    x = rng.standard_normal(shape).astype("float32")
    y = rng.integers(0, 4, (MAX_STEPS, batch, 1)).astype("int64")
    return x, y


def build(bn: bool, sync_bn: bool, strategy, args):
    main, startup = pg.Program(), pg.Program()
    main.random_seed = startup.random_seed = 11
    with pg.program_guard(main, startup), pg.unique_name.guard():
        if bn:
            x = pg.data("x", [-1, 1, 6, 6])
            # no conv bias: batch norm cancels it, so its gradient is rounding noise Adam would amplify
            h = pg.nn.conv2d(x, num_filters=4, filter_size=3, padding=1, bias_attr=False)
            h = pg.nn.batch_norm(h, act="relu")
            h = pg.nn.pool2d(h, pool_size=2, pool_type="max", pool_stride=2)
        else:
            x = pg.data("x", [-1, 10])
            h = pg.nn.fc(x, 32, activation="tanh")
            h = pg.nn.fc(h, 16, activation="relu")
        logits = pg.nn.fc(h, 4)
        label = pg.data("y", [-1, 1], "int64")
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
        clip = pg.nn.ClipGradByGlobalNorm(args.clip) if args.clip else None
        if args.sgd:
            optimizer = pg.optimizer.SGD(0.1, grad_clip=clip)
        else:
            optimizer = pg.optimizer.Adam(0.01, grad_clip=clip)
        # AMP: scale steps often, so the scale keeps crossing the gradients' overflow line
        amp = {"init_loss_scaling": args.loss_scale, "incr_every_n_steps": 2, "decr_every_n_nan_or_inf": 1,
               "decr_ratio": 0.5}
        if args.amp and not args.strategy_meta:
            optimizer = pg.static.amp.decorate(optimizer, level=args.amp, **amp)
        if args.merge and not args.strategy_meta:
            optimizer = GradientMergeOptimizer(optimizer, k_steps=args.merge)
        if strategy is not None:
            strategy.sync_batch_norm = sync_bn
            if args.strategy_meta:  # the same, asked of fleet's strategy
                strategy.amp, strategy.gradient_merge = bool(args.amp), bool(args.merge)
                strategy.amp_configs = dict(amp, use_pure_fp16=args.amp == "O2", use_fp16_guard=False)
                strategy.gradient_merge_configs = {"k_steps": args.merge or 1}
            optimizer = fleet.distributed_optimizer(optimizer, strategy)
        optimizer.minimize(loss)
    return main, startup, loss, optimizer


def train(out_path: str, args) -> None:
    strategy = None
    if not args.single:
        fleet.init(is_collective=True)
        strategy = fleet.DistributedStrategy(fuse_grad_size_in_MB=args.bucket_mb, sharding=args.sharding)
    rank, n = dist.get_rank(), dist.get_world_size()
    main, startup, loss, optimizer = build(args.bn, args.bn, strategy, args)
    exe, scope = Executor(place(args.gpu)), Scope()
    if args.gpu:  # the CPU's initial values (a GPU draws other random numbers), then on the device
        Executor(CPUPlace()).run(startup, scope=scope)
        for name in list(scope):
            scope.set(name, exe.to_device(scope.get(name)))
    else:
        exe.run(startup, scope=scope)
    fetches = [loss]
    if args.amp:
        optimizer.amp_init(CPUPlace(), scope=scope)
        fetches.append(optimizer.get_loss_scaling())
    if args.load:
        load_checkpoint(args.load, main, exe, scope)
    xs, ys = data(args.batch, args.bn)
    share = args.batch // n
    losses, scales = [], []
    for step in range(args.first_step, args.first_step + args.steps):
        if args.fault and rank == args.fault_rank and step == args.fault_step:
            print(f"rank {rank} misbehaves at step {step}: {args.fault}", flush=True)
            if args.fault == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif args.fault == "hang":
                time.sleep(3600)
            else:
                raise RuntimeError(f"rank {rank} fails on purpose at step {step}")
        rows = slice(rank * share, (rank + 1) * share)
        batch = step % MAX_STEPS
        value, *scale = exe.run(main, feed={"x": xs[batch, rows], "y": ys[batch, rows]}, fetch_list=fetches,
                                scope=scope)
        losses.append(float(value))
        scales.extend(float(np.ravel(s)[0]) for s in scale)
        print(f"step {step} loss {float(value):.6f}", flush=True)
    if args.save and (rank == 0 or main.sharding is not None):
        save_checkpoint(args.save, main, exe, scope)
    params = {p.name: exe.to_host(scope.get(p.name)) for p in main.global_block().all_parameters()}
    accumulators = {v.name: exe.to_host(scope.get(v.name)) for v in main.global_block().vars.values()
                    if v.persistable and ("moment" in v.name or "pow_acc" in v.name or "master" in v.name)
                    and scope.has(v.name)}
    optimizer_bytes = sum(a.nbytes for a in accumulators.values())
    np.savez(f"{out_path}.{rank}.npz", losses=np.array(losses), optimizer_bytes=np.array(optimizer_bytes),
             loss_scales=np.array(scales),
             **{f"param/{k}": v for k, v in params.items()})


def main(argv):
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["collectives", "api", "train"])
    p.add_argument("out")
    p.add_argument("--single", action="store_true", help="no process group: the 1-process reference")
    p.add_argument("--gpu", action="store_true", help="each rank on its GPU, collectives through NCCL")
    p.add_argument("--bn", action="store_true")
    p.add_argument("--sharding", action="store_true")
    p.add_argument("--amp", choices=["O1", "O2"])
    p.add_argument("--loss-scale", type=float, default=2.0 ** 16)
    p.add_argument("--sgd", action="store_true", help="SGD(0.1) instead of Adam(0.01)")
    p.add_argument("--merge", type=int, default=0, help="gradient merge over this many steps")
    p.add_argument("--strategy-meta", action="store_true",
                   help="--amp and --merge through fleet's DistributedStrategy instead of wrapping the optimizer")
    p.add_argument("--clip", type=float, default=0.0, help="ClipGradByGlobalNorm's clip_norm (0: none)")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--bucket-mb", type=float, default=0.002)
    p.add_argument("--first-step", type=int, default=0)
    p.add_argument("--save", help="a checkpoint written here at the end (by rank 0)")
    p.add_argument("--load", help="resume from this checkpoint")
    p.add_argument("--fault", choices=["kill", "hang", "raise"])
    p.add_argument("--fault-rank", type=int, default=1)
    p.add_argument("--fault-step", type=int, default=2)
    args = p.parse_args(argv)
    if args.mode == "collectives":
        collectives(args.out, args.gpu)
    elif args.mode == "api":
        api(args.out)
    else:
        train(args.out, args)


if __name__ == "__main__":
    main(sys.argv[1:])
