"""Detection ops: multiclass_nms3 (NonMaxSuppression and the gathers that give PaddlePaddle's
output layout), yolo_box, box_coder, prior_box, anchor_generator (composed from the input's
shape, so they fold to constants where the shape is static), roi_align (RoiAlign).
PaddlePaddle's semantics: kernels/detection.py."""
from __future__ import annotations

import math

import numpy as np

from keel.program.onnx.registry import converts

_INT64_MAX = np.iinfo(np.int64).max


# -- small shared pieces --------------------------------------------------------------------
def _dim(g, value, axis):
    """Dimension `axis` of `value` as a 1-element int64 tensor."""
    return g.node("Slice", [g.node("Shape", [value]), g.ints([axis]), g.ints([axis + 1]), g.ints([0])])


def _scalar_dim(g, value, axis):
    return g.node("Reshape", [_dim(g, value, axis), g.ints([])])


def _as_float(g, value, dtype):
    return g.node("Cast", [value], to=g.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype)))


def _column(g, value, k, axis=-1):
    """value[..., k] (the axis dropped)."""
    return g.node("Gather", [value, g.const(np.int64(k))], axis=axis)


def _stack_last(g, values):
    """Stack same-shaped values along a new last axis."""
    return g.node("Concat", [g.unsqueeze(v, [-1]) for v in values], axis=-1)


def _arange(g, count, dtype):
    """[0, 1, ..., count-1] (`count` a 0-d int64) in `dtype`."""
    numbers = g.node("Range", [g.const(np.int64(0)), count, g.const(np.int64(1))])
    return _as_float(g, numbers, dtype)


# -- multiclass_nms3 ----------------------------------------------------------------------------
@converts("multiclass_nms3")
def multiclass_nms3(g, op):
    """BBoxes [N, M, 4] and Scores [N, C, M] (the 3-D layout). Per image and class (label
    != background_label) PaddlePaddle keeps, among the nms_top_k best boxes of score >
    score_threshold, greedily by descending score (ties: lower index first) those whose
    overlap with every kept box is <= nms_threshold; then per image the keep_top_k best
    (ties in label order), listed by label, then by descending score. ONNX: TopK per class
    (its ties: lower index first), NonMaxSuppression with each (image, class) as a batch of
    one class (its output: by batch, then by descending score), a Loop over the images for
    keep_top_k. Boxes that are not normalized have width x2 - x1 + 1: their overlaps are
    ONNX's of the boxes with x2 + 1, y2 + 1."""
    if len(g.shape(op, "Scores")) != 3:
        raise g.error("Scores [M, C] with RoisNum (the 2-D layout of two-stage detectors) is not translated: "
                      "only BBoxes [N, M, 4] with Scores [N, C, M]")
    if op.attr("nms_eta", 1.0) != 1.0:
        raise g.error(f"nms_eta {op.attr('nms_eta')}: an adaptive NMS threshold has no ONNX equivalent "
                      f"(NonMaxSuppression's threshold is fixed)")
    if g.shape(op, "BBoxes")[-1] != 4:
        raise g.error(f"boxes of {g.shape(op, 'BBoxes')[-1]} coordinates: ONNX's NMS takes 4")
    boxes, scores = g.x(op, "BBoxes"), g.x(op, "Scores")
    dtype = g.dtype(op, "BBoxes")
    classes, count = _scalar_dim(g, scores, 1), _dim(g, scores, 2)
    top_k = op.attr("nms_top_k", -1)
    k = count if top_k < 0 else g.node("Min", [count, g.ints([top_k])])
    top_scores, top_index = g.node("TopK", [scores, k], 2, axis=2, largest=1, sorted=1)   # [N, C, k]
    per_class = g.node("GatherND", [boxes, g.node("Reshape", [top_index, g.ints([0, -1, 1])])], batch_dims=1)
    per_class = g.node("Reshape", [per_class, g.node("Concat", [g.ints([-1]), k, g.ints([4])], axis=0)])
    if not op.attr("normalized", True):
        per_class = g.node("Add", [per_class, g.const(np.array([0, 0, 1, 1], dtype))])
    selected = g.node("NonMaxSuppression", [
        per_class, g.node("Reshape", [top_scores, g.node("Concat", [g.ints([-1, 1]), k], axis=0)]),
        g.ints([_INT64_MAX]), g.const(np.array([op.attr("nms_threshold")], np.float32)),
        g.const(np.array([op.attr("score_threshold")], np.float32))])                      # [S, 3]
    batch, slot = _column(g, selected, 0), _column(g, selected, 2)
    image, label = g.node("Div", [batch, classes]), g.node("Mod", [batch, classes])
    background = op.attr("background_label", 0)
    if background >= 0:
        kept = g.node("Not", [g.node("Equal", [label, g.const(np.int64(background))])])
        batch, slot, image, label = (g.node("Compress", [v, kept], axis=0) for v in (batch, slot, image, label))
    flat = g.node("Add", [g.node("Mul", [batch, g.node("Reshape", [k, g.ints([])])]), slot])
    score = g.node("Gather", [g.node("Reshape", [top_scores, g.ints([-1])]), flat])
    box_index = g.node("Gather", [g.node("Reshape", [top_index, g.ints([-1])]), flat])
    images = _scalar_dim(g, scores, 0)
    order, per_image = _keep_top_k(g, op.attr("keep_top_k", -1), image, score, images)
    box_index, image, label, score = (g.node("Gather", [v, order]) for v in (box_index, image, label, score))
    index = g.node("Add", [g.node("Mul", [image, g.node("Reshape", [count, g.ints([])])]), box_index])
    box = g.node("Gather", [g.node("Reshape", [boxes, g.ints([-1, 4])]), index])
    g.node("Concat", [g.unsqueeze(_as_float(g, label, dtype), [1]), g.unsqueeze(score, [1]), box],
           g.y(op, "Out"), axis=1)
    int32 = g.onnx.TensorProto.INT32
    if op.output("Index"):
        g.node("Cast", [g.unsqueeze(index, [1])], g.y(op, "Index"), to=int32)
    if op.output("NmsRoisNum"):
        g.node("Cast", [per_image], g.y(op, "NmsRoisNum"), to=int32)


