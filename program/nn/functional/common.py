"""paddle.nn.functional's common functions: linear, dropout, embedding, one_hot, pad,
interpolate/upsample, label_smooth, and the vision helpers (pixel_shuffle, grid_sample,
affine_grid, unfold) whose definitions live with the builder layers."""
from __future__ import annotations

import numbers

from keel.program.errors import AttrError, DTypeError
from keel.program.layers import math as M
from keel.program.layers import tensor as T
from keel.program.layers.helper import LayerHelper
from keel.program.layers.manip import fold, unfold  # noqa: F401  (paddle.nn.functional.fold, unfold)
from keel.program.layers.random import rand
from keel.program.nn import _check_format, _fail, _require_float
from keel.program.nn.functional.pooling import adaptive_avg_pool1d, adaptive_avg_pool2d, adaptive_avg_pool3d
from keel.program.variable import Variable
from keel.proto import pb

__all__ = ["linear", "dropout", "dropout1d", "dropout2d", "dropout3d", "embedding", "one_hot", "pad", "zeropad2d",
           "interpolate", "upsample", "label_smooth", "pixel_shuffle", "pixel_unshuffle", "channel_shuffle",
           "grid_sample", "affine_grid", "fold", "unfold"]


def linear(x, weight, bias=None, name=None):
    """x @ weight + bias, weight [in_features, out_features] (ops matmul_v2, elementwise_add).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([3, 2])
        >>> weight = paddle.full([2, 4], 0.5)           # [in_features, out_features]
        >>> bias = paddle.ones([4])
        >>> print(F.linear(x, weight, bias).numpy())
        [[2. 2. 2. 2.]
         [2. 2. 2. 2.]
         [2. 2. 2. 2.]]
    """
    _require_float("linear", x)
    if weight.ndim != 2:
        _fail("linear", f"weight must be 2-d [in_features, out_features], got {weight.name} {weight.type_string()}")
    if x.ndim and x.shape[-1] >= 0 and weight.shape[0] >= 0 and x.shape[-1] != weight.shape[0]:
        _fail("linear", f"the last dim of {x.name} {x.type_string()} must equal the in_features of weight "
                        f"{weight.name} {weight.type_string()}")
    helper = LayerHelper("linear", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("matmul_v2", {"X": x, "Y": weight}, {"Out": out}, {"trans_x": False, "trans_y": False})
    if bias is None:
        return out
    res = helper.create_tmp(x.dtype)
    helper.append_op("elementwise_add", {"X": out, "Y": bias}, {"Out": res}, {"axis": -1})
    return res


_DROPOUT_MODES = {"upscale_in_train": "upscale_in_train", "downscale_in_infer": "downgrade_in_infer"}


def dropout_op(x, p, is_test, implementation, seed=None, name=None):
    """Append op `dropout` (with its uint8 Mask). With a `seed`, or a main program whose
    random_seed is set, it writes fix_seed=True and that seed, as PaddlePaddle does."""
    helper = LayerHelper("dropout", name)
    out = helper.create_tmp(x.dtype)
    mask = helper.create_tmp(pb.VarType.UINT8, stop_gradient=True)
    attrs = {"dropout_prob": float(p), "is_test": bool(is_test), "dropout_implementation": implementation}
    if not seed:
        seed = helper.main_program.random_seed or seed
    if seed is not None:
        attrs["fix_seed"] = True
        attrs["seed"] = int(seed)
    helper.append_op("dropout", {"X": x}, {"Out": out, "Mask": mask}, attrs)
    return out


def dropout(x, p=0.5, axis=None, training=True, inplace=False, mode="upscale_in_train", name=None):
    """Zero each element with probability p while training; 'upscale_in_train' scales the
    kept ones by 1/(1-p), 'downscale_in_infer' scales by (1-p) outside training. With
    `axis`, one draw is shared along the other dims (the mask has x's size only on `axis`).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([2, 4])
        >>> y = F.dropout(x, p=0.5)                     # training: kept values are scaled by 1 / (1 - p)
        >>> sorted(set(y.numpy().ravel().tolist()) - {0.0, 2.0})
        []
        >>> print(F.dropout(x, p=0.5, training=False).numpy())   # inference: unchanged
        [[1. 1. 1. 1.]
         [1. 1. 1. 1.]]
    """
    if not isinstance(p, numbers.Real) or not 0 <= p <= 1:
        _fail("dropout", f"p must be a number in [0, 1], got {p!r}", AttrError)
    if mode not in _DROPOUT_MODES:
        _fail("dropout", f"mode must be 'upscale_in_train' or 'downscale_in_infer', got {mode!r}", AttrError)
    if p == 0:
        return x
    if axis is None:
        return dropout_op(x, p, not training, _DROPOUT_MODES[mode], name=name)
    axes = [int(a) % x.ndim for a in (axis if isinstance(axis, (list, tuple)) else [axis])]
    if not training:
        return x if mode == "upscale_in_train" else M.scale(x, 1.0 - p)
    mask_shape = [x.shape[i] if i in axes else 1 for i in range(x.ndim)]
    if any(d < 0 for d in mask_shape):
        _fail("dropout", f"dropout along axis {axis} needs those dims of {x.name} {x.type_string()} known")
    keep = M.cast(M.greater_equal(rand(mask_shape), T.full([], float(p), "float32")), x.dtype)
    scaled = M.scale(x, 1.0 / (1.0 - p)) if mode == "upscale_in_train" and p < 1 else x
    return M.multiply(scaled, keep)


def _channel_dropout(layer, x, p, training, data_format, nd, name):
    formats = {2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}[nd]
    if data_format not in formats:
        _fail(layer, f"data_format must be {formats[0]!r} or {formats[1]!r}, got {data_format!r}", AttrError)
    if x.ndim != nd + 2:
        _fail(layer, f"expects a {nd + 2}-d input, got {x.name} {x.type_string()}")
    return dropout(x, p, [0, 1] if data_format == formats[0] else [0, nd + 1], training, name=name)


def dropout1d(input, p=0.5, training=True, inplace=False):
    """Zero whole channels of a [N, C, L] (or [C, L]) input; as PaddlePaddle's, one draw per
    channel serves the whole batch (dropout along axis 1).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([2, 3, 8])                 # [N, C, L]: whole channels are dropped
        >>> y = F.dropout1d(x, p=0.5).numpy()
        >>> all(len(set(row.tolist())) == 1 for row in y.reshape(6, 8))
        True
    """
    if input.ndim not in (2, 3):
        _fail("dropout1d", f"expects a 2-d or 3-d input, got {input.name} {input.type_string()}")
    if input.ndim == 2:
        return T.squeeze(dropout(T.unsqueeze(input, [0]), p, 1, training), [0])
    return dropout(input, p, 1, training)


def dropout2d(x, p=0.5, training=True, data_format="NCHW", name=None):
    """Zero whole channels of a 4-d input (dropout along the batch and channel axes).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([2, 3, 4, 4])              # [N, C, H, W]: whole channels are dropped
        >>> y = F.dropout2d(x, p=0.5).numpy()
        >>> all(len(set(c.ravel().tolist())) == 1 for c in y.reshape(6, 4, 4))
        True
        >>> F.dropout2d(x, p=0.5, training=False).shape
        [2, 3, 4, 4]
    """
    return _channel_dropout("dropout2d", x, p, training, data_format, 2, name)


def dropout3d(x, p=0.5, training=True, data_format="NCDHW", name=None):
    """Zero whole channels of a 5-d input.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([1, 2, 2, 3, 3])           # [N, C, D, H, W]: whole channels are dropped
        >>> y = F.dropout3d(x, p=0.5).numpy()
        >>> all(len(set(c.ravel().tolist())) == 1 for c in y.reshape(2, 18))
        True
    """
    return _channel_dropout("dropout3d", x, p, training, data_format, 3, name)


def embedding(x, weight, padding_idx=None, max_norm=None, norm_type=2.0, sparse=False, scale_grad_by_freq=False,
              name=None):
    """Rows of weight [num_embeddings, dim] at the ids x (op lookup_table_v2). The row
    `padding_idx` (negative: from the end) reads as zeros and gets no gradient.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> weight = paddle.to_tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
        >>> ids = paddle.to_tensor([[2, 0], [1, 1]])
        >>> print(F.embedding(ids, weight).numpy())
        [[[2. 2.]
          [0. 0.]]
        <BLANKLINE>
         [[1. 1.]
          [1. 1.]]]
    """
    if x.dtype not in (pb.VarType.INT32, pb.VarType.INT64):
        _fail("embedding", f"ids must be int64 (or int32), got {x.name} {x.type_string()}", DTypeError)
    if max_norm is not None or scale_grad_by_freq:
        _fail("embedding", "max_norm and scale_grad_by_freq are not supported (no embedding_renorm op)", AttrError)
    vocab = weight.shape[0]
    if padding_idx is None:
        pad = -1
    else:
        pad = int(padding_idx)
        if vocab >= 0 and not -vocab <= pad < vocab:
            _fail("embedding", f"padding_idx {padding_idx} is out of range for {vocab} embeddings", AttrError)
        if pad < 0:
            pad += vocab
    helper = LayerHelper("embedding", name)
    out = helper.create_tmp(weight.dtype)
    helper.append_op("lookup_table_v2", {"Ids": x, "W": weight}, {"Out": out}, {"padding_idx": pad})
    return out


def one_hot(x, num_classes=-1, name=None):
    """float32 x.shape + [num_classes] with 1 at each class id (op one_hot_v2); -1: max(x) + 1.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> label = paddle.to_tensor([1, 1, 3, 0])
        >>> print(F.one_hot(label, num_classes=4).numpy())
        [[0. 1. 0. 0.]
         [0. 1. 0. 0.]
         [0. 0. 0. 1.]
         [1. 0. 0. 0.]]
    """
    if isinstance(num_classes, numbers.Integral) and num_classes == -1:
        num_classes = M.cast(M.scale(M.max(x), 1.0, 1.0), "int32")
    return T.one_hot(x, num_classes, name)


def pad(x, pad, mode="constant", value=0.0, data_format=None, pad_from_left_axis=True, name=None):
    """Pad x. mode 'constant' with a `pad` of other than 2*(ndim-2) values pads any dims
    (op pad): 2*ndim values [before_0, after_0, ...] from the first axis (the last first when
    pad_from_left_axis is False, or when fewer are given). Otherwise `pad` covers the spatial
    dims of a 3/4/5-d input from the last one on ([left, right, top, bottom, front, back];
    op pad3d), in mode 'constant', 'reflect', 'replicate' or 'circular'.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[1.0, 2.0, 3.0]]])     # [N, C, L]
        >>> print(F.pad(x, [1, 2], mode="constant", value=0.0).numpy())
        [[[0. 1. 2. 3. 0. 0.]]]
        >>> print(F.pad(x, [2, 0], mode="reflect").numpy())
        [[[3. 2. 1. 2. 3.]]]
    """
    if mode not in ("constant", "reflect", "replicate", "circular"):
        _fail("pad", f"mode must be 'constant', 'reflect', 'replicate' or 'circular', got {mode!r}", AttrError)
    nd = x.ndim
    if isinstance(pad, Variable):
        _fail("pad", "a pad tensor is not supported; give a list of ints", AttrError)
    pad = [int(p) for p in pad]
    if mode == "constant" and len(pad) != (nd - 2) * 2:
        if len(pad) > 2 * nd or len(pad) % 2:
            _fail("pad", f"pad {pad} must hold an even number of values, at most {2 * nd}", AttrError)
        paddings = pad + [0] * (2 * nd - len(pad))
        if not (len(pad) == 2 * nd and pad_from_left_axis):
            # the pairs are given from the last axis on
            pairs = [paddings[2 * i:2 * i + 2] for i in range(nd)]
            paddings = [v for pair in reversed(pairs) for v in pair]
        return T.pad(x, paddings, float(value), name)
    if nd not in (3, 4, 5):
        _fail("pad", f"mode {mode!r} needs a 3-, 4- or 5-d input, got {x.name} {x.type_string()}")
    formats = {3: ("NCL", "NLC"), 4: ("NCHW", "NHWC"), 5: ("NCDHW", "NDHWC")}[nd]
    data_format = (data_format or formats[0]).upper()
    if data_format not in formats:
        _fail("pad", f"data_format for a {nd}-d input must be {' or '.join(formats)}, got {data_format!r}",
              AttrError)
    if len(pad) != 2 * (nd - 2):
        _fail("pad", f"pad must hold {2 * (nd - 2)} values for a {nd}-d input in mode {mode!r}, got {pad}",
              AttrError)
    channel_last = data_format == formats[1]
    # as a 5-d NCDHW/NDHWC input: the missing spatial dims are inserted with size 1
    extra = {3: ([2, 3] if channel_last else [3, 4]), 4: ([1] if channel_last else [2]), 5: []}[nd]
    pads = {3: [0, 0, 0, 0, *pad], 4: [*pad, 0, 0], 5: pad}[nd]
    xx = T.unsqueeze(x, extra) if extra else x
    helper = LayerHelper("pad3d", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("pad3d", {"X": xx}, {"Out": out},
                     {"paddings": pads, "mode": mode, "value": float(value),
                      "data_format": "NDHWC" if channel_last else "NCDHW"})
    return T.squeeze(out, extra) if extra else out


_INTERP_DIMS = {3: ("NCW", "NWC"), 4: ("NCHW", "NHWC"), 5: ("NCDHW", "NDHWC")}
_INTERP_MODES = {"nearest": (3, 4, 5), "linear": (3,), "bilinear": (4,), "trilinear": (5,), "area": (3, 4, 5)}


def zeropad2d(x, padding, data_format="NCHW", name=None):
    """Pad a 4-d input's H and W with zeros: padding [left, right, top, bottom].

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([1, 1, 2, 2])
        >>> print(F.zeropad2d(x, [1, 0, 0, 1]).numpy()[0, 0])    # [left, right, top, bottom]
        [[0. 1. 1.]
         [0. 1. 1.]
         [0. 0. 0.]]
    """
    return pad(x, padding, "constant", 0.0, data_format, name=name)


def interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=False, align_mode=0,
                data_format=None, recompute_scale_factor=None, antialias=False, name=None):
    """Resize the spatial dims of a 3-, 4- or 5-d x to `size` or by `scale_factor` (ops
    nearest/linear/bilinear/trilinear_interp_v2; 'area' is adaptive average pooling).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
        >>> print(F.interpolate(x, scale_factor=2, mode="nearest").numpy()[0, 0])
        [[1. 1. 2. 2.]
         [1. 1. 2. 2.]
         [3. 3. 4. 4.]
         [3. 3. 4. 4.]]
        >>> F.interpolate(x, size=[3, 5], mode="bilinear").shape
        [1, 1, 3, 5]
    """
    layer = "interpolate"
    mode = mode.lower()
    nd = x.ndim
    if mode == "bicubic":
        _fail(layer, "mode 'bicubic' is not supported (Keel has no bicubic_interp_v2 op)", AttrError)
    if mode not in _INTERP_MODES:
        _fail(layer, f"mode must be one of {', '.join(_INTERP_MODES)}, got {mode!r}", AttrError)
    if nd not in _INTERP_MODES[mode]:
        _fail(layer, f"mode {mode!r} does not resize a {nd}-d input {x.name} {x.type_string()}")
    if antialias:
        _fail(layer, "antialias is not supported", AttrError)
    formats = _INTERP_DIMS[nd]
    data_format = data_format or formats[0]
    if data_format not in formats:
        _fail(layer, f"data_format for a {nd}-d input must be {' or '.join(formats)}, got {data_format!r}", AttrError)
    if (size is None) == (scale_factor is None):
        _fail(layer, "give exactly one of size and scale_factor", AttrError)
    if mode in ("nearest", "area") and align_corners:
        _fail(layer, f"align_corners must be False for mode {mode!r}", AttrError)
    if align_mode not in (0, 1):
        _fail(layer, f"align_mode must be 0 or 1, got {align_mode}", AttrError)
    channel_last = data_format == formats[1]
    spatial = list(x.shape[1:-1] if channel_last else x.shape[2:])
    n = nd - 2
    if size is not None:
        sizes = [int(size)] * n if isinstance(size, numbers.Integral) else [int(s) for s in size]
        if len(sizes) != n:
            _fail(layer, f"size must give {n} values for a {nd}-d input, got {size!r}", AttrError)
        scales = []
    else:
        scales = [float(s) for s in scale_factor] if isinstance(scale_factor, (list, tuple)) \
            else [float(scale_factor)] * n
        if len(scales) != n or any(s <= 0 for s in scales):
            _fail(layer, f"scale_factor must be a positive number or {n} of them, got {scale_factor!r}", AttrError)
        sizes = None
        if recompute_scale_factor or mode == "area":
            if any(d < 0 for d in spatial):
                _fail(layer, f"the spatial dims of {x.name} {x.type_string()} must be known here")
            sizes, scales = [int(d * s) for d, s in zip(spatial, scales)], []
    if mode == "area":
        pool = {3: adaptive_avg_pool1d, 4: adaptive_avg_pool2d, 5: adaptive_avg_pool3d}[nd]
        if nd == 3:
            return pool(x, sizes[0], name=name)
        return pool(x, sizes, data_format=data_format, name=name)
    attrs = {"data_layout": "NHWC" if channel_last else "NCHW", "out_d": -1, "out_h": -1, "out_w": -1,
             "scale": scales, "interp_method": mode, "align_corners": bool(align_corners),
             "align_mode": int(align_mode)}
    if sizes is not None:
        attrs.update(zip(["out_d", "out_h", "out_w"][3 - n:], sizes))
    op_type = f"{mode}_interp_v2"
    helper = LayerHelper(op_type, name)
    out = helper.create_tmp(x.dtype)
    helper.append_op(op_type, {"X": x}, {"Out": out}, attrs)
    return out


def upsample(x, size=None, scale_factor=None, mode="nearest", align_corners=False, align_mode=0, data_format=None,
             name=None):
    """interpolate, under its other name.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
        >>> print(F.upsample(x, size=[4, 4], mode="nearest").numpy()[0, 0])
        [[1. 1. 2. 2.]
         [1. 1. 2. 2.]
         [3. 3. 4. 4.]
         [3. 3. 4. 4.]]
    """
    return interpolate(x, size, scale_factor, mode, align_corners, align_mode, data_format, name=name)


def label_smooth(label, prior_dist=None, epsilon=0.1, name=None):
    """(1 - epsilon) * label + epsilon * prior_dist (uniform 1/num_classes by default; op label_smooth).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> label = paddle.to_tensor([[[0.0, 1.0, 0.0], [1.0, 0.0, 1.0]]])
        >>> print(F.label_smooth(label, epsilon=0.1).numpy().round(4))
        [[[0.0333 0.9333 0.0333]
          [0.9333 0.0333 0.9333]]]
    """
    if not 0 <= epsilon <= 1:
        _fail("label_smooth", f"epsilon must be in [0, 1], got {epsilon}", AttrError)
    inputs = {"X": label}
    if prior_dist is not None:
        inputs["PriorDist"] = prior_dist
    helper = LayerHelper("label_smooth", name)
    out = helper.create_tmp(label.dtype)
    helper.append_op("label_smooth", inputs, {"Out": out}, {"epsilon": float(epsilon)})
    return out


# -- vision -------------------------------------------------------------------------------
def pixel_shuffle(x, upscale_factor, data_format="NCHW", name=None):
    """[N, C*r*r, H, W] -> [N, C, H*r, W*r] (op pixel_shuffle).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(8, dtype="float32").reshape([1, 8, 1, 1])
        >>> y = F.pixel_shuffle(x, upscale_factor=2)    # channels r*r*C to a 2x2 block each
        >>> y.shape
        [1, 2, 2, 2]
        >>> print(y.numpy()[0, 0])
        [[0. 1.]
         [2. 3.]]
    """
    _check_format("pixel_shuffle", data_format)
    helper = LayerHelper("pixel_shuffle", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("pixel_shuffle", {"X": x}, {"Out": out},
                     {"upscale_factor": int(upscale_factor), "data_format": data_format})
    return out


def _known_dims(layer, x, dims):
    if any(x.shape[d] < 0 for d in dims):
        _fail(layer, f"the channel and spatial dims of {x.name} {x.type_string()} must be known")


def pixel_unshuffle(x, downscale_factor, data_format="NCHW", name=None):
    """[N, C, H*r, W*r] -> [N, C*r*r, H, W], pixel_shuffle's inverse (reshape and transpose).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(16, dtype="float32").reshape([1, 1, 4, 4])
        >>> y = F.pixel_unshuffle(x, downscale_factor=2)
        >>> y.shape
        [1, 4, 2, 2]
        >>> print(y.numpy()[0, :, 0, 0])
        [0. 1. 4. 5.]
    """
    layer = "pixel_unshuffle"
    _check_format(layer, data_format)
    if x.ndim != 4:
        _fail(layer, f"expects a 4-d input, got {x.name} {x.type_string()}")
    _known_dims(layer, x, [1, 2, 3])
    r = int(downscale_factor)
    if data_format == "NCHW":
        _, c, h, w = x.shape
        if h % r or w % r:
            _fail(layer, f"H and W of {x.name} {x.type_string()} must be multiples of {r}")
        y = T.transpose(T.reshape(x, [-1, c, h // r, r, w // r, r]), [0, 1, 3, 5, 2, 4])
        return T.reshape(y, [-1, c * r * r, h // r, w // r], name=name)
    _, h, w, c = x.shape
    if h % r or w % r:
        _fail(layer, f"H and W of {x.name} {x.type_string()} must be multiples of {r}")
    y = T.transpose(T.reshape(x, [-1, h // r, r, w // r, r, c]), [0, 1, 3, 5, 2, 4])
    return T.reshape(y, [-1, h // r, w // r, c * r * r], name=name)


def channel_shuffle(x, groups, data_format="NCHW", name=None):
    """Channels [g0c0, g0c1, ..., g1c0, ...] -> [g0c0, g1c0, ..., g0c1, ...] for `groups`
    groups (reshape to [groups, C/groups], transpose, reshape back).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(6, dtype="float32").reshape([1, 6, 1, 1])
        >>> print(F.channel_shuffle(x, groups=3).numpy().ravel())
        [0. 2. 4. 1. 3. 5.]
    """
    layer = "channel_shuffle"
    _check_format(layer, data_format)
    if x.ndim != 4:
        _fail(layer, f"expects a 4-d input, got {x.name} {x.type_string()}")
    axis = 1 if data_format == "NCHW" else 3
    _known_dims(layer, x, [1, 2, 3])
    c = x.shape[axis]
    g = int(groups)
    if g <= 0 or c % g:
        _fail(layer, f"groups ({groups}) must divide the channels ({c}) of {x.name}", AttrError)
    shape = [d if i else -1 for i, d in enumerate(x.shape)]
    split = shape[:axis] + [g, c // g] + shape[axis + 1:]
    perm = list(range(5))
    perm[axis], perm[axis + 1] = axis + 1, axis
    return T.reshape(T.transpose(T.reshape(x, split), perm), shape, name=name)


def affine_grid(theta, out_shape, align_corners=True, name=None):
    """paddle.nn.functional.affine_grid: Theta [N, 2, 3] -> grid [N, H, W, 2] for out_shape
    [N, C, H, W] (a list, written as the output_shape attribute, or an int32 Variable,
    bound to the OutputShape input).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> theta = paddle.to_tensor([[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]])   # the identity transform
        >>> grid = F.affine_grid(theta, [1, 1, 2, 3], align_corners=True)
        >>> grid.shape
        [1, 2, 3, 2]
        >>> print(grid.numpy()[0, :, :, 0])    # x runs over [-1, 1]
        [[-1.  0.  1.]
         [-1.  0.  1.]]
    """
    helper = LayerHelper("affine_grid", name)
    out = helper.create_tmp(theta.dtype)
    if isinstance(out_shape, Variable):
        helper.append_op("affine_grid", {"Theta": theta, "OutputShape": out_shape}, {"Output": out},
                         {"align_corners": bool(align_corners), "output_shape": []})
    else:
        helper.append_op("affine_grid", {"Theta": theta}, {"Output": out},
                         {"align_corners": bool(align_corners), "output_shape": [int(v) for v in out_shape]})
    return out


def grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True, name=None):
    """paddle.nn.functional.grid_sample: op grid_sampler.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[[[1.0, 2.0], [3.0, 4.0]]]])          # [N, C, H, W]
        >>> grid = paddle.to_tensor([[[[-1.0, -1.0], [0.0, 0.0], [1.0, 1.0]]]])   # [N, 1, 3, 2]: (x, y) in [-1, 1]
        >>> print(F.grid_sample(x, grid, align_corners=True).numpy())
        [[[[1.  2.5 4. ]]]]
    """
    helper = LayerHelper("grid_sample", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("grid_sampler", {"X": x, "Grid": grid}, {"Output": out},
                     {"mode": mode, "padding_mode": padding_mode, "align_corners": bool(align_corners)})
    return out
