"""Parameter initializers. Each appends one op to the startup program that fills the
parameter: fill_constant, uniform_random, gaussian_random, truncated_gaussian_random or
assign_value. Random ops get `seed` = the initializer's seed, else the startup program's
`random_seed` (0 means "draw a fresh seed at run time")."""
from __future__ import annotations

import math

import numpy as np

from keel.program import dtypes


class Initializer:
    """Base class: an initializer appends the op that fills a parameter to the startup
    program (eagerly, that op runs once, when the parameter is first read). A layer takes one
    through ParamAttr(initializer=...) or directly as its weight_attr/bias_attr.

    Examples:
        >>> import keel as paddle
        >>> init = paddle.nn.initializer.Constant(2.0)
        >>> isinstance(init, paddle.nn.initializer.Initializer)
        True
        >>> linear = paddle.nn.Linear(2, 2, weight_attr=init, bias_attr=paddle.nn.initializer.Constant(1.0))
        >>> print(linear.weight.numpy(), linear.bias.numpy())
        [[2. 2.]
         [2. 2.]] [1. 1.]
    """
    def __call__(self, var, block):
        """Append the init op for `var` (a variable of the startup `block`)."""
        raise NotImplementedError

    @staticmethod
    def _seed(seed, block) -> int:
        return int(seed) if seed else int(block.program.random_seed)


class Constant(Initializer):
    """Fills the parameter with `value` (op fill_constant).

    Examples:
        >>> import keel as paddle
        >>> init = paddle.nn.initializer.Constant(value=2.0)
        >>> linear = paddle.nn.Linear(2, 3, weight_attr=paddle.ParamAttr(initializer=init))
        >>> w = linear.weight.numpy()
        >>> print(w)
        [[2. 2. 2.]
         [2. 2. 2.]]
    """
    def __init__(self, value: float = 0.0):
        self.value = float(value)

    def __call__(self, var, block):
        return block.append_op("fill_constant", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype, "value": self.value,
                                      "str_value": repr(self.value)})


class Uniform(Initializer):
    """Draws from U(low, high) (op uniform_random); `seed` 0 takes the program's seed.

    Examples:
        >>> import keel as paddle
        >>> init = paddle.nn.initializer.Uniform(low=-0.5, high=0.5)
        >>> linear = paddle.nn.Linear(100, 50, weight_attr=paddle.ParamAttr(initializer=init))
        >>> w = linear.weight.numpy()
        >>> w.shape, bool(w.min() >= -0.5 and w.max() <= 0.5)
        ((100, 50), True)
    """
    def __init__(self, low: float = -1.0, high: float = 1.0, seed: int = 0):
        self.low, self.high, self.seed = float(low), float(high), seed

    def __call__(self, var, block):
        return block.append_op("uniform_random", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype, "min": self.low,
                                      "max": self.high, "seed": self._seed(self.seed, block)})


class Normal(Initializer):
    """Draws from N(mean, std) (op gaussian_random); `seed` 0 takes the program's seed.

    Examples:
        >>> import keel as paddle
        >>> init = paddle.nn.initializer.Normal(mean=1.0, std=0.1)
        >>> linear = paddle.nn.Linear(100, 50, weight_attr=paddle.ParamAttr(initializer=init))
        >>> w = linear.weight.numpy()
        >>> bool(abs(w.mean() - 1.0) < 0.01), bool(abs(w.std() - 0.1) < 0.01)
        (True, True)
    """
    def __init__(self, mean: float = 0.0, std: float = 1.0, seed: int = 0):
        self.mean, self.std, self.seed = float(mean), float(std), seed

    def __call__(self, var, block):
        return block.append_op("gaussian_random", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype, "mean": self.mean,
                                      "std": self.std, "seed": self._seed(self.seed, block)})


class TruncatedNormal(Initializer):
    """Normal(mean, std) restricted to [mean - 2 std, mean + 2 std] (as PaddlePaddle).

    Examples:
        >>> import keel as paddle
        >>> init = paddle.nn.initializer.TruncatedNormal(mean=0.0, std=1.0)
        >>> linear = paddle.nn.Linear(100, 50, weight_attr=paddle.ParamAttr(initializer=init))
        >>> w = linear.weight.numpy()
        >>> bool(abs(w).max() <= 2.0)               # nothing beyond two standard deviations
        True
    """

    def __init__(self, mean: float = 0.0, std: float = 1.0, seed: int = 0):
        self.mean, self.std, self.seed = float(mean), float(std), seed

    def __call__(self, var, block):
        return block.append_op("truncated_gaussian_random", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype, "mean": self.mean,
                                      "std": self.std, "seed": self._seed(self.seed, block),
                                      "a": -2.0, "b": 2.0})


def compute_fans(shape) -> tuple[int, int]:
    """fan_in, fan_out as PaddlePaddle computes them: [in, out] for fc weights,
    [out_c, in_c/groups, kh, kw] for conv filters."""
    shape = list(shape)
    if not shape:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = int(np.prod(shape[2:]))
    return shape[1] * receptive, shape[0] * receptive


