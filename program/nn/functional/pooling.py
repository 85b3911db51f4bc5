"""paddle.nn.functional's pools: max/avg pooling and adaptive pooling in 1, 2 and 3 dims
(ops pool2d / pool3d, max_pool2d_with_index / max_pool3d_with_index when the argmax mask is
asked for), and max_unpool2d. 1-D pools run as 2-D ones over [N, C, 1, L], as PaddlePaddle's do."""
from __future__ import annotations

import math

from keel.program.errors import AttrError
from keel.program.layers import math as M
from keel.program.layers import tensor as T
from keel.program.layers.helper import LayerHelper
from keel.program.nn import _fail, _ints
from keel.program.nn.functional.conv import _channel_last, conv_padding

__all__ = ["avg_pool1d", "avg_pool2d", "avg_pool3d", "max_pool1d", "max_pool2d", "max_pool3d",
           "adaptive_avg_pool1d", "adaptive_avg_pool2d", "adaptive_avg_pool3d", "adaptive_max_pool1d",
           "adaptive_max_pool2d", "adaptive_max_pool3d", "max_unpool2d"]


def pool_nd(layer, x, pool_type, ksize, strides, paddings, algorithm, nd, data_format, *, ceil_mode=False,
            exclusive=True, adaptive=False, global_pooling=False, name=None):
    """Append op pool2d / pool3d with these attributes."""
    if x.ndim != nd + 2:
        _fail(layer, f"expects a {nd + 2}-d input ({data_format}), got {x.name} {x.type_string()}")
    helper = LayerHelper(layer, name)
    out = helper.create_tmp(x.dtype)
    helper.append_op(f"pool{nd}d", {"X": x}, {"Out": out},
                     {"pooling_type": pool_type, "ksize": list(ksize), "global_pooling": global_pooling,
                      "strides": list(strides), "paddings": list(paddings), "padding_algorithm": algorithm,
                      "use_cudnn": not adaptive and nd == 2, "ceil_mode": bool(ceil_mode),
                      "exclusive": bool(exclusive), "adaptive": adaptive, "data_format": data_format})
    return out


def pool_with_index(layer, x, ksize, strides, paddings, nd, *, adaptive=False, ceil_mode=False, name=None):
    """Append max_pool2d_with_index / max_pool3d_with_index (NCHW / NCDHW): (Out, Mask)."""
    if x.ndim != nd + 2:
        _fail(layer, f"expects a {nd + 2}-d input, got {x.name} {x.type_string()}")
    if len(paddings) != nd:
        _fail(layer, f"asymmetric padding {paddings} is not supported with return_mask", AttrError)
    helper = LayerHelper(layer, name)
    out = helper.create_tmp(x.dtype)
    mask = helper.create_tmp("int32", stop_gradient=True)
    helper.append_op(f"max_pool{nd}d_with_index", {"X": x}, {"Out": out, "Mask": mask},
                     {"ksize": list(ksize), "strides": list(strides), "paddings": list(paddings),
                      "global_pooling": False, "adaptive": adaptive, "ceil_mode": bool(ceil_mode)})
    return out, mask


def _window(layer, kernel_size, stride, padding, nd, channel_last):
    ksize = _ints(layer, kernel_size, "kernel_size", nd)
    strides = ksize if stride is None else _ints(layer, stride, "stride", nd)
    paddings, algorithm = conv_padding(layer, padding, nd, channel_last)
    return ksize, strides, paddings, algorithm


def _max_pool(layer, x, kernel_size, stride, padding, return_mask, ceil_mode, data_format, nd, name):
    channel_last = _channel_last(layer, data_format, nd)
    ksize, strides, paddings, algorithm = _window(layer, kernel_size, stride, padding, nd, channel_last)
    if algorithm == "VALID" and ceil_mode:
        _fail(layer, "ceil_mode must be False with padding 'valid'", AttrError)
    if return_mask:
        if channel_last or algorithm != "EXPLICIT":
            _fail(layer, "return_mask needs a channel-first input and explicit padding", AttrError)
        return pool_with_index(layer, x, ksize, strides, paddings, nd, ceil_mode=ceil_mode, name=name)
    return pool_nd(layer, x, "max", ksize, strides, paddings, algorithm, nd, data_format,
                   ceil_mode=ceil_mode, name=name)


