"""keel.nn.functional against numpy references of PaddlePaddle's documented semantics, each
function run eagerly on Tensors and statically in a program (the same results), and the
gradients of the functions that compose ops in new ways checked by finite differences."""
from __future__ import annotations

import numpy as np
import pytest

import keel as paddle
import keel.nn.functional as F
import keel.program as pg
from keel.executor import Executor, Scope

from gradcheck import check_function_grads

rng = np.random.default_rng(7)


def run_both(fn, *arrays, **kwargs):
    """fn(*tensors, **kwargs) eagerly and in a static program; both results (asserted equal)."""
    eager = fn(*[paddle.to_tensor(a) for a in arrays], **kwargs)
    eager = [t.numpy() for t in eager] if isinstance(eager, (tuple, list)) else eager.numpy()
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        xs = [pg.data(f"in{i}", list(a.shape), str(a.dtype)) for i, a in enumerate(arrays)]
        out = fn(*xs, **kwargs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    got = Executor().run(main, feed={f"in{i}": a for i, a in enumerate(arrays)}, fetch_list=outs, scope=Scope())
    static = got if isinstance(out, (tuple, list)) else got[0]
    for e, s in zip(eager if isinstance(eager, list) else [eager], got):
        np.testing.assert_allclose(e, s, rtol=1e-6, atol=1e-7)
    return static


def log_softmax(x, axis=-1):
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


# -- cross_entropy ---------------------------------------------------------------------------
LOGITS = rng.standard_normal((6, 5))
HARD = np.array([0, 4, 2, 2, 1, 3], "int64")
WEIGHT = np.array([0.5, 1.0, 2.0, 1.5, 0.25])


def ce_reference(logits, label, weight=None, ignore_index=-100, reduction="mean", soft=False, smoothing=0.0):
    logp = log_softmax(logits)
    c = logits.shape[-1]
    if smoothing > 0:
        target = (np.eye(c)[label] if not soft else label) * (1 - smoothing) + smoothing / c
        soft = True
    else:
        target = label
    if soft:
        loss = -(target * logp).sum(-1)
        w = (target * weight).sum(-1) if weight is not None else np.ones_like(loss)
        loss = loss * w
        valid = np.ones_like(loss)
    else:
        valid = (label != ignore_index).astype(float)
        safe = np.where(label == ignore_index, 0, label)
        loss = -logp[np.arange(len(label)), safe] * valid
        w = weight[safe] * valid if weight is not None else valid
        loss = loss * (w if weight is not None else 1.0)
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    if not soft and ignore_index >= 0:
        return loss.sum() / max((w if weight is not None else valid).sum(), 1e-30)
    if weight is not None:
        return loss.sum() / w.sum()
    return loss.mean()


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [-100, 2])
def test_cross_entropy_hard_labels(reduction, weighted, ignore_index):
    kwargs = dict(reduction=reduction, ignore_index=ignore_index)
    arrays = [LOGITS, HARD] + ([WEIGHT] if weighted else [])
    got = run_both(lambda x, y, *w: F.cross_entropy(x, y, weight=w[0] if w else None, **kwargs), *arrays)
    want = ce_reference(LOGITS, HARD, WEIGHT if weighted else None, ignore_index, reduction)
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_cross_entropy_label_with_class_axis_and_other_axis():
    got = run_both(lambda x, y: F.cross_entropy(x, y, reduction="none"), LOGITS, HARD[:, None])
    np.testing.assert_allclose(got, ce_reference(LOGITS, HARD, reduction="none")[:, None], rtol=1e-10)
    x3 = rng.standard_normal((2, 5, 3))        # classes on axis 1
    y3 = rng.integers(0, 5, (2, 3)).astype("int64")
    got = run_both(lambda x, y: F.cross_entropy(x, y, axis=1, reduction="none"), x3, y3)
    want = ce_reference(x3.transpose(0, 2, 1).reshape(6, 5), y3.reshape(6), reduction="none").reshape(2, 3)
    np.testing.assert_allclose(got, want, rtol=1e-10)


