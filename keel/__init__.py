"""`import keel as paddle`: PaddlePaddle's top-level names over Keel's packages, so a script
written as PaddlePaddle's documentation writes it runs with its import line changed.

    import keel as paddle
    from keel import nn
    from keel.static import InputSpec

    model = paddle.Model(Net(), inputs=[InputSpec([None, 784], "float32", "x")], labels=[...])
    model.prepare(paddle.optimizer.Adam(parameters=model.parameters()), nn.CrossEntropyLoss(),
                  paddle.metric.Accuracy())
    model.fit(train_dataset, epochs=2, batch_size=64)
    model.save("inference/net", training=False)
    predictor = paddle.inference.create_predictor(paddle.inference.Config("inference/net"))

It holds no code of its own: `keel.program` (the IR, builder API, layers, io, jit, optimizers),
`keel.executor` (running, inference), `keel.hapi` (Model, metrics, callbacks) and
`keel.distributed` (process group, fleet) do the work; this facade sits above them all, as
`keel.tools` does. Each PaddlePaddle namespace (`keel.nn`, `keel.static`, `keel.io`, ...) is
a module of this package holding that namespace's names and nothing else.

`import keel` loads what building and running a program needs. The namespaces few scripts
touch (`hapi`'s Model, `distributed`, `inference`, `vision`, `linalg`, `onnx`, ...) load on
first use (`_ON_FIRST_USE` below, through PEP 562's module `__getattr__`), so their imports
(mpi4py, the Predictor's passes, the dy2static transformer) cost nothing until then;
`import keel.X` and `from keel import X` work for them as for any submodule.
"""
__version__ = "0.2.0"

import importlib as _importlib

from keel.device import is_compiled_with_cuda
from keel.executor import (CPUPlace, CUDAPlace, Executor, LoDTensor, Scope, create_lod_tensor, global_scope,
                           scope_guard)
from keel.executor.eager import grad, is_grad_enabled, no_grad, set_grad_enabled, to_tensor
from keel.executor.flags import get_flags, set_flags
from keel.executor.place import get_device, set_device
from keel.program import (AttrError, DTypeError, DuplicateNameError, KeelError, OpError, Parameter, ParamAttr,
                          ParseError, Program, ProgramError, ShapeError, SlotError, Tensor, UndefinedVariableError,
                          UnknownOpError, UnsupportedProgramError, Variable, append_backward, create_parameter, data,
                          default_main_program, default_startup_program, disable_static, enable_static, gradients,
                          in_dynamic_mode, load, name_scope, program_guard, save, seed, unique_name)
from keel.program.dtype_names import (bfloat16, bool, cfloat, complex64, complex128, dtype, float, float16, float32,
                                      float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64)
from keel.program.dtypes import get_default_dtype, set_default_dtype
from keel.program.layers.creation import clone, empty, empty_like, eye, meshgrid, randint_like, randperm
from keel.program.layers.manip import (acos, argsort, asin, atan, dist, einsum, flip, index_select, numel,
                                       put_along_axis, roll, scatter_nd_add, stanh, take_along_axis, tril, triu,
                                       unfold)
from keel.program.layers.math import (abs, add, add_n, all, any, argmax, argmin, bmm, cast, ceil, clip, cos,
                                      cumsum, divide, equal, erf, exp, expm1, floor, floor_divide, greater_equal,
                                      greater_than, isfinite, isinf, isnan, less_equal, less_than, log, log1p, log2,
                                      log10, logical_and, logical_not, logical_or, logical_xor, matmul, max, maximum,
                                      mean, min, minimum, mm, multiply, norm, not_equal, pow, prod, reciprocal, relu,
                                      remainder, round, rsqrt, scale, sigmoid, sign, sin, softmax, sqrt, square,
                                      subtract, sum, tanh, topk, where)
from keel.program.layers.random import normal, rand, randint, randn, standard_normal, uniform
from keel.program.layers.shaping import (broadcast_to, cat, chunk, diag, diagonal, index_sample, masked_select,
                                         repeat_interleave, t, unbind)
from keel.program.layers.stat import (addmm, allclose, bitwise_and, bitwise_not, bitwise_or, bitwise_xor,
                                      equal_all, fmax, fmin, histogram, is_floating_point, is_tensor, logsumexp,
                                      sort, tan, unique, var)
from keel.program.layers.tensor import (arange, assign, concat, expand, expand_as, flatten, full, full_like, gather,
                                        gather_nd, linspace, nonzero, one_hot, ones, ones_like, pad, reshape,
                                        scatter, shape, slice, split, squeeze, stack, strided_slice, tile, transpose,
                                        unsqueeze, unstack, zeros, zeros_like)

