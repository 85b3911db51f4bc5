"""What fleet.distributed_optimizer writes into the program, the collective ops' shape
rules, and the parts of `distributed` that need no process group (no MPI here: the
2-rank runs are in tests/test_distributed.py)."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.distributed import fleet, parallel
from keel.program import op_role
from keel.program.errors import ShapeError
from keel.program.io.data import DistributedBatchSampler

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def two_ranks(monkeypatch):
    """The process group as rank 0 of 2 sees it (no MPI: only programs are built)."""
    monkeypatch.setattr(parallel, "_ENV", parallel.ParallelEnv(rank=0, world_size=2, local_rank=0, device_id=-1))


def _mlp(strategy, sizes=(10, 64, 32, 4)):
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        h = pg.data("x", [-1, sizes[0]])
        for width in sizes[1:-1]:
            h = pg.nn.fc(h, width, activation="tanh")
        loss = pg.mean(pg.nn.fc(h, sizes[-1]))
        test = main.clone(for_test=True)
        optimizer = fleet.distributed_optimizer(pg.optimizer.Adam(0.01), strategy)
        optimizer.minimize(loss)
    return main, startup, test, optimizer


def _types(program):
    return [op.type for op in program.global_block().ops]


def test_gradients_are_bucketed_and_all_reduced_as_backward_produces_them(two_ranks):
    # buckets of 8 KiB: fc_2 (32x4 + 4 floats) alone, fc_1's weight (64x32) alone, the rest
    main, startup, test, _ = _mlp(fleet.DistributedStrategy(fuse_grad_size_in_MB=8 / 1024))
    ops = main.global_block().ops
    starts = [i for i, op in enumerate(ops) if op.type == "c_allreduce_sum"]
    assert len(starts) == 3
    for i in starts:
        op = ops[i]
        assert op.attr("use_calc_stream") is False and op.attr("ring_id") == 0
        assert op.attr("op_role") == op_role.BACKWARD
        coalesce = ops[i - 1]
        assert coalesce.type == "coalesce_tensor" and coalesce.attr("copy_data") is True
        assert coalesce.output("FusedOutput") == op.input("X") == op.output("Out")
        grads = coalesce.input("Input")
        assert coalesce.output("Output") == grads and all(g.endswith("@GRAD") for g in grads)
        # each gradient was complete when its bucket started: only the write-back writes it again
        assert not any(set(grads) & set(o.output_arg_names) for o in ops[i:] if o.type != "reshape2")
    # the buckets start inside the backward pass, not after it
    last_backward = max(i for i, op in enumerate(ops) if op.type.endswith("_grad"))
    assert starts[0] < last_backward
    sync = _types(main).index("c_sync_comm_stream")
    assert sync > last_backward and sync < _types(main).index("adam")
    assert _types(main).count("split") == 3
    # no pass over the gradients averages them: the loss gradient seed is scaled by 1/N instead
    scales = [op for op in ops if op.type == "scale"]
    assert len(scales) == 1 and scales[0].attr("scale") == 0.5
    seed = ops[ops.index(scales[0]) - 1]
    assert seed.type == "fill_constant" and seed.output("Out") == scales[0].input("X") == scales[0].output("Out")
    assert seed.attr("op_role") == op_role.BACKWARD | op_role.LOSS and seed.attr("value") == 1.0
    # every parameter starts from rank 0's values; evaluation clones have no collectives
    assert _types(startup).count("c_broadcast") == 6
    assert not {"c_allreduce_sum", "c_sync_comm_stream", "c_broadcast"} & set(_types(test))
    assert not {"c_allreduce_sum", "c_sync_comm_stream"} & set(_types(main.clone(for_test=True)))


def test_one_bucket_by_default_and_one_per_gradient_without_fusion(two_ranks):
    main, *_ = _mlp(fleet.DistributedStrategy())
    assert _types(main).count("c_allreduce_sum") == 1
    main, *_ = _mlp(fleet.DistributedStrategy(fuse_all_reduce_ops=False))
    assert _types(main).count("c_allreduce_sum") == 6


def test_sharding_reduce_scatters_updates_the_owned_parameters_and_gathers_all(two_ranks):
    main, startup, _, optimizer = _mlp(fleet.DistributedStrategy(sharding=True), sizes=(10, 64, 64, 4))
    owners = optimizer.owners
    assert sorted(set(owners.values())) == [0, 1]
    ops = main.global_block().ops
    types = _types(main)
    mine = sorted(op.input("Param")[0] for op in ops if op.type == "adam")
    assert mine == sorted(p for p, r in owners.items() if r == 0)
    # one bucket: the gradients coalesced rank by rank (rank 0's, padding, rank 1's), reduce-scattered
    assert "c_allreduce_sum" not in types and "c_broadcast" not in types
    coalesce, scatter = ops[types.index("c_reducescatter") - 1], ops[types.index("c_reducescatter")]
    assert coalesce.type == "coalesce_tensor" and scatter.input("X") == coalesce.output("FusedOutput")
    assert scatter.attr("nranks") == 2 and scatter.attr("use_calc_stream") is False
    block = main.global_block()
    layout = coalesce.input("Input")
    grads = [n for n in layout if n.endswith("@GRAD")]
    ranks_in_order = [owners[n[:-len("@GRAD")]] for n in grads]
    assert ranks_in_order == sorted(ranks_in_order) and sorted(grads) == sorted(f"{p}@GRAD" for p in owners)
    sizes = [sum(int(np.prod(block.var(n).shape)) for n in layout[:layout.index(grads[ranks_in_order.index(1)])]),
             sum(int(np.prod(block.var(n).shape)) for n in layout[layout.index(grads[ranks_in_order.index(1)]):])]
    assert sizes[0] == sizes[1]  # the segments are padded to one length
    # after the updates, every parameter comes back from its owner through one all-gather
    gather = ops[types.index("c_allgather")]
    assert types.index("c_allgather") > max(i for i, t in enumerate(types) if t == "adam")
    assert ops[types.index("c_allgather") - 1].type == "coalesce_tensor"
    written = {n for op in ops[types.index("c_allgather"):] if op.type == "reshape2" for n in op.output("Out")}
    assert set(owners) <= written and gather.attr("nranks") == 2
    # accumulators (moments, beta powers) exist for the owned parameters only
    accumulators = [v for v in startup.global_block().vars if "moment" in v]
    assert sorted({a.rsplit("_moment", 1)[0] for a in accumulators}) == mine


def test_sharding_with_a_rank_that_owns_nothing(monkeypatch):
    """One parameter, two ranks: rank 1 updates nothing, its segments are all padding, and it
    still takes part in every collective (the same ones, in the same order, as rank 0)."""
    programs = {}
    for rank in (0, 1):
        monkeypatch.setattr(parallel, "_ENV", parallel.ParallelEnv(rank=rank, world_size=2, local_rank=rank,
                                                                   device_id=-1))
        main, startup = pg.Program(), pg.Program()
        with pg.program_guard(main, startup), pg.unique_name.guard():
            x = pg.data("x", [-1, 3])
            loss = pg.mean(pg.nn.fc(x, 1, bias_attr=False))
            strategy = fleet.DistributedStrategy(sharding=True)
            fleet.distributed_optimizer(pg.optimizer.Adam(0.01), strategy).minimize(loss)
        main.verify()
        programs[rank] = main
    collectives = {r: [(op.type, op.attr("nranks")) for op in p.global_block().ops if op.type.startswith("c_")]
                   for r, p in programs.items()}
    assert collectives[0] == collectives[1] == [("c_reducescatter", 2), ("c_sync_comm_stream", None),
                                                ("c_allgather", 2)]
    assert "adam" in _types(programs[0]) and "adam" not in _types(programs[1])
    gather = next(op for op in programs[1].global_block().ops if op.type == "coalesce_tensor"
                  and op.attr("op_role") == op_role.OPTIMIZE)
    assert [programs[1].global_block().var(n).shape for n in gather.input("Input")] == [(3,)]  # padding only


def test_sharding_refuses_idle_ranks_where_the_updates_are_collective(monkeypatch):
    """Under AMP or ClipGradByGlobalNorm the update ops all-reduce (the overflow flag, the
    sum of squares); a rank owning no parameter would append none of them, so every rank
    refuses at build time instead of waiting for it at run time."""
    monkeypatch.setattr(parallel, "_ENV", parallel.ParallelEnv(rank=0, world_size=2, local_rank=0, device_id=-1))
    for wrap, what in [(lambda o: pg.static.amp.decorate(o), "AMP's overflow check"),
                       (lambda o: o, "ClipGradByGlobalNorm's sum of squares")]:
        main, startup = pg.Program(), pg.Program()
        with pg.program_guard(main, startup), pg.unique_name.guard():
            x = pg.data("x", [-1, 3])
            loss = pg.mean(pg.nn.fc(x, 1, bias_attr=False))
            inner = wrap(pg.optimizer.Adam(0.01, grad_clip=pg.nn.ClipGradByGlobalNorm(1.0)))
            with pytest.raises(ValueError, match=rf"rank\(s\) \[1\] of 2 own none of the 1 parameter.*{what}"):
                fleet.distributed_optimizer(inner, fleet.DistributedStrategy(sharding=True)).minimize(loss)


def test_sharding_all_reduces_the_overflow_flag_and_the_global_norm(two_ranks):
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        h = pg.nn.fc(pg.data("x", [-1, 10]), 16, activation="tanh")
        loss = pg.mean(pg.nn.fc(h, 4))
        inner = pg.static.amp.decorate(pg.optimizer.SGD(0.1, grad_clip=pg.nn.ClipGradByGlobalNorm(1.0)))
        optimizer = fleet.distributed_optimizer(inner, fleet.DistributedStrategy(sharding=True))
        optimizer.minimize(loss)
    main.verify()
    ops = main.global_block().ops
    types = _types(main)
    check = types.index("check_finite_and_unscale")
    found = ops[check].output("FoundInfinite")[0]
    # found_inf -> int32 -> max over the ranks -> bool, before the loss scale is updated
    cast_in, reduce, cast_out = ops[check + 1:check + 4]
    assert [cast_in.type, reduce.type, cast_out.type] == ["cast", "c_allreduce_max", "cast"]
    assert cast_in.input("X") == [found] and reduce.input("X") == cast_in.output("Out")
    assert ops[types.index("update_loss_scaling")].input("FoundInfinite") == cast_out.output("Out")
    # the sum of this rank's squared norms is summed over the ranks before its square root
    total = ops[types.index("sum")].output("Out")
    assert ops[types.index("sum") + 1].type == "c_allreduce_sum" and ops[types.index("sum") + 1].input("X") == total
    assert main.sharding.nranks == 2 and main.sharding.rank == 0
    assert all(main.sharding.owns(op.input("Param")[0]) for op in ops if op.type == "sgd")
    # the user's optimizer is left as it was
    assert inner._found_inf_ring is None and inner._optimizer._grad_clip.ring_id is None


def test_a_sharded_rank_loads_its_share_of_a_whole_checkpoint(tmp_path, monkeypatch):
    """A checkpoint names each accumulator's parameter; rank 1 of a sharded program loads
    strictly the accumulators of the parameters it owns and passes over the others'."""
    from keel.executor import CheckpointError, Executor, Scope, load_checkpoint, save_checkpoint
    from keel.program.sharding import optimizer_state
    monkeypatch.setattr(parallel, "_ENV", parallel.ParallelEnv(rank=0, world_size=1, local_rank=0, device_id=-1))
    whole, startup, _, _ = _mlp(fleet.DistributedStrategy(), sizes=(10, 64, 64, 4))
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    state = optimizer_state(whole)
    assert set(state.values()) == {p.name for p in whole.global_block().all_parameters()}
    assert len(state) == 4 * len(set(state.values()))  # moment1/2, beta1/2 powers; not the learning rate
    save_checkpoint(tmp_path / "c.keel", whole, exe, scope)
    monkeypatch.setattr(parallel, "_ENV", parallel.ParallelEnv(rank=1, world_size=2, local_rank=1, device_id=-1))
    rank1, _, _, optimizer = _mlp(fleet.DistributedStrategy(sharding=True), sizes=(10, 64, 64, 4))
    mine = {p for p, r in optimizer.owners.items() if r == 1}
    assert 0 < len(mine) < len(optimizer.owners)
    loaded = Scope()
    load_checkpoint(tmp_path / "c.keel", rank1, Executor(), loaded)
    for name, param in state.items():
        assert loaded.has(name) == (param in mine), name
        if param in mine:
            np.testing.assert_array_equal(loaded.get(name), scope.get(name))
    rank1.sharding = None  # the same program, not sharded: the others' accumulators are foreign
    with pytest.raises(CheckpointError, match="in the checkpoint but not a persistable variable of the program"):
        load_checkpoint(tmp_path / "c.keel", rank1, Executor(), Scope())


