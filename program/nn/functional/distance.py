"""paddle.nn.functional's distances, written in ops as PaddlePaddle computes them."""
from __future__ import annotations

from keel.program.layers import math as M
from keel.program.layers import tensor as T
from keel.program.layers.helper import LayerHelper

__all__ = ["cosine_similarity", "pairwise_distance"]


def cosine_similarity(x1, x2, axis=1, eps=1e-8):
    """sum(x1 * x2) / sqrt(max(sum(x1^2) * sum(x2^2), eps^2)) along `axis`.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x1 = paddle.to_tensor([[1.0, 0.0], [1.0, 1.0]])
        >>> x2 = paddle.to_tensor([[0.0, 1.0], [2.0, 2.0]])
        >>> print(F.cosine_similarity(x1, x2, axis=1).numpy().round(4))
        [0. 1.]
    """
    w12 = M.sum(M.multiply(x1, x2), axis=axis)
    w1 = M.sum(M.multiply(x1, x1), axis=axis)
    w2 = M.sum(M.multiply(x2, x2), axis=axis)
    # PaddlePaddle scales a broadcast operand's sum by the broadcast factor
    n1, n2 = x1.shape[axis], x2.shape[axis]
    if n1 == 1 and n2 > 1:
        w1 = M.scale(w1, float(n2))
    if n2 == 1 and n1 > 1:
        w2 = M.scale(w2, float(n1))
    return M.divide(w12, M.sqrt(M.clip(M.multiply(w1, w2), min=eps * eps)))


def pairwise_distance(x, y, p=2.0, epsilon=1e-6, keepdim=False, name=None):
    """||x - y + epsilon||_p over the last axis (op p_norm).

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> x = paddle.to_tensor([[1.0, 3.0], [3.0, 5.0]])
        >>> y = paddle.to_tensor([[5.0, 6.0], [7.0, 8.0]])
        >>> print(F.pairwise_distance(x, y).numpy().round(4))
        [5. 5.]
    """
    sub = M.subtract(x, y)
    if epsilon != 0.0:
        sub = M.add(sub, T.full([1], float(epsilon), sub.dtype))
    helper = LayerHelper("pairwise_distance", name)
    out = helper.create_tmp(x.dtype)
    helper.append_op("p_norm", {"X": sub}, {"Out": out},
                     {"axis": -1, "porder": float(p), "keepdim": bool(keepdim), "epsilon": 0.0, "asvector": False})
    return out
