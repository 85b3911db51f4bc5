"""Eager mode: Tensors, ops run at once, autograd from the ops' gradient rules, Layers that
own their values, optimizers stepping eagerly; and the same model trained eagerly and as a
static program reaching the same losses."""
import gc
import tracemalloc
import weakref

import numpy as np
import pytest

import keel as paddle
import keel.program as pg
from keel.executor import Executor, Scope
from keel.executor.eager import EagerError


def test_to_tensor_follows_paddles_dtypes_and_flags():
    assert paddle.to_tensor([1.5, 2]).dtype == pg.dtypes.to_code("float32")
    assert paddle.to_tensor([1, 2]).dtype == pg.dtypes.to_code("int64")
    assert paddle.to_tensor(np.ones(2)).dtype == pg.dtypes.to_code("float64")   # arrays keep theirs
    assert paddle.to_tensor([1, 2], dtype="float16").numpy().dtype == np.float16
    t = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
    assert t.stop_gradient and t.is_leaf and t.grad is None
    assert t.shape == [2, 2] and t.ndim == 2 and t.size == 4 and len(t) == 2
    assert paddle.to_tensor(3.5).item() == 3.5 and float(paddle.to_tensor([2.0])) == 2.0
    data = np.arange(3.0)
    copied = paddle.to_tensor(data)
    data[0] = 9
    assert copied.numpy()[0] == 0          # to_tensor copies, as PaddlePaddle's


def test_operators_methods_and_indexing_run_the_programs_ops():
    x = paddle.to_tensor(np.arange(6, dtype="float32").reshape(2, 3))
    np.testing.assert_array_equal((x + 1).numpy(), np.arange(6).reshape(2, 3) + 1)
    np.testing.assert_array_equal((2 * x - x / 2).numpy(), 1.5 * x.numpy())
    np.testing.assert_array_equal((x @ x.T).numpy(), x.numpy() @ x.numpy().T)
    np.testing.assert_array_equal((x > 2).numpy(), x.numpy() > 2)
    np.testing.assert_array_equal((-x).numpy(), -x.numpy())
    np.testing.assert_array_equal(x[1].numpy(), [3, 4, 5])
    np.testing.assert_array_equal(x[:, ::2].numpy(), [[0, 2], [3, 5]])
    np.testing.assert_array_equal(x[..., None].shape, [2, 3, 1])
    assert x.sum().item() == 15 and x.mean(axis=1).numpy().tolist() == [1, 4]
    assert x.reshape([3, 2]).shape == [3, 2] and x.transpose([1, 0]).shape == [3, 2]
    assert x.argmax().item() == 5 and x.unsqueeze(0).shape == [1, 2, 3]
    assert x.astype("int32").numpy().dtype == np.int32
    assert [row.numpy().tolist() for row in x] == [[0, 1, 2], [3, 4, 5]]


def test_creation_functions_run_eagerly_under_seed():
    assert paddle.zeros([2, 3]).numpy().tolist() == [[0, 0, 0]] * 2
    assert paddle.ones([2], "int64").numpy().dtype == np.int64
    assert paddle.full([2], 7.0).numpy().tolist() == [7, 7]
    np.testing.assert_array_equal(paddle.arange(0, 5, 2).numpy(), [0, 2, 4])
    np.testing.assert_allclose(paddle.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5), rtol=1e-6)
    paddle.seed(7)
    a = [paddle.rand([3]).numpy(), paddle.randn([3]).numpy(), paddle.randint(0, 10, [4]).numpy(),
         paddle.uniform([2], min=2.0, max=3.0).numpy(), paddle.normal(1.0, 0.5, [2]).numpy()]
    paddle.seed(7)
    b = [paddle.rand([3]).numpy(), paddle.randn([3]).numpy(), paddle.randint(0, 10, [4]).numpy(),
         paddle.uniform([2], min=2.0, max=3.0).numpy(), paddle.normal(1.0, 0.5, [2]).numpy()]
    for u, v in zip(a, b):
        np.testing.assert_array_equal(u, v)
    assert ((a[0] >= 0) & (a[0] < 1)).all() and ((a[3] >= 2) & (a[3] < 3)).all()
    assert a[2].dtype == np.int64 and ((a[2] >= 0) & (a[2] < 10)).all()
    assert not np.array_equal(paddle.rand([3]).numpy(), a[0])


