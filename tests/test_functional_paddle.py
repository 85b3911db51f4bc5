"""keel.nn.functional against PaddlePaddle 3.3.1's paddle.nn.functional (optional oracle:
needs `paddle`, skipped without it): cross_entropy's whole option matrix and a sample of the
other functions, on the same inputs, in eager mode.

    PYTHONPATH=.:tests python -m pytest -q -m paddle tests/test_functional_paddle.py
"""
from __future__ import annotations

import itertools
import os

import numpy as np
import pytest

os.environ.setdefault("FLAGS_enable_pir_api", "0")
paddle = pytest.importorskip("paddle")

import keel  # noqa: E402
import keel.nn.functional as KF  # noqa: E402

pytestmark = pytest.mark.paddle
PF = paddle.nn.functional
rng = np.random.default_rng(11)


def both(name, arrays, rtol=1e-6, atol=1e-7, **kwargs):
    """name(*arrays, **kwargs) in Keel and in PaddlePaddle (None stays None)."""
    def call(module, to_tensor):
        return getattr(module, name)(*[None if a is None else to_tensor(a) for a in arrays], **kwargs)
    ours, theirs = call(KF, keel.to_tensor), call(PF, paddle.to_tensor)
    pairs = zip(ours, theirs) if isinstance(ours, (tuple, list)) else [(ours, theirs)]
    for o, t in pairs:
        np.testing.assert_allclose(o.numpy(), t.numpy(), rtol=rtol, atol=atol, err_msg=f"{name} {kwargs}")


LOGITS = rng.standard_normal((6, 5))
HARD = np.array([0, 4, 2, 2, 1, 3], "int64")
WEIGHT = rng.uniform(0.2, 2.0, 5)
# (label_smoothing with [N, 1] class ids fails inside PaddlePaddle's label_smooth kernel; Keel refuses it)
MATRIX = [c for c in itertools.product(["mean", "sum", "none"], [False, True], [-100, 2], [0.0, 0.15], [1, 2])
          if not (c[3] and c[4] == 2)]


@pytest.mark.parametrize("reduction,weighted,ignore_index,smoothing,label_dims", MATRIX)
def test_cross_entropy_hard_labels_matrix(reduction, weighted, ignore_index, smoothing, label_dims):
    label = HARD if label_dims == 1 else HARD[:, None]
    both("cross_entropy", [LOGITS, label, WEIGHT if weighted else None], reduction=reduction,
         ignore_index=ignore_index, label_smoothing=smoothing)


@pytest.mark.parametrize("reduction,weighted", list(itertools.product(["mean", "sum", "none"], [False, True])))
def test_cross_entropy_soft_labels_axis_and_probabilities(reduction, weighted):
    soft = rng.dirichlet(np.ones(5), 6)
    both("cross_entropy", [LOGITS, soft, WEIGHT if weighted else None], reduction=reduction, soft_label=True)
    x3, y3 = rng.standard_normal((2, 5, 3)), rng.integers(0, 5, (2, 3)).astype("int64")
    both("cross_entropy", [x3, y3, WEIGHT if weighted else None], reduction=reduction, axis=1)
    probs = np.exp(LOGITS) / np.exp(LOGITS).sum(-1, keepdims=True)
    both("cross_entropy", [probs, HARD, WEIGHT if weighted else None], reduction=reduction, use_softmax=False)


