"""Neural-network layers: `pg.nn.fc(...)`, `pg.nn.conv2d(...)`, `pg.nn.batch_norm(...)`, ...

Each layer appends the same ops, with the same attributes and the same parameter and
variable names, as PaddlePaddle's static-graph layers (`paddle.static.nn.*` and the
fluid-era `layers.*`), so a program built here matches one built by PaddlePaddle:
parameters `<layer>_N.w_0` / `.b_0` with their init ops in the startup program,
intermediates `<layer>_N.tmp_K`.

    x = pg.data("x", [-1, 3, 32, 32])
    h = pg.nn.conv2d(x, 16, 3, padding=1, act="relu")
    h = pg.nn.batch_norm(h)
    h = pg.nn.pool2d(h, 2, "max", 2)
    y = pg.nn.fc(h, 10, activation="softmax")

The activations (`relu`, `gelu`, `softmax`, ...) are those of `program.layers.math`,
re-exported here.
"""
from __future__ import annotations

import math
from functools import reduce

from keel.program import callsite, dtypes
from keel.program import initializer as init
from keel.program import initializer  # noqa: F401  (paddle.nn.initializer.Constant, ... as PaddlePaddle spells them)
from keel.program.errors import AttrError, DTypeError, ShapeError
from keel.program.layers.helper import LayerHelper
from keel.program.layers.math import (gelu, hard_swish, leaky_relu, log_softmax, relu, relu6,  # noqa: F401
                                 sigmoid, softmax, swish, tanh)
from keel.program.gradient_clip import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue  # noqa: F401
from keel.program.param_attr import ParamAttr
from keel.proto import pb

__all__ = [
    "fc", "linear", "conv2d", "conv2d_transpose", "pool2d", "adaptive_pool2d", "max_pool2d",
    "avg_pool2d", "adaptive_avg_pool2d", "adaptive_max_pool2d", "batch_norm", "layer_norm",
    "group_norm", "instance_norm", "dropout", "embedding", "softmax_with_cross_entropy",
    "cross_entropy", "sigmoid_cross_entropy_with_logits", "accuracy", "prelu", "interpolate",
    "resize_bilinear", "resize_nearest", "pixel_shuffle",
    # activations, from program.layers.math
    "relu", "relu6", "gelu", "tanh", "sigmoid", "leaky_relu", "hard_swish", "swish", "softmax",
    "log_softmax",
    # gradient clipping (program/gradient_clip.py), as in paddle.nn
    "ClipGradByValue", "ClipGradByNorm", "ClipGradByGlobalNorm",
]


# -- helpers ---------------------------------------------------------------------------------
def _where() -> str | None:
    return callsite.describe(callsite.user_frame_lines())


def _fail(layer: str, message: str, cls=ShapeError):
    """A build-time error of a layer (before any op is appended), naming the user's line."""
    raise cls(message, op_type=layer, callsite=_where())


def _require_float(layer, x):
    if not dtypes.is_floating(x.dtype):
        _fail(layer, f"expects a floating-point input, got {x.name} {x.type_string()}", DTypeError)


def _ints(layer, value, what, n) -> list[int]:
    """`value` (an int, or 1 or n ints) as n ints: strides, kernel sizes, dilations."""
    if isinstance(value, (list, tuple)):
        v = [int(a) for a in value]
        if len(v) == 1:
            v *= n
        if len(v) != n:
            _fail(layer, f"{what} must be an int or {n} ints, got {value!r}", AttrError)
        return v
    return [int(value)] * n


def _pair(layer, value, what) -> list[int]:
    return _ints(layer, value, what, 2)


def _param_dtype(x) -> int:
    """Normalization parameters are float32 for half-precision inputs (as in PaddlePaddle)."""
    return pb.VarType.FP32 if x.dtype in (pb.VarType.FP16, pb.VarType.BF16) else x.dtype