def test_backward_accumulates_into_leaves_and_frees_the_tape():
    x = paddle.to_tensor([1.0, 2.0, 3.0], stop_gradient=False)
    y = (x * x).sum()
    assert not y.stop_gradient and not y.is_leaf
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 4, 6])
    (x * 3).sum().backward()                                   # gradients accumulate
    np.testing.assert_array_equal(x.grad.numpy(), [5, 7, 9])
    with pytest.raises(RuntimeError, match="a second time.*retain_graph=True"):
        y.backward()
    x.clear_gradient()
    assert x.grad.numpy().tolist() == [0, 0, 0]


def _cleared_then_accumulated(lib):
    """The gradients of a leaf through clear_gradient: zeros, which the next backward
    replaces (a value set into .grad in between too: PaddlePaddle's fake-empty gradient);
    accumulated otherwise."""
    x = lib.to_tensor([1.0, -2.0], stop_gradient=False)
    (x * 3).sum().backward()
    seen = [x.grad.numpy().tolist()]
    x.clear_gradient()
    seen.append(x.grad.numpy().tolist())
    (x * 0.5).sum().backward()
    (x * 2).sum().backward()
    seen.append(x.grad.numpy().tolist())
    x.clear_gradient()
    x.grad.set_value(np.array([5.0, 5.0], "float32"))
    seen.append(x.grad.numpy().tolist())
    (x * 1).sum().backward()
    seen.append(x.grad.numpy().tolist())
    x.clear_gradient(set_to_zero=False)
    (x * 4).sum().backward()
    seen.append(x.grad.numpy().tolist())
    return seen


def test_the_next_backward_replaces_a_cleared_gradient_and_otherwise_accumulates():
    assert _cleared_then_accumulated(paddle) == [[3.0, 3.0], [0.0, 0.0], [2.5, 2.5], [5.0, 5.0], [1.0, 1.0],
                                                 [4.0, 4.0]]


@pytest.mark.paddle
def test_cleared_gradients_behave_as_paddlepaddles():
    ref = pytest.importorskip("paddle")
    assert _cleared_then_accumulated(paddle) == _cleared_then_accumulated(ref)


def test_backward_frees_the_activations_without_waiting_for_the_cyclic_gc():
    """Nothing backward makes may hold the pass's tensors in a reference cycle: such
    memory is only returned when the cyclic GC happens to run (a CNN step's RSS grew by
    tens of MB a step until it did)."""
    gc.disable()
    try:
        x = paddle.to_tensor(np.ones((8, 8), "float32"), stop_gradient=False)
        hidden = paddle.tanh(paddle.matmul(x, x))
        loss = paddle.cast(hidden * 2.0, "float64").sum()   # cast's rule reads its op's block
        watched = weakref.ref(hidden._value)
        loss.backward()
        del hidden, loss
        assert watched() is None
        assert x.grad is not None
    finally:
        gc.enable()


def test_backward_frees_each_activation_once_it_has_passed_the_ops_that_read_it():
    x = paddle.to_tensor(np.ones((8, 8), "float32"), stop_gradient=False)
    first = paddle.tanh(x)
    second = paddle.tanh(first)
    watched = weakref.ref(second._value)
    alive_when_first_gets_its_gradient = []
    first.register_hook(lambda g: alive_when_first_gets_its_gradient.append(watched() is not None))
    loss = paddle.tanh(second).sum()
    del second
    loss.backward()
    assert alive_when_first_gets_its_gradient == [False]


