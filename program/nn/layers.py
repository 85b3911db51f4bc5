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
import sys
import textwrap

from keel.program import initializer as init
from keel.program import initializer as _init  # PReLU's `init` argument shadows the module
from keel.program.layers import tensor as T
from keel.program.nn import functional as F
from keel.program.nn.layer import Layer
from keel.program.param_attr import ParamAttr
from keel.program.tensor import Tensor

__all__ = ["Linear", "Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose", "GroupNorm",
           "InstanceNorm1D", "InstanceNorm2D", "InstanceNorm3D", "BatchNorm", "BatchNorm1D", "BatchNorm2D",
           "BatchNorm3D", "SyncBatchNorm", "LayerNorm", "Embedding", "PReLU", "ParameterList", "Unflatten",
           "Dropout", "MaxPool2D", "AvgPool2D", "AdaptiveAvgPool2D", "AdaptiveMaxPool2D", "Flatten",
           "ReLU", "ReLU6", "GELU", "Sigmoid", "Tanh", "Softmax", "LeakyReLU", "Hardswish",
           "Hardsigmoid", "Silu", "Identity", "Sequential", "LayerList", "LayerDict",
           "CrossEntropyLoss", "MSELoss", "L1Loss", "BCEWithLogitsLoss", "BCELoss", "NLLLoss", "KLDivLoss",
           "SmoothL1Loss", "MarginRankingLoss"]


def _param(layer, key):
    """The layer's parameter `key` as the current mode uses it (None when it has none)."""
    return getattr(layer, key) if key in layer._parameters else None


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