@pytest.mark.parametrize("weighted", [False, True])
def test_cross_entropy_soft_labels_and_label_smoothing(weighted):
    soft = rng.dirichlet(np.ones(5), 6)
    w = [WEIGHT] if weighted else []
    got = run_both(lambda x, y, *ws: F.cross_entropy(x, y, weight=ws[0] if ws else None, soft_label=True), LOGITS,
                   soft, *w)
    np.testing.assert_allclose(got, ce_reference(LOGITS, soft, WEIGHT if weighted else None, soft=True), rtol=1e-10)
    got = run_both(lambda x, y, *ws: F.cross_entropy(x, y, weight=ws[0] if ws else None, label_smoothing=0.1),
                   LOGITS, HARD, *w)
    # the smoothed one-hot labels are float32, as in PaddlePaddle
    np.testing.assert_allclose(got, ce_reference(LOGITS, HARD, WEIGHT if weighted else None, smoothing=0.1),
                               rtol=1e-6)


def test_cross_entropy_use_softmax_false_reads_probabilities():
    probs = np.exp(log_softmax(LOGITS))
    got = run_both(lambda p, y: F.cross_entropy(p, y, use_softmax=False), probs, HARD)
    np.testing.assert_allclose(got, ce_reference(LOGITS, HARD), rtol=1e-9)


def test_keel_nn_cross_entropy_is_not_the_fluid_function():
    assert not hasattr(paddle.nn, "cross_entropy")
    assert paddle.nn.functional.cross_entropy is F.cross_entropy
    assert paddle.static.nn.cross_entropy is pg.nn.cross_entropy        # fluid's, over probabilities
    # on logits, the fluid function is not the loss: F.cross_entropy is
    want = ce_reference(LOGITS, HARD)
    assert np.isclose(float(F.cross_entropy(paddle.to_tensor(LOGITS), paddle.to_tensor(HARD)).numpy()), want)


@pytest.mark.parametrize("kwargs", [dict(soft_label=True), dict(label_smoothing=0.2),
                                    dict(weight="w"), dict(ignore_index=1), dict(weight="w", ignore_index=2)],
                         ids=str)
def test_cross_entropy_gradients(kwargs):
    soft = "soft_label" in kwargs
    inputs = {"x": rng.standard_normal((4, 5)),
              "y": rng.dirichlet(np.ones(5), 4) if soft else np.array([0, 1, 2, 4], "int64")}
    if kwargs.get("weight") == "w":
        inputs["w"] = WEIGHT.copy()
    def fn(x, y, w=None):
        args = dict(kwargs, weight=w) if "weight" in kwargs else kwargs
        return F.cross_entropy(x, y, **args)
    check_function_grads(fn, inputs, ["x"])


# -- other losses -------------------------------------------------------------------------------
def test_nll_loss_with_weight_and_ignore_index_and_its_gradient():
    logp = log_softmax(rng.standard_normal((5, 4, 3)), axis=1)     # [N, C, d1]
    label = rng.integers(0, 4, (5, 3)).astype("int64")
    label[0, 0] = -100
    w = np.array([1.0, 2.0, 0.5, 1.5])
    got = run_both(lambda x, y, ww: F.nll_loss(x, y, ww), logp, label, w)
    safe = np.where(label < 0, 0, label)
    picked = np.take_along_axis(logp, safe[:, None], 1)[:, 0]
    used = w[safe] * (label >= 0)
    np.testing.assert_allclose(got, -(picked * used).sum() / used.sum(), rtol=1e-10)
    none = run_both(lambda x, y: F.nll_loss(x, y, reduction="none"), logp, label)
    np.testing.assert_allclose(none, -picked * (label >= 0), rtol=1e-10)
    check_function_grads(lambda x, y, ww: F.nll_loss(x, y, ww), {"x": logp, "y": label, "ww": w}, ["x"])