# name -> (module, attribute in it; None: the module itself), imported when first read
_ON_FIRST_USE = {
    "amp": ("keel.amp", None), "callbacks": ("keel.callbacks", None), "device": ("keel.device", None),
    "distributed": ("keel.distributed", None), "hapi": ("keel.hapi", None), "incubate": ("keel.incubate", None),
    "inference": ("keel.inference", None), "io": ("keel.io", None), "jit": ("keel.jit", None),
    "linalg": ("keel.linalg", None), "lr": ("keel.optimizer.lr", None), "metric": ("keel.metric", None),
    "nn": ("keel.nn", None), "onnx": ("keel.onnx", None), "optimizer": ("keel.optimizer", None),
    "regularizer": ("keel.regularizer", None), "static": ("keel.static", None), "utils": ("keel.utils", None),
    "version": ("keel.version", None), "vision": ("keel.vision", None),
    "DataParallel": ("keel.distributed.data_parallel", "DataParallel"), "Model": ("keel.hapi.model", "Model"),
    "flops": ("keel.hapi.flops", "flops"), "summary": ("keel.hapi.model_summary", "summary"),
}


def __getattr__(name: str):
    """PEP 562: a name of `_ON_FIRST_USE`, imported now and kept (so this runs once a name)."""
    if name not in _ON_FIRST_USE:
        raise AttributeError(f"module 'keel' has no attribute {name!r}")
    module_name, attribute = _ON_FIRST_USE[name]
    try:
        value = _importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name != module_name:
            raise
        raise AttributeError(f"module 'keel' has no attribute {name!r}: {module_name} is not in this build") from e
    if attribute is not None:
        value = getattr(value, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})


# PaddlePaddle 3.3.1's top-level names that Keel has, and Keel's own: building and running
# programs (paddle.static's, kept at the top as Keel's documentation writes them), LoD feeds,
# `lr` (paddle.optimizer.lr), `relu`/`one_hot`/`pad` (paddle.nn.functional's), Keel's errors.
# `onnx` joins when its module (paddle.onnx.export) is there.
__all__ = ["abs", "acos", "add", "add_n", "addmm", "all", "allclose", "amp", "any", "append_backward", "arange",
           "argmax", "argmin", "argsort", "asin", "assign", "atan", "AttrError", "bfloat16", "bitwise_and",
           "bitwise_not", "bitwise_or", "bitwise_xor", "bmm", "bool", "broadcast_to", "callbacks", "cast",
           "cat", "ceil", "cfloat", "chunk", "clip", "clone", "complex128", "complex64", "concat", "cos",
           "CPUPlace", "create_lod_tensor", "create_parameter", "CUDAPlace", "cumsum", "data",
           "DataParallel", "default_main_program", "default_startup_program", "device", "diag", "diagonal",
           "disable_static", "dist", "distributed", "divide", "dtype", "DTypeError", "DuplicateNameError",
           "einsum", "empty", "empty_like", "enable_static", "equal", "equal_all", "erf", "Executor", "exp",
           "expand", "expand_as", "expm1", "eye", "flatten", "flip", "float", "float16", "float32",
           "float64", "floor", "floor_divide", "flops", "fmax", "fmin", "full", "full_like", "gather",
           "gather_nd", "get_default_dtype", "get_device", "get_flags", "global_scope", "grad", "gradients",
           "greater_equal", "greater_than", "hapi", "histogram", "in_dynamic_mode", "incubate",
           "index_sample", "index_select", "inference", "int16", "int32", "int64", "int8", "io",
           "is_compiled_with_cuda", "is_floating_point", "is_grad_enabled", "is_tensor", "isfinite",
           "isinf", "isnan", "jit", "KeelError", "less_equal", "less_than", "linalg", "linspace", "load",
           "LoDTensor", "log", "log10", "log1p", "log2", "logical_and", "logical_not", "logical_or",
           "logical_xor", "logsumexp", "lr", "masked_select", "matmul", "max", "maximum", "mean",
           "meshgrid", "metric", "min", "minimum", "mm", "Model", "multiply", "name_scope", "nn", "no_grad",
           "nonzero", "norm", "normal", "not_equal", "numel", "one_hot", "ones", "ones_like",
           "OpError", "optimizer", "pad", "ParamAttr", "Parameter", "ParseError", "pow", "prod", "Program",
           "program_guard", "ProgramError", "put_along_axis", "rand", "randint", "randint_like", "randn",
           "randperm", "reciprocal", "regularizer", "relu", "remainder", "repeat_interleave", "reshape",
           "roll", "round", "rsqrt", "save", "scale", "scatter", "scatter_nd_add", "Scope", "scope_guard",
           "seed", "set_default_dtype", "set_device", "set_flags", "set_grad_enabled", "shape",
           "ShapeError", "sigmoid", "sign", "sin", "slice", "SlotError", "softmax", "sort", "split", "sqrt",
           "square", "squeeze", "stack", "standard_normal", "stanh", "static", "strided_slice", "subtract",
           "sum", "summary", "t", "take_along_axis", "tan", "tanh", "Tensor", "tile", "to_tensor", "topk",
           "transpose", "tril", "triu", "uint16", "uint32", "uint64", "uint8", "unbind",
           "UndefinedVariableError", "unfold", "uniform", "unique", "unique_name", "UnknownOpError",
           "unsqueeze", "unstack", "UnsupportedProgramError", "utils", "var", "Variable", "version",
           "vision", "where", "zeros", "zeros_like"]