def test_owners_balance_the_optimizer_state():
    sizes = {"a": 1000, "b": 600, "c": 500, "d": 100}
    params = [type("P", (), {"name": n, "shape": [s], "dtype": 5})() for n, s in sizes.items()]
    owners = fleet._assign_owners(params, 2)
    load = [sum(sizes[n] for n, r in owners.items() if r == rank) for rank in (0, 1)]
    assert owners == {"a": 0, "b": 1, "c": 1, "d": 0} and load == [1100, 1100]


def test_sync_batch_norm_replaces_batch_norm_before_backward(two_ranks):
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 2, 4, 4])
        h = pg.nn.batch_norm(pg.nn.conv2d(x, 3, 3), act="relu")
        loss = pg.mean(h)
        strategy = fleet.DistributedStrategy(sync_batch_norm=True)
        fleet.distributed_optimizer(pg.optimizer.SGD(0.1), strategy).minimize(loss)
    types = _types(main)
    assert "batch_norm" not in types and "batch_norm_grad" not in types
    assert types.count("sync_batch_norm") == 1 and types.count("sync_batch_norm_grad") == 1
    bn = next(op for op in main.global_block().ops if op.type == "sync_batch_norm")
    assert "test_distributed_program.py" in bn.callsite


def test_minimize_before_init_is_refused():
    with pytest.raises(RuntimeError, match="fleet.init"):
        _mlp(fleet.DistributedStrategy())


