"""Gradient checks: rnn (every mode, multi-layer, bidirectional, SequenceLength, inter-layer
dropout) and warpctc against central finite differences, plus rnn_grad and warpctc_grad
against PaddlePaddle 3.3.1's own gradients (tests/fixtures/rnn/*.npz, written by
tests/fixtures/rnn/generate.py).

One PaddlePaddle difference, pinned below: in the reverse direction of a sequence shorter
than the input (SequenceLength), PaddlePaddle's rnn_grad takes the previous hidden state of
the sequence's first processed step (t = length - 1) to be zero in its backward formulas
(the W_hh gradient; GRU's update-gate term), although its forward pass starts that step
from PreState's h0. Keel's rnn_grad differentiates the forward pass (finite differences
agree); the two coincide whenever h0 is zero, which is what paddle.nn.LSTM/GRU/SimpleRNN
use unless given initial states."""
import json
from pathlib import Path

import numpy as np
import pytest

import keel.kernels.rnn as rnn_kernels
from keel.executor.kernel_call import call_kernel
from gradcheck import Case, rand, run_case
from keel.program.ops import registry
from keel.program.ops.rnn import weight_shapes

FIXTURES = Path(__file__).parent / "fixtures" / "rnn"


def _rnn(mode, layers=1, bidirec=False, T=3, B=2, I=2, H=2, seq=None, data_seed=0, **attrs):
    rng = np.random.default_rng(data_seed)
    dirs = 2 if bidirec else 1
    n_state = 2 if mode == "LSTM" else 1
    inputs = {"Input": rng.uniform(-1, 1, (T, B, I)),
              "PreState": [rng.uniform(-1, 1, (layers * dirs, B, H)) for _ in range(n_state)],
              "WeightList": [rng.uniform(-0.8, 0.8, s)
                             for s in weight_shapes(mode, layers, bidirec, I, H)]}
    if seq is not None:
        inputs["SequenceLength"] = np.array(seq, np.int64)
    full = {"mode": mode, "num_layers": layers, "is_bidirec": bidirec, "input_size": I,
            "hidden_size": H, "dropout_prob": 0.0, "is_test": False, "seed": 0, **attrs}
    tag = f"rnn {mode} L{layers}{' bi' if bidirec else ''}{' seq' if seq else ''}" \
          f"{' dropout' if attrs.get('dropout_prob') else ''}"
    return Case("rnn", inputs, full, outputs={"State": n_state}, max_elems=24, rtol=1e-5,
                atol=1e-7, id=tag)


def _ctc(T, B, C, L, logit_len, label_len, blank=0, seed=0):
    rng = np.random.default_rng(seed)
    label = rng.integers(0, C, (B, L)).astype(np.int32)
    label[label == blank] = (blank + 1) % C
    return Case("warpctc", {"Logits": rng.uniform(-2, 2, (T, B, C)), "Label": label,
                            "LogitsLength": np.array(logit_len, np.int64),
                            "LabelLength": np.array(label_len, np.int64)},
                {"blank": blank, "norm_by_times": False}, max_elems=40,
                id=f"warpctc T{T} B{B} C{C} blank={blank}")


