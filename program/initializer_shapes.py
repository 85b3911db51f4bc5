"""Initializers whose values follow from the parameter's shape alone (PaddlePaddle's
`nn.initializer.Dirac`) and `calculate_gain`; exported by program/initializer.py."""
from __future__ import annotations

import math

import numpy as np

from keel.program.initializer import Assign, Initializer

_LINEAR_GAINS = ("sigmoid", "linear", "conv1d", "conv2d", "conv3d", "conv1d_transpose", "conv2d_transpose",
                 "conv3d_transpose")


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The gain PaddlePaddle recommends for an activation: 1 for sigmoid, linear and the
    convolutions, 5/3 for tanh, sqrt(2) for relu, sqrt(2 / (1 + slope^2)) for leaky_relu
    (slope `param`, default 0.01), 3/4 for selu.

    Examples:
        >>> import keel as paddle
        >>> paddle.nn.initializer.calculate_gain("tanh")
        1.6666666666666667
        >>> round(paddle.nn.initializer.calculate_gain("relu"), 4)
        1.4142
        >>> round(paddle.nn.initializer.calculate_gain("leaky_relu", param=0.2), 4)
        1.3868
    """
    if nonlinearity in _LINEAR_GAINS:
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        slope = 0.01 if param is None else float(param)
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: nonlinearity {nonlinearity!r} is not one of "
                     f"{', '.join(_LINEAR_GAINS + ('tanh', 'relu', 'leaky_relu', 'selu'))}")


class Dirac(Initializer):
    """A convolution filter [out, in, k...] that passes its input through: within each of
    `groups` groups of output channels, output channel i takes input channel i at the
    kernel's centre (1), for i below min(out / groups, in); 0 elsewhere.

    Examples:
        >>> import keel as paddle
        >>> init = paddle.nn.initializer.Dirac()
        >>> attr = paddle.ParamAttr(initializer=init)
        >>> conv = paddle.nn.Conv1D(2, 2, kernel_size=3, padding=1, weight_attr=attr, bias_attr=False)
        >>> print(conv.weight.numpy()[:, :, 1])       # output channel i takes input channel i at the centre
        [[1. 0.]
         [0. 1.]]
        >>> float(conv.weight.numpy().sum())
        2.0
        >>> x = paddle.rand([1, 2, 5])
        >>> bool((conv(x).numpy() == x.numpy()).all())  # the convolution passes its input through
        True
    """

    def __init__(self, groups: int = 1, name=None):
        if int(groups) < 1:
            raise ValueError(f"Dirac: groups must be at least 1, got {groups}")
        self.groups = int(groups)

    def __call__(self, var, block):
        shape = [int(d) for d in var.shape]
        if len(shape) not in (3, 4, 5):
            raise ValueError(f"Dirac: parameter {var.name} must be a 3-, 4- or 5-D filter, got shape {shape}")
        if shape[0] % self.groups:
            raise ValueError(f"Dirac: {shape[0]} output channels of {var.name} do not split into {self.groups} groups")
        per_group = shape[0] // self.groups
        values = np.zeros(shape, dtype=np.float64)
        centre = tuple(k // 2 for k in shape[2:])
        for g in range(self.groups):
            for i in range(min(per_group, shape[1])):
                values[(g * per_group + i, i, *centre)] = 1.0
        return Assign(values)(var, block)
