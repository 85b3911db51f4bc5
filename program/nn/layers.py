"""PaddlePaddle's `paddle.nn` layer classes.

Each layer's `forward` calls the function of `keel.nn.functional` that computes it
(`F.linear`, `F.conv2d`, `F.cross_entropy`, ...) with its own parameters: the Tensors
themselves in eager mode, their Parameters of the program being built in static mode
(`Layer.__getattr__`), so the ops, attributes and parameter layouts are exactly those
PaddlePaddle writes, in both modes. Layer names follow PaddlePaddle's
(`linear_0`, `conv2d_0`, `batch_norm2d_0`, ...), and so do parameter names (`.w_0`, `.b_0`;
batch norm's running mean and variance `.w_1`, `.w_2`).
"""
from __future__ import annotations

import math

from keel.program import initializer as init
from keel.program.layers import tensor as T
from keel.program.nn import functional as F
from keel.program.nn.layer import Layer
from keel.program.param_attr import ParamAttr

__all__ = ["Linear", "Conv1D", "Conv2D", "Conv3D", "Conv2DTranspose", "GroupNorm", "InstanceNorm2D", "BatchNorm", "BatchNorm1D", "BatchNorm2D", "LayerNorm", "Embedding",
           "Dropout", "MaxPool2D", "AvgPool2D", "AdaptiveAvgPool2D", "AdaptiveMaxPool2D", "Flatten",
           "ReLU", "ReLU6", "GELU", "Sigmoid", "Tanh", "Softmax", "LeakyReLU", "Hardswish",
           "Hardsigmoid", "Silu", "Identity", "Sequential", "LayerList", "LayerDict",
           "CrossEntropyLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss", "BCELoss", "NLLLoss", "KLDivLoss",
           "SmoothL1Loss", "MarginRankingLoss"]


