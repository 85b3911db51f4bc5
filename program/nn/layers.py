"""PaddlePaddle's `paddle.nn` layer classes, on Keel's static program.

Each layer's `forward` calls the functional layer of the same family (`pg.nn.linear`,
`pg.nn.conv2d`, ...) with its own parameters' names, so the ops, attributes and parameter
layouts are exactly those the functional API (and PaddlePaddle) writes, and a parameter the
program already has is reused rather than made again. Layer names follow PaddlePaddle's
(`linear_0`, `conv2d_0`, `batch_norm2d_0`, ...), and so do parameter names (`.w_0`, `.b_0`;
batch norm's running mean and variance `.w_1`, `.w_2`).
"""
from __future__ import annotations

import math

from keel.program import initializer as init
from keel.program import nn as F
from keel.program.layers import math as M
from keel.program.layers import tensor as T
from keel.program.nn.layer import Layer
from keel.program.param_attr import ParamAttr

__all__ = ["Linear", "Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "GroupNorm", "InstanceNorm2D", "BatchNorm", "BatchNorm1D", "BatchNorm2D", "LayerNorm", "Embedding",
           "Dropout", "MaxPool2D", "AvgPool2D", "AdaptiveAvgPool2D", "AdaptiveMaxPool2D", "Flatten",
           "ReLU", "ReLU6", "GELU", "Sigmoid", "Tanh", "Softmax", "LeakyReLU", "Hardswish",
           "Hardsigmoid", "Silu", "Identity", "Sequential", "LayerList", "LayerDict", "ParameterList",
           "CrossEntropyLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss"]


def _attr(param):
    """The ParamAttr that makes a functional layer use `param` (False for no parameter)."""
    return False if param is None else param.attr


def _pair(value):
    return [int(value)] * 2 if isinstance(value, int) else [int(v) for v in value]


class Linear(Layer):
    """y = x W + b with W [in_features, out_features] (matmul_v2 + elementwise_add).

    Examples:
        >>> import keel as paddle
        >>> linear = paddle.nn.Linear(4, 3)
        >>> with paddle.program_guard(paddle.Program(), paddle.Program()):
        ...     y = linear(paddle.static.data("x", [-1, 4]))
        >>> y.shape, linear.weight.name
        ((-1, 3), 'linear_0.w_0')
    """

    def __init__(self, in_features, out_features, weight_attr=None, bias_attr=None, name=None):
        super().__init__(name)
        self.in_features, self.out_features = int(in_features), int(out_features)
        self.weight = self.create_parameter([self.in_features, self.out_features], weight_attr)
        self.bias = self.create_parameter([self.out_features], bias_attr, is_bias=True)

    def forward(self, x):
        return F.linear(x, self.out_features, weight_attr=_attr(self._parameters["weight"]),
                        bias_attr=_attr(self._parameters.get("bias")), name=self._full_name)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}"


class Conv2D(Layer):
    """2-D convolution; `depthwise_conv2d` when groups == in_channels, as PaddlePaddle writes.
    Weight [out_channels, in_channels/groups, kh, kw], Normal(0, sqrt(2 / (kh*kw*in_channels))).

    Examples:
        >>> import keel as paddle
        >>> conv = paddle.nn.Conv2D(3, 8, kernel_size=3, stride=2, padding=1)
        >>> with paddle.program_guard(paddle.Program(), paddle.Program()):
        ...     y = conv(paddle.static.data("image", [-1, 3, 32, 32]))
        >>> y.shape
        (-1, 8, 16, 16)
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCHW"):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f"Conv2D: padding_mode {padding_mode!r} is not supported; pad the input "
                             f"(pg.pad) and use padding_mode='zeros'")
        if in_channels % groups:
            raise ValueError(f"Conv2D: in_channels {in_channels} is not divisible by groups {groups}")
        self._config = dict(num_filters=int(out_channels), filter_size=_pair(kernel_size), stride=stride,
                            padding=padding, dilation=dilation, groups=int(groups), data_format=data_format)
        kh, kw = self._config["filter_size"]
        std = math.sqrt(2.0 / (kh * kw * in_channels))
        self.weight = self.create_parameter([out_channels, in_channels // groups, kh, kw], weight_attr,
                                            default_initializer=init.Normal(0.0, std))
        self.bias = self.create_parameter([out_channels], bias_attr, is_bias=True)

    def forward(self, x):
        return F.conv2d(x, param_attr=_attr(self._parameters["weight"]),
                        bias_attr=_attr(self._parameters.get("bias")), name=self._full_name, **self._config)


class Conv1D(Layer):
    """1-D convolution of [N, C, L] (NCL) input, as PaddlePaddle builds it: unsqueeze to
    [N, C, 1, L], conv2d with a [out, in/groups, 1, k] filter, squeeze back.

    Examples:
        >>> import keel as paddle
        >>> conv = paddle.nn.Conv1D(3, 8, kernel_size=3, padding=1)
        >>> x = paddle.rand([2, 3, 16])            # [batch, channels, length]
        >>> conv(x).shape
        [2, 8, 16]
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCL"):
        super().__init__()
        if data_format != "NCL" or padding_mode != "zeros":
            raise ValueError("Conv1D: only data_format='NCL' and padding_mode='zeros' are supported")
        k = int(kernel_size if isinstance(kernel_size, int) else kernel_size[0])
        single = lambda v: int(v if isinstance(v, int) else v[0])  # noqa: E731
        self._conv = Conv2D(in_channels, out_channels, (1, k), (1, single(stride)), (0, single(padding)),
                            (1, single(dilation)), groups, weight_attr=weight_attr, bias_attr=bias_attr)

    def forward(self, x):
        return T.squeeze(self._conv(T.unsqueeze(x, [2])), [2])


