"""multiclass_nms, the 1.x op (issue 32), from PaddlePaddle's documented semantics: per
class (not the background one) boxes above score_threshold, best first (at most nms_top_k),
greedily kept unless their IoU with a kept box exceeds nms_threshold; then the best keep_top_k
of all classes; rows [label, score, x1, y1, x2, y2] by label; [[-1]] when nothing is kept."""
import numpy as np

from keel.executor.kernel_call import call_kernel

ATTRS = {"score_threshold": 0.1, "nms_top_k": 10, "keep_top_k": 10, "nms_threshold": 0.5,
         "normalized": True, "nms_eta": 1.0, "background_label": 0}


def _iou(a, b):
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    area = lambda r: (r[2] - r[0]) * (r[3] - r[1])
    return inter / (area(a) + area(b) - inter)


def _reference(boxes, scores, attrs):
    rows = []
    for n in range(scores.shape[0]):
        kept = []
        for c in range(scores.shape[1]):
            if c == attrs["background_label"]:
                continue
            order = [int(i) for i in np.argsort(-scores[n, c], kind="stable")
                     if scores[n, c, i] > attrs["score_threshold"]][:attrs["nms_top_k"]]
            chosen = []
            for i in order:
                if all(_iou(boxes[n, i], boxes[n, j]) <= attrs["nms_threshold"] for j in chosen):
                    chosen.append(i)
            kept += [(c, scores[n, c, i], i) for i in chosen]
        kept = sorted(kept, key=lambda t: -t[1])[:attrs["keep_top_k"]]
        kept.sort(key=lambda t: t[0])
        rows += [[c, s, *boxes[n, i]] for c, s, i in kept]
    return np.array(rows)


def test_matches_the_documented_greedy_nms():
    boxes = np.array([[[0.0, 0.0, 0.5, 0.5], [0.05, 0.0, 0.55, 0.5], [0.6, 0.6, 0.9, 0.95],
                       [0.1, 0.6, 0.3, 0.9]]], dtype=np.float32)
    scores = np.array([[[0.9, 0.1, 0.1, 0.1], [0.8, 0.75, 0.3, 0.05], [0.2, 0.6, 0.65, 0.4]]],
                      dtype=np.float32)
    got = call_kernel("multiclass_nms", {"BBoxes": boxes, "Scores": scores}, ATTRS)["Out"]
    np.testing.assert_allclose(got, _reference(boxes, scores, ATTRS), rtol=1e-6)
    got = call_kernel("multiclass_nms", {"BBoxes": boxes, "Scores": scores}, {**ATTRS, "keep_top_k": 2})["Out"]
    np.testing.assert_allclose(got, _reference(boxes, scores, {**ATTRS, "keep_top_k": 2}), rtol=1e-6)


def test_nothing_kept_gives_minus_one():
    boxes = np.zeros((1, 2, 4), np.float32)
    scores = np.full((1, 2, 2), 0.01, np.float32)
    got = call_kernel("multiclass_nms", {"BBoxes": boxes, "Scores": scores}, ATTRS)["Out"]
    np.testing.assert_array_equal(got, np.array([[-1.0]], np.float32))
