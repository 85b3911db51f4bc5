"""Layers of the tensor-manipulation and small math ops (program/ops/manip.py, and acos,
asin, atan, brelu, stanh): each appends the op PaddlePaddle's static-graph API appends, with
the same attributes, and names its outputs `<layer>_N.tmp_K`."""
from __future__ import annotations

from keel.program.layers.helper import LayerHelper
from keel.program.layers.tensor import full_like
from keel.program.variable import Variable
from keel.proto import pb

__all__ = [
    "tril", "triu", "argsort", "sort", "flip", "index_select", "roll", "take_along_axis", "put_along_axis",
    "einsum", "dist", "maxout", "l2_normalize", "scatter_nd_add", "shuffle_channel", "numel",
    "unfold", "acos", "asin", "atan", "brelu", "stanh",
]


def _one(op_type, inputs, attrs=None, *, name=None, layer=None, dtype=None, out="Out"):
    helper = LayerHelper(layer or op_type, name)
    result = helper.create_tmp(dtype if dtype is not None else next(iter(inputs.values())).dtype)
    helper.append_op(op_type, inputs, {out: result}, attrs)
    return result


def tril(x, diagonal=0, name=None):
    """x with the elements above the `diagonal`-th diagonal zeroed (op tril_triu).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.reshape(paddle.arange(1, 10), [3, 3])
        >>> print(paddle.tril(x).numpy())
        [[1 0 0]
         [4 5 0]
         [7 8 9]]
        >>> print(paddle.tril(x, diagonal=-1).numpy())
        [[0 0 0]
         [4 0 0]
         [7 8 0]]
    """
    return _one("tril_triu", {"X": x}, {"diagonal": int(diagonal), "lower": True}, name=name, layer="tril")


def triu(x, diagonal=0, name=None):
    """x with the elements below the `diagonal`-th diagonal zeroed (op tril_triu).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.reshape(paddle.arange(1, 10), [3, 3])
        >>> print(paddle.triu(x, diagonal=1).numpy())
        [[0 2 3]
         [0 0 6]
         [0 0 0]]
    """
    return _one("tril_triu", {"X": x}, {"diagonal": int(diagonal), "lower": False}, name=name, layer="triu")


def argsort(x, axis=-1, descending=False, stable=False, name=None, return_values=False):
    """int64 positions sorting x along `axis` (op argsort); with `return_values`, (values,
    indices).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[5.0, 1.0, 3.0], [2.0, 6.0, 4.0]])
        >>> print(paddle.argsort(x).numpy())
        [[1 2 0]
         [0 2 1]]
        >>> print(paddle.argsort(x, axis=0, descending=True).numpy())
        [[0 1 1]
         [1 0 0]]
        >>> values, indices = paddle.argsort(x, return_values=True)      # values sorted, as paddle.sort
        >>> print(values.numpy())
        [[1. 3. 5.]
         [2. 4. 6.]]
    """
    helper = LayerHelper("argsort", name)
    values = helper.create_tmp(x.dtype)
    indices = helper.create_tmp(pb.VarType.INT64, stop_gradient=True)
    helper.append_op("argsort", {"X": x}, {"Out": values, "Indices": indices},
                     {"axis": int(axis), "descending": bool(descending), "stable": bool(stable)})
    return (values, indices) if return_values else indices


def sort(x, axis=-1, descending=False, stable=False, name=None):
    """x's values sorted along `axis` (op argsort's Out, as PaddlePaddle's paddle.sort builds it).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[5.0, 1.0, 3.0], [2.0, 6.0, 4.0]])
        >>> print(paddle.sort(x).numpy())
        [[1. 3. 5.]
         [2. 4. 6.]]
        >>> print(paddle.sort(x, axis=0, descending=True).numpy())
        [[5. 6. 4.]
         [2. 1. 3.]]
    """
    return argsort(x, axis, descending, stable, name, return_values=True)[0]


def flip(x, axis, name=None):
    """x with the order of its elements reversed along each dim of `axis` (op flip).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.reshape(paddle.arange(6), [3, 2])
        >>> print(paddle.flip(x, axis=0).numpy())
        [[4 5]
         [2 3]
         [0 1]]
        >>> print(paddle.flip(x, axis=[0, 1]).numpy())
        [[5 4]
         [3 2]
         [1 0]]
    """
    axes = [axis] if isinstance(axis, int) else [int(a) for a in axis]
    return _one("flip", {"X": x}, {"axis": axes}, name=name)


def index_select(x, index, axis=0, name=None):
    """x's slices at `index` along `axis` (op index_select).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0], [9.0, 10.0, 11.0, 12.0]])
        >>> index = paddle.to_tensor([0, 1, 1])
        >>> print(paddle.index_select(x, index).numpy())
        [[1. 2. 3. 4.]
         [5. 6. 7. 8.]
         [5. 6. 7. 8.]]
        >>> print(paddle.index_select(x, index, axis=1).numpy())
        [[ 1.  2.  2.]
         [ 5.  6.  6.]
         [ 9. 10. 10.]]
    """
    return _one("index_select", {"X": x, "Index": index}, {"dim": int(axis)}, name=name)


