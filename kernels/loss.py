"""Loss kernels with PaddlePaddle's legacy semantics.

- A "tolerable" log: Paddle's cross-entropy functors replace log(0) = -inf by -1e20
  (TolerableValue), so a zero probability costs 1e20, not inf.
- softmax_with_cross_entropy computes log-softmax directly (max-shifted), as Paddle's
  numerically stable GPU path does, so huge logits give finite losses.
- Statistics run in at least float32 and results are cast back to the input dtype.
- cross_entropy2's `XShape` is a zero-size array of shape [*X.shape, 0] (PaddlePaddle's
  dims, no data), from which cross_entropy_grad2 takes X's shape.
- Gradient kernels (`<op>_grad`, at the end) use PaddlePaddle's formulas, which are not
  always the forward's exact derivative (see the note there); labels get no gradient.
"""
from __future__ import annotations

from keel.kernels.registry import kernel

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
    """X holds probabilities over its last dim; Y has size 1 there, or no class dim when a
    hard Label has none (Label [N]: Y [N], as PaddlePaddle's)."""
    cdt = _cdt(xp, x.dtype)
    logp = _tolerable_log(xp, x.astype(cdt, copy=False))
    if soft_label:
        y = -(label.astype(cdt, copy=False) * logp).sum(axis=-1, keepdims=True)
    else:
        y = _hard_label_loss(xp, logp, _label_at_axis(label, x, x.ndim - 1), x.ndim - 1,
                             ignore_index, "cross_entropy").reshape(label.shape)
    return y.astype(x.dtype, copy=False)


@kernel("cross_entropy2", inputs=["X", "Label"], outputs=["Y", "XShape", "MatchX"],
        attrs=["ignore_index"])
def cross_entropy2(xp, x, label, *, ignore_index, need=None):
    """Hard labels only. MatchX = X[label] (0 where ignored); Y = -log(MatchX) (0 where
    ignored). XShape is a zero-size array of shape [*X.shape, 0] (PaddlePaddle's XShape
    dims; no data): cross_entropy_grad2 reads X's shape from it, as PaddlePaddle does. It
    is produced only when the op binds XShape (as kernels/tensor.py's XShape outputs)."""
    label_shape = label.shape  # Y's: [N] for a Label [N] (PaddlePaddle's), MatchX keeps [N, 1]
    label = _label_at_axis(label, x, x.ndim - 1).astype(xp.int64, copy=False)
    _check_labels(xp, label, x.shape[-1], ignore_index, "cross_entropy2")
    ignored = label == ignore_index
    match = xp.take_along_axis(x, xp.where(ignored, 0, label), axis=-1)
    match = xp.where(ignored, xp.zeros((), x.dtype), match)
    cdt = _cdt(xp, x.dtype)
    y = xp.where(ignored, 0.0, -_tolerable_log(xp, match.astype(cdt, copy=False)))
    xshape = None if need is not None and "XShape" not in need else xp.empty(x.shape + (0,), x.dtype)
    return y.astype(x.dtype, copy=False).reshape(label_shape), xshape, match


@kernel("sigmoid_cross_entropy_with_logits", inputs=["X", "Label", "pos_weight"], outputs=["Out"],
        attrs=["normalize", "ignore_index"])
