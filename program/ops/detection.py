"""Detection ops, as PaddleDetection/PaddleOCR inference models export them: YOLO box
decoding, multi-class and matrix NMS, prior/anchor generation, box coding, RoI align and
pooling, RPN proposals and their distribution over FPN levels.

Slots, attributes and shape rules follow PaddlePaddle's legacy ops (YoloBoxInferMeta,
MultiClassNMSInferMeta, PriorBoxInferMeta, ...), LoD-free: where PaddlePaddle's legacy ops
could carry the per-image split of a box list as LoD, Keel takes it from the `RoisNum`
input (int32 or int64, one count per image) and writes it to the `*RoisNum` / `*RoIsNum`
outputs; a LoD fed on ROIs / FpnRois stands for that input (OpDef.lod_lengths,
executor/lod.py). Outputs whose length depends on the values (NMS results, proposals, per-level
RoIs) have a -1 first dim. Only roi_align and roi_pool are differentiable (with respect to
X), as in PaddlePaddle.
"""
from __future__ import annotations

from keel.program.errors import AttrError
from keel.program.ops.infer import dims_match
from keel.program.ops.registry import (BOOL, FLOAT, FLOATS, INT, INTS, NOT_DIFFERENTIABLE, STRING,
                                  define, grad_op, many, opt, side)
from keel.proto import pb

_T = pb.VarType
_INT32, _INT64 = _T.INT32, _T.INT64


def _attr_fail(ctx, message: str):
    raise AttrError(message, op_type=ctx.op_type, callsite=ctx.callsite)


def _rank(ctx, slot, ranks):
    info = ctx.input(slot)
    if info.ndim not in ranks:
        ctx.fail(f"expects {slot} of rank {' or '.join(map(str, ranks))}, got {info}")
    return info


def _box_dim(ctx, info, what):
    if info.shape[-1] not in (-1, 4):
        ctx.fail(f"{what} must end in 4 box coordinates, got {info}")


# -- yolo_box -------------------------------------------------------------------------------
def _infer_yolo_box(ctx):
    x = _rank(ctx, "X", (4,))
    ctx.require_float(x)
    img = _rank(ctx, "ImgSize", (2,))
    if img.shape[1] not in (-1, 2):
        ctx.fail(f"ImgSize must be [N, 2] (height, width), got {img}")
    if not dims_match(img.shape[0], x.shape[0]):
        ctx.fail(f"ImgSize {img} must have one row per image of X {x}")
    anchors = list(ctx.attr("anchors"))
    class_num = ctx.attr("class_num")
    if not anchors or len(anchors) % 2:
        _attr_fail(ctx, f"anchors must hold (width, height) pairs, got {anchors}")
    if class_num <= 0:
        _attr_fail(ctx, f"class_num must be > 0, got {class_num}")
    if ctx.attr("downsample_ratio") <= 0:
        _attr_fail(ctx, f"downsample_ratio must be > 0, got {ctx.attr('downsample_ratio')}")
    an_num = len(anchors) // 2
    per_anchor = class_num + (6 if ctx.attr("iou_aware") else 5)
    if x.shape[1] >= 0 and x.shape[1] != an_num * per_anchor:
        ctx.fail(f"X's channels ({x.shape[1]}) must be anchors ({an_num}) * "
                 f"(class_num ({class_num}) + {per_anchor - class_num}), got {x}")
    n, h, w = x.shape[0], x.shape[2], x.shape[3]
    boxes = an_num * h * w if h >= 0 and w >= 0 else -1
    ctx.set_output("Boxes", [n, boxes, 4], x.dtype)
    ctx.set_output("Scores", [n, boxes, class_num], x.dtype)


