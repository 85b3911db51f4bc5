"""Vision kernels (kernels/vision.py) against independent references (direct loops over
PaddlePaddle's definitions, in float64) and against PaddlePaddle 3.3.1's own outputs and
gradients (tests/fixtures/vision_oracle.npz, made by tests/fixtures/vision_oracle.py), plus
slot/attribute names against the op registry and PaddlePaddle's snapshot.

Kernels run through `call_kernel` (tests/test_standin_kernels.py reruns this module with the
kernels on a cupy stand-in)."""
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import registry as kernel_registry
from keel.program.ops import registry as op_registry

FIXTURES = Path(__file__).parent / "fixtures"
PADDLE = json.loads((FIXTURES / "paddle_op_signatures.json").read_text())
FLT_MAX = float(np.finfo(np.float32).max)

VISION_OPS = ["conv3d", "conv3d_transpose", "pool3d", "max_pool2d_with_index", "max_pool3d_with_index",
              "unpool", "unpool3d", "affine_grid", "grid_sampler", "deformable_conv", "deformable_conv_v1"]
GRAD_OPS = [op + "_grad" for op in VISION_OPS]


def run(op_type, inputs, **attrs):
    """call_kernel with PaddlePaddle's default for every kernel attribute the test leaves out
    (gradient ops take their forward op's defaults)."""
    kdef = kernel_registry.get(op_type)
    defaults = PADDLE[op_type[:-5] if op_type.endswith("_grad") else op_type]["attrs"]
    full = {}
    for name in kdef.attrs:
        if name in attrs:
            full[name] = attrs[name]
        else:
            assert "default" in defaults.get(name, {}), f"{op_type}.{name} has no default; the test must set it"
            full[name] = defaults[name]["default"]
    return call_kernel(op_type, inputs, full)


def rng(seed=0):
    return np.random.default_rng(seed)


def close(got, want, rtol=1e-10, atol=1e-10):
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * max(1.0, float(np.abs(want).max(initial=0))))


# ============================================================================ registry

@pytest.mark.parametrize("op_type", VISION_OPS + GRAD_OPS)
def test_kernel_slots_match_op_registry(op_type):
    kdef = kernel_registry.get(op_type)
    assert kdef is not None, f"no kernel registered for {op_type}"
    opdef = op_registry.get(op_type)
    assert set(kdef.inputs) <= set(opdef.input_slots)
    assert set(kdef.outputs) <= set(opdef.output_slots)
    assert all(opdef.attr_spec(a) is not None for a in kdef.attrs)


@pytest.mark.parametrize("op_type", VISION_OPS)
def test_kernel_slots_match_paddle_snapshot(op_type):
    ref, kdef = PADDLE[op_type], kernel_registry.get(op_type)
    assert set(kdef.inputs) <= set(ref["inputs"])
    assert set(kdef.outputs) <= set(ref["outputs"])
    assert set(kdef.attrs) <= set(ref["attrs"])


# ============================================================================ references

def _pads(paddings, nd):
    p = list(paddings)
    return [v for v in p for _ in range(2)] if len(p) == nd else p