class Conv3D(Layer):
    """3-D convolution; weight [out_channels, in_channels/groups, kd, kh, kw],
    Normal(0, sqrt(2 / (kd*kh*kw*in_channels))).

    Examples:
        >>> import keel as paddle
        >>> conv = paddle.nn.Conv3D(4, 6, kernel_size=3)
        >>> x = paddle.rand([2, 4, 8, 8, 8])       # [batch, channels, depth, height, width]
        >>> conv(x).shape
        [2, 6, 6, 6, 6]
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCDHW"):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f"Conv3D: padding_mode {padding_mode!r} is not supported")
        k = [int(kernel_size)] * 3 if isinstance(kernel_size, int) else [int(v) for v in kernel_size]
        self._config = dict(num_filters=int(out_channels), filter_size=k, stride=stride, padding=padding,
                            dilation=dilation, groups=int(groups), data_format=data_format)
        std = math.sqrt(2.0 / (math.prod(k) * in_channels))
        self.weight = self.create_parameter([out_channels, in_channels // groups, *k], weight_attr,
                                            default_initializer=init.Normal(0.0, std))
        self.bias = self.create_parameter([out_channels], bias_attr, is_bias=True)

    def forward(self, x):
        return F.conv3d(x, param_attr=_attr(self._parameters["weight"]), bias_attr=_attr(self._parameters.get("bias")),
                      name=self._full_name, **self._config)


class Conv2DTranspose(Layer):
    """2-D transposed convolution; weight [in_channels, out_channels/groups, kh, kw].

    Examples:
        >>> import keel as paddle
        >>> deconv = paddle.nn.Conv2DTranspose(4, 6, kernel_size=3, stride=2)
        >>> x = paddle.rand([1, 4, 8, 8])
        >>> deconv(x).shape                       # (8 - 1) * 2 + 3 = 17
        [1, 6, 17, 17]
    """

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 dilation=1, weight_attr=None, bias_attr=None, data_format="NCHW"):
        super().__init__()
        if output_padding:
            raise ValueError("Conv2DTranspose: output_padding is not supported; give output_size in forward")
        self._config = dict(num_filters=int(out_channels), filter_size=_pair(kernel_size), stride=stride,
                            padding=padding, dilation=dilation, groups=int(groups), data_format=data_format)
        self.weight = self.create_parameter([in_channels, out_channels // groups, *_pair(kernel_size)], weight_attr)
        self.bias = self.create_parameter([out_channels], bias_attr, is_bias=True)

    def forward(self, x, output_size=None):
        return F.conv2d_transpose(x, output_size=output_size, param_attr=_attr(self._parameters["weight"]),
                                  bias_attr=_attr(self._parameters.get("bias")), name=self._full_name,
                                  **self._config)


class GroupNorm(Layer):
    """Group normalization: the channels split into `num_groups` groups, each normalized
    over its channels and spatial positions; weight Constant(1), bias Constant(0).

    Examples:
        >>> import keel as paddle
        >>> norm = paddle.nn.GroupNorm(num_groups=2, num_channels=4)
        >>> x = paddle.rand([2, 4, 3, 3])
        >>> y = norm(x)
        >>> y.shape
        [2, 4, 3, 3]
        >>> groups = y.numpy().reshape(2, 2, -1)   # each group has mean 0 and variance 1
        >>> bool(abs(groups.mean(-1)).max() < 1e-5), bool(abs(groups.var(-1) - 1).max() < 1e-3)
        (True, True)
    """
    def __init__(self, num_groups, num_channels, epsilon=1e-5, weight_attr=None, bias_attr=None,
                 data_format="NCHW", name=None):
        super().__init__(name)
        self._groups, self._epsilon, self._format = int(num_groups), float(epsilon), data_format
        self.weight = self.create_parameter([num_channels], weight_attr, default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([num_channels], bias_attr, is_bias=True)

    def forward(self, x):
        return F.group_norm(x, self._groups, self._epsilon, param_attr=_attr(self._parameters.get("weight")),
                            bias_attr=_attr(self._parameters.get("bias")), data_layout=self._format,
                            name=self._full_name)


class InstanceNorm2D(Layer):
    """Instance normalization: each sample's channel normalized over its spatial positions;
    scale Constant(1), bias Constant(0).

    Examples:
        >>> import keel as paddle
        >>> norm = paddle.nn.InstanceNorm2D(3)
        >>> y = norm(paddle.rand([2, 3, 4, 4]))
        >>> y.shape
        [2, 3, 4, 4]
        >>> bool(abs(y.numpy().mean(axis=(2, 3))).max() < 1e-5)
        True
    """
    def __init__(self, num_features, epsilon=1e-5, momentum=0.9, weight_attr=None, bias_attr=None,
                 data_format="NCHW", name=None):
        super().__init__(name)
        if data_format != "NCHW":
            raise ValueError("InstanceNorm2D: only data_format='NCHW' is supported")
        self._epsilon = float(epsilon)
        self.scale = self.create_parameter([num_features], weight_attr, default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([num_features], bias_attr, is_bias=True)

    def forward(self, x):
        return F.instance_norm(x, self._epsilon, param_attr=_attr(self._parameters.get("scale")),
                               bias_attr=_attr(self._parameters.get("bias")), name=self._full_name)


class BatchNorm(Layer):
    """Batch normalization over the channel dim; running statistics in `_mean`/`_variance`
    (updated in training mode, used in eval mode).

    Examples:
        >>> import keel as paddle
        >>> bn = paddle.nn.BatchNorm(3)
        >>> x = paddle.rand([4, 3, 2, 2])
        >>> y = bn(x)                              # training mode: the batch's statistics
        >>> bool(abs(y.numpy().mean(axis=(0, 2, 3))).max() < 1e-5)
        True
        >>> bn.eval()                              # eval mode: the running statistics
        BatchNorm()
        >>> bn(x).shape
        [4, 3, 2, 2]
    """

    def __init__(self, num_features, momentum=0.9, epsilon=1e-5, weight_attr=None, bias_attr=None,
                 data_format="NCHW", use_global_stats=None, name=None):
        super().__init__(name)
        self._momentum, self._epsilon = float(momentum), float(epsilon)
        self._data_format = "NHWC" if data_format in ("NHWC", "NLC", "NDHWC") else "NCHW"
        self._use_global_stats = use_global_stats
        self.weight = self.create_parameter([num_features], weight_attr, default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([num_features], bias_attr, is_bias=True)
        self._mean = self.create_parameter([num_features], ParamAttr(initializer=init.Constant(0.0),
                                                                    trainable=False))
        self._variance = self.create_parameter([num_features], ParamAttr(initializer=init.Constant(1.0),
                                                                        trainable=False))

    def forward(self, x):
        return F.batch_norm(x, is_test=not self.training, momentum=self._momentum, epsilon=self._epsilon,
                            param_attr=_attr(self._parameters["weight"]),
                            bias_attr=_attr(self._parameters["bias"]),
                            data_layout=self._data_format, use_global_stats=bool(self._use_global_stats),
                            name=self._full_name, moving_mean_name=self._parameters["_mean"].name,
                            moving_variance_name=self._parameters["_variance"].name)


class BatchNorm1D(BatchNorm):
    """Batch normalization of [N, C] or [N, C, L] input over the channel dim C.

    Examples:
        >>> import keel as paddle
        >>> bn = paddle.nn.BatchNorm1D(1)
        >>> x = paddle.rand([2, 1, 3])
        >>> bn(x).shape
        [2, 1, 3]
    """
    pass


class BatchNorm2D(BatchNorm):
    """Batch normalization of [N, C, H, W] input over the channel dim C.

    Examples:
        >>> import keel as paddle
        >>> bn = paddle.nn.BatchNorm2D(1)
        >>> x = paddle.rand([2, 1, 2, 3])
        >>> bn(x).shape
        [2, 1, 2, 3]
    """
    pass


class LayerNorm(Layer):
    """Normalizes over the trailing `normalized_shape` dims; weight Constant(1), bias Constant(0).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([2, 2, 2, 3])
        >>> norm = paddle.nn.LayerNorm(x.shape[1:])
        >>> y = norm(x)
        >>> y.shape
        [2, 2, 2, 3]
        >>> bool(abs(y.numpy().reshape(2, -1).mean(-1)).max() < 1e-5)
        True
    """

    def __init__(self, normalized_shape, epsilon=1e-5, weight_attr=None, bias_attr=None, name=None):
        super().__init__(name)
        self._shape = [int(normalized_shape)] if isinstance(normalized_shape, int) else list(normalized_shape)
        self._epsilon = float(epsilon)
        size = math.prod(self._shape)
        self.weight = self.create_parameter([size], weight_attr, default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([size], bias_attr, is_bias=True)

    def forward(self, x):
        weight, bias = self._parameters.get("weight"), self._parameters.get("bias")
        return F.layer_norm(x, scale=weight is not None, shift=bias is not None,
                            begin_norm_axis=x.ndim - len(self._shape), epsilon=self._epsilon,
                            param_attr=_attr(weight) if weight is not None else None,
                            bias_attr=_attr(bias) if bias is not None else None, name=self._full_name)


class Embedding(Layer):
    """Lookup table [num_embeddings, embedding_dim] (lookup_table_v2).

    Examples:
        >>> import keel as paddle
        >>> embedding = paddle.nn.Embedding(10, 3, padding_idx=0)
        >>> ids = paddle.to_tensor([[0, 2], [5, 9]])
        >>> out = embedding(ids)
        >>> out.shape
        [2, 2, 3]
        >>> bool((out.numpy()[0, 0] == 0).all())  # the padding id reads zeros
        True
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, sparse=False, weight_attr=None,
                 name=None):
        super().__init__(name)
        self._size = [int(num_embeddings), int(embedding_dim)]
        self._padding_idx = padding_idx
        self.weight = self.create_parameter(self._size, weight_attr)

    def forward(self, x):
        return F.embedding(x, self._size, padding_idx=self._padding_idx,
                           param_attr=_attr(self._parameters["weight"]), name=self._full_name)


