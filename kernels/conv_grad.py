"""Convolution gradients (NCHW, one group) computed a chunk of samples at a time.

kernels/nn.py's general gradients build the whole column matrix at once: dFilter copies
im2col of the padded input ([C*kh*kw, N*oh*ow], 9x the input for 3x3) and runs one GEMM
over it; dInput runs one GEMM W^T dy into columns of that size, then adds each window
offset's block into the input gradient (col2im). Both then stream a column matrix of
several MiB through memory twice. Here the same two formulations run over chunks of
samples whose columns fit in about CHUNK_BYTES (the core's L2): the copy, the GEMM and
col2im's adds reread cache. dFilter sums one small [O, C*kh*kw] GEMM result per chunk.

Measured (numpy 2.4, OpenBLAS, one thread, CPU time, medians of alternating blocks in one
process on a loaded 2-core machine) on the CNN training benchmark's second layer
(x [64, 16, 14, 14], W [32, 16, 3, 3]): dFilter 2.40 -> 2.04-2.06 ms (1.13-1.18x),
dInput (stride 1) 2.54 -> 2.18-2.24 ms (1.13-1.17x); chunks of 1-2 samples were slower
than the whole (GEMM call overhead), 16 samples (about 2 MiB) gained less.
Other formulations measured and left out: nine shifted GEMMs over the flattened padded
grid with no im2col at all (dFilter 0.93x, dInput 0.97x: [O, C] x [C, N*Hp*Wp] GEMMs
with small outputs, and 1.3x the multiplies on a 14x14 plane's padding) and dInput as
one GEMM over an im2col of the output gradient (0.64x: that copy is 18 MiB).

The operand order. Both dFilter operands are [rows, chunk*oh*ow] row-major, so the GEMM
contracts over both operands' rows (an "NT" product), and which of them is the left one
matters: OpenBLAS's SkylakeX kernels ran [144, L] x [L, 32] (the columns on the left,
giving dFilter^T) at 50 GMAC/s against 36 for [32, L] x [L, 144] (one thread, L = 12544).
So the longer side (K = C*kh*kw or O) is the GEMM's M. Measured on whole dFilter calls
(CPU time, one thread, medians of alternating blocks in one process, SkylakeX kernels):
[64, 16, 14, 14] -> 32 3x3 (K 144, O 32) 1.34-1.45x; [4, 32, 20, 20] -> 32 5x5 (K 800)
1.63x; [8, 64, 14, 14] -> 16 (K 576) 1.66x; [8, 32, 28, 28] -> 64 1.27x; [16, 64, 16, 16]
-> 64 1.35x; K 9 -> 16 0.98x (noise); and the other way where O > K: [16, 4, 28, 28] -> 256
1x1 0.73x, [8, 8, 16, 16] -> 128 0.94x, hence the rule. With the Haswell kernels (the
environment's default) both orders were within 0.96-1.14x.

The formulations, chosen by shape (the constants below, with what measured them); each is
tested against a float64 reference with the others forced (tests/test_conv_grad_paths.py):
- dFilter, one GEMM per chunk over NCHW-order columns (the general one);
- the same over channels-last columns from CHANNELS_LAST_MIN_C channels;
- one GEMM per sample where the result is thin (PER_SAMPLE_MAX_SIDE);
- dInput (stride 1), one GEMM per chunk and kh*kw shifted adds (col2im);
- the filter's column offsets folded into the GEMM, kh shifted adds (SHIFTED_COLUMNS_MIN_RATIO).
Also measured and left out (CPU time, one thread, SkylakeX kernels): dFilter over columns
as runs of the padded row (oh*Wp per sample: long copies, 14% more GEMM columns) 1.03-1.13x,
and its extra columns multiply real input values by dy's zeros, so a non-finite input
would reach taps that never read it; dFilter with dy copied transposed for an "NN" GEMM
1.0x (the copy costs what the GEMM gains); dInput with all kh*kw offsets stacked along the
GEMM's depth (no adds at all) 0.86-0.89x on the benchmark's layer 2, 0.3-0.66x where C is
small, 2.1-2.4x only where O is small against C (one formulation fewer instead).
"""
from __future__ import annotations

from keel.kernels.conv import windows

