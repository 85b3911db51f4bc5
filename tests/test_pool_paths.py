"""pool2d's tiled max path (kernels/pool_tiles.py) against the general strided passes and
numpy's own reduction, and pool2d_grad over blocks of planes (kernels/nn.py
`_over_plane_blocks`) against a direct loop over PaddlePaddle's rule, block sizes forced
from one plane per block to everything in one. Ties (repeated values, all-equal windows,
a relu's zeros), NaN and -inf, NHWC, padding and every float dtype included."""
import itertools

import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import nn as knn
from keel.kernels import pool_tiles

BASE = dict(paddings=[0, 0], ceil_mode=False, exclusive=True, data_format="NCHW", pooling_type="max",
            global_pooling=False, adaptive=False, padding_algorithm="EXPLICIT")

# (shape NCHW, ksize): windows that tile the plane
TILED = [((2, 3, 6, 8), (2, 2)), ((1, 2, 9, 6), (3, 3)), ((2, 2, 4, 6), (2, 3)), ((3, 2, 6, 4), (1, 2)),
         ((2, 1, 4, 6), (2, 1)), ((64, 4, 28, 28), (2, 2))]
DTYPES = ["float32", "float64", "float16"]


def attrs(ksize, strides=None, **kw):
    return {**BASE, "ksize": list(ksize), "strides": list(strides or ksize), **kw}


def tied_input(shape, dtype, seed=0, specials=True):
    """Few distinct values, so that windows hold ties; a relu's zeros; all-equal windows;
    with `specials`, a NaN and a window of -inf (where Keel's max, numpy's, propagates NaN
    and gives -inf, PaddlePaddle's gives the values after the NaN and -FLT_MAX: the fast
    paths are held to Keel's general path there, the loop reference is not used)."""
    rng = np.random.default_rng(seed)
    x = np.maximum(rng.integers(-3, 4, shape), 0).astype(dtype)
    x.reshape(-1)[: shape[-1] * 2] = 1                     # the first windows: all equal
    if specials:
        x.reshape(-1)[-1] = np.nan
        x[0, 0, -2:, :2] = -np.inf
    return x


def pool(x, a):
    return call_kernel("pool2d", {"X": x}, a)["Out"]


def pool_grad(x, out, dout, a):
    return call_kernel("pool2d_grad", {"X": x, "Out": out, "Out@GRAD": dout}, a)["X@GRAD"]