class _ConvNd(Layer):
    """Convolutions of `_nd` spatial dims (F.conv1d/2d/3d, or their transposes): weight
    [out_channels, in_channels/groups, *kernel] (transposed: [in_channels,
    out_channels/groups, *kernel]); a convolution's weight starts Normal(0,
    sqrt(2 / (prod(kernel) * in_channels))), a transpose's XavierUniform, as PaddlePaddle's."""
    _nd, _fn, _format, _transposed = 2, None, "NCHW", False

    def _make(self, in_channels, out_channels, kernel_size, groups, bias, padding_mode, device, dtype, weight_attr,
              bias_attr, data_format, **config):
        cls = type(self).__name__
        if padding_mode != "zeros":
            raise ValueError(f"{cls}: padding_mode {padding_mode!r} is not supported; pad the input (F.pad) and "
                             f"use padding_mode='zeros'")
        if groups <= 0 or in_channels % groups or out_channels % groups:
            raise ValueError(f"{cls}: groups {groups} must divide in_channels {in_channels} and out_channels "
                             f"{out_channels}")
        k = [int(kernel_size)] * self._nd if isinstance(kernel_size, int) else [int(v) for v in kernel_size]
        self._config = dict(groups=int(groups), data_format=data_format or self._format, **config)
        if dtype is not None:
            self._dtype = dtype
        if self._transposed:
            self.weight = self.create_parameter([in_channels, out_channels // groups, *k], weight_attr)
        else:
            std = math.sqrt(2.0 / (math.prod(k) * in_channels))
            self.weight = self.create_parameter([out_channels, in_channels // groups, *k], weight_attr,
                                                default_initializer=init.Normal(0.0, std))
        self.bias = self.create_parameter([out_channels], False if bias is False else bias_attr, is_bias=True)
        if device is not None:
            self.to(device)

    def forward(self, x, output_size=None):
        extra = {"output_size": output_size} if self._transposed else {}
        return type(self)._fn(x, self.weight, _param(self, "bias"), name=self._full_name, **self._config, **extra)


class _Conv(_ConvNd):
    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1, groups=1, *,
                 bias=True, padding_mode="zeros", device=None, dtype=None, weight_attr=None, bias_attr=None,
                 data_format=None):
        super().__init__()
        self._make(in_channels, out_channels, kernel_size, groups, bias, padding_mode, device, dtype, weight_attr,
                   bias_attr, data_format, stride=stride, padding=padding, dilation=dilation)


class _ConvTranspose(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, dilation=1,
                 groups=1, weight_attr=None, bias_attr=None, data_format=None):
        super().__init__()
        self._make(in_channels, out_channels, kernel_size, groups, True, "zeros", None, None, weight_attr, bias_attr,
                   data_format, stride=stride, padding=padding, output_padding=output_padding, dilation=dilation)


class Conv2D(_Conv):
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

    _nd, _fn, _format = 2, staticmethod(F.conv2d), "NCHW"


class Conv1D(_Conv):
    """1-D convolution of [N, C, L] (NCL) or [N, L, C] (NLC) input; weight [out_channels,
    in_channels/groups, k] (F.conv1d: a conv2d over a height-1 image, as PaddlePaddle's).

    Examples:
        >>> import keel as paddle
        >>> conv = paddle.nn.Conv1D(3, 8, kernel_size=3, padding=1)
        >>> x = paddle.rand([2, 3, 16])            # [batch, channels, length]
        >>> conv(x).shape
        [2, 8, 16]
    """
    _nd, _fn, _format = 1, staticmethod(F.conv1d), "NCL"


class Conv3D(_Conv):
    """3-D convolution; weight [out_channels, in_channels/groups, kd, kh, kw].

    Examples:
        >>> import keel as paddle
        >>> conv = paddle.nn.Conv3D(4, 6, kernel_size=3)
        >>> x = paddle.rand([2, 4, 8, 8, 8])       # [batch, channels, depth, height, width]
        >>> conv(x).shape
        [2, 6, 6, 6, 6]
    """
    _nd, _fn, _format = 3, staticmethod(F.conv3d), "NCDHW"


class Conv2DTranspose(_ConvTranspose):
    """2-D transposed convolution; weight [in_channels, out_channels/groups, kh, kw].

    Examples:
        >>> import keel as paddle
        >>> deconv = paddle.nn.Conv2DTranspose(4, 6, kernel_size=3, stride=2)
        >>> x = paddle.rand([1, 4, 8, 8])
        >>> deconv(x).shape                       # (8 - 1) * 2 + 3 = 17
        [1, 6, 17, 17]
    """
    _nd, _fn, _format = 2, staticmethod(F.conv2d_transpose), "NCHW"


class Conv1DTranspose(_ConvTranspose):
    """1-D transposed convolution; weight [in_channels, out_channels/groups, k]. (Its
    positional order after output_padding is groups, dilation, as PaddlePaddle's.)

    Examples:
        >>> import keel as paddle
        >>> deconv = paddle.nn.Conv1DTranspose(4, 6, kernel_size=3, stride=2)
        >>> x = paddle.rand([1, 4, 8])
        >>> deconv(x).shape
        [1, 6, 17]
    """
    _nd, _fn, _format = 1, staticmethod(F.conv1d_transpose), "NCL"

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0, groups=1,
                 dilation=1, weight_attr=None, bias_attr=None, data_format="NCL"):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, output_padding, dilation, groups,
                         weight_attr, bias_attr, data_format)