def _tanh_chain(n: int, size: int):
    """x -> tanh -> ... -> tanh (n ops; each keeps its output for its gradient) -> sum, with
    the chain's tensors held by the tape only. Returns the loss, weak references to the
    activations' arrays, and, filled as backward runs, for each activation (last first)
    which activations were alive and how much memory was traced when its gradient was
    complete."""
    x = paddle.to_tensor(np.full(size, 0.1, "float32"), stop_gradient=False)
    refs, seen = [], []
    h = x
    for k in range(n):
        h = paddle.tanh(h)
        refs.append(weakref.ref(h._value))
        h.register_hook(lambda g, k=k: seen.append(
            (k, [r() is not None for r in refs], tracemalloc.get_traced_memory()[0])))
    return h.sum(), refs, seen


@pytest.mark.parametrize("retain_graph", [False, True])
def test_the_tape_releases_each_saved_activation_as_backward_passes_it_unless_retain_graph(retain_graph):
    n, size = 6, 1 << 16                       # 256 KiB per activation
    gc.disable()                               # freed by reference counting, not by a cyclic GC run
    tracemalloc.start()
    try:
        loss, refs, seen = _tanh_chain(n, size)
        loss.backward(retain_graph=retain_graph)
        assert [k for k, _, _ in seen] == list(range(n - 1, -1, -1))
        for k, alive, _ in seen:
            # when h_k's gradient is complete, the ops after it have run their gradients:
            # their saved outputs h_{k+1}.. are gone; h_0..h_k wait for their own ops
            assert alive == ([True] * n if retain_graph else [j <= k for j in range(n)])
        traced = [m for _, _, m in seen]
        if not retain_graph:                   # each step gives back about one activation
            drops = [a - b for a, b in zip(traced, traced[1:])]
            assert all(d > 0.9 * 4 * size for d in drops), drops
            assert all(r() is None for r in refs)
        else:                                  # the activations stay; spent gradients still go
            assert max(traced) - min(traced) < 4 * size and all(r() is not None for r in refs)
            loss.backward()                    # the kept tape serves a second pass
            del loss
            assert all(r() is None for r in refs)
    finally:
        tracemalloc.stop()
        gc.enable()


def test_retain_graph_allows_a_second_backward():
    x = paddle.to_tensor([1.0, -2.0], stop_gradient=False)
    y = paddle.nn.functional.relu(x).sum() if hasattr(paddle.nn, "functional") else pg.relu(x).sum()
    y.backward(retain_graph=True)
    y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2, 0])


def test_a_variable_read_twice_gets_the_sum_of_its_gradients():
    x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]], stop_gradient=False)
    h = x * 2
    y = (h * h + h.exp()).sum()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (2 * 2 * x.numpy() + np.exp(2 * x.numpy())), rtol=1e-6)


def test_no_grad_stop_gradient_and_detach_record_nothing():
    w = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
    with paddle.no_grad():
        y = w * 2
    assert y.stop_gradient and y.is_leaf

    @paddle.no_grad()
    def doubled(t):
        return t * 2
    assert doubled(w).stop_gradient
    assert paddle.is_grad_enabled()
    assert (w.detach() * 2).stop_gradient
    frozen = paddle.to_tensor([3.0])
    z = (w * frozen).sum()
    z.backward()
    assert frozen.grad is None and w.grad.numpy().tolist() == [3, 3]
    with pytest.raises(RuntimeError, match="stop_gradient=True"):
        (frozen * 2).sum().backward()


def test_keel_grad_returns_gradients_without_touching_dot_grad():
    x = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
    y = paddle.to_tensor([3.0, 4.0], stop_gradient=False)
    z = (x * y).sum()
    gx, gy = paddle.grad(z, [x, y])
    np.testing.assert_array_equal(gx.numpy(), [3, 4])
    np.testing.assert_array_equal(gy.numpy(), [1, 2])
    assert x.grad is None and y.grad is None
    h = x * 2                                             # a non-leaf input
    g, = paddle.grad((h * h).sum(), h)
    np.testing.assert_array_equal(g.numpy(), [4, 8])
    unused = paddle.to_tensor([1.0], stop_gradient=False)
    with pytest.raises(RuntimeError, match="not reached"):
        paddle.grad((x * 2).sum(), [unused])
    assert paddle.grad((x * 2).sum(), [unused], allow_unused=True) == [None]


