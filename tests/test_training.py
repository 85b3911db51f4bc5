"""Training end to end: append_backward's program structure, optimizers against
hand-written numpy, LR schedules, clipping, regularization, determinism, checkpoints."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import CheckpointError, CPUPlace, Executor, Scope, load_checkpoint, save_checkpoint
from keel.program.ops import registry

# -- a 2-layer MLP and its numpy twin -------------------------------------------------------


def build_mlp(optimizer=None, *, seed=5, hidden=5, dropout=None, clip=None, weight_decay=None):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = main.random_seed = seed
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 6])
        label = pg.data("label", [-1, 1], "int64")
        h = pg.nn.fc(x, hidden, activation="relu")
        if dropout:
            h = pg.nn.dropout(h, dropout_prob=dropout)
        logits = pg.nn.fc(h, 3)
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
        test_program = main.clone(for_test=True)
        if optimizer is not None:
            opt = optimizer() if callable(optimizer) else optimizer
            if clip is not None:
                opt._grad_clip = clip
            if weight_decay is not None:
                opt.regularization = pg.regularizer.as_regularizer(weight_decay)
            opt.minimize(loss)
    return main, startup, test_program, loss, logits


def batches(n=5, seed=0):
    rng = np.random.default_rng(seed)
    return [(rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, (8, 1)))
            for _ in range(n)]


def numpy_grads(params, x, label):
    """Loss and gradients of mean(softmax_ce(relu(x W0 + b0) W1 + b1)) in float64."""
    w0, b0, w1, b1 = (params[k].astype(np.float64) for k in ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"))
    z = x @ w0 + b0
    h = np.maximum(z, 0)
    logits = h @ w1 + b1
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n = len(x)
    loss = -np.log(p[np.arange(n), label[:, 0]]).mean()
    dlogits = p.copy()
    dlogits[np.arange(n), label[:, 0]] -= 1
    dlogits /= n
    dh = dlogits @ w1.T
    dz = dh * (z > 0)
    return loss, {"fc_0.w_0": x.T @ dz, "fc_0.b_0": dz.sum(0), "fc_1.w_0": h.T @ dlogits,
                  "fc_1.b_0": dlogits.sum(0)}


def run_steps(main, startup, loss, data, scope=None, exe=None):
    exe = exe or Executor(CPUPlace())
    scope = scope if scope is not None else Scope()
    exe.run(startup, scope=scope)
    params = {k: np.array(scope.get(k)) for k in ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0")}
    losses = [float(exe.run(main, feed={"x": x, "label": y}, fetch_list=[loss], scope=scope)[0])
              for x, y in data]
    return params, losses, scope


def test_sgd_matches_numpy():
    main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.SGD(learning_rate=0.1))
    data = batches()
    params, losses, scope = run_steps(main, startup, loss, data)
    ref = {k: v.astype(np.float64) for k, v in params.items()}
    want = []
    for x, y in data:
        l, g = numpy_grads(ref, x, y)
        want.append(l)
        for k in ref:
            ref[k] = ref[k] - 0.1 * g[k]
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    for k, v in ref.items():
        np.testing.assert_allclose(scope.get(k), v, rtol=1e-5, atol=1e-6, err_msg=k)


def _adam_reference(params, data, lr=0.01, b1=0.9, b2=0.999, eps=1e-8, decoupled=0.0):
    ref = {k: v.astype(np.float64) for k, v in params.items()}
    m1 = {k: np.zeros_like(v) for k, v in ref.items()}
    m2 = {k: np.zeros_like(v) for k, v in ref.items()}
    b1p, b2p = b1, b2
    losses = []
    for x, y in data:
        l, g = numpy_grads(ref, x, y)
        losses.append(l)
        for k in ref:
            if decoupled:
                ref[k] = ref[k] * (1 - lr * decoupled)
            m1[k] = b1 * m1[k] + (1 - b1) * g[k]
            m2[k] = b2 * m2[k] + (1 - b2) * g[k] ** 2
            lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
            ref[k] = ref[k] - lr_t * m1[k] / (np.sqrt(m2[k]) + eps * np.sqrt(1 - b2p))
        b1p, b2p = b1p * b1, b2p * b2
    return losses, ref


@pytest.mark.parametrize("name", ["Adam", "AdamW"])
def test_adam_matches_numpy(name):
    if name == "Adam":
        make = lambda: pg.optimizer.Adam(learning_rate=0.01)  # noqa: E731
    else:
        make = lambda: pg.optimizer.AdamW(learning_rate=0.01, weight_decay=0.1)  # noqa: E731
    main, startup, _, loss, _ = build_mlp(make)
    data = batches()
    params, losses, scope = run_steps(main, startup, loss, data)
    want, ref = _adam_reference(params, data, decoupled=0.1 if name == "AdamW" else 0.0)
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    for k, v in ref.items():
        np.testing.assert_allclose(scope.get(k), v, rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_matches_numpy(nesterov):
    main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.Momentum(0.05, momentum=0.9,
                                                                        use_nesterov=nesterov))
    data = batches()
    params, losses, scope = run_steps(main, startup, loss, data)
    ref = {k: v.astype(np.float64) for k, v in params.items()}
    vel = {k: np.zeros_like(v) for k, v in ref.items()}
    want = []
    for x, y in data:
        l, g = numpy_grads(ref, x, y)
        want.append(l)
        for k in ref:
            vel[k] = 0.9 * vel[k] + g[k]
            step = g[k] + 0.9 * vel[k] if nesterov else vel[k]
            ref[k] = ref[k] - 0.05 * step
    np.testing.assert_allclose(losses, want, rtol=1e-5)
    for k, v in ref.items():
        np.testing.assert_allclose(scope.get(k), v, rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("kind", ["l2", "l1"])
def test_regularization_matches_numpy(kind):
    decay = pg.regularizer.L2Decay(0.05) if kind == "l2" else pg.regularizer.L1Decay(0.05)
    main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.SGD(0.1, weight_decay=decay))
    data = batches(3)
    params, losses, scope = run_steps(main, startup, loss, data)
    ref = {k: v.astype(np.float64) for k, v in params.items()}
    for x, y in data:
        _, g = numpy_grads(ref, x, y)
        for k in ref:
            term = ref[k] if kind == "l2" else np.sign(ref[k])
            ref[k] = ref[k] - 0.1 * (g[k] + 0.05 * term)
    for k, v in ref.items():
        np.testing.assert_allclose(scope.get(k), v, rtol=1e-5, atol=1e-6, err_msg=k)


@pytest.mark.parametrize("clip", ["value", "norm", "global"])
def test_gradient_clipping_matches_numpy(clip):
    clipper = {"value": pg.nn.ClipGradByValue(0.05), "norm": pg.nn.ClipGradByNorm(0.1),
               "global": pg.nn.ClipGradByGlobalNorm(0.2)}[clip]
    main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.SGD(0.5, grad_clip=clipper))
    data = batches(3)
    params, losses, scope = run_steps(main, startup, loss, data)
    ref = {k: v.astype(np.float64) for k, v in params.items()}
    for x, y in data:
        _, g = numpy_grads(ref, x, y)
        if clip == "value":
            g = {k: np.clip(v, -0.05, 0.05) for k, v in g.items()}
        elif clip == "norm":
            g = {k: v * min(1.0, 0.1 / np.linalg.norm(v)) for k, v in g.items()}
        else:
            total = np.sqrt(sum((v ** 2).sum() for v in g.values()))
            g = {k: v * 0.2 / max(total, 0.2) for k, v in g.items()}
        for k in ref:
            ref[k] = ref[k] - 0.5 * g[k]
    for k, v in ref.items():
        np.testing.assert_allclose(scope.get(k), v, rtol=1e-5, atol=1e-6, err_msg=k)


def test_lr_schedule_changes_the_rate_without_rebuilding():
    sched = pg.lr.StepDecay(0.2, step_size=2, gamma=0.5)
    main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.SGD(sched))
    revision = main.revision
    data = batches(5)
    exe, scope = Executor(CPUPlace()), Scope()
    exe.run(startup, scope=scope)
    ref = {k: np.array(scope.get(k), dtype=np.float64) for k in ("fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0")}
    for step, (x, y) in enumerate(data):
        exe.run(main, feed={"x": x, "label": y}, fetch_list=[loss], scope=scope)
        assert float(scope.get("learning_rate_0")) == pytest.approx(0.2 * 0.5 ** (step // 2))
        _, g = numpy_grads(ref, x, y)
        for k in ref:
            ref[k] -= 0.2 * 0.5 ** (step // 2) * g[k]
        sched.step()
    assert main.revision == revision
    for k, v in ref.items():
        np.testing.assert_allclose(scope.get(k), v, rtol=1e-5, atol=1e-6, err_msg=k)


def test_training_is_deterministic_bitwise():
    def trajectory():
        main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.Adam(0.01), dropout=0.3)
        return run_steps(main, startup, loss, batches())[1]
    first, second = trajectory(), trajectory()
    assert first == second


def test_clone_for_test_drops_training_ops():
    main, startup, test_program, loss, logits = build_mlp(lambda: pg.optimizer.Adam(0.01), dropout=0.5)
    roles = {op.attr("op_role") for op in main.global_block().ops}
    assert {1, 2, 256, 257} <= roles
    clone = main.clone(for_test=True)
    for prog in (clone, test_program):
        assert all(op.attr("op_role", 0) & 3 == 0 for op in prog.global_block().ops)
        assert not any(op.type.endswith("_grad") or op.type == "adam" for op in prog.global_block().ops)
        assert all(op.attr("is_test") for op in prog.global_block().ops if op.type == "dropout")


# -- the program append_backward writes --------------------------------------------------


def test_backward_program_reads_like_paddle():
    main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.SGD(0.1))
    ops = main.global_block().ops
    types = [op.type for op in ops]
    assert types[types.index("fill_constant")] == "fill_constant"
    seed = ops[types.index("fill_constant")]
    assert seed.attr("op_role") == 257 and seed.output("Out") == [loss.name + "@GRAD"]
    assert ops[types.index("mean")].attr("op_role") == 256
    mul_grads = [op for op in ops if op.type == "mul_grad"]
    first = mul_grads[-1]  # the first layer: x needs no gradient
    assert first.output("X@GRAD") == [] and first.output("Y@GRAD") == ["fc_0.w_0@GRAD"]
    assert first.attr("op_role_var") == ["fc_0.w_0", "fc_0.w_0@GRAD"]
    sgd = [op for op in ops if op.type == "sgd"]
    assert [op.input("Param")[0] for op in sgd] == sorted(op.input("Param")[0] for op in sgd)
    assert all(op.output("ParamOut") == op.input("Param") for op in sgd)
    assert pg.Program.parse_from_string(main.serialize_to_string()) == main
    # the grad op of a forward op points at the user's line that built the forward op
    relu_grad = next(op for op in ops if op.type == "relu_grad")
    assert "test_training.py" in relu_grad.callsite


def test_shared_variable_gradients_are_summed():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [2, 3])
        x.stop_gradient = False
        y = x * x + x
        loss = pg.mean(y)
        dx, = pg.gradients([loss], [x])
    sums = [op for op in main.global_block().ops if op.type == "sum"]
    assert sums and all("@RENAME@" in n for n in sums[-1].input("X"))
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    got, = Executor().run(main, feed={"x": xv}, fetch_list=[dx], scope=Scope())
    np.testing.assert_allclose(got, (2 * xv + 1) / 6, rtol=1e-6)


def test_stop_gradient_and_no_grad_set_prune_the_backward():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 4])
        h = pg.nn.fc(x, 4)
        frozen = pg.nn.fc(x, 4)
        loss = pg.mean(h + frozen)
        params = [p.name for p, _ in pg.append_backward(loss, no_grad_set={"fc_1.w_0", "fc_1.b_0"})]
    assert params == ["fc_0.w_0", "fc_0.b_0"]
    written = {n for op in main.global_block().ops for n in op.output_arg_names}
    assert "fc_1.w_0@GRAD" not in written and "x@GRAD" not in written


def test_gradients_with_target_gradients():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [3])
        x.stop_gradient = False
        seed = pg.data("seed", [3])
        y = x * x
        dx, = pg.gradients(y, x, target_gradients=seed)
    xv, sv = np.array([1., 2., 3.], np.float32), np.array([1., 0., -2.], np.float32)
    got, = Executor().run(main, feed={"x": xv, "seed": sv}, fetch_list=[dx], scope=Scope())
    np.testing.assert_allclose(got, 2 * xv * sv)


def test_op_without_gradient_rule_is_named(monkeypatch):
    monkeypatch.setattr(registry.get("tanh"), "grad", None)
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 4])
        loss = pg.mean(pg.tanh(pg.nn.fc(x, 4)))
        with pytest.raises(pg.OpError) as e:
            pg.append_backward(loss)
    assert "tanh" in str(e.value) and "no gradient rule" in str(e.value)
    assert "test_training.py" in str(e.value)


def test_integer_labels_get_no_gradient():
    main, _, _, loss, _ = build_mlp(lambda: pg.optimizer.SGD(0.1))
    assert main.global_block().find_var("label@GRAD") is None


# -- checkpoints -------------------------------------------------------------------------


def test_checkpoint_resume_continues_the_same_trajectory(tmp_path):
    data = batches(8)

    def fresh():
        sched = pg.lr.ExponentialDecay(0.01, gamma=0.9)
        main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.Adam(sched), dropout=0.3)
        return main, startup, loss, sched

    main, startup, loss, sched = fresh()
    exe, scope = Executor(CPUPlace()), Scope()
    exe.run(startup, scope=scope)
    full = []
    for i, (x, y) in enumerate(data):
        full.append(exe.run(main, feed={"x": x, "label": y}, fetch_list=[loss], scope=scope)[0])
        sched.step()
        if i == 3:
            save_checkpoint(tmp_path / "ckpt.keel", main, exe, scope, extra={"step": i + 1})

    main2, startup2, loss2, sched2 = fresh()
    exe2, scope2 = Executor(CPUPlace()), Scope()
    extra = load_checkpoint(tmp_path / "ckpt.keel", main2, exe2, scope2)
    assert extra == {"step": 4}
    assert sched2.last_epoch == sched.last_epoch - 4
    resumed = []
    for x, y in data[4:]:
        resumed.append(exe2.run(main2, feed={"x": x, "label": y}, fetch_list=[loss2], scope=scope2)[0])
        sched2.step()
    assert [float(v) for v in resumed] == [float(v) for v in full[4:]]


def test_checkpoint_crash_mid_save_keeps_the_previous_one(tmp_path, monkeypatch):
    main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.SGD(0.1))
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    path = tmp_path / "ckpt.keel"
    save_checkpoint(path, main, exe, scope)
    before = path.read_bytes()
    from keel.executor import checkpoint

    def broken(*args, **kwargs):
        raise OSError("disk full")
    monkeypatch.setattr(checkpoint, "write_tensor", broken)
    with pytest.raises(OSError):
        save_checkpoint(path, main, exe, scope)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ckpt.keel"]


def test_checkpoint_mismatch_lists_every_problem(tmp_path):
    main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.SGD(0.1))
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    save_checkpoint(tmp_path / "a.keel", main, exe, scope)
    other, ostartup, _, _, _ = build_mlp(lambda: pg.optimizer.SGD(0.1), hidden=7)
    with pytest.raises(CheckpointError) as e:
        load_checkpoint(tmp_path / "a.keel", other, exe, Scope())
    assert "fc_0.w_0" in str(e.value) and "fc_1.w_0" in str(e.value) and "[6, 5]" in str(e.value)
    (tmp_path / "junk.keel").write_bytes(b"not a zip")
    with pytest.raises(CheckpointError, match="junk.keel"):
        load_checkpoint(tmp_path / "junk.keel", main, exe, Scope())
    with pytest.raises(CheckpointError, match="does not exist"):
        load_checkpoint(tmp_path / "missing.keel", main, exe, Scope())


def test_backward_through_an_is_test_dropout():
    """A frozen dropout (is_test) on the gradient path: its Mask must exist for dropout_grad."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [2, 3])
        x.stop_gradient = False
        y = pg.nn.dropout(x, dropout_prob=0.25, is_test=True)
        dx, = pg.gradients([pg.reduce_sum(y)], [x])
    got, = Executor().run(main, feed={"x": np.ones((2, 3), np.float32)}, fetch_list=[dx], scope=Scope())
    np.testing.assert_allclose(got, np.full((2, 3), 0.75))  # downgrade_in_infer scales by 1 - p


