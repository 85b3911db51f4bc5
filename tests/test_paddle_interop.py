"""Models written by Keel run in PaddlePaddle (optional: needs `paddle`, skipped without it).

Run where PaddlePaddle is installed, e.g.:
    FLAGS_enable_pir_api=0 PYTHONPATH=. $PADDLE_PYTHON -m pytest -q -m paddle tests/test_paddle_interop.py
"""
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("FLAGS_enable_pir_api", "0")
paddle = pytest.importorskip("paddle")

import keel.program as pg  # noqa: E402
from keel.executor import Executor, Scope  # noqa: E402

pytestmark = pytest.mark.paddle


def _model(tmp_path):
    """A conv + batch_norm + pool + fc + dropout + softmax model, trained a few steps with
    Adam in Keel, then exported with save_inference_model."""
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 5
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 1, 8, 8])
        label = pg.data("label", [-1, 1], "int64")
        h = pg.nn.batch_norm(pg.nn.conv2d(x, 4, 3, padding=1), act="relu")
        # flattened before fc: Paddle Inference 3.3.1's fc+scale fusion miscomputes an fc on
        # a 4-D input followed by a downgrade_in_infer dropout, for models PaddlePaddle
        # builds itself too (max diff 0.26 with ir_optim on, 0 with it off)
        h = pg.flatten(pg.nn.pool2d(h, 2, "max", 2))
        h = pg.nn.dropout(pg.nn.fc(h, 16, activation="relu"), 0.2)  # downgrade_in_infer: a scale in inference
        probs = pg.softmax(pg.nn.fc(h, 3))
        loss = pg.mean(pg.nn.cross_entropy(probs, label))
        test_program = main.clone(for_test=True)
        pg.optimizer.Adam(0.01).minimize(loss)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    for _ in range(3):
        exe.run(main, feed={"x": rng.standard_normal((4, 1, 8, 8)).astype(np.float32),
                            "label": rng.integers(0, 3, (4, 1))}, fetch_list=[loss], scope=scope)
    prefix = str(tmp_path / "model")
    pg.io.save_inference_model(prefix, [x], [probs], exe, program=test_program, scope=scope)
    xb = rng.standard_normal((5, 1, 8, 8)).astype(np.float32)
    want, = exe.run(test_program, feed={"x": xb}, fetch_list=[probs], scope=scope)
    return prefix, xb, want


@pytest.mark.parametrize("ir_optim", [False, True])
def test_our_inference_model_runs_in_paddle_inference(tmp_path, ir_optim):
    from paddle import inference
    prefix, xb, want = _model(tmp_path)
    config = inference.Config(prefix + ".pdmodel", prefix + ".pdiparams")
    config.switch_ir_optim(ir_optim)
    config.disable_gpu()
    predictor = inference.create_predictor(config)
    handle = predictor.get_input_handle(predictor.get_input_names()[0])
    handle.copy_from_cpu(xb)
    predictor.run()
    got = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_our_inference_model_runs_in_paddle_static_executor(tmp_path):
    paddle.enable_static()
    prefix, xb, want = _model(tmp_path)
    exe = paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(paddle.static.Scope()):
        program, feeds, fetches = paddle.static.load_inference_model(prefix, exe)
        got, = exe.run(program, feed={feeds[0]: xb}, fetch_list=fetches)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("optimizer", ["sgd", "adam", "momentum"])
def test_our_training_program_runs_in_paddle_static_executor(optimizer):
    """A training program Keel builds with minimize (backward ops, update ops, op_role
    attributes) runs in PaddlePaddle's executor from the same parameters and gives Keel's
    loss trajectory and final parameters."""
    paddle.enable_static()
    make = {"sgd": lambda: pg.optimizer.SGD(0.1), "adam": lambda: pg.optimizer.Adam(0.01),
            "momentum": lambda: pg.optimizer.Momentum(0.05, momentum=0.9, use_nesterov=True)}[optimizer]
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 9
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 1, 6, 6])
        label = pg.data("label", [-1, 1], "int64")
        # no conv bias before batch_norm: it cancels, its gradient is rounding noise, and
        # Adam's normalized steps would turn that noise into diverging bias values
        h = pg.nn.batch_norm(pg.nn.conv2d(x, 3, 3, padding=1, bias_attr=False), act="relu")
        h = pg.flatten(pg.nn.pool2d(h, 2, "avg", 2))
        logits = pg.nn.fc(pg.nn.fc(h, 8, activation="tanh"), 4)
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
        make().minimize(loss)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    persistables = [v.name for v in main.global_block().vars.values() if v.persistable]
    initial = {n: np.array(scope.get(n)) for n in persistables}
    rng = np.random.default_rng(3)
    batches = [{"x": rng.standard_normal((5, 1, 6, 6)).astype(np.float32), "label": rng.integers(0, 4, (5, 1))}
               for _ in range(6)]
    ours = [float(exe.run(main, feed=b, fetch_list=[loss], scope=scope)[0]) for b in batches]

    theirs_program = paddle.static.Program.parse_from_string(main.serialize_to_string())
    pexe = paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(paddle.static.Scope()):
        for name, value in initial.items():
            paddle.static.global_scope().var(name).get_tensor().set(value, paddle.CPUPlace())
        theirs = [float(np.asarray(pexe.run(theirs_program, feed=b, fetch_list=[loss.name])[0])) for b in batches]
        final = {n: np.array(paddle.static.global_scope().find_var(n).get_tensor()) for n in persistables}
    np.testing.assert_allclose(theirs, ours, rtol=1e-5)
    for name in persistables:
        want = np.asarray(scope.get(name))
        np.testing.assert_allclose(final[name], want, rtol=1e-5, atol=1e-6 * max(1.0, float(np.abs(want).max())),
                                   err_msg=name)


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "paddle"


