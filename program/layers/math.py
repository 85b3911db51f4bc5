"""Math layers: elementwise arithmetic, matrix products, reductions, comparisons and logic,
activations, and the ops behind the Python operators on `Variable` (`a + b`, `a @ b`,
`a < 2.0`, `-a`, ...).

Each layer appends the op PaddlePaddle's static-graph API appends, with the same
attributes, and names its outputs `<layer>_N.tmp_K` (`relu_0.tmp_0`). Operators name
theirs `tmp_N`, as PaddlePaddle does.

This module defines `sum`, `max`, `min`, `abs`, `round`, `pow`, `all` and `any` (PaddlePaddle's
names), shadowing the builtins inside it."""
from __future__ import annotations

import numbers

import numpy as np

from keel.program import dtypes, unique_name
from keel.program.errors import AttrError, DTypeError
from keel.program.layers.helper import LayerHelper
from keel.program.layers.tensor import _fail, _is_scalar, fill_constant, full_like
from keel.program.variable import Variable
from keel.proto import pb

_T = pb.VarType

__all__ = [
    # elementwise arithmetic
    "add", "subtract", "multiply", "divide", "pow", "maximum", "minimum", "floor_divide",
    "remainder", "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
    # products
    "matmul", "mm", "bmm",
    # scale, clip, cast, sums and means
    "scale", "clip", "cast", "sum", "add_n", "mean", "reduce_sum", "reduce_mean", "reduce_max",
    "reduce_min", "reduce_prod", "max", "min", "prod", "all", "any",
    # comparisons and logic
    "equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal",
    "logical_and", "logical_or", "logical_xor", "logical_not", "isnan", "isinf", "isfinite",
    # activations
    "relu", "relu6", "leaky_relu", "gelu", "tanh", "sigmoid", "hard_swish", "hard_sigmoid",
    "swish", "silu", "mish", "elu", "selu", "celu", "softplus", "softsign", "log_sigmoid",
    "tanh_shrink", "thresholded_relu", "exp", "expm1", "log", "log2", "log10", "log1p", "sqrt",
    "rsqrt", "abs", "square", "reciprocal", "floor", "ceil", "round", "sign", "sin", "cos",
    "erf", "softmax", "log_softmax",
    # scans, search, selection, norms
    "cumsum", "argmax", "argmin", "topk", "where", "norm",
]


def _scalar_var(value, like: Variable) -> Variable:
    """A 0-d constant of `like`'s dtype for a Python number used as a layer operand."""
    return fill_constant([], like.dtype, value)


# -- elementwise arithmetic -------------------------------------------------------------------
def _elementwise(op_type, x, y, axis=-1, name=None):
    if _is_scalar(y):
        y = _scalar_var(y, x)
    elif _is_scalar(x):
        x = _scalar_var(x, y)
    helper = LayerHelper(op_type, name)
    out = helper.create_tmp(x.dtype)
    helper.append_op(op_type, {"X": x, "Y": y}, {"Out": out}, {"axis": int(axis)})
    return out


def add(x, y, axis=-1, name=None):
    """x + y (op elementwise_add). With axis=-1 shapes broadcast as in numpy; otherwise y's
    dims align with x's starting at dimension `axis`.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> y = paddle.to_tensor([10.0, 20.0])                # broadcast over the rows
        >>> print(paddle.add(x, y).numpy())
        [[11. 22.]
         [13. 24.]]
    """
    return _elementwise("elementwise_add", x, y, axis, name)


def subtract(x, y, axis=-1, name=None):
    """x - y (op elementwise_sub).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([5.0, 6.0, 7.0])
        >>> print(paddle.subtract(x, paddle.to_tensor([1.0, 2.0, 3.0])).numpy())
        [4. 4. 4.]
    """
    return _elementwise("elementwise_sub", x, y, axis, name)


def multiply(x, y, axis=-1, name=None):
    """x * y (op elementwise_mul).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 2], [3, 4]])
        >>> print(paddle.multiply(x, paddle.to_tensor([[5, 6], [7, 8]])).numpy())
        [[ 5 12]
         [21 32]]
    """
    return _elementwise("elementwise_mul", x, y, axis, name)


def divide(x, y, axis=-1, name=None):
    """x / y (op elementwise_div).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([2.0, 3.0, 4.0])
        >>> print(paddle.divide(x, paddle.to_tensor([1.0, 5.0, 2.0])).numpy())
        [2.  0.6 2. ]
    """
    return _elementwise("elementwise_div", x, y, axis, name)


def floor_divide(x, y, axis=-1, name=None):
    """floor(x / y) for integers (op elementwise_floordiv).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([2, 3, 8, 7])
        >>> print(paddle.floor_divide(x, paddle.to_tensor([1, 5, 3, 3])).numpy())
        [2 0 2 2]
    """
    return _elementwise("elementwise_floordiv", x, y, axis, name)


def remainder(x, y, axis=-1, name=None):
    """x mod y with the sign of y (op elementwise_mod).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([2, 3, 8, 7])
        >>> print(paddle.remainder(x, paddle.to_tensor([1, 5, 3, 3])).numpy())
        [0 3 2 1]
    """
    return _elementwise("elementwise_mod", x, y, axis, name)


def maximum(x, y, axis=-1, name=None):
    """max(x, y) elementwise (op elementwise_max).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 2], [7, 8]])
        >>> print(paddle.maximum(x, paddle.to_tensor([[3, 4], [5, 6]])).numpy())
        [[3 4]
         [7 8]]
    """
    return _elementwise("elementwise_max", x, y, axis, name)


