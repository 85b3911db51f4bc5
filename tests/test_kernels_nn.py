"""NN and loss kernels against independent references (direct loops over PaddlePaddle's
formulas), plus dtype preservation and slot/attribute names against the op registry.

Kernels run through `call_kernel`; every attribute a kernel takes is filled from
PaddlePaddle's defaults (tests/fixtures/paddle_op_signatures.json) unless the test sets it,
so these tests do not depend on which op definitions exist yet."""
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import registry as kernel_registry
from keel.program.ops import registry as op_registry

PADDLE = json.loads((Path(__file__).parent / "fixtures" / "paddle_op_signatures.json").read_text())
FLT_MAX = float(np.finfo(np.float32).max)

NN_OPS = ["conv2d", "depthwise_conv2d", "conv2d_transpose", "pool2d", "batch_norm", "layer_norm",
          "group_norm", "instance_norm", "affine_channel", "lrn", "lookup_table_v2", "prelu",
          "bilinear_interp_v2", "nearest_interp_v2", "pixel_shuffle"]
LOSS_OPS = ["softmax_with_cross_entropy", "cross_entropy", "cross_entropy2",
            "sigmoid_cross_entropy_with_logits", "bce_loss", "huber_loss", "kldiv_loss",
            "label_smooth", "accuracy"]


def run(op_type, inputs, **attrs):
    """call_kernel with Paddle's default for every kernel attribute the test leaves out."""
    kdef = kernel_registry.get(op_type)
    full = {}
    for name in kdef.attrs:
        if name in attrs:
            full[name] = attrs[name]
        else:
            spec = PADDLE[op_type]["attrs"].get(name, {})
            assert "default" in spec, f"{op_type}.{name} has no Paddle default; the test must set it"
            full[name] = spec["default"]
    return call_kernel(op_type, inputs, full)


def rng(seed=0):
    return np.random.default_rng(seed)


# ============================================================================ registry

@pytest.mark.parametrize("op_type", NN_OPS + LOSS_OPS)
def test_kernel_slots_exist_in_op_registry(op_type):
    kdef = kernel_registry.get(op_type)
    assert kdef is not None, f"no kernel registered for {op_type}"
    opdef = op_registry.lookup(op_type)
    if opdef is None:
        pytest.skip(f"op {op_type!r} is not defined in program/ops yet; slot names unchecked")
    assert set(kdef.inputs) <= set(opdef.input_slots), "kernel inputs not in op definition"
    assert set(kdef.outputs) <= set(opdef.output_slots), "kernel outputs not in op definition"
    missing = [a for a in kdef.attrs if opdef.attr_spec(a) is None]
    assert not missing, f"kernel attributes missing from op definition: {missing}"
    for out, inp in kdef.inplace.items():
        assert out in opdef.output_slots and inp in opdef.input_slots


@pytest.mark.parametrize("op_type", NN_OPS + LOSS_OPS)
def test_kernel_slots_match_paddle_snapshot(op_type):
    ref = PADDLE[op_type]
    kdef = kernel_registry.get(op_type)
    assert set(kdef.inputs) <= set(ref["inputs"])
    assert set(kdef.outputs) <= set(ref["outputs"])
    assert set(kdef.attrs) <= set(ref["attrs"])


# ============================================================================ conv2d

