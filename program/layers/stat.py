"""Statistics, sorting and logic functions PaddlePaddle 3.x has at its top level
(paddle/tensor/stat.py, search.py, logic.py, math.py) beyond program.layers.math's:
compositions of existing ops where PaddlePaddle's result is one (var, logsumexp, allclose,
fmax, addmm, sort), and the counting ops of program/ops/stat.py otherwise."""
from __future__ import annotations

from keel.program import dtypes
from keel.program.errors import DTypeError
from keel.program.layers.helper import LayerHelper
from keel.program.layers.manip import argsort
from keel.program.layers.math import (_act, abs, add, all, equal, exp, isnan, less_equal, log, logical_and,
                                      logical_or, matmul, max, maximum, mean, minimum, multiply, scale,
                                      subtract, sum, where)
from keel.program.layers.tensor import _fail, assign, fill_constant, full_like, squeeze
from keel.program.variable import Variable
from keel.proto import pb

__all__ = ["tan", "addmm", "fmax", "fmin", "logsumexp", "var", "sort", "histogram", "unique", "allclose",
           "equal_all", "is_tensor", "is_floating_point", "bitwise_not", "bitwise_and", "bitwise_or",
           "bitwise_xor"]

_T = pb.VarType


def tan(x, name=None):
    """The tangent, elementwise.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
        >>> print(paddle.tan(x).numpy().round(4))
        [-0.4228 -0.2027  0.1003  0.3093]
    """
    return _act("tan", x, name)


def addmm(input, x, y, beta=1.0, alpha=1.0, name=None):  # noqa: A002 (PaddlePaddle's argument name)
    """beta * input + alpha * (x @ y), input broadcast to the product's shape.

    Examples:
        >>> import keel as paddle
        >>> input = paddle.ones([2, 2])
        >>> x = paddle.full([2, 3], 2.0)
        >>> y = paddle.ones([3, 2])
        >>> print(paddle.addmm(input, x, y, beta=0.5, alpha=5.0).numpy())    # beta * input + alpha * x @ y
        [[30.5 30.5]
         [30.5 30.5]]
    """
    product = matmul(x, y)
    return add(scale(input, float(beta)), scale(product, float(alpha)), name=name)


def _nan_ignoring(pick, x, y, name):
    """pick(x, y) where neither is NaN, the other where one is (NaN where both are)."""
    picked = pick(x, y)
    return where(isnan(x), y, where(isnan(y), x, picked), name=name)


def fmax(x, y, name=None):
    """Elementwise maximum that ignores a NaN operand (NaN only where both are).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, float("nan"), 3.0])
        >>> print(paddle.fmax(x, paddle.to_tensor([2.0, 5.0, float("nan")])).numpy())   # a NaN loses to a number
        [2. 5. 3.]
    """
    return _nan_ignoring(maximum, x, y, name)


def fmin(x, y, name=None):
    """Elementwise minimum that ignores a NaN operand (NaN only where both are).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, float("nan"), 3.0])
        >>> print(paddle.fmin(x, paddle.to_tensor([2.0, 5.0, float("nan")])).numpy())   # a NaN loses to a number
        [1. 5. 3.]
    """
    return _nan_ignoring(minimum, x, y, name)


def logsumexp(x, axis=None, keepdim=False, name=None):
    """log(sum(exp(x), axis)), computed around the maximum so large values do not overflow
    (the maximum's own gradient cancels: it is held constant).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[-1.5, 0.0, 2.0], [3.0, 1.2, -2.4]])
        >>> print(paddle.logsumexp(x).numpy().round(4))
        3.4691
        >>> print(paddle.logsumexp(x, axis=1).numpy().round(4))
        [2.1532 3.1568]
    """
    peak = max(x, axis=axis, keepdim=True)
    peak.stop_gradient = True
    # an all -inf slice has peak -inf: shift it by 0 so its result is -inf, not NaN
    peak = where(isnan(subtract(peak, peak)), full_like(peak, 0.0), peak)
    total = sum(exp(subtract(x, peak)), axis=axis, keepdim=keepdim)
    shift = peak if keepdim else _drop_reduced(peak, axis, len(x.shape))
    return add(log(total), shift, name=name)


