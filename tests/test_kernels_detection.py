"""Detection kernels (kernels/detection.py) against PaddlePaddle's own outputs and against
independent references written from the ops' definitions.

- PaddlePaddle: tests/fixtures/detection/cases.{json,npz} hold, per case, the inputs,
  attributes and PaddlePaddle 3.3.1's outputs (tests/fixtures/detection/generate.py). Keel's
  outputs must equal them exactly: values bit for bit, shapes, dtypes, the Index /
  NmsRoisNum / RoisNum / RestoreIndex / Argmax outputs, and the order of the NMS results.
- References: direct loops in float64 over each op's definition (the greedy NMS, the
  bilinear RoI samples, the box formulas), checked to a float32 tolerance; integer
  outputs (indices, counts, argmax) exactly.

Kernels run through `call_kernel`, so tests/test_standin_kernels.py reruns this module on
the cupy stand-in.
"""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import registry as kernel_registry
from keel.kernels import stl_order
from keel.program.ops import registry as op_registry

HERE = Path(__file__).resolve().parent / "fixtures" / "detection"
META = json.loads((HERE / "cases.json").read_text())
DATA = np.load(HERE / "cases.npz", allow_pickle=False)
OPS = ["yolo_box", "multiclass_nms3", "matrix_nms", "prior_box", "density_prior_box", "anchor_generator",
       "box_coder", "roi_align", "roi_align_grad", "roi_pool", "roi_pool_grad", "generate_proposals_v2",
       "distribute_fpn_proposals"]


def case_inputs(name):
    ins = {}
    for slot, n in META[name]["inputs"].items():
        ins[slot] = [DATA[f"{name}/in/{slot}.{i}"] for i in range(n)] if n else DATA[f"{name}/in/{slot}"]
    return ins


def flat_outputs(got):
    """slot -> array, duplicable slots as `slot.i` (the fixtures' naming)."""
    out = {}
    for slot, value in got.items():
        if isinstance(value, list):
            out.update({f"{slot}.{i}": np.asarray(v) for i, v in enumerate(value)})
        else:
            out[slot] = np.asarray(value)
    return out


@pytest.mark.parametrize("op_type", OPS)
def test_kernel_slots_match_the_op_definition(op_type):
    kdef, opdef = kernel_registry.get(op_type), op_registry.get(op_type)
    assert set(kdef.inputs) <= set(opdef.input_slots)
    assert set(kdef.outputs) <= set(opdef.output_slots)
    assert all(opdef.attr_spec(a) is not None for a in kdef.attrs)


# ============================================================================ PaddlePaddle's outputs

@pytest.mark.parametrize("name", sorted(META))
def test_equals_paddle(name):
    meta = META[name]
    got = flat_outputs(call_kernel(meta["op"], case_inputs(name), meta["attrs"]))
    for key in meta["outputs"]:
        want = DATA[f"{name}/out/{key}"]
        assert key in got, f"{name}: no {key}"
        assert got[key].dtype == want.dtype and got[key].shape == want.shape, \
            f"{name} {key}: {got[key].dtype}{got[key].shape} vs Paddle's {want.dtype}{want.shape}"
        np.testing.assert_array_equal(got[key], want, err_msg=f"{name} {key}")


# ============================================================================ references

def sig(v):
    return 1.0 / (1.0 + math.exp(-v))


def yolo_box_ref(ins, a):
    x, img = ins["X"].astype(np.float64), ins["ImgSize"]
    n, _, h, w = x.shape
    anchors, cls = a["anchors"], a["class_num"]
    an = len(anchors) // 2
    boxes = np.zeros((n, an, h, w, 4))
    scores = np.zeros((n, an, h, w, cls))
    skip = an if a["iou_aware"] else 0
    for b in range(n):
        ih, iw = img[b]
        for k in range(an):
            ch = skip + k * (5 + cls)
            for i in range(h):
                for j in range(w):
                    conf = sig(x[b, ch + 4, i, j])
                    if a["iou_aware"]:
                        f = a["iou_aware_factor"]
                        conf = conf ** (1 - f) * sig(x[b, k, i, j]) ** f
                    if conf < a["conf_thresh"]:
                        continue
                    s = a["scale_x_y"]
                    cx = (j + sig(x[b, ch, i, j]) * s - 0.5 * (s - 1)) * iw / w
                    cy = (i + sig(x[b, ch + 1, i, j]) * s - 0.5 * (s - 1)) * ih / h
                    bw = math.exp(x[b, ch + 2, i, j]) * anchors[2 * k] * iw / (a["downsample_ratio"] * w)
                    bh = math.exp(x[b, ch + 3, i, j]) * anchors[2 * k + 1] * ih / (a["downsample_ratio"] * h)
                    box = [cx - bw / 2, cy - bh / 2, cx + bw / 2, cy + bh / 2]
                    if a["clip_bbox"]:
                        box = [max(box[0], 0), max(box[1], 0), min(box[2], iw - 1), min(box[3], ih - 1)]
                    boxes[b, k, i, j] = box
                    scores[b, k, i, j] = [conf * sig(x[b, ch + 5 + c, i, j]) for c in range(cls)]
    return {"Boxes": boxes.reshape(n, -1, 4), "Scores": scores.reshape(n, -1, cls)}