def _avg_pool(layer, x, kernel_size, stride, padding, ceil_mode, exclusive, divisor_override, data_format, nd,
              name):
    channel_last = _channel_last(layer, data_format, nd)
    ksize, strides, paddings, algorithm = _window(layer, kernel_size, stride, padding, nd, channel_last)
    if algorithm == "VALID" and ceil_mode:
        _fail(layer, "ceil_mode must be False with padding 'valid'", AttrError)
    if divisor_override is None:
        return pool_nd(layer, x, "avg", ksize, strides, paddings, algorithm, nd, data_format,
                       ceil_mode=ceil_mode, exclusive=exclusive, name=name)
    # the window's sum over `divisor_override` (PaddlePaddle: the non-exclusive mean rescaled)
    out = pool_nd(layer, x, "avg", ksize, strides, paddings, algorithm, nd, data_format,
                  ceil_mode=ceil_mode, exclusive=False, name=name)
    return M.scale(out, math.prod(ksize) / float(divisor_override))


def _squeeze_1d(layer, x):
    if x.ndim != 3:
        _fail(layer, f"expects a 3-d input [N, C, L], got {x.name} {x.type_string()}")
    return T.unsqueeze(x, [2])


def _as_1d_window(layer, kernel_size, stride, padding):
    pads, algorithm = conv_padding(layer, padding, 1, False)
    return ([1, *_ints(layer, kernel_size, "kernel_size", 1)],
            None if stride is None else [1, *_ints(layer, stride, "stride", 1)],
            algorithm.lower() if algorithm != "EXPLICIT" else ([0, 0, *pads] if len(pads) == 2 else [0, *pads]))


def _unsqueezed(result):
    if isinstance(result, tuple):
        return tuple(T.squeeze(r, [2]) for r in result)
    return T.squeeze(result, [2])


def max_pool1d(x, kernel_size, stride=None, padding=0, return_mask=False, ceil_mode=False, name=None):
    """Max pooling over L of x [N, C, L]; the stride defaults to the kernel size.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[1.0, 5.0, 2.0, 0.0, 3.0, 4.0]]])
        >>> print(F.max_pool1d(x, kernel_size=2, stride=2).numpy())
        [[[5. 2. 4.]]]
        >>> out, mask = F.max_pool1d(x, kernel_size=2, stride=2, return_mask=True)
        >>> print(mask.numpy())
        [[[1 2 5]]]
    """
    k, s, p = _as_1d_window("max_pool1d", kernel_size, stride, padding)
    if s is None:
        s = k
    return _unsqueezed(_max_pool("max_pool1d", _squeeze_1d("max_pool1d", x), k, s, p, return_mask, ceil_mode,
                                 "NCHW", 2, name))


def max_pool2d(x, kernel_size, stride=None, padding=0, return_mask=False, ceil_mode=False, data_format="NCHW",
               name=None):
    """Max pooling (op pool2d; max_pool2d_with_index with return_mask); stride defaults to kernel_size.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(16, dtype="float32").reshape([1, 1, 4, 4])
        >>> print(F.max_pool2d(x, kernel_size=2, stride=2).numpy())
        [[[[ 5.  7.]
           [13. 15.]]]]
        >>> F.max_pool2d(paddle.ones([1, 3, 32, 32]), kernel_size=3, stride=2, padding=1).shape
        [1, 3, 16, 16]
    """
    return _max_pool("max_pool2d", x, kernel_size, stride, padding, return_mask, ceil_mode, data_format, 2, name)


def max_pool3d(x, kernel_size, stride=None, padding=0, return_mask=False, ceil_mode=False, data_format="NCDHW",
               name=None):
    """Max pooling (op pool3d; max_pool3d_with_index with return_mask); stride defaults to kernel_size.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(8, dtype="float32").reshape([1, 1, 2, 2, 2])
        >>> print(F.max_pool3d(x, kernel_size=2).numpy().ravel())
        [7.]
        >>> F.max_pool3d(paddle.ones([1, 3, 8, 32, 32]), kernel_size=2, stride=2).shape
        [1, 3, 4, 16, 16]
    """
    return _max_pool("max_pool3d", x, kernel_size, stride, padding, return_mask, ceil_mode, data_format, 3, name)


