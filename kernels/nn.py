"""Neural-network kernels: convolution, pooling, normalization, embedding, resizing.

Semantics follow PaddlePaddle's legacy ops (the phi CPU kernels are the reference):

- conv2d / depthwise_conv2d: im2col through a strided view of the padded input and one
  (batched) matmul; groups are a batch dim. padding_algorithm "SAME" pads as TensorFlow
  does from the *undilated* kernel size and forces the dilations to 1 (Paddle's
  UpdatePaddingAndDilation); "VALID" zeroes the paddings. depthwise_conv2d ignores the
  `groups` attribute (groups = input channels), as Paddle's depthwise kernel does.
- conv2d_transpose: one matmul to columns, then col2im as kh*kw strided adds (stride ==
  kernel: each tap assigned to its own cells, kernels/conv.py transpose_tiles_nchw).
- pool2d: windows start at i*stride - pad_top and are clipped to the input
  ([max(start, 0), min(start + k, H))); avg divides by the clipped window size when
  `exclusive` (or adaptive), else by the window cut at the input's end plus its leading
  padding (inclusive_pool_count: kh*kw but where ceil_mode or a larger trailing padding
  runs past that); max starts from -FLT_MAX. The window is reduced by one elementwise
  max/add per window offset over a strided view (numpy reduces a view's tiny trailing
  window axes ~25x slower). adaptive: avg over bins [floor(i*in/out),
  ceil((i+1)*in/out)); max as PaddlePaddle's kernel runs it, windows of ksize from i*stride
  (see pool2d).
- batch_norm: batch statistics use the biased variance, and so does the running-variance
  update; SavedVariance holds 1/sqrt(var + eps).
- interpolation follows Paddle's index/weight formulas including its float32/float64 mix.

Gradient kernels (end of the file) reuse the same views: conv2d_grad is one GEMM of the
columns with dOut for the filter and W^T dOut + col2im (a strided add per window offset)
for the input (with one group in NCHW, a chunk of samples at a time: kernels/conv_grad.py);
pool2d_grad makes one strided pass per window offset over cache-sized blocks of planes,
routing max-pool gradients to the first maximum of each window; max pooling over windows
that tile the plane takes kernels/pool_tiles.py; batch_norm_grad reads SavedMean and
SavedVariance (the inverse std) in training, the running Mean/Variance otherwise.
"""
from __future__ import annotations

import functools
import math
import struct
from contextlib import nullcontext
from dataclasses import dataclass

import numpy as np

from keel.kernels.conv import conv2d_nchw, general_nchw, nchw_path, transpose_tiles_nchw
from keel.kernels.conv_grad import filter_grad_chunked, input_grad_chunked_s1
from keel.kernels.conv import pad_spatial as _pad_spatial
from keel.kernels.conv import windows as _windows
from keel.kernels.blocked import row_blocks
from keel.kernels.pool_tiles import tiled_max, tiles_the_input
from keel.kernels.registry import KEEPS_INPUTS, kernel
from keel.kernels.sums import column_dots, column_sums, last_axis_dots, last_axis_sums
from keel.kernels.tensor import check_index_range, scatter_add

_FLT_MAX = 3.4028234663852886e38  # C's FLT_MAX: Paddle's initial value for max pooling


# ----------------------------------------------------------------------------- helpers

def _compute_dtype(xp, dtype):
    """The dtype statistics and reductions run in: at least float32."""
    return xp.promote_types(dtype, xp.float32)


def _as_list(value, n):
    value = list(value) if isinstance(value, (list, tuple)) else [value]
    return value * n if len(value) == 1 else value


def _explicit_pads(paddings, ndim):
    """Paddle's paddings: `ndim` values (symmetric) or 2*ndim values [before, after, ...]."""
    paddings = [int(p) for p in paddings]
    if len(paddings) == ndim:
        return [p for p in paddings for _ in range(2)]
    if len(paddings) == 2 * ndim:
        return paddings
    raise ValueError(f"paddings must have {ndim} or {2 * ndim} values, got {paddings}")


def _resolve_padding(paddings, algorithm, in_sizes, strides, ksizes):
    """[before0, after0, before1, after1] for EXPLICIT/SAME/VALID (Paddle's UpdatePadding)."""
    ndim = len(in_sizes)
    if algorithm == "SAME":
        pads = []
        for size, s, k in zip(in_sizes, strides, ksizes):
            out = (size + s - 1) // s
            total = max((out - 1) * s + k - size, 0)
            pads += [total // 2, total - total // 2]
        return pads
    if algorithm == "VALID":
        return [0] * (2 * ndim)
    if algorithm not in ("EXPLICIT", ""):
        raise ValueError(f"unknown padding_algorithm {algorithm!r}")
    return _explicit_pads(paddings, ndim)


def _channel_last(data_format: str) -> bool:
    return data_format in ("NHWC", "NDHWC", "NLC")


def _spatial(x, channel_last):
    return (x.shape[1], x.shape[2]) if channel_last else (x.shape[2], x.shape[3])


# ----------------------------------------------------------------------------- conv2d

def _conv_setup(x, w_hw, strides, paddings, padding_algorithm, dilations, channel_last):
    """(sh, sw, dh, dw, pads) of a convolution: SAME forces the dilations to 1 (Paddle's
    UpdatePaddingAndDilation) and pads from the undilated kernel size."""
    h, wd = _spatial(x, channel_last)
    sh, sw = [int(s) for s in _as_list(strides, 2)]
    dh, dw = [int(d) for d in _as_list(dilations, 2)]
    if padding_algorithm == "SAME":
        dh = dw = 1
    pads = _resolve_padding(paddings, padding_algorithm, (h, wd), (sh, sw), w_hw)
    return sh, sw, dh, dw, pads


def _conv_core(xp, xpad, w, oh, ow, sh, sw, dh, dw, g, channel_last):
    """The convolution of an already padded input with Filter w [O, C/g, kh, kw], restricted
    to the first oh x ow output positions: im2col through the strided window view + GEMM."""
    o, cg, kh, kw = w.shape
    n = xpad.shape[0]
    c = cg * g
    win = _windows(xp, xpad, oh, ow, kh, kw, sh, sw, dh, dw, channel_last)
    p = n * oh * ow
    og = o // g
    if channel_last:
        # win [N, oh, ow, kh, kw, C] -> cols [P, kh*kw*C] (one copy); out [P, O] is NHWC already
        if g == 1:
            cols = win.reshape(p, kh * kw * c)
            wmat = w.transpose(2, 3, 1, 0).reshape(kh * kw * c, o)
            out = cols @ wmat
        else:
            cols = win.reshape(p, kh, kw, g, cg).transpose(3, 0, 1, 2, 4).reshape(g, p, kh * kw * cg)
            wmat = w.reshape(g, og, cg, kh, kw).transpose(0, 3, 4, 2, 1).reshape(g, kh * kw * cg, og)
            out = xp.matmul(cols, wmat).transpose(1, 0, 2).reshape(p, o)
        return out.reshape(n, oh, ow, o)
    return general_nchw(xp, xpad, w, oh, ow, sh, sw, dh, dw, g)


@dataclass(frozen=True)
class ConvGeometry:
    """A checked 2-D convolution's layout, groups, strides, dilations, resolved paddings,
    output size and computing dtype (float16 computes in float32)."""
    channel_last: bool
    groups: int
    strides: tuple
    dilations: tuple
    pads: list
    out_hw: tuple
    out_shape: tuple
    dtype: object

    def run(self, xp, x, w, epilogue=None):
        """The convolution of x and w (both in the computing dtype): NCHW by the path its
        shape takes (kernels/conv.py), NHWC by the general formulation (`epilogue` is for
        NCHW only)."""
        (sh, sw), (dh, dw), (oh, ow) = self.strides, self.dilations, self.out_hw
        if self.channel_last:
            return _conv_core(xp, _pad_spatial(xp, x, self.pads, True), w, oh, ow, sh, sw, dh, dw, self.groups,
                              True)
        return conv2d_nchw(xp, x, w, self.strides, self.dilations, self.pads, self.groups, oh, ow,
                           epilogue=epilogue)


def _conv_geometry(xp, x, w, strides, paddings, padding_algorithm, dilations, groups, data_format,
                   op="conv2d") -> ConvGeometry:
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"{op} expects 4-D Input and Filter, got {x.shape} and {w.shape}")
    channel_last = _channel_last(data_format)
    c = x.shape[3] if channel_last else x.shape[1]
    h, wd = _spatial(x, channel_last)
    o, cg, kh, kw = w.shape
    g = int(groups) if groups and groups > 0 else 1
    if c != cg * g or o % g:
        raise ValueError(f"{op}: Input has {c} channels, Filter {tuple(w.shape)} with groups={g} "
                         f"expects {cg * g} input channels and out channels divisible by groups")
    sh, sw, dh, dw, pads = _conv_setup(x, (kh, kw), strides, paddings, padding_algorithm, dilations,
                                       channel_last)
    oh = (h + pads[0] + pads[1] - (dh * (kh - 1) + 1)) // sh + 1
    ow = (wd + pads[2] + pads[3] - (dw * (kw - 1) + 1)) // sw + 1
    if oh <= 0 or ow <= 0:
        raise ValueError(f"{op}: output size ({oh}, {ow}) is not positive for input {tuple(x.shape)}")
    n = x.shape[0]
    out_shape = (n, oh, ow, o) if channel_last else (n, o, oh, ow)
    cdt = xp.float32 if x.dtype == xp.float16 else x.dtype
    return ConvGeometry(channel_last, g, (sh, sw), (dh, dw), pads, (oh, ow), out_shape, cdt)


def conv2d_finish(xp, out, dtype):
    """The convolution's result, contiguous, in the input's dtype."""
    return xp.ascontiguousarray(out).astype(dtype, copy=False)


def _conv2d(xp, x, w, strides, paddings, padding_algorithm, dilations, groups, data_format):
    geo = _conv_geometry(xp, x, w, strides, paddings, padding_algorithm, dilations, groups, data_format)
    out = geo.run(xp, x.astype(geo.dtype, copy=False), w.astype(geo.dtype, copy=False))
    return conv2d_finish(xp, out, x.dtype)


_CONV_ATTRS = ["strides", "paddings", "padding_algorithm", "dilations", "groups", "data_format"]
# Shapes a specialized convolution or pooling keeps plans for (a program's op sees one or a few).
_PLANS_KEPT = 8


def _per_shape(make_plan):
    """run(*arrays) = make_plan(*arrays)(*arrays), each plan made once per the arrays'
    shapes and dtypes (the last _PLANS_KEPT of them kept): what a specialized kernel works
    out from the shapes is not worked out again on every call. The plans (convolutions,
    pooling) write only new arrays, never into their inputs: `run` says so to the executor
    (kernels/registry.py `KEEPS_INPUTS`), which then need not order it after the other
    readers of a donated input."""
    plans = {}

    def run(*arrays):
        key = tuple([(a.shape, a.dtype) for a in arrays])
        plan = plans.get(key)
        if plan is None:
            if len(plans) >= _PLANS_KEPT:
                plans.clear()
            plan = plans[key] = make_plan(*arrays)
        return plan(*arrays)
    setattr(run, KEEPS_INPUTS, True)
    return run


def _specialize_conv(depthwise: bool):
    """A specialize hook (kernels/registry.py) for conv2d / depthwise_conv2d on float32 /
    float64 NCHW: the geometry (checks, paddings, output size) and the path
    (kernels/conv.py nchw_path) are worked out once per input shape, not per call; a call
    is then the path alone. With the padding and window views made cheaper, conv2d 3x3 per
    call (the benchmark CNN's at batch 1; CPU time, medians of 3 alternating processes,
    loaded machine): [1, 1, 28, 28] -> 16 18.5 -> 10.0 us, [1, 16, 14, 14] -> 32 41.4 ->
    32.9 us (its GEMM about 20 us). Other dtypes and layouts take the general kernel."""
    def specialize(xp, attrs, present, donated):
        dtype = present[0]
        if (dtype is None or present[1] != dtype or dtype.kind != "f" or dtype.itemsize < 4
                or _channel_last(attrs["data_format"])):
            return None

        def plan_for(x, w):
            if x.dtype != dtype or w.dtype != dtype:
                return functools.partial((depthwise_conv2d if depthwise else conv2d), xp, **attrs)
            groups = _depthwise_groups(x, w, attrs["data_format"]) if depthwise else attrs["groups"]
            geo = _conv_geometry(xp, x, w, attrs["strides"], attrs["paddings"], attrs["padding_algorithm"],
                                 attrs["dilations"], groups, attrs["data_format"])
            path = nchw_path(x.shape, w.shape, geo.strides, geo.dilations, geo.pads, geo.groups)
            shape = geo.out_shape

            def plan(x, w):
                out = xp.empty(shape, dtype=dtype)
                path(xp, x, w, out, None)
                return out
            return plan
        return _per_shape(plan_for)
    return specialize


@kernel("conv2d", inputs=["Input", "Filter"], outputs=["Output"], attrs=_CONV_ATTRS,
        specialize=_specialize_conv(depthwise=False))
def conv2d(xp, x, w, *, strides, paddings, padding_algorithm, dilations, groups, data_format):
    return _conv2d(xp, x, w, strides, paddings, padding_algorithm, dilations, groups, data_format)