def test_training_step_peak_memory_tracks_the_live_set():
    """Peak memory of one MLP training step stays within 1.3x of parameters + optimizer
    state + the largest live set of intermediates (activations and gradients, each freed
    after its last backward use)."""
    import tracemalloc
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 3
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 256])
        label = pg.data("label", [-1, 1], "int64")
        h = pg.nn.fc(pg.nn.fc(x, 512, activation="relu"), 512, activation="relu")
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(pg.nn.fc(h, 10), label))
        pg.optimizer.Adam(1e-3).minimize(loss)
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((256, 256)).astype(np.float32), "label": rng.integers(0, 10, (256, 1))}
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)  # compile and warm up
    persistent = sum(np.asarray(scope.get(n)).nbytes for n in scope
                     if main.global_block().find_var(n) is not None and main.global_block().var(n).persistable)

    # the largest live set, from every intermediate's size and the plan's free points
    sizes = {}
    probe = Executor(keep_intermediates=True)
    probe_scope = Scope()
    for n in scope:
        probe_scope.set(n, np.array(scope.get(n)))
    probe.run(main, feed=feed, fetch_list=[loss], scope=probe_scope)
    for n in probe_scope:
        var = main.global_block().find_var(n)
        if var is not None and not var.persistable:
            sizes[n] = np.asarray(probe_scope.get(n)).nbytes
    plan = next(iter(exe._plans[id(main)][2].values()))
    live, live_max = set(feed), 0
    for step in plan.steps:
        live.update(n for n in step.writes if n in sizes)
        live_max = max(live_max, sum(sizes.get(n, 0) for n in live))
        live.difference_update(step.frees)

    tracemalloc.start()
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert persistent + peak <= 1.3 * (persistent + live_max), (persistent, peak, live_max)