def test_cross_entropy_gradients_equal_paddles():
    x = rng.standard_normal((6, 5))
    ours, theirs = keel.to_tensor(x, stop_gradient=False), paddle.to_tensor(x, stop_gradient=False)
    KF.cross_entropy(ours, keel.to_tensor(HARD), keel.to_tensor(WEIGHT), ignore_index=2, label_smoothing=0.1).backward()
    PF.cross_entropy(theirs, paddle.to_tensor(HARD), paddle.to_tensor(WEIGHT), ignore_index=2,
                     label_smoothing=0.1).backward()
    np.testing.assert_allclose(ours.grad.numpy(), theirs.grad.numpy(), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses(reduction):
    logp = np.log(rng.dirichlet(np.ones(4), 5))
    label = rng.integers(0, 4, 5).astype("int64")
    label[1] = -100
    both("nll_loss", [logp, label, rng.uniform(0.5, 2, 4)], reduction=reduction)
    both("kl_div", [logp, rng.dirichlet(np.ones(4), 5)], reduction=reduction)
    p, y = rng.uniform(0.05, 0.95, (5, 4)), (rng.uniform(size=(5, 4)) > 0.5).astype("float64")
    both("binary_cross_entropy", [p, y, rng.uniform(0.5, 2, (5, 4))], reduction=reduction)
    both("binary_cross_entropy_with_logits", [logp, y, None], reduction=reduction, pos_weight=None)
    z = rng.standard_normal((5, 4))
    ours = KF.binary_cross_entropy_with_logits(keel.to_tensor(z), keel.to_tensor(y), reduction=reduction,
                                               pos_weight=keel.to_tensor(np.arange(1.0, 5.0)))
    theirs = PF.binary_cross_entropy_with_logits(paddle.to_tensor(z), paddle.to_tensor(y), reduction=reduction,
                                                 pos_weight=paddle.to_tensor(np.arange(1.0, 5.0)))
    np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-10)
    both("smooth_l1_loss", [z, y], reduction=reduction, delta=0.5, is_huber=False)
    both("margin_ranking_loss", [z, y, np.sign(rng.standard_normal((5, 4)))], margin=0.2, reduction=reduction)
    both("kl_div", [logp, np.log(rng.dirichlet(np.ones(4), 5))], reduction="batchmean", log_target=True)


@pytest.mark.parametrize("case", ["plain", "causal", "bool mask", "gqa"])
def test_scaled_dot_product_attention(case):
    q = rng.standard_normal((2, 4, 4, 8)).astype("float32")
    k = rng.standard_normal((2, 4, 2 if case == "gqa" else 4, 8)).astype("float32")
    v = rng.standard_normal(k.shape).astype("float32")
    mask = (rng.uniform(size=(2, 1, 4, 4)) > 0.3) | np.eye(4, dtype=bool) if case == "bool mask" else None
    both("scaled_dot_product_attention", [q, k, v, mask], rtol=1e-5, atol=1e-6, is_causal=case == "causal")