class Conv3DTranspose(_ConvTranspose):
    """3-D transposed convolution; weight [in_channels, out_channels/groups, kd, kh, kw].

    Examples:
        >>> import keel as paddle
        >>> deconv = paddle.nn.Conv3DTranspose(4, 6, kernel_size=3, stride=2, padding=1)
        >>> x = paddle.rand([2, 4, 4, 8, 8])
        >>> deconv(x).shape
        [2, 6, 7, 15, 15]
    """
    _nd, _fn, _format = 3, staticmethod(F.conv3d_transpose), "NCDHW"


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
    def __init__(self, num_groups, num_channels, epsilon=1e-5, *, affine=True, device=None, dtype=None,
                 weight_attr=None, bias_attr=None, data_format="NCHW", name=None):
        super().__init__(name, dtype or "float32")
        if not affine:
            weight_attr = bias_attr = False
        self._groups, self._epsilon, self._format = int(num_groups), float(epsilon), data_format
        self.weight = self.create_parameter([num_channels], weight_attr, default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([num_channels], bias_attr, is_bias=True)

    def forward(self, x):
        return F.group_norm(x, self._groups, self._epsilon, _param(self, "weight"), _param(self, "bias"),
                            self._format, name=self._full_name)


class InstanceNorm2D(Layer):
    """Instance normalization (F.instance_norm); InstanceNorm1D/3D are the same over other ranks.

    Examples:
        >>> import keel as paddle
        >>> norm = paddle.nn.InstanceNorm2D(3)
        >>> y = norm(paddle.rand([2, 3, 4, 4]))
        >>> y.shape
        [2, 3, 4, 4]
        >>> bool(abs(y.numpy().mean(axis=(2, 3))).max() < 1e-5)
        True
    """
    _format = "NCHW"

    def __init__(self, num_features, epsilon=1e-5, momentum=0.9, weight_attr=None, bias_attr=None,
                 data_format=None, name=None):
        super().__init__(name)
        self._data_format = data_format or self._format
        self._epsilon = float(epsilon)
        self.scale = self.create_parameter([num_features], weight_attr, default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([num_features], bias_attr, is_bias=True)

    def forward(self, x):
        return F.instance_norm(x, weight=_param(self, "scale"), bias=_param(self, "bias"), eps=self._epsilon,
                               data_format=self._data_format, name=self._full_name)


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
    _op_type = "batch_norm"

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
        return F.norm.batch_norm_op(self._op_type, x, self._mean, self._variance, _param(self, "weight"),
                                    _param(self, "bias"), self.training, self._momentum, self._epsilon,
                                    self._data_format, self._use_global_stats, self._full_name)


class BatchNorm1D(BatchNorm):
    """Batch normalization of [N, C] or [N, C, L] input over the channel dim C.

    Examples:
        >>> import keel as paddle
        >>> bn = paddle.nn.BatchNorm1D(1)
        >>> x = paddle.rand([2, 1, 3])
        >>> bn(x).shape
        [2, 1, 3]
    """
    def __init__(self, num_features, momentum=0.9, epsilon=1e-5, weight_attr=None, bias_attr=None,
                 data_format="NCL", use_global_stats=None, name=None):
        super().__init__(num_features, momentum, epsilon, weight_attr, bias_attr, data_format, use_global_stats, name)


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


class BatchNorm3D(BatchNorm):
    """Batch normalization of [N, C, D, H, W] input: each channel normalized over the batch and its
    positions.

    Examples:
        >>> import keel as paddle
        >>> bn = paddle.nn.BatchNorm3D(2)
        >>> x = paddle.rand([2, 2, 2, 2, 3])
        >>> y = bn(x)
        >>> y.shape
        [2, 2, 2, 2, 3]
        >>> channels = y.numpy().transpose(1, 0, 2, 3, 4).reshape(2, -1)
        >>> bool(abs(channels.mean(-1)).max() < 1e-5), bool(abs(channels.var(-1) - 1).max() < 1e-2)
        (True, True)
    """

    def __init__(self, num_features, momentum=0.9, epsilon=1e-5, weight_attr=None, bias_attr=None,
                 data_format="NCDHW", use_global_stats=None, name=None):
        super().__init__(num_features, momentum, epsilon, weight_attr, bias_attr, data_format, use_global_stats, name)


class SyncBatchNorm(BatchNorm):
    """Batch normalization with the statistics of the global batch: op sync_batch_norm,
    whose kernel all-reduces them over the data-parallel ranks (one process: batch_norm's).

    Examples:
        >>> import keel as paddle
        >>> bn = paddle.nn.SyncBatchNorm(3)
        >>> x = paddle.rand([2, 3, 4, 4])
        >>> y = bn(x)
        >>> y.shape
        [2, 3, 4, 4]
        >>> channels = y.numpy().transpose(1, 0, 2, 3).reshape(3, -1)
        >>> bool(abs(channels.mean(-1)).max() < 1e-5), bool(abs(channels.var(-1) - 1).max() < 1e-2)
        (True, True)
    """
    _op_type = "sync_batch_norm"
    _STATE = ("weight", "bias", "_mean", "_variance")

    @classmethod
    def convert_sync_batchnorm(cls, layer):
        """`layer` with every batch norm layer in it (itself included) replaced by a
        SyncBatchNorm over the same parameters and running statistics (the same objects, so
        an optimizer already holding `layer.parameters()` trains them), as PaddlePaddle's:
        children are replaced in place, and the converted layer is returned.

        Examples:
            >>> import keel as paddle
            >>> net = paddle.nn.Sequential(paddle.nn.Conv2D(3, 4, 3), paddle.nn.BatchNorm2D(4))
            >>> weight = net[1].weight
            >>> net = paddle.nn.SyncBatchNorm.convert_sync_batchnorm(net)
            >>> type(net[1]).__name__, net[1].weight is weight
            ('SyncBatchNorm', True)
        """
        converted = layer
        if isinstance(layer, BatchNorm):
            converted = cls(layer._parameters["_mean"].shape[0], layer._momentum, layer._epsilon,
                            data_format=layer._data_format, use_global_stats=layer._use_global_stats)
            for key in cls._STATE:   # in this order, so the state dict's keys keep theirs
                if key in layer._parameters:
                    setattr(converted, key, layer._parameters[key])
                else:                # weight_attr=False / bias_attr=False: none here either
                    converted._parameters.pop(key, None)
            converted.training = layer.training
        for name, child in list(layer._sub_layers.items()):
            converted.add_sublayer(name, cls.convert_sync_batchnorm(child))
        return converted


class InstanceNorm1D(InstanceNorm2D):
    """Instance normalization of [N, C, L] input: each channel of each sample normalized over its
    positions.

    Examples:
        >>> import keel as paddle
        >>> norm = paddle.nn.InstanceNorm1D(2)
        >>> x = paddle.rand([2, 2, 6])
        >>> y = norm(x)
        >>> y.shape
        [2, 2, 6]
        >>> bool(abs(y.numpy().mean(-1)).max() < 1e-5), bool(abs(y.numpy().var(-1) - 1).max() < 1e-3)
        (True, True)
    """

    _format = "NCL"


class InstanceNorm3D(InstanceNorm2D):
    """Instance normalization of [N, C, D, H, W] input: each channel of each sample normalized over its
    positions.

    Examples:
        >>> import keel as paddle
        >>> norm = paddle.nn.InstanceNorm3D(2)
        >>> x = paddle.rand([2, 2, 2, 2, 3])
        >>> y = norm(x)
        >>> y.shape
        [2, 2, 2, 2, 3]
        >>> per_instance = y.numpy().reshape(2, 2, -1)
        >>> bool(abs(per_instance.mean(-1)).max() < 1e-5), bool(abs(per_instance.var(-1) - 1).max() < 1e-3)
        (True, True)
    """

    _format = "NCDHW"


class PReLU(Layer):
    """F.prelu with `num_parameters` weights (1: one for all, else one per channel) starting at `init`.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[[[-2.0, 3.0], [1.0, -1.0]]]])
        >>> print(paddle.nn.PReLU(num_parameters=1, init=0.25)(x).numpy())
        [[[[-0.5   3.  ]
           [ 1.   -0.25]]]]
    """

    def __init__(self, num_parameters=1, init=0.25, weight_attr=None, data_format="NCHW", name=None):
        super().__init__(name)
        self._data_format = data_format
        self._weight = self.create_parameter([int(num_parameters)], weight_attr,  # PaddlePaddle's name for it
                                             default_initializer=_init.Constant(float(init)))

    def forward(self, x):
        return F.prelu(x, self._weight, self._data_format, name=self._full_name)


class ParameterList(Layer):
    """A list of parameters that belong to the owner.

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
        for param in parameters or ():
            self.append(param)

    def append(self, parameter):
        self.add_parameter(str(len(self._parameters)), parameter)
        return self

    def __getitem__(self, index):  # as attribute access: in a program being built, its Parameter
        keys = list(self._parameters)[index]
        return [getattr(self, key) for key in keys] if isinstance(index, slice) else getattr(self, keys)

    def __setitem__(self, index, parameter):
        if not -len(self) <= index < len(self):
            raise IndexError(f"ParameterList: index {index} out of range for {len(self)} parameters")
        self.add_parameter(str(index % len(self)), parameter)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return (getattr(self, key) for key in list(self._parameters))


class Unflatten(Layer):
    """Split dim `axis` into `shape` (a reshape).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([2, 6, 4])
        >>> paddle.nn.Unflatten(axis=1, shape=[2, 3])(x).shape
        [2, 2, 3, 4]
        >>> paddle.nn.Unflatten(1, [3, -1])(x).shape          # -1: the size that remains
        [2, 3, 2, 4]
        >>> x = paddle.reshape(paddle.arange(6, dtype="float32"), [1, 6])
        >>> print(paddle.nn.Unflatten(1, (2, 3))(x).numpy())
        [[[0. 1. 2.]
          [3. 4. 5.]]]
    """

    def __init__(self, axis, shape, name=None):
        super().__init__(name)
        self._axis, self._shape = int(axis), [int(d) for d in shape]

    def forward(self, x):
        axis = self._axis % x.ndim
        dims = [d if d >= 0 else -1 for d in x.shape]
        target = dims[:axis] + self._shape + dims[axis + 1:]
        if target.count(-1) > 1:
            raise ValueError(f"Unflatten: {x.name} {x.type_string()} has too many unknown dims to reshape")
        return T.reshape(x, target)


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

    def __init__(self, normalized_shape, epsilon=1e-5, *, elementwise_affine=True, bias=True, device=None,
                 dtype=None, weight_attr=None, bias_attr=None, name=None):
        super().__init__(name, dtype or "float32")
        if not elementwise_affine:
            weight_attr = bias_attr = False
        elif not bias:
            bias_attr = False
        self._shape = [int(normalized_shape)] if isinstance(normalized_shape, int) else list(normalized_shape)
        self._epsilon = float(epsilon)
        size = math.prod(self._shape)
        self.weight = self.create_parameter([size], weight_attr, default_initializer=init.Constant(1.0))
        self.bias = self.create_parameter([size], bias_attr, is_bias=True)

    def forward(self, x):
        return F.layer_norm(x, self._shape, _param(self, "weight"), _param(self, "bias"), self._epsilon,
                            name=self._full_name)


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

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0, *,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None,
                 weight_attr=None, name=None):
        super().__init__(name, dtype or "float32")
        if max_norm is not None or scale_grad_by_freq:
            raise ValueError("Embedding: max_norm and scale_grad_by_freq are not supported (no embedding_renorm op)")
        self._padding_idx, self._sparse = padding_idx, sparse
        if _weight is not None:  # the table's starting value, as PaddlePaddle's
            value = _weight.numpy() if isinstance(_weight, Tensor) else _weight
            weight_attr = ParamAttr(initializer=init.Assign(value), trainable=not _freeze)
        elif _freeze:
            weight_attr = ParamAttr.of(weight_attr) or ParamAttr()
            weight_attr.trainable = False
        self.weight = self.create_parameter([int(num_embeddings), int(embedding_dim)], weight_attr)
        if device is not None:
            self.to(device)

    def forward(self, x):
        return F.embedding(x, self.weight, padding_idx=self._padding_idx, sparse=self._sparse, name=self._full_name)


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

    def __init__(self, p=0.5, inplace=False, axis=None, mode="upscale_in_train", name=None):
        super().__init__(name)
        self.p, self.axis, self.mode = float(p), axis, mode

    def forward(self, x):
        return F.dropout(x, self.p, self.axis, training=self.training, mode=self.mode)


class MaxPool2D(Layer):
    """2-D max pooling (`pool2d`, pooling_type max) over [N, C, H, W] input.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.reshape(paddle.arange(16, dtype="float32"), [1, 1, 4, 4])
        >>> pool = paddle.nn.MaxPool2D(kernel_size=2, stride=2)
        >>> print(pool(x).numpy())
        [[[[ 5.  7.]
           [13. 15.]]]]
    """
    def __init__(self, kernel_size, stride=None, padding=0, return_mask=False, ceil_mode=False, data_format="NCHW",
                 name=None):
        super().__init__(name)
        self._args = dict(kernel_size=kernel_size, stride=stride, padding=padding, return_mask=return_mask,
                          ceil_mode=ceil_mode, data_format=data_format)

    def forward(self, x):
        return F.max_pool2d(x, **self._args)


class AvgPool2D(Layer):
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
    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False, exclusive=True, divisor_override=None,
                 data_format="NCHW", name=None):
        super().__init__(name)
        self._args = dict(kernel_size=kernel_size, stride=stride, padding=padding, ceil_mode=ceil_mode,
                          exclusive=exclusive, divisor_override=divisor_override, data_format=data_format)

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
        self._output_size, self._return_mask = output_size, return_mask

    def forward(self, x):
        return F.adaptive_max_pool2d(x, self._output_size, self._return_mask)


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


REQUIRED = object()  # a function layer's option without a default


class FunctionLayer(Layer):
    """A layer calling one function of keel.nn.functional on its inputs with the options it
    was made with (and, for the dropouts, `training` from its mode)."""
    _fn = None
    _pass_training = False

    def __init__(self, name=None, **options):
        super().__init__(name)
        self._options = options

    def forward(self, *inputs):
        extra = {"training": self.training} if self._pass_training else {}
        return type(self)._fn(*inputs, **self._options, **extra)


def function_layer(cls_name, fn, defaults=None, fixed=None, pass_training=False, example=None):
    """A FunctionLayer class `cls_name` whose constructor takes `defaults`' options, in
    order, positionally or by name (REQUIRED ones must be given), and calls `fn` with them
    and with `fixed`; `example`, doctest lines, becomes its docstring's Examples section. The
    class belongs to the calling module (as namedtuple's), where its docstring is found."""
    defaults, fixed = dict(defaults or {}), dict(fixed or {})
    doc = f"paddle.nn.{cls_name}: applies `F.{fn.__name__}`."
    if example:
        doc += "\n\n    Examples:\n" + textwrap.indent(textwrap.dedent(example).strip("\n"), " " * 8) + "\n    "
    module = sys._getframe(1).f_globals.get("__name__", __name__)

    def __init__(self, *args, name=None, **kwargs):
        if len(args) > len(defaults):
            raise TypeError(f"{cls_name} takes at most {len(defaults)} options, got {len(args)}")
        unknown = set(kwargs) - set(defaults)
        if unknown:
            raise TypeError(f"{cls_name} got unexpected option(s) {sorted(unknown)}")
        values = dict(defaults)
        values.update(zip(defaults, args))
        values.update(kwargs)
        missing = [k for k, v in values.items() if v is REQUIRED]
        if missing:
            raise TypeError(f"{cls_name} needs {', '.join(missing)}")
        FunctionLayer.__init__(self, name, **values, **fixed)
    return type(cls_name, (FunctionLayer,), {"_fn": staticmethod(fn), "_pass_training": pass_training,
                                            "__init__": __init__,
                                            "__doc__": doc, "__module__": module})


ReLU = function_layer("ReLU", F.relu, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-2.0, 0.0, 1.0])
    >>> print(paddle.nn.ReLU()(x).numpy())
    [0. 0. 1.]
""")
ReLU6 = function_layer("ReLU6", F.relu6, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-1.0, 0.3, 6.5])
    >>> print(paddle.nn.ReLU6()(x).numpy())
    [0.  0.3 6. ]
""")
GELU = function_layer("GELU", F.gelu, {"approximate": False}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[-1.0, 0.5], [1.0, 1.5]])
    >>> print(paddle.nn.GELU()(x).numpy().round(4))
    [[-0.1587  0.3457]
     [ 0.8413  1.3998]]
    >>> print(paddle.nn.GELU(approximate=True)(x).numpy().round(4))
    [[-0.1588  0.3457]
     [ 0.8412  1.3996]]
