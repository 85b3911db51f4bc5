"""Detection layers, as `paddle.vision.ops` and PaddleDetection build them in a static
program: `pg.vision.yolo_box(...)`, `pg.vision.multiclass_nms(...)`, `pg.vision.roi_align(...)`.

Each appends one op of program/ops/detection.py with PaddlePaddle's attributes; boxes are
[x1, y1, x2, y2]; a batch's RoIs are split per image by an int32 `rois_num` tensor (Keel
has no LoD). Outputs that hold indices or counts are int32 (Argmax int64), and are
stop_gradient, as are all outputs of the non-differentiable ops.

    x = pg.data("x", [-1, 3 * (5 + 80), 13, 13])
    im_size = pg.data("im_size", [-1, 2], "int32")
    boxes, scores = pg.vision.yolo_box(x, im_size, anchors=[10, 13, 16, 30, 33, 23], class_num=80)
    out, index, num = pg.vision.multiclass_nms(boxes, pg.transpose(scores, [0, 2, 1]),
                                               score_threshold=0.01, nms_top_k=1000, keep_top_k=100)
"""
from __future__ import annotations

from keel.program.layers.helper import LayerHelper
from keel.program import transforms  # noqa: F401  (paddle.vision.transforms)

__all__ = ["yolo_box", "multiclass_nms", "matrix_nms", "prior_box", "density_prior_box",
           "anchor_generator", "box_coder", "roi_align", "roi_pool", "generate_proposals",
           "distribute_fpn_proposals"]


def _outputs(helper, *dtypes, stop_gradient=True):
    return [helper.create_tmp(d, stop_gradient=stop_gradient) for d in dtypes]


def yolo_box(x, img_size, anchors, class_num, conf_thresh=0.01, downsample_ratio=32, clip_bbox=True,
             scale_x_y=1.0, iou_aware=False, iou_aware_factor=0.5, name=None):
    """Boxes [N, anchors*H*W, 4] in image pixels and Scores [N, anchors*H*W, class_num].

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([1, 2 * (5 + 3), 4, 4])              # 2 anchors, 3 classes, a 4x4 grid
        >>> boxes, scores = paddle.vision.ops.yolo_box(x, paddle.to_tensor([[128, 128]], dtype="int32"), anchors=[10, 13, 16, 30],
        ...                                            class_num=3, conf_thresh=0.01, downsample_ratio=32)
        >>> boxes.shape, scores.shape
        ([1, 32, 4], [1, 32, 3])
    """
    helper = LayerHelper("yolo_box", name)
    boxes, scores = _outputs(helper, x.dtype, x.dtype)
    helper.append_op("yolo_box", {"X": x, "ImgSize": img_size}, {"Boxes": boxes, "Scores": scores},
                     {"anchors": list(anchors), "class_num": class_num, "conf_thresh": conf_thresh,
                      "downsample_ratio": downsample_ratio, "clip_bbox": clip_bbox, "scale_x_y": scale_x_y,
                      "iou_aware": iou_aware, "iou_aware_factor": iou_aware_factor})
    return boxes, scores


def multiclass_nms(bboxes, scores, score_threshold, nms_top_k, keep_top_k, nms_threshold=0.3,
                   normalized=True, nms_eta=1.0, background_label=-1, rois_num=None, name=None):
    """Op multiclass_nms3: (Out [K, 6] rows label, score, box; Index [K, 1]; NmsRoisNum [N])."""
    helper = LayerHelper("multiclass_nms3", name)
    out, index, num = _outputs(helper, bboxes.dtype, "int32", "int32")
    inputs = {"BBoxes": bboxes, "Scores": scores}
    if rois_num is not None:
        inputs["RoisNum"] = rois_num
    helper.append_op("multiclass_nms3", inputs, {"Out": out, "Index": index, "NmsRoisNum": num},
                     {"score_threshold": score_threshold, "nms_top_k": nms_top_k, "keep_top_k": keep_top_k,
                      "nms_threshold": nms_threshold, "normalized": normalized, "nms_eta": nms_eta,
                      "background_label": background_label})
    return out, index, num