CASES = [
    *[_rnn(m) for m in ("LSTM", "GRU", "RNN_TANH", "RNN_RELU")],
    *[_rnn(m, layers=2, bidirec=True, seq=[3, 2], data_seed=1) for m in ("LSTM", "GRU", "RNN_TANH")],
    _rnn("LSTM", layers=2, seq=[1, 3], data_seed=2),
    _rnn("GRU", bidirec=True, seq=[2, 1], data_seed=3),
    # dropout between the layers: the mask comes from the op's own seed, so every
    # finite-difference run sees the same one
    _rnn("LSTM", layers=2, bidirec=True, data_seed=4, dropout_prob=0.4, seed=7),
    _ctc(5, 2, 4, 2, [5, 3], [2, 1]),
    _ctc(6, 3, 3, 3, [6, 6, 4], [3, 2, 1], blank=2, seed=1),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


def test_ctc_align_not_differentiable():
    assert registry.get("ctc_align").grad is registry.NOT_DIFFERENTIABLE


# -- against PaddlePaddle's gradients ---------------------------------------------------------------
RNN = np.load(FIXTURES / "rnn_cases.npz", allow_pickle=False)
RNN_NAMES = [str(n) for n in RNN["names"]]
TRAINED = [n for n in RNN_NAMES if f"{n}:dx" in RNN]


def _rnn_inputs(name):
    attrs = json.loads(str(RNN[f"{name}:attrs"]))
    n_state = 2 if attrs["mode"] == "LSTM" else 1
    inputs = {"Input": RNN[f"{name}:x"],
              "PreState": [RNN[f"{name}:pre{i}"] for i in range(n_state)],
              "WeightList": [RNN[f"{name}:w{i}"] for i in range(int(RNN[f"{name}:n_weights"]))]}
    if f"{name}:seq" in RNN:
        inputs["SequenceLength"] = RNN[f"{name}:seq"]
    return inputs, attrs, n_state


def _our_grads(name):
    inputs, attrs, n_state = _rnn_inputs(name)
    fwd = call_kernel("rnn", inputs, attrs)
    feed = dict(inputs, Out=fwd["Out"], DropoutState=fwd["DropoutState"], Reserve=fwd["Reserve"])
    feed["Out@GRAD"] = RNN[f"{name}:wout"]
    feed["State@GRAD"] = [RNN[f"{name}:wstate{i}"] for i in range(n_state)]
    return call_kernel("rnn_grad", feed, attrs), n_state


def _compare(name, got, n_state, atol=5e-6):
    np.testing.assert_allclose(got["Input@GRAD"], RNN[f"{name}:dx"], rtol=1e-5, atol=atol)
    for i in range(n_state):
        np.testing.assert_allclose(got["PreState@GRAD"][i], RNN[f"{name}:dpre{i}"], rtol=1e-5,
                                   atol=atol)
    for i, g in enumerate(got["WeightList@GRAD"]):
        np.testing.assert_allclose(g, RNN[f"{name}:dw{i}"], rtol=1e-5, atol=atol,
                                   err_msg=f"{name}: WeightList[{i}]")


def _paddle_reverse_quirk(name):
    """Whether the case meets PaddlePaddle's reverse-direction difference (module docstring)."""
    inputs, attrs, _ = _rnn_inputs(name)
    seq = inputs.get("SequenceLength")
    return attrs["is_bidirec"] and seq is not None and (seq < inputs["Input"].shape[0]).any()


@pytest.mark.parametrize("name", [n for n in TRAINED if not _paddle_reverse_quirk(n)])
def test_rnn_grad_matches_paddle(name):
    got, n_state = _our_grads(name)
    _compare(name, got, n_state)


@pytest.mark.parametrize("name", [n for n in TRAINED if _paddle_reverse_quirk(n)])
def test_rnn_grad_differs_from_paddle_only_by_its_reverse_direction_start(name, monkeypatch):
    """Zeroing the previous hidden state at the first processed step of each padded
    sequence in the reverse direction (in the backward formulas only) reproduces
    PaddlePaddle's gradients exactly; without it, the gradients differ there."""
    got, n_state = _our_grads(name)
    with pytest.raises(AssertionError):
        _compare(name, got, n_state)
    real = rnn_kernels._direction_grad

    def as_paddle(xp, x, w, cache, mask, mode, reverse, *rest):
        if reverse and mask is not None:
            T = x.shape[0]
            cache = dict(cache, h_prev=list(cache["h_prev"]))
            for k, t in enumerate(range(T - 1, -1, -1)):
                if t < T - 1:
                    first = (mask[t, :, 0] == 1) & (mask[t + 1, :, 0] == 0)
                    cache["h_prev"][k] = xp.where(first[:, None], 0.0, cache["h_prev"][k])
        return real(xp, x, w, cache, mask, mode, reverse, *rest)

    monkeypatch.setattr(rnn_kernels, "_direction_grad", as_paddle)
    got, n_state = _our_grads(name)
    _compare(name, got, n_state)


CTC = np.load(FIXTURES / "warpctc_cases.npz", allow_pickle=False)


@pytest.mark.parametrize("name", [str(n) for n in CTC["names"]])
def test_warpctc_grad_matches_paddle(name):
    attrs = json.loads(str(CTC[f"{name}:attrs"]))
    fwd = call_kernel("warpctc", {"Logits": CTC[f"{name}:logits"], "Label": CTC[f"{name}:label"],
                                  "LogitsLength": CTC[f"{name}:logits_length"],
                                  "LabelLength": CTC[f"{name}:label_length"]}, attrs)
    got = call_kernel("warpctc_grad", {"Logits": CTC[f"{name}:logits"],
                                       "LogitsLength": CTC[f"{name}:logits_length"],
                                       "WarpCTCGrad": fwd["WarpCTCGrad"],
                                       "Loss@GRAD": CTC[f"{name}:wloss"]}, attrs)["Logits@GRAD"]
    np.testing.assert_allclose(got, CTC[f"{name}:dlogits"], rtol=1e-5, atol=2e-6)


def test_warpctc_norm_by_times_scales_the_gradient_only():
    case = CASES[-2]
    ins = {k: v.astype(np.float32) if k == "Logits" else v for k, v in case.inputs.items()}
    plain = call_kernel("warpctc", ins, {"blank": 0, "norm_by_times": False})
    normed = call_kernel("warpctc", ins, {"blank": 0, "norm_by_times": True})
    np.testing.assert_array_equal(plain["Loss"], normed["Loss"])
    dloss = rand(2, 1, low=0.5, high=1.5, seed=3).astype(np.float32)
    g = {flag: call_kernel("warpctc_grad", {"Logits": ins["Logits"], "LogitsLength": ins["LogitsLength"],
                                            "WarpCTCGrad": plain["WarpCTCGrad"], "Loss@GRAD": dloss},
                           {"blank": 0, "norm_by_times": flag})["Logits@GRAD"]
         for flag in (False, True)}
    lengths = ins["LogitsLength"].astype(np.float32).reshape(1, -1, 1)
    np.testing.assert_allclose(g[True], g[False] / lengths, rtol=1e-6)


# -- the gradient ops PaddlePaddle emits (tests/fixtures/paddle_grad_signatures.json) -------------
_GRAD_JSON = json.loads((Path(__file__).parent / "fixtures" / "paddle_grad_signatures.json").read_text())


def _role_slot(role):
    return role.split("[")[0]


@pytest.mark.parametrize("op_type", ["rnn", "warpctc", "ctc_align"])
def test_grad_op_slots_match_paddle_json(op_type):
    entry = _GRAD_JSON[op_type]
    rule = registry.get(op_type).grad
    if "grad_ops" not in entry:
        assert rule is registry.NOT_DIFFERENTIABLE
        return
    # rnn: fill_any_like zeros for the unused State gradients first, as Keel's backward does
    (gop,) = [g for g in entry["grad_ops"] if g["type"] != "fill_any_like"]
    assert (rule.type or op_type + "_grad") == gop["type"]
    fwd = registry.get(op_type)
    for slot, roles in gop["inputs"].items():
        assert slot in rule.inputs, slot
        for role in roles if isinstance(roles, list) else [roles]:
            if role.startswith("in:"):
                assert _role_slot(role[3:]) == slot and slot in fwd.input_slots
            elif role.startswith("out:"):
                assert _role_slot(role[4:]) == slot and slot in fwd.output_slots
            elif role.startswith("grad:out:"):
                assert slot == _role_slot(role[9:]) + "@GRAD"
            else:
                assert role == "empty" and fwd.input_slots[slot].dispensable
    assert set(rule.inputs) == set(gop["inputs"])
    for slot, roles in gop["outputs"].items():
        roles = roles if isinstance(roles, list) else [roles]
        assert all(_role_slot(r) == "grad:in:" + slot[:-5] for r in roles)
    assert set(rule.outputs) == set(gop["outputs"])
    gdef = registry.get(gop["type"])
    assert set(fwd.attrs) <= set(gdef.attrs)