def iou(b1, b2, normalized):
    """Jaccard overlap of two [x1, y1, x2, y2] boxes; +1 pixel sizes unless normalized."""
    if b2[0] > b1[2] or b2[2] < b1[0] or b2[1] > b1[3] or b2[3] < b1[1]:
        return 0.0
    e = 0.0 if normalized else 1.0

    def area(b):
        return 0.0 if b[2] < b[0] or b[3] < b[1] else (b[2] - b[0] + e) * (b[3] - b[1] + e)
    iw = min(b1[2], b2[2]) - max(b1[0], b2[0]) + e
    ih = min(b1[3], b2[3]) - max(b1[1], b2[1]) + e
    return iw * ih / (area(b1) + area(b2) - iw * ih)


def greedy_nms(boxes, scores, thr, nms_thr, eta, top_k, normalized):
    cand = sorted((i for i in range(len(scores)) if scores[i] > thr), key=lambda i: -scores[i])
    if top_k > -1:
        cand = cand[:top_k]
    kept = []
    for i in cand:
        if all(iou(boxes[i], boxes[j], normalized) <= nms_thr for j in kept):
            kept.append(i)
            if eta < 1 and nms_thr > 0.5:
                nms_thr *= eta
    return kept


def multiclass_nms3_ref(ins, a):
    boxes, scores = ins["BBoxes"].astype(np.float64), ins["Scores"].astype(np.float64)
    two_d = scores.ndim == 2
    if two_d:
        counts = ins["RoisNum"] if "RoisNum" in ins else [len(scores)]
        starts = np.concatenate([[0], np.cumsum(counts)]).astype(int)
        images = [(boxes[s:e].transpose(1, 0, 2), scores[s:e].T, s) for s, e in zip(starts[:-1], starts[1:])]
    else:
        images = [(np.broadcast_to(boxes[i], (scores.shape[1],) + boxes[i].shape), scores[i], i * scores.shape[2])
                  for i in range(len(scores))]
    rows, index, nums = [], [], []
    for cls_boxes, cls_scores, start in images:     # [C, M, 4], [C, M]
        dets = []
        for c in range(cls_scores.shape[0]):
            if c == a["background_label"]:
                continue
            kept = greedy_nms(cls_boxes[c], cls_scores[c], a["score_threshold"], a["nms_threshold"], a["nms_eta"],
                              a["nms_top_k"], a["normalized"])
            dets += [(c, i) for i in (sorted(kept) if two_d else kept)]
        if -1 < a["keep_top_k"] < len(dets):
            best = sorted(range(len(dets)), key=lambda k: -cls_scores[dets[k]])[:a["keep_top_k"]]
            chosen = [dets[k] for k in best]
            by_class = {}
            for c, i in chosen:
                by_class.setdefault(c, []).append(i)
            dets = [(c, i) for c in sorted(by_class) for i in (sorted(by_class[c]) if two_d else by_class[c])]
        for c, i in dets:
            rows.append([c, cls_scores[c, i], *cls_boxes[c, i]])
            index.append(start * cls_scores.shape[0] + i * cls_scores.shape[0] + c if two_d else start + i)
        nums.append(len(dets))
    return {"Out": np.array(rows).reshape(-1, boxes.shape[-1] + 2),
            "Index": np.array(index, np.int32).reshape(-1, 1), "NmsRoisNum": np.array(nums, np.int32)}


def matrix_nms_ref(ins, a):
    boxes, scores = ins["BBoxes"].astype(np.float64), ins["Scores"].astype(np.float64)
    n, c, m = scores.shape
    rows, index, nums = [], [], []
    for b in range(n):
        dets = []
        for cl in range(c):
            if cl == a["background_label"]:
                continue
            s = scores[b, cl]
            order = sorted((i for i in range(m) if s[i] > a["score_threshold"]), key=lambda i: -s[i])
            if a["nms_top_k"] > -1:
                order = order[:a["nms_top_k"]]
            ious = [[iou(boxes[b, order[i]], boxes[b, order[j]], a["normalized"]) for j in range(i)]
                    for i in range(len(order))]
            comp = [max(r, default=0.0) for r in ious]      # each box's largest overlap with a better one
            for i, idx in enumerate(order):
                if a["use_gaussian"]:
                    decays = [math.exp((comp[j] ** 2 - ious[i][j] ** 2) * a["gaussian_sigma"]) for j in range(i)]
                else:
                    decays = [(1 - ious[i][j]) / (1 - comp[j]) for j in range(i)]
                ds = min([1.0] + decays) * s[idx]
                if ds > a["post_threshold"]:
                    dets.append((ds, cl, idx))
        dets = sorted(dets, key=lambda d: -d[0])
        if a["keep_top_k"] > -1:
            dets = dets[:a["keep_top_k"]]
        for ds, cl, idx in dets:
            rows.append([cl, ds, *boxes[b, idx]])
            index.append(b * m + idx)
        nums.append(len(dets))
    return {"Out": np.array(rows).reshape(-1, 6), "Index": np.array(index, np.int32).reshape(-1, 1),
            "RoisNum": np.array(nums, np.int32)}