class Dropout(Layer):
    """Dropout with probability p (upscale_in_train by default, as paddle.nn.Dropout);
    off in eval mode.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> paddle.seed(2023)
        >>> m = paddle.nn.Dropout(p=0.5)
        >>> x = paddle.ones([4, 5])
        >>> y = m(x)                               # kept values are scaled by 1 / (1 - p)
        >>> sorted(set(np.unique(y.numpy())) - {0.0, 2.0})
        []
        >>> m.eval()
        Dropout()
        >>> print(m(x).numpy().min(), m(x).numpy().max())
        1.0 1.0
    """

    def __init__(self, p=0.5, axis=None, mode="upscale_in_train", name=None):
        super().__init__(name)
        if axis is not None:
            raise ValueError("Dropout: axis is not supported (whole-tensor dropout only)")
        self.p, self.mode = float(p), mode

    def forward(self, x):
        return F.dropout(x, self.p, is_test=not self.training, dropout_implementation=self.mode)


class _Pool(Layer):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, data_format="NCHW", **extra):
        super().__init__()
        self._args = dict(kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode,
                          data_format=data_format, **extra)


class MaxPool2D(_Pool):
    """2-D max pooling (`pool2d`, pooling_type max) over [N, C, H, W] input.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.reshape(paddle.arange(16, dtype="float32"), [1, 1, 4, 4])
        >>> pool = paddle.nn.MaxPool2D(kernel_size=2, stride=2)
        >>> print(pool(x).numpy())
        [[[[ 5.  7.]
           [13. 15.]]]]
    """
    def forward(self, x):
        return F.max_pool2d(x, **self._args)


