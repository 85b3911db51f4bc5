"""Dense convolution GEMMs with the batch folded into their N dimension (NCHW forward;
kernels/conv.py chooses them by shape).

numpy's stacked matmul calls BLAS once per matrix of the stack: a convolution done as
one [O, K] x [K, oh*ow] product per sample makes N small GEMMs, each of which a threaded
BLAS splits across its threads and joins again. One GEMM over all the samples' columns,
[O, K] x [K, N*oh*ow], is one split and one join: on the quiet 2-core machine 2.2x for
[32, 144] x [64 x 144, 196] (the lead's figure, OpenBLAS 2 threads); on the loaded
machine these paths were written on, where every join waits for a core other processes
hold, the folded GEMM measured 3.4x in wall time (2 threads), the stacked taps below
2.2-7.8x. In CPU time of one thread both are within 0.96-1.2x of the per-sample forms
(figures in the functions' docstrings), so the gain is the threads', and they are taken
where that CPU time does not lose.

- `folded_im2col`: im2col written straight in [K, N*oh*ow] order (one copy, as the
  per-sample columns were), one GEMM -> [O, N*oh*ow], one transposing copy into NCHW.
  For blocks of samples whose columns take about FOLD_BLOCK_BYTES, so that the GEMM's
  result is still in cache when it is transposed.
- `folded_channels_last`: the batch folded into the GEMM's M instead, over columns copied
  from a channels-last copy of the padded input, where C is wide and the output narrow
  (`channels_last_pays`: the copy's runs are C long where im2col's are ow long).
- `stacked_taps`: one group, stride 1, O <= C/2 (kernels/conv.py `_shifted_gemms`' shape):
  ONE GEMM of all the window offsets' filters stacked, W_all [kh*kw*O, C], times the
  flattened padded input [C, N*Hp*Wp] (the samples one after another), then the kh*kw
  shifted runs of its [O, ...] row blocks summed straight into the output.
"""
from __future__ import annotations

# Fold the batch when the GEMM's depth K = C/g*kh*kw is at least this: below it the GEMM
# is cheap and the transposing copy of the output dominates ([64, 1, 28, 28] -> 16 3x3,
# K=9: 0.77x of the per-sample form in CPU time; K=144 and up: 0.97-1.2x).
FOLD_MIN_DEPTH = 64
# Columns (bytes) per folded GEMM, about a core's L2 (the GEMM's result is then still in
# cache when it is transposed). Against the per-sample form (CPU time, one thread):
# [16, 64, 32, 32] -> 64 3x3 measured 1.19x at 4 MiB, 1.09x at 8 MiB, 0.96x all in one
# (37 MiB). Against 4 MiB blocks (CPU time, one thread, SkylakeX kernels, medians of
# alternating calls): at 1 MiB [64, 16, 14, 14] -> 32 (the benchmark CNN's layer 2)
# 1.08-1.10x, [8, 32, 28, 28] -> 64 1.23x, [8, 64, 16, 16] -> 128 1.14x, [16, 32, 32, 32]
# -> 32 1.26x, [16, 64, 32, 32] -> 64 1.0x; 128-512 KiB were no faster than 1 MiB.
FOLD_BLOCK_BYTES = 1 << 20
# The stacked taps' GEMM result (bytes) computed at a time: beyond it, blocks of output
# columns ([1, 96, 80, 120] -> 24 3x3, 8.6 MB: 0.99x of the per-tap GEMMs in one piece).
STACKED_BLOCK_BYTES = 16 << 20
# Multiply-adds from which the taps are stacked into one GEMM; below it, a GEMM per tap.
# A small stacked GEMM is big enough for OpenBLAS to thread where the per-tap ones are
# not: on the loaded machine (2 threads, wall time) [1, 96, 10, 15] -> 24 3x3 (3.5 M)
# ran 0.09-0.32x and [4, 16, 14, 14] -> 8 (1.1 M) 0.26-0.56x, each join waiting for a
# core, while [1, 96, 20, 30] -> 24 (13 M) ran 3.5-7.8x. In CPU time both are within noise.
STACKED_MIN_WORK = 8_000_000


