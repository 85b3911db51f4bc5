"""Detection kernels: yolo_box, multiclass_nms3, matrix_nms, prior_box, density_prior_box,
anchor_generator, box_coder, roi_align (+ grad), roi_pool (+ grad), generate_proposals_v2,
distribute_fpn_proposals.

Each follows PaddlePaddle 3.3.1's CPU kernel operation for operation, in the input's
precision (float32 arithmetic stays float32, so results are PaddlePaddle's bits; exp, log,
log2 and pow, whose float32 versions in numpy may be an ulp off, are evaluated in double
and rounded, which gives glibc's correctly rounded float results), with PaddlePaddle's
ordering and tie-breaking: multiclass NMS candidates in descending score order, equal
scores in index order (std::stable_sort), kept boxes listed per class in ascending class
order; where PaddlePaddle ranks with std::sort, std::nth_element or std::partial_sort
(generate_proposals_v2, matrix_nms), equal scores are arranged as libstdc++ arranges them
(kernels/stl_order.py).

Device and host:
- yolo_box, box_coder and roi_pool_grad run entirely on the array module.
- prior_box, density_prior_box and anchor_generator depend only on shapes and attributes:
  they are computed on the host and copied to the device once (no read back).
- The NMS ops, generate_proposals_v2 and distribute_fpn_proposals produce outputs whose
  size depends on the values, and their greedy loops are sequential: they read their
  inputs back to the host, run there, and copy the (small) results to the device, as
  PaddlePaddle's CPU kernels do. There the overlaps are computed as matrices (the
  candidates still in the running against the later ones, `_greedy_nms`) and the greedy
  selection steps from kept box to kept box, not candidate by candidate.
- roi_align and roi_align_grad compute each RoI's sampling grid (whose size depends on the
  RoI with sampling_ratio <= 0) on the host from the RoIs read back; the feature-map
  gathers, sums and scatters run on the device. roi_pool reads the RoIs back for its
  integer bins likewise.
"""
from __future__ import annotations

import math

import numpy as np

from keel.kernels import stl_order
from keel.kernels.registry import kernel
from keel.kernels.tensor import scatter_add

_FLT_MAX = np.finfo(np.float32).max


def _host(xp, a):
    """A device array as a numpy array (a read back on a GPU)."""
    if a is None or xp is np:
        return a
    return a.get()


def _device(xp, a):
    return a if xp is np else xp.asarray(a)


def _rois_batch_ids(rois_num, rois_count, batch, what):
    """The image of each RoI from RoisNum (host ints); without it, every RoI belongs to the
    one image of a batch of 1 (Keel has no LoD)."""
    if rois_num is None:
        if batch != 1:
            raise ValueError(f"{what}: RoisNum is needed to assign {rois_count} RoIs to a batch of "
                             f"{batch} images")
        return np.zeros(rois_count, dtype=np.int64)
    counts = np.asarray(rois_num).reshape(-1).astype(np.int64)
    if counts.size != batch:
        raise ValueError(f"{what}: RoisNum has {counts.size} entries for a batch of {batch} images")
    if counts.sum() != rois_count or (counts < 0).any():
        raise ValueError(f"{what}: RoisNum {counts.tolist()} does not add up to the {rois_count} RoIs")
    return np.repeat(np.arange(batch, dtype=np.int64), counts)


def _libm(xp, fn, *args):
    """`fn` (exp, log, log2, power) of float32 arrays as glibc's float functions give it:
    correctly rounded, which numpy's float32 SIMD loops are not always (an ulp off), so the
    function is evaluated in double and rounded. Other dtypes: `fn` itself."""
    if args[0].dtype == np.float32:
        return fn(*[a.astype(np.float64) for a in args]).astype(np.float32)
    return fn(*args)


# ============================================================================ yolo_box

def _sigmoid(xp, t):
    """PaddlePaddle's sigmoid<float>: 1.0 / (1.0 + expf(-t)) evaluated in double, rounded."""
    e = _libm(xp, xp.exp, -t)
    return (1.0 / (1.0 + e.astype(np.float64))).astype(t.dtype)


@kernel("yolo_box", inputs=["X", "ImgSize"], outputs=["Boxes", "Scores"],
        attrs=["anchors", "class_num", "conf_thresh", "downsample_ratio", "clip_bbox", "scale_x_y",
               "iou_aware", "iou_aware_factor"])
def yolo_box(xp, x, img_size, *, anchors, class_num, conf_thresh, downsample_ratio, clip_bbox,
             scale_x_y, iou_aware, iou_aware_factor):
    n, c, h, w = x.shape
    an = len(anchors) // 2
    dt = x.dtype.type
    if iou_aware:
        iou_logit, body = x[:, :an], x[:, an:]
    else:
        iou_logit, body = None, x
    body = body.reshape(n, an, 5 + class_num, h, w)
    conf = _sigmoid(xp, body[:, :, 4])
    if iou_aware:
        iou = _sigmoid(xp, iou_logit)
        # pow(float, float) resolves to the double pow here, the product is a double
        conf = (xp.power(conf.astype(np.float64), float(dt(1.0 - float(np.float32(iou_aware_factor))))) *
                xp.power(iou.astype(np.float64), float(dt(iou_aware_factor)))).astype(x.dtype)
    keep = ~(conf < dt(conf_thresh))                                  # [n, an, h, w]
    scale = dt(scale_x_y)
    bias = dt(np.float32(-0.5) * (np.float32(scale_x_y) - np.float32(1.0)))
    img = img_size.astype(x.dtype)
    img_h = img[:, 0].reshape(n, 1, 1, 1)
    img_w = img[:, 1].reshape(n, 1, 1, 1)
    grid_x = xp.arange(w, dtype=x.dtype).reshape(1, 1, 1, w)
    grid_y = xp.arange(h, dtype=x.dtype).reshape(1, 1, h, 1)
    aw = xp.asarray(np.asarray(anchors[0::2], dtype=x.dtype)).reshape(1, an, 1, 1)
    ah = xp.asarray(np.asarray(anchors[1::2], dtype=x.dtype)).reshape(1, an, 1, 1)
    cx = (grid_x + _sigmoid(xp, body[:, :, 0]) * scale + bias) * img_w / dt(w)
    cy = (grid_y + _sigmoid(xp, body[:, :, 1]) * scale + bias) * img_h / dt(h)
    bw = _libm(xp, xp.exp, body[:, :, 2]) * aw * img_w / dt(downsample_ratio * w)
    bh = _libm(xp, xp.exp, body[:, :, 3]) * ah * img_h / dt(downsample_ratio * h)
    half = dt(2)
    x0, y0, x1, y1 = cx - bw / half, cy - bh / half, cx + bw / half, cy + bh / half
    if clip_bbox:
        zero = dt(0)
        x0 = xp.where(x0 > zero, x0, zero)
        y0 = xp.where(y0 > zero, y0, zero)
        wmax = (img_size[:, 1].astype(np.int64) - 1).astype(x.dtype).reshape(n, 1, 1, 1)
        hmax = (img_size[:, 0].astype(np.int64) - 1).astype(x.dtype).reshape(n, 1, 1, 1)
        x1 = xp.where(x1 < wmax, x1, wmax)
        y1 = xp.where(y1 < hmax, y1, hmax)
    boxes = xp.stack([x0, y0, x1, y1], axis=-1)                      # [n, an, h, w, 4]
    boxes = xp.where(keep[..., None], boxes, dt(0)).reshape(n, an * h * w, 4)
    cls = _sigmoid(xp, body[:, :, 5:])                               # [n, an, cls, h, w]
    scores = conf[:, :, None] * cls
    scores = xp.where(keep[:, :, None], scores, dt(0))
    scores = scores.transpose(0, 1, 3, 4, 2).reshape(n, an * h * w, class_num)
    return boxes, scores


