"""Vision kernels beyond conv2d/pool2d: conv3d, conv3d_transpose, pool3d,
max_pool{2,3}d_with_index, unpool/unpool3d, affine_grid, grid_sampler and deformable_conv
(v2 with Mask, v1 without). Semantics follow PaddlePaddle 3.3.1's phi CPU kernels.

Two N-d engines serve every spatial rank, so a 3-D op is not a copy of a 2-D one (the
2-D conv2d/pool2d kernels in kernels/nn.py keep their own measured fast paths):

- Convolution (`_conv_nd`, `_conv_filter_grad_nd`, `_conv_input_grad_nd`): im2col through
  a read-only strided view of the padded channel-first input ([N, C, *out, *k]) and one
  batched GEMM per group; the input gradient is W^T dOut followed by col2im, one strided
  add per kernel offset. A transposed convolution is that col2im of its input (cropped by
  the paddings), and its gradients are a convolution and a filter gradient of dOut placed
  on the uncropped canvas. Channel-last layouts are transposed to channel-first and back.
- Pooling (`_PoolWindows`): per spatial axis, the input index each window offset reads for
  every output position ([out, k], host arrays; adaptive bins padded to the longest bin)
  and whether it lies inside the input. Forward and gradient loop over the window offsets
  in row-major order (d, h, w), reading one output-shaped slice of the input per offset
  (a strided slice of the input padded with a neutral value for regular windows, a
  gather for adaptive bins), which gives Paddle's tie rules directly: max pooling's
  gradient and max_pool*_with_index's Mask take the first maximum in that order.
  Gradients add through the same strided slices (regular windows) or scatter-add into
  the flattened input (adaptive bins, Mask).

grid_sampler and deformable_conv sample with Paddle's bilinear conventions: corner weights
(x_hi - x) and (x - x_lo), a corner outside the input contributing 0 (grid_sampler checks
each corner against [0, size-1]; deformable_conv samples only points with -1 < h < H and
-1 < w < W). Their gradients are the analytic ones of those functions, as Paddle's
kernels compute them (grid_sampler scales the grid gradient by the unnormalization
factor and the derivative of the border/reflection clipping).
"""
from __future__ import annotations

import itertools
import math

import numpy as np

from keel.kernels.nn import (_FLT_MAX, _adaptive_windows, _as_list, _channel_last, _compute_dtype,
                        _resolve_padding, inclusive_pool_count)
from keel.kernels.registry import kernel
from keel.kernels.tensor import check_index_range, scatter_add


# ----------------------------------------------------------------------------- layout helpers

def _to_channel_first(x, channel_last):
    if not channel_last:
        return x
    return x.transpose(0, x.ndim - 1, *range(1, x.ndim - 1))


def _to_channel_last(x, channel_last):
    if not channel_last:
        return x
    return x.transpose(0, *range(2, x.ndim), 1)


def _work_dtype(xp, dtype):
    """float16 computes in float32 (as conv2d does); float32/float64 in themselves."""
    return xp.float32 if dtype == xp.float16 else dtype


def _ints(values, n, name, op):
    v = [int(s) for s in _as_list(values, n)]
    if len(v) != n:
        raise ValueError(f"{op}: {name} must have {n} values, got {list(values)}")
    return v


def _pad_nd(xp, x, pads, value=0.0):
    """Pad the spatial dims of a channel-first [N, C, *S] array by pads [b0, a0, b1, a1, ...]."""
    if not any(pads):
        return x
    nd = x.ndim - 2
    shape = tuple(x.shape[:2]) + tuple(x.shape[2 + i] + pads[2 * i] + pads[2 * i + 1] for i in range(nd))
    out = xp.full(shape, value, dtype=x.dtype)
    inner = tuple(slice(pads[2 * i], pads[2 * i] + x.shape[2 + i]) for i in range(nd))
    out[(slice(None), slice(None)) + inner] = x
    return out


def _crop_nd(x, pads, sizes):
    """The inverse of _pad_nd's placement: x[..., b_i : b_i + size_i] per spatial dim."""
    inner = tuple(slice(pads[2 * i], pads[2 * i] + s) for i, s in enumerate(sizes))
    return x[(slice(None), slice(None)) + inner]


def _windows_nd(xp, xpad, out_sizes, ksizes, strides, dilations):
    """Read-only strided view [N, C, *out, *k] of every window of a padded channel-first input."""
    st = xpad.strides
    nd = len(out_sizes)
    shape = tuple(xpad.shape[:2]) + tuple(out_sizes) + tuple(ksizes)
    strides_ = (st[0], st[1]) + tuple(st[2 + i] * strides[i] for i in range(nd)) + \
        tuple(st[2 + i] * dilations[i] for i in range(nd))
    return xp.lib.stride_tricks.as_strided(xpad, shape=shape, strides=strides_)


def _tap_slices(offset, out_sizes, strides, dilations):
    """The cells of the padded input that kernel offset `offset` reads, shaped like the output."""
    return tuple(slice(a * d, a * d + (o - 1) * s + 1, s)
                 for a, o, s, d in zip(offset, out_sizes, strides, dilations))


# ----------------------------------------------------------------------------- N-d convolution