def test_hooks_see_and_replace_gradients():
    x = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
    h = x * 3
    seen = []
    h.register_hook(lambda g: seen.append(g.numpy().copy()))
    handle = x.register_hook(lambda g: g * 10)
    (h * h).sum().backward()
    np.testing.assert_array_equal(seen[0], [6, 12])
    np.testing.assert_array_equal(x.grad.numpy(), [180, 360])
    assert handle.remove()
    x.clear_gradient(set_to_zero=False)
    (x * 1).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [1, 1])


def test_changing_a_saved_input_in_place_is_refused_at_backward():
    x = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
    y = x * 1
    z = (y * y).sum()
    y.set_value(np.array([5.0, 5.0], "float32"))
    with pytest.raises(EagerError, match="changed in place"):
        z.backward()


def test_errors_name_the_op_and_the_users_line():
    a = paddle.to_tensor(np.ones((2, 3), "float32"))
    b = paddle.to_tensor(np.ones((4, 5), "float32"))
    with pytest.raises(EagerError) as e:
        a @ b
    assert "matmul_v2" in str(e.value) and "test_eager.py" in str(e.value)
    assert "X float32[2, 3], Y float32[4, 5]" in str(e.value)
    main = pg.Program()
    with pg.program_guard(main):
        v = pg.data("v", [-1, 3])
    with pytest.raises(EagerError, match="static Variable v: .* eager mode"):
        a + v


def test_a_layer_owns_its_values_and_runs_eagerly():
    paddle.seed(1)
    net = pg.nn.Sequential(pg.nn.Linear(4, 8), pg.nn.ReLU(), pg.nn.Linear(8, 2))
    state = net.state_dict()                      # a freshly built layer has values
    assert sorted(state) == ["0.bias", "0.weight", "2.bias", "2.weight"]
    assert state["0.weight"].shape == (4, 8) and not state["0.bias"].any()
    x = np.random.default_rng(0).random((3, 4)).astype("float32")
    out = net(paddle.to_tensor(x))
    w1, b1, w2, b2 = (state[k] for k in ("0.weight", "0.bias", "2.weight", "2.bias"))
    np.testing.assert_allclose(out.numpy(), np.maximum(x @ w1 + b1, 0) @ w2 + b2, rtol=1e-6)
    params = net.parameters()
    assert all(isinstance(p, paddle.Tensor) and not p.stop_gradient for p in params)
    new = {k: v + 1 for k, v in state.items()}
    net.set_state_dict(new)
    np.testing.assert_array_equal(net[0].weight.numpy(), new["0.weight"])
    with pytest.raises(EagerError, match="changed in place"):
        out.sum().backward()                       # computed from the values set_state_dict replaced
    net(paddle.to_tensor(x)).sum().backward()
    assert net[0].weight.grad.shape == [4, 8]


def test_an_optimizer_steps_eagerly_through_its_update_ops():
    w = pg.nn.Linear(2, 1, bias_attr=False)
    w.weight.set_value(np.array([[1.0], [2.0]], "float32"))
    opt = paddle.optimizer.SGD(learning_rate=0.5, parameters=w.parameters())
    x = paddle.to_tensor([[1.0, 1.0]])
    loss = w(x).sum()
    loss.backward()
    opt.step()
    np.testing.assert_array_equal(w.weight.numpy(), [[0.5], [1.5]])
    opt.clear_grad()
    assert w.weight.grad.numpy().tolist() == [[0], [0]]
    with pytest.raises(RuntimeError, match="minimize"):
        with pg.program_guard(pg.Program()):
            opt.step()


