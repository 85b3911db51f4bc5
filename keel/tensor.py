"""`paddle.tensor`: the tensor functions (`paddle.tensor.transpose`, `unsqueeze`, `meshgrid`,
...), each one of keel.program's layer functions: it builds ops into a program, or runs at
once on Tensors in eager mode. `keel` itself holds them all too (`keel.transpose`)."""
from keel.program.layers.creation import clone, empty, empty_like, eye, meshgrid, randint_like, randperm
from keel.program.layers.manip import (acos, argsort, asin, atan, dist, einsum, flip, index_select, numel,
                                       put_along_axis, roll, scatter_nd_add, stanh, take_along_axis, tril, triu,
                                       unfold)
from keel.program.layers.math import (abs, add, add_n, all, any, argmax, argmin, bmm, cast, ceil, clip, cos,
                                      cumsum, divide, equal, erf, exp, expm1, floor, floor_divide, greater_equal,
                                      greater_than, isfinite, isinf, isnan, less_equal, less_than, log, log1p,
                                      log2, log10, logical_and, logical_not, logical_or, logical_xor, matmul, max,
                                      maximum, mean, min, minimum, mm, multiply, norm, not_equal, pow, prod,
                                      reciprocal, remainder, round, rsqrt, scale, sigmoid, sign, sin, softmax,
                                      sqrt, square, subtract, sum, tanh, topk, where)
from keel.program.layers.random import normal, rand, randint, randn, standard_normal, uniform
from keel.program.layers.shaping import (broadcast_to, cat, chunk, diag, diagonal, index_sample, masked_select,
                                         repeat_interleave, t, unbind)
from keel.program.layers.stat import (addmm, allclose, bitwise_and, bitwise_not, bitwise_or, bitwise_xor,
                                      equal_all, fmax, fmin, histogram, is_floating_point, is_tensor, logsumexp,
                                      sort, tan, unique, var)
from keel.program.layers.tensor import (arange, assign, concat, expand, expand_as, flatten, full, full_like,
                                        gather, gather_nd, linspace, nonzero, ones, ones_like, reshape, scatter,
                                        shape, slice, split, squeeze, stack, strided_slice, tile, transpose,
                                        unsqueeze, unstack, zeros, zeros_like)

__all__ = ["abs", "acos", "add", "add_n", "addmm", "all", "allclose", "any", "arange", "argmax", "argmin", "argsort",
           "asin", "assign", "atan", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "bmm",
           "broadcast_to", "cast", "cat", "ceil", "chunk", "clip", "clone", "concat", "cos", "cumsum",
           "diag", "diagonal", "dist", "divide", "einsum", "empty", "empty_like", "equal", "equal_all",
           "erf", "exp", "expand", "expand_as", "expm1", "eye", "flatten", "flip", "floor",
           "floor_divide", "fmax", "fmin", "full", "full_like", "gather", "gather_nd", "greater_equal",
           "greater_than", "histogram", "index_sample", "index_select", "is_floating_point", "is_tensor",
           "isfinite", "isinf", "isnan", "less_equal", "less_than", "linspace", "log", "log10", "log1p",
           "log2", "logical_and", "logical_not", "logical_or", "logical_xor", "logsumexp",
           "masked_select", "matmul", "max", "maximum", "mean", "meshgrid", "min", "minimum", "mm",
           "multiply", "nonzero", "norm", "normal", "not_equal", "numel", "ones", "ones_like", "pow",
           "prod", "put_along_axis", "rand", "randint", "randint_like", "randn", "randperm", "reciprocal",
           "remainder", "repeat_interleave", "reshape", "roll", "round", "rsqrt", "scale", "scatter",
           "scatter_nd_add", "shape", "sigmoid", "sign", "sin", "slice", "softmax", "sort", "split",
           "sqrt", "square", "squeeze", "stack", "standard_normal", "stanh", "strided_slice", "subtract",
           "sum", "t", "take_along_axis", "tan", "tanh", "tile", "topk", "transpose", "tril", "triu",
           "unbind", "unfold", "uniform", "unique", "unsqueeze", "unstack", "var", "where", "zeros",
           "zeros_like"]