def _conv_nd(xp, xpad, w, out_sizes, strides, dilations, g):
    """Convolution of a padded channel-first input with Filter w [O, C/g, *k]: [N, O, *out]."""
    o, cg = w.shape[:2]
    ks = tuple(w.shape[2:])
    nd = len(ks)
    n = xpad.shape[0]
    kk, p = math.prod(ks), math.prod(out_sizes)
    win = _windows_nd(xp, xpad, out_sizes, ks, strides, dilations)
    perm = (0, 1) + tuple(range(2 + nd, 2 + 2 * nd)) + tuple(range(2, 2 + nd))
    cols = win.transpose(perm).reshape(n, g, cg * kk, p)
    out = xp.matmul(w.reshape(g, o // g, cg * kk), cols)          # [N, g, O/g, P]
    return out.reshape((n, o) + tuple(out_sizes))


def _conv_filter_grad_nd(xp, xpad, dy, ksizes, strides, dilations, g):
    """dFilter [O, C/g, *k] of the convolution of padded input xpad with output gradient dy."""
    n, o = dy.shape[:2]
    out_sizes = tuple(dy.shape[2:])
    nd = len(out_sizes)
    c = xpad.shape[1]
    cg, og = c // g, o // g
    kk, p = math.prod(ksizes), math.prod(out_sizes)
    win = _windows_nd(xp, xpad, out_sizes, ksizes, strides, dilations)
    perm = (1,) + tuple(range(2 + nd, 2 + 2 * nd)) + (0,) + tuple(range(2, 2 + nd))
    cols = win.transpose(perm).reshape(g, cg * kk, n * p)
    dyg = dy.reshape(n, g, og, p).transpose(1, 2, 0, 3).reshape(g, og, n * p)
    # one 2-D GEMM per group: numpy's batched matmul takes a slow non-BLAS loop for the
    # transposed operand (measured 8x slower on a 16-channel 3x3x3 layer)
    dw = xp.stack([dyg[i] @ cols[i].T for i in range(g)])         # [g, og, cg*K]
    return dw.reshape((o, cg) + tuple(ksizes))


def _conv_input_grad_nd(xp, dy, w, padded_sizes, strides, dilations, g, dtype):
    """dInput [N, C, *padded] of the convolution with Filter w [O, C/g, *k]: the column
    gradient W^T dy (one GEMM per group), then col2im: one strided add per kernel offset."""
    n, o = dy.shape[:2]
    out_sizes = tuple(dy.shape[2:])
    cg = w.shape[1]
    ks = tuple(w.shape[2:])
    og, c = o // g, cg * g
    kk, p = math.prod(ks), math.prod(out_sizes)
    dyg = dy.reshape(n, g, og, p).transpose(1, 2, 0, 3).reshape(g, og, n * p)
    wmat = w.reshape(g, og, cg * kk)
    dcols = xp.stack([wmat[i].T @ dyg[i] for i in range(g)]).reshape((g, cg) + ks + (n,) + out_sizes)
    dx = xp.zeros((g, cg, n) + tuple(padded_sizes), dtype=dtype)
    lead = (slice(None),) * 3
    for offset in itertools.product(*(range(k) for k in ks)):
        dx[lead + _tap_slices(offset, out_sizes, strides, dilations)] += dcols[(slice(None), slice(None)) + offset]
    nd = len(ks)
    return dx.reshape((c, n) + tuple(padded_sizes)).transpose((1, 0) + tuple(range(2, 2 + nd)))


def _conv_geometry(op, x_sizes, ksizes, strides, paddings, padding_algorithm, dilations):
    """(strides, dilations, pads [b0, a0, ...]) as Paddle's UpdatePaddingAndDilation: SAME
    pads from the undilated kernel and forces the dilations to 1."""
    nd = len(x_sizes)
    strides = _ints(strides, nd, "strides", op)
    dilations = _ints(dilations, nd, "dilations", op)
    if padding_algorithm == "SAME":
        dilations = [1] * nd
    pads = _resolve_padding(paddings, padding_algorithm, tuple(x_sizes), tuple(strides), tuple(ksizes))
    return strides, dilations, pads


def _conv_out_sizes(op, x_sizes, ksizes, strides, dilations, pads, shape):
    out = [(s + pads[2 * i] + pads[2 * i + 1] - (dilations[i] * (k - 1) + 1)) // strides[i] + 1
           for i, (s, k) in enumerate(zip(x_sizes, ksizes))]
    if any(v <= 0 for v in out):
        raise ValueError(f"{op}: output size {out} is not positive for input {tuple(shape)}")
    return out


def _groups(groups):
    return int(groups) if groups and groups > 0 else 1


def _convnd(xp, op, nd, x, w, strides, paddings, padding_algorithm, dilations, groups, data_format):
    if x.ndim != nd + 2 or w.ndim != nd + 2:
        raise ValueError(f"{op} expects {nd + 2}-D Input and Filter, got {tuple(x.shape)} and {tuple(w.shape)}")
    last = _channel_last(data_format)
    xc = _to_channel_first(x, last)
    g = _groups(groups)
    c = xc.shape[1]
    o, cg = w.shape[:2]
    if c != cg * g or o % g:
        raise ValueError(f"{op}: Input has {c} channels, Filter {tuple(w.shape)} with groups={g} expects "
                         f"{cg * g} input channels and output channels divisible by groups")
    sizes, ks = tuple(xc.shape[2:]), tuple(w.shape[2:])
    strides, dilations, pads = _conv_geometry(op, sizes, ks, strides, paddings, padding_algorithm, dilations)
    out_sizes = _conv_out_sizes(op, sizes, ks, strides, dilations, pads, x.shape)
    cdt = _work_dtype(xp, x.dtype)
    xpad = _pad_nd(xp, xc.astype(cdt, copy=False), pads)
    out = _conv_nd(xp, xpad, w.astype(cdt, copy=False), out_sizes, strides, dilations, g)
    return xp.ascontiguousarray(_to_channel_last(out, last)).astype(x.dtype, copy=False)


def _convnd_grad(xp, op, x, w, dy, strides, paddings, padding_algorithm, dilations, groups, data_format,
                 need):
    last = _channel_last(data_format)
    xc, dyc = _to_channel_first(x, last), _to_channel_first(dy, last)
    g = _groups(groups)
    sizes, ks = tuple(xc.shape[2:]), tuple(w.shape[2:])
    strides, dilations, pads = _conv_geometry(op, sizes, ks, strides, paddings, padding_algorithm, dilations)
    cdt = _work_dtype(xp, x.dtype)
    xc, wc, dyc = (a.astype(cdt, copy=False) for a in (xc, w, dyc))
    dx = dw = None
    if "Filter@GRAD" in need:
        dw = _conv_filter_grad_nd(xp, _pad_nd(xp, xc, pads), dyc, ks, strides, dilations, g)
        dw = xp.ascontiguousarray(dw).astype(w.dtype, copy=False)
    if "Input@GRAD" in need:
        padded = [s + pads[2 * i] + pads[2 * i + 1] for i, s in enumerate(sizes)]
        dxpad = _conv_input_grad_nd(xp, dyc, wc, padded, strides, dilations, g, cdt)
        dx = _to_channel_last(_crop_nd(dxpad, pads, sizes), last)
        dx = xp.ascontiguousarray(dx).astype(x.dtype, copy=False)
    return dx, dw


_CONV_ATTRS = ["strides", "paddings", "padding_algorithm", "dilations", "groups", "data_format"]
_CONV_GRADS = frozenset({"Input@GRAD", "Filter@GRAD"})


@kernel("conv3d", inputs=["Input", "Filter"], outputs=["Output"], attrs=_CONV_ATTRS)
def conv3d(xp, x, w, *, strides, paddings, padding_algorithm, dilations, groups, data_format):
    """Filter [O, C/groups, kd, kh, kw]; NCDHW or NDHWC; paddings 3 or 6 values."""
    return _convnd(xp, "conv3d", 3, x, w, strides, paddings, padding_algorithm, dilations, groups,
                   data_format)


@kernel("conv3d_grad", inputs=["Input", "Filter", "Output@GRAD"], outputs=["Input@GRAD", "Filter@GRAD"],
        attrs=_CONV_ATTRS)
def conv3d_grad(xp, x, w, dy, *, strides, paddings, padding_algorithm, dilations, groups, data_format,
                need=_CONV_GRADS):
    return _convnd_grad(xp, "conv3d_grad", x, w, dy, strides, paddings, padding_algorithm, dilations,
                        groups, data_format, need)


# ----------------------------------------------------------------------------- transposed convolution

def _transpose_geometry(op, sizes, ks, strides, paddings, padding_algorithm, dilations, output_size,
                        output_padding):
    """(strides, dilations, pads, output sizes, canvas sizes) of an N-d transposed convolution,
    as Paddle's ConvTransposeInferMeta: (in-1)*stride - pad_before - pad_after +
    dilation*(k-1) + 1, replaced by `output_size` (which must lie in [that, that+stride)) or
    increased by `output_padding`. The canvas is the uncropped scatter target."""
    nd = len(sizes)
    strides, dilations, pads = _conv_geometry(op, sizes, ks, strides, paddings, padding_algorithm, dilations)
    inferred = [(s - 1) * strides[i] - pads[2 * i] - pads[2 * i + 1] + dilations[i] * (ks[i] - 1) + 1
                for i, s in enumerate(sizes)]
    if output_size is not None and len(output_size):
        out = _ints(output_size, nd, "output_size", op)
        for i, (want, got) in enumerate(zip(out, inferred)):
            if not got <= want < got + strides[i]:
                raise ValueError(f"{op}: output_size {out} dim {i} must be in [{got}, {got + strides[i]}) "
                                 "for this input, stride and padding")
    elif output_padding is not None and len(output_padding):
        extra = _ints(output_padding, nd, "output_padding", op)
        out = [a + b for a, b in zip(inferred, extra)]
    else:
        out = inferred
    if any(v <= 0 for v in out):
        raise ValueError(f"{op}: output size {out} is not positive")
    canvas = [max((s - 1) * strides[i] + dilations[i] * (ks[i] - 1) + 1, pads[2 * i] + out[i])
              for i, s in enumerate(sizes)]
    return strides, dilations, pads, out, canvas


def _transpose3d_channel_last(data_format):
    """conv3d_transpose's layout as PaddlePaddle 3.3.1's legacy op reads it: only "NHWC" (what
    its layers write for a channel-last 3-D transposed convolution) is channel-last; every
    other value, "NDHWC" included, is channel-first."""
    return data_format == "NHWC"


_TRANSPOSE_ATTRS = ["strides", "paddings", "output_padding", "output_size", "padding_algorithm", "groups",
                    "dilations", "data_format"]


@kernel("conv3d_transpose", inputs=["Input", "Filter"], outputs=["Output"], attrs=_TRANSPOSE_ATTRS)
def conv3d_transpose(xp, x, w, *, strides, paddings, output_padding, output_size, padding_algorithm, groups,
                     dilations, data_format):
    """Filter [C_in, O/groups, kd, kh, kw]. Each input cell i scatters x[i] * W to canvas
    cells i*stride + a*dilation; the output is the canvas cropped by the paddings."""
    op = "conv3d_transpose"
    if x.ndim != 5 or w.ndim != 5:
        raise ValueError(f"{op} expects 5-D Input and Filter, got {tuple(x.shape)} and {tuple(w.shape)}")
    last = _transpose3d_channel_last(data_format)
    xc = _to_channel_first(x, last)
    g = _groups(groups)
    if w.shape[0] != xc.shape[1] or xc.shape[1] % g:
        raise ValueError(f"{op}: Input has {xc.shape[1]} channels but Filter is {tuple(w.shape)} (groups={g})")
    sizes, ks = tuple(xc.shape[2:]), tuple(w.shape[2:])
    strides, dilations, pads, out, canvas = _transpose_geometry(
        op, sizes, ks, strides, paddings, padding_algorithm, dilations, output_size, output_padding)
    cdt = _work_dtype(xp, x.dtype)
    full = _conv_input_grad_nd(xp, xc.astype(cdt, copy=False), w.astype(cdt, copy=False), canvas, strides,
                               dilations, g, cdt)
    res = _to_channel_last(_crop_nd(full, pads, out), last)
    return xp.ascontiguousarray(res).astype(x.dtype, copy=False)


@kernel("conv3d_transpose_grad", inputs=["Input", "Filter", "Output@GRAD"],
        outputs=["Input@GRAD", "Filter@GRAD"], attrs=_TRANSPOSE_ATTRS)
def conv3d_transpose_grad(xp, x, w, dy, *, strides, paddings, output_padding, output_size, padding_algorithm,
                          groups, dilations, data_format, need=_CONV_GRADS):
    """With dOut placed on the canvas: dInput = conv(canvas, W) and dFilter = the filter
    gradient of that convolution with x as its output gradient."""
    op = "conv3d_transpose_grad"
    last = _transpose3d_channel_last(data_format)
    xc, dyc = _to_channel_first(x, last), _to_channel_first(dy, last)
    g = _groups(groups)
    sizes, ks = tuple(xc.shape[2:]), tuple(w.shape[2:])
    strides, dilations, pads, out, canvas_sizes = _transpose_geometry(
        op, sizes, ks, strides, paddings, padding_algorithm, dilations, output_size, output_padding)
    out = list(dyc.shape[2:])
    cdt = _work_dtype(xp, x.dtype)
    xc, wc, dyc = (a.astype(cdt, copy=False) for a in (xc, w, dyc))
    canvas = xp.zeros(tuple(dyc.shape[:2]) + tuple(canvas_sizes), dtype=cdt)
    canvas[(slice(None), slice(None)) + tuple(slice(pads[2 * i], pads[2 * i] + o) for i, o in enumerate(out))] = dyc
    dx = dw = None
    if "Input@GRAD" in need:
        dx = _conv_nd(xp, canvas, wc, sizes, strides, dilations, g)
        dx = xp.ascontiguousarray(_to_channel_last(dx, last)).astype(x.dtype, copy=False)
    if "Filter@GRAD" in need:
        dw = _conv_filter_grad_nd(xp, canvas, xc, ks, strides, dilations, g)
        dw = xp.ascontiguousarray(dw).astype(w.dtype, copy=False)
    return dx, dw


# ----------------------------------------------------------------------------- pooling engine

class _PoolWindows:
    """The windows of an N-d pooling, on the host: per spatial axis `index[i]` [out_i, k_i]
    (the input position window offset a reads for output j, clipped into the input) and
    `valid[i]` (whether that position is inside the input: False on the padding, past the
    input in ceil_mode, and on the repeats padding an adaptive bin to the longest one),
    plus `count` [*out], the number of valid cells of each window.

    Regular (non-adaptive) windows are read as strided slices of the input padded on every
    side (`taps`), one per window offset; adaptive bins by gathering their positions."""

    def __init__(self, sizes, ksizes, strides, pads, out_sizes, adaptive):
        self.sizes, self.out_sizes, self.pads = list(sizes), list(out_sizes), list(pads)
        self.adaptive, self.strides = adaptive, list(strides)
        self.index, self.valid = [], []
        for i, size in enumerate(sizes):
            if adaptive:
                idx, valid, _, _ = _adaptive_windows(size, out_sizes[i])
            else:
                start = np.arange(out_sizes[i]) * strides[i] - pads[2 * i]
                j = start[:, None] + np.arange(ksizes[i])[None, :]
                valid = (j >= 0) & (j < size)
                idx = np.clip(j, 0, size - 1)
            self.index.append(idx)
            self.valid.append(valid)
        self.ksizes = [idx.shape[1] for idx in self.index]
        counts = [v.sum(axis=1) for v in self.valid]
        self.count = counts[0]
        for cnt in counts[1:]:
            self.count = np.multiply.outer(self.count, cnt)
        # regular windows: pad before by the padding, after by what the last window needs
        self.full_pads = []
        if not adaptive:
            for i, size in enumerate(sizes):
                before = pads[2 * i]
                self.full_pads += [before, max((out_sizes[i] - 1) * strides[i] + ksizes[i] - before - size, 0)]

    def _broadcast(self, per_axis):
        """Per-axis [out_i] vectors shaped to broadcast over [*out]."""
        nd = len(per_axis)
        return [v.reshape((1,) * i + (-1,) + (1,) * (nd - 1 - i)) for i, v in enumerate(per_axis)]

    def offsets(self):
        """Per window offset, in row-major order: (the offset, positions [*out] per axis,
        valid [*out]), host arrays."""
        for offset in itertools.product(*(range(k) for k in self.ksizes)):
            pos = self._broadcast([idx[:, a] for idx, a in zip(self.index, offset)])
            ok = self._broadcast([v[:, a] for v, a in zip(self.valid, offset)])
            valid = ok[0]
            for v in ok[1:]:
                valid = valid & v
            yield offset, pos, valid

    def tap_slices(self, offset):
        """The cells of the padded input that a regular window offset reads."""
        return (slice(None), slice(None)) + _tap_slices(offset, self.out_sizes, self.strides,
                                                        [1] * len(offset))

    def taps(self, xp, x, fill):
        """Per window offset, in row-major order: (the offset, the values it reads
        [N, C, *out], its positions, valid). Regular windows read the input padded with `fill` (so cells
        outside the input hold `fill`); adaptive bins read repeats of a bin's last cell."""
        if self.adaptive:
            for offset, pos, valid in self.offsets():
                yield offset, _gather(xp, x, pos), pos, valid
            return
        xpad = _pad_nd(xp, x, self.full_pads, fill)
        for offset, pos, valid in self.offsets():
            yield offset, xpad[self.tap_slices(offset)], pos, valid

    def plane_index(self, pos):
        """Row-major index of positions `pos` within one input plane (Paddle's Mask)."""
        flat = 0
        for p, size in zip(pos, self.sizes):
            flat = flat * size + p
        return flat


def _pool_sizes(op, nd, x_sizes, ksize, strides, paddings, padding_algorithm, ceil_mode, global_pooling,
                adaptive):
    """(ksizes, strides, pads [b0, a0, ...], output sizes) of pool3d / max_pool*_with_index:
    global pooling takes the whole input with no padding (before adaptive, as Paddle's
    UpdateKernelSize); adaptive makes ksize the output size."""
    ks = _ints(ksize, nd, "ksize", op)
    st = _ints(strides, nd, "strides", op)
    if global_pooling:
        ks = list(x_sizes)
    if adaptive:
        return ks, st, [0] * (2 * nd), ks
    pads = [0] * (2 * nd) if global_pooling else _resolve_padding(paddings, padding_algorithm, tuple(x_sizes),
                                                                   tuple(st), tuple(ks))
    out = []
    for i, s in enumerate(x_sizes):
        span = s - ks[i] + pads[2 * i] + pads[2 * i + 1]
        out.append((span + (st[i] - 1 if ceil_mode else 0)) // st[i] + 1)
    if any(v <= 0 for v in out):
        raise ValueError(f"{op}: output size {out} is not positive for input sizes {list(x_sizes)}")
    return ks, st, pads, out


def _gather(xp, x, pos):
    """x [N, C, *S] at per-axis positions (host arrays broadcasting to [*out]): [N, C, *out]."""
    return x[(slice(None), slice(None)) + tuple(xp.asarray(p) for p in pos)]


def _max_low(xp, dtype):
    """Paddle's max-pool start value: -FLT_MAX (-inf for float16, which cannot hold it)."""
    return -_FLT_MAX if dtype != xp.float16 else -np.inf


def _pool_count(win, exclusive, adaptive, ksizes):
    if exclusive or adaptive:
        return win.count
    return inclusive_pool_count(np, win.out_sizes, win.sizes, ksizes, win.strides, win.pads[::2])


def _pool_forward(xp, x, win, pooling_type, exclusive, adaptive, ksizes):
    """Max (from -FLT_MAX, as Paddle's MaxPool) or avg pooling of channel-first x: one
    elementwise max/add per window offset. Padding holds -FLT_MAX / 0; an adaptive bin's
    repeats of its last cell change no maximum and are masked out of the sums."""
    shape = tuple(x.shape[:2]) + tuple(win.out_sizes)
    if pooling_type == "max":
        low = _max_low(xp, x.dtype)
        best = xp.full(shape, low, dtype=x.dtype)
        for _, tap, _, _ in win.taps(xp, x, low):
            xp.maximum(best, tap, out=best)
        return best
    cdt = _compute_dtype(xp, x.dtype)
    total = xp.zeros(shape, dtype=cdt)
    zero = xp.asarray(0, dtype=cdt)
    for _, tap, _, valid in win.taps(xp, x.astype(cdt, copy=False), 0.0):
        total += xp.where(xp.asarray(valid), tap, zero) if win.adaptive else tap
    with np.errstate(invalid="ignore"):  # a window wholly past the input and its padding: 0/0, as in PaddlePaddle
        total /= xp.asarray(_pool_count(win, exclusive, adaptive, ksizes).astype(cdt))
    return total.astype(x.dtype, copy=False)


def _first_max_index(xp, x, win):
    """Per output: the maximum and the row-major plane index of the first window cell that
    is > every cell before it and > -FLT_MAX (Paddle's MaxPoolWithIndex: `if (ele < x)`
    from -FLT_MAX with index -1). Padding holds -inf, which never wins; an adaptive bin's
    repeats equal a cell seen before, so never win either."""
    shape = tuple(x.shape[:2]) + tuple(win.out_sizes)
    index = xp.full(shape, -1, dtype=xp.int64)
    best = xp.full(shape, _max_low(xp, x.dtype), dtype=x.dtype)
    for _, tap, pos, _ in win.taps(xp, x, -np.inf):
        take = tap > best
        best = xp.where(take, tap, best)
        index = xp.where(take, xp.asarray(win.plane_index(pos)), index)
    return index, best


def _scatter_plane(xp, index, values, x_shape, dtype):
    """dX [N, C, *S]: values [N, C, *out] added at plane indices (those >= 0)."""
    n, c = x_shape[:2]
    plane = math.prod(x_shape[2:])
    base = (xp.arange(n * c, dtype=xp.int64) * plane).reshape((n, c) + (1,) * (index.ndim - 2))
    ok = index >= 0
    flat = (base + xp.where(ok, index, 0)).reshape(-1)
    vals = xp.where(ok, values, xp.asarray(0, dtype=dtype)).astype(dtype, copy=False).reshape(-1)
    dx = scatter_add(xp, xp.zeros(n * c * plane, dtype=dtype), flat, vals)
    return dx.reshape(x_shape)


def _pool_grad(xp, x, out, dout, win, pooling_type, exclusive, adaptive, ksizes):
    """max: each window's dOut to its first cell (row-major) equal to Out (Paddle's
    MaxPool*GradFunctor); avg: float(1/pool size) * dOut to every cell of the window.
    Regular windows add into the padded input's gradient through the same strided slices
    as the forward (then crop); adaptive bins scatter-add."""
    cdt = _compute_dtype(xp, x.dtype)
    dout_c = dout.astype(cdt, copy=False)
    n, c = x.shape[:2]
    if pooling_type == "avg":
        with np.errstate(divide="ignore"):
            recip = (1.0 / _pool_count(win, exclusive, adaptive, ksizes).astype(np.float32)).astype(cdt)
        share = dout_c * xp.asarray(recip)
    if win.adaptive:
        if pooling_type == "max":
            index = xp.full(out.shape, -1, dtype=xp.int64)
            for _, tap, pos, _ in win.taps(xp, x, None):   # repeats equal a cell seen before
                take = (tap == out) & (index < 0)
                index = xp.where(take, xp.asarray(win.plane_index(pos)), index)
            return _scatter_plane(xp, index, dout_c, x.shape, cdt)
        plane = math.prod(x.shape[2:])
        dx = xp.zeros(n * c * plane, dtype=cdt)
        base = (xp.arange(n * c, dtype=xp.int64) * plane).reshape((n, c) + (1,) * (x.ndim - 2))
        zero = xp.asarray(0, dtype=cdt)
        for _, pos, valid in win.offsets():
            flat = (base + xp.asarray(win.plane_index(pos))).reshape(-1)
            scatter_add(xp, dx, flat, xp.where(xp.asarray(valid), share, zero).reshape(-1))
        return dx.reshape(x.shape)
    padded = tuple(x.shape[:2]) + tuple(s + win.full_pads[2 * i] + win.full_pads[2 * i + 1]
                                        for i, s in enumerate(win.sizes))
    dxpad = xp.zeros(padded, dtype=cdt)
    if pooling_type == "max":
        found = None
        # NaN padding equals nothing, so padding never takes a gradient
        for offset, tap, _, _ in win.taps(xp, x, np.nan):
            hit = tap == out
            if found is None:
                found = hit
            else:
                hit &= ~found
                found |= hit
            dxpad[win.tap_slices(offset)] += dout_c * hit
    else:
        for offset, _, _ in win.offsets():
            dxpad[win.tap_slices(offset)] += share
    return _crop_nd(dxpad, win.full_pads, win.sizes)


_POOL_ATTRS = ["ksize", "strides", "paddings", "ceil_mode", "exclusive", "data_format", "pooling_type",
               "global_pooling", "adaptive", "padding_algorithm"]


def _pool3d_setup(op, x, ksize, strides, paddings, ceil_mode, data_format, pooling_type, global_pooling,
                  adaptive, padding_algorithm):
    if pooling_type not in ("max", "avg"):
        raise ValueError(f"{op}: pooling_type must be 'max' or 'avg', got {pooling_type!r}")
    if x.ndim != 5:
        raise ValueError(f"{op} expects a 5-D input, got shape {tuple(x.shape)}")
    last = _channel_last(data_format)
    xc = _to_channel_first(x, last)
    ks, st, pads, out = _pool_sizes(op, 3, xc.shape[2:], ksize, strides, paddings, padding_algorithm,
                                    ceil_mode, global_pooling, adaptive)
    # PaddlePaddle 3.3.1's pool kernels run max pooling with adaptive=false: the output has
    # the adaptive size (ksize) but each window is ksize cells from i*stride, clipped to the
    # input (an empty one gives -FLT_MAX). Its layers use max_pool3d_with_index for adaptive
    # max pooling, which has true adaptive bins.
    bins = adaptive and pooling_type != "max"
    return last, xc, ks, _PoolWindows(xc.shape[2:], ks, st, pads, out, bins)


@kernel("pool3d", inputs=["X"], outputs=["Out"], attrs=_POOL_ATTRS)
def pool3d(xp, x, *, ksize, strides, paddings, ceil_mode, exclusive, data_format, pooling_type,
           global_pooling, adaptive, padding_algorithm):
    """pool2d's rules in 3-D: windows clipped to the input; avg divides by the clipped window
    size when exclusive or adaptive, else by kd*kh*kw; adaptive avg bins [floor(i*in/out),
    ceil((i+1)*in/out)); adaptive max as PaddlePaddle's kernel runs it (_pool3d_setup)."""
    last, xc, ks, win = _pool3d_setup("pool3d", x, ksize, strides, paddings, ceil_mode, data_format,
                                      pooling_type, global_pooling, adaptive, padding_algorithm)
    out = _pool_forward(xp, xc, win, pooling_type, exclusive, adaptive, ks)
    return xp.ascontiguousarray(_to_channel_last(out, last))


@kernel("pool3d_grad", inputs=["X", "Out", "Out@GRAD"], outputs=["X@GRAD"], attrs=_POOL_ATTRS)
def pool3d_grad(xp, x, out, dout, *, ksize, strides, paddings, ceil_mode, exclusive, data_format,
                pooling_type, global_pooling, adaptive, padding_algorithm):
    """max: each window's gradient goes to its first input (row-major) equal to Out; avg:
    dOut / pool size to every valid cell of the window."""
    last, xc, ks, win = _pool3d_setup("pool3d_grad", x, ksize, strides, paddings, ceil_mode, data_format,
                                      pooling_type, global_pooling, adaptive, padding_algorithm)
    dx = _pool_grad(xp, xc, _to_channel_first(out, last), _to_channel_first(dout, last), win, pooling_type,
                    exclusive, adaptive, ks)
    return xp.ascontiguousarray(_to_channel_last(dx, last)).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- max pool with index

_WITH_INDEX_ATTRS = ["ksize", "strides", "paddings", "global_pooling", "adaptive", "ceil_mode"]


def _with_index_windows(op, nd, x, ksize, strides, paddings, global_pooling, adaptive, ceil_mode):
    if x.ndim != nd + 2:
        raise ValueError(f"{op} expects a {nd + 2}-D input, got shape {tuple(x.shape)}")
    pads = _ints(paddings, nd, "paddings", op)  # symmetric, one value per spatial dim
    ks, st, pads2, out = _pool_sizes(op, nd, x.shape[2:], ksize, strides, pads, "EXPLICIT", ceil_mode,
                                     global_pooling, adaptive)
    return _PoolWindows(x.shape[2:], ks, st, pads2, out, adaptive)


def _max_pool_with_index(xp, op, nd, x, ksize, strides, paddings, global_pooling, adaptive, ceil_mode):
    """Out: the window maximum; Mask (int32): its row-major index in the input plane, the
    first cell strictly greater than all before it (Paddle's `if (ele < x)` from -FLT_MAX)."""
    win = _with_index_windows(op, nd, x, ksize, strides, paddings, global_pooling, adaptive, ceil_mode)
    index, best = _first_max_index(xp, x, win)
    return best, index.astype(xp.int32)


def _max_pool_with_index_grad(xp, x, mask, dout):
    """dX[Mask] += dOut (per sample and channel); the window attributes are not needed."""
    cdt = _compute_dtype(xp, x.dtype)
    dx = _scatter_plane(xp, mask.astype(xp.int64), dout.astype(cdt, copy=False), x.shape, cdt)
    return dx.astype(x.dtype, copy=False)


@kernel("max_pool2d_with_index", inputs=["X"], outputs=["Out", "Mask"], attrs=_WITH_INDEX_ATTRS)
def max_pool2d_with_index(xp, x, *, ksize, strides, paddings, global_pooling, adaptive, ceil_mode):
    return _max_pool_with_index(xp, "max_pool2d_with_index", 2, x, ksize, strides, paddings, global_pooling,
                                adaptive, ceil_mode)


@kernel("max_pool2d_with_index_grad", inputs=["X", "Mask", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=_WITH_INDEX_ATTRS)
def max_pool2d_with_index_grad(xp, x, mask, dout, *, ksize, strides, paddings, global_pooling, adaptive,
                               ceil_mode):
    return _max_pool_with_index_grad(xp, x, mask, dout)


@kernel("max_pool3d_with_index", inputs=["X"], outputs=["Out", "Mask"], attrs=_WITH_INDEX_ATTRS)
def max_pool3d_with_index(xp, x, *, ksize, strides, paddings, global_pooling, adaptive, ceil_mode):
    return _max_pool_with_index(xp, "max_pool3d_with_index", 3, x, ksize, strides, paddings, global_pooling,
                                adaptive, ceil_mode)


@kernel("max_pool3d_with_index_grad", inputs=["X", "Mask", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=_WITH_INDEX_ATTRS)
def max_pool3d_with_index_grad(xp, x, mask, dout, *, ksize, strides, paddings, global_pooling, adaptive,
                               ceil_mode):
    return _max_pool_with_index_grad(xp, x, mask, dout)


# ----------------------------------------------------------------------------- unpool

def _unpool_plane(op, nd, x, indices, output_size):
    if x.ndim != nd + 2 or tuple(indices.shape) != tuple(x.shape):
        raise ValueError(f"{op}: X and Indices must be {nd + 2}-D of one shape, got {tuple(x.shape)} and "
                         f"{tuple(indices.shape)}")
    out = _ints(output_size, nd, "output_size", op)
    if any(v <= 0 for v in out):
        raise ValueError(f"{op}: output_size must be positive, got {out}")
    return out


def _unpool(xp, op, nd, x, indices, output_size):
    """Out [N, C, *output_size] zeros but Out.plane[Indices] = X (Paddle's loop: a later
    element wins a shared index). Indices index the output plane, each in [0, its size)."""
    out = _unpool_plane(op, nd, x, indices, output_size)
    plane = math.prod(out)
    check_index_range(xp, op, "Indices", indices, plane, negative=False,
                      note=f" (the output plane of {out})")
    n, c = x.shape[:2]
    flat = (xp.arange(n * c, dtype=xp.int64).reshape(n, c, *([1] * nd)) * plane +
            indices.astype(xp.int64)).reshape(-1)
    res = xp.zeros(n * c * plane, dtype=x.dtype)
    res[flat] = x.reshape(-1)
    return res.reshape((n, c) + tuple(out))


def _unpool_grad(xp, op, nd, x, indices, dout):
    """dX = dOut.plane[Indices]."""
    n, c = x.shape[:2]
    plane = math.prod(dout.shape[2:])
    check_index_range(xp, op, "Indices", indices, plane, negative=False)
    flat = (xp.arange(n * c, dtype=xp.int64).reshape(n, c, *([1] * nd)) * plane + indices.astype(xp.int64))
    return dout.reshape(-1)[flat.reshape(-1)].reshape(x.shape).astype(x.dtype, copy=False)


@kernel("unpool", inputs=["X", "Indices"], outputs=["Out"],
        attrs=["unpooling_type", "ksize", "strides", "paddings", "output_size", "data_format"])
def unpool(xp, x, indices, *, unpooling_type, ksize, strides, paddings, output_size, data_format):
    """Max unpooling (the inverse of max_pool2d_with_index's Mask); the output size is the
    output_size attribute (the layer computes it from ksize/strides/paddings). Like
    PaddlePaddle's kernel, it reads X as NCHW whatever data_format says."""
    if unpooling_type != "max":
        raise ValueError(f"unpool: unpooling_type must be 'max', got {unpooling_type!r}")
    return _unpool(xp, "unpool", 2, x, indices, output_size)


@kernel("unpool_grad", inputs=["X", "Indices", "Out", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["unpooling_type", "ksize", "strides", "paddings", "output_size", "data_format"])
def unpool_grad(xp, x, indices, out, dout, *, unpooling_type, ksize, strides, paddings, output_size,
                data_format):
    return _unpool_grad(xp, "unpool_grad", 2, x, indices, dout)


@kernel("unpool3d", inputs=["X", "Indices"], outputs=["Out"],
        attrs=["ksize", "strides", "paddings", "output_size", "data_format"])
def unpool3d(xp, x, indices, *, ksize, strides, paddings, output_size, data_format):
    return _unpool(xp, "unpool3d", 3, x, indices, output_size)


@kernel("unpool3d_grad", inputs=["X", "Indices", "Out", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["ksize", "strides", "paddings", "output_size", "data_format"])
def unpool3d_grad(xp, x, indices, out, dout, *, ksize, strides, paddings, output_size, data_format):
    return _unpool_grad(xp, "unpool3d_grad", 3, x, indices, dout)


# ----------------------------------------------------------------------------- affine_grid

def _affine_output_shape(output_shape_t, output_shape):
    if output_shape_t is not None:
        return [int(v) for v in output_shape_t.reshape(-1).tolist()]  # an attribute tensor: read on the host
    return [int(v) for v in output_shape]


def _linspace(count, align_corners, dtype):
    """Paddle's affine_grid Linspace from -1 to 1 in `dtype` arithmetic: step 2/(count-1)
    from -1, or, not align_corners, step 2/count from -1*(count-1)/count."""
    t = np.dtype(dtype).type
    start, end = t(-1), t(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        if align_corners:
            # one cell: PaddlePaddle's step is 2/0 = inf and its grid -1 + 0*inf = NaN
            step = (end - start) / t(count - 1)
        else:
            step = (end - start) / t(count)
            start = start * (t(count - 1) / t(count))
        return (start + np.arange(count).astype(dtype) * step).astype(dtype)


def _affine_base(xp, sizes, align_corners, dtype):
    """The base grid [prod(sizes), nd+1]: (x, y[, z], 1) per output cell, x along the last axis."""
    axes = [_linspace(s, align_corners, dtype) for s in sizes]           # D?, H, W
    mesh = np.meshgrid(*axes, indexing="ij")
    cols = [m.reshape(-1) for m in reversed(mesh)] + [np.ones(math.prod(sizes), dtype=dtype)]
    return xp.asarray(np.stack(cols, axis=1))


@kernel("affine_grid", inputs=["Theta", "OutputShape"], outputs=["Output"],
        attrs=["output_shape", "align_corners"])
def affine_grid(xp, theta, output_shape_t=None, *, output_shape, align_corners):
    """Output[n, *cell] = Theta[n] @ (x, y[, z], 1) for the normalized coordinates of each
    cell of an [N, C, H, W] (Theta [N, 2, 3]) or [N, C, D, H, W] (Theta [N, 3, 4]) output."""
    shape = _affine_output_shape(output_shape_t, output_shape)
    nd = len(shape) - 2
    if nd not in (2, 3) or tuple(theta.shape[1:]) != (nd, nd + 1):
        raise ValueError(f"affine_grid: Theta must be [N, {nd}, {nd + 1}] for output shape {shape}, got "
                         f"{tuple(theta.shape)}")
    sizes = shape[2:]
    base = _affine_base(xp, sizes, align_corners, theta.dtype)          # [P, nd+1]
    out = xp.matmul(base, theta.transpose(0, 2, 1))                    # [N, P, nd]
    return out.reshape((theta.shape[0],) + tuple(sizes) + (nd,))


@kernel("affine_grid_grad", inputs=["OutputShape", "Output@GRAD"], outputs=["Theta@GRAD"],
        attrs=["output_shape", "align_corners"])
def affine_grid_grad(xp, output_shape_t, dout, *, output_shape, align_corners):
    """dTheta[n] = dOutput[n]^T @ base: [nd, P] x [P, nd+1]."""
    n, nd = dout.shape[0], dout.shape[-1]
    sizes = list(dout.shape[1:-1])
    base = _affine_base(xp, sizes, align_corners, dout.dtype)
    return xp.matmul(dout.reshape(n, -1, nd).transpose(0, 2, 1), base)


# ----------------------------------------------------------------------------- grid_sampler

def _grid_source(xp, g, size, align_corners, padding_mode):
    """Unnormalize one grid component to input coordinates and apply the padding mode
    (Paddle's Unnormalize + ClipWithMask, in the grid's dtype): (coordinate, d coordinate /
    d grid)."""
    t = g.dtype.type
    max_val = size - 1
    factor = t(max_val * 0.5) if align_corners else t((max_val + 1) * 0.5)
    c = (g + t(1)) * factor if align_corners else (g + t(1)) * factor - t(0.5)
    scale = xp.full(g.shape, factor, dtype=g.dtype)
    one, zero = t(1), t(0)
    if padding_mode == "border":
        res = xp.minimum(xp.maximum(c, zero), t(max_val))
        scale = scale * (res == c).astype(g.dtype)
        c = res
    elif padding_mode == "reflection":
        if align_corners:
            double = t(max_val * 2)
            neg = c < zero
            a = xp.abs(c)
        else:
            double = t((max_val + 1) * 2)
            shifted = c + t(0.5)
            neg = shifted < zero
            a = xp.abs(shifted)
        extra = a - xp.floor(a / double) * double if max_val > 0 or not align_corners else a
        flip = extra > (double - extra)
        sign = xp.where(neg == flip, one, -one)
        reflected = xp.minimum(extra, double - extra)
        if align_corners:
            c = reflected if max_val > 0 else xp.zeros_like(c)
            scale = scale * sign
        else:
            reflected = reflected - t(0.5)
            res = xp.minimum(xp.maximum(reflected, zero), t(max_val))
            scale = scale * sign * (res == reflected).astype(g.dtype)
            c = res
    elif padding_mode != "zeros":
        raise ValueError(f"grid_sampler: padding_mode must be 'zeros', 'border' or 'reflection', "
                         f"got {padding_mode!r}")
    return c, scale


def _round_half_away(xp, v):
    """C's round(): halves away from zero (numpy's round goes to even)."""
    return xp.sign(v) * xp.floor(xp.abs(v) + v.dtype.type(0.5))


class _GridSample:
    """The sampling points of grid_sampler: per spatial axis (D, H, W order) the source
    coordinate [N, *out] and its derivative by the grid component."""

    def __init__(self, xp, x, grid, align_corners, padding_mode):
        self.xp = xp
        self.sizes = list(x.shape[2:])
        nd = len(self.sizes)
        if grid.ndim != nd + 2 or grid.shape[-1] != nd or grid.shape[0] != x.shape[0]:
            raise ValueError(f"grid_sampler: Grid must be [N, *out, {nd}] for X {tuple(x.shape)}, "
                             f"got {tuple(grid.shape)}")
        self.coords, self.scales = [], []
        for i, size in enumerate(self.sizes):  # grid component nd-1-i holds axis i (x is the last axis)
            c, s = _grid_source(xp, grid[..., nd - 1 - i], size, align_corners, padding_mode)
            self.coords.append(c)
            self.scales.append(s)
        self.n, self.c = x.shape[:2]
        self.out = tuple(grid.shape[1:-1])

    def inside(self, pos):
        """Per point: every coordinate in [0, size-1] (Paddle's IsInBound, on floats)."""
        ok = None
        for p, size in zip(pos, self.sizes):
            v = (p >= 0) & (p <= size - 1)
            ok = v if ok is None else ok & v
        return ok

    def flat(self, pos):
        """Plane index of integer-valued coordinates `pos` (clipped into the input)."""
        xp = self.xp
        flat = None
        for p, size in zip(pos, self.sizes):
            q = xp.clip(xp.nan_to_num(p, nan=0.0), 0, size - 1).astype(xp.int64)
            flat = q if flat is None else flat * size + q
        return flat

    def gather(self, xt, pos):
        """X (as [N, plane, C]) at the points `pos`, 0 outside: [N, C, *out]."""
        xp = self.xp
        inside = self.inside(pos)
        vals = xt[xp.arange(self.n)[:, None], self.flat(pos).reshape(self.n, -1)]        # [N, P, C]
        vals = vals * inside.reshape(self.n, -1, 1).astype(xt.dtype)
        return vals.transpose(0, 2, 1).reshape((self.n, self.c) + self.out)

    def scatter(self, dx_flat, pos, values):
        """dX (flat [N*C*plane]) += values [N, C, *out] at the points `pos` that are inside."""
        xp = self.xp
        plane = math.prod(self.sizes)
        inside = self.inside(pos).reshape(self.n, 1, -1)
        idx = self.flat(pos).reshape(self.n, 1, -1)
        base = (xp.arange(self.n * self.c, dtype=xp.int64) * plane).reshape(self.n, self.c, 1)
        vals = xp.where(inside, values.reshape(self.n, self.c, -1), xp.asarray(0, dtype=values.dtype))
        scatter_add(self.xp, dx_flat, (base + idx).reshape(-1), vals.reshape(-1))

    def corners(self):
        """The 2^nd corners of each point, in Paddle's order (the last axis innermost): per
        corner (positions per axis, per-axis weights, which corner bit each axis took).
        Weights: (lo+1 - x) for the low corner, (x - lo) for the high one."""
        xp = self.xp
        lows = [xp.floor(c) for c in self.coords]
        one = self.coords[0].dtype.type(1)
        his = [lo + one for lo in lows]
        w_lo = [hi - c for hi, c in zip(his, self.coords)]     # Paddle's d_e / d_s / d_b
        w_hi = [c - lo for c, lo in zip(self.coords, lows)]     # d_w / d_n / d_t
        for bits in itertools.product((0, 1), repeat=len(self.sizes)):
            pos = [hi if b else lo for b, lo, hi in zip(bits, lows, his)]
            weights = [wh if b else wl for b, wl, wh in zip(bits, w_lo, w_hi)]
            yield pos, weights, bits

    def nearest_points(self):
        """The coordinates rounded as C's round() does (the bounds are checked after)."""
        return [_round_half_away(self.xp, c) for c in self.coords]


def _weight_product(weights, bcast):
    """weights (last axis first, as Paddle multiplies them) broadcast to [N, 1, *out]."""
    w = None
    for v in reversed(weights):
        v = bcast(v)
        w = v if w is None else w * v
    return w


_GRID_ATTRS = ["mode", "padding_mode", "align_corners"]


@kernel("grid_sampler", inputs=["X", "Grid"], outputs=["Output"], attrs=_GRID_ATTRS)
def grid_sampler(xp, x, grid, *, mode, padding_mode, align_corners):
    """Sample X [N, C, (D,) H, W] at Grid [N, (Do,) Ho, Wo, 2 or 3] ((x, y[, z]) in [-1, 1]):
    bilinear (trilinear for 5-D) or nearest, out-of-input corners contributing 0."""
    if x.ndim not in (4, 5):
        raise ValueError(f"grid_sampler expects a 4-D or 5-D X, got shape {tuple(x.shape)}")
    if mode not in ("bilinear", "nearest"):
        raise ValueError(f"grid_sampler: mode must be 'bilinear' or 'nearest', got {mode!r}")
    s = _GridSample(xp, x, grid.astype(x.dtype, copy=False), align_corners, padding_mode)
    xt = x.reshape(s.n, s.c, -1).transpose(0, 2, 1)
    if mode == "nearest":
        return s.gather(xt, s.nearest_points())

    def bcast(v):
        return v.reshape((s.n, 1) + s.out)

    out = None
    for pos, weights, _ in s.corners():
        term = s.gather(xt, pos)
        for v in reversed(weights):  # v * d_x * d_y (* d_z), in Paddle's order
            term = term * bcast(v)
        out = term if out is None else out + term
    return out


@kernel("grid_sampler_grad", inputs=["X", "Grid", "Output@GRAD"], outputs=["X@GRAD", "Grid@GRAD"],
        attrs=_GRID_ATTRS)
def grid_sampler_grad(xp, x, grid, dout, *, mode, padding_mode, align_corners,
                      need=frozenset({"X@GRAD", "Grid@GRAD"})):
    """dX: dOut spread to the corners with their weights; dGrid (bilinear only; nearest
    gives zeros): sum over channels of dOut * d(sample)/d(coordinate), times the
    coordinate's derivative by the grid component."""
    s = _GridSample(xp, x, grid.astype(x.dtype, copy=False), align_corners, padding_mode)
    nd = len(s.sizes)
    xt = x.reshape(s.n, s.c, -1).transpose(0, 2, 1)
    dx_flat = xp.zeros(x.size, dtype=x.dtype)

    def bcast(v):
        return v.reshape((s.n, 1) + s.out)

    dgrid = None
    if mode == "nearest":
        s.scatter(dx_flat, s.nearest_points(), dout)
        if "Grid@GRAD" in need:
            dgrid = xp.zeros(grid.shape, dtype=grid.dtype)
    else:
        partial = [xp.zeros((s.n,) + s.out, dtype=x.dtype) for _ in range(nd)]
        for pos, weights, bits in s.corners():
            if "X@GRAD" in need:
                s.scatter(dx_flat, pos, dout * _weight_product(weights, bcast))
            if "Grid@GRAD" in need:
                val_dout = (s.gather(xt, pos) * dout)
                for i in range(nd):
                    others = [w for j, w in enumerate(weights) if j != i]
                    term = val_dout * _weight_product(others, bcast) if others else val_dout
                    term = term.sum(axis=1)
                    partial[i] = partial[i] + term if bits[i] else partial[i] - term
        if "Grid@GRAD" in need:
            comps = [partial[nd - 1 - k] * s.scales[nd - 1 - k] for k in range(nd)]   # x, y[, z]
            dgrid = xp.stack(comps, axis=-1).astype(grid.dtype, copy=False)
    dx = dx_flat.reshape(x.shape) if "X@GRAD" in need else None
    return dx, dgrid


# ----------------------------------------------------------------------------- deformable_conv

class _Deform:
    """The sampling of a deformable convolution: per (sample, deformable group, kernel
    offset, output position) the point (h, w) = (oh*stride - pad + i*dilation + offset_h,
    ...) and its four bilinear corners (Paddle's DmcnIm2colBilinear: only points with
    -1 < h < H and -1 < w < W are sampled; a corner outside the input contributes 0)."""

    def __init__(self, xp, x, offset, w, strides, paddings, dilations, deformable_groups, op):
        n, c, h, wd = x.shape
        o, cg, kh, kw = w.shape
        dg = int(deformable_groups)
        sh, sw = _ints(strides, 2, "strides", op)
        ph, pw = _ints(paddings, 2, "paddings", op)
        dh, dw = _ints(dilations, 2, "dilations", op)
        oh = (h + 2 * ph - (dh * (kh - 1) + 1)) // sh + 1
        ow = (wd + 2 * pw - (dw * (kw - 1) + 1)) // sw + 1
        if dg <= 0 or c % dg:
            raise ValueError(f"{op}: {c} input channels are not divisible into deformable_groups={dg}")
        if tuple(offset.shape) != (n, 2 * dg * kh * kw, oh, ow):
            raise ValueError(f"{op}: Offset must be [{n}, {2 * dg * kh * kw}, {oh}, {ow}], got "
                             f"{tuple(offset.shape)}")
        self.xp, self.shape = xp, (n, c, h, wd)
        self.dg, self.k, self.out = dg, kh * kw, (oh, ow)
        t = offset.dtype.type
        off = offset.reshape(n, dg, kh * kw, 2, oh, ow)
        base_h = (np.arange(oh)[None, :] * sh - ph + np.arange(kh)[:, None] * dh)          # [kh, oh]
        base_w = (np.arange(ow)[None, :] * sw - pw + np.arange(kw)[:, None] * dw)          # [kw, ow]
        bh = np.repeat(base_h, kw, axis=0).reshape(1, 1, kh * kw, oh, 1).astype(offset.dtype)
        bw = np.tile(base_w, (kh, 1)).reshape(1, 1, kh * kw, 1, ow).astype(offset.dtype)
        self.ph = xp.asarray(bh) + off[:, :, :, 0]                                          # [N, dg, K, oh, ow]
        self.pw = xp.asarray(bw) + off[:, :, :, 1]
        self.sampled = (self.ph > t(-1)) & (self.pw > t(-1)) & (self.ph < t(h)) & (self.pw < t(wd))
        self.h_lo, self.w_lo = xp.floor(self.ph), xp.floor(self.pw)
        self.lh, self.lw = self.ph - self.h_lo, self.pw - self.w_lo
        self.hh, self.hw = t(1) - self.lh, t(1) - self.lw

    def corners(self):
        """(row, col, weight, d weight/d h, d weight/d w, valid) of the four corners, in
        Paddle's order (h_lo,w_lo), (h_lo,w_hi), (h_hi,w_lo), (h_hi,w_hi)."""
        n, c, h, wd = self.shape
        one = self.ph.dtype.type(1)
        for bh, bw in ((0, 0), (0, 1), (1, 0), (1, 1)):
            row = self.h_lo + one if bh else self.h_lo
            col = self.w_lo + one if bw else self.w_lo
            wh, ww = (self.lh if bh else self.hh), (self.lw if bw else self.hw)
            ok = self.sampled & (row >= 0) & (row <= h - 1) & (col >= 0) & (col <= wd - 1)
            yield row, col, wh * ww, (ww if bh else -ww), (wh if bw else -wh), ok

    def flat(self, row, col):
        xp = self.xp
        h, wd = self.shape[2:]
        r = xp.clip(xp.nan_to_num(row, nan=0.0), 0, h - 1).astype(xp.int64)
        q = xp.clip(xp.nan_to_num(col, nan=0.0), 0, wd - 1).astype(xp.int64)
        return r * wd + q

    def gather(self, xg, row, col, ok):
        """xg [N, dg, C/dg, H*W] at the corner: [N, dg, C/dg, K, oh, ow] (0 where not ok)."""
        xp = self.xp
        n = self.shape[0]
        idx = self.flat(row, col).reshape(n, self.dg, 1, -1)
        vals = xg[xp.arange(n).reshape(n, 1, 1, 1), xp.arange(self.dg).reshape(1, -1, 1, 1),
                  xp.arange(xg.shape[2]).reshape(1, 1, -1, 1), idx]
        vals = vals.reshape(xg.shape[:3] + (self.k,) + self.out)
        return vals * ok[:, :, None].astype(vals.dtype)


def _deform_columns(xp, d, x):
    """The bilinear samples [N, dg, C/dg, K, oh, ow] (before the mask)."""
    n, c = x.shape[:2]
    xg = x.reshape(n, d.dg, c // d.dg, -1)
    val = None
    for row, col, weight, _, _, ok in d.corners():
        term = weight[:, :, None] * d.gather(xg, row, col, ok)
        val = term if val is None else val + term
    return val


def _deform_check(op, x, w, mask, d, groups, im2col_step):
    n, c = x.shape[:2]
    g = _groups(groups)
    if w.shape[1] * g != c or w.shape[0] % g:
        raise ValueError(f"{op}: Input has {c} channels, Filter {tuple(w.shape)} with groups={g}")
    if mask is not None and tuple(mask.shape) != (n, d.dg * d.k) + d.out:
        raise ValueError(f"{op}: Mask must be {[n, d.dg * d.k, *d.out]}, got {tuple(mask.shape)}")
    step = int(im2col_step)
    if step <= 0 or (n > step and n % step):
        raise ValueError(f"{op}: the batch size {n} must be at most im2col_step {im2col_step} or divisible "
                         "by it")
    if w.shape[0] % d.dg:
        raise ValueError(f"{op}: the filter's output channels ({w.shape[0]}) must be divisible by "
                         f"deformable_groups ({d.dg})")
    return g


def _deformable_conv(xp, op, x, offset, mask, w, strides, paddings, dilations, deformable_groups, groups,
                     im2col_step):
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"{op} expects 4-D Input and Filter, got {tuple(x.shape)} and {tuple(w.shape)}")
    cdt = _work_dtype(xp, x.dtype)
    xc, offc, wc = (a.astype(cdt, copy=False) for a in (x, offset, w))
    d = _Deform(xp, xc, offc, wc, strides, paddings, dilations, deformable_groups, op)
    g = _deform_check(op, x, w, mask, d, groups, im2col_step)
    cols = _deform_columns(xp, d, xc)                                # [N, dg, C/dg, K, oh, ow]
    if mask is not None:
        cols = cols * mask.astype(cdt, copy=False).reshape(x.shape[0], d.dg, 1, d.k, *d.out)
    n, c = x.shape[:2]
    o, cg = w.shape[:2]
    p = d.out[0] * d.out[1]
    cols = cols.reshape(n, g, cg * d.k, p)
    out = xp.matmul(wc.reshape(g, o // g, cg * d.k), cols).reshape(n, o, *d.out)
    return out.astype(x.dtype, copy=False)


def _deformable_conv_grad(xp, op, x, offset, mask, w, dy, strides, paddings, dilations, deformable_groups,
                          groups, im2col_step, need):
    cdt = _work_dtype(xp, x.dtype)
    xc, offc, wc, dyc = (a.astype(cdt, copy=False) for a in (x, offset, w, dy))
    d = _Deform(xp, xc, offc, wc, strides, paddings, dilations, deformable_groups, op)
    g = _deform_check(op, x, w, mask, d, groups, im2col_step)
    n, c, h, wd = x.shape
    o, cg = w.shape[:2]
    og, p, cd = o // g, d.out[0] * d.out[1], c // d.dg
    m = None if mask is None else mask.astype(cdt, copy=False).reshape(n, d.dg, 1, d.k, *d.out)
    # one 2-D GEMM per group over all samples (numpy's batched matmul is slow with a
    # transposed operand): dOut as [g, O/g, N*P]
    dyg = dyc.reshape(n, g, og, p).transpose(1, 2, 0, 3).reshape(g, og, n * p)
    result = {}
    if "Filter@GRAD" in need:
        cols = _deform_columns(xp, d, xc)
        if m is not None:
            cols = cols * m
        cols = cols.reshape(n, g, cg * d.k, p).transpose(1, 2, 0, 3).reshape(g, cg * d.k, n * p)
        dw = xp.stack([dyg[i] @ cols[i].T for i in range(g)])           # [g, og, cg*K]
        result["Filter@GRAD"] = dw.reshape(w.shape).astype(w.dtype, copy=False)
    want_sample_grads = {"Input@GRAD", "Offset@GRAD", "Mask@GRAD"} & set(need)
    if want_sample_grads:
        wmat = wc.reshape(g, og, cg * d.k)
        dcols = xp.stack([wmat[i].T @ dyg[i] for i in range(g)])        # [g, cg*K, N*P]
        # d loss / d masked column, as [N, dg, C/dg, K, oh, ow]
        dcols = dcols.reshape(c, d.k, n, p).transpose(2, 0, 1, 3).reshape(n, d.dg, cd, d.k, *d.out)
        dval = dcols * m if m is not None else dcols
        xg = xc.reshape(n, d.dg, cd, -1)
        dx_flat = xp.zeros(n * c * h * wd, dtype=cdt) if "Input@GRAD" in need else None
        doff_h = xp.zeros((n, d.dg, d.k) + d.out, dtype=cdt)
        doff_w = xp.zeros((n, d.dg, d.k) + d.out, dtype=cdt)
        val = xp.zeros((n, d.dg, cd, d.k) + d.out, dtype=cdt) if m is not None else None
        chan = (xp.arange(n * c, dtype=xp.int64) * (h * wd)).reshape(n, d.dg, cd, 1)
        for row, col, weight, dwh, dww, ok in d.corners():
            v = d.gather(xg, row, col, ok)
            if val is not None:
                val = val + weight[:, :, None] * v
            dv = (dval * v).sum(axis=2)
            doff_h = doff_h + dv * dwh
            doff_w = doff_w + dv * dww
            if dx_flat is not None:
                contrib = dval * (weight * ok.astype(cdt))[:, :, None]
                idx = (chan + d.flat(row, col).reshape(n, d.dg, 1, -1)).reshape(-1)
                scatter_add(xp, dx_flat, idx, contrib.reshape(-1))
        zero = xp.asarray(0, dtype=cdt)
        doff_h = xp.where(d.sampled, doff_h, zero)
        doff_w = xp.where(d.sampled, doff_w, zero)
        if "Input@GRAD" in need:
            result["Input@GRAD"] = dx_flat.reshape(x.shape).astype(x.dtype, copy=False)
        if "Offset@GRAD" in need:
            doff = xp.stack([doff_h, doff_w], axis=3).reshape(offset.shape)
            result["Offset@GRAD"] = doff.astype(offset.dtype, copy=False)
        if "Mask@GRAD" in need and mask is not None:
            dmask = (dcols * val).sum(axis=2).reshape(mask.shape)
            result["Mask@GRAD"] = dmask.astype(mask.dtype, copy=False)
    return result


_DEFORM_ATTRS = ["strides", "paddings", "dilations", "deformable_groups", "groups", "im2col_step"]
_DEFORM_GRADS = frozenset({"Input@GRAD", "Offset@GRAD", "Filter@GRAD", "Mask@GRAD"})


@kernel("deformable_conv", inputs=["Input", "Offset", "Mask", "Filter"], outputs=["Output"],
        attrs=_DEFORM_ATTRS)
def deformable_conv(xp, x, offset, mask, w, *, strides, paddings, dilations, deformable_groups, groups,
                    im2col_step):
    """DCNv2: Output = Filter (*) (bilinear samples of Input at the offset kernel points, times
    Mask). Offset [N, 2*dg*kh*kw, oh, ow] holds (dh, dw) per deformable group and kernel
    point; Mask [N, dg*kh*kw, oh, ow]; channel c belongs to deformable group c // (C/dg)."""
    return _deformable_conv(xp, "deformable_conv", x, offset, mask, w, strides, paddings, dilations,
                            deformable_groups, groups, im2col_step)


@kernel("deformable_conv_grad", inputs=["Input", "Offset", "Mask", "Filter", "Output@GRAD"],
        outputs=["Input@GRAD", "Offset@GRAD", "Filter@GRAD", "Mask@GRAD"], attrs=_DEFORM_ATTRS)
def deformable_conv_grad(xp, x, offset, mask, w, dy, *, strides, paddings, dilations, deformable_groups,
                         groups, im2col_step, need=_DEFORM_GRADS):
    r = _deformable_conv_grad(xp, "deformable_conv_grad", x, offset, mask, w, dy, strides, paddings,
                              dilations, deformable_groups, groups, im2col_step, need)
    return r.get("Input@GRAD"), r.get("Offset@GRAD"), r.get("Filter@GRAD"), r.get("Mask@GRAD")


@kernel("deformable_conv_v1", inputs=["Input", "Offset", "Filter"], outputs=["Output"], attrs=_DEFORM_ATTRS)
def deformable_conv_v1(xp, x, offset, w, *, strides, paddings, dilations, deformable_groups, groups,
                       im2col_step):
    """DCNv1: deformable_conv without the modulation Mask."""
    return _deformable_conv(xp, "deformable_conv_v1", x, offset, None, w, strides, paddings, dilations,
                            deformable_groups, groups, im2col_step)


@kernel("deformable_conv_v1_grad", inputs=["Input", "Offset", "Filter", "Output@GRAD"],
        outputs=["Input@GRAD", "Offset@GRAD", "Filter@GRAD"], attrs=_DEFORM_ATTRS)
def deformable_conv_v1_grad(xp, x, offset, w, dy, *, strides, paddings, dilations, deformable_groups, groups,
                            im2col_step, need=frozenset({"Input@GRAD", "Offset@GRAD", "Filter@GRAD"})):
    r = _deformable_conv_grad(xp, "deformable_conv_v1_grad", x, offset, None, w, dy, strides, paddings,
                              dilations, deformable_groups, groups, im2col_step, need)
    return r.get("Input@GRAD"), r.get("Offset@GRAD"), r.get("Filter@GRAD")
