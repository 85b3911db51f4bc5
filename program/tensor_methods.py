"""The tensor methods PaddlePaddle users call (`x.sum()`, `x.reshape([2, -1])`,
`x.matmul(y)`, ...): the layer functions of the same name with the tensor as their first
argument, on Variables (appending ops) and eager Tensors (running them) alike."""
from __future__ import annotations

import functools

from keel.program.layers import manip, math, tensor
from keel.program.variable import Variable

# method name -> the layer function it calls with the tensor first
_FUNCTIONS = {
    **{name: getattr(math, name) for name in (
        "sum", "mean", "max", "min", "prod", "matmul", "mm", "bmm", "argmax", "argmin", "abs", "exp", "log",
        "log2", "log10", "log1p", "sqrt", "rsqrt", "square", "tanh", "sigmoid", "sin", "cos", "floor", "ceil",
        "round", "sign", "reciprocal", "erf", "cast", "pow", "clip", "scale", "add", "subtract", "multiply",
        "divide", "floor_divide", "remainder", "maximum", "minimum", "equal", "not_equal", "less_than",
        "less_equal", "greater_than", "greater_equal", "logical_and", "logical_or", "logical_not",
        "logical_xor", "all", "any", "cumsum", "topk", "norm", "isnan", "isinf", "isfinite", "softmax",
        "log_softmax")},
    **{name: getattr(tensor, name) for name in (
        "reshape", "transpose", "unsqueeze", "squeeze", "flatten", "expand", "expand_as", "tile", "gather",
        "gather_nd", "split", "unstack", "nonzero", "one_hot")},
    **{name: getattr(manip, name) for name in ("flip", "roll", "argsort", "numel")},
}


def _method(fn):
    @functools.wraps(fn)
    def method(self, *args, **kwargs):
        return fn(self, *args, **kwargs)
    return method


def install() -> None:
    """Give Variable (and so Tensor) the methods, leaving its own attributes alone."""
    for name, fn in _FUNCTIONS.items():
        if name not in Variable.__dict__:
            setattr(Variable, name, _method(fn))