def prior_box_ref(ins, a):
    _, _, fh, fw = ins["Input"].shape
    _, _, ih, iw = ins["Image"].shape
    ars = [1.0]
    for r in a["aspect_ratios"]:
        if all(abs(r - q) >= 1e-6 for q in ars):
            ars += [r, 1 / r] if a["flip"] else [r]
    sx, sy = (iw / fw, ih / fh) if a["step_w"] == 0 or a["step_h"] == 0 else (a["step_w"], a["step_h"])
    sizes = []
    for s, mn in enumerate(a["min_sizes"]):
        big = [(math.sqrt(mn * a["max_sizes"][s]),) * 2] if a["max_sizes"] else []
        if a["min_max_aspect_ratios_order"]:
            sizes += [(mn, mn)] + big + [(mn * math.sqrt(r), mn / math.sqrt(r)) for r in ars if abs(r - 1) >= 1e-6]
        else:
            sizes += [(mn * math.sqrt(r), mn / math.sqrt(r)) for r in ars] + big
    out = np.zeros((fh, fw, len(sizes), 4))
    for i in range(fh):
        for j in range(fw):
            cx, cy = (j + a["offset"]) * sx, (i + a["offset"]) * sy
            for k, (bw, bh) in enumerate(sizes):
                out[i, j, k] = [(cx - bw / 2) / iw, (cy - bh / 2) / ih, (cx + bw / 2) / iw, (cy + bh / 2) / ih]
    if a["clip"]:
        out = out.clip(0, 1)
    return {"Boxes": out, "Variances": np.broadcast_to(a["variances"], out.shape)}


def anchor_generator_ref(ins, a):
    _, _, fh, fw = ins["Input"].shape
    sw, sh = a["stride"]
    sizes = []
    for r in a["aspect_ratios"]:
        for s in a["anchor_sizes"]:
            base_w = math.floor(math.sqrt(sw * sh / r) + 0.5)
            base_h = math.floor(base_w * r + 0.5)
            sizes.append((s / sw * base_w, s / sh * base_h))
    out = np.zeros((fh, fw, len(sizes), 4))
    for i in range(fh):
        for j in range(fw):
            cx, cy = j * sw + a["offset"] * (sw - 1), i * sh + a["offset"] * (sh - 1)
            for k, (w, h) in enumerate(sizes):
                out[i, j, k] = [cx - (w - 1) / 2, cy - (h - 1) / 2, cx + (w - 1) / 2, cy + (h - 1) / 2]
    return {"Anchors": out, "Variances": np.broadcast_to(a["variances"], out.shape)}


def box_coder_ref(ins, a):
    prior, target = ins["PriorBox"].astype(np.float64), ins["TargetBox"].astype(np.float64)
    pvar = ins.get("PriorBoxVar")
    e = 0.0 if a["box_normalized"] else 1.0

    def center_size(b):
        w, h = b[2] - b[0] + e, b[3] - b[1] + e
        return b[0] + w / 2, b[1] + h / 2, w, h

    def var_of(j):
        if pvar is not None:
            return pvar[j].astype(np.float64)
        return np.array(a["variance"] or [1.0] * 4)
    if a["code_type"] == "encode_center_size":
        out = np.zeros((len(target), len(prior), 4))
        for i, t in enumerate(target):
            tx, ty = (t[0] + t[2]) / 2, (t[1] + t[3]) / 2
            tw, th = t[2] - t[0] + e, t[3] - t[1] + e
            for j, p in enumerate(prior):
                px, py, pw, ph = center_size(p)
                out[i, j] = np.array([(tx - px) / pw, (ty - py) / ph, math.log(abs(tw / pw)),
                                      math.log(abs(th / ph))]) / var_of(j)
        return {"OutputBox": out}
    out = np.zeros(target.shape)
    for i in range(target.shape[0]):
        for j in range(target.shape[1]):
            k = j if a["axis"] == 0 else i
            px, py, pw, ph = center_size(prior[k])
            v, d = var_of(k), target[i, j]
            cx, cy = v[0] * d[0] * pw + px, v[1] * d[1] * ph + py
            w, h = math.exp(v[2] * d[2]) * pw, math.exp(v[3] * d[3]) * ph
            out[i, j] = [cx - w / 2, cy - h / 2, cx + w / 2 - e, cy + h / 2 - e]
    return {"OutputBox": out}


def bilinear(plane, y, x):
    """plane at (y, x) as RoI Align samples it: 0 outside [-1, size], clamped to the edge."""
    h, w = plane.shape[-2:]
    if y < -1 or y > h or x < -1 or x > w:
        return np.zeros(plane.shape[:-2])
    y, x = min(max(y, 0.0), h - 1), min(max(x, 0.0), w - 1)
    y0, x0 = int(y), int(x)
    y1, x1 = min(y0 + 1, h - 1), min(x0 + 1, w - 1)
    ly, lx = y - y0, x - x0
    return (plane[..., y0, x0] * (1 - ly) * (1 - lx) + plane[..., y0, x1] * (1 - ly) * lx
            + plane[..., y1, x0] * ly * (1 - lx) + plane[..., y1, x1] * ly * lx)


