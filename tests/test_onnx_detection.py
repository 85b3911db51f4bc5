"""ONNX export of the detection ops (program/onnx/ops_detection.py) run in ONNX Runtime
against Keel's executor: multiclass_nms3 (thresholds, top-k limits, background label, boxes
normalized or not), yolo_box, box_coder, prior_box, anchor_generator, roi_align; and the
yolo head fixture (tests/fixtures/detection) against PaddlePaddle's recorded outputs."""
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx", reason="ONNX export needs the optional onnx package (pip install -e '.[onnx]' in the Keel checkout)")
pytest.importorskip("onnxruntime", reason="the exported models are checked by running them in onnxruntime")

from keel.program.onnx import OnnxExportError  # noqa: E402
from onnx_oracle import op_case, zoo_case  # noqa: E402

rng = np.random.default_rng(0)


def _boxes(n, m, scale=1.0):
    corner = rng.uniform(0, 0.7, (n, m, 2))
    size = rng.uniform(0.05, 0.3, (n, m, 2))
    return (np.concatenate([corner, corner + size], axis=-1) * scale).astype(np.float32)


def _nms_attrs(**changes):
    attrs = dict(background_label=0, keep_top_k=12, nms_eta=1.0, nms_threshold=0.45, nms_top_k=50,
                 normalized=True, score_threshold=0.2)
    return {**attrs, **changes}


@pytest.mark.parametrize("attrs", [_nms_attrs(), _nms_attrs(background_label=-1, keep_top_k=-1, nms_top_k=-1),
                                   _nms_attrs(nms_top_k=5, keep_top_k=3, nms_threshold=0.3),
                                   _nms_attrs(score_threshold=0.0, background_label=2, keep_top_k=100),
                                   _nms_attrs(score_threshold=0.99)])
def test_multiclass_nms3(attrs):
    boxes, scores = _boxes(2, 60), rng.uniform(0, 1, (2, 4, 60)).astype(np.float32)
    op_case("multiclass_nms3", {"BBoxes": boxes, "Scores": scores}, attrs,
            outputs={"Index": 1, "NmsRoisNum": 1}, dynamic_batch=True,
            feeds_after=[{"bboxes0": boxes[:1], "scores0": scores[:1]}])


def test_multiclass_nms3_of_pixel_boxes_counts_the_last_pixel():
    boxes, scores = np.round(_boxes(1, 40, 64)), rng.uniform(0, 1, (1, 3, 40)).astype(np.float32)
    op_case("multiclass_nms3", {"BBoxes": boxes, "Scores": scores}, _nms_attrs(normalized=False, background_label=-1),
            outputs={"Index": 1, "NmsRoisNum": 1})


def test_multiclass_nms3_refuses_an_adaptive_threshold_naming_why():
    with pytest.raises(OnnxExportError, match="multiclass_nms3.*nms_eta"):
        op_case("multiclass_nms3", {"BBoxes": _boxes(1, 5), "Scores": rng.uniform(0, 1, (1, 2, 5)).astype(np.float32)},
                _nms_attrs(nms_eta=0.9), outputs={"Index": 1, "NmsRoisNum": 1})


