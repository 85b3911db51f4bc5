"""`paddle.linalg`: norm, inv, det, solve, svd, qr, cholesky, eigh over the linear algebra
ops (program/ops/linalg.py, p_norm), in programs and in eager mode alike.

    import keel as paddle
    q, r = paddle.linalg.qr(x)                  # x: [..., m, n]
    w, v = paddle.linalg.eigh(a)                # a symmetric
    paddle.linalg.norm(x, p="fro", axis=[-2, -1])
"""
from __future__ import annotations

import numbers

from keel.program.layers.helper import LayerHelper
from keel.program.layers.math import abs as _abs, max as _max, min as _min, norm as _vector_norm, sqrt, square
from keel.program.layers.math import sum as _sum
from keel.program.ops.linalg import QR_MODES


def _unary(op_type, x, in_slot, out_slot, attrs=None, name=None):
    return LayerHelper(op_type, name).unary(op_type, x, attrs or {}, in_slot=in_slot, out_slot=out_slot)


def _multi(op_type, inputs, out_slots, attrs, dtype, name):
    helper = LayerHelper(op_type, name)
    outs = {slot: helper.create_tmp(dtype) for slot in out_slots}
    helper.append_op(op_type, inputs, outs, attrs)
    return tuple(outs[slot] for slot in out_slots)


def inv(x, name=None):
    """The inverse of each square matrix of x (op inverse).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[2.0, 0.0], [0.0, 4.0]])
        >>> print(paddle.linalg.inv(x).numpy())
        [[0.5  0.  ]
         [0.   0.25]]
    """
    return _unary("inverse", x, "Input", "Output", name=name)


def det(x, name=None):
    """The determinant of each square matrix of x: shape x.shape[:-2] (op determinant).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[[1.0, 2.0], [3.0, 4.0]], [[2.0, 0.0], [0.0, 3.0]]])
        >>> print(paddle.linalg.det(x).numpy().round(4))          # one determinant per matrix
        [-2.  6.]
    """
    return _unary("determinant", x, "Input", "Out", name=name)


def solve(x, y, name=None):
    """The solution of x @ out = y (y a matrix [..., n, k] or a vector [..., n]; op solve).

    Examples:
        >>> import keel as paddle
        >>> a = paddle.to_tensor([[3.0, 1.0], [1.0, 2.0]])
        >>> b = paddle.to_tensor([9.0, 8.0])
        >>> print(paddle.linalg.solve(a, b).numpy().round(4))       # a @ x == b
        [2. 3.]
    """
    return _multi("solve", {"X": x, "Y": y}, ["Out"], {}, x.dtype, name)[0]


def svd(x, full_matrices=False, name=None):
    """(U, S, VH) with x = U diag(S) VH, S descending (op svd).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0], [1.0, 3.0], [4.0, 6.0]])
        >>> u, s, vh = paddle.linalg.svd(x)
        >>> u.shape, s.shape, vh.shape
        ([3, 2], [2], [2, 2])
        >>> print(s.numpy().round(4))
        [8.1475 0.7859]
        >>> print((u * s).matmul(vh).numpy().round(4))
        [[1. 2.]
         [1. 3.]
         [4. 6.]]
    """
    return _multi("svd", {"X": x}, ["U", "S", "VH"], {"full_matrices": bool(full_matrices)}, x.dtype, name)


def qr(x, mode="reduced", name=None):
    """(Q, R) with x = Q R (mode "reduced" or "complete"), or R alone (mode "r"; op qr).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
        >>> q, r = paddle.linalg.qr(x)
        >>> q.shape, r.shape
        ([3, 2], [2, 2])
        >>> print(paddle.matmul(q, r).numpy().round(4))
        [[1. 2.]
         [3. 4.]
         [5. 6.]]
    """
    if mode not in QR_MODES:
        raise ValueError(f"qr: mode must be one of {QR_MODES}, got {mode!r}")
    q, r = _multi("qr", {"X": x}, ["Q", "R"], {"mode": mode}, x.dtype, name)
    return r if mode == "r" else (q, r)


def cholesky(x, upper=False, name=None):
    """L with x = L L^T (U = L^T with `upper`), x symmetric positive definite (op cholesky).

    Examples:
        >>> import keel as paddle
        >>> a = paddle.to_tensor([[4.0, 2.0], [2.0, 5.0]])
        >>> print(paddle.linalg.cholesky(a).numpy())              # lower triangular L, L @ L.T == a
        [[2. 0.]
         [1. 2.]]
        >>> print(paddle.linalg.cholesky(a, upper=True).numpy())
        [[2. 1.]
         [0. 2.]]
    """
    return _unary("cholesky", x, "X", "Out", {"upper": bool(upper)}, name)


