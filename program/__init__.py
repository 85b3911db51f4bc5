"""Keel's program package: the IR, the op registry, the builder API and layers.

    import keel.program as pg
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", shape=[-1, 64], dtype="float32")
        y = pg.nn.fc(x, 10, activation="relu")
        w = pg.create_parameter([10, 4], "float32")   # a parameter for ops written by hand
"""
from keel.program import ops as _ops  # noqa: F401  (registers every op definition)
from keel.program.block import Block
from keel.program.default import (default_main_program, default_startup_program, name_scope,
                             program_guard, seed, switch_main_program, switch_startup_program)
from keel.program.errors import (AttrError, DTypeError, DuplicateNameError, KeelError, OpError, ParseError,
                            ProgramError, ShapeError, SlotError, UndefinedVariableError, UnknownOpError,
                            UnsupportedProgramError)
from keel.program.operator import Operator
from keel.program.program import Program
from keel.program.variable import Parameter, Variable
from keel.program.tensor import Tensor
from keel.program.dygraph import disable_static, enable_static, in_dynamic_mode
from keel.program import unique_name
from keel.program import initializer
from keel.program.param_attr import ParamAttr
from keel.program.layers.data import data
from keel.program.layers.parameter import create_parameter
from keel.program.layers.math import *  # noqa: F401,F403  (add, matmul, mean, relu, ...: see __all__)
from keel.program.layers.tensor import *  # noqa: F401,F403  (reshape, concat, fill_constant, ...)
from keel.program.layers.manip import *  # noqa: F401,F403  (flip, roll, einsum, argsort, ...)
from keel.program.layers.random import *  # noqa: F401,F403  (rand, randn, uniform, normal, randint)
from keel.program.layers.creation import *  # noqa: F401,F403  (eye, empty, meshgrid, randperm, clone, ...)
from keel.program.layers.shaping import *  # noqa: F401,F403  (cat, chunk, diag, unbind, masked_select, ...)
from keel.program.layers.stat import *  # noqa: F401,F403  (var, logsumexp, sort, unique, allclose, ...)
from keel.program import tensor_methods as _tensor_methods
_tensor_methods.install()  # x.sum(), x.reshape(...), x.matmul(y), ... on Variables and Tensors
from keel.program import nn
from keel.program import io
from keel.program.backward import append_backward, gradients
from keel.program import lr, optimizer, regularizer
from keel.program import static, jit
from keel.program.control_flow import array_length, array_read, array_write, create_array
from keel.program.io.state_file import load, save

# The detection builders and transforms (`vision`) and `linalg` load when first named (PEP 562):
# `import keel` does not pay for them.
def __getattr__(name: str):
    if name == "vision":
        import keel.program.vision as vision
        return vision
    if name == "linalg":
        import keel.program.linalg as linalg
        return linalg
    raise AttributeError(f"module 'keel.program' has no attribute {name!r}")


from keel.program.layers import creation as _creation, manip as _manip, math as _math, random as _random  # noqa: E402
from keel.program.layers import shaping as _shaping, stat as _stat, tensor as _tensor  # noqa: E402

__all__ = ["Program", "Block", "Operator", "Variable", "Parameter", "Tensor", "ParamAttr",
           "default_main_program", "default_startup_program", "name_scope", "program_guard", "seed",
           "switch_main_program", "switch_startup_program", "disable_static", "enable_static", "in_dynamic_mode",
           "KeelError", "AttrError", "DTypeError", "DuplicateNameError", "OpError", "ParseError", "ProgramError",
           "ShapeError", "SlotError", "UndefinedVariableError", "UnknownOpError", "UnsupportedProgramError",
           "data", "create_parameter", "append_backward", "gradients", "save", "load",
           "array_length", "array_read", "array_write", "create_array",
           "unique_name", "initializer", "nn", "vision", "io", "lr", "optimizer", "regularizer", "static", "jit",
           "linalg",
           *dict.fromkeys([*_math.__all__, *_tensor.__all__, *_manip.__all__, *_random.__all__, *_creation.__all__,
                           *_shaping.__all__, *_stat.__all__])]
