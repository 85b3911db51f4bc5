"""Loss kernels with PaddlePaddle's legacy semantics.

- A "tolerable" log: Paddle's cross-entropy functors replace log(0) = -inf by -1e20
  (TolerableValue), so a zero probability costs 1e20, not inf.
- softmax_with_cross_entropy computes log-softmax directly (max-shifted), as Paddle's
  numerically stable GPU path does, so huge logits give finite losses.
- Statistics run in at least float32 and results are cast back to the input dtype.
"""
from __future__ import annotations

from kernels.registry import kernel

_APPROX_INF = 1e20  # Paddle's TolerableValue bound


def _cdt(xp, dtype):
    return xp.promote_types(dtype, xp.float32)


def _tolerable_log(xp, p):
    """log(p) with -inf (p == 0) and +inf replaced by -1e20 and 1e20."""
    zero = p == 0
    out = xp.log(xp.where(zero, 1, p))
    out = xp.where(zero, -_APPROX_INF, out)
    return xp.where(out == xp.inf, _APPROX_INF, out)


def _check_labels(xp, label, num_classes, ignore_index, op_type):
    bad = ((label < 0) | (label >= num_classes)) & (label != ignore_index)
    if label.size and bool(bad.any()):
        value = int(label[bad].reshape(-1)[0])
        raise IndexError(f"{op_type}: label {value} is out of range: labels must be in "
                         f"[0, {num_classes}) or equal ignore_index ({ignore_index})")


def _hard_label_loss(xp, logp, label, axis, ignore_index, op_type):
    """-logp[label] along `axis` (label has size 1 there); 0 where label == ignore_index."""
    label = label.astype(xp.int64, copy=False)
    _check_labels(xp, label, logp.shape[axis], ignore_index, op_type)
    ignored = label == ignore_index
    picked = xp.take_along_axis(logp, xp.where(ignored, 0, label), axis=axis)
    return xp.where(ignored, xp.zeros((), logp.dtype), -picked)


def _label_at_axis(label, logits, axis):
    """A hard label of rank rank(logits)-1 gets its size-1 class dim inserted at `axis`."""
    if label.ndim == logits.ndim - 1:
        shape = list(label.shape)
        shape.insert(axis, 1)
        label = label.reshape(shape)
    return label


@kernel("softmax_with_cross_entropy", inputs=["Logits", "Label"], outputs=["Softmax", "Loss"],
        attrs=["soft_label", "use_softmax", "numeric_stable_mode", "ignore_index", "axis"])
def softmax_with_cross_entropy(xp, logits, label, *, soft_label, use_softmax, numeric_stable_mode,
                               ignore_index, axis):
    """Softmax = softmax(Logits, axis) (Logits themselves when not use_softmax); Loss has the
    shape of Logits with size 1 at `axis`. Hard labels (int, size 1 at axis): Loss =
    -log p[label], 0 where label == ignore_index. Soft labels: Loss = -sum(label * log p)."""
    axis = axis + logits.ndim if axis < 0 else axis
    cdt = _cdt(xp, logits.dtype)
    z = logits.astype(cdt, copy=False)
    if use_softmax:
        shifted = z - z.max(axis=axis, keepdims=True)
        logp = shifted - xp.log(xp.exp(shifted).sum(axis=axis, keepdims=True))
        softmax = xp.exp(logp).astype(logits.dtype, copy=False)
    else:
        logp = _tolerable_log(xp, z)
        softmax = logits.copy()
    if soft_label:
        loss = -(label.astype(cdt, copy=False) * logp).sum(axis=axis, keepdims=True)
    else:
        label = _label_at_axis(label, logits, axis)
        loss = _hard_label_loss(xp, logp, label, axis, ignore_index, "softmax_with_cross_entropy")
    return softmax, loss.astype(logits.dtype, copy=False)


@kernel("cross_entropy", inputs=["X", "Label"], outputs=["Y"], attrs=["soft_label", "ignore_index"])
def cross_entropy(xp, x, label, *, soft_label, ignore_index):
    """X holds probabilities over its last dim; Y has size 1 there."""
    cdt = _cdt(xp, x.dtype)
    logp = _tolerable_log(xp, x.astype(cdt, copy=False))
    if soft_label:
        y = -(label.astype(cdt, copy=False) * logp).sum(axis=-1, keepdims=True)
    else:
        label = _label_at_axis(label, x, x.ndim - 1)
        y = _hard_label_loss(xp, logp, label, x.ndim - 1, ignore_index, "cross_entropy")
    return y.astype(x.dtype, copy=False)


@kernel("cross_entropy2", inputs=["X", "Label"], outputs=["Y", "XShape", "MatchX"],
        attrs=["ignore_index"])
def cross_entropy2(xp, x, label, *, ignore_index):
    """Hard labels only. MatchX = X[label] (0 where ignored); Y = -log(MatchX) (0 where
    ignored). XShape (a shape carrier kept for the gradient) is returned as None, as by the
    other XShape kernels."""
    label = _label_at_axis(label, x, x.ndim - 1).astype(xp.int64, copy=False)
    _check_labels(xp, label, x.shape[-1], ignore_index, "cross_entropy2")
    ignored = label == ignore_index
    match = xp.take_along_axis(x, xp.where(ignored, 0, label), axis=-1)
    match = xp.where(ignored, xp.zeros((), x.dtype), match)
    cdt = _cdt(xp, x.dtype)
    y = xp.where(ignored, 0.0, -_tolerable_log(xp, match.astype(cdt, copy=False)))
    return y.astype(x.dtype, copy=False), None, match


