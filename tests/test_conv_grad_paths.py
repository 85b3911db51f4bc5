"""conv2d_grad's one-group NCHW paths computed a chunk of samples at a time
(kernels/conv_grad.py) against a float64 reference (one einsum per window offset over
strided slices of the padded input) and against the same kernel in one chunk (the whole
column matrix at once, the previous formulation), with chunks forced small enough that
the batch splits unevenly. The gradient checks of conv2d (tests/test_grad_nn.py) cover
them by finite differences; this module reruns on the cupy stand-in
(tests/test_standin_kernels.py)."""
import numpy as np
import pytest

from executor.kernel_call import call_kernel
from kernels import conv_grad
from kernels.nn import conv2d_grad

# (name, x shape [N, C, H, W], filter [O, C, kh, kw], strides, paddings [t, b, l, r], dilations)
CASES = [
    ("3x3 stride 1 (the CNN benchmark's second layer, small)", (7, 4, 9, 8), (5, 4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("one input channel", (5, 1, 10, 9), (3, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("5x3 asymmetric pads, dilation 2", (3, 2, 11, 10), (4, 2, 5, 3), (1, 1), (2, 0, 1, 3), (2, 2)),
    ("unpadded", (4, 3, 7, 6), (2, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
    ("stride 2 (dInput by the general path)", (5, 3, 9, 10), (4, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ("stride (2, 1), dilation (1, 2)", (3, 2, 9, 11), (3, 2, 3, 3), (2, 1), (1, 0, 2, 2), (1, 2)),
]
IDS = [c[0] for c in CASES]


def _out_size(case):
    _, xs, ws, strides, pads, dil = case
    return tuple((xs[2 + i] + pads[2 * i] + pads[2 * i + 1] - dil[i] * (ws[2 + i] - 1) - 1) // strides[i] + 1
                 for i in range(2))


def reference(x, w, dy, strides, pads, dil):
    """float64 (dInput, dFilter): window offset (a, b) reads the strided slice `tap` of the
    padded input, so dFilter[:, :, a, b] = sum dy * tap and tap's gradient is W^T dy."""
    kh, kw = w.shape[2:]
    oh, ow = dy.shape[2:]
    xpad = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pads[0], pads[1]), (pads[2], pads[3])])
    dxpad = np.zeros_like(xpad)
    dw = np.zeros(w.shape)
    w64, dy64 = w.astype(np.float64), dy.astype(np.float64)
    for a in range(kh):
        for b in range(kw):
            r0, c0 = a * dil[0], b * dil[1]
            index = (slice(None), slice(None), slice(r0, r0 + (oh - 1) * strides[0] + 1, strides[0]),
                     slice(c0, c0 + (ow - 1) * strides[1] + 1, strides[1]))
            dw[:, :, a, b] = np.einsum("noij,ncij->oc", dy64, xpad[index])
            dxpad[index] += np.einsum("noij,oc->ncij", dy64, w64[:, :, a, b])
    h, wd = x.shape[2:]
    return dxpad[:, :, pads[0]:pads[0] + h, pads[2]:pads[2] + wd], dw


def _data(case, seed=0):
    _, xs, ws, *_ = case
    r = np.random.default_rng(seed)
    x, w = r.standard_normal(xs).astype(np.float32), r.standard_normal(ws).astype(np.float32)
    dy = r.standard_normal((xs[0], ws[0], *_out_size(case))).astype(np.float32)
    return x, w, dy


def _grads(x, w, dy, strides, pads, dil):
    got = call_kernel("conv2d_grad", {"Input": x, "Filter": w, "Output@GRAD": dy},
                      {"strides": list(strides), "paddings": list(pads), "padding_algorithm": "EXPLICIT",
                       "dilations": list(dil), "groups": 1, "data_format": "NCHW"})
    return got["Input@GRAD"], got["Filter@GRAD"]


def _assert_close(got, want, terms):
    # float32 sums of `terms` products of N(0, 1) values: error ~ eps * sqrt(terms) * |terms|
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=0, atol=4e-7 * terms)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("chunk_bytes", [1, 700, 1 << 30], ids=["one sample", "uneven chunks", "one chunk"])
def test_chunked_grads_match_reference(case, chunk_bytes, monkeypatch):
    monkeypatch.setattr(conv_grad, "CHUNK_BYTES", chunk_bytes)
    _, _, _, strides, pads, dil = case
    x, w, dy = _data(case)
    dx, dw = _grads(x, w, dy, strides, pads, dil)
    want_dx, want_dw = reference(x, w, dy, strides, pads, dil)
    kh, kw = w.shape[2:]
    _assert_close(dx, want_dx, w.shape[0] * kh * kw)
    _assert_close(dw, want_dw, dy.shape[0] * dy.shape[2] * dy.shape[3])


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_chunks_match_one_chunk(case, monkeypatch):
    """Chunks of 2-3 samples (a partial last chunk) give what the whole batch at once does:
    the previous formulation, the column matrix built in one piece."""
    _, _, _, strides, pads, dil = case
    x, w, dy = _data(case, seed=1)
    monkeypatch.setattr(conv_grad, "CHUNK_BYTES", 1 << 30)
    whole = _grads(x, w, dy, strides, pads, dil)
    c, (kh, kw), (oh, ow) = x.shape[1], w.shape[2:], dy.shape[2:]
    monkeypatch.setattr(conv_grad, "CHUNK_BYTES", 2 * c * kh * kw * oh * (ow + kw) * 4)
    assert 1 < conv_grad.samples_per_chunk(x.shape[0], c * kh * kw * oh * ow * 4) < x.shape[0]
    chunked = _grads(x, w, dy, strides, pads, dil)
    for got, want in zip(chunked, whole):
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * max(1.0, np.abs(want).max()))


def test_only_the_requested_gradient():
    case = CASES[0]
    _, _, _, strides, pads, dil = case
    x, w, dy = _data(case)
    attrs = {"strides": list(strides), "paddings": list(pads), "padding_algorithm": "EXPLICIT",
             "dilations": list(dil), "groups": 1, "data_format": "NCHW"}
    want_dx, want_dw = reference(x, w, dy, strides, pads, dil)
    dx, dw = conv2d_grad(np, x, w, dy, **attrs, need=frozenset({"Input@GRAD"}))
    assert dw is None
    _assert_close(dx, want_dx, 5 * 9)
    dx, dw = conv2d_grad(np, x, w, dy, **attrs, need=frozenset({"Filter@GRAD"}))
    assert dx is None
    _assert_close(dw, want_dw, 7 * 81)