def test_layers_functions_sample():
    x = rng.standard_normal((2, 3, 9)).astype("float32")
    both("conv1d", [x, rng.standard_normal((4, 3, 3)).astype("float32"), None], rtol=1e-5, atol=1e-5, stride=2,
         padding=[1, 2])
    both("conv1d_transpose", [x, rng.standard_normal((3, 2, 3)).astype("float32"), None], rtol=1e-5, atol=1e-5,
         stride=2, output_padding=1)
    img = rng.standard_normal((2, 3, 7, 6)).astype("float32")
    both("conv2d_transpose", [img, rng.standard_normal((3, 2, 3, 3)).astype("float32"),
                              rng.standard_normal(2).astype("float32")], rtol=1e-5, atol=1e-5, stride=2, padding=1,
         output_size=[14, 12])
    both("max_pool1d", [x], kernel_size=3, stride=2, padding=1, return_mask=True)
    both("avg_pool2d", [img], kernel_size=3, stride=2, padding=1, ceil_mode=True)
    both("avg_pool2d", [img], kernel_size=3, stride=2, padding=1, exclusive=False)
    # not exclusive with ceil_mode or a larger trailing padding: the divisor stops at the
    # input's end plus the leading padding
    for kwargs in (dict(kernel_size=3, stride=2, padding=1, ceil_mode=True, exclusive=False),
                   dict(kernel_size=3, stride=2, padding=[0, 1, 1, 1], ceil_mode=True, exclusive=False),
                   dict(kernel_size=2, stride=2, padding=[0, 1, 0, 1], exclusive=False)):
        both("avg_pool2d", [img], **kwargs)
    vol = rng.standard_normal((1, 2, 5, 6, 7)).astype("float32")
    both("avg_pool3d", [vol], kernel_size=3, stride=2, padding=1, ceil_mode=True, exclusive=False)
    both("avg_pool3d", [vol], kernel_size=2, stride=2, padding=[0, 1, 1, 0, 0, 1], ceil_mode=True, exclusive=False)
    both("avg_pool2d", [img], kernel_size=2, divisor_override=3)
    both("adaptive_max_pool2d", [img], output_size=[3, 4], return_mask=True)
    both("adaptive_avg_pool1d", [x], output_size=4)
    both("interpolate", [img], size=[11, 5], mode="bilinear", align_corners=False, align_mode=0)
    both("interpolate", [x], scale_factor=1.5, mode="linear")
    both("interpolate", [img], scale_factor=2, mode="nearest", data_format="NHWC")
    both("interpolate", [img], size=[3, 2], mode="area")
    both("pad", [img], pad=[1, 2, 0, 1], mode="replicate")
    both("pad", [img], pad=[1, 0, 2, 1, 0, 0, 1, 1], value=0.5)
    both("pad", [img], pad=[1, 0, 2, 1, 0, 0, 1, 1], pad_from_left_axis=False)
    both("pad", [x], pad=[2, 1], mode="circular")
    both("normalize", [img], p=3, axis=2)
    both("glu", [img], axis=-1)
    both("hardtanh", [img], min=-0.3, max=0.4)
    both("one_hot", [np.array([[1, 3], [0, 2]], "int64")], num_classes=4)
    both("label_smooth", [np.eye(4, dtype="float32")], epsilon=0.2)
    w = rng.standard_normal((5, 3)).astype("float32")
    both("embedding", [np.array([[0, 4], [2, 1]], "int64"), w], padding_idx=-1)
    both("group_norm", [img], rtol=1e-5, atol=1e-5, num_groups=3)
    both("layer_norm", [img], rtol=1e-5, atol=1e-5, normalized_shape=[7, 6])
    both("batch_norm", [img, np.zeros(3, "float32"), np.ones(3, "float32")], rtol=1e-5, atol=1e-5, training=True)
    both("instance_norm", [img], rtol=1e-5, atol=1e-5)
    both("prelu", [img, np.array([0.1, 0.2, 0.3], "float32")])
    both("pixel_shuffle", [rng.standard_normal((1, 8, 2, 3)).astype("float32")], upscale_factor=2)


def test_the_functions_written_in_ops():
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    sign = np.sign(rng.standard_normal((4, 5)))
    both("cosine_similarity", [a, b], axis=1)
    both("cosine_similarity", [a, b[:1]], axis=0)
    both("pairwise_distance", [a, b], p=3.0, keepdim=True)
    both("swiglu", [a, b])
    both("swiglu", [rng.standard_normal((4, 6))])
    both("logsigmoid", [a])
    p, y = rng.uniform(0.05, 0.95, (4, 1)), (rng.uniform(size=(4, 1)) > 0.5)
    both("log_loss", [p.astype("float32"), y.astype("float32")], epsilon=1e-3)    # float32 only in PaddlePaddle
    for reduction in ("mean", "sum", "none"):
        both("hinge_embedding_loss", [a, sign], margin=0.5, reduction=reduction)
        both("soft_margin_loss", [a, sign], reduction=reduction)
        both("cosine_embedding_loss", [a, b, np.array([1, -1, 1, -1], "int64")], margin=0.1, reduction=reduction)
        both("sigmoid_focal_loss", [a, (sign > 0).astype("float64"), np.array([3.0])], reduction=reduction)
        both("triplet_margin_loss", [a, b, rng.standard_normal((4, 5))], swap=True, reduction=reduction)
        both("multi_label_soft_margin_loss", [a, (sign > 0).astype("float64"), rng.uniform(size=(4, 5))],
             reduction=reduction)
        rate = rng.uniform(0.5, 3, (4, 5))
        counts = rng.integers(0, 5, (4, 5)).astype("float64")
        both("poisson_nll_loss", [np.log(rate), counts], full=True, reduction=reduction)
        both("poisson_nll_loss", [rate, counts], log_input=False, reduction=reduction)
        both("gaussian_nll_loss", [a, b, rng.uniform(0.0, 1.0, (4, 1))], full=True, reduction=reduction)
    img = rng.standard_normal((2, 6, 4, 4)).astype("float32")
    both("channel_shuffle", [img], groups=3)
    both("channel_shuffle", [img.transpose(0, 2, 3, 1).copy()], groups=2, data_format="NHWC")
    both("pixel_unshuffle", [img], downscale_factor=2)
    both("pixel_unshuffle", [img.transpose(0, 2, 3, 1).copy()], downscale_factor=2, data_format="NHWC")
    both("zeropad2d", [img], padding=[1, 0, 2, 3])