def roll(x, shifts, axis=None, name=None):
    """x rolled by `shifts` (ints or a Variable) along `axis` (None: flattened; op roll).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
        >>> print(paddle.roll(x, shifts=1).numpy())              # flattened, then rolled
        [[9 1 2]
         [3 4 5]
         [6 7 8]]
        >>> print(paddle.roll(x, shifts=1, axis=0).numpy())
        [[7 8 9]
         [1 2 3]
         [4 5 6]]
    """
    inputs, attrs = {"X": x}, {"axis": [] if axis is None else ([axis] if isinstance(axis, int) else list(axis))}
    if isinstance(shifts, Variable):
        inputs["ShiftsTensor"] = shifts
        attrs["shifts"] = []
    else:
        attrs["shifts"] = [shifts] if isinstance(shifts, int) else [int(s) for s in shifts]
    return _one("roll", inputs, attrs, name=name)


def take_along_axis(arr, indices, axis, name=None):
    """The elements of `arr` at `indices` along `axis` (op take_along_axis); `indices`
    has arr's rank and broadcasts against it on the other dims.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 2, 3], [4, 5, 6], [7, 8, 9]])
        >>> index = paddle.to_tensor([[0, 2, 1]])
        >>> print(paddle.take_along_axis(x, index, axis=0).numpy())
        [[1 8 6]]
    """
    return _one("take_along_axis", {"Input": arr, "Index": indices}, {"Axis": int(axis)}, name=name, out="Result")


def put_along_axis(arr, indices, values, axis, reduce="assign", include_self=True, name=None):
    """arr with `values` put (or reduced: "add", "mul", "mean", "amax", "amin") at `indices`
    along `axis` (op put_along_axis); a number for `values` is put at every index, as in
    PaddlePaddle.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[10, 30, 20], [60, 40, 50]])
        >>> index = paddle.to_tensor([[0], [2]])
        >>> print(paddle.put_along_axis(x, index, 99, axis=1).numpy())
        [[99 30 20]
         [60 40 99]]
        >>> print(paddle.put_along_axis(x, index, paddle.to_tensor([[1], [2]]), axis=1, reduce="add").numpy())
        [[11 30 20]
         [60 40 52]]
    """
    if not isinstance(values, Variable):
        values = full_like(indices, values, dtype=arr.dtype)
    return _one("put_along_axis", {"Input": arr, "Index": indices, "Value": values},
                {"Axis": int(axis), "Reduce": reduce, "Include_self": bool(include_self)}, name=name,
                out="Result")


def einsum(equation, *operands, name=None):
    """The Einstein summation of one or two operands (op einsum). Without '->' (the implicit
    form) the output labels are PaddlePaddle's (and numpy's): '...' where the operands have it,
    then the labels that occur once, in alphabetical order.

    Examples:
        >>> import keel as paddle
        >>> a = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> b = paddle.to_tensor([[1.0, 0.0], [1.0, 1.0]])
        >>> print(paddle.einsum("ij,jk->ik", a, b).numpy())     # matrix product
        [[3. 2.]
         [7. 4.]]
        >>> print(paddle.einsum("ii", a).numpy())               # trace
        5.0
        >>> print(paddle.einsum("ij->ji", a).numpy())           # transpose
        [[1. 3.]
         [2. 4.]]
    """
    equation = _explicit_einsum(equation)
    helper = LayerHelper("einsum", name)
    out = helper.create_tmp(operands[0].dtype)
    caches = [helper.create_tmp(o.dtype, stop_gradient=True) for o in operands]
    shapes = [helper.create_tmp(o.dtype, stop_gradient=True) for o in operands]
    helper.append_op("einsum", {"Operands": list(operands)},
                     {"Out": out, "InnerCache": caches, "XShape": shapes}, {"equation": equation})
    return out


def _explicit_einsum(equation: str) -> str:
    """The equation with its output labels written out (the op needs them)."""
    if "->" in equation:
        return equation
    inputs = equation.replace(" ", "")
    labels = inputs.replace("...", "").replace(",", "")
    once = sorted(label for label in set(labels) if labels.count(label) == 1)
    return f"{inputs}->{'...' if '...' in inputs else ''}{''.join(once)}"


def dist(x, y, p=2.0, name=None):
    """The p-norm of x - y, 0-d (op dist).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[3.0, 3.0], [3.0, 3.0]])
        >>> y = paddle.to_tensor([[3.0, 3.0], [3.0, 1.0]])
        >>> print(paddle.dist(x, y).numpy(), paddle.dist(x, y, p=0).numpy(), paddle.dist(x, y, p=float("inf")).numpy())
        2.0 1.0 2.0
    """
    return _one("dist", {"X": x, "Y": y}, {"p": float(p)}, name=name)


def maxout(x, groups, axis=1, name=None):
    return _one("maxout", {"X": x}, {"groups": int(groups), "axis": int(axis)}, name=name)


