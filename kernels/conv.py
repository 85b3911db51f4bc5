"""Convolution paths chosen by shape (NCHW forward; kernels/nn.py's conv kernels call them).

One general formulation, im2col through a strided window view and one batched matmul over
the groups (`general_nchw`), plus the paths below, each measured against it (numpy 2.4,
OpenBLAS; CPU time of one thread, medians of alternating blocks in one process, on a
loaded 2-core machine) and tested against it and a float64 reference
(tests/test_conv_paths.py; the table with figures is in docs/architecture.md):

- pointwise (1x1, no padding): one GEMM W[O, C] @ X[n][C, H*W] per group written into the
  output, no window view; a stride subsamples X first (one strided copy, 1/s^2 of X).
  1.00-1.06x: the general path's column "copy" was already a view for 1x1.
- depthwise (groups == input channels > 1, any channel multiplier): kernels/conv_depthwise.py
  (a banded GEMM per channel for planes no taller than the kernel, im2col on the
  flattened padded planes at stride 1, else this general formulation; both over blocks of
  channels whose columns stay in cache).
- one group, stride 1, O <= C/2 (3x3 convolutions narrowing the channels, a detector
  neck's): GEMMs over shifted contiguous runs of the flattened padded input, no im2col:
  1.12-1.55x; the samples folded into each GEMM and, from 8 M multiply-adds, all taps
  as ONE GEMM of the stacked filters (kernels/conv_fold.py `stacked_taps`).
- everything else: the general formulation; with one group, N > 1 and a GEMM depth
  C*kh*kw >= 64, the batch folded into one GEMM's N (kernels/conv_fold.py
  `folded_im2col`), or, from 16 input channels and up to 16 output columns, into its M
  over channels-last columns (`folded_channels_last`: 1.06-1.8x). The flat im2col for
  dense convolutions measured 0.6-1.0x (the GEMM dominates and the crop costs);
  Winograd F(2x2, 3x3) 0.49-1.09x (docs/architecture.md).
  1x1 convolutions keep one GEMM per sample: folding them needs a transposing copy of
  the input as well as of the output, 0.15-0.95x ([64, 32, 7, 7] -> 64, [8, 96, 40, 60]
  -> 24, [64, 128, 4, 4] -> 256; CPU time, one thread).

Depthwise and grouped work is split by channels across the cores, dense work's epilogue
by output channels (kernels/parallel.py); GEMMs are left to OpenBLAS's threads.

`epilogue(part, lo, hi)`: a callable applied in place to each part of the output holding
output channels [lo, hi) (all rows of the batch), as soon as that part is computed, in
the thread that computed it: fused_conv2d's bias, residual add and activation
(kernels/fused_conv.py). The result is a fresh C-contiguous array.
"""
from __future__ import annotations

import functools

import numpy as np

from keel.kernels import conv_depthwise  # (it builds on this module's helpers, read when called)
from keel.kernels.conv_fold import (FOLD_MIN_DEPTH, channels_last_pays, folded_channels_last, folded_im2col,
                                     stacked_taps)
from keel.kernels.parallel import split_run


def pad_spatial(xp, x, pads, channel_last, value=0.0):
    """Pad the two spatial dims of a 4-D array by [top, bottom, left, right]."""
    if not any(pads):
        return x
    top, bottom, left, right = pads
    # zeros: 0.9 us where full takes 4 us (numpy 2.4), a batch-1 convolution's whole budget
    fill = xp.zeros if value == 0 else functools.partial(xp.full, fill_value=value)
    if channel_last:
        n, h, w, c = x.shape
        out = fill((n, h + top + bottom, w + left + right, c), dtype=x.dtype)
        out[:, top:top + h, left:left + w, :] = x
    else:
        n, c, h, w = x.shape
        out = fill((n, c, h + top + bottom, w + left + right), dtype=x.dtype)
        out[:, :, top:top + h, left:left + w] = x
    return out