def _drop_reduced(peak, axis, ndim):
    if axis is None:
        return squeeze(peak, list(range(ndim))) if ndim else peak
    axes = [axis] if isinstance(axis, int) else list(axis)
    return squeeze(peak, [a + ndim if a < 0 else a for a in axes])


def var(x, axis=None, unbiased=None, keepdim=False, name=None, *, correction=1):
    """The variance over `axis` (all dims when None): sum((x - mean)^2) / (N - correction),
    `unbiased=False` meaning correction 0, as PaddlePaddle's.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0, 3.0], [1.0, 4.0, 7.0]])
        >>> print(paddle.var(x).numpy().round(4))
        5.2
        >>> print(paddle.var(x, axis=1, unbiased=False).numpy().round(4))
        [0.6667 6.    ]
    """
    if unbiased is not None:
        correction = 1 if unbiased else 0
    axes = list(range(len(x.shape))) if axis is None else ([axis] if isinstance(axis, int) else list(axis))
    dims = [x.shape[a] for a in axes]
    if any(d < 0 for d in dims):
        _fail("var", f"needs the reduced dims known, got {x.name} {x.type_string()}")
    n = 1
    for d in dims:
        n *= int(d)
    centered = subtract(x, mean(x, axis=axes, keepdim=True))
    squares = sum(multiply(centered, centered), axis=axes, keepdim=keepdim)
    return scale(squares, 1.0 / (n - correction) if n > correction else float("nan"), name=name)


def sort(x, axis=-1, descending=False, stable=False, name=None):
    """x's values sorted along `axis` (op argsort's Out).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]])
        >>> print(paddle.sort(x).numpy())
        [[ 1.   2.   3. ]
         [-1.   0.5  4. ]]
        >>> print(paddle.sort(x, axis=0, descending=True).numpy())
        [[ 3.   4.   2. ]
         [ 0.5  1.  -1. ]]
    """
    values, _ = argsort(x, axis=axis, descending=descending, stable=stable, name=name, return_values=True)
    return values


def histogram(input, bins=100, min=0.0, max=0.0, weight=None, density=False, name=None):  # noqa: A002
    """Counts of input's values in `bins` equal bins over [min, max] (input's range when both
    are 0), int64; float with `weight` or `density` (op histogram).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 1])
        >>> print(paddle.histogram(x, bins=4, min=0, max=3).numpy())
        [0 2 1 0]
    """
    helper = LayerHelper("histogram", name)
    floating = density or weight is not None
    out = helper.create_tmp((weight.dtype if weight is not None else _T.FP32) if floating else _T.INT64,
                            stop_gradient=True)
    inputs = {"X": input} if weight is None else {"X": input, "Weight": weight}
    helper.append_op("histogram", inputs, {"Out": out},
                     {"bins": int(bins), "min": float(min), "max": float(max), "density": bool(density)})
    return out


def unique(x, return_index=False, return_inverse=False, return_counts=False, axis=None, dtype="int64",
           sorted=True, name=None):  # noqa: A002
    """x's distinct values, ascending (slices along `axis` when given, else of flattened x);
    with the flags, also (in this order) the first positions, the inverse positions and the
    counts (op unique).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([2, 3, 3, 1, 5, 3])
        >>> print(paddle.unique(x).numpy())
        [1 2 3 5]
        >>> out, index, inverse, counts = paddle.unique(x, return_index=True, return_inverse=True, return_counts=True)
        >>> print(index.numpy(), inverse.numpy(), counts.numpy())
        [3 0 1 4] [1 2 2 0 3 2] [1 1 3 1]
    """
    helper = LayerHelper("unique", name)
    code = dtypes.to_code(dtype)
    out = helper.create_tmp(x.dtype, stop_gradient=True)
    # Index (the inverse) is a required output of the op: made always, returned when asked
    extras = {"Indices": return_index, "Index": True, "Counts": return_counts}
    outputs = {"Out": out, **{slot: helper.create_tmp(code, stop_gradient=True)
                              for slot, wanted in extras.items() if wanted}}
    helper.append_op("unique", {"X": x}, outputs,
                     {"dtype": code, "return_index": bool(return_index), "return_inverse": bool(return_inverse),
                      "return_counts": bool(return_counts), "axis": [] if axis is None else [int(axis)],
                      "is_sorted": bool(sorted)})
    wanted = {"Indices": return_index, "Index": return_inverse, "Counts": return_counts}
    rest = [outputs[slot] for slot in ("Indices", "Index", "Counts") if wanted[slot]]
    return (out, *rest) if rest else out