@pytest.mark.parametrize("reduction", ["mean", "sum", "batchmean", "none"])
@pytest.mark.parametrize("log_target", [False, True])
def test_kl_div(reduction, log_target):
    x = log_softmax(rng.standard_normal((3, 4)))
    t = rng.dirichlet(np.ones(4), 3)
    target = np.log(t) if log_target else t
    got = run_both(lambda a, b: F.kl_div(a, b, reduction, log_target), x, target)
    per = t * (np.log(t) - x)
    want = {"mean": per.mean(), "sum": per.sum(), "batchmean": per.sum() / 3, "none": per}[reduction]
    np.testing.assert_allclose(got, want, rtol=1e-10)
    if reduction == "batchmean":
        check_function_grads(lambda a, b: F.kl_div(a, b, reduction, log_target), {"a": x, "b": target}, ["a"])


def test_binary_and_regression_losses():
    p = rng.uniform(0.05, 0.95, (4, 3))
    y = (rng.uniform(size=(4, 3)) > 0.5).astype(float)
    w = rng.uniform(0.5, 2, (4, 3))
    bce = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    np.testing.assert_allclose(run_both(lambda a, b, c: F.binary_cross_entropy(a, b, c), p, y, w), (bce * w).mean(),
                               rtol=1e-10)
    z = rng.standard_normal((4, 3))
    pw = np.array([1.0, 2.0, 0.5])
    sig = 1 / (1 + np.exp(-z))
    bcel = -(pw * y * np.log(sig) + (1 - y) * np.log(1 - sig))
    got = run_both(lambda a, b, c, d: F.binary_cross_entropy_with_logits(a, b, c, "sum", d), z, y, w, pw)
    np.testing.assert_allclose(got, (bcel * w).sum(), rtol=1e-9)
    np.testing.assert_allclose(run_both(F.mse_loss, z, y), ((z - y) ** 2).mean(), rtol=1e-12)
    np.testing.assert_allclose(run_both(lambda a, b: F.l1_loss(a, b, "sum"), z, y), np.abs(z - y).sum(), rtol=1e-12)
    r = np.abs(z - y)
    huber = np.where(r <= 0.5, 0.5 * r ** 2, 0.5 * (r - 0.25))
    np.testing.assert_allclose(run_both(lambda a, b: F.smooth_l1_loss(a, b, "none", 0.5), z, y), huber, rtol=1e-12)
    np.testing.assert_allclose(run_both(lambda a, b: F.smooth_l1_loss(a, b, "mean", 0.5, False), z, y),
                               (huber / 0.5).mean(), rtol=1e-12)
    lab = np.array([[1.0], [-1.0], [1.0], [-1.0]])
    want = np.maximum(0, -lab * (z - y) + 0.3).mean()
    np.testing.assert_allclose(run_both(lambda a, b, c: F.margin_ranking_loss(a, b, c, 0.3), z, y, lab), want,
                               rtol=1e-12)
    check_function_grads(lambda a, b, c: F.margin_ranking_loss(a, b, c, 0.3), {"a": z, "b": y, "c": lab}, ["a", "b"])


