"""Recurrent layers and CTC end to end: a PaddlePaddle-exported LSTM classifier
(tests/fixtures/rnn/lstm_classifier.*, written by tests/fixtures/rnn/generate.py) run by
the Executor and the Predictor against PaddlePaddle's outputs; the builder layers
(pg.nn.lstm/gru/simple_rnn) against the kernel reference; and a CRNN-style recognizer
(conv -> bidirectional LSTM -> linear -> warpctc) trained with Keel, saved with
save_inference_model and run by the Predictor."""
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope
from keel.executor.inference import Config, create_predictor
from test_kernels_rnn import reference_rnn

FIXTURES = Path(__file__).parent / "fixtures" / "rnn"


# -- PaddlePaddle's exported LSTM classifier ------------------------------------------------------
def test_paddle_lstm_classifier_matches_paddle():
    exe, scope = Executor(), Scope()
    prog, feeds, fetches = pg.io.load_inference_model(FIXTURES / "lstm_classifier", exe, scope=scope)
    assert "rnn" in [op.type for op in prog.global_block().ops]
    io = np.load(FIXTURES / "lstm_classifier.io.npz", allow_pickle=False)
    outs = exe.run(prog, feed={f: io[f"in:{f}"] for f in feeds}, fetch_list=fetches, scope=scope)
    for i, got in enumerate(outs):
        np.testing.assert_allclose(got, io[f"out:{i}"], rtol=1e-5, atol=1e-6)
    # padded steps of the LSTM output are zero, as PaddlePaddle gives them
    lens = io["in:lens"]
    for b, n in enumerate(lens):
        assert not outs[1][b, n:].any()


@pytest.mark.parametrize("ir_optim", [False, True])
def test_paddle_lstm_classifier_through_the_predictor(ir_optim):
    config = Config(str(FIXTURES / "lstm_classifier"))
    config.switch_ir_optim(ir_optim)
    pred = create_predictor(config)
    io = np.load(FIXTURES / "lstm_classifier.io.npz", allow_pickle=False)
    got = pred.run([io[f"in:{n}"] for n in pred.get_input_names()])
    for i, g in enumerate(got):
        np.testing.assert_allclose(g, io[f"out:{i}"], rtol=1e-5, atol=1e-6)


# -- the builder layers ------------------------------------------------------------------------------
@pytest.mark.parametrize("layer,mode,kwargs", [
    (pg.nn.lstm, "LSTM", {"num_layers": 2, "direction": "bidirect"}),
    (pg.nn.gru, "GRU", {"num_layers": 1, "direction": "bidirect"}),
    (pg.nn.simple_rnn, "RNN_RELU", {"num_layers": 2, "activation": "relu"}),
])
def test_rnn_layers_build_paddle_parameters_and_run(layer, mode, kwargs):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 3
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 6, 4])
        lens = pg.data("lens", [-1], "int64")
        out, states = layer(x, 5, sequence_length=lens, **kwargs)
    bidirec = kwargs.get("direction") == "bidirect"
    dirs = 2 if bidirec else 1
    layers = kwargs["num_layers"]
    params = main.global_block().all_parameters()
    cell = {"LSTM": "lstm", "GRU": "gru"}.get(mode, "simple_rnn")
    assert [p.name for p in params[:4]] == [f"{cell}_cell_0.w_0", f"{cell}_cell_0.w_1",
                                            f"{cell}_cell_0.b_0", f"{cell}_cell_0.b_1"]
    assert len(params) == 4 * layers * dirs
    (op,) = [op for op in main.global_block().ops if op.type == "rnn"]
    assert op.attr("mode") == mode and op.attr("is_bidirec") == bidirec
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    feed = {"x": rng.uniform(-1, 1, (3, 6, 4)).astype(np.float32), "lens": np.array([6, 2, 4])}
    state_list = list(states) if isinstance(states, tuple) else [states]
    got = exe.run(main, feed=feed, fetch_list=[out] + state_list, scope=scope)
    weights = [scope.get(n) for n in op.input("WeightList")]
    bound = 1 / np.sqrt(5)
    assert all(np.abs(w).max() <= bound for w in weights)
    zeros = [np.zeros((layers * dirs, 3, 5), np.float32)] * len(state_list)
    want, want_states = reference_rnn(feed["x"].transpose(1, 0, 2), zeros, weights, feed["lens"],
                                      mode, layers, bidirec, 5)
    np.testing.assert_allclose(got[0], want.transpose(1, 0, 2), rtol=1e-5, atol=1e-6)
    for g, w in zip(got[1:], want_states):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


# -- a CRNN trained with warpctc ---------------------------------------------------------------------
CLASSES = 5  # blank 0 and four symbols
WIDTH, HEIGHT, STEPS = 32, 8, 16


def _crnn_batch(rng, batch=8):
    """Images whose columns spell a label: symbol k (1..4) is a 4-wide block lit in rows
    2k-2..2k-1; each label has 2-4 symbols with one blank column block between them."""
    images = np.zeros((batch, 1, HEIGHT, WIDTH), np.float32)
    labels = np.zeros((batch, 4), np.int32)
    lengths = np.zeros(batch, np.int64)
    for b in range(batch):
        n = rng.integers(2, 5)
        seq = rng.integers(1, CLASSES, n)
        for i, k in enumerate(seq):
            images[b, 0, 2 * k - 2:2 * k, 8 * i:8 * i + 4] = 1.0
        labels[b, :n] = seq
        lengths[b] = n
    images += rng.normal(0, 0.05, images.shape).astype(np.float32)
    return images, labels, lengths


