"""What converted code calls (program/dy2static/transform.py writes the calls): each decides
when it runs, as PaddlePaddle's convert_ifelse / convert_while_loop do. A condition that is
a program Variable (a function being traced into a program) builds `cond` / `while_loop`;
anything else (a Python value, an eager Tensor) runs the plain Python statement.

Values that flow out of a tensor-decided branch: a Variable from both branches is chosen by
select_input; a number from one branch (or from both, differing) becomes a constant tensor
so it can be chosen; the same Python object from both passes through; a name one branch
leaves unbound stays unbound (UNDEFINED). A loop variable holding a number becomes a
constant tensor, since the loop updates it at run time.
"""
from __future__ import annotations

import functools
import linecache
import numbers
import sysconfig
import types

from keel.program import callsite
from keel.program.errors import OpError
from keel.program.variable import Variable


class _Undefined:
    """The value of a name not bound when a converted if/while ran (reading it after a
    tensor-decided branch bound it on one side only)."""

    def __repr__(self):
        return "<unbound>"


UNDEFINED = _Undefined()


def values(scope: dict, names) -> tuple:
    """The current values of `names` in a function's locals (UNDEFINED where unbound)."""
    return tuple(scope.get(n, UNDEFINED) for n in names)


def _is_static(value) -> bool:
    return isinstance(value, Variable) and not value.eager


def _fail(layer: str, where: str, message: str):
    path, _, line = where.rpartition(":")
    code = linecache.getline(path, int(line)).strip() if line.isdigit() else ""
    raise OpError(message, op_type=layer, callsite=f"{where}: {code}" if code else where)


# -- calls ---------------------------------------------------------------------------------------
# code that is not the user's: Keel's own, the standard library, installed packages
_NOT_USERS = callsite.OWN_DIRS + tuple(
    {path.rstrip("/") + "/" for key, path in sysconfig.get_paths().items()
     if key in ("stdlib", "platstdlib", "purelib", "platlib")})


def convert_call(target):
    """What a call in converted code calls: a function or method of the user's, converted;
    a Layer of the user's, called with its forward converted; anything else as it is."""
    from keel.program.nn.layer import Layer
    if isinstance(target, Layer):
        return target if not _users(type(target).forward) else functools.partial(_call_layer, target)
    if isinstance(target, (types.FunctionType, types.MethodType)) and _users(target):
        from keel.program.dy2static import convert_function
        return convert_function(target)
    return target


def _users(function) -> bool:
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    return code is not None and not code.co_filename.startswith(_NOT_USERS)


def _call_layer(layer, *args, **kwargs):
    from keel.program.dy2static import converted_forward
    with converted_forward(layer):
        return layer(*args, **kwargs)


# -- if ------------------------------------------------------------------------------------------
def convert_ifelse(pred, true_fn, false_fn, args, out_names, where):
    """`if pred:` with the branches as functions of the names they assign (`args`); returns
    the values of `out_names` after the if."""
    if not _is_static(pred):
        return true_fn(*args) if pred else false_fn(*args)
    from keel.program.control_flow import branch, select
    from keel.program.layers.math import logical_not
    _check_bool(pred, "cond", where)
    results = {}

    def run(fn, key):
        def build():
            outs = results[key] = tuple(fn(*args))
            return [v for v in _leaves(outs) if _is_static(v)]
        return build
    true_vars = iter(branch(pred, run(true_fn, True))[1])
    false_vars = iter(branch(logical_not(pred), run(false_fn, False))[1])
    merged, t_sel, f_sel = [], [], []
    for name, t, f in zip(out_names, results[True], results[False]):
        if t is UNDEFINED or f is UNDEFINED:
            merged.append(UNDEFINED)   # bound on one side only: not readable after the if
            _skip(t, true_vars), _skip(f, false_vars)
            continue
        if _structure(t) != _structure(f):
            _fail("cond", where, f"`{name}` has a different structure in the two branches of this tensor-decided "
                                 f"if ({_describe(t)} and {_describe(f)}): give it the same in both")
        leaves = []
        for a, b in zip(_leaves(t), _leaves(f)):
            a_var = next(true_vars) if _is_static(a) else None
            b_var = next(false_vars) if _is_static(b) else None
            if a_var is None and b_var is None and (a is b or _same_number(a, b)):
                leaves.append(a)
                continue
            like = a_var if a_var is not None else b_var
            t_sel.append(a_var if a_var is not None else _constant(a, like, name, where))
            f_sel.append(b_var if b_var is not None else _constant(b, like, name, where))
            leaves.append(_CHOSEN)
        merged.append((t, leaves))
    picked = iter(select(pred, t_sel, f_sel) if t_sel else [])
    return tuple(m if m is UNDEFINED else _rebuild(m[0], iter(next(picked) if v is _CHOSEN else v for v in m[1]))
                 for m in merged)