X1, X2, X3 = (rng.standard_normal(s).astype("float32") for s in ((2, 6, 8), (2, 6, 8, 8), (2, 6, 4, 4, 4)))
LAYERS = [  # (class name, args, kwargs, input)
    ("ELU", (0.5,), {}, X2), ("CELU", (), {"alpha": 2.0}, X2), ("SELU", (), {}, X2), ("Softplus", (2, 1), {}, X2),
    ("Softshrink", (0.3,), {}, X2), ("Hardshrink", (), {}, X2), ("Hardtanh", (-0.2, 0.4), {}, X2),
    ("ThresholdedReLU", (0.5,), {}, X2), ("LogSigmoid", (), {}, X2), ("LogSoftmax", (1,), {}, X2),
    ("Softmax2D", (), {}, X2), ("Maxout", (3,), {}, X2), ("GLU", (1,), {}, X2), ("Mish", (), {}, X2),
    ("Swish", (), {}, X2), ("Softsign", (), {}, X2), ("Tanhshrink", (), {}, X2), ("SiLU", (), {}, X2),
    ("MaxPool1D", (3, 2, 1), {}, X1), ("AvgPool1D", (2,), {"exclusive": False}, X1), ("AdaptiveAvgPool1D", (3,), {}, X1),
    ("AdaptiveMaxPool1D", (3,), {}, X1), ("MaxPool3D", (2,), {}, X3), ("AvgPool3D", (3, 1, 1), {}, X3),
    ("AdaptiveAvgPool3D", (2,), {}, X3), ("AdaptiveMaxPool3D", ([2, 1, 2],), {}, X3),
    ("Upsample", (), {"scale_factor": 2, "mode": "bilinear"}, X2), ("UpsamplingBilinear2D", (), {"scale_factor": 2}, X2),
    ("UpsamplingNearest2D", ([5, 7],), {}, X2), ("PixelShuffle", (2,), {}, rng.standard_normal((1, 8, 3, 3))),
    ("PixelUnshuffle", (2,), {}, X2), ("ChannelShuffle", (3,), {}, X2), ("Unfold", ([2, 3],), {"strides": 2}, X2),
    ("ReflectionPad2D", ([1, 1, 2, 0],), {}, X2), ("ZeroPad2D", (1,), {}, X2), ("ConstantPad1D", (2, 0.5), {}, X1),
    ("Pad3D", (1,), {"mode": "replicate"}, X3), ("CircularPad2d", ([1, 2, 0, 1],), {}, X2),
    ("ReplicationPad1D", ([0, 2],), {}, X1), ("Unflatten", (1, [2, 3]), {}, X2),
    ("Conv1D", (6, 4, 3), {"padding": 1, "stride": 2}, X1), ("Conv2d", (6, 4, 3), {"bias": False}, X2),
    ("Conv1DTranspose", (6, 2, 3), {"stride": 2, "output_padding": 1}, X1),
    ("Conv2DTranspose", (6, 2, 3, 2, 1, 1, 1, 2), {}, X2), ("Conv3DTranspose", (6, 3, 2), {"stride": 2}, X3),
    ("PReLU", (6,), {}, X2), ("PReLU", (), {"init": 0.1}, X2), ("BatchNorm1D", (6,), {}, X1),
    ("BatchNorm3D", (6,), {}, X3), ("InstanceNorm1D", (6,), {}, X1), ("InstanceNorm3D", (6,), {}, X3),
    ("GroupNorm", (3, 6), {"affine": False}, X2), ("LayerNorm", ([8, 8],), {"bias": False}, X2),
]