def folded_im2col(xp, win, w, out):
    """One group, N > 1: out [N, O, oh, ow] = W [O, K] x columns [K, n*oh*ow] for blocks of
    n samples of the window view `win` [N, C, oh, ow, kh, kw] (kernels/conv.py `windows`).
    CPU time of one thread against the per-sample batched matmul (numpy 2.4, OpenBLAS, medians of alternating blocks, loaded machine):
    [64, 16, 14, 14] -> 32 3x3: 1.01x; [8, 32, 28, 28] -> 64: 0.97x; [8, 64, 16, 16] -> 128
    stride 2: 1.01x; [16, 64, 32, 32] -> 64: 1.19x."""
    n, c, oh, ow, kh, kw = win.shape
    o = w.shape[0]
    k, p = c * kh * kw, oh * ow
    wmat = w.reshape(o, k)
    block = max(1, min(n, FOLD_BLOCK_BYTES // (k * p * win.itemsize)))
    cols_buf = xp.empty(k * block * p, dtype=win.dtype)
    res_buf = xp.empty(o * block * p, dtype=win.dtype)
    for lo in range(0, n, block):
        m = min(n, lo + block) - lo
        cols = cols_buf[:k * m * p].reshape(k, m * p)
        cols.reshape(c, kh, kw, m, oh, ow)[...] = win[lo:lo + m].transpose(1, 4, 5, 0, 2, 3)
        res = res_buf[:o * m * p].reshape(o, m * p)
        xp.matmul(wmat, cols, out=res)
        out[lo:lo + m] = res.reshape(o, m, oh, ow).transpose(1, 0, 2, 3)
    return out


# The channels-last columns from this many input channels (runs of C contiguous values to
# copy; fewer were not measured) and up to this output width (NCHW's runs are ow long).
CHANNELS_LAST_MIN_C = 16
CHANNELS_LAST_MAX_OW = 16


def channels_last_pays(c: int, ow: int) -> bool:
    """Whether `folded_channels_last` is taken over `folded_im2col` (one group, N > 1, a
    GEMM depth of at least FOLD_MIN_DEPTH). CPU time of one thread against it (3x3, about
    2 M input values, medians of alternating calls, SkylakeX kernels), O from C/2 to 2C:
    output width 7: C 32 1.39-1.82x, C 64 1.29-1.77x; 14: C 16 1.12-1.28x (the benchmark
    CNN's layer 2 [64, 16, 14, 14] -> 32: 1.16-1.17x), C 32 1.11-1.27x, C 64 1.06-1.35x
    (stride 2 from 28: 1.05-1.31x); 16: [16, 32, 16, 16] -> 32 1.20x, [8, 64, 16, 16] -> 64
    1.06x but -> 128 0.95x; 28: C 16 0.92-1.06x, C 32 0.87-1.08x, hence the width bound."""
    return c >= CHANNELS_LAST_MIN_C and ow <= CHANNELS_LAST_MAX_OW


def folded_channels_last(xp, win, w, out):
    """One group, N > 1: out [N, O, oh, ow] = W x columns for blocks of n samples of the
    window view `win` [N, oh, ow, kh, kw, C] of a channels-last copy of the padded input
    (kernels/conv.py `windows`): the columns [n*oh*ow, kh*kw*C] copied in runs of C
    contiguous values (NCHW's im2col copies runs of ow), one GEMM columns x W^T
    [kh*kw*C, O] -> [n*oh*ow, O] (the batch in the GEMM's M), one transposing copy into
    NCHW. Blocks of about FOLD_BLOCK_BYTES of columns."""
    n, oh, ow, kh, kw, c = win.shape
    o = w.shape[0]
    k, p = c * kh * kw, oh * ow
    wmat = w.transpose(2, 3, 1, 0).reshape(k, o)                              # rows in (a, b, c) order
    block = max(1, min(n, FOLD_BLOCK_BYTES // (k * p * win.itemsize)))
    cols_buf = xp.empty(block * p * k, dtype=win.dtype)
    res_buf = xp.empty(block * p * o, dtype=win.dtype)
    for lo in range(0, n, block):
        m = min(n, lo + block) - lo
        cols = cols_buf[:m * p * k].reshape(m * p, k)
        cols.reshape(m, oh, ow, kh, kw, c)[...] = win[lo:lo + m]
        res = res_buf[:m * p * o].reshape(m * p, o)
        xp.matmul(cols, wmat, out=res)
        out[lo:lo + m] = res.reshape(m, oh, ow, o).transpose(0, 3, 1, 2)
    return out


def stacked_taps(xp, x, w, dh, dw, pads, out):
    """One group, stride 1: out [N, O, oh, ow] = sum over window offsets t = (a, b) of
    W[:, :, a, b] times the input shifted by (a*dh, b*dw). On the flattened padded input
    F [C, N*Hp*Wp] (samples one after another), offset t's operand is ONE contiguous run
    of F starting at a*dh*Wp + b*dw, so R = W_all [kh*kw*O, C] x F is one GEMM (its M is
    kh*kw*O: 216 for a 3x3 24-channel neck, where one GEMM per tap had 24 rows), and
    out[n, :, i, j] = sum over t of R[t*O:(t+1)*O, n*Hp*Wp + i*Wp + j + start_t]: the taps'
    row blocks, shifted, summed contiguously on the padded width, then cropped into the
    output through a strided view. CPU time of one thread against one GEMM per tap and
    sample: [1, 96, 80, 120] -> 24 3x3: 0.99-1.09x, [1, 96, 40, 60] -> 24: 0.90-1.10x,
    [1, 96, 20, 30] -> 24: 1.0-1.02x, [1, 48, 80, 120] -> 24: 1.03-1.06x, [8, 96, 40, 60]
    -> 24: 1.07-1.11x, [1, 96, 80, 120] -> 48: 0.96x; wall time with OpenBLAS's 2 threads
    on the loaded machine: 2.2-2.5x, 2.2-3.5x, 3.5-7.8x, 5.7x, 4.6x, 2.3x. Below
    STACKED_MIN_WORK the taps keep a GEMM each (see there)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    oh, ow = out.shape[2:]
    top, bottom, left, right = pads
    hp, wp = h + top + bottom, wd + left + right
    plane = hp * wp
    if n == 1 and not any(pads):
        flat = x.reshape(c, plane)
    else:
        flat = xp.zeros((c, n, hp, wp), dtype=x.dtype)
        flat[:, :, top:top + h, left:left + wd] = x.transpose(1, 0, 2, 3)
        flat = flat.reshape(c, n * plane)
    taps = kh * kw
    starts = [a * dh * wp + b * dw for a in range(kh) for b in range(kw)]
    wall = w.transpose(2, 3, 0, 1).reshape(taps * o, c)
    # the output's sample n, row i is R's columns n*plane + i*wp + [0, ow) (plus start_t)
    span = (n - 1) * plane + (oh - 1) * wp + ow
    group = taps if taps * o * c * span >= STACKED_MIN_WORK else 1   # taps per GEMM
    item = x.itemsize
    rows = max(1, min(oh, STACKED_BLOCK_BYTES // (group * o * wp * item))) if n == 1 else oh
    samples = 1 if n == 1 else max(1, min(n, STACKED_BLOCK_BYTES // (group * o * plane * item)))
    for s0 in range(0, n, samples):
        s1 = min(n, s0 + samples)
        for i0 in range(0, oh, rows):
            i1 = min(oh, i0 + rows)
            first = s0 * plane + i0 * wp
            last = min(span, (s1 - 1) * plane + (i1 - 1) * wp + ow)
            length = last - first
            acc = None
            for t0 in range(0, taps, group):
                t1 = min(taps, t0 + group)
                res = xp.matmul(wall[t0 * o:t1 * o], flat[:, first + starts[t0]:last + starts[t1 - 1]])
                for t in range(t0, t1):
                    shift = starts[t] - starts[t0]
                    tap = res[(t - t0) * o:(t - t0 + 1) * o, shift:shift + length]
                    if acc is None:
                        acc, fresh = tap, False          # a view of R: the next tap makes the sum
                    elif not fresh:
                        acc, fresh = xp.add(acc, tap), True
                    else:
                        xp.add(acc, tap, out=acc)
            dst = out[s0:s1, :, i0:i1].transpose(1, 0, 2, 3)                # [O, n', i', ow]
            dst[...] = xp.lib.stride_tricks.as_strided(
                acc, shape=dst.shape, strides=(acc.strides[0], plane * item, wp * item, item))
    return out