def minimum(x, y, axis=-1, name=None):
    """min(x, y) elementwise (op elementwise_min).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 2], [7, 8]])
        >>> print(paddle.minimum(x, paddle.to_tensor([[3, 4], [5, 6]])).numpy())
        [[1 2]
         [5 6]]
    """
    return _elementwise("elementwise_min", x, y, axis, name)


# fluid-era spellings
elementwise_add, elementwise_sub, elementwise_mul, elementwise_div = add, subtract, multiply, divide


def pow(x, y, name=None):
    """x ** y: op `pow` (attr factor) for a number y, op elementwise_pow for a Variable y.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0, 3.0])
        >>> print(paddle.pow(x, 2).numpy())
        [1. 4. 9.]
        >>> print(paddle.pow(x, paddle.to_tensor([2.0, 3.0, 0.5])).numpy().round(4))
        [1.     8.     1.7321]
    """
    if isinstance(y, Variable):
        return _elementwise("elementwise_pow", x, y, -1, name)
    helper = LayerHelper("pow", name)
    return helper.unary("pow", x, {"factor": float(y)})


# -- matrix products ---------------------------------------------------------------------------
def matmul(x, y, transpose_x=False, transpose_y=False, name=None):
    """x @ y with numpy's matmul rules (op matmul_v2); transpose_x/transpose_y transpose the
    last two dims of that operand first.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([10, 2, 3])
        >>> y = paddle.rand([3, 4])
        >>> paddle.matmul(x, y).shape                          # batched, y broadcast
        [10, 2, 4]
        >>> a = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> print(paddle.matmul(a, a, transpose_y=True).numpy())
        [[ 5. 11.]
         [11. 25.]]
    """
    helper = LayerHelper("matmul_v2", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("matmul_v2", {"X": x, "Y": y}, {"Out": out},
                     {"trans_x": bool(transpose_x), "trans_y": bool(transpose_y)})
    return out


def mm(input, mat2, name=None):
    """Matrix product input @ mat2 (op matmul_v2).

    Examples:
        >>> import keel as paddle
        >>> a = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> b = paddle.to_tensor([[1.0, 0.0], [1.0, 1.0]])
        >>> print(paddle.mm(a, b).numpy())
        [[3. 2.]
         [7. 4.]]
    """
    helper = LayerHelper("mm", name)
    out = helper.create_tmp(input.dtype)
    helper.append_op("matmul_v2", {"X": input, "Y": mat2}, {"Out": out},
                     {"trans_x": False, "trans_y": False})
    return out


def bmm(x, y, name=None):
    """Batched product of 3-D tensors [B, M, K] @ [B, K, N] (op bmm).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[[1.0, 1.0, 1.0], [2.0, 2.0, 2.0]], [[3.0, 3.0, 3.0], [4.0, 4.0, 4.0]]])
        >>> y = paddle.ones([2, 3, 2])
        >>> print(paddle.bmm(x, y).numpy())     # one matrix product per batch entry
        [[[ 3.  3.]
          [ 6.  6.]]
        <BLANKLINE>
         [[ 9.  9.]
          [12. 12.]]]
    """
    helper = LayerHelper("bmm", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("bmm", {"X": x, "Y": y}, {"Out": out})
    return out


# -- scale, clip, cast -------------------------------------------------------------------------------
def scale(x, scale=1.0, bias=0.0, bias_after_scale=True, act=None, name=None):
    """scale * x + bias (or scale * (x + bias) unless bias_after_scale); op scale. `scale`
    may be a 1-element Variable.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0, 3.0])
        >>> print(paddle.scale(x, scale=2.0, bias=1.0).numpy())              # 2 x + 1
        [3. 5. 7.]
        >>> print(paddle.scale(x, scale=2.0, bias=1.0, bias_after_scale=False).numpy())   # 2 (x + 1)
        [4. 6. 8.]
    """
    helper = LayerHelper("scale", name)
    inputs = {"X": x}
    attrs = {"bias": float(bias), "bias_after_scale": bool(bias_after_scale)}
    if isinstance(scale, Variable):
        inputs["ScaleTensor"] = scale
    else:
        attrs["scale"] = float(scale)
    out = helper.create_tmp(x.dtype)
    helper.append_op("scale", inputs, {"Out": out}, attrs)
    return helper.append_activation(out, act)


_FLOAT32_MIN, _FLOAT32_MAX = float(np.finfo(np.float32).min), float(np.finfo(np.float32).max)


def clip(x, min=None, max=None, name=None):
    """Clamp x to [min, max] (op clip); a missing bound is float32's extreme, and a bound may
    be a 1-element Variable (inputs Min/Max).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.2, 3.5], [4.5, 6.4]])
        >>> print(paddle.clip(x, min=3.5, max=5.0).numpy())
        [[3.5 3.5]
         [4.5 5. ]]
        >>> print(paddle.clip(x, min=2.0).numpy())
        [[2.  3.5]
         [4.5 6.4]]
    """
    helper = LayerHelper("clip", name)
    inputs = {"X": x}
    attrs = {"min": _FLOAT32_MIN, "max": _FLOAT32_MAX}
    for key, value in (("min", min), ("max", max)):
        if isinstance(value, Variable):
            inputs[key.capitalize()] = value
        elif value is not None:
            attrs[key] = float(value)
    out = helper.create_tmp(x.dtype)
    helper.append_op("clip", inputs, {"Out": out}, attrs)
    return out


def cast(x, dtype, name=None):
    """x converted to `dtype` (op cast).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.7, -2.3, 3.0])
        >>> y = paddle.cast(x, "int64")
        >>> print(y.numpy(), y.numpy().dtype)                  # truncated toward 0
        [ 1 -2  3] int64
    """
    helper = LayerHelper("cast", name)
    code = dtypes.to_code(dtype)
    out = helper.create_tmp(code)
    helper.append_op("cast", {"X": x}, {"Out": out}, {"in_dtype": x.dtype, "out_dtype": code})
    return out


# -- sums, means and other reductions -----------------------------------------------------------
def add_n(inputs, name=None):
    """The elementwise sum of a list of tensors of one shape (op sum).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0])
        >>> print(paddle.add_n([x, x, paddle.to_tensor([0.5, 0.5])]).numpy())
        [2.5 4.5]
    """
    helper = LayerHelper("add_n", name)
    xs = [inputs] if isinstance(inputs, Variable) else list(inputs)
    if not xs:
        _fail("add_n", "needs at least one input")
    out = helper.create_tmp(xs[0].dtype)
    helper.append_op("sum", {"X": xs}, {"Out": out})
    return out


def _reduce(op_type, layer, x, axis, keepdim, name, dtype=None, out_dtype=None):
    """PaddlePaddle 2.x reduction attributes: axis None (or all dims) reduces everything,
    recorded as reduce_all=True (dim [] when axis is None)."""
    helper = LayerHelper(layer, name)
    dims = [] if axis is None else ([int(axis)] if isinstance(axis, (int, np.integer)) else [int(a) for a in axis])
    attrs = {"dim": dims, "keep_dim": bool(keepdim),
             "reduce_all": axis is None or not dims or len(dims) == x.ndim}
    if dtype is not None:
        attrs.update(in_dtype=x.dtype, out_dtype=dtypes.to_code(dtype))
    out = helper.create_tmp(out_dtype if out_dtype is not None else
                            (x.dtype if dtype is None else dtypes.to_code(dtype)))
    helper.append_op(op_type, {"X": x}, {"Out": out}, attrs)
    return out


def sum(x, axis=None, dtype=None, keepdim=False, name=None):
    """A list of tensors -> their elementwise sum (op sum, like add_n). A tensor -> its sum
    over `axis` (all dims when None; op reduce_sum); `dtype` sets the result type (bool and
    int32 sums are int64 unless given).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[0.2, 0.3, 0.5, 0.9], [0.1, 0.2, 0.6, 0.7]])
        >>> round(float(paddle.sum(x)), 4)
        3.5
        >>> print(paddle.sum(x, axis=0).numpy().round(4))
        [0.3 0.5 1.1 1.6]
        >>> paddle.sum(x, axis=-1, keepdim=True).shape
        [2, 1]
    """
    if isinstance(x, (list, tuple)):
        return add_n(x, name)
    return _reduce("reduce_sum", "sum", x, axis, keepdim, name, dtype)


def mean(x, axis=None, keepdim=False, name=None):
    """The mean of all elements as a 0-d tensor (op mean), or over `axis` (op reduce_mean).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
        >>> float(paddle.mean(x))
        3.5
        >>> print(paddle.mean(x, axis=1).numpy())
        [2. 5.]
    """
    if axis is None and not keepdim:
        helper = LayerHelper("mean", name)
        return helper.unary("mean", x)
    return _reduce("reduce_mean", "mean", x, axis, keepdim, name)


def max(x, axis=None, keepdim=False, name=None):
    """The maximum over `axis` (all dims when None; op reduce_max).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[0.2, 0.3, 0.5, 0.9], [0.1, 0.2, 0.6, 0.7]])
        >>> round(float(paddle.max(x)), 4)
        0.9
        >>> print(paddle.max(x, axis=0).numpy())
        [0.2 0.3 0.6 0.9]
        >>> print(paddle.max(x, axis=-1, keepdim=True).numpy())
        [[0.9]
         [0.7]]
    """
    return _reduce("reduce_max", "max", x, axis, keepdim, name)


def min(x, axis=None, keepdim=False, name=None):
    """The minimum over `axis` (all dims when None; op reduce_min).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[0.2, 0.3, 0.5, 0.9], [0.1, 0.2, 0.6, 0.7]])
        >>> round(float(paddle.min(x)), 4)
        0.1
        >>> print(paddle.min(x, axis=0).numpy())
        [0.1 0.2 0.5 0.7]
    """
    return _reduce("reduce_min", "min", x, axis, keepdim, name)


def prod(x, axis=None, keepdim=False, name=None):
    """The product over `axis` (all dims when None; op reduce_prod).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> float(paddle.prod(x))
        24.0
        >>> print(paddle.prod(x, axis=1).numpy())
        [ 2. 12.]
    """
    return _reduce("reduce_prod", "reduce_prod", x, axis, keepdim, name)


def all(x, axis=None, keepdim=False, name=None):
    """Logical AND over `axis` (op reduce_all; bool result).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[True, False], [True, True]])
        >>> bool(paddle.all(x)), paddle.all(x, axis=0).numpy().tolist()
        (False, [True, False])
    """
    return _reduce("reduce_all", "all", x, axis, keepdim, name, out_dtype=_T.BOOL)


def any(x, axis=None, keepdim=False, name=None):
    """Logical OR over `axis` (op reduce_any; bool result).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[True, False], [False, False]])
        >>> bool(paddle.any(x)), paddle.any(x, axis=1).numpy().tolist()
        (True, [True, False])
    """
    return _reduce("reduce_any", "any", x, axis, keepdim, name, out_dtype=_T.BOOL)


# fluid-era spellings: reduce_sum(input, dim=None, keep_dim=False)
def reduce_sum(input, dim=None, keep_dim=False, name=None):
    return _reduce("reduce_sum", "reduce_sum", input, dim, keep_dim, name)


def reduce_mean(input, dim=None, keep_dim=False, name=None):
    return _reduce("reduce_mean", "reduce_mean", input, dim, keep_dim, name)


def reduce_max(input, dim=None, keep_dim=False, name=None):
    return _reduce("reduce_max", "reduce_max", input, dim, keep_dim, name)


def reduce_min(input, dim=None, keep_dim=False, name=None):
    return _reduce("reduce_min", "reduce_min", input, dim, keep_dim, name)


def reduce_prod(input, dim=None, keep_dim=False, name=None):
    return _reduce("reduce_prod", "reduce_prod", input, dim, keep_dim, name)


# -- comparisons and logic -----------------------------------------------------------------------------
def _compare(op_type, x, y, name):
    if _is_scalar(y):
        y = _scalar_var(y, x)
    helper = LayerHelper(op_type, name)
    out = helper.create_tmp(_T.BOOL, stop_gradient=True)
    helper.append_op(op_type, {"X": x, "Y": y}, {"Out": out}, {"axis": -1, "force_cpu": False})
    return out


def equal(x, y, name=None):
    """x == y elementwise, as bool (op equal).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> print(paddle.equal(x, paddle.to_tensor([1, 3, 2])).numpy())
        [ True False False]
    """
    return _compare("equal", x, y, name)


def not_equal(x, y, name=None):
    """x != y elementwise, as bool (op not_equal).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> print(paddle.not_equal(x, paddle.to_tensor([1, 3, 2])).numpy())
        [False  True  True]
    """
    return _compare("not_equal", x, y, name)


def less_than(x, y, name=None):
    """x < y elementwise, as bool (op less_than).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> print(paddle.less_than(x, paddle.to_tensor([1, 3, 2])).numpy())
        [False  True False]
    """
    return _compare("less_than", x, y, name)


def less_equal(x, y, name=None):
    """x <= y, elementwise with broadcasting, as a bool tensor.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> print(paddle.less_equal(x, paddle.to_tensor([1, 3, 2])).numpy())
        [ True  True False]
    """
    return _compare("less_equal", x, y, name)


def greater_than(x, y, name=None):
    """x > y elementwise, as bool (op greater_than).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> print(paddle.greater_than(x, paddle.to_tensor([1, 3, 2])).numpy())
        [False False  True]
    """
    return _compare("greater_than", x, y, name)


def greater_equal(x, y, name=None):
    """x >= y, elementwise with broadcasting, as a bool tensor.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> print(paddle.greater_equal(x, paddle.to_tensor([1, 3, 2])).numpy())
        [ True False  True]
    """
    return _compare("greater_equal", x, y, name)


def _logical(op_type, x, y=None, name=None):
    helper = LayerHelper(op_type, name)
    out = helper.create_tmp(_T.BOOL, stop_gradient=True)
    inputs = {"X": x} if y is None else {"X": x, "Y": y}
    helper.append_op(op_type, inputs, {"Out": out})
    return out


def logical_and(x, y, name=None):
    """x AND y elementwise (op logical_and).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([True, True, False])
        >>> print(paddle.logical_and(x, paddle.to_tensor([True, False, False])).numpy())
        [ True False False]
    """
    return _logical("logical_and", x, y, name)


def logical_or(x, y, name=None):
    """x or y, elementwise with broadcasting, as a bool tensor.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([True, False, True, False])
        >>> print(paddle.logical_or(x, paddle.to_tensor([True, True, False, False])).numpy())
        [ True  True  True False]
    """
    return _logical("logical_or", x, y, name)


def logical_xor(x, y, name=None):
    """x xor y, elementwise with broadcasting, as a bool tensor.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([True, False, True, False])
        >>> print(paddle.logical_xor(x, paddle.to_tensor([True, True, False, False])).numpy())
        [False  True  True False]
    """
    return _logical("logical_xor", x, y, name)


def logical_not(x, name=None):
    """NOT x elementwise (op logical_not).

    Examples:
        >>> import keel as paddle
        >>> print(paddle.logical_not(paddle.to_tensor([True, False])).numpy())
        [False  True]
    """
    return _logical("logical_not", x, None, name)


def isnan(x, name=None):
    """Whether each element is NaN (op isnan_v2).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([float("-inf"), -2.0, float("nan"), 3.0])
        >>> print(paddle.isnan(x).numpy())
        [False False  True False]
    """
    return _logical("isnan_v2", x, None, name)


def isinf(x, name=None):
    """True where x is +inf or -inf.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([float("-inf"), -2.0, 3.5, float("inf"), float("nan")])
        >>> print(paddle.isinf(x).numpy())
        [ True False False  True False]
    """
    return _logical("isinf_v2", x, None, name)


def isfinite(x, name=None):
    """True where x is neither infinite nor NaN.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([float("-inf"), -2.0, 3.5, float("inf"), float("nan")])
        >>> print(paddle.isfinite(x).numpy())
        [False  True  True False False]
    """
    return _logical("isfinite_v2", x, None, name)


# -- activations ----------------------------------------------------------------------------------
def _act(op_type, x, name=None, attrs=None, layer=None):
    return LayerHelper(layer or op_type, name).unary(op_type, x, attrs)


def relu(x, name=None):
    """max(x, 0).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-2.0, 0.0, 1.0])
        >>> print(F.relu(x).numpy())
        [0. 0. 1.]
    """
    return _act("relu", x, name)


def relu6(x, name=None):
    """min(max(x, 0), 6).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-1.0, 0.3, 6.5])
        >>> print(F.relu6(x).numpy())
        [0.  0.3 6. ]
    """
    return _act("relu6", x, name, {"threshold": 6.0})


def leaky_relu(x, negative_slope=0.01, name=None):
    """x if x >= 0 else negative_slope * x.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-2.0, 0.0, 1.0])
        >>> print(F.leaky_relu(x, negative_slope=0.1).numpy())
        [-0.2  0.   1. ]
    """
    return _act("leaky_relu", x, name, {"alpha": float(negative_slope)})


def gelu(x, approximate=False, name=None):
    """x * Phi(x); the tanh approximation with approximate=True.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-1.0, 0.0, 1.0])
        >>> print(F.gelu(x).numpy().round(4))
        [-0.1587  0.      0.8413]
        >>> print(F.gelu(x, approximate=True).numpy().round(4))
        [-0.1588  0.      0.8412]
    """
    return _act("gelu", x, name, {"approximate": bool(approximate)})


def tanh(x, name=None):
    """The hyperbolic tangent, elementwise.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.tanh(x).numpy().round(4))
        [-0.3799 -0.1974  0.0997  0.2913]
    """
    return _act("tanh", x, name)


def sigmoid(x, name=None):
    """1 / (1 + exp(-x)).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(F.sigmoid(x).numpy().round(4))
        [0.4013 0.4502 0.525  0.5744]
    """
    return _act("sigmoid", x, name)


def hard_swish(x, name=None):
    """x * relu6(x + 3) / 6.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-1.0, 0.0, 1.5, 4.0])
        >>> print(F.hardswish(x).numpy().round(4))
        [-0.3333  0.      1.125   4.    ]
    """
    return _act("hard_swish", x, name, {"threshold": 6.0, "scale": 6.0, "offset": 3.0}, "hardswish")


def hard_sigmoid(x, slope=0.1666667, offset=0.5, name=None):
    """clip(slope * x + offset, 0, 1).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-4.0, 0.0, 1.5, 4.0])
        >>> print(F.hardsigmoid(x).numpy().round(4))
        [0.   0.5  0.75 1.  ]
    """
    return _act("hard_sigmoid", x, name, {"slope": float(slope), "offset": float(offset)}, "hardsigmoid")


def swish(x, name=None):
    """x * sigmoid(x).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-2.0, 0.0, 1.0])
        >>> print(F.swish(x).numpy().round(4))
        [-0.2384  0.      0.7311]
    """
    return _act("swish", x, name, {"beta": 1.0})


def silu(x, name=None):
    """x * sigmoid(x).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([1.0, 2.0, 3.0, 4.0])
        >>> print(F.silu(x).numpy().round(4))
        [0.7311 1.7616 2.8577 3.9281]
    """
    return _act("silu", x, name)


def mish(x, name=None):
    """x * tanh(softplus(x)).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-5.0, 0.0, 5.0])
        >>> print(F.mish(x).numpy().round(4))
        [-0.0336  0.      4.9996]
    """
    return _act("mish", x, name, {"threshold": 20.0})


def elu(x, alpha=1.0, name=None):
    """x above 0, alpha * (exp(x) - 1) at or below it.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-1.0, 0.0, 2.0])
        >>> print(F.elu(x, alpha=0.2).numpy().round(4))
        [-0.1264  0.      2.    ]
    """
    return _act("elu", x, name, {"alpha": float(alpha)})


def selu(x, scale=1.0507009873554804934193349852946, alpha=1.6732632423543772848170429916717,
         name=None):
    """scale * x above 0, scale * alpha * (exp(x) - 1) at or below it (self-normalizing constants by default).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[0.0, 1.0], [2.0, 3.0]])
        >>> print(F.selu(x).numpy().round(4))
        [[0.     1.0507]
         [2.1014 3.1521]]
    """
    return _act("selu", x, name, {"scale": float(scale), "alpha": float(alpha)})


def celu(x, alpha=1.0, name=None):
    """alpha * (exp(x / alpha) - 1) below 0, x above: max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-1.0, 0.0, 2.0])
        >>> print(F.celu(x, alpha=0.5).numpy().round(4))
        [-0.4323  0.      2.    ]
    """
    return _act("celu", x, name, {"alpha": float(alpha)})


def softplus(x, beta=1.0, threshold=20.0, name=None):
    """log(1 + exp(beta * x)) / beta (x where beta * x > threshold).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(F.softplus(x).numpy().round(4))
        [0.513  0.5981 0.7444 0.8544]
    """
    return _act("softplus", x, name, {"beta": float(beta), "threshold": float(threshold)})


def softsign(x, name=None):
    """x / (1 + |x|).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-3.0, -1.0, 0.0, 1.0])
        >>> print(F.softsign(x).numpy())
        [-0.75 -0.5   0.    0.5 ]
    """
    return _act("softsign", x, name)


def log_sigmoid(x, name=None):
    """log(1 / (1 + exp(-x))), computed without overflow for large -x.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([1.0, 2.0, 3.0, 4.0])
        >>> print(F.log_sigmoid(x).numpy().round(4))
        [-0.3133 -0.1269 -0.0486 -0.0181]
    """
    return _act("logsigmoid", x, name, layer="log_sigmoid")


def tanh_shrink(x, name=None):
    """x - tanh(x).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(F.tanhshrink(x).numpy().round(4))
        [-0.0201 -0.0026  0.0003  0.0087]
    """
    return _act("tanh_shrink", x, name)


def thresholded_relu(x, threshold=1.0, value=0.0, name=None):
    """x where x > threshold, else value (0 by default).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([2.0, 0.0, 1.0])
        >>> print(F.thresholded_relu(x).numpy())
        [2. 0. 0.]
    """
    return _act("thresholded_relu", x, name, {"threshold": float(threshold), "value": float(value)})


def exp(x, name=None):
    """e ** x elementwise (op exp).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.exp(x).numpy().round(4))
        [0.6703 0.8187 1.1052 1.3499]
    """
    return _act("exp", x, name)


def expm1(x, name=None):
    """exp(x) - 1, elementwise, accurate near 0.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.expm1(x).numpy().round(4))
        [-0.3297 -0.1813  0.1052  0.3499]
    """
    return _act("expm1", x, name)


def log(x, name=None):
    """The natural logarithm elementwise (op log).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0, 10.0])
        >>> print(paddle.log(x).numpy().round(4))
        [0.     0.6931 2.3026]
    """
    return _act("log", x, name)


def log2(x, name=None):
    """The base-2 logarithm, elementwise.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0, 8.0])
        >>> print(paddle.log2(x).numpy().round(4))
        [0. 1. 3.]
    """
    return _act("log2", x, name)


def log10(x, name=None):
    """The base-10 logarithm, elementwise.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 10.0, 1000.0])
        >>> print(paddle.log10(x).numpy().round(4))
        [0. 1. 3.]
    """
    return _act("log10", x, name)


def log1p(x, name=None):
    """log(1 + x), elementwise, accurate near 0.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[0.0], [1.0]])
        >>> print(paddle.log1p(x).numpy().round(4))
        [[0.    ]
         [0.6931]]
    """
    return _act("log1p", x, name)


def sqrt(x, name=None):
    """The square root elementwise (op sqrt).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([0.1, 0.2, 0.3, 0.4])
        >>> print(paddle.sqrt(x).numpy().round(4))
        [0.3162 0.4472 0.5477 0.6325]
    """
    return _act("sqrt", x, name)


def rsqrt(x, name=None):
    """1 / sqrt(x), elementwise.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([0.25, 1.0, 4.0, 16.0])
        >>> print(paddle.rsqrt(x).numpy())
        [2.   1.   0.5  0.25]
    """
    return _act("rsqrt", x, name)


def abs(x, name=None):
    """|x| elementwise (op abs).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.abs(x).numpy().round(4))
        [0.4 0.2 0.1 0.3]
    """
    return _act("abs", x, name)


def square(x, name=None):
    """x * x elementwise (op square).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.square(x).numpy().round(4))
        [0.16 0.04 0.01 0.09]
    """
    return _act("square", x, name)


def reciprocal(x, name=None):
    """1 / x, elementwise.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-4.0, 0.5, 2.0, 8.0])
        >>> print(paddle.reciprocal(x).numpy())
        [-0.25   2.     0.5    0.125]
    """
    return _act("reciprocal", x, name)


def floor(x, name=None):
    """The largest integer not above x, elementwise (x's dtype).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.floor(x).numpy())
        [-1. -1.  0.  0.]
    """
    return _act("floor", x, name)


def ceil(x, name=None):
    """The smallest integer not below x, elementwise (x's dtype).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.ceil(x).numpy())
        [-0. -0.  1.  1.]
    """
    return _act("ceil", x, name)


def round(x, decimals=0, name=None):
    """Round half away from zero to `decimals` decimals.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.6, -0.2, 0.4, 1.7])
        >>> print(paddle.round(x).numpy())
        [-1. -0.  0.  2.]
        >>> print(paddle.round(paddle.to_tensor([1.234, 5.678]), decimals=1).numpy())
        [1.2 5.7]
    """
    return _act("round", x, name, {"decimals": int(decimals)})


def sign(x, name=None):
    """-1, 0 or 1 by the sign of x, elementwise (x's dtype).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([3.0, 0.0, -2.0, 1.7])
        >>> print(paddle.sign(x).numpy())
        [ 1.  0. -1.  1.]
    """
    return _act("sign", x, name)


def sin(x, name=None):
    """The sine, elementwise.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.sin(x).numpy().round(4))
        [-0.3894 -0.1987  0.0998  0.2955]
    """
    return _act("sin", x, name)


def cos(x, name=None):
    """The cosine, elementwise.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.cos(x).numpy().round(4))
        [0.9211 0.9801 0.995  0.9553]
    """
    return _act("cos", x, name)


def erf(x, name=None):
    """The error function, elementwise.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.erf(x).numpy().round(4))
        [-0.4284 -0.2227  0.1125  0.3286]
    """
    return _act("erf", x, name)


def softmax(x, axis=-1, dtype=None, name=None):
    """exp(x) / sum(exp(x)) along `axis` (x cast to `dtype` first when given).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[2.0, 3.0, 4.0, 5.0], [1.0, 1.0, 1.0, 1.0]])
        >>> print(F.softmax(x, axis=-1).numpy().round(4))
        [[0.0321 0.0871 0.2369 0.6439]
         [0.25   0.25   0.25   0.25  ]]
    """
    if dtype is not None:
        x = cast(x, dtype)
    return _act("softmax", x, name, {"axis": int(axis)})


def log_softmax(x, axis=-1, dtype=None, name=None):
    """x - log(sum(exp(x))) along `axis`.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
        >>> print(F.log_softmax(x, axis=-1).numpy().round(4))
        [[-2.4076 -1.4076 -0.4076]
         [-1.0986 -1.0986 -1.0986]]
    """
    if dtype is not None:
        x = cast(x, dtype)
    return _act("log_softmax", x, name, {"axis": int(axis)})


# -- scans, search, selection, norms -------------------------------------------------------------------
def cumsum(x, axis=None, dtype=None, name=None):
    """Cumulative sum along `axis` (of x flattened to 1-D when None; op cumsum).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.reshape(paddle.arange(12), [3, 4])
        >>> print(paddle.cumsum(x).numpy())                    # flattened
        [ 0  1  3  6 10 15 21 28 36 45 55 66]
        >>> print(paddle.cumsum(x, axis=0).numpy())
        [[ 0  1  2  3]
         [ 4  6  8 10]
         [12 15 18 21]]
    """
    if dtype is not None:
        x = cast(x, dtype)
    attrs = {"axis": -1, "flatten": True} if axis is None else {"axis": int(axis), "flatten": False}
    return _act("cumsum", x, name, {**attrs, "exclusive": False, "reverse": False})


def _arg(op_type, layer, x, axis, keepdim, dtype, name):
    helper = LayerHelper(layer, name)
    code = dtypes.to_code(dtype)
    if code not in (_T.INT32, _T.INT64):
        _fail(layer, f"dtype must be int32 or int64, got {dtype!r}", DTypeError)
    attrs = {"axis": 0 if axis is None else int(axis), "keepdims": bool(keepdim),
             "flatten": axis is None, "dtype": code}
    out = helper.create_tmp(code, stop_gradient=True)
    helper.append_op(op_type, {"X": x}, {"Out": out}, attrs)
    return out


def argmax(x, axis=None, keepdim=False, dtype="int64", name=None):
    """Index of the largest element along `axis` (over all elements when None; op arg_max).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[5, 8, 9, 5], [0, 0, 1, 7], [6, 9, 2, 4]])
        >>> int(paddle.argmax(x))                              # over all elements, flattened
        2
        >>> print(paddle.argmax(x, axis=1).numpy())
        [2 3 1]
        >>> paddle.argmax(x, axis=0, keepdim=True).shape
        [1, 4]
    """
    return _arg("arg_max", "arg_max", x, axis, keepdim, dtype, name)


def argmin(x, axis=None, keepdim=False, dtype="int64", name=None):
    """Index of the smallest element along `axis` (over all elements when None; op arg_min).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[5, 8, 9, 5], [0, 0, 1, 7], [6, 9, 2, 4]])
        >>> print(paddle.argmin(x, axis=1).numpy())            # the first of equal minima
        [0 0 2]
    """
    return _arg("arg_min", "arg_min", x, axis, keepdim, dtype, name)


def topk(x, k, axis=None, largest=True, sorted=True, name=None):
    """(values, int64 indices) of the k largest (smallest unless `largest`) elements along
    `axis` (default the last; op top_k_v2). `k` may be a 1-element Variable.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 4, 5, 7], [2, 6, 2, 5]])
        >>> values, indices = paddle.topk(x, k=2)
        >>> print(values.numpy(), indices.numpy())
        [[7 5]
         [6 5]] [[3 2]
         [1 3]]
        >>> values, indices = paddle.topk(x, k=1, axis=0, largest=False)
        >>> print(values.numpy())
        [[1 4 2 5]]
    """
    helper = LayerHelper("top_k_v2", name)
    inputs = {"X": x}
    attrs = {"axis": -1 if axis is None else int(axis), "largest": bool(largest), "sorted": bool(sorted)}
    if isinstance(k, Variable):
        inputs["K"] = k
    else:
        attrs["k"] = int(k)
    values = helper.create_tmp(x.dtype)
    indices = helper.create_tmp(_T.INT64, stop_gradient=True)
    helper.append_op("top_k_v2", inputs, {"Out": values, "Indices": indices}, attrs)
    return values, indices


def where(condition, x=None, y=None, name=None):
    """x where condition else y (op where). Operands of different shapes are broadcast
    first (by adding zeros, as PaddlePaddle does); a number becomes a constant shaped like
the other operand (op fill_any_like). With x and
    y both None, the coordinates of the true elements (op where_index).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([0.9383, 0.1983, 3.2, 1.2])
        >>> y = paddle.to_tensor([1.0, 1.0, 1.0, 1.0])
        >>> print(paddle.where(x > 1, x, y).numpy())
        [1.  1.  3.2 1.2]
        >>> print(paddle.where(x > 1).numpy())                 # with one argument: nonzero's coordinates
        [[2]
         [3]]
    """
    if x is None and y is None:
        from keel.program.layers.tensor import nonzero
        return nonzero(condition, name)
    if x is None or y is None:
        _fail("where", "give both x and y, or neither", AttrError)
    if _is_scalar(x) and _is_scalar(y):
        _fail("where", "x and y cannot both be numbers", AttrError)
    if _is_scalar(x):
        x = full_like(y, x)
    if _is_scalar(y):
        y = full_like(x, y)
    if not (tuple(condition.shape) == tuple(x.shape) == tuple(y.shape)):
        zeros = add(add(full_like(x, 0.0), full_like(y, 0.0)), cast(full_like(condition, 0.0), x.dtype))
        x, y = add(x, zeros), add(y, zeros)
        condition = cast(add(cast(condition, x.dtype), zeros), "bool")
    helper = LayerHelper("where", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("where", {"Condition": condition, "X": x, "Y": y}, {"Out": out})
    return out


def norm(x, p=2.0, axis=None, keepdim=False, name=None):
    """The p-norm of x along `axis` (of all elements when None; op p_norm).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[3.0, 4.0], [6.0, 8.0]])
        >>> print(paddle.norm(x, p=2, axis=1).numpy())
        [ 5. 10.]
        >>> round(float(paddle.norm(x)), 4)                    # the Frobenius norm
        11.1803
    """
    helper = LayerHelper("p_norm", name)
    attrs = {"porder": float(p), "axis": -1 if axis is None else int(axis), "keepdim": bool(keepdim),
             "asvector": axis is None, "epsilon": 1e-12}
    return helper.unary("p_norm", x, attrs)


# -- the Python operators on Variable ------------------------------------------------------------------
# (scale, bias) of the single `scale` op PaddlePaddle uses for `x <op> number`.
_SCALAR_AS_SCALE = {
    "elementwise_add": lambda v: (1.0, v),
    "elementwise_sub": lambda v: (1.0, -v),
    "elementwise_mul": lambda v: (v, 0.0),
    "elementwise_div": lambda v: (1.0 / v, 0.0),
}
_COMMUTATIVE = {"elementwise_add", "elementwise_mul"}
_COMPARISONS = {"equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal"}


def _tmp(block, dtype) -> Variable:
    return block.create_var(unique_name.generate("tmp"), (), dtype)


def _operator_scale(x, scale_, bias):
    block = x.block.program.current_block()
    out = _tmp(block, x.dtype)
    block.append_op("scale", {"X": x}, {"Out": out}, {"scale": float(scale_), "bias": float(bias)})
    return out


def astype(x, dtype) -> Variable:
    """x converted to `dtype` (op cast into a `tmp_N` var); x itself when already of it."""
    code = dtypes.to_code(dtype)
    if x.dtype == code:
        return x
    block = x.block.program.current_block()
    out = _tmp(block, code)
    block.append_op("cast", {"X": x}, {"Out": out}, {"in_dtype": x.dtype, "out_dtype": code})
    return out


def negative(x) -> Variable:
    """-x, as one `scale` op (scale=-1)."""
    return _operator_scale(x, -1.0, 0.0)


def scalar_as_scale(op_type: str, value: float, reverse: bool):
    """(scale, bias) of the one `scale` op that `x <op> value` (`value <op> x` when reverse)
    is, or None when it is not one (x / 0, number / x, comparisons, ...)."""
    if op_type in _SCALAR_AS_SCALE and (not reverse or op_type in _COMMUTATIVE) \
            and not (op_type == "elementwise_div" and value == 0.0):
        return _SCALAR_AS_SCALE[op_type](value)
    if reverse and op_type == "elementwise_sub":
        return -1.0, value
    return None


def binary_operator(x, other, op_type, reverse=False):
    """`x <op> other` (or `other <op> x` when reverse) with PaddlePaddle's static-graph
    rules: a number with +, -, *, / is one `scale` op (number - x: scale -1, bias number);
    other numbers become a 0-d fill_constant of x's dtype; a float number, or true
    division, turns an integer x into float32 first. Returns NotImplemented for operands
    that are neither Variables nor numbers."""
    if _is_scalar(other):
        value = other.item() if isinstance(other, np.generic) else other
        if isinstance(value, float) and dtypes.is_integer(x.dtype):
            x = astype(x, "float32")
        elif isinstance(value, numbers.Integral):
            if op_type == "elementwise_div" and dtypes.is_integer(x.dtype):
                x = astype(x, "float32")
            elif x.dtype == _T.BOOL and op_type not in _COMPARISONS:
                x = astype(x, "int64")
        value = float(value)
        as_scale = scalar_as_scale(op_type, value, reverse)
        if as_scale is not None:
            return _operator_scale(x, *as_scale)
        block = x.block.program.current_block()
        other = _tmp(block, x.dtype)
        block.append_op("fill_constant", {}, {"Out": other},
                        {"shape": [], "dtype": x.dtype, "value": value, "force_cpu": False})
        other.stop_gradient = True
    elif not isinstance(other, Variable):
        return NotImplemented
    a, b = (other, x) if reverse else (x, other)
    if op_type == "elementwise_div" and dtypes.is_integer(a.dtype) and a.dtype == b.dtype:
        a, b = astype(a, "float32"), astype(b, "float32")
    block = x.block.program.current_block()
    if op_type == "matmul_v2":
        out = _tmp(block, a.dtype)
        block.append_op(op_type, {"X": a, "Y": b}, {"Out": out}, {"trans_x": False, "trans_y": False})
        return out
    out = _tmp(block, _T.BOOL if op_type in _COMPARISONS else a.dtype)
    if op_type in _COMPARISONS:
        out.stop_gradient = True
    block.append_op(op_type, {"X": a, "Y": b}, {"Out": out}, {"axis": -1})
    return out

