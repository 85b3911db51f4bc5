"""rnn, warpctc and ctc_align kernels against independent references (a per-sample loop
over each sequence's own steps for rnn, brute-force enumeration of every alignment for
CTC, a plain loop for ctc_align) and against PaddlePaddle 3.3.1's outputs
(tests/fixtures/rnn/*.npz, written by tests/fixtures/rnn/generate.py)."""
import itertools
import json
from pathlib import Path

import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.program.ops.rnn import weight_shapes

FIXTURES = Path(__file__).parent / "fixtures" / "rnn"


def _sig(x):
    return 1.0 / (1.0 + np.exp(-x))


def _cell(mode, x, h, c, w_ih, w_hh, b_ih, b_hh):
    """One step for one sample, from the formulas (PaddlePaddle's nn.LSTM/GRU/SimpleRNN docs)."""
    H = h.shape[0]
    if mode == "LSTM":
        a = w_ih @ x + b_ih + w_hh @ h + b_hh
        i, f, g, o = _sig(a[:H]), _sig(a[H:2 * H]), np.tanh(a[2 * H:3 * H]), _sig(a[3 * H:])
        c = f * c + i * g
        return o * np.tanh(c), c
    if mode == "GRU":
        gx = w_ih @ x + b_ih
        gh = w_hh @ h + b_hh
        r = _sig(gx[:H] + gh[:H])
        z = _sig(gx[H:2 * H] + gh[H:2 * H])
        n = np.tanh(gx[2 * H:] + r * gh[2 * H:])
        return z * h + (1 - z) * n, None
    a = w_ih @ x + b_ih + w_hh @ h + b_hh
    return (np.tanh(a) if mode == "RNN_TANH" else np.maximum(a, 0)), None


def reference_rnn(x, pre, weights, seq, mode, layers, bidirec, hidden, dropout_mask=None,
                  dropout_prob=0.0):
    """Each sample runs over its own steps only (t < length), forward then reverse; other
    steps output 0; the final states are those after the sample's last step."""
    T, B, _ = x.shape
    dirs = 2 if bidirec else 1
    n = layers * dirs
    lengths = [T] * B if seq is None else [int(v) for v in seq]
    h_last = np.zeros((n, B, hidden))
    c_last = np.zeros((n, B, hidden))
    inp = x.astype(np.float64)
    for layer in range(layers):
        out = np.zeros((T, B, dirs * hidden))
        for d in range(dirs):
            k = layer * dirs + d
            w = [weights[2 * k], weights[2 * k + 1], weights[2 * n + 2 * k], weights[2 * n + 2 * k + 1]]
            for b in range(B):
                h = pre[0][k, b].astype(np.float64)
                c = pre[1][k, b].astype(np.float64) if mode == "LSTM" else None
                steps = range(lengths[b]) if d == 0 else range(lengths[b] - 1, -1, -1)
                for t in steps:
                    h, c = _cell(mode, inp[t, b], h, c, *w)
                    out[t, b, d * hidden:(d + 1) * hidden] = h
                h_last[k, b] = h
                if mode == "LSTM":
                    c_last[k, b] = c
        inp = out
        if layer < layers - 1 and dropout_mask is not None:
            inp = out * dropout_mask / (1.0 - dropout_prob)
    return out, [h_last] + ([c_last] if mode == "LSTM" else [])


def _attrs(mode, layers, bidirec, I, H, **extra):
    return {"mode": mode, "num_layers": layers, "is_bidirec": bidirec, "input_size": I,
            "hidden_size": H, "dropout_prob": 0.0, "is_test": False, "seed": 0, **extra}