def _keep_top_k(g, keep_top_k, image, score, images):
    """(positions of the kept selections in output order, int64 count per image). The
    selections come grouped by image; per image the keep_top_k best scores are kept and
    put back in their order (by label, then descending score)."""
    if keep_top_k < 0:
        ids = g.unsqueeze(g.node("Range", [g.const(np.int64(0)), images, g.const(np.int64(1))]), [1])
        hits = g.node("Cast", [g.node("Equal", [ids, g.unsqueeze(image, [0])])], to=g.onnx.TensorProto.INT64)
        every = g.node("Range", [g.const(np.int64(0)), _scalar_dim(g, image, 0), g.const(np.int64(1))])
        return every, g.reduce("ReduceSum", hits, [1], keepdims=False)
    from keel.program.onnx.graph import GraphBuilder
    helper, tp = g.onnx.helper, g.onnx.TensorProto
    body = GraphBuilder(g.block, g.params, g.opset, parent=g)
    step, cond_in, so_far = body.fresh("image"), body.fresh("cond_in"), body.fresh("kept")
    mine = body.node("Reshape", [body.node("NonZero", [body.node("Equal", [image, step])]), body.ints([-1])])
    kk = body.node("Min", [body.node("Shape", [mine]), body.ints([keep_top_k])])
    _, best = body.node("TopK", [body.node("Gather", [score, mine]), kk], 2, axis=0, largest=1, sorted=1)
    chosen, _ = body.node("TopK", [body.node("Gather", [mine, best]), kk], 2, axis=0, largest=0, sorted=1)
    kept = body.node("Concat", [so_far, chosen], axis=0)
    cond_out = body.node("Identity", [cond_in])
    n_kept = body.node("Reshape", [kk, body.ints([])])
    graph = helper.make_graph(body.nodes, g.fresh("keep_top_k"), [
        helper.make_tensor_value_info(step, tp.INT64, []), helper.make_tensor_value_info(cond_in, tp.BOOL, []),
        helper.make_tensor_value_info(so_far, tp.INT64, [None])], [
        helper.make_tensor_value_info(cond_out, tp.BOOL, []), helper.make_tensor_value_info(kept, tp.INT64, [None]),
        helper.make_tensor_value_info(n_kept, tp.INT64, [])])
    start = g.const(np.zeros(0, np.int64), hint="none_kept")
    order, counts = g.node("Loop", [images, "", start], 2, body=graph)
    return order, counts


