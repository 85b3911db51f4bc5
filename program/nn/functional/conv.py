"""paddle.nn.functional's convolutions over given weight tensors: conv1d/2d/3d and their
transposes. 1-D convolutions run as 2-D ones over a height-1 image (as PaddlePaddle's do);
the bias is added with `elementwise_add` along the channel axis."""
from __future__ import annotations

from keel.program.errors import AttrError
from keel.program.layers import tensor as T
from keel.program.layers.helper import LayerHelper
from keel.program.nn import _fail, _ints, _require_float

__all__ = ["conv1d", "conv2d", "conv3d", "conv1d_transpose", "conv2d_transpose", "conv3d_transpose"]

_FORMATS = {1: ("NCL", "NLC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def _channel_last(layer, data_format, nd) -> bool:
    if data_format not in _FORMATS[nd]:
        _fail(layer, f"data_format must be {' or '.join(map(repr, _FORMATS[nd]))}, got {data_format!r}",
              AttrError)
    return data_format == _FORMATS[nd][1]


def conv_padding(layer, padding, nd, channel_last):
    """PaddlePaddle's padding spellings for an nd-d window -> (paddings attr,
    padding_algorithm): 'same'/'valid' (any case); an int; nd values; 2*nd values
    (before and after each dim: collapsed to nd when symmetric); or nd+2 pairs, those of the
    batch and channel dims zero."""
    if isinstance(padding, str):
        algorithm = padding.upper()
        if algorithm not in ("SAME", "VALID"):
            _fail(layer, f"unknown padding {padding!r}: use 'same', 'valid', an int or a list", AttrError)
        return [0] * nd, algorithm
    if isinstance(padding, (list, tuple)) and padding and isinstance(padding[0], (list, tuple)):
        if len(padding) != nd + 2:
            _fail(layer, f"padding {padding!r} must hold {nd + 2} pairs", AttrError)
        outer = (0, nd + 1) if channel_last else (0, 1)
        if any(list(padding[i]) != [0, 0] for i in outer):
            _fail(layer, f"non-zero padding {padding!r} on the batch or channel dims", AttrError)
        inner = padding[1:nd + 1] if channel_last else padding[2:]
        padding = [int(p) for pair in inner for p in pair]
    if isinstance(padding, (list, tuple)) and len(padding) == 2 * nd:
        p = [int(v) for v in padding]
        if all(p[2 * i] == p[2 * i + 1] for i in range(nd)):
            return p[::2], "EXPLICIT"
        return p, "EXPLICIT"
    return _ints(layer, padding, "padding", nd), "EXPLICIT"


def _checked(layer, x, weight, data_format, nd, op_nd, weight_layout):
    """A convolution's float input of op_nd + 2 dims and weight of as many: (channel_last,
    the input's channels)."""
    _require_float(layer, x)
    channel_last = _channel_last(layer, data_format, op_nd)
    if x.ndim != op_nd + 2:
        _fail(layer, f"expects a {nd + 2}-d input, got {x.name} {x.type_string()}")
    if weight.ndim != op_nd + 2:
        _fail(layer, f"weight must be {nd + 2}-d [{weight_layout}, *kernel], got {weight.name} {weight.type_string()}")
    return channel_last, x.shape[-1] if channel_last else x.shape[1]


def add_channel_bias(helper, out, bias, channel_last, nd):
    """out + bias along the channel axis (elementwise_add), as the convolutions add it."""
    if bias is None:
        return out
    res = helper.create_tmp(out.dtype)
    helper.append_op("elementwise_add", {"X": out, "Y": bias}, {"Out": res},
                     {"axis": nd + 1 if channel_last else 1})
    return res


def _as_2d(layer, x, weight, padding, channel_last):
    """A 1-D convolution's input, weight and padding as a 2-D one's over [N, C, 1, L]."""
    pads, algorithm = conv_padding(layer, padding, 1, channel_last)
    pads = [0, 0, *pads] if len(pads) == 2 else [0, *pads]
    return T.unsqueeze(x, [1 if channel_last else 2]), T.unsqueeze(weight, [2]), pads, algorithm


def _conv_nd(layer, x, weight, bias, stride, padding, dilation, groups, data_format, nd, name,
             op_nd=None, paddings=None):
    """Append conv2d/depthwise_conv2d/conv3d of x by weight [out, in/groups, *k], then the bias."""
    op_nd = op_nd or nd
    channel_last, c = _checked(layer, x, weight, data_format, nd, op_nd, "out_channels, in_channels/groups")
    groups = int(groups)
    num_filters = weight.shape[0]
    if groups <= 0 or (c >= 0 and c % groups) or num_filters % groups:
        _fail(layer, f"groups ({groups}) must divide the input channels ({c}) and the filters ({num_filters})",
              AttrError)
    if c >= 0 and weight.shape[1] * groups != c:
        _fail(layer, f"input {x.name} {x.type_string()} has {c} channels but weight {weight.name} "
                     f"{weight.type_string()} expects {weight.shape[1] * groups} (groups={groups})")
    if paddings is None:
        paddings = conv_padding(layer, padding, op_nd, channel_last)
    op_type = f"conv{op_nd}d"
    if op_nd == 2 and c == groups and c != 1 and num_filters % c == 0:
        op_type = "depthwise_conv2d"  # as PaddlePaddle writes it
    helper = LayerHelper(layer, name)
    out = helper.create_tmp(x.dtype)
    helper.append_op(op_type, {"Input": x, "Filter": weight}, {"Output": out},
                     {"strides": _ints(layer, stride, "stride", op_nd),
                      "paddings": paddings[0], "padding_algorithm": paddings[1],
                      "dilations": _ints(layer, dilation, "dilation", op_nd), "groups": groups,
                      "data_format": data_format})
    return add_channel_bias(helper, out, bias, channel_last, op_nd)


def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, data_format="NCHW", name=None):
    """2-D convolution of x by weight [out_channels, in_channels/groups, kh, kw] (op conv2d, or
    depthwise_conv2d when groups == in_channels), plus bias [out_channels].

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([2, 3, 8, 8])                        # [N, C_in, H, W]
        >>> w = paddle.ones([6, 3, 3, 3])                        # [C_out, C_in, kh, kw]
        >>> y = F.conv2d(x, w, padding=1)
        >>> y.shape, float(y[0, 0, 4, 4]), float(y[0, 0, 0, 0])   # 27 ones inside, 12 at a corner
        ([2, 6, 8, 8], 27.0, 12.0)
    """
    return _conv_nd("conv2d", x, weight, bias, stride, padding, dilation, groups, data_format, 2, name)


def conv3d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, data_format="NCDHW", name=None):
    """3-D convolution of x by weight [out_channels, in_channels/groups, kd, kh, kw] (op conv3d).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([1, 2, 4, 4, 4])                     # [N, C_in, D, H, W]
        >>> w = paddle.ones([3, 2, 3, 3, 3])                     # [C_out, C_in, kd, kh, kw]
        >>> y = F.conv3d(x, w)
        >>> y.shape, float(y[0, 0, 0, 0, 0])
        ([1, 3, 2, 2, 2], 54.0)
    """
    return _conv_nd("conv3d", x, weight, bias, stride, padding, dilation, groups, data_format, 3, name)