@pytest.mark.parametrize("name", ["mlp_fc", "mlp_linear", "lenet", "resblock_cnn", "transformer_encoder",
                                  "ops_zoo", "mobilenet_v2", "shufflenet_v2", "resnet18"])
def test_every_family_saved_by_keel_runs_in_paddle_inference(name, tmp_path):
    """Each PaddlePaddle model family, loaded by Keel and written again by Keel's
    save_inference_model, runs in Paddle Inference (passes off and on) with PaddlePaddle's
    recorded outputs. ResNet-18's weights come from the shared recipe (tests/fixtures/paddle)."""
    from paddle import inference
    exe, scope = Executor(), Scope()
    if name == "resnet18":
        import sys
        sys.path.insert(0, str(FIXTURES))
        from recipe import recipe_params
        sys.path.pop(0)
        prog = pg.io.load_program(FIXTURES / "resnet18.pdmodel")
        block = prog.global_block()
        for var_name, value in recipe_params([(op.type, op.inputs) for op in block.ops],
                                             {n: s for n, _, s in pg.io.persistable_specs(prog)}).items():
            scope.set(var_name, value)
        feeds = [op.output("Out")[0] for op in sorted((op for op in block.ops if op.type == "feed"),
                                                       key=lambda op: op.attr("col"))]
        fetches = [op.input("X")[0] for op in sorted((op for op in block.ops if op.type == "fetch"),
                                                      key=lambda op: op.attr("col"))]
    else:
        prog, feeds, fetches = pg.io.load_inference_model(FIXTURES / name, exe, scope=scope)
    prefix = str(tmp_path / name)
    pg.io.save_inference_model(prefix, feeds, fetches, exe, program=prog, scope=scope)
    io = np.load(FIXTURES / f"{name}.io.npz")
    for ir_optim in (False, True):
        if os.path.exists(prefix + ".pdiparams"):
            config = inference.Config(prefix + ".pdmodel", prefix + ".pdiparams")
        else:  # a parameter-free model has no params file (as PaddlePaddle writes it)
            config = inference.Config()
            config.set_prog_file(prefix + ".pdmodel")
        config.switch_ir_optim(ir_optim)
        config.disable_gpu()
        predictor = inference.create_predictor(config)
        for feed_name in predictor.get_input_names():
            predictor.get_input_handle(feed_name).copy_from_cpu(io[f"in:{feed_name}"])
        predictor.run()
        for i, out_name in enumerate(predictor.get_output_names()):
            got, want = predictor.get_output_handle(out_name).copy_to_cpu(), io[f"out:{i}"]
            if want.dtype.kind != "f":
                np.testing.assert_array_equal(got, want)
            else:
                tol = (1e-5 if not ir_optim else 1e-4) * max(float(np.abs(want).max()), 1e-6)
                assert np.abs(got - want).max() <= tol, (name, ir_optim, out_name)


