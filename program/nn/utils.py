"""`keel.nn.utils` (PaddlePaddle's `paddle.nn.utils`): gradient clipping in place and
parameters as one vector, for eager training. They run ops on the Tensors (recording
nothing). `weight_norm` / `spectral_norm` (reparametrization hooks) are not here."""
from __future__ import annotations

import math

import numpy as np

from keel.program import dygraph
from keel.program.layers import math as M
from keel.program.layers import tensor as T
from keel.program.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector", "vector_to_parameters"]


def _eager(what):
    if not dygraph.in_dynamic_mode():
        raise RuntimeError(f"{what} runs in dynamic mode only (as PaddlePaddle's)")
    return dygraph.engine()


def _listed(parameters) -> list:
    return [parameters] if isinstance(parameters, Tensor) else list(parameters)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scale the parameters' gradients in place so that their total `norm_type`-norm (the
    norm of the per-gradient norms; inf: the largest |g|) is at most `max_norm`: each is
    multiplied by min(1, max_norm / (total + 1e-6)). Returns the total norm.

    Examples:
        >>> import keel as paddle
        >>> linear = paddle.nn.Linear(3, 2)
        >>> (linear(paddle.ones([4, 3])) * 100).sum().backward()
        >>> total = paddle.nn.utils.clip_grad_norm_(linear.parameters(), max_norm=1.0)   # the norm before clipping
        >>> float(total) > 1.0
        True
        >>> grads = [p.grad.numpy() for p in linear.parameters()]
        >>> round(float(sum((g ** 2).sum() for g in grads) ** 0.5), 4)
        1.0
    """
    engine = _eager("clip_grad_norm_")
    norm_type = float(norm_type)
    if norm_type not in (math.inf, 0.0, 1.0, 2.0):
        raise ValueError(f"clip_grad_norm_: norm_type must be inf, 0, 1 or 2, got {norm_type}")
    grads = [p.grad for p in _listed(parameters) if p.grad is not None]
    if not grads:
        return Tensor(np.array(0.0, np.float32))
    with engine.set_grad_enabled(False):
        if norm_type == math.inf:
            norms = [M.max(M.abs(g)) for g in grads]
            total = norms[0] if len(norms) == 1 else M.max(T.stack(norms))
        else:
            total = M.norm(T.stack([M.norm(g, norm_type) for g in grads]), norm_type)
        if error_if_nonfinite and not np.isfinite(float(total)):
            raise RuntimeError(f"clip_grad_norm_: the total {norm_type}-norm of the gradients is not finite, so "
                               f"it cannot be clipped; pass error_if_nonfinite=False to scale by it anyway")
        coef = M.clip(M.divide(T.full([], float(max_norm), total.dtype), M.add(total, T.full([], 1e-6, total.dtype))),
                      max=1.0)
        for g in grads:
            g.set_value(M.multiply(g, M.cast(coef, g.dtype)))
    return total


def clip_grad_value_(parameters, clip_value):
    """Clip the parameters' gradients in place to [-clip_value, clip_value].

    Examples:
        >>> import keel as paddle
        >>> linear = paddle.nn.Linear(3, 2)
        >>> (linear(paddle.ones([4, 3])) * 100).sum().backward()
        >>> paddle.nn.utils.clip_grad_value_(linear.parameters(), clip_value=1.0)
        >>> print(linear.bias.grad.numpy())
        [1. 1.]
    """
    engine = _eager("clip_grad_value_")
    with engine.set_grad_enabled(False):
        for p in _listed(parameters):
            if p.grad is not None:
                p.grad.set_value(M.clip(p.grad, -float(clip_value), float(clip_value)))


def parameters_to_vector(parameters, name=None):
    """The parameters flattened and joined into one 1-D Tensor.

    Examples:
        >>> import keel as paddle
        >>> linear = paddle.nn.Linear(3, 2)
        >>> vec = paddle.nn.utils.parameters_to_vector(linear.parameters())
        >>> vec.shape                             # 3 * 2 weights and 2 biases
        [8]
    """
    engine = _eager("parameters_to_vector")
    with engine.set_grad_enabled(False):
        return T.concat([T.reshape(p, [-1]) for p in _listed(parameters)], 0)


def vector_to_parameters(vec, parameters, name=None):
    """Set the parameters, in order, from the consecutive slices of the 1-D `vec`.

    Examples:
        >>> import keel as paddle
        >>> linear = paddle.nn.Linear(3, 2)
        >>> paddle.nn.utils.vector_to_parameters(paddle.arange(8, dtype="float32"), linear.parameters())
        >>> print(linear.weight.numpy())
        [[0. 1.]
         [2. 3.]
         [4. 5.]]
        >>> print(linear.bias.numpy())
        [6. 7.]
    """
    engine = _eager("vector_to_parameters")
    params = _listed(parameters)
    sizes = [math.prod(p.shape) for p in params]
    if vec.ndim != 1 or (vec.shape[0] >= 0 and vec.shape[0] != sum(sizes)):
        raise ValueError(f"vector_to_parameters: vec {vec.type_string()} must be 1-d of {sum(sizes)} elements")
    with engine.set_grad_enabled(False):
        for p, piece in zip(params, T.split(vec, sizes, 0)):
            p.set_value(T.reshape(piece, list(p.shape)))
