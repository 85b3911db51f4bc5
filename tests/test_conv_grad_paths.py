"""conv2d_grad's one-group NCHW paths computed a chunk of samples at a time
(kernels/conv_grad.py) against a float64 reference (one einsum per window offset over
strided slices of the padded input) and against the same kernel in one chunk (the whole
column matrix at once, the previous formulation), with chunks forced small enough that
the batch splits unevenly. The gradient checks of conv2d (tests/test_grad_nn.py) cover
them by finite differences. Also pooling's paths: global and adaptive-avg-to-1x1 pooling (one reduction) against
the explicit full-plane window, separable 3x3-and-up windows against loops; and
conv2d_transpose with stride == kernel (kernels/conv.py transpose_tiles_nchw) against a
float64 scatter and the general col2im. This module
reruns on the cupy stand-in (tests/test_standin_kernels.py)."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import conv_grad
from keel.kernels.nn import conv2d_grad

# (name, x shape [N, C, H, W], filter [O, C, kh, kw], strides, paddings [t, b, l, r], dilations)
CASES = [
    ("3x3 stride 1 (the CNN benchmark's second layer, small)", (7, 4, 9, 8), (5, 4, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("one input channel", (5, 1, 10, 9), (3, 1, 3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),
    ("5x3 asymmetric pads, dilation 2", (3, 2, 11, 10), (4, 2, 5, 3), (1, 1), (2, 0, 1, 3), (2, 2)),
    ("unpadded", (4, 3, 7, 6), (2, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1)),
    ("stride 2 (dInput by the general path)", (5, 3, 9, 10), (4, 3, 3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),
    ("stride (2, 1), dilation (1, 2)", (3, 2, 9, 11), (3, 2, 3, 3), (2, 1), (1, 0, 2, 2), (1, 2)),
    ("more filters than columns (dFilter's GEMM the other way round)", (4, 1, 8, 7), (12, 1, 2, 2), (1, 1),
     (0, 1, 1, 0), (1, 1)),
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


# SHIFTED_COLUMNS_MIN_RATIO forcing each stride-1 dInput formulation (C * ratio >= O)
DINPUT_PATHS = {"shifted columns": 1 << 30, "col2im": 0}
# the settings forcing each dFilter formulation (kernels/conv_grad.py filter_grad_chunked)
DFILTER_PATHS = {"GEMM per sample": {"PER_SAMPLE_MAX_SIDE": 1 << 30, "CHANNELS_LAST_MIN_C": 0},
                 "GEMM per chunk": {"PER_SAMPLE_MAX_SIDE": 0, "CHANNELS_LAST_MIN_C": 1 << 30},
                 "GEMM per chunk, channels last": {"PER_SAMPLE_MAX_SIDE": 0, "CHANNELS_LAST_MIN_C": 0}}


def _force(monkeypatch, settings):
    for name, value in settings.items():
        monkeypatch.setattr(conv_grad, name, value)


@pytest.mark.parametrize("case", CASES, ids=IDS)
@pytest.mark.parametrize("chunk_bytes", [1, 700, 1 << 30], ids=["one sample", "uneven chunks", "one chunk"])
@pytest.mark.parametrize("dinput", DINPUT_PATHS)
@pytest.mark.parametrize("dfilter", DFILTER_PATHS)
def test_chunked_grads_match_reference(case, chunk_bytes, dinput, dfilter, monkeypatch):
    monkeypatch.setattr(conv_grad, "CHUNK_BYTES", chunk_bytes)
    monkeypatch.setattr(conv_grad, "SHIFTED_COLUMNS_MIN_RATIO", DINPUT_PATHS[dinput])
    _force(monkeypatch, DFILTER_PATHS[dfilter])
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


def _random_case(r):
    """A random one-group conv: batch, channels either side, kernel 1-5 by 1-5, stride 1-2,
    dilation 1-2, uneven paddings; the input at least as large as the dilated kernel."""
    kh, kw = (int(v) for v in r.integers(1, 6, 2))
    dil = tuple(int(v) for v in r.integers(1, 3, 2))
    strides = tuple(int(v) for v in r.integers(1, 3, 2))
    pads = tuple(int(v) for v in r.integers(0, 3, 4))
    h = int(r.integers(max(1, dil[0] * (kh - 1) + 1 - pads[0] - pads[1]), 12))
    wd = int(r.integers(max(1, dil[1] * (kw - 1) + 1 - pads[2] - pads[3]), 12))
    xs = (int(r.integers(1, 6)), int(r.integers(1, 20)), h, wd)
    return ("random", xs, (int(r.integers(1, 20)), xs[1], kh, kw), strides, pads, dil)


@pytest.mark.parametrize("seed", range(16))
def test_random_convolutions_every_formulation(seed, monkeypatch):
    """Random geometries (tests/test_conv_grad_paths.py `_random_case`) through each dInput
    and dFilter formulation and a small chunk, against the float64 reference."""
    case = _random_case(np.random.default_rng(seed))
    _, _, ws, strides, pads, dil = case
    x, w, dy = _data(case, seed)
    want_dx, want_dw = reference(x, w, dy, strides, pads, dil)
    monkeypatch.setattr(conv_grad, "CHUNK_BYTES", 2000)
    for dinput, dfilter in [("shifted columns", "GEMM per sample"), ("col2im", "GEMM per chunk"),
                            ("shifted columns", "GEMM per chunk, channels last")]:
        monkeypatch.setattr(conv_grad, "SHIFTED_COLUMNS_MIN_RATIO", DINPUT_PATHS[dinput])
        _force(monkeypatch, DFILTER_PATHS[dfilter])
        dx, dw = _grads(x, w, dy, strides, pads, dil)
        _assert_close(dx, want_dx, ws[0] * ws[2] * ws[3])
        _assert_close(dw, want_dw, dy.shape[0] * dy.shape[2] * dy.shape[3])


def test_stride1_dinput_formulation_by_channel_ratio(monkeypatch):
    """Shifted columns where C * SHIFTED_COLUMNS_MIN_RATIO >= O and the filter is wider
    than one column, col2im otherwise: recorded by wrapping both."""
    taken = []
    for name in ("_input_grad_shifted_columns", "_input_grad_col2im"):
        original = getattr(conv_grad, name)
        monkeypatch.setattr(conv_grad, name, lambda *a, _f=original, _n=name: taken.append(_n) or _f(*a))
    r = np.random.default_rng(0)
    for (c, o, kw), want in [((16, 32, 3), "_input_grad_shifted_columns"), ((3, 9, 3), "_input_grad_shifted_columns"),
                             ((2, 16, 3), "_input_grad_col2im"), ((1, 16, 3), "_input_grad_col2im"),
                             ((16, 8, 1), "_input_grad_col2im")]:
        w = r.standard_normal((o, c, 3, kw)).astype(np.float32)
        dy = r.standard_normal((2, o, 5, 6)).astype(np.float32)
        taken.clear()
        conv_grad.input_grad_chunked_s1(np, dy, w, (2, c, 7, 6 + kw - 1), 1, 1)
        assert taken == [want], (c, o, kw)


def test_dfilter_formulation_by_shape(monkeypatch):
    """One GEMM per sample where C*kh*kw or O is at most PER_SAMPLE_MAX_SIDE (the CNN
    benchmark's first layer, K 9), one per chunk otherwise, its columns channels last from
    CHANNELS_LAST_MIN_C channels (the second layer, 16 -> 32)."""
    taken = []
    for name in ("_per_sample_products", "_chunk_product", "_chunk_product_channels_last"):
        original = getattr(conv_grad, name)
        monkeypatch.setattr(conv_grad, name, lambda *a, _f=original, _n=name: taken.append(_n) or _f(*a))
    r = np.random.default_rng(0)
    for (c, o), want in [((1, 16), "_per_sample_products"), ((16, 8), "_per_sample_products"),
                         ((16, 32), "_chunk_product_channels_last"), ((4, 64), "_chunk_product")]:
        xpad = r.standard_normal((2, c, 6, 6)).astype(np.float32)
        dy = r.standard_normal((2, o, 4, 4)).astype(np.float32)
        taken.clear()
        conv_grad.filter_grad_chunked(np, xpad, dy, 3, 3, 1, 1, 1, 1)
        assert set(taken) == {want}, (c, o)


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


# -- pooling: global pooling's one reduction against the per-cell window passes ------------------

def _pool_attrs(pooling_type, layout, global_pooling, ksize=(1, 1)):
    return {"ksize": list(ksize), "strides": [1, 1], "paddings": [0, 0], "ceil_mode": False, "exclusive": True,
            "data_format": layout, "pooling_type": pooling_type, "global_pooling": global_pooling,
            "adaptive": False, "padding_algorithm": "EXPLICIT"}


def _pool_and_grad(x, dout, attrs):
    out = call_kernel("pool2d", {"X": x}, attrs)["Out"]
    if dout is None:
        return out, None
    return out, call_kernel("pool2d_grad", {"X": x, "Out": out, "Out@GRAD": dout}, attrs)["X@GRAD"]


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
@pytest.mark.parametrize("pooling_type", ["max", "avg"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_global_pool_matches_full_window(pooling_type, layout, dtype):
    """Global pooling and adaptive avg pooling to 1x1 (one reduction over the plane) equal an
    explicit H x W window (one pass per cell) forward and back, max with ties (a plane of zeros after relu, repeated maxima) routed to the first cell."""
    r = np.random.default_rng(3)
    x = np.maximum(r.standard_normal((2, 5, 4, 6)), 0).round(1)
    x[0, 1] = 0.0
    x[1, 2, 1, 3] = x[1, 2, 2, 0] = x[1, 2].max() + 1
    x = x.astype(dtype)
    if layout == "NHWC":
        x = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    dshape = (2, 1, 1, 5) if layout == "NHWC" else (2, 5, 1, 1)
    dout = r.standard_normal(dshape).astype(dtype)
    got = _pool_and_grad(x, dout, _pool_attrs(pooling_type, layout, True))
    want = _pool_and_grad(x, dout, _pool_attrs(pooling_type, layout, False, ksize=(4, 6)))
    pairs = list(zip(got, want))
    if pooling_type == "avg":  # adaptive max runs PaddlePaddle's windows of ksize, not bins (pool2d)
        pairs += zip(_pool_and_grad(x, dout, dict(_pool_attrs(pooling_type, layout, False), adaptive=True)), want)
    for g, w in pairs:
        assert g.shape == w.shape and g.dtype == w.dtype and g.flags.c_contiguous
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=2e-3 if dtype == np.float16 else 1e-6)
    if pooling_type == "max":  # the gradient of a tied plane lands on its first cell only
        dx = got[1] if layout == "NCHW" else got[1].transpose(0, 3, 1, 2)
        d = dout.reshape(2, 5)
        assert dx[0, 1, 0, 0] == d[0, 1] and np.count_nonzero(dx[0, 1]) == (d[0, 1] != 0)
        assert dx[1, 2, 1, 3] == d[1, 2] and dx[1, 2, 2, 0] == 0


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
@pytest.mark.parametrize("shape,k,s,p", [((2, 3, 11, 13), 3, 2, 1), ((1, 4, 9, 10), 3, 1, 1), ((1, 2, 12, 9), 5, 3, 2)],
                         ids=["3x3 s2", "3x3 s1", "5x5 s3"])
def test_separable_windows_match_loops(pooling_type, shape, k, s, p):
    """Windows of 3x3 and up reduce along the width, then the height: the loop reference."""
    x = np.random.default_rng(4).standard_normal(shape)
    attrs = _pool_attrs(pooling_type, "NCHW", False, (k, k))
    attrs.update(strides=[s, s], paddings=[p, p])
    got = _pool_and_grad(x, None, attrs)[0]
    n, c, h, w = shape
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    want = np.empty((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            r0, c0 = max(i * s - p, 0), max(j * s - p, 0)
            win = x[:, :, r0:min(i * s - p + k, h), c0:min(j * s - p + k, w)]
            want[:, :, i, j] = win.max(axis=(2, 3)) if pooling_type == "max" else win.mean(axis=(2, 3))
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


# -- conv2d_transpose whose stride equals its kernel: each tap assigned to its cells ---------------

def _transpose_reference(x, w, g, bias):
    """float64 scatter: input cell (i, j) adds x * W[c, :, a, b] to output cell (i*kh + a, j*kw + b)."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // g
    out = np.zeros((n, g * og, h * kh, wd * kw))
    for grp in range(g):
        xs = x[:, grp * cg:(grp + 1) * cg].astype(np.float64)
        ws = w[grp * cg:(grp + 1) * cg].astype(np.float64)
        for a in range(kh):
            for b in range(kw):
                out[:, grp * og:(grp + 1) * og, a::kh, b::kw] += np.einsum("ncij,co->noij", xs, ws[:, :, a, b])
    return out if bias is None else out + bias.reshape(1, -1, 1, 1)


@pytest.mark.parametrize("xs,ws,g,with_bias", [
    ((1, 6, 5, 7), (6, 4, 2, 2), 1, False),     # the detector's 2x upsampling
    ((2, 4, 3, 5), (4, 1, 2, 2), 1, True),      # to one channel, with Bias
    ((2, 6, 4, 3), (6, 2, 3, 2), 3, False),     # grouped, 3x2 tiles
], ids=["2x2 s2", "to one channel, bias", "grouped 3x2"])
def test_transpose_tiles_match_reference_and_general(xs, ws, g, with_bias):
    r = np.random.default_rng(5)
    x, w = r.standard_normal(xs).astype(np.float32), r.standard_normal(ws).astype(np.float32)
    bias = r.standard_normal(ws[1] * g).astype(np.float32) if with_bias else None
    attrs = {"strides": list(ws[2:]), "paddings": [0, 0], "output_padding": [], "output_size": [],
             "padding_algorithm": "EXPLICIT", "groups": g, "dilations": [1, 1], "data_format": "NCHW"}
    inputs = {"Input": x, "Filter": w, **({"Bias": bias} if with_bias else {})}
    got = call_kernel("conv2d_transpose", inputs, attrs)["Output"]
    want = _transpose_reference(x, w, g, bias)
    assert got.shape == want.shape and got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-5 * max(1.0, np.abs(want).max()))
    # the general col2im, which NHWC takes
    nhwc = dict(inputs, Input=np.ascontiguousarray(x.transpose(0, 2, 3, 1)))
    general = call_kernel("conv2d_transpose", nhwc, dict(attrs, data_format="NHWC"))["Output"]
    np.testing.assert_allclose(got, general.transpose(0, 3, 1, 2), rtol=0, atol=1e-5 * max(1.0, np.abs(want).max()))
