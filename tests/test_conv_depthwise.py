"""Depthwise convolution (kernels/conv_depthwise.py: banded GEMMs for planes no taller than
the kernel, im2col on the flattened padded planes at stride 1, im2col in blocks otherwise)
against a direct float64 reference: a plain loop over window offsets reading the UNPADDED
input with explicit bounds, so it shares no padding or window code with the kernel. Odd shapes, strides 1, 2 and (2, 1),
dilations, symmetric and asymmetric paddings, padding that whole kernel rows and columns
read, SAME/VALID, channel multipliers, batches of 1 and 3, float32 and float64; each case
names the path it takes and a test checks that it does."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import conv_depthwise

# (name, path, x [N, C, H, W], kernel (kh, kw), multiplier, strides, paddings [t, b, l, r], dilations)
CASES = [
    ("2 rows 5x5 pad 2 (recognizer)", "banded", (1, 6, 2, 33), (5, 5), 1, (1, 1), (2, 2, 2, 2), (1, 1)),
    ("3 rows 5x5 pad 2 batch 3", "banded", (3, 5, 3, 17), (5, 5), 1, (1, 1), (2, 2, 2, 2), (1, 1)),
    ("3 rows 5x5 stride (2, 1)", "banded", (1, 4, 3, 21), (5, 5), 1, (2, 1), (2, 2, 2, 2), (1, 1)),
    ("1 row 3x3 stride 2 x2 multiplier", "banded", (2, 3, 1, 19), (3, 3), 2, (2, 2), (1, 1, 1, 1), (1, 1)),
    ("2 rows 3x5 asymmetric pads", "banded", (1, 3, 2, 15), (3, 5), 1, (1, 1), (2, 0, 0, 3), (1, 1)),
    ("3 rows 3x3 dilation 2 x3 multiplier", "banded", (1, 2, 3, 16), (3, 3), 3, (1, 1), (2, 2, 2, 2), (2, 2)),
    ("4 rows 5x3 unpadded", "banded", (2, 3, 4, 9), (5, 3), 1, (1, 1), (1, 0, 0, 0), (1, 1)),
    ("width all padding on the left", "banded", (1, 2, 2, 3), (3, 3), 1, (1, 1), (1, 1, 6, 0), (1, 1)),
    ("3 rows, input wider than the windows", "banded", (1, 2, 3, 12), (3, 3), 1, (1, 2), (1, 1, 0, 0), (1, 1)),
    ("6 rows 5x5 stride (2, 1), taller than the kernel", "banded", (1, 5, 6, 23), (5, 5), 1, (2, 1), (2, 2, 2, 2),
     (1, 1)),
    ("12 rows 5x5 pad 2 batch 2", "banded", (2, 3, 12, 19), (5, 5), 1, (1, 1), (2, 2, 2, 2), (1, 1)),
    ("12 rows 5x3 dilation 2 x2 multiplier, asymmetric pads", "banded", (1, 3, 12, 14), (5, 3), 2, (1, 1),
     (3, 1, 2, 0), (2, 1)),
    ("13 rows 5x5 stride (2, 1)", "im2col_blocks", (1, 5, 13, 23), (5, 5), 1, (2, 1), (2, 2, 2, 2), (1, 1)),
    ("6 rows 3x3", "flat_im2col", (1, 4, 6, 20), (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1)),
    ("odd plane 3x3 batch 3", "flat_im2col", (3, 7, 11, 13), (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1)),
    ("strided 5x5 x2 multiplier", "im2col_blocks", (2, 3, 15, 14), (5, 5), 2, (2, 2), (2, 2, 2, 2), (1, 1)),
    ("asymmetric pads dilation (2, 3)", "im2col_blocks", (1, 4, 12, 17), (3, 3), 1, (1, 2), (3, 0, 1, 4), (2, 3)),
    ("unpadded stride (1, 2)", "im2col_blocks", (1, 3, 9, 10), (3, 2), 1, (1, 2), (0, 0, 0, 0), (1, 1)),
    ("many channels, several blocks", "flat_im2col", (1, 40, 40, 60), (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1)),
    ("large plane 3x3", "flat_im2col", (1, 3, 91, 101), (3, 3), 1, (1, 1), (1, 1, 1, 1), (1, 1)),
    ("large plane 5x3 x2 multiplier, asymmetric pads, dilation (2, 1), batch 2", "flat_im2col", (2, 2, 95, 97),
     (5, 3), 2, (1, 1), (3, 1, 0, 2), (2, 1)),
    ("large plane unpadded, several blocks", "flat_im2col", (1, 12, 100, 120), (3, 3), 1, (1, 1), (0, 0, 0, 0),
     (1, 1)),
]
IDS = [c[0] for c in CASES]


def reference(x, w, strides, pads, dilations):
    """out[n, o, i, j] = sum over (a, b) of W[o, 0, a, b] * x[n, o // m, r, s] for the
    in-bounds r = i*sh + a*dh - top, s = j*sw + b*dw - left; float64."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    m = o // c
    (sh, sw), (top, bottom, left, right), (dh, dw) = strides, pads, dilations
    oh = (h + top + bottom - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + left + right - dw * (kw - 1) - 1) // sw + 1
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    src = x64[:, np.arange(o) // m]                     # [N, O, H, W]: each output's input channel
    out = np.zeros((n, o, oh, ow))
    for a in range(kh):
        for b in range(kw):
            for i in range(oh):
                r = i * sh + a * dh - top
                if not 0 <= r < h:
                    continue
                for j in range(ow):
                    s = j * sw + b * dw - left
                    if 0 <= s < wd:
                        out[:, :, i, j] += w64[:, 0, a, b] * src[:, :, r, s]
    return out


def _data(case, dtype, seed=0):
    _, _, xs, (kh, kw), m, *_ = case
    rng = np.random.default_rng(seed)
    return rng.standard_normal(xs).astype(dtype), rng.standard_normal((xs[1] * m, 1, kh, kw)).astype(dtype)


def _run(x, w, strides, pads, dilations, algorithm="EXPLICIT"):
    return call_kernel("depthwise_conv2d", {"Input": x, "Filter": w},
                       {"strides": list(strides), "paddings": list(pads), "padding_algorithm": algorithm,
                        "dilations": list(dilations), "groups": x.shape[1], "data_format": "NCHW"})["Output"]


def _assert_close(got, want, dtype, taps):
    assert got.dtype == dtype and got.shape == want.shape
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(got, want, rtol=0, atol=8 * eps * taps * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_matches_direct_reference(case, dtype):
    _, _, _, (kh, kw), _, strides, pads, dilations = case
    x, w = _data(case, dtype)
    _assert_close(_run(x, w, strides, pads, dilations), reference(x, w, strides, pads, dilations), dtype, kh * kw)


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_case_takes_its_path(case, monkeypatch):
    _, path, _, _, _, strides, pads, dilations = case
    taken = []
    for name in ("_banded", "_flat_im2col", "_im2col_blocks"):
        real = getattr(conv_depthwise, name)

        def spy(*args, _real=real, _name=name, **kwargs):
            taken.append(_name)
            return _real(*args, **kwargs)
        monkeypatch.setattr(conv_depthwise, name, spy)
    x, w = _data(case, np.float32)
    _run(x, w, strides, pads, dilations)
    assert taken and set(taken) == {"_" + path}  # (the cupy stand-in runs it on numpy too)


SAME_VALID = [((1, 4, 2, 19), (5, 5), (1, 1), "SAME"), ((2, 3, 3, 20), (5, 5), (2, 1), "SAME"),
              ((1, 3, 13, 11), (3, 3), (2, 2), "SAME"), ((1, 2, 9, 8), (5, 3), (1, 2), "SAME"),
              ((1, 4, 2, 19), (2, 3), (1, 1), "VALID"), ((2, 3, 3, 20), (3, 5), (2, 1), "VALID"),
              ((1, 3, 13, 11), (3, 3), (2, 2), "VALID"), ((1, 2, 9, 8), (5, 3), (1, 2), "VALID")]


@pytest.mark.parametrize("shape, kernel, strides, algorithm", SAME_VALID)
def test_same_and_valid_padding(shape, kernel, strides, algorithm):
    """The stated paddings are ignored: SAME pads PaddlePaddle's way (total max((ceil(in/s)
    - 1) * s + k - in, 0), the odd cell at the bottom/right), VALID not at all."""
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[1], 1) + kernel).astype(np.float32)
    pads = [0, 0, 0, 0]
    for axis, (size, k, s) in enumerate(zip(shape[2:], kernel, strides)):
        total = max((-(-size // s) - 1) * s + k - size, 0) if algorithm == "SAME" else 0
        pads[2 * axis], pads[2 * axis + 1] = total // 2, total - total // 2
    got = _run(x, w, strides, [3, 1, 0, 2], (1, 1), algorithm)
    _assert_close(got, reference(x, w, strides, pads, (1, 1)), np.float32, kernel[0] * kernel[1])


@pytest.mark.parametrize("h, oh, sh, dh, top, kh", [(3, 2, 2, 1, 2, 5), (2, 2, 1, 1, 2, 5), (6, 6, 1, 1, 2, 5),
                                                   (7, 5, 2, 2, 3, 3), (9, 5, 2, 1, 2, 5), (4, 2, 1, 1, 1, 5),
                                                   (3, 3, 1, 2, 2, 3), (12, 8, 1, 2, 3, 5), (2, 4, 1, 1, 6, 3)])
def test_band_filter_places_each_weight_at_its_input_row(h, oh, sh, dh, top, kh):
    """Row i of the band holds W[a] at input row i*sh + a*dh - top, zeros elsewhere."""
    kw = 3
    w = np.arange(1, 1 + 2 * kh * kw, dtype=np.float64).reshape(2, 1, kh, kw)
    band = conv_depthwise.band_filter(np, w, h=h, oh=oh, sh=sh, dh=dh, top=top)   # [O, oh, h, kw]
    assert band.shape == (2, oh, h, kw)
    for i in range(oh):
        for r in range(h):
            a, rest = divmod(r - i * sh + top, dh)
            want = w[:, 0, a] if rest == 0 and 0 <= a < kh else np.zeros((2, kw))
            np.testing.assert_array_equal(band[:, i, r], want)


def test_epilogue_applied_once_per_channel(monkeypatch):
    """Blocks of channels (forced small) each get the epilogue with their channel range."""
    monkeypatch.setattr(conv_depthwise, "BLOCK_BYTES", 1)
    for case in CASES:
        _, _, _, _, _, strides, pads, dilations = case
        x, w = _data(case, np.float32, seed=5)
        want = reference(x, w, strides, pads, dilations)
        out = np.empty(want.shape, np.float32)

        def mark(part, lo, hi):
            part += 1000 * np.arange(lo, hi, dtype=part.dtype)[:, None, None]
        conv_depthwise.depthwise_nchw(np, x, w, *strides, *dilations, list(pads), out, epilogue=mark)
        out -= 1000 * np.arange(w.shape[0], dtype=np.float32)[:, None, None]
        np.testing.assert_allclose(out, want, atol=2e-3, err_msg=case[0])