def test_collective_shape_rules():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [6, 3])
        block = main.global_block()
        out = block.create_var("g", None, x.dtype)
        block.append_op("c_allgather", {"X": [x]}, {"Out": [out]}, {"nranks": 4})
        assert list(out.shape) == [24, 3]
        part = block.create_var("p", None, x.dtype)
        block.append_op("c_reducescatter", {"X": [x]}, {"Out": [part]}, {"nranks": 3})
        assert list(part.shape) == [2, 3]
        with pytest.raises(ShapeError, match=r"c_reducescatter.*dim 0 of X \[6, 3\] is not divisible by nranks 4"):
            block.append_op("c_reducescatter", {"X": [x]}, {"Out": [block.create_var("q", None, x.dtype)]},
                            {"nranks": 4})


def test_collective_program_round_trips_through_paddle_format(two_ranks):
    main, *_ = _mlp(fleet.DistributedStrategy(fuse_grad_size_in_MB=8 / 1024))
    data = main.serialize_to_string()
    assert pg.Program.parse_from_string(data).serialize_to_string() == data


def test_distributed_batch_sampler_takes_the_process_group_from_the_environment(monkeypatch):
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "2")
    monkeypatch.setenv("PADDLE_TRAINER_ID", "1")
    sampler = DistributedBatchSampler(np.arange(7), batch_size=2)
    assert (sampler.nranks, sampler.local_rank) == (2, 1)
    assert list(sampler) == [[2, 3], [6, 0]]