def allclose(x, y, rtol=1e-05, atol=1e-08, equal_nan=False, name=None):
    """A 0-d bool: every |x - y| <= atol + rtol * |y| (equal values, infinities included,
    always close; NaNs close to each other only with equal_nan).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([10000.0, 1e-07])
        >>> y = paddle.to_tensor([10000.1, 1e-08])
        >>> paddle.allclose(x, y).item(), paddle.allclose(x, y, rtol=1e-05, atol=1e-06).item()
        (False, True)
    """
    bound = add(scale(abs(y), float(rtol)), fill_constant([], y.dtype, float(atol)))
    close = logical_or(equal(x, y), less_equal(abs(subtract(x, y)), bound))
    if equal_nan:
        close = logical_or(close, logical_and(isnan(x), isnan(y)))
    return all(close, name=name)


def equal_all(x, y, name=None):
    """A 0-d bool: x and y have one shape and equal elements (False for different shapes).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> paddle.equal_all(x, paddle.to_tensor([1, 2, 3])).item()
        True
        >>> paddle.equal_all(x, paddle.to_tensor([1, 4, 3])).item()
        False
    """
    if tuple(x.shape) != tuple(y.shape):
        return fill_constant([], "bool", False, name=name)
    return all(equal(x, y), name=name)


def is_tensor(x) -> bool:
    """Whether x is a Keel tensor (an eager Tensor, or a Variable of a program being built).

    Examples:
        >>> import keel as paddle
        >>> paddle.is_tensor(paddle.to_tensor([1.0])), paddle.is_tensor([1.0])
        (True, False)
    """
    return isinstance(x, Variable)


def is_floating_point(x) -> bool:
    """Whether x's dtype is floating (float16, bfloat16, float32, float64).

    Examples:
        >>> import keel as paddle
        >>> paddle.is_floating_point(paddle.ones([2])), paddle.is_floating_point(paddle.to_tensor([1, 2]))
        (True, False)
    """
    if not isinstance(x, Variable):
        raise TypeError(f"is_floating_point: expects a tensor, got {type(x).__name__}")
    return dtypes.is_floating(x.dtype)


def _bitwise(op_type, inputs, out, name):
    """The op's result; copied into `out` too when given (PaddlePaddle's out= argument)."""
    for x in inputs.values():
        if not (x.dtype == _T.BOOL or dtypes.is_integer(x.dtype)):
            _fail(op_type, f"expects bool or integer tensors, got {x.name} {x.type_string()}", DTypeError)
    helper = LayerHelper(op_type, name)
    result = helper.create_tmp(inputs["X"].dtype, stop_gradient=True)
    helper.append_op(op_type, inputs, {"Out": result})
    return result if out is None else assign(result, output=out)


def bitwise_not(x, out=None, name=None):
    """~x bit by bit for bool and integer tensors (op bitwise_not).

    Examples:
        >>> import keel as paddle
        >>> print(paddle.bitwise_not(paddle.to_tensor([-5, -1, 1])).numpy())
        [ 4  0 -2]
    """
    return _bitwise("bitwise_not", {"X": x}, out, name)


def bitwise_and(x, y, out=None, name=None):
    """x & y, elementwise with broadcasting (integers and bools).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-5, -1, 1])
        >>> print(paddle.bitwise_and(x, paddle.to_tensor([4, 2, -3])).numpy())
        [0 2 1]
    """
    return _bitwise("bitwise_and", {"X": x, "Y": y}, out, name)


def bitwise_or(x, y, out=None, name=None):
    """x | y, elementwise with broadcasting (integers and bools).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-5, -1, 1])
        >>> print(paddle.bitwise_or(x, paddle.to_tensor([4, 2, -3])).numpy())
        [-1 -1 -3]
    """
    return _bitwise("bitwise_or", {"X": x, "Y": y}, out, name)


def bitwise_xor(x, y, out=None, name=None):
    """x ^ y, elementwise with broadcasting (integers and bools).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([-5, -1, 1])
        >>> print(paddle.bitwise_xor(x, paddle.to_tensor([4, 2, -3])).numpy())
        [-1 -3 -4]
    """
    return _bitwise("bitwise_xor", {"X": x, "Y": y}, out, name)