""")
Sigmoid = function_layer("Sigmoid", F.sigmoid, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([1.0, 2.0, 3.0, 4.0])
    >>> print(paddle.nn.Sigmoid()(x).numpy().round(4))
    [0.7311 0.8808 0.9526 0.982 ]
""")
Tanh = function_layer("Tanh", F.tanh, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
    >>> print(paddle.nn.Tanh()(x).numpy().round(4))
    [-0.3799 -0.1974  0.0997  0.2913]
""")
Softmax = function_layer("Softmax", F.softmax, {"axis": -1}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
    >>> y = paddle.nn.Softmax()(x)
    >>> print(y.numpy().round(4))
    [[0.09   0.2447 0.6652]
     [0.3333 0.3333 0.3333]]
    >>> print(y.numpy().sum(-1).round(4))
    [1. 1.]
""")
LeakyReLU = function_layer("LeakyReLU", F.leaky_relu, {"negative_slope": 0.01}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-2.0, 0.0, 1.0])
    >>> print(paddle.nn.LeakyReLU()(x).numpy())
    [-0.02  0.    1.  ]
""")
Hardswish = function_layer("Hardswish", F.hardswish, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-2.0, 5.0, 1.0])
    >>> print(paddle.nn.Hardswish()(x).numpy().round(4))
    [-0.3333  5.      0.6667]
""")
Hardsigmoid = function_layer("Hardsigmoid", F.hardsigmoid, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-4.0, 5.0, 1.0])
    >>> print(paddle.nn.Hardsigmoid()(x).numpy().round(4))
    [0.     1.     0.6667]
