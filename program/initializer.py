"""Parameter initializers. Each appends one op to the startup program that fills the
parameter: fill_constant, uniform_random, gaussian_random, truncated_gaussian_random or
assign_value. Random ops get `seed` = the initializer's seed, else the startup program's
`random_seed` (0 means "draw a fresh seed at run time")."""
from __future__ import annotations

import math

import numpy as np

from keel.program import dtypes


class Initializer:
    def __call__(self, var, block):
        """Append the init op for `var` (a variable of the startup `block`)."""
        raise NotImplementedError

    @staticmethod
    def _seed(seed, block) -> int:
        return int(seed) if seed else int(block.program.random_seed)


class Constant(Initializer):
    def __init__(self, value: float = 0.0):
        self.value = float(value)

    def __call__(self, var, block):
        return block.append_op("fill_constant", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype, "value": self.value,
                                      "str_value": repr(self.value)})


class Uniform(Initializer):
    def __init__(self, low: float = -1.0, high: float = 1.0, seed: int = 0):
        self.low, self.high, self.seed = float(low), float(high), seed

    def __call__(self, var, block):
        return block.append_op("uniform_random", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype, "min": self.low,
                                      "max": self.high, "seed": self._seed(self.seed, block)})


class Normal(Initializer):
    def __init__(self, mean: float = 0.0, std: float = 1.0, seed: int = 0):
        self.mean, self.std, self.seed = float(mean), float(std), seed

    def __call__(self, var, block):
        return block.append_op("gaussian_random", outputs={"Out": var},
                               attrs={"shape": list(var.shape), "dtype": var.dtype, "mean": self.mean,
                                      "std": self.std, "seed": self._seed(self.seed, block)})


class TruncatedNormal(Initializer):
    """Normal(mean, std) restricted to [mean - 2 std, mean + 2 std] (as PaddlePaddle)."""

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
    def __init__(self, fan_in=None, fan_out=None, gain: float = 1.0, seed: int = 0):
        self.fan_in, self.fan_out, self.gain, self.seed = fan_in, fan_out, gain, seed

    def __call__(self, var, block):
        fi, fo = compute_fans(var.shape)
        fi, fo = self.fan_in or fi, self.fan_out or fo
        limit = self.gain * math.sqrt(6.0 / (fi + fo))
        return Uniform(-limit, limit, self.seed)(var, block)


class XavierNormal(Initializer):
    def __init__(self, fan_in=None, fan_out=None, gain: float = 1.0, seed: int = 0):
        self.fan_in, self.fan_out, self.gain, self.seed = fan_in, fan_out, gain, seed

    def __call__(self, var, block):
        fi, fo = compute_fans(var.shape)
        fi, fo = self.fan_in or fi, self.fan_out or fo
        return Normal(0.0, self.gain * math.sqrt(2.0 / (fi + fo)), self.seed)(var, block)


class KaimingUniform(Initializer):
    """He/MSRA uniform: U(-sqrt(6/fan_in), +sqrt(6/fan_in)) scaled by the ReLU gain."""

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
    def __call__(self, var, block):
        fi = self.fan_in or compute_fans(var.shape)[0]
        return Normal(0.0, self._gain() / math.sqrt(fi), self.seed)(var, block)


MSRAInitializer = KaimingNormal  # PaddlePaddle's older name


class Assign(Initializer):
    """Fill with given values (an array of the parameter's shape): op assign_value with its
    `values` attribute, as PaddlePaddle (>= 2.6) writes it."""

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
