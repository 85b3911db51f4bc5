"""RecomputeOptimizer (program/recompute.py): gradients bit for bit those without recompute,
the forward values inside segments freed after their forward use (peak memory of a
12-layer Transformer's training step <= 0.5x, measured by executor.memory.peak_bytes), and
the rewritten program runs in PaddlePaddle's executor with Keel's losses (paddle-marked)."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.executor.memory import peak_bytes
from keel.program.incubate.optimizer import RecomputeOptimizer

LAYERS, B, T, D, HEADS = 12, 8, 64, 64, 4


def _transformer(recompute, dropout=0.0, make_opt=lambda: pg.optimizer.SGD(0.01), layers=LAYERS):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 3
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x, y = pg.data("x", [-1, T, D]), pg.data("y", [-1, T, D])
        h, checkpoints = x, []
        for _ in range(layers):
            h = pg.nn.TransformerEncoderLayer(D, HEADS, 4 * D, dropout=dropout)(h)
            checkpoints.append(h)
        loss = pg.mean(pg.square(h - y))
        opt = make_opt()
        if recompute:
            opt = RecomputeOptimizer(opt)
            opt._set_checkpoints(checkpoints)
        _, params_grads = opt.minimize(loss)
    exe, scope = Executor(seed=11), Scope()
    exe.run(startup, scope=scope)
    return main, loss, [g.name for _, g in params_grads], exe, scope


def _feed(seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((B, T, D)).astype(np.float32),
            "y": rng.standard_normal((B, T, D)).astype(np.float32)}


@pytest.mark.parametrize("dropout", [0.0, 0.1])
def test_gradients_bit_identical_and_peak_memory_halved(dropout):
    runs = {}
    for recompute in (False, True):
        main, loss, grads, exe, scope = _transformer(recompute, dropout)
        fetched, peak = peak_bytes(exe.run, main, feed=_feed(), fetch_list=[loss] + grads, scope=scope)
        runs[recompute] = (main, fetched, peak, {p.name: np.array(scope.get(p.name)) for p in main.all_parameters()})
    (plain, want, plain_peak, want_params), (rewritten, got, peak, got_params) = runs[False], runs[True]
    rewritten.verify()  # Keel's checker accepts the rewritten program
    assert sum(op.type == "matmul_v2" for op in rewritten.global_block().ops) > \
        sum(op.type == "matmul_v2" for op in plain.global_block().ops)
    assert any(n.endswith(".subprog_0") for op in rewritten.global_block().ops for n in op.output_arg_names)
    for a, b in zip(want, got):
        assert np.array_equal(a, b)
    for name, value in want_params.items():
        assert np.array_equal(got_params[name], value), name
    # the fetched gradients stay alive to the end in both runs: 12 layers' worth of them
    assert peak <= 0.5 * plain_peak, (peak, plain_peak)


def test_adam_trains_identically_over_steps():
    losses = {}
    for recompute in (False, True):
        main, loss, _, exe, scope = _transformer(recompute, 0.1, lambda: pg.optimizer.Adam(1e-3), layers=3)
        losses[recompute] = [float(exe.run(main, feed=_feed(i), fetch_list=[loss], scope=scope)[0])
                             for i in range(3)]
    assert losses[True] == losses[False]


def test_checkpoints_must_be_set_and_computed():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 4])
        loss = pg.mean(pg.nn.fc(x, 3))
        opt = RecomputeOptimizer(pg.optimizer.SGD(0.1))
        with pytest.raises(pg.ProgramError, match="_set_checkpoints"):
            opt.minimize(loss)
    with pytest.raises(TypeError, match="list"):
        opt._set_checkpoints("x")
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 4])
        loss = pg.mean(pg.nn.fc(x, 3))
        opt = RecomputeOptimizer(pg.optimizer.SGD(0.1))
        opt._set_checkpoints([x])
        with pytest.raises(pg.ProgramError, match=r"checkpoint\(s\) \['x'\]"):
            opt.minimize(loss)


def test_recomputed_batch_norm_updates_running_statistics_once():
    """Every output of a recomputed op is renamed: a recomputed batch_norm does not move the
    running mean a second time."""
    stats = {}
    for recompute in (False, True):
        main, startup = pg.Program(), pg.Program()
        startup.random_seed = 2
        with pg.program_guard(main, startup), pg.unique_name.guard():
            x = pg.data("x", [-1, 3, 6, 6])
            h1 = pg.nn.batch_norm(pg.nn.conv2d(x, 4, 3, padding=1), act="relu")
            h2 = pg.nn.batch_norm(pg.nn.conv2d(h1, 4, 3, padding=1), act="relu")
            loss = pg.mean(pg.nn.fc(pg.flatten(h2), 2))
            opt = pg.optimizer.SGD(0.1)
            if recompute:
                opt = RecomputeOptimizer(opt)
                opt._set_checkpoints([h1, h2])
            opt.minimize(loss)
        exe, scope = Executor(), Scope()
        exe.run(startup, scope=scope)
        xb = np.random.default_rng(1).standard_normal((2, 3, 6, 6)).astype(np.float32)
        exe.run(main, feed={"x": xb}, fetch_list=[loss], scope=scope)
        stats[recompute] = {v.name: np.array(scope.get(v.name)) for v in main.global_block().vars.values()
                            if v.persistable and v.dtype is not None and scope.has(v.name)}
    for name, value in stats[False].items():
        assert np.array_equal(stats[True][name], value), name


@pytest.mark.paddle
def test_recompute_program_runs_in_paddle_with_keels_losses():
    paddle = pytest.importorskip("paddle")
    from paddle_static import persistable_values, run_in_paddle
    # SGD: Adam's normalized steps would turn last-digit differences of near-zero gradients
    # into visible parameter differences
    main, loss, _, exe, scope = _transformer(True, 0.0, lambda: pg.optimizer.SGD(0.05), layers=3)
    initial = persistable_values(main, scope)
    feeds = [_feed(i) for i in range(3)]
    ours = [float(exe.run(main, feed=f, fetch_list=[loss], scope=scope)[0]) for f in feeds]
    fetched, final = run_in_paddle(paddle, main, initial, feeds, [loss.name])
    np.testing.assert_allclose([float(f[0]) for f in fetched], ours, rtol=1e-5)
    for name, value in persistable_values(main, scope).items():
        np.testing.assert_allclose(final[name], value, rtol=1e-4, atol=1e-5, err_msg=name)