class AvgPool2D(_Pool):
    """2-D average pooling (`pool2d`, pooling_type avg); `exclusive` leaves padding out of
    the count.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.reshape(paddle.arange(16, dtype="float32"), [1, 1, 4, 4])
        >>> pool = paddle.nn.AvgPool2D(kernel_size=2, stride=2)
        >>> print(pool(x).numpy())
        [[[[ 2.5  4.5]
           [10.5 12.5]]]]
    """
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True,
                 data_format="NCHW"):
        super().__init__(kernel_size, stride, padding, ceil_mode, data_format, exclusive=exclusive)

    def forward(self, x):
        return F.avg_pool2d(x, **self._args)


class AdaptiveAvgPool2D(Layer):
    """Average pooling to a fixed output size: the windows are chosen so that
    [H, W] becomes `output_size`.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.reshape(paddle.arange(16, dtype="float32"), [1, 1, 4, 4])
        >>> print(paddle.nn.AdaptiveAvgPool2D(output_size=1)(x).numpy())
        [[[[7.5]]]]
        >>> paddle.nn.AdaptiveAvgPool2D(output_size=(2, 3))(x).shape
        [1, 1, 2, 3]
    """
    def __init__(self, output_size, data_format="NCHW", name=None):
        super().__init__(name)
        self._output_size, self._data_format = output_size, data_format

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self._output_size, data_format=self._data_format)