def batch_of(ins, n_rois):
    num = ins.get("RoisNum")
    return np.zeros(n_rois, int) if num is None else np.repeat(np.arange(len(num)), num)


def roi_align_ref(ins, a):
    x, rois = ins["X"].astype(np.float64), ins["ROIs"].astype(np.float64)
    ph, pw = a["pooled_height"], a["pooled_width"]
    out = np.zeros((len(rois), x.shape[1], ph, pw))
    off = 0.5 if a["aligned"] else 0.0
    for k, b in enumerate(batch_of(ins, len(rois))):
        x0, y0, x1, y1 = rois[k] * a["spatial_scale"] - off
        rw, rh = x1 - x0, y1 - y0
        if not a["aligned"]:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = a["sampling_ratio"] if a["sampling_ratio"] > 0 else math.ceil(rh / ph)
        gw = a["sampling_ratio"] if a["sampling_ratio"] > 0 else math.ceil(rw / pw)
        for i in range(ph):
            for j in range(pw):
                acc = sum(bilinear(x[b], y0 + (i + (p + 0.5) / gh) * rh / ph, x0 + (j + (q + 0.5) / gw) * rw / pw)
                          for p in range(gh) for q in range(gw))
                out[k, :, i, j] = acc / (gh * gw)
    return {"Out": out}


def roi_pool_ref(ins, a):
    x, rois = ins["X"], ins["ROIs"].astype(np.float64)
    _, c, h, w = x.shape
    ph, pw = a["pooled_height"], a["pooled_width"]
    out = np.zeros((len(rois), c, ph, pw), x.dtype)
    arg = np.full((len(rois), c, ph, pw), -1, np.int64)

    def rnd(v):   # C's round: halves away from zero
        return int(math.floor(abs(v) + 0.5)) * (1 if v >= 0 else -1)
    for k, b in enumerate(batch_of(ins, len(rois))):
        x0, y0, x1, y1 = (rnd(v * a["spatial_scale"]) for v in rois[k])
        rh, rw = max(y1 - y0 + 1, 1), max(x1 - x0 + 1, 1)
        for i in range(ph):
            hs = min(max(math.floor(i * rh / ph) + y0, 0), h)
            he = min(max(math.ceil((i + 1) * rh / ph) + y0, 0), h)
            for j in range(pw):
                ws = min(max(math.floor(j * rw / pw) + x0, 0), w)
                we = min(max(math.ceil((j + 1) * rw / pw) + x0, 0), w)
                for ch in range(c):
                    best, where = None, -1
                    for yy in range(hs, he):
                        for xx in range(ws, we):
                            if best is None or x[b, ch, yy, xx] > best:
                                best, where = x[b, ch, yy, xx], yy * w + xx
                    out[k, ch, i, j] = 0 if best is None else best
                    arg[k, ch, i, j] = where
    return {"Out": out, "Argmax": arg}


def generate_proposals_v2_ref(ins, a):
    off = 1.0 if a["pixel_offset"] else 0.0
    anchors = ins["Anchors"].reshape(-1, 4).astype(np.float64)
    var = ins["Variances"].reshape(-1, 4).astype(np.float64)
    rois, probs, nums = [], [], []
    for b in range(len(ins["Scores"])):
        s = ins["Scores"][b].transpose(1, 2, 0).reshape(-1).astype(np.float64)
        d = ins["BboxDeltas"][b].transpose(1, 2, 0).reshape(-1, 4).astype(np.float64)
        im_h, im_w = ins["ImShape"][b]
        order = sorted(range(len(s)), key=lambda i: -s[i])
        if 0 < a["pre_nms_topN"] < len(order):
            order = order[:a["pre_nms_topN"]]
        props, sc = [], []
        for i in order:
            ax0, ay0, ax1, ay1 = anchors[i]
            aw, ah = ax1 - ax0 + off, ay1 - ay0 + off
            cx = var[i, 0] * d[i, 0] * aw + ax0 + aw / 2
            cy = var[i, 1] * d[i, 1] * ah + ay0 + ah / 2
            w = math.exp(min(var[i, 2] * d[i, 2], math.log(1000 / 16))) * aw
            h = math.exp(min(var[i, 3] * d[i, 3], math.log(1000 / 16))) * ah
            box = [cx - w / 2, cy - h / 2, cx + w / 2 - off, cy + h / 2 - off]
            box = [min(max(v, 0), (im_w if k % 2 == 0 else im_h) - off) for k, v in enumerate(box)]
            bw, bh = box[2] - box[0] + off, box[3] - box[1] + off
            ok = bw >= max(a["min_size"], 1) and bh >= max(a["min_size"], 1)
            if a["pixel_offset"]:
                ok = ok and box[0] + bw / 2 <= im_w and box[1] + bh / 2 <= im_h
            if ok:
                props.append(box)
                sc.append(s[i])
        if not props:
            props, sc = [[0.0] * 4], [0.0]
        elif a["nms_thresh"] > 0:
            kept = greedy_nms(props, sc, -np.inf, a["nms_thresh"], a["eta"], -1, not a["pixel_offset"])
            if 0 < a["post_nms_topN"] < len(kept):
                kept = kept[:a["post_nms_topN"]]
            props, sc = [props[i] for i in kept], [sc[i] for i in kept]
        rois += props
        probs += sc
        nums.append(len(props))
    return {"RpnRois": np.array(rois).reshape(-1, 4), "RpnRoiProbs": np.array(probs).reshape(-1, 1),
            "RpnRoisNum": np.array(nums, np.int32)}