# -- yolo_box -----------------------------------------------------------------------------------
@converts("yolo_box")
def yolo_box(g, op):
    """X [N, A*(5+classes), H, W] (A anchors; iou_aware: A more channels first) decoded into
    Boxes [N, A*H*W, 4] and Scores [N, A*H*W, classes], zero where the confidence is below
    conf_thresh (kernels/detection.py yolo_box, operation for operation)."""
    x = g.x(op, "X")
    dtype = g.dtype(op, "X")
    anchors, classes = list(op.attr("anchors")), op.attr("class_num")
    count = len(anchors) // 2
    c = lambda v: g.const(np.asarray(v, dtype))  # noqa: E731  (a constant of X's dtype)
    height, width = _dim(g, x, 2), _dim(g, x, 3)
    iou_logit = None
    if op.attr("iou_aware", False):
        iou_logit = g.node("Slice", [x, g.ints([0]), g.ints([count]), g.ints([1])])
        x = g.node("Slice", [x, g.ints([count]), g.ints([_INT64_MAX]), g.ints([1])])
    shape = g.node("Concat", [_dim(g, x, 0), g.ints([count, 5 + classes]), height, width], axis=0)
    body = g.node("Reshape", [x, shape])                                      # [N, A, 5+cls, H, W]
    part = lambda k: _column(g, body, k, axis=2)  # noqa: E731
    conf = g.node("Sigmoid", [part(4)])                                       # [N, A, H, W]
    if iou_logit is not None:
        factor = float(np.float32(op.attr("iou_aware_factor")))
        conf = g.node("Mul", [g.node("Pow", [conf, c(1.0 - factor)]),
                              g.node("Pow", [g.node("Sigmoid", [iou_logit]), c(factor)])])
    keep = g.node("Not", [g.node("Less", [conf, c(op.attr("conf_thresh"))])])
    scale = float(np.float32(op.attr("scale_x_y", 1.0)))
    bias = float(np.float32(-0.5) * (np.float32(scale) - np.float32(1.0)))
    img = _as_float(g, g.x(op, "ImgSize"), dtype)
    img_h = g.node("Reshape", [_column(g, img, 0), g.ints([-1, 1, 1, 1])])
    img_w = g.node("Reshape", [_column(g, img, 1), g.ints([-1, 1, 1, 1])])
    h_f, w_f = _as_float(g, height, dtype), _as_float(g, width, dtype)
    grid_x = g.node("Reshape", [_arange(g, g.node("Reshape", [width, g.ints([])]), dtype), g.ints([1, 1, 1, -1])])
    grid_y = g.node("Reshape", [_arange(g, g.node("Reshape", [height, g.ints([])]), dtype), g.ints([1, 1, -1, 1])])

    def center(grid, k, size, img_size):
        shifted = g.node("Add", [g.node("Add", [grid, g.node("Mul", [g.node("Sigmoid", [part(k)]), c(scale)])]),
                                 c(bias)])
        return g.node("Div", [g.node("Mul", [shifted, img_size]), size])

    def extent(k, anchor, size, img_size):
        anchor = c(np.asarray(anchor).reshape(1, count, 1, 1))
        stretched = g.node("Mul", [g.node("Mul", [g.node("Exp", [part(k)]), anchor]), img_size])
        return g.node("Div", [stretched, g.node("Mul", [size, c(op.attr("downsample_ratio"))])])
    cx, cy = center(grid_x, 0, w_f, img_w), center(grid_y, 1, h_f, img_h)
    bw, bh = extent(2, anchors[0::2], w_f, img_w), extent(3, anchors[1::2], h_f, img_h)
    half_w, half_h = g.node("Div", [bw, c(2)]), g.node("Div", [bh, c(2)])
    x0, y0 = g.node("Sub", [cx, half_w]), g.node("Sub", [cy, half_h])
    x1, y1 = g.node("Add", [cx, half_w]), g.node("Add", [cy, half_h])
    if op.attr("clip_bbox", True):
        ints = g.node("Cast", [g.x(op, "ImgSize")], to=g.onnx.TensorProto.INT64)
        last = _as_float(g, g.node("Sub", [ints, g.const(np.int64(1))]), dtype)
        x0, y0 = g.node("Max", [x0, c(0)]), g.node("Max", [y0, c(0)])
        x1 = g.node("Min", [x1, g.node("Reshape", [_column(g, last, 1), g.ints([-1, 1, 1, 1])])])
        y1 = g.node("Min", [y1, g.node("Reshape", [_column(g, last, 0), g.ints([-1, 1, 1, 1])])])
    boxes = g.node("Where", [g.unsqueeze(keep, [-1]), _stack_last(g, [x0, y0, x1, y1]), c(0)])
    g.node("Reshape", [boxes, g.ints([0, -1, 4])], g.y(op, "Boxes"))
    cls = g.node("Sigmoid", [g.node("Slice", [body, g.ints([5]), g.ints([5 + classes]), g.ints([2])])])
    scores = g.node("Where", [g.unsqueeze(keep, [2]), g.node("Mul", [g.unsqueeze(conf, [2]), cls]), c(0)])
    scores = g.node("Transpose", [scores], perm=[0, 1, 3, 4, 2])
    g.node("Reshape", [scores, g.ints([0, -1, classes])], g.y(op, "Scores"))


