"""Loss and metric ops: cross entropies, BCE/Huber/KL losses, label smoothing, accuracy.

Slots, attributes and shape rules follow PaddlePaddle's legacy ops.
"""
from __future__ import annotations

from keel.program.errors import AttrError
from keel.program.ops.infer import dims_match, normalize_axis
from keel.program.ops.registry import (BOOL, FLOAT, INT, NOT_DIFFERENTIABLE, STRING, define, grad_op,
                                  opt, side)
from keel.proto import pb

_T = pb.VarType
_INT_LABELS = (_T.INT32, _T.INT64)
# softmax_with_cross_entropy's hard labels: every integer type PaddlePaddle 3.3.1 takes
_SWCE_LABELS = (_T.INT8, _T.INT16, _T.INT32, _T.INT64, _T.UINT8)


def _same_shape(ctx, a, b, what="shapes"):
    if a.ndim != b.ndim or not all(dims_match(p, q) for p, q in zip(a.shape, b.shape)):
        ctx.fail(f"{what} must match: {a} and {b}")


def _merged(a, b):
    return [p if p >= 0 else q for p, q in zip(a.shape, b.shape)]


# -- softmax_with_cross_entropy -------------------------------------------------------------
def _infer_softmax_with_cross_entropy(ctx):
    logits, label = ctx.input("Logits"), ctx.input("Label")
    ctx.require_float(logits)
    if logits.ndim < 1:
        ctx.fail(f"expects Logits of at least 1 dim, got {logits}")
    axis = normalize_axis(ctx, ctx.attr("axis"), logits.ndim)
    if label.ndim != logits.ndim:
        ctx.fail(f"Label must have the same rank as Logits (class axis {axis} of size 1 for hard "
                 f"labels): Logits {logits}, Label {label}")
    soft = ctx.attr("soft_label")
    for i, (a, b) in enumerate(zip(logits.shape, label.shape)):
        if i == axis:
            if soft and not dims_match(a, b):
                ctx.fail(f"soft labels must have Logits' shape: Logits {logits}, Label {label}")
            if not soft and b not in (1, -1):
                ctx.fail(f"hard labels must have size 1 on the class axis {axis}: "
                         f"Logits {logits}, Label {label}")
        elif not dims_match(a, b):
            ctx.fail(f"Logits and Label differ outside the class axis {axis}: Logits {logits}, "
                     f"Label {label}")
    if soft:
        if label.dtype != logits.dtype:
            ctx.dtype_fail(f"soft labels must have Logits' dtype: Logits {logits}, Label {label}")
    elif label.dtype not in _SWCE_LABELS:
        ctx.dtype_fail(f"hard labels must be integer class indices (int8, int16, int32, int64 or "
                       f"uint8), got {label} (use soft_label=True for probabilities)")
    ctx.set_output("Softmax", logits.shape, logits.dtype)
    loss = list(logits.shape)
    loss[axis] = 1
    ctx.set_output("Loss", loss, logits.dtype)


define("softmax_with_cross_entropy", inputs=["Logits", "Label"], outputs=["Softmax", "Loss"],
       attrs={"soft_label": BOOL(False), "use_softmax": BOOL(True), "numeric_stable_mode": BOOL(True),
              "ignore_index": INT(-100), "axis": INT(-1)},
       infer=_infer_softmax_with_cross_entropy,
       grad=grad_op(["Label", "Softmax", "Loss@GRAD"], ["Logits@GRAD"], like={"Logits@GRAD": "Softmax"}),
       doc="Softmax over `axis`, then cross entropy against Label; Loss has that axis reduced to 1.")


# -- cross_entropy / cross_entropy2 ------------------------------------------------------------
def _check_prob_label(ctx, x, label, soft):
    ctx.require_float(x)
    if x.ndim < 1:
        ctx.fail(f"expects an X of at least 1 dim, got {x}")
    rank = x.ndim
    if soft:
        _same_shape(ctx, x, label, "X and soft Label shapes")
        if label.dtype != x.dtype:
            ctx.dtype_fail(f"soft labels must have X's dtype: X {x}, Label {label}")
        return
    if label.dtype not in _INT_LABELS:
        ctx.dtype_fail(f"hard labels must be int32 or int64 class indices, got {label}")
    if label.ndim == rank:
        if label.shape[-1] not in (1, -1):
            ctx.fail(f"hard labels must have a last dim of 1: X {x}, Label {label}")
    elif label.ndim != rank - 1:
        ctx.fail(f"Label must have X's rank (last dim 1) or one less: X {x}, Label {label}")
    if not all(dims_match(a, b) for a, b in zip(x.shape[:rank - 1], label.shape[:rank - 1])):
        ctx.fail(f"X and Label differ outside the class axis: X {x}, Label {label}")