def avg_pool1d(x, kernel_size, stride=None, padding=0, exclusive=True, ceil_mode=False, name=None):
    """Average pooling over L of x [N, C, L]; `exclusive` leaves padding out of the count.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(8, dtype="float32").reshape([1, 1, 8])
        >>> print(F.avg_pool1d(x, kernel_size=2, stride=2).numpy())
        [[[0.5 2.5 4.5 6.5]]]
    """
    k, s, p = _as_1d_window("avg_pool1d", kernel_size, stride, padding)
    if s is None:
        s = k
    return _unsqueezed(_avg_pool("avg_pool1d", _squeeze_1d("avg_pool1d", x), k, s, p, ceil_mode, exclusive, None,
                                 "NCHW", 2, name))


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True, divisor_override=None,
               data_format="NCHW", name=None):
    """Average pooling (op pool2d); `divisor_override` divides each window's sum by itself.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(16, dtype="float32").reshape([1, 1, 4, 4])
        >>> print(F.avg_pool2d(x, kernel_size=2, stride=2).numpy())
        [[[[ 2.5  4.5]
           [10.5 12.5]]]]
        >>> F.avg_pool2d(paddle.ones([1, 3, 32, 32]), kernel_size=3, stride=2, padding=1).shape
        [1, 3, 16, 16]
    """
    return _avg_pool("avg_pool2d", x, kernel_size, stride, padding, ceil_mode, exclusive, divisor_override,
                     data_format, 2, name)


def avg_pool3d(x, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True, divisor_override=None,
               data_format="NCDHW", name=None):
    """Average pooling (op pool3d).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(8, dtype="float32").reshape([1, 1, 2, 2, 2])
        >>> print(F.avg_pool3d(x, kernel_size=2).numpy().ravel())
        [3.5]
        >>> F.avg_pool3d(paddle.ones([1, 3, 8, 32, 32]), kernel_size=2, stride=2).shape
        [1, 3, 4, 16, 16]
    """
    return _avg_pool("avg_pool3d", x, kernel_size, stride, padding, ceil_mode, exclusive, divisor_override,
                     data_format, 3, name)


def _output_size(layer, x, output_size, nd, channel_last):
    """Adaptive output sizes; None keeps the input's size of that dim (as PaddlePaddle's)."""
    sizes = list(output_size) if isinstance(output_size, (list, tuple)) else [output_size] * nd
    if len(sizes) != nd:
        _fail(layer, f"output_size must be an int or {nd} values, got {output_size!r}", AttrError)
    spatial = x.shape[1:nd + 1] if channel_last else x.shape[2:]
    out = []
    for size, dim in zip(sizes, spatial):
        if size is None:
            if dim < 0:
                _fail(layer, f"output_size None needs the input dim known, got {x.name} {x.type_string()}")
            size = dim
        out.append(int(size))
    return out


def _adaptive(layer, x, output_size, pool_type, return_mask, data_format, nd, name):
    channel_last = _channel_last(layer, data_format, nd)
    if x.ndim != nd + 2:
        _fail(layer, f"expects a {nd + 2}-d input ({data_format}), got {x.name} {x.type_string()}")
    sizes = _output_size(layer, x, output_size, nd, channel_last)
    if pool_type == "max":
        # PaddlePaddle pools adaptive max bins with the *_with_index op (its pool kernels do
        # not), which reads channel-first input: a channel-last one is transposed there and back
        to_first, to_last = [0, nd + 1, *range(1, nd + 1)], [0, *range(2, nd + 2), 1]
        xf = T.transpose(x, to_first) if channel_last else x
        out, mask = pool_with_index(layer, xf, sizes, [1] * nd, [0] * nd, nd, adaptive=True, name=name)
        if channel_last:
            out = T.transpose(out, to_last)
            mask = T.transpose(mask, to_last) if return_mask else mask
        return (out, mask) if return_mask else out
    return pool_nd(layer, x, "avg", sizes, [1] * nd, [0] * nd, "EXPLICIT", nd, data_format, adaptive=True,
                   name=name)


def adaptive_avg_pool1d(x, output_size, name=None):
    """Average over the adaptive bins [floor(i*L/out), ceil((i+1)*L/out)) of x [N, C, L].

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(8, dtype="float32").reshape([1, 1, 8])
        >>> print(F.adaptive_avg_pool1d(x, output_size=4).numpy())
        [[[0.5 2.5 4.5 6.5]]]
    """
    return T.squeeze(_adaptive("adaptive_avg_pool1d", _squeeze_1d("adaptive_avg_pool1d", x),
                               [1, int(output_size)], "avg", False, "NCHW", 2, name), [2])


def adaptive_avg_pool2d(x, output_size, data_format="NCHW", name=None):
    """Average over the adaptive bins [floor(i*H/out), ceil((i+1)*H/out)) of each spatial axis of x [N, C, H, W].

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(16, dtype="float32").reshape([1, 1, 4, 4])
        >>> print(F.adaptive_avg_pool2d(x, output_size=2).numpy())
        [[[[ 2.5  4.5]
           [10.5 12.5]]]]
        >>> F.adaptive_avg_pool2d(paddle.ones([2, 3, 32, 32]), output_size=[3, 3]).shape
        [2, 3, 3, 3]
    """
    return _adaptive("adaptive_avg_pool2d", x, output_size, "avg", False, data_format, 2, name)