""")
Silu = function_layer("Silu", F.silu, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([1.0, 2.0, 3.0, 4.0])
    >>> print(paddle.nn.Silu()(x).numpy().round(4))
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


# -- losses: each keeps its options and calls its function of keel.nn.functional ------------
class _Loss(FunctionLayer):
    """A loss layer: its options, then its function of keel.nn.functional."""


class CrossEntropyLoss(_Loss):
    """F.cross_entropy of logits (use_softmax=True) and class ids or soft labels.

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
    _fn = staticmethod(F.cross_entropy)

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", soft_label=False, axis=-1,
                 use_softmax=True, label_smoothing=0.0, name=None):
        super().__init__(name, weight=weight, ignore_index=ignore_index, reduction=reduction, soft_label=soft_label,
                         axis=axis, use_softmax=use_softmax, label_smoothing=label_smoothing)


class MSELoss(_Loss):
    """Mean squared error: reduction (mean, sum or none) of (input - label) ** 2.

    Examples:
        >>> import keel as paddle
        >>> mse = paddle.nn.MSELoss()
        >>> loss = mse(paddle.to_tensor([1.0, 2.0, 3.0]), paddle.to_tensor([1.5, 2.0, 2.0]))
        >>> round(float(loss), 4)                 # (0.25 + 0 + 1) / 3
        0.4167
    """
    _fn = staticmethod(F.mse_loss)

    def __init__(self, reduction="mean"):
        super().__init__(None, reduction=reduction)