# -- box_coder ----------------------------------------------------------------------------------
@converts("box_coder")
def box_coder(g, op):
    """Center-size encoding of TargetBox [R, 4] against PriorBox [M, 4] (Out [R, M, 4]), or
    decoding of TargetBox [R, M, 4] (axis 0: prior per column; axis 1: per row). Widths are
    x2 - x1 (+ 1 unless box_normalized); variances from PriorBoxVar, else the attribute."""
    dtype = g.dtype(op, "TargetBox")
    c = lambda v: g.const(np.asarray(v, dtype))  # noqa: E731
    one = c(0 if op.attr("box_normalized", True) else 1)
    prior, target = g.x(op, "PriorBox"), g.x(op, "TargetBox")
    p = [_column(g, prior, k) for k in range(4)]
    pw = g.node("Add", [g.node("Sub", [p[2], p[0]]), one])
    ph = g.node("Add", [g.node("Sub", [p[3], p[1]]), one])
    pcx = g.node("Add", [p[0], g.node("Div", [pw, c(2)])])
    pcy = g.node("Add", [p[1], g.node("Div", [ph, c(2)])])
    variance = g.x(op, "PriorBoxVar")
    code = op.attr("code_type", "encode_center_size")
    if code == "encode_center_size":
        t = [g.unsqueeze(_column(g, target, k), [1]) for k in range(4)]                 # [R, 1]
        tcx = g.node("Div", [g.node("Add", [t[2], t[0]]), c(2)])
        tcy = g.node("Div", [g.node("Add", [t[3], t[1]]), c(2)])
        tw = g.node("Add", [g.node("Sub", [t[2], t[0]]), one])
        th = g.node("Add", [g.node("Sub", [t[3], t[1]]), one])
        out = _stack_last(g, [g.node("Div", [g.node("Sub", [tcx, pcx]), pw]),
                              g.node("Div", [g.node("Sub", [tcy, pcy]), ph]),
                              g.node("Log", [g.node("Abs", [g.node("Div", [tw, pw])])]),
                              g.node("Log", [g.node("Abs", [g.node("Div", [th, ph])])])])
        if variance is not None:
            out = g.node("Div", [out, g.unsqueeze(variance, [0])])
        elif op.attr("variance"):
            out = g.node("Div", [out, c(op.attr("variance"))])
        g.node("Identity", [out], g.y(op, "OutputBox"))
        return
    if code != "decode_center_size":
        raise g.error(f"code_type {code!r}: PaddlePaddle knows encode_center_size and decode_center_size")
    axes = [0] if op.attr("axis", 0) == 0 else [1]
    pw, ph, pcx, pcy = (g.unsqueeze(v, axes) for v in (pw, ph, pcx, pcy))
    if variance is not None:
        var = [g.unsqueeze(_column(g, variance, k), axes) for k in range(4)]
    else:
        var = [c(v) for v in (op.attr("variance") or [1, 1, 1, 1])]
    t = [_column(g, target, k) for k in range(4)]
    cx = g.node("Add", [g.node("Mul", [g.node("Mul", [var[0], t[0]]), pw]), pcx])
    cy = g.node("Add", [g.node("Mul", [g.node("Mul", [var[1], t[1]]), ph]), pcy])
    w = g.node("Mul", [g.node("Exp", [g.node("Mul", [var[2], t[2]])]), pw])
    h = g.node("Mul", [g.node("Exp", [g.node("Mul", [var[3], t[3]])]), ph])
    half_w, half_h = g.node("Div", [w, c(2)]), g.node("Div", [h, c(2)])
    g.node("Identity", [_stack_last(g, [g.node("Sub", [cx, half_w]), g.node("Sub", [cy, half_h]),
                                        g.node("Sub", [g.node("Add", [cx, half_w]), one]),
                                        g.node("Sub", [g.node("Add", [cy, half_h]), one])])], g.y(op, "OutputBox"))


