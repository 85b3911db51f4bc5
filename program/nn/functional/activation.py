"""paddle.nn.functional's activations. Most are the one-op activations of
program/layers/math.py under PaddlePaddle 3's names (`hardswish` for `hard_swish`, ...);
the rest append their op here or are written exactly in ops (`glu`)."""
from __future__ import annotations

from keel.program.errors import AttrError
from keel.program.layers import math as M
from keel.program.layers import tensor as T
from keel.program.layers.helper import LayerHelper
from keel.program.nn import _fail, _require_float

from keel.program.layers.math import (celu, elu, gelu, leaky_relu, log_sigmoid, log_softmax, mish,  # noqa: F401
                                      relu, relu6, selu, sigmoid, silu, softmax, softplus, softsign,
                                      swish, tanh, thresholded_relu)

__all__ = ["relu", "relu6", "elu", "selu", "celu", "gelu", "silu", "swish", "mish", "sigmoid",
           "hardsigmoid", "hardswish", "hardtanh", "hardshrink", "softshrink", "leaky_relu",
           "log_sigmoid", "prelu", "softplus", "softsign", "tanh", "tanhshrink", "thresholded_relu",
           "maxout", "glu", "swiglu", "softmax", "log_softmax", "logsigmoid"]

hardsigmoid = M.hard_sigmoid
hardswish = M.hard_swish
tanhshrink = M.tanh_shrink
logsigmoid = M.log_sigmoid


def _one_op(op_type, x, attrs, name):
    return LayerHelper(op_type, name).unary(op_type, x, attrs)


def hardtanh(x, min=-1.0, max=1.0, name=None):  # noqa: A002  (PaddlePaddle's argument names)
    """Clip x to [min, max] (op brelu, PaddlePaddle's hardtanh kernel).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-1.5, 0.3, 2.5])
        >>> print(F.hardtanh(x).numpy())
        [-1.   0.3  1. ]
    """
    return _one_op("brelu", x, {"t_min": float(min), "t_max": float(max)}, name)


def hardshrink(x, threshold=0.5, name=None):
    """x where |x| > threshold, else 0 (op hard_shrink).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-1.0, 0.3, 2.5])
        >>> print(F.hardshrink(x).numpy())
        [-1.   0.   2.5]
    """
    return _one_op("hard_shrink", x, {"threshold": float(threshold)}, name)


def softshrink(x, threshold=0.5, name=None):
    """x - threshold above it, x + threshold below -threshold, else 0 (op softshrink).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-0.9, -0.2, 0.1, 0.8])
        >>> print(F.softshrink(x, threshold=0.5).numpy().round(4))
        [-0.4  0.   0.   0.3]
    """
    if threshold < 0:
        _fail("softshrink", f"threshold must be >= 0, got {threshold}", AttrError)
    return _one_op("softshrink", x, {"lambda": float(threshold)}, name)


def maxout(x, groups, axis=1, name=None):
    """The maximum over each group of `groups` consecutive channels of `axis` (op maxout).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(8, dtype="float32").reshape([1, 4, 1, 2])
        >>> y = F.maxout(x, groups=2, axis=1)     # the maximum of each pair of channels
        >>> y.shape, y.numpy().ravel().tolist()
        ([1, 2, 1, 2], [2.0, 3.0, 6.0, 7.0])
    """
    if axis not in (1, -1, 3):
        _fail("maxout", f"axis must be 1, -1 or 3, got {axis}", AttrError)
    return _one_op("maxout", x, {"groups": int(groups), "axis": int(axis)}, name)


def prelu(x, weight, data_format="NCHW", name=None):
    """max(0, x) + weight * min(0, x) (op prelu): one weight ([1], mode 'all') or one per
    channel ([C], mode 'channel', the channel dim of `data_format`).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[[-2.0, 3.0]], [[-1.0, 4.0]]]])   # N=1, C=2, H=1, W=2
        >>> w = paddle.to_tensor([0.25, 0.5])                          # one slope per channel
        >>> print(F.prelu(x, w).numpy().ravel())
        [-0.5  3.  -0.5  4. ]
    """
    _require_float("prelu", x)
    if weight.ndim != 1:
        _fail("prelu", f"weight must be 1-d ([1] or [channels]), got {weight.name} {weight.type_string()}")
    mode = "all"
    if weight.shape[0] != 1:
        formats = ("NC", "NCL", "NLC", "NCHW", "NHWC", "NCDHW", "NDHWC")
        if data_format not in formats:
            _fail("prelu", f"data_format must be one of {', '.join(formats)}, got {data_format!r}", AttrError)
        data_format = "NCHW" if data_format[1] == "C" else "NHWC"
        if x.ndim < 2:
            _fail("prelu", f"a per-channel weight needs an input of at least 2 dims, got {x.name} {x.type_string()}")
        channels = x.shape[-1] if data_format == "NHWC" else x.shape[1]
        if channels >= 0 and weight.shape[0] >= 0 and channels != weight.shape[0]:
            _fail("prelu", f"weight {weight.name} {weight.type_string()} must hold one value per channel "
                           f"({channels}) of {x.name} {x.type_string()}")
        mode = "channel"
    return prelu_op(x, weight, mode, data_format, name)


def prelu_op(x, alpha, mode, data_format, name=None):
    """Op prelu with alpha of `mode` ('all', 'channel' or 'element')."""
    helper = LayerHelper("prelu", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("prelu", {"X": x, "Alpha": alpha}, {"Out": out}, {"mode": mode, "data_format": data_format})
    return out


def glu(x, axis=-1, name=None):
    """The gated linear unit: x split in halves a, b along `axis`, a * sigmoid(b).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[1.0, 2.0, 0.0, 0.0], [3.0, 4.0, 0.0, 0.0]])
        >>> print(F.glu(x, axis=-1).numpy())   # first half times sigmoid(second half) = first half / 2
        [[0.5 1. ]
         [1.5 2. ]]
    """
    rank = x.ndim
    if not -rank <= axis < rank:
        _fail("glu", f"axis {axis} is out of range for {x.name} {x.type_string()}", AttrError)
    a, b = T.split(x, 2, axis)
    return M.multiply(a, sigmoid(b))


def swiglu(x, y=None, name=None):
    """silu(x) * y; with y None, x's last axis split in halves a, b: silu(a) * b.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[1.0, 2.0]])
        >>> y = paddle.to_tensor([[3.0, 4.0]])
        >>> print(F.swiglu(x, y).numpy().round(4))    # silu(x) * y
        [[2.1932 7.0464]]
        >>> print(F.swiglu(paddle.concat([x, y], axis=-1)).numpy().round(4))   # one input: halves of the last axis
        [[2.1932 7.0464]]
    """
    if y is None:
        x, y = T.split(x, 2, -1)
    return M.multiply(silu(x), y)