class L1Loss(_Loss):
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
    _fn = staticmethod(F.l1_loss)

    def __init__(self, reduction="mean", name=None):
        super().__init__(name, reduction=reduction)


class BCELoss(_Loss):
    """Binary cross entropy of probabilities and labels: reduction (mean, sum or none) of
    -weight * (label * log(input) + (1 - label) * log(1 - input)).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([0.5, 0.6, 0.7])
        >>> label = paddle.to_tensor([1.0, 0.0, 1.0])
        >>> round(float(paddle.nn.BCELoss()(x, label)), 4)
        0.6554
    """

    _fn = staticmethod(F.binary_cross_entropy)

    def __init__(self, weight=None, reduction="mean", name=None):
        super().__init__(name, weight=weight, reduction=reduction)


class BCEWithLogitsLoss(_Loss):
    """Binary cross entropy of sigmoid(logit) and label, computed stably from the logits.

    Examples:
        >>> import keel as paddle
        >>> logit = paddle.to_tensor([5.0, 1.0, 3.0])
        >>> label = paddle.to_tensor([1.0, 0.0, 1.0])
        >>> round(float(paddle.nn.BCEWithLogitsLoss()(logit, label)), 4)
        0.4562
    """
    _fn = staticmethod(F.binary_cross_entropy_with_logits)

    def __init__(self, weight=None, reduction="mean", pos_weight=None, name=None):
        super().__init__(name, weight=weight, reduction=reduction, pos_weight=pos_weight)


