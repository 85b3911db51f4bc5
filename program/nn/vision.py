"""Vision builder layers beyond conv2d/pool2d, appending the ops of program/ops/vision.py
as PaddlePaddle's static-graph layers do (paddle.static.nn.conv3d / conv3d_transpose /
deform_conv2d, fluid's pool3d); the functional pools, max_unpool2d, affine_grid and
grid_sample are program/nn/functional's:

    x = pg.data("x", [-1, 1, 8, 16, 16])
    h = pg.nn.conv3d(x, 8, 3, padding=1, act="relu")
    h = pg.nn.pool3d(h, 2, "max", 2)
    theta = pg.nn.fc(feat, 6)                        # a localization net
    grid = pg.nn.affine_grid(pg.reshape(theta, [-1, 2, 3]), [n, c, h, w])
    y = pg.nn.grid_sample(img, grid)
"""
from __future__ import annotations

import math

from keel.program import initializer as init
from keel.program.errors import AttrError
from keel.program.layers.helper import LayerHelper
from keel.program.nn import _fail as _nn_fail, _ints, _pair  # defined before program.nn imports this module
from keel.program.nn import functional as F
from keel.program.nn.functional.conv import add_channel_bias
from keel.program.nn.functional.pooling import pool_nd

_LAYOUTS = ("NCDHW", "NDHWC")


def _fail(layer, message, cls=None):
    _nn_fail(layer, message, cls or AttrError)


def _triple(layer, value, what) -> list[int]:
    return _ints(layer, value, what, 3)


def _padding3d(layer, padding):
    """An int, 3 values (symmetric), 6 values [front, back, top, bottom, left, right], or
    "SAME"/"VALID" -> (paddings attr, padding_algorithm)."""
    if isinstance(padding, str):
        algo = padding.upper()
        if algo not in ("SAME", "VALID"):
            _fail(layer, f"unknown padding {padding!r}: use an int, a list, 'SAME' or 'VALID'")
        return [0, 0, 0], algo
    if isinstance(padding, (list, tuple)) and len(padding) == 6:
        p = [int(v) for v in padding]
        if p[0] == p[1] and p[2] == p[3] and p[4] == p[5]:
            return [p[0], p[2], p[4]], "EXPLICIT"
        return p, "EXPLICIT"
    return _triple(layer, padding, "padding"), "EXPLICIT"


def _channels3d(layer, x, data_format):
    if data_format not in _LAYOUTS:
        _nn_fail(layer, f"data_format must be 'NCDHW' or 'NDHWC', got {data_format!r}", AttrError)
    if x.ndim != 5:
        _nn_fail(layer, f"expects a 5-d input ({data_format}), got {x.name} {x.type_string()}")
    c = x.shape[4] if data_format == "NDHWC" else x.shape[1]
    if c < 0:
        _nn_fail(layer, f"the channel dim of input {x.name} {x.type_string()} must be known")
    return c


