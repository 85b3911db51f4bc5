"""Depthwise convolution, NCHW (groups == input channels > 1, any channel multiplier m:
output channel c*m + j reads input channel c), by one of three formulations chosen by
shape. All hand the multiply-adds to BLAS in one batched product per block of channels:
numpy's elementwise passes (a multiply and an add per window offset) measured 1.5-3x
slower than copying the operands into columns and multiplying on 2-D rectangles, even
with each offset computed only where its input is in bounds, and 0.7-0.86x of the flat
im2col below on the long flat runs of a large plane.

- banded, for planes no taller than the kernel (h <= kh: a text recognizer's [C, 2-3, W]
  maps under 5x5 kernels), and for kernels of 5 rows and up on planes up to
  BANDED_ROWS_PER_KERNEL_ROW times as tall ([C, 6-12, W] under 5x5): output row i is a
  band over the input rows, so per channel
  out[i, :] = sum over (r, b) of A[i, r, b] * x[r, b-th column offset], with
  A[i, r, b] = W[a, b] where r = i*sh + a*dh - top (0 where no a fits). The rows a kernel
  row would read from the padding are simply not there: no height padding, no work for
  them (a 5x5 kernel on 2 rows does 2*5 multiply-adds per output instead of 25). Columns
  [h*kw, ow] per channel: one copy of the width-padded input at the kw column offsets
  (kw times the input, instead of kh*kw times the output). One batched
  [m*oh, h*kw] x [h*kw, ow] product per channel, written straight into NCHW.
- flat im2col (every other shape at stride 1): window offset (a, b) of a channel is one
  contiguous run of its flattened padded plane, so the columns are one copy of long runs
  (im2col's inner loops are output rows), multiplied on the padded width, then cropped.
- im2col in blocks (every other shape): the general formulation (kernels/conv.py
  `general_nchw`: the window view of the padded input copied into columns, one
  [m, kh*kw] x [kh*kw, oh*ow] product per channel).

The latter two over blocks of channels whose columns take about BLOCK_BYTES, so the GEMM
reads them back from the core's cache. Measured against the paths they replaced (CPU
time, one thread, medians of alternating blocks; figures in docs/architecture.md). Blocks
of channels are split across the cores when kernel threads are on (kernels/parallel.py).
"""
from __future__ import annotations

import functools

import numpy as np

from keel.kernels import conv  # (conv.py dispatches to this module: its helpers are read when called)
from keel.kernels.parallel import split_run

# Bytes of columns built and multiplied at a time (a block of channels). On the mobile CNNs'
# maps 1-4 MiB measured alike (512 KiB: 0.8-0.95x); the whole tensor at once 0.55-0.75x on
# the detector's large planes ([1, 40, 80, 120] 3x3: 1.55 vs 0.87 ms), whose columns then
# leave the cache before the GEMM reads them.
BLOCK_BYTES = 2 << 20
# The banded path on planes taller than the kernel: it does h*kw multiply-adds per output
# (zeros of the band included) where im2col does kh*kw, but copies h*kw columns per output
# row where im2col copies kh*kw per output through a 6-D strided view. Against the im2col
# blocks (CPU time, one thread, medians of alternating blocks, loaded machine): 5x5 on
# [1, 48, 6, 160] 2.26x, [1, 72, 6, 160] 2.41x, [1, 32, 6, 96] 1.76x, [1, 72, 12, 160]
# 1.55x, [1, 120, 6, 160] stride (2, 1) 1.54x, [1, 96, 12, 40] 1.14x; [1, 32, 14, 14]
# 0.84x; 3x3 on [1, 48, 6, 160] 1.16x but [1, 96, 7, 50] 0.76x, [1, 48, 6, 160] stride 2
# 0.86x, [1, 40, 12, 160] 0.84x: so for kernels of BANDED_TALL_MIN_ROWS rows and up only.
BANDED_TALL_MIN_ROWS = 5
BANDED_ROWS_PER_KERNEL_ROW = 2.5


