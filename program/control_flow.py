"""Control flow in the builder API, as PaddlePaddle's static API writes it (`paddle.static.nn`):
`cond`, `case`, `switch_case` (conditional_block + select_input), `while_loop` (while), and
the tensor-array helpers `create_array`, `array_write`, `array_read`, `array_length`.

Each branch or loop body is built into a sub-block of the current block (program.create_block,
rolled back after). What the sub-block reads and writes outside itself is found from its ops
(program/ops/control_flow.py `block_io`) and recorded in the op's Input/X and Out slots, as
PaddlePaddle records them. A branch's results are copied (`assign`) into variables of the
enclosing block, and `select_input` picks the taken branch's; a loop's body writes its new
values back into the loop variables, and its condition into the loop's condition variable.

    import keel.program as pg
    x = pg.data("x", [1], "float32")
    y = pg.static.nn.cond(pg.mean(x) > 0, lambda: x * 2, lambda: x - 1)
    i, s = pg.static.nn.while_loop(lambda i, s: i < 10, lambda i, s: [i + 1, s + i],
                                   [pg.fill_constant([1], "int64", 0), pg.fill_constant([1], "int64", 0)])
"""
from __future__ import annotations

from keel.program import callsite, dtypes, unique_name
from keel.program.default import default_main_program
from keel.program.errors import OpError
from keel.program.layers.helper import LayerHelper
from keel.program.ops.control_flow import block_io
from keel.program.variable import Variable
from keel.proto import pb

_T = pb.VarType

__all__ = ["cond", "case", "switch_case", "while_loop", "create_array", "array_write", "array_read",
           "array_length"]


def _fail(layer: str, message: str):
    raise OpError(message, op_type=layer, callsite=callsite.describe(callsite.user_frame_lines()))


def _flatten(value) -> list:
    """The Variables of a (nested list/tuple of) Variable(s), in order."""
    if isinstance(value, (list, tuple)):
        return [v for item in value for v in _flatten(item)]
    return [value]


def _pack(like, flat: list):
    """`flat` put back into the nesting of `like`."""
    items = iter(flat)

    def build(v):
        if isinstance(v, (list, tuple)):
            return type(v)(build(x) for x in v)
        return next(items)
    return build(like)


def _check_condition(layer: str, pred) -> None:
    if not isinstance(pred, Variable) or pred.dtype != _T.BOOL:
        _fail(layer, f"the condition must be a bool Variable, got {pred!r}")
    if pred.shape is not None and any(d > 1 for d in pred.shape):
        _fail(layer, f"the condition must hold one element, got shape {list(pred.shape)}")


def _sub_block_op(op_type, cond_slot, cond, inputs_slot, build, attrs):
    """Build a sub-block with `build()` (returns its result) and append the op owning it to
    the enclosing block, its slots listing what the sub-block reads and writes outside."""
    program = default_main_program()
    parent = program.current_block()
    block = program.create_block()
    try:
        result = build(parent)
    finally:
        program.rollback()
    reads, writes = block_io(program, block.idx)
    if not writes:   # nothing it computes is seen outside (a branch passing values through)
        return result
    scopes = parent.create_var(unique_name.generate(f"_{op_type}_scope"), type=_T.STEP_SCOPES)
    # a block reading nothing from outside lists its condition (the slot may not be empty)
    parent.append_op(op_type, {cond_slot: cond, inputs_slot: reads or [c.name for c in cond]},
                     {"Out": writes, "StepScopes" if op_type == "while" else "Scope": [scopes]},
                     {"sub_block": block.idx, **attrs})
    return result


# -- branches -----------------------------------------------------------------------------------
def branch(pred, fn):
    """A conditional_block running `fn` when `pred` holds; its results copied into new
    variables of the enclosing block (None: fn returned None)."""
    def build(parent):
        result = fn()
        if result is None:
            return None
        flat = _flatten(result)
        for v in flat:
            if not isinstance(v, Variable):
                _fail("cond", f"a branch must return Variables (or lists of them), got {v!r}")
        from keel.program.layers.tensor import assign
        outer = [parent.create_var(unique_name.generate("cond.tmp"), v.shape, v.dtype) for v in flat]
        for v, o in zip(flat, outer):
            assign(v, output=o)
        return result, outer
    return _sub_block_op("conditional_block", "Cond", [pred], "Input", build, {"is_scalar_condition": True})