class _MLP(pg.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1 = pg.nn.Linear(6, 16)
        self.fc2 = pg.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(pg.relu(self.fc1(x)))


class _CNN(pg.nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = pg.nn.Conv2D(1, 4, 3, padding=1)
        self.bn = pg.nn.BatchNorm2D(4)
        self.fc = pg.nn.Linear(4 * 4 * 4, 3)

    def forward(self, x):
        h = pg.relu(self.bn(self.conv(x)))
        return self.fc(pg.reshape(h, [-1, 4 * 4 * 4]))


class _LSTMClassifier(pg.nn.Layer):
    def __init__(self):
        super().__init__()
        self.lstm = pg.nn.LSTM(4, 8)
        self.fc = pg.nn.Linear(8, 3)

    def forward(self, x):
        out, _ = self.lstm(x)
        return self.fc(pg.reduce_mean(out, dim=1))


class _Encoder(pg.nn.Layer):
    def __init__(self):
        super().__init__()
        self.enc = pg.nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0)
        self.fc = pg.nn.Linear(8, 3)

    def forward(self, x):
        return self.fc(pg.reduce_mean(self.enc(x), dim=1))


def _batches(shape, n=6):
    rng = np.random.default_rng(3)
    return [(rng.standard_normal(shape).astype("float32"), rng.integers(0, 3, (shape[0], 1)).astype("int64"))
            for _ in range(n)]


def _eager_losses(net, make_opt, batches):
    opt = make_opt(net.parameters())
    losses = []
    for x, y in batches:
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(net(paddle.to_tensor(x)), paddle.to_tensor(y)))
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(loss.item())
    return losses


def _static_losses(net, make_opt, batches, x_shape, state):
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [-1, *x_shape[1:]])
        y = pg.data("y", [-1, 1], "int64")
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(net(x), y))
        make_opt(net.parameters()).minimize(loss)
    scope, exe = Scope(), Executor()
    exe.run(startup, scope=scope)                         # accumulators; the parameters, then:
    for key, param in net.named_parameters():
        scope.set(param.name, state[key].copy())          # the eager run's initial values
    return [float(exe.run(main, feed={"x": xb, "y": yb}, fetch_list=[loss], scope=scope)[0])
            for xb, yb in batches]


@pytest.mark.parametrize("make_net, x_shape, make_opt", [
    (_MLP, (8, 6), lambda ps: paddle.optimizer.Adam(learning_rate=0.01, parameters=ps)),
    (_MLP, (8, 6), lambda ps: paddle.optimizer.Momentum(learning_rate=0.05, momentum=0.9, parameters=ps,
                                                        weight_decay=0.01)),
    (_CNN, (5, 1, 4, 4), lambda ps: paddle.optimizer.SGD(learning_rate=0.1, parameters=ps)),
    (_LSTMClassifier, (4, 5, 4), lambda ps: paddle.optimizer.Adam(learning_rate=0.02, parameters=ps)),
    (_Encoder, (4, 5, 8), lambda ps: paddle.optimizer.AdamW(learning_rate=0.01, parameters=ps)),
], ids=["mlp-adam", "mlp-momentum-l2", "cnn-bn-sgd", "lstm-adam", "transformer-encoder-adamw"])
def test_eager_and_static_training_reach_the_same_losses(make_net, x_shape, make_opt):
    paddle.seed(5)
    net = make_net()
    state = net.state_dict()
    batches = _batches(x_shape, 2) * 4
    eager = _eager_losses(net, make_opt, batches)
    twin = make_net()
    static = _static_losses(twin, make_opt, batches, x_shape, state)
    np.testing.assert_allclose(eager, static, rtol=1e-6, atol=1e-6)
    assert eager[6] < eager[0] and eager[7] < eager[1]          # it learns


def test_the_seed_workflow_eager_training_jit_save_load_and_serving(tmp_path):
    """PaddlePaddle's documented workflow, imports changed: a Layer, the eager loop,
    jit.save with an InputSpec, jit.load, and Config + create_predictor on the files."""
    from keel.static import InputSpec
    paddle.seed(2)
    net = _MLP()
    opt = paddle.optimizer.Adam(learning_rate=0.01, parameters=net.parameters())
    loss_fn = paddle.nn.CrossEntropyLoss()
    for x, y in _batches((8, 6), 5):
        loss = loss_fn(net(paddle.to_tensor(x)), paddle.to_tensor(y))
        loss.backward()
        opt.step()
        opt.clear_grad()
    path = str(tmp_path / "mlp")
    paddle.jit.save(net, path, input_spec=[InputSpec([None, 6], "float32", "x")])
    x = np.random.default_rng(9).standard_normal((4, 6)).astype("float32")
    net.eval()
    expected = net(paddle.to_tensor(x)).numpy()
    loaded = paddle.jit.load(path)
    np.testing.assert_allclose(np.asarray(loaded(x)), expected, rtol=1e-5, atol=1e-6)
    config = paddle.inference.Config(path + ".pdmodel", path + ".pdiparams")
    predictor = paddle.inference.create_predictor(config)
    handle = predictor.get_input_handle(predictor.get_input_names()[0])
    handle.copy_from_cpu(x)
    predictor.run()
    out = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-6)