def _random_inputs(mode, layers, bidirec, T=6, B=3, I=4, H=5, seq=None, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    dirs = 2 if bidirec else 1
    n_state = 2 if mode == "LSTM" else 1
    inputs = {"Input": rng.uniform(-1, 1, (T, B, I)).astype(dtype),
              "PreState": [rng.uniform(-1, 1, (layers * dirs, B, H)).astype(dtype) for _ in range(n_state)],
              "WeightList": [rng.uniform(-0.5, 0.5, s).astype(dtype)
                             for s in weight_shapes(mode, layers, bidirec, I, H)]}
    if seq is not None:
        inputs["SequenceLength"] = np.array(seq, np.int64)
    return inputs


MODES = ["LSTM", "GRU", "RNN_TANH", "RNN_RELU"]
SHAPES = [(1, False, None), (2, True, [6, 2, 4]), (3, False, [1, 6, 3]), (2, True, None)]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("layers,bidirec,seq", SHAPES)
@pytest.mark.parametrize("is_test", [False, True])
def test_rnn_matches_reference(mode, layers, bidirec, seq, is_test):
    inputs = _random_inputs(mode, layers, bidirec, seq=seq, seed=layers * 10 + len(seq or []))
    got = call_kernel("rnn", inputs, _attrs(mode, layers, bidirec, 4, 5, is_test=is_test))
    out, states = reference_rnn(inputs["Input"], inputs["PreState"], inputs["WeightList"], seq,
                                mode, layers, bidirec, 5)
    np.testing.assert_allclose(got["Out"], out, rtol=1e-5, atol=1e-6)
    assert got["Out"].dtype == np.float32
    for g, s in zip(got["State"], states):
        np.testing.assert_allclose(g, s, rtol=1e-5, atol=1e-6)
    if is_test:
        assert "Reserve" not in got and "DropoutState" not in got
    else:
        dirs = 2 if bidirec else 1
        gates = {"LSTM": 4, "GRU": 3}.get(mode, 1)
        rows = gates * layers + (layers - 1) + {"LSTM": 2 * layers, "GRU": layers}.get(mode, 0)
        assert got["Reserve"].shape == (rows, dirs * 6 * 3 * 5)  # PaddlePaddle's layout
        assert got["DropoutState"].dtype == np.uint8 and (got["DropoutState"] == 1).all()


def test_rnn_float64():
    inputs = _random_inputs("GRU", 2, True, seq=[3, 6, 5], dtype=np.float64)
    got = call_kernel("rnn", inputs, _attrs("GRU", 2, True, 4, 5))
    out, _ = reference_rnn(inputs["Input"], inputs["PreState"], inputs["WeightList"], [3, 6, 5],
                           "GRU", 2, True, 5)
    assert got["Out"].dtype == np.float64
    np.testing.assert_allclose(got["Out"], out, rtol=1e-12, atol=1e-13)


def test_rnn_dropout_between_layers():
    """One keep-mask of Out's shape (DropoutState), drawn from the op's seed, scales every
    inner layer's output by mask / (1 - p); the same seed gives the same mask."""
    inputs = _random_inputs("LSTM", 3, True, seq=[6, 4, 2])
    attrs = _attrs("LSTM", 3, True, 4, 5, dropout_prob=0.5, seed=3)
    got = call_kernel("rnn", inputs, attrs)
    mask = got["DropoutState"]
    assert mask.dtype == np.uint8 and mask.shape == got["Out"].shape
    assert 0 < mask.mean() < 1
    out, states = reference_rnn(inputs["Input"], inputs["PreState"], inputs["WeightList"], [6, 4, 2],
                                "LSTM", 3, True, 5, dropout_mask=mask, dropout_prob=0.5)
    np.testing.assert_allclose(got["Out"], out, rtol=1e-5, atol=1e-6)
    again = call_kernel("rnn", inputs, attrs)
    np.testing.assert_array_equal(again["DropoutState"], mask)
    test = call_kernel("rnn", inputs, dict(attrs, is_test=True))  # no dropout in inference
    out, _ = reference_rnn(inputs["Input"], inputs["PreState"], inputs["WeightList"], [6, 4, 2],
                           "LSTM", 3, True, 5)
    np.testing.assert_allclose(test["Out"], out, rtol=1e-5, atol=1e-6)


def test_rnn_rejects_a_wrong_weight_list():
    inputs = _random_inputs("LSTM", 2, False)
    inputs["WeightList"] = inputs["WeightList"][:-1]
    with pytest.raises(ValueError, match="WeightList must hold 8"):
        call_kernel("rnn", inputs, _attrs("LSTM", 2, False, 4, 5))


# -- PaddlePaddle's outputs -------------------------------------------------------------------------
RNN = np.load(FIXTURES / "rnn_cases.npz", allow_pickle=False)


@pytest.mark.parametrize("name", [str(n) for n in RNN["names"]])
def test_rnn_matches_paddle(name):
    attrs = json.loads(str(RNN[f"{name}:attrs"]))
    n_state = 2 if attrs["mode"] == "LSTM" else 1
    inputs = {"Input": RNN[f"{name}:x"], "PreState": [RNN[f"{name}:pre{i}"] for i in range(n_state)],
              "WeightList": [RNN[f"{name}:w{i}"] for i in range(int(RNN[f"{name}:n_weights"]))]}
    if f"{name}:seq" in RNN:
        inputs["SequenceLength"] = RNN[f"{name}:seq"]
    got = call_kernel("rnn", inputs, attrs)
    np.testing.assert_allclose(got["Out"], RNN[f"{name}:out"], rtol=1e-5, atol=1e-6)
    for i in range(n_state):
        np.testing.assert_allclose(got["State"][i], RNN[f"{name}:state{i}"], rtol=1e-5, atol=1e-6)


# -- warpctc ---------------------------------------------------------------------------------------
def _collapse(path, blank):
    out = []
    prev = None
    for p in path:
        if p != blank and p != prev:
            out.append(p)
        prev = p
    return out


def brute_force_ctc(logits, label, T, blank):
    """-log of the sum, over every path of length T whose collapse is `label`, of the product
    of softmax probabilities; inf when no path fits."""
    z = logits[:T].astype(np.float64)
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    total = 0.0
    for path in itertools.product(range(z.shape[1]), repeat=T):
        if _collapse(path, blank) == list(label):
            total += np.prod([p[t, k] for t, k in enumerate(path)])
    return -np.log(total) if total > 0 else np.inf


@pytest.mark.parametrize("blank", [0, 2])
def test_warpctc_matches_brute_force(blank):
    rng = np.random.default_rng(blank)
    T, B, C = 5, 4, 3
    logits = rng.uniform(-2, 2, (T, B, C)).astype(np.float32)
    others = [k for k in range(C) if k != blank]
    labels = np.array([[others[0], others[1], others[0]], [others[1], others[1], 0],
                       [others[0], 0, 0], [others[0], others[0], others[0]]], np.int32)
    label_len = np.array([3, 2, 1, 3], np.int64)
    logit_len = np.array([5, 4, 2, 4], np.int64)  # the last: 3 repeats need 5 steps
    got = call_kernel("warpctc", {"Logits": logits, "Label": labels, "LogitsLength": logit_len,
                                  "LabelLength": label_len}, {"blank": blank, "norm_by_times": False})
    for b in range(B):
        want = brute_force_ctc(logits[:, b], labels[b, :label_len[b]], logit_len[b], blank)
        if np.isinf(want):  # warp-ctc: loss and gradient 0 when no alignment fits
            assert got["Loss"][b, 0] == 0 and not got["WarpCTCGrad"][:, b].any()
        else:
            np.testing.assert_allclose(got["Loss"][b, 0], want, rtol=1e-5)
        assert not got["WarpCTCGrad"][logit_len[b]:, b].any()
    assert got["Loss"].shape == (B, 1) and got["Loss"].dtype == np.float32


CTC = np.load(FIXTURES / "warpctc_cases.npz", allow_pickle=False)


@pytest.mark.parametrize("name", [str(n) for n in CTC["names"]])
def test_warpctc_matches_paddle(name):
    attrs = json.loads(str(CTC[f"{name}:attrs"]))
    got = call_kernel("warpctc", {"Logits": CTC[f"{name}:logits"], "Label": CTC[f"{name}:label"],
                                  "LogitsLength": CTC[f"{name}:logits_length"],
                                  "LabelLength": CTC[f"{name}:label_length"]}, attrs)
    np.testing.assert_allclose(got["Loss"], CTC[f"{name}:loss"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got["WarpCTCGrad"], CTC[f"{name}:warpctcgrad"], rtol=1e-5, atol=2e-6)


# -- ctc_align -------------------------------------------------------------------------------------
def reference_ctc_align(x, lengths, blank, merge, pad):
    out = np.full_like(x, pad)
    out_len = np.zeros((x.shape[0], 1), x.dtype)
    for b in range(x.shape[0]):
        kept, prev = [], -1
        for t in range(int(lengths[b, 0])):
            tok = x[b, t]
            if tok != blank and not (merge and tok == prev):
                kept.append(tok)
            prev = tok
        out[b, :len(kept)] = kept
        out_len[b, 0] = len(kept)
    return out, out_len


@pytest.mark.parametrize("merge", [True, False])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_ctc_align_matches_reference(merge, dtype):
    rng = np.random.default_rng(5)
    x = rng.integers(0, 4, (6, 9)).astype(dtype)
    lengths = np.array([[9], [0], [4], [1], [7], [9]], dtype)
    for blank, pad in [(0, 0), (3, -1)]:
        got = call_kernel("ctc_align", {"Input": x, "InputLength": lengths},
                          {"blank": blank, "merge_repeated": merge, "padding_value": pad})
        want, want_len = reference_ctc_align(x, lengths, blank, merge, pad)
        np.testing.assert_array_equal(got["Output"], want)
        np.testing.assert_array_equal(got["OutputLength"], want_len)
        assert got["Output"].dtype == dtype and got["OutputLength"].dtype == dtype


ALIGN = np.load(FIXTURES / "ctc_align_cases.npz", allow_pickle=False)


@pytest.mark.parametrize("name", [str(n) for n in ALIGN["names"]])
def test_ctc_align_matches_paddle(name):
    attrs = json.loads(str(ALIGN[f"{name}:attrs"]))
    got = call_kernel("ctc_align", {"Input": ALIGN[f"{name}:input"],
                                    "InputLength": ALIGN[f"{name}:input_length"]}, attrs)
    np.testing.assert_array_equal(got["Output"], ALIGN[f"{name}:output"])
    np.testing.assert_array_equal(got["OutputLength"], ALIGN[f"{name}:output_length"])
