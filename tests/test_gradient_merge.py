"""GradientMergeOptimizer (program/gradient_merge.py): k micro-batches give the update of one
k-times-larger batch, the off-steps leave every state variable bit for bit as it was, and
the program runs in PaddlePaddle's executor as PaddlePaddle's own GradientMergeOptimizer
trains (paddle-marked tests)."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.program.incubate.optimizer import GradientMergeOptimizer

K = 4
RNG = np.random.default_rng(0)
X = RNG.standard_normal((32, 8)).astype(np.float32)
Y = RNG.standard_normal((32, 1)).astype(np.float32)
OPTIMIZERS = {"sgd": lambda: pg.optimizer.SGD(0.1), "adam": lambda: pg.optimizer.Adam(0.01),
              "momentum": lambda: pg.optimizer.Momentum(0.05, momentum=0.9)}


def _build(make_opt, k_steps=None, avg=True):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 3
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x, y = pg.data("x", [-1, 8]), pg.data("y", [-1, 1])
        out = pg.nn.fc(pg.nn.fc(x, 16, activation="tanh"), 1)
        loss = pg.mean(pg.square(out - y))
        opt = make_opt()
        if k_steps is not None:
            opt = GradientMergeOptimizer(opt, k_steps=k_steps, avg=avg)
        opt.minimize(loss)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    return main, loss, exe, scope


def _micro_batches(rounds):
    return [{"x": X[i * 8:(i + 1) * 8], "y": Y[i * 8:(i + 1) * 8]} for _ in range(rounds) for i in range(K)]


def _params(main, scope):
    return {p.name: np.array(scope.get(p.name)) for p in main.all_parameters()}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_k_micro_batches_update_as_one_large_batch(name):
    main, loss, exe, scope = _build(OPTIMIZERS[name])
    for _ in range(3):
        exe.run(main, feed={"x": X, "y": Y}, fetch_list=[loss], scope=scope)
    want = _params(main, scope)
    main, loss, exe, scope = _build(OPTIMIZERS[name], K)
    for feed in _micro_batches(3):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    got = _params(main, scope)
    for p in want:
        np.testing.assert_allclose(got[p], want[p], rtol=0, atol=1e-6, err_msg=p)


def test_off_steps_leave_the_state_bit_for_bit_and_the_sums_restart():
    main, loss, exe, scope = _build(OPTIMIZERS["adam"], K, avg=False)
    main.verify()  # Keel's checker accepts the rewritten program
    state = [v.name for v in main.global_block().vars.values()
             if v.persistable and v.dtype == pg.dtypes.to_code("float32") and "GradientMerge" not in v.name
             and "learning_rate" not in v.name]
    before = {n: np.array(scope.get(n)) for n in state}
    feeds = _micro_batches(1)
    for feed in feeds[:K - 1]:
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
        for n in state:
            assert np.array_equal(np.asarray(scope.get(n)), before[n]), n
    merged = np.array(scope.get("fc_1.b_0@GRAD@GradientMerge"))
    assert np.abs(merged).max() > 0
    assert int(np.asarray(scope.get("gradient_merge_step"))[0]) == K - 1
    exe.run(main, feed=feeds[-1], fetch_list=[loss], scope=scope)
    assert int(np.asarray(scope.get("gradient_merge_step"))[0]) == 0
    assert not np.any(np.asarray(scope.get("fc_1.b_0@GRAD@GradientMerge")))
    assert any(not np.array_equal(np.asarray(scope.get(n)), before[n]) for n in state)


def test_the_update_is_a_conditional_block_as_paddle_writes_it():
    """PaddlePaddle's form: block 0 merges the gradients and counts the step; a
    conditional_block on gradient_merge_cond holds the 1/k scaling, the update ops and the
    fill_constant zeroing the merged gradients; no update op runs outside it."""
    main, _, _, _ = _build(OPTIMIZERS["adam"], K)
    top = [op.type for op in main.global_block().ops]
    assert "adam" not in top and top[-1] == "conditional_block"
    branch = main.global_block().ops[-1]
    assert branch.input("Cond") == ["gradient_merge_cond"] and branch.attr("is_scalar_condition")
    inner = [op.type for op in main.block(branch.attr("sub_block")).ops]
    params = len(main.all_parameters())
    assert inner.count("adam") == params and inner.count("fill_constant") == params
    assert inner[:params] == ["scale"] * params  # avg: merged /= k first


def test_avg_false_sums_the_gradients():
    """avg=False: SGD at lr/k on the sum equals SGD at lr on the mean."""
    main, loss, exe, scope = _build(lambda: pg.optimizer.SGD(0.1 / K), K, avg=False)
    for feed in _micro_batches(2):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    got = _params(main, scope)
    main, loss, exe, scope = _build(lambda: pg.optimizer.SGD(0.1), K, avg=True)
    for feed in _micro_batches(2):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    for p, want in _params(main, scope).items():
        np.testing.assert_allclose(got[p], want, rtol=0, atol=1e-6, err_msg=p)


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="k_steps"):
        GradientMergeOptimizer(pg.optimizer.SGD(0.1), k_steps=0)
    with pytest.raises(ValueError, match="inner_optimizer"):
        GradientMergeOptimizer(None)


@pytest.mark.paddle
@pytest.mark.parametrize("name", ["sgd", "adam"])
def test_keel_program_and_paddles_own_gradient_merge_agree_in_paddle(name):
    """Keel's gradient-merge program, run in PaddlePaddle's executor, gives Keel's losses and
    parameters; and PaddlePaddle's own GradientMergeOptimizer (its conditional_block form),
    from the same initial values, trains to the same parameters."""
    paddle = pytest.importorskip("paddle")
    from paddle_static import persistable_values, run_in_paddle
    main, loss, exe, scope = _build(OPTIMIZERS[name], K)
    initial = persistable_values(main, scope)
    feeds = _micro_batches(3)
    ours = [float(exe.run(main, feed=f, fetch_list=[loss], scope=scope)[0]) for f in feeds]
    final = persistable_values(main, scope)
    fetched, theirs_final = run_in_paddle(paddle, main, initial, feeds, [loss.name])
    np.testing.assert_allclose([float(f[0]) for f in fetched], ours, rtol=1e-5)
    for n, want in final.items():
        np.testing.assert_allclose(theirs_final[n], want, rtol=1e-5, atol=1e-6, err_msg=n)

    paddle.enable_static()
    try:
        losses, params = _paddles_own_gradient_merge(paddle, name, main, initial, feeds)
    finally:  # later paddle tests in this process (eager autograd) need dynamic mode back
        paddle.disable_static()
    np.testing.assert_allclose(losses, ours, rtol=1e-5)
    for n, want in params.items():
        np.testing.assert_allclose(final[n], want, rtol=1e-5, atol=1e-6, err_msg=n)


def _paddles_own_gradient_merge(paddle, name, main, initial, feeds):
    """PaddlePaddle's GradientMergeOptimizer on the same net from the same initial values:
    its losses and final parameters."""
    pmain, pstartup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(pmain, pstartup), paddle.utils.unique_name.guard():
        x = paddle.static.data("x", [-1, 8])
        y = paddle.static.data("y", [-1, 1])
        out = paddle.static.nn.fc(paddle.static.nn.fc(x, 16, activation="tanh"), 1)
        ploss = paddle.mean(paddle.square(out - y))
        inner = {"sgd": lambda: paddle.optimizer.SGD(0.1), "adam": lambda: paddle.optimizer.Adam(0.01)}[name]()
        paddle.incubate.optimizer.GradientMergeOptimizer(inner, k_steps=K, avg=True).minimize(ploss)
    pexe = paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(paddle.static.Scope()):
        pexe.run(pstartup)
        pscope = paddle.static.global_scope()
        for p in main.all_parameters():
            pscope.find_var(p.name).get_tensor().set(initial[p.name], paddle.CPUPlace())
        losses = [float(np.asarray(pexe.run(pmain, feed=f, fetch_list=[ploss])[0])) for f in feeds]
        params = {p.name: np.array(pscope.find_var(p.name).get_tensor()) for p in main.all_parameters()}
    return losses, params