define("yolo_box", inputs=["X", "ImgSize"], outputs=["Boxes", "Scores"],
       attrs={"anchors": INTS([]), "class_num": INT(1), "conf_thresh": FLOAT(0.01),
              "downsample_ratio": INT(32), "clip_bbox": BOOL(True), "scale_x_y": FLOAT(1.0),
              "iou_aware": BOOL(False), "iou_aware_factor": FLOAT(0.5)},
       infer=_infer_yolo_box, grad=NOT_DIFFERENTIABLE,
       doc="Decodes a YOLOv3 head [N, anchors*(5+classes), H, W] into boxes in image pixels "
           "and per-class scores (zero below conf_thresh).")


# -- multiclass_nms3 / matrix_nms -----------------------------------------------------------
def _nms_inputs(ctx):
    boxes, scores = ctx.input("BBoxes"), ctx.input("Scores")
    ctx.require_float(boxes)
    ctx.same_dtype(boxes, scores)
    if scores.ndim == 3:
        if boxes.ndim != 3:
            ctx.fail(f"with Scores [N, C, M], BBoxes must be [N, M, box_dim], got {boxes}")
        if not dims_match(boxes.shape[1], scores.shape[2]):
            ctx.fail(f"BBoxes {boxes} and Scores {scores} disagree on the number of boxes")
        if not dims_match(boxes.shape[0], scores.shape[0]):
            ctx.fail(f"BBoxes {boxes} and Scores {scores} disagree on the number of images")
        batch = scores.shape[0]
    elif scores.ndim == 2:
        if boxes.ndim != 3 or not (dims_match(boxes.shape[0], scores.shape[0])
                                   and dims_match(boxes.shape[1], scores.shape[1])):
            ctx.fail(f"with Scores [M, C] {scores}, BBoxes must be [M, C, box_dim], got {boxes}")
        batch = -1
    else:
        ctx.fail(f"Scores must be [N, C, M] or [M, C], got {scores}")
    box_dim = boxes.shape[2]
    if box_dim not in (-1, 4, 8, 16, 24, 32):
        ctx.fail(f"box_dim must be 4, 8, 16, 24 or 32, got {boxes}")
    return boxes, scores, batch, box_dim


def _infer_multiclass_nms3(ctx):
    boxes, scores, batch, box_dim = _nms_inputs(ctx)
    if scores.ndim == 2 and ctx.has_input("RoisNum"):
        batch = ctx.input("RoisNum").shape[0]
    ctx.set_output("Out", [-1, box_dim + 2 if box_dim >= 0 else -1], boxes.dtype)
    ctx.set_output("Index", [-1, 1], _INT32)
    ctx.set_output("NmsRoisNum", [batch], _INT32)


_NMS_ATTRS = {"score_threshold": FLOAT(), "nms_top_k": INT(), "keep_top_k": INT(),
              "nms_threshold": FLOAT(0.3), "normalized": BOOL(True), "nms_eta": FLOAT(1.0),
              "background_label": INT(0)}


def _infer_multiclass_nms(ctx):
    boxes, _, _, box_dim = _nms_inputs(ctx)
    ctx.set_output("Out", [-1, box_dim + 2 if box_dim >= 0 else -1], boxes.dtype)


define("multiclass_nms", inputs=["BBoxes", "Scores"], outputs=["Out"], attrs=dict(_NMS_ATTRS),
       infer=_infer_multiclass_nms, grad=NOT_DIFFERENTIABLE,
       doc="The 1.x multiclass_nms3: Out only, the kept rows of every image one after another; "
           "[[-1]] (shape [1, 1]) when no box is kept. 2-D Scores are one image (Keel feeds no LoD).")

define("multiclass_nms3", inputs=["BBoxes", "Scores", opt("RoisNum")],
       outputs=["Out", "Index", opt("NmsRoisNum")],
       attrs=dict(_NMS_ATTRS),
       infer=_infer_multiclass_nms3, grad=NOT_DIFFERENTIABLE,
       doc="Greedy per-class NMS. Out [K, 2+box_dim] rows (label, score, box); Index: each "
           "kept box's flat position in the input; NmsRoisNum: kept boxes per image.")


