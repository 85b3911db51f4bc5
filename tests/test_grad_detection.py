"""Gradient checks of the differentiable detection ops (roi_align, roi_pool: with respect
to X, as in PaddlePaddle) and direct tests of their gradient kernels against PaddlePaddle's
rules (roi_align_grad clamps every RoI to at least 1x1, aligned or not; roi_pool_grad
routes each bin's gradient to its Argmax)."""
import json
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor.kernel_call import call_kernel
from gradcheck import Case, rand, run_case

_SIGNATURES = Path(__file__).resolve().parent / "fixtures" / "paddle_grad_signatures.json"

_ROIS = np.array([[0.5, 1.0, 6.0, 5.5], [2.0, 0.0, 7.5, 3.0], [-1.0, 2.5, 4.0, 9.0],
                  [1.0, 1.0, 3.5, 4.0]])
_NUM = np.array([2, 2], dtype=np.int32)


def _x(seed=0):
    return rand(2, 3, 6, 7, seed=seed)


def _align(**attrs):
    base = dict(pooled_height=2, pooled_width=3, spatial_scale=1.0, sampling_ratio=-1, aligned=False)
    return dict(base, **attrs)


CASES = [
    Case("roi_align", {"X": _x(), "ROIs": _ROIS, "RoisNum": _NUM}, _align(), id="roi_align adaptive grid"),
    Case("roi_align", {"X": _x(1), "ROIs": _ROIS * 0.8, "RoisNum": _NUM},
         _align(aligned=True, sampling_ratio=2, pooled_height=3, pooled_width=2, spatial_scale=1.25),
         id="roi_align aligned sampling_ratio 2"),
    Case("roi_align", {"X": rand(1, 2, 5, 5, seed=2), "ROIs": _ROIS[:3]}, _align(spatial_scale=0.5),
         id="roi_align one image, no RoisNum"),
    Case("roi_pool", {"X": _x(3), "ROIs": _ROIS, "RoisNum": _NUM},
         dict(pooled_height=2, pooled_width=2, spatial_scale=1.0), id="roi_pool"),
    Case("roi_pool", {"X": _x(4), "ROIs": _ROIS * 1.5, "RoisNum": _NUM},
         dict(pooled_height=3, pooled_width=2, spatial_scale=0.5), id="roi_pool scaled"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


def _bilinear_scatter(dx, b, y, x, g):
    """Adds g into dx[b, :, ...] at (y, x) by PaddlePaddle's clamped bilinear rule."""
    _, _, h, w = dx.shape
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return
    y, x = max(y, 0.0), max(x, 0.0)
    yl, xl = int(y), int(x)
    if yl >= h - 1:
        yl = yh = h - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= w - 1:
        xl = xh = w - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly, lx = y - yl, x - xl
    dx[b, :, yl, xl] += g * (1 - ly) * (1 - lx)
    dx[b, :, yl, xh] += g * (1 - ly) * lx
    dx[b, :, yh, xl] += g * ly * (1 - lx)
    dx[b, :, yh, xh] += g * ly * lx


def _roi_align_grad_reference(x, rois, batch, dout, ph, pw, scale, ratio, aligned):
    dx = np.zeros_like(x)
    off = 0.5 if aligned else 0.0
    for k, roi in enumerate(rois):
        x0, y0, x1, y1 = roi * scale - off
        rw, rh = max(x1 - x0, 1.0), max(y1 - y0, 1.0)       # clamped even when aligned
        gh = ratio if ratio > 0 else int(np.ceil(rh / ph))
        gw = ratio if ratio > 0 else int(np.ceil(rw / pw))
        for i in range(ph):
            for j in range(pw):
                for a in range(gh):
                    for c in range(gw):
                        yy = y0 + (i + (a + 0.5) / gh) * rh / ph
                        xx = x0 + (j + (c + 0.5) / gw) * rw / pw
                        _bilinear_scatter(dx, batch[k], yy, xx, dout[k, :, i, j] / (gh * gw))
    return dx


@pytest.mark.parametrize("aligned,ratio", [(False, -1), (True, 2), (True, -1)])
def test_roi_align_grad_kernel_matches_reference(aligned, ratio):
    x = _x(5)
    rois = np.array([[0.5, 1.0, 6.0, 5.5], [2.0, 0.0, 2.4, 0.3], [-1.0, 2.5, 4.0, 9.0]])
    dout = rand(3, 3, 2, 3, seed=6)
    attrs = _align(aligned=aligned, sampling_ratio=ratio)
    got = call_kernel("roi_align_grad", {"X": x, "ROIs": rois, "RoisNum": np.array([1, 2], np.int32),
                                         "Out@GRAD": dout}, attrs)["X@GRAD"]
    want = _roi_align_grad_reference(x, rois, [0, 1, 1], dout, 2, 3, 1.0, ratio, aligned)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_roi_pool_grad_routes_to_argmax_and_skips_empty_bins():
    x = _x(7)
    rois = np.array([[0.0, 0.0, 3.0, 3.0], [20.0, 20.0, 30.0, 30.0], [1.0, 2.0, 5.0, 4.0]])
    num = np.array([2, 1], np.int32)
    attrs = dict(pooled_height=2, pooled_width=2, spatial_scale=1.0)
    fwd = call_kernel("roi_pool", {"X": x, "ROIs": rois, "RoisNum": num}, attrs)
    assert (fwd["Argmax"][1] == -1).all() and (fwd["Out"][1] == 0).all()   # outside the map: empty
    dout = rand(3, 3, 2, 2, seed=8)
    got = call_kernel("roi_pool_grad", {"X": x, "ROIs": rois, "RoisNum": num, "Argmax": fwd["Argmax"],
                                        "Out@GRAD": dout}, attrs)["X@GRAD"]
    want = np.zeros_like(x)
    for k, b in enumerate([0, 0, 1]):
        for c in range(3):
            for i in range(2):
                for j in range(2):
                    a = fwd["Argmax"][k, c, i, j]
                    if a >= 0:
                        want[b, c, a // 7, a % 7] += dout[k, c, i, j]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op_type", ["roi_align", "roi_pool"])
def test_grad_op_matches_paddle_signature(op_type):
    """The gradient op's slots, each bound to what PaddlePaddle binds it to (forward input,
    forward output, or a gradient), as tests/fixtures/paddle_grad_signatures.json records."""
    want = json.loads(_SIGNATURES.read_text())[op_type]["grad_ops"]
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        block = main.global_block()
        x = block.create_var("x", [2, 3, 6, 7], "float64", stop_gradient=False)
        rois = block.create_var("rois", [4, 4], "float64", stop_gradient=True)
        num = block.create_var("num", [2], "int32", stop_gradient=True)
        outs = {"Out": ["out"]}
        block.create_var("out", dtype="float64")
        if op_type == "roi_pool":
            outs["Argmax"] = ["argmax"]
            block.create_var("argmax", dtype="int64")
        attrs = {"pooled_height": 2, "pooled_width": 2}
        block.append_op(op_type, {"X": ["x"], "ROIs": ["rois"], "RoisNum": ["num"]}, outs, attrs)
        pg.gradients([pg.mean(block.var("out"))], [x])
    grads = [op for op in block.ops if op.type == op_type + "_grad"]
    assert [op.type for op in grads] == [g["type"] for g in want]
    roles = {"x": "in:X", "rois": "in:ROIs", "num": "in:RoisNum", "out": "out:Out", "argmax": "out:Argmax",
             "out@GRAD": "grad:out:Out", "x@GRAD": "grad:in:X"}
    assert {s: roles[ns[0]] for s, ns in grads[0].inputs.items()} == want[0]["inputs"]
    assert {s: roles[ns[0]] for s, ns in grads[0].outputs.items()} == want[0]["outputs"]