def _infer_cross_entropy(ctx):
    x, label = ctx.input("X"), ctx.input("Label")
    _check_prob_label(ctx, x, label, ctx.attr("soft_label"))
    y = list(x.shape[:-1]) + ([1] if label.ndim == x.ndim else [])
    ctx.set_output("Y", y, x.dtype)


define("cross_entropy", inputs=["X", "Label"], outputs=["Y"],
       attrs={"soft_label": BOOL(False), "ignore_index": INT(-100)},
       infer=_infer_cross_entropy, grad=grad_op(["X", "Label", "Y@GRAD"], ["X@GRAD"]),
       doc="Cross entropy of probabilities X against Label (class ids, or a distribution if soft_label).")


def _infer_cross_entropy2(ctx):
    x, label = ctx.input("X"), ctx.input("Label")
    _check_prob_label(ctx, x, label, False)
    # as cross_entropy: Y has the Label's rank (no class dim for a Label [N]); MatchX keeps it
    match = list(x.shape[:-1]) + [1]
    ctx.set_output("Y", match if label.ndim == x.ndim else match[:-1], x.dtype)
    ctx.set_output("MatchX", match, x.dtype)
    ctx.set_output("XShape", [*x.shape, 0], x.dtype)  # PaddlePaddle appends the 0


def _infer_cross_entropy_grad2(ctx):
    # PaddlePaddle's cross_entropy_grad2 does not read X: X@GRAD has XShape's shape without
    # its trailing 0.
    xshape = ctx.input("XShape")
    ctx.set_output("X@GRAD", xshape.shape[:-1], ctx.input("MatchX").dtype)


define("cross_entropy2", inputs=["X", "Label"], outputs=["Y", "MatchX", "XShape"],
       attrs={"ignore_index": INT(-100)},
       infer=_infer_cross_entropy2,
       grad=grad_op(["Label", "MatchX", "XShape", "Y@GRAD"], ["X@GRAD"], type="cross_entropy_grad2",
                    infer=_infer_cross_entropy_grad2),
       doc="Hard-label cross entropy -log(X[label]) of probabilities X; MatchX keeps X[label].")


# -- elementwise losses ----------------------------------------------------------------------------
def _infer_sigmoid_ce(ctx):
    x, label = ctx.input("X"), ctx.input("Label")
    ctx.require_float(x)
    _same_shape(ctx, x, label, "X and Label shapes")
    pw = ctx.input("pos_weight")
    if pw is not None:
        _same_shape(ctx, x, pw, "X and pos_weight shapes")
    ctx.set_output("Out", _merged(x, label), x.dtype)


define("sigmoid_cross_entropy_with_logits", inputs=["X", "Label", opt("pos_weight")], outputs=["Out"],
       attrs={"normalize": BOOL(False), "ignore_index": INT(-100)},
       infer=_infer_sigmoid_ce, grad=grad_op(["X", "Label", "pos_weight", "Out@GRAD"], ["X@GRAD"]),
       doc="Elementwise max(X,0) - X*Label + log(1+exp(-|X|)) (with pos_weight: (1-Label)*X + "
           "pos_weight*softplus(-X)); `normalize` divides by non-ignored count.")


def _infer_bce_loss(ctx):
    x, label = ctx.input("X"), ctx.input("Label")
    ctx.require_float(x)
    _same_shape(ctx, x, label, "X and Label shapes")
    ctx.set_output("Out", _merged(x, label), x.dtype)


define("bce_loss", inputs=["X", "Label"], outputs=["Out"], attrs={},
       infer=_infer_bce_loss, grad=grad_op(["X", "Label", "Out@GRAD"], ["X@GRAD"]),
       doc="Elementwise binary cross entropy of probabilities X: -(Label*log(X) + (1-Label)*log(1-X)).")