def _infer_matrix_nms(ctx):
    boxes, scores, batch, box_dim = _nms_inputs(ctx)
    if scores.ndim != 3:
        ctx.fail(f"Scores must be [N, C, M], got {scores}")
    ctx.set_output("Out", [-1, box_dim + 2 if box_dim >= 0 else -1], boxes.dtype)
    ctx.set_output("Index", [-1, 1], _INT32)
    ctx.set_output("RoisNum", [batch], _INT32)


define("matrix_nms", inputs=["BBoxes", "Scores"], outputs=["Out", "Index", opt("RoisNum")],
       attrs={"score_threshold": FLOAT(), "post_threshold": FLOAT(0.0), "nms_top_k": INT(),
              "keep_top_k": INT(), "normalized": BOOL(True), "use_gaussian": BOOL(False),
              "gaussian_sigma": FLOAT(2.0), "background_label": INT(0)},
       infer=_infer_matrix_nms, grad=NOT_DIFFERENTIABLE,
       doc="Matrix NMS (SOLOv2): scores decayed by their overlap with higher-scored boxes.")


# -- prior_box / density_prior_box / anchor_generator ---------------------------------------
def expand_aspect_ratios(aspect_ratios, flip):
    """PaddlePaddle's ExpandAspectRatios: 1 first, then each new ratio (and 1/ratio with
    flip), skipping ratios within 1e-6 of one already listed."""
    out = [1.0]
    for ar in aspect_ratios:
        if any(abs(ar - seen) < 1e-6 for seen in out):
            continue
        out.append(ar)
        if flip:
            out.append(1.0 / ar)
    return out


def _feature_and_image(ctx):
    x = _rank(ctx, "Input", (4,))
    img = _rank(ctx, "Image", (4,))
    ctx.require_float(x)
    return x, img


def _infer_prior_box(ctx):
    x, _ = _feature_and_image(ctx)
    min_sizes, max_sizes = list(ctx.attr("min_sizes")), list(ctx.attr("max_sizes"))
    if not min_sizes or any(s <= 0 for s in min_sizes):
        _attr_fail(ctx, f"min_sizes must be non-empty and > 0, got {min_sizes}")
    if max_sizes and len(max_sizes) != len(min_sizes):
        _attr_fail(ctx, f"max_sizes ({max_sizes}) must pair with min_sizes ({min_sizes})")
    if max_sizes and any(mx <= mn for mn, mx in zip(min_sizes, max_sizes)):
        _attr_fail(ctx, f"each max_size must exceed its min_size: {min_sizes}, {max_sizes}")
    if len(ctx.attr("variances")) != 4:
        _attr_fail(ctx, f"variances must have 4 values, got {list(ctx.attr('variances'))}")
    ars = expand_aspect_ratios(ctx.attr("aspect_ratios"), ctx.attr("flip"))
    priors = len(ars) * len(min_sizes) + len(max_sizes)
    shape = [x.shape[2], x.shape[3], priors, 4]
    ctx.set_output("Boxes", shape, x.dtype)
    ctx.set_output("Variances", shape, x.dtype)


define("prior_box", inputs=["Input", "Image"], outputs=["Boxes", "Variances"],
       attrs={"min_sizes": FLOATS(), "max_sizes": FLOATS([]), "aspect_ratios": FLOATS([]),
              "variances": FLOATS([]), "flip": BOOL(True), "clip": BOOL(True),
              "step_w": FLOAT(0.0), "step_h": FLOAT(0.0), "offset": FLOAT(0.5),
              "min_max_aspect_ratios_order": BOOL(False)},
       infer=_infer_prior_box, grad=NOT_DIFFERENTIABLE,
       doc="SSD prior boxes [H, W, priors, 4], normalized by the image size, and their variances.")


