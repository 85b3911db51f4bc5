"""paddle.nn.functional's normalizations over given parameter tensors: batch_norm,
layer_norm, group_norm, instance_norm (their ops), normalize (p_norm composed)."""
from __future__ import annotations

import math

from keel.program.errors import AttrError
from keel.program.layers import math as M
from keel.program.layers import tensor as T
from keel.program.layers.helper import LayerHelper
from keel.program.nn import _fail, _param_dtype, _require_float

__all__ = ["batch_norm", "layer_norm", "group_norm", "instance_norm", "normalize"]

_FORMATS = ("NC", "NCL", "NCHW", "NCDHW", "NLC", "NHWC", "NDHWC")


def _layout(layer, data_format) -> str:
    """The op's data_layout for a PaddlePaddle data_format: channel second or last."""
    if data_format not in _FORMATS:
        _fail(layer, f"data_format must be one of {', '.join(_FORMATS)}, got {data_format!r}", AttrError)
    return "NCHW" if data_format[1] == "C" else "NHWC"


def _normalization_op(op_type, x, weight, bias, stat_slots, attrs, name):
    """Append `op_type` (layer_norm, group_norm, instance_norm): X and the optional Scale and
    Bias in, Y and its two statistics out (made first, so they get PaddlePaddle's names)."""
    helper = LayerHelper(op_type, name)
    dtype = _param_dtype(x)
    stats = {slot: helper.create_tmp(dtype, stop_gradient=True) for slot in stat_slots}
    y = helper.create_tmp(x.dtype)
    inputs = {"X": x, **{slot: t for slot, t in (("Scale", weight), ("Bias", bias)) if t is not None}}
    helper.append_op(op_type, inputs, {"Y": y, **stats}, attrs)
    return y


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.9, epsilon=1e-05,
               data_format="NCHW", use_global_stats=None, name=None):
    """Batch normalization (op batch_norm). Training (and use_global_stats not True)
    normalizes by the batch's statistics and updates running_mean/running_var in place
    (running = momentum * running + (1 - momentum) * batch); else it uses the running ones.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[[1.0, 3.0]], [[2.0, 6.0]]]])     # N=1, C=2, H=1, W=2
        >>> mean, var = paddle.to_tensor([2.0, 4.0]), paddle.to_tensor([1.0, 4.0])
        >>> weight, bias = paddle.ones([2]), paddle.zeros([2])
        >>> y = F.batch_norm(x, mean, var, weight, bias)          # inference: the running statistics
        >>> print(y.numpy().ravel().round(4))
        [-1.  1. -1.  1.]
    """
    return batch_norm_op("batch_norm", x, running_mean, running_var, weight, bias, training, momentum, epsilon,
                         data_format, use_global_stats, name)


def batch_norm_op(layer, x, running_mean, running_var, weight, bias, training, momentum, epsilon, data_format,
                  use_global_stats, name):
    """Append op batch_norm, or sync_batch_norm (the same slots; statistics all-reduced over
    the data-parallel ranks), with PaddlePaddle's output names."""
    _require_float(layer, x)
    layout = _layout(layer, data_format)
    if not 2 <= x.ndim <= 5:
        _fail(layer, f"expects a 2-d to 5-d input, got {x.name} {x.type_string()}")
    if use_global_stats is None:
        use_global_stats = not training
    helper = LayerHelper(layer, name)
    dtype = _param_dtype(x)
    # the outputs made in PaddlePaddle's order, so they get its names (batch_norm_0.tmp_0, ...)
    outputs = {"MeanOut": running_mean, "VarianceOut": running_var,
               "SavedMean": helper.create_tmp(dtype, stop_gradient=True),
               "SavedVariance": helper.create_tmp(dtype, stop_gradient=True)}
    if training:
        outputs["ReserveSpace"] = helper.create_tmp(x.dtype, stop_gradient=True)
    y = outputs["Y"] = helper.create_tmp(x.dtype)
    inputs = {"X": x, "Mean": running_mean, "Variance": running_var,
              **{slot: t for slot, t in (("Scale", weight), ("Bias", bias)) if t is not None}}
    helper.append_op(layer, inputs, outputs,
                     {"momentum": float(momentum), "epsilon": float(epsilon), "is_test": not training,
                      "data_layout": layout, "use_global_stats": bool(use_global_stats),
                      "trainable_statistics": False})
    return y