@pytest.mark.parametrize("name,args,kwargs,x", LAYERS, ids=[f"{c[0]}{i}" for i, c in enumerate(LAYERS)])
@pytest.mark.parametrize("training", [True, False])
def test_layer_classes_match_paddles(name, args, kwargs, x, training):
    theirs = getattr(paddle.nn, name)(*args, **kwargs)
    ours = getattr(keel.nn, name)(*args, **kwargs)
    state = {k: v.numpy() for k, v in theirs.state_dict().items()}
    if state:
        ours.set_state_dict(state)
    for layer in (ours, theirs):
        layer.train() if training else layer.eval()
    got, want = ours(keel.to_tensor(x)), theirs(paddle.to_tensor(x))
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-5)
    if state and training:   # running statistics, updated in place, too
        np.testing.assert_allclose(
            np.concatenate([np.ravel(v) for v in ours.state_dict().values()]),
            np.concatenate([np.ravel(v.numpy()) for v in theirs.state_dict().values()]), rtol=1e-5, atol=1e-6)


def test_embedding_and_the_distance_and_loss_layers_match_paddles():
    table = rng.standard_normal((5, 3)).astype("float32")
    ids = np.array([[0, 4], [2, 1]], "int64")
    ours = keel.nn.Embedding(5, 3, 1, _weight=keel.to_tensor(table))
    theirs = paddle.nn.Embedding(5, 3, 1, _weight=paddle.to_tensor(table))
    np.testing.assert_allclose(ours(keel.to_tensor(ids)).numpy(), theirs(paddle.to_tensor(ids)).numpy())
    a, b = rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    for name, args in [("CosineSimilarity", (0,)), ("PairwiseDistance", (1.5,)), ("HingeEmbeddingLoss", (0.3,)),
                       ("SoftMarginLoss", ()), ("PoissonNLLLoss", (False,)), ("MultiLabelSoftMarginLoss", ())]:
        y = np.abs(b) if name == "PoissonNLLLoss" else (np.sign(b) if "Margin" in name else b)
        got = getattr(keel.nn, name)(*args)(keel.to_tensor(np.abs(a) if name == "PoissonNLLLoss" else a),
                                            keel.to_tensor(y))
        want = getattr(paddle.nn, name)(*args)(paddle.to_tensor(np.abs(a) if name == "PoissonNLLLoss" else a),
                                               paddle.to_tensor(y))
        # (PaddlePaddle's p_norm raises to 1/p computed in float32: a few 1e-8 apart for p=1.5)
        np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-7, err_msg=name)


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
def test_nn_utils_match_paddles(norm_type):
    values = [rng.standard_normal((3, 4)), rng.standard_normal(5)]
    grads = [rng.standard_normal(v.shape) * 3 for v in values]

    def run(lib):
        params = [lib.to_tensor(v, stop_gradient=False) for v in values]
        loss = sum((p * lib.to_tensor(g)).sum() for p, g in zip(params, grads))
        loss.backward()
        total = lib.nn.utils.clip_grad_norm_(params, 1.5, norm_type)
        clipped = [p.grad.numpy().copy() for p in params]
        lib.nn.utils.clip_grad_value_(params, 0.1)
        vec = lib.nn.utils.parameters_to_vector(params)
        lib.nn.utils.vector_to_parameters(vec * 2, params)
        return [total.numpy(), *clipped, *[p.grad.numpy() for p in params], vec.numpy(), *[p.numpy() for p in params]]

    for ours, theirs in zip(run(keel), run(paddle)):
        np.testing.assert_allclose(ours, theirs, rtol=1e-6)
