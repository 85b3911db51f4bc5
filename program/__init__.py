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
from keel.program import vision
from keel.program import io
from keel.program.backward import append_backward, gradients
from keel.program import lr, optimizer, regularizer
from keel.program import static, jit
from keel.program import linalg
from keel.program.control_flow import array_length, array_read, array_write, create_array
from keel.program.io.state_file import load, save