def test_the_core_imports_without_mpi():
    code = ("import sys; sys.modules['mpi4py'] = None\n"
            "import keel as paddle\n"
            "from keel import distributed\n"
            "from keel.distributed import fleet\n"
            "assert paddle.distributed.get_world_size() == 1 and paddle.distributed.get_rank() == 0\n"
            "try:\n    distributed.init_parallel_env()\n"
            "except distributed.parallel.communicators.CommError as e:\n    print(e)\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert r.returncode == 0, r.stderr
    assert 'pip install -e ".[dist]"' in r.stdout


def test_paddle_distributed_functions_append_paddles_ops(two_ranks):
    import keel.distributed as dist
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [4, 3])
        dist.all_reduce(x, op=dist.ReduceOp.PROD, sync_op=False)
        dist.wait(x, use_calc_stream=False)
        dist.broadcast(x, src=1)
        parts = []
        dist.all_gather(parts, x)
        with pytest.raises(NotImplementedError, match="only the global group"):
            dist.all_reduce(x, group=object())
        with pytest.raises(ValueError, match="op must be ReduceOp.SUM, MAX, MIN or PROD, got 7"):
            dist.reduce(x, dst=0, op=7)
        with pytest.raises(ValueError, match=r"tensor_list holds 3 tensor\(s\); it needs one per rank \(2\)"):
            dist.reduce_scatter(x, [x, x, x])
    ops = main.global_block().ops
    assert [op.type for op in ops] == ["c_allreduce_prod", "c_sync_comm_stream", "c_broadcast", "c_allgather",
                                       "split"]
    assert ops[0].attr("use_calc_stream") is False and ops[2].attr("root") == 1 and ops[3].attr("nranks") == 2
    assert len(parts) == 2 and [p.shape for p in parts] == [(4, 3), (4, 3)]
    main.verify()