@pytest.mark.parametrize("second", [
    lambda opt, loss, main: opt.minimize(loss),
    lambda opt, loss, main: pg.optimizer.Adam(1e-3).minimize(loss),  # another optimizer, same loss
    lambda opt, loss, main: opt.minimize(loss, parameters=[main.all_parameters()[-1]]),
], ids=["same-optimizer", "other-optimizer", "other-parameters"])
def test_minimize_twice_on_one_loss_is_refused_naming_both_lines(second):
    main, startup, _, loss, _ = build_mlp(lambda: pg.optimizer.SGD(0.1))
    opt = pg.optimizer.SGD(0.1)
    before = main.serialize_to_string()
    with pg.program_guard(main, startup), pytest.raises(pg.ProgramError) as err:
        second(opt, loss, main)
    message = str(err.value)
    assert f"loss {loss.name} was already minimized" in message
    assert "opt.minimize(loss)" in message                 # the first call's line, in build_mlp
    assert "test_training.py" in message and "lambda opt, loss, main:" in message  # this call's line
    assert "twice per step" in message
    assert main.serialize_to_string() == before            # nothing was appended


def test_minimize_on_a_second_loss_of_the_same_program_is_allowed():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 6])
        logits = pg.nn.fc(pg.nn.fc(x, 4), 3)
        pg.optimizer.SGD(0.1).minimize(pg.mean(logits))
        pg.optimizer.SGD(0.1).minimize(pg.reduce_sum(logits))
    assert sum(op.type == "sgd" for op in main.global_block().ops) == 8