def _padding(layer, padding, data_format, four_ok=True):
    """PaddlePaddle's padding spelling -> (paddings attr, padding_algorithm). An int or a pair
    gives [pad_h, pad_w]; 4 values are [top, bottom, left, right] (collapsed to 2 when
    symmetric); [[0,0],[0,0],[t,b],[l,r]] (NCHW) / [[0,0],[t,b],[l,r],[0,0]] (NHWC) are
    accepted too; "SAME" / "VALID" select the padding algorithm."""
    if isinstance(padding, str):
        algo = padding.upper()
        if algo not in ("SAME", "VALID"):
            _fail(layer, f"unknown padding {padding!r}: use an int, a list, 'SAME' or 'VALID'", AttrError)
        return [0, 0], algo
    if isinstance(padding, (list, tuple)) and len(padding) == 4:
        if isinstance(padding[0], (list, tuple)):
            outer = (0, 1) if data_format == "NCHW" else (0, 3)
            if any(list(padding[i]) != [0, 0] for i in outer):
                _fail(layer, f"non-zero padding {padding!r} on the batch or channel dims", AttrError)
            inner = padding[2:4] if data_format == "NCHW" else padding[1:3]
            padding = [int(p) for pair in inner for p in pair]
        p = [int(v) for v in padding]
        if p[0] == p[1] and p[2] == p[3]:
            return [p[0], p[2]], "EXPLICIT"
        if not four_ok:
            _fail(layer, f"asymmetric padding {padding!r} is not supported here", AttrError)
        return p, "EXPLICIT"
    return _pair(layer, padding, "padding"), "EXPLICIT"


def _check_format(layer, data_format):
    if data_format not in ("NCHW", "NHWC"):
        _fail(layer, f"data_format must be 'NCHW' or 'NHWC', got {data_format!r}", AttrError)


def _add_bias(helper, x, bias_attr, size, axis, dtype):
    """Create `<layer>.b_0` [size] (Constant 0 by default) and add it along `axis`.
    Returns x unchanged when bias_attr is False."""
    b = helper.create_parameter(bias_attr, [size], dtype, init.Constant(0.0), suffix="b")
    if b is None:
        return x
    out = helper.create_tmp(dtype)
    helper.append_op("elementwise_add", {"X": x, "Y": b}, {"Out": out}, {"axis": axis})
    return out


# -- fully connected ---------------------------------------------------------------------------
def fc(x, size, num_flatten_dims=1, weight_attr=None, bias_attr=None, activation=None, name=None):
    """Fully connected layer (paddle.static.nn.fc): `mul` of each input (flattened to 2-d at
    `num_flatten_dims`) with its weight `fc_N.w_K` [prod(dims after num_flatten_dims), size],
    a `sum` when there are several inputs, `elementwise_add` of the bias `fc_N.b_0` [size]
    (axis=num_flatten_dims), then `activation`.

    Examples:
        >>> import keel.program as pg
        >>> with pg.program_guard(pg.Program(), pg.Program()):
        ...     x = pg.data("x", [-1, 3, 8, 8])
        ...     h = pg.nn.fc(x, 16, activation="relu")
        >>> h.shape
        (-1, 16)
    """
    helper = LayerHelper("fc", name)
    inputs = list(x) if isinstance(x, (list, tuple)) else [x]
    if not inputs:
        _fail("fc", "needs at least one input")
    attrs = list(weight_attr) if isinstance(weight_attr, (list, tuple)) else [weight_attr] * len(inputs)
    if len(attrs) != len(inputs):
        _fail("fc", f"got {len(inputs)} inputs but {len(attrs)} weight_attr values", AttrError)
    dtype = inputs[0].dtype
    results = []
    for inp, attr in zip(inputs, attrs):
        _require_float("fc", inp)
        shape = list(inp.shape)
        k = num_flatten_dims if num_flatten_dims != -1 else len(shape) - 1
        if not 1 <= k < len(shape):
            _fail("fc", f"num_flatten_dims {num_flatten_dims} is out of range for input "
                        f"{inp.name} {inp.type_string()}", AttrError)
        tail = shape[k:]
        if any(d < 0 for d in tail):
            _fail("fc", f"the dims of input {inp.name} {inp.type_string()} after num_flatten_dims "
                        f"{k} must be known to size the weight")
        w = helper.create_parameter(attr, [reduce(lambda a, b: a * b, tail, 1), size], dtype)
        out = helper.create_tmp(dtype)
        helper.append_op("mul", {"X": inp, "Y": w}, {"Out": out},
                         {"x_num_col_dims": k, "y_num_col_dims": 1})
        results.append(out)
        num_flatten_dims = k
    if len(results) == 1:
        pre_bias = results[0]
    else:
        pre_bias = helper.create_tmp(dtype)
        helper.append_op("sum", {"X": results}, {"Out": pre_bias})
    pre_act = _add_bias(helper, pre_bias, bias_attr, size, num_flatten_dims, dtype)
    return helper.append_activation(pre_act, activation)