# -- 3-D convolution ----------------------------------------------------------------------------
def conv3d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=1, param_attr=None,
           bias_attr=None, act=None, data_format="NCDHW", name=None):
    """3-D convolution (paddle.static.nn.conv3d): Filter `conv3d_N.w_0` [num_filters,
    in_channels/groups, kd, kh, kw], Normal(0, sqrt(2 / fan_in)) by default; bias
    `conv3d_N.b_0` added along the channel axis; then `act`.

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 3, 8, 16, 16])
        ...     y = paddle.static.nn.conv3d(x, num_filters=4, filter_size=3, act="relu")
        >>> y.shape
        (-1, 4, 6, 14, 14)
    """
    layer = "conv3d"
    c = _channels3d(layer, input, data_format)
    groups = int(groups or 1)
    if groups <= 0 or c % groups or num_filters % groups:
        _fail(layer, f"groups ({groups}) must divide the input channels ({c}) and num_filters ({num_filters})")
    helper = LayerHelper(layer, name)
    ksize = _triple(layer, filter_size, "filter_size")
    fan_in = math.prod(ksize) * c // groups
    w = helper.create_parameter(param_attr, [num_filters, c // groups, *ksize], input.dtype,
                                init.Normal(0.0, math.sqrt(2.0 / fan_in)))
    b = helper.create_parameter(bias_attr, [num_filters], input.dtype, init.Constant(0.0), suffix="b")
    out = F.conv3d(input, w, b, stride, padding, dilation, groups, data_format, name=helper.name)
    return helper.append_activation(out, act)


def conv3d_transpose(input, num_filters, output_size=None, filter_size=None, padding=0, stride=1, dilation=1,
                     groups=1, param_attr=None, bias_attr=None, act=None, data_format="NCDHW", name=None):
    """3-D transposed convolution (paddle.static.nn.conv3d_transpose): Filter
    `conv3d_transpose_N.w_0` [in_channels, num_filters/groups, kd, kh, kw]. As PaddlePaddle's
    layer, the op's data_format is written "NCHW" / "NHWC" (what its kernel reads).

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 3, 4, 8, 8])
        ...     y = paddle.static.nn.conv3d_transpose(x, num_filters=2, filter_size=3)
        >>> y.shape
        (-1, 2, 6, 10, 10)
    """
    layer = "conv3d_transpose"
    c = _channels3d(layer, input, data_format)
    groups = int(groups or 1)
    if groups <= 0 or c % groups or num_filters % groups:
        _fail(layer, f"groups ({groups}) must divide the input channels ({c}) and num_filters ({num_filters})")
    helper = LayerHelper(layer, name)
    strides, dilations = _triple(layer, stride, "stride"), _triple(layer, dilation, "dilation")
    paddings, _ = _padding3d(layer, padding)
    out_size = [] if output_size is None else _triple(layer, output_size, "output_size")
    if filter_size is None:
        spatial = input.shape[2:5] if data_format == "NCDHW" else input.shape[1:4]
        if not out_size or any(d < 0 for d in spatial):
            _fail(layer, "needs filter_size, or output_size and known spatial input dims")
        pads = paddings if len(paddings) == 6 else [p for p in paddings for _ in range(2)]
        filter_size = [(out_size[i] - (spatial[i] - 1) * strides[i] + pads[2 * i] + pads[2 * i + 1] - 1)
                       // dilations[i] + 1 for i in range(3)]
    ksize = _triple(layer, filter_size, "filter_size")
    w = helper.create_parameter(param_attr, [c, num_filters // groups, *ksize], input.dtype)
    b = helper.create_parameter(bias_attr, [num_filters], input.dtype, init.Constant(0.0), suffix="b")
    out = F.conv3d_transpose(input, w, b, strides, padding, groups=groups, dilation=dilations,
                             output_size=out_size or None, data_format=data_format, name=helper.name)
    return helper.append_activation(out, act)


# -- 3-D pooling ------------------------------------------------------------------------------------
def pool3d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0, global_pooling=False,
           ceil_mode=False, exclusive=True, data_format="NCDHW", name=None):
    """3-D pooling: op `pool3d` (paddle.nn.functional.max_pool3d / avg_pool3d)."""
    layer = "pool3d"
    _channels3d(layer, input, data_format)
    if pool_type not in ("max", "avg"):
        _fail(layer, f"pool_type must be 'max' or 'avg', got {pool_type!r}")
    if not global_pooling and (pool_size is None or pool_size == -1):
        _fail(layer, "pool_size must be given unless global_pooling is True")
    paddings, algorithm = _padding3d(layer, pool_padding)
    ksize = [1, 1, 1] if global_pooling and pool_size in (None, -1) else _triple(layer, pool_size, "pool_size")
    return pool_nd(layer, input, pool_type, ksize, _triple(layer, pool_stride, "pool_stride"), paddings, algorithm,
                   3, data_format, ceil_mode=ceil_mode, exclusive=exclusive, global_pooling=global_pooling,
                   name=name)


# -- deformable convolution ---------------------------------------------------------------------------------
def deform_conv2d(x, offset, mask, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=1,
                  deformable_groups=1, im2col_step=1, weight_attr=None, bias_attr=None, name=None):
    """paddle.static.nn.deform_conv2d: op deformable_conv (DCNv2) with a Mask, else
    deformable_conv_v1; Filter `deformable_conv_N.w_0` [num_filters, C/groups, kh, kw];
    bias `deformable_conv_N.b_0` added along axis 1.

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 3, 8, 8])
        ...     offset = paddle.static.data("offset", [None, 18, 8, 8])    # 2 * 3 * 3 (dy, dx) per output
        ...     mask = paddle.static.data("mask", [None, 9, 8, 8])
        ...     y = paddle.static.nn.deform_conv2d(x, offset, mask, num_filters=4, filter_size=3, padding=1)
        >>> y.shape
        (-1, 4, 8, 8)
    """
    layer = "deformable_conv"
    c = x.shape[1]
    if x.ndim != 4 or c < 0:
        _fail(layer, f"expects a 4-d NCHW input with known channels, got {x.name} {x.type_string()}")
    groups = int(groups or 1)
    helper = LayerHelper(layer, name)
    ksize = _pair(layer, filter_size, "filter_size")
    fan_in = ksize[0] * ksize[1] * c // groups
    w = helper.create_parameter(weight_attr, [num_filters, c // groups, *ksize], x.dtype,
                                init.Normal(0.0, math.sqrt(2.0 / fan_in)))
    out = helper.create_tmp(x.dtype)
    inputs = {"Input": x, "Offset": offset, "Filter": w}
    if mask is not None:
        inputs["Mask"] = mask
    helper.append_op("deformable_conv" if mask is not None else "deformable_conv_v1", inputs, {"Output": out},
                     {"strides": _pair(layer, stride, "stride"), "paddings": _pair(layer, padding, "padding"),
                      "dilations": _pair(layer, dilation, "dilation"), "groups": groups,
                      "deformable_groups": int(deformable_groups), "im2col_step": int(im2col_step)})
    b = helper.create_parameter(bias_attr, [num_filters], x.dtype, init.Constant(0.0), suffix="b")
    return add_channel_bias(helper, out, b, False, 2)
