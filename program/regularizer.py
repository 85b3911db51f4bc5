"""Weight-decay regularizers (PaddlePaddle's `paddle.regularizer`), appended as ops.

A regularizer adds its term to a parameter's gradient before the optimizer update:
L2Decay(c) adds c * param (a `scale` op), L1Decay(c) adds c * sign(param) (`sign` +
`scale`); a `sum` op writes the regularized gradient. A parameter's own regularizer
(ParamAttr(regularizer=...)) takes precedence over the optimizer's `weight_decay`.
"""
from __future__ import annotations

from keel.program import unique_name

__all__ = ["L1Decay", "L2Decay", "WeightDecayRegularizer"]


class WeightDecayRegularizer:
    """Base class of L1Decay and L2Decay: `coeff` scales the term each adds to a
    parameter's gradient. An optimizer's `weight_decay` given as a float means L2Decay(float).

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=linear.parameters(),
        ...                            weight_decay=0.1)
        >>> loss = paddle.mean(linear(paddle.to_tensor([[1.0, 2.0]])))   # d loss / dw = [1, 2]
        >>> loss.backward()
        >>> opt.step()
        >>> print(linear.weight.numpy().ravel().round(4))     # 0.5 - 0.1 * ([1, 2] + 0.1 * 0.5)
        [0.395 0.295]
    """
    def __init__(self, coeff: float = 0.0):
        self.coeff = float(coeff)

    def __call__(self, param, grad, block):
        """Append the ops computing the decay term of `param`; return its variable."""
        raise NotImplementedError

    def __repr__(self):
        return f"{type(self).__name__}(coeff={self.coeff})"


class L2Decay(WeightDecayRegularizer):
    """Adds coeff * param to the gradient (the gradient of coeff/2 * ||param||^2).

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=linear.parameters(),
        ...                            weight_decay=paddle.regularizer.L2Decay(0.1))
        >>> loss = paddle.mean(linear(paddle.to_tensor([[1.0, 2.0]])))   # d loss / dw = [1, 2]
        >>> loss.backward()
        >>> opt.step()
        >>> print(linear.weight.numpy().ravel().round(4))     # 0.5 - 0.1 * ([1, 2] + 0.1 * 0.5)
        [0.395 0.295]
    """

    def __call__(self, param, grad, block):
        decay = block.create_var(unique_name.generate(f"{param.name}_l2_decay"), param.shape, param.dtype)
        block.append_op("scale", {"X": [param]}, {"Out": [decay]},
                        {"scale": self.coeff, "bias": 0.0, "bias_after_scale": True})
        return decay


class L1Decay(WeightDecayRegularizer):
    """Adds coeff * sign(param) to the gradient (the gradient of coeff * ||param||_1).

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=linear.parameters(),
        ...                            weight_decay=paddle.regularizer.L1Decay(0.1))
        >>> loss = paddle.mean(linear(paddle.to_tensor([[1.0, 2.0]])))   # d loss / dw = [1, 2]
        >>> loss.backward()
        >>> opt.step()
        >>> print(linear.weight.numpy().ravel().round(4))     # 0.5 - 0.1 * ([1, 2] + 0.1 * sign(0.5))
        [0.39 0.29]

        A parameter's own regularizer (ParamAttr) takes precedence over the optimizer's:

        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5),
        ...                          regularizer=paddle.regularizer.L1Decay(0.1))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=linear.parameters(),
        ...                            weight_decay=paddle.regularizer.L2Decay(0.1))
        >>> loss = paddle.mean(linear(paddle.to_tensor([[1.0, 2.0]])))   # d loss / dw = [1, 2]
        >>> loss.backward()
        >>> opt.step()
        >>> print(linear.weight.numpy().ravel().round(4))     # L1Decay(0.1) applied, not L2Decay(0.1)
        [0.39 0.29]
    """

    def __call__(self, param, grad, block):
        sign = block.create_var(unique_name.generate(f"{param.name}_sign"), param.shape, param.dtype)
        block.append_op("sign", {"X": [param]}, {"Out": [sign]})
        decay = block.create_var(unique_name.generate(f"{param.name}_l1_decay"), param.shape, param.dtype)
        block.append_op("scale", {"X": [sign]}, {"Out": [decay]},
                        {"scale": self.coeff, "bias": 0.0, "bias_after_scale": True})
        return decay


def as_regularizer(weight_decay) -> WeightDecayRegularizer | None:
    """An optimizer's `weight_decay` argument: None, a float (L2Decay) or a regularizer."""
    if weight_decay is None or isinstance(weight_decay, WeightDecayRegularizer):
        return weight_decay
    if isinstance(weight_decay, (int, float)):
        return L2Decay(float(weight_decay)) if weight_decay else None
    raise TypeError(f"weight_decay must be a float or an L1Decay/L2Decay, got {weight_decay!r}")


def append_regularization(params_grads, default, block):
    """Return params_grads with each gradient replaced by grad + decay term (as ops)."""
    result = []
    for param, grad in params_grads:
        reg = getattr(param, "regularizer", None) or default
        if reg is None or grad is None:
            result.append((param, grad))
            continue
        term = reg(param, grad, block)
        new_grad = block.create_var(unique_name.generate(f"{grad.name}_regularized"), grad.shape, grad.dtype)
        block.append_op("sum", {"X": [grad, term]}, {"Out": [new_grad]})
        result.append((param, new_grad))
    return result
