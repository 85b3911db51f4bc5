"""paddle.nn.functional's losses, PaddlePaddle 3.x semantics: `cross_entropy` takes logits
(softmax inside unless use_softmax=False), hard or soft labels, class weights,
ignore_index and label smoothing; each loss reduces by `reduction` ('mean', 'sum',
'none'). The old fluid `cross_entropy` over probabilities is `keel.static.nn.cross_entropy`."""
from __future__ import annotations

import math

from keel.program import dtypes
from keel.program.errors import AttrError, DTypeError
from keel.program.layers import math as M
from keel.program.layers import tensor as T
from keel.program.layers.helper import LayerHelper
from keel.program.layers.manip import take_along_axis
from keel.program.nn import _fail, softmax_with_cross_entropy  # noqa: F401  (paddle.nn.functional's too)
from keel.program.nn.functional.activation import log_sigmoid
from keel.program.nn.functional.common import label_smooth, one_hot
from keel.program.nn.functional.distance import pairwise_distance
from keel.program.nn.rnn import ctc_loss  # noqa: F401  (paddle.nn.functional.ctc_loss)

__all__ = ["cross_entropy", "softmax_with_cross_entropy", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "mse_loss", "l1_loss", "smooth_l1_loss", "nll_loss", "kl_div",
           "ctc_loss", "margin_ranking_loss", "square_error_cost", "log_loss", "hinge_embedding_loss",
           "soft_margin_loss", "cosine_embedding_loss", "sigmoid_focal_loss", "triplet_margin_loss",
           "multi_label_soft_margin_loss", "poisson_nll_loss", "gaussian_nll_loss"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(layer, reduction, allowed=_REDUCTIONS):
    if reduction not in allowed:
        _fail(layer, f"reduction must be one of {', '.join(map(repr, allowed))}, got {reduction!r}", AttrError)


def _reduce(loss, reduction):
    """'mean' (over all elements), 'sum' or 'none'."""
    if reduction == "mean":
        return M.mean(loss)
    if reduction == "sum":
        return M.sum(loss)
    return loss


def _nonzero(total):
    """total + (total == 0): a divisor that turns 0/0 into 0, as PaddlePaddle's losses do."""
    return M.add(total, M.cast(M.equal(total, T.full([], 0.0, total.dtype)), total.dtype))


def _class_weights(weight, label, ignore_index, axis, dtype):
    """weight[label] per sample (0 where label == ignore_index), shaped like `label`
    (hard labels with a size-1 class axis)."""
    keep = M.not_equal(label, T.full([], ignore_index, label.dtype))
    valid = M.multiply(M.cast(keep, label.dtype), label)
    last = valid.ndim - 1
    if axis % valid.ndim != last:  # gather_nd reads the class ids from the last axis
        a = axis % valid.ndim
        valid = T.transpose(valid, [*range(a), *range(a + 1, valid.ndim), a])
    picked = T.gather_nd(weight, valid)
    keep_f = M.cast(keep, dtype)
    if keep_f.ndim > 1:
        keep_f = T.squeeze(keep_f, [axis % keep_f.ndim])
    return T.reshape(M.multiply(picked, keep_f), list(label.shape) if -1 not in label.shape else
                     [d if d >= 0 else -1 for d in label.shape])


def cross_entropy(input, label, weight=None, ignore_index=-100, reduction="mean", soft_label=False, axis=-1,
                  use_softmax=True, label_smoothing=0.0, name=None):
    """Cross entropy of `input` (logits; probabilities with use_softmax=False) along `axis`
    against class ids (`label` of input's shape with a size-1 class axis, or without it) or
    a distribution (soft_label=True, or label_smoothing > 0, which smooths one-hot labels).
    `weight` [classes] scales each sample's loss by its class's weight ('mean' then divides
    by the sum of the weights used); samples labelled ignore_index add nothing ('mean' over
    the others when ignore_index >= 0).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> logits = paddle.to_tensor([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]])
        >>> label = paddle.to_tensor([[0], [1]])
        >>> print(F.cross_entropy(logits, label).numpy().round(4))
        0.3185
        >>> print(F.cross_entropy(logits, label, reduction="none").numpy().round(4))
        [[0.417]
         [0.22 ]]
    """
    layer = "cross_entropy"
    _check_reduction(layer, reduction)
    if ignore_index > 0 and soft_label:
        _fail(layer, f"ignore_index must be -100 with soft_label=True, got {ignore_index}", AttrError)
    input_dims, label_dims = input.ndim, label.ndim
    if input_dims == 0:
        _fail(layer, f"input {input.name} must have at least one dim")
    if input_dims - 1 != label_dims and input_dims != label_dims:
        _fail(layer, f"label {label.name} {label.type_string()} must have the dims of input {input.name} "
                     f"{input.type_string()}, or one fewer")
    if input_dims - 1 == label_dims:
        label = T.unsqueeze(label, [axis % input_dims])
    if label_smoothing > 0.0:
        if input_dims == label_dims and not dtypes.is_floating(label.dtype):
            # PaddlePaddle smooths such labels as they are (one id per sample) and fails in its kernel
            _fail(layer, f"label_smoothing needs class ids without the class axis ({label.name} "
                         f"{label.type_string()} has it) or a float distribution over the classes", DTypeError)
        soft_label = True
        if input_dims - 1 == label_dims:
            label = one_hot(T.squeeze(label, [axis % input_dims]), input.shape[-1])
        label = M.cast(label_smooth(label, epsilon=label_smoothing), input.dtype)
        label_dims = label.ndim
    if not soft_label and dtypes.is_floating(label.dtype):
        _fail(layer, f"hard labels must be integer class ids, got {label.name} {label.type_string()} "
                     f"(pass soft_label=True for a distribution)", DTypeError)
    out, _ = softmax_with_cross_entropy_op(input, label, soft_label, use_softmax, ignore_index, axis, name)
    per_sample = None
    if weight is not None:
        if soft_label:
            per_sample = T.reshape(M.matmul(M.cast(label, weight.dtype), weight, transpose_y=True),
                                   [d if d >= 0 else -1 for d in out.shape])
        else:
            classes = input.shape[axis]
            if classes >= 0 and weight.shape[-1] >= 0 and classes != weight.shape[-1]:
                _fail(layer, f"input's class dim ({classes}) must equal weight's ({weight.shape[-1]})")
            per_sample = _class_weights(weight, label, ignore_index, axis, out.dtype)
        out = M.multiply(M.cast(out, per_sample.dtype), per_sample)
    if reduction == "sum":
        return M.sum(out)
    if reduction == "mean":
        if ignore_index >= 0:
            mask = M.not_equal(label, T.full([], ignore_index, label.dtype))
            total = M.sum(M.cast(mask, out.dtype)) if per_sample is None else \
                M.sum(M.multiply(M.cast(mask, per_sample.dtype), per_sample))
            return M.divide(M.sum(out), _nonzero(total))
        if per_sample is not None:
            return M.divide(M.sum(out), _nonzero(M.sum(per_sample)))
        return M.mean(out)
    if input_dims - 1 == label_dims:
        out = T.squeeze(out, [axis % input_dims])
    return out


def softmax_with_cross_entropy_op(logits, label, soft_label, use_softmax, ignore_index, axis, name=None,
                                  numeric_stable_mode=True):
    """Op softmax_with_cross_entropy: (the loss, with the class axis kept at size 1; the softmax)."""
    helper = LayerHelper("softmax_with_cross_entropy", name)
    softmax = helper.create_tmp(logits.dtype)
    loss = helper.create_tmp(logits.dtype)
    helper.append_op("softmax_with_cross_entropy", {"Logits": logits, "Label": label},
                     {"Softmax": softmax, "Loss": loss},
                     {"soft_label": bool(soft_label), "ignore_index": int(ignore_index),
                      "numeric_stable_mode": bool(numeric_stable_mode), "axis": int(axis),
                      "use_softmax": bool(use_softmax)})
    return loss, softmax


def sigmoid_cross_entropy_op(logit, label, pos_weight=None, ignore_index=-100, normalize=False, name=None):
    """Op sigmoid_cross_entropy_with_logits (pos_weight, when given, scales its log term)."""
    helper = LayerHelper("sigmoid_cross_entropy_with_logits", name)
    out = helper.create_tmp(logit.dtype)
    inputs = {"X": logit, "Label": label}
    if pos_weight is not None:
        inputs["pos_weight"] = pos_weight
    helper.append_op("sigmoid_cross_entropy_with_logits", inputs, {"Out": out},
                     {"ignore_index": int(ignore_index), "normalize": bool(normalize)})
    return out


def binary_cross_entropy(input, label, weight=None, reduction="mean", name=None):
    """-(label * log(input) + (1 - label) * log(1 - input)) of probabilities (op bce_loss),
    times `weight` when given.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> prob = paddle.to_tensor([0.5, 0.6, 0.7])
        >>> label = paddle.to_tensor([1.0, 0.0, 1.0])
        >>> print(F.binary_cross_entropy(prob, label).numpy().round(4))
        0.6554
    """
    _check_reduction("binary_cross_entropy", reduction)
    helper = LayerHelper("binary_cross_entropy", name)
    out = helper.create_tmp(input.dtype)
    helper.append_op("bce_loss", {"X": input, "Label": label}, {"Out": out})
    if weight is not None:
        out = M.multiply(out, weight)
    return _reduce(out, reduction)


def binary_cross_entropy_with_logits(logit, label, weight=None, reduction="mean", pos_weight=None, name=None):
    """Sigmoid cross entropy of logits (op sigmoid_cross_entropy_with_logits),
    -(pos_weight * label * log(sigmoid(x)) + (1 - label) * log(1 - sigmoid(x))), times
    `weight` when given.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> logit = paddle.to_tensor([5.0, 1.0, 3.0])
        >>> label = paddle.to_tensor([1.0, 0.0, 1.0])
        >>> print(F.binary_cross_entropy_with_logits(logit, label).numpy().round(4))
        0.4562
    """
    _check_reduction("binary_cross_entropy_with_logits", reduction)
    if pos_weight is not None:
        # the op scales the whole log term by its pos_weight input: PaddlePaddle gives it
        # label * (pos_weight - 1) + 1, so only the positive term is scaled
        one = T.full([1], 1.0, logit.dtype)
        pos_weight = M.add(M.multiply(label, M.subtract(pos_weight, one)), one)
    out = sigmoid_cross_entropy_op(logit, label, pos_weight, name=name)
    if weight is not None:
        out = M.multiply(out, weight)
    return _reduce(out, reduction)


def mse_loss(input, label, reduction="mean", name=None):
    """(input - label)^2, reduced.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([1.5, 2.0])
        >>> label = paddle.to_tensor([1.7, 1.0])
        >>> print(F.mse_loss(x, label).numpy().round(4))
        0.52
    """
    _check_reduction("mse_loss", reduction)
    return _reduce(M.square(M.subtract(input, label)), reduction)


def square_error_cost(input, label):
    """(input - label)^2 per element.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([1.1, 1.9])
        >>> label = paddle.to_tensor([1.0, 2.0])
        >>> print(F.square_error_cost(x, label).numpy().round(4))
        [0.01 0.01]
    """
    return M.square(M.subtract(input, label))


def l1_loss(input, label, reduction="mean", name=None):
    """|input - label|, reduced.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[1.5, 0.8], [0.2, 1.3]])
        >>> label = paddle.to_tensor([[1.7, 1.0], [0.4, 0.5]])
        >>> print(F.l1_loss(x, label).numpy().round(4))
        0.35
        >>> print(F.l1_loss(x, label, reduction="none").numpy().round(4))
        [[0.2 0.2]
         [0.2 0.8]]
    """
    _check_reduction("l1_loss", reduction)
    return _reduce(M.abs(M.subtract(input, label)), reduction)


def smooth_l1_loss(input, label, reduction="mean", delta=1.0, is_huber=True, name=None):
    """The Huber loss of input - label (op huber_loss): 0.5 r^2 for |r| <= delta, else
    delta * (|r| - 0.5 delta); divided by delta when is_huber is False.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[0.5, 3.0], [1.0, 1.0]])
        >>> label = paddle.to_tensor([[0.0, 0.0], [1.0, 2.5]])
        >>> print(F.smooth_l1_loss(x, label, reduction="none").numpy())
        [[0.125 2.5  ]
         [0.    1.   ]]
    """
    _check_reduction("smooth_l1_loss", reduction)
    helper = LayerHelper("huber_loss", name)
    out = helper.create_tmp(input.dtype)
    residual = helper.create_tmp(input.dtype, stop_gradient=True)
    helper.append_op("huber_loss", {"X": input, "Y": label}, {"Out": out, "Residual": residual},
                     {"delta": float(delta)})
    if not is_huber:
        out = M.scale(out, 1.0 / float(delta))
    return _reduce(out, reduction)


def nll_loss(input, label, weight=None, ignore_index=-100, reduction="mean", name=None):
    """-input[n, label[n]] * weight[label[n]] of log-probabilities `input` [N, C] or
    [N, C, d1, ...] and class ids `label` [N] or [N, d1, ...]; samples labelled
    ignore_index add nothing; 'mean' divides by the sum of the weights used.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> log_prob = paddle.log(paddle.to_tensor([[0.5, 0.25, 0.25], [0.1, 0.8, 0.1]]))
        >>> label = paddle.to_tensor([0, 1])
        >>> print(F.nll_loss(log_prob, label).numpy().round(4))
        0.4581
    """
    layer = "nll_loss"
    _check_reduction(layer, reduction)
    if input.ndim < 2:
        _fail(layer, f"input must be [N, C] or [N, C, d1, ...], got {input.name} {input.type_string()}")
    if label.ndim != input.ndim - 1:
        _fail(layer, f"label {label.name} {label.type_string()} must have one dim fewer than input "
                     f"{input.name} {input.type_string()}")
    if dtypes.is_floating(label.dtype):
        _fail(layer, f"label must hold int class ids, got {label.name} {label.type_string()}", DTypeError)
    keep = M.not_equal(label, T.full([], ignore_index, label.dtype))
    ids = M.multiply(M.cast(keep, label.dtype), label)  # ignored samples read class 0, then count 0
    picked = T.squeeze(take_along_axis(input, T.unsqueeze(ids, [1]), 1), [1])
    used = M.cast(keep, input.dtype)
    if weight is not None:
        used = M.multiply(used, T.reshape(T.gather(weight, T.reshape(ids, [-1])),
                                          [d if d >= 0 else -1 for d in label.shape]))
    out = M.scale(M.multiply(picked, used), -1.0)
    if reduction == "mean":
        return M.divide(M.sum(out), _nonzero(M.sum(used)))
    return _reduce(out, reduction)


def kl_div(input, label, reduction="mean", log_target=False, name=None):
    """label * (log(label) - input) per element (input: log-probabilities; label too with
    log_target; op kldiv_loss), then 'mean', 'sum', 'batchmean' (sum / batch size) or 'none'.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> log_p = paddle.log(paddle.to_tensor([[0.25, 0.75]]))
        >>> target = paddle.to_tensor([[0.5, 0.5]])
        >>> print(F.kl_div(log_p, target, reduction="sum").numpy().round(4))
        0.1438
    """
    _check_reduction("kl_div", reduction, (*_REDUCTIONS, "batchmean"))
    if input.dtype != label.dtype:  # PaddlePaddle computes in the wider of the two
        wide = dtypes.to_code("float64")
        input, label = (M.cast(input, wide) if input.dtype != wide else input,
                        M.cast(label, wide) if label.dtype != wide else label)
    helper = LayerHelper("kl_div", name)
    loss = helper.create_tmp(input.dtype)
    helper.append_op("kldiv_loss", {"X": input, "Target": label}, {"Loss": loss},
                     {"reduction": "none", "log_target": bool(log_target)})
    if reduction == "batchmean":
        if input.ndim == 0:
            return loss
        batch = M.cast(T.slice(T.shape(input), [0], [0], [1]), loss.dtype)
        return M.divide(M.sum(loss), T.reshape(batch, []))
    return _reduce(loss, reduction)


def margin_ranking_loss(input, other, label, margin=0.0, reduction="mean", name=None):
    """max(0, -label * (input - other) + margin), reduced.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> other = paddle.to_tensor([[2.0, 1.0], [2.0, 4.0]])
        >>> label = paddle.to_tensor([[1.0, -1.0], [-1.0, -1.0]])
        >>> print(F.margin_ranking_loss(x, other, label).numpy())
        0.75
    """
    _check_reduction("margin_ranking_loss", reduction)
    out = M.multiply(M.subtract(other, input), label)
    if margin != 0.0:  # a constant of the loss's dtype (a float32 scale attribute would round it)
        out = M.add(out, T.full([1], float(margin), out.dtype))
    return _reduce(M.relu(out), reduction)


# -- more losses, written in ops as PaddlePaddle's functions compute them -------------------------
def _const(value, like):
    return T.full([1], float(value), like.dtype)


def _where_label(label, value, x, zeros):
    return M.where(M.equal(label, T.full_like(label, float(value))), x, zeros)


def log_loss(input, label, epsilon=0.0001, name=None):
    """-label * log(input + epsilon) - (1 - label) * log(1 - input + epsilon) of probabilities.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> prob = paddle.to_tensor([[0.9], [0.2]])
        >>> label = paddle.to_tensor([[1.0], [0.0]])
        >>> print(F.log_loss(prob, label).numpy().round(4))
        [[0.1052]
         [0.223 ]]
    """
    one = _const(1.0, input)
    eps = _const(epsilon, input)
    pos = M.multiply(label, M.log(M.add(input, eps)))
    neg = M.multiply(M.subtract(one, label), M.log(M.add(M.subtract(one, input), eps)))
    return M.scale(M.add(pos, neg), -1.0)


def hinge_embedding_loss(input, label, margin=1.0, reduction="mean", name=None):
    """input where label == 1, max(0, margin - input) where label == -1, else 0; reduced.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[0.0, 1.0, 2.0], [-1.0, 0.5, 3.0]])
        >>> label = paddle.to_tensor([[-1.0, 1.0, -1.0], [1.0, 1.0, -1.0]])
        >>> print(F.hinge_embedding_loss(x, label, margin=1.0, reduction="none").numpy())
        [[ 1.   1.   0. ]
         [-1.   0.5  0. ]]
    """
    _check_reduction("hinge_embedding_loss", reduction)
    zeros = T.zeros_like(input)
    hinge = M.relu(M.subtract(_const(margin, input), input))
    return _reduce(M.add(_where_label(label, 1.0, input, zeros), _where_label(label, -1.0, hinge, zeros)), reduction)


def soft_margin_loss(input, label, reduction="mean", name=None):
    """log(1 + exp(-label * input)), reduced.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[0.5, 0.6, 0.7], [0.3, 0.5, 0.2]])
        >>> label = paddle.to_tensor([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]])
        >>> print(F.soft_margin_loss(x, label).numpy().round(4))
        0.6402
    """
    _check_reduction("soft_margin_loss", reduction)
    label = M.cast(label, input.dtype)
    out = M.log(M.add(_const(1.0, input), M.exp(M.multiply(M.scale(label, -1.0), input))))
    return _reduce(out, reduction)


def cosine_embedding_loss(input1, input2, label, margin=0, reduction="mean", name=None):
    """1 - cos(input1, input2) where label == 1, max(0, cos - margin) where label == -1
    (cos over the last axis, each squared norm + 1e-11), reduced.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> a = paddle.to_tensor([[1.6, 1.2, -0.5], [3.2, 2.6, -5.8]])
        >>> b = paddle.to_tensor([[0.5, 0.5, -1.8], [2.3, -1.4, 1.1]])
        >>> label = paddle.to_tensor([1, -1])
        >>> print(F.cosine_embedding_loss(a, b, label, margin=0.5, reduction="none").numpy().round(4))
        [0.4231 0.    ]
    """
    layer = "cosine_embedding_loss"
    _check_reduction(layer, reduction)
    if label.ndim != 1 or input1.ndim > 2:
        _fail(layer, f"label must be 1-d and the inputs 1-d or 2-d, got {label.type_string()}, "
                     f"{input1.type_string()}")
    prod = M.sum(M.multiply(input1, input2), axis=-1)
    mag1 = M.add(M.sum(M.square(input1), axis=-1), _const(10e-12, input1))
    mag2 = M.add(M.sum(M.square(input2), axis=-1), _const(10e-12, input1))
    cos = M.divide(prod, M.sqrt(M.multiply(mag1, mag2)))
    zeros = T.zeros_like(cos)
    pos = M.subtract(_const(1.0, cos), cos)
    neg = M.clip(M.subtract(cos, _const(margin, cos)), min=0.0)
    return _reduce(M.add(_where_label(label, 1.0, pos, zeros), _where_label(label, -1.0, neg, zeros)), reduction)


def sigmoid_focal_loss(logit, label, normalizer=None, alpha=0.25, gamma=2.0, reduction="sum", name=None):
    """alpha_t * (1 - p_t)^gamma * sigmoid cross entropy, p_t = sigmoid(logit) for positive
    labels, 1 - it for negative ones; divided by `normalizer` when given; reduced ('sum').

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> logit = paddle.to_tensor([[0.97, 0.91, 0.03], [0.55, 0.43, 0.71]])
        >>> label = paddle.to_tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]])
        >>> one = paddle.to_tensor([1.0])
        >>> print(F.sigmoid_focal_loss(logit, label, normalizer=one).numpy().round(4))
        1.3156
    """
    layer = "sigmoid_focal_loss"
    _check_reduction(layer, reduction)
    if normalizer is not None and normalizer.ndim > 1:
        _fail(layer, f"normalizer must have zero or one dim, got {normalizer.type_string()}")
    one = T.ones_like(logit)
    loss = sigmoid_cross_entropy_op(logit, label)
    pred = M.sigmoid(logit)
    p_t = M.add(M.multiply(pred, label), M.multiply(M.subtract(one, pred), M.subtract(one, label)))
    a = _const(alpha, loss)
    alpha_t = M.add(M.multiply(a, label), M.multiply(M.subtract(one, a), M.subtract(one, label)))
    loss = M.multiply(alpha_t, loss)
    loss = M.multiply(M.pow(M.subtract(one, p_t), _const(gamma, loss)), loss)
    if normalizer is not None:
        loss = M.divide(loss, normalizer)
    return _reduce(loss, reduction)


def triplet_margin_loss(input, positive, negative, margin=1.0, p=2, epsilon=1e-06, swap=False, reduction="mean",
                        name=None):
    """max(0, d(input, positive) - d(input, negative) + margin), d the pairwise p-norm
    distance (with swap, d(input, negative) is min'ed with d(positive, negative)); reduced.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> anchor = paddle.to_tensor([[1.0, 5.0, 3.0], [0.0, 3.0, 2.0], [1.0, 4.0, 1.0]])
        >>> positive = paddle.to_tensor([[5.0, 1.0, 2.0], [3.0, 2.0, 1.0], [3.0, -1.0, 1.0]])
        >>> negative = paddle.to_tensor([[2.0, 1.0, -3.0], [1.0, 1.0, -1.0], [4.0, -2.0, 1.0]])
        >>> print(F.triplet_margin_loss(anchor, positive, negative, margin=1.0, reduction="none").numpy().round(4))
        [0.    0.575 0.   ]
    """
    layer = "triplet_margin_loss"
    _check_reduction(layer, reduction)
    if margin < 0:
        _fail(layer, f"margin must be >= 0, got {margin}", AttrError)
    pos = pairwise_distance(input, positive, p, epsilon)
    neg = pairwise_distance(input, negative, p, epsilon)
    if swap:
        neg = M.minimum(neg, pairwise_distance(positive, negative, p, epsilon))
    return _reduce(M.clip(M.add(M.subtract(pos, neg), _const(margin, pos)), min=0.0), reduction)


def multi_label_soft_margin_loss(input, label, weight=None, reduction="mean", name=None):
    """-(label * log_sigmoid(input) + (1 - label) * log_sigmoid(-input)), times weight,
    averaged over the last axis, then reduced.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[1.0, -2.0, 3.0], [0.0, -1.0, 2.0]])
        >>> label = paddle.to_tensor([[-1.0, 1.0, -1.0], [1.0, 1.0, 1.0]])
        >>> print(F.multi_label_soft_margin_loss(x, label, reduction="none").numpy().round(4))
        [3.4963 0.7111]
    """
    _check_reduction("multi_label_soft_margin_loss", reduction)
    one = _const(1.0, input)
    loss = M.scale(M.add(M.multiply(label, log_sigmoid(input)),
                         M.multiply(M.subtract(one, label), log_sigmoid(M.scale(input, -1.0)))), -1.0)
    if weight is not None:
        loss = M.multiply(loss, weight)
    return _reduce(M.mean(loss, axis=-1), reduction)


def poisson_nll_loss(input, label, log_input=True, full=False, epsilon=1e-08, reduction="mean", name=None):
    """exp(input) - label * input (log_input), else input - label * log(input + epsilon);
    full adds Stirling's term where label > 1; reduced.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> log_rate = paddle.to_tensor([0.0, 1.0, 2.0])
        >>> label = paddle.to_tensor([1.0, 2.0, 3.0])
        >>> print(F.poisson_nll_loss(log_rate, label, reduction="none").numpy().round(4))
        [1.     0.7183 1.3891]
    """
    layer = "poisson_nll_loss"
    _check_reduction(layer, reduction)
    if epsilon <= 0:
        _fail(layer, f"epsilon must be positive, got {epsilon}", AttrError)
    if log_input:
        loss = M.subtract(M.exp(input), M.multiply(label, input))
    else:
        loss = M.subtract(input, M.multiply(label, M.log(M.add(input, _const(epsilon, input)))))
    if full:
        stirling = M.add(M.subtract(M.multiply(label, M.log(label)), label),
                         M.scale(M.log(M.scale(label, 2 * math.pi)), 0.5))
        loss = M.add(loss, M.where(M.greater_than(label, T.full_like(label, 1.0)), stirling,
                                   T.zeros_like(stirling)))
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, label, variance, full=False, epsilon=1e-06, reduction="mean", name=None):
    """0.5 * (log(v) + (input - label)^2 / v), v the variance clipped to >= epsilon (and,
    as PaddlePaddle's, not differentiated); full adds 0.5 * log(2 pi); reduced.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> mean = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> label = paddle.to_tensor([[1.5, 2.0], [2.0, 4.0]])
        >>> variance = paddle.ones([2, 2])
        >>> print(F.gaussian_nll_loss(mean, label, variance).numpy().round(4))
        0.1562
    """
    layer = "gaussian_nll_loss"
    _check_reduction(layer, reduction)
    if list(variance.shape) != list(input.shape):
        if list(input.shape[:-1]) == list(variance.shape):
            variance = T.unsqueeze(variance, [-1])
        elif not (list(input.shape[:-1]) == list(variance.shape[:-1]) and variance.shape[-1] == 1):
            _fail(layer, f"variance {variance.type_string()} does not fit input {input.type_string()}")
    # PaddlePaddle clips under no_grad(): no gradient reaches the variance
    variance = M.clip(variance, min=float(epsilon))
    variance.stop_gradient = True
    loss = M.scale(M.add(M.log(variance), M.divide(M.square(M.subtract(input, label)), variance)), 0.5)
    if full:
        loss = M.scale(loss, 1.0, 0.5 * math.log(2 * math.pi))
    return _reduce(loss, reduction)
