"""Gradient clipping (PaddlePaddle's ClipGradByValue / ClipGradByNorm /
ClipGradByGlobalNorm), appended as ops before the optimizer update. Parameters created
with `need_clip=False` (ParamAttr) are left alone."""
from __future__ import annotations

from keel.program import unique_name

__all__ = ["ClipGradBase", "ClipGradByValue", "ClipGradByNorm", "ClipGradByGlobalNorm"]


class ClipGradBase:
    """Base class of the gradient clips an optimizer takes as `grad_clip`; a parameter
    made with ParamAttr(need_clip=False) is left unclipped.

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const, bias_attr=paddle.ParamAttr(need_clip=False))
        >>> clip = paddle.nn.ClipGradByValue(max=0.5)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=linear.parameters(), grad_clip=clip)
        >>> loss = paddle.mean(linear(paddle.to_tensor([[1.0, 2.0]])))   # gradients w [1, 2], b [1]
        >>> loss.backward()
        >>> opt.step()
        >>> print(linear.weight.numpy().ravel().round(4), linear.bias.numpy().round(4))   # the bias is not clipped
        [0.45 0.45] [-0.1]
    """
    def __call__(self, params_grads, block):
        """Append the clipping ops; return params_grads with the clipped gradients."""
        raise NotImplementedError

    @staticmethod
    def _clipped_var(block, grad, what):
        return block.create_var(unique_name.generate(f"{grad.name}_{what}"), grad.shape, grad.dtype)


def _clips(param, grad) -> bool:
    return grad is not None and getattr(param, "need_clip", True)


class ClipGradByValue(ClipGradBase):
    """Clamp every gradient element to [min, max] (min defaults to -max).

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)
        >>> clip = paddle.nn.ClipGradByValue(max=0.5, min=-0.5)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=linear.parameters(), grad_clip=clip)
        >>> loss = paddle.mean(linear(paddle.to_tensor([[1.0, 2.0]])))   # gradients w [1, 2], b [1]
        >>> loss.backward()
        >>> opt.step()
        >>> print(linear.weight.numpy().ravel().round(4), linear.bias.numpy().round(4))   # every gradient in [-0.5, 0.5]
        [0.45 0.45] [-0.05]
    """

    def __init__(self, max: float, min: float | None = None):
        self.max = float(max)
        self.min = -self.max if min is None else float(min)
        if self.min > self.max:
            raise ValueError(f"ClipGradByValue: min {self.min} > max {self.max}")

    def __call__(self, params_grads, block):
        result = []
        for param, grad in params_grads:
            if _clips(param, grad):
                out = self._clipped_var(block, grad, "clip")
                block.append_op("clip", {"X": [grad]}, {"Out": [out]}, {"min": self.min, "max": self.max})
                grad = out
            result.append((param, grad))
        return result


class ClipGradByNorm(ClipGradBase):
    """Rescale each gradient whose L2 norm exceeds clip_norm to norm clip_norm.

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)
        >>> clip = paddle.nn.ClipGradByNorm(clip_norm=1.0)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=linear.parameters(), grad_clip=clip)
        >>> loss = paddle.mean(linear(paddle.to_tensor([[1.0, 2.0]])))   # gradients w [1, 2], b [1]
        >>> loss.backward()
        >>> opt.step()
        >>> print(linear.weight.numpy().ravel().round(4), linear.bias.numpy().round(4))   # w's gradient scaled to norm 1
        [0.4553 0.4106] [-0.1]
    """

    def __init__(self, clip_norm: float):
        self.clip_norm = float(clip_norm)

    def __call__(self, params_grads, block):
        result = []
        for param, grad in params_grads:
            if _clips(param, grad):
                out = self._clipped_var(block, grad, "clip")
                block.append_op("clip_by_norm", {"X": [grad]}, {"Out": [out]}, {"max_norm": self.clip_norm})
                grad = out
            result.append((param, grad))
        return result


class ClipGradByGlobalNorm(ClipGradBase):
    """Rescale all gradients together by clip_norm / max(global_norm, clip_norm), where
    global_norm = sqrt(sum of every gradient's squared L2 norm).

    Examples:
        >>> import keel as paddle
        >>> const = paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(2, 1, weight_attr=const)
        >>> clip = paddle.nn.ClipGradByGlobalNorm(clip_norm=1.0)
        >>> opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=linear.parameters(), grad_clip=clip)
        >>> loss = paddle.mean(linear(paddle.to_tensor([[1.0, 2.0]])))   # gradients w [1, 2], b [1]
        >>> loss.backward()
        >>> opt.step()
        >>> print(linear.weight.numpy().ravel().round(4), linear.bias.numpy().round(4))   # all scaled by 1 / sqrt(1 + 4 + 1)
        [0.4592 0.4184] [-0.0408]
    """

    def __init__(self, clip_norm: float, ring_id: int | None = None):
        self.clip_norm = float(clip_norm)
        # Where each rank holds only its shard of the gradients (fleet's sharding): the
        # ring whose ranks' sums of squares make up the global one.
        self.ring_id = ring_id

    def _sum_over_ranks(self, block, total) -> None:
        if self.ring_id is not None:
            block.append_op("c_allreduce_sum", {"X": [total]}, {"Out": [total]},
                            {"ring_id": self.ring_id, "use_calc_stream": True})

    def __call__(self, params_grads, block):
        clipped = [(p, g) for p, g in params_grads if _clips(p, g)]
        if not clipped:
            if self.ring_id is not None:  # the other ranks' all-reduce still needs this rank's zero
                zero = block.create_var(unique_name.generate("global_norm_sq"), [1], "float32")
                block.append_op("fill_constant", {}, {"Out": [zero]},
                                {"shape": [1], "dtype": zero.dtype, "value": 0.0})
                self._sum_over_ranks(block, zero)
            return list(params_grads)
        dtype = clipped[0][1].dtype

        def tmp(key, shape=(1,)):
            return block.create_var(unique_name.generate(key), list(shape), dtype)

        squares = []
        for _, grad in clipped:
            sq = tmp(f"{grad.name}_sq_norm")
            block.append_op("squared_l2_norm", {"X": [grad]}, {"Out": [sq]})
            squares.append(sq)
        total = tmp("global_norm_sq")
        block.append_op("sum", {"X": squares}, {"Out": [total]})
        self._sum_over_ranks(block, total)
        norm = tmp("global_norm")
        block.append_op("sqrt", {"X": [total]}, {"Out": [norm]})
        limit = tmp("clip_norm")
        block.append_op("fill_constant", {}, {"Out": [limit]},
                        {"shape": [1], "dtype": dtype, "value": self.clip_norm})
        denom = tmp("global_norm_max")
        block.append_op("elementwise_max", {"X": [norm], "Y": [limit]}, {"Out": [denom]})
        factor = tmp("clip_factor")
        block.append_op("elementwise_div", {"X": [limit], "Y": [denom]}, {"Out": [factor]})
        scaled = {}
        for param, grad in clipped:
            out = self._clipped_var(block, grad, "clip")
            block.append_op("elementwise_mul", {"X": [grad], "Y": [factor]}, {"Out": [out]})
            scaled[param.name] = out
        return [(p, scaled.get(p.name, g)) for p, g in params_grads]
