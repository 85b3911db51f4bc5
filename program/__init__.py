"""Keel's program package: the IR, the op registry, the builder API and layers.

    import program as pg
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", shape=[-1, 64], dtype="float32")
        y = pg.nn.fc(x, 10, activation="relu")
        w = pg.create_parameter([10, 4], "float32")   # a parameter for ops written by hand
"""
from program import ops as _ops  # noqa: F401  (registers every op definition)
from program.block import Block
from program.default import (default_main_program, default_startup_program, name_scope,
                             program_guard, seed, switch_main_program, switch_startup_program)
from program.errors import (AttrError, DTypeError, DuplicateNameError, KeelError, OpError, ParseError,
                            ProgramError, ShapeError, SlotError, UndefinedVariableError, UnknownOpError,
                            UnsupportedProgramError)
from program.operator import Operator
from program.program import Program
from program.variable import Parameter, Variable
from program import unique_name
from program import initializer
from program.param_attr import ParamAttr
from program.layers.data import data
from program.layers.parameter import create_parameter
from program.layers.math import *  # noqa: F401,F403  (add, matmul, mean, relu, ...: see __all__)
from program.layers.tensor import *  # noqa: F401,F403  (reshape, concat, fill_constant, ...)
from program.layers.manip import *  # noqa: F401,F403  (flip, roll, einsum, argsort, ...)
from program import nn
from program import vision
from program import io
from program.backward import append_backward, gradients
from program import lr, optimizer, regularizer
from program import static, jit
from program.control_flow import array_length, array_read, array_write, create_array
from program.io.state_file import load, save
