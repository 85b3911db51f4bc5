"""Gradient checks: loss ops (cross entropies, BCE/Huber/KL losses, label smoothing), plus
direct kernel tests for PaddlePaddle's conventions that finite differences cannot see
(ignored rows exactly zero, soft labels assumed to sum to 1, pos_weight, normalize).

Expected numbers marked "PaddlePaddle 3.3.1" were produced by running PaddlePaddle's own
CPU kernels on the same inputs."""
import json
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor.kernel_call import call_kernel
from gradcheck import Case, away_from, rand, run_case
from keel.program.ops import registry

_PROB = dict(low=0.1, high=1.0)


def _labels(shape, classes, seed, ignore=(), ignore_index=-100, dtype=np.int64):
    """Random class ids of `shape`; flat positions in `ignore` set to ignore_index."""
    lab = np.random.default_rng(seed).integers(0, classes, shape).astype(dtype)
    lab.reshape(-1)[list(ignore)] = ignore_index
    return lab


def _soft(*shape, axis=-1, seed=0):
    """Soft labels: positive, each distribution along `axis` summing to 1 (PaddlePaddle's
    softmax_with_cross_entropy gradient assumes it)."""
    s = rand(*shape, low=0.1, high=1.0, seed=seed)
    return s / s.sum(axis=axis, keepdims=True)


def _swce(logits, label, **attrs):
    return Case("softmax_with_cross_entropy", {"Logits": logits, "Label": label}, attrs,
                id=f"softmax_with_cross_entropy {attrs or 'hard'}")


_PW = rand(3, 4, low=0.5, high=2.0, seed=7)
_SIG_LABEL = rand(3, 4, low=0.0, high=1.0, seed=8)
_SIG_LABEL_IGN = _SIG_LABEL.copy()
_SIG_LABEL_IGN.reshape(-1)[[1, 6]] = -100.0
_KL_T = rand(3, 4, low=0.05, high=1.0, seed=9)
_KL_T[0, 1] = 0.0  # target 0: no loss, no gradient
_KL_X = np.log(rand(3, 4, low=0.1, high=1.0, seed=10))

