"""Models written by Keel run in PaddlePaddle (optional: needs `paddle`, skipped without it).

Run where PaddlePaddle is installed, e.g.:
    FLAGS_enable_pir_api=0 PYTHONPATH=. /work/paddle-venv/bin/python -m pytest -q -m paddle tests/test_paddle_interop.py
"""
import os

import numpy as np
import pytest

os.environ.setdefault("FLAGS_enable_pir_api", "0")
paddle = pytest.importorskip("paddle")

import program as pg  # noqa: E402
from executor import Executor, Scope  # noqa: E402

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