def _infer_huber_loss(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.require_float(x)
    ctx.same_dtype(x, y)
    _same_shape(ctx, x, y, "X and Y shapes")
    if ctx.attr("delta") <= 0:
        raise AttrError(f"delta must be > 0, got {ctx.attr('delta')}", op_type=ctx.op_type,
                        callsite=ctx.callsite)
    shape = _merged(x, y)
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("Residual", shape, x.dtype)


define("huber_loss", inputs=["X", "Y"], outputs=["Out", side("Residual")],
       attrs={"delta": FLOAT()},
       infer=_infer_huber_loss,
       grad=grad_op(["Residual", "Out@GRAD"], ["X@GRAD", "Y@GRAD"],
                    like={"X@GRAD": "Residual", "Y@GRAD": "Residual"}),
       doc="Elementwise Huber loss of Residual = Y - X: quadratic within delta, linear beyond.")


def _infer_kldiv_loss(ctx):
    x, t = ctx.input("X"), ctx.input("Target")
    ctx.require_float(x)
    _same_shape(ctx, x, t, "X and Target shapes")
    reduction = ctx.attr("reduction")
    if reduction not in ("none", "batchmean", "mean", "sum"):
        raise AttrError(f"reduction must be 'none', 'batchmean', 'mean' or 'sum', got {reduction!r}",
                        op_type=ctx.op_type, callsite=ctx.callsite)
    ctx.set_output("Loss", _merged(x, t) if reduction == "none" else [], x.dtype)


define("kldiv_loss", inputs=["X", "Target"], outputs=["Loss"],
       attrs={"reduction": STRING("mean"), "log_target": BOOL(False)},
       infer=_infer_kldiv_loss, grad=grad_op(["X", "Target", "Loss@GRAD"], ["X@GRAD"]),
       doc="KL divergence Target*(log(Target) - X) for log-probabilities X; 0-d unless reduction='none'.")


def _infer_label_smooth(ctx):
    x = ctx.input("X")
    ctx.require_float(x)
    if x.ndim == 0:
        ctx.fail(f"X must have at least 1 dim (its last one holds the classes), got {x}")
    prior = ctx.input("PriorDist")
    if prior is not None and x.ndim and prior.shape and not dims_match(prior.shape[-1], x.shape[-1]):
        ctx.fail(f"PriorDist must have X's last dim: X {x}, PriorDist {prior}")
    ctx.set_output("Out", x.shape, x.dtype)


define("label_smooth", inputs=["X", opt("PriorDist")], outputs=["Out"],
       attrs={"epsilon": FLOAT(0.0)},
       infer=_infer_label_smooth, grad=grad_op(["Out@GRAD"], ["X@GRAD"], like={"X@GRAD": "Out@GRAD"}),
       doc="Out = (1 - epsilon) * X + epsilon * PriorDist (uniform 1/num_classes without PriorDist).")


# -- accuracy --------------------------------------------------------------------------------------
def _infer_accuracy(ctx):
    out, idx, label = ctx.input("Out"), ctx.input("Indices"), ctx.input("Label")
    if idx.ndim != 2:
        ctx.fail(f"Indices must be 2-d [N, k] (the output of top_k), got {idx}")
    if idx.dtype not in _INT_LABELS:
        ctx.dtype_fail(f"Indices must be int32 or int64, got {idx}")
    if label.dtype not in _INT_LABELS:
        ctx.dtype_fail(f"Label must be int32 or int64 class ids, got {label}")
    if label.ndim != 2 or label.shape[1] not in (1, -1):
        ctx.fail(f"Label must be [N, 1], got {label} (Indices {idx})")
    if not dims_match(label.shape[0], idx.shape[0]):
        ctx.fail(f"Label and Indices must have the same batch size: Label {label}, Indices {idx}")
    if out.ndim != 2 or not all(dims_match(a, b) for a, b in zip(out.shape, idx.shape)):
        ctx.fail(f"Out and Indices must have the same [N, k] shape: Out {out}, Indices {idx}")
    # 0-d results, as in PaddlePaddle 2.5 and later
    ctx.set_output("Accuracy", [], _T.FP32)
    ctx.set_output("Correct", [], _T.INT32)
    ctx.set_output("Total", [], _T.INT32)


define("accuracy", inputs=["Out", "Indices", "Label"], outputs=["Accuracy", "Correct", "Total"],
       attrs={}, infer=_infer_accuracy, grad=NOT_DIFFERENTIABLE,
       doc="Top-k accuracy: the fraction of rows whose Label is among Indices (from top_k_v2).")