def _bf16_weights_model(source, tmp_path):
    """`source` (a fixture's prefix, or the model _model trains) optimized as
    `prune_for_inference --fuse --bf16` does and saved by Keel: (prefix, inputs, Keel's
    outputs for that file, the float32 model's outputs)."""
    from keel.executor.kernel_call import call_kernel
    from keel.program.passes import optimize_inference
    if source == "keel":
        prefix, xb, want = _model(tmp_path)
        inputs, float_outputs = {"x": xb}, [want]
    else:
        prefix = str(FIXTURES / source)
        io = np.load(FIXTURES / f"{source}.io.npz")
        inputs = {k[3:]: io[k] for k in io.files if k.startswith("in:")}
        float_outputs = [io[f"out:{i}"] for i in range(sum(k.startswith("out:") for k in io.files))]
    exe, scope = Executor(), Scope()
    program, feeds, fetches = pg.io.load_inference_model(prefix, exe, scope=scope)
    params = {n: scope.get(n) for n, _, _ in pg.io.persistable_specs(program)}
    program, params, report = optimize_inference(program, params, evaluate=call_kernel, bf16=True)
    assert report.changes("convert_weights_to_bf16")["params_bf16"] >= 3
    bf16 = str(tmp_path / "bf16")
    pg.io.save_program(program, bf16 + ".pdmodel")
    pg.io.save_params(program, params, bf16 + ".pdiparams")
    scope = Scope()
    program, feeds, fetches = pg.io.load_inference_model(bf16, exe, scope=scope)
    ours = exe.run(program, feed={f: inputs[f] for f in feeds}, fetch_list=fetches, scope=scope)
    return bf16, inputs, ours, float_outputs


@pytest.mark.parametrize("source", ["keel", "mobilenet_v2", "transformer_encoder"])
def test_our_bf16_weights_run_in_paddle_inference(source, tmp_path):
    """Weights Keel stored as bfloat16 (BF16 records, a cast to float32 before each reader,
    float32 arithmetic) load in Paddle Inference, passes off and on, which computes Keel's
    outputs for the same files; those are within the bfloat16 tolerance of float32's."""
    from paddle import inference
    prefix, inputs, ours, float_outputs = _bf16_weights_model(source, tmp_path)
    for want, exact in zip(ours, float_outputs):
        assert np.abs(want - exact).max() <= 3e-2 * np.abs(exact).max()
    for ir_optim in (False, True):
        config = inference.Config(prefix + ".pdmodel", prefix + ".pdiparams")
        config.switch_ir_optim(ir_optim)
        config.disable_gpu()
        predictor = inference.create_predictor(config)
        for name in predictor.get_input_names():
            predictor.get_input_handle(name).copy_from_cpu(inputs[name])
        predictor.run()
        for name, want in zip(predictor.get_output_names(), ours):
            got = predictor.get_output_handle(name).copy_to_cpu()
            assert got.dtype == want.dtype == np.float32
            tol = (1e-5 if not ir_optim else 1e-4) * max(float(np.abs(want).max()), 1e-6)
            assert np.abs(got - want).max() <= tol, (source, ir_optim, name)


