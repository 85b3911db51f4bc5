"""Label shapes and dtypes of the cross-entropy ops (issue 32), from PaddlePaddle's
documented semantics: cross_entropy / cross_entropy2 with a Label [N] give Y [N] (with
[N, 1], Y [N, 1]); cross_entropy2's MatchX keeps [N, 1]; softmax_with_cross_entropy takes
any integer label type."""
import numpy as np
import pytest

from oprun import check_grads, grads, run
from shapecheck import build

X = np.random.default_rng(0).uniform(0.1, 1.0, (4, 5))
LABEL = np.array([1, 0, 4, 2])


def _nll(x, label):
    return -np.log(x[np.arange(len(label)), label])


@pytest.mark.parametrize("label_shape", [(4,), (4, 1)])
def test_cross_entropy_y_has_the_labels_shape(label_shape):
    label = LABEL.reshape(label_shape)
    y = run("cross_entropy", {"X": X, "Label": label})["Y"]
    assert y.shape == label_shape
    np.testing.assert_allclose(y.reshape(-1), _nll(X, LABEL), rtol=1e-14)
    assert build("cross_entropy", {"X": ([4, 5], "float64"), "Label": (list(label_shape), "int64")},
                 {"Y": 1})["Y"] == (list(label_shape), "float64")
    check_grads("cross_entropy", {"X": X, "Label": label}, ["X"])


@pytest.mark.parametrize("label_shape", [(4,), (4, 1)])
def test_cross_entropy2_y_has_the_labels_shape(label_shape):
    label = LABEL.reshape(label_shape)
    outs = run("cross_entropy2", {"X": X, "Label": label})
    assert outs["Y"].shape == label_shape and outs["MatchX"].shape == (4, 1)
    np.testing.assert_allclose(outs["Y"].reshape(-1), _nll(X, LABEL), rtol=1e-14)
    np.testing.assert_allclose(outs["MatchX"].reshape(-1), X[np.arange(4), LABEL], rtol=1e-14)
    shapes = build("cross_entropy2", {"X": ([4, 5], "float64"), "Label": (list(label_shape), "int64")},
                   {"Y": 1, "MatchX": 1, "XShape": 1})
    assert shapes["Y"] == (list(label_shape), "float64") and shapes["MatchX"] == ([4, 1], "float64")
    dy = np.array([0.5, 1.5, -1.0, 2.0]).reshape(label_shape)
    g = grads("cross_entropy2", {"X": X, "Label": label}, {"Y": dy}, wrt=["X"])["X"]
    want = np.zeros_like(X)
    want[np.arange(4), LABEL] = -dy.reshape(-1) / X[np.arange(4), LABEL]
    np.testing.assert_allclose(g, want, rtol=1e-14)


@pytest.mark.parametrize("dtype", [np.int8, np.int16, np.int32, np.int64, np.uint8])
def test_softmax_with_cross_entropy_integer_labels(dtype):
    logits = np.random.default_rng(1).normal(size=(4, 5))
    label = LABEL.reshape(4, 1).astype(dtype)
    outs = run("softmax_with_cross_entropy", {"Logits": logits, "Label": label})
    logp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.testing.assert_allclose(outs["Loss"].reshape(-1), -logp[np.arange(4), LABEL], rtol=1e-12)
    g = grads("softmax_with_cross_entropy", {"Logits": logits, "Label": label},
              {"Loss": np.ones((4, 1))}, wrt=["Logits"])["Logits"]
    want = np.exp(logp)
    want[np.arange(4), LABEL] -= 1
    np.testing.assert_allclose(g, want, rtol=1e-12, atol=1e-15)


def test_softmax_with_cross_entropy_refuses_float_hard_labels():
    from keel.program.errors import DTypeError
    with pytest.raises(DTypeError, match="integer class indices"):
        run("softmax_with_cross_entropy", {"Logits": np.zeros((2, 3)), "Label": np.zeros((2, 1), np.float32)})