def test_distributed_strategy_checks_options_as_paddle_does():
    strategy = fleet.DistributedStrategy(sharding=True)
    assert strategy.amp_configs["init_loss_scaling"] == 32768.0 and strategy.gradient_merge_configs == \
        {"k_steps": 1, "avg": True}
    strategy.amp_configs = {"init_loss_scaling": 1024, "use_pure_fp16": True}
    assert strategy.amp_configs["init_loss_scaling"] == 1024 and strategy.amp_configs["decr_ratio"] == 0.8
    strategy.nccl_comm_num = 2  # a tuning knob: accepted
    with pytest.raises(TypeError, match="nonsense is not an attribute of DistributedStrategy"):
        strategy.nonsense = 1
    with pytest.raises(KeyError, match="amp_configs: no key 'bogus'"):
        strategy.amp_configs = {"bogus": 1}
    with pytest.raises(NotImplementedError, match="DistributedStrategy.pipeline: not supported"):
        strategy.pipeline = True
    strategy.pipeline = False  # off is fine
    with pytest.raises(TypeError, match="nonsense is not an attribute"):
        fleet.DistributedStrategy(nonsense=True)


def _meta_program(configure):
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        h = pg.nn.fc(pg.data("x", [-1, 10]), 16, activation="tanh")
        loss = pg.mean(pg.nn.fc(h, 4))
        strategy = fleet.DistributedStrategy()
        configure(strategy, h)
        optimizer = fleet.distributed_optimizer(pg.optimizer.Adam(0.01), strategy)
        optimizer.minimize(loss)
    main.verify()
    return main, optimizer, startup