# Bytes of column matrix per chunk of samples: about a core's L2.
CHUNK_BYTES = 1 << 20
# dInput (stride 1) by shifted columns when C * this >= O. CPU time of one thread against
# `_input_grad_col2im` (medians of alternating blocks in one process, SkylakeX kernels):
# C/O 0.5-32: 1.13-2.1x ([64, 16, 14, 14] <- 32 3x3 1.20x, [8, 32, 28, 28] <- 64 1.13x,
# [16, 64, 16, 16] <- 64 1.29x, [8, 128, 7, 7] <- 128 1.30x, [4, 32, 20, 20] <- 32 5x5
# 1.78x, [2, 256, 10, 10] <- 16 1.95x); C/O 0.25: 1.07x; below: [64, 2, 28, 28] <- 16
# 0.67x, [16, 3, 32, 32] <- 64 0.36x, C = 1: 0.43x (the GEMM's M = kh*C is too thin).
SHIFTED_COLUMNS_MIN_RATIO = 3
# dFilter as one GEMM per sample (not per chunk) when C*kh*kw or O is at most this. CPU
# time of one thread against the chunked GEMM (medians of alternating blocks in one
# process, SkylakeX kernels): [64, 1, 28, 28] -> 16 3x3 (the CNN benchmark's first layer,
# K 9) 2.2-3.2x; [16, 4, 28, 28] -> 256 1x1 5.3-8.2x; [32, 1, 28, 28] -> 32 5x5 2.1x;
# [64, 3, 32, 32] -> 16 1.9x; [8, 2, 32, 32] -> 32 2.1x; [8, 16, 16, 16] -> 8 1.3x;
# [8, 32, 14, 14] -> 16 1.03x; but where both sides are wider: [64, 16, 14, 14] -> 32
# (K 144) 0.96x, [4, 32, 20, 20] -> 32 5x5 0.93x, [16, 64, 16, 16] -> 64 0.96x. (Haswell
# kernels: the first layer 1.16-1.19x, the 1x1 2.5x, layer 2 0.95-0.99x.)
PER_SAMPLE_MAX_SIDE = 16
# dFilter's chunk columns in channels-last order from C channels up. CPU time of one thread
# against the NCHW-order columns (medians of alternating blocks in one process, SkylakeX
# kernels): [64, 16, 14, 14] -> 32 3x3 0.94-1.16x over six runs (median 1.06x),
# [8, 32, 28, 28] -> 64 1.09-1.10x, [4, 32, 20, 20] -> 32 5x5 1.13-1.23x, [16, 64, 16, 16]
# -> 64 1.13-1.27x, [2, 128, 14, 14] -> 128 1.04x (Haswell kernels: 1.09-1.18x); with fewer
# channels the copied runs are short: C = 4 0.86-0.97x, C = 3 0.84x.
CHANNELS_LAST_MIN_C = 16