_CHOSEN = object()   # a leaf select_input picks


def _leaves(value) -> list:
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item)]
    return [value]


def _structure(value):
    if isinstance(value, (list, tuple)):
        return (type(value), tuple(_structure(v) for v in value))
    return None


def _rebuild(like, leaves):
    if isinstance(like, (list, tuple)):
        return type(like)(_rebuild(v, leaves) for v in like)
    return next(leaves)


def _skip(value, variables) -> None:
    for leaf in _leaves(value):
        if _is_static(leaf):
            next(variables)


def _describe(value) -> str:
    return f"a {type(value).__name__} of {len(value)}" if isinstance(value, (list, tuple)) else \
        ("a tensor" if _is_static(value) else f"a {type(value).__name__}")


def _same_number(a, b) -> bool:
    return isinstance(a, numbers.Number) and isinstance(b, numbers.Number) and type(a) is type(b) and a == b


def _constant(value, like, name: str, where: str):
    """A number flowing out of one branch as a constant tensor (like `like`) select_input can pick."""
    if not _is_number(value):
        _fail("cond", where, f"`{name}` is {_describe(value)} in one branch of this tensor-decided if: after "
                             "it a variable must be a tensor (or a number) on both sides; make it a tensor in "
                             "both branches (paddle.to_tensor / paddle.full)")
    return _as_tensor(value, like)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Number) and not isinstance(value, complex)


def _as_tensor(number, like=None):
    """A constant tensor holding `number`: `like`'s dtype and (known) shape, else [1] of
    bool, float32 or int64 as the number's Python type."""
    from keel.program.layers.tensor import fill_constant
    dtype = like.dtype if like is not None else ("bool" if isinstance(number, bool) else
                                                 "float32" if isinstance(number, float) else "int64")
    known = like is not None and like.shape is not None and all(d >= 0 for d in like.shape)
    return fill_constant(list(like.shape) if known else [1], dtype, number)


def _check_bool(pred, layer: str, where: str):
    from keel.program import dtypes
    if pred.dtype != dtypes.to_code("bool"):
        _fail(layer, where, f"the condition {pred.name} is {dtypes.name(pred.dtype)}, not bool: compare it "
                            "(x > 0, x != 0) to decide on it")
    if pred.shape is not None and any(d > 1 for d in pred.shape):
        _fail(layer, where, f"the condition {pred.name} has shape {list(pred.shape)}: a tensor-decided "
                            "if/while needs one element; reduce it (paddle.all(c), paddle.any(c), x.mean() > 0)")


# -- while ----------------------------------------------------------------------------------------
def convert_while(cond_fn, body_fn, args, names, where):
    """`while cond:` with the condition and body as functions of the loop variables; returns
    their values after the loop. Runs as Python while the condition is a Python value; from
    the first step on which it is a program Variable, the rest is a while_loop."""
    args = tuple(args)
    while True:
        pred = cond_fn(*args)
        if _is_static(pred):
            break
        if not pred:
            return args
        args = tuple(body_fn(*args))
    from keel.program.control_flow import while_loop
    _check_bool(pred, "while_loop", where)
    loop_vars = [_loop_variable(v, n, where) for v, n in zip(args, names)]

    def body(*current):
        new = tuple(body_fn(*current))
        return [v if _is_static(v) else _loop_variable(v, n, where, like=c) for v, n, c in zip(new, names, current)]
    return tuple(while_loop(lambda *current: cond_fn(*current), body, loop_vars))


def convert_for_range(bounds, body_fn, args, names, where):
    """`for i in range(*bounds):` with the body a function of i and the loop variables
    (`args`, i first; it returns them). Python bounds loop in Python; a tensor bound makes
    a while_loop over an int64 counter, after which i holds the bound it stopped at (as
    PaddlePaddle's converted loop leaves it)."""
    start, stop, step = (0, bounds[0], 1) if len(bounds) == 1 else (*bounds, 1)[:3]
    args = tuple(args)
    if not any(_is_static(b) for b in (start, stop, step)):
        for i in range(start, stop, step):
            args = tuple(body_fn(i, *args[1:]))
        return args
    if _is_static(step) or not isinstance(step, int) or step == 0:
        _fail("while_loop", where, f"range's step must be a non-zero Python int for a tensor-bounded loop, got "
                                   f"{step!r}")
    return _counted_loop(start, stop, step, lambda i, *current: tuple(body_fn(i, *current))[1:], args[1:],
                         names[1:], where)