def depthwise_nchw(xp, x, w, sh, sw, dh, dw, pads, out, epilogue=None):
    """out [N, C*m, oh, ow] (preallocated, contiguous) = x [N, C, H, W] (unpadded)
    convolved per channel with w [C*m, 1, kh, kw], `pads` [top, bottom, left, right];
    `epilogue(part, lo, hi)` applied to each part of the output holding channels [lo, hi)
    once it is computed."""
    h, kh = x.shape[2], w.shape[2]
    if h <= kh or (kh >= BANDED_TALL_MIN_ROWS and h <= BANDED_ROWS_PER_KERNEL_ROW * kh):
        _banded(xp, x, w, sh, sw, dh, dw, pads, out, epilogue)
    elif sh == sw == 1:
        _flat_im2col(xp, x, w, dh, dw, pads, out, epilogue)
    else:
        _im2col_blocks(xp, x, w, sh, sw, dh, dw, pads, out, epilogue)


def _im2col_blocks(xp, x, w, sh, sw, dh, dw, pads, out, epilogue):
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    oh, ow = out.shape[2:]
    m = o // c
    xpad = conv.pad_spatial(xp, x, pads, False)

    def channels(lo, hi):
        part = out[:, lo * m:hi * m]
        conv.general_nchw(xp, xpad[:, lo:hi], w[lo * m:hi * m], oh, ow, sh, sw, dh, dw, hi - lo, out=part)
        if epilogue is not None:
            epilogue(part, lo * m, hi * m)
    columns = n * kh * kw * oh * ow * x.itemsize
    split_run(xp, c, _in_blocks(xp, channels, columns), out.size * kh * kw)


def _flat_im2col(xp, x, w, dh, dw, pads, out, epilogue):
    """Stride 1: im2col on the flattened padded planes. Window offset (a, b) of input
    channel c is ONE contiguous run of its flattened padded plane (from a*dh*Wp + b*dw), so
    the columns [kh*kw, run] are one copy whose inner loops are runs of about oh*Wp
    elements (im2col's are rows of ow); one [m, kh*kw] x [kh*kw, run] product per channel
    on the padded width, then cropped into the output. Blocks of channels whose columns take
    about BLOCK_BYTES. Measured (CPU time, one thread, medians of alternating blocks, loaded
    machine) against the im2col blocks: 3x3 [1, 336, 20, 30] 1.45x, [1, 672, 10, 15] 1.88x,
    [1, 96, 7, 50] 1.21x, [1, 24, 12, 96] / [1, 8, 24, 160] / [1, 40, 12, 160] 1.08-1.10x,
    [1, 32, 6, 96] 1.03x, [1, 48, 6, 160] 0.92-1.03x; 5x5 [1, 64, 40, 60] 1.49x, [1, 120,
    20, 30] 1.63x, [1, 32, 14, 14] 1.94x; x2 multiplier [1, 40, 40, 60] 1.28x. Against the
    flat taps it replaced on large planes (one multiply and one add per window offset over
    the same runs): 3x3 [1, 16, 160, 240] 1.30x, [1, 40, 80, 120] 1.32x, [1, 8, 160, 240]
    1.16x, [1, 16, 90, 100] 1.43x; 5x5 [1, 24, 80, 120] 1.39x."""
    n, c = x.shape[:2]
    o, _, kh, kw = w.shape
    oh, ow = out.shape[2:]
    m = o // c
    flat, wp = _flat_padded(xp, x, pads)
    run = (oh - 1) * wp + ow
    s0, s1, s2 = flat.strides
    win = conv.strided_view(xp, flat, (n, c, kh, kw, run), (s0, s1, dh * wp * s2, dw * s2, s2))
    wt = w.reshape(c, m, kh * kw)

    def channels(lo, hi):
        cols = win[:, lo:hi].reshape(n, hi - lo, kh * kw, run)            # the copy
        acc = xp.empty((n, hi - lo, m, oh * wp), dtype=x.dtype)
        xp.matmul(wt[lo:hi], cols, out=acc[..., :run])
        part = out[:, lo * m:hi * m]
        part[...] = acc.reshape(n, (hi - lo) * m, oh, wp)[:, :, :, :ow]
        if epilogue is not None:
            epilogue(part, lo * m, hi * m)
    columns = n * kh * kw * run * x.itemsize
    split_run(xp, c, _in_blocks(xp, channels, columns), out.size * kh * kw)