def ref_conv(x, w, strides, paddings, dilations, groups):
    """Direct N-d convolution, channel-first: out[n, o, *i] = sum over c in o's group and the
    kernel offsets of x_padded[n, c, i*s + a*d] * w[o, c - group start, a]."""
    nd = x.ndim - 2
    pads = _pads(paddings, nd)
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[2 * i], pads[2 * i + 1]) for i in range(nd)])
    o, cg = w.shape[:2]
    ks = w.shape[2:]
    outs = [(xp.shape[2 + i] - (dilations[i] * (ks[i] - 1) + 1)) // strides[i] + 1 for i in range(nd)]
    out = np.zeros((x.shape[0], o, *outs))
    og = o // groups
    for oc in range(o):
        c0 = (oc // og) * cg
        for pos in itertools.product(*(range(v) for v in outs)):
            acc = np.zeros(x.shape[0])
            for off in itertools.product(*(range(k) for k in ks)):
                idx = tuple(pos[i] * strides[i] + off[i] * dilations[i] for i in range(nd))
                acc += (xp[(slice(None), slice(c0, c0 + cg)) + idx] * w[(oc, slice(None)) + off]).sum(axis=1)
            out[(slice(None), oc) + pos] = acc
    return out


def ref_conv_transpose(x, w, strides, paddings, dilations, groups, out_sizes):
    """Scatter form: x[n, c, i] * w[c, oc, a] lands on canvas cell i*s + a*d of output channel
    (c's group) * out_c/groups + oc; the output is the canvas from the leading padding on."""
    nd = x.ndim - 2
    pads = _pads(paddings, nd)
    cin, og = w.shape[:2]
    ks = w.shape[2:]
    cg = cin // groups
    canvas = [max((x.shape[2 + i] - 1) * strides[i] + dilations[i] * (ks[i] - 1) + 1, pads[2 * i] + out_sizes[i])
              for i in range(nd)]
    full = np.zeros((x.shape[0], og * groups, *canvas))
    for c in range(cin):
        g = c // cg
        for pos in itertools.product(*(range(v) for v in x.shape[2:])):
            for off in itertools.product(*(range(k) for k in ks)):
                idx = tuple(pos[i] * strides[i] + off[i] * dilations[i] for i in range(nd))
                full[(slice(None), slice(g * og, (g + 1) * og)) + idx] += \
                    x[(slice(None), c) + pos][:, None] * w[(c, slice(None)) + off][None, :]
    crop = tuple(slice(pads[2 * i], pads[2 * i] + out_sizes[i]) for i in range(nd))
    return full[(slice(None), slice(None)) + crop]


def ref_pool(x, ksize, strides, paddings, pooling_type, exclusive=True, adaptive=False, ceil_mode=False):
    """PaddlePaddle's pooling loops (channel-first): window [i*s - pad, +k) clipped to the input
    (adaptive: [floor(i*in/out), ceil((i+1)*in/out))); max from -FLT_MAX; avg over the clipped
    window (exclusive/adaptive) or k^nd cells."""
    nd = x.ndim - 2
    pads = _pads(paddings, nd)
    sizes = x.shape[2:]
    if adaptive:
        outs = list(ksize)
    else:
        outs = [(sizes[i] - ksize[i] + pads[2 * i] + pads[2 * i + 1] + (strides[i] - 1 if ceil_mode else 0))
                // strides[i] + 1 for i in range(nd)]
    out = np.zeros(x.shape[:2] + tuple(outs))
    for pos in itertools.product(*(range(v) for v in outs)):
        sl = []
        for i, p in enumerate(pos):
            if adaptive:
                lo, hi = (p * sizes[i]) // outs[i], -(-((p + 1) * sizes[i]) // outs[i])
            else:
                lo = p * strides[i] - pads[2 * i]
                hi = min(lo + ksize[i], sizes[i])
                lo = max(lo, 0)
            sl.append(slice(lo, hi))
        win = x[(slice(None), slice(None)) + tuple(sl)].reshape(x.shape[0], x.shape[1], -1)
        if pooling_type == "max":
            out[(slice(None), slice(None)) + pos] = np.maximum(win.max(axis=2, initial=-FLT_MAX), -FLT_MAX)
        else:
            count = win.shape[2] if (exclusive or adaptive) else math.prod(ksize)
            out[(slice(None), slice(None)) + pos] = win.sum(axis=2) / count
    return out


def ref_max_pool_with_index(x, ksize, strides, paddings, adaptive=False, ceil_mode=False):
    """Out and Mask: the first cell (row-major) strictly greater than everything before it,
    starting from -FLT_MAX with index -1; Mask indexes the input plane."""
    nd = x.ndim - 2
    sizes = x.shape[2:]
    if adaptive:
        outs = list(ksize)
    else:
        outs = [(sizes[i] - ksize[i] + 2 * paddings[i] + (strides[i] - 1 if ceil_mode else 0)) // strides[i] + 1
                for i in range(nd)]
    out = np.zeros(x.shape[:2] + tuple(outs), x.dtype)
    mask = np.zeros(x.shape[:2] + tuple(outs), np.int32)
    for n, c in itertools.product(range(x.shape[0]), range(x.shape[1])):
        for pos in itertools.product(*(range(v) for v in outs)):
            ranges = []
            for i, p in enumerate(pos):
                if adaptive:
                    lo, hi = (p * sizes[i]) // outs[i], -(-((p + 1) * sizes[i]) // outs[i])
                else:
                    lo = p * strides[i] - paddings[i]
                    hi, lo = min(lo + ksize[i], sizes[i]), max(lo, 0)
                ranges.append(range(lo, hi))
            best, where = -FLT_MAX, -1
            for cell in itertools.product(*ranges):
                v = x[(n, c) + cell]
                if v > best:
                    best, where = v, int(np.ravel_multi_index(cell, sizes))
            out[(n, c) + pos], mask[(n, c) + pos] = best, where
    return out, mask


def ref_affine_grid(theta, sizes, align_corners):
    def lin(n):
        v = np.linspace(-1.0, 1.0, n)
        return v if align_corners else v * (n - 1) / n
    axes = [lin(s) for s in sizes]
    out = np.zeros((theta.shape[0], *sizes, len(sizes)))
    for cell in itertools.product(*(range(s) for s in sizes)):
        coord = [axes[i][cell[i]] for i in range(len(sizes))][::-1] + [1.0]   # (x, y[, z], 1)
        out[(slice(None),) + cell] = theta @ np.array(coord)
    return out


def _source(g, size, align_corners, padding_mode):
    """One grid component to an input coordinate, by PaddlePaddle's formulas: unnormalize,
    then clip (border) or reflect about the edges (reflection) by folding the coordinate."""
    c = (g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2
    if padding_mode == "border":
        return min(max(c, 0.0), size - 1)
    if padding_mode == "reflection":
        lo, hi = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
        span = hi - lo
        if span <= 0:
            return 0.0
        t = abs(c - lo) % (2 * span)
        c = lo + (t if t <= span else 2 * span - t)
        return min(max(c, 0.0), size - 1)
    return c


def ref_grid_sample(x, grid, mode, padding_mode, align_corners):
    """Per output point: the source coordinate per axis, then bilinear/trilinear weights over
    the 2^nd corners (a corner outside [0, size-1] contributes 0), or the nearest cell
    (C's round(), halves away from zero) when it lies inside."""
    nd = x.ndim - 2
    sizes = x.shape[2:]
    out = np.zeros(x.shape[:2] + grid.shape[1:-1])
    for n in range(x.shape[0]):
        for pos in itertools.product(*(range(v) for v in grid.shape[1:-1])):
            g = grid[(n,) + pos]
            src = [_source(g[nd - 1 - i], sizes[i], align_corners, padding_mode) for i in range(nd)]
            if mode == "nearest":
                cell = [int(math.floor(abs(s) + 0.5)) * (1 if s >= 0 else -1) for s in src]
                if all(0 <= cell[i] <= sizes[i] - 1 for i in range(nd)):
                    out[(n, slice(None)) + pos] = x[(n, slice(None)) + tuple(cell)]
                continue
            acc = np.zeros(x.shape[1])
            lows = [math.floor(s) for s in src]
            for bits in itertools.product((0, 1), repeat=nd):
                cell = [lows[i] + bits[i] for i in range(nd)]
                if not all(0 <= cell[i] <= sizes[i] - 1 for i in range(nd)):
                    continue
                wgt = math.prod((src[i] - lows[i]) if bits[i] else (lows[i] + 1 - src[i]) for i in range(nd))
                acc += wgt * x[(n, slice(None)) + tuple(cell)]
            out[(n, slice(None)) + pos] = acc
    return out


def _bilinear(plane, h, w):
    """DCN's bilinear sample: 0 unless -1 < h < H and -1 < w < W; corners outside give 0."""
    H, W = plane.shape
    if not (-1 < h < H and -1 < w < W):
        return 0.0
    h0, w0 = math.floor(h), math.floor(w)
    val = 0.0
    for dh, dw in ((0, 0), (0, 1), (1, 0), (1, 1)):
        r, c = h0 + dh, w0 + dw
        if 0 <= r < H and 0 <= c < W:
            val += (h - h0 if dh else h0 + 1 - h) * (w - w0 if dw else w0 + 1 - w) * plane[r, c]
    return val


def ref_deformable_conv(x, offset, mask, w, strides, paddings, dilations, groups, dg):
    n, c, _, _ = x.shape
    o, cg, kh, kw = w.shape
    oh, ow = offset.shape[2:]
    og, cd = o // groups, c // dg
    out = np.zeros((n, o, oh, ow))
    for b, i, j in itertools.product(range(n), range(oh), range(ow)):
        cols = np.zeros((c, kh, kw))
        for ch in range(c):
            d = ch // cd
            for a, e in itertools.product(range(kh), range(kw)):
                k = a * kw + e
                h = i * strides[0] - paddings[0] + a * dilations[0] + offset[b, d * 2 * kh * kw + 2 * k, i, j]
                ww = j * strides[1] - paddings[1] + e * dilations[1] + offset[b, d * 2 * kh * kw + 2 * k + 1, i, j]
                m = 1.0 if mask is None else mask[b, d * kh * kw + k, i, j]
                cols[ch, a, e] = _bilinear(x[b, ch], h, ww) * m
        for oc in range(o):
            g = oc // og
            out[b, oc, i, j] = (cols[g * cg:(g + 1) * cg] * w[oc]).sum()
    return out


# ============================================================================ conv3d / conv3d_transpose

CONV3D_CASES = [
    dict(x=(2, 3, 4, 5, 4), w=(4, 3, 2, 3, 2), strides=[1, 1, 1], paddings=[1, 0, 1], dilations=[1, 1, 1], groups=1),
    dict(x=(1, 4, 6, 5, 6), w=(6, 2, 2, 2, 3), strides=[2, 1, 2], paddings=[1, 0, 0, 1, 2, 1], dilations=[2, 1, 1],
         groups=2),
    dict(x=(2, 2, 5, 4, 3), w=(2, 1, 3, 1, 2), strides=[1, 2, 1], paddings=[0, 0, 0], dilations=[1, 1, 2],
         groups=2),
]


@pytest.mark.parametrize("case", CONV3D_CASES, ids=str)
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_conv3d_matches_direct_loops(case, layout):
    r = rng(1)
    x, w = r.standard_normal(case["x"]), r.standard_normal(case["w"])
    want = ref_conv(x, w, case["strides"], case["paddings"], case["dilations"], case["groups"])
    feed = x if layout == "NCDHW" else x.transpose(0, 2, 3, 4, 1)
    got = run("conv3d", {"Input": feed, "Filter": w}, strides=case["strides"], paddings=case["paddings"],
              dilations=case["dilations"], groups=case["groups"], data_format=layout)["Output"]
    close(got if layout == "NCDHW" else got.transpose(0, 4, 1, 2, 3), want)


def test_conv3d_same_and_valid_padding():
    r = rng(2)
    x, w = r.standard_normal((1, 2, 5, 6, 7)), r.standard_normal((3, 2, 3, 2, 3))
    got = run("conv3d", {"Input": x, "Filter": w}, strides=[2, 2, 3], padding_algorithm="SAME",
              dilations=[3, 3, 3])["Output"]
    # SAME: out = ceil(in / stride), dilations forced to 1, pads split with the extra one after
    pads = []
    for size, k, s in zip((5, 6, 7), (3, 2, 3), (2, 2, 3)):
        total = max((-(-size // s) - 1) * s + k - size, 0)
        pads += [total // 2, total - total // 2]
    close(got, ref_conv(x, w, [2, 2, 3], pads, [1, 1, 1], 1))
    assert got.shape == (1, 3, 3, 3, 3)
    got = run("conv3d", {"Input": x, "Filter": w}, paddings=[2, 2, 2], padding_algorithm="VALID")["Output"]
    close(got, ref_conv(x, w, [1, 1, 1], [0, 0, 0], [1, 1, 1], 1))


def test_conv3d_keeps_float16_and_float32():
    r = rng(3)
    x, w = r.standard_normal((1, 2, 3, 3, 3)), r.standard_normal((2, 2, 2, 2, 2))
    for dtype, tol in ((np.float32, 1e-5), (np.float16, 2e-2)):
        got = run("conv3d", {"Input": x.astype(dtype), "Filter": w.astype(dtype)})["Output"]
        assert got.dtype == dtype
        close(got.astype(np.float64), ref_conv(x.astype(dtype).astype(np.float64),
                                               w.astype(dtype).astype(np.float64), [1] * 3, [0] * 3, [1] * 3, 1),
              rtol=tol, atol=tol)


TCONV3D_CASES = [
    dict(x=(2, 3, 2, 3, 2), w=(3, 2, 3, 2, 2), strides=[2, 1, 2], paddings=[1, 0, 0], dilations=[1, 1, 1], groups=1,
         output_size=[], output_padding=[]),
    dict(x=(1, 4, 3, 2, 2), w=(4, 1, 2, 3, 2), strides=[2, 2, 3], paddings=[1, 0, 0, 1, 1, 0], dilations=[1, 2, 1],
         groups=2, output_size=[6, 7, 6], output_padding=[]),
    dict(x=(2, 2, 2, 2, 3), w=(2, 3, 2, 2, 1), strides=[3, 2, 2], paddings=[1, 1, 0], dilations=[1, 1, 1],
         groups=1, output_size=[], output_padding=[2, 1, 1]),
]


@pytest.mark.parametrize("case", TCONV3D_CASES, ids=str)
@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_conv3d_transpose_matches_scatter_loops(case, layout):
    r = rng(4)
    x, w = r.standard_normal(case["x"]), r.standard_normal(case["w"])
    pads = _pads(case["paddings"], 3)
    out_sizes = [(x.shape[2 + i] - 1) * case["strides"][i] - pads[2 * i] - pads[2 * i + 1]
                 + case["dilations"][i] * (w.shape[2 + i] - 1) + 1 for i in range(3)]
    if case["output_size"]:
        out_sizes = case["output_size"]
    elif case["output_padding"]:
        out_sizes = [a + b for a, b in zip(out_sizes, case["output_padding"])]
    want = ref_conv_transpose(x, w, case["strides"], case["paddings"], case["dilations"], case["groups"],
                              out_sizes)
    feed = x if layout == "NCHW" else x.transpose(0, 2, 3, 4, 1)
    got = run("conv3d_transpose", {"Input": feed, "Filter": w}, strides=case["strides"],
              paddings=case["paddings"], dilations=case["dilations"], groups=case["groups"],
              output_size=case["output_size"], output_padding=case["output_padding"],
              data_format=layout)["Output"]
    close(got if layout == "NCHW" else got.transpose(0, 4, 1, 2, 3), want)


def test_conv3d_transpose_reads_ndhwc_as_channel_first():
    """PaddlePaddle's layers write "NHWC" for a channel-last conv3d_transpose; its legacy op
    treats "NDHWC" as channel-first (recorded in the oracle fixture too)."""
    r = rng(5)
    x, w = r.standard_normal((1, 3, 2, 2, 2)), r.standard_normal((3, 2, 2, 2, 2))
    a = run("conv3d_transpose", {"Input": x, "Filter": w}, data_format="NDHWC")["Output"]
    b = run("conv3d_transpose", {"Input": x, "Filter": w}, data_format="NCDHW")["Output"]
    close(a, b, 0, 0)


def test_conv3d_transpose_rejects_output_size_out_of_range():
    r = rng(6)
    with pytest.raises(ValueError, match="output_size"):
        run("conv3d_transpose", {"Input": r.standard_normal((1, 1, 2, 2, 2)),
                                 "Filter": r.standard_normal((1, 1, 2, 2, 2))},
            strides=[2, 2, 2], output_size=[6, 4, 4])


# ============================================================================ pool3d

POOL3D_CASES = [
    dict(ksize=[2, 2, 2], strides=[2, 2, 2], paddings=[0, 0, 0]),
    dict(ksize=[3, 3, 2], strides=[2, 1, 2], paddings=[1, 1, 0]),
    dict(ksize=[2, 3, 3], strides=[2, 2, 2], paddings=[0, 1, 1, 0, 1, 1], ceil_mode=True),
    dict(ksize=[3, 3, 3], strides=[2, 2, 2], paddings=[1, 1, 1], exclusive=False),
]


@pytest.mark.parametrize("case", POOL3D_CASES, ids=str)
@pytest.mark.parametrize("pooling_type", ["max", "avg"])
@pytest.mark.parametrize("layout", ["NCDHW", "NDHWC"])
def test_pool3d_matches_loops(case, pooling_type, layout):
    x = rng(7).standard_normal((2, 3, 5, 6, 7))
    want = ref_pool(x, case["ksize"], case["strides"], case["paddings"], pooling_type,
                    case.get("exclusive", True), False, case.get("ceil_mode", False))
    feed = x if layout == "NCDHW" else x.transpose(0, 2, 3, 4, 1)
    got = run("pool3d", {"X": feed}, pooling_type=pooling_type, data_format=layout,
              **{k: v for k, v in case.items()})["Out"]
    close(got if layout == "NCDHW" else got.transpose(0, 4, 1, 2, 3), want)


def test_pool3d_adaptive_avg_bins_and_global():
    x = rng(8).standard_normal((2, 2, 5, 6, 7))
    got = run("pool3d", {"X": x}, pooling_type="avg", ksize=[2, 4, 3], adaptive=True)["Out"]
    close(got, ref_pool(x, [2, 4, 3], None, [0, 0, 0], "avg", adaptive=True))
    for ptype in ("max", "avg"):
        got = run("pool3d", {"X": x}, pooling_type=ptype, ksize=[1, 1, 1], global_pooling=True)["Out"]
        close(got, getattr(np, ptype if ptype == "max" else "mean")(x, axis=(2, 3, 4), keepdims=True))


def test_pool3d_adaptive_max_pools_as_paddles_kernel():
    """PaddlePaddle 3.3.1 runs max pooling with adaptive=false: output size ksize, windows of
    ksize cells from i*stride clipped to the input, -FLT_MAX where a window is empty."""
    x = rng(9).standard_normal((1, 2, 5, 6, 7))
    got = run("pool3d", {"X": x}, pooling_type="max", ksize=[2, 4, 3], strides=[2, 2, 2], adaptive=True)["Out"]
    assert got.shape == (1, 2, 2, 4, 3)
    want = np.full(got.shape, -FLT_MAX)
    for i, j, k in np.ndindex(2, 4, 3):
        win = x[:, :, 2 * i:2 * i + 2, 2 * j:2 * j + 4, 2 * k:2 * k + 3]
        if win.size:
            want[:, :, i, j, k] = win.max(axis=(2, 3, 4))
    close(got, want)
    assert (got[:, :, :, 3] == -FLT_MAX).all()  # rows 6.. of a 6-row input


def test_pool3d_grad_routes_to_the_first_maximum_and_shares_avg():
    x = np.zeros((1, 1, 2, 2, 2))
    x[0, 0, 1, 0, 1] = x[0, 0, 1, 1, 0] = 5.0          # a tie: the first in (d, h, w) order wins
    out = run("pool3d", {"X": x}, pooling_type="max", ksize=[2, 2, 2], strides=[2, 2, 2])["Out"]
    dx = run("pool3d_grad", {"X": x, "Out": out, "Out@GRAD": np.full(out.shape, 3.0)}, pooling_type="max",
             ksize=[2, 2, 2], strides=[2, 2, 2])["X@GRAD"]
    want = np.zeros_like(x)
    want[0, 0, 1, 0, 1] = 3.0
    close(dx, want, 0, 0)
    x = rng(10).standard_normal((1, 1, 3, 3, 3))
    kw = dict(pooling_type="avg", ksize=[2, 2, 2], strides=[1, 1, 1], paddings=[1, 1, 1])
    out = run("pool3d", {"X": x}, **kw)["Out"]
    dout = rng(11).standard_normal(out.shape)
    dx = run("pool3d_grad", {"X": x, "Out": out, "Out@GRAD": dout}, **kw)["X@GRAD"]
    # the adjoint: <pool(x), dout> is linear in x, so <dx, x> must equal it
    close((dx * x).sum(), (out * dout).sum())


# ============================================================================ max pool with index, unpool

WITH_INDEX_CASES = [
    dict(ksize=[2, 2], strides=[2, 2], paddings=[0, 0]),
    dict(ksize=[3, 3], strides=[2, 1], paddings=[1, 1]),
    dict(ksize=[2, 3], strides=[2, 2], paddings=[0, 0], ceil_mode=True),
    dict(ksize=[3, 4], strides=[1, 1], paddings=[0, 0], adaptive=True),
]


@pytest.mark.parametrize("case", WITH_INDEX_CASES, ids=str)
def test_max_pool2d_with_index_matches_loops(case):
    x = rng(12).standard_normal((2, 3, 7, 6)).astype(np.float32)
    want_out, want_mask = ref_max_pool_with_index(x, case["ksize"], case["strides"], case["paddings"],
                                                  case.get("adaptive", False), case.get("ceil_mode", False))
    got = run("max_pool2d_with_index", {"X": x}, **case)
    assert got["Mask"].dtype == np.int32 and got["Out"].dtype == np.float32
    close(got["Out"], want_out, 0, 0)
    np.testing.assert_array_equal(got["Mask"], want_mask)


def test_max_pool_with_index_ties_take_the_first_and_3d_matches_loops():
    x = rng(13).integers(0, 3, (1, 2, 5, 5)).astype(np.float32)
    got = run("max_pool2d_with_index", {"X": x}, ksize=[3, 3], strides=[1, 1], paddings=[1, 1])
    want_out, want_mask = ref_max_pool_with_index(x, [3, 3], [1, 1], [1, 1])
    np.testing.assert_array_equal(got["Mask"], want_mask)
    close(got["Out"], want_out, 0, 0)
    x = rng(14).standard_normal((1, 2, 5, 4, 6))
    for kw in (dict(ksize=[3, 2, 3], strides=[2, 2, 2], paddings=[1, 0, 1]),
               dict(ksize=[2, 3, 4], strides=[1, 1, 1], paddings=[0, 0, 0], adaptive=True)):
        got = run("max_pool3d_with_index", {"X": x}, **kw)
        want_out, want_mask = ref_max_pool_with_index(x, kw["ksize"], kw["strides"], kw["paddings"],
                                                      kw.get("adaptive", False))
        close(got["Out"], want_out, 0, 0)
        np.testing.assert_array_equal(got["Mask"], want_mask)


def test_max_pool_with_index_grad_scatters_to_the_mask():
    x = rng(15).standard_normal((2, 2, 4, 5))
    kw = dict(ksize=[3, 3], strides=[1, 2], paddings=[1, 1])
    fwd = run("max_pool2d_with_index", {"X": x}, **kw)
    dout = rng(16).standard_normal(fwd["Out"].shape)
    dx = run("max_pool2d_with_index_grad", {"X": x, "Mask": fwd["Mask"], "Out@GRAD": dout}, **kw)["X@GRAD"]
    want = np.zeros_like(x)
    for n, c, i, j in np.ndindex(*dout.shape):
        want[n, c].reshape(-1)[fwd["Mask"][n, c, i, j]] += dout[n, c, i, j]
    close(dx, want)


def test_unpool_places_values_at_the_indices():
    x = rng(17).standard_normal((2, 3, 7, 6))
    fwd = run("max_pool2d_with_index", {"X": x}, ksize=[2, 2], strides=[2, 2], paddings=[0, 0])
    out = run("unpool", {"X": fwd["Out"], "Indices": fwd["Mask"]}, unpooling_type="max", ksize=[2, 2],
              strides=[2, 2], output_size=[7, 6])["Out"]
    want = np.zeros((2, 3, 7, 6))
    for n, c, i, j in np.ndindex(*fwd["Out"].shape):
        want[n, c].reshape(-1)[fwd["Mask"][n, c, i, j]] = fwd["Out"][n, c, i, j]
    close(out, want, 0, 0)
    # unpool3d, and the gradient: dX = dOut at the indices
    idx = rng(18).permutation(4 * 4 * 4)[:8].reshape(1, 1, 2, 2, 2).repeat(2, axis=1).astype(np.int64)
    x3 = rng(19).standard_normal((1, 2, 2, 2, 2))
    out3 = run("unpool3d", {"X": x3, "Indices": idx}, ksize=[2, 2, 2], strides=[2, 2, 2],
               output_size=[4, 4, 4])["Out"]
    np.testing.assert_array_equal(out3.reshape(1, 2, -1)[0][:, idx[0, 0].reshape(-1)], x3.reshape(1, 2, -1)[0])
    assert np.count_nonzero(out3) == 16
    dout = rng(20).standard_normal(out3.shape)
    dx = run("unpool3d_grad", {"X": x3, "Indices": idx, "Out": out3, "Out@GRAD": dout}, ksize=[2, 2, 2],
             strides=[2, 2, 2], output_size=[4, 4, 4])["X@GRAD"]
    close(dx.reshape(1, 2, -1), dout.reshape(1, 2, -1)[:, :, idx[0, 0].reshape(-1)], 0, 0)


def test_unpool_rejects_an_index_outside_the_output():
    x = np.ones((1, 1, 2, 2))
    idx = np.array([[[[0, 1], [2, 16]]]], np.int32)
    with pytest.raises(IndexError, match="16"):
        run("unpool", {"X": x, "Indices": idx}, unpooling_type="max", ksize=[2, 2], strides=[2, 2],
            output_size=[4, 4])


# ============================================================================ affine_grid / grid_sampler

@pytest.mark.parametrize("align_corners", [True, False])
def test_affine_grid_matches_formula(align_corners):
    theta = rng(21).standard_normal((2, 2, 3))
    got = run("affine_grid", {"Theta": theta}, output_shape=[2, 3, 4, 5], align_corners=align_corners)["Output"]
    close(got, ref_affine_grid(theta, [4, 5], align_corners))
    tensor = run("affine_grid", {"Theta": theta, "OutputShape": np.array([2, 3, 4, 5], np.int32)},
                 align_corners=align_corners)["Output"]
    close(tensor, got, 0, 0)
    theta3 = rng(22).standard_normal((2, 3, 4))
    got3 = run("affine_grid", {"Theta": theta3}, output_shape=[2, 1, 3, 4, 2], align_corners=align_corners)
    close(got3["Output"], ref_affine_grid(theta3, [3, 4, 2], align_corners))


def test_affine_grid_single_row_follows_paddle():
    """A one-cell axis: PaddlePaddle 3.3.1 gives NaN with align_corners (its step is 2/0)
    and the cell centre 0 without (checked against its output)."""
    theta = np.array([[[1.0, 0, 0], [0, 1.0, 0]]], np.float32)
    got = run("affine_grid", {"Theta": theta}, output_shape=[1, 1, 1, 3], align_corners=True)["Output"]
    assert np.isnan(got).all()
    got = run("affine_grid", {"Theta": theta}, output_shape=[1, 1, 1, 3], align_corners=False)["Output"]
    close(got.reshape(-1, 2), np.array([[-2 / 3, 0], [0, 0], [2 / 3, 0]]), 1e-6, 1e-6)


def test_affine_grid_grad_is_the_adjoint():
    theta = rng(23).standard_normal((2, 2, 3))
    dout = rng(24).standard_normal((2, 4, 5, 2))
    dtheta = run("affine_grid_grad", {"Output@GRAD": dout}, output_shape=[2, 3, 4, 5],
                 align_corners=False)["Theta@GRAD"]
    out = ref_affine_grid(theta, [4, 5], False)
    close((dtheta * theta).sum(), (out * dout).sum())


GRID_MODES = [(m, p, a) for m in ("bilinear", "nearest") for p in ("zeros", "border", "reflection")
              for a in (True, False)]


@pytest.mark.parametrize("mode,padding_mode,align_corners", GRID_MODES)
def test_grid_sampler_matches_point_loops(mode, padding_mode, align_corners):
    x = rng(25).standard_normal((2, 3, 4, 5))
    grid = rng(26).uniform(-1.6, 1.6, (2, 3, 4, 2))
    got = run("grid_sampler", {"X": x, "Grid": grid}, mode=mode, padding_mode=padding_mode,
              align_corners=align_corners)["Output"]
    close(got, ref_grid_sample(x, grid, mode, padding_mode, align_corners))


@pytest.mark.parametrize("mode,padding_mode,align_corners",
                         [("bilinear", "zeros", True), ("bilinear", "reflection", False), ("nearest", "border", True)])
def test_grid_sampler_3d_matches_point_loops(mode, padding_mode, align_corners):
    x = rng(27).standard_normal((1, 2, 3, 4, 3))
    grid = rng(28).uniform(-1.4, 1.4, (1, 2, 3, 2, 3))
    got = run("grid_sampler", {"X": x, "Grid": grid}, mode=mode, padding_mode=padding_mode,
              align_corners=align_corners)["Output"]
    close(got, ref_grid_sample(x, grid, mode, padding_mode, align_corners))


def test_grid_sampler_identity_grid_reproduces_the_input():
    x = rng(29).standard_normal((1, 2, 4, 6))
    theta = np.array([[[1.0, 0, 0], [0, 1.0, 0]]])
    for ac in (True, False):
        grid = run("affine_grid", {"Theta": theta}, output_shape=[1, 2, 4, 6], align_corners=ac)["Output"]
        got = run("grid_sampler", {"X": x, "Grid": grid}, align_corners=ac)["Output"]
        close(got, x)


# ============================================================================ deformable_conv

DEFORM_CASES = [
    dict(x=(2, 3, 5, 6), w=(4, 3, 3, 3), strides=[1, 1], paddings=[1, 1], dilations=[1, 1], groups=1, dg=1),
    dict(x=(1, 4, 6, 5), w=(6, 2, 3, 2), strides=[2, 1], paddings=[1, 0], dilations=[1, 2], groups=2, dg=2),
]


@pytest.mark.parametrize("case", DEFORM_CASES, ids=str)
@pytest.mark.parametrize("modulated", [True, False])
def test_deformable_conv_matches_point_loops(case, modulated):
    r = rng(30)
    x, w = r.standard_normal(case["x"]), r.standard_normal(case["w"])
    kh, kw = case["w"][2:]
    oh = (case["x"][2] + 2 * case["paddings"][0] - (case["dilations"][0] * (kh - 1) + 1)) // case["strides"][0] + 1
    ow = (case["x"][3] + 2 * case["paddings"][1] - (case["dilations"][1] * (kw - 1) + 1)) // case["strides"][1] + 1
    offset = r.uniform(-2.5, 2.5, (case["x"][0], 2 * case["dg"] * kh * kw, oh, ow))
    mask = r.uniform(0, 1, (case["x"][0], case["dg"] * kh * kw, oh, ow)) if modulated else None
    attrs = dict(strides=case["strides"], paddings=case["paddings"], dilations=case["dilations"],
                 groups=case["groups"], deformable_groups=case["dg"], im2col_step=1)
    if modulated:
        got = run("deformable_conv", {"Input": x, "Offset": offset, "Mask": mask, "Filter": w}, **attrs)
    else:
        got = run("deformable_conv_v1", {"Input": x, "Offset": offset, "Filter": w}, **attrs)
    want = ref_deformable_conv(x, offset, mask, w, case["strides"], case["paddings"], case["dilations"],
                               case["groups"], case["dg"])
    close(got["Output"], want)


def test_deformable_conv_with_zero_offsets_is_conv2d():
    r = rng(31)
    x, w = r.standard_normal((2, 4, 5, 5)), r.standard_normal((6, 2, 3, 3))
    offset = np.zeros((2, 2 * 2 * 9, 5, 5))
    mask = np.ones((2, 2 * 9, 5, 5))
    got = run("deformable_conv", {"Input": x, "Offset": offset, "Mask": mask, "Filter": w}, paddings=[1, 1],
              groups=2, deformable_groups=2)["Output"]
    want = run("conv2d", {"Input": x, "Filter": w}, paddings=[1, 1], groups=2)["Output"]
    close(got, want)


# ============================================================================ the N-d engines in 2-D

@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_nd_convolution_engine_in_2d_is_conv2d(layout):
    """kernels/vision.py's N-d convolution on 4-D input gives kernels/nn.py's conv2d results."""
    from keel.kernels import vision
    r = rng(40)
    x, w = r.standard_normal((2, 4, 7, 6)), r.standard_normal((6, 2, 3, 2))
    if layout == "NHWC":
        x = x.transpose(0, 2, 3, 1)
    attrs = dict(strides=[2, 1], paddings=[1, 0, 2, 1], padding_algorithm="EXPLICIT", dilations=[1, 2],
                 groups=2, data_format=layout)
    want = run("conv2d", {"Input": x, "Filter": w}, **attrs)["Output"]
    close(vision._convnd(np, "conv2d", 2, x, w, **attrs), want)
    dy = r.standard_normal(want.shape)
    grads = run("conv2d_grad", {"Input": x, "Filter": w, "Output@GRAD": dy}, **attrs)
    dx, dw = vision._convnd_grad(np, "conv2d_grad", x, w, dy, need={"Input@GRAD", "Filter@GRAD"}, **attrs)
    close(dx, grads["Input@GRAD"])
    close(dw, grads["Filter@GRAD"])


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
@pytest.mark.parametrize("case", [dict(ksize=[3, 3], strides=[2, 1], paddings=[1, 1]),
                                  dict(ksize=[2, 3], strides=[2, 2], paddings=[0, 1], ceil_mode=True),
                                  dict(ksize=[3, 2], strides=[1, 1], paddings=[1, 1], exclusive=False)], ids=str)
def test_nd_pooling_engine_in_2d_is_pool2d(pooling_type, case):
    from keel.kernels import vision
    x = rng(41).standard_normal((2, 3, 7, 6))
    attrs = dict(case, pooling_type=pooling_type)
    want = run("pool2d", {"X": x}, **attrs)["Out"]
    ks, st, pads, out = vision._pool_sizes("pool2d", 2, x.shape[2:], case["ksize"], case["strides"],
                                           case["paddings"], "EXPLICIT", case.get("ceil_mode", False), False, False)
    win = vision._PoolWindows(x.shape[2:], ks, st, pads, out, False)
    exclusive = case.get("exclusive", True)
    close(vision._pool_forward(np, x, win, pooling_type, exclusive, False, ks), want)
    dout = rng(42).standard_normal(want.shape)
    dx = run("pool2d_grad", {"X": x, "Out": want, "Out@GRAD": dout}, **attrs)["X@GRAD"]
    close(vision._pool_grad(np, x, want, dout, win, pooling_type, exclusive, False, ks), dx)


# ============================================================================ PaddlePaddle's outputs

ORACLE = np.load(FIXTURES / "vision_oracle.npz")
ORACLE_IDS = sorted({k.split("/")[0] for k in ORACLE.files})


def _oracle_group(cid, group):
    prefix = f"{cid}/{group}/"
    return {k[len(prefix):]: ORACLE[k] for k in ORACLE.files if k.startswith(prefix)}


def _oracle_close(got, want, what):
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, PaddlePaddle {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {got.shape}, PaddlePaddle {want.shape}"
    if want.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    eps = 1e-12 if want.dtype == np.float64 else 2e-6
    np.testing.assert_allclose(got, want, rtol=eps, atol=eps * max(1.0, float(np.abs(want).max(initial=0))),
                               err_msg=what)


def test_oracle_fixture_covers_every_vision_op():
    ops = {json.loads(str(ORACLE[f"{cid}/meta"]))["op"] for cid in ORACLE_IDS}
    assert ops == set(VISION_OPS)


@pytest.mark.parametrize("cid", ORACLE_IDS)
def test_matches_paddle_outputs_and_gradients(cid):
    """The forward kernel on PaddlePaddle's inputs gives its outputs; the gradient kernel on
    its output gradient gives its input gradients."""
    meta = json.loads(str(ORACLE[f"{cid}/meta"]))
    op, attrs = meta["op"], meta["attrs"]
    ins, outs = _oracle_group(cid, "in"), _oracle_group(cid, "out")
    kdef = kernel_registry.get(op)
    got = call_kernel(op, {s: ins[s] for s in kdef.inputs if s in ins}, {a: attrs[a] for a in kdef.attrs})
    for slot, want in outs.items():
        _oracle_close(got[slot], want, f"{cid} {slot}")
    grads = _oracle_group(cid, "grad")
    if not grads:
        return
    douts = _oracle_group(cid, "dout")
    gdef = kernel_registry.get(op + "_grad")
    gin = {}
    for slot in gdef.inputs:
        base = slot[:-len("@GRAD")] if slot.endswith("@GRAD") else None
        if base is not None and base in douts:
            gin[slot] = douts[base]
        elif slot in ins:
            gin[slot] = ins[slot]
        elif slot in outs:
            gin[slot] = outs[slot]
    got = call_kernel(op + "_grad", gin, {a: attrs[a] for a in gdef.attrs})
    for slot, want in grads.items():
        _oracle_close(got[slot + "@GRAD"], want, f"{cid} {slot}@GRAD")


@pytest.mark.paddle
def test_live_paddle_agrees_with_the_kernels():
    """PaddlePaddle itself (when installed) runs every case of the fixture generator again;
    Keel's kernels give its outputs and gradients."""
    import os
    import sys
    os.environ.setdefault("FLAGS_enable_pir_api", "0")
    pytest.importorskip("paddle")
    sys.path.insert(0, str(FIXTURES))
    try:
        import vision_oracle
    finally:
        sys.path.remove(str(FIXTURES))
    for c in vision_oracle.CASES:
        result, douts, grads = vision_oracle.run(c)
        kdef = kernel_registry.get(c["op"])
        got = call_kernel(c["op"], {s: c["inputs"][s] for s in kdef.inputs if s in c["inputs"]},
                          {a: c["attrs"][a] for a in kdef.attrs})
        for slot, want in result.items():
            _oracle_close(got[slot], want, f"{c['id']} {slot}")
        if grads:
            gdef = kernel_registry.get(c["op"] + "_grad")
            gin = {s: (douts[s[:-5]] if s.endswith("@GRAD") else c["inputs"].get(s, result.get(s)))
                   for s in gdef.inputs}
            gin = {s: v for s, v in gin.items() if v is not None}
            got = call_kernel(c["op"] + "_grad", gin, {a: c["attrs"][a] for a in gdef.attrs})
            for slot, want in grads.items():
                _oracle_close(got[slot + "@GRAD"], want, f"{c['id']} {slot}@GRAD")