def _depthwise_groups(x, w, data_format):
    """depthwise_conv2d's groups: the input channels (Filter [C*multiplier, 1, kh, kw])."""
    c = x.shape[-1] if _channel_last(data_format) else x.shape[1]
    if w.ndim != 4 or w.shape[1] != 1 or w.shape[0] % c:
        raise ValueError(f"depthwise_conv2d: Filter must be [C*multiplier, 1, kh, kw] for {c} input "
                         f"channels, got {tuple(w.shape)}")
    return c


@kernel("depthwise_conv2d", inputs=["Input", "Filter"], outputs=["Output"], attrs=_CONV_ATTRS,
        specialize=_specialize_conv(depthwise=True))
def depthwise_conv2d(xp, x, w, *, strides, paddings, padding_algorithm, dilations, groups,
                     data_format):
    """Filter [C*multiplier, 1, kh, kw]. Paddle's depthwise kernel ignores `groups`: output
    channel o reads input channel o // multiplier, i.e. groups = input channels."""
    return _conv2d(xp, x, w, strides, paddings, padding_algorithm, dilations, _depthwise_groups(x, w, data_format),
                   data_format)


@kernel("conv2d_transpose", inputs=["Input", "Filter", "Bias"], outputs=["Output"],
        attrs=["strides", "paddings", "output_padding", "output_size", "padding_algorithm",
               "groups", "dilations", "data_format"])
def conv2d_transpose(xp, x, w, bias=None, *, strides, paddings, output_padding, output_size,
                     padding_algorithm, groups, dilations, data_format):
    """Filter [in_c, out_c/groups, kh, kw]. Output size (Paddle's ConvTransposeInferMeta):
    (in-1)*stride - pad_before - pad_after + dilation*(k-1) + 1, replaced by `output_size`
    when given, or increased by `output_padding`. `Bias` (a oneDNN-fusion extra) is added
    per output channel when present."""
    if x.ndim != 4 or w.ndim != 4:
        raise ValueError(f"conv2d_transpose expects 4-D Input and Filter, got {x.shape} and {w.shape}")
    channel_last = _channel_last(data_format)
    n = x.shape[0]
    cin = x.shape[3] if channel_last else x.shape[1]
    h, wd = _spatial(x, channel_last)
    wc, og, kh, kw = w.shape
    g = int(groups) if groups and groups > 0 else 1
    if wc != cin or cin % g:
        raise ValueError(f"conv2d_transpose: Input has {cin} channels but Filter is {tuple(w.shape)} "
                         f"(groups={g})")
    cg = cin // g
    o = og * g
    sh, sw = [int(s) for s in _as_list(strides, 2)]
    dh, dw = [int(d) for d in _as_list(dilations, 2)]
    if padding_algorithm == "SAME":
        dh = dw = 1
    pads = _resolve_padding(paddings, padding_algorithm, (h, wd), (sh, sw), (kh, kw))
    inferred = [(h - 1) * sh - pads[0] - pads[1] + dh * (kh - 1) + 1,
                (wd - 1) * sw - pads[2] - pads[3] + dw * (kw - 1) + 1]
    if output_size is not None and len(output_size):
        size = [int(v) for v in _as_list(output_size, 2)]
        for i, (want, got, s) in enumerate(zip(size, inferred, (sh, sw))):
            if not got <= want < got + s:
                raise ValueError(f"conv2d_transpose: output_size {size} dim {i} must be in "
                                 f"[{got}, {got + s}) for this input, stride and padding")
        oh, ow = size
    elif output_padding is not None and len(output_padding):
        extra = [int(v) for v in _as_list(output_padding, 2)]
        oh, ow = inferred[0] + extra[0], inferred[1] + extra[1]
    else:
        oh, ow = inferred

    out_dtype = x.dtype
    cdt = xp.float32 if x.dtype == xp.float16 else x.dtype
    x = x.astype(cdt, copy=False)
    w = w.astype(cdt, copy=False)
    if (not channel_last and (sh, sw) == (kh, kw) and dh == dw == 1 and not any(pads)
            and [oh, ow] == inferred):
        out = transpose_tiles_nchw(xp, x, w, g)
        if bias is not None:
            out += bias.astype(cdt, copy=False).reshape(1, o, 1, 1)
        return out.astype(out_dtype, copy=False)
    # x as [g, cg, N*H*W]; filter as [g, og*kh*kw, cg]; cols [g, og, kh, kw, N, H, W]
    if channel_last:
        xg = x.reshape(n * h * wd, g, cg).transpose(1, 2, 0)
    else:
        xg = x.reshape(n, g, cg, h * wd).transpose(1, 2, 0, 3).reshape(g, cg, n * h * wd)
    wmat = w.reshape(g, cg, og * kh * kw).transpose(0, 2, 1)
    cols = xp.matmul(wmat, xg).reshape(g, og, kh, kw, n, h, wd)
    # col2im: output row r receives input row i at r = i*sh - pad_top + a*dh
    full_h = max((h - 1) * sh + dh * (kh - 1) + 1, pads[0] + oh)
    full_w = max((wd - 1) * sw + dw * (kw - 1) + 1, pads[2] + ow)
    full = xp.zeros((g, og, n, full_h, full_w), dtype=cdt)
    for a in range(kh):
        for b in range(kw):
            full[:, :, :, a * dh:a * dh + (h - 1) * sh + 1:sh,
                 b * dw:b * dw + (wd - 1) * sw + 1:sw] += cols[:, :, a, b]
    out = full[:, :, :, pads[0]:pads[0] + oh, pads[2]:pads[2] + ow].reshape(o, n, oh, ow)
    if bias is not None:
        out = out + bias.astype(cdt, copy=False).reshape(o, 1, 1, 1)
    out = out.transpose(1, 2, 3, 0) if channel_last else out.transpose(1, 0, 2, 3)
    return xp.ascontiguousarray(out).astype(out_dtype, copy=False)


# ----------------------------------------------------------------------------- pool2d

def _pool_output_size(size, k, p0, p1, s, ceil_mode):
    if ceil_mode:
        return (size - k + p0 + p1 + s - 1) // s + 1
    return (size - k + p0 + p1) // s + 1