def test_after_model_fit_the_network_holds_the_trained_values(tmp_path):
    """The issue's report: jit.save(net) after Model.fit found no values (they lived in the
    Model's scope). Now the network's own parameters hold what fit trained."""
    from keel.static import InputSpec
    paddle.seed(4)
    net = _MLP()
    model = paddle.Model(net, inputs=[InputSpec([None, 6], "float32", "x")],
                         labels=[InputSpec([None, 1], "int64", "y")])
    model.prepare(paddle.optimizer.SGD(learning_rate=0.1, parameters=model.parameters()),
                  paddle.nn.CrossEntropyLoss())
    before = net.state_dict()
    batches = _batches((8, 6), 4)
    data = pg.io.TensorDataset([np.concatenate([x for x, _ in batches]), np.concatenate([y for _, y in batches])])
    model.fit(data, batch_size=8, epochs=1, verbose=0, shuffle=False)
    after = net.state_dict()
    trained = model.state_dict()
    assert not np.array_equal(before["fc1.weight"], after["fc1.weight"])
    for key in after:
        np.testing.assert_array_equal(after[key], trained[key])
    path = str(tmp_path / "fit")
    paddle.jit.save(net, path, input_spec=[InputSpec([None, 6], "float32", "x")])
    x = _batches((3, 6), 1)[0][0]
    expected = model.predict(pg.io.TensorDataset([x]), batch_size=3, stack_outputs=True, verbose=0)[0]
    np.testing.assert_allclose(np.asarray(paddle.jit.load(path)(x)), expected, rtol=1e-6)
    np.testing.assert_allclose(net.eval()(paddle.to_tensor(x)).numpy(), expected, rtol=1e-6)


def test_a_loaded_model_fine_tunes_eagerly(tmp_path):
    """jit.load's layer called on Tensors runs the saved ops eagerly on parameters holding
    the loaded values, so backward and an optimizer fine-tune it (PaddlePaddle's
    jit.load + fine-tune); the outputs before any step equal the saved model's."""
    from keel.static import InputSpec
    paddle.seed(6)
    net = _MLP()
    path = str(tmp_path / "base")
    paddle.jit.save(net, path, input_spec=[InputSpec([None, 6], "float32", "x")])
    loaded = paddle.jit.load(path)
    params = loaded.parameters()
    assert sorted(p.name for p in params) == sorted(p.name for p in net.parameters())
    assert all(isinstance(p, paddle.Tensor) and not p.stop_gradient for p in params)
    x, y = _batches((8, 6), 1)[0]
    np.testing.assert_allclose(loaded(paddle.to_tensor(x)).numpy(), np.asarray(loaded(x)), rtol=1e-6)
    opt = paddle.optimizer.SGD(learning_rate=0.2, parameters=params)
    losses = []
    for _ in range(5):
        loss = paddle.nn.CrossEntropyLoss()(loaded(paddle.to_tensor(x)), paddle.to_tensor(y))
        loss.backward()
        opt.step()
        opt.clear_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    np.testing.assert_allclose(np.asarray(loaded(x)), loaded(paddle.to_tensor(x)).numpy(), rtol=1e-6)


