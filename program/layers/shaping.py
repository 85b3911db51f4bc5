"""Reshaping and selection functions PaddlePaddle 3.x has at its top level
(paddle/tensor/manipulation.py, search.py) beyond program.layers.tensor's, each a
composition of existing differentiable ops (expand, split, transpose, unstack, gather_nd,
scatter_nd_add, index_select, take_along_axis), so gradients flow through them in a
program and eagerly alike."""
from __future__ import annotations

import numpy as np

from keel.program import dygraph
from keel.program.errors import AttrError
from keel.program.layers.manip import index_select, scatter_nd_add, take_along_axis
from keel.program.layers.math import cast
from keel.program.layers.tensor import (_fail, assign, concat, expand, gather_nd, nonzero, reshape, split,
                                        transpose, unstack)
from keel.program.variable import Variable

__all__ = ["broadcast_to", "cat", "chunk", "t", "unbind", "diag", "diagonal", "repeat_interleave",
           "masked_select", "index_sample"]


def _known_shape(layer, x) -> list[int]:
    if any(d < 0 for d in x.shape):
        _fail(layer, f"needs the input's shape known when the program is built, got {x.name} {x.type_string()}")
    return [int(d) for d in x.shape]


def _axis(layer, axis, ndim) -> int:
    if not -ndim <= axis < max(ndim, 1):
        _fail(layer, f"axis {axis} is out of range for a {ndim}-d tensor", AttrError)
    return axis + ndim if axis < 0 else axis


def broadcast_to(x, shape, name=None):
    """x broadcast to `shape` (PaddlePaddle's alias of expand).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1, 2, 3])
        >>> print(paddle.broadcast_to(x, shape=[2, 3]).numpy())
        [[1 2 3]
         [1 2 3]]
    """
    return expand(x, shape, name=name)


def cat(x, axis=0, name=None):
    """Join tensors along `axis` (PaddlePaddle's alias of concat).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 2], [3, 4]])
        >>> y = paddle.to_tensor([[5, 6]])
        >>> print(paddle.cat([x, y], axis=0).numpy())
        [[1 2]
         [3 4]
         [5 6]]
    """
    return concat(x, axis=axis, name=name)


def chunk(x, chunks, axis=0, name=None):
    """x split into `chunks` equal pieces along `axis` (split by a number).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.arange(12).reshape([2, 6])
        >>> parts = paddle.chunk(x, chunks=3, axis=1)
        >>> [p.shape for p in parts]
        [[2, 2], [2, 2], [2, 2]]
        >>> print(parts[1].numpy())
        [[2 3]
         [8 9]]
    """
    return split(x, int(chunks), axis=axis, name=name)


def t(input, name=None):  # noqa: A002 (PaddlePaddle's argument name)
    """The transpose of a 2-D tensor; a 0-d or 1-d tensor is returned as it is.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 2, 3], [4, 5, 6]])
        >>> print(paddle.t(x).numpy())
        [[1 4]
         [2 5]
         [3 6]]
    """
    if len(input.shape) > 2:
        _fail("t", f"expects a tensor of at most 2 dims, got {input.name} {input.type_string()}; "
                   f"use transpose with a permutation")
    return input if len(input.shape) < 2 else transpose(input, [1, 0], name=name)


def unbind(input, axis=0):  # noqa: A002
    """The slices of `input` along `axis`, that dim removed (op unstack).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.arange(6).reshape([2, 3])
        >>> [t.tolist() for t in paddle.unbind(x, axis=1)]
        [[0, 3], [1, 4], [2, 5]]
    """
    return unstack(input, axis=_axis("unbind", int(axis), len(input.shape)))


def _diagonal_index(rows: int, cols: int, offset: int) -> np.ndarray:
    """[k, 2] coordinates (i, i + offset) of the `offset` diagonal of a rows x cols matrix."""
    start_r, start_c = (0, offset) if offset >= 0 else (-offset, 0)
    k = max(0, min(rows - start_r, cols - start_c))
    i = np.arange(k, dtype=np.int64)
    return np.stack([i + start_r, i + start_c], axis=1).reshape(k, 2)


def diagonal(x, offset=0, axis1=0, axis2=1, name=None):
    """The `offset` diagonal of the matrices spanned by axis1 and axis2, as a last dim
    (PaddlePaddle's layout: the other dims first, in order).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.arange(9).reshape([3, 3])
        >>> print(paddle.diagonal(x).numpy())
        [0 4 8]
        >>> print(paddle.diagonal(x, offset=1).numpy())
        [1 5]
    """
    shape = _known_shape("diagonal", x)
    a1, a2 = _axis("diagonal", int(axis1), len(shape)), _axis("diagonal", int(axis2), len(shape))
    if a1 == a2 or len(shape) < 2:
        _fail("diagonal", f"axis1 and axis2 must be two different dims of a tensor of >= 2 dims, "
                          f"got {axis1}, {axis2} for {x.name} {x.type_string()}", AttrError)
    rest = [d for d in range(len(shape)) if d not in (a1, a2)]
    front = x if [a1, a2, *rest] == list(range(len(shape))) else transpose(x, [a1, a2, *rest])
    picked = gather_nd(front, assign(_diagonal_index(shape[a1], shape[a2], int(offset))))
    # picked is [k, *rest]; PaddlePaddle puts the diagonal last
    return picked if not rest else transpose(picked, [*range(1, len(rest) + 1), 0], name=name)