def _adaptive_bins(in_size, out_size):
    """Per output bin i: [floor(i*in/out), ceil((i+1)*in/out)) as (start, end) int arrays.
    They depend on the sizes only, so they are computed with numpy on the host: on a GPU
    nothing is read back to size the windows (a cupy int() of a bin width would be)."""
    i = np.arange(out_size)
    start = (i * in_size) // out_size
    end = -((-(i + 1) * in_size) // out_size)
    return start, end


def _adaptive_windows(in_size, out_size):
    """The bins padded to the longest one, on the host: (index [out, k] of each bin's
    elements, the bin's last element repeated in the padding; valid [out, k], False on the
    padding; start; end)."""
    start, end = _adaptive_bins(in_size, out_size)
    j = start[:, None] + np.arange(int((end - start).max()))[None, :]
    return np.minimum(j, end[:, None] - 1), j < end[:, None], start, end


def _adaptive_avg_pool(xp, x, oh, ow, channel_last):
    """Gather every bin padded to the longest bin, mask the repeats and divide by the true bin
    size."""
    h, w = _spatial(x, channel_last)
    idx_h, valid_h, hs, he = _adaptive_windows(h, oh)  # [oh, kh]
    idx_w, valid_w, ws, we = _adaptive_windows(w, ow)  # [ow, kw]
    rows, cols = xp.asarray(idx_h[:, :, None, None]), xp.asarray(idx_w[None, None, :, :])
    if channel_last:
        gathered = x[:, rows, cols, :]  # [N, oh, kh, ow, kw, C]
        axes = (2, 4)
    else:
        gathered = x[:, :, rows, cols]  # [N, C, oh, kh, ow, kw]
        axes = (3, 5)
    cdt = _compute_dtype(xp, x.dtype)
    mask = xp.asarray((valid_h[:, :, None, None] & valid_w[None, None, :, :]).astype(cdt))  # [oh, kh, ow, kw]
    count = xp.asarray(((he - hs)[:, None] * (we - ws)[None, :]).astype(cdt))  # [oh, ow]
    if channel_last:
        total = (gathered.astype(cdt) * mask[None, :, :, :, :, None]).sum(axis=axes)
        return (total / count[None, :, :, None]).astype(x.dtype)
    total = (gathered.astype(cdt) * mask).sum(axis=axes)
    return (total / count).astype(x.dtype)


_POOL_ATTRS = ["ksize", "strides", "paddings", "ceil_mode", "exclusive", "data_format", "pooling_type",
               "global_pooling", "adaptive", "padding_algorithm"]


def _specialize_pool(xp, attrs, present, donated):
    """A specialize hook (kernels/registry.py) for pool2d: the plan (checks, paddings, output
    size, the divisor of avg pooling) is made once per input shape and dtype, not per call.
    With the padding and window views made cheaper (kernels/conv.py pad_spatial,
    strided_view), per call (CPU time, medians of 3 alternating processes, loaded machine):
    max 2x2 stride 2 [1, 16, 28, 28] 14.8 -> 9.6 us, [1, 32, 14, 14] 13.1 -> 7.9 us; avg
    2x2 [1, 32, 14, 14] 23.5 -> 9.4 us; global avg / max [1, 32, 7, 7] 3.8 / 3.5 -> 3.3 /
    2.9 us."""
    return _per_shape(lambda x: _pool_plan(xp, x.shape, x.dtype, **attrs))


@kernel("pool2d", inputs=["X"], outputs=["Out"], attrs=_POOL_ATTRS, specialize=_specialize_pool)
def pool2d(xp, x, *, ksize, strides, paddings, ceil_mode, exclusive, data_format, pooling_type,
           global_pooling, adaptive, padding_algorithm):
    return _pool_plan(xp, x.shape, x.dtype, ksize=ksize, strides=strides, paddings=paddings, ceil_mode=ceil_mode,
                      exclusive=exclusive, data_format=data_format, pooling_type=pooling_type,
                      global_pooling=global_pooling, adaptive=adaptive, padding_algorithm=padding_algorithm)(x)


def inclusive_pool_count(xp, out_sizes, sizes, ksizes, strides, pads_before):
    """The divisors of a non-exclusive average pool ([*out]), as PaddlePaddle's Pool2d/3d
    functors compute them: along each axis a window runs from its unclipped start
    (i*stride - pad_before) to min(start + k, size + pad_before): the leading padding counts
    at both ends (not the trailing one, when it differs), and what ceil_mode adds past that
    does not; a window wholly past it divides by 0."""
    count = None
    for o, n, k, st, p in zip(out_sizes, sizes, ksizes, strides, pads_before):
        start = xp.arange(o) * st - p
        extent = xp.minimum(start + k, n + p) - start
        count = extent if count is None else xp.multiply.outer(count, extent)
    return count


def _pool_plan(xp, shape, dtype, *, ksize, strides, paddings, ceil_mode, exclusive, data_format, pooling_type,
               global_pooling, adaptive, padding_algorithm):
    """pool2d of an input of this shape and dtype, as a function of the input."""
    if pooling_type not in ("max", "avg"):
        raise ValueError(f"pool2d: pooling_type must be 'max' or 'avg', got {pooling_type!r}")
    if len(shape) != 4:
        raise ValueError(f"pool2d expects a 4-D input, got shape {tuple(shape)}")
    channel_last = _channel_last(data_format)
    h, w = (shape[1], shape[2]) if channel_last else (shape[2], shape[3])
    kh, kw = [int(k) for k in _as_list(ksize, 2)]
    if global_pooling:  # Paddle's UpdateKernelSize; runs before the adaptive branch
        kh, kw = h, w
    if _one_bin(global_pooling, adaptive, pooling_type, kh, kw):
        return functools.partial(_global_pool, xp, pooling_type=pooling_type, channel_last=channel_last)
    if adaptive and pooling_type == "avg":  # output size = ksize; paddings and strides are ignored
        return lambda x: _adaptive_avg_pool(xp, x, kh, kw, channel_last)
    sh, sw = [int(s) for s in _as_list(strides, 2)]
    if global_pooling or adaptive:
        pads = [0, 0, 0, 0]
    else:
        pads = _resolve_padding(paddings, padding_algorithm, (h, w), (sh, sw), (kh, kw))
    if adaptive:
        # Max pooling with adaptive=True, as PaddlePaddle 3.3.1 computes it: its kernel runs
        # max pooling with adaptive=false (phi's PoolRawKernel), so the output has the adaptive
        # size (ksize) but window (i, j) is ksize cells from (i*stride_h, j*stride_w), the
        # paddings zeroed, clipped to the input (-FLT_MAX where a window is empty); not an
        # adaptive bin. PaddlePaddle's layers write max_pool2d_with_index for adaptive max
        # pooling (true bins). Checked against PaddlePaddle's recorded outputs and gradients
        # (tests/fixtures/zoo/pool2d_adaptive_max.npz); pool3d does the same (kernels/vision.py).
        oh, ow = kh, kw
    else:
        oh = _pool_output_size(h, kh, pads[0], pads[1], sh, ceil_mode)
        ow = _pool_output_size(w, kw, pads[2], pads[3], sw, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise ValueError(f"pool2d: output size ({oh}, {ow}) is not positive for input {tuple(shape)}")
    # Pad so that every window lies inside: top/left by the padding, bottom/right by what the
    # last window needs (ceil_mode may run past the stated padding; those cells are padding too).
    top, left = pads[0], pads[2]
    bottom = max((oh - 1) * sh + kh - top - h, 0)
    right = max((ow - 1) * sw + kw - left - w, 0)
    full_pads = [top, bottom, left, right]
    if pooling_type == "max":
        if tiles_the_input(shape, (kh, kw), (sh, sw), full_pads, (oh, ow), channel_last):
            return lambda x: tiled_max(xp, x, kh, kw)
        fill = -_FLT_MAX if dtype != xp.float16 else float("-inf")

        def max_pool(x):
            xpad = _pad_spatial(xp, x, full_pads, channel_last, fill)
            return _window_reduce(xp, xpad, oh, ow, kh, kw, sh, sw, channel_last, xp.maximum)
        return max_pool
    cdt = _compute_dtype(xp, dtype)
    if exclusive:
        hs = xp.arange(oh) * sh - top
        ws = xp.arange(ow) * sw - left
        ch = xp.minimum(hs + kh, h) - xp.maximum(hs, 0)
        cw = xp.minimum(ws + kw, w) - xp.maximum(ws, 0)
        count = (ch[:, None] * cw[None, :]).astype(cdt)
        count = count[:, :, None] if channel_last else count
    else:
        count = inclusive_pool_count(np, (oh, ow), (h, w), (kh, kw), (sh, sw), (top, left)).astype(cdt)
        count = xp.asarray(count[:, :, None] if channel_last else count)

    def avg_pool(x):
        xpad = _pad_spatial(xp, x.astype(cdt, copy=False), full_pads, channel_last, 0.0)
        total = _window_reduce(xp, xpad, oh, ow, kh, kw, sh, sw, channel_last, xp.add)
        with np.errstate(invalid="ignore"):  # a window wholly past the input and its padding: 0/0, as in PaddlePaddle
            total /= count
        return total.astype(x.dtype, copy=False)
    return avg_pool


def _window_reduce(xp, xpad, oh, ow, kh, kw, sh, sw, channel_last, combine):
    """Reduce every (kh, kw) window of the padded input with `combine` (maximum or add):
    one elementwise pass per window offset over the whole [N, C, oh, ow] output (numpy
    reduces a view's tiny trailing window axes ~25x slower), the first pass combining two
    taps into the result (no copy of the first tap; at 2x2 stride 2 within noise). Windows
    of 3x3 and up reduce separably, along the width (kw passes over [N, C, Hp, ow]), then
    the height (kh passes): kh + kw passes instead of kh*kw ([1, 64, 80, 120] 3x3 stride 1:
    1.85x, [1, 16, 160, 240] 3x3 stride 2: 1.35x; at 2x2 stride 2 it measured 0.73-1.0x,
    its first pass being over twice the output's rows)."""
    hax, wax = (1, 2) if channel_last else (2, 3)
    if kh > 2 and kw > 2:
        rows = _reduce_axis(xpad, wax, kw, ow, sw, combine)
        return _reduce_axis(rows, hax, kh, oh, sh, combine)
    win = _windows(xp, xpad, oh, ow, kh, kw, sh, sw, 1, 1, channel_last)
    if channel_last:
        taps = [win[:, :, :, a, b, :] for a in range(kh) for b in range(kw)]
    else:
        taps = [win[..., a, b] for a in range(kh) for b in range(kw)]
    if len(taps) == 1:
        return taps[0].copy()
    out = combine(taps[0], taps[1])
    for tap in taps[2:]:
        combine(out, tap, out=out)
    return out


def _reduce_axis(a, axis, k, size, stride, combine):
    """out[..., i, ...] = combine over t < k (k >= 2) of a[..., i*stride + t, ...] along `axis`."""
    def tap(t):
        index = [slice(None)] * a.ndim
        index[axis] = slice(t, t + (size - 1) * stride + 1, stride)
        return a[tuple(index)]
    out = combine(tap(0), tap(1))
    for t in range(2, k):
        combine(out, tap(t), out=out)
    return out


def _one_bin(global_pooling, adaptive, pooling_type, kh, kw):
    """Whether the pooling window is the whole plane: global pooling without adaptive (with
    it, pool2d's adaptive branches run) or adaptive avg pooling to 1x1 (squeeze-excitation's:
    one reduction instead of a gather of every bin, forward 4-9x, gradient 5-9x on
    [1, 36, 40, 60], [1, 240, 10, 15] and [1, 48, 3, 80]). Adaptive max runs PaddlePaddle's
    windows of ksize (see pool2d), not bins."""
    return (global_pooling and not adaptive) or (adaptive and pooling_type == "avg" and (kh, kw) == (1, 1))


def _global_pool(xp, x, pooling_type, channel_last):
    """Global pooling as one reduction over the plane (avg 5-6x the per-cell passes on
    [1, 960, 10, 15] and [1, 288, 3, 12]; max 1.1x on [64, 512, 7, 7]); avg divides the sum
    by H*W as Paddle does."""
    axes = (1, 2) if channel_last else (2, 3)
    if pooling_type == "max":
        return x.max(axis=axes, keepdims=True)
    h, w = _spatial(x, channel_last)
    xc = x.astype(_compute_dtype(xp, x.dtype), copy=False)
    if channel_last or not xc.flags.c_contiguous:
        total = xc.sum(axis=axes, keepdims=True)
    else:  # each plane one contiguous row: einsum's sums, 3x numpy's (kernels/sums.py)
        n, c = x.shape[:2]
        total = last_axis_sums(xp, xc.reshape(n, c, h * w)).reshape(n, c, 1, 1)
    total /= h * w
    return total.astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- normalization

def _channel_axis(ndim, layout):
    """Channel axis for Paddle's layout strings (2-D inputs: axis 1 either way)."""
    return ndim - 1 if _channel_last(layout) or ndim == 2 else 1


def _bcast(v, ndim, axis):
    shape = [1] * ndim
    shape[axis] = -1
    return v.reshape(shape)


@kernel("batch_norm", inputs=["X", "Scale", "Bias", "Mean", "Variance", "MomentumTensor"],
        outputs=["Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"],
        attrs=["is_test", "momentum", "epsilon", "data_layout", "use_global_stats",
               "trainable_statistics"],
        inplace={"MeanOut": "Mean", "VarianceOut": "Variance"})
def batch_norm(xp, x, scale, bias, mean, variance, momentum_tensor=None, *, is_test, momentum,
               epsilon, data_layout, use_global_stats, trainable_statistics):
    """Training (not is_test, or trainable_statistics): normalize with the batch mean and
    biased variance; update the running stats in place as running*momentum +
    batch*(1-momentum) (biased variance, as Paddle's CPU kernel); SavedMean is the batch
    mean, SavedVariance 1/sqrt(var+eps). Otherwise (is_test, or use_global_stats) normalize
    with the running stats, which stay unchanged (SavedMean/SavedVariance are zeros then:
    Paddle leaves them unset)."""
    if not 2 <= x.ndim <= 5:
        raise ValueError(f"batch_norm expects a 2-D to 5-D input, got shape {tuple(x.shape)}")
    axis = _channel_axis(x.ndim, data_layout)
    c = x.shape[axis]
    reduce_axes = tuple(i for i in range(x.ndim) if i != axis)
    stat_dtype = mean.dtype
    cdt = _compute_dtype(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    scale = xp.ones(c, cdt) if scale is None else scale.astype(cdt, copy=False)
    bias = xp.zeros(c, cdt) if bias is None else bias.astype(cdt, copy=False)
    global_stats = (is_test and not trainable_statistics) or use_global_stats
    if global_stats:
        use_mean = mean.astype(cdt, copy=False)
        inv_std = 1.0 / xp.sqrt(variance.astype(cdt, copy=False) + epsilon)
        saved_mean = xp.zeros(c, stat_dtype)
        saved_var = xp.zeros(c, stat_dtype)
    else:
        if x.size // c == 1:
            # One element per channel: Paddle copies X to Y and leaves the running stats.
            return (x.copy(), mean, variance, xp.zeros(c, stat_dtype), xp.zeros(c, stat_dtype), None)
        batch_mean = xc.mean(axis=reduce_axes)
        centered = xc - _bcast(batch_mean, x.ndim, axis)
        batch_var = (centered * centered).mean(axis=reduce_axes)
        if momentum_tensor is not None:  # kept on the device; float64 as the attribute's Python float
            m64 = momentum_tensor.reshape(-1)[0].astype(xp.float64)
            m, rest = m64.astype(cdt), (1.0 - m64).astype(cdt)
        else:
            m = float(momentum)
            rest = 1.0 - m
        mean[...] = (mean.astype(cdt) * m + batch_mean * rest).astype(stat_dtype)
        variance[...] = (variance.astype(cdt) * m + batch_var * rest).astype(stat_dtype)
        use_mean = batch_mean
        inv_std = 1.0 / xp.sqrt(batch_var + epsilon)
        saved_mean = batch_mean.astype(stat_dtype)
        saved_var = inv_std.astype(stat_dtype)
    new_scale = (inv_std * scale).astype(cdt, copy=False)
    new_bias = (bias - use_mean * new_scale).astype(cdt, copy=False)
    y = xc * _bcast(new_scale, x.ndim, axis) + _bcast(new_bias, x.ndim, axis)
    return y.astype(x.dtype, copy=False), mean, variance, saved_mean, saved_var, None


def _stat_dtype(xp, dtype):
    """Dtype of the Mean/Variance outputs: float32 for float16 inputs (Paddle's
    LayerNormParamType), else the input's."""
    return xp.float32 if dtype == xp.float16 else dtype


def _layer_norm_rows(xp, x, begin_norm_axis):
    """X as [prod(dims before begin_norm_axis), prod(the rest)] in its compute dtype:
    (left, right, compute dtype, the 2-d view)."""
    axis = begin_norm_axis + x.ndim if begin_norm_axis < 0 else begin_norm_axis
    if not 0 <= axis < max(x.ndim, 1):
        raise ValueError(f"layer_norm: begin_norm_axis {begin_norm_axis} is out of range for rank {x.ndim}")
    left = 1
    for d in x.shape[:axis]:
        left *= d
    right = math.prod(x.shape[axis:])  # (not size // left: a batch of 0 rows has 0 of those)
    cdt = _compute_dtype(xp, x.dtype)
    return left, right, cdt, x.reshape(left, right).astype(cdt, copy=False)


@kernel("layer_norm", inputs=["X", "Scale", "Bias"], outputs=["Y", "Mean", "Variance"],
        attrs=["epsilon", "begin_norm_axis"])
def layer_norm(xp, x, scale, bias, *, epsilon, begin_norm_axis):
    """Normalize over dims [begin_norm_axis, ...); Mean/Variance (biased) have the dims before
    begin_norm_axis (PaddlePaddle 3.3.1's shape); Scale/Bias hold prod(normalized dims) values.
    Evaluated over cache-sized blocks of rows (kernels/blocked.py `row_blocks`), a few passes
    over each: y = x - mean, var = mean(y * y) (kernels/sums.py's row sums and dots), then
    y scaled and shifted in place."""
    left, right, cdt, x2 = _layer_norm_rows(xp, x, begin_norm_axis)
    s = scale.reshape(1, right).astype(cdt, copy=False) if scale is not None else None
    b = bias.reshape(1, right).astype(cdt, copy=False) if bias is not None else None
    y, mu, var = xp.empty((left, right), cdt), xp.empty(left, cdt), xp.empty(left, cdt)
    with _empty_rows_allowed(xp, right):
        for lo, hi in row_blocks(xp, left, right * y.itemsize):
            xb, yb, m, v = x2[lo:hi], y[lo:hi], mu[lo:hi], var[lo:hi]
            xp.divide(last_axis_sums(xp, xb), right, out=m)
            xp.subtract(xb, m[:, None], out=yb)
            xp.divide(last_axis_dots(xp, yb, yb), right, out=v)
            yb /= xp.sqrt(v + epsilon)[:, None]
            if s is not None:
                yb *= s
            if b is not None:
                yb += b
    sdt = _stat_dtype(xp, x.dtype)
    stat_shape = x.shape[:begin_norm_axis % max(x.ndim, 1)]
    return (y.reshape(x.shape).astype(x.dtype, copy=False), mu.astype(sdt).reshape(stat_shape),
            var.astype(sdt).reshape(stat_shape))


def _empty_rows_allowed(xp, right):
    """Rows of no items have a NaN mean and variance (0 / 0), as numpy's mean gives, without
    the warning."""
    return np.errstate(invalid="ignore", divide="ignore") if right == 0 else nullcontext()


@kernel("group_norm", inputs=["X", "Scale", "Bias"], outputs=["Y", "Mean", "Variance"],
        attrs=["epsilon", "groups", "data_layout"])
def group_norm(xp, x, scale, bias, *, epsilon, groups, data_layout):
    """Mean/Variance (biased) have shape [N, groups]."""
    channel_last = _channel_last(data_layout)
    n = x.shape[0]
    c = x.shape[-1] if channel_last else x.shape[1]
    g = int(groups)
    if g <= 0 or c % g:
        raise ValueError(f"group_norm: {c} channels are not divisible into groups={groups}")
    cdt = _compute_dtype(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    # explicit sizes, not -1: a batch of 0 leaves -1 undetermined
    if channel_last:
        xg = xc.reshape(n, math.prod(x.shape[1:-1]), g, c // g)
        axes = (1, 3)
        mu = xg.mean(axis=axes)
        centered = xg - mu[:, None, :, None]
        var = (centered * centered).mean(axis=axes)
        y = (centered / xp.sqrt(var + epsilon)[:, None, :, None]).reshape(x.shape)
    else:
        xg = xc.reshape(n, g, (c // g) * math.prod(x.shape[2:]))
        mu = xg.mean(axis=2)
        centered = xg - mu[:, :, None]
        var = (centered * centered).mean(axis=2)
        y = (centered / xp.sqrt(var + epsilon)[:, :, None]).reshape(x.shape)
    axis = x.ndim - 1 if channel_last else 1
    if scale is not None:
        y = y * _bcast(scale.astype(cdt, copy=False), x.ndim, axis)
    if bias is not None:
        y = y + _bcast(bias.astype(cdt, copy=False), x.ndim, axis)
    sdt = _stat_dtype(xp, x.dtype)
    return y.astype(x.dtype, copy=False), mu.astype(sdt), var.astype(sdt)


@kernel("instance_norm", inputs=["X", "Scale", "Bias"], outputs=["Y", "SavedMean", "SavedVariance"],
        attrs=["epsilon"])
def instance_norm(xp, x, scale, bias, *, epsilon):
    """X is [N, C, ...]; statistics per (n, c) over the spatial dims. SavedMean and
    SavedVariance ([N*C]) are the mean and 1/sqrt(var+eps), as Paddle saves them."""
    n, c = x.shape[:2]
    cdt = _compute_dtype(xp, x.dtype)
    x2 = x.reshape(n * c, math.prod(x.shape[2:])).astype(cdt, copy=False)  # (n may be 0)
    mu = x2.mean(axis=1)
    centered = x2 - mu[:, None]
    inv_std = 1.0 / xp.sqrt((centered * centered).mean(axis=1) + epsilon)
    y = (centered * inv_std[:, None]).reshape(n, c, x2.shape[1])
    if scale is not None:
        y = y * scale.astype(cdt, copy=False).reshape(1, c, 1)
    if bias is not None:
        y = y + bias.astype(cdt, copy=False).reshape(1, c, 1)
    sdt = _stat_dtype(xp, x.dtype)
    return y.reshape(x.shape).astype(x.dtype, copy=False), mu.astype(sdt), inv_std.astype(sdt)


@kernel("affine_channel", inputs=["X", "Scale", "Bias"], outputs=["Out"], attrs=["data_layout"])
def affine_channel(xp, x, scale, bias, *, data_layout):
    axis = _channel_axis(x.ndim, data_layout)
    return (x * _bcast(scale, x.ndim, axis) + _bcast(bias, x.ndim, axis)).astype(x.dtype, copy=False)


@kernel("lrn", inputs=["X"], outputs=["Out", "MidOut"], attrs=["n", "k", "alpha", "beta", "data_format"])
def lrn(xp, x, *, n, k, alpha, beta, data_format):
    """Cross-channel LRN as Paddle: MidOut = k + alpha * sum of x^2 over channels
    [c - (n-1)//2, c + n-1 - (n-1)//2] (alpha is not divided by n); Out = x * MidOut^-beta."""
    if x.ndim != 4:
        raise ValueError(f"lrn expects a 4-D input, got shape {tuple(x.shape)}")
    channel_last = _channel_last(data_format)
    cdt = _compute_dtype(xp, x.dtype)
    xc = x.astype(cdt, copy=False)
    if channel_last:
        xc = xc.transpose(0, 3, 1, 2)
    n = int(n)
    pre = (n - 1) // 2
    sq = xp.pad(xc * xc, [(0, 0), (pre, n - 1 - pre), (0, 0), (0, 0)], mode="constant")
    nb, c, h, w = xc.shape
    s0, s1, s2, s3 = sq.strides
    win = xp.lib.stride_tricks.as_strided(sq, shape=(nb, c, n, h, w), strides=(s0, s1, s1, s2, s3))
    mid = k + alpha * win.sum(axis=2)
    out = xc * mid ** (-beta)
    if channel_last:
        out = out.transpose(0, 2, 3, 1)
        mid = mid.transpose(0, 2, 3, 1)
    return (xp.ascontiguousarray(out).astype(x.dtype, copy=False),
            xp.ascontiguousarray(mid).astype(x.dtype, copy=False))


# ----------------------------------------------------------------------------- embedding, prelu

def _check_ids(xp, op, ids, rows, pad):
    """Embedding ids: each in [0, rows), or equal to the padding id (when there is one)."""
    check_index_range(xp, op, "Ids", ids, rows, negative=False, exempt=None if pad == -1 else pad,
                      note=f" (an embedding table of {rows} rows)")


@kernel("lookup_table_v2", inputs=["Ids", "W"], outputs=["Out"], attrs=["padding_idx"])
def lookup_table_v2(xp, ids, w, *, padding_idx):
    """Out = W[Ids] with shape Ids.shape + [D]; rows whose id equals padding_idx are zeros
    (padding_idx -1 means none; the layer turns a negative one into vocab + padding_idx,
    as PaddlePaddle's). Every other id must be in [0, rows): no wrapping of negative ids
    (PaddlePaddle's CPU and GPU kernels enforce it; numpy and cupy would wrap them)."""
    rows = w.shape[0]
    flat = ids.reshape(-1).astype(xp.int64, copy=False)
    pad = int(padding_idx) if padding_idx is not None else -1
    _check_ids(xp, "lookup_table_v2", ids, rows, pad)
    safe = xp.clip(flat, 0, rows - 1) if rows else flat
    out = w[safe]
    if pad != -1:
        # zeros, not W's row times 0 (that gives -0.0 for negative and NaN for inf weights)
        out[flat == pad] = 0
    return out.reshape(tuple(ids.shape) + tuple(w.shape[1:]))


@kernel("prelu", inputs=["X", "Alpha"], outputs=["Out"], attrs=["data_format", "mode"])
def prelu(xp, x, alpha, *, data_format, mode):
    """mode "all": one alpha; "channel": one per channel (axis 1, or last for NHWC);
    "element": one per element of a sample (Alpha holds prod(X.shape[1:]) values)."""
    if mode == "all":
        a = alpha.reshape(())
    elif mode == "channel":
        axis = x.ndim - 1 if _channel_last(data_format) else 1
        a = _bcast(alpha.reshape(-1), x.ndim, axis)
    elif mode == "element":
        a = alpha.reshape((1,) + tuple(x.shape[1:]))
    else:
        raise ValueError(f"prelu: mode must be 'all', 'channel' or 'element', got {mode!r}")
    a = a.astype(x.dtype, copy=False)
    return xp.where(x > 0, x, a * x).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- interpolation

def _f32(v):
    """Round a Python float to float32 (as C++ `float` arithmetic does)."""
    return struct.unpack("f", struct.pack("f", v))[0]


def _interp_ratio(in_size, out_size, scale, align_corners):
    """Paddle's ratio (a float32 value): align_corners (in-1)/(out-1); else 1/scale when a
    scale was given, else in/out; 0 when out_size is 1."""
    if out_size <= 1:
        return 0.0
    if align_corners:
        return _f32(_f32(in_size - 1) / (out_size - 1))
    if scale > 0:
        return _f32(1.0 / scale)
    return _f32(_f32(in_size) / out_size)


def _linear_axis(xp, in_size, out_size, ratio, align_flag):
    """Per output index k: (lower index, upper index, weight of lower, weight of upper), with
    Paddle's float/double mix: align_flag (align_mode 0, not align_corners) uses the
    half-pixel source ratio*(k+0.5)-0.5 clamped at 0, else ratio*k (a float32 product)."""
    k = xp.arange(out_size, dtype=xp.float64)
    r32 = xp.float32(ratio)
    if align_flag:
        src = float(r32) * (k + 0.5) - 0.5
        lo = xp.maximum(xp.trunc(src).astype(xp.int64), 0)
        d_hi = xp.maximum(src.astype(xp.float32), xp.float32(0)) - lo.astype(xp.float32)
    else:
        prod = k.astype(xp.float32) * r32
        lo = xp.maximum(xp.trunc(prod).astype(xp.int64), 0)
        d_hi = prod - lo.astype(xp.float32)
    lo = xp.minimum(lo, in_size - 1)
    hi = xp.minimum(lo + 1, in_size - 1)
    d_lo = xp.float32(1) - d_hi
    return lo, hi, d_lo.astype(xp.float32), d_hi.astype(xp.float32)


def _nearest_axis(xp, in_size, out_size, ratio, align_corners):
    prod = xp.arange(out_size, dtype=xp.float32) * xp.float32(ratio)
    if align_corners:
        idx = xp.trunc(prod.astype(xp.float64) + 0.5).astype(xp.int64)
    else:
        idx = xp.trunc(prod).astype(xp.int64)
    return xp.clip(idx, 0, in_size - 1)


def _nearest(xp, x, axes, in_sizes, sizes, scales, align_corners):
    """Nearest-neighbour resizing: output index k of each resized axis reads source index
    idx[k] (computed on the host). When every axis repeats each source index f times
    (upsampling by an integer factor: idx == k // f), the innermost resized axis is
    repeated (`repeat`: runs of f copies) and the others written by ONE broadcast copy
    whose inner loops are whole rows: a detector's 2x / 4x / 8x upsamplings 1.0-1.8x / 2.4x /
    3.3x faster than the gather (take) per axis that other sizes keep ([1, 96, 40, 60] 2x:
    1.8x); one broadcast copy of every axis measured 0.35-0.7x (its inner loop: f elements)."""
    idxs = [_nearest_axis(np, i, o, _interp_ratio(i, o, s, align_corners), align_corners)
            for i, o, s in zip(in_sizes, sizes, scales)]
    factors = [o // i for i, o in zip(in_sizes, sizes)]
    if not all(i > 0 and o % i == 0 and np.array_equal(idx, np.arange(o) // f)
               for i, o, f, idx in zip(in_sizes, sizes, factors, idxs)):
        out = x
        for a, idx in zip(axes, idxs):
            out = xp.take(out, xp.asarray(idx), axis=a)
        return out
    *outer, inner = axes
    rows = xp.repeat(x, factors[-1], axis=inner) if factors[-1] > 1 else x
    repeats = {a: f for a, f in zip(outer, factors) if f > 1}
    if not repeats:
        return rows
    src_shape, view_shape, out_shape = [], [], []
    for a, d in enumerate(rows.shape):
        f = repeats.get(a, 1)
        src_shape += [d, 1] if f > 1 else [d]
        view_shape += [d, f] if f > 1 else [d]
        out_shape.append(d * f)
    out = xp.empty(out_shape, dtype=x.dtype)
    out.reshape(view_shape)[...] = rows.reshape(src_shape)
    return out


def _host_ints(t):
    return [int(v) for v in t.reshape(-1).tolist()]


def _host_floats(t):
    return [float(v) for v in t.reshape(-1).tolist()]


def _interp_sizes(x, out_size_t, size_tensor, scale_t, data_layout, out_d, out_h, out_w, scale):
    """(resized axes, their input sizes, output sizes, scales (-1: none)) as Paddle's
    interpolate kernels (forward and gradient) derive them: SizeTensor, else OutSize, else a
    Scale tensor / the scale attribute, else out_d/out_h/out_w."""
    nd = x.ndim - 2
    if nd not in (1, 2, 3):
        raise ValueError(f"interpolate expects a 3-D, 4-D or 5-D input, got shape {tuple(x.shape)}")
    channel_last = _channel_last(data_layout)
    axes = list(range(1, 1 + nd)) if channel_last else list(range(2, 2 + nd))
    in_sizes = [x.shape[a] for a in axes]
    sizes = [out_d, out_h, out_w][3 - nd:]
    scales = [-1.0] * nd
    if size_tensor:
        sizes = [_host_ints(t)[0] for t in size_tensor]
    else:
        if scale_t is not None:
            vals = _host_floats(scale_t)
            scales = vals[:nd] if len(vals) > 1 else vals[:1] * nd
            if any(s <= 0 for s in scales):
                raise ValueError(f"interpolate: the Scale tensor must be positive, got {vals}")
        elif scale is not None and (len(scale) > 1 or (nd == 1 and len(scale) == 1)):
            scales = [float(s) for s in scale[:nd]]
            if any(s <= 0 for s in scales):
                raise ValueError(f"interpolate: attribute scale must be positive, got {list(scale)}")
        if all(s > 0 for s in scales):
            sizes = [int(_f32(i * _f32(s))) for i, s in zip(in_sizes, scales)]
        if out_size_t is not None:
            sizes = _host_ints(out_size_t)[:nd]
    sizes = [int(s) for s in sizes]
    if any(s <= 0 for s in sizes):
        raise ValueError(f"interpolate: output size {sizes} must be positive "
                         "(set out_h/out_w, scale, OutSize or SizeTensor)")
    return axes, in_sizes, sizes, scales


def _interp(xp, x, out_size_t, size_tensor, scale_t, data_layout, out_d, out_h, out_w, scale,
            interp_method, align_corners, align_mode):
    axes, in_sizes, sizes, scales = _interp_sizes(x, out_size_t, size_tensor, scale_t, data_layout,
                                                  out_d, out_h, out_w, scale)
    if sizes == in_sizes:
        return x.copy()
    method = interp_method
    out = x
    if method == "nearest":
        return _nearest(xp, x, axes, in_sizes, sizes, scales, align_corners)
    if method not in ("linear", "bilinear", "trilinear"):
        raise NotImplementedError(f"interpolate: interp_method {interp_method!r} is not supported")
    align_flag = align_mode == 0 and not align_corners
    # float16 and integers (uint8 images) in float32, the result converted back (integers
    # truncated toward zero, as PaddlePaddle's kernels for them compute)
    cdt = xp.float32 if x.dtype == xp.float16 or x.dtype.kind != "f" else x.dtype
    # PaddlePaddle's 1-D linear kernel keeps its weights in the input's type: on integers they
    # truncate to 1 (lower neighbour) and 0, unlike its bilinear/trilinear kernels' floats
    int_weights = x.dtype.kind != "f" and len(axes) == 1
    out = out.astype(cdt, copy=False)
    for a, i, o, s in zip(axes, in_sizes, sizes, scales):
        ratio = _interp_ratio(i, o, s, align_corners)
        lo, hi, w_lo, w_hi = _linear_axis(xp, i, o, ratio, align_flag)
        if int_weights:
            w_hi = xp.trunc(w_hi)
            w_lo = 1 - w_hi
        shape = [1] * x.ndim
        shape[a] = o
        out = (xp.take(out, lo, axis=a) * w_lo.astype(cdt).reshape(shape)
               + xp.take(out, hi, axis=a) * w_hi.astype(cdt).reshape(shape))
    return out.astype(x.dtype, copy=False)


def _interp_kernel(op_type):
    @kernel(op_type, inputs=["X", "OutSize", "SizeTensor", "Scale"], outputs=["Out"],
            attrs=["data_layout", "out_d", "out_h", "out_w", "scale", "interp_method",
                   "align_corners", "align_mode"])
    def run(xp, x, out_size, size_tensor, scale_t, *, data_layout, out_d, out_h, out_w, scale,
            interp_method, align_corners, align_mode):
        return _interp(xp, x, out_size, size_tensor, scale_t, data_layout, out_d, out_h, out_w,
                       scale, interp_method, align_corners, align_mode)
    run.__name__ = op_type
    return run


# Paddle dispatches on the interp_method attribute, not on the op type.
linear_interp_v2 = _interp_kernel("linear_interp_v2")
bilinear_interp_v2 = _interp_kernel("bilinear_interp_v2")
trilinear_interp_v2 = _interp_kernel("trilinear_interp_v2")
nearest_interp_v2 = _interp_kernel("nearest_interp_v2")


def _v1_sizes(x, out_size, size_tensor, data_layout, out_d, out_h, out_w, scale):
    """nearest_interp (1.x): a positive float `scale` sets every output size to
    int(in * scale) unless an OutSize/SizeTensor input gives them; its source positions are
    then in / out, not 1 / scale, so the v2 kernels get sizes and no scale."""
    if scale > 0 and out_size is None and not size_tensor:
        spatial = x.shape[1:-1] if _channel_last(data_layout) else x.shape[2:]
        sizes = [int(_f32(d * _f32(scale))) for d in spatial]
        out_d, out_h, out_w = ([0, 0, 0][:3 - len(sizes)] + sizes)
    return out_d, out_h, out_w


@kernel("nearest_interp", inputs=["X", "OutSize", "SizeTensor", "Scale"], outputs=["Out"],
        attrs=["data_layout", "out_d", "out_h", "out_w", "scale", "interp_method",
               "align_corners", "align_mode"])
def nearest_interp(xp, x, out_size, size_tensor, scale_t, *, data_layout, out_d, out_h, out_w, scale,
                   interp_method, align_corners, align_mode):
    sizes = _v1_sizes(x, out_size, size_tensor, data_layout, out_d, out_h, out_w, scale)
    return _interp(xp, x, out_size, size_tensor, scale_t, data_layout, *sizes, [], interp_method,
                   align_corners, align_mode)


@kernel("pixel_shuffle", inputs=["X"], outputs=["Out"], attrs=["upscale_factor", "data_format"])
def pixel_shuffle(xp, x, *, upscale_factor, data_format):
    r = int(upscale_factor)
    if _channel_last(data_format):
        n, h, w, c = x.shape
        oc = c // (r * r)
        out = x.reshape(n, h, w, oc, r, r).transpose(0, 1, 4, 2, 5, 3)
        return xp.ascontiguousarray(out.reshape(n, h * r, w * r, oc))
    n, c, h, w = x.shape
    oc = c // (r * r)
    out = x.reshape(n, oc, r, r, h, w).transpose(0, 1, 4, 2, 5, 3)
    return xp.ascontiguousarray(out.reshape(n, oc, h * r, w * r))


# ============================================================================= gradients
# Gradient kernels, in the order of the forward ops above. Each returns arrays of the
# forward input's dtype and shape (None for an output the op does not bind: `need`).

def _tap(a, b, oh, ow, sh, sw, dh, dw, channel_last):
    """Index of the input cells that window offset (a, b) reads for every output position:
    a strided slice of the padded input, shaped like the output."""
    rows = slice(a * dh, a * dh + (oh - 1) * sh + 1, sh)
    cols = slice(b * dw, b * dw + (ow - 1) * sw + 1, sw)
    return (slice(None), rows, cols, slice(None)) if channel_last else (slice(None), slice(None), rows, cols)


def _crop_spatial(xpad, pads, h, w, channel_last):
    top, left = pads[0], pads[2]
    if channel_last:
        return xpad[:, top:top + h, left:left + w, :]
    return xpad[:, :, top:top + h, left:left + w]


def _nchw_by_group(xp, dy, g):
    """dy [N, O, oh, ow] -> [g, O/g, N*oh*ow] (one copy): the GEMM operand of both grads."""
    n, o, oh, ow = dy.shape
    return dy.reshape(n, g, o // g, oh * ow).transpose(1, 2, 0, 3).reshape(g, o // g, n * oh * ow)


def _conv_filter_grad(xp, xpad, dy, kh, kw, sh, sw, dh, dw, g, channel_last, dyg=None):
    """dFilter [O, C/g, kh, kw] of the convolution of padded input `xpad` whose output
    gradient is dy: the column matrix (im2col of xpad, one copy) times dy, one GEMM per
    group contracted over batch and output positions. `dyg`: dy as _nchw_by_group."""
    if channel_last:
        n, oh, ow, o = dy.shape
        c = xpad.shape[3]
    else:
        n, o, oh, ow = dy.shape
        c = xpad.shape[1]
    cg, og, p = c // g, o // g, n * oh * ow
    win = _windows(xp, xpad, oh, ow, kh, kw, sh, sw, dh, dw, channel_last)
    if channel_last:
        dy2 = dy.reshape(p, o)
        if g == 1:
            cols = win.reshape(p, kh * kw * c)                       # im2col: [P, kh*kw*C]
            dwm = cols.T @ dy2                                       # [kh*kw*C, O]
            return dwm.reshape(kh, kw, c, o).transpose(3, 2, 0, 1)
        cols = win.reshape(p, kh, kw, g, cg).transpose(3, 0, 1, 2, 4).reshape(g, p, kh * kw * cg)
        dyg = dy2.reshape(p, g, og).transpose(1, 0, 2)               # [g, P, og]
        dwm = xp.matmul(cols.transpose(0, 2, 1), dyg)                # [g, kh*kw*cg, og]
        return dwm.reshape(g, kh, kw, cg, og).transpose(0, 4, 3, 1, 2).reshape(o, cg, kh, kw)
    if g == 1:
        return filter_grad_chunked(xp, xpad, dy, kh, kw, sh, sw, dh, dw)
    # cols [g, cg*kh*kw, N*oh*ow] (one copy, as the forward's im2col), dy as [g, og, N*oh*ow]
    cols = win.transpose(1, 4, 5, 0, 2, 3).reshape(g, cg * kh * kw, p)
    if dyg is None:
        dyg = _nchw_by_group(xp, dy, g)
    dwm = xp.matmul(dyg, cols.transpose(0, 2, 1))                    # [g, og, cg*kh*kw]
    return dwm.reshape(o, cg, kh, kw)


def _conv_input_grad(xp, dy, w, padded_shape, kh, kw, sh, sw, dh, dw, g, channel_last, dtype, dyg=None):
    """dInput (padded) of the convolution with Filter w: the column gradient W^T dy (one
    GEMM per group), then col2im: one strided add per window offset (a, b) of the block of
    columns that offset read. NCHW (but depthwise) accumulates in a [C, N, Hp, Wp] array
    and returns it transposed to [N, C, Hp, Wp] (a view: the caller's crop copies it)."""
    o, cg = w.shape[:2]
    og = o // g
    if channel_last:
        dxpad = xp.zeros(padded_shape, dtype=dtype)
        n, oh, ow, _ = dy.shape
        c = padded_shape[3]
        p = n * oh * ow
        dy2 = dy.reshape(p, o)
        if g == 1:
            wmat = w.transpose(2, 3, 1, 0).reshape(kh * kw * c, o)
            dcols = (dy2 @ wmat.T).reshape(n, oh, ow, kh, kw, c)
        else:
            wmat = w.reshape(g, og, cg, kh, kw).transpose(0, 1, 3, 4, 2).reshape(g, og, kh * kw * cg)
            dyg = dy2.reshape(p, g, og).transpose(1, 0, 2)           # [g, P, og]
            dcols = xp.matmul(dyg, wmat).reshape(g, n, oh, ow, kh, kw, cg)
            dcols = dcols.transpose(1, 2, 3, 4, 5, 0, 6).reshape(n, oh, ow, kh, kw, c)
        for a in range(kh):
            for b in range(kw):
                dxpad[_tap(a, b, oh, ow, sh, sw, dh, dw, True)] += dcols[:, :, :, a, b, :]
        return dxpad
    n, c, hp, wp = padded_shape
    _, _, oh, ow = dy.shape
    if cg == 1 and og == 1:
        # depthwise: the column block of offset (a, b) is dy * W[:, 0, a, b] per channel
        dxpad = xp.zeros(padded_shape, dtype=dtype)
        buf = xp.empty(dy.shape, dtype=dtype)
        for a in range(kh):
            for b in range(kw):
                xp.multiply(dy, w[:, 0, a, b].reshape(1, o, 1, 1), out=buf)
                dxpad[_tap(a, b, oh, ow, sh, sw, dh, dw, False)] += buf
        return dxpad
    if g == 1 and sh == 1 and sw == 1:
        return input_grad_chunked_s1(xp, dy, w, padded_shape, dh, dw)
    if dyg is None:
        dyg = _nchw_by_group(xp, dy, g)
    # rows ordered (a, b, cg): the block of offset (a, b) is a contiguous [g, cg, N, oh, ow]
    wmat = w.reshape(g, og, cg, kh, kw).transpose(0, 3, 4, 2, 1).reshape(g, kh * kw * cg, og)
    if sh == 1 and sw == 1:
        # Stride 1: give dy the padded input's row length (zeros past ow); then offset (a, b)
        # adds its block to ONE contiguous run of the flattened [Hp*Wp] plane, starting at
        # a*dh*Wp + b*dw (the zero columns land on cells other offsets own, adding nothing):
        # long inner loops instead of one short loop per output row.
        dyw = xp.zeros((g, og, n, oh, wp), dtype=dtype)
        dyw[..., :ow] = dyg.reshape(g, og, n, oh, ow)
        run = oh * wp
        dcols = xp.matmul(wmat, dyw.reshape(g, og, n * run)).reshape(g, kh, kw, cg, n, run)
        flat = xp.zeros((g, cg, n, hp * wp + (kw - 1) * dw), dtype=dtype)
        for a in range(kh):
            for b in range(kw):
                start = a * dh * wp + b * dw
                flat[..., start:start + run] += dcols[:, a, b]
        return flat[..., :hp * wp].reshape(c, n, hp, wp).transpose(1, 0, 2, 3)
    dcols = xp.matmul(wmat, dyg).reshape(g, kh, kw, cg, n, oh, ow)
    dxt = xp.zeros((g, cg, n, hp, wp), dtype=dtype)
    for a in range(kh):
        rows = slice(a * dh, a * dh + (oh - 1) * sh + 1, sh)
        for b in range(kw):
            cols = slice(b * dw, b * dw + (ow - 1) * sw + 1, sw)
            dxt[:, :, :, rows, cols] += dcols[:, a, b]
    return dxt.reshape(c, n, hp, wp).transpose(1, 0, 2, 3)


def _conv2d_grad(xp, x, w, dy, strides, paddings, padding_algorithm, dilations, g, data_format, need):
    channel_last = _channel_last(data_format)
    h, wd = _spatial(x, channel_last)
    kh, kw = w.shape[2:]
    sh, sw, dh, dw, pads = _conv_setup(x, (kh, kw), strides, paddings, padding_algorithm, dilations,
                                       channel_last)
    cdt = xp.float32 if x.dtype == xp.float16 else x.dtype
    xc, wc, dyc = (a.astype(cdt, copy=False) for a in (x, w, dy))
    dx = dw_ = None
    depthwise = w.shape[1] == 1 and w.shape[0] == g
    # dy by group: an operand of both general NCHW gradients (kernels/conv_grad.py's
    # one-group paths and the depthwise dInput read dy as it is)
    general_filter = "Filter@GRAD" in need and g > 1
    general_input = "Input@GRAD" in need and not depthwise and (g > 1 or (sh, sw) != (1, 1))
    dyg = _nchw_by_group(xp, dyc, g) if not channel_last and (general_filter or general_input) else None
    if "Filter@GRAD" in need:
        xpad = _pad_spatial(xp, xc, pads, channel_last)
        dw_ = _conv_filter_grad(xp, xpad, dyc, kh, kw, sh, sw, dh, dw, g, channel_last, dyg)
        dw_ = xp.ascontiguousarray(dw_).astype(w.dtype, copy=False)
    if "Input@GRAD" in need:
        padded = list(x.shape)
        hi, wi = (1, 2) if channel_last else (2, 3)
        padded[hi] += pads[0] + pads[1]
        padded[wi] += pads[2] + pads[3]
        dxpad = _conv_input_grad(xp, dyc, wc, tuple(padded), kh, kw, sh, sw, dh, dw, g, channel_last, cdt, dyg)
        dx = xp.ascontiguousarray(_crop_spatial(dxpad, pads, h, wd, channel_last)).astype(x.dtype, copy=False)
    return dx, dw_


_CONV_GRAD_IO = dict(inputs=["Input", "Filter", "Output@GRAD"], outputs=["Input@GRAD", "Filter@GRAD"],
                     attrs=_CONV_ATTRS)
_ALL_CONV_GRADS = frozenset({"Input@GRAD", "Filter@GRAD"})


@kernel("conv2d_grad", **_CONV_GRAD_IO)
def conv2d_grad(xp, x, w, dy, *, strides, paddings, padding_algorithm, dilations, groups, data_format,
                need=_ALL_CONV_GRADS):
    g = int(groups) if groups and groups > 0 else 1
    return _conv2d_grad(xp, x, w, dy, strides, paddings, padding_algorithm, dilations, g, data_format, need)


@kernel("depthwise_conv2d_grad", **_CONV_GRAD_IO)
def depthwise_conv2d_grad(xp, x, w, dy, *, strides, paddings, padding_algorithm, dilations, groups,
                          data_format, need=_ALL_CONV_GRADS):
    c = x.shape[-1] if _channel_last(data_format) else x.shape[1]  # groups = input channels
    return _conv2d_grad(xp, x, w, dy, strides, paddings, padding_algorithm, dilations, c, data_format, need)


@kernel("conv2d_transpose_grad", inputs=["Input", "Filter", "Bias", "Output@GRAD"],
        outputs=["Input@GRAD", "Filter@GRAD"],
        attrs=["strides", "paddings", "padding_algorithm", "groups", "dilations", "data_format"])
def conv2d_transpose_grad(xp, x, w, bias, dy, *, strides, paddings, padding_algorithm, groups,
                          dilations, data_format, need=_ALL_CONV_GRADS):
    """The transposed convolution scatters x[i] * W[a] to full-canvas row i*stride + a*dil
    (the output is that canvas cropped by the paddings). So with dy placed on the canvas:
    dInput = conv2d(canvas, W) (W [in_c, out_c/g, kh, kw] read as a conv2d filter) and
    dFilter = conv2d's filter gradient with the canvas as input and x as output gradient."""
    channel_last = _channel_last(data_format)
    h, wd = _spatial(x, channel_last)
    oh, ow = _spatial(dy, channel_last)
    kh, kw = w.shape[2:]
    g = int(groups) if groups and groups > 0 else 1
    sh, sw, dh, dw, pads = _conv_setup(x, (kh, kw), strides, paddings, padding_algorithm, dilations,
                                       channel_last)
    cdt = xp.float32 if x.dtype == xp.float16 else x.dtype
    xc, wc, dyc = (a.astype(cdt, copy=False) for a in (x, w, dy))
    full_h = max((h - 1) * sh + dh * (kh - 1) + 1, pads[0] + oh)
    full_w = max((wd - 1) * sw + dw * (kw - 1) + 1, pads[2] + ow)
    if (full_h, full_w) == (oh, ow) and pads[0] == pads[2] == 0:
        canvas = dyc
    else:
        n = dy.shape[0]
        o = dy.shape[3] if channel_last else dy.shape[1]
        shape = (n, full_h, full_w, o) if channel_last else (n, o, full_h, full_w)
        canvas = xp.zeros(shape, dtype=cdt)
        if channel_last:
            canvas[:, pads[0]:pads[0] + oh, pads[2]:pads[2] + ow, :] = dyc
        else:
            canvas[:, :, pads[0]:pads[0] + oh, pads[2]:pads[2] + ow] = dyc
    dx = dw_ = None
    if "Input@GRAD" in need:
        dx = _conv_core(xp, canvas, wc, h, wd, sh, sw, dh, dw, g, channel_last)
        dx = xp.ascontiguousarray(dx).astype(x.dtype, copy=False)
    if "Filter@GRAD" in need:
        dw_ = _conv_filter_grad(xp, canvas, xc, kh, kw, sh, sw, dh, dw, g, channel_last)
        dw_ = xp.ascontiguousarray(dw_).astype(w.dtype, copy=False)
    return dx, dw_


# ----------------------------------------------------------------------------- pool2d_grad

def _adaptive_avg_pool_grad(xp, x, dout, cdt):
    """NCHW adaptive average pooling gradient: dX = Mh^T (dOut / count) Mw with the 0/1 bin
    membership matrices (host arrays, _adaptive_bins)."""
    h, w = x.shape[2:]
    oh, ow = dout.shape[2:]
    hs, he = _adaptive_bins(h, oh)
    ws, we = _adaptive_bins(w, ow)
    ih, iw = np.arange(h), np.arange(w)
    mh = xp.asarray(((ih[None, :] >= hs[:, None]) & (ih[None, :] < he[:, None])).astype(cdt))  # [oh, H]
    mw = xp.asarray(((iw[None, :] >= ws[:, None]) & (iw[None, :] < we[:, None])).astype(cdt))  # [ow, W]
    recip = xp.asarray((1.0 / ((he - hs)[:, None] * (we - ws)[None, :]).astype(np.float32)).astype(cdt))
    return mh.T @ (dout.astype(cdt, copy=False) * recip) @ mw


def _global_pool_grad(xp, x, out, dout, pooling_type, channel_last, cdt):
    """Global pooling's gradient, contiguous, without a pass per cell of the plane (avg
    [1, 960, 10, 15] 16x, max [64, 512, 7, 7] 4.7x the per-cell passes). avg:
    every cell gets dOut * float32(1 / (H*W)) (Paddle's Pool2dGradFunctor); max: each
    plane's dOut goes to its first cell (row-major) equal to Out, found by one argmax over
    the flattened plane."""
    if channel_last:
        t = (0, 3, 1, 2)
        return _global_pool_grad(xp, x.transpose(t), out.transpose(t), dout.transpose(t), pooling_type, False,
                                 cdt).transpose(0, 2, 3, 1).copy()
    n, c, h, w = x.shape
    dout2 = dout.astype(cdt, copy=False).reshape(n * c, 1)
    if pooling_type == "avg":
        share = dout2 * xp.asarray(np.float32(1.0) / np.float32(h * w)).astype(cdt)
        return xp.broadcast_to(share, (n * c, h * w)).reshape(n, c, h, w).copy()
    hit = x.reshape(n * c, h * w) == out.reshape(n * c, 1)
    first = hit.argmax(axis=1)[:, None]
    hit &= xp.arange(h * w)[None, :] == first                      # the first hit only
    return xp.multiply(dout2, hit).reshape(n, c, h, w)


@kernel("pool2d_grad", inputs=["X", "Out", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["ksize", "strides", "paddings", "ceil_mode", "exclusive", "data_format",
               "pooling_type", "global_pooling", "adaptive", "padding_algorithm"])
def pool2d_grad(xp, x, out, dout, *, ksize, strides, paddings, ceil_mode, exclusive, data_format,
                pooling_type, global_pooling, adaptive, padding_algorithm):
    """max: each window's gradient goes to the first input (row-major in the window) equal
    to its Out, as Paddle's MaxPool2dGradFunctor; overlapping windows accumulate. avg: every
    input of a window gets dOut / (the clipped window size if exclusive or adaptive, else
    kh*kw). One strided pass per window offset, as the forward, over blocks of planes
    (`_over_plane_blocks`)."""
    channel_last = _channel_last(data_format)
    h, w = _spatial(x, channel_last)
    kh, kw = [int(k) for k in _as_list(ksize, 2)]
    if global_pooling:
        kh, kw = h, w
    cdt = _compute_dtype(xp, x.dtype)
    if _one_bin(global_pooling, adaptive, pooling_type, kh, kw):
        return _global_pool_grad(xp, x, out, dout, pooling_type, channel_last, cdt).astype(x.dtype, copy=False)
    if adaptive and pooling_type == "avg":   # max: PaddlePaddle's windows, as in pool2d
        if channel_last:
            t = (0, 3, 1, 2)
            dx = _adaptive_avg_pool_grad(xp, x.transpose(t), dout.transpose(t), cdt).transpose(0, 2, 3, 1)
        else:
            dx = _adaptive_avg_pool_grad(xp, x, dout, cdt)
        return xp.ascontiguousarray(dx).astype(x.dtype, copy=False)
    sh, sw = [int(s) for s in _as_list(strides, 2)]
    pads = [0, 0, 0, 0] if global_pooling or adaptive else _resolve_padding(paddings, padding_algorithm, (h, w),
                                                                              (sh, sw), (kh, kw))
    oh, ow = _spatial(out, channel_last)
    top, left = pads[0], pads[2]
    bottom = max((oh - 1) * sh + kh - top - h, 0)
    right = max((ow - 1) * sw + kw - left - w, 0)
    geo = _PoolGradGeometry((kh, kw), (sh, sw), (oh, ow), [top, bottom, left, right], channel_last, cdt)
    if pooling_type == "max":
        fill = -_FLT_MAX if x.dtype != xp.float16 else float("-inf")
        passes = functools.partial(_max_pool_grad_passes, xp, geo=geo, fill=fill)
    else:
        if exclusive:
            hs = xp.arange(oh) * sh - top
            ws = xp.arange(ow) * sw - left
            ch = xp.minimum(hs + kh, h) - xp.maximum(hs, 0)
            cw = xp.minimum(ws + kw, w) - xp.maximum(ws, 0)
            count = ch[:, None] * cw[None, :]
        else:
            count = xp.asarray(inclusive_pool_count(np, (oh, ow), (h, w), (kh, kw), (sh, sw), (top, left)))
        # Paddle's Pool2dGradFunctor: dX += float(1.0f / pool_size) * dOut
        with np.errstate(divide="ignore"):
            recip = (1.0 / count.astype(xp.float32)).astype(cdt)
        passes = functools.partial(_avg_pool_grad_passes, xp, geo=geo,
                                   recip=recip[:, :, None] if channel_last else recip)
    return _over_plane_blocks(xp, passes, x, out, dout, channel_last)


@dataclass(frozen=True)
class _PoolGradGeometry:
    """What the strided passes of pool2d_grad need: window, strides, output size, the padding
    that puts every window inside ([top, bottom, left, right]), layout, compute dtype."""
    ksize: tuple
    strides: tuple
    out_size: tuple
    pads: list
    channel_last: bool
    dtype: object

    def padded_shape(self, x_shape):
        padded = list(x_shape)
        hi, wi = (1, 2) if self.channel_last else (2, 3)
        top, bottom, left, right = self.pads
        padded[hi] += top + bottom
        padded[wi] += left + right
        return tuple(padded), (padded[hi], padded[wi])

    def overlapping(self):
        """Whether windows overlap (an input cell in several: gradients add), else assigned."""
        return self.strides[0] < self.ksize[0] or self.strides[1] < self.ksize[1]

    def new_canvas(self, xp, x_shape, into=None):
        """The padded gradient to fill: zeros, or uninitialized where the windows tile it;
        `into` itself (the result's place) where there is no padding and it has the
        compute dtype."""
        shape, (hp, wp) = self.padded_shape(x_shape)
        (sh, sw), (oh, ow) = self.strides, self.out_size
        tiles = self.strides == self.ksize and (oh * sh, ow * sw) == (hp, wp)
        if into is not None and not any(self.pads) and into.dtype == self.dtype:
            if not tiles:
                into[...] = 0
            return into
        return (xp.empty if tiles else xp.zeros)(shape, dtype=self.dtype)

    def taps(self):
        """(a, b, the index of the cells window offset (a, b) covers) in row-major order."""
        (kh, kw), (sh, sw), (oh, ow) = self.ksize, self.strides, self.out_size
        return [(a, b, _tap(a, b, oh, ow, sh, sw, 1, 1, self.channel_last)) for a in range(kh) for b in range(kw)]


# Bytes of pool2d_grad's input per block of planes: x, dX, Out, dOut and two masks of a
# block then take about 640 KiB, well inside a core's L2.
POOL_GRAD_BLOCK_BYTES = 256 << 10


def _over_plane_blocks(xp, passes, x, out, dout, channel_last):
    """dX of passes(x, out, dout, into), over blocks of planes (NCHW: of the N*C [1, H, W]
    planes; NHWC: of samples) of about POOL_GRAD_BLOCK_BYTES of x each, so that the
    kh*kw strided passes over a block reread cache. The benchmark CNN's max-pool gradients
    with the caches flushed before each call (as in a training step; numpy 2.4, CPU time
    of one thread, medians of 120 alternating calls): [64, 16, 28, 28] 2.25 -> 1.61 ms
    (1.89 ms in one block, 1.68 ms in 512 KiB blocks), [64, 32, 14, 14] 1.13 -> 0.98 ms.
    On cupy, or for non-contiguous operands, one call over everything."""
    if xp is not np or not (x.flags.c_contiguous and out.flags.c_contiguous and dout.flags.c_contiguous):
        return passes(x, out, dout, None)
    shape = x.shape
    if not channel_last:
        units = shape[0] * shape[1]
        x = x.reshape(units, 1, *shape[2:])
        out = out.reshape(units, 1, *out.shape[2:])
        dout = dout.reshape(units, 1, *dout.shape[2:])
    dx = np.empty(x.shape, dtype=x.dtype)
    for lo, hi in row_blocks(xp, x.shape[0], x[0].nbytes, POOL_GRAD_BLOCK_BYTES):
        passes(x[lo:hi], out[lo:hi], dout[lo:hi], dx[lo:hi])
    return dx.reshape(shape)


def _max_pool_grad_passes(xp, x, out, dout, into, *, geo, fill):
    """max: each window's gradient goes to the first input (row-major in the window) equal
    to its Out, found by one strided pass per window offset. The result is written into
    `into` when given (an array of x's shape and dtype), else returned."""
    xpad = _pad_spatial(xp, x, geo.pads, geo.channel_last, fill)
    (kh, kw), (sh, sw), (oh, ow) = geo.ksize, geo.strides, geo.out_size
    win = _windows(xp, xpad, oh, ow, kh, kw, sh, sw, 1, 1, geo.channel_last)
    dxpad = geo.new_canvas(xp, x.shape, into)
    dout_c = dout.astype(geo.dtype, copy=False)
    overlap = geo.overlapping()
    taps = geo.taps()
    found = xp.empty(out.shape, dtype=bool)
    later = xp.empty(out.shape, dtype=bool)
    buf = xp.empty(dout_c.shape, dtype=geo.dtype) if overlap else None
    for t, (a, b, cells) in enumerate(taps):
        tap = win[:, :, :, a, b, :] if geo.channel_last else win[..., a, b]
        if t == 0:
            hit = xp.equal(tap, out, out=found)
        else:
            hit = xp.equal(tap, out, out=later)
            xp.greater(hit, found, out=hit)          # hit and not found before
            if t + 1 < len(taps):
                found |= hit
        if overlap:
            xp.multiply(dout_c, hit, out=buf)
            dxpad[cells] += buf
        else:
            xp.multiply(dout_c, hit, out=dxpad[cells])
    return _finish_pool_grad(xp, dxpad, geo, x, into)


def _avg_pool_grad_passes(xp, x, out, dout, into, *, geo, recip):
    """avg: every input of a window gets dOut * recip (1 / the window's divisor); written
    into `into` when given, else returned."""
    dxpad = geo.new_canvas(xp, x.shape, into)
    share = dout.astype(geo.dtype, copy=False) * recip
    overlap = geo.overlapping()
    for _, _, cells in geo.taps():
        if overlap:
            dxpad[cells] += share
        else:
            dxpad[cells] = share
    return _finish_pool_grad(xp, dxpad, geo, x, into)


def _finish_pool_grad(xp, dxpad, geo, x, into):
    """The padded gradient cropped to x, in x's dtype: written into `into` (unless it is
    that already) when given, else returned contiguous."""
    if dxpad is into:
        return into
    h, w = _spatial(x, geo.channel_last)
    dx = _crop_spatial(dxpad, geo.pads, h, w, geo.channel_last)
    if into is not None:
        into[...] = dx
        return into
    return xp.ascontiguousarray(dx).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- normalization grads

def _chan_view(a, axis):
    """`a` as [A, C, B] with the channel axis in the middle (a view)."""
    lead = 1
    for d in a.shape[:axis]:
        lead *= d
    return a.reshape(lead, a.shape[axis], -1)


def _chan_sum(a3):
    """Per-channel sum of an [A, C, B] array: the contiguous B axis first."""
    if a3.shape[2] == 1:
        return a3[:, :, 0].sum(axis=0)
    return a3.sum(axis=2).sum(axis=0)


_ALL_NORM_GRADS = frozenset({"X@GRAD", "Scale@GRAD", "Bias@GRAD"})


@kernel("batch_norm_grad",
        inputs=["X", "Scale", "Bias", "Mean", "Variance", "SavedMean", "SavedVariance", "MeanOut",
                "VarianceOut", "Y@GRAD"],
        outputs=["X@GRAD", "Scale@GRAD", "Bias@GRAD"],
        attrs=["epsilon", "data_layout", "is_test", "use_global_stats"])
def batch_norm_grad(xp, x, scale, bias, mean, variance, saved_mean, saved_inv_std, mean_out,
                    variance_out, dy, *, epsilon, data_layout, is_test, use_global_stats,
                    need=_ALL_NORM_GRADS):
    """Paddle's BatchNormGradFunctor. Training: SavedMean is the batch mean, SavedVariance
    1/sqrt(var + eps); with xhat = (x - mean) * inv_std, M elements per channel:
    dBias = sum(dy), dScale = sum(dy * xhat),
    dX = scale * inv_std * (dy - dBias / M - xhat * dScale / M).
    is_test or use_global_stats (Paddle ignores trainable_statistics here): the running
    Mean/Variance (the MeanOut/VarianceOut variables) are constants, dX = scale * inv_std * dy.
    One element per channel in training: Paddle copies dy to dX."""
    axis = _channel_axis(x.ndim, data_layout)
    c = x.shape[axis]
    cdt = _compute_dtype(xp, x.dtype)
    global_stats = bool(is_test) or bool(use_global_stats)
    x3 = _chan_view(x, axis).astype(cdt, copy=False)
    dy3 = _chan_view(dy, axis).astype(cdt, copy=False)
    scale_c = xp.ones(c, cdt) if scale is None else scale.astype(cdt, copy=False)
    pdt = scale.dtype if scale is not None else cdt
    m = x3.shape[0] * x3.shape[2]
    if global_stats:
        mean = mean if mean is not None else mean_out
        variance = variance if variance is not None else variance_out
        mu = mean.astype(cdt, copy=False)
        inv_std = 1.0 / xp.sqrt(variance.astype(cdt, copy=False) + cdt.type(epsilon))
    elif m == 1:
        dx = dy.copy() if "X@GRAD" in need else None
        zeros = xp.zeros(c, pdt)
        return dx, (zeros if "Scale@GRAD" in need else None), (zeros.copy() if "Bias@GRAD" in need else None)
    else:
        mu = saved_mean.astype(cdt, copy=False)
        inv_std = saved_inv_std.astype(cdt, copy=False)
    b = (1, c, 1)
    need_dx = "X@GRAD" in need
    batch_dx = need_dx and not global_stats       # dX needs dBias and dScale
    dbias = _chan_sum(dy3) if "Bias@GRAD" in need or batch_dx else None
    dscale = None
    if "Scale@GRAD" in need or batch_dx:
        xc = x3 - mu.reshape(b)                    # x - mean
        tmp = dy3 * xc
        dscale = _chan_sum(tmp) * inv_std          # sum(dy * xhat)
    dx = None
    if need_dx:
        k1 = scale_c * inv_std
        if global_stats:
            dx = dy3 * k1.reshape(b)
        else:
            # dx = k1*dy + k2*(x - mean) + k3, with k2 = -k1*inv_std*dScale/M, k3 = -k1*dBias/M
            k2 = -k1 * inv_std * dscale / m
            k3 = -k1 * dbias / m
            xc *= k2.reshape(b)
            xc += k3.reshape(b)
            xp.multiply(dy3, k1.reshape(b), out=tmp)
            tmp += xc
            dx = tmp
        dx = dx.reshape(x.shape).astype(x.dtype, copy=False)
    return (dx,
            dscale.astype(pdt, copy=False) if "Scale@GRAD" in need else None,
            dbias.astype(bias.dtype if bias is not None else pdt, copy=False) if "Bias@GRAD" in need else None)


def _normalized_grad(xp, xhat, inv_std, gdy, axes):
    """dX of y = xhat * s + b over the normalized `axes`, given gdy = dy * s:
    inv_std * (gdy - mean(gdy) - xhat * mean(gdy * xhat))."""
    m1 = gdy.mean(axis=axes, keepdims=True)
    m2 = (gdy * xhat).mean(axis=axes, keepdims=True)
    dx = gdy - m1          # the same operations in the same order, two temporaries fewer
    dx -= xhat * m2
    dx *= inv_std
    return dx


@kernel("layer_norm_grad", inputs=["X", "Scale", "Bias", "Mean", "Variance", "Y@GRAD"],
        outputs=["X@GRAD", "Scale@GRAD", "Bias@GRAD"], attrs=["epsilon", "begin_norm_axis"])
def layer_norm_grad(xp, x, scale, bias, mean, variance, dy, *, epsilon, begin_norm_axis,
                    need=_ALL_NORM_GRADS):
    """Mean/Variance (the biased variance, not its inverse) are per row of X viewed as
    [prod(dims before begin_norm_axis), prod(the rest)]. Over cache-sized blocks of rows
    (kernels/blocked.py `row_blocks`): each block's xhat, its column sums of dy * xhat and
    dy (added up over the blocks afterwards), and
    dX = inv_std * (g - mean(g) - xhat * mean(g * xhat)) with g = dy * Scale."""
    left, right, cdt, x2 = _layer_norm_rows(xp, x, begin_norm_axis)
    dy2 = dy.reshape(left, right).astype(cdt, copy=False)
    inv_std = 1.0 / xp.sqrt(variance.reshape(left, 1).astype(cdt) + cdt.type(epsilon))
    mu = mean.reshape(left, 1).astype(cdt)
    s = scale.reshape(1, right).astype(cdt, copy=False) if scale is not None else None
    want_dscale = "Scale@GRAD" in need and scale is not None
    want_dbias = "Bias@GRAD" in need and bias is not None
    want_dx = "X@GRAD" in need
    if not (want_dscale or want_dbias or want_dx):
        return None, None, None
    blocks = row_blocks(xp, left, right * np.dtype(cdt).itemsize)
    dscale_parts = xp.empty((len(blocks), right), cdt) if want_dscale else None
    dbias_parts = xp.empty((len(blocks), right), cdt) if want_dbias else None
    dx = xp.empty((left, right), cdt) if want_dx else None
    with _empty_rows_allowed(xp, right):
        for i, (lo, hi) in enumerate(blocks):
            xhat = x2[lo:hi] - mu[lo:hi]
            xhat *= inv_std[lo:hi]
            g = dy2[lo:hi]
            if want_dscale:
                dscale_parts[i] = column_dots(xp, g, xhat)
            if want_dbias:
                dbias_parts[i] = column_sums(xp, g)
            if want_dx:
                if s is not None:
                    g = g * s
                m1 = last_axis_sums(xp, g) / right
                m2 = last_axis_dots(xp, g, xhat) / right
                out = dx[lo:hi]
                xp.subtract(g, m1[:, None], out=out)
                xhat *= m2[:, None]
                out -= xhat
                out *= inv_std[lo:hi]
    dscale = dbias = None
    if want_dscale:
        dscale = dscale_parts.sum(axis=0).reshape(scale.shape).astype(scale.dtype, copy=False)
    if want_dbias:
        dbias = dbias_parts.sum(axis=0).reshape(bias.shape).astype(bias.dtype, copy=False)
    if want_dx:
        dx = dx.reshape(x.shape).astype(x.dtype, copy=False)
    return dx, dscale, dbias


@kernel("group_norm_grad", inputs=["X", "Scale", "Bias", "Y", "Mean", "Variance", "Y@GRAD"],
        outputs=["X@GRAD", "Scale@GRAD", "Bias@GRAD"], attrs=["epsilon", "groups", "data_layout"])
def group_norm_grad(xp, x, scale, bias, y, mean, variance, dy, *, epsilon, groups, data_layout,
                    need=_ALL_NORM_GRADS):
    """Mean/Variance [N, groups] (biased variance). Paddle's CPU kernel recovers xhat from
    Y as (Y - Bias) / Scale, and as (Y - Bias) = 0 where Scale == 0: such channels get a zero
    Scale@GRAD and no xhat term in X@GRAD. xhat is computed from X here (no precision lost
    to a tiny Scale), with that convention kept for Scale == 0."""
    channel_last = _channel_last(data_layout)
    n = x.shape[0]
    c = x.shape[-1] if channel_last else x.shape[1]
    g = int(groups)
    cdt = _compute_dtype(xp, x.dtype)
    inv_std = 1.0 / xp.sqrt(variance.astype(cdt) + cdt.type(epsilon))   # [N, g]
    mu = mean.astype(cdt)
    if channel_last:   # [N, S, g, C/g], statistics broadcast as [N, 1, g, 1]
        shape, axes, sb = (n, -1, g, c // g), (1, 3), (n, 1, g, 1)
        cshape = (1, 1, g, c // g)
    else:              # [N, g, C/g, S]
        shape, axes, sb = (n, g, c // g, -1), (2, 3), (n, g, 1, 1)
        cshape = (1, g, c // g, 1)
    xg = x.reshape(shape).astype(cdt, copy=False)
    dyg = dy.reshape(shape).astype(cdt, copy=False)
    inv = inv_std.reshape(sb)
    xhat = (xg - mu.reshape(sb)) * inv
    red = (0, 1) if channel_last else (0, 3)   # all but the channel dims
    s = scale.astype(cdt, copy=False).reshape(cshape) if scale is not None else None
    seen = xhat if s is None else xp.where(s != 0, xhat, cdt.type(0))   # Paddle's xhat from Y
    dx = dscale = dbias = None
    if "Scale@GRAD" in need and scale is not None:
        dscale = (dyg * seen).sum(axis=red).reshape(c).astype(scale.dtype, copy=False)
    if "Bias@GRAD" in need and bias is not None:
        dbias = dyg.sum(axis=red).reshape(c).astype(bias.dtype, copy=False)
    if "X@GRAD" in need:
        gdy = dyg * s if s is not None else dyg
        m1 = gdy.mean(axis=axes, keepdims=True)
        m2 = (gdy * xhat).mean(axis=axes, keepdims=True)
        dx = (inv * (gdy - m1 - seen * m2)).reshape(x.shape).astype(x.dtype, copy=False)
    return dx, dscale, dbias


@kernel("instance_norm_grad", inputs=["X", "Scale", "Bias", "SavedMean", "SavedVariance", "Y@GRAD"],
        outputs=["X@GRAD", "Scale@GRAD", "Bias@GRAD"], attrs=["epsilon"])
def instance_norm_grad(xp, x, scale, bias, saved_mean, saved_inv_std, dy, *, epsilon,
                       need=_ALL_NORM_GRADS):
    """SavedMean/SavedVariance [N*C]: the mean and 1/sqrt(var + eps) of each plane."""
    n, c = x.shape[:2]
    cdt = _compute_dtype(xp, x.dtype)
    x3 = x.reshape(n, c, -1).astype(cdt, copy=False)
    dy3 = dy.reshape(n, c, -1).astype(cdt, copy=False)
    inv = saved_inv_std.astype(cdt).reshape(n, c, 1)
    xhat = (x3 - saved_mean.astype(cdt).reshape(n, c, 1)) * inv
    dx = dscale = dbias = None
    if "Scale@GRAD" in need and scale is not None:
        dscale = (dy3 * xhat).sum(axis=2).sum(axis=0).astype(scale.dtype, copy=False)
    if "Bias@GRAD" in need and bias is not None:
        dbias = dy3.sum(axis=2).sum(axis=0).astype(bias.dtype, copy=False)
    if "X@GRAD" in need:
        gdy = dy3 * scale.astype(cdt, copy=False).reshape(1, c, 1) if scale is not None else dy3
        dx = _normalized_grad(xp, xhat, inv, gdy, 2).reshape(x.shape).astype(x.dtype, copy=False)
    return dx, dscale, dbias


@kernel("affine_channel_grad", inputs=["X", "Scale", "Bias", "Out@GRAD"],
        outputs=["X@GRAD", "Scale@GRAD", "Bias@GRAD"], attrs=["data_layout"])
def affine_channel_grad(xp, x, scale, bias, dout, *, data_layout, need=_ALL_NORM_GRADS):
    axis = _channel_axis(x.ndim, data_layout)
    dx = dscale = dbias = None
    if "X@GRAD" in need:
        dx = (dout * _bcast(scale, x.ndim, axis)).astype(x.dtype, copy=False)
    d3 = _chan_view(dout, axis)
    if "Scale@GRAD" in need:
        dscale = _chan_sum(d3 * _chan_view(x, axis)).astype(scale.dtype, copy=False)
    if "Bias@GRAD" in need:
        dbias = _chan_sum(d3).astype(bias.dtype, copy=False)
    return dx, dscale, dbias


def _channel_window_sum(xp, v, n):
    """sum over channels [c - (n-1)//2, c + n-1 - (n-1)//2] of an [N, C, H, W] array."""
    pre = (n - 1) // 2
    padded = xp.pad(v, [(0, 0), (pre, n - 1 - pre), (0, 0), (0, 0)], mode="constant")
    out = padded[:, 0:v.shape[1]].copy()
    for j in range(1, n):
        out += padded[:, j:j + v.shape[1]]
    return out


@kernel("lrn_grad", inputs=["X", "Out", "MidOut", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["n", "k", "alpha", "beta", "data_format"])
def lrn_grad(xp, x, out, mid, dout, *, n, k, alpha, beta, data_format):
    """Paddle's LRNGradFunctor: dX[c] = dOut[c] * MidOut[c]^-beta
    - 2*alpha*beta * X[c] * sum over the window around c of dOut * Out / MidOut."""
    channel_last = _channel_last(data_format)
    cdt = _compute_dtype(xp, x.dtype)
    t = (0, 3, 1, 2)
    arrs = [a.astype(cdt, copy=False) for a in (x, out, mid, dout)]
    if channel_last:
        arrs = [a.transpose(t) for a in arrs]
    xc, oc, mc, dc = arrs
    ratio = -2.0 * float(alpha) * float(beta)
    dx = dc * mc ** (-float(beta)) + ratio * xc * _channel_window_sum(xp, dc * oc / mc, int(n))
    if channel_last:
        dx = dx.transpose(0, 2, 3, 1)
    return xp.ascontiguousarray(dx).astype(x.dtype, copy=False)


# ----------------------------------------------------------------------------- dropout grad

@kernel("dropout_grad", inputs=["Mask", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["dropout_prob", "is_test", "dropout_implementation"])
def dropout_grad(xp, mask, dout, *, dropout_prob, is_test, dropout_implementation):
    """Paddle's DropoutGradRawKernel. Training: dX = dOut * Mask, divided by (1 - p) for
    "upscale_in_train" (zeros when p == 1). is_test: dX = dOut ("upscale_in_train") or
    dOut * (1 - p); the Mask is not read. (1 - p) is a float32 value, as in Paddle."""
    upscale = dropout_implementation == "upscale_in_train"
    keep = np.float32(1.0) - np.float32(dropout_prob)
    if is_test:
        return dout.copy() if upscale else dout * dout.dtype.type(keep)
    if upscale:
        if np.float32(dropout_prob) == np.float32(1.0):
            return xp.zeros_like(dout)
        return (dout * mask.astype(dout.dtype, copy=False) / dout.dtype.type(keep)).astype(dout.dtype, copy=False)
    return dout * mask.astype(dout.dtype, copy=False)


# ----------------------------------------------------------------------------- embedding, prelu grads

@kernel("lookup_table_v2_grad", inputs=["Ids", "W", "Out@GRAD"], outputs=["W@GRAD"],
        attrs=["padding_idx"])
def lookup_table_v2_grad(xp, ids, w, dout, *, padding_idx):
    """Dense W@GRAD: row r is the sum of dOut over the positions whose id is r (repeated ids
    accumulate); the padding_idx row gets nothing (stays zero)."""
    d = w.shape[1]
    flat = ids.reshape(-1).astype(xp.int64, copy=False)
    rows = dout.reshape(-1, d)
    pad = int(padding_idx) if padding_idx is not None else -1
    _check_ids(xp, "lookup_table_v2_grad", ids, w.shape[0], pad)
    dw = xp.zeros(w.shape, dtype=_compute_dtype(xp, w.dtype))
    rows = rows.astype(dw.dtype, copy=False)
    if pad != -1:  # zeros added to the padding row rather than a mask (whose size a GPU reads back)
        rows = xp.where((flat == pad)[:, None], xp.zeros((), dw.dtype), rows)
    scatter_add(xp, dw, flat, rows)
    return dw.astype(w.dtype, copy=False)


@kernel("prelu_grad", inputs=["X", "Alpha", "Out@GRAD"], outputs=["X@GRAD", "Alpha@GRAD"],
        attrs=["data_format", "mode"])
def prelu_grad(xp, x, alpha, dout, *, data_format, mode, need=frozenset({"X@GRAD", "Alpha@GRAD"})):
    """As Paddle's PReluGradKernel: x > 0 passes dOut; elsewhere (x == 0 included) dX =
    alpha * dOut and Alpha collects x * dOut, summed over what shares the alpha."""
    if mode == "all":
        a, sum_axes = alpha.reshape(()), tuple(range(x.ndim))
    elif mode == "channel":
        axis = x.ndim - 1 if _channel_last(data_format) else 1
        a, sum_axes = _bcast(alpha.reshape(-1), x.ndim, axis), tuple(i for i in range(x.ndim) if i != axis)
    elif mode == "element":
        a, sum_axes = alpha.reshape((1,) + tuple(x.shape[1:])), (0,)
    else:
        raise ValueError(f"prelu: mode must be 'all', 'channel' or 'element', got {mode!r}")
    pos = x > 0
    dx = dalpha = None
    if "X@GRAD" in need:
        dx = xp.where(pos, dout, a.astype(x.dtype, copy=False) * dout).astype(x.dtype, copy=False)
    if "Alpha@GRAD" in need:
        contrib = xp.where(pos, x.dtype.type(0), x * dout)
        dalpha = contrib.sum(axis=sum_axes).reshape(alpha.shape).astype(alpha.dtype, copy=False)
    return dx, dalpha


# ----------------------------------------------------------------------------- interpolation grads

def _interp_matrix(xp, in_size, out_size, scale, method, align_corners, align_mode, dtype):
    """The [out, in] matrix of the 1-D resize along one axis (forward: out = A @ in): one-hot
    rows for nearest, two weights per row for linear (Paddle's indices and weights)."""
    ratio = _interp_ratio(in_size, out_size, scale, align_corners)
    cols = xp.arange(in_size)[None, :]
    if method == "nearest":
        idx = _nearest_axis(xp, in_size, out_size, ratio, align_corners)
        return (cols == idx[:, None]).astype(dtype)
    lo, hi, w_lo, w_hi = _linear_axis(xp, in_size, out_size, ratio, align_mode == 0 and not align_corners)
    return ((cols == lo[:, None]) * w_lo.astype(dtype)[:, None]
            + (cols == hi[:, None]) * w_hi.astype(dtype)[:, None]).astype(dtype, copy=False)


def _interp_grad(xp, x, dout, out_size_t, size_tensor, scale_t, data_layout, out_d, out_h, out_w, scale,
                 interp_method, align_corners, align_mode):
    """The adjoint of the separable resize: dX = dOut contracted with each axis' matrix."""
    axes, in_sizes, sizes, scales = _interp_sizes(x, out_size_t, size_tensor, scale_t, data_layout,
                                                  out_d, out_h, out_w, scale)
    if sizes == in_sizes:
        return dout.astype(x.dtype, copy=True)
    method = "nearest" if interp_method == "nearest" else "linear"
    if method == "linear" and interp_method not in ("linear", "bilinear", "trilinear"):
        raise NotImplementedError(f"interpolate: interp_method {interp_method!r} is not supported")
    cdt = xp.float32 if x.dtype == xp.float16 else x.dtype
    g = dout.astype(cdt, copy=False)
    nd = g.ndim
    for a, i, o, s in zip(axes, in_sizes, sizes, scales):
        mat = _interp_matrix(xp, i, o, s, method, align_corners, align_mode, cdt)   # [o, i]
        if a == nd - 1:
            g = g @ mat
        elif a == nd - 2:
            g = mat.T @ g
        else:
            g = xp.moveaxis(xp.tensordot(mat.T, g, axes=([1], [a])), 0, a)
    return xp.ascontiguousarray(g).astype(x.dtype, copy=False)


def _interp_grad_kernel(op_type):
    @kernel(op_type + "_grad", inputs=["X", "OutSize", "SizeTensor", "Scale", "Out@GRAD"],
            outputs=["X@GRAD"],
            attrs=["data_layout", "out_d", "out_h", "out_w", "scale", "interp_method",
                   "align_corners", "align_mode"])
    def run(xp, x, out_size, size_tensor, scale_t, dout, *, data_layout, out_d, out_h, out_w, scale,
            interp_method, align_corners, align_mode):
        return _interp_grad(xp, x, dout, out_size, size_tensor, scale_t, data_layout, out_d, out_h,
                            out_w, scale, interp_method, align_corners, align_mode)
    run.__name__ = op_type + "_grad"
    return run


linear_interp_v2_grad = _interp_grad_kernel("linear_interp_v2")
bilinear_interp_v2_grad = _interp_grad_kernel("bilinear_interp_v2")
trilinear_interp_v2_grad = _interp_grad_kernel("trilinear_interp_v2")
nearest_interp_v2_grad = _interp_grad_kernel("nearest_interp_v2")


@kernel("nearest_interp_grad", inputs=["X", "OutSize", "SizeTensor", "Scale", "Out@GRAD"],
        outputs=["X@GRAD"], attrs=["data_layout", "out_d", "out_h", "out_w", "scale", "interp_method",
                                   "align_corners", "align_mode"])
def nearest_interp_grad(xp, x, out_size, size_tensor, scale_t, dout, *, data_layout, out_d, out_h, out_w,
                        scale, interp_method, align_corners, align_mode):
    sizes = _v1_sizes(x, out_size, size_tensor, data_layout, out_d, out_h, out_w, scale)
    return _interp_grad(xp, x, dout, out_size, size_tensor, scale_t, data_layout, *sizes, [],
                        interp_method, align_corners, align_mode)


@kernel("pixel_shuffle_grad", inputs=["Out@GRAD"], outputs=["X@GRAD"],
        attrs=["upscale_factor", "data_format"])
def pixel_shuffle_grad(xp, dout, *, upscale_factor, data_format):
    """The inverse rearrangement: [N, C, H*r, W*r] -> [N, C*r*r, H, W]."""
    r = int(upscale_factor)
    if _channel_last(data_format):
        n, hr, wr, oc = dout.shape
        g = dout.reshape(n, hr // r, r, wr // r, r, oc).transpose(0, 1, 3, 5, 2, 4)
        return xp.ascontiguousarray(g.reshape(n, hr // r, wr // r, oc * r * r))
    n, oc, hr, wr = dout.shape
    g = dout.reshape(n, oc, hr // r, r, wr // r, r).transpose(0, 1, 3, 5, 2, 4)
    return xp.ascontiguousarray(g.reshape(n, oc * r * r, hr // r, wr // r))