def cond(pred, true_fn=None, false_fn=None, name=None):
    """`true_fn()` if the one-element bool `pred` holds, else `false_fn()`: both branches are
    built, each in a conditional_block, and select_input picks the results of the one taken
    (where the two disagree on a dim, the result's is -1). Both functions return Variables of
    the same nesting and dtypes, or both None.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     x = paddle.static.data("x", [1], "float32")
        ...     out = paddle.static.nn.cond(x.sum() > 0, lambda: x * 2, lambda: -x)
        >>> exe = paddle.static.Executor()
        >>> [exe.run(main, feed={"x": np.array([v], "float32")}, fetch_list=[out])[0].tolist() for v in (3, -4)]
        [[6.0], [4.0]]
    """
    from keel.program.layers.math import logical_not
    _check_condition("cond", pred)
    true_out = branch(pred, true_fn) if true_fn is not None else None
    false_out = branch(logical_not(pred), false_fn) if false_fn is not None else None
    if true_out is None and false_out is None:
        return None
    if true_out is None or false_out is None:
        _fail("cond", "true_fn and false_fn must both return Variables or both return None")
    (structure, t_vars), (_, f_vars) = true_out, false_out
    if len(t_vars) != len(f_vars):
        _fail("cond", f"true_fn returns {len(t_vars)} Variables but false_fn {len(f_vars)}")
    return _pack(structure, select(pred, t_vars, f_vars, name))


def select(pred, t_vars, f_vars, name=None) -> list[Variable]:
    """For each pair, the true branch's variable where `pred` holds, else the false one's
    (select_input ops; the pairs share a dtype)."""
    from keel.program.layers.math import cast
    for t, f in zip(t_vars, f_vars):
        if t.dtype != f.dtype:
            _fail("cond", f"the branches return {dtypes.name(t.dtype)} and {dtypes.name(f.dtype)} for one result")
    mask = cast(pred, "int32")
    helper = LayerHelper("select_input", name)
    outs = []
    for t, f in zip(t_vars, f_vars):
        out = helper.create_tmp(t.dtype)
        helper.append_op("select_input", {"X": [f, t], "Mask": mask}, {"Out": out})
        outs.append(out)
    return outs


def case(pred_fn_pairs, default=None, name=None):
    """The function of the first (pred, fn) pair whose pred holds, else `default()` (None:
    the last pair's fn), as nested conds.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     x = paddle.static.data("x", [1], "float32")
        ...     out = paddle.static.nn.case([(x < 0, lambda: x - x), (x < 10, lambda: x * 2)], default=lambda: x)
        >>> exe = paddle.static.Executor()
        >>> [exe.run(main, feed={"x": np.array([v], "float32")}, fetch_list=[out])[0].tolist() for v in (-1, 3, 20)]
        [[0.0], [6.0], [20.0]]
    """
    pairs = list(pred_fn_pairs)
    if not pairs:
        _fail("case", "needs at least one (pred, fn) pair")
    if default is None:
        *pairs, (_, default) = pairs
        if not pairs:
            return default()
    (pred, fn), rest = pairs[0], pairs[1:]
    return cond(pred, fn, (lambda: case(rest, default)) if rest else default, name)


def switch_case(branch_index, branch_fns, default=None, name=None):
    """The function `branch_fns` maps `branch_index` (a one-element int Variable) to: a dict
    {index: fn}, a list of (index, fn) pairs or a list of fns (indexed from 0); `default()`
    for other indices (None: the function of the largest index).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     i = paddle.static.data("i", [1], "int32")
        ...     branches = {0: lambda: paddle.full([1], 10.0), 2: lambda: paddle.full([1], 20.0)}
        ...     out = paddle.static.nn.switch_case(i, branches, default=lambda: paddle.full([1], -1.0))
        >>> exe = paddle.static.Executor()
        >>> [exe.run(main, feed={"i": np.array([v], "int32")}, fetch_list=[out])[0].tolist() for v in (0, 1, 2)]
        [[10.0], [-1.0], [20.0]]
    """
    from keel.program.layers.math import equal
    from keel.program.layers.tensor import fill_constant
    if isinstance(branch_fns, dict):
        items = sorted(branch_fns.items())
    else:
        items = [p if isinstance(p, (list, tuple)) else (i, p) for i, p in enumerate(branch_fns)]
    if default is None:
        *items, (_, default) = sorted(items)
    pairs = [(equal(branch_index, fill_constant([1], branch_index.dtype, int(i))), fn) for i, fn in items]
    return case(pairs, default, name) if pairs else default()