def _flat_padded(xp, x, pads):
    """x padded and flattened per channel: ([N, C, Hp*Wp], Wp); x itself when unpadded."""
    n, c, h, wd = x.shape
    top, bottom, left, right = pads
    if not any(pads):
        return x.reshape(n, c, h * wd), wd
    hp, wp = h + top + bottom, wd + left + right
    flat = xp.zeros((n, c, hp * wp), dtype=x.dtype)
    flat.reshape(n, c, hp, wp)[:, :, top:top + h, left:left + wd] = x
    return flat, wp


def _offsets(kh, kw, dh, dw, wp):
    """Where window offset (a, b)'s run starts in the flattened padded plane."""
    return [a * dh * wp + b * dw for a in range(kh) for b in range(kw)]


def band_filter(xp, w, h, oh, sh, dh, top):
    """A [O, oh, h, kw] with A[o, i, r, b] = W[o, 0, a, b] where r = i*sh + a*dh - top for
    some kernel row a, else 0: output row i's weights over the input rows. The kernel rows
    that fit are a run of W's rows, placed every dh-th input row: one slice copy per output
    row (measured against a gather of W's rows through an [oh, h] index: 1.34-1.98x on the
    recognizer's [C, 2-6, W] 5x5 maps; 0.6x on 4-5 channels, microseconds either way)."""
    o, _, kh, kw = w.shape
    band = xp.zeros((o, oh, h, kw), dtype=w.dtype)
    for i, r0, r1, a0, a1 in _band_runs(h, oh, sh, dh, top, kh):
        band[:, i, r0:r1:dh] = w[:, 0, a0:a1]
    return band


@functools.lru_cache(maxsize=256)
def _band_runs(h, oh, sh, dh, top, kh):
    """For each output row i whose window meets an input row: (i, r0, r1, a0, a1), kernel
    rows a0 <= a < a1 reading input rows r0, r0 + dh, ... < r1 (r = i*sh + a*dh - top)."""
    runs = []
    for i in range(oh):
        a0 = max(0, -(-(top - i * sh) // dh))               # the first row with r >= 0
        a1 = min(kh, (h - 1 + top - i * sh) // dh + 1)      # past the last with r < h
        if a1 > a0:
            r0 = i * sh + a0 * dh - top
            runs.append((i, r0, r0 + (a1 - a0 - 1) * dh + 1, a0, a1))
    return tuple(runs)


def _banded(xp, x, w, sh, sw, dh, dw, pads, out, epilogue):
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = out.shape[2:]
    m = o // c
    top, _, left, _ = pads
    width = (ow - 1) * sw + (kw - 1) * dw + 1                 # the columns the windows span
    kept = max(0, min(wd, width - left))                      # input columns they read
    xw = conv.pad_spatial(xp, x[..., :kept], [0, 0, min(left, width), max(0, width - left - kept)], False)
    # [N, C, h, ow, 1, kw] windows of one row -> [N, C, h, kw, ow]
    win = conv.windows(xp, xw, h, ow, 1, kw, 1, sw, 1, dw, False)[:, :, :, :, 0, :].transpose(0, 1, 2, 4, 3)
    band = band_filter(xp, w, h, oh, sh, dh, top).reshape(c, m * oh, h * kw)

    def channels(lo, hi):
        cols = win[:, lo:hi].reshape(n, hi - lo, h * kw, ow)  # the copy
        part = out[:, lo * m:hi * m]
        xp.matmul(band[lo:hi], cols, out=part.reshape(n, hi - lo, m * oh, ow))
        if epilogue is not None:
            epilogue(part, lo * m, hi * m)
    columns = n * h * kw * ow * x.itemsize
    split_run(xp, c, _in_blocks(xp, channels, columns), out.size * h * kw)


def _in_blocks(xp, body, bytes_per_item, budget=None):
    """body(lo, hi) over consecutive sub-ranges of about `budget` bytes (BLOCK_BYTES) each
    (numpy; cupy takes the whole range at once)."""
    if xp is not np:
        return body
    step = max(1, (budget or BLOCK_BYTES) // max(bytes_per_item, 1))

    def blocks(lo, hi):
        for start in range(lo, hi, step):
            body(start, min(start + step, hi))
    return blocks