@pytest.mark.parametrize("ir_optim", [False, True])
def test_jit_save_of_a_layer_runs_in_paddle_inference(tmp_path, ir_optim):
    from paddle import inference
    import test_layers_api as layers_api
    with pg.unique_name.guard():
        model = layers_api.CNN()
    rng = np.random.default_rng(2)
    images = rng.standard_normal((16, 1, 8, 8)).astype(np.float32)
    _, scope, _ = layers_api.train(model, 10, make_input=lambda: pg.data("image", [-1, 1, 8, 8]),
                                   batch=(images, rng.integers(0, 3, (16, 1))))
    want, _ = layers_api.eval_outputs(model, scope, images[:4], make_input=lambda: pg.data("image", [-1, 1, 8, 8]))
    prefix = str(tmp_path / "cnn")
    pg.jit.save(model, prefix, input_spec=[pg.static.InputSpec([None, 1, 8, 8], "float32", "image")], scope=scope)
    config = inference.Config(prefix + ".pdmodel", prefix + ".pdiparams")
    config.switch_ir_optim(ir_optim)
    config.disable_gpu()
    predictor = inference.create_predictor(config)
    handle = predictor.get_input_handle("image")
    handle.copy_from_cpu(images[:4])
    predictor.run()
    got = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def _gpt(vocab=13, seq=6, width=16):
    class GPT(pg.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed = pg.nn.Embedding(vocab, width)
            self.blocks = pg.nn.TransformerEncoder(
                pg.nn.TransformerEncoderLayer(width, 2, 32, 0.1, activation="gelu", normalize_before=True), 2,
                pg.nn.LayerNorm(width))
            self.head = pg.nn.Linear(width, vocab)

        def forward(self, ids, mask):
            return self.head(self.blocks(self.embed(ids), mask))
    causal = np.triu(np.full((seq, seq), -1e9, np.float32), 1)[None, None]
    ids = np.random.default_rng(0).integers(0, vocab, (2, seq))
    return GPT(), [pg.static.InputSpec([None, seq], "int64", "ids"),
                   pg.static.InputSpec([1, 1, seq, seq], "float32", "mask")], [ids, causal]


def _encoder():
    class Encoder(pg.nn.Layer):
        def __init__(self):
            super().__init__()
            self.enc = pg.nn.TransformerEncoder(pg.nn.TransformerEncoderLayer(16, 4, 32, 0.1), 2)
            self.pool = pg.nn.Linear(16, 3)

        def forward(self, x):
            return pg.softmax(self.pool(self.enc(x)))
    x = np.random.default_rng(1).standard_normal((3, 7, 16)).astype(np.float32)
    return Encoder(), [pg.static.InputSpec([None, 7, 16], "float32", "x")], [x]


def _lstm_classifier():
    class Classifier(pg.nn.Layer):
        def __init__(self):
            super().__init__()
            self.embed = pg.nn.Embedding(20, 8)
            self.lstm = pg.nn.LSTM(8, 16, num_layers=2, direction="bidirect")
            self.head = pg.nn.Linear(32, 4)

        def forward(self, ids):
            out, _ = self.lstm(self.embed(ids))
            return pg.softmax(self.head(pg.mean(out, axis=1)))
    ids = np.random.default_rng(2).integers(0, 20, (3, 9))
    return Classifier(), [pg.static.InputSpec([None, 9], "int64", "ids")], [ids]


def _cnn():
    import test_layers_api as layers_api
    x = np.random.default_rng(4).standard_normal((2, 1, 8, 8)).astype(np.float32)
    return layers_api.CNN(), [pg.static.InputSpec([None, 1, 8, 8], "float32", "image")], [x]


def _mlp():
    import test_layers_api as layers_api
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    return layers_api.MLP(), [pg.static.InputSpec([None, 8], "float32", "x")], [x]


@pytest.mark.parametrize("make", [_mlp, _cnn, _encoder, _lstm_classifier, _gpt],
                         ids=["mlp", "cnn-batchnorm", "transformer-encoder", "lstm-classifier", "gpt-decoder"])
def test_jit_saved_layer_models_run_in_paddle_inference(tmp_path, make):
    from paddle import inference
    from keel.executor import Config, create_predictor
    with pg.unique_name.guard():
        model, specs, inputs = make()
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 3
    with pg.program_guard(main, startup):
        model(*[pg.data(s.name, s.shape, s.dtype) for s in specs])
    scope = Scope()
    Executor().run(startup, scope=scope)
    prefix = str(tmp_path / "model")
    pg.jit.save(model, prefix, input_spec=specs, scope=scope)
    want = create_predictor(Config(prefix)).run(inputs)[0]
    config = inference.Config(prefix + ".pdmodel", prefix + ".pdiparams")
    config.disable_gpu()
    config.switch_ir_optim(False)
    predictor = inference.create_predictor(config)
    for name, value in zip(predictor.get_input_names(), inputs):
        predictor.get_input_handle(name).copy_from_cpu(value)
    predictor.run()
    got = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_the_train_and_serve_example_runs_in_paddle_inference(tmp_path):
    """examples/train_and_serve.py's exported files in Paddle Inference, with Keel's numbers."""
    pytest.importorskip("sklearn")  # the example's digits
    import subprocess
    import sys
    from paddle import inference
    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "net"
    r = subprocess.run([sys.executable, str(root / "examples" / "train_and_serve.py"), "--out", str(out), "--epochs",
                        "1"], capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(root)})
    assert r.returncode == 0, r.stderr
    images = np.random.default_rng(0).standard_normal((5, 1, 8, 8)).astype(np.float32)
    import keel
    want, = keel.inference.create_predictor(keel.inference.Config(str(out))).run([images])
    config = inference.Config(str(out) + ".pdmodel", str(out) + ".pdiparams")
    config.disable_gpu()
    predictor = inference.create_predictor(config)
    predictor.get_input_handle("image").copy_from_cpu(images)
    predictor.run()
    got = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_paddle_jit_load_reads_keels_jit_save(tmp_path):
    """Without the pickled .pdiparams.info PaddlePaddle's own jit.save adds (Keel writes no
    pickles): paddle.jit.load still loads the files and gives Keel's outputs."""
    import test_layers_api as layers_api
    with pg.unique_name.guard():
        model = layers_api.MLP()
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        model(pg.data("x", [-1, 8]))
    scope = Scope()
    Executor().run(startup, scope=scope)
    prefix = str(tmp_path / "mlp")
    pg.jit.save(model, prefix, input_spec=[pg.static.InputSpec([None, 8], "float32", "x")], scope=scope)
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    want = pg.jit.load(prefix, scope=Scope())(x)
    paddle.disable_static()
    try:
        got = paddle.jit.load(prefix)(paddle.to_tensor(x)).numpy()
    finally:
        paddle.enable_static()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