# -- prior_box / anchor_generator -----------------------------------------------------------------
@converts("prior_box")
def prior_box(g, op):
    """Boxes [H, W, P, 4] = the priors' half sizes (constants of the attributes) around each
    cell center ((index + offset) * step, step = image size / feature size unless given),
    divided by the image size; Variances the attribute repeated."""
    dtype = g.dtype(op, "Input")
    dt = np.dtype(dtype).type
    c = lambda v: g.const(np.asarray(v, dtype))  # noqa: E731
    half = _prior_half_sizes(op, dt)                                                      # [P, 2]
    fh, fw = _dim(g, g.x(op, "Input"), 2), _dim(g, g.x(op, "Input"), 3)
    ih, iw = (_as_float(g, _dim(g, g.x(op, "Image"), a), dtype) for a in (2, 3))
    if dt(op.attr("step_w", 0.0)) == 0 or dt(op.attr("step_h", 0.0)) == 0:
        step_x = g.node("Div", [iw, _as_float(g, fw, dtype)])
        step_y = g.node("Div", [ih, _as_float(g, fh, dtype)])
    else:
        step_x, step_y = c([op.attr("step_w")]), c([op.attr("step_h")])
    offset = c(op.attr("offset", 0.5))
    cx = g.node("Mul", [g.node("Add", [_arange(g, g.node("Reshape", [fw, g.ints([])]), dtype), offset]), step_x])
    cy = g.node("Mul", [g.node("Add", [_arange(g, g.node("Reshape", [fh, g.ints([])]), dtype), offset]), step_y])
    cx, cy = g.node("Reshape", [cx, g.ints([1, -1, 1])]), g.node("Reshape", [cy, g.ints([-1, 1, 1])])
    hw, hh = c(half[:, 0].reshape(1, 1, -1)), c(half[:, 1].reshape(1, 1, -1))
    shape = g.node("Concat", [fh, fw, g.ints([len(half)])], axis=0)
    corners = [g.node("Div", [g.node(op_type, [center, size]), image])
               for op_type, center, size, image in (("Sub", cx, hw, iw), ("Sub", cy, hh, ih),
                                                    ("Add", cx, hw, iw), ("Add", cy, hh, ih))]
    boxes = _stack_last(g, [g.node("Expand", [v, shape]) for v in corners])
    if op.attr("clip", False):
        boxes = g.node("Min", [g.node("Max", [boxes, c(0)]), c(1)])
    g.node("Identity", [boxes], g.y(op, "Boxes"))
    g.node("Expand", [c(op.attr("variances")), g.node("Shape", [boxes])], g.y(op, "Variances"))


def _prior_half_sizes(op, dt):
    """(half width, half height) of each prior, in PaddlePaddle's order and float32 steps:
    per min size, the aspect-ratio boxes then the sqrt(min*max) square (or with
    min_max_aspect_ratios_order, the min square, the max square, the other ratios)."""
    ratios = [np.float32(1.0)]
    for ar in map(np.float32, op.attr("aspect_ratios")):
        if all(abs(float(ar) - float(seen)) >= 1e-6 for seen in ratios):
            ratios += [ar] + ([np.float32(1.0 / float(ar))] if op.attr("flip", True) else [])
    max_sizes = list(op.attr("max_sizes") or [])
    min_max_order = op.attr("min_max_aspect_ratios_order", False)
    halves = []
    for i, low in enumerate(map(np.float32, op.attr("min_sizes"))):
        squares = [(dt(low / 2),) * 2]
        if max_sizes:
            squares.append((dt(np.sqrt(np.float32(low * np.float32(max_sizes[i]))) / 2),) * 2)
        by_ratio = [(dt(np.float32(low * np.sqrt(r)) / 2), dt(np.float32(low / np.sqrt(r)) / 2))
                    for r in ratios if not (min_max_order and abs(float(r) - 1.0) < 1e-6)]
        halves += squares + by_ratio if min_max_order else by_ratio + squares[1:]
    return np.asarray(halves, dtype=dt)