def matrix_nms(bboxes, scores, score_threshold, post_threshold, nms_top_k, keep_top_k, use_gaussian=False,
               gaussian_sigma=2.0, background_label=0, normalized=True, return_index=False, return_rois_num=True,
               name=None):
    """Op matrix_nms: (Out [K, 6], RoisNum [N], Index [K, 1]) in PaddlePaddle's order, with None
    for RoisNum unless `return_rois_num` and for Index unless `return_index`.

    Examples:
        >>> import keel as paddle
        >>> boxes = paddle.to_tensor([[[0.0, 0.0, 10.0, 10.0], [0.0, 0.0, 10.0, 9.0], [20.0, 20.0, 30.0, 30.0]]])
        >>> scores = paddle.to_tensor([[[0.0, 0.0, 0.0], [0.9, 0.8, 0.7]]])     # [N, classes, boxes]; class 0 is background
        >>> out, num, index = paddle.vision.ops.matrix_nms(boxes, scores, score_threshold=0.1, post_threshold=0.5,
        ...                                                nms_top_k=10, keep_top_k=10, return_index=True)
        >>> out.shape, num.tolist(), index.numpy().ravel().tolist()    # the overlapped box decays below 0.5
        ([2, 6], [2], [0, 2])
        >>> print(out.numpy().round(4))          # [label, score, x1, y1, x2, y2]
        [[ 1.   0.9  0.   0.  10.  10. ]
         [ 1.   0.7 20.  20.  30.  30. ]]
    """
    helper = LayerHelper("matrix_nms", name)
    out, index, num = _outputs(helper, bboxes.dtype, "int32", "int32")
    helper.append_op("matrix_nms", {"BBoxes": bboxes, "Scores": scores},
                     {"Out": out, "Index": index, "RoisNum": num},
                     {"score_threshold": score_threshold, "post_threshold": post_threshold,
                      "nms_top_k": nms_top_k, "keep_top_k": keep_top_k, "use_gaussian": use_gaussian,
                      "gaussian_sigma": gaussian_sigma, "background_label": background_label,
                      "normalized": normalized})
    return out, num if return_rois_num else None, index if return_index else None


def prior_box(input, image, min_sizes, max_sizes=None, aspect_ratios=(1.0,), variance=(0.1, 0.1, 0.2, 0.2),
              flip=False, clip=False, steps=(0.0, 0.0), offset=0.5, min_max_aspect_ratios_order=False,
              name=None):
    """SSD priors: (Boxes, Variances), each [H, W, priors, 4].

    Examples:
        >>> import keel as paddle
        >>> feature = paddle.rand([1, 3, 4, 4])
        >>> image = paddle.rand([1, 3, 32, 32])
        >>> boxes, variances = paddle.vision.ops.prior_box(feature, image, min_sizes=[8.0], aspect_ratios=[1.0, 2.0], flip=True)
        >>> boxes.shape, variances.shape                   # [H, W, priors, 4]: ratios 1, 2 and 1/2
        ([4, 4, 3, 4], [4, 4, 3, 4])
        >>> print(boxes.numpy()[0, 0, 0])                  # the first cell's square prior, normalized
        [0.   0.   0.25 0.25]
    """
    helper = LayerHelper("prior_box", name)
    boxes, var = _outputs(helper, input.dtype, input.dtype)
    helper.append_op("prior_box", {"Input": input, "Image": image}, {"Boxes": boxes, "Variances": var},
                     {"min_sizes": [float(v) for v in min_sizes],
                      "max_sizes": [float(v) for v in (max_sizes or [])],
                      "aspect_ratios": [float(v) for v in aspect_ratios],
                      "variances": [float(v) for v in variance], "flip": flip, "clip": clip,
                      "step_w": float(steps[0]), "step_h": float(steps[1]), "offset": offset,
                      "min_max_aspect_ratios_order": min_max_aspect_ratios_order})
    return boxes, var


def density_prior_box(input, image, densities, fixed_sizes, fixed_ratios, variance=(0.1, 0.1, 0.2, 0.2),
                      clip=False, steps=(0.0, 0.0), offset=0.5, flatten_to_2d=False, name=None):
    helper = LayerHelper("density_prior_box", name)
    boxes, var = _outputs(helper, input.dtype, input.dtype)
    helper.append_op("density_prior_box", {"Input": input, "Image": image}, {"Boxes": boxes, "Variances": var},
                     {"densities": list(densities), "fixed_sizes": [float(v) for v in fixed_sizes],
                      "fixed_ratios": [float(v) for v in fixed_ratios], "variances": [float(v) for v in variance],
                      "clip": clip, "step_w": float(steps[0]), "step_h": float(steps[1]), "offset": offset,
                      "flatten_to_2d": flatten_to_2d})
    return boxes, var