def distribute_fpn_proposals_ref(ins, a):
    rois = ins["FpnRois"].astype(np.float64)
    lo, hi = a["min_level"], a["max_level"]
    e = 1.0 if a["pixel_offset"] else 0.0
    levels = []
    for r in rois:
        area = 0.0 if r[2] < r[0] or r[3] < r[1] else (r[2] - r[0] + e) * (r[3] - r[1] + e)
        lvl = math.floor(math.log2(math.sqrt(area) / a["refer_scale"] + 1e-6) + a["refer_level"])
        levels.append(min(max(lvl, lo), hi))
    image = batch_of(ins, len(rois))
    out = {}
    order = []
    for li, lvl in enumerate(range(lo, hi + 1)):
        at = [i for i in range(len(rois)) if levels[i] == lvl]
        order += at
        out[f"MultiFpnRois.{li}"] = rois[at].reshape(-1, 4)
        out[f"MultiLevelRoIsNum.{li}"] = np.bincount(image[at], minlength=len(ins["RoisNum"])).astype(np.int32)
    restore = np.zeros(len(rois), np.int32)
    restore[order] = np.arange(len(rois))
    out["RestoreIndex"] = restore.reshape(-1, 1)
    return out


def density_prior_box_ref(ins, a):
    _, _, fh, fw = ins["Input"].shape
    _, _, ih, iw = ins["Image"].shape
    sx, sy = (iw / fw, ih / fh) if a["step_w"] == 0 or a["step_h"] == 0 else (a["step_w"], a["step_h"])
    step = int((sx + sy) / 2)
    out = []
    for i in range(fh):
        for j in range(fw):
            cx, cy = (j + a["offset"]) * sx, (i + a["offset"]) * sy
            cell = []
            for size, dens in zip(a["fixed_sizes"], a["densities"]):
                shift = step // dens
                for r in a["fixed_ratios"]:
                    bw, bh = size * math.sqrt(r), size / math.sqrt(r)
                    for di in range(dens):
                        for dj in range(dens):
                            x = cx - step / 2 + shift / 2 + dj * shift
                            y = cy - step / 2 + shift / 2 + di * shift
                            cell.append([max((x - bw / 2) / iw, 0), max((y - bh / 2) / ih, 0),
                                         min((x + bw / 2) / iw, 1), min((y + bh / 2) / ih, 1)])
            out.append(cell)
    out = np.array(out).reshape(fh, fw, -1, 4)
    if a["clip"]:
        out = out.clip(0, 1)
    if a["flatten_to_2d"]:
        out = out.reshape(-1, 4)
    return {"Boxes": out, "Variances": np.broadcast_to(a["variances"], out.shape)}


REFERENCES = {"yolo_box": yolo_box_ref, "multiclass_nms3": multiclass_nms3_ref, "matrix_nms": matrix_nms_ref,
              "prior_box": prior_box_ref, "anchor_generator": anchor_generator_ref, "box_coder": box_coder_ref,
              "roi_align": roi_align_ref, "roi_pool": roi_pool_ref,
              "generate_proposals_v2": generate_proposals_v2_ref,
              "distribute_fpn_proposals": distribute_fpn_proposals_ref,
              "density_prior_box": density_prior_box_ref}


def assert_matches_reference(got, want, what):
    for key, ref in want.items():
        g = got[key]
        assert g.shape == np.shape(ref), f"{what} {key}: shape {g.shape} vs the reference's {np.shape(ref)}"
        if g.dtype.kind in "iu":
            np.testing.assert_array_equal(g, ref, err_msg=f"{what} {key}")
        else:
            scale = max(1.0, float(np.abs(ref).max())) if np.size(ref) else 1.0
            np.testing.assert_allclose(g, ref, rtol=2e-6, atol=2e-6 * scale, err_msg=f"{what} {key}")


# Cases with equal scores where PaddlePaddle's result depends on how libstdc++'s unstable
# std::sort / nth_element / partial_sort arrange them (which equal-scored box is kept,
# decays the other, or comes first): the definition leaves that open, so a reference from
# the definition cannot fix it; test_equals_paddle checks Keel's arrangement
# (kernels/stl_order.py), and test_stl_order_* its algorithms' properties.
LIBSTDCXX_TIES = {name for name in META if "ties" in name and META[name]["op"] in ("generate_proposals_v2",
                                                                                    "matrix_nms")}