def _param(layer, key):
    """The layer's parameter `key` as the current mode uses it (None when it has none)."""
    return getattr(layer, key) if key in layer._parameters else None


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
        return F.linear(x, self.weight, _param(self, "bias"), name=self._full_name)

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
        self._config = dict(stride=stride, padding=padding, dilation=dilation, groups=int(groups),
                            data_format=data_format)
        kh, kw = _pair(kernel_size)
        std = math.sqrt(2.0 / (kh * kw * in_channels))
        self.weight = self.create_parameter([out_channels, in_channels // groups, kh, kw], weight_attr,
                                            default_initializer=init.Normal(0.0, std))
        self.bias = self.create_parameter([out_channels], bias_attr, is_bias=True)

    def forward(self, x):
        return F.conv2d(x, self.weight, _param(self, "bias"), name=self._full_name, **self._config)


class Conv1D(Layer):
    """1-D convolution of [N, C, L] (NCL) or [N, L, C] (NLC) input; weight [out_channels,
    in_channels/groups, k] (F.conv1d: a conv2d over a height-1 image, as PaddlePaddle's)."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCL"):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f"Conv1D: padding_mode {padding_mode!r} is not supported; pad the input "
                             f"(F.pad) and use padding_mode='zeros'")
        if in_channels % groups:
            raise ValueError(f"Conv1D: in_channels {in_channels} is not divisible by groups {groups}")
        k = int(kernel_size if isinstance(kernel_size, int) else kernel_size[0])
        self._config = dict(stride=stride, padding=padding, dilation=dilation, groups=int(groups),
                            data_format=data_format)
        self.weight = self.create_parameter([out_channels, in_channels // groups, k], weight_attr,
                                            default_initializer=init.Normal(0.0, math.sqrt(2.0 / (k * in_channels))))
        self.bias = self.create_parameter([out_channels], bias_attr, is_bias=True)

    def forward(self, x):
        return F.conv1d(x, self.weight, _param(self, "bias"), name=self._full_name, **self._config)


class Conv3D(Layer):
    """3-D convolution; weight [out_channels, in_channels/groups, kd, kh, kw],
    Normal(0, sqrt(2 / (kd*kh*kw*in_channels)))."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1,
                 padding_mode="zeros", weight_attr=None, bias_attr=None, data_format="NCDHW"):
        super().__init__()
        if padding_mode != "zeros":
            raise ValueError(f"Conv3D: padding_mode {padding_mode!r} is not supported")
        k = [int(kernel_size)] * 3 if isinstance(kernel_size, int) else [int(v) for v in kernel_size]
        self._config = dict(stride=stride, padding=padding, dilation=dilation, groups=int(groups),
                            data_format=data_format)
        std = math.sqrt(2.0 / (math.prod(k) * in_channels))
        self.weight = self.create_parameter([out_channels, in_channels // groups, *k], weight_attr,
                                            default_initializer=init.Normal(0.0, std))
        self.bias = self.create_parameter([out_channels], bias_attr, is_bias=True)

    def forward(self, x):
        return F.conv3d(x, self.weight, _param(self, "bias"), name=self._full_name, **self._config)


class Conv2DTranspose(Layer):
    """2-D transposed convolution; weight [in_channels, out_channels/groups, kh, kw]."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 dilation=1, weight_attr=None, bias_attr=None, data_format="NCHW"):
        super().__init__()
        self._config = dict(stride=stride, padding=padding, output_padding=output_padding, dilation=dilation,
                            groups=int(groups), data_format=data_format)
        self.weight = self.create_parameter([in_channels, out_channels // groups, *_pair(kernel_size)], weight_attr)
        self.bias = self.create_parameter([out_channels], bias_attr, is_bias=True)

    def forward(self, x, output_size=None):
        return F.conv2d_transpose(x, self.weight, _param(self, "bias"), output_size=output_size,
                                  name=self._full_name, **self._config)


class GroupNorm(Layer):
    def __init__(self, num_groups, num_channels, epsilon=1e-5, weight_attr=None, bias_attr=None,
                 data_format="NCHW", name=None):
        super().__init__(name)
        self._groups, self._epsilon, self._format = int(num_groups), float(epsilon), data_format
        self.weight = self.create_parameter([num_channels], weight_attr, default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([num_channels], bias_attr, is_bias=True)

    def forward(self, x):
        return F.group_norm(x, self._groups, self._epsilon, _param(self, "weight"), _param(self, "bias"),
                            self._format, name=self._full_name)


class InstanceNorm2D(Layer):
    def __init__(self, num_features, epsilon=1e-5, momentum=0.9, weight_attr=None, bias_attr=None,
                 data_format="NCHW", name=None):
        super().__init__(name)
        if data_format != "NCHW":
            raise ValueError("InstanceNorm2D: only data_format='NCHW' is supported")
        self._epsilon = float(epsilon)
        self.scale = self.create_parameter([num_features], weight_attr, default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([num_features], bias_attr, is_bias=True)

    def forward(self, x):
        return F.instance_norm(x, weight=_param(self, "scale"), bias=_param(self, "bias"), eps=self._epsilon,
                               name=self._full_name)


class BatchNorm(Layer):
    """Batch normalization over the channel dim; running statistics in `_mean`/`_variance`
    (updated in training mode, used in eval mode)."""

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
        return F.batch_norm(x, self._mean, self._variance, _param(self, "weight"), _param(self, "bias"),
                            training=self.training, momentum=self._momentum, epsilon=self._epsilon,
                            data_format=self._data_format, use_global_stats=self._use_global_stats,
                            name=self._full_name)


class BatchNorm1D(BatchNorm):
    pass


class BatchNorm2D(BatchNorm):
    pass


class LayerNorm(Layer):
    """Normalizes over the trailing `normalized_shape` dims; weight Constant(1), bias Constant(0)."""

    def __init__(self, normalized_shape, epsilon=1e-5, weight_attr=None, bias_attr=None, name=None):
        super().__init__(name)
        self._shape = [int(normalized_shape)] if isinstance(normalized_shape, int) else list(normalized_shape)
        self._epsilon = float(epsilon)
        size = math.prod(self._shape)
        self.weight = self.create_parameter([size], weight_attr, default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([size], bias_attr, is_bias=True)

    def forward(self, x):
        return F.layer_norm(x, self._shape, _param(self, "weight"), _param(self, "bias"), self._epsilon,
                            name=self._full_name)


class Embedding(Layer):
    """Lookup table [num_embeddings, embedding_dim] (lookup_table_v2)."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, sparse=False, weight_attr=None,
                 name=None):
        super().__init__(name)
        self._padding_idx, self._sparse = padding_idx, sparse
        self.weight = self.create_parameter([int(num_embeddings), int(embedding_dim)], weight_attr)

    def forward(self, x):
        return F.embedding(x, self.weight, padding_idx=self._padding_idx, sparse=self._sparse, name=self._full_name)


class Dropout(Layer):
    """Dropout with probability p (upscale_in_train by default, as paddle.nn.Dropout);
    off in eval mode."""

    def __init__(self, p=0.5, axis=None, mode="upscale_in_train", name=None):
        super().__init__(name)
        self.p, self.axis, self.mode = float(p), axis, mode

    def forward(self, x):
        return F.dropout(x, self.p, self.axis, training=self.training, mode=self.mode)


class MaxPool2D(Layer):
    def __init__(self, kernel_size, stride=None, padding=0, return_mask=False, ceil_mode=False, data_format="NCHW",
                 name=None):
        super().__init__(name)
        self._args = dict(kernel_size=kernel_size, stride=stride, padding=padding, return_mask=return_mask,
                          ceil_mode=ceil_mode, data_format=data_format)

    def forward(self, x):
        return F.max_pool2d(x, **self._args)