@converts("anchor_generator")
def anchor_generator(g, op):
    """Anchors [H, W, A, 4]: each anchor's (size - 1) / 2 (constants of the attributes)
    around the cell centers index * stride + offset * (stride - 1), in double as
    PaddlePaddle, rounded to the input's dtype; Variances the attribute repeated."""
    dtype = g.dtype(op, "Input")
    dt = np.dtype(dtype).type
    stride_w, stride_h = (dt(s) for s in op.attr("stride"))
    extents = _anchor_extents(op, dt, stride_w, stride_h)                                # [A, 2]
    fh, fw = _dim(g, g.x(op, "Input"), 2), _dim(g, g.x(op, "Input"), 3)
    offset = dt(op.attr("offset", 0.5))

    def centers(count, stride):
        cells = g.node("Mul", [_arange(g, g.node("Reshape", [count, g.ints([])]), dtype), g.const(stride)])
        return _as_float(g, g.node("Add", [cells, g.const(dt(offset * dt(stride - dt(1))))]), np.float64)
    xc = g.node("Reshape", [centers(fw, stride_w), g.ints([1, -1, 1])])
    yc = g.node("Reshape", [centers(fh, stride_h), g.ints([-1, 1, 1])])
    half_w = g.const((0.5 * extents[:, 0].astype(np.float64)).reshape(1, 1, -1))
    half_h = g.const((0.5 * extents[:, 1].astype(np.float64)).reshape(1, 1, -1))
    shape = g.node("Concat", [fh, fw, g.ints([len(extents)])], axis=0)
    corners = [g.node("Expand", [g.node(op_type, [center, half]), shape])
               for op_type, center, half in (("Sub", xc, half_w), ("Sub", yc, half_h), ("Add", xc, half_w),
                                             ("Add", yc, half_h))]
    anchors = _as_float(g, _stack_last(g, corners), dtype)
    g.node("Identity", [anchors], g.y(op, "Anchors"))
    g.node("Expand", [g.const(np.asarray(op.attr("variances"), dtype)), g.node("Shape", [anchors])],
           g.y(op, "Variances"))


def _anchor_extents(op, dt, stride_w, stride_h):
    """(width - 1, height - 1) of each anchor, aspect ratios outer, sizes inner: a base
    square of the stride's area reshaped to the ratio (rounded halves away from zero),
    scaled by size / stride."""
    extents = []
    for ratio in map(dt, op.attr("aspect_ratios")):
        for size in map(dt, op.attr("anchor_sizes")):
            base_w = dt(math.floor(float(np.sqrt(dt(dt(stride_w * stride_h) / ratio))) + 0.5))
            base_h = dt(math.floor(float(dt(base_w * ratio)) + 0.5))
            extents.append((dt(dt(size / stride_w) * base_w), dt(dt(size / stride_h) * base_h)))
    return np.asarray(extents, dtype=dt) - dt(1)


# -- roi_align ----------------------------------------------------------------------------------
@converts("roi_align")
def roi_align(g, op):
    """ONNX RoiAlign (opset 16 for the coordinate mode): `aligned` shifts by half a pixel
    (half_pixel) and leaves small RoIs as they are; otherwise output_half_pixel, where
    RoIs are at least 1x1, as PaddlePaddle's. Each RoI's image: from RoisNum (counts per
    image), else image 0."""
    if g.opset < 16:
        raise g.error(f"RoiAlign's coordinate_transformation_mode needs opset 16 or later (asked: {g.opset})")
    rois = g.x(op, "ROIs")
    counts = g.x(op, "RoisNum")
    total = _scalar_dim(g, rois, 0)
    if counts is None:
        batch = g.node("Expand", [g.const(np.zeros(1, np.int64)), g.node("Reshape", [total, g.ints([1])])])
    else:  # RoI k belongs to the image whose cumulative count first exceeds k
        ends = g.node("CumSum", [g.node("Cast", [counts], to=g.onnx.TensorProto.INT64), g.const(np.int64(0))])
        k = g.unsqueeze(g.node("Range", [g.const(np.int64(0)), total, g.const(np.int64(1))]), [1])
        before = g.node("Cast", [g.node("LessOrEqual", [g.unsqueeze(ends, [0]), k])], to=g.onnx.TensorProto.INT64)
        batch = g.reduce("ReduceSum", before, [1], keepdims=False)
    g.node("RoiAlign", [g.x(op, "X"), rois, batch], g.y(op, "Out"), mode="avg",
           output_height=op.attr("pooled_height"), output_width=op.attr("pooled_width"),
           sampling_ratio=max(0, op.attr("sampling_ratio", -1)), spatial_scale=op.attr("spatial_scale", 1.0),
           coordinate_transformation_mode="half_pixel" if op.attr("aligned", False) else "output_half_pixel")


# -- generate_proposals_v2 ----------------------------------------------------------------------
_BBOX_CLIP = math.log(1000.0 / 16.0)  # PaddlePaddle's bound on the decoded log-sizes