def test_eager_steps_follow_the_lr_scheduler_and_clip_gradients():
    """scheduler.step() changes the rate the next optimizer.step() uses; ClipGradByGlobalNorm
    scales the gradients first (the optimizer's own update ops, run eagerly)."""
    layer = pg.nn.Linear(2, 1, bias_attr=False)
    layer.weight.set_value(np.zeros((2, 1), "float32"))
    sched = paddle.lr.StepDecay(learning_rate=1.0, step_size=1, gamma=0.5)
    opt = paddle.optimizer.SGD(learning_rate=sched, parameters=layer.parameters(),
                               grad_clip=paddle.nn.ClipGradByGlobalNorm(clip_norm=1.0))
    x = paddle.to_tensor([[3.0, 4.0]])                   # gradient [3, 4]: global norm 5, clipped to [0.6, 0.8]
    moved = []
    for _ in range(3):
        before = layer.weight.numpy().copy()
        layer(x).sum().backward()
        opt.step()
        opt.clear_grad()
        sched.step()
        moved.append((before - layer.weight.numpy()).ravel())
    np.testing.assert_allclose(moved, [[0.6, 0.8], [0.3, 0.4], [0.15, 0.2]], rtol=1e-6)


def test_auto_cast_runs_the_white_list_in_float16_and_gradients_reach_float32_parameters():
    f16, f32 = pg.dtypes.to_code("float16"), pg.dtypes.to_code("float32")
    layer = pg.nn.Linear(4, 3)
    x = paddle.to_tensor(np.random.default_rng(0).random((2, 4)).astype("float32"))
    with paddle.amp.auto_cast(dtype="float16"):
        product = x @ layer.weight                      # matmul_v2: white list
        assert product.dtype == f16
        mixed = product + layer.bias                    # a gray op mixing float16/32: float32
        assert mixed.dtype == f32
        probs = pg.softmax(product)                     # black list: float32
        assert probs.dtype == f32
    np.testing.assert_allclose(product.numpy(), (x.numpy().astype("float16") @
                                                 layer.weight.numpy().astype("float16")), rtol=1e-3)
    (probs.sum() + mixed.sum()).backward()
    assert layer.weight.grad.dtype == f32 and layer.bias.grad.dtype == f32
    with paddle.amp.auto_cast(enable=False):
        assert (x @ layer.weight).dtype == f32


def test_grad_scaler_skips_a_step_with_infinite_gradients_and_adapts_the_scale():
    layer = pg.nn.Linear(2, 1, bias_attr=False)
    layer.weight.set_value(np.ones((2, 1), "float32"))
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=layer.parameters())
    scaler = paddle.amp.GradScaler(init_loss_scaling=8.0, incr_every_n_steps=2, decr_every_n_nan_or_inf=1)
    x = paddle.to_tensor([[1.0, 2.0]])
    scaler.scale(layer(x).sum()).backward()            # gradients [1, 2] times 8
    np.testing.assert_array_equal(layer.weight.grad.numpy().ravel(), [8, 16])
    scaler.step(opt)                                   # unscaled to [1, 2], then the step
    scaler.update()
    np.testing.assert_allclose(layer.weight.numpy().ravel(), [0.9, 0.8], rtol=1e-6)
    opt.clear_grad()
    scaler.scale(layer(paddle.to_tensor([[np.inf, 1.0]])).sum()).backward()
    before = layer.weight.numpy().copy()
    scaler.minimize(opt, None)                         # Inf: no step, the scale halves
    np.testing.assert_array_equal(layer.weight.numpy(), before)
    assert scaler.get_loss_scaling() == 4.0
    opt.clear_grad()
    for _ in range(2):                                 # two finite steps: the scale doubles
        scaler.scale(layer(x).sum()).backward()
        scaler.minimize(opt, None)
        opt.clear_grad()
    assert scaler.get_loss_scaling() == 8.0
    assert scaler.state_dict()["scale"].tolist() == [8.0]


def test_a_tensor_in_a_static_program_is_refused_by_name():
    t = paddle.to_tensor(np.ones((2, 3), "float32"))
    with pg.program_guard(pg.Program()):
        x = pg.data("x", [-1, 3])
        with pytest.raises(pg.ProgramError, match=r"input 'Y' is the eager Tensor .* static program") as e:
            x + t
    assert "test_eager.py" in str(e.value)