def sigmoid_cross_entropy_with_logits(xp, x, label, pos_weight=None, *, normalize, ignore_index):
    """Out = max(x, 0) - x*label + log(1 + exp(-|x|)) = (1 - label)*x + softplus(-x); with
    pos_weight, (1 - label)*x + pos_weight*softplus(-x) (what PaddlePaddle 3.3.1 computes,
    and what its gradient differentiates); 0 where int(label) == ignore_index. `normalize`
    divides by the number of elements whose label differs from ignore_index (at least 1e-5)."""
    cdt = _cdt(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    lc = label.astype(cdt, copy=False)
    softplus = xp.log1p(xp.exp(-xp.abs(xc)))
    if pos_weight is None:
        out = xp.maximum(xc, 0) - xc * lc + softplus
    else:  # softplus(-x) = max(-x, 0) + log(1 + exp(-|x|))
        out = (1.0 - lc) * xc + pos_weight.astype(cdt, copy=False) * (xp.maximum(-xc, 0) + softplus)
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
    return xp.asarray((lc - 1.0) * log_1mx - lc * log_x).astype(x.dtype, copy=False)  # (0-d: an array)


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
    0-d = correct/total; Correct, Total int32 0-d (all 0 for an empty batch)."""
    n = indices.shape[0]
    if n == 0:
        return (xp.zeros((), xp.float32), xp.zeros((), xp.int32), xp.zeros((), xp.int32))
    hit = (indices.reshape(n, -1) == label.reshape(n, 1).astype(indices.dtype)).any(axis=1)
    correct = xp.asarray(hit.sum(), dtype=xp.int32)
    acc = xp.asarray(correct.astype(xp.float32) / xp.float32(n), dtype=xp.float32)
    return acc, correct, xp.full((), n, dtype=xp.int32)


# -- gradients -------------------------------------------------------------------------------------
# PaddlePaddle's gradient kernels, formula for formula (they are not always the derivative of
# the forward: softmax_with_cross_entropy's soft-label gradient dy*(softmax - label) assumes
# each label row sums to 1; cross-entropy gradients use 1/p, not the forward's tolerable log).
# Labels get no gradient. Float16/bfloat16 gradients are computed in float32.

def _flat_label_index(xp, label, shape, axis):
    """Flat (C-order) indices into an array of `shape` of the element label[...] along `axis`
    (label has `shape` with size 1 at `axis`): one index per label, all distinct."""
    n = 1
    for d in shape[:axis]:
        n *= d
    c = shape[axis]
    r = label.size // n if n else 0
    lab = label.reshape(n, r)
    base = xp.arange(n, dtype=xp.int64).reshape(n, 1) * (c * r) + xp.arange(r, dtype=xp.int64).reshape(1, r)
    return (base + lab * r).reshape(-1)


def _ignored(xp, label, ignore_index):
    """(the mask of labels equal to ignore_index, the labels as int64 with those set to 0)."""
    label = label.astype(xp.int64, copy=False)
    ignored = label == ignore_index
    return ignored, xp.where(ignored, 0, label)


@kernel("softmax_with_cross_entropy_grad", inputs=["Label", "Softmax", "Loss@GRAD"],
        outputs=["Logits@GRAD"],
        attrs=["soft_label", "use_softmax", "numeric_stable_mode", "ignore_index", "axis"])
def softmax_with_cross_entropy_grad(xp, label, softmax, loss_grad, *, soft_label, use_softmax,
                                    numeric_stable_mode, ignore_index, axis):
    """Loss@GRAD (dy) has Softmax's shape with size 1 at `axis`, so it broadcasts directly.
    use_softmax, hard labels: dy * (softmax - onehot(label)); rows whose label is ignore_index
    get exactly 0. use_softmax, soft labels: dy * (softmax - label) (ignore_index unused).
    Without use_softmax (Softmax holds the input probabilities p): hard labels
    -dy / p[label] at the label, 0 elsewhere and in ignored rows; soft labels -label/p * dy."""
    dtype = softmax.dtype
    axis = axis + softmax.ndim if axis < 0 else axis
    cdt = _cdt(xp, dtype)
    p = softmax.astype(cdt, copy=False)
    dy = loss_grad.astype(cdt, copy=False)
    if soft_label:
        lab = label.astype(cdt, copy=False)
        grad = dy * (p - lab) if use_softmax else dy * (-lab / p)
        return grad.astype(dtype, copy=False)
    ignored, safe = _ignored(xp, _label_at_axis(label, p, axis), ignore_index)
    dy = xp.where(ignored, xp.zeros((), cdt), dy)
    flat = _flat_label_index(xp, safe, p.shape, axis)
    if use_softmax:
        grad = xp.ascontiguousarray(p * dy)  # one pass; ignored rows are 0 * p = 0 exactly
        view = grad.reshape(-1)
        view[flat] -= dy.reshape(-1)
    else:
        picked = xp.take_along_axis(p, safe, axis=axis)
        inv = -1.0 / xp.where(ignored, xp.ones((), cdt), picked)  # PaddlePaddle: (-1 / p) * dy
        value = xp.where(ignored, xp.zeros((), cdt), inv * dy)
        grad = xp.zeros(p.shape, cdt)
        grad.reshape(-1)[flat] = value.reshape(-1)
    return grad.astype(dtype, copy=False)


def _pick_grad(xp, shape, ignored, safe, picked, dy, cdt):
    """The gradient of -log(p[label]) over the last axis (PaddlePaddle's XeGradFunctor and
    HardLabelCrossEntropyBackwardFunctor): zeros of `shape` with -dy / p[label] at each
    row's label; rows whose label is ignore_index stay 0. ignored, safe (the labels, 0
    where ignored), picked (p[label]), dy: [..., 1]."""
    value = xp.where(ignored, xp.zeros((), cdt), -dy / xp.where(ignored, xp.ones((), cdt), picked))
    grad = xp.zeros(shape, cdt)
    grad.reshape(-1)[_flat_label_index(xp, safe, shape, len(shape) - 1)] = value.reshape(-1)
    return grad


@kernel("cross_entropy_grad", inputs=["X", "Label", "Y@GRAD"], outputs=["X@GRAD"],
        attrs=["soft_label", "ignore_index"])
def cross_entropy_grad(xp, x, label, y_grad, *, soft_label, ignore_index):
    """Soft labels: -label * dy / x. Hard labels: -dy / x[label] at the label, 0 elsewhere
    and in rows whose label is ignore_index. Y@GRAD has X's shape with size 1 (or no dim)
    on the last axis."""
    cdt = _cdt(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    dy = y_grad.astype(cdt, copy=False).reshape(x.shape[:-1] + (1,))
    if soft_label:
        grad = -label.astype(cdt, copy=False) * dy / xc
    else:
        ignored, safe = _ignored(xp, _label_at_axis(label, x, x.ndim - 1), ignore_index)
        grad = _pick_grad(xp, x.shape, ignored, safe, xp.take_along_axis(xc, safe, axis=-1), dy, cdt)
    return grad.astype(x.dtype, copy=False)


@kernel("cross_entropy_grad2", inputs=["Label", "MatchX", "XShape", "Y@GRAD"], outputs=["X@GRAD"],
        attrs=["ignore_index"])
def cross_entropy_grad2(xp, label, match_x, x_shape, y_grad, *, ignore_index):
    """X@GRAD (shape: XShape's without its trailing 0) is -dy / MatchX at each row's label,
    0 elsewhere and in rows whose label is ignore_index. X itself is not read."""
    shape = tuple(x_shape.shape[:-1])
    dtype = match_x.dtype
    cdt = _cdt(xp, dtype)
    lead = shape[:-1] + (1,)
    ignored, safe = _ignored(xp, label.reshape(lead), ignore_index)
    grad = _pick_grad(xp, shape, ignored, safe, match_x.astype(cdt, copy=False).reshape(lead),
                      y_grad.astype(cdt, copy=False).reshape(lead), cdt)
    return grad.astype(dtype, copy=False)


def _sigmoid(xp, x):
    return 0.5 * (xp.tanh(0.5 * x) + 1.0)  # no overflow for large |x|


@kernel("sigmoid_cross_entropy_with_logits_grad", inputs=["X", "Label", "Out@GRAD", "pos_weight"],
        outputs=["X@GRAD"], attrs=["normalize", "ignore_index"])
def sigmoid_cross_entropy_with_logits_grad(xp, x, label, out_grad, pos_weight=None, *, normalize,
                                           ignore_index):
    """dy * (sigmoid(x) - label); with pos_weight dy * (pos_weight*sigmoid(x) - label + 1 -
    pos_weight) (PaddlePaddle 3.3.1's gradient of (1-label)*x + pos_weight*softplus(-x)).
    0 where int(label) == ignore_index; `normalize` divides by the number of labels differing
    from ignore_index by more than 1e-6, at least 1e-5 (PaddlePaddle's CPU kernel does not
    clamp there and returns NaN for a batch whose labels are all ignored; its forward and
    this kernel give 0)."""
    cdt = _cdt(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    lc = label.astype(cdt, copy=False)
    sig = _sigmoid(xp, xc)
    if pos_weight is None:
        diff = sig - lc
    else:
        pw = pos_weight.astype(cdt, copy=False)
        diff = pw * sig - lc + (1.0 - pw)
    grad = out_grad.astype(cdt, copy=False) * diff
    grad = xp.where(xp.trunc(lc) == ignore_index, xp.zeros((), cdt), grad)
    if normalize:
        d = lc - ignore_index
        norm = ((d < -1e-6) | (d > 1e-6)).sum()
        grad = grad / xp.maximum(norm.astype(cdt), 1e-5)
    return grad.astype(x.dtype, copy=False)


@kernel("bce_loss_grad", inputs=["X", "Label", "Out@GRAD"], outputs=["X@GRAD"])
def bce_loss_grad(xp, x, label, out_grad):
    """dy * (x - label) / max(x * (1 - x), 1e-12) (PaddlePaddle's formula, which ignores
    the forward's log clamp at -100)."""
    cdt = _cdt(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    grad = out_grad.astype(cdt, copy=False) * (xc - label.astype(cdt, copy=False)) \
        / xp.maximum((1.0 - xc) * xc, 1e-12)
    return grad.astype(x.dtype, copy=False)


@kernel("huber_loss_grad", inputs=["Residual", "Out@GRAD"], outputs=["X@GRAD", "Y@GRAD"],
        attrs=["delta"])
def huber_loss_grad(xp, residual, out_grad, *, delta, need=frozenset({"X@GRAD", "Y@GRAD"})):
    """With r = Residual = Y - X: Y@GRAD = dy * clip(r, -delta, delta) (r inside delta,
    +-delta beyond) and X@GRAD its negative."""
    g = out_grad * xp.clip(residual, -delta, delta).astype(residual.dtype, copy=False)
    return (-g if "X@GRAD" in need else None), (g if "Y@GRAD" in need else None)


@kernel("kldiv_loss_grad", inputs=["X", "Target", "Loss@GRAD"], outputs=["X@GRAD"],
        attrs=["reduction", "log_target"])
def kldiv_loss_grad(xp, x, target, loss_grad, *, reduction, log_target=False):
    """-target * dy where target > 0, else 0 (log_target: -exp(target) * dy); divided by
    X's size for reduction 'mean' and by X.shape[0] for 'batchmean'. Loss@GRAD has X's
    shape for reduction 'none', else one element."""
    cdt = _cdt(xp, x.dtype)
    t = target.astype(cdt, copy=False)
    dy = loss_grad.astype(cdt, copy=False)
    dy = dy.reshape(()) if dy.size == 1 and reduction != "none" else dy.reshape(x.shape)
    if log_target:
        grad = -xp.exp(t) * dy
    else:
        grad = xp.where(t > 0, -t * dy, xp.zeros((), cdt))
    if reduction == "mean" and x.size:
        grad = grad / x.size
    elif reduction == "batchmean" and x.ndim and x.shape[0] > 0:
        grad = grad / x.shape[0]
    return grad.astype(x.dtype, copy=False)


@kernel("label_smooth_grad", inputs=["Out@GRAD"], outputs=["X@GRAD"], attrs=["epsilon"])
def label_smooth_grad(xp, out_grad, *, epsilon):
    """(1 - epsilon) * dy; PriorDist gets no gradient."""
    cdt = _cdt(xp, out_grad.dtype)
    return ((1.0 - epsilon) * out_grad.astype(cdt, copy=False)).astype(out_grad.dtype, copy=False)