@converts("generate_proposals_v2")
def generate_proposals_v2(g, op):
    """Per image (a Loop): the pre_nms_topN best anchors by score (TopK), their boxes decoded
    from BboxDeltas, clipped to the image, those smaller than min_size dropped, then
    NonMaxSuppression keeping at most post_nms_topN (in descending score, as PaddlePaddle's
    greedy NMS lists them). An image left with no box gives one zero box of score 0, as
    PaddlePaddle's kernel does. Results are concatenated over the images; RpnRoisNum counts
    them."""
    if op.attr("eta", 1.0) != 1.0:
        raise g.error(f"eta {op.attr('eta')}: an adaptive NMS threshold has no ONNX equivalent")
    pre, anchors_per_image = op.attr("pre_nms_topN", -1), math.prod(g.shape(op, "Scores")[1:])
    if op.attr("nms_thresh") <= 0 and pre > 0 and not 0 <= anchors_per_image <= pre:
        raise g.error(f"nms_thresh {op.attr('nms_thresh')} (no NMS) with pre_nms_topN {pre}: PaddlePaddle then "
                      f"lists the proposals in the arrangement std::nth_element leaves, not by score, which "
                      f"ONNX's TopK does not reproduce")
    from keel.program.onnx.graph import GraphBuilder
    dtype = g.dtype(op, "Scores")
    helper, tp = g.onnx.helper, g.onnx.TensorProto
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    anchors = g.node("Reshape", [g.x(op, "Anchors"), g.ints([-1, 4])])
    variances = g.node("Reshape", [g.x(op, "Variances"), g.ints([-1, 4])])
    body = GraphBuilder(g.block, g.params, g.opset, parent=g)
    step, cond_in = body.fresh("image"), body.fresh("cond_in")
    rois_in, probs_in = body.fresh("rois"), body.fresh("probs")
    at = body.unsqueeze(step, [0])

    def image_of(slot):  # this image's [C, H, W] map as rows in (H, W, C) order
        one = body.node("Gather", [g.x(op, slot), at], axis=0)
        return body.node("Transpose", [one], perm=[0, 2, 3, 1])
    scores = body.node("Reshape", [image_of("Scores"), body.ints([-1])])
    deltas = body.node("Reshape", [image_of("BboxDeltas"), body.ints([-1, 4])])
    count = body.node("Shape", [scores])
    k = count if pre <= 0 else body.node("Min", [count, body.ints([pre])])
    top, order = body.node("TopK", [scores, k], 2, axis=0, largest=1, sorted=1)
    im = _as_float(body, body.node("Gather", [g.x(op, "ImShape"), step], axis=0), dtype)
    boxes = _decode_proposals(body, op, dtype, *(body.node("Gather", [v, order], axis=0)
                                                 for v in (anchors, variances, deltas)), im)
    keep = body.node("Reshape", [body.node("NonZero", [_big_enough(body, op, dtype, boxes, im)]),
                                 body.ints([-1])])
    boxes, top = body.node("Gather", [boxes, keep], axis=0), body.node("Gather", [top, keep], axis=0)
    if op.attr("nms_thresh") > 0:
        post = op.attr("post_nms_topN", -1)
        nms_boxes = boxes if op.attr("pixel_offset", True) is False else body.node(
            "Add", [boxes, body.const(np.array([0, 0, 1, 1], dtype))])
        chosen = body.node("NonMaxSuppression", [
            body.unsqueeze(nms_boxes, [0]), body.unsqueeze(top, [0, 1]),
            body.ints([post if post > 0 else _INT64_MAX]),
            body.const(np.array([op.attr("nms_thresh")], np.float32))])
        chosen = _column(body, chosen, 2)
        boxes, top = body.node("Gather", [boxes, chosen], axis=0), body.node("Gather", [top, chosen], axis=0)
    # one zero box where none is left: pad with it and keep max(found, 1) rows
    found = body.node("Shape", [top])
    rows = body.node("Max", [found, body.ints([1])])
    boxes = body.node("Slice", [body.node("Concat", [boxes, body.const(np.zeros((1, 4), dtype))], axis=0),
                                body.ints([0]), rows, body.ints([0])])
    probs = body.node("Slice", [body.node("Concat", [top, body.const(np.zeros(1, dtype))], axis=0),
                                body.ints([0]), rows, body.ints([0])])
    rois_out = body.node("Concat", [rois_in, boxes], axis=0)
    probs_out = body.node("Concat", [probs_in, body.unsqueeze(probs, [1])], axis=0)
    cond_out = body.node("Identity", [cond_in])
    n_rows = body.node("Cast", [body.node("Reshape", [rows, body.ints([])])], to=tp.INT32)
    graph = helper.make_graph(body.nodes, g.fresh("proposals"), [
        helper.make_tensor_value_info(step, tp.INT64, []), helper.make_tensor_value_info(cond_in, tp.BOOL, []),
        helper.make_tensor_value_info(rois_in, elem, [None, 4]),
        helper.make_tensor_value_info(probs_in, elem, [None, 1])], [
        helper.make_tensor_value_info(cond_out, tp.BOOL, []), helper.make_tensor_value_info(rois_out, elem, [None, 4]),
        helper.make_tensor_value_info(probs_out, elem, [None, 1]),
        helper.make_tensor_value_info(n_rows, tp.INT32, [])])
    images = _scalar_dim(g, g.x(op, "Scores"), 0)
    outputs = [g.y(op, "RpnRois"), g.y(op, "RpnRoiProbs"), g.y(op, "RpnRoisNum") or g.fresh("rois_num")]
    g.node("Loop", [images, "", g.const(np.zeros((0, 4), dtype)), g.const(np.zeros((0, 1), dtype))], outputs,
           body=graph)


