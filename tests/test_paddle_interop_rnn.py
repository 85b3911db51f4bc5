"""Recurrent models and CTC losses between Keel and PaddlePaddle (optional: needs `paddle`,
skipped without it).

    FLAGS_enable_pir_api=0 PYTHONPATH=. $PADDLE_PYTHON -m pytest -q -m paddle tests/test_paddle_interop_rnn.py
"""
import os

import numpy as np
import pytest

os.environ.setdefault("FLAGS_enable_pir_api", "0")
paddle = pytest.importorskip("paddle")

import keel.program as pg  # noqa: E402
from keel.executor import Executor, Scope  # noqa: E402

pytestmark = pytest.mark.paddle


@pytest.mark.parametrize("layer,kwargs", [
    (pg.nn.lstm, {"num_layers": 2, "direction": "bidirect"}),
    (pg.nn.gru, {"num_layers": 2, "direction": "forward"}),
    (pg.nn.simple_rnn, {"num_layers": 1, "direction": "bidirect", "activation": "relu"}),
])
def test_our_rnn_model_runs_in_paddle(tmp_path, layer, kwargs):
    """A model built, trained a few steps and saved by Keel gives the same outputs in
    PaddlePaddle's executor (its own rnn kernel reading Keel's WeightList)."""
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 2
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 6, 3])
        lens = pg.data("lens", [-1], "int64")
        target = pg.data("target", [-1, 6, 4])
        out, _ = layer(x, 4, sequence_length=lens, **kwargs)
        y = pg.nn.linear(out, 4)
        loss = pg.mean(pg.square(y - target))
        test_program = main.clone(for_test=True)
        pg.optimizer.Adam(0.01).minimize(loss)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((3, 6, 3)).astype(np.float32), "lens": np.array([6, 2, 4]),
            "target": rng.standard_normal((3, 6, 4)).astype(np.float32)}
    for _ in range(3):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    want, = exe.run(test_program, feed=feed, fetch_list=[y], scope=scope)
    prefix = str(tmp_path / "model")
    pg.io.save_inference_model(prefix, [x, lens], [y], exe, program=test_program, scope=scope)

    paddle.enable_static()
    try:
        pexe = paddle.static.Executor(paddle.CPUPlace())
        prog, feeds, fetches = paddle.static.load_inference_model(prefix, pexe)
        got, = pexe.run(prog, feed={"x": feed["x"], "lens": feed["lens"]}, fetch_list=fetches)
    finally:
        paddle.disable_static()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# reduction "sum": PaddlePaddle 3.3.1's ctc_loss calls paddle.sum, which refuses legacy
# static-graph variables ("sum(): argument (position 1) must be Value")
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_ctc_loss_matches_paddle_functional_ctc_loss(reduction):
    """pg.nn.ctc_loss against paddle.nn.functional.ctc_loss (which writes warpctc), loss and
    the gradient of the logits."""
    rng = np.random.default_rng(1)
    T, B, C, L = 7, 3, 5, 3
    logits = rng.uniform(-2, 2, (T, B, C)).astype(np.float32)
    labels = rng.integers(1, C, (B, L)).astype(np.int32)
    logit_len = np.array([7, 5, 6], np.int64)
    label_len = np.array([3, 1, 2], np.int64)
    feed = {"logits": logits, "labels": labels, "logit_len": logit_len, "label_len": label_len}

    paddle.enable_static()
    try:
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            lv = paddle.static.data("logits", [T, B, C], "float32")
            lv.stop_gradient = False
            yv = paddle.static.data("labels", [B, L], "int32")
            llv = paddle.static.data("logit_len", [B], "int64")
            ylv = paddle.static.data("label_len", [B], "int64")
            ploss = paddle.nn.functional.ctc_loss(lv, yv, llv, ylv, blank=0, reduction=reduction)
            total = paddle.mean(ploss) if reduction == "none" else ploss
            pgrad = paddle.static.gradients([total], [lv])[0]
        want = paddle.static.Executor(paddle.CPUPlace()).run(main, feed=feed, fetch_list=[ploss, pgrad])
    finally:
        paddle.disable_static()

    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        lv = pg.data("logits", [T, B, C])
        lv.stop_gradient = False
        yv = pg.data("labels", [B, L], "int32")
        llv = pg.data("logit_len", [B], "int64")
        ylv = pg.data("label_len", [B], "int64")
        loss = pg.nn.ctc_loss(lv, yv, llv, ylv, blank=0, reduction=reduction)
        total = pg.mean(loss) if reduction == "none" else loss
        (grad,) = pg.gradients([total], [lv])
    got = Executor().run(main, feed=feed, fetch_list=[loss, grad], scope=Scope())
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-7)