def l2_normalize(x, axis, epsilon=1e-12, name=None):
    """x / sqrt(sum(x^2, axis) + epsilon) (op norm, as fluid's l2_normalize)."""
    helper = LayerHelper("l2_normalize", name)
    out = helper.create_tmp(x.dtype)
    norm = helper.create_tmp(x.dtype, stop_gradient=True)
    helper.append_op("norm", {"X": x}, {"Out": out, "Norm": norm},
                     {"axis": 1 if len(x.shape) == 1 else int(axis), "epsilon": float(epsilon)})
    return out


def scatter_nd_add(x, index, updates, name=None):
    """x with each row of `updates` added at the position its row of `index` names (a prefix of
    x's dimensions); repeated positions add up (op scatter_nd_add).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.zeros([3, 2])
        >>> index = paddle.to_tensor([[1], [0], [1]])
        >>> updates = paddle.to_tensor([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
        >>> print(paddle.scatter_nd_add(x, index, updates).numpy())    # repeated indices add up
        [[2. 2.]
         [4. 4.]
         [0. 0.]]
    """
    return _one("scatter_nd_add", {"X": x, "Index": index, "Updates": updates}, name=name)


def shuffle_channel(x, group, name=None):
    return _one("shuffle_channel", {"X": x}, {"group": int(group)}, name=name)


def numel(x, name=None):
    """The number of elements of x, an int64 0-d tensor (op size).

    Examples:
        >>> import keel as paddle
        >>> int(paddle.numel(paddle.ones([3, 5])))
        15
    """
    return _one("size", {"Input": x}, name=name, layer="numel", dtype=pb.VarType.INT64)


def _pair(v):
    return [int(v), int(v)] if isinstance(v, int) else [int(a) for a in v]


def _pads4(paddings):
    """An int, 2 values [h, w] or 4 [top, left, bottom, right] as the 4."""
    if isinstance(paddings, int):
        return [paddings] * 4
    pads = [int(p) for p in paddings]
    return pads + pads if len(pads) == 2 else pads


def unfold(x, kernel_sizes, strides=1, paddings=0, dilations=1, name=None):
    """im2col of an NCHW x: [N, C*kh*kw, L] (op unfold); paddings an int, 2 values
    [h, w] or 4 [top, left, bottom, right].

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.arange(16, dtype="float32").reshape([1, 1, 4, 4])
        >>> F.unfold(x, kernel_sizes=2, strides=2).shape   # 2x2 patches as columns: C*2*2 rows, 4 patches
        [1, 4, 4]
    """
    return _one("unfold", {"X": x}, {"kernel_sizes": _pair(kernel_sizes), "strides": _pair(strides),
                                     "paddings": _pads4(paddings), "dilations": _pair(dilations)}, name=name, out="Y")


def fold(x, output_sizes, kernel_sizes, strides=1, paddings=0, dilations=1, name=None):
    """col2im (PaddlePaddle's paddle.nn.functional.fold): x [N, C*kh*kw, L] into [N, C, H, W]
    = output_sizes, overlapping blocks summed; the adjoint of unfold with the same arguments.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.ones([1, 4, 9])                     # 1 channel, 2x2 blocks, 3x3 positions
        >>> F.fold(x, output_sizes=[4, 4], kernel_sizes=2).numpy()[0, 0]   # how many blocks cover each pixel
        array([[1., 2., 2., 1.],
               [2., 4., 4., 2.],
               [2., 4., 4., 2.],
               [1., 2., 2., 1.]], dtype=float32)
    """
    return _one("fold", {"X": x}, {"output_sizes": _pair(output_sizes), "kernel_sizes": _pair(kernel_sizes),
                                   "strides": _pair(strides), "paddings": _pads4(paddings),
                                   "dilations": _pair(dilations)}, name=name, out="Y")


def acos(x, name=None):
    """The arccosine, elementwise (radians).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.acos(x).numpy().round(4))
        [1.9823 1.7722 1.4706 1.2661]
    """
    return LayerHelper("acos", name).unary("acos", x)


def asin(x, name=None):
    """The arcsine, elementwise (radians).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.asin(x).numpy().round(4))
        [-0.4115 -0.2014  0.1002  0.3047]
    """
    return LayerHelper("asin", name).unary("asin", x)


def atan(x, name=None):
    """The arctangent, elementwise (radians).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.atan(x).numpy().round(4))
        [-0.3805 -0.1974  0.0997  0.2915]
    """
    return LayerHelper("atan", name).unary("atan", x)


def brelu(x, t_min=0.0, t_max=24.0, name=None):
    return LayerHelper("brelu", name).unary("brelu", x, {"t_min": float(t_min), "t_max": float(t_max)})


def stanh(x, scale_a=0.67, scale_b=1.7159, name=None):
    """scale_b * tanh(scale_a * x), elementwise.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0, 3.0, 4.0])
        >>> print(paddle.stanh(x, scale_a=0.67, scale_b=1.72).numpy().round(4))
        [1.0062 1.4993 1.6593 1.7039]
    """
    return LayerHelper("stanh", name).unary("stanh", x, {"scale_a": float(scale_a), "scale_b": float(scale_b)})