@pytest.mark.parametrize("name", sorted(set(META) - LIBSTDCXX_TIES))
def test_matches_reference(name):
    meta = META[name]
    ins = case_inputs(name)
    got = flat_outputs(call_kernel(meta["op"], ins, meta["attrs"]))
    assert_matches_reference(got, REFERENCES[meta["op"]](ins, meta["attrs"]), name)


def test_tied_proposals_without_selection_hold_the_reference_rows():
    """All anchors kept, no NMS: only the arrangement of equal scores is libstdc++'s, so
    the rows (sorted) are the reference's."""
    name = "generate_proposals_v2_ties_pre0_nms-1.0"
    meta, ins = META[name], case_inputs(name)
    got = flat_outputs(call_kernel(meta["op"], ins, meta["attrs"]))
    want = generate_proposals_v2_ref(ins, meta["attrs"])
    np.testing.assert_array_equal(got["RpnRoisNum"], want["RpnRoisNum"])
    start = 0
    for n in want["RpnRoisNum"]:
        rows = np.concatenate([got["RpnRoiProbs"], got["RpnRois"]], axis=1)[start:start + n]
        ref = np.concatenate([want["RpnRoiProbs"], want["RpnRois"]], axis=1)[start:start + n]
        assert (np.diff(rows[:, 0]) <= 0).all()                      # descending scores
        np.testing.assert_allclose(rows[np.lexsort(rows.T[::-1])], ref[np.lexsort(ref.T[::-1])],
                                   rtol=2e-6, atol=1e-4)
        start += n