def _crnn(main, startup):
    with pg.program_guard(main, startup), pg.unique_name.guard():
        img = pg.data("img", [-1, 1, HEIGHT, WIDTH])
        label = pg.data("label", [-1, 4], "int32")
        label_len = pg.data("label_len", [-1], "int64")
        logit_len = pg.data("logit_len", [-1], "int64")
        h = pg.nn.conv2d(img, 8, 3, padding=1, act="relu")
        h = pg.nn.pool2d(h, 2, "max", 2)                        # [B, 8, 4, 16]
        h = pg.transpose(h, [0, 3, 1, 2])                       # [B, 16, 8, 4]
        h = pg.reshape(h, [0, STEPS, 32])                       # [B, T, features]
        h, _ = pg.nn.lstm(h, 16, direction="bidirect")          # [B, T, 32]
        logits = pg.nn.linear(h, CLASSES)                       # [B, T, C]
        logits_tm = pg.transpose(logits, [1, 0, 2])             # [T, B, C]
        loss = pg.mean(pg.nn.warpctc(logits_tm, label, logit_len, label_len))
        decoded, decoded_len = pg.nn.ctc_greedy_decoder(logits, 0, pg.reshape(logit_len, [-1, 1]))
    return img, logit_len, logits, loss, decoded, decoded_len


def test_crnn_trains_with_warpctc_and_runs_through_the_predictor(tmp_path):
    main, startup = pg.Program(), pg.Program()
    main.random_seed = startup.random_seed = 1
    img, logit_len, logits, loss, decoded, decoded_len = _crnn(main, startup)
    test_prog = main.clone(for_test=True)
    with pg.program_guard(main, startup):
        pg.optimizer.Adam(learning_rate=0.02).minimize(loss)
    ops = [op.type for op in main.global_block().ops]
    assert {"rnn_grad", "warpctc_grad", "conv2d_grad"} <= set(ops)
    exe, scope = Executor(CPUPlace()), Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(0)
    images, labels, lengths = _crnn_batch(rng)
    feed = {"img": images, "label": labels, "label_len": lengths,
            "logit_len": np.full(len(images), STEPS, np.int64)}
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0]) for _ in range(40)]
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.1 * losses[0], losses

    infer_feed = {"img": images, "logit_len": feed["logit_len"]}
    want = exe.run(test_prog, feed=dict(feed), fetch_list=[logits, decoded, decoded_len], scope=scope)
    prefix = str(tmp_path / "crnn")
    pg.io.save_inference_model(prefix, [img, logit_len], [logits, decoded, decoded_len], exe,
                               program=test_prog, scope=scope)
    pred = create_predictor(Config(prefix))
    assert sorted(pred.get_input_names()) == ["img", "logit_len"]
    got = pred.run([infer_feed[n] for n in pred.get_input_names()])
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got[1], want[1])
    np.testing.assert_array_equal(got[2], want[2])
    # the trained recognizer reads its training batch
    for b in range(len(images)):
        assert want[2][b, 0] == lengths[b]
        np.testing.assert_array_equal(want[1][b, :lengths[b]], labels[b, :lengths[b]])
    # the greedy decoding is the arg max path with repeats merged and blanks dropped
    best = want[0].argmax(-1)
    for b in range(len(images)):
        kept = [k for t, k in enumerate(best[b]) if k != 0 and (t == 0 or k != best[b][t - 1])]
        assert want[2][b, 0] == len(kept) and list(want[1][b, :len(kept)]) == kept


# -- PaddlePaddle's LSTM + CTC training program ------------------------------------------------------
def test_paddle_lstm_ctc_training_program_replays():
    """PaddlePaddle's own training program (rnn, rnn_grad, warpctc, warpctc_grad, adam, as
    paddle.nn.LSTM + ctc_loss + Adam write them) from PaddlePaddle's initial values: the
    losses and every parameter and Adam moment after 6 steps match PaddlePaddle's.
    `lstm_0.w_0` is left out: the flat buffer PaddlePaddle's startup program makes with
    coalesce_tensor, whose memory the cell weights share there (so it moves with them);
    no op of the main program reads it, and in Keel it keeps its initial copy."""
    data = np.load(FIXTURES / "lstm_ctc.train.trajectory.npz", allow_pickle=False)
    main = pg.Program.parse_from_string((FIXTURES / "lstm_ctc.train.pdmodel").read_bytes())
    types = {op.type for op in main.global_block().ops}
    assert {"rnn", "rnn_grad", "warpctc", "warpctc_grad", "adam"} <= types
    scope = Scope()
    for key in data.files:
        if key.startswith("param:"):
            scope.set(key[len("param:"):], data[key].copy())
    exe = Executor(CPUPlace())
    loss_name = str(data["loss_name"][0])
    losses = [float(exe.run(main, feed={str(f): data[f"batch{i}:{f}"] for f in data["feed_names"]},
                            fetch_list=[loss_name], scope=scope)[0]) for i in range(len(data["loss"]))]
    np.testing.assert_allclose(losses, data["loss"], rtol=1e-5)
    checked = 0
    for key in data.files:
        if key.startswith("final:") and key != "final:lstm_0.w_0":
            name = key[len("final:"):]
            want = data[key]
            np.testing.assert_allclose(np.asarray(scope.get(name)), want, rtol=1e-4,
                                       atol=1e-5 * max(float(np.abs(want).max()), 1e-3), err_msg=name)
            checked += 1
    assert checked >= 40