def strided_view(xp, a, shape, strides):
    """as_strided(a, shape, strides); for a C-contiguous numpy array through the ndarray
    constructor over its buffer: 0.9 us where as_strided takes 6 us (numpy 2.4)."""
    if xp is np and a.flags.c_contiguous:
        return np.ndarray(shape, a.dtype, a, 0, strides)
    return xp.lib.stride_tricks.as_strided(a, shape=shape, strides=strides)


def windows(xp, xpad, oh, ow, kh, kw, sh, sw, dh, dw, channel_last):
    """A read-only strided view of every (kh, kw) window: [N, C, oh, ow, kh, kw] for NCHW,
    [N, oh, ow, kh, kw, C] for NHWC."""
    if channel_last:
        n, _, _, c = xpad.shape
        s0, s1, s2, s3 = xpad.strides
        shape = (n, oh, ow, kh, kw, c)
        strides = (s0, s1 * sh, s2 * sw, s1 * dh, s2 * dw, s3)
    else:
        n, c = xpad.shape[:2]
        s0, s1, s2, s3 = xpad.strides
        shape = (n, c, oh, ow, kh, kw)
        strides = (s0, s1, s2 * sh, s3 * sw, s2 * dh, s3 * dw)
    return strided_view(xp, xpad, shape, strides)


