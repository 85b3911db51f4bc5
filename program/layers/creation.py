"""Creation functions PaddlePaddle 3.x has at its top level (paddle/tensor/creation.py,
random.py) beyond program.layers.tensor's: each a composition of existing ops, so it
builds into a program and runs eagerly alike."""
from __future__ import annotations

import numpy as np

from keel.program import dtypes
from keel.program.errors import AttrError
from keel.program.layers.helper import LayerHelper
from keel.program.layers.math import cast
from keel.program.layers.manip import argsort
from keel.program.layers.random import rand, randint
from keel.program.layers.tensor import _fail, assign, expand, fill_constant, full_like, reshape
from keel.program.variable import Variable

__all__ = ["empty", "empty_like", "eye", "meshgrid", "randperm", "randint_like", "clone"]


def empty(shape, dtype=None, name=None):
    """A tensor of `shape` (default floating dtype unless `dtype`). PaddlePaddle leaves the
    memory uninitialized; Keel fills zeros, one of the values it may hold.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.empty([2, 3], dtype="float32")    # values left uninitialized
        >>> x.shape, x.dtype
        ([2, 3], paddle.float32)
    """
    return fill_constant(shape, dtypes.default_float(dtype), 0.0, name=name)


def empty_like(x, dtype=None, name=None):
    """A tensor of x's shape and dtype (or `dtype`); zeros, as `empty`.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.empty_like(paddle.ones([2, 3], dtype="int32"))
        >>> x.shape, x.dtype
        ([2, 3], paddle.int32)
    """
    return full_like(x, 0.0, dtype, name)


def eye(num_rows, num_columns=None, dtype=None, name=None):
    """The [num_rows, num_columns] identity matrix (square unless num_columns); default
    floating dtype unless `dtype`.

    Examples:
        >>> import keel as paddle
        >>> print(paddle.eye(3, dtype="int32").numpy())
        [[1 0 0]
         [0 1 0]
         [0 0 1]]
        >>> print(paddle.eye(2, 3).numpy())
        [[1. 0. 0.]
         [0. 1. 0.]]
    """
    rows = int(num_rows)
    cols = rows if num_columns is None else int(num_columns)
    if rows < 0 or cols < 0:
        _fail("eye", f"num_rows and num_columns must not be negative, got {rows} and {cols}", AttrError)
    code = dtypes.default_float(dtype)
    ones = np.eye(rows, cols, dtype=np.float32)
    return cast(assign(ones), code, name=name) if code != dtypes.to_code("float32") else assign(ones, name=name)


def meshgrid(*args, **kwargs):
    """N 1-D tensors of lengths n1..nN -> N tensors of shape [n1, ..., nN], the i-th varying
    along dim i ('ij' indexing, PaddlePaddle's only one). Takes the tensors as arguments or as
    one list.

    Examples:
        >>> import keel as paddle
        >>> x, y = paddle.meshgrid(paddle.to_tensor([1, 2, 3]), paddle.to_tensor([4, 5]))
        >>> print(x.numpy())
        [[1 1]
         [2 2]
         [3 3]]
        >>> print(y.numpy())
        [[4 5]
         [4 5]
         [4 5]]
    """
    xs = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) else list(args)
    if not xs:
        _fail("meshgrid", "needs at least one tensor")
    for x in xs:
        if len(x.shape) > 1:
            _fail("meshgrid", f"expects 1-D (or 0-d) tensors, got {x.name} {x.type_string()}")
    lengths = [int(x.shape[0]) if len(x.shape) else 1 for x in xs]
    outs = []
    for i, x in enumerate(xs):
        along = [1] * len(xs)
        along[i] = lengths[i]
        outs.append(expand(reshape(x, along), lengths))
    return outs


def randperm(n, dtype="int64", name=None):
    """A random permutation of 0..n-1: the order that sorts n uniform draws (draws tie with
    probability ~0, and the sort is stable when they do), cast to `dtype`.

    Examples:
        >>> import keel as paddle
        >>> p = paddle.randperm(6)
        >>> p.dtype, sorted(p.tolist())
        (paddle.int64, [0, 1, 2, 3, 4, 5])
    """
    if int(n) < 1:
        _fail("randperm", f"n must be at least 1, got {n}", AttrError)
    order = argsort(rand([int(n)], "float64"), stable=True)
    code = dtypes.to_code(dtype)
    return order if code == dtypes.to_code("int64") else cast(order, code, name=name)


def randint_like(x, low=0, high=None, dtype=None, name=None):
    """Uniform integers in [low, high) (with one bound, [0, low)) of x's shape, of x's dtype
    unless `dtype` (drawn as int64 and cast, as PaddlePaddle does for other dtypes).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.zeros([2, 3], dtype="float32")
        >>> y = paddle.randint_like(x, low=0, high=10)
        >>> y.shape, y.dtype, bool(((y.numpy() >= 0) & (y.numpy() < 10)).all())
        ([2, 3], paddle.float32, True)
    """
    if high is None:
        low, high = 0, low
    if any(d < 0 for d in x.shape):
        _fail("randint_like", f"needs x's shape known, got {x.name} {x.type_string()}")
    code = x.dtype if dtype is None else dtypes.to_code(dtype)
    draws = randint(low, high, list(x.shape), "int64")
    return draws if code == dtypes.to_code("int64") else cast(draws, code, name=name)


def clone(x, name=None):
    """A copy of x that gradients flow through (op assign).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> y = paddle.clone(x)          # a copy that gradients flow through
        >>> (y * y).sum().backward()
        >>> print(y.numpy(), x.grad.numpy())
        [1. 2.] [2. 4.]
    """
    if not isinstance(x, Variable):
        raise TypeError(f"clone: expects a tensor, got {type(x).__name__}")
    helper = LayerHelper("clone", name)
    out = helper.create_tmp(x.dtype, stop_gradient=x.stop_gradient)
    helper.append_op("assign", {"X": x}, {"Out": out})
    return out