def anchor_generator(input, anchor_sizes, aspect_ratios, variance=(0.1, 0.1, 0.2, 0.2), stride=(16.0, 16.0),
                     offset=0.5, name=None):
    """Faster R-CNN anchors: (Anchors, Variances), each [H, W, ratios*sizes, 4]."""
    helper = LayerHelper("anchor_generator", name)
    anchors, var = _outputs(helper, input.dtype, input.dtype)
    helper.append_op("anchor_generator", {"Input": input}, {"Anchors": anchors, "Variances": var},
                     {"anchor_sizes": [float(v) for v in anchor_sizes],
                      "aspect_ratios": [float(v) for v in aspect_ratios],
                      "variances": [float(v) for v in variance], "stride": [float(v) for v in stride],
                      "offset": offset})
    return anchors, var


def box_coder(prior_box, prior_box_var, target_box, code_type="encode_center_size", box_normalized=True,
              axis=0, name=None):
    """`prior_box_var`: a [M, 4] variable (input PriorBoxVar), a list of 4 floats (attribute
    `variance`) or None.

    Examples:
        >>> import keel as paddle
        >>> prior = paddle.to_tensor([[0.0, 0.0, 10.0, 10.0]])
        >>> target = paddle.to_tensor([[1.0, 1.0, 11.0, 11.0]])
        >>> deltas = paddle.vision.ops.box_coder(prior, [0.1, 0.1, 0.2, 0.2], target, code_type="encode_center_size")
        >>> print(deltas.numpy().round(4))
        [[[1. 1. 0. 0.]]]
        >>> print(paddle.vision.ops.box_coder(prior, [0.1, 0.1, 0.2, 0.2], deltas, code_type="decode_center_size").numpy().round(4))
        [[[ 1.  1. 11. 11.]]]
    """
    helper = LayerHelper("box_coder", name)
    (out,) = _outputs(helper, target_box.dtype)
    inputs = {"PriorBox": prior_box, "TargetBox": target_box}
    attrs = {"code_type": code_type, "box_normalized": box_normalized, "axis": axis, "variance": []}
    if isinstance(prior_box_var, (list, tuple)):
        attrs["variance"] = [float(v) for v in prior_box_var]
    elif prior_box_var is not None:
        inputs["PriorBoxVar"] = prior_box_var
    helper.append_op("box_coder", inputs, {"OutputBox": out}, attrs)
    return out


def roi_align(x, boxes, boxes_num, output_size, spatial_scale=1.0, sampling_ratio=-1, aligned=True, name=None):
    """paddle.vision.ops.roi_align: Out [R, C, ph, pw] (differentiable with respect to x).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.arange(16, dtype="float32").reshape([1, 1, 4, 4])
        >>> boxes = paddle.to_tensor([[0.0, 0.0, 4.0, 4.0]])
        >>> out = paddle.vision.ops.roi_align(x, boxes, paddle.to_tensor([1], dtype="int32"), output_size=2, aligned=False)
        >>> print(out.numpy())
        [[[[ 5.    6.75]
           [12.   13.75]]]]
    """
    ph, pw = (output_size, output_size) if isinstance(output_size, int) else output_size
    helper = LayerHelper("roi_align", name)
    (out,) = _outputs(helper, x.dtype, stop_gradient=False)
    inputs = {"X": x, "ROIs": boxes}
    if boxes_num is not None:
        inputs["RoisNum"] = boxes_num
    helper.append_op("roi_align", inputs, {"Out": out},
                     {"pooled_height": ph, "pooled_width": pw, "spatial_scale": spatial_scale,
                      "sampling_ratio": sampling_ratio, "aligned": aligned})
    return out


def roi_pool(x, boxes, boxes_num, output_size, spatial_scale=1.0, name=None):
    """paddle.vision.ops.roi_pool: Out [R, C, ph, pw] (differentiable with respect to x).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.arange(16, dtype="float32").reshape([1, 1, 4, 4])
        >>> boxes = paddle.to_tensor([[0.0, 0.0, 3.0, 3.0]])
        >>> out = paddle.vision.ops.roi_pool(x, boxes, paddle.to_tensor([1], dtype="int32"), output_size=2)
        >>> print(out.numpy())
        [[[[ 5.  7.]
           [13. 15.]]]]
    """
    ph, pw = (output_size, output_size) if isinstance(output_size, int) else output_size
    helper = LayerHelper("roi_pool", name)
    (out,) = _outputs(helper, x.dtype, stop_gradient=False)
    (argmax,) = _outputs(helper, "int64")
    inputs = {"X": x, "ROIs": boxes}
    if boxes_num is not None:
        inputs["RoisNum"] = boxes_num
    helper.append_op("roi_pool", inputs, {"Out": out, "Argmax": argmax},
                     {"pooled_height": ph, "pooled_width": pw, "spatial_scale": spatial_scale})
    return out