# ============================================================================ NMS (host)

def _box_areas(boxes, normalized):
    """BBoxArea of each row: 0 for a box with x2 < x1 or y2 < y1, sizes +1 unless normalized."""
    dt = boxes.dtype.type
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    area = w * h if normalized else (w + dt(1)) * (h + dt(1))
    return np.where((boxes[:, 2] < boxes[:, 0]) | (boxes[:, 3] < boxes[:, 1]), dt(0), area)


def _iou_matrix(a, b, normalized):
    """PaddlePaddle's JaccardOverlap(a[i], b[j]) for every pair of rows ([len(a), len(b)]),
    in the boxes' precision and PaddlePaddle's operation order (the overlap is symmetric, to
    the bit: min, max, the sum of areas and the tests commute). 0/0 (two empty boxes) is NaN."""
    dt = b.dtype.type
    norm = dt(0) if normalized else dt(1)
    ax0, ay0, ax1, ay1 = (a[:, k, None] for k in range(4))                 # [p, 1]
    bx0, by0, bx1, by1 = (np.ascontiguousarray(b[:, k]) for k in range(4))  # [q]
    apart = (bx0 > ax1) | (bx1 < ax0) | (by0 > ay1) | (by1 < ay0)
    inter = np.minimum(ax1, bx1) - np.maximum(ax0, bx0) + norm
    inter *= np.minimum(ay1, by1) - np.maximum(ay0, by0) + norm
    union = _box_areas(a, normalized)[:, None] + _box_areas(b, normalized)[None, :] - inter
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        iou = np.divide(inter, union, out=union)
    iou[apart] = dt(0)
    return iou


# The greedy NMS computes the overlaps of the candidates still in the running in batches,
# the first of _FIRST_BATCH, each next one twice as large (few are computed in vain where
# most candidates are suppressed, few calls are made where most are kept), and of at most
# _IOU_BLOCK_ELEMENTS overlaps, so memory stays bounded however many candidates there are.
_FIRST_BATCH = 16
_IOU_BLOCK_ELEMENTS = 1 << 20
# With a threshold that does not change, up to 256 candidates (nms_top_k's usual range) take
# _greedy_nms_fixed: all overlaps at once, bit sets. Above, computing the overlaps of boxes
# already suppressed costs more than it saves (measured: 80 classes x 1000 candidates).
_FIXED_THRESHOLD_ELEMENTS = 1 << 16


