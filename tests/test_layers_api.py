"""program.nn.Layer: a model written once as a class, trained in one program, exported by
jit.save and served by the Predictor with the same weights; state_dict round trips."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import Config, Executor, Scope, create_predictor


class MLP(pg.nn.Layer):
    def __init__(self, dropout=0.2):
        super().__init__()
        self.fc1 = pg.nn.Linear(8, 16)
        self.drop = pg.nn.Dropout(dropout)
        self.fc2 = pg.nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.drop(pg.relu(self.fc1(x))))


class CNN(pg.nn.Layer):
    def __init__(self):
        super().__init__()
        self.features = pg.nn.Sequential(
            pg.nn.Conv2D(1, 4, 3, padding=1), pg.nn.BatchNorm2D(4), pg.nn.ReLU(), pg.nn.MaxPool2D(2, 2),
            pg.nn.Conv2D(4, 4, 3, padding=1, groups=4), pg.nn.ReLU())
        self.flatten = pg.nn.Flatten()
        self.head = pg.nn.LayerList([pg.nn.Linear(4 * 4 * 4, 8), pg.nn.Linear(8, 3)])
        self.norm = pg.nn.LayerNorm(8)

    def forward(self, image):
        h = self.flatten(self.features(image))
        return self.head[1](pg.tanh(self.norm(self.head[0](h))))


def data(seed=0, n=16):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 8)).astype(np.float32), rng.integers(0, 3, (n, 1))


def train(model, steps=30, scope=None, make_input=lambda: pg.data("x", [-1, 8]), batch=None):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = main.random_seed = 3
    with pg.program_guard(main, startup):
        x = make_input()
        label = pg.data("label", [-1, 1], "int64")
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(model(x), label))
        pg.optimizer.Adam(0.02, parameters=model.parameters()).minimize(loss)
    scope = scope if scope is not None else Scope()
    exe = Executor()
    exe.run(startup, scope=scope)
    xs, ys = batch if batch is not None else data()
    losses = [float(exe.run(main, feed={x.name: xs, "label": ys}, fetch_list=[loss], scope=scope)[0])
              for _ in range(steps)]
    return losses, scope, exe


def eval_outputs(model, scope, xs, make_input=lambda: pg.data("x", [-1, 8])):
    """The model built again, in eval mode, in a program of its own: same weights by name."""
    main, startup = pg.Program(), pg.Program()
    model.eval()
    with pg.program_guard(main, startup):
        out = model(make_input())
    model.train()
    return Executor().run(main, feed={"x" if xs.ndim == 2 else "image": xs}, fetch_list=[out], scope=scope)[0], main


def test_a_layer_trains_with_paddles_names_and_structured_parameter_names():
    with pg.unique_name.guard():
        model = MLP()
    assert [(k, p.name, p.shape) for k, p in model.named_parameters()] == [
        ("fc1.weight", "linear_0.w_0", [8, 16]), ("fc1.bias", "linear_0.b_0", [16]),
        ("fc2.weight", "linear_1.w_0", [16, 3]), ("fc2.bias", "linear_1.b_0", [3])]
    assert [name for name, _ in model.named_sublayers()] == ["fc1", "drop", "fc2"]
    losses, scope, _ = train(model)
    assert losses[-1] < 0.5 * losses[0]


def test_the_same_layer_in_an_inference_program_reads_the_trained_weights():
    with pg.unique_name.guard():
        model = MLP(dropout=0.5)
    _, scope, _ = train(model)
    xs, _ = data(1, 5)
    got, program = eval_outputs(model, scope, xs)
    assert all(op.attr("is_test") for op in program.global_block().ops if op.type == "dropout")
    w1, b1, w2, b2 = (scope.get(n) for n in ("linear_0.w_0", "linear_0.b_0", "linear_1.w_0", "linear_1.b_0"))
    want = np.maximum(xs @ w1 + b1, 0) @ w2 + b2           # eval-mode dropout (upscale_in_train) is identity
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_jit_save_is_served_by_the_predictor_with_the_eval_outputs(tmp_path):
    with pg.unique_name.guard():
        model = CNN()
    rng = np.random.default_rng(2)
    images = rng.standard_normal((16, 1, 8, 8)).astype(np.float32)
    labels = rng.integers(0, 3, (16, 1))
    losses, scope, _ = train(model, 20, make_input=lambda: pg.data("image", [-1, 1, 8, 8]), batch=(images, labels))
    assert losses[-1] < losses[0]
    assert all(layer.training for layer in model.sublayers(include_self=True))
    want, _ = eval_outputs(model, scope, images[:4], make_input=lambda: pg.data("image", [-1, 1, 8, 8]))
    infer = pg.jit.save(model, str(tmp_path / "cnn"), input_spec=[pg.static.InputSpec([None, 1, 8, 8])],
                        scope=scope)
    assert all(layer.training for layer in model.sublayers(include_self=True))   # modes restored
    types = [op.type for op in infer.global_block().ops]
    assert types[0] == "feed" and types[-1] == "fetch" and "depthwise_conv2d" in types
    assert all(op.attr("is_test") for op in infer.global_block().ops if op.type == "batch_norm")
    pred = create_predictor(Config(str(tmp_path / "cnn")))
    assert pred.get_input_names() == ["image"]                # the forward argument's name
    got, = pred.run([images[:4]])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # the running statistics were trained: eval differs from the initial-statistics output
    stats = scope.get(model.features[1]._parameters["_mean"].name)
    assert np.abs(stats).max() > 0


def test_state_dict_round_trips_into_another_scope():
    with pg.unique_name.guard():
        model = MLP()
    _, scope, _ = train(model, 5)
    state = model.state_dict(scope=scope)
    assert list(state) == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"]
    xs, _ = data(4, 3)
    want, _ = eval_outputs(model, scope, xs)
    other = Scope()
    model.set_state_dict(state, scope=other)
    got, _ = eval_outputs(model, other, xs)
    np.testing.assert_array_equal(got, want)
    state["fc1.weight"][:] = 0                               # a copy: the scope is unchanged
    assert np.abs(scope.get("linear_0.w_0")).max() > 0


def test_set_state_dict_reports_every_problem_and_writes_nothing():
    with pg.unique_name.guard():
        model = MLP()
    bad = {"fc1.weight": np.zeros((8, 15), np.float32), "fc1.bias": np.zeros(16, np.float64),
           "fc2.weight": np.zeros((16, 3), np.float32), "extra": np.zeros(1)}
    scope = Scope()
    with pytest.raises(ValueError) as err:
        model.set_state_dict(bad, scope=scope)
    message = str(err.value)
    for text in ("4 problem(s)", "fc2.bias: missing", "extra: not a parameter of MLP",
                 "fc1.weight: shape [8, 15], linear_0.w_0 is [8, 16]", "fc1.bias: dtype float64"):
        assert text in message
    assert list(scope) == []
    with pytest.raises(KeyError, match="linear_0.w_0 \\(fc1.weight\\) has no value in the scope"):
        model.state_dict(scope=scope)


def test_hooks_containers_and_modes():
    with pg.unique_name.guard():
        seq = pg.nn.Sequential(("a", pg.nn.Linear(2, 3)), ("b", pg.nn.ReLU()))
        blocks = pg.nn.LayerDict({"x": pg.nn.Linear(3, 3), "y": seq})
    assert [k for k, _ in blocks.named_parameters()] == ["x.weight", "x.bias", "y.a.weight", "y.a.bias"]
    assert len(seq) == 2 and isinstance(seq[1], pg.nn.ReLU) and "y" in blocks
    calls = []
    pre = seq.register_forward_pre_hook(lambda layer, inputs: calls.append("pre") or (pg.scale(inputs[0], 2.0),))
    seq.register_forward_post_hook(lambda layer, inputs, out: calls.append("post"))
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        seq(pg.data("x", [-1, 2]))
        pre.remove()
        seq(pg.data("z", [-1, 2]))
    assert calls == ["pre", "post", "post"]
    assert [op.type for op in main.global_block().ops].count("scale") == 1
    blocks.eval()
    assert not any(layer.training for layer in blocks.sublayers(include_self=True))
    blocks.train()
    assert all(layer.training for layer in blocks.sublayers(include_self=True))


def test_jit_save_needs_input_specs():
    with pg.unique_name.guard():
        model = MLP()
    with pytest.raises(ValueError, match="input_spec"):
        pg.jit.save(model, "unused")


def test_conv1d_conv_transpose_group_and_instance_norm_layers_against_numpy():
    with pg.unique_name.guard():
        conv1d = pg.nn.Conv1D(3, 4, 3, padding=1)
        deconv = pg.nn.Conv2DTranspose(2, 3, 2, stride=2)
        gnorm, inorm = pg.nn.GroupNorm(2, 4), pg.nn.InstanceNorm2D(2)
    rng = np.random.default_rng(5)
    seq = rng.standard_normal((2, 3, 7)).astype(np.float32)
    img = rng.standard_normal((2, 2, 3, 3)).astype(np.float32)
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        outs = [conv1d(pg.data("seq", [-1, 3, 7])), deconv(pg.data("img", [-1, 2, 3, 3]))]
        outs += [gnorm(outs[0]), inorm(pg.data("img2", [-1, 2, 3, 3]))]
    scope = Scope()
    Executor().run(startup, scope=scope)
    for p in main.all_parameters():
        scope.set(p.name, rng.standard_normal(p.shape).astype(np.float32))
    got = Executor().run(main, feed={"seq": seq, "img": img, "img2": img}, fetch_list=outs, scope=scope)
    w = scope.get(conv1d._parameters["weight"].name)                       # [4, 3, 3], PaddlePaddle's layout
    padded = np.pad(seq, ((0, 0), (0, 0), (1, 1)))
    want = np.einsum("nclk,ock->nol", np.stack([padded[:, :, i:i + 3] for i in range(7)], 2), w)
    want += scope.get(conv1d._parameters["bias"].name)[None, :, None]
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)
    wt = scope.get(deconv._parameters["weight"].name)                      # [2, 3, 2, 2], stride 2: no overlap
    want = np.einsum("nchw,cokl->nohkwl", img, wt).reshape(2, 3, 6, 6) + \
        scope.get(deconv._parameters["bias"].name)[None, :, None, None]
    np.testing.assert_allclose(got[1], want, rtol=1e-4, atol=1e-5)
    g = got[0].reshape(2, 2, 2 * 7)
    normed = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5)).reshape(2, 4, 7)
    want = normed * scope.get(gnorm._parameters["weight"].name)[:, None] + scope.get(gnorm._parameters["bias"].name)[:, None]
    np.testing.assert_allclose(got[2], want, rtol=1e-4, atol=1e-4)
    mu, var = img.mean((2, 3), keepdims=True), img.var((2, 3), keepdims=True)
    want = (img - mu) / np.sqrt(var + 1e-5) * scope.get(inorm._parameters["scale"].name)[:, None, None] + \
        scope.get(inorm._parameters["bias"].name)[:, None, None]
    np.testing.assert_allclose(got[3], want, rtol=1e-4, atol=1e-4)


def test_jit_load_runs_on_arrays_and_fine_tunes_inside_a_program(tmp_path):
    with pg.unique_name.guard():
        model = MLP()
    _, scope, _ = train(model, 5)
    xs, ys = data(6, 16)
    want, _ = eval_outputs(model, scope, xs)
    pg.jit.save(model, str(tmp_path / "mlp"), input_spec=[pg.static.InputSpec([None, 8], "float32", "x")],
                scope=scope)
    loaded_scope = Scope()
    loaded = pg.jit.load(str(tmp_path / "mlp"), scope=loaded_scope)
    np.testing.assert_allclose(loaded(xs), want, rtol=1e-6, atol=1e-6)
    assert sorted(p.name for p in loaded.parameters()) == ["linear_0.b_0", "linear_0.w_0", "linear_1.b_0",
                                                          "linear_1.w_0"]
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x, label = pg.data("x", [-1, 8]), pg.data("label", [-1, 1], "int64")
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(loaded(x), label))
        pg.optimizer.SGD(0.5, parameters=loaded.parameters()).minimize(loss)
    exe = Executor()
    exe.run(startup, scope=loaded_scope)            # the optimizer's learning rate; no parameter re-initialized
    first = float(exe.run(main, feed={"x": xs, "label": ys}, fetch_list=[loss], scope=loaded_scope)[0])
    np.testing.assert_allclose(first, float(np.mean(-np.log(np.exp(want - want.max(1, keepdims=True))[
        np.arange(16), ys[:, 0]] / np.exp(want - want.max(1, keepdims=True)).sum(1)))), rtol=1e-5)
    for _ in range(20):
        last = float(exe.run(main, feed={"x": xs, "label": ys}, fetch_list=[loss], scope=loaded_scope)[0])
    assert last < first
    with pytest.raises(TypeError, match="takes 1 input"):
        loaded(xs, xs)


@pytest.mark.parametrize("cls, kwargs, states", [(pg.nn.LSTM, {"num_layers": 2, "direction": "bidirect"}, 2),
                                                 (pg.nn.GRU, {}, 1),
                                                 (pg.nn.SimpleRNN, {"activation": "relu"}, 1)])
def test_recurrent_layers_equal_the_functional_rnn_with_paddles_structure(cls, kwargs, states):
    with pg.unique_name.guard():
        layer = cls(3, 4, **kwargs)
    names = [k for k, _ in layer.named_parameters()]
    cell = "cell_fw" if kwargs.get("direction") == "bidirect" else "cell"
    assert names[:4] == [f"0.{cell}.weight_ih", f"0.{cell}.weight_hh", f"0.{cell}.bias_ih", f"0.{cell}.bias_hh"]
    xs = np.random.default_rng(7).standard_normal((2, 5, 3)).astype(np.float32)
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [-1, 5, 3])
        out, final = layer(x)
    scope = Scope()
    Executor().run(startup, scope=scope)
    got = Executor().run(main, feed={"x": xs}, fetch_list=[out] + (list(final) if states == 2 else [final]),
                         scope=scope)
    # the same weights through the functional layer (checked against PaddlePaddle in test_kernels_rnn)
    ref_main, ref_startup = pg.Program(), pg.Program()
    mode = {pg.nn.LSTM: "LSTM", pg.nn.GRU: "GRU", pg.nn.SimpleRNN: "RNN_RELU"}[cls]
    with pg.program_guard(ref_main, ref_startup), pg.unique_name.guard():
        rx = pg.data("x", [-1, 5, 3])
        rout, rfinal = pg.nn.rnn(rx, 4, mode, kwargs.get("num_layers", 1), kwargs.get("direction", "forward"))
    ref_scope = Scope()
    Executor().run(ref_startup, scope=ref_scope)
    ours = [p.name for p in layer.parameters()]
    theirs = [p.name for p in ref_main.all_parameters()]   # creation order, as ours: w_ih, w_hh, b_ih, b_hh
    assert len(ours) == len(theirs) == 4 * kwargs.get("num_layers", 1) * (2 if cell == "cell_fw" else 1)
    for a, b in zip(ours, theirs):
        ref_scope.set(b, scope.get(a))
    want = Executor().run(ref_main, feed={"x": xs}, fetch_list=[rout] + (list(rfinal) if states == 2 else [rfinal]),
                          scope=ref_scope)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_conv3d_layer_equals_the_functional_conv3d():
    with pg.unique_name.guard():
        layer = pg.nn.Conv3D(2, 3, 3, padding=1)
    assert layer.parameters()[0].shape == [3, 2, 3, 3, 3]
    x = np.random.default_rng(8).standard_normal((1, 2, 4, 4, 4)).astype(np.float32)
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        out = layer(pg.data("x", [-1, 2, 4, 4, 4]))
    scope = Scope()
    Executor().run(startup, scope=scope)
    got, = Executor().run(main, feed={"x": x}, fetch_list=[out], scope=scope)
    w, b = scope.get(layer.parameters()[0].name), scope.get(layer.parameters()[1].name)
    padded = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1), (1, 1)))
    want = np.zeros((1, 3, 4, 4, 4))
    for d in range(4):
        for h in range(4):
            for v in range(4):
                want[0, :, d, h, v] = np.einsum("cijk,ocijk->o", padded[0, :, d:d + 3, h:h + 3, v:v + 3], w) + b
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_mode_builds_in_one_mode_and_restores_each_sublayers_own():
    with pg.unique_name.guard():
        model = MLP()
    model.drop.eval()                                   # a mixed tree: one sublayer already in eval mode
    main = pg.Program()
    with model.mode(training=False), pg.program_guard(main, pg.Program()):
        assert not any(layer.training for layer in model.sublayers(include_self=True))
        model(pg.data("x", [-1, 8]))
    assert all(op.attr("is_test") for op in main.global_block().ops if op.type == "dropout")
    assert [layer.training for layer in model.sublayers(include_self=True)] == [True, True, False, True]
    with pytest.raises(RuntimeError), model.mode(training=False):
        raise RuntimeError("a failing build")
    assert not model.drop.training and model.fc1.training   # restored on error too


def test_parameter_list_belongs_to_its_owner_and_trains():
    """ParameterList's parameters are the owner's (state dict `params.i`), replaceable by
    index, and a program built from the owner reads and updates them."""
    class Chain(pg.nn.Layer):
        def __init__(self):
            super().__init__()
            self.params = pg.nn.ParameterList([self.create_parameter([3, 3]) for _ in range(2)])

        def forward(self, x):
            for p in self.params:
                x = pg.matmul(x, p)
            return x

    net = Chain()
    assert list(net.state_dict()) == ["params.0", "params.1"]
    replacement = net.create_parameter([3, 2])
    net.params[-1] = replacement
    assert net.params[1] is replacement and len(net.parameters()) == 2 and net.params[:1][0] is not replacement
    with pytest.raises(IndexError, match="out of range"):
        net.params[2] = replacement
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 3])
        loss = pg.mean(net(x))
        pg.optimizer.SGD(0.5).minimize(loss)
    scope, exe = Scope(), Executor()
    exe.run(startup, scope=scope)
    before = {p.name: np.array(scope.get(p.name)) for p in net.parameters()}
    feed = np.ones((4, 3), np.float32)
    got, = exe.run(main, feed={"x": feed}, fetch_list=[loss], scope=scope)
    np.testing.assert_allclose(got, np.mean(feed @ before[net.params[0].name] @ before[net.params[1].name]),
                               rtol=1e-5)
    assert all(not np.array_equal(scope.get(name), value) for name, value in before.items())