def layer_norm(x, normalized_shape, weight=None, bias=None, epsilon=1e-05, name=None):
    """Normalize over the trailing dims `normalized_shape` (op layer_norm); weight and bias
    hold prod(normalized_shape) values.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[1.0, 2.0, 3.0, 6.0], [2.0, 2.0, 2.0, 2.0]])
        >>> print(F.layer_norm(x, normalized_shape=[4]).numpy().round(4))
        [[-1.069  -0.5345  0.      1.6036]
         [ 0.      0.      0.      0.    ]]
    """
    layer = "layer_norm"
    _require_float(layer, x)
    shape = [int(normalized_shape)] if isinstance(normalized_shape, int) else [int(d) for d in normalized_shape]
    begin = x.ndim - len(shape)
    if begin < 0 or any(t >= 0 and t != s for t, s in zip(x.shape[begin:], shape)):
        _fail(layer, f"normalized_shape {shape} must be the trailing dims of {x.name} {x.type_string()}")
    size = math.prod(shape)
    for what, t in (("weight", weight), ("bias", bias)):
        if t is not None and math.prod(t.shape) != size:
            _fail(layer, f"{what} {t.name} {t.type_string()} must hold {size} values")
    return _normalization_op(layer, x, weight, bias, ("Mean", "Variance"),
                             {"epsilon": float(epsilon), "begin_norm_axis": begin}, name)


def group_norm(x, num_groups, epsilon=1e-05, weight=None, bias=None, data_format="NCHW", name=None):
    """Normalize over groups of channels (op group_norm); weight and bias per channel.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[[1.0, 3.0]], [[5.0, 7.0]], [[0.0, 2.0]], [[2.0, 4.0]]]])   # N=1, C=4
        >>> y = F.group_norm(x, num_groups=2)                    # each pair of channels normalized together
        >>> print(y.numpy().ravel().round(4))
        [-1.3416 -0.4472  0.4472  1.3416 -1.4142  0.      0.      1.4142]
    """
    layer = "group_norm"
    _require_float(layer, x)
    layout = _layout(layer, data_format)
    if x.ndim < 2:
        _fail(layer, f"expects an input of at least 2 dims, got {x.name} {x.type_string()}")
    c = x.shape[-1] if layout == "NHWC" else x.shape[1]
    if num_groups <= 0 or (c >= 0 and c % num_groups):
        _fail(layer, f"channels ({c}) of {x.name} {x.type_string()} must be divisible by num_groups ({num_groups})")
    return _normalization_op(layer, x, weight, bias, ("Mean", "Variance"),
                             {"epsilon": float(epsilon), "groups": int(num_groups), "data_layout": layout}, name)


def instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None, use_input_stats=True,
                  momentum=0.9, eps=1e-05, data_format="NCHW", name=None):
    """Normalize each sample's channels over their spatial dims (op instance_norm). As in
    PaddlePaddle, the statistics are always the input's: running_mean/running_var,
    use_input_stats and momentum are accepted and not used.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[[1.0, 3.0]], [[2.0, 6.0]]]])     # N=1, C=2, H=1, W=2
        >>> print(F.instance_norm(x).numpy().ravel().round(4))  # each (sample, channel) to mean 0, variance 1
        [-1.  1. -1.  1.]
    """
    layer = "instance_norm"
    _require_float(layer, x)
    if data_format not in ("NC", "NCL", "NCHW", "NCDHW"):
        _fail(layer, f"data_format must be NC, NCL, NCHW or NCDHW, got {data_format!r}", AttrError)
    if not 2 <= x.ndim <= 5:
        _fail(layer, f"expects a 2-d to 5-d input, got {x.name} {x.type_string()}")
    return _normalization_op(layer, x, weight, bias, ("SavedMean", "SavedVariance"), {"epsilon": float(eps)}, name)


def normalize(x, p=2, axis=1, epsilon=1e-12, out=None, name=None):
    """x / max(||x||_p along axis, epsilon) (op p_norm, keepdim, then maximum and divide).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[3.0, 4.0], [6.0, 8.0]])
        >>> print(F.normalize(x, axis=1).numpy().round(4))     # rows to unit L2 norm
        [[0.6 0.8]
         [0.6 0.8]]
        >>> print(F.normalize(x, p=1, axis=0).numpy().round(4))
        [[0.3333 0.3333]
         [0.6667 0.6667]]
    """
    layer = "normalize"
    _require_float(layer, x)
    if x.ndim == 1 and axis not in (0, -1):
        _fail(layer, f"axis must be 0 or -1 for a 1-d input, got {axis}", AttrError)
    helper = LayerHelper("p_norm", None)
    norm = helper.create_tmp(x.dtype)
    helper.append_op("p_norm", {"X": x}, {"Out": norm},
                     {"axis": int(axis), "porder": float(p), "keepdim": True, "epsilon": float(epsilon),
                      "asvector": False})
    return M.divide(x, M.maximum(norm, T.full([], float(epsilon), x.dtype)), name=name)