def samples_per_chunk(n: int, bytes_per_sample: int) -> int:
    return max(1, min(n, CHUNK_BYTES // max(bytes_per_sample, 1)))


def filter_grad_chunked(xp, xpad, dy, kh, kw, sh, sw, dh, dw):
    """dFilter [O, C, kh, kw] of the one-group NCHW convolution of padded input xpad
    [N, C, Hp, Wp] with output gradient dy [N, O, oh, ow], a chunk of samples at a time,
    by one of three formulations of the same GEMM: one per sample where the result is thin
    (min(C*kh*kw, O) <= PER_SAMPLE_MAX_SIDE); else one per chunk, its columns copied in
    channels-last order where C >= CHANNELS_LAST_MIN_C, else in NCHW's."""
    n, o, oh, ow = dy.shape
    c = xpad.shape[1]
    k, plane = c * kh * kw, oh * ow
    if min(k, o) <= PER_SAMPLE_MAX_SIDE:
        product, channels_last = _per_sample_products, False
    elif c >= CHANNELS_LAST_MIN_C:
        product, channels_last = _chunk_product_channels_last, True
        xpad = xp.ascontiguousarray(xpad.transpose(0, 2, 3, 1))
    else:
        product, channels_last = _chunk_product, False
    win = windows(xp, xpad, oh, ow, kh, kw, sh, sw, dh, dw, channels_last)
    step = samples_per_chunk(n, k * plane * dy.itemsize)
    cols = xp.empty(step * k * plane, dtype=dy.dtype)
    dys = xp.empty(o * step * plane, dtype=dy.dtype)
    dy3 = dy.reshape(n, o, plane)
    total = None
    for lo in range(0, n, step):
        m = min(n, lo + step) - lo
        part = product(xp, cols[:m * k * plane], dys[:m * o * plane], win[lo:lo + m], dy3[lo:lo + m], k >= o)
        if total is None:
            total = part
        else:
            total += part
    if channels_last:                                   # [O, (a, b, c)]
        return total.reshape(o, kh, kw, c).transpose(0, 3, 1, 2)
    return (total.T if k >= o else total).reshape(o, c, kh, kw)


# Each formulation contracts a chunk of m samples: the window view `win` ([m, C, oh, ow,
# kh, kw], or [m, oh, ow, kh, kw, C] channels last) against dy3 [m, O, oh*ow], using the
# flat scratch buffers `cols` (m*K*oh*ow) and `dys` (m*O*oh*ow). It returns dFilter's
# [K, O] (K in (c, a, b) order) when `columns_left`, else [O, K]; the GEMM's M is then the
# longer side ("The operand order" in the module doc). The channels-last one returns
# [O, K] with K in (a, b, c) order whatever `columns_left`.

def _chunk_product(xp, cols, dys, win, dy3, columns_left):
    """The columns [K, m*oh*ow] (one copy from the window view) times dy's [O, m*oh*ow]
    (one copy), contracted over both."""
    m, o, plane = dy3.shape
    _, c, oh, ow, kh, kw = win.shape
    k = c * kh * kw
    cols = cols.reshape(k, m * plane)
    cols.reshape(c, kh, kw, m, oh, ow)[...] = win.transpose(1, 4, 5, 0, 2, 3)
    dys = dys.reshape(o, m * plane)
    dys.reshape(o, m, plane)[...] = dy3.transpose(1, 0, 2)
    if columns_left:
        return xp.matmul(cols, dys.T)
    return xp.matmul(dys, cols.T)


def _chunk_product_channels_last(xp, cols, dys, win, dy3, columns_left):
    """The columns as [m*oh*ow, kh*kw*C] (copied from a channels-last copy of the input:
    runs of C contiguous values, where NCHW's runs are ow long) and dy's [O, m*oh*ow]: one
    "NN" GEMM, which OpenBLAS runs faster than the other two operand layouts (0.94 vs
    1.16-1.62 ms for [32, 12544] x [12544, 144], SkylakeX kernels, one thread)."""
    m, o, plane = dy3.shape
    _, oh, ow, kh, kw, c = win.shape
    k = c * kh * kw
    cols = cols.reshape(m * plane, k)
    cols.reshape(m, oh, ow, kh, kw, c)[...] = win
    dys = dys.reshape(o, m * plane)
    dys.reshape(o, m, plane)[...] = dy3.transpose(1, 0, 2)
    return xp.matmul(dys, cols)


def _per_sample_products(xp, cols, dys, win, dy3, columns_left):
    """One GEMM per sample (a stacked matmul, dy read in place: `dys` is not used), summed.
    When K or O is small, OpenBLAS runs one long-contraction GEMM far below its speed
    (16 x 9 outputs over 50176 products: 15 GMAC/s) where the per-sample ones are quick."""
    m, o, plane = dy3.shape
    _, c, oh, ow, kh, kw = win.shape
    cols = cols.reshape(m, c * kh * kw, plane)
    cols.reshape(m, c, kh, kw, oh, ow)[...] = win.transpose(0, 1, 4, 5, 2, 3)
    if columns_left:
        return xp.matmul(cols, dy3.transpose(0, 2, 1)).sum(axis=0)
    return xp.matmul(dy3, cols.transpose(0, 2, 1)).sum(axis=0)


def input_grad_chunked_s1(xp, dy, w, padded_shape, dh, dw):
    """dInput on the padded grid [N, C, Hp, Wp] of the one-group, stride-1 NCHW
    convolution with Filter w, a chunk of samples at a time: `_input_grad_shifted_columns`
    where the filter's column offsets can be folded into the GEMM's depth cheaply (see
    there), else `_input_grad_col2im`."""
    o, c, _, kw = w.shape
    if kw > 1 and SHIFTED_COLUMNS_MIN_RATIO * c >= o:
        return _input_grad_shifted_columns(xp, dy, w, padded_shape, dh, dw)
    return _input_grad_col2im(xp, dy, w, padded_shape, dh, dw)


def _input_grad_col2im(xp, dy, w, padded_shape, dh, dw):
    """Per chunk of samples, dy given the padded row length Wp (zeros past ow), the columns
    W^T dy [kh*kw*C, chunk*oh*Wp] in one GEMM, then each window offset (a, b) adds its block
    to ONE contiguous run of each flattened padded plane starting at a*dh*Wp + b*dw (the
    zero columns land on cells that other offsets own, adding nothing)."""
    n, c, hp, wp = padded_shape
    o, _, kh, kw = w.shape
    oh, ow = dy.shape[2:]
    run = oh * wp
    wmat = w.transpose(2, 3, 1, 0).reshape(kh * kw * c, o)
    flat = xp.zeros((n, c, hp * wp + (kw - 1) * dw), dtype=dy.dtype)
    step = samples_per_chunk(n, kh * kw * c * run * dy.itemsize)
    dyw = xp.zeros((o, step, oh, wp), dtype=dy.dtype)
    for lo in range(0, n, step):
        m = min(n, lo + step) - lo
        dv = dyw[:, :m]
        dv[..., :ow] = dy[lo:lo + m].transpose(1, 0, 2, 3)
        dcols = xp.matmul(wmat, dv.reshape(o, m * run)).reshape(kh, kw, c, m, run)
        planes = flat[lo:lo + m].transpose(1, 0, 2)
        for a in range(kh):
            for b in range(kw):
                start = a * dh * wp + b * dw
                planes[..., start:start + run] += dcols[a, b]
    return flat[..., :hp * wp].reshape(n, c, hp, wp)


def _input_grad_shifted_columns(xp, dy, w, padded_shape, dh, dw):
    """The same sum as `_input_grad_col2im` with the filter's column offsets b done by the
    GEMM: for kernel row a, dInput's padded plane at a*dh*Wp + q receives
    R_a[c, q] = sum over b, o of W[o, c, a, b] * dyw[o, q - b*dw], where dyw is dy with the
    padded row length (zeros past ow; for stride 1, Wp - ow = (kw-1)*dw, so column b*dw + j
    of a row stays in that row and q only runs over [0, oh*Wp)). So per chunk of samples
    (laid one after another, with (kw-1)*dw zeros in front: a shift reads only zeros across
    a sample's start) the kw shifted copies of dyw are stacked along K (flat copies),
    R = W [kh*C, kw*O] x stack [kw*O, chunk*oh*Wp] is one GEMM, and kh shifted adds (not
    kh*kw) place it. Same multiply-adds; kw-1 more copies of dy, kh*(kw-1) fewer adds of
    dInput's size, and the GEMM's M is kh*C: hence taken when C is not small against O
    (SHIFTED_COLUMNS_MIN_RATIO)."""
    n, c, hp, wp = padded_shape
    o, _, kh, kw = w.shape
    oh, ow = dy.shape[2:]
    run = oh * wp
    lead = (kw - 1) * dw
    wmat = w.transpose(2, 1, 3, 0).reshape(kh * c, kw * o)          # rows (a, c), columns (b, o)
    flat = xp.zeros((n, c, hp * wp), dtype=dy.dtype)
    step = samples_per_chunk(n, kh * c * run * dy.itemsize)
    dyw = xp.zeros((o, lead + step * run), dtype=dy.dtype)           # zeros in front and past ow
    stack = xp.empty((kw, o, step * run), dtype=dy.dtype)
    for lo in range(0, n, step):
        m = min(n, lo + step) - lo
        width = m * run
        dyw[:, lead:lead + width].reshape(o, m, oh, wp)[..., :ow] = dy[lo:lo + m].transpose(1, 0, 2, 3)
        for b in range(kw):
            stack[b, :, :width] = dyw[:, lead - b * dw:lead - b * dw + width]
        rows = xp.matmul(wmat, stack[:, :, :width].reshape(kw * o, width)).reshape(kh, c, m, run)
        planes = flat[lo:lo + m].transpose(1, 0, 2)
        for a in range(kh):
            planes[..., a * dh * wp:a * dh * wp + run] += rows[a]
    return flat.reshape(n, c, hp, wp)