def _infer_density_prior_box(ctx):
    x, _ = _feature_and_image(ctx)
    sizes, densities = list(ctx.attr("fixed_sizes")), list(ctx.attr("densities"))
    ratios = list(ctx.attr("fixed_ratios"))
    if len(sizes) != len(densities):
        _attr_fail(ctx, f"fixed_sizes ({sizes}) and densities ({densities}) must pair up")
    if len(ctx.attr("variances")) != 4:
        _attr_fail(ctx, f"variances must have 4 values, got {list(ctx.attr('variances'))}")
    priors = len(ratios) * sum(d * d for d in densities)
    if ctx.attr("flatten_to_2d"):
        hw = x.shape[2] * x.shape[3] if x.shape[2] >= 0 and x.shape[3] >= 0 else -1
        shape = [hw * priors if hw >= 0 else -1, 4]
    else:
        shape = [x.shape[2], x.shape[3], priors, 4]
    ctx.set_output("Boxes", shape, x.dtype)
    ctx.set_output("Variances", shape, x.dtype)


# PaddlePaddle 2.x's density_prior_box (paddle/fluid/operators/detection/
# density_prior_box_op.cc); no longer registered in PaddlePaddle 3.3.1, still in older
# PaddleDetection exports.
define("density_prior_box", inputs=["Input", "Image"], outputs=["Boxes", "Variances"],
       attrs={"variances": FLOATS(), "clip": BOOL(True), "flatten_to_2d": BOOL(False),
              "step_w": FLOAT(0.0), "step_h": FLOAT(0.0), "offset": FLOAT(0.5),
              "fixed_sizes": FLOATS([]), "fixed_ratios": FLOATS([]), "densities": INTS([])},
       infer=_infer_density_prior_box, grad=NOT_DIFFERENTIABLE,
       doc="Densely tiled prior boxes (per fixed size, density^2 shifted copies per ratio).")


def _infer_anchor_generator(ctx):
    x = _rank(ctx, "Input", (4,))
    ctx.require_float(x)
    sizes, ratios = list(ctx.attr("anchor_sizes")), list(ctx.attr("aspect_ratios"))
    if not sizes or not ratios:
        _attr_fail(ctx, f"anchor_sizes ({sizes}) and aspect_ratios ({ratios}) must be non-empty")
    if len(ctx.attr("stride")) != 2:
        _attr_fail(ctx, f"stride must have 2 values, got {list(ctx.attr('stride'))}")
    if len(ctx.attr("variances")) != 4:
        _attr_fail(ctx, f"variances must have 4 values, got {list(ctx.attr('variances'))}")
    shape = [x.shape[2], x.shape[3], len(sizes) * len(ratios), 4]
    ctx.set_output("Anchors", shape, x.dtype)
    ctx.set_output("Variances", shape, x.dtype)


define("anchor_generator", inputs=["Input"], outputs=["Anchors", "Variances"],
       attrs={"anchor_sizes": FLOATS(), "aspect_ratios": FLOATS(), "variances": FLOATS(),
              "stride": FLOATS([16.0, 16.0]), "offset": FLOAT(0.5)},
       infer=_infer_anchor_generator, grad=NOT_DIFFERENTIABLE,
       doc="Faster R-CNN anchors [H, W, ratios*sizes, 4] in pixels, and their variances.")


# -- box_coder ------------------------------------------------------------------------------
def _infer_box_coder(ctx):
    prior, target = _rank(ctx, "PriorBox", (2,)), ctx.input("TargetBox")
    ctx.require_float(prior)
    ctx.same_dtype(prior, target)
    _box_dim(ctx, prior, "PriorBox")
    var = ctx.input("PriorBoxVar")
    if var is not None and list(ctx.attr("variance")):
        _attr_fail(ctx, "PriorBoxVar and the variance attribute cannot both be given")
    if list(ctx.attr("variance")) and len(ctx.attr("variance")) != 4:
        _attr_fail(ctx, f"variance must have 4 values, got {list(ctx.attr('variance'))}")
    code = ctx.attr("code_type")
    if code == "encode_center_size":
        if target.ndim != 2:
            ctx.fail(f"encode_center_size expects TargetBox [N, 4], got {target}")
        shape = [target.shape[0], prior.shape[0], 4]
    elif code == "decode_center_size":
        if target.ndim != 3:
            ctx.fail(f"decode_center_size expects TargetBox [N, M, 4], got {target}")
        axis = ctx.attr("axis")
        if axis not in (0, 1):
            _attr_fail(ctx, f"axis must be 0 or 1, got {axis}")
        along = target.shape[1] if axis == 0 else target.shape[0]
        if along >= 0 and prior.shape[0] >= 0 and along != prior.shape[0]:
            ctx.fail(f"PriorBox {prior} must have one box per TargetBox dim {1 - axis} "
                     f"(axis {axis}), got TargetBox {target}")
        shape = list(target.shape)
    else:
        _attr_fail(ctx, f"code_type must be 'encode_center_size' or 'decode_center_size', "
                        f"got {code!r}")
    ctx.set_output("OutputBox", shape, target.dtype)