class AdaptiveMaxPool2D(Layer):
    """Max pooling to a fixed output size.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.reshape(paddle.arange(16, dtype="float32"), [1, 1, 4, 4])
        >>> print(paddle.nn.AdaptiveMaxPool2D(output_size=2)(x).numpy())
        [[[[ 5.  7.]
           [13. 15.]]]]
    """
    def __init__(self, output_size, return_mask=False, name=None):
        super().__init__(name)
        if return_mask:
            raise ValueError("AdaptiveMaxPool2D: return_mask is not supported")
        self._output_size = output_size

    def forward(self, x):
        return F.adaptive_max_pool2d(x, self._output_size)


class Flatten(Layer):
    """Flattens the dims `start_axis`..`stop_axis` into one.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([2, 3, 4, 5])
        >>> paddle.nn.Flatten()(x).shape
        [2, 60]
        >>> paddle.nn.Flatten(start_axis=0, stop_axis=1)(x).shape
        [6, 4, 5]
    """
    def __init__(self, start_axis=1, stop_axis=-1):
        super().__init__()
        self.start_axis, self.stop_axis = start_axis, stop_axis

    def forward(self, x):
        return T.flatten(x, self.start_axis, self.stop_axis)


class _Activation(Layer):
    """A layer applying one activation function with fixed keyword arguments."""
    _fn = None

    def __init__(self, name=None, **kwargs):
        super().__init__(name)
        self._kwargs = kwargs

    def forward(self, x):
        return type(self)._fn(x, **self._kwargs)


def _activation(cls_name, fn, examples, **defaults):
    """A Layer class applying `fn`; `examples` (doctest lines) become its docstring's
    Examples section, so each generated class documents itself like a written one."""
    def __init__(self, *args, name=None, **kwargs):
        values = dict(defaults)
        values.update(zip(defaults, args))
        values.update(kwargs)
        _Activation.__init__(self, name, **values)
    body = "\n".join("        " + line if line.strip() else "" for line in examples.strip("\n").split("\n"))
    doc = f"paddle.nn.{cls_name}: applies `{fn.__name__}` elementwise.\n\n    Examples:\n{body}\n    "
    return type(cls_name, (_Activation,), {"_fn": staticmethod(fn), "__init__": __init__, "__doc__": doc})