def linear(x, out_features, weight_attr=None, bias_attr=None, name=None):
    """Linear layer building its parameters: `linear_N.w_0` [in_features, out_features] and
    `linear_N.b_0` [out_features], then functional.linear (matmul_v2 + elementwise_add)."""
    helper = LayerHelper("linear", name)
    _require_float("linear", x)
    in_features = x.shape[-1] if x.shape else -1
    if in_features < 0:
        _fail("linear", f"the last dim of input {x.name} {x.type_string()} must be known")
    w = helper.create_parameter(weight_attr, [in_features, out_features], x.dtype)
    b = helper.create_parameter(bias_attr, [out_features], x.dtype, init.Constant(0.0), suffix="b")
    return functional.linear(x, w, b, name=helper.name)


# -- convolution -------------------------------------------------------------------------------
def _channels(layer, x, data_format):
    if x.ndim != 4:
        _fail(layer, f"expects a 4-d input ({data_format}), got {x.name} {x.type_string()}")
    c = x.shape[3] if data_format == "NHWC" else x.shape[1]
    if c < 0:
        _fail(layer, f"the channel dim of input {x.name} {x.type_string()} must be known")
    return c


def conv2d(input, num_filters, filter_size, stride=1, padding=0, dilation=1, groups=1,
           param_attr=None, bias_attr=None, act=None, data_format="NCHW", name=None):
    """2-D convolution (paddle.static.nn.conv2d) building its parameters, then
    functional.conv2d. `padding`: an int, [pad_h, pad_w], [top, bottom, left, right], or
    "SAME"/"VALID". Filter `conv2d_N.w_0` [num_filters, in_channels/groups, kh, kw], default init
    Normal(0, sqrt(2 / (kh*kw*in_channels))); bias `conv2d_N.b_0` [num_filters] added with
    `elementwise_add` (axis 1 for NCHW, 3 for NHWC); then `act`.

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 3, 32, 32])
        ...     y = paddle.static.nn.conv2d(x, num_filters=8, filter_size=3, padding=1, act="relu")
        >>> y.shape
        (-1, 8, 32, 32)
    """
    _check_format("conv2d", data_format)
    _require_float("conv2d", input)
    c = _channels("conv2d", input, data_format)
    groups = 1 if groups is None else int(groups)
    if groups <= 0:
        _fail("conv2d", f"groups must be > 0, got {groups}", AttrError)
    if c % groups:
        _fail("conv2d", f"input channels ({c}) of {input.name} {input.type_string()} must be "
                        f"divisible by groups ({groups})")
    if num_filters % groups:
        _fail("conv2d", f"num_filters ({num_filters}) must be divisible by groups ({groups})")
    helper = LayerHelper("conv2d", name)
    ksize = _pair("conv2d", filter_size, "filter_size")
    fan_in = ksize[0] * ksize[1] * c
    if fan_in <= 0:
        _fail("conv2d", f"filter_size {filter_size!r} gives an empty filter", AttrError)
    w = helper.create_parameter(param_attr, [num_filters, c // groups, *ksize], input.dtype,
                                init.Normal(0.0, math.sqrt(2.0 / fan_in)))
    b = helper.create_parameter(bias_attr, [num_filters], input.dtype, init.Constant(0.0), suffix="b")
    out = functional.conv2d(input, w, b, stride, padding, dilation, groups, data_format, name=helper.name)
    return helper.append_activation(out, act)


def conv2d_transpose(input, num_filters, output_size=None, filter_size=None, padding=0, stride=1,
                     dilation=1, groups=1, param_attr=None, bias_attr=None, act=None,
                     data_format="NCHW", name=None):
    """2-D transposed convolution (paddle.static.nn.conv2d_transpose). Filter
    `conv2d_transpose_N.w_0` [in_channels, num_filters/groups, kh, kw] (XavierUniform by
    default); `filter_size` may be omitted when `output_size` is given.

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 3, 16, 16])
        ...     y = paddle.static.nn.conv2d_transpose(x, num_filters=4, filter_size=4, stride=2, padding=1)
        >>> y.shape
        (-1, 4, 32, 32)
    """
    layer = "conv2d_transpose"
    _check_format(layer, data_format)
    _require_float(layer, input)
    c = _channels(layer, input, data_format)
    groups = 1 if groups is None else int(groups)
    if groups <= 0:
        _fail(layer, f"groups must be > 0, got {groups}", AttrError)
    if num_filters <= 0 or num_filters % groups:
        _fail(layer, f"num_filters ({num_filters}) must be a positive multiple of groups ({groups})")
    helper = LayerHelper(layer, name)
    strides = _pair(layer, stride, "stride")
    dilations = _pair(layer, dilation, "dilation")
    paddings, _ = _padding(layer, padding, data_format)
    pads4 = paddings if len(paddings) == 4 else [paddings[0], paddings[0], paddings[1], paddings[1]]
    out_size = [] if output_size is None else _pair(layer, output_size, "output_size")
    if filter_size is None:
        if not out_size:
            _fail(layer, "needs filter_size or output_size", AttrError)
        hw = input.shape[2:4] if data_format == "NCHW" else input.shape[1:3]
        if any(d < 0 for d in hw):
            _fail(layer, f"filter_size must be given when the spatial dims of {input.name} "
                         f"{input.type_string()} are unknown", AttrError)
        ksize = [(out_size[i] - (hw[i] - 1) * strides[i] + pads4[2 * i] + pads4[2 * i + 1] - 1)
                 // dilations[i] + 1 for i in range(2)]
    else:
        ksize = _pair(layer, filter_size, "filter_size")
    w = helper.create_parameter(param_attr, [c, num_filters // groups, *ksize], input.dtype)
    b = helper.create_parameter(bias_attr, [num_filters], input.dtype, init.Constant(0.0), suffix="b")
    out = functional.conv2d_transpose(input, w, b, strides, padding, dilation=dilations, groups=groups,
                                      output_size=out_size or None, data_format=data_format, name=helper.name)
    return helper.append_activation(out, act)


# -- pooling ----------------------------------------------------------------------------------------
def pool2d(input, pool_size=-1, pool_type="max", pool_stride=1, pool_padding=0, global_pooling=False,
           ceil_mode=False, exclusive=True, data_format="NCHW", name=None):
    """2-D pooling (fluid's layers.pool2d): op `pool2d` with ksize=pool_size,
    strides=pool_stride, paddings (as conv2d's `padding`, "SAME"/"VALID" included)."""
    _check_format("pool2d", data_format)
    if pool_type not in ("max", "avg"):
        _fail("pool2d", f"pool_type must be 'max' or 'avg', got {pool_type!r}", AttrError)
    if not global_pooling and (pool_size == -1 or pool_size is None):
        _fail("pool2d", "pool_size must be given unless global_pooling is True", AttrError)
    if input.ndim != 4:
        _fail("pool2d", f"expects a 4-d input ({data_format}), got {input.name} {input.type_string()}")
    paddings, algorithm = _padding("pool2d", pool_padding, data_format)
    if algorithm == "VALID" and ceil_mode:
        _fail("pool2d", "ceil_mode must be False with padding 'VALID'", AttrError)
    ksize = [1, 1] if global_pooling and pool_size in (None, -1) else _pair("pool2d", pool_size, "pool_size")
    return functional.pooling.pool_nd("pool2d", input, pool_type, ksize, _pair("pool2d", pool_stride, "pool_stride"),
                                      paddings, algorithm, 2, data_format, ceil_mode=ceil_mode, exclusive=exclusive,
                                      global_pooling=global_pooling, name=name)


def adaptive_pool2d(input, pool_size, pool_type="avg", data_format="NCHW", name=None):
    """Adaptive pooling to a fixed output size `pool_size` (fluid's layers.adaptive_pool2d;
    op pool2d with adaptive=True for both pool types, as fluid wrote it)."""
    _check_format("adaptive_pool2d", data_format)
    if pool_type not in ("max", "avg"):
        _fail("adaptive_pool2d", f"pool_type must be 'max' or 'avg', got {pool_type!r}", AttrError)
    return functional.pooling.pool_nd("pool2d", input, pool_type, _pair("adaptive_pool2d", pool_size, "pool_size"),
                                      [1, 1], [0, 0], "EXPLICIT", 2, data_format, adaptive=True, name=name)


# -- normalization ---------------------------------------------------------------------------------
def batch_norm(input, act=None, is_test=False, momentum=0.9, epsilon=1e-5, param_attr=None,
               bias_attr=None, data_layout="NCHW", use_global_stats=False, name=None,
               moving_mean_name=None, moving_variance_name=None):
    """Batch normalization (paddle.static.nn.batch_norm). Parameters `batch_norm_N.w_0` (scale,
    Constant 1), `.b_0` (bias, Constant 0), `.w_1` (running mean, Constant 0) and `.w_2`
    (running variance, Constant 1); the running statistics are not trainable and are
    updated in place (MeanOut/VarianceOut name the same variables).

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 3, 8, 8])
        ...     y = paddle.static.nn.batch_norm(x, act="relu")
        >>> y.shape
        (-1, 3, 8, 8)
    """
    layer = "batch_norm"
    _check_format(layer, data_layout)
    _require_float(layer, input)
    if not 2 <= input.ndim <= 5:
        _fail(layer, f"expects a 2-d to 5-d input, got {input.name} {input.type_string()}")
    c = input.shape[-1] if data_layout == "NHWC" else input.shape[1]
    if c < 0:
        _fail(layer, f"the channel dim of input {input.name} {input.type_string()} must be known")
    if bias_attr is False:
        _fail(layer, "bias_attr cannot be False", AttrError)
    helper = LayerHelper(layer, name)
    dtype = _param_dtype(input)
    scale = helper.create_parameter(param_attr, [c], dtype, init.Constant(1.0))
    bias = helper.create_parameter(bias_attr, [c], dtype, init.Constant(0.0), suffix="b")
    mean = helper.create_parameter(ParamAttr(name=moving_mean_name, initializer=init.Constant(0.0),
                                             trainable=False), [c], dtype)
    variance = helper.create_parameter(ParamAttr(name=moving_variance_name,
                                                 initializer=init.Constant(1.0), trainable=False),
                                       [c], dtype)
    mean.stop_gradient = True
    variance.stop_gradient = True
    y = functional.batch_norm(input, mean, variance, scale, bias, not is_test, momentum, epsilon, data_layout,
                              use_global_stats, name=helper.name)
    return helper.append_activation(y, act)


def layer_norm(input, scale=True, shift=True, begin_norm_axis=1, epsilon=1e-5, param_attr=None,
               bias_attr=None, act=None, name=None):
    """Layer normalization (paddle.static.nn.layer_norm) over the dims from begin_norm_axis
    on; scale `layer_norm_N.w_0` (Constant 1) and shift `.b_0` (Constant 0), each of the
    product of those dims.

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 10, 16])
        ...     y = paddle.static.nn.layer_norm(x, begin_norm_axis=2)
        >>> y.shape
        (-1, 10, 16)
    """
    layer = "layer_norm"
    _require_float(layer, input)
    if not 0 < begin_norm_axis < input.ndim:
        _fail(layer, f"begin_norm_axis {begin_norm_axis} is out of range for input {input.name} "
                     f"{input.type_string()}", AttrError)
    tail = list(input.shape[begin_norm_axis:])
    if (scale or shift) and any(d < 0 for d in tail):
        _fail(layer, f"the dims of input {input.name} {input.type_string()} from begin_norm_axis "
                     f"{begin_norm_axis} on must be known")
    helper = LayerHelper(layer, name)
    dtype = _param_dtype(input)
    size = reduce(lambda a, b: a * b, tail, 1)
    weight = bias = None
    if scale:
        if param_attr is False:
            _fail(layer, "param_attr cannot be False when scale is True", AttrError)
        weight = helper.create_parameter(param_attr, [size], dtype, init.Constant(1.0))
    if shift:
        if bias_attr is False:
            _fail(layer, "bias_attr cannot be False when shift is True", AttrError)
        bias = helper.create_parameter(bias_attr, [size], dtype, init.Constant(0.0), suffix="b")
    y = functional.layer_norm(input, tail, weight, bias, epsilon, name=helper.name)
    return helper.append_activation(y, act)


def group_norm(input, groups, epsilon=1e-5, param_attr=None, bias_attr=None, act=None,
               data_layout="NCHW", name=None):
    """Group normalization (paddle.static.nn.group_norm). Scale `group_norm_N.w_0` (Constant 1)
    and bias `.b_0` (Constant 0) of the channel count; False omits either.

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 8, 4, 4])
        ...     y = paddle.static.nn.group_norm(x, groups=4)
        >>> y.shape
        (-1, 8, 4, 4)
    """
    layer = "group_norm"
    _check_format(layer, data_layout)
    _require_float(layer, input)
    if input.ndim < 2:
        _fail(layer, f"expects an input of at least 2 dims, got {input.name} {input.type_string()}")
    c = input.shape[-1] if data_layout == "NHWC" else input.shape[1]
    if c < 0:
        _fail(layer, f"the channel dim of input {input.name} {input.type_string()} must be known")
    if groups <= 0 or c % groups:
        _fail(layer, f"channels ({c}) of {input.name} {input.type_string()} must be divisible by "
                     f"groups ({groups})")
    helper = LayerHelper(layer, name)
    dtype = _param_dtype(input)
    s = helper.create_parameter(param_attr, [c], dtype, init.Constant(1.0))
    b = helper.create_parameter(bias_attr, [c], dtype, init.Constant(0.0), suffix="b")
    y = functional.group_norm(input, groups, epsilon, s, b, data_layout, name=helper.name)
    return helper.append_activation(y, act)


def instance_norm(input, epsilon=1e-5, param_attr=None, bias_attr=None, name=None):
    """Instance normalization (paddle.static.nn.instance_norm). Scale `instance_norm_N.w_0`
    (Constant 1) and bias `.b_0` (Constant 0) of the channel count; pass False for both to
    omit them.

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 3, 8, 8])
        ...     y = paddle.static.nn.instance_norm(x)
        >>> y.shape
        (-1, 3, 8, 8)
    """
    layer = "instance_norm"
    _require_float(layer, input)
    if not 2 <= input.ndim <= 5:
        _fail(layer, f"expects a 2-d to 5-d input, got {input.name} {input.type_string()}")
    if (param_attr is False) != (bias_attr is False):
        _fail(layer, "param_attr and bias_attr must be False together", AttrError)
    c = input.shape[1]
    helper = LayerHelper(layer, name)
    dtype = _param_dtype(input)
    scale = bias = None
    if param_attr is not False:
        if c < 0:
            _fail(layer, f"the channel dim of input {input.name} {input.type_string()} must be known")
        scale = helper.create_parameter(param_attr, [c], dtype, init.Constant(1.0))
        bias = helper.create_parameter(bias_attr, [c], dtype, init.Constant(0.0), suffix="b")
    return functional.instance_norm(input, weight=scale, bias=bias, eps=epsilon,
                                    data_format=["NC", "NCL", "NCHW", "NCDHW"][input.ndim - 2], name=helper.name)


# -- dropout, embedding ---------------------------------------------------------------------------
def dropout(x, dropout_prob, is_test=False, seed=None, name=None,
            dropout_implementation="downgrade_in_infer"):
    """Dropout (fluid's layers.dropout): op `dropout` with a uint8 Mask output. With a `seed`
    (or a main program whose random_seed is set) it emits fix_seed=True and that seed."""
    return functional.common.dropout_op(x, dropout_prob, is_test, dropout_implementation, seed, name)


def embedding(input, size, is_sparse=False, padding_idx=None, param_attr=None, dtype="float32",
              name=None):
    """Embedding lookup (paddle.static.nn.embedding): op `lookup_table_v2` with the table
    `embedding_N.w_0` of shape `size` = [vocab, dim] (XavierUniform by default). A negative
    padding_idx counts from the end of the vocabulary; None means no padding row (-1).
    `is_sparse` is accepted for compatibility (gradients are dense).

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     ids = paddle.static.data("ids", [None, 5], "int64")
        ...     emb = paddle.static.nn.embedding(ids, size=[100, 16])
        >>> emb.shape
        (-1, 5, 16)
    """
    layer = "embedding"
    if input.dtype not in (pb.VarType.INT32, pb.VarType.INT64):
        _fail(layer, f"ids must be int64 (or int32), got {input.name} {input.type_string()}", DTypeError)
    size = [int(s) for s in size]
    if len(size) != 2 or any(s <= 0 for s in size):
        _fail(layer, f"size must be [vocab_size, embedding_dim], got {size}", AttrError)
    helper = LayerHelper(layer, name)
    w = helper.create_parameter(param_attr, size, dtype)
    return functional.embedding(input, w, padding_idx, name=helper.name)


# -- losses and metrics ----------------------------------------------------------------------------
def softmax_with_cross_entropy(logits, label, soft_label=False, ignore_index=-100,
                               numeric_stable_mode=True, return_softmax=False, axis=-1):
    """Softmax over `axis` then cross entropy (op softmax_with_cross_entropy). Returns the
    loss (the class axis reduced to 1), and the softmax too with return_softmax=True.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> logits = paddle.to_tensor([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]])
        >>> label = paddle.to_tensor([[0], [1]])
        >>> print(F.softmax_with_cross_entropy(logits, label).numpy().round(4))
        [[0.417]
         [0.22 ]]
    """
    loss, softmax = functional.loss.softmax_with_cross_entropy_op(logits, label, soft_label, True, ignore_index,
                                                                  axis, numeric_stable_mode=numeric_stable_mode)
    return (loss, softmax) if return_softmax else loss


def cross_entropy(input, label, soft_label=False, ignore_index=-100):
    """Cross entropy of probabilities `input` (fluid's layers.cross_entropy): op
    `cross_entropy2` for class-id labels, op `cross_entropy` for soft labels."""
    if soft_label:
        helper = LayerHelper("cross_entropy")
        out = helper.create_tmp(input.dtype)
        helper.append_op("cross_entropy", {"X": input, "Label": label}, {"Y": out},
                         {"soft_label": True, "ignore_index": ignore_index})
        return out
    helper = LayerHelper("cross_entropy2")
    out = helper.create_tmp(input.dtype)
    xshape = helper.create_tmp(input.dtype)
    match_x = helper.create_tmp(input.dtype)
    helper.append_op("cross_entropy2", {"X": input, "Label": label},
                     {"Y": out, "MatchX": match_x, "XShape": xshape}, {"ignore_index": ignore_index})
    return out


def sigmoid_cross_entropy_with_logits(x, label, ignore_index=-100, name=None, normalize=False):
    """Elementwise sigmoid cross entropy of logits `x` against `label` in [0, 1]."""
    return functional.loss.sigmoid_cross_entropy_op(x, label, None, ignore_index, normalize, name)


def accuracy(input, label, k=1, correct=None, total=None):
    """Top-k accuracy (paddle.static.accuracy): `top_k_v2` (sorted=False) then `accuracy`.
    Returns the accuracy variable (float32 [1]).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     scores = paddle.static.data("scores", [None, 3], "float32")
        ...     label = paddle.static.data("label", [None, 1], "int64")
        ...     acc = paddle.static.accuracy(scores, label, k=1)
        >>> feed = {"scores": np.array([[0.1, 0.7, 0.2], [0.6, 0.3, 0.1]], "float32"), "label": np.array([[1], [2]])}
        >>> paddle.static.Executor().run(main, feed=feed, fetch_list=[acc])[0]
        array(0.5, dtype=float32)
    """
    helper = LayerHelper("accuracy")
    _require_float("accuracy", input)
    topk_out = helper.create_tmp(input.dtype)
    topk_indices = helper.create_tmp(pb.VarType.INT64)
    helper.append_op("top_k_v2", {"X": input}, {"Out": topk_out, "Indices": topk_indices},
                     {"k": int(k), "sorted": False})
    acc = helper.create_tmp(pb.VarType.FP32)
    if correct is None:
        correct = helper.create_tmp(pb.VarType.INT32)
    if total is None:
        total = helper.create_tmp(pb.VarType.INT32)
    helper.append_op("accuracy", {"Out": topk_out, "Indices": topk_indices, "Label": label},
                     {"Accuracy": acc, "Correct": correct, "Total": total})
    return acc


# -- misc --------------------------------------------------------------------------------------------
def prelu(x, mode, param_attr=None, data_format="NCHW", name=None):
    """Parametric ReLU (paddle.static.nn.prelu). `mode`: 'all' (one alpha, [1]), 'channel'
    ([1, C, 1, 1] or [1, 1, 1, C]) or 'element' ([1, *x.shape[1:]]); alpha `prelu_N.w_0`
    starts at 0.25.

    Examples:
        >>> import keel as paddle
        >>> with paddle.static.program_guard(paddle.static.Program(), paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 3, 8, 8])
        ...     y = paddle.static.nn.prelu(x, mode="channel")     # one slope per channel
        >>> y.shape
        (-1, 3, 8, 8)
    """
    layer = "prelu"
    _require_float(layer, x)
    if mode not in ("all", "channel", "element"):
        _fail(layer, f"mode must be 'all', 'channel' or 'element', got {mode!r}", AttrError)
    shape = [1]
    if mode == "channel":
        formats = ("NC", "NCL", "NCHW", "NCDHW", "NLC", "NHWC", "NDHWC")
        if data_format not in formats:
            _fail(layer, f"data_format must be one of {', '.join(formats)}, got {data_format!r}",
                  AttrError)
        data_format = "NCHW" if data_format[1] == "C" else "NHWC"
        if x.ndim < 2:
            _fail(layer, f"mode 'channel' needs an input of at least 2 dims, got {x.name} "
                         f"{x.type_string()}")
        shape = [1, 1, 1, x.shape[-1]] if data_format == "NHWC" else [1, x.shape[1], 1, 1]
    elif mode == "element":
        shape = [1, *x.shape[1:]]
    if any(d < 0 for d in shape):
        _fail(layer, f"mode {mode!r} needs the dims of input {x.name} {x.type_string()} to be known")
    helper = LayerHelper(layer, name)
    alpha = helper.create_parameter(param_attr, shape, x.dtype, init.Constant(0.25))
    return functional.activation.prelu_op(x, alpha, mode, data_format, helper.name)


def resize_bilinear(input, out_shape=None, scale=None, name=None, align_corners=True, align_mode=1,
                    data_format="NCHW"):
    """Bilinear resize (fluid's layers.resize_bilinear defaults), op bilinear_interp_v2."""
    return functional.interpolate(input, out_shape, None if out_shape is not None else scale, "bilinear",
                                  align_corners, align_mode, data_format, name=name)


def resize_nearest(input, out_shape=None, scale=None, name=None, data_format="NCHW"):
    """Nearest-neighbour resize, op nearest_interp_v2."""
    return functional.interpolate(input, out_shape, None if out_shape is not None else scale, "nearest",
                                  False, 0, data_format, name=name)


# -- paddle.nn.functional (program/nn/functional/): the computations over given tensors; the
# builders above make their parameters and call these. Its pools, resizing and vision
# functions keep their names here too.
from keel.program.nn import functional  # noqa: E402
from keel.program.nn.functional import (adaptive_avg_pool2d, adaptive_avg_pool3d, adaptive_max_pool2d,  # noqa: E402,F401
                                        adaptive_max_pool3d, affine_grid, avg_pool2d, avg_pool3d, grid_sample,
                                        interpolate, max_pool2d, max_pool3d, max_unpool2d, pixel_shuffle)

__all__ += ["avg_pool3d", "max_pool3d", "adaptive_avg_pool3d", "adaptive_max_pool3d", "max_unpool2d",
            "affine_grid", "grid_sample", "functional"]

# recurrent layers and CTC (program/nn/rnn.py)
from keel.program.nn.rnn import (ctc_greedy_decoder, ctc_loss, gru, lstm, rnn, simple_rnn,  # noqa: E402,F401
                            warpctc)

__all__ += ["rnn", "lstm", "gru", "simple_rnn", "warpctc", "ctc_loss", "ctc_greedy_decoder"]

# -- vision builder layers beyond conv2d/pool2d (program/nn/vision.py) ----------------------------
from keel.program.nn.vision import conv3d, conv3d_transpose, deform_conv2d, pool3d  # noqa: E402,F401

__all__ += ["conv3d", "conv3d_transpose", "pool3d", "deform_conv2d"]

# -- layer classes (paddle.nn.Layer and its subclasses), built on the functions above ---------
from keel.program.nn.layer import Layer, LayerParameter  # noqa: E402,F401
from keel.program.nn.layers import *  # noqa: E402,F401,F403
from keel.program.nn.function_layers import *  # noqa: E402,F401,F403
from keel.program.nn.transformer import *  # noqa: E402,F401,F403
from keel.program.nn.rnn_layers import GRU, LSTM, SimpleRNN  # noqa: E402,F401

from keel.program.nn import function_layers as _function_layers, layers as _layers, transformer as _transformer  # noqa: E402,E501
__all__ += ["Layer", "LayerParameter", *_layers.__all__, *_function_layers.__all__, *_transformer.__all__, "LSTM",
            "GRU", "SimpleRNN"]