class AvgPool2D(Layer):
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True, divisor_override=None,
                 data_format="NCHW", name=None):
        super().__init__(name)
        self._args = dict(kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode,
                          exclusive=exclusive, divisor_override=divisor_override, data_format=data_format)

    def forward(self, x):
        return F.avg_pool2d(x, **self._args)


class AdaptiveAvgPool2D(Layer):
    def __init__(self, output_size, data_format="NCHW", name=None):
        super().__init__(name)
        self._output_size, self._data_format = output_size, data_format

    def forward(self, x):
        return F.adaptive_avg_pool2d(x, self._output_size, data_format=self._data_format)


class AdaptiveMaxPool2D(Layer):
    def __init__(self, output_size, return_mask=False, name=None):
        super().__init__(name)
        self._output_size, self._return_mask = output_size, return_mask

    def forward(self, x):
        return F.adaptive_max_pool2d(x, self._output_size, self._return_mask)


class Flatten(Layer):
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


def _activation(cls_name, fn, **defaults):
    def __init__(self, *args, name=None, **kwargs):
        values = dict(defaults)
        values.update(zip(defaults, args))
        values.update(kwargs)
        _Activation.__init__(self, name, **values)
    return type(cls_name, (_Activation,), {"_fn": staticmethod(fn), "__init__": __init__,
                                           "__doc__": f"paddle.nn.{cls_name}: applies `{fn.__name__}`."})


ReLU = _activation("ReLU", F.relu)
ReLU6 = _activation("ReLU6", F.relu6)
GELU = _activation("GELU", F.gelu, approximate=False)
Sigmoid = _activation("Sigmoid", F.sigmoid)
Tanh = _activation("Tanh", F.tanh)
Softmax = _activation("Softmax", F.softmax, axis=-1)
LeakyReLU = _activation("LeakyReLU", F.leaky_relu, negative_slope=0.01)
Hardswish = _activation("Hardswish", F.hardswish)
Hardsigmoid = _activation("Hardsigmoid", F.hardsigmoid)
Silu = _activation("Silu", F.silu)


class Identity(Layer):
    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, x):
        return x


class Sequential(Layer):
    """Calls its layers in order: Sequential(a, b, c) or Sequential(("name", a), ...)."""

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
    """A list of layers whose parameters belong to the owner."""

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
    """A dict of layers whose parameters belong to the owner."""

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


# -- losses: each keeps its options and calls its function of keel.nn.functional ------------
class _Loss(Layer):
    _fn = None

    def __init__(self, name=None, **options):
        super().__init__(name)
        self._options = options

    def forward(self, *inputs):
        return type(self)._fn(*inputs, **self._options)


class CrossEntropyLoss(_Loss):
    """F.cross_entropy of logits (use_softmax=True) and class ids or soft labels."""
    _fn = staticmethod(F.cross_entropy)

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", soft_label=False, axis=-1,
                 use_softmax=True, label_smoothing=0.0, name=None):
        super().__init__(name, weight=weight, ignore_index=ignore_index, reduction=reduction, soft_label=soft_label,
                         axis=axis, use_softmax=use_softmax, label_smoothing=label_smoothing)


class MSELoss(_Loss):
    _fn = staticmethod(F.mse_loss)

    def __init__(self, reduction="mean"):
        super().__init__(None, reduction=reduction)


class L1Loss(_Loss):
    _fn = staticmethod(F.l1_loss)

    def __init__(self, reduction="mean", name=None):
        super().__init__(name, reduction=reduction)


class BCELoss(_Loss):
    _fn = staticmethod(F.binary_cross_entropy)

    def __init__(self, weight=None, reduction="mean", name=None):
        super().__init__(name, weight=weight, reduction=reduction)


class BCEWithLogitsLoss(_Loss):
    _fn = staticmethod(F.binary_cross_entropy_with_logits)

    def __init__(self, weight=None, reduction="mean", pos_weight=None, name=None):
        super().__init__(name, weight=weight, reduction=reduction, pos_weight=pos_weight)


class NLLLoss(_Loss):
    _fn = staticmethod(F.nll_loss)

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", name=None):
        super().__init__(name, weight=weight, ignore_index=ignore_index, reduction=reduction)


class KLDivLoss(_Loss):
    _fn = staticmethod(F.kl_div)

    def __init__(self, reduction="mean", log_target=False):
        super().__init__(None, reduction=reduction, log_target=log_target)


class SmoothL1Loss(_Loss):
    _fn = staticmethod(F.smooth_l1_loss)

    def __init__(self, reduction="mean", delta=1.0, is_huber=True, name=None):
        super().__init__(name, reduction=reduction, delta=delta, is_huber=is_huber)


class MarginRankingLoss(_Loss):
    _fn = staticmethod(F.margin_ranking_loss)

    def __init__(self, margin=0.0, reduction="mean", name=None):
        super().__init__(name, margin=margin, reduction=reduction)