ReLU = _activation("ReLU", M.relu, """
>>> import keel as paddle
>>> relu = paddle.nn.ReLU()
>>> print(relu(paddle.to_tensor([-2.0, 0.0, 1.0])).numpy())
[0. 0. 1.]
""")
ReLU6 = _activation("ReLU6", M.relu6, """
>>> import keel as paddle
>>> relu6 = paddle.nn.ReLU6()
>>> print(relu6(paddle.to_tensor([-1.0, 0.5, 6.5])).numpy())
[0.  0.5 6. ]
""")
GELU = _activation("GELU", M.gelu, """
>>> import keel as paddle
>>> x = paddle.to_tensor([[-1.0, 0.5], [1.0, 1.5]])
>>> print(paddle.nn.GELU()(x).numpy().round(4))
[[-0.1587  0.3457]
 [ 0.8413  1.3998]]
>>> print(paddle.nn.GELU(approximate=True)(x).numpy().round(4))   # the tanh approximation
[[-0.1588  0.3457]
 [ 0.8412  1.3996]]
""", approximate=False)
Sigmoid = _activation("Sigmoid", M.sigmoid, """
>>> import keel as paddle
>>> sigmoid = paddle.nn.Sigmoid()
>>> print(sigmoid(paddle.to_tensor([-1.0, 0.0, 1.0])).numpy().round(4))
[0.2689 0.5    0.7311]
""")
Tanh = _activation("Tanh", M.tanh, """
>>> import keel as paddle
>>> tanh = paddle.nn.Tanh()
>>> print(tanh(paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])).numpy().round(4))
[-0.3799 -0.1974  0.0997  0.2913]
""")
Softmax = _activation("Softmax", M.softmax, """
>>> import keel as paddle
>>> softmax = paddle.nn.Softmax(axis=-1)
>>> y = softmax(paddle.to_tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]]))
>>> print(y.numpy().round(4))
[[0.09   0.2447 0.6652]
 [0.3333 0.3333 0.3333]]
""", axis=-1)
LeakyReLU = _activation("LeakyReLU", M.leaky_relu, """
>>> import keel as paddle
>>> leaky = paddle.nn.LeakyReLU(negative_slope=0.1)
>>> print(leaky(paddle.to_tensor([-2.0, 0.0, 1.0])).numpy())
[-0.2  0.   1. ]
""", negative_slope=0.01)
Hardswish = _activation("Hardswish", M.hard_swish, """
>>> import keel as paddle
>>> hardswish = paddle.nn.Hardswish()
>>> print(hardswish(paddle.to_tensor([-2.0, 5.0, 1.0])).numpy().round(4))   # x * relu6(x + 3) / 6
[-0.3333  5.      0.6667]
""")
Hardsigmoid = _activation("Hardsigmoid", M.hard_sigmoid, """
>>> import keel as paddle
>>> hardsigmoid = paddle.nn.Hardsigmoid()     # clip(x / 6 + 0.5, 0, 1)
>>> print(hardsigmoid(paddle.to_tensor([-4.0, 5.0, 1.0])).numpy().round(4))
[0.     1.     0.6667]
""")
Silu = _activation("Silu", M.silu, """
>>> import keel as paddle
>>> silu = paddle.nn.Silu()
>>> print(silu(paddle.to_tensor([1.0, 2.0, 3.0, 4.0])).numpy().round(4))
[0.7311 1.7616 2.8577 3.9281]
""")


class Identity(Layer):
    """Returns its input unchanged (a placeholder where a layer is optional).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0]])
        >>> print(paddle.nn.Identity()(x).numpy())
        [[1. 2.]]
    """
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Sequential(Layer):
    """Calls its layers in order: Sequential(a, b, c) or Sequential(("name", a), ...).

    Examples:
        >>> import keel as paddle
        >>> model = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.ReLU(), paddle.nn.Linear(8, 2))
        >>> model(paddle.rand([3, 4])).shape
        [3, 2]
        >>> len(model), type(model[1]).__name__
        (3, 'ReLU')
        >>> named = paddle.nn.Sequential(("fc", paddle.nn.Linear(4, 2)), ("act", paddle.nn.Tanh()))
        >>> [name for name, _ in named.named_children()]
        ['fc', 'act']
    """

    def __init__(self, *layers):
        super().__init__()
        if len(layers) == 1 and isinstance(layers[0], dict):
            layers = tuple(layers[0].items())
        for i, item in enumerate(layers):
            name, layer = item if isinstance(item, tuple) else (str(i), item)
            self.add_sublayer(name, layer)

    def __getitem__(self, index):
        layers = list(self._sub_layers.values())
        return Sequential(*layers[index]) if isinstance(index, slice) else layers[index]

    def __len__(self):
        return len(self._sub_layers)

    def forward(self, x):
        for layer in self._sub_layers.values():
            x = layer(x)
        return x