class XavierUniform(Initializer):
    """Glorot uniform: U(-b, b) with b = gain * sqrt(6 / (fan_in + fan_out)).

    Examples:
        >>> import keel as paddle
        >>> init = paddle.nn.initializer.XavierUniform()
        >>> linear = paddle.nn.Linear(100, 50, weight_attr=paddle.ParamAttr(initializer=init))
        >>> w = linear.weight.numpy()
        >>> bound = (6 / (100 + 50)) ** 0.5
        >>> bool(abs(w).max() <= bound), bool(abs(w).max() > 0.9 * bound)
        (True, True)
    """
    def __init__(self, fan_in=None, fan_out=None, gain: float = 1.0, seed: int = 0):
        self.fan_in, self.fan_out, self.gain, self.seed = fan_in, fan_out, gain, seed

    def __call__(self, var, block):
        fi, fo = compute_fans(var.shape)
        fi, fo = self.fan_in or fi, self.fan_out or fo
        limit = self.gain * math.sqrt(6.0 / (fi + fo))
        return Uniform(-limit, limit, self.seed)(var, block)


class XavierNormal(Initializer):
    """Glorot normal: N(0, gain * sqrt(2 / (fan_in + fan_out))).

    Examples:
        >>> import keel as paddle
        >>> init = paddle.nn.initializer.XavierNormal()
        >>> linear = paddle.nn.Linear(200, 100, weight_attr=paddle.ParamAttr(initializer=init))
        >>> w = linear.weight.numpy()
        >>> std = (2 / (200 + 100)) ** 0.5
        >>> bool(abs(w.std() / std - 1) < 0.05)
        True
    """
    def __init__(self, fan_in=None, fan_out=None, gain: float = 1.0, seed: int = 0):
        self.fan_in, self.fan_out, self.gain, self.seed = fan_in, fan_out, gain, seed

    def __call__(self, var, block):
        fi, fo = compute_fans(var.shape)
        fi, fo = self.fan_in or fi, self.fan_out or fo
        return Normal(0.0, self.gain * math.sqrt(2.0 / (fi + fo)), self.seed)(var, block)


class KaimingUniform(Initializer):
    """He/MSRA uniform: U(-sqrt(6/fan_in), +sqrt(6/fan_in)) scaled by the ReLU gain.

    Examples:
        >>> import keel as paddle
        >>> init = paddle.nn.initializer.KaimingUniform()
        >>> linear = paddle.nn.Linear(100, 50, weight_attr=paddle.ParamAttr(initializer=init))
        >>> w = linear.weight.numpy()
        >>> bound = (6 / 100) ** 0.5                  # fan_in 100, the ReLU gain sqrt(2)
        >>> bool(abs(w).max() <= bound), bool(abs(w).max() > 0.9 * bound)
        (True, True)
    """

    def __init__(self, fan_in=None, negative_slope: float = 0.0, nonlinearity: str = "relu", seed: int = 0):
        self.fan_in, self.negative_slope, self.nonlinearity, self.seed = fan_in, negative_slope, nonlinearity, seed

    def _gain(self):
        if self.nonlinearity == "leaky_relu":
            return math.sqrt(2.0 / (1 + self.negative_slope ** 2))
        return math.sqrt(2.0) if self.nonlinearity == "relu" else 1.0

    def __call__(self, var, block):
        fi = self.fan_in or compute_fans(var.shape)[0]
        limit = self._gain() * math.sqrt(3.0 / fi)
        return Uniform(-limit, limit, self.seed)(var, block)


class KaimingNormal(KaimingUniform):
    """He/MSRA normal: N(0, gain / sqrt(fan_in)), gain sqrt(2) for ReLU.

    Examples:
        >>> import keel as paddle
        >>> init = paddle.nn.initializer.KaimingNormal()
        >>> linear = paddle.nn.Linear(200, 100, weight_attr=paddle.ParamAttr(initializer=init))
        >>> w = linear.weight.numpy()
        >>> std = (2 / 200) ** 0.5
        >>> bool(abs(w.std() / std - 1) < 0.05)
        True
    """
    def __call__(self, var, block):
        fi = self.fan_in or compute_fans(var.shape)[0]
        return Normal(0.0, self._gain() / math.sqrt(fi), self.seed)(var, block)


MSRAInitializer = KaimingNormal  # PaddlePaddle's older name


class Assign(Initializer):
    """Fill with given values (an array of the parameter's shape): op assign_value with its
    `values` attribute, as PaddlePaddle (>= 2.6) writes it.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> values = np.array([[1.0, 2.0], [3.0, 4.0]], "float32")
        >>> init = paddle.nn.initializer.Assign(values)
        >>> linear = paddle.nn.Linear(2, 2, weight_attr=paddle.ParamAttr(initializer=init))
        >>> print(linear.weight.numpy())
        [[1. 2.]
         [3. 4.]]
    """

    _DTYPES = ("float32", "float64", "int32", "int64", "bool")

    def __init__(self, value):
        self.value = np.asarray(value)

    def __call__(self, var, block):
        name = dtypes.name(var.dtype)
        if name not in self._DTYPES:
            raise TypeError(f"Assign cannot initialize a {name} parameter ({var.name})")
        if tuple(self.value.shape) != tuple(var.shape):
            raise ValueError(f"Assign: value of shape {list(self.value.shape)} for parameter {var.name} "
                             f"of shape {list(var.shape)}")
        values = self.value.astype(dtypes.to_numpy(var.dtype)).ravel().tolist()
        return block.append_op("assign_value", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype, "values": values})


from keel.program.initializer_shapes import Dirac, calculate_gain  # noqa: E402,F401  (paddle.nn.initializer's)