CASES = [
    # softmax_with_cross_entropy: hard labels (two rows ignored), other ignore_index, int32
    _swce(rand(5, 4), _labels((5, 1), 4, 1, ignore=(1, 3))),
    _swce(rand(5, 4), _labels((5, 1), 4, 2, ignore=(0,), ignore_index=2), ignore_index=2),
    _swce(rand(4, 6), _labels((4, 1), 6, 3, dtype=np.int32), numeric_stable_mode=False),
    _swce(rand(2, 4, 3), _labels((2, 1, 3), 4, 4, ignore=(2,)), axis=1),
    _swce(rand(3, 2, 2), _labels((1, 2, 2), 3, 5), axis=0),
    _swce(rand(2, 3, 4), _labels((2, 3, 1), 4, 6, ignore=(4,)), axis=2),
    _swce(rand(4, 5), _soft(4, 5), soft_label=True),
    _swce(rand(2, 4, 3), _soft(2, 4, 3, axis=1), soft_label=True, axis=1),
    # use_softmax=False: Logits are already probabilities
    _swce(rand(5, 4, **_PROB), _labels((5, 1), 4, 7, ignore=(2,)), use_softmax=False),
    _swce(rand(2, 3, 2, **_PROB), _labels((2, 1, 2), 3, 8), use_softmax=False, axis=1),
    _swce(rand(4, 5, **_PROB), rand(4, 5, low=0.0, high=1.0, seed=11), use_softmax=False, soft_label=True),
    # cross_entropy
    Case("cross_entropy", {"X": rand(5, 4, **_PROB), "Label": _labels((5, 1), 4, 12, ignore=(3,))},
         id="cross_entropy hard"),
    Case("cross_entropy",
         {"X": rand(5, 4, **_PROB), "Label": _labels((5,), 4, 13, ignore=(0,), ignore_index=1)},
         {"ignore_index": 1}, id="cross_entropy hard rank-1 label ignore_index=1"),
    Case("cross_entropy", {"X": rand(2, 3, 4, **_PROB), "Label": _labels((2, 3, 1), 4, 14)},
         id="cross_entropy hard 3-d"),
    Case("cross_entropy", {"X": rand(4, 5, **_PROB), "Label": rand(4, 5, low=0.0, high=1.0, seed=15)},
         {"soft_label": True}, id="cross_entropy soft"),
    # cross_entropy2
    Case("cross_entropy2", {"X": rand(5, 4, **_PROB), "Label": _labels((5, 1), 4, 16, ignore=(1,))},
         id="cross_entropy2"),
    Case("cross_entropy2",
         {"X": rand(2, 3, 4, **_PROB), "Label": _labels((2, 3, 1), 4, 17, ignore=(0, 5), ignore_index=3)},
         {"ignore_index": 3}, id="cross_entropy2 3-d ignore_index=3"),
    # sigmoid_cross_entropy_with_logits
    Case("sigmoid_cross_entropy_with_logits", {"X": rand(3, 4, low=-3, high=3), "Label": _SIG_LABEL},
         id="sigmoid_ce"),
    Case("sigmoid_cross_entropy_with_logits", {"X": rand(3, 4, low=-3, high=3), "Label": _SIG_LABEL_IGN},
         {"normalize": True}, id="sigmoid_ce ignored normalize"),
    Case("sigmoid_cross_entropy_with_logits", {"X": rand(3, 4, low=-3, high=3), "Label": _SIG_LABEL_IGN},
         id="sigmoid_ce ignored"),
    Case("sigmoid_cross_entropy_with_logits",
         {"X": rand(3, 4, low=-3, high=3), "Label": _SIG_LABEL, "pos_weight": _PW},
         id="sigmoid_ce pos_weight"),
    Case("sigmoid_cross_entropy_with_logits",
         {"X": rand(3, 4, low=-3, high=3), "Label": _SIG_LABEL_IGN, "pos_weight": _PW},
         {"normalize": True}, id="sigmoid_ce pos_weight ignored normalize"),
    Case("sigmoid_cross_entropy_with_logits",
         {"X": rand(3, 4, low=-3, high=3), "Label": np.round(_SIG_LABEL)},
         {"ignore_index": 0, "normalize": True}, id="sigmoid_ce ignore_index=0 normalize"),
    # bce_loss
    Case("bce_loss", {"X": rand(3, 4, low=0.05, high=0.95), "Label": rand(3, 4, low=0.0, high=1.0, seed=18)},
         id="bce_loss"),
    # huber_loss: residuals kept away from +-delta
    Case("huber_loss", {"X": rand(3, 4, low=-2, high=2), "Y": rand(3, 4, low=-2, high=2, seed=19)},
         {"delta": 1.0}, id="huber_loss delta=1"),
    Case("huber_loss",
         {"X": np.zeros((2, 5)), "Y": away_from(rand(2, 5, low=-3, high=3, seed=20), [-0.5, 0.5])},
         {"delta": 0.5}, id="huber_loss delta=0.5"),
    # kldiv_loss
    *[Case("kldiv_loss", {"X": _KL_X, "Target": _KL_T}, {"reduction": r}, id=f"kldiv_loss {r}")
      for r in ("none", "batchmean", "mean", "sum")],
    *[Case("kldiv_loss", {"X": _KL_X, "Target": np.log(_KL_T + 0.1)}, {"reduction": r, "log_target": True},
           id=f"kldiv_loss {r} log_target") for r in ("none", "batchmean", "mean", "sum")],
    # label_smooth
    Case("label_smooth", {"X": rand(3, 4)}, {"epsilon": 0.1}, id="label_smooth"),
    Case("label_smooth", {"X": rand(3, 4), "PriorDist": _soft(1, 4, seed=21)}, {"epsilon": 0.25},
         id="label_smooth PriorDist"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


def test_accuracy_not_differentiable():
    assert registry.get("accuracy").grad is registry.NOT_DIFFERENTIABLE


# -- emitted gradient ops: what PaddlePaddle 3.3.1's GradOpMakers emit --------------------------
# forward op -> (grad op type, its input slots, its output slots)
PADDLE_GRAD_OPS = {
    "softmax_with_cross_entropy": ("softmax_with_cross_entropy_grad", {"Label", "Softmax", "Loss@GRAD"},
                                   {"Logits@GRAD"}),
    "cross_entropy": ("cross_entropy_grad", {"Label", "X", "Y@GRAD"}, {"X@GRAD"}),
    "cross_entropy2": ("cross_entropy_grad2", {"Label", "MatchX", "XShape", "Y@GRAD"}, {"X@GRAD"}),
    "sigmoid_cross_entropy_with_logits": ("sigmoid_cross_entropy_with_logits_grad",
                                          {"Label", "Out@GRAD", "X", "pos_weight"}, {"X@GRAD"}),
    "bce_loss": ("bce_loss_grad", {"Label", "Out@GRAD", "X"}, {"X@GRAD"}),
    "huber_loss": ("huber_loss_grad", {"Out@GRAD", "Residual"}, {"X@GRAD", "Y@GRAD"}),
    "kldiv_loss": ("kldiv_loss_grad", {"Loss@GRAD", "Target", "X"}, {"X@GRAD"}),
    "label_smooth": ("label_smooth_grad", {"Out@GRAD"}, {"X@GRAD"}),
}


@pytest.mark.parametrize("op_type", sorted(PADDLE_GRAD_OPS))
def test_grad_op_matches_paddle(op_type):
    gtype, ins, outs = PADDLE_GRAD_OPS[op_type]
    rule = registry.get(op_type).grad
    assert (rule.type or op_type + "_grad") == gtype
    gdef = registry.get(gtype)
    assert set(gdef.input_slots) == ins and set(gdef.output_slots) == outs
    assert gdef.grad_of == op_type
    assert set(registry.get(op_type).attrs) <= set(gdef.attrs)


_GRAD_JSON = Path(__file__).parent / "fixtures" / "paddle_grad_signatures.json"


@pytest.mark.skipif(not _GRAD_JSON.exists(), reason="no paddle_grad_signatures.json")
@pytest.mark.parametrize("op_type", sorted(PADDLE_GRAD_OPS) + ["accuracy"])
def test_grad_op_roles_match_paddle_json(op_type):
    entry = json.loads(_GRAD_JSON.read_text())[op_type]
    rule = registry.get(op_type).grad
    if entry.get("grad") is None and "grad_ops" not in entry:
        assert rule is registry.NOT_DIFFERENTIABLE
        return
    (gop,) = entry["grad_ops"]
    assert (rule.type or op_type + "_grad") == gop["type"]
    fwd = registry.get(op_type)
    for slot, role in gop["inputs"].items():
        assert slot in rule.inputs, slot
        if role.startswith("in:"):
            assert role[3:] == slot and slot in fwd.input_slots
        elif role.startswith("out:"):
            assert role[4:] == slot and slot in fwd.output_slots
        elif role.startswith("grad:out:"):
            assert slot == role[9:] + "@GRAD"
        else:
            assert role == "empty" and fwd.input_slots[slot].dispensable
    assert set(rule.inputs) == set(gop["inputs"])
    assert {s: "grad:in:" + s[:-5] for s in rule.outputs} == gop["outputs"]


def _grad_ops(build):
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        block = main.global_block()
        x, wanted, out = build(block)
        grads = pg.gradients([pg.reduce_sum(out)], wanted)
    return main, x, grads


def test_backward_emits_cross_entropy_grad2_and_no_label_gradient():
    def build(block):
        x = block.create_var("x", [4, 3], "float64", stop_gradient=False)
        block.create_var("lab", [4, 1], "int64", stop_gradient=False)
        outs = {s: [block.create_var(f"ce2_{s}").name] for s in ("Y", "MatchX", "XShape")}
        block.append_op("cross_entropy2", {"X": ["x"], "Label": ["lab"]}, outs, {})
        return x, [x], block.var(outs["Y"][0])
    main, x, (gx,) = _grad_ops(build)
    (op,) = [op for op in main.global_block().ops if op.type == "cross_entropy_grad2"]
    assert op.input("XShape") == ["ce2_XShape"] and op.input("MatchX") == ["ce2_MatchX"]
    assert op.output("X@GRAD") == ["x@GRAD"] and list(gx.shape) == [4, 3]
    assert "lab@GRAD" not in main.global_block().vars


def test_label_smooth_prior_dist_gets_no_gradient():
    def build(block):
        x = block.create_var("x", [2, 3], "float64", stop_gradient=False)
        prior = block.create_var("prior", [1, 3], "float64", stop_gradient=False)
        out = block.create_var("out")
        block.append_op("label_smooth", {"X": ["x"], "PriorDist": ["prior"]}, {"Out": [out.name]},
                        {"epsilon": 0.2})
        return x, [x, prior], out
    main, x, (gx, gprior) = _grad_ops(build)
    assert gx is not None and gprior is None


# -- kernel conventions -----------------------------------------------------------------------------
def _kernel(op_type, inputs, **attrs):
    full = registry.get(op_type).default_attrs()
    full.update(attrs)
    from keel.kernels import registry as kernels
    return call_kernel(op_type, inputs, {k: v for k, v in full.items() if k in kernels.get(op_type).attrs})


@pytest.mark.parametrize("use_softmax", [True, False])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_softmax_with_cross_entropy_grad_ignored_rows_exactly_zero(use_softmax, dtype):
    r = np.random.default_rng(0)
    p = r.uniform(0.1, 1.0, (6, 5))
    p = (p / p.sum(1, keepdims=True)).astype(dtype)
    label = np.array([[1], [-100], [4], [-100], [0], [2]])
    dy = r.uniform(0.5, 1.5, (6, 1)).astype(dtype)
    g = _kernel("softmax_with_cross_entropy_grad", {"Label": label, "Softmax": p, "Loss@GRAD": dy},
                use_softmax=use_softmax)["Logits@GRAD"]
    assert g.dtype == dtype and g.shape == p.shape
    assert np.all(g[[1, 3]] == 0) and not np.signbit(g[[1, 3]]).any()
    p64, dy64 = p.astype(np.float64), dy.astype(np.float64)
    onehot = np.eye(5)[np.where(label[:, 0] < 0, 0, label[:, 0])]
    want = dy64 * (p64 - onehot) if use_softmax else -dy64 * onehot / p64
    want[[1, 3]] = 0
    np.testing.assert_allclose(g.astype(np.float64), want, rtol=2e-3 if dtype == np.float16 else 1e-6)


def test_softmax_with_cross_entropy_grad_soft_label_is_softmax_minus_label():
    # PaddlePaddle's gradient is dy * (softmax - label) even when a label row does not sum to 1
    # (the exact derivative would be dy * (softmax * sum(label) - label)).
    p = np.array([[0.2, 0.3, 0.5], [0.6, 0.3, 0.1]])
    label = np.array([[0.5, 0.5, 0.5], [0.0, 0.2, 0.0]])
    dy = np.array([[2.0], [1.0]])
    g = _kernel("softmax_with_cross_entropy_grad", {"Label": label, "Softmax": p, "Loss@GRAD": dy},
                soft_label=True)["Logits@GRAD"]
    np.testing.assert_allclose(g, dy * (p - label), rtol=1e-15)


def test_softmax_with_cross_entropy_grad_axis_and_ignore_index():
    p = np.random.default_rng(1).uniform(0.1, 1.0, (2, 3, 4))
    label = np.array([[[0, 2, 1, 2]], [[2, 1, 0, 1]]])  # axis 1, ignore_index 2
    dy = np.arange(1.0, 9.0).reshape(2, 1, 4)
    g = _kernel("softmax_with_cross_entropy_grad", {"Label": label, "Softmax": p, "Loss@GRAD": dy},
                axis=1, ignore_index=2)["Logits@GRAD"]
    want = p * dy
    for i in range(2):
        for j in range(4):
            lab = label[i, 0, j]
            if lab == 2:
                want[i, :, j] = 0
            else:
                want[i, lab, j] -= dy[i, 0, j]
    np.testing.assert_allclose(g, want, rtol=1e-15)


def test_cross_entropy2_xshape_carries_x_shape_to_the_gradient():
    x = np.array([[0.1, 0.6, 0.3], [0.2, 0.2, 0.6], [0.5, 0.25, 0.25]])
    label = np.array([[1], [-100], [2]])
    fwd = _kernel("cross_entropy2", {"X": x, "Label": label})
    assert fwd["XShape"].shape == (3, 3, 0) and fwd["XShape"].size == 0
    dy = np.array([[2.0], [3.0], [4.0]])
    g = _kernel("cross_entropy_grad2", {"Label": label, "MatchX": fwd["MatchX"], "XShape": fwd["XShape"],
                                         "Y@GRAD": dy})["X@GRAD"]
    np.testing.assert_array_equal(g, [[0, -2 / 0.6, 0], [0, 0, 0], [0, 0, -16.0]])


def test_cross_entropy_grad_hard_and_soft():
    x = np.array([[0.1, 0.6, 0.3], [0.2, 0.2, 0.6]])
    dy = np.array([[2.0], [3.0]])
    g = _kernel("cross_entropy_grad", {"X": x, "Label": np.array([[0], [-100]]), "Y@GRAD": dy})["X@GRAD"]
    np.testing.assert_array_equal(g, [[-20.0, 0, 0], [0, 0, 0]])
    soft = np.array([[0.0, 1.0, 0.0], [0.5, 0.0, 0.5]])
    g = _kernel("cross_entropy_grad", {"X": x, "Label": soft, "Y@GRAD": dy}, soft_label=True)["X@GRAD"]
    np.testing.assert_allclose(g, -soft * dy / x)


def test_sigmoid_cross_entropy_pos_weight_matches_paddle():
    # PaddlePaddle 3.3.1: Out = (1 - label)*x + pos_weight*softplus(-x), also for x < 0
    x = np.array([[-1.5, -0.3, 0.4, 2.0, -30.0, 30.0]])
    label = np.array([[0.0, 1.0, 0.3, 0.2, 1.0, 0.0]])
    pw = np.array([[2.0, 0.5, 3.0, 1.5, 2.0, 2.0]])
    out = _kernel("sigmoid_cross_entropy_with_logits", {"X": x, "Label": label, "pos_weight": pw})["Out"]
    np.testing.assert_allclose(out, [[1.902827, 0.427178, 1.819046, 1.790392, 60.0, 30.0]], rtol=1e-6)
    # PaddlePaddle 3.3.1 gradient: dy * (pos_weight*sigmoid(x) - label + 1 - pos_weight)
    x, label = x[:, :4], np.array([[0.0, 1.0, 0.3, -100.0]])
    g = _kernel("sigmoid_cross_entropy_with_logits_grad",
                {"X": x, "Label": label, "pos_weight": pw[:, :4],
                 "Out@GRAD": np.array([[1.0, 2.0, 0.5, 1.0]])})
    np.testing.assert_allclose(g["X@GRAD"], [[-0.635149, -0.574443, -0.251969, 0.0]], rtol=2e-6)


def test_sigmoid_cross_entropy_grad_normalize_counts_like_paddle():
    # ignored: int(label) == ignore_index (-100.4 truncates to -100); counted in the norm:
    # |label - ignore_index| > 1e-6 (-100.4 counts). PaddlePaddle 3.3.1 values.
    x = np.array([[-1.5, -0.3, 0.4, 2.0]])
    label = np.array([[-100.0, -99.5, -100.4, 1.0]])
    dy = np.array([[1.0, 2.0, 0.5, 1.0]])
    g = _kernel("sigmoid_cross_entropy_with_logits_grad", {"X": x, "Label": label, "Out@GRAD": dy},
                normalize=True)["X@GRAD"]
    np.testing.assert_allclose(g, [[0.0, 66.617038, 0.0, -0.039734]], rtol=1e-5)
    # every label ignored: 0 (PaddlePaddle's CPU kernel divides 0 by a norm of 0 and gives NaN)
    g = _kernel("sigmoid_cross_entropy_with_logits_grad",
                {"X": x, "Label": np.full((1, 4), -100.0), "Out@GRAD": dy}, normalize=True)["X@GRAD"]
    np.testing.assert_array_equal(g, np.zeros((1, 4)))


def test_bce_loss_grad_clamps_like_paddle():
    x = np.array([0.0, 1e-14, 0.3, 0.99, 1.0])
    label = np.array([0.0, 1.0, 0.5, 0.2, 1.0])
    g = _kernel("bce_loss_grad", {"X": x, "Label": label, "Out@GRAD": np.ones(5)})["X@GRAD"]
    np.testing.assert_allclose(g, [0.0, -1e12, -0.952381, 79.79798, 0.0], rtol=1e-6)


def test_huber_loss_grad_at_and_beyond_delta():
    r = np.array([-3.0, -1.5, -0.2, 0.0, 1.5, 4.0])
    dy = np.full(6, 2.0)
    g = _kernel("huber_loss_grad", {"Residual": r, "Out@GRAD": dy}, delta=1.5)
    np.testing.assert_array_equal(g["Y@GRAD"], [-3.0, -3.0, -0.4, 0.0, 3.0, 3.0])
    np.testing.assert_array_equal(g["X@GRAD"], -g["Y@GRAD"])


def test_kldiv_loss_grad_target_not_positive_and_log_target():
    x = np.log(np.array([[0.2, 0.3], [0.4, 0.1]]))
    t = np.array([[0.5, 0.0], [-0.2, 0.7]])
    g = _kernel("kldiv_loss_grad", {"X": x, "Target": t, "Loss@GRAD": np.array(2.0)},
                reduction="batchmean")["X@GRAD"]
    np.testing.assert_array_equal(g, [[-0.5, 0.0], [0.0, -0.7]])
    g = _kernel("kldiv_loss_grad", {"X": x, "Target": t, "Loss@GRAD": np.array(2.0)},
                reduction="mean", log_target=True)["X@GRAD"]
    np.testing.assert_allclose(g, -np.exp(t) * 2.0 / 4)