def adaptive_avg_pool3d(x, output_size, data_format="NCDHW", name=None):
    """Average over the adaptive bins of each spatial axis of x [N, C, D, H, W] (as adaptive_avg_pool2d's).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(8, dtype="float32").reshape([1, 1, 2, 2, 2])
        >>> print(F.adaptive_avg_pool3d(x, output_size=1).numpy().ravel())
        [3.5]
        >>> F.adaptive_avg_pool3d(paddle.ones([2, 3, 8, 32, 32]), output_size=[3, 3, 3]).shape
        [2, 3, 3, 3, 3]
    """
    return _adaptive("adaptive_avg_pool3d", x, output_size, "avg", False, data_format, 3, name)


def adaptive_max_pool1d(x, output_size, return_mask=False, name=None):
    """Max over the adaptive bins [floor(i*L/out), ceil((i+1)*L/out)) of x [N, C, L]; with the flat
    indices of the maxima too when return_mask.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[1.0, 5.0, 2.0, 0.0, 3.0, 4.0]]])
        >>> print(F.adaptive_max_pool1d(x, output_size=2).numpy())
        [[[5. 4.]]]
        >>> out, mask = F.adaptive_max_pool1d(x, output_size=3, return_mask=True)
        >>> print(mask.numpy())
        [[[1 2 5]]]
    """
    size = _ints("adaptive_max_pool1d", output_size, "output_size", 1)
    return _unsqueezed(_adaptive("adaptive_max_pool1d", _squeeze_1d("adaptive_max_pool1d", x), [1, *size], "max",
                                 return_mask, "NCHW", 2, name))


def adaptive_max_pool2d(x, output_size, return_mask=False, name=None, *, data_format="NCHW"):
    """Max over adaptive bins (op max_pool2d_with_index). `data_format="NHWC"` is Keel's
    addition (PaddlePaddle's function is channel-first only).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(16, dtype="float32").reshape([1, 1, 4, 4])
        >>> print(F.adaptive_max_pool2d(x, output_size=2).numpy())
        [[[[ 5.  7.]
           [13. 15.]]]]
    """
    return _adaptive("adaptive_max_pool2d", x, output_size, "max", return_mask, data_format, 2, name)


def adaptive_max_pool3d(x, output_size, return_mask=False, name=None):
    """Max over the adaptive bins of each spatial axis of x [N, C, D, H, W]; with the flat indices of
    the maxima too when return_mask.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(8, dtype="float32").reshape([1, 1, 2, 2, 2])
        >>> print(F.adaptive_max_pool3d(x, output_size=1).numpy().ravel())
        [7.]
        >>> F.adaptive_max_pool3d(paddle.ones([2, 3, 8, 32, 32]), output_size=[3, 3, 3]).shape
        [2, 3, 3, 3, 3]
    """
    return _adaptive("adaptive_max_pool3d", x, output_size, "max", return_mask, "NCDHW", 3, name)


def max_unpool2d(x, indices, kernel_size, stride=None, padding=0, data_format="NCHW", output_size=None, name=None):
    """paddle.nn.functional.max_unpool2d: op unpool; the output size defaults to
    (in - 1) * stride - 2 * padding + kernel_size.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[[1.0, 6.0], [3.0, 4.0]]]])
        >>> pooled, indices = F.max_pool2d(x, kernel_size=2, return_mask=True)
        >>> print(F.max_unpool2d(pooled, indices, kernel_size=2).numpy())
        [[[[0. 6.]
           [0. 0.]]]]
    """
    layer = "max_unpool2d"
    if data_format != "NCHW":
        _fail(layer, f"data_format must be 'NCHW', got {data_format!r}", AttrError)
    ksize = _ints(layer, kernel_size, "kernel_size", 2)
    strides = ksize if stride is None else _ints(layer, stride, "stride", 2)
    pads = _ints(layer, padding, "padding", 2)
    if output_size is None:
        hw = x.shape[2:4]
        if any(d < 0 for d in hw):
            _fail(layer, f"output_size must be given when the spatial dims of {x.name} are unknown", AttrError)
        output_size = [(hw[i] - 1) * strides[i] - 2 * pads[i] + ksize[i] for i in range(2)]
    else:
        output_size = list(output_size)[-2:]
    helper = LayerHelper(layer, name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("unpool", {"X": x, "Indices": indices}, {"Out": out},
                     {"unpooling_type": "max", "ksize": ksize, "strides": strides, "paddings": pads,
                      "output_size": [int(v) for v in output_size], "data_format": "NCHW"})
    return out
