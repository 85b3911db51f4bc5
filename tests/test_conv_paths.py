"""The convolution paths chosen by shape (kernels/conv.py) against the general formulation
(im2col through the window view + one batched matmul, `general_nchw`) and an independent
float64 reference (one einsum per window offset over strided slices of the padded input).

Each case names the path its shape takes; `test_case_takes_its_path` checks that it does,
so a change of thresholds cannot silently leave a path untested. The cases run again with
the work split across threads (kernels/parallel.py) at a threshold low enough to split
them, and on the cupy stand-in (tests/test_standin_kernels.py)."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import conv, conv_depthwise, conv_fold, parallel
from keel.kernels.conv import general_nchw, pad_spatial

# (name, path, x shape [N, C, H, W], filter shape [O, C/g, kh, kw], strides, paddings
#  [top, bottom, left, right], dilations, groups)
CASES = [
    ("1x1", "pointwise", (2, 6, 5, 7), (4, 6, 1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ("1x1 stride 2", "pointwise", (1, 6, 9, 8), (5, 6, 1, 1), (2, 2), (0, 0, 0, 0), (1, 1), 1),
    ("1x1 stride (2, 3) grouped", "pointwise", (2, 6, 7, 10), (4, 3, 1, 1), (2, 3), (0, 0, 0, 0), (1, 1), 2),
    ("1x1 padded", "general", (1, 3, 4, 5), (2, 3, 1, 1), (1, 1), (1, 0, 2, 1), (1, 1), 1),
    ("3x3 stride 1", "general", (2, 3, 9, 11), (5, 3, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ("3x3 deep, batch 1", "general", (1, 8, 9, 11), (5, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ("3x3 deep, batch 3: folded", "folded", (3, 8, 9, 11), (5, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ("5x3 stride (2, 1), dilation (1, 2), odd pads: folded", "folded", (2, 7, 11, 13), (6, 7, 5, 3), (2, 1),
     (2, 1, 0, 3), (1, 2), 1),
    ("3x3 stride 2 unpadded, batch 4: folded", "folded", (4, 9, 8, 7), (16, 9, 3, 3), (2, 2), (0, 0, 0, 0), (1, 1), 1),
    ("3x3 stride 1 unpadded", "general", (1, 4, 8, 6), (3, 4, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ("3x3 asymmetric pads, dilation 2", "general", (1, 2, 10, 9), (3, 2, 3, 3), (1, 1), (2, 0, 1, 3), (2, 2), 1),
    ("5x3 grouped", "general", (2, 6, 8, 9), (6, 2, 5, 3), (1, 1), (2, 2, 1, 1), (1, 1), 3),
    ("3x3 stride 1 narrowing", "shifted", (2, 8, 9, 11), (3, 8, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ("3x3 narrowing unpadded", "shifted", (1, 8, 7, 6), (4, 8, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ("3x3 narrowing unpadded, batch 3", "shifted", (3, 8, 7, 6), (4, 8, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ("1x1 padded narrowing (one tap)", "shifted", (2, 8, 5, 6), (3, 8, 1, 1), (1, 1), (1, 0, 2, 1), (1, 1), 1),
    ("3x2 narrowing, dilation (2, 1), batch 2", "shifted", (2, 9, 10, 7), (4, 9, 3, 2), (1, 1), (1, 2, 0, 1),
     (2, 1), 1),
    ("5x3 narrowing, asymmetric pads, dilation 2", "shifted", (1, 6, 10, 9), (3, 6, 5, 3), (1, 1), (2, 0, 1, 3),
     (2, 2), 1),
    ("3x3 stride 2", "general", (2, 3, 9, 10), (4, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 1),
    ("3x3 16 channels, batch 3: folded channels-last", "folded_cl", (3, 16, 7, 9), (24, 16, 3, 3), (1, 1),
     (1, 1, 1, 1), (1, 1), 1),
    ("3x2 stride (2, 1), dilation (1, 2), odd pads, 17 channels: folded channels-last", "folded_cl", (2, 17, 11, 9),
     (5, 17, 3, 2), (2, 1), (2, 1, 0, 3), (1, 2), 1),
    ("3x3 16 channels unpadded, batch 4: folded channels-last", "folded_cl", (4, 16, 8, 7), (12, 16, 3, 3), (1, 1),
     (0, 0, 0, 0), (1, 1), 1),
    ("3x3 16 channels, output 17 wide: folded", "folded", (2, 16, 5, 19), (12, 16, 3, 3), (1, 1), (1, 1, 1, 1),
     (1, 1), 1),
    ("3x3 stride 2 grouped", "general", (1, 4, 9, 10), (6, 2, 3, 3), (2, 1), (1, 0, 1, 1), (1, 2), 2),
    ("depthwise small wide plane", "flat_im2col", (2, 5, 18, 40), (5, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 5),
    ("depthwise small wide plane x2 multiplier", "flat_im2col", (1, 3, 17, 50), (6, 1, 3, 3), (1, 1), (1, 1, 1, 1),
     (1, 1), 3),
    ("depthwise short wide plane", "banded", (1, 4, 3, 60), (4, 1, 5, 5), (1, 1), (2, 2, 2, 2), (1, 1), 4),
    ("depthwise small narrow plane", "flat_im2col", (2, 5, 6, 7), (5, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 5),
    ("depthwise small wide plane, dilation 2", "flat_im2col", (1, 2, 20, 60), (2, 1, 3, 3), (1, 1), (2, 2, 2, 2),
     (2, 2), 2),
    ("depthwise strided small plane, up to 2.5x the 5x5 kernel's height", "banded", (1, 4, 9, 9), (8, 1, 5, 5),
     (2, 2), (2, 2, 2, 2), (1, 1), 4),
    ("depthwise strided small plane, taller", "im2col_blocks", (1, 4, 13, 9), (8, 1, 5, 5), (2, 2), (2, 2, 2, 2),
     (1, 1), 4),
    ("depthwise large plane", "flat_im2col", (1, 3, 96, 100), (3, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 3),
    ("depthwise large plane x2, dilation 2", "flat_im2col", (1, 2, 96, 100), (4, 1, 3, 3), (1, 1), (2, 2, 2, 2),
     (2, 2), 2),
    ("depthwise large plane strided 5x5", "im2col_blocks", (2, 3, 140, 150), (3, 1, 5, 5), (2, 2), (2, 2, 2, 2),
     (1, 1), 3),
    ("depthwise large plane stride (2, 1) x3", "im2col_blocks", (1, 2, 130, 80), (6, 1, 3, 3), (2, 1), (1, 0, 1, 1),
     (1, 1), 2),
]
IDS = [c[0] for c in CASES]


def _out_size(x_shape, w_shape, strides, pads, dilations):
    h, w = x_shape[2:]
    kh, kw = w_shape[2:]
    oh = (h + pads[0] + pads[1] - dilations[0] * (kh - 1) - 1) // strides[0] + 1
    ow = (w + pads[2] + pads[3] - dilations[1] * (kw - 1) - 1) // strides[1] + 1
    return oh, ow


def reference(x, w, strides, pads, dilations, g):
    """float64: for each window offset (a, b), the strided slice of the padded input it
    reads, contracted with W[:, :, a, b] per group."""
    n, c = x.shape[:2]
    o, cg, kh, kw = w.shape
    oh, ow = _out_size(x.shape, w.shape, strides, pads, dilations)
    xpad = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])])
    w64 = w.astype(np.float64).reshape(g, o // g, cg, kh, kw)
    out = np.zeros((n, g, o // g, oh, ow))
    for a in range(kh):
        for b in range(kw):
            r0, c0 = a * dilations[0], b * dilations[1]
            tap = xpad[:, :, r0:r0 + (oh - 1) * strides[0] + 1:strides[0], c0:c0 + (ow - 1) * strides[1] + 1:strides[1]]
            out += np.einsum("ngcij,goc->ngoij", tap.reshape(n, g, cg, oh, ow), w64[:, :, :, a, b])
    return out.reshape(n, o, oh, ow)


def _data(case, dtype=np.float32, seed=0):
    _, _, xs, ws, *_ = case
    r = np.random.default_rng(seed)
    return r.standard_normal(xs).astype(dtype), r.standard_normal(ws).astype(dtype)


def _paddings(pads):
    return list(pads)


def _run(op_type, x, w, strides, pads, dilations, g):
    return call_kernel(op_type, {"Input": x, "Filter": w},
                       {"strides": list(strides), "paddings": _paddings(pads), "padding_algorithm": "EXPLICIT",
                        "dilations": list(dilations), "groups": g, "data_format": "NCHW"})["Output"]


def _check(case, x, w, got):
    _, _, _, _, strides, pads, dilations, g = case
    want = reference(x, w, strides, pads, dilations, g)
    assert got.shape == want.shape and got.dtype == x.dtype
    k = w.shape[1] * w.shape[2] * w.shape[3]
    # float32 sums of k products of N(0, 1) values: error ~ eps * sqrt(k) * |terms|
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-6 * k * max(1.0, np.abs(want).max()) ** 0.5 * 4)
    general = general_nchw(np, pad_spatial(np, x, pads, False), w,
                           *want.shape[2:], *strides, *dilations, g)
    np.testing.assert_allclose(got, general, rtol=0, atol=1e-6 * k * 4)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_conv2d_paths_match_reference_and_general(case):
    x, w = _data(case)
    _, _, _, _, strides, pads, dilations, g = case
    _check(case, x, w, _run("conv2d", x, w, strides, pads, dilations, g))


@pytest.mark.parametrize("case", [c for c in CASES if c[3][1] == 1 and c[7] == c[2][1]],
                         ids=[c[0] for c in CASES if c[3][1] == 1 and c[7] == c[2][1]])
def test_depthwise_conv2d_op_paths(case):
    x, w = _data(case, seed=1)
    _, _, _, _, strides, pads, dilations, g = case
    _check(case, x, w, _run("depthwise_conv2d", x, w, strides, pads, dilations, 1))


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_paths_split_across_threads(case, monkeypatch):
    """Work split into parts (forced by a tiny threshold and 3 threads: uneven parts) gives
    the same numbers as serial."""
    x, w = _data(case, seed=2)
    _, _, _, _, strides, pads, dilations, g = case
    serial = _run("conv2d", x, w, strides, pads, dilations, g)
    monkeypatch.setattr(parallel, "MIN_WORK_PER_PART", 1)
    monkeypatch.setenv("KEEL_KERNEL_THREADS", "3")
    split = _run("conv2d", x, w, strides, pads, dilations, g)
    np.testing.assert_array_equal(split, serial)
    _check(case, x, w, split)


def test_threads_are_off_unless_asked(monkeypatch):
    monkeypatch.delenv("KEEL_KERNEL_THREADS", raising=False)
    assert parallel.threads() == 1 and parallel.parts(np, 64, 1e12) == 1
    monkeypatch.setenv("KEEL_KERNEL_THREADS", "auto")
    assert parallel.threads() >= 1
    monkeypatch.setenv("KEEL_KERNEL_THREADS", "2")
    assert parallel.parts(np, 64, 1e12) == 2 and parallel.parts(np, 64, 1000) == 1


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_case_takes_its_path(case, monkeypatch):
    _, path, _, _, strides, pads, dilations, g = case
    taken = []
    for module, name in [(conv, "_pointwise"), (conv, "_shifted_gemms"), (conv, "general_nchw"),
                         (conv, "folded_im2col"), (conv, "folded_channels_last"), (conv_depthwise, "_banded"),
                         (conv_depthwise, "_flat_im2col"),
                         (conv_depthwise, "_im2col_blocks")]:
        real = getattr(module, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            taken.append(_name)
            return _real(*args, **kwargs)
        monkeypatch.setattr(module, name, spy)
    x, w = _data(case)
    out_hw = _out_size(x.shape, w.shape, strides, pads, dilations)
    conv.conv2d_nchw(np, x, w, strides, dilations, list(pads), g, *out_hw)
    want = {"pointwise": "_pointwise", "shifted": "_shifted_gemms", "banded": "_banded", "flat_im2col": "_flat_im2col",
            "im2col_blocks": "_im2col_blocks", "general": "general_nchw", "folded": "folded_im2col",
            "folded_cl": "folded_channels_last"}[path]
    assert taken and taken[0] == want, f"{case[0]} took {taken}"


FOLDED = [c for c in CASES if c[1] in ("folded", "folded_cl", "shifted")]


BLOCKED = [pytest.param(case, blocks, taps, id=f"{case[0]}, {blocks}, {taps} tap(s) a GEMM")
           for case in FOLDED for blocks in ("one sample or row", "two samples or rows")
           for taps in (("all", "one") if case[1] == "shifted" else ("all",))]


@pytest.mark.parametrize("case, blocks, taps_per_gemm", BLOCKED)
def test_folded_paths_in_blocks(case, blocks, taps_per_gemm, monkeypatch):
    """The folded GEMMs computed a block of samples (or, for one sample's stacked taps, of
    output rows) at a time, uneven blocks included, give the one-piece result; the
    shifted path with all taps stacked in one GEMM and with a GEMM per tap alike."""
    _, path, xs, ws, strides, pads, dilations, g = case
    x, w = _data(case, seed=4)
    stacked = taps_per_gemm == "all"
    monkeypatch.setattr(conv_fold, "STACKED_MIN_WORK", 0 if stacked else float("inf"))
    whole = _run("conv2d", x, w, strides, pads, dilations, g)
    units = 1 if blocks.startswith("one") else 2
    oh, ow = _out_size(xs, ws, strides, pads, dilations)
    if path in ("folded", "folded_cl"):
        monkeypatch.setattr(conv_fold, "FOLD_BLOCK_BYTES", units * xs[1] * ws[2] * ws[3] * oh * ow * x.itemsize)
    else:
        wp = xs[3] + pads[2] + pads[3]
        group = ws[2] * ws[3] if stacked else 1
        per = ws[0] * group * x.itemsize * (wp if xs[0] == 1 else wp * (xs[2] + pads[0] + pads[1]))
        monkeypatch.setattr(conv_fold, "STACKED_BLOCK_BYTES", units * per)
    got = _run("conv2d", x, w, strides, pads, dilations, g)
    np.testing.assert_allclose(got, whole, rtol=1e-6, atol=1e-5)
    _check(case, x, w, got)


@pytest.mark.parametrize("stacked", [True, False])
@pytest.mark.parametrize("case", FOLDED, ids=[c[0] for c in FOLDED])
def test_folded_paths_float64(case, stacked, monkeypatch):
    monkeypatch.setattr(conv_fold, "STACKED_MIN_WORK", 0 if stacked else float("inf"))
    _, _, _, _, strides, pads, dilations, g = case
    x, w = _data(case, dtype=np.float64, seed=5)
    got = _run("conv2d", x, w, strides, pads, dilations, g)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, reference(x, w, strides, pads, dilations, g), rtol=1e-12, atol=1e-12)


def test_float64_and_float16_keep_their_dtype():
    case = CASES[4]
    _, _, _, _, strides, pads, dilations, g = case
    x, w = _data(case, dtype=np.float64)
    got = _run("conv2d", x, w, strides, pads, dilations, g)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, reference(x, w, strides, pads, dilations, g), rtol=1e-12, atol=1e-12)
    got16 = _run("conv2d", x.astype(np.float16), w.astype(np.float16), strides, pads, dilations, g)
    assert got16.dtype == np.float16


def test_epilogue_sees_each_channel_once(monkeypatch):
    """The epilogue is applied exactly once to every output channel, with its channel range,
    whichever path and split (here: add 1000 * channel index, then check)."""
    monkeypatch.setattr(parallel, "MIN_WORK_PER_PART", 1)
    monkeypatch.setenv("KEEL_KERNEL_THREADS", "2")
    for case in CASES:
        _, _, _, _, strides, pads, dilations, g = case
        x, w = _data(case, seed=3)
        out_hw = _out_size(x.shape, w.shape, strides, pads, dilations)
        plain = conv.conv2d_nchw(np, x, w, strides, dilations, list(pads), g, *out_hw)

        def mark(part, lo, hi):
            part += 1000 * np.arange(lo, hi, dtype=part.dtype)[:, None, None]
        marked = conv.conv2d_nchw(np, x, w, strides, dilations, list(pads), g, *out_hw, epilogue=mark)
        offset = 1000 * np.arange(w.shape[0], dtype=np.float32)[:, None, None]
        np.testing.assert_allclose(marked - offset, plain, atol=1e-3, err_msg=case[0])