@pytest.mark.parametrize("seed", range(6))
def test_stl_order_algorithms_order_correctly(seed):
    r = np.random.default_rng(seed)
    n = int(r.integers(1, 200))
    keys = r.integers(0, max(2, n // 4), size=n).tolist()        # many equal keys
    less = lambda a, b: keys[a] > keys[b]  # noqa: E731  (descending, as the kernels rank scores)
    seq = list(range(n))
    stl_order.sort(seq, less)
    assert sorted(seq) == list(range(n)) and all(keys[a] >= keys[b] for a, b in zip(seq, seq[1:]))
    nth = int(r.integers(0, n))
    seq = list(range(n))
    stl_order.nth_element(seq, nth, less)
    assert sorted(seq) == list(range(n))
    assert all(keys[a] >= keys[seq[nth]] for a in seq[:nth]) and all(keys[a] <= keys[seq[nth]] for a in seq[nth:])
    m = int(r.integers(0, n + 1))
    seq = list(range(n))
    stl_order.partial_sort(seq, m, less)
    assert sorted(seq) == list(range(n)) and all(keys[a] >= keys[b] for a, b in zip(seq[:m], seq[1:m]))
    assert m in (0, n) or min(keys[a] for a in seq[:m]) >= max(keys[a] for a in seq[m:])


# ============================================================================ further cases

def _nms_attrs(**kw):
    a = dict(score_threshold=0.05, nms_top_k=-1, keep_top_k=-1, nms_threshold=0.5, normalized=True,
             nms_eta=1.0, background_label=-1)
    return dict(a, **kw)


def test_multiclass_nms3_two_d_layout_without_rois_num_is_one_image():
    name = "nms3_2d_roisnum"
    ins = case_inputs(name)
    one = dict(ins, RoisNum=np.array([len(ins["Scores"])], np.int32))
    attrs = META[name]["attrs"]
    got = call_kernel("multiclass_nms3", {k: v for k, v in ins.items() if k != "RoisNum"}, attrs)
    want = call_kernel("multiclass_nms3", one, attrs)
    for slot in ("Out", "Index", "NmsRoisNum"):
        np.testing.assert_array_equal(got[slot], want[slot])
    assert_matches_reference(flat_outputs(got), multiclass_nms3_ref(one, attrs), "no RoisNum")


def test_multiclass_nms3_identical_boxes_keep_the_lower_index_and_float64():
    boxes = np.array([[[0.1, 0.1, 0.5, 0.5], [0.1, 0.1, 0.5, 0.5], [0.6, 0.6, 0.9, 0.9]]])
    scores = np.array([[[0.9, 0.9, 0.3]]])
    got = call_kernel("multiclass_nms3", {"BBoxes": boxes, "Scores": scores}, _nms_attrs())
    assert got["Out"].dtype == np.float64
    np.testing.assert_array_equal(got["Index"].ravel(), [0, 2])
    np.testing.assert_array_equal(got["Out"][:, :2], [[0, 0.9], [0, 0.3]])
    np.testing.assert_array_equal(got["NmsRoisNum"], [2])


def test_yolo_box_float64_matches_reference():
    r = np.random.default_rng(5)
    x = r.normal(0, 1.5, size=(1, 2 * 7, 3, 4))
    attrs = dict(anchors=[10, 14, 23, 27], class_num=2, conf_thresh=0.2, downsample_ratio=16, clip_bbox=True,
                 scale_x_y=1.1, iou_aware=False, iou_aware_factor=0.5)
    ins = {"X": x, "ImgSize": np.array([[100, 120]], np.int32)}
    got = call_kernel("yolo_box", ins, attrs)
    assert got["Boxes"].dtype == np.float64
    assert_matches_reference(got, yolo_box_ref(ins, attrs), "float64")


@pytest.mark.parametrize("flatten,clip,steps", [(False, True, (0.0, 0.0)), (True, False, (6.0, 7.0))])
def test_density_prior_box_matches_reference(flatten, clip, steps):
    """Not in PaddlePaddle 3.3.1's registry (2.x kept it): against the reference only, plus
    one box worked by hand."""
    ins = {"Input": np.zeros((1, 2, 3, 4), np.float32), "Image": np.zeros((1, 3, 24, 32), np.float32)}
    attrs = dict(variances=[0.1, 0.1, 0.2, 0.2], clip=clip, flatten_to_2d=flatten, step_w=steps[0],
                 step_h=steps[1], offset=0.5, fixed_sizes=[8.0, 16.0], fixed_ratios=[1.0, 2.0], densities=[2, 1])
    got = call_kernel("density_prior_box", ins, attrs)
    assert_matches_reference(got, density_prior_box_ref(ins, attrs), "density_prior_box")
    if not flatten:
        # cell (0, 0), size 8, ratio 1, density 2, step 8: shift 4, centres 2 and 6
        np.testing.assert_allclose(got["Boxes"][0, 0, 0], [0, 0, 6 / 32, 6 / 24], rtol=1e-6)
        np.testing.assert_allclose(got["Boxes"][0, 0, 3], [2 / 32, 2 / 24, 10 / 32, 10 / 24], rtol=1e-6)
        assert got["Boxes"].shape == (3, 4, 2 * 4 + 2 * 1, 4)


def test_roi_ops_check_rois_num_against_the_batch():
    x = np.zeros((2, 1, 4, 4), np.float32)
    rois = np.array([[0, 0, 2, 2]], np.float32)
    attrs = dict(pooled_height=1, pooled_width=1, spatial_scale=1.0, sampling_ratio=-1, aligned=False)
    with pytest.raises(ValueError, match="RoisNum"):
        call_kernel("roi_align", {"X": x, "ROIs": rois}, attrs)
    with pytest.raises(ValueError, match="does not add up"):
        call_kernel("roi_align", {"X": x, "ROIs": rois, "RoisNum": np.array([1, 1], np.int32)}, attrs)


def test_polygon_boxes_are_refused_by_name():
    boxes = np.zeros((1, 2, 8), np.float32)
    scores = np.ones((1, 1, 2), np.float32)
    with pytest.raises(NotImplementedError, match="polygon"):
        call_kernel("multiclass_nms3", {"BBoxes": boxes, "Scores": scores}, _nms_attrs())


# ============================================================================ NMS building blocks

def jaccard_overlap_scalar(b1, b2, normalized):
    """PaddlePaddle's JaccardOverlap on scalars of the boxes' dtype, one pair at a time."""
    dt = type(b1[0])
    if b2[0] > b1[2] or b2[2] < b1[0] or b2[1] > b1[3] or b2[3] < b1[1]:
        return dt(0)
    norm = dt(0) if normalized else dt(1)

    def area(b):
        if b[2] < b[0] or b[3] < b[1]:
            return dt(0)
        return (b[2] - b[0]) * (b[3] - b[1]) if normalized else (b[2] - b[0] + norm) * (b[3] - b[1] + norm)
    inter = (min(b1[2], b2[2]) - max(b1[0], b2[0]) + norm) * (min(b1[3], b2[3]) - max(b1[1], b2[1]) + norm)
    with np.errstate(divide="ignore", invalid="ignore"):
        return dt(inter / (area(b1) + area(b2) - inter))


def random_boxes(rng, count, dtype, normalized):
    """Boxes of every kind NMS meets: ordinary, degenerate (x2 < x1, zero sizes), repeated
    and sharing edges (coordinates on a coarse grid)."""
    scale = 1.0 if normalized else 40.0
    corner = rng.uniform(0, scale, (count, 2))
    size = rng.uniform(-0.1 * scale, 0.6 * scale, (count, 2))
    boxes = np.round(np.concatenate([corner, corner + size], 1) * 8 / scale) * scale / 8
    if count:
        boxes[rng.random(count) < 0.15] = boxes[0]                  # repeated boxes
        points = rng.random(count) < 0.1
        boxes[points, 2:] = boxes[points, :2]                       # zero-size boxes
    if count > 2:
        boxes[-2:] = np.tile(boxes[-3, :2], 2)      # the same point twice: 0/0 if normalized
    return boxes.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("normalized", [True, False])
def test_iou_matrix_equals_the_pairwise_overlap_bit_for_bit(dtype, normalized):
    from keel.kernels.detection import _iou_matrix
    rng = np.random.default_rng(11)
    a, b = random_boxes(rng, 23, dtype, normalized), random_boxes(rng, 17, dtype, normalized)
    got = _iou_matrix(a, b, normalized)
    assert got.dtype == dtype and got.shape == (23, 17)
    want = np.array([[jaccard_overlap_scalar(p, q, normalized) for q in b] for p in a], dtype=dtype)
    np.testing.assert_array_equal(got.view(np.uint8), want.view(np.uint8))
    np.testing.assert_array_equal(_iou_matrix(b, a, normalized).view(np.uint8), got.T.copy().view(np.uint8))


def greedy_nms_scalar(boxes, threshold, eta, normalized):
    """NMSFast's loop: each candidate against each kept box, the threshold adapting."""
    dt = boxes.dtype.type
    threshold, eta = dt(threshold), dt(eta)
    kept = []
    for i in range(len(boxes)):
        if all(jaccard_overlap_scalar(boxes[i], boxes[j], normalized) <= threshold for j in kept):
            kept.append(i)
            if eta < 1 and threshold > 0.5:
                threshold = dt(threshold * eta)
    return kept


@pytest.mark.parametrize("first_batch, block_elements, all_at_once", [(1, 1, 0), (2, 40, 0), (16, 1 << 20, 0),
                                                                      (1000, 1 << 20, 0), (16, 1 << 20, 1 << 16)])
@pytest.mark.parametrize("threshold, eta", [(0.5, 1.0), (0.9, 0.9), (0.7, 0.5), (0.3, 0.8), (-0.1, 1.0)])
@pytest.mark.parametrize("normalized", [True, False])
def test_greedy_nms_keeps_what_the_one_at_a_time_loop_keeps(monkeypatch, first_batch, block_elements, all_at_once,
                                                           threshold, eta, normalized):
    """Whatever batches the overlaps are computed in (one row at a time, all at once), and
    with bit sets where the threshold does not change."""
    from keel.kernels import detection
    monkeypatch.setattr(detection, "_FIXED_THRESHOLD_ELEMENTS", all_at_once)
    monkeypatch.setattr(detection, "_FIRST_BATCH", first_batch)
    monkeypatch.setattr(detection, "_IOU_BLOCK_ELEMENTS", block_elements)
    rng = np.random.default_rng(int(threshold * 10 + eta * 100))
    for count in (0, 1, 2, 37):
        boxes = random_boxes(rng, count, np.float32, normalized)
        dt = np.float32
        got = detection._greedy_nms(boxes, dt(threshold), dt(eta), dt(eta) < 1, normalized)
        assert got.dtype == np.int64
        assert got.tolist() == greedy_nms_scalar(boxes, threshold, eta, normalized)


def test_matrix_nms_with_nms_top_k_zero_keeps_nothing():
    boxes = np.array([[[0.1, 0.1, 0.5, 0.5], [0.6, 0.6, 0.9, 0.9]]], np.float32)
    scores = np.array([[[0.9, 0.3]]], np.float32)
    attrs = dict(score_threshold=0.05, post_threshold=0.0, nms_top_k=0, keep_top_k=-1, normalized=True,
                 use_gaussian=False, gaussian_sigma=2.0, background_label=-1)
    got = call_kernel("matrix_nms", {"BBoxes": boxes, "Scores": scores}, attrs)
    assert got["Out"].shape == (0, 6)
    np.testing.assert_array_equal(got["RoisNum"], [0])


@pytest.mark.parametrize("sampling_ratio", [-1, 2])
def test_roi_align_gathering_in_chunks_changes_nothing(monkeypatch, sampling_ratio):
    """RoIs of different grid sizes, gathered together or one at a time, give the same bits
    and match the reference."""
    from keel.kernels import detection
    rng = np.random.default_rng(3)
    x = rng.normal(size=(2, 3, 9, 11)).astype(np.float32)
    corner = rng.uniform(-2, 8, (9, 2))
    rois = np.concatenate([corner, corner + rng.uniform(0, 9, (9, 2))], 1).astype(np.float32)
    ins = {"X": x, "ROIs": rois, "RoisNum": np.array([4, 5], np.int32)}
    attrs = dict(pooled_height=2, pooled_width=3, spatial_scale=1.0, sampling_ratio=sampling_ratio, aligned=True)
    together = call_kernel("roi_align", ins, attrs)["Out"]
    monkeypatch.setattr(detection, "_ROI_ALIGN_GATHER", 1)
    alone = call_kernel("roi_align", ins, attrs)["Out"]
    np.testing.assert_array_equal(together, alone)
    assert_matches_reference({"Out": together}, roi_align_ref(ins, attrs), "roi_align")


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_roi_pool_with_tied_maxima_and_bins_past_the_edges(dtype):
    """The first maximum of each bin (row-major) wins, bins of unequal sizes and bins outside
    the map (empty: 0, argmax -1) side by side."""
    rng = np.random.default_rng(8)
    x = rng.integers(-2, 3, size=(2, 3, 7, 9)).astype(dtype)
    rois = np.array([[0, 0, 8, 6], [-3, -2, 4, 3], [5, 4, 14, 11], [2, 1, 2, 1], [1, 1, 7, 5]], np.float32)
    ins = {"X": x, "ROIs": rois, "RoisNum": np.array([2, 3], np.int32)}
    attrs = dict(pooled_height=3, pooled_width=4, spatial_scale=1.0)
    got = flat_outputs(call_kernel("roi_pool", ins, attrs))
    want = roi_pool_ref(ins, attrs)
    np.testing.assert_array_equal(got["Argmax"], want["Argmax"])
    np.testing.assert_array_equal(got["Out"], want["Out"])