# -- attention ------------------------------------------------------------------------------------
def sdpa_reference(q, k, v, mask=None, causal=False):
    q, k, v = (t.transpose(0, 2, 1, 3) for t in (q, k, v))
    rep = q.shape[1] // k.shape[1]
    k, v = np.repeat(k, rep, axis=1), np.repeat(v, rep, axis=1)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
    if causal:
        s = s + np.triu(np.full(s.shape[-2:], -np.inf), 1)
    elif mask is not None:
        s = s + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    p = np.exp(s - s.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    return (p @ v).transpose(0, 2, 1, 3)


@pytest.mark.parametrize("case", ["plain", "float mask", "bool mask", "causal", "gqa"])
def test_scaled_dot_product_attention(case):
    q = rng.standard_normal((2, 4, 4, 3))
    kv_heads = 2 if case == "gqa" else 4
    k, v = rng.standard_normal((2, 5 if case != "causal" else 4, kv_heads, 3)), None
    v = rng.standard_normal(k.shape)
    mask = {"float mask": rng.standard_normal((4, 5)), "bool mask": rng.uniform(size=(2, 1, 4, 5)) > 0.3}.get(case)
    if mask is not None and mask.dtype == bool:
        mask[..., 0] = True
    arrays = [q, k, v] + ([mask] if mask is not None else [])
    got = run_both(lambda a, b, c, *m: F.scaled_dot_product_attention(a, b, c, m[0] if m else None,
                                                                     is_causal=case == "causal"), *arrays)
    # the scale is a float32 attribute (op scale), as in PaddlePaddle
    np.testing.assert_allclose(got, sdpa_reference(q, k, v, mask, case == "causal"), rtol=1e-6, atol=1e-7)
    if case in ("float mask", "gqa"):
        inputs = {"a": q, "b": k, "c": v, **({"m": mask} if mask is not None else {})}
        check_function_grads(lambda a, b, c, m=None: F.scaled_dot_product_attention(a, b, c, m), inputs,
                             ["a", "b", "c"])


# -- layers' functions -------------------------------------------------------------------------------
def test_linear_conv_and_pools_against_numpy():
    x = rng.standard_normal((2, 3))
    w, b = rng.standard_normal((3, 4)), rng.standard_normal(4)
    np.testing.assert_allclose(run_both(F.linear, x, w, b), x @ w + b, rtol=1e-12)
    seq = rng.standard_normal((2, 3, 7))
    k = rng.standard_normal((4, 3, 3))
    got = run_both(lambda a, kk: F.conv1d(a, kk, padding=1, stride=2), seq, k)
    padded = np.pad(seq, ((0, 0), (0, 0), (1, 1)))
    want = np.stack([np.einsum("ncl,ocl->no", padded[:, :, i:i + 3], k) for i in range(0, 7, 2)], -1)
    np.testing.assert_allclose(got, want, rtol=1e-10)
    img = rng.standard_normal((1, 2, 3, 3))
    wt = rng.standard_normal((2, 1, 2, 2))
    got = run_both(lambda a, ww: F.conv2d_transpose(a, ww, stride=2, output_padding=1), img, wt)
    want = np.zeros((1, 1, 7, 7))
    for i in range(3):
        for j in range(3):
            want[0, 0, 2 * i:2 * i + 2, 2 * j:2 * j + 2] += np.einsum("c,cxy->xy", img[0, :, i, j], wt[:, 0])
    np.testing.assert_allclose(got, want, rtol=1e-10)
    got, mask = run_both(lambda a: F.max_pool1d(a, 2, return_mask=True), seq)
    np.testing.assert_allclose(got, seq[:, :, :6].reshape(2, 3, 3, 2).max(-1))
    np.testing.assert_array_equal(mask, seq[:, :, :6].reshape(2, 3, 3, 2).argmax(-1) + np.arange(0, 6, 2))
    got = run_both(lambda a: F.avg_pool2d(a, 2, divisor_override=3), rng.standard_normal((1, 1, 4, 4)))
    assert got.shape == (1, 1, 2, 2)
    a = rng.standard_normal((1, 2, 6))
    np.testing.assert_allclose(run_both(lambda t: F.adaptive_avg_pool1d(t, 3), a), a.reshape(1, 2, 3, 2).mean(-1))


def test_norms_embedding_one_hot_pad_interpolate_and_activations():
    x = rng.standard_normal((4, 3, 2))
    mean, var = np.zeros(3), np.ones(3)
    got = run_both(lambda t, m, v: F.batch_norm(t, m, v, training=True), x, mean.copy(), var.copy())
    mu, sd = x.mean((0, 2), keepdims=True), x.var((0, 2), keepdims=True)
    np.testing.assert_allclose(got, (x - mu) / np.sqrt(sd + 1e-5), rtol=1e-9)
    got = run_both(lambda t: F.layer_norm(t, [3, 2]), x)
    m2, v2 = x.reshape(4, -1).mean(1), x.reshape(4, -1).var(1)
    np.testing.assert_allclose(got, ((x.reshape(4, -1) - m2[:, None]) / np.sqrt(v2[:, None] + 1e-5)).reshape(x.shape),
                               rtol=1e-9)
    got = run_both(lambda t: F.normalize(t, p=1, axis=1), x)
    np.testing.assert_allclose(got, x / np.abs(x).sum(1, keepdims=True), rtol=1e-12)
    check_function_grads(lambda t: F.normalize(t, axis=1), {"t": x}, ["t"])
    table = rng.standard_normal((5, 3))
    ids = np.array([[0, 4], [2, 4]], "int64")
    got = run_both(lambda i, t: F.embedding(i, t, padding_idx=-1), ids, table)
    want = table[ids]
    want[ids == 4] = 0
    np.testing.assert_allclose(got, want)
    np.testing.assert_array_equal(run_both(lambda i: F.one_hot(i, 5), ids), np.eye(5)[ids])
    img = rng.standard_normal((1, 1, 2, 3))
    np.testing.assert_allclose(run_both(lambda t: F.pad(t, [1, 0, 2, 1], mode="reflect"), img),
                               np.pad(img, ((0, 0), (0, 0), (2, 1), (1, 0)), mode="reflect"))
    np.testing.assert_allclose(run_both(lambda t: F.pad(t, [0, 0, 0, 0, 1, 1, 0, 2], value=3.0), img),
                               np.pad(img, ((0, 0), (0, 0), (1, 1), (0, 2)), constant_values=3.0))
    np.testing.assert_allclose(run_both(lambda t: F.pad(t, [0, 2, 1, 1], pad_from_left_axis=False, mode="constant",
                                                        data_format="NCHW"), img[0]),
                               np.pad(img[0], ((0, 0), (1, 1), (0, 2))))
    np.testing.assert_allclose(run_both(lambda t: F.interpolate(t, scale_factor=2), img),
                               img.repeat(2, 2).repeat(2, 3))
    line = rng.standard_normal((1, 1, 3))
    got = run_both(lambda t: F.interpolate(t, size=5, mode="linear", align_corners=True), line)
    np.testing.assert_allclose(got[0, 0], np.interp(np.linspace(0, 2, 5), np.arange(3), line[0, 0]), rtol=1e-12)
    z = rng.standard_normal((2, 4))
    np.testing.assert_allclose(run_both(F.glu, z), z[:, :2] / (1 + np.exp(-z[:, 2:])), rtol=1e-12)
    check_function_grads(F.glu, {"x": z}, ["x"])
    np.testing.assert_allclose(run_both(lambda t: F.hardtanh(t, -0.5, 0.5), z), np.clip(z, -0.5, 0.5))
    alpha = np.array([0.1, 0.2, 0.3, 0.4])
    np.testing.assert_allclose(run_both(lambda t, a: F.prelu(t, a), z, alpha), np.where(z > 0, z, alpha * z))


def test_layer_classes_call_the_functions_in_both_modes():
    loss_fn = paddle.nn.CrossEntropyLoss(weight=paddle.to_tensor(WEIGHT), label_smoothing=0.1)
    got = float(loss_fn(paddle.to_tensor(LOGITS), paddle.to_tensor(HARD)).numpy())
    np.testing.assert_allclose(got, ce_reference(LOGITS, HARD, WEIGHT, smoothing=0.1), rtol=1e-6)
    conv = paddle.nn.Conv1D(3, 4, 3, padding=1)
    x = rng.standard_normal((2, 3, 7)).astype("float32")
    eager = conv(paddle.to_tensor(x)).numpy()
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        y = conv(pg.data("x", [-1, 3, 7]))
    static, = Executor().run(main, feed={"x": x}, fetch_list=[y])  # the global scope holds the layer's values
    np.testing.assert_allclose(eager, static, rtol=1e-6)


def test_bad_arguments_name_the_function():
    with pytest.raises(Exception, match="cross_entropy.*reduction"):
        F.cross_entropy(paddle.to_tensor(LOGITS), paddle.to_tensor(HARD), reduction="avg")
    with pytest.raises(Exception, match="label_smoothing needs class ids"):
        F.cross_entropy(paddle.to_tensor(LOGITS), paddle.to_tensor(HARD[:, None]), label_smoothing=0.1)
    with pytest.raises(Exception, match="bicubic"):
        F.interpolate(paddle.to_tensor(rng.standard_normal((1, 1, 2, 2))), size=[4, 4], mode="bicubic")
    with pytest.raises(Exception, match="conv2d.*channels"):
        F.conv2d(paddle.to_tensor(rng.standard_normal((1, 3, 4, 4))), paddle.to_tensor(rng.standard_normal((2, 2, 1, 1))))


def test_the_functions_written_in_ops_in_both_modes():
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    sign = np.sign(rng.standard_normal((4, 5)))
    cos = (a * b).sum(1) / np.sqrt((a * a).sum(1) * (b * b).sum(1))
    np.testing.assert_allclose(run_both(F.cosine_similarity, a, b), cos, rtol=1e-12)
    check_function_grads(F.cosine_similarity, {"x1": a, "x2": b}, ["x1", "x2"])
    np.testing.assert_allclose(run_both(F.pairwise_distance, a, b), np.sqrt(((a - b + 1e-6) ** 2).sum(-1)),
                               rtol=1e-12)
    silu = a / (1 + np.exp(-a))
    np.testing.assert_allclose(run_both(F.swiglu, a, b), silu * b, rtol=1e-12)
    np.testing.assert_allclose(run_both(lambda x, y: F.hinge_embedding_loss(x, y, 0.5, "none"), a, sign),
                               np.where(sign == 1, a, np.maximum(0, 0.5 - a)), rtol=1e-12)
    np.testing.assert_allclose(run_both(F.soft_margin_loss, a, sign), np.log1p(np.exp(-sign * a)).mean(), rtol=1e-12)
    pos, neg = np.sqrt(((a - b + 1e-6) ** 2).sum(-1)), np.sqrt(((a - sign + 1e-6) ** 2).sum(-1))
    np.testing.assert_allclose(run_both(F.triplet_margin_loss, a, b, sign), np.maximum(pos - neg + 1, 0).mean(),
                               rtol=1e-12)
    check_function_grads(lambda x, p, n: F.triplet_margin_loss(x, p, n, reduction="sum"),
                         {"x": a, "p": b, "n": sign}, ["x", "p", "n"])
    y01 = (sign > 0).astype(float)
    prob = 1 / (1 + np.exp(-a))
    p_t = prob * y01 + (1 - prob) * (1 - y01)
    alpha_t = 0.25 * y01 + 0.75 * (1 - y01)
    focal = alpha_t * (1 - p_t) ** 2 * -(y01 * np.log(prob) + (1 - y01) * np.log(1 - prob))
    np.testing.assert_allclose(run_both(F.sigmoid_focal_loss, a, y01), focal.sum(), rtol=1e-10)
    for fn, args in [(F.cosine_embedding_loss, (a, b, np.array([1, -1, 1, -1], "int64"))),
                     (F.multi_label_soft_margin_loss, (a, y01)), (F.poisson_nll_loss, (a, np.abs(b))),
                     (F.gaussian_nll_loss, (a, b, np.abs(sign[:, :1]) * 0.5)), (F.logsigmoid, (a,)),
                     (F.log_loss, (prob[:, :1], y01[:, :1]))]:
        run_both(fn, *args)                                          # eager and static agree
    img = rng.standard_normal((1, 4, 2, 2))
    np.testing.assert_allclose(run_both(lambda t: F.channel_shuffle(t, 2), img), img[:, [0, 2, 1, 3]])
    x = rng.standard_normal((1, 2, 4, 6))
    np.testing.assert_allclose(run_both(lambda t: F.pixel_shuffle(F.pixel_unshuffle(t, 2), 2), x), x)


@pytest.mark.parametrize("make,shape", [
    (lambda: paddle.nn.Conv1DTranspose(3, 2, 3, stride=2, output_padding=1), (2, 3, 5)),
    (lambda: paddle.nn.Conv3DTranspose(3, 2, 2, stride=2), (1, 3, 2, 3, 2)),
    (lambda: paddle.nn.PReLU(3), (2, 3, 4)), (lambda: paddle.nn.BatchNorm3D(3), (2, 3, 2, 2, 2)),
    (lambda: paddle.nn.InstanceNorm1D(3), (2, 3, 5)), (lambda: paddle.nn.GroupNorm(3, 3, affine=False), (2, 3, 4)),
    (lambda: paddle.nn.ReflectionPad2D([1, 0, 2, 1]), (1, 3, 4, 4)), (lambda: paddle.nn.Maxout(3), (1, 6, 2, 2)),
    (lambda: paddle.nn.AvgPool3D(2, ceil_mode=True, exclusive=False), (1, 3, 3, 5, 5)),
    (lambda: paddle.nn.UpsamplingBilinear2D(scale_factor=2), (1, 3, 2, 3)),
    (lambda: paddle.nn.Unflatten(1, [3, 1]), (2, 3, 4)), (lambda: paddle.nn.ChannelShuffle(3), (1, 6, 2, 2)),
], ids=lambda v: "" if callable(v) else str(v))
def test_new_layer_classes_run_the_same_in_both_modes(make, shape):
    layer = make()
    x = rng.standard_normal(shape).astype("float32")
    layer.eval()
    eager = layer(paddle.to_tensor(x)).numpy()
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        y = layer(pg.data("x", list(shape)))
    static, = Executor().run(main, feed={"x": x}, fetch_list=[y])     # the global scope holds the layer's values
    np.testing.assert_allclose(eager, static, rtol=1e-6, atol=1e-7)


def test_nn_utils_clip_and_flatten_gradients_in_place():
    params = [paddle.to_tensor(rng.standard_normal((2, 3)), stop_gradient=False),
              paddle.to_tensor(rng.standard_normal(4), stop_gradient=False)]
    (params[0].sum() * 3 + (params[1] * 4).sum()).backward()          # grads 3 (x6) and 4 (x4)
    total = paddle.nn.utils.clip_grad_norm_(params, 1.0)
    norm = np.sqrt(6 * 9 + 4 * 16)
    np.testing.assert_allclose(float(total), norm, rtol=1e-12)
    np.testing.assert_allclose(params[0].grad.numpy(), np.full((2, 3), 3 / (norm + 1e-6)), rtol=1e-12)
    paddle.nn.utils.clip_grad_value_(params, 0.2)
    for p in params:                                                     # 0.28 and 0.37 -> 0.2 (a float32 bound)
        np.testing.assert_allclose(p.grad.numpy(), 0.2, rtol=1e-7)
    vec = paddle.nn.utils.parameters_to_vector(params)
    assert vec.shape == [10]
    paddle.nn.utils.vector_to_parameters(vec * 0, params)
    assert not params[0].numpy().any() and not params[1].numpy().any()
    with pytest.raises(ValueError, match="norm_type"):
        paddle.nn.utils.clip_grad_norm_(params, 1.0, norm_type=3)