class NLLLoss(_Loss):
    """Negative log likelihood of log-probabilities [N, C] and class labels [N]: -input[i, label[i]]
    (times `weight` of the class), reduced over the samples not labelled `ignore_index`.

    Examples:
        >>> import keel as paddle
        >>> import numpy as np
        >>> log_probs = paddle.to_tensor(np.log([[0.7, 0.2, 0.1], [0.1, 0.3, 0.6]]).astype("float32"))
        >>> label = paddle.to_tensor([0, 2], dtype="int64")
        >>> round(float(paddle.nn.NLLLoss()(log_probs, label)), 4)
        0.4338
        >>> round(-float(np.log(0.7) + np.log(0.6)) / 2, 4)   # the mean of -log_probs[i, label[i]]
        0.4338
    """

    _fn = staticmethod(F.nll_loss)

    def __init__(self, weight=None, ignore_index=-100, reduction="mean", name=None):
        super().__init__(name, weight=weight, ignore_index=ignore_index, reduction=reduction)


class KLDivLoss(_Loss):
    """Kullback-Leibler divergence of label from the log-probabilities `input` (with log_target, label
    is log-probabilities too), reduced by `reduction`.

    Examples:
        >>> import keel as paddle
        >>> import numpy as np
        >>> x = paddle.to_tensor(np.log([[0.25, 0.75]]).astype("float32"))
        >>> label = paddle.to_tensor([[0.5, 0.5]])
        >>> round(float(paddle.nn.KLDivLoss(reduction="sum")(x, label)), 4)
        0.1438
        >>> round(float(0.5 * np.log(0.5 / 0.25) + 0.5 * np.log(0.5 / 0.75)), 4)  # sum of label * log(label / p)
        0.1438
    """

    _fn = staticmethod(F.kl_div)

    def __init__(self, reduction="mean", log_target=False):
        super().__init__(None, reduction=reduction, log_target=log_target)