def conv1d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, data_format="NCL", name=None):
    """1-D convolution of x [N, C, L] (or NLC) by weight [out_channels, in_channels/groups, k]:
    a conv2d over [N, C, 1, L].

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[1.0, 2.0, 3.0, 4.0]]])       # [N, C_in, L]
        >>> w = paddle.to_tensor([[[1.0, 0.0, -1.0]]])           # [C_out, C_in, k]
        >>> print(F.conv1d(x, w).numpy())
        [[[-2. -2.]]]
        >>> F.conv1d(x, w, padding=1).shape
        [1, 1, 4]
    """
    channel_last = _channel_last("conv1d", data_format, 1)
    x2, w2, pads, algorithm = _as_2d("conv1d", x, weight, padding, channel_last)
    out = _conv_nd("conv1d", x2, w2, bias, [1, *_ints("conv1d", stride, "stride", 1)], None,
                   [1, *_ints("conv1d", dilation, "dilation", 1)], groups,
                   "NHWC" if channel_last else "NCHW", 1, name, op_nd=2, paddings=(pads, algorithm))
    return T.squeeze(out, [1 if channel_last else 2])


def _conv_transpose_nd(layer, x, weight, bias, stride, padding, output_padding, groups, dilation, output_size,
                       data_format, nd, name, op_nd=None, paddings=None):
    """Append conv2d_transpose/conv3d_transpose of x by weight [in, out/groups, *k], then the bias."""
    op_nd = op_nd or nd
    channel_last, c = _checked(layer, x, weight, data_format, nd, op_nd, "in_channels, out_channels/groups")
    if c >= 0 and weight.shape[0] != c:
        _fail(layer, f"input {x.name} {x.type_string()} has {c} channels but weight {weight.name} "
                     f"{weight.type_string()} expects {weight.shape[0]}")
    groups = int(groups)
    if groups <= 0 or (c >= 0 and c % groups):
        _fail(layer, f"groups ({groups}) must divide the input channels ({c})", AttrError)
    if paddings is None:
        paddings = conv_padding(layer, padding, op_nd, channel_last)
    out_padding = _ints(layer, output_padding, "output_padding", op_nd)
    if output_size is None:
        out_size = []
    else:
        if any(out_padding):
            _fail(layer, "output_padding and output_size cannot be given together", AttrError)
        out_size = _ints(layer, output_size, "output_size", op_nd)
    helper = LayerHelper(layer, name)
    out = helper.create_tmp(x.dtype)
    helper.append_op(f"conv{op_nd}d_transpose", {"Input": x, "Filter": weight}, {"Output": out},
                     {"output_size": out_size, "output_padding": out_padding if any(out_padding) else [],
                      "strides": _ints(layer, stride, "stride", op_nd), "paddings": paddings[0],
                      "padding_algorithm": paddings[1], "dilations": _ints(layer, dilation, "dilation", op_nd),
                      "groups": groups,
                      # the 3-d op, as PaddlePaddle writes it, names its layout NCHW / NHWC
                      "data_format": "NHWC" if channel_last else "NCHW"})
    return add_channel_bias(helper, out, bias, channel_last, op_nd)