def generate_proposals(scores, bbox_deltas, img_size, anchors, variances, pre_nms_top_n=6000,
                       post_nms_top_n=1000, nms_thresh=0.5, min_size=0.1, eta=1.0, pixel_offset=False,
                       return_rois_num=False, name=None):
    """Op generate_proposals_v2: (RpnRois [K, 4], RpnRoiProbs [K, 1], RpnRoisNum [N]), with None
    for RpnRoisNum unless `return_rois_num`, as PaddlePaddle's static function returns.

    Examples:
        >>> import keel as paddle
        >>> scores = paddle.rand([1, 3, 4, 4])                     # [N, anchors, H, W]
        >>> deltas = paddle.zeros([1, 12, 4, 4])                   # no offsets: the anchors themselves
        >>> anchors = paddle.rand([4, 4, 3, 4]) * 8 + paddle.to_tensor([0.0, 0.0, 8.0, 8.0])
        >>> variances = paddle.ones([4, 4, 3, 4])
        >>> rois, probs, num = paddle.vision.ops.generate_proposals(
        ...     scores, deltas, paddle.to_tensor([[32.0, 32.0]]), anchors, variances, post_nms_top_n=10, return_rois_num=True)
        >>> rois.shape[1], probs.shape[1], int(num[0]) == rois.shape[0] <= 10
        (4, 1, True)
    """
    helper = LayerHelper("generate_proposals_v2", name)
    rois, probs, num = _outputs(helper, scores.dtype, scores.dtype, "int32")
    helper.append_op("generate_proposals_v2",
                     {"Scores": scores, "BboxDeltas": bbox_deltas, "ImShape": img_size, "Anchors": anchors,
                      "Variances": variances},
                     {"RpnRois": rois, "RpnRoiProbs": probs, "RpnRoisNum": num},
                     {"pre_nms_topN": pre_nms_top_n, "post_nms_topN": post_nms_top_n, "nms_thresh": nms_thresh,
                      "min_size": min_size, "eta": eta, "pixel_offset": pixel_offset})
    return rois, probs, num if return_rois_num else None


def distribute_fpn_proposals(fpn_rois, min_level, max_level, refer_level, refer_scale, pixel_offset=False,
                             rois_num=None, name=None):
    """(per-level RoIs, RestoreIndex [R, 1], per-level RoI counts per image).

    Examples:
        >>> import keel as paddle
        >>> rois = paddle.to_tensor([[0.0, 0.0, 16.0, 16.0], [0.0, 0.0, 224.0, 224.0], [0.0, 0.0, 600.0, 600.0]])
        >>> multi_rois, restore_index, rois_num = paddle.vision.ops.distribute_fpn_proposals(
        ...     rois, min_level=2, max_level=5, refer_level=4, refer_scale=224, rois_num=paddle.to_tensor([3], dtype="int32"))
        >>> [r.shape[0] for r in multi_rois]              # RoIs per level, by size
        [1, 0, 1, 1]
        >>> restore_index.numpy().ravel().tolist()
        [0, 1, 2]
    """
    helper = LayerHelper("distribute_fpn_proposals", name)
    levels = max_level - min_level + 1
    multi_rois = _outputs(helper, *[fpn_rois.dtype] * levels)
    multi_num = _outputs(helper, *["int32"] * levels)
    (restore,) = _outputs(helper, "int32")
    inputs = {"FpnRois": fpn_rois}
    if rois_num is not None:
        inputs["RoisNum"] = rois_num
    helper.append_op("distribute_fpn_proposals", inputs,
                     {"MultiFpnRois": multi_rois, "MultiLevelRoIsNum": multi_num, "RestoreIndex": restore},
                     {"min_level": min_level, "max_level": max_level, "refer_level": refer_level,
                      "refer_scale": refer_scale, "pixel_offset": pixel_offset})
    return multi_rois, restore, multi_num