define("box_coder", inputs=["PriorBox", opt("PriorBoxVar"), "TargetBox"], outputs=["OutputBox"],
       attrs={"code_type": STRING("encode_center_size"), "box_normalized": BOOL(True),
              "axis": INT(0), "variance": FLOATS([])},
       infer=_infer_box_coder, grad=NOT_DIFFERENTIABLE,
       doc="Encodes boxes as center-size offsets from prior boxes, or decodes them back (a "
           "LoD fed on TargetBox changes no value, as in PaddlePaddle).")


# -- roi_align / roi_pool -------------------------------------------------------------------
def _infer_roi(ctx, extra_output=None):
    x, rois = _rank(ctx, "X", (4,)), _rank(ctx, "ROIs", (2,))
    ctx.same_dtype(x, rois)
    # (PaddlePaddle also instantiates roi_align for int32/int64, bilinear weights and all in
    # integers; Keel computes in floating point only)
    ctx.require_float(x)
    _box_dim(ctx, rois, "ROIs")
    num = ctx.input("RoisNum")
    if num is not None:
        if num.ndim != 1 or num.dtype not in (_INT32, _INT64):
            ctx.dtype_fail(f"RoisNum must be a 1-d int32/int64 tensor, got {num}")
    ph, pw = ctx.attr("pooled_height"), ctx.attr("pooled_width")
    if ph <= 0 or pw <= 0:
        _attr_fail(ctx, f"pooled_height and pooled_width must be > 0, got {ph}, {pw}")
    if ctx.attr("spatial_scale") <= 0:
        _attr_fail(ctx, f"spatial_scale must be > 0, got {ctx.attr('spatial_scale')}")
    shape = [rois.shape[0], x.shape[1], ph, pw]
    ctx.set_output("Out", shape, x.dtype)
    if extra_output:
        ctx.set_output(extra_output, shape, _INT64)


define("roi_align", inputs=["X", "ROIs", opt("RoisNum")], outputs=["Out"],
       attrs={"pooled_height": INT(1), "pooled_width": INT(1), "spatial_scale": FLOAT(1.0),
              "sampling_ratio": INT(-1), "aligned": BOOL(False)},
       infer=_infer_roi, lod_lengths={"ROIs": "RoisNum"},
       grad=grad_op(["X", "ROIs", "RoisNum", "Out@GRAD"], ["X@GRAD"]),
       doc="RoI Align: each RoI [x1, y1, x2, y2] (of image RoisNum assigns it to) averaged "
           "over bilinear samples into pooled_height x pooled_width bins.")
define("roi_pool", inputs=["X", "ROIs", opt("RoisNum")], outputs=["Out", side("Argmax")],
       attrs={"pooled_height": INT(1), "pooled_width": INT(1), "spatial_scale": FLOAT(1.0)},
       infer=lambda ctx: _infer_roi(ctx, "Argmax"), lod_lengths={"ROIs": "RoisNum"},
       grad=grad_op(["X", "ROIs", "RoisNum", "Argmax", "Out@GRAD"], ["X@GRAD"]),
       doc="RoI max pooling over integer bins; Argmax: each maximum's h*W+w (-1: empty bin).")