def same_pads(size, k, s):
    out = -(-size // s)
    total = max((out - 1) * s + k - size, 0)
    return total // 2, total - total // 2


def ref_conv2d(x, w, strides=(1, 1), paddings=(0, 0), dilations=(1, 1), groups=1,
               algorithm="EXPLICIT", nhwc=False):
    """Direct convolution: each output element summed over its window with bounds checks."""
    if nhwc:
        x = x.transpose(0, 3, 1, 2)
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    sh, sw = strides
    dh, dw = dilations
    if algorithm == "SAME":
        dh = dw = 1
        (pt, pb), (pl, pr) = same_pads(h, kh, sh), same_pads(wd, kw, sw)
    elif algorithm == "VALID":
        pt = pb = pl = pr = 0
    elif len(paddings) == 2:
        pt = pb = paddings[0]
        pl = pr = paddings[1]
    else:
        pt, pb, pl, pr = paddings
    oh = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    ow = (wd + pl + pr - dw * (kw - 1) - 1) // sw + 1
    og = o // groups
    out = np.zeros((n, o, oh, ow), np.float64)
    for b, oc, y, xx in itertools.product(range(n), range(o), range(oh), range(ow)):
        gidx = oc // og
        acc = 0.0
        for i, j in itertools.product(range(kh), range(kw)):
            iy, ix = y * sh - pt + i * dh, xx * sw - pl + j * dw
            if 0 <= iy < h and 0 <= ix < wd:
                acc += float(np.dot(x[b, gidx * cg:(gidx + 1) * cg, iy, ix].astype(np.float64),
                                    w[oc, :, i, j].astype(np.float64)))
        out[b, oc, y, xx] = acc
    return out.transpose(0, 2, 3, 1) if nhwc else out


CONV_CASES = [
    # (N, C, H, W, O, k(h,w), strides, paddings, dilations, groups, algorithm, nhwc)
    (1, 3, 7, 7, 4, (3, 3), (1, 1), (0, 0), (1, 1), 1, "EXPLICIT", False),
    (3, 3, 7, 6, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, "EXPLICIT", False),
    (3, 4, 9, 8, 6, (3, 3), (2, 2), (1, 1), (1, 1), 1, "EXPLICIT", False),
    (2, 4, 8, 9, 4, (3, 2), (2, 1), (1, 2, 0, 1), (1, 1), 1, "EXPLICIT", False),
    (2, 4, 9, 9, 4, (3, 3), (1, 1), (2, 2), (2, 2), 1, "EXPLICIT", False),
    (2, 4, 10, 11, 4, (3, 3), (1, 2), (0, 1, 2, 0), (2, 3), 1, "EXPLICIT", False),
    (2, 4, 7, 9, 6, (3, 3), (1, 1), (1, 1), (1, 1), 2, "EXPLICIT", False),
    (3, 4, 8, 8, 4, (3, 3), (2, 2), (1, 1), (1, 1), 4, "EXPLICIT", False),  # depthwise
    (2, 3, 8, 7, 6, (3, 3), (1, 1), (1, 1), (1, 1), 3, "EXPLICIT", False),  # depthwise x2
    (1, 5, 6, 6, 3, (1, 1), (1, 1), (0, 0), (1, 1), 1, "EXPLICIT", False),
    (2, 2, 11, 9, 3, (5, 5), (2, 2), (2, 2), (1, 1), 1, "EXPLICIT", False),
    (2, 3, 7, 8, 4, (3, 3), (2, 2), (0, 0), (1, 1), 1, "SAME", False),
    (2, 3, 7, 8, 4, (3, 3), (2, 2), (5, 5), (2, 2), 1, "SAME", False),  # SAME forces dilation 1
    (2, 3, 9, 8, 4, (4, 4), (3, 2), (0, 0), (1, 1), 1, "SAME", False),
    (2, 3, 7, 8, 4, (3, 3), (2, 2), (3, 3), (1, 1), 1, "VALID", False),
    (3, 3, 7, 6, 4, (3, 3), (1, 1), (1, 1), (1, 1), 1, "EXPLICIT", True),
    (2, 4, 9, 8, 6, (3, 3), (2, 1), (1, 0, 2, 1), (1, 2), 2, "EXPLICIT", True),
    (2, 4, 8, 8, 4, (3, 3), (1, 1), (1, 1), (1, 1), 4, "EXPLICIT", True),
    (2, 3, 7, 8, 4, (3, 3), (2, 2), (0, 0), (1, 1), 1, "SAME", True),
]


@pytest.mark.parametrize("case", CONV_CASES, ids=[str(i) for i in range(len(CONV_CASES))])
def test_conv2d_matches_direct_loops(case):
    n, c, h, wd, o, (kh, kw), strides, paddings, dilations, groups, algo, nhwc = case
    r = rng(1)
    x = r.standard_normal((n, h, wd, c) if nhwc else (n, c, h, wd))
    w = r.standard_normal((o, c // groups, kh, kw))
    op = "depthwise_conv2d" if groups == c and groups > 1 else "conv2d"
    got = run(op, {"Input": x, "Filter": w}, strides=list(strides), paddings=list(paddings),
              dilations=list(dilations), groups=groups, padding_algorithm=algo,
              data_format="NHWC" if nhwc else "NCHW")["Output"]
    want = ref_conv2d(x, w, strides, paddings, dilations, groups, algo, nhwc)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_conv2d_preserves_dtype(dtype):
    r = rng(2)
    x = r.standard_normal((2, 3, 6, 6)).astype(dtype)
    w = r.standard_normal((4, 3, 3, 3)).astype(dtype)
    got = run("conv2d", {"Input": x, "Filter": w}, paddings=[1, 1])["Output"]
    assert got.dtype == dtype and got.shape == (2, 4, 6, 6)
    want = ref_conv2d(x, w, paddings=(1, 1))
    tol = {np.float16: 2e-2, np.float32: 1e-5, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * 10)


# ============================================================================ conv2d_transpose

def ref_conv2d_transpose(x, w, strides, pads4, dilations, groups, out_hw, nhwc=False):
    """Scatter every input pixel times the filter into the output (col2im by loops)."""
    if nhwc:
        x = x.transpose(0, 3, 1, 2)
    n, cin, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = cin // groups
    oh, ow = out_hw
    out = np.zeros((n, og * groups, oh, ow))
    pt, _, pl, _ = pads4
    for b, ci, iy, ix, i, j in itertools.product(range(n), range(cin), range(h), range(wd),
                                                 range(kh), range(kw)):
        y = iy * strides[0] - pt + i * dilations[0]
        xx = ix * strides[1] - pl + j * dilations[1]
        if 0 <= y < oh and 0 <= xx < ow:
            gidx = ci // cg
            out[b, gidx * og:(gidx + 1) * og, y, xx] += x[b, ci, iy, ix] * w[ci, :, i, j]
    return out.transpose(0, 2, 3, 1) if nhwc else out


TRANSPOSE_CASES = [
    # (N, Cin, H, W, Og, k, strides, paddings, dilations, groups, output_size, output_padding, algo, nhwc)
    (2, 3, 4, 5, 2, (3, 3), (1, 1), (0, 0), (1, 1), 1, [], [], "EXPLICIT", False),
    (2, 3, 4, 5, 2, (3, 3), (2, 2), (1, 1), (1, 1), 1, [], [], "EXPLICIT", False),
    (1, 4, 3, 4, 3, (3, 2), (2, 3), (1, 0, 0, 1), (1, 1), 2, [], [], "EXPLICIT", False),
    (2, 2, 4, 4, 2, (3, 3), (2, 2), (1, 1), (2, 1), 1, [], [], "EXPLICIT", False),
    (2, 2, 4, 4, 3, (3, 3), (2, 2), (1, 1), (1, 1), 1, [8, 8], [], "EXPLICIT", False),
    (2, 2, 4, 4, 3, (4, 4), (3, 2), (1, 1), (1, 1), 1, [], [2, 1], "EXPLICIT", False),
    (2, 3, 4, 5, 2, (3, 3), (2, 2), (0, 0), (1, 1), 1, [], [], "SAME", False),
    (2, 3, 4, 5, 2, (3, 3), (2, 2), (1, 1), (1, 1), 1, [], [], "VALID", False),
    (2, 4, 3, 5, 2, (3, 3), (2, 1), (1, 1), (1, 1), 2, [], [], "EXPLICIT", True),
]


@pytest.mark.parametrize("case", TRANSPOSE_CASES, ids=[str(i) for i in range(len(TRANSPOSE_CASES))])
def test_conv2d_transpose_matches_scatter_loops(case):
    n, cin, h, wd, og, (kh, kw), s, p, d, g, osize, opad, algo, nhwc = case
    r = rng(3)
    x = r.standard_normal((n, h, wd, cin) if nhwc else (n, cin, h, wd))
    w = r.standard_normal((cin, og, kh, kw))
    got = run("conv2d_transpose", {"Input": x, "Filter": w}, strides=list(s), paddings=list(p),
              dilations=list(d), groups=g, output_size=osize, output_padding=opad,
              padding_algorithm=algo, data_format="NHWC" if nhwc else "NCHW")["Output"]
    dil = d
    if algo == "SAME":
        dil = (1, 1)
        pads4 = [*same_pads(h, kh, s[0]), *same_pads(wd, kw, s[1])]
    elif algo == "VALID":
        pads4 = [0, 0, 0, 0]
    else:
        pads4 = [p[0], p[0], p[1], p[1]] if len(p) == 2 else list(p)
    inferred = [(h - 1) * s[0] - pads4[0] - pads4[1] + dil[0] * (kh - 1) + 1,
                (wd - 1) * s[1] - pads4[2] - pads4[3] + dil[1] * (kw - 1) + 1]
    out_hw = osize or [inferred[0] + (opad[0] if opad else 0), inferred[1] + (opad[1] if opad else 0)]
    want = ref_conv2d_transpose(x, w, s, pads4, dil, g, out_hw, nhwc)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_conv2d_transpose_rejects_bad_output_size():
    x = np.ones((1, 1, 4, 4))
    w = np.ones((1, 1, 3, 3))
    with pytest.raises(ValueError, match="output_size"):
        run("conv2d_transpose", {"Input": x, "Filter": w}, strides=[2, 2], output_size=[20, 20])


def test_conv2d_transpose_is_adjoint_of_conv2d():
    """<conv(x), y> == <x, conv_transpose(y)> with the same filter and geometry."""
    r = rng(4)
    x = r.standard_normal((2, 3, 9, 8))
    w = r.standard_normal((5, 3, 3, 3))
    attrs = dict(strides=[2, 2], paddings=[1, 1], dilations=[1, 1])
    y = run("conv2d", {"Input": x, "Filter": w}, **attrs)["Output"]
    v = r.standard_normal(y.shape)
    xt = run("conv2d_transpose", {"Input": v, "Filter": w}, output_size=[9, 8], **attrs)["Output"]
    assert xt.shape == x.shape
    np.testing.assert_allclose((y * v).sum(), (x * xt).sum(), rtol=1e-10)


# ============================================================================ pool2d

def ref_pool2d(x, ksize, strides, pads4, pooling_type, exclusive, ceil_mode, adaptive=False,
               nhwc=False):
    if nhwc:
        x = x.transpose(0, 3, 1, 2)
    n, c, h, w = x.shape
    if adaptive:
        oh, ow = ksize
    else:
        def size(inp, k, p0, p1, s):
            return (inp - k + p0 + p1 + (s - 1 if ceil_mode else 0)) // s + 1
        oh = size(h, ksize[0], pads4[0], pads4[1], strides[0])
        ow = size(w, ksize[1], pads4[2], pads4[3], strides[1])
    out = np.zeros((n, c, oh, ow))
    for i, j in itertools.product(range(oh), range(ow)):
        if adaptive:
            hs, he = math.floor(i * h / oh), math.ceil((i + 1) * h / oh)
            ws, we = math.floor(j * w / ow), math.ceil((j + 1) * w / ow)
        else:
            hs = i * strides[0] - pads4[0]
            ws = j * strides[1] - pads4[2]
            # not exclusive: PaddlePaddle divides by the window cut at the input's end plus
            # the *leading* padding (tests/test_functional_paddle.py checks it against its outputs)
            inclusive = (min(hs + ksize[0], h + pads4[0]) - hs) * (min(ws + ksize[1], w + pads4[2]) - ws)
            he, we = min(hs + ksize[0], h), min(ws + ksize[1], w)
            hs, ws = max(hs, 0), max(ws, 0)
        for b, ch in itertools.product(range(n), range(c)):
            if pooling_type == "max":
                v = -FLT_MAX
                for y, xx in itertools.product(range(hs, he), range(ws, we)):
                    v = max(v, x[b, ch, y, xx])
            else:
                total = sum(x[b, ch, y, xx] for y, xx in itertools.product(range(hs, he), range(ws, we)))
                count = (he - hs) * (we - ws) if (exclusive or adaptive) else inclusive
                v = total / count if count else float("nan")
            out[b, ch, i, j] = v
    return out.transpose(0, 2, 3, 1) if nhwc else out


POOL_CASES = [
    # (shape NCHW, ksize, strides, paddings, ceil, exclusive, nhwc)
    ((2, 3, 6, 6), [2, 2], [2, 2], [0, 0], False, True, False),
    ((2, 3, 7, 7), [3, 3], [2, 2], [1, 1], False, True, False),
    ((2, 3, 7, 7), [3, 3], [2, 2], [1, 1], False, False, False),
    ((2, 3, 7, 8), [3, 2], [2, 2], [1, 1], True, True, False),
    ((2, 3, 7, 8), [3, 2], [2, 2], [1, 1], True, False, False),
    ((1, 2, 9, 7), [3, 3], [3, 2], [1, 2, 0, 1], True, True, False),
    ((1, 2, 9, 7), [3, 3], [3, 2], [1, 2, 0, 1], False, False, False),
    ((2, 3, 7, 7), [3, 3], [2, 2], [1, 1], True, True, True),
    ((2, 3, 7, 7), [2, 3], [1, 2], [1, 0, 1, 1], False, False, True),
]


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES, ids=[str(i) for i in range(len(POOL_CASES))])
def test_pool2d_matches_loops(case, pooling_type):
    shape, k, s, p, ceil_mode, exclusive, nhwc = case
    x = rng(5).standard_normal(shape)
    if nhwc:
        x = x.transpose(0, 2, 3, 1).copy()
    got = run("pool2d", {"X": x}, ksize=k, strides=s, paddings=p, ceil_mode=ceil_mode,
              exclusive=exclusive, pooling_type=pooling_type,
              data_format="NHWC" if nhwc else "NCHW")["Out"]
    pads4 = [p[0], p[0], p[1], p[1]] if len(p) == 2 else p
    want = ref_pool2d(x, k, s, pads4, pooling_type, exclusive, ceil_mode, nhwc=nhwc)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("shape,out", [((2, 3, 7, 5), [3, 2]), ((1, 2, 10, 9), [4, 4]),
                                       ((1, 2, 5, 5), [5, 5]), ((1, 1, 3, 8), [2, 3]),
                                       ((2, 2, 4, 4), [1, 1])])
@pytest.mark.parametrize("nhwc", [False, True])
def test_pool2d_adaptive_avg_matches_loops(shape, out, nhwc):
    x = rng(6).standard_normal(shape)
    if nhwc:
        x = x.transpose(0, 2, 3, 1).copy()
    got = run("pool2d", {"X": x}, ksize=out, adaptive=True, pooling_type="avg",
              paddings=[1, 1], data_format="NHWC" if nhwc else "NCHW")["Out"]
    want = ref_pool2d(x, out, None, None, "avg", True, False, adaptive=True, nhwc=nhwc)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


POOL2D_ADAPTIVE_MAX = [([3, 2], [1, 1], [0, 0], "NCHW"), ([4, 3], [2, 2], [1, 1], "NCHW"),
                       ([3, 4], [1, 2], [0, 0], "NHWC"), ([5, 6], [1, 1], [0, 0], "NCHW")]


@pytest.mark.parametrize("case", range(len(POOL2D_ADAPTIVE_MAX)))
def test_pool2d_adaptive_max_gives_paddles_outputs_and_gradients(case):
    """PaddlePaddle 3.3.1's pool2d runs max pooling with adaptive=false: output size ksize,
    windows of ksize cells from i*stride, paddings zeroed, -FLT_MAX where a window is empty.
    The oracle (tests/fixtures/zoo/generate.py pool2d_adaptive_max) recorded its static
    Executor's Out and X@GRAD of sum(Out * dout) and Paddle Inference's Out."""
    ksize, strides, paddings, fmt = POOL2D_ADAPTIVE_MAX[case]
    rec = np.load(Path(__file__).parent / "fixtures" / "zoo" / "pool2d_adaptive_max.npz")
    x, dout = rec[f"x:{case}"], rec[f"dout:{case}"]
    attrs = dict(ksize=ksize, strides=strides, paddings=paddings, data_format=fmt, adaptive=True,
                 pooling_type="max", ceil_mode=False, exclusive=True, global_pooling=False,
                 padding_algorithm="EXPLICIT")
    out = call_kernel("pool2d", {"X": x}, attrs)["Out"]
    np.testing.assert_array_equal(out, rec[f"out:{case}"])
    np.testing.assert_array_equal(out, rec[f"inference:{case}"])
    dx = call_kernel("pool2d_grad", {"X": x, "Out": out, "Out@GRAD": dout}, attrs)["X@GRAD"]
    np.testing.assert_allclose(dx, rec[f"dx:{case}"], rtol=1e-6, atol=1e-6)
    if case == 3:   # rows 3.. of a 3-row input: empty windows
        assert (out[:, :, 3:] == -FLT_MAX).all()


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
def test_pool2d_global(pooling_type):
    x = rng(7).standard_normal((2, 3, 5, 4))
    got = run("pool2d", {"X": x}, ksize=[2, 2], paddings=[1, 1], global_pooling=True,
              pooling_type=pooling_type)["Out"]
    want = x.max(axis=(2, 3), keepdims=True) if pooling_type == "max" else x.mean(axis=(2, 3), keepdims=True)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_pool2d_global_with_adaptive_is_identity():
    """Paddle sets ksize to the input size for global pooling before the adaptive branch,
    so adaptive bins of size 1 reproduce the input."""
    x = rng(7).standard_normal((1, 2, 3, 4))
    got = run("pool2d", {"X": x}, ksize=[1, 1], global_pooling=True, adaptive=True, pooling_type="avg")["Out"]
    np.testing.assert_array_equal(got, x)


def test_depthwise_conv2d_ignores_groups_attr():
    r = rng(33)
    x = r.standard_normal((2, 3, 5, 5))
    w = r.standard_normal((6, 1, 3, 3))
    got = run("depthwise_conv2d", {"Input": x, "Filter": w}, groups=1, paddings=[1, 1])["Output"]
    np.testing.assert_allclose(got, ref_conv2d(x, w, paddings=(1, 1), groups=3), rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
def test_pool2d_same_and_valid(pooling_type):
    x = rng(8).standard_normal((1, 2, 7, 6))
    got = run("pool2d", {"X": x}, ksize=[3, 3], strides=[2, 2], padding_algorithm="SAME",
              pooling_type=pooling_type)["Out"]
    pads4 = [*same_pads(7, 3, 2), *same_pads(6, 3, 2)]
    np.testing.assert_allclose(got, ref_pool2d(x, [3, 3], [2, 2], pads4, pooling_type, True, False))
    assert got.shape == (1, 2, 4, 3)
    got = run("pool2d", {"X": x}, ksize=[3, 3], strides=[2, 2], paddings=[1, 1],
              padding_algorithm="VALID", pooling_type=pooling_type)["Out"]
    np.testing.assert_allclose(got, ref_pool2d(x, [3, 3], [2, 2], [0] * 4, pooling_type, True, False))


def test_pool2d_windows_past_the_input_follow_paddle():
    """ceil_mode can make a window start past the input: max gives -FLT_MAX, exclusive avg
    0/0 (NaN), non-exclusive avg 0 (Paddle's loop bounds and divisor)."""
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    attrs = dict(ksize=[2, 2], strides=[2, 2], paddings=[1, 1], ceil_mode=True)
    mx = run("pool2d", {"X": x}, pooling_type="max", **attrs)["Out"]
    assert mx.shape == (1, 1, 4, 4)
    assert mx[0, 0, 3, 0] == np.float32(-FLT_MAX)
    with np.errstate(invalid="ignore"):
        avg = run("pool2d", {"X": x}, pooling_type="avg", exclusive=True, **attrs)["Out"]
    assert np.isnan(avg[0, 0, 3, 0]) and avg[0, 0, 0, 0] == 0.0
    avg = run("pool2d", {"X": x}, pooling_type="avg", exclusive=False, **attrs)["Out"]
    assert avg[0, 0, 3, 0] == 0.0 and avg[0, 0, 0, 0] == 0.0 and avg[0, 0, 0, 1] == (1 + 2) / 4


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("pooling_type", ["max", "avg"])
def test_pool2d_preserves_dtype(dtype, pooling_type):
    x = rng(9).standard_normal((2, 3, 6, 6)).astype(dtype)
    got = run("pool2d", {"X": x}, ksize=[2, 2], strides=[2, 2], pooling_type=pooling_type)["Out"]
    assert got.dtype == dtype
    want = ref_pool2d(x.astype(np.float64), [2, 2], [2, 2], [0] * 4, pooling_type, True, False)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-2 if dtype == np.float16 else 1e-6)


# ============================================================================ batch_norm

def test_batch_norm_train_matches_paddle_example():
    """PaddlePaddle PR #68159's example (paddle 2.x output): the running variance is updated
    with the *biased* batch variance."""
    x = np.arange(12, dtype=np.float32).reshape(2, 1, 2, 3)
    mean, var = np.zeros(1, np.float32), np.ones(1, np.float32)
    out = run("batch_norm", {"X": x, "Scale": np.array([2.0], np.float32), "Bias": np.array([1.0], np.float32),
                             "Mean": mean, "Variance": var}, is_test=False)
    np.testing.assert_allclose(out["Y"].reshape(-1)[:6],
                               [-2.18650889, -1.60714364, -1.02777839, -0.44841313, 0.13095212, 0.71031737],
                               rtol=1e-6)
    np.testing.assert_allclose(out["VarianceOut"], [2.09166694], rtol=1e-6)
    np.testing.assert_allclose(out["MeanOut"], [0.55000013], rtol=1e-6)


@pytest.mark.parametrize("layout,shape", [("NCHW", (4, 3, 5, 2)), ("NHWC", (4, 5, 2, 3)),
                                          ("NCHW", (6, 3)), ("NCHW", (4, 3, 7)), ("NHWC", (3, 2, 2, 2, 3))])
def test_batch_norm_training_updates_running_stats_in_place(layout, shape):
    r = rng(10)
    x = r.standard_normal(shape) * 3 + 1
    c = 3
    scale, bias = r.standard_normal(c), r.standard_normal(c)
    mean, var = r.standard_normal(c), r.random(c) + 0.5
    mean0, var0 = mean.copy(), var.copy()
    axis = x.ndim - 1 if (layout == "NHWC" or x.ndim == 2) else 1
    out = run("batch_norm", {"X": x, "Scale": scale, "Bias": bias, "Mean": mean, "Variance": var},
              momentum=0.8, epsilon=1e-5, data_layout=layout)
    assert out["MeanOut"] is mean and out["VarianceOut"] is var  # updated in place
    xm = np.moveaxis(x, axis, -1).reshape(-1, c)
    bm, bv = xm.mean(0), xm.var(0)  # biased
    np.testing.assert_allclose(mean, mean0 * 0.8 + bm * 0.2, rtol=1e-12)
    np.testing.assert_allclose(var, var0 * 0.8 + bv * 0.2, rtol=1e-12)
    np.testing.assert_allclose(out["SavedMean"], bm, rtol=1e-12)
    np.testing.assert_allclose(out["SavedVariance"], 1 / np.sqrt(bv + 1e-5), rtol=1e-12)
    shape_c = [1] * x.ndim
    shape_c[axis] = c
    want = (x - bm.reshape(shape_c)) / np.sqrt(bv.reshape(shape_c) + 1e-5) * scale.reshape(shape_c) \
        + bias.reshape(shape_c)
    np.testing.assert_allclose(out["Y"], want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("attrs", [dict(is_test=True), dict(use_global_stats=True)])
def test_batch_norm_uses_running_stats(attrs):
    r = rng(11)
    x = r.standard_normal((4, 3, 2, 2))
    mean, var = r.standard_normal(3), r.random(3) + 0.5
    mean0, var0 = mean.copy(), var.copy()
    out = run("batch_norm", {"X": x, "Scale": np.full(3, 2.0), "Bias": np.full(3, 0.5),
                             "Mean": mean, "Variance": var}, **attrs)
    want = (x - mean0[:, None, None]) / np.sqrt(var0[:, None, None] + 1e-5) * 2.0 + 0.5
    np.testing.assert_allclose(out["Y"], want, rtol=1e-6)
    np.testing.assert_array_equal(out["MeanOut"], mean0)
    np.testing.assert_array_equal(out["VarianceOut"], var0)


def test_batch_norm_trainable_statistics_and_momentum_tensor():
    r = rng(12)
    x = r.standard_normal((5, 2))
    mean, var = np.zeros(2), np.ones(2)
    out = run("batch_norm", {"X": x, "Scale": np.ones(2), "Bias": np.zeros(2), "Mean": mean,
                             "Variance": var, "MomentumTensor": np.array([0.5], np.float32)},
              is_test=True, trainable_statistics=True)
    np.testing.assert_allclose(mean, 0.5 * x.mean(0))
    np.testing.assert_allclose(var, 0.5 + 0.5 * x.var(0))
    np.testing.assert_allclose(out["Y"], (x - x.mean(0)) / np.sqrt(x.var(0) + 1e-5), rtol=1e-6)


def test_batch_norm_optional_scale_bias_and_float16():
    r = rng(13)
    x = r.standard_normal((4, 3, 3, 3)).astype(np.float16)
    mean, var = np.zeros(3, np.float32), np.ones(3, np.float32)
    out = run("batch_norm", {"X": x, "Mean": mean, "Variance": var})
    assert out["Y"].dtype == np.float16 and out["SavedMean"].dtype == np.float32
    xf = x.astype(np.float64)
    want = (xf - xf.mean((0, 2, 3), keepdims=True)) / np.sqrt(xf.var((0, 2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(out["Y"].astype(np.float64), want, atol=5e-3)


# ============================================================================ other norms

@pytest.mark.parametrize("begin,shape", [(1, (3, 4, 5)), (2, (3, 4, 5)), (1, (6, 7)), (3, (2, 2, 3, 4))])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(begin, shape, affine):
    r = rng(14)
    x = r.standard_normal(shape) * 2 + 3
    right = int(np.prod(shape[begin:]))
    scale = r.standard_normal(right) if affine else None
    bias = r.standard_normal(right) if affine else None
    out = run("layer_norm", {"X": x, "Scale": scale, "Bias": bias}, begin_norm_axis=begin, epsilon=1e-5)
    x2 = x.reshape(-1, right)
    mu, var = x2.mean(1), x2.var(1)
    y = (x2 - mu[:, None]) / np.sqrt(var[:, None] + 1e-5)
    if affine:
        y = y * scale + bias
    np.testing.assert_allclose(out["Y"], y.reshape(shape), rtol=1e-10, atol=1e-10)
    # PaddlePaddle 3.3.1: Mean and Variance have X's dims before begin_norm_axis
    assert out["Mean"].shape == shape[:begin] and out["Variance"].shape == shape[:begin]
    np.testing.assert_allclose(out["Mean"].reshape(-1), mu, rtol=1e-12)
    np.testing.assert_allclose(out["Variance"].reshape(-1), var, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_layer_norm_dtypes(dtype):
    x = (rng(15).standard_normal((4, 16)) * 100).astype(dtype)
    out = run("layer_norm", {"X": x, "Scale": np.ones(16, dtype), "Bias": np.zeros(16, dtype)})
    assert out["Y"].dtype == dtype
    assert out["Mean"].dtype == (np.float32 if dtype == np.float16 else dtype)
    xf = x.astype(np.float64)
    want = (xf - xf.mean(1, keepdims=True)) / np.sqrt(xf.var(1, keepdims=True) + 1e-5)
    np.testing.assert_allclose(out["Y"].astype(np.float64), want, atol=2e-3 if dtype == np.float16 else 1e-5)


@pytest.mark.parametrize("layout", ["NCHW", "NHWC"])
def test_group_norm(layout):
    r = rng(16)
    n, c, h, w, g = 2, 6, 3, 4, 3
    x = r.standard_normal((n, c, h, w))
    scale, bias = r.standard_normal(c), r.standard_normal(c)
    xin = x.transpose(0, 2, 3, 1).copy() if layout == "NHWC" else x
    out = run("group_norm", {"X": xin, "Scale": scale, "Bias": bias}, groups=g, epsilon=1e-5,
              data_layout=layout)
    want = np.empty_like(x)
    means, vars_ = np.empty((n, g)), np.empty((n, g))
    for b, gi in itertools.product(range(n), range(g)):
        blk = x[b, gi * 2:(gi + 1) * 2]
        means[b, gi], vars_[b, gi] = blk.mean(), blk.var()
        want[b, gi * 2:(gi + 1) * 2] = (blk - blk.mean()) / np.sqrt(blk.var() + 1e-5)
    want = want * scale[None, :, None, None] + bias[None, :, None, None]
    if layout == "NHWC":
        want = want.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(out["Y"], want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out["Mean"], means, rtol=1e-12)
    np.testing.assert_allclose(out["Variance"], vars_, rtol=1e-12)


def test_instance_norm():
    r = rng(17)
    x = r.standard_normal((2, 3, 4, 5))
    scale, bias = r.standard_normal(3), r.standard_normal(3)
    out = run("instance_norm", {"X": x, "Scale": scale, "Bias": bias}, epsilon=1e-5)
    mu = x.mean((2, 3), keepdims=True)
    var = x.var((2, 3), keepdims=True)
    want = (x - mu) / np.sqrt(var + 1e-5) * scale[None, :, None, None] + bias[None, :, None, None]
    np.testing.assert_allclose(out["Y"], want, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(out["SavedMean"], mu.reshape(-1), rtol=1e-12)
    np.testing.assert_allclose(out["SavedVariance"], 1 / np.sqrt(var.reshape(-1) + 1e-5), rtol=1e-12)


def test_affine_channel_and_lrn():
    r = rng(18)
    x = r.standard_normal((2, 7, 3, 3))
    s, b = r.standard_normal(7), r.standard_normal(7)
    got = run("affine_channel", {"X": x, "Scale": s, "Bias": b})["Out"]
    np.testing.assert_allclose(got, x * s[:, None, None] + b[:, None, None])
    out = run("lrn", {"X": x}, n=5, k=2.0, alpha=1e-2, beta=0.75)
    mid = np.empty_like(x)
    for c in range(7):
        lo, hi = max(c - 2, 0), min(c + 2, 6)
        mid[:, c] = 2.0 + 1e-2 * (x[:, lo:hi + 1] ** 2).sum(1)
    np.testing.assert_allclose(out["MidOut"], mid, rtol=1e-12)
    np.testing.assert_allclose(out["Out"], x * mid ** -0.75, rtol=1e-12)
    nhwc = run("lrn", {"X": x.transpose(0, 2, 3, 1).copy()}, n=5, k=2.0, alpha=1e-2, beta=0.75,
               data_format="NHWC")
    np.testing.assert_allclose(nhwc["Out"], (x * mid ** -0.75).transpose(0, 2, 3, 1), rtol=1e-12)


# ============================================================================ embedding, prelu, pixel_shuffle

def test_lookup_table_v2_and_padding_idx():
    r = rng(19)
    w = r.standard_normal((10, 4)).astype(np.float32)
    ids = np.array([[1, 3, 3], [0, 9, 3]], np.int64)
    out = run("lookup_table_v2", {"Ids": ids, "W": w})["Out"]
    assert out.shape == (2, 3, 4) and out.dtype == np.float32
    np.testing.assert_array_equal(out, w[ids])
    out = run("lookup_table_v2", {"Ids": ids, "W": w}, padding_idx=3)["Out"]
    want = w[ids].copy()
    want[ids == 3] = 0
    np.testing.assert_array_equal(out, want)
    out = run("lookup_table_v2", {"Ids": np.array([7], np.int32), "W": w})["Out"]
    np.testing.assert_array_equal(out, w[[7]])


def test_lookup_table_v2_padding_rows_are_plus_zero_whatever_the_weights():
    # PaddlePaddle writes zeros into a padding row; W's row times 0 would give -0.0 and NaN
    w = np.array([[-1.0, -2.0], [np.inf, np.nan], [3.0, 4.0]], np.float32)
    out = run("lookup_table_v2", {"Ids": np.array([0, 1, 2], np.int64), "W": w}, padding_idx=0)["Out"]
    assert not np.signbit(out[0]).any() and (out[0] == 0).all()
    out = run("lookup_table_v2", {"Ids": np.array([1, 2], np.int64), "W": w}, padding_idx=1)["Out"]
    np.testing.assert_array_equal(out, [[0.0, 0.0], [3.0, 4.0]])


@pytest.mark.parametrize("bad", [10, -2])
def test_lookup_table_v2_out_of_range(bad):
    w = np.zeros((10, 4), np.float32)
    with pytest.raises(IndexError, match=rf"Ids\[0, 1\] = {bad} is out of range: valid values are \[0, 10\)"):
        run("lookup_table_v2", {"Ids": np.array([[1, bad]], np.int64), "W": w})


@pytest.mark.parametrize("mode,fmt", [("all", "NCHW"), ("channel", "NCHW"), ("channel", "NHWC"),
                                      ("element", "NCHW")])
def test_prelu(mode, fmt):
    r = rng(20)
    x = r.standard_normal((2, 3, 4, 5))
    alpha = {"all": r.random(1), "channel": r.random(5 if fmt == "NHWC" else 3),
             "element": r.random((1, 3, 4, 5))}[mode]
    got = run("prelu", {"X": x, "Alpha": alpha}, mode=mode, data_format=fmt)["Out"]
    want = np.empty_like(x)
    for idx in itertools.product(*map(range, x.shape)):
        if mode == "all":
            a = alpha[0]
        elif mode == "element":
            a = alpha[(0,) + idx[1:]]
        else:
            a = alpha[idx[3] if fmt == "NHWC" else idx[1]]
        want[idx] = x[idx] if x[idx] > 0 else a * x[idx]
    np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("fmt", ["NCHW", "NHWC"])
def test_pixel_shuffle(fmt):
    r = 2
    x = rng(21).standard_normal((2, 12, 3, 4))
    want = np.empty((2, 3, 6, 8))
    for n, c, h, w in itertools.product(range(2), range(3), range(6), range(8)):
        want[n, c, h, w] = x[n, c * r * r + (h % r) * r + (w % r), h // r, w // r]
    if fmt == "NHWC":
        got = run("pixel_shuffle", {"X": x.transpose(0, 2, 3, 1).copy()}, upscale_factor=r,
                  data_format="NHWC")["Out"]
        np.testing.assert_array_equal(got, want.transpose(0, 2, 3, 1))
    else:
        np.testing.assert_array_equal(run("pixel_shuffle", {"X": x}, upscale_factor=r)["Out"], want)


# ============================================================================ interpolation

F32 = np.float32


def paddle_ratio(in_size, out_size, align_corners, scale=-1.0):
    if out_size <= 1:
        return F32(0)
    if align_corners:
        return F32(in_size - 1) / F32(out_size - 1)
    return F32(1.0 / scale) if scale > 0 else F32(in_size) / F32(out_size)


def ref_bilinear(x, oh, ow, align_corners, align_mode, scale=(-1.0, -1.0)):
    """Paddle's BilinearInterpolation, element by element, with its float/double mix."""
    n, c, ih, iw = x.shape
    rh = paddle_ratio(ih, oh, align_corners, scale[0])
    rw = paddle_ratio(iw, ow, align_corners, scale[1])
    flag = align_mode == 0 and not align_corners
    out = np.zeros((n, c, oh, ow))

    def axis(k, ratio, size):
        lo = int(float(ratio) * (k + 0.5) - 0.5) if flag else int(ratio * F32(k))
        lo = max(lo, 0)
        hi = min(lo + 1, size - 1)
        src = max(F32(float(ratio) * (k + 0.5) - 0.5), F32(0))
        d = F32(src - F32(lo)) if flag else F32(ratio * F32(k) - F32(lo))
        return lo, hi, d, F32(1) - d

    for k, l in itertools.product(range(oh), range(ow)):
        yn, ys, dn, ds = axis(k, rh, ih)
        xw, xe, dw, de = axis(l, rw, iw)
        out[:, :, k, l] = (x[:, :, yn, xw] * ds * de + x[:, :, ys, xw] * dn * de
                           + x[:, :, yn, xe] * ds * dw + x[:, :, ys, xe] * dn * dw)
    return out


def ref_nearest(x, oh, ow, align_corners):
    n, c, ih, iw = x.shape
    rh, rw = paddle_ratio(ih, oh, align_corners), paddle_ratio(iw, ow, align_corners)
    out = np.zeros((n, c, oh, ow))
    for k, l in itertools.product(range(oh), range(ow)):
        ik = int(float(rh * F32(k)) + 0.5) if align_corners else int(rh * F32(k))
        il = int(float(rw * F32(l)) + 0.5) if align_corners else int(rw * F32(l))
        out[:, :, k, l] = x[:, :, ik, il]
    return out


@pytest.mark.parametrize("align_corners,align_mode", [(True, 1), (False, 0), (False, 1), (True, 0)])
@pytest.mark.parametrize("in_hw,out_hw", [((4, 5), (8, 7)), ((6, 6), (3, 4)), ((5, 3), (1, 6)),
                                           ((3, 4), (9, 12))])
def test_bilinear_interp_v2(align_corners, align_mode, in_hw, out_hw):
    x = rng(22).standard_normal((2, 3) + in_hw)
    got = run("bilinear_interp_v2", {"X": x}, out_h=out_hw[0], out_w=out_hw[1], interp_method="bilinear",
              align_corners=align_corners, align_mode=align_mode)["Out"]
    np.testing.assert_allclose(got, ref_bilinear(x, *out_hw, align_corners, align_mode), rtol=1e-6, atol=1e-6)
    nhwc = run("bilinear_interp_v2", {"X": x.transpose(0, 2, 3, 1).copy()}, out_h=out_hw[0],
               out_w=out_hw[1], interp_method="bilinear", align_corners=align_corners,
               align_mode=align_mode, data_layout="NHWC")["Out"]
    np.testing.assert_allclose(nhwc, got.transpose(0, 2, 3, 1), rtol=1e-12)


def test_bilinear_interp_v2_known_values():
    """align_corners=False, align_mode=0 is the half-pixel rule; 2x upsampling of [0, 1]:
    src = (k + 0.5)/2 - 0.5 clamped at 0 -> [0, 0.25, 0.75, 1]."""
    x = np.array([[[[0.0, 1.0]]]])
    got = run("bilinear_interp_v2", {"X": x}, out_h=1, out_w=4, interp_method="bilinear",
              align_corners=False, align_mode=0)["Out"]
    np.testing.assert_allclose(got.reshape(-1), [0, 0.25, 0.75, 1.0])
    got = run("bilinear_interp_v2", {"X": x}, out_h=1, out_w=4, interp_method="bilinear",
              align_corners=False, align_mode=1)["Out"]  # src = k/2
    np.testing.assert_allclose(got.reshape(-1), [0, 0.5, 1.0, 1.0])
    got = run("bilinear_interp_v2", {"X": x}, out_h=1, out_w=4, interp_method="bilinear",
              align_corners=True)["Out"]  # src = k/3
    np.testing.assert_allclose(got.reshape(-1), [0, 1 / 3, 2 / 3, 1.0], rtol=1e-6)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("in_hw,out_hw", [((4, 5), (8, 7)), ((6, 6), (3, 4)), ((3, 3), (7, 2)), ((3, 5), (6, 10)),
                                           ((2, 3), (8, 24)), ((3, 5), (6, 5)), ((4, 3), (4, 9))])
def test_nearest_interp_v2(align_corners, in_hw, out_hw):
    x = rng(23).standard_normal((2, 3) + in_hw)
    got = run("nearest_interp_v2", {"X": x}, out_h=out_hw[0], out_w=out_hw[1], interp_method="nearest",
              align_corners=align_corners)["Out"]
    np.testing.assert_array_equal(got, ref_nearest(x, *out_hw, align_corners))
    nhwc = run("nearest_interp_v2", {"X": x.transpose(0, 2, 3, 1).copy()}, out_h=out_hw[0], out_w=out_hw[1],
               interp_method="nearest", align_corners=align_corners, data_layout="NHWC")["Out"]
    np.testing.assert_array_equal(nhwc, got.transpose(0, 2, 3, 1))


@pytest.mark.parametrize("scale", [[2.0, 2.0], [4.0, 4.0], [8.0, 8.0], [2.0, 3.0]])
def test_nearest_integer_upsampling_is_one_copy(scale, monkeypatch):
    """A detector's 2x-8x upsampling (the scale attribute): each source cell repeated,
    written by one broadcast copy, no gather."""
    x = rng(28).standard_normal((1, 4, 5, 3)).astype(np.float32)
    want = ref_nearest(x, int(5 * scale[0]), int(3 * scale[1]), False)
    monkeypatch.setattr(np, "take", None)  # the gather path would fail
    got = run("nearest_interp_v2", {"X": x}, scale=scale, interp_method="nearest", align_corners=False)["Out"]
    assert got.dtype == np.float32 and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)


def test_interp_size_sources():
    x = rng(24).standard_normal((1, 2, 4, 6))
    base = dict(interp_method="bilinear", align_corners=False, align_mode=1)
    # scale attribute: out = int(in * scale); ratio = 1/scale
    got = run("bilinear_interp_v2", {"X": x}, scale=[1.5, 0.5], **base)["Out"]
    np.testing.assert_allclose(got, ref_bilinear(x, 6, 3, False, 1, scale=(1.5, 0.5)), rtol=1e-6)
    # Scale tensor (one value for both dims) beats the attribute
    got = run("bilinear_interp_v2", {"X": x, "Scale": np.array([2.0], np.float32)}, scale=[1.5, 0.5],
              **base)["Out"]
    np.testing.assert_allclose(got, ref_bilinear(x, 8, 12, False, 1, scale=(2.0, 2.0)), rtol=1e-6)
    # OutSize overrides the size but a given scale still sets the ratio (Paddle's kernel)
    got = run("bilinear_interp_v2", {"X": x, "OutSize": np.array([5, 7], np.int32)}, out_h=2, out_w=2,
              **base)["Out"]
    np.testing.assert_allclose(got, ref_bilinear(x, 5, 7, False, 1), rtol=1e-6)
    # SizeTensor wins over everything
    got = run("bilinear_interp_v2", {"X": x, "SizeTensor": [np.array([3], np.int32), np.array([9], np.int64)],
                                     "OutSize": np.array([5, 7], np.int32)}, **base)["Out"]
    np.testing.assert_allclose(got, ref_bilinear(x, 3, 9, False, 1), rtol=1e-6)
    # same size: a copy
    got = run("bilinear_interp_v2", {"X": x}, out_h=4, out_w=6, **base)["Out"]
    np.testing.assert_array_equal(got, x)
    with pytest.raises(ValueError, match="positive"):
        run("bilinear_interp_v2", {"X": x}, **base)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_interp_preserves_dtype(dtype):
    x = rng(25).standard_normal((1, 2, 3, 3)).astype(dtype)
    for op, method in [("bilinear_interp_v2", "bilinear"), ("nearest_interp_v2", "nearest")]:
        got = run(op, {"X": x}, out_h=6, out_w=5, interp_method=method)["Out"]
        assert got.dtype == dtype and got.shape == (1, 2, 6, 5)


# ============================================================================ softmax_with_cross_entropy

def ref_log_softmax_rows(z):
    out = np.empty_like(z, dtype=np.float64)
    for idx in np.ndindex(z.shape[:-1]):
        row = [float(v) for v in z[idx]]
        m = max(row)
        lse = m + math.log(math.fsum(math.exp(v - m) for v in row))
        out[idx] = [v - lse for v in row]
    return out


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_softmax_with_cross_entropy_hard_labels(axis):
    r = rng(26)
    logits = r.standard_normal((4, 5, 6))
    ax = axis % 3
    c = logits.shape[ax]
    label_shape = list(logits.shape)
    label_shape[ax] = 1
    label = r.integers(0, c, label_shape).astype(np.int64)
    out = run("softmax_with_cross_entropy", {"Logits": logits, "Label": label}, axis=axis)
    logp = np.moveaxis(ref_log_softmax_rows(np.moveaxis(logits, ax, -1)), -1, ax)
    np.testing.assert_allclose(out["Softmax"], np.exp(logp), rtol=1e-12)
    want = -np.take_along_axis(logp, label, axis=ax)
    assert out["Loss"].shape == tuple(label_shape)
    np.testing.assert_allclose(out["Loss"], want, rtol=1e-12)


def test_softmax_with_cross_entropy_ignore_index_and_bad_label():
    logits = rng(27).standard_normal((5, 4))
    label = np.array([[0], [-100], [3], [7], [1]], np.int64)
    with pytest.raises(IndexError, match="label 7"):
        run("softmax_with_cross_entropy", {"Logits": logits, "Label": label})
    label[3] = 5
    with pytest.raises(IndexError, match="label -100"):  # -100 is only ignored when ignore_index is -100
        run("softmax_with_cross_entropy", {"Logits": logits, "Label": label}, ignore_index=5)
    label[1] = 5
    out = run("softmax_with_cross_entropy", {"Logits": logits, "Label": label}, ignore_index=5)
    logp = ref_log_softmax_rows(logits)
    want = [-logp[0, 0], 0.0, -logp[2, 3], 0.0, -logp[4, 1]]
    np.testing.assert_allclose(out["Loss"].reshape(-1), want, rtol=1e-12)


def test_softmax_with_cross_entropy_soft_labels():
    r = rng(28)
    logits = r.standard_normal((3, 2, 5))
    label = r.random((3, 2, 5))
    label /= label.sum(-1, keepdims=True)
    out = run("softmax_with_cross_entropy", {"Logits": logits, "Label": label}, soft_label=True)
    want = -(label * ref_log_softmax_rows(logits)).sum(-1, keepdims=True)
    np.testing.assert_allclose(out["Loss"], want, rtol=1e-12)


def test_softmax_with_cross_entropy_is_stable_for_large_logits():
    logits = np.array([[1000.0, 0.0, -1000.0], [-5e4, 5e4, 0.0]], np.float32)
    label = np.array([[2], [0]], np.int64)
    out = run("softmax_with_cross_entropy", {"Logits": logits, "Label": label})
    np.testing.assert_allclose(out["Loss"].reshape(-1), [2000.0, 1e5], rtol=1e-6)
    assert np.isfinite(out["Softmax"]).all()
    np.testing.assert_allclose(out["Softmax"].sum(-1), 1.0, rtol=1e-6)


def test_softmax_with_cross_entropy_without_softmax():
    probs = np.array([[0.2, 0.8, 0.0], [0.5, 0.25, 0.25]])
    out = run("softmax_with_cross_entropy", {"Logits": probs, "Label": np.array([[1], [2]], np.int64)},
              use_softmax=False)
    np.testing.assert_allclose(out["Loss"].reshape(-1), [-math.log(0.8), -math.log(0.25)])
    np.testing.assert_array_equal(out["Softmax"], probs)
    out = run("softmax_with_cross_entropy", {"Logits": probs, "Label": np.array([[2], [0]], np.int64)},
              use_softmax=False)
    assert out["Loss"][0, 0] == 1e20  # Paddle's TolerableValue for -log(0)


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax_with_cross_entropy_dtypes(dtype):
    logits = rng(29).standard_normal((4, 10)).astype(dtype)
    label = np.arange(4, dtype=np.int64).reshape(4, 1)
    out = run("softmax_with_cross_entropy", {"Logits": logits, "Label": label})
    assert out["Softmax"].dtype == dtype and out["Loss"].dtype == dtype
    want = -np.take_along_axis(ref_log_softmax_rows(logits.astype(np.float64)), label, axis=1)
    np.testing.assert_allclose(out["Loss"].astype(np.float64), want, rtol=2e-3 if dtype == np.float16 else 1e-6)


# ============================================================================ other losses

def test_cross_entropy_and_cross_entropy2():
    x = np.array([[0.1, 0.6, 0.3], [0.2, 0.2, 0.6], [0.5, 0.5, 0.0]])
    label = np.array([[1], [-100], [2]], np.int64)
    y = run("cross_entropy", {"X": x, "Label": label})["Y"]
    np.testing.assert_allclose(y.reshape(-1), [-math.log(0.6), 0.0, 1e20])
    soft = np.array([[0, 1, 0], [0.5, 0.5, 0], [1, 0, 0]], np.float64)
    y = run("cross_entropy", {"X": x, "Label": soft}, soft_label=True)["Y"]
    np.testing.assert_allclose(y.reshape(-1), [-math.log(0.6), -math.log(0.2), -math.log(0.5)])
    out = run("cross_entropy2", {"X": x, "Label": label})
    np.testing.assert_allclose(out["Y"].reshape(-1), [-math.log(0.6), 0.0, 1e20])
    np.testing.assert_allclose(out["MatchX"].reshape(-1), [0.6, 0.0, 0.0])
    # XShape carries X's shape (plus a trailing 0 dim) for the gradient op, as in PaddlePaddle
    assert out["MatchX"].shape == (3, 1) and out["XShape"].shape == (3, 3, 0)


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("with_pos_weight", [False, True])
def test_sigmoid_cross_entropy_with_logits(normalize, with_pos_weight):
    r = rng(30)
    x = r.standard_normal((4, 5)) * 5
    label = r.random((4, 5))
    label[0, :2] = -100
    pw = r.random((4, 5)) + 0.5 if with_pos_weight else None
    got = run("sigmoid_cross_entropy_with_logits", {"X": x, "Label": label, "pos_weight": pw},
              normalize=normalize)["Out"]
    want = np.zeros_like(x)
    for idx in np.ndindex(x.shape):
        xi, li = x[idx], label[idx]
        if int(li) == -100:
            continue
        w = pw[idx] if with_pos_weight else 1.0
        # PaddlePaddle: (1 - label) * x + pos_weight * softplus(-x)
        want[idx] = (1 - li) * xi + w * (max(-xi, 0) + math.log(1 + math.exp(-abs(xi))))
    if normalize:
        want /= (label != -100).sum()
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_bce_huber_kldiv_label_smooth():
    r = rng(31)
    x = np.array([0.0, 0.3, 1.0, 0.9])
    lab = np.array([1.0, 0.0, 0.0, 1.0])
    got = run("bce_loss", {"X": x, "Label": lab})["Out"]
    np.testing.assert_allclose(got, [100.0, -math.log(0.7), 100.0, -math.log(0.9)])
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        run("bce_loss", {"X": np.array([1.5]), "Label": np.array([1.0])})

    a, b = r.standard_normal(6) * 3, r.standard_normal(6) * 3
    out = run("huber_loss", {"X": a, "Y": b}, delta=1.5)
    res = b - a
    np.testing.assert_allclose(out["Residual"], res)
    np.testing.assert_allclose(out["Out"], [0.5 * v * v if abs(v) <= 1.5 else 1.5 * (abs(v) - 0.75) for v in res])

    xk = np.log(r.random((3, 4)))
    tk = r.random((3, 4))
    tk[0, 0] = 0.0
    elem = np.where(tk > 0, tk * (np.log(np.where(tk > 0, tk, 1)) - xk), 0.0)
    for reduction, want in [("none", elem), ("sum", elem.sum()), ("mean", elem.mean()),
                            ("batchmean", elem.sum() / 3)]:
        got = run("kldiv_loss", {"X": xk, "Target": tk}, reduction=reduction)["Loss"]
        assert got.shape == np.shape(want)
        np.testing.assert_allclose(got, want, rtol=1e-12)

    xs = np.eye(4)[[0, 2, 3]]
    np.testing.assert_allclose(run("label_smooth", {"X": xs}, epsilon=0.1)["Out"], xs * 0.9 + 0.025)
    prior = np.array([[0.1, 0.2, 0.3, 0.4]])
    np.testing.assert_allclose(run("label_smooth", {"X": xs, "PriorDist": prior}, epsilon=0.2)["Out"],
                               xs * 0.8 + 0.2 * prior)


def test_accuracy():
    indices = np.array([[3, 1], [0, 2], [4, 4], [1, 0]], np.int64)
    out = run("accuracy", {"Out": np.zeros((4, 2), np.float32), "Indices": indices,
                           "Label": np.array([[1], [3], [4], [1]], np.int64)})
    assert out["Accuracy"].dtype == np.float32 and out["Accuracy"].shape == ()
    assert out["Correct"].dtype == np.int32 and out["Total"].dtype == np.int32
    np.testing.assert_allclose(out["Accuracy"], [0.75])
    assert out["Correct"] == 3 and out["Total"] == 4


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_losses_preserve_dtype(dtype):
    r = rng(32)
    x = r.random((3, 4)).astype(dtype) * 0.8 + 0.1
    lab = r.random((3, 4)).astype(dtype)
    assert run("bce_loss", {"X": x, "Label": lab})["Out"].dtype == dtype
    assert run("sigmoid_cross_entropy_with_logits", {"X": x, "Label": lab})["Out"].dtype == dtype
    assert run("huber_loss", {"X": x, "Y": lab}, delta=1.0)["Out"].dtype == dtype
    assert run("kldiv_loss", {"X": x, "Target": lab})["Loss"].dtype == dtype
    assert run("label_smooth", {"X": x}, epsilon=0.1)["Out"].dtype == dtype
    assert run("cross_entropy", {"X": x, "Label": np.zeros((3, 1), np.int64)})["Y"].dtype == dtype