def test_strategy_meta_optimizers_wrap_the_users_optimizer(two_ranks):
    def amp(strategy, h):
        strategy.amp = True
        strategy.amp_configs = {"init_loss_scaling": 1024.0, "decr_every_n_nan_or_inf": 3}
    main, optimizer, _ = _meta_program(amp)
    update = next(op for op in main.global_block().ops if op.type == "update_loss_scaling")
    assert update.attr("decr_every_n_nan_or_inf") == 3 and update.attr("decr_ratio") == pytest.approx(0.8)
    assert any(op.type == "cast" for op in main.global_block().ops)
    assert optimizer.get_loss_scaling() is not None and optimizer.get_lr() == 0.01

    def merge(strategy, h):
        strategy.gradient_merge = True
        strategy.gradient_merge_configs = {"k_steps": 4}
    main, _, _ = _meta_program(merge)
    types = _types(main)
    assert "conditional_block" in types and "c_allreduce_sum" in types
    k = next(op for op in main.global_block().ops if op.type == "elementwise_mod")
    assert main.global_block().var(k.input("Y")[0]).name == "gradient_merge_k"

    def recompute(strategy, h):
        strategy.recompute = True
        strategy.recompute_configs = {"checkpoints": [h.name]}
    main, _, _ = _meta_program(recompute)
    assert _types(main).count("mul") == 3  # the segment after the checkpoint runs again before its gradient

    def offload(strategy, h):
        strategy.recompute = True
        strategy.recompute_configs = {"checkpoints": [h.name], "enable_offload": True}
    with pytest.raises(NotImplementedError, match="enable_offload"):
        _meta_program(offload)

    def stage2(strategy, h):
        strategy.sharding = True
        strategy.sharding_configs = {"stage": 2}
    with pytest.raises(NotImplementedError, match="only stage 1"):
        _meta_program(stage2)


def test_strategy_pure_fp16_with_recompute_trains_and_restores_the_masters(monkeypatch):
    """amp sits directly around the user's optimizer, so O2's master weights exist under
    recompute too (amp outside recompute found no master weights to restore)."""
    from keel.executor import CPUPlace, Executor, Scope
    monkeypatch.setattr(parallel, "_ENV", parallel.ParallelEnv(rank=0, world_size=1, local_rank=0, device_id=-1))

    def configure(strategy, h):
        strategy.amp, strategy.recompute = True, True
        strategy.amp_configs = {"use_pure_fp16": True, "use_fp16_guard": False}
        strategy.recompute_configs = {"checkpoints": [h.name]}
    main, optimizer, startup = _meta_program(configure)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    optimizer.amp_init(CPUPlace(), scope=scope)
    assert scope.get("fc_0.w_0").dtype == np.float16
    for _ in range(2):
        exe.run(main, feed={"x": np.ones((4, 10), np.float32)}, scope=scope)
    optimizer.restore_master_weights(scope)
    assert scope.get("fc_0.w_0").dtype == np.float32
    np.testing.assert_array_equal(scope.get("fc_0.w_0"), scope.get("fc_0.w_0_fp32_master_0"))
    assert _types(main).count("mul") == 3  # recomputed as well


def test_gradient_merge_accumulators_are_optimizer_state(two_ranks):
    from keel.program.sharding import optimizer_state

    def merge(strategy, h):
        strategy.gradient_merge = True
        strategy.gradient_merge_configs = {"k_steps": 2}
    main, _, _ = _meta_program(merge)
    state = optimizer_state(main)
    assert state["fc_0.w_0@GRAD@GradientMerge"] == "fc_0.w_0" and state["fc_0.w_0_moment1_0"] == "fc_0.w_0"
    assert len(state) == 4 * 5  # 4 parameters: their merged gradients and Adam's four accumulators