def general_nchw(xp, xpad, w, oh, ow, sh, sw, dh, dw, g, out=None):
    """The general formulation on an already padded NCHW input, restricted to the first
    oh x ow output positions: win [N, C, oh, ow, kh, kw] -> cols [N, g, cg*kh*kw, oh*ow]
    (one copy); W [g, og, cg*kh*kw]; one batched matmul -> [N, g, og, oh*ow], which is
    NCHW with no transpose (measured 10x faster than one [O, K] x [K, N*oh*ow] GEMM plus
    the transpose for small C). `out`: an [N, O, oh, ow] array (a view of a bigger one
    is fine) the product is written into, else a new one."""
    o, cg, kh, kw = w.shape
    n = xpad.shape[0]
    win = windows(xp, xpad, oh, ow, kh, kw, sh, sw, dh, dw, False)
    cols = win.transpose(0, 1, 4, 5, 2, 3).reshape(n, g, cg * kh * kw, oh * ow)
    wmat = w.reshape(g, o // g, cg * kh * kw)
    if out is None:
        return xp.matmul(wmat, cols).reshape(n, o, oh, ow)
    xp.matmul(wmat, cols, out=out.reshape(n, g, o // g, oh * ow))
    return out


def _apply(epilogue, part, lo, hi):
    if epilogue is not None:
        epilogue(part, lo, hi)


def conv2d_nchw(xp, x, w, strides, dilations, pads, g, oh, ow, epilogue=None):
    """Convolution of NCHW x [N, C, H, W] (unpadded) with Filter w [O, C/g, kh, kw] by
    the path its shape takes (module docstring); [N, O, oh, ow], contiguous."""
    out = xp.empty((x.shape[0], w.shape[0], oh, ow), dtype=x.dtype)
    nchw_path(x.shape, w.shape, strides, dilations, pads, g)(xp, x, w, out, epilogue)
    return out


def nchw_path(x_shape, w_shape, strides, dilations, pads, g):
    """The path an NCHW convolution of these shapes takes, as path(xp, x, w, out,
    epilogue) writing into `out` [N, O, oh, ow]: chosen once per shape by a specialized
    kernel (kernels/nn.py `_specialize_conv`), per call by conv2d_nchw."""
    c = x_shape[1]
    o, cg, kh, kw = w_shape
    sh, sw = strides
    dh, dw = dilations
    if kh == kw == 1 and not any(pads):
        return lambda xp, x, w, out, epilogue: _pointwise(xp, x, w, sh, sw, g, out, epilogue)
    if g == 1 and sh == sw == 1 and 2 * o <= c:
        return lambda xp, x, w, out, epilogue: _shifted_gemms(xp, x, w, dh, dw, pads, out, epilogue)
    if cg == 1 and g == c > 1:  # one input channel (c == 1) is a small GEMM, not depthwise
        return lambda xp, x, w, out, epilogue: conv_depthwise.depthwise_nchw(xp, x, w, sh, sw, dh, dw, pads, out,
                                                                              epilogue)
    return lambda xp, x, w, out, epilogue: _general(xp, x, w, sh, sw, dh, dw, pads, g, out, epilogue)


def _general(xp, x, w, sh, sw, dh, dw, pads, g, out, epilogue):
    """The general formulation, its groups split across the cores; one group of more than
    one sample with a deep enough GEMM folds the batch into it (kernels/conv_fold.py)."""
    n = x.shape[0]
    o, cg, kh, kw = w.shape
    oh, ow = out.shape[2:]
    if g == 1 and n > 1 and cg * kh * kw >= FOLD_MIN_DEPTH and channels_last_pays(cg, ow):
        xcl = xp.ascontiguousarray(pad_spatial(xp, x.transpose(0, 2, 3, 1), pads, True))
        folded_channels_last(xp, windows(xp, xcl, oh, ow, kh, kw, sh, sw, dh, dw, True), w, out)
        _epilogue_by_channels(xp, out, epilogue)
        return
    xpad = pad_spatial(xp, x, pads, False)
    if g == 1:
        if n > 1 and cg * kh * kw >= FOLD_MIN_DEPTH:
            folded_im2col(xp, windows(xp, xpad, oh, ow, kh, kw, sh, sw, dh, dw, False), w, out)
        else:
            general_nchw(xp, xpad, w, oh, ow, sh, sw, dh, dw, 1, out=out)
        _epilogue_by_channels(xp, out, epilogue)
        return
    og = o // g

    def groups(lo, hi):
        part = out[:, lo * og:hi * og]
        general_nchw(xp, xpad[:, lo * cg:hi * cg], w[lo * og:hi * og], oh, ow, sh, sw, dh, dw, hi - lo,
                     out=part)
        _apply(epilogue, part, lo * og, hi * og)
    split_run(xp, g, groups, n * o * oh * ow * cg * kh * kw)


def _epilogue_by_channels(xp, out, epilogue):
    """The epilogue over the whole output, its channels split across the cores."""
    if epilogue is None:
        return

    def channels(lo, hi):
        epilogue(out[:, lo:hi], lo, hi)
    split_run(xp, out.shape[1], channels, out.size)


def _pointwise(xp, x, w, sh, sw, g, out, epilogue):
    n, c = x.shape[:2]
    o = w.shape[0]
    oh, ow = out.shape[2:]
    if sh > 1 or sw > 1:
        x = x[:, :, ::sh, ::sw]
    cols = x.reshape(n, g, c // g, oh * ow)          # a copy only when subsampled
    wmat = w.reshape(g, o // g, c // g)
    xp.matmul(wmat, cols, out=out.reshape(n, g, o // g, oh * ow))
    _epilogue_by_channels(xp, out, epilogue)


def bias_in_gemm(x_shape, w_shape, strides, pads, g) -> bool:
    """Whether a 1x1 convolution of these shapes adds its per-channel bias inside the GEMM
    (`pointwise_with_bias`): one group, no padding, and more output channels than input
    channels and output positions than input channels, where the input's copy with a row
    of ones (C+1 rows) costs less than a broadcast add over the output (O rows, each a
    separate inner loop for numpy). Measured (CPU time, one thread, medians of alternating
    blocks, loaded machine) against the GEMM then the add: [48, 320] -> 288 1.30x,
    [24, 480] -> 120 1.41x, [32, 192] -> 200 1.32x, [16, 3840] -> 64 1.47x; where O < C,
    [288, 320] -> 48 0.91x, [96, 320] -> 24 0.98x, hence not there."""
    o, cg, kh, kw = w_shape
    sh, sw = strides
    positions = -(-x_shape[2] // sh) * -(-x_shape[3] // sw)
    return g == 1 and kh == kw == 1 and not any(pads) and o > cg and positions > cg


def pointwise_with_bias(xp, x, w, bias, strides, out):
    """out [N, O, oh, ow] = W [O, C, 1, 1] x [N, C, H, W] (subsampled by `strides`) + bias
    [O] per channel, as ONE GEMM per sample: [W | bias] [O, C+1] times the input with a row
    of ones appended [C+1, oh*ow] (one copy of the input, none of the output). The bias
    joins the sum inside BLAS, so its rounding order differs from adding it after."""
    n, c = x.shape[:2]
    o = w.shape[0]
    oh, ow = out.shape[2:]
    sh, sw = strides
    if sh > 1 or sw > 1:
        x = x[:, :, ::sh, ::sw]
    cols = xp.empty((n, c + 1, oh, ow), dtype=x.dtype)
    cols[:, :c] = x
    cols[:, c] = 1
    wb = xp.empty((o, c + 1), dtype=w.dtype)
    wb[:, :c] = w.reshape(o, c)
    wb[:, c] = bias
    xp.matmul(wb, cols.reshape(n, c + 1, oh * ow), out=out.reshape(n, o, oh * ow))
    return out


def _shifted_gemms(xp, x, w, dh, dw, pads, out, epilogue):
    """One group, stride 1: no im2col. On the padded width, window offset (a, b) reads ONE
    contiguous run of each flattened padded plane (starting at a*dh*Wp + b*dw), which a GEMM
    takes as it is. It writes and adds kh*kw products of O rows where im2col copies kh*kw x C
    rows, so it pays when O <= C/2: with one GEMM per tap (accumulated, then cropped), the
    detector's neck [1, 96, 80, 120] -> 24 3x3 1.47x, [1, 96, 40, 60] / [20, 30] / [10, 15]
    -> 24 1.12-1.20x, [1, 48, 80, 120] -> 24 1.55x, [8, 96, 40, 60] -> 24 1.49x,
    [1, 96, 80, 120] -> 48 1.22x; but [1, 64, 40, 60] -> 40 1.02x, [1, 32, 40, 60] -> 32
    1.08x, [1, 256, 10, 16] -> 256 0.84x, [64, 16, 14, 14] -> 32 0.90x (CPU time, one
    thread). Now the samples folded into each GEMM, and from 8 M multiply-adds all taps
    stacked into ONE GEMM (kernels/conv_fold.py `stacked_taps`)."""
    stacked_taps(xp, x, w, dh, dw, pads, out)
    _epilogue_by_channels(xp, out, epilogue)


def transpose_tiles_nchw(xp, x, w, g):
    """conv2d_transpose of NCHW x [N, C, H, W] with Filter w [C, O/g, kh, kw] whose stride
    equals its kernel (no dilation, padding or extra output): the windows tile the output,
    so each output cell is ONE product, out[n, o, i*kh + a, j*kw + b] = sum over c of
    x[n, c, i, j] * W[c, o, a, b]. One batched GEMM per sample and group into
    [N, O, kh, kw, H, W] (no copy of x), then each tap's block ASSIGNED to its strided cells
    of the output: no zeroed canvas, no adds, no final transpose (the general col2im's).
    Measured on the detector's 2x2 stride-2 upsampling: [1, 24, 80, 120] -> 24: 1.34x,
    [1, 24, 160, 240] -> 1: 1.36x, [8, 64, 16, 16] -> 32: 1.5x; one interleaving copy of
    the GEMM's result (a sub-pixel shuffle) instead measured 0.69-1.11x."""
    n, c, h, wd = x.shape
    _, og, kh, kw = w.shape
    cg = c // g
    wmat = w.reshape(g, cg, og * kh * kw).transpose(0, 2, 1)        # [g, og*kh*kw, cg]
    cols = xp.matmul(wmat, x.reshape(n, g, cg, h * wd))              # [N, g, og*kh*kw, H*W]
    cols = cols.reshape(n, g, og, kh, kw, h, wd)
    out = xp.empty((n, g * og, h * kh, wd * kw), dtype=x.dtype)
    blocks = out.reshape(n, g, og, h * kh, wd * kw)
    for a in range(kh):
        for b in range(kw):
            blocks[:, :, :, a::kh, b::kw] = cols[:, :, :, a, b]
    return out