def _decode_proposals(g, op, dtype, anchors, variances, deltas, im):
    """The boxes the deltas make of the anchors (centers in double, as PaddlePaddle's
    kernel), clipped to the image [h, w]."""
    c = lambda v: g.const(np.asarray(v, dtype))  # noqa: E731
    off = c(1 if op.attr("pixel_offset", True) else 0)
    a, v, d = ([_column(g, t, i) for i in range(4)] for t in (anchors, variances, deltas))
    aw = g.node("Add", [g.node("Sub", [a[2], a[0]]), off])
    ah = g.node("Add", [g.node("Sub", [a[3], a[1]]), off])

    def center(start, size):
        half = g.node("Mul", [g.const(np.float64(0.5)), _as_float(g, size, np.float64)])
        return _as_float(g, g.node("Add", [_as_float(g, start, np.float64), half]), dtype)
    cx = g.node("Add", [g.node("Mul", [g.node("Mul", [v[0], d[0]]), aw]), center(a[0], aw)])
    cy = g.node("Add", [g.node("Mul", [g.node("Mul", [v[1], d[1]]), ah]), center(a[1], ah)])
    bound = c(_BBOX_CLIP)
    bw = g.node("Mul", [g.node("Exp", [g.node("Min", [g.node("Mul", [v[2], d[2]]), bound])]), aw])
    bh = g.node("Mul", [g.node("Exp", [g.node("Min", [g.node("Mul", [v[3], d[3]]), bound])]), ah])
    half_w, half_h = g.node("Div", [bw, c(2)]), g.node("Div", [bh, c(2)])
    limit_h = g.node("Sub", [_column(g, im, 0), off])
    limit_w = g.node("Sub", [_column(g, im, 1), off])
    clip = lambda value, limit: g.node("Max", [g.node("Min", [value, limit]), c(0)])  # noqa: E731
    return _stack_last(g, [clip(g.node("Sub", [cx, half_w]), limit_w), clip(g.node("Sub", [cy, half_h]), limit_h),
                           clip(g.node("Sub", [g.node("Add", [cx, half_w]), off]), limit_w),
                           clip(g.node("Sub", [g.node("Add", [cy, half_h]), off]), limit_h)])


def _big_enough(g, op, dtype, boxes, im):
    """Boxes at least min_size (and at least 1) wide and high; with pixel_offset, also
    centered inside the image."""
    c = lambda v: g.const(np.asarray(v, dtype))  # noqa: E731
    off = c(1 if op.attr("pixel_offset", True) else 0)
    b = [_column(g, boxes, i) for i in range(4)]
    ws = g.node("Add", [g.node("Sub", [b[2], b[0]]), off])
    hs = g.node("Add", [g.node("Sub", [b[3], b[1]]), off])
    least = c(max(float(np.float32(op.attr("min_size"))), 1.0))
    keep = g.node("And", [g.node("GreaterOrEqual", [ws, least]), g.node("GreaterOrEqual", [hs, least])])
    if op.attr("pixel_offset", True):
        inside_x = g.node("LessOrEqual", [g.node("Add", [b[0], g.node("Div", [ws, c(2)])]), _column(g, im, 1)])
        inside_y = g.node("LessOrEqual", [g.node("Add", [b[1], g.node("Div", [hs, c(2)])]), _column(g, im, 0)])
        keep = g.node("And", [keep, g.node("And", [inside_x, inside_y])])
    return keep