def test_python_control_flow_on_a_program_variable_is_refused_with_what_to_write():
    with pg.program_guard(pg.Program()):
        x = pg.data("x", [-1, 3])
        with pytest.raises(pg.ProgramError, match=r"truth value of variable .* static.nn.cond") as e:
            if pg.mean(x) > 0:
                pass
    assert "test_eager.py" in str(e.value)


def test_a_new_layer_does_not_take_a_stale_global_scope_value_of_the_same_name():
    """Unique names restart (unique_name.guard): a new layer's linear_0.w_0 is not the global
    scope's linear_0.w_0 of an earlier program; a layer a static program trained is read there."""
    with pg.unique_name.guard():
        old = pg.nn.Linear(3, 2)
        main, startup = pg.Program(), pg.Program()
        with pg.program_guard(main, startup):
            old(pg.data("x", [-1, 3]))
        Executor().run(startup)                          # the global scope holds linear_0.w_0
        trained = old.state_dict()["weight"]
        np.testing.assert_array_equal(trained, paddle.global_scope().get(old.weight.name))
    with pg.unique_name.guard():
        new = pg.nn.Linear(3, 2)
    assert new.weight.name == old.weight.name
    fresh = new.state_dict()["weight"]
    np.testing.assert_array_equal(fresh, new.weight.numpy())     # its own initial value
    assert not np.array_equal(fresh, trained)


class _ToStaticNet(pg.nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc = pg.nn.Linear(6, 3)

    @paddle.jit.to_static(input_spec=[paddle.static.InputSpec([None, 6], "float32", "x")])
    def forward(self, x):
        return pg.softmax(self.fc(x)), {"hidden": self.fc(x) * 2, "note": "kept"}


def test_to_static_runs_the_traced_program_with_gradients_and_retraces_per_shape(tmp_path):
    paddle.seed(8)
    net = _ToStaticNet()
    x = paddle.to_tensor(np.random.default_rng(1).random((4, 6)).astype("float32"))
    probs, extra = net(x)
    assert extra["note"] == "kept" and extra["hidden"].shape == [4, 3]
    expected = np.exp(x.numpy() @ net.fc.weight.numpy() + net.fc.bias.numpy())
    np.testing.assert_allclose(probs.numpy(), expected / expected.sum(1, keepdims=True), rtol=1e-5)
    (probs.sum() + extra["hidden"].sum()).backward()
    traced_grad = net.fc.weight.grad.numpy().copy()
    net.fc.weight.clear_gradient()
    plain = _ToStaticNet.forward.__wrapped__                      # the Python forward, run eagerly
    eager_probs, eager_extra = plain(net, x)
    (eager_probs.sum() + eager_extra["hidden"].sum()).backward()
    np.testing.assert_array_equal(traced_grad, net.fc.weight.grad.numpy())
    net(paddle.to_tensor(np.ones((2, 6), "float32")))
    assert len(net.forward.concrete_programs) == 2                # retraced for the new shape
    paddle.jit.save(net, str(tmp_path / "m"))                     # its input_spec
    loaded = paddle.jit.load(str(tmp_path / "m"))
    np.testing.assert_allclose(loaded(x.numpy())[0], probs.numpy(), rtol=1e-6)


def test_to_static_converts_python_control_flow_on_a_tensor_and_stops_where_it_cannot():
    def gate(x):
        if pg.mean(x) > 0:
            return x * 2
        return x

    def first_big(x):
        i = paddle.zeros([1], dtype="int64")
        while i < 3:
            if x[0] > 1:
                return i
            i = i + 1
        return i
    converted = paddle.jit.to_static(gate)      # (tests/test_dy2static.py has the full set)
    assert converted(paddle.to_tensor([1.0, 2.0])).numpy().tolist() == [2, 4]
    assert converted(paddle.to_tensor([-1.0, -2.0])).numpy().tolist() == [-1, -2]
    with pytest.raises(pg.ProgramError, match=r"return after the loop") as e:
        paddle.jit.to_static(first_big)(paddle.to_tensor([1.0, 2.0]))
    assert "test_eager.py" in str(e.value) and "while i < 3" in str(e.value)
    assert gate(paddle.to_tensor([1.0, 2.0])).numpy().tolist() == [2, 4]      # eagerly, it runs