def convert_for_iter(iterable, enumerated: bool, body_fn, args, names, where):
    """`for target in iterable:` (`in enumerate(iterable)` when `enumerated`) with the body a
    function of the item and the loop variables (`args`; it returns them). A program
    Variable is iterated by a while_loop over its leading dimension, the item being
    `iterable[i]` (and `(i, iterable[i])` enumerated), as PaddlePaddle's dy2static converts
    it; anything else (a list, an eager Tensor) is iterated in Python."""
    args = tuple(args)
    if not _is_static(iterable):
        for item in (enumerate(iterable) if enumerated else iterable):
            args = tuple(body_fn(item, *args))
        return args
    if iterable.shape is not None and len(iterable.shape) == 0:
        _fail("while_loop", where, f"iteration over {iterable.name}, a 0-D tensor")
    from keel.program.layers.tensor import reshape, shape

    def step(i, *current):
        item = iterable[reshape(i, [])]   # a 0-D index drops the leading axis, as x[k] does
        return body_fn((i, item) if enumerated else item, *current)
    return _counted_loop(0, shape(iterable)[0], 1, step, args, names, where)[1:]


def _counted_loop(start, stop, step: int, step_fn, carried, names, where) -> tuple:
    """A while_loop over an int64 counter from `start` while below `stop` (above, for a
    negative `step`), `step_fn(i, *carried)` giving the carried values of the next step.
    Returns (the counter it stopped at, *the carried values)."""
    from keel.program.control_flow import while_loop
    from keel.program.layers.math import cast
    counter, limit = (cast(b, "int64") if _is_static(b) else _loop_variable(int(b), "the loop counter", where)
                      for b in (start, stop))
    loop_vars = [counter, *(_loop_variable(v, n, where) for v, n in zip(carried, names))]

    def cond(i, *_):
        return i < limit if step > 0 else i > limit

    def body(i, *current):
        new = tuple(step_fn(i, *current))
        return [i + step, *(v if _is_static(v) else _loop_variable(v, n, where, like=c)
                            for v, n, c in zip(new, names, current))]
    return tuple(while_loop(cond, body, loop_vars))


def _loop_variable(value, name: str, where: str, like=None):
    """A loop variable as the while_loop carries it: a tensor (a number becomes one)."""
    if _is_static(value):
        return value
    if value is UNDEFINED:
        _fail("while_loop", where, f"`{name}` is first assigned inside this tensor-decided while loop and read "
                                   "after it or on the next step: give it a value before the loop")
    if not _is_number(value):
        _fail("while_loop", where, f"loop variable `{name}` is {_describe(value)}: a tensor-decided while loop "
                                   "carries tensors (or numbers) from step to step")
    return _as_tensor(value, like)


# -- conditions ------------------------------------------------------------------------------------
def convert_logical_and(left, right):
    """`a and b`: logical_and on tensors; Python's short-circuit otherwise."""
    return _logical(left, right, conjunction=True)


def convert_logical_or(left, right):
    """`a or b`: logical_or on tensors; Python's short-circuit otherwise."""
    return _logical(left, right, conjunction=False)


def _logical(left, right, conjunction: bool):
    a = left()
    if not _is_static(a):   # Python decides, and only evaluates `right` when it must
        return (a and right()) if conjunction else (a or right())
    b = right()
    if not _is_static(b):   # a tensor and a Python value: the value settles it or hands on the tensor
        return (a if b else b) if conjunction else (b if b else a)
    from keel.program.layers import math
    return (math.logical_and if conjunction else math.logical_or)(a, b)


def convert_logical_not(value):
    if not _is_static(value):
        return not value
    from keel.program.layers.math import logical_not
    return logical_not(value)


_INSTEAD = {
    "return": "assign the result to a variable in both branches and return it after the if",
    "break": "fold the exit into the loop condition (while i < n and not done:)",
    "continue": "put the rest of the step under an if on the negated condition",
    "yield": "a generator cannot be converted; compute the values into a list",
    "global": "pass the value in and return it instead of rebinding a global",
    "nonlocal": "pass the value in and return it instead of rebinding an enclosing variable",
    "while ... else": "move the else: part after the loop",
    "for ... else": "move the else: part after the loop",
}
_INSTEAD_IN_LOOPS = {
    "return": "keep the result in a variable, fold the exit into the loop condition "
              "(while i < n and not done:) and return after the loop",
}


def python_condition(pred, kind: str, escape: str, where: str):
    """The condition of an if/while (or a for loop's iterable or range bound) left to Python
    (it holds `escape`): a Python value goes through; a program Variable stops with the
    line and what to write instead."""
    if _is_static(pred):
        instead = (_INSTEAD_IN_LOOPS if kind != "if" else {}).get(escape, _INSTEAD[escape])
        if kind == "for" and escape in ("break", "continue", "return"):
            instead = f"write it as a while loop over an index: {instead}"
        _fail("cond" if kind == "if" else "while_loop", where,
              f"this `{kind}` {'iterates over' if kind == 'for' else 'decides on'} a tensor's value and holds "
              f"`{escape}`, which a converted {kind} cannot: {instead}")
    return pred
