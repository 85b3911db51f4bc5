"""dy2static: a function's Python `if`/`while` on tensor values, converted so that tracing
it into a program (to_static, jit.save) builds `cond` / `while_loop`, as PaddlePaddle's
dy2static does: the function's own source is parsed (inspect.getsource, ast), its loops'
break/continue turned into flags (loop_exits.py) and its returns under an if into one
(transform.single_return), its if/while statements rewritten (transform.py) into calls
that decide when they run (runtime.py), and the rewritten tree compiled with `compile()`
into a function with the original's globals, closure, defaults and line numbers (so errors
and op callsites name the user's lines). Nothing else is evaluated.

A function whose source cannot be read (a lambda, a builtin, code typed at a prompt), or
that holds no if/while and no call, is used as it is.
"""
from __future__ import annotations

import ast
import contextlib
import inspect
import textwrap
import types
import weakref

from keel.program.dy2static import runtime
from keel.program.dy2static.loop_exits import lower_loop_exits
from keel.program.dy2static.transform import JST, ControlFlowTransformer, single_return

__all__ = ["convert_function", "converted_forward"]

_CACHE: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def convert_function(function):
    """`function` with its if/while statements converted (a bound method stays bound to its
    object); `function` itself when there is nothing to convert or no source to read."""
    if isinstance(function, types.MethodType):
        converted = convert_function(function.__func__)
        return function if converted is function.__func__ else types.MethodType(converted, function.__self__)
    if not isinstance(function, types.FunctionType):
        return function
    try:
        return _CACHE[function]
    except KeyError:
        pass
    converted = _convert(function)
    _CACHE[function] = converted
    return converted


@contextlib.contextmanager
def converted_forward(layer):
    """Within the block, `layer.forward` is its converted form (jit.save traces a layer
    this way, and converted code calls the user's sub-layers this way). A forward that
    to_static made converts itself and is left alone."""
    forward = layer.forward
    converted = convert_function(forward)
    if converted is forward:
        yield
        return
    own = layer.__dict__.get("forward")
    layer.forward = converted
    try:
        yield
    finally:
        if own is None:
            del layer.forward
        else:
            layer.forward = own


def _convert(function: types.FunctionType) -> types.FunctionType:
    code = function.__code__
    try:
        source = textwrap.dedent(inspect.getsource(function))
        module = ast.increment_lineno(ast.parse(source), code.co_firstlineno - 1)  # the file's line numbers
    except (OSError, TypeError, SyntaxError, IndentationError):
        return function
    definition = module.body[0] if module.body else None
    if not isinstance(definition, ast.FunctionDef) or definition.name != code.co_name:
        return function   # a lambda, or source that is not this function's definition
    definition.decorator_list = []
    lower_loop_exits(definition)
    single_return(definition)
    transformer = ControlFlowTransformer(definition, code.co_filename)
    definition.body = [transformer.visit(stmt) for stmt in definition.body]
    definition.body = [s for item in definition.body for s in (item if isinstance(item, list) else [item])]
    if not (transformer.converted or transformer.guarded or transformer.calls):  # (then nothing was lowered)
        return function
    # `def _keel_outer(<free variables>): <definition>`: the function's free variables stay
    # free variables of the compiled code, filled from the original closure below
    free = (JST, *code.co_freevars)
    outer = ast.FunctionDef(
        name="_keel_outer", body=[definition],
        args=ast.arguments(posonlyargs=[], args=[ast.arg(arg=n) for n in free], vararg=None, kwonlyargs=[],
                           kw_defaults=[], kwarg=None, defaults=[]),
        decorator_list=[], returns=None, type_comment=None)
    ast.copy_location(outer, definition)
    tree = ast.Module(body=[outer], type_ignores=[])
    ast.fix_missing_locations(tree)
    compiled = compile(tree, code.co_filename, "exec")
    outer_code = next(c for c in compiled.co_consts if isinstance(c, types.CodeType))
    inner_code = next(c for c in outer_code.co_consts if isinstance(c, types.CodeType) and c.co_name == code.co_name)
    cells = dict(zip(code.co_freevars, function.__closure__ or ()))
    cells[JST] = types.CellType(runtime)
    closure = tuple(cells[n] for n in inner_code.co_freevars)
    converted = types.FunctionType(inner_code, function.__globals__, function.__name__, function.__defaults__,
                                   closure)
    converted.__kwdefaults__ = function.__kwdefaults__
    converted.__dict__.update(function.__dict__)
    converted.__qualname__ = function.__qualname__
    return converted