class LayerList(Layer):
    """A list of layers whose parameters belong to the owner.

    Examples:
        >>> import keel as paddle
        >>> layers = paddle.nn.LayerList([paddle.nn.Linear(4, 4) for _ in range(3)])
        >>> x = paddle.rand([2, 4])
        >>> for layer in layers:
        ...     x = layer(x)
        >>> x.shape, len(layers)
        ([2, 4], 3)
        >>> owner = paddle.nn.Layer()
        >>> owner.blocks = layers
        >>> len(owner.parameters())               # 3 weights and 3 biases
        6
    """

    def __init__(self, sublayers=None):
        super().__init__()
        for layer in sublayers or ():
            self.append(layer)

    def append(self, layer):
        self.add_sublayer(str(len(self._sub_layers)), layer)
        return self

    def extend(self, layers):
        for layer in layers:
            self.append(layer)
        return self

    def __getitem__(self, index):
        layers = list(self._sub_layers.values())
        return LayerList(layers[index]) if isinstance(index, slice) else layers[index]

    def __len__(self):
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._sub_layers.values())


class LayerDict(Layer):
    """A dict of layers whose parameters belong to the owner.

    Examples:
        >>> import keel as paddle
        >>> layers = paddle.nn.LayerDict({"conv": paddle.nn.Conv2D(1, 2, 3), "act": paddle.nn.ReLU()})
        >>> layers["pool"] = paddle.nn.MaxPool2D(2, 2)
        >>> list(layers.keys()), "conv" in layers
        (['conv', 'act', 'pool'], True)
        >>> x = paddle.rand([1, 1, 6, 6])
        >>> for name, layer in layers.items():
        ...     x = layer(x)
        >>> x.shape
        [1, 2, 2, 2]
    """

    def __init__(self, sublayers=None):
        super().__init__()
        for key, layer in (sublayers.items() if isinstance(sublayers, dict) else sublayers or ()):
            self.add_sublayer(key, layer)

    def __getitem__(self, key):
        return self._sub_layers[key]

    def __setitem__(self, key, layer):
        self.add_sublayer(key, layer)

    def __contains__(self, key):
        return key in self._sub_layers

    def __len__(self):
        return len(self._sub_layers)

    def __iter__(self):
        return iter(self._sub_layers)

    def keys(self):
        return self._sub_layers.keys()

    def values(self):
        return self._sub_layers.values()

    def items(self):
        return self._sub_layers.items()


class ParameterList(Layer):
    """A list of parameters that belong to the owner (named "0", "1", ... in its state dict).

    Examples:
        >>> import keel as paddle
        >>> class Stacked(paddle.nn.Layer):
        ...     def __init__(self, num_stacked_param):
        ...         super().__init__()
        ...         self.params = paddle.nn.ParameterList(
        ...             [self.create_parameter([2, 2]) for _ in range(num_stacked_param)])
        ...     def forward(self, x):
        ...         for p in self.params:
        ...             x = paddle.matmul(x, p)
        ...         return x
        >>> layer = Stacked(3)
        >>> len(layer.parameters()), layer(paddle.ones([4, 2])).shape
        (3, [4, 2])
        >>> _ = layer.params.append(layer.create_parameter([2, 3]))
        >>> len(layer.params), layer(paddle.ones([4, 2])).shape
        (4, [4, 3])
        >>> list(layer.state_dict())
        ['params.0', 'params.1', 'params.2', 'params.3']
    """

    def __init__(self, parameters=None):
        super().__init__()
        for parameter in parameters or ():
            self.append(parameter)

    def append(self, parameter):
        self.add_parameter(str(len(self._parameters)), parameter)
        return self

    def __getitem__(self, index):       # as attribute access: the Parameter of the program being built
        params = list(self._parameters.values())[index]
        return [p.in_mode() for p in params] if isinstance(index, slice) else params.in_mode()

    def __setitem__(self, index, parameter):
        if not -len(self) <= index < len(self):
            raise IndexError(f"ParameterList: index {index} out of range for {len(self)} parameters")
        self.add_parameter(str(index % len(self)), parameter)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter([p.in_mode() for p in self._parameters.values()])