# -- loops --------------------------------------------------------------------------------------
def while_loop(cond, body, loop_vars, is_test=False, name=None):
    """Repeat `loop_vars = body(*loop_vars)` while `cond(*loop_vars)` holds (a while op); returns
    the loop variables, which the loop updates in place. A loop variable whose shape the body
    changes gets -1 in the dims that change.

    Examples:
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     i = paddle.full([1], 0, "int64")
        ...     total = paddle.full([1], 0, "int64")
        ...     i, total = paddle.static.nn.while_loop(lambda i, t: i < 5, lambda i, t: [i + 1, t + i], [i, total])
        >>> [v.tolist() for v in paddle.static.Executor().run(main, fetch_list=[i, total])]
        [[5], [10]]
    """
    from keel.program.layers.tensor import assign
    if not callable(cond) or not callable(body):
        _fail("while_loop", "cond and body must be callable")
    loop_vars = list(loop_vars) if isinstance(loop_vars, (list, tuple)) else [loop_vars]
    if not loop_vars:
        _fail("while_loop", "needs at least one loop variable")
    flat = _flatten(loop_vars)
    for v in flat:
        if not isinstance(v, Variable):
            _fail("while_loop", f"loop variables must be Variables (or lists of them), got {v!r}")
    pre_cond = cond(*loop_vars)
    _check_condition("while_loop", pre_cond)

    def build(parent):
        outputs = body(*loop_vars)
        outputs = list(outputs) if isinstance(outputs, (list, tuple)) else [outputs]
        new = _flatten(outputs)
        if len(new) != len(flat):
            _fail("while_loop", f"body returns {len(new)} Variables for {len(flat)} loop variables")
        now_cond = cond(*_pack(loop_vars, new))
        _check_condition("while_loop", now_cond)
        for v, n in zip(flat, new):
            if not isinstance(n, Variable) or n.dtype != v.dtype:
                _fail("while_loop", f"body must return a {dtypes.name(v.dtype)} Variable for loop "
                                    f"variable {v.name!r}, got {n!r}")
            if n is not v:
                before = v.shape
                assign(n, output=v)  # (which gives v the shape of n)
                if before is not None and n.shape is not None and tuple(before) != tuple(n.shape):
                    v.shape = [a if a == b else -1 for a, b in zip(before, n.shape)] \
                        if len(before) == len(n.shape) else [-1] * len(n.shape)
        assign(now_cond, output=pre_cond)
    _sub_block_op("while", "Condition", [pre_cond], "X", build, {"is_test": bool(is_test)})
    return loop_vars


# -- tensor arrays ------------------------------------------------------------------------------
def create_array(dtype="float32", initialized_list=None):
    """A new tensor array (a DENSE_TENSOR_ARRAY variable; empty until written), holding the
    Variables of `initialized_list` if given."""
    block = default_main_program().current_block()
    array = block.create_var(unique_name.generate("array"), (), dtype, type=_T.DENSE_TENSOR_ARRAY)
    for k, v in enumerate(initialized_list or ()):
        array_write(v, k, array)
    return array


def _index(i):
    from keel.program.layers.tensor import fill_constant
    if isinstance(i, Variable):
        if i.dtype != _T.INT64 or (i.shape is not None and any(d > 1 for d in i.shape)):
            _fail("array index", f"the index must be a one-element int64 Variable, got {i!r}")
        return i
    return fill_constant([1], "int64", int(i))


def array_write(x, i, array=None):
    """array[i] = x (op write_to_array); a new array when `array` is None. Returns the array."""
    if array is None:
        array = create_array(x.dtype)
    if array.type != _T.DENSE_TENSOR_ARRAY:
        _fail("array_write", f"{array.name!r} is not a tensor array")
    LayerHelper("array_write").append_op("write_to_array", {"X": x, "I": _index(i)}, {"Out": array})
    return array


def array_read(array, i):
    """array[i] (op read_from_array)."""
    if not isinstance(array, Variable) or array.type != _T.DENSE_TENSOR_ARRAY:
        _fail("array_read", f"needs a tensor array, got {array!r}")
    helper = LayerHelper("array_read")
    out = helper.create_tmp(array.dtype)
    helper.append_op("read_from_array", {"X": array, "I": _index(i)}, {"Out": out})
    return out


def array_length(array):
    """The number of entries of a tensor array, an int64 [1] (op lod_array_length)."""
    if not isinstance(array, Variable) or array.type != _T.DENSE_TENSOR_ARRAY:
        _fail("array_length", f"needs a tensor array, got {array!r}")
    helper = LayerHelper("array_length")
    out = helper.create_tmp(_T.INT64, stop_gradient=True)
    helper.append_op("lod_array_length", {"X": array}, {"Out": out})
    return out