@pytest.mark.parametrize("clip,iou_aware,scale", [(True, False, 1.0), (False, False, 1.2), (True, True, 1.05)])
def test_yolo_box(clip, iou_aware, scale):
    anchors, classes = [10, 13, 16, 30, 33, 23], 3
    channels = 3 * (5 + classes) + (3 if iou_aware else 0)
    x = rng.standard_normal((2, channels, 5, 6)).astype(np.float32)
    sizes = np.array([[320, 416], [160, 200]], np.int32)
    op_case("yolo_box", {"X": x, "ImgSize": sizes},
            dict(anchors=anchors, class_num=classes, conf_thresh=0.3, downsample_ratio=8, clip_bbox=clip,
                 scale_x_y=scale, iou_aware=iou_aware, iou_aware_factor=0.4), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("normalized", [True, False])
@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("variance", ["input", "attribute", "none"])
def test_box_coder_decode(normalized, axis, variance):
    prior = _boxes(1, 7, 1 if normalized else 50)[0]
    target = rng.standard_normal((7, 7, 4)).astype(np.float32) * 0.3
    inputs = {"PriorBox": prior, "TargetBox": target}
    attrs = dict(code_type="decode_center_size", box_normalized=normalized, axis=axis, variance=[])
    if variance == "input":
        inputs["PriorBoxVar"] = rng.uniform(0.1, 0.3, (7, 4)).astype(np.float32)
    elif variance == "attribute":
        attrs["variance"] = [0.1, 0.1, 0.2, 0.2]
    op_case("box_coder", inputs, attrs, params=["PriorBox"] + (["PriorBoxVar"] if variance == "input" else []))


@pytest.mark.parametrize("normalized", [True, False])
def test_box_coder_encode(normalized):
    prior = _boxes(1, 6, 1 if normalized else 50)[0]
    target = _boxes(1, 5, 1 if normalized else 50)[0]
    op_case("box_coder", {"PriorBox": prior, "PriorBoxVar": rng.uniform(0.1, 0.3, (6, 4)).astype(np.float32),
                          "TargetBox": target},
            dict(code_type="encode_center_size", box_normalized=normalized, axis=0, variance=[]))


@pytest.mark.parametrize("attrs", [
    dict(min_sizes=[8.0], max_sizes=[16.0], aspect_ratios=[2.0], flip=True, clip=True),
    dict(min_sizes=[16.0, 24.0], max_sizes=[28.0, 40.0], aspect_ratios=[2.0, 3.0], flip=False, clip=False,
         min_max_aspect_ratios_order=True),
    dict(min_sizes=[10.0], max_sizes=[], aspect_ratios=[1.0, 0.5], flip=True, clip=False, step_w=9.0,
         step_h=7.0, offset=0.25)])
def test_prior_box(attrs):
    attrs = {"variances": [0.1, 0.1, 0.2, 0.2], "offset": 0.5, "step_w": 0.0, "step_h": 0.0, **attrs}
    op_case("prior_box", {"Input": rng.standard_normal((2, 3, 5, 6)).astype(np.float32),
                          "Image": rng.standard_normal((2, 3, 40, 48)).astype(np.float32)}, attrs)


@pytest.mark.parametrize("offset,stride", [(0.5, [4.0, 4.0]), (0.0, [8.0, 6.0])])
def test_anchor_generator(offset, stride):
    op_case("anchor_generator", {"Input": rng.standard_normal((1, 3, 5, 7)).astype(np.float32)},
            dict(anchor_sizes=[8.0, 16.0, 24.0], aspect_ratios=[0.5, 1.0, 2.0], variances=[0.1, 0.1, 0.2, 0.2],
                 stride=stride, offset=offset))


@pytest.mark.parametrize("aligned", [True, False])
@pytest.mark.parametrize("sampling_ratio", [2, -1])
def test_roi_align_with_rois_of_several_images(aligned, sampling_ratio):
    x = rng.standard_normal((2, 3, 12, 10)).astype(np.float32)
    rois = _boxes(1, 5, 36)[0]
    rois[4] = [3.0, 3.0, 3.5, 3.2]  # smaller than a feature cell
    op_case("roi_align", {"X": x, "ROIs": rois, "RoisNum": np.array([2, 3], np.int32)},
            dict(pooled_height=3, pooled_width=4, spatial_scale=0.25, sampling_ratio=sampling_ratio,
                 aligned=aligned), rtol=1e-5, atol=1e-5)


def test_roi_align_without_rois_num_reads_image_zero():
    op_case("roi_align", {"X": rng.standard_normal((1, 2, 8, 8)).astype(np.float32), "ROIs": _boxes(1, 4, 30)[0]},
            dict(pooled_height=2, pooled_width=2, spatial_scale=0.25, sampling_ratio=-1, aligned=False))


def test_yolo_head_fixture_gives_paddles_outputs():
    from keel.executor import Executor, Scope
    import keel.program as pg
    from onnx_oracle import assert_close, ort_run, require_converters
    from keel.program.onnx import program_to_onnx
    fixtures = Path(__file__).resolve().parent / "fixtures" / "detection"
    scope = Scope()
    program, feeds, fetches = pg.io.load_inference_model(str(fixtures / "yolo_head"), Executor(), scope=scope)
    require_converters(program)
    params = {n: np.asarray(scope.get(n)) for n, _, _ in pg.io.persistable_specs(program)}
    io = np.load(fixtures / "yolo_head.io.npz", allow_pickle=False)
    print(io.files)
    model = program_to_onnx(program, params)
    cases = sorted({key.split(":")[0][3:] for key in io.files if key.startswith("out")})
    assert cases
    for k in cases:
        got = ort_run(model, {n: io[f"in{k}:{n}"] for n in feeds})
        want = [io[f"out{k}:{j}"] for j in range(len(fetches))]
        assert_close(got, want, f"yolo_head case {k}", rtol=1e-4, atol=1e-4)


def _proposal_inputs(n=2, a=3, h=6, w=5, image=64.0):
    centers = np.stack(np.meshgrid(np.arange(w) * 8 + 4, np.arange(h) * 8 + 4), -1)[:, :, None, :]
    sizes = np.array([6.0, 12.0, 20.0])[:a, None]
    anchors = np.concatenate([centers - sizes / 2, centers + sizes / 2], -1).astype(np.float32)  # [h, w, a, 4]
    return {"Scores": rng.uniform(0, 1, (n, a, h, w)).astype(np.float32),
            "BboxDeltas": (rng.standard_normal((n, 4 * a, h, w)) * 0.3).astype(np.float32),
            "ImShape": np.array([[image, image], [image * 0.75, image]][:n], np.float32),
            "Anchors": anchors, "Variances": np.full(anchors.shape, 0.5, np.float32)}


@pytest.mark.parametrize("attrs", [dict(pre_nms_topN=60, post_nms_topN=10, nms_thresh=0.5, min_size=2.0,
                                        pixel_offset=False),
                                   dict(pre_nms_topN=-1, post_nms_topN=-1, nms_thresh=0.7, min_size=1.0,
                                        pixel_offset=True),
                                   dict(pre_nms_topN=-1, post_nms_topN=5, nms_thresh=0.0, min_size=3.0,
                                        pixel_offset=False)])
def test_generate_proposals_v2(attrs):
    op_case("generate_proposals_v2", _proposal_inputs(), {"eta": 1.0, **attrs}, params=["Anchors", "Variances"],
            outputs={"RpnRoisNum": 1}, rtol=1e-5, atol=1e-4)


def test_generate_proposals_v2_gives_one_zero_box_for_an_image_left_empty():
    inputs = _proposal_inputs(n=1)
    op_case("generate_proposals_v2", inputs, dict(pre_nms_topN=10, post_nms_topN=5, nms_thresh=0.5, min_size=500.0,
                                                  eta=1.0, pixel_offset=False),
            params=["Anchors", "Variances"], outputs={"RpnRoisNum": 1})


def test_generate_proposals_v2_without_nms_after_a_partial_selection_is_refused_naming_why():
    with pytest.raises(OnnxExportError, match="generate_proposals_v2.*nth_element"):
        op_case("generate_proposals_v2", _proposal_inputs(), dict(pre_nms_topN=20, post_nms_topN=5, nms_thresh=0.0,
                                                                  min_size=1.0, eta=1.0, pixel_offset=False),
                params=["Anchors", "Variances"], outputs={"RpnRoisNum": 1})


@pytest.mark.parametrize("name", ["det_ssd", "det_yolo", "det_two_stage"])
def test_detection_zoo_models_give_paddles_outputs(name, tmp_path):
    zoo_case(name, tmp_path)