class SmoothL1Loss(_Loss):
    """Smooth L1 (Huber) loss of input - label with threshold `delta`: quadratic within it, linear
    beyond; reduction mean, sum or none.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[0.2, 3.0], [1.0, -1.0]])
        >>> label = paddle.to_tensor([[0.0, 1.0], [1.0, 1.0]])
        >>> print(paddle.nn.SmoothL1Loss(reduction="none")(x, label).numpy().round(4))
        [[0.02 1.5 ]
         [0.   1.5 ]]
        >>> round(float(paddle.nn.SmoothL1Loss()(x, label)), 4)
        0.755
    """

    _fn = staticmethod(F.smooth_l1_loss)

    def __init__(self, reduction="mean", delta=1.0, is_huber=True, name=None):
        super().__init__(name, reduction=reduction, delta=delta, is_huber=is_huber)


class MarginRankingLoss(_Loss):
    """Ranking loss: reduction (mean, sum or none) of max(0, -label * (input - other) + margin).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> other = paddle.to_tensor([[2.0, 1.0], [2.0, 4.0]])
        >>> label = paddle.to_tensor([[1.0, -1.0], [-1.0, -1.0]])
        >>> print(paddle.nn.MarginRankingLoss(reduction="none")(x, other, label).numpy())
        [[1. 1.]
         [1. 0.]]
        >>> round(float(paddle.nn.MarginRankingLoss()(x, other, label)), 4)
        0.75
    """

    _fn = staticmethod(F.margin_ranking_loss)

    def __init__(self, margin=0.0, reduction="mean", name=None):
        super().__init__(name, margin=margin, reduction=reduction)