def conv2d_transpose(x, weight, bias=None, stride=1, padding=0, output_padding=0, dilation=1, groups=1,
                     output_size=None, data_format="NCHW", name=None):
    """2-D transposed convolution of x by weight [in_channels, out_channels/groups, kh, kw]
    (op conv2d_transpose); `output_size` or `output_padding` picks among the output sizes a
    stride > 1 allows.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([2, 6, 4, 4])                        # [N, C_in, H, W]
        >>> w = paddle.ones([6, 3, 3, 3])                        # [C_in, C_out, kh, kw]
        >>> F.conv2d_transpose(x, w, stride=2, padding=1, output_padding=1).shape
        [2, 3, 8, 8]
    """
    return _conv_transpose_nd("conv2d_transpose", x, weight, bias, stride, padding, output_padding, groups,
                              dilation, output_size, data_format, 2, name)


def conv3d_transpose(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     output_size=None, data_format="NCDHW", name=None):
    """3-D transposed convolution of x by weight [in_channels, out_channels/groups, kd, kh, kw].

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([1, 2, 2, 2, 2])                     # [N, C_in, D, H, W]
        >>> w = paddle.ones([2, 4, 3, 3, 3])                     # [C_in, C_out, kd, kh, kw]
        >>> F.conv3d_transpose(x, w, stride=2).shape
        [1, 4, 5, 5, 5]
    """
    return _conv_transpose_nd("conv3d_transpose", x, weight, bias, stride, padding, output_padding, groups,
                              dilation, output_size, data_format, 3, name)


def conv1d_transpose(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                     output_size=None, data_format="NCL", name=None):
    """1-D transposed convolution of x [N, C, L] by weight [in_channels, out_channels/groups, k]:
    a conv2d_transpose over [N, C, 1, L].

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[1.0, 2.0]]])                 # [N, C_in, L]
        >>> w = paddle.to_tensor([[[1.0, 1.0, 1.0]]])            # [C_in, C_out, k]
        >>> print(F.conv1d_transpose(x, w, stride=2).numpy())
        [[[1. 1. 3. 2. 2.]]]
    """
    layer = "conv1d_transpose"
    channel_last = _channel_last(layer, data_format, 1)
    x2, w2, pads, algorithm = _as_2d(layer, x, weight, padding, channel_last)
    out = _conv_transpose_nd(layer, x2, w2, bias, [1, *_ints(layer, stride, "stride", 1)], None,
                             [0, *_ints(layer, output_padding, "output_padding", 1)], groups,
                             [1, *_ints(layer, dilation, "dilation", 1)],
                             None if output_size is None else [1, *_ints(layer, output_size, "output_size", 1)],
                             "NHWC" if channel_last else "NCHW", 1, name, op_nd=2, paddings=(pads, algorithm))
    return T.squeeze(out, [1 if channel_last else 2])