# -- losses ------------------------------------------------------------------------------------
def _reduce(loss, reduction: str, layer: str):
    if reduction == "mean":
        return M.mean(loss)
    if reduction == "sum":
        return M.reduce_sum(loss)
    if reduction == "none":
        return loss
    raise ValueError(f"{layer}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


class CrossEntropyLoss(Layer):
    """Softmax cross entropy of logits and integer labels ([N, 1] or soft labels); the mean
    is over the samples whose label is not `ignore_index` (PaddlePaddle's rule).

    Examples:
        >>> import keel as paddle
        >>> logits = paddle.to_tensor([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]])
        >>> labels = paddle.to_tensor([[0], [1]])
        >>> loss = paddle.nn.CrossEntropyLoss()(logits, labels)
        >>> round(float(loss), 4)
        0.3185
        >>> paddle.nn.CrossEntropyLoss(reduction="none")(logits, labels).shape
        [2, 1]
    """

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", soft_label=False, axis=-1,
                 use_softmax=True, name=None):
        super().__init__(name)
        if weight is not None or not use_softmax:
            raise ValueError("CrossEntropyLoss: class weights and use_softmax=False are not supported")
        self.ignore_index, self.reduction = int(ignore_index), reduction
        self.soft_label, self.axis = bool(soft_label), int(axis)

    def forward(self, input, label):
        loss = F.softmax_with_cross_entropy(input, label, soft_label=self.soft_label,
                                            ignore_index=self.ignore_index, axis=self.axis)
        if self.reduction != "mean" or self.soft_label:
            return _reduce(loss, self.reduction, "CrossEntropyLoss")
        valid = M.cast(M.not_equal(label, T.full_like(label, self.ignore_index)), loss.dtype)
        return M.divide(M.reduce_sum(loss), M.maximum(M.reduce_sum(valid), T.full([], 1.0, loss.dtype)))


class MSELoss(Layer):
    """Mean squared error: reduction (mean, sum or none) of (input - label) ** 2.

    Examples:
        >>> import keel as paddle
        >>> mse = paddle.nn.MSELoss()
        >>> loss = mse(paddle.to_tensor([1.0, 2.0, 3.0]), paddle.to_tensor([1.5, 2.0, 2.0]))
        >>> round(float(loss), 4)                 # (0.25 + 0 + 1) / 3
        0.4167
    """
    def __init__(self, reduction="mean"):
        super().__init__()
        self.reduction = reduction

    def forward(self, input, label):
        return _reduce(M.square(M.subtract(input, label)), self.reduction, "MSELoss")


class L1Loss(Layer):
    """Mean absolute error: reduction (mean, sum or none) of |input - label|.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.5, 0.8], [0.2, 1.3]])
        >>> label = paddle.to_tensor([[1.7, 1.0], [0.4, 0.5]])
        >>> round(float(paddle.nn.L1Loss()(x, label)), 4)
        0.35
        >>> round(float(paddle.nn.L1Loss(reduction="sum")(x, label)), 4)
        1.4
        >>> print(paddle.nn.L1Loss(reduction="none")(x, label).numpy().round(4))
        [[0.2 0.2]
         [0.2 0.8]]
    """
    def __init__(self, reduction="mean", name=None):
        super().__init__(name)
        self.reduction = reduction

    def forward(self, input, label):
        return _reduce(M.abs(M.subtract(input, label)), self.reduction, "L1Loss")


class BCEWithLogitsLoss(Layer):
    """Binary cross entropy of sigmoid(logit) and label, computed stably from the logits.

    Examples:
        >>> import keel as paddle
        >>> logit = paddle.to_tensor([5.0, 1.0, 3.0])
        >>> label = paddle.to_tensor([1.0, 0.0, 1.0])
        >>> round(float(paddle.nn.BCEWithLogitsLoss()(logit, label)), 4)
        0.4562
    """
    def __init__(self, weight=None, reduction="mean", pos_weight=None, name=None):
        super().__init__(name)
        if weight is not None or pos_weight is not None:
            raise ValueError("BCEWithLogitsLoss: weight and pos_weight are not supported")
        self.reduction = reduction

    def forward(self, logit, label):
        return _reduce(F.sigmoid_cross_entropy_with_logits(logit, label), self.reduction, "BCEWithLogitsLoss")