def _greedy_nms(boxes, threshold, eta, adaptive, normalized):
    """Positions kept by greedy NMS visiting `boxes` in order (PaddlePaddle's NMSFast and
    funcs::NMS): a box is kept when its overlap with every kept box is <= the threshold,
    which becomes threshold * eta after each kept box while `adaptive` and > 0.5.

    Rather than comparing each candidate with the kept boxes one at a time, each kept box's
    overlaps with the later candidates raise `worst` (every candidate's largest overlap with
    a kept box; np.maximum keeps a NaN overlap, on which `iou <= threshold` fails too), and
    the next kept box is the first later candidate whose `worst` is <= the threshold: the
    same comparisons, so the same boxes, one numpy step per kept box. As `worst` only grows
    and the threshold only falls, a candidate out of the running stays out: overlaps are
    computed only for those still in it."""
    dt = boxes.dtype.type
    k = boxes.shape[0]
    if not (adaptive and threshold > 0.5) and 0 < k * k <= _FIXED_THRESHOLD_ELEMENTS:
        return _greedy_nms_fixed(boxes, threshold, normalized)
    worst = np.zeros(k, dtype=boxes.dtype)
    row_of = np.full(k, -1, dtype=np.int64)      # candidate -> its row in `overlaps`
    overlaps, first, batch = None, 0, _FIRST_BATCH
    kept = []
    i = 0
    while i < k:
        kept.append(i)
        if row_of[i] < 0:
            running = i + 1 + (worst[i + 1:] <= threshold).nonzero()[0]
            size = max(1, min(batch, _IOU_BLOCK_ELEMENTS // (k - i)))
            rows = np.concatenate([[i], running[:size - 1]])
            overlaps, first = _iou_matrix(boxes[rows], boxes[i:], normalized), i
            row_of[rows] = np.arange(rows.size)
            batch *= 2
        np.maximum(worst[first:], overlaps[row_of[i]], out=worst[first:])
        if adaptive and threshold > 0.5:
            threshold = dt(threshold * eta)
        later = (worst[i + 1:] <= threshold).nonzero()[0]
        if later.size == 0:
            break
        i += 1 + int(later[0])
    return np.asarray(kept, dtype=np.int64)


def _check_box_size(op, box_size):
    if box_size != 4:
        raise NotImplementedError(f"{op}: polygon boxes ({box_size} coordinates) are not supported; "
                                  f"Keel runs 4-coordinate boxes [x1, y1, x2, y2]")


def _sorted_candidates(scores, threshold, top_k):
    """GetMaxScoreIndex: indices with score > threshold, by descending score, ties in index
    order (stable), the first top_k (top_k > -1)."""
    idx = np.nonzero(scores > threshold)[0]
    idx = idx[np.argsort(-scores[idx], kind="stable")]
    if -1 < top_k < idx.size:
        idx = idx[:top_k]
    return idx


def _greedy_nms_fixed(boxes, threshold, normalized):
    """_greedy_nms for a threshold that stays as it is (no eta, or <= 0.5), the candidates'
    overlaps all computed at once: each candidate's set of candidates it suppresses (overlap
    > threshold, or NaN) as the bits of a Python int, so each kept box costs two integer
    operations instead of numpy calls (most boxes are kept where few overlap)."""
    k = boxes.shape[0]
    suppresses = ~(_iou_matrix(boxes, boxes, normalized) <= threshold)
    packed = np.packbits(suppresses, axis=1, bitorder="little")
    rows = [int.from_bytes(row.tobytes(), "little") for row in packed]
    running = (1 << k) - 1                   # candidates no kept box suppresses (yet)
    kept = []
    while running:
        i = (running & -running).bit_length() - 1          # the first one: kept
        kept.append(i)
        running &= ~(rows[i] | (1 << i))
    return np.asarray(kept, dtype=np.int64)


def _nms_fast(boxes, scores, score_threshold, nms_threshold, eta, top_k, normalized):
    """NMSFast: greedy selection in descending score order; a candidate is kept when its
    overlap with every kept box is <= the (adaptive) threshold. Box indices, as a list."""
    dt = boxes.dtype.type
    cand = _sorted_candidates(scores, dt(score_threshold), top_k)
    eta = dt(eta)
    kept = _greedy_nms(boxes[cand], dt(nms_threshold), eta, eta < 1, normalized)
    return cand[kept].tolist()


def _multiclass_nms_one(boxes, scores, two_d, attrs):
    """MultiClassNMS for one image. 3-d layout: boxes [M, 4], scores [C, M]; 2-d layout:
    boxes [M, C, 4], scores [M, C]. Returns the kept (labels, box indices) in output order:
    ascending labels, within a label by descending score (3-d) or ascending index (2-d)."""
    class_num = scores.shape[1] if two_d else scores.shape[0]
    labels, indices = [np.zeros(0, np.int64)], [np.zeros(0, np.int64)]
    for c in range(class_num):
        if c == attrs["background_label"]:
            continue
        cls_boxes = boxes[:, c] if two_d else boxes
        cls_scores = scores[:, c] if two_d else scores[c]
        sel = np.asarray(_nms_fast(cls_boxes, cls_scores, attrs["score_threshold"], attrs["nms_threshold"],
                                   attrs["nms_eta"], attrs["nms_top_k"], attrs["normalized"]), dtype=np.int64)
        if two_d:
            sel.sort()
        labels.append(np.full(sel.size, c, dtype=np.int64))
        indices.append(sel)
    labels, indices = np.concatenate(labels), np.concatenate(indices)
    keep_top_k = attrs["keep_top_k"]
    if -1 < keep_top_k < labels.size:
        # the best keep_top_k by float score (stable: ties in label order), regrouped by label
        kept_scores = scores[indices, labels] if two_d else scores[labels, indices]
        best = np.argsort(-kept_scores.astype(np.float32), kind="stable")[:keep_top_k]
        labels, indices = labels[best], indices[best]
        regroup = np.lexsort((indices, labels)) if two_d else np.argsort(labels, kind="stable")
        labels, indices = labels[regroup], indices[regroup]
    return labels, indices


def _detection_rows(labels, scores, boxes, dtype):
    """Detection output rows [label, score, x1, y1, x2, y2] in `dtype`."""
    return np.concatenate([labels.astype(dtype)[:, None], scores.astype(dtype)[:, None], boxes.astype(dtype)],
                          axis=1)


@kernel("multiclass_nms3", inputs=["BBoxes", "Scores", "RoisNum"],
        outputs=["Out", "Index", "NmsRoisNum"],
        attrs=["score_threshold", "nms_top_k", "keep_top_k", "nms_threshold", "normalized",
               "nms_eta", "background_label"])
def multiclass_nms3(xp, bboxes, scores, rois_num, **attrs):
    boxes_h, scores_h = _host(xp, bboxes), _host(xp, scores)
    two_d = scores_h.ndim == 2
    box_dim = boxes_h.shape[2]
    _check_box_size("multiclass_nms3", box_dim)
    if two_d:
        m, c = scores_h.shape
        if rois_num is None:
            starts = [0, m]
        else:
            starts = np.concatenate([[0], np.cumsum(_host(xp, rois_num).reshape(-1).astype(np.int64))])
        images = [(int(starts[i]), int(starts[i + 1])) for i in range(len(starts) - 1)]
    else:
        m = scores_h.shape[2]
        images = [(i, i + 1) for i in range(scores_h.shape[0])]
    rows, index, counts = [], [], []
    for i, (s, e) in enumerate(images):
        if two_d:
            if s == e:
                counts.append(0)
                continue
            img_boxes, img_scores = boxes_h[s:e], scores_h[s:e]
        else:
            img_boxes, img_scores = boxes_h[i], scores_h[i]
        labels, idx = _multiclass_nms_one(img_boxes, img_scores, two_d, attrs)
        if two_d:
            rows.append(_detection_rows(labels, img_scores[idx, labels], img_boxes[idx, labels], boxes_h.dtype))
            index.append((s + idx) * c + labels)
        else:
            rows.append(_detection_rows(labels, img_scores[labels, idx], img_boxes[idx], boxes_h.dtype))
            index.append(i * m + idx)
        counts.append(labels.size)
    out = np.concatenate(rows) if rows else np.zeros((0, box_dim + 2), dtype=boxes_h.dtype)
    index = np.concatenate(index + [np.zeros(0, np.int64)]).astype(np.int32).reshape(-1, 1)
    counts = np.asarray(counts, dtype=np.int32)
    return _device(xp, out), _device(xp, index), _device(xp, counts)


@kernel("multiclass_nms", inputs=["BBoxes", "Scores"], outputs=["Out"],
        attrs=["score_threshold", "nms_top_k", "keep_top_k", "nms_threshold", "normalized",
               "nms_eta", "background_label"])
def multiclass_nms(xp, bboxes, scores, **attrs):
    """multiclass_nms3's Out; PaddlePaddle's 1.x kernel writes [[-1]] when nothing is kept."""
    out, _, _ = multiclass_nms3(xp, bboxes, scores, None, **attrs)
    if out.shape[0] == 0:
        return xp.full((1, 1), -1, dtype=out.dtype)
    return out


def _descending(keys, items, count):
    """std::partial_sort(items, items + count, end) by descending key: the first `count`
    items. With equal keys among them, in the order libstdc++ leaves them (stl_order);
    otherwise a numpy sort gives the same."""
    if count <= 0:
        return items[:0]
    k = keys[items]
    if np.unique(k).size == k.size:
        return items[np.argsort(-k, kind="stable")[:count]]
    key = keys.tolist()
    seq = items.tolist()
    stl_order.partial_sort(seq, count, lambda a, b: key[a] > key[b])
    return np.asarray(seq[:count], dtype=items.dtype)


def _matrix_decay(ious, maxes, sigma, gaussian, dtype):
    """decay_score: exp((max_iou^2 - iou^2) * sigma) in T, or (1 - iou) / (1 - max_iou) in
    double rounded to T (inf or NaN where max_iou is 1, as in PaddlePaddle)."""
    if gaussian:
        return _libm(np, np.exp, (maxes * maxes - ious * ious) * sigma)
    return ((1.0 - ious.astype(np.float64)) / (1.0 - maxes.astype(np.float64))).astype(dtype)


def _matrix_nms_class(boxes, scores, attrs):
    """NMSMatrix for one class: (selected box indices, their decayed scores), as arrays.

    Candidate i's score decays by the smallest decay over the better candidates j < i, each
    from their overlap and j's own largest overlap with a candidate better than it: the
    lower triangle of one overlap matrix, reduced row by row."""
    dt = boxes.dtype.type
    cand = np.nonzero(~(scores <= dt(attrs["score_threshold"])))[0]
    if cand.size == 0:
        return cand, scores[:0]
    num = cand.size
    top_k = attrs["nms_top_k"]
    if -1 < top_k < num:
        num = top_k
    order = _descending(scores, cand, num)
    num = order.size
    if num == 0:                                            # nms_top_k 0
        return order, scores[:0]
    better = np.tri(num, k=-1, dtype=bool)                  # [i, j]: j < i
    iou = np.where(better, _iou_matrix(boxes[order], boxes[order], attrs["normalized"]), dt(0))
    iou_max = np.fmax.reduce(iou, axis=1)                   # std::max from 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        decay = _matrix_decay(iou, iou_max[None, :], dt(attrs["gaussian_sigma"]), attrs["use_gaussian"],
                              boxes.dtype)
    # std::min(min_decay, decay) from 1: a NaN decay (0/0: two identical boxes) is skipped
    min_decay = np.fmin.reduce(np.where(better, decay, dt(1)), axis=1)
    decayed = (min_decay * scores[order]).astype(boxes.dtype)
    post = dt(attrs["post_threshold"])
    keep = ~(decayed <= post)
    keep[0] = scores[order[0]] > post                       # the best one is kept undecayed
    return order[keep], decayed[keep]


@kernel("matrix_nms", inputs=["BBoxes", "Scores"], outputs=["Out", "Index", "RoisNum"],
        attrs=["score_threshold", "post_threshold", "nms_top_k", "keep_top_k", "normalized",
               "use_gaussian", "gaussian_sigma", "background_label"])
def matrix_nms(xp, bboxes, scores, **attrs):
    boxes_h, scores_h = _host(xp, bboxes), _host(xp, scores)
    n, c, m = scores_h.shape
    box_dim = boxes_h.shape[2]
    _check_box_size("matrix_nms", box_dim)
    images, labels, decayed, counts = [], [], [], []
    for i in range(n):
        found = [(cls,) + _matrix_nms_class(boxes_h[i], scores_h[i, cls], attrs)
                 for cls in range(c) if cls != attrs["background_label"]]
        img_idx = np.concatenate([sel for _, sel, _ in found] + [np.zeros(0, np.int64)])
        img_scores = np.concatenate([dec for _, _, dec in found] + [np.zeros(0, scores_h.dtype)])
        img_labels = np.concatenate([np.full(sel.size, cls) for cls, sel, _ in found] + [np.zeros(0, np.int64)])
        num = img_idx.size
        if attrs["keep_top_k"] > -1:
            num = min(num, attrs["keep_top_k"])
        order = _descending(img_scores, np.arange(img_idx.size), num)
        images.append(i * m + img_idx[order])
        labels.append(img_labels[order])
        decayed.append(img_scores[order])
        counts.append(num)
    index = np.concatenate(images + [np.zeros(0, np.int64)])
    out = _detection_rows(np.concatenate(labels + [np.zeros(0, np.int64)]),
                          np.concatenate(decayed + [np.zeros(0, scores_h.dtype)]),
                          boxes_h.reshape(-1, box_dim)[index], boxes_h.dtype)
    return (_device(xp, out), _device(xp, index.astype(np.int32).reshape(-1, 1)),
            _device(xp, np.asarray(counts, dtype=np.int32)))


# ============================================================================ priors and anchors

def _expand_aspect_ratios(aspect_ratios, flip):
    out = [np.float32(1.0)]
    for ar in aspect_ratios:
        ar = np.float32(ar)
        if any(abs(float(ar) - float(seen)) < 1e-6 for seen in out):
            continue
        out.append(ar)
        if flip:
            out.append(np.float32(1.0 / float(ar)))
    return out


@kernel("prior_box", inputs=["Input", "Image"], outputs=["Boxes", "Variances"],
        attrs=["min_sizes", "max_sizes", "aspect_ratios", "variances", "flip", "clip", "step_w",
               "step_h", "offset", "min_max_aspect_ratios_order"])
def prior_box(xp, x, image, *, min_sizes, max_sizes, aspect_ratios, variances, flip, clip, step_w,
              step_h, offset, min_max_aspect_ratios_order):
    dt = x.dtype.type
    fh, fw = x.shape[2], x.shape[3]
    ih, iw = image.shape[2], image.shape[3]
    ars = _expand_aspect_ratios(aspect_ratios, flip)
    if dt(step_w) == 0 or dt(step_h) == 0:
        step_x, step_y = dt(dt(iw) / dt(fw)), dt(dt(ih) / dt(fh))
    else:
        step_x, step_y = dt(step_w), dt(step_h)
    half_sizes = []   # (half width, half height) per prior, in PaddlePaddle's order
    for s, mn in enumerate(min_sizes):
        mn = np.float32(mn)
        square = [(dt(mn / 2), dt(mn / 2))]
        if max_sizes:
            side = dt(np.sqrt(np.float32(mn * np.float32(max_sizes[s]))) / 2)
            square.append((side, side))
        ratio = [(dt(np.float32(mn * np.sqrt(ar)) / 2), dt(np.float32(mn / np.sqrt(ar)) / 2))
                 for ar in ars if not (min_max_aspect_ratios_order and abs(float(ar) - 1.0) < 1e-6)]
        if min_max_aspect_ratios_order:
            half_sizes += square + ratio
        else:
            half_sizes += ratio + square[1:]
    half = np.asarray(half_sizes, dtype=x.dtype)                         # [P, 2]
    cx = (np.arange(fw, dtype=x.dtype) + dt(offset)) * step_x              # [fw]
    cy = (np.arange(fh, dtype=x.dtype) + dt(offset)) * step_y              # [fh]
    cx = np.broadcast_to(cx[None, :, None], (fh, fw, len(half)))
    cy = np.broadcast_to(cy[:, None, None], (fh, fw, len(half)))
    hw, hh = half[:, 0], half[:, 1]
    boxes = np.stack([(cx - hw) / dt(iw), (cy - hh) / dt(ih), (cx + hw) / dt(iw), (cy + hh) / dt(ih)],
                     axis=-1).astype(x.dtype)
    if clip:
        boxes = np.minimum(np.maximum(boxes, dt(0)), dt(1))
    var = np.broadcast_to(np.asarray(variances, dtype=x.dtype), boxes.shape).copy()
    return _device(xp, np.ascontiguousarray(boxes)), _device(xp, var)


@kernel("density_prior_box", inputs=["Input", "Image"], outputs=["Boxes", "Variances"],
        attrs=["variances", "clip", "flatten_to_2d", "step_w", "step_h", "offset", "fixed_sizes",
               "fixed_ratios", "densities"])
def density_prior_box(xp, x, image, *, variances, clip, flatten_to_2d, step_w, step_h, offset,
                      fixed_sizes, fixed_ratios, densities):
    dt = x.dtype.type
    fh, fw = x.shape[2], x.shape[3]
    ih, iw = image.shape[2], image.shape[3]
    if dt(step_w) == 0 or dt(step_h) == 0:
        step_x, step_y = dt(dt(iw) / dt(fw)), dt(dt(ih) / dt(fh))
    else:
        step_x, step_y = dt(step_w), dt(step_h)
    step_average = int(float(dt(step_x + step_y)) * 0.5)
    sqrt_ratios = [np.float32(math.sqrt(float(np.float32(r)))) for r in fixed_ratios]
    priors = []   # (offset of the center from the cell's center, before rounding, box w, box h)
    for size, density in zip(fixed_sizes, densities):
        size = np.float32(size)
        shift = step_average // density
        for sr in sqrt_ratios:
            bw, bh = np.float32(size * sr), np.float32(size / sr)
            for di in range(density):
                for dj in range(density):
                    priors.append((dj * shift, di * shift, float(bw), float(bh), shift))
    ox, oy, bw, bh, shift = (np.asarray(v, dtype=np.float64).reshape(1, 1, -1)
                             for v in zip(*priors)) if priors else (np.zeros((1, 1, 0)),) * 5
    # PaddlePaddle's arithmetic: cell centres in T, offsets in double rounded to float, the
    # corners in double, std::max / std::min against the image's edges
    cy = ((np.arange(fh, dtype=x.dtype) + dt(offset)) * step_y).astype(np.float64).reshape(-1, 1, 1)
    cx = ((np.arange(fw, dtype=x.dtype) + dt(offset)) * step_x).astype(np.float64).reshape(1, -1, 1)
    tx = ((cx - step_average / 2.0 + shift / 2.0).astype(np.float32) + ox).astype(np.float32).astype(np.float64)
    ty = ((cy - step_average / 2.0 + shift / 2.0).astype(np.float32) + oy).astype(np.float32).astype(np.float64)

    def at_least_0(v):
        return np.where(0.0 > v, 0.0, v)

    def at_most_1(v):
        return np.where(1.0 < v, 1.0, v)
    corners = [at_least_0((tx - bw / 2.0) / iw), at_least_0((ty - bh / 2.0) / ih),
               at_most_1((tx + bw / 2.0) / iw), at_most_1((ty + bh / 2.0) / ih)]
    boxes = np.stack(np.broadcast_arrays(*corners), axis=-1).astype(x.dtype)       # [fh, fw, priors, 4]
    if clip:
        boxes = np.minimum(np.maximum(boxes, dt(0)), dt(1))
    var = np.broadcast_to(np.asarray(variances, dtype=x.dtype), boxes.shape).copy()
    if flatten_to_2d:
        boxes, var = boxes.reshape(-1, 4), var.reshape(-1, 4)
    return _device(xp, boxes), _device(xp, var)


@kernel("anchor_generator", inputs=["Input"], outputs=["Anchors", "Variances"],
        attrs=["anchor_sizes", "aspect_ratios", "variances", "stride", "offset"])
def anchor_generator(xp, x, *, anchor_sizes, aspect_ratios, variances, stride, offset):
    dt = x.dtype.type
    fh, fw = x.shape[2], x.shape[3]
    sw, sh = dt(stride[0]), dt(stride[1])
    off = dt(offset)
    sizes = []   # (width, height) per anchor: ratios outer, sizes inner
    for ar in aspect_ratios:
        ar = dt(ar)
        for size in anchor_sizes:
            size = dt(size)
            area = dt(sw * sh)
            # std::round on a float: halves away from zero (the values are positive)
            base_w = dt(math.floor(float(np.sqrt(dt(area / ar))) + 0.5))
            base_h = dt(math.floor(float(dt(base_w * ar)) + 0.5))
            sizes.append((dt(dt(size / sw) * base_w), dt(dt(size / sh) * base_h)))
    wh = np.asarray(sizes, dtype=x.dtype) - dt(1)          # anchor size - 1, in T  [A, 2]
    x_ctr = ((np.arange(fw, dtype=x.dtype) * sw) + dt(off * dt(sw - dt(1)))).astype(np.float64)
    y_ctr = ((np.arange(fh, dtype=x.dtype) * sh) + dt(off * dt(sh - dt(1)))).astype(np.float64)
    xc = x_ctr[None, :, None]
    yc = y_ctr[:, None, None]
    half_w, half_h = 0.5 * wh[:, 0].astype(np.float64), 0.5 * wh[:, 1].astype(np.float64)
    anchors = np.stack(np.broadcast_arrays(xc - half_w, yc - half_h, xc + half_w, yc + half_h),
                       axis=-1).astype(x.dtype)
    var = np.broadcast_to(np.asarray(variances, dtype=x.dtype), anchors.shape).copy()
    return _device(xp, np.ascontiguousarray(anchors)), _device(xp, var)


# ============================================================================ box_coder

@kernel("box_coder", inputs=["PriorBox", "PriorBoxVar", "TargetBox"], outputs=["OutputBox"],
        attrs=["code_type", "box_normalized", "axis", "variance"])
def box_coder(xp, prior, prior_var, target, *, code_type, box_normalized, axis, variance):
    dt = target.dtype.type
    one = dt(0) if box_normalized else dt(1)
    two = dt(2)
    pw = prior[:, 2] - prior[:, 0] + one
    ph = prior[:, 3] - prior[:, 1] + one
    pcx = prior[:, 0] + pw / two
    pcy = prior[:, 1] + ph / two
    if code_type == "encode_center_size":
        tcx = ((target[:, 2] + target[:, 0]) / two)[:, None]
        tcy = ((target[:, 3] + target[:, 1]) / two)[:, None]
        tw = (target[:, 2] - target[:, 0] + one)[:, None]
        th = (target[:, 3] - target[:, 1] + one)[:, None]
        out = xp.stack([(tcx - pcx) / pw, (tcy - pcy) / ph,
                        _libm(xp, xp.log, xp.abs(tw / pw)), _libm(xp, xp.log, xp.abs(th / ph))], axis=-1)
        if prior_var is not None:
            out = out / prior_var[None, :, :4]
        elif len(variance):
            out = out / xp.asarray(np.asarray(variance, dtype=target.dtype))
        return out
    if code_type != "decode_center_size":
        raise ValueError(f"box_coder: unknown code_type {code_type!r}")
    # decode: target [row, col, 4]; prior j (axis 0) or i (axis 1)
    expand = (lambda a: a[None, :]) if axis == 0 else (lambda a: a[:, None])
    pw, ph, pcx, pcy = expand(pw), expand(ph), expand(pcx), expand(pcy)
    if prior_var is not None:
        var = [expand(prior_var[:, k]) for k in range(4)]
    elif len(variance):
        var = [dt(v) for v in variance]
    else:
        var = [dt(1)] * 4
    cx = var[0] * target[..., 0] * pw + pcx
    cy = var[1] * target[..., 1] * ph + pcy
    w = _libm(xp, xp.exp, var[2] * target[..., 2]) * pw
    h = _libm(xp, xp.exp, var[3] * target[..., 3]) * ph
    return xp.stack([cx - w / two, cy - h / two, cx + w / two - one, cy + h / two - one], axis=-1)


# ============================================================================ roi_align

def _roi_geometry(rois, spatial_scale, aligned, clamp_size):
    """(xmin, ymin, width, height) of each RoI in feature-map units, float32 as PaddlePaddle."""
    dt = rois.dtype.type
    off = dt(0.5) if aligned else dt(0)
    scaled = rois * dt(spatial_scale) - off
    width = scaled[:, 2] - scaled[:, 0]
    height = scaled[:, 3] - scaled[:, 1]
    if clamp_size:
        width, height = np.maximum(width, dt(1)), np.maximum(height, dt(1))
    return scaled[:, 0], scaled[:, 1], width, height


def _grid(size, pooled, sampling_ratio):
    return sampling_ratio if sampling_ratio > 0 else int(math.ceil(float(np.float32(size / np.float32(pooled)))))


# roi_align gathers the samples of at most this many (RoI, bin, sample, channel) values at once:
# 1 MiB of float32 a term, which stays in cache (measured on 512 RoIs, 256 channels, 7x7 bins,
# 2x2 samples: 2^18 61 ms, 2^16 91 ms, 2^22 135 ms; one RoI at a time 163 ms)
_ROI_ALIGN_GATHER = 1 << 18


def _roi_grids(geometry, pooled_height, pooled_width, sampling_ratio):
    """Each RoI's sampling grid per bin, (gh, gw): sampling_ratio cells a side, else
    ceil(bin size)."""
    _, _, width, height = geometry
    return [(_grid(hk, pooled_height, sampling_ratio), _grid(wk, pooled_width, sampling_ratio))
            for hk, wk in zip(height, width)]


def _roi_sample_points(ks, grid, geometry, pooled_height, pooled_width, dtype, backward):
    """The bilinear sample points of the RoIs `ks`, which share the grid (gh, gw): ys and xs,
    [len(ks), ph, pw, gh, gw] each. Each bin is sampled at the centres of its gh x gw cells.
    PaddlePaddle's forward and gradient kernels place the same points in different float
    operation orders, both kept: forward start + bin * (p + (i + .5) / g), gradient
    start + p * bin + (i + .5) * bin / g."""
    xmin, ymin, width, height = (v[ks][:, None, None, None, None] for v in geometry)
    dt = dtype.type
    gh, gw = grid
    bin_h, bin_w = (height / dt(pooled_height)).astype(dtype), (width / dt(pooled_width)).astype(dtype)
    py = np.arange(pooled_height, dtype=dtype)[:, None, None, None]
    px = np.arange(pooled_width, dtype=dtype)[None, :, None, None]
    iy = (np.arange(gh, dtype=dtype) + dt(0.5))[None, None, :, None]
    ix = (np.arange(gw, dtype=dtype) + dt(0.5))[None, None, None, :]
    if backward:
        ys = ymin + py * bin_h + iy * bin_h / dt(gh)
        xs = xmin + px * bin_w + ix * bin_w / dt(gw)
    else:
        ys = ymin + bin_h * (py + iy / dt(gh))
        xs = xmin + bin_w * (px + ix / dt(gw))
    return np.broadcast_arrays(ys, xs)


def _rois_by_grid(grids, values_per_sample):
    """RoI indices grouped by grid size (ascending RoI order within a group), in chunks that
    gather at most _ROI_ALIGN_GATHER values (`values_per_sample` a grid cell)."""
    groups = {}
    for k, g in enumerate(grids):
        groups.setdefault(g, []).append(k)
    for g, ks in groups.items():
        limit = max(1, _ROI_ALIGN_GATHER // max(1, values_per_sample * g[0] * g[1]))
        for start in range(0, len(ks), limit):
            yield g, np.asarray(ks[start:start + limit], dtype=np.int64)


def _bilinear_corners(coord, limit):
    """PaddlePaddle's clamping of a sample coordinate along an axis of `limit` cells:
    (valid, low, high, clamped coordinate); `valid` False outside [-1, limit]."""
    dt = coord.dtype.type
    valid = ~((coord < -1.0) | (coord > limit))
    c = np.where(coord <= 0, dt(0), coord)
    low = np.trunc(c).astype(np.int64)
    at_end = low >= limit - 1
    low = np.where(at_end, limit - 1, low)
    high = np.where(at_end, limit - 1, low + 1)
    c = np.where(at_end, low.astype(coord.dtype), c)
    return valid, low, high, c


def _align_samples(coord, limit):
    """The forward rule: (valid, low, high, weight of low = high - coordinate), the corners
    of invalid samples 0."""
    valid, low, high, c = _bilinear_corners(coord, limit)
    ratio = high.astype(coord.dtype) - c
    return valid, np.where(valid, low, 0), np.where(valid, high, 0), ratio


@kernel("roi_align", inputs=["X", "ROIs", "RoisNum"], outputs=["Out"],
        attrs=["pooled_height", "pooled_width", "spatial_scale", "sampling_ratio", "aligned"])
def roi_align(xp, x, rois, rois_num, *, pooled_height, pooled_width, spatial_scale, sampling_ratio,
              aligned):
    n, c, h, w = x.shape
    r = rois.shape[0]
    out = xp.zeros((r, c, pooled_height, pooled_width), dtype=x.dtype)
    if r == 0:
        return out
    rois_h = _host(xp, rois)
    batch = _rois_batch_ids(_host(xp, rois_num), r, n, "roi_align")
    dt = x.dtype.type
    geometry = _roi_geometry(rois_h, spatial_scale, aligned, clamp_size=not aligned)
    grids = _roi_grids(geometry, pooled_height, pooled_width, sampling_ratio)
    bins = pooled_height * pooled_width
    pixels = x.transpose(0, 2, 3, 1).reshape(n * h * w, c)                 # [image pixel, channel]
    one = dt(1)
    for (gh, gw), ks in _rois_by_grid(grids, bins * c):
        samples = gh * gw
        ys, xs = _roi_sample_points(ks, (gh, gw), geometry, pooled_height, pooled_width, x.dtype, backward=False)
        valid_y, yl, yh, ry = _align_samples(ys, h)
        valid_x, xl, xh, rx = _align_samples(xs, w)
        valid = valid_y & valid_x
        weights = [rx * ry, (one - rx) * ry, rx * (one - ry), (one - rx) * (one - ry)]
        base = (batch[ks] * (h * w))[:, None, None, None, None]
        offsets = [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh]       # xy, Xy, xY, XY
        value = None
        for wt, o in zip(weights, offsets):
            wt = np.where(valid, wt, dt(0)).reshape(ks.size, bins, samples, 1)
            o = (base + np.where(valid, o, 0)).reshape(ks.size, bins, samples)
            term = _device(xp, wt) * pixels[_device(xp, o)]                 # [rois, bins, samples, c]
            value = term if value is None else value + term
        acc = xp.zeros((ks.size, bins, c), dtype=x.dtype)
        for s in range(samples):                                            # in sample order, as PaddlePaddle
            acc = acc + value[:, :, s]
        count = dt(1.0 / samples) if samples else dt(np.inf)
        out[_device(xp, ks)] = (acc * count).transpose(0, 2, 1).reshape(ks.size, c, pooled_height, pooled_width)
    return out


@kernel("roi_align_grad", inputs=["X", "ROIs", "RoisNum", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["pooled_height", "pooled_width", "spatial_scale", "sampling_ratio", "aligned"])
def roi_align_grad(xp, x, rois, rois_num, dout, *, pooled_height, pooled_width, spatial_scale,
                   sampling_ratio, aligned):
    n, c, h, w = x.shape
    r = rois.shape[0]
    dx = xp.zeros((n * h * w, c), dtype=x.dtype)
    if r == 0:
        return dx.reshape(n, h, w, c).transpose(0, 3, 1, 2).copy()
    rois_h = _host(xp, rois)
    batch = _rois_batch_ids(_host(xp, rois_num), r, n, "roi_align_grad")
    dt = x.dtype.type
    # PaddlePaddle's gradient kernel clamps the RoI size to >= 1 whatever `aligned` says.
    geometry = _roi_geometry(rois_h, spatial_scale, aligned, clamp_size=True)
    grids = _roi_grids(geometry, pooled_height, pooled_width, sampling_ratio)
    bins = pooled_height * pooled_width
    for k in range(r):
        # one RoI at a time: the gradients scatter in PaddlePaddle's RoI order
        (ys,), (xs,) = _roi_sample_points(np.array([k]), grids[k], geometry, pooled_height, pooled_width, x.dtype,
                                          backward=True)
        samples = grids[k][0] * grids[k][1]
        valid_y, yl, yh, ys = _bilinear_corners(ys, h)
        valid_x, xl, xh, xs = _bilinear_corners(xs, w)
        valid = valid_y & valid_x
        ly, lx = ys - yl.astype(x.dtype), xs - xl.astype(x.dtype)
        hy, hx = dt(1) - ly, dt(1) - lx
        weights = [hy * hx, hy * lx, ly * hx, ly * lx]
        offsets = [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh]
        count = dt(samples)
        g = dout[k].reshape(c, bins)                                        # [c, bins]
        base = int(batch[k]) * h * w
        for wt, o in zip(weights, offsets):
            wt = wt.reshape(bins, samples)
            o = o.reshape(bins, samples)
            keep = valid.reshape(bins, samples)
            bin_idx, sample = np.nonzero(keep)
            if bin_idx.size == 0:
                continue
            diff = g[:, _device(xp, bin_idx)] * _device(xp, wt[bin_idx, sample]) / count   # [c, K]
            scatter_add(xp, dx, _device(xp, base + o[bin_idx, sample]), diff.T)
    return dx.reshape(n, h, w, c).transpose(0, 3, 1, 2).copy()


# ============================================================================ roi_pool

def _round_half_away(v):
    v = v.astype(np.float64)
    return (np.sign(v) * np.floor(np.abs(v) + 0.5)).astype(np.int64)


@kernel("roi_pool", inputs=["X", "ROIs", "RoisNum"], outputs=["Out", "Argmax"],
        attrs=["pooled_height", "pooled_width", "spatial_scale"])
def roi_pool(xp, x, rois, rois_num, *, pooled_height, pooled_width, spatial_scale):
    n, c, h, w = x.shape
    r = rois.shape[0]
    out = xp.zeros((r, c, pooled_height, pooled_width), dtype=x.dtype)
    arg = xp.full((r, c, pooled_height, pooled_width), -1, dtype=np.int64)
    if r == 0:
        return out, arg
    rois_h = _host(xp, rois)
    batch = _rois_batch_ids(_host(xp, rois_num), r, n, "roi_pool")
    scaled = _round_half_away(rois_h * np.float32(spatial_scale))
    lowest = x.dtype.type(-np.finfo(x.dtype).max) if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    pad = -np.inf if x.dtype.kind == "f" else lowest
    for k in range(r):
        sw, sh, ew, eh = (int(v) for v in scaled[k])
        rh, rw = max(eh - sh + 1, 1), max(ew - sw + 1, 1)
        hs, he = _pool_bins(rh, pooled_height, sh, h)
        ws, we = _pool_bins(rw, pooled_width, sw, w)
        tall, wide = int((he - hs).max()), int((we - ws).max())
        if tall <= 0 or wide <= 0:
            continue                     # every bin empty: 0, argmax -1
        # every bin's region padded to tall x wide (row-major, so argmax finds the first
        # maximum as over the region itself); the padding never beats a value that counts
        ys = hs[:, None] + np.arange(tall)[None, :]                          # [ph, tall]
        xs = ws[:, None] + np.arange(wide)[None, :]                          # [pw, wide]
        inside = (ys < he[:, None])[:, None, :, None] & (xs < we[:, None])[None, :, None, :]
        pos = np.minimum(ys, h - 1)[:, None, :, None] * w + np.minimum(xs, w - 1)[None, :, None, :]
        region = x[int(batch[k])].reshape(c, h * w)[:, _device(xp, pos)]   # [c, ph, pw, tall, wide]
        region = xp.where(_device(xp, inside), region, x.dtype.type(pad))
        region = region.reshape(c, pooled_height, pooled_width, tall * wide)
        best = region.argmax(axis=-1)
        value = xp.take_along_axis(region, best[..., None], axis=-1)[..., 0]
        found = value > lowest
        at = xp.take_along_axis(_device(xp, pos.reshape(pooled_height, pooled_width, tall * wide))[None],
                                best[..., None], axis=-1)[..., 0]
        empty = _device(xp, (he <= hs)[:, None] | (we <= ws)[None, :])
        out[k] = xp.where(empty, x.dtype.type(0), xp.where(found, value, lowest))
        arg[k] = xp.where(empty | ~found, -1, at)
    return out, arg


def _pool_bins(size, pooled, start, limit):
    """roi_pool's bins along an axis of a RoI `size` cells long from `start`: (starts,
    ends), each floor / ceil of the float32 bin edges, clamped to [0, limit]."""
    bin_size = np.float32(np.float32(size) / np.float32(pooled))
    p = np.arange(pooled, dtype=np.float32)
    lo = np.floor(p * bin_size).astype(np.int64) + start
    hi = np.ceil((p + np.float32(1)) * bin_size).astype(np.int64) + start
    return np.clip(lo, 0, limit), np.clip(hi, 0, limit)


@kernel("roi_pool_grad", inputs=["X", "ROIs", "RoisNum", "Argmax", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["pooled_height", "pooled_width", "spatial_scale"])
def roi_pool_grad(xp, x, rois, rois_num, argmax, dout, *, pooled_height, pooled_width, spatial_scale):
    n, c, h, w = x.shape
    r = rois.shape[0]
    dx = xp.zeros(n * c * h * w, dtype=x.dtype)
    if r == 0:
        return dx.reshape(x.shape)
    if rois_num is None:
        batch = xp.zeros(r, dtype=np.int64)
    else:
        ends = xp.cumsum(rois_num.astype(np.int64))
        batch = xp.searchsorted(ends, xp.arange(r, dtype=np.int64), side="right")
    plane = (batch[:, None] * c + xp.arange(c, dtype=np.int64)[None, :]) * (h * w)   # [r, c]
    arg = argmax.reshape(r, c, -1)
    valid = arg >= 0
    idx = xp.where(valid, plane[:, :, None] + arg, 0).reshape(-1)
    values = xp.where(valid, dout.reshape(r, c, -1), x.dtype.type(0)).reshape(-1)
    scatter_add(xp, dx, idx, values)
    return dx.reshape(x.shape)


# ============================================================================ proposals

_BBOX_CLIP = math.log(1000.0 / 16.0)


def _proposal_nms(boxes, scores, threshold, eta, normalized):
    """funcs::NMS: candidates by ascending stable sort popped from the back (so equal scores
    go last index first); kept when their overlap with every kept box is <= threshold."""
    dt = boxes.dtype.type
    order = np.argsort(scores, kind="stable")[::-1]
    return order[_greedy_nms(boxes[order], dt(threshold), dt(eta), eta < 1, normalized)]


def _proposal_order(scores, pre, keep_arrangement):
    """The anchors PaddlePaddle keeps before NMS, in its arrangement: all of them by
    std::sort (descending score) when pre_nms_topN <= 0 or covers them all, else the
    first pre_nms_topN after std::nth_element. The arrangement matters for equal scores
    (NMS visits equal scores last-arranged first) and, without NMS (nms_thresh <= 0), for
    the output order itself; then libstdc++'s algorithms are followed (stl_order).
    Otherwise a numpy sort picks the same anchors."""
    n = scores.size
    select = 0 < pre < n
    ties = np.unique(scores).size < n
    if not ties and not (select and keep_arrangement):
        order = np.argsort(-scores, kind="stable")
        return order[:pre] if select else order
    key = scores.tolist()
    seq = list(range(n))

    def less(a, b):
        return key[a] > key[b]
    if select:
        stl_order.nth_element(seq, pre, less)
        seq = seq[:pre]
    else:
        stl_order.sort(seq, less)
    return np.asarray(seq, dtype=np.int64)


def _proposals_one_image(im, anchors, variances, deltas, scores, attrs):
    dt = scores.dtype.type
    pixel_offset = attrs["pixel_offset"]
    off = dt(1) if pixel_offset else dt(0)
    pre, post = attrs["pre_nms_topN"], attrs["post_nms_topN"]
    order = _proposal_order(scores, pre, attrs["nms_thresh"] <= 0)
    sc, d, a, v = scores[order], deltas[order], anchors[order], variances[order]
    aw = a[:, 2] - a[:, 0] + off
    ah = a[:, 3] - a[:, 1] + off
    acx = (a[:, 0] + 0.5 * aw.astype(np.float64)).astype(scores.dtype)
    acy = (a[:, 1] + 0.5 * ah.astype(np.float64)).astype(scores.dtype)
    cx = v[:, 0] * d[:, 0] * aw + acx
    cy = v[:, 1] * d[:, 1] * ah + acy
    clip = dt(_BBOX_CLIP)
    bw = _libm(np, np.exp, np.minimum(v[:, 2] * d[:, 2], clip)) * aw
    bh = _libm(np, np.exp, np.minimum(v[:, 3] * d[:, 3], clip)) * ah
    two = dt(2)
    props = np.stack([cx - bw / two, cy - bh / two, cx + bw / two - off, cy + bh / two - off], axis=1)
    im_h, im_w = dt(im[0]), dt(im[1])
    zero = dt(0)
    props[:, 0::2] = np.maximum(np.minimum(props[:, 0::2], dt(im_w - off)), zero)
    props[:, 1::2] = np.maximum(np.minimum(props[:, 1::2], dt(im_h - off)), zero)
    min_size = max(float(np.float32(attrs["min_size"])), 1.0)
    ws = props[:, 2] - props[:, 0] + off
    hs = props[:, 3] - props[:, 1] + off
    keep = (ws >= min_size) & (hs >= min_size)
    if pixel_offset:
        x_ctr = props[:, 0] + ws / two
        y_ctr = props[:, 1] + hs / two
        keep &= (x_ctr <= im_w) & (y_ctr <= im_h)
    keep = np.nonzero(keep)[0]
    if keep.size == 0:
        return np.zeros((1, 4), dtype=scores.dtype), np.zeros((1, 1), dtype=scores.dtype)
    props, sc = props[keep], sc[keep]
    if attrs["nms_thresh"] <= 0:
        return props, sc[:, None]
    kept = _proposal_nms(props, sc, attrs["nms_thresh"], attrs["eta"], normalized=not pixel_offset)
    if 0 < post < kept.size:
        kept = kept[:post]
    return props[kept], sc[kept][:, None]


@kernel("generate_proposals_v2", inputs=["Scores", "BboxDeltas", "ImShape", "Anchors", "Variances"],
        outputs=["RpnRois", "RpnRoiProbs", "RpnRoisNum"],
        attrs=["pre_nms_topN", "post_nms_topN", "nms_thresh", "min_size", "eta", "pixel_offset"])
def generate_proposals_v2(xp, scores, deltas, im_shape, anchors, variances, **attrs):
    scores_h, deltas_h = _host(xp, scores), _host(xp, deltas)
    im_h = _host(xp, im_shape)
    anchors_h = _host(xp, anchors).reshape(-1, 4)
    var_h = _host(xp, variances).reshape(-1, 4)
    n = scores_h.shape[0]
    rois, probs, counts = [], [], []
    for i in range(n):
        s = scores_h[i].transpose(1, 2, 0).reshape(-1)
        d = deltas_h[i].transpose(1, 2, 0).reshape(-1, 4)
        p, pr = _proposals_one_image(im_h[i], anchors_h, var_h, d, s, attrs)
        rois.append(p)
        probs.append(pr)
        counts.append(p.shape[0])
    rois = np.concatenate(rois).astype(scores_h.dtype) if rois else np.zeros((0, 4), scores_h.dtype)
    probs = np.concatenate(probs).astype(scores_h.dtype) if probs else np.zeros((0, 1), scores_h.dtype)
    return (_device(xp, np.ascontiguousarray(rois)), _device(xp, np.ascontiguousarray(probs)),
            _device(xp, np.asarray(counts, dtype=np.int32)))


@kernel("distribute_fpn_proposals", inputs=["FpnRois", "RoisNum"],
        outputs=["MultiFpnRois", "MultiLevelRoIsNum", "RestoreIndex"],
        attrs=["min_level", "max_level", "refer_level", "refer_scale", "pixel_offset"])
def distribute_fpn_proposals(xp, fpn_rois, rois_num, *, min_level, max_level, refer_level, refer_scale,
                             pixel_offset):
    rois = _host(xp, fpn_rois)
    dt = rois.dtype.type
    r = rois.shape[0]
    counts = [r] if rois_num is None else [int(v) for v in _host(xp, rois_num).reshape(-1)]
    if sum(counts) != r:
        raise ValueError(f"distribute_fpn_proposals: RoisNum {counts} does not add up to the {r} RoIs")
    image = np.repeat(np.arange(len(counts)), counts)
    w, h = rois[:, 2] - rois[:, 0], rois[:, 3] - rois[:, 1]
    area = (w + dt(1)) * (h + dt(1)) if pixel_offset else w * h
    area = np.where((rois[:, 2] < rois[:, 0]) | (rois[:, 3] < rois[:, 1]), dt(0), area)
    scale = np.sqrt(area)
    with np.errstate(divide="ignore"):
        level = np.floor(_libm(np, np.log2, scale / dt(refer_scale) + dt(1e-6)) + dt(refer_level))
    level = np.clip(level, min_level, max_level).astype(np.int64)
    levels = max_level - min_level + 1
    multi_rois, multi_num, order = [], [], []
    for lvl in range(min_level, max_level + 1):
        at = np.nonzero(level == lvl)[0]              # image-major, original order within
        order.append(at)
        multi_rois.append(_device(xp, np.ascontiguousarray(rois[at])))
        multi_num.append(_device(xp, np.bincount(image[at], minlength=len(counts)).astype(np.int32)))
    shuffled = np.concatenate(order) if levels else np.zeros(0, np.int64)
    restore = np.empty(r, dtype=np.int32)
    restore[shuffled] = np.arange(r, dtype=np.int32)
    return multi_rois, multi_num, _device(xp, restore.reshape(-1, 1))