def diag(x, offset=0, padding_value=0, name=None):
    """A 1-D x -> the square matrix with x on its `offset` diagonal and `padding_value`
    elsewhere; a 2-D x -> its `offset` diagonal.

    Examples:
        >>> import keel as paddle
        >>> print(paddle.diag(paddle.to_tensor([1, 2, 3])).numpy())     # a vector to a diagonal matrix
        [[1 0 0]
         [0 2 0]
         [0 0 3]]
        >>> print(paddle.diag(paddle.to_tensor([[1, 2], [3, 4]])).numpy())   # a matrix to its diagonal
        [1 4]
    """
    shape = _known_shape("diag", x)
    if len(shape) == 2:
        return diagonal(x, offset, 0, 1, name=name)
    if len(shape) > 1:
        _fail("diag", f"expects a 0-d, 1-D or 2-D tensor, got {x.name} {x.type_string()}")
    vector = reshape(x, [1]) if not shape else x
    n = (shape[0] if shape else 1) + abs(int(offset))
    coords = _diagonal_index(n, n, int(offset))
    # padding off the diagonal, 0 on it (where x's values are added); built in float64 so an
    # integer padding survives, then cast to x's dtype
    padding = np.full((n, n), padding_value, dtype=np.float64)
    padding[coords[:, 0], coords[:, 1]] = 0
    base = cast(assign(padding), x.dtype)
    return scatter_nd_add(base, assign(coords), vector, name=name)


def repeat_interleave(x, repeats, axis=None, name=None):
    """Each slice of x along `axis` repeated `repeats` times (an int, or one count per slice
    as a list or tensor), x flattened first when axis is None (op index_select with the
    repeated positions).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1, 2, 3], [4, 5, 6]])
        >>> print(paddle.repeat_interleave(x, 2, axis=0).numpy())
        [[1 2 3]
         [1 2 3]
         [4 5 6]
         [4 5 6]]
        >>> print(paddle.repeat_interleave(x, paddle.to_tensor([1, 2, 1]), axis=1).numpy())
        [[1 2 2 3]
         [4 5 5 6]]
    """
    if axis is None:
        x, axis = reshape(x, [-1]), 0
    shape = _known_shape("repeat_interleave", x)
    axis = _axis("repeat_interleave", int(axis), len(shape))
    if isinstance(repeats, Variable):
        if not dygraph.in_dynamic_mode():
            _fail("repeat_interleave", "repeats given as a tensor needs its values: give a list of ints "
                                       "when building a program", AttrError)
        repeats = np.asarray(repeats.numpy()).reshape(-1).tolist()
    counts = np.asarray(repeats, dtype=np.int64).reshape(-1)
    if counts.size not in (1, shape[axis]) or (counts < 0).any():
        _fail("repeat_interleave", f"repeats must be one count or {shape[axis]} non-negative counts "
                                   f"(dim {axis} of {x.name} {x.type_string()}), got {list(counts)}", AttrError)
    positions = np.repeat(np.arange(shape[axis], dtype=np.int64), counts if counts.size > 1 else int(counts[0]))
    return index_select(x, assign(positions), axis=axis, name=name)


def masked_select(x, mask, name=None):
    """The elements of x where the bool `mask` is true, as a 1-D tensor in row-major order;
    x and mask are broadcast to one shape first (op gather_nd at op where_index's
    coordinates).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
        >>> mask = paddle.to_tensor([[True, False], [False, True]])
        >>> print(paddle.masked_select(x, mask).numpy())
        [1. 4.]
    """
    if tuple(x.shape) != tuple(mask.shape):
        x_shape, m_shape = _known_shape("masked_select", x), _known_shape("masked_select", mask)
        try:
            target = list(np.broadcast_shapes(tuple(x_shape), tuple(m_shape)))
        except ValueError:
            _fail("masked_select", f"x {x.type_string()} and mask {mask.type_string()} do not broadcast")
        x = x if x_shape == target else expand(x, target)
        mask = mask if m_shape == target else expand(mask, target)
    return gather_nd(x, nonzero(mask), name=name)


def index_sample(x, index, name=None):
    """out[i, j] = x[i, index[i, j]] for a 2-D x and a 2-D int index of the same rows (op
    take_along_axis on axis 1).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0, 3.0, 4.0], [5.0, 6.0, 7.0, 8.0]])
        >>> index = paddle.to_tensor([[0, 1], [1, 3]])
        >>> print(paddle.index_sample(x, index).numpy())     # row i gathers x[i, index[i]]
        [[1. 2.]
         [6. 8.]]
    """
    if len(x.shape) != 2 or len(index.shape) != 2:
        _fail("index_sample", f"expects a 2-D x and 2-D index, got {x.name} {x.type_string()} and "
                              f"{index.name} {index.type_string()}")
    return take_along_axis(x, index, 1, name=name)