@kernel("sigmoid_cross_entropy_with_logits", inputs=["X", "Label", "pos_weight"], outputs=["Out"],
        attrs=["normalize", "ignore_index"])
def sigmoid_cross_entropy_with_logits(xp, x, label, pos_weight=None, *, normalize, ignore_index):
    """Out = max(x, 0) - x*label + log(1 + exp(-|x|)) * pos_weight (pos_weight 1 when absent;
    Paddle's current CPU formula); 0 where int(label) == ignore_index. `normalize` divides by
    the number of elements whose label differs from ignore_index (at least 1e-5)."""
    cdt = _cdt(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    lc = label.astype(cdt, copy=False)
    softplus = xp.log1p(xp.exp(-xp.abs(xc)))
    if pos_weight is not None:
        softplus = softplus * pos_weight.astype(cdt, copy=False)
    out = xp.maximum(xc, 0) - xc * lc + softplus
    ignored = xp.trunc(lc) == ignore_index  # C++ static_cast<int>(label) truncates
    out = xp.where(ignored, 0.0, out)
    if normalize:
        diff = lc - ignore_index
        norm = ((diff < -1e-6) | (diff > 1e-6)).sum()
        out = out / xp.maximum(norm.astype(cdt), 1e-5)
    return out.astype(x.dtype, copy=False)


@kernel("bce_loss", inputs=["X", "Label"], outputs=["Out"])
def bce_loss(xp, x, label):
    """Out = -(label*log(x) + (1-label)*log(1-x)) with each log clamped at -100; X must lie
    in [0, 1]."""
    if x.size and not bool(((x >= 0) & (x <= 1)).all()):
        raise ValueError("bce_loss: every element of X must be in [0, 1] (X holds probabilities)")
    cdt = _cdt(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    lc = label.astype(cdt, copy=False)
    one_minus = 1.0 - xc
    log_x = xp.where(xc > 0, xp.maximum(xp.log(xp.where(xc > 0, xc, 1)), -100.0), -100.0)
    log_1mx = xp.where(one_minus > 0, xp.maximum(xp.log(xp.where(one_minus > 0, one_minus, 1)), -100.0),
                       -100.0)
    return ((lc - 1.0) * log_1mx - lc * log_x).astype(x.dtype, copy=False)


@kernel("huber_loss", inputs=["X", "Y"], outputs=["Out", "Residual"], attrs=["delta"])
def huber_loss(xp, x, y, *, delta):
    """Residual = Y - X; Out = 0.5*r^2 where |r| <= delta, else delta*(|r| - 0.5*delta)."""
    r = y - x
    a = xp.abs(r)
    out = xp.where(a <= delta, 0.5 * r * r, delta * (a - 0.5 * delta))
    return out.astype(x.dtype, copy=False), r


@kernel("kldiv_loss", inputs=["X", "Target"], outputs=["Loss"], attrs=["reduction", "log_target"])
def kldiv_loss(xp, x, target, *, reduction, log_target=False):
    """Elementwise target*(log(target) - x), 0 where target <= 0 (with log_target:
    exp(target)*(target - x)). reduction: none | sum | mean | batchmean (sum / X.shape[0]);
    reduced losses are 0-D, as in Paddle 2.5+."""
    cdt = _cdt(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    t = target.astype(cdt, copy=False)
    if log_target:
        loss = xp.exp(t) * (t - xc)
    else:
        safe = xp.where(t > 0, t, 1.0)
        loss = xp.where(t > 0, t * (xp.log(safe) - xc), 0.0)
    if reduction == "none":
        out = loss
    elif reduction == "sum":
        out = loss.sum()
    elif reduction == "mean":
        out = loss.mean()
    elif reduction == "batchmean":
        n = x.shape[0] if x.ndim else 0
        out = loss.sum() / n if n > 0 else loss.sum()
    else:
        raise ValueError(f"kldiv_loss: reduction must be none|batchmean|sum|mean, got {reduction!r}")
    return xp.asarray(out).astype(x.dtype, copy=False)


@kernel("label_smooth", inputs=["X", "PriorDist"], outputs=["Out"], attrs=["epsilon"])
def label_smooth(xp, x, prior_dist=None, *, epsilon):
    """Out = (1-epsilon)*X + epsilon*PriorDist, or + epsilon/K (K = X.shape[-1])."""
    cdt = _cdt(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    if prior_dist is not None:
        out = (1.0 - epsilon) * xc + epsilon * prior_dist.astype(cdt, copy=False).reshape(-1)
    else:
        out = (1.0 - epsilon) * xc + epsilon / x.shape[-1]
    return out.astype(x.dtype, copy=False)


@kernel("accuracy", inputs=["Out", "Indices", "Label"], outputs=["Accuracy", "Correct", "Total"])
def accuracy(xp, out, indices, label):
    """A sample is correct when any of its top-k Indices equals its Label. Accuracy float32
    [1] = correct/total; Correct, Total int32 [1] (all 0 for an empty batch)."""
    n = indices.shape[0]
    if n == 0:
        return (xp.zeros(1, xp.float32), xp.zeros(1, xp.int32), xp.zeros(1, xp.int32))
    hit = (indices.reshape(n, -1) == label.reshape(n, 1).astype(indices.dtype)).any(axis=1)
    correct = hit.sum().astype(xp.int32).reshape(1)
    acc = (correct.astype(xp.float32) / xp.float32(n)).reshape(1)
    return acc, correct, xp.full(1, n, dtype=xp.int32)