def eigh(x, UPLO="L", name=None):  # noqa: N803  (PaddlePaddle's argument name)
    """(eigenvalues ascending, eigenvectors as columns) of symmetric x, read from its lower
    ("L") or upper ("U") triangle (op eigh).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[2.0, 1.0], [1.0, 2.0]])
        >>> values, vectors = paddle.linalg.eigh(x)
        >>> print(values.numpy().round(4))
        [1. 3.]
        >>> print(abs(vectors.numpy()).round(4))                # columns; signs are not unique
        [[0.7071 0.7071]
         [0.7071 0.7071]]
    """
    return _multi("eigh", {"X": x}, ["Eigenvalues", "Eigenvectors"], {"UPLO": UPLO}, x.dtype, name)


def norm(x, p=None, axis=None, keepdim=False, name=None):
    """PaddlePaddle's `linalg.norm`. A vector norm of all elements (axis None) or along one
    axis: p "fro" (2), a number, inf or -inf (op p_norm). A matrix norm over two axes
    (axis [a, b], or axis None with p "nuc"): "fro", "nuc" (the sum of singular values),
    1 / -1 (largest / smallest column sum of |x|), inf / -inf (row sums), 2 / -2 (largest
    / smallest singular value).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[3.0, 4.0], [6.0, 8.0]])
        >>> print(paddle.linalg.norm(x).numpy().round(4))                   # Frobenius
        11.1803
        >>> print(paddle.linalg.norm(x, p=2, axis=1).numpy())               # each row's 2-norm
        [ 5. 10.]
        >>> print(paddle.linalg.norm(x, p=float("inf"), axis=0).numpy())
        [6. 8.]
        >>> print(paddle.linalg.norm(x, p=1, axis=[0, 1]).numpy())          # the matrix 1-norm
        12.0
    """
    p = "fro" if p is None else p
    if isinstance(axis, (list, tuple)) and len(axis) == 1:
        axis = axis[0]
    if p == "nuc" and axis is None:
        axis = [-2, -1]
    if axis is None or isinstance(axis, numbers.Integral):
        if p == "nuc" or isinstance(p, str) and p != "fro":
            raise ValueError(f"norm: p={p!r} is a matrix norm; give two axes (axis=[-2, -1])")
        return _vector_norm(x, 2.0 if p == "fro" else float(p), axis, keepdim, name)
    if len(axis) != 2:
        raise ValueError(f"norm: axis must be None, an int or two ints, got {axis!r}")
    return _matrix_norm(x, p, [a % len(x.shape) for a in axis], keepdim)


def _matrix_norm(x, p, axis, keepdim):
    if axis[0] == axis[1]:
        raise ValueError(f"norm: the two axes must differ, got {axis}")
    if p == "fro":
        return sqrt(_sum(square(x), axis=axis, keepdim=keepdim))
    if p in (1, -1, float("inf"), float("-inf")):
        summed, reduced = (axis[0], axis[1]) if abs(p) == 1 else (axis[1], axis[0])
        sums = _sum(_abs(x), axis=summed, keepdim=True)
        out = (_max if p > 0 else _min)(sums, axis=reduced, keepdim=True)
        return out if keepdim else _sum(out, axis=sorted(axis), keepdim=False)
    if p in ("nuc", 2, -2):
        from keel.program.layers.tensor import transpose
        rank = len(x.shape)
        rest = [d for d in range(rank) if d not in axis]
        moved = transpose(x, rest + list(axis)) if axis != [rank - 2, rank - 1] else x
        s = svd(moved)[1]
        out = _sum(s, axis=-1) if p == "nuc" else (_max if p == 2 else _min)(s, axis=-1)
        if keepdim:
            from keel.program.layers.tensor import unsqueeze
            out = unsqueeze(out, sorted(axis))
        return out
    raise ValueError(f"norm: p={p!r} is not a matrix norm PaddlePaddle has ('fro', 'nuc', 1, -1, 2, -2, "
                     f"inf, -inf)")


__all__ = ["norm", "inv", "det", "solve", "svd", "qr", "cholesky", "eigh"]