@pytest.mark.parametrize("shape,ksize", TILED, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
def test_tiled_max_matches_the_strided_passes_and_numpy(shape, ksize, dtype, monkeypatch):
    assert pool_tiles.tiles_the_input(shape, ksize, ksize, [0] * 4, (shape[2] // ksize[0], shape[3] // ksize[1]),
                                      False)
    x = tied_input(shape, dtype)
    got = pool(x, attrs(ksize))
    n, c, h, w = shape
    kh, kw = ksize
    want = x.reshape(n, c, h // kh, kh, w // kw, kw).max(axis=(3, 5))
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got, want)
    monkeypatch.setattr(knn, "tiles_the_input", lambda *args: False)
    np.testing.assert_array_equal(got, pool(x, attrs(ksize)))


@pytest.mark.parametrize("shape,a", [
    ((2, 3, 7, 7), attrs((2, 2))),                                  # the last row and column in no window
    ((2, 3, 7, 7), attrs((2, 2), ceil_mode=True)),                  # the last windows run past the input
    ((2, 3, 6, 6), attrs((2, 2), paddings=[1, 1])),
    ((2, 3, 6, 6), attrs((3, 3), strides=(2, 2))),                  # overlapping
    ((2, 3, 6, 6), attrs((2, 2), strides=(3, 3))),                  # gaps
    ((2, 6, 6, 3), attrs((2, 2), data_format="NHWC")),
    ((2, 3, 6, 6), attrs((3, 3), adaptive=True)),                   # PaddlePaddle's windows of ksize
], ids=str)
def test_untiled_windows_take_the_strided_passes(shape, a, monkeypatch):
    calls = []
    monkeypatch.setattr(knn, "tiled_max", lambda *args: calls.append(args))
    x = tied_input(shape, "float32", specials=False)
    out = pool(x, a)
    assert not calls
    ref = np.asarray(pool_ref_and_grad(x, a, np.ones(out.shape))[0], dtype=x.dtype)
    np.testing.assert_array_equal(out, ref)


def windows_of(a, shape):
    """[(i, j, rows, cols)] of every output cell's clipped window, as PaddlePaddle runs them."""
    nhwc = a["data_format"] == "NHWC"
    h, w = (shape[1], shape[2]) if nhwc else (shape[2], shape[3])
    kh, kw = a["ksize"]
    sh, sw = a["strides"]
    p = a["paddings"]
    top, bottom, left, right = p if len(p) == 4 else (p[0], p[0], p[1], p[1])
    if a["adaptive"]:
        top = bottom = left = right = 0
        oh, ow = kh, kw
    else:
        extra = (lambda s: s - 1) if a["ceil_mode"] else (lambda s: 0)
        oh = (h - kh + top + bottom + extra(sh)) // sh + 1
        ow = (w - kw + left + right + extra(sw)) // sw + 1
    cells = []
    for i, j in itertools.product(range(oh), range(ow)):
        hs, ws = i * sh - top, j * sw - left
        cells.append((i, j, range(max(hs, 0), min(hs + kh, h)), range(max(ws, 0), min(ws + kw, w))))
    return (oh, ow), cells


def pool_ref_and_grad(x, a, dout):
    """Max pooling and its gradient by direct loops: Out starts at -FLT_MAX; each window's
    dOut goes to its first input (row-major) equal to Out (PaddlePaddle's MaxPool2dGrad)."""
    nhwc = a["data_format"] == "NHWC"
    xc = x.transpose(0, 3, 1, 2) if nhwc else x
    dc = dout.transpose(0, 3, 1, 2) if nhwc else dout
    (oh, ow), cells = windows_of(a, x.shape)
    n, c = xc.shape[:2]
    out = np.empty((n, c, oh, ow), dtype=np.float64)
    dx = np.zeros(xc.shape, dtype=np.float64)
    for b, ch in itertools.product(range(n), range(c)):
        for i, j, rows, cols in cells:
            v = -np.float64(np.finfo(np.float32).max) if x.dtype != np.float16 else -np.inf
            for y, z in itertools.product(rows, cols):
                v = np.maximum(v, xc[b, ch, y, z])
            out[b, ch, i, j] = v
            for y, z in itertools.product(rows, cols):
                if xc[b, ch, y, z] == np.asarray(v, dtype=x.dtype):
                    dx[b, ch, y, z] += dc[b, ch, i, j]
                    break
    if nhwc:
        out, dx = out.transpose(0, 2, 3, 1), dx.transpose(0, 2, 3, 1)
    return out, dx


GRAD_CASES = [
    ((2, 3, 6, 8), attrs((2, 2))),
    ((3, 2, 9, 6), attrs((3, 3))),
    ((2, 3, 7, 7), attrs((3, 3), strides=(2, 2), paddings=[1, 1])),       # overlapping, padded
    ((2, 3, 7, 8), attrs((3, 2), strides=(2, 2), paddings=[1, 1], ceil_mode=True)),
    ((2, 7, 7, 3), attrs((3, 3), strides=(2, 2), paddings=[1, 1], data_format="NHWC")),
    ((2, 6, 6, 3), attrs((2, 2), data_format="NHWC")),
]


@pytest.mark.parametrize("shape,a", GRAD_CASES, ids=str)
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("block_bytes", [1, 1 << 30], ids=["one plane per block", "one block"])
def test_max_pool_grad_routes_to_the_first_maximum(shape, a, dtype, block_bytes, monkeypatch):
    monkeypatch.setattr(knn, "POOL_GRAD_BLOCK_BYTES", block_bytes)
    x = tied_input(shape, dtype, seed=1, specials=False)
    out = pool(x, a)
    dout = np.random.default_rng(2).standard_normal(out.shape).astype(dtype)
    got = pool_grad(x, out, dout, a)
    want_out, want_dx = pool_ref_and_grad(x, a, dout.astype(np.float64))
    np.testing.assert_array_equal(out, want_out.astype(dtype))
    assert got.dtype == x.dtype and got.shape == x.shape
    if a["strides"][0] < a["ksize"][0] or a["strides"][1] < a["ksize"][1]:
        # overlapping windows add their parts in another order than the loop: a few ulps
        eps = float(np.finfo(np.float32 if dtype == "float16" else dtype).eps)
        np.testing.assert_allclose(got, want_dx.astype(dtype), rtol=4 * eps, atol=4 * eps)
    else:
        np.testing.assert_array_equal(got, want_dx.astype(dtype))


@pytest.mark.parametrize("shape,a", GRAD_CASES, ids=str)
@pytest.mark.parametrize("pooling_type", ["max", "avg"])
def test_pool_grad_blocks_equal_one_block(shape, a, pooling_type, monkeypatch):
    """Bit for bit, whatever the block size: each block runs the same passes on its planes."""
    a = {**a, "pooling_type": pooling_type, "exclusive": False}
    x = tied_input(shape, "float32", seed=3)
    out = pool(x, a)
    dout = np.random.default_rng(4).standard_normal(out.shape).astype("float32")
    results = []
    for block_bytes in (1, 200, 1 << 30):
        monkeypatch.setattr(knn, "POOL_GRAD_BLOCK_BYTES", block_bytes)
        results.append(pool_grad(x, out, dout, a))
    for r in results[1:]:
        np.testing.assert_array_equal(r.view(np.uint32), results[0].view(np.uint32))