# -- generate_proposals_v2 / distribute_fpn_proposals --------------------------------------
def _infer_generate_proposals_v2(ctx):
    scores, deltas = _rank(ctx, "Scores", (4,)), _rank(ctx, "BboxDeltas", (4,))
    ctx.require_float(scores)
    ctx.same_dtype(scores, deltas)
    im = _rank(ctx, "ImShape", (2,))
    anchors, var = ctx.input("Anchors"), ctx.input("Variances")
    _box_dim(ctx, anchors, "Anchors")
    _box_dim(ctx, var, "Variances")
    a = scores.shape[1]
    if a >= 0 and deltas.shape[1] >= 0 and deltas.shape[1] != 4 * a:
        ctx.fail(f"BboxDeltas {deltas} must have 4 channels per anchor of Scores {scores}")
    # Anchors and Variances: [H, W, A, 4], one box per anchor of each position of Scores
    # [N, A, H, W] (or any shape of as many boxes)
    for info in (anchors, var):
        want = [scores.shape[2], scores.shape[3], a]
        if info.ndim == 4 and not all(dims_match(d, w) for d, w in zip(info.shape[:3], want)):
            ctx.fail(f"{info} must be [H, W, A, 4] = {want + [4]} for Scores {scores}")
    if im.shape[1] not in (-1, 2):
        ctx.fail(f"ImShape must be [N, 2] (height, width), got {im}")
    ctx.set_output("RpnRois", [-1, 4], scores.dtype)
    ctx.set_output("RpnRoiProbs", [-1, 1], scores.dtype)
    ctx.set_output("RpnRoisNum", [scores.shape[0]], _INT32)


define("generate_proposals_v2",
       inputs=["Scores", "BboxDeltas", "ImShape", "Anchors", "Variances"],
       outputs=["RpnRois", "RpnRoiProbs", opt("RpnRoisNum")],
       attrs={"pre_nms_topN": INT(), "post_nms_topN": INT(), "nms_thresh": FLOAT(),
              "min_size": FLOAT(), "eta": FLOAT(), "pixel_offset": BOOL(True)},
       infer=_infer_generate_proposals_v2, grad=NOT_DIFFERENTIABLE,
       doc="RPN proposals: top anchors by score, decoded, clipped, small ones dropped, NMS.")


def _infer_distribute_fpn_proposals(ctx):
    rois = _rank(ctx, "FpnRois", (2,))
    ctx.require_float(rois)
    _box_dim(ctx, rois, "FpnRois")
    lo, hi = ctx.attr("min_level"), ctx.attr("max_level")
    if hi < lo:
        _attr_fail(ctx, f"max_level ({hi}) must be >= min_level ({lo})")
    levels = hi - lo + 1
    if ctx.num_outputs("MultiFpnRois") != levels:
        ctx.fail(f"MultiFpnRois must hold {levels} variables (levels {lo}..{hi}), "
                 f"got {ctx.num_outputs('MultiFpnRois')}")
    num = ctx.input("RoisNum")
    batch = num.shape[0] if num is not None else 1
    for i in range(levels):
        ctx.set_output("MultiFpnRois", [-1, 4], rois.dtype, index=i)
        ctx.set_output("MultiLevelRoIsNum", [batch], _INT32, index=i)
    ctx.set_output("RestoreIndex", [rois.shape[0], 1], _INT32)


define("distribute_fpn_proposals", inputs=["FpnRois", opt("RoisNum")],
       outputs=[many("MultiFpnRois"), many("MultiLevelRoIsNum", optional=True), "RestoreIndex"],
       attrs={"min_level": INT(), "max_level": INT(), "refer_level": INT(), "refer_scale": INT(),
              "pixel_offset": BOOL(True)},
       infer=_infer_distribute_fpn_proposals, grad=NOT_DIFFERENTIABLE,
       lod_lengths={"FpnRois": "RoisNum", "MultiFpnRois": "MultiLevelRoIsNum"},
       doc="Assigns each RoI to an FPN level by its scale; RestoreIndex maps the concatenated "
           "levels back to the input order.")
