"""The legacy ops that are not one PIR op by a row each, written as PIR (the mirror of
special_ops.py and control_flow.py): parameters (`p`), feed -> `data`, fetch, constants
(fill_constant -> `full`, assign_value), elementwise ops with a legacy `axis`, tensor arrays,
and control flow: a conditional_block becomes a `pd_op.if` whose true region runs the block
and whose false region keeps the values, a while a `pd_op.while` over the variables its body
writes. Each handler is `(writer, ops, block, op)`; write.py dispatches to them."""
from __future__ import annotations

from keel.program.io.pir.write import ANY_PLACE, ARRAY_TYPE, CPU_PLACE, EMPTY, dense_type, pir_op_for
from keel.program.io.program_file import persistable_specs
from keel.program.ops.control_flow import block_io
from keel.proto import pb

_T = pb.VarType
FEED, FETCH = "feed", "fetch"
# assign_value's values are written at the kind of its dtype
_VALUE_KIND = {_T.FP32: "f32", _T.FP64: "f64", _T.INT32: "i32", _T.INT64: "i64", _T.BOOL: "bool",
               _T.FP16: "f32", _T.INT8: "i32", _T.UINT8: "i32", _T.INT16: "i32"}


def parameters(w, ops, block) -> None:
    """One `p` per persistable variable of block 0, by name (the .pdiparams record order)."""
    for name, dtype, shape in sorted(persistable_specs(w.program), key=lambda spec: spec[0].encode("utf-8")):
        w.bind(name, w.parameter(ops, name, dense_type(dtype, shape)))


def feeds(w, ops, block) -> None:
    """The feed ops as `data`, in column order (the reader numbers feeds in data order)."""
    for op in sorted((op for op in block.ops if op.type == FEED), key=lambda op: op.attr("col")):
        name = op.output("Out")[0]
        var = block.var(name)
        w.bind(name, w.emit(ops, "pd_op.data", [], [w.var_type(block, name)],
                            [("name", "str", name), ("shape", "intarray", list(var.shape or ())),
                             ("dtype", "dtype", var.dtype), ("place", "place", ANY_PLACE)])[0])


def _feed(w, ops, block, op) -> None:
    pass  # (written first, by feeds())


def _fetch(w, ops, block, op) -> None:
    """A fetch named after the variable: Paddle Inference's output names are then the legacy
    file's."""
    name = op.input("X")[0]
    w.emit(ops, "pd_op.fetch", [w.value(op, name)], [w.var_type(block, name)],
           [("name", "str", name), ("col", "i32", op.attr("col"))], persistable=True)


def _fill_constant(w, ops, block, op) -> None:
    if op.input("ValueTensor") or op.input("ShapeTensor") or op.input("ShapeTensorList"):
        given = {}
        if not op.input("ValueTensor"):  # (full_with_tensor takes the value as a tensor)
            given["ValueTensor"] = w.full(ops, op.attr("dtype"), [1], _fill_value(op))
        w.by_row(ops, block, op, "pd_op.full_with_tensor", given)
        return
    out = op.output("Out")[0]
    shape = [int(d) for d in op.attr("shape")]
    w.bind(out, w.full(ops, op.attr("dtype"), shape, _fill_value(op), type_dims=block.var(out).shape or shape))


def _fill_value(op) -> float:
    text = op.attr("str_value", "")
    return float(text) if text else float(op.attr("value"))


def _assign_value(w, ops, block, op) -> None:
    if op.input("ValuesTensor"):
        w.fail(op, "a ValuesTensor input has no PIR counterpart")
    out = op.output("Out")[0]
    dtype = op.attr("dtype")
    if dtype not in _VALUE_KIND:
        w.fail(op, f"values of data type {block.var(out).dtype_name} have no PIR attribute kind Keel writes")
    shape = [int(d) for d in op.attr("shape")]
    w.bind(out, w.emit(ops, "pd_op.assign_value", [], [dense_type(dtype, shape)],
                       [("shape", "i32s", shape), ("dtype", "dtype", dtype),
                        ("values", _VALUE_KIND[dtype] + "s", list(op.attr("values"))),
                        ("place", "place", CPU_PLACE)])[0])


def _elementwise(w, ops, block, op) -> None:
    """A legacy `axis` aligns Y with X's dims from `axis` on; PIR broadcasts from the trailing
    dims, so Y gets the trailing 1-dims that make the two agree (an unsqueeze)."""
    axis = op.attr("axis", -1)
    x, y = op.input("X")[0], op.input("Y")[0]
    x_rank, y_rank = len(block.var(x).shape or ()), len(block.var(y).shape or ())
    given = {}
    if axis != -1 and y_rank < x_rank and axis != x_rank - y_rank:
        if block.var(x).shape is None or block.var(y).shape is None:
            w.fail(op, f"axis {axis} with X or Y of unknown rank")
        trailing = x_rank - axis - y_rank
        axes = w.full_int_array(ops, list(range(y_rank, y_rank + trailing)))
        dims = list(block.var(y).shape) + [1] * trailing
        given["Y"] = w.emit(ops, "pd_op.unsqueeze", [w.value(op, y), axes], [dense_type(block.var(y).dtype, dims)])[0]
    w.by_row(ops, block, op, pir_op_for(op), given)


def _strided_slice(w, ops, block, op) -> None:
    """PIR's strided_slice has no decrease_axis: the dims the legacy op drops are squeezed after it
    (as PaddlePaddle's translator writes it)."""
    dropped = [int(a) for a in op.attr("decrease_axis", [])]
    if not dropped:
        w.by_row(ops, block, op, "pd_op.strided_slice")
        return
    out = op.output("Out")[0]
    w.by_row(ops, block, op, "pd_op.strided_slice")
    sliced = w.value(op, out)
    dims = list(block.var(out).shape or ())
    for axis in sorted(dropped):  # (the slice's own type keeps the dropped dims, as 1)
        dims.insert(axis, 1)
    w.types[sliced]["D"][1] = dims
    axes = w.full_int_array(ops, dropped)
    w.bind(out, w.emit(ops, "pd_op.squeeze", [sliced, axes], [w.var_type(block, out)])[0])


def _mean(w, ops, block, op) -> None:
    """The legacy `mean` (of every element, shape []) is PIR's mean over no axes (all of them),
    which the reader reads back as reduce_mean with reduce_all."""
    out = op.output("Out")[0]
    operands = [w.value(op, op.input("X")[0]), w.full_int_array(ops, [])]
    w.bind(out, w.emit(ops, "pd_op.mean", operands, [w.var_type(block, out)], [("keepdim", "bool", False)])[0])


def _rnn(w, ops, block, op) -> None:
    """PaddlePaddle 3.3.1's rnn takes its dropout state as a fifth operand (the legacy op has no
    such input): a non-persistable `p` of uint8 [] that no .pdiparams record holds, as
    PaddlePaddle writes it (the row's None operand)."""
    stem = (op.output("DropoutState") or [f"rnn_{len(w.top_ops)}"])[0]
    state = w.parameter(w.top_ops, f"{stem}__non_persistable", dense_type(_T.UINT8, []), persistable=False)
    w.by_row(ops, block, op, "pd_op.rnn", {None: state})


# -- tensor arrays ---------------------------------------------------------------------------------
def _array(w, op, block, name: str) -> int:
    return w.array(name, block.var(name))


def _assign(w, ops, block, op) -> None:
    """An assign of a tensor array (the reader's loop variables) names the same array: PIR
    arrays are values updated in place, as the loop's array_write_ does."""
    source = w.value(op, op.input("X")[0])
    if w.types[source]["#"] == ARRAY_TYPE:  # (by the value: the reader's copies of one are declared dense)
        w.bind(op.output("Out")[0], source)
    else:
        w.by_row(ops, block, op, pir_op_for(op))


def _write_to_array(w, ops, block, op) -> None:
    name = op.output("Out")[0]
    array = _array(w, op, block, name)
    w.emit(ops, "pd_op.array_write_", [array, w.value(op, op.input("X")[0]), w.value(op, op.input("I")[0])],
           [w.types[array]])


def _read_from_array(w, ops, block, op) -> None:
    out = op.output("Out")[0]
    array = _array(w, op, block, op.input("X")[0])
    w.bind(out, w.emit(ops, "pd_op.array_read", [array, w.value(op, op.input("I")[0])],
                       [w.var_type(block, out)])[0])


def _array_length(w, ops, block, op) -> None:
    out = op.output("Out")[0]
    w.bind(out, w.emit(ops, "pd_op.array_length", [_array(w, op, block, op.input("X")[0])],
                       [w.var_type(block, out)])[0])


def _array_to_tensor(w, ops, block, op) -> None:
    outs = [op.output("Out")[0], op.output("OutIndex")[0]]
    results = w.emit(ops, "pd_op.array_to_tensor", [_array(w, op, block, op.input("X")[0])],
                     [w.var_type(block, n) for n in outs],
                     [("axis", "i32", op.attr("axis")), ("use_stack", "bool", op.attr("use_stack"))])
    for name, value_id in zip(outs, results):
        w.bind(name, value_id)


# -- control flow ------------------------------------------------------------------------------------
def _carried(w, block, names) -> list[str]:
    """The variables a sub-block writes that a PIR region hands out (arrays are updated in place)."""
    return [n for n in names if n != EMPTY and block.var(n).type != _T.DENSE_TENSOR_ARRAY]


def _current_or_placeholder(w, ops, block, name) -> int:
    """The value `name` holds, or (a variable no op has written before: a branch's result, a
    loop's `undefined_var`) zeros of its type, which nothing reads."""
    found = w.find(name)
    if found is not None:
        return found
    var = block.var(name)
    shape = [max(int(d), 1) for d in (var.shape or ())]
    return w.full(ops, var.dtype, shape, 0.0, type_dims=var.shape or ())


def _sub_block(w, op, args=()) -> tuple[list, object]:
    sub = w.program.block(op.attr("sub_block"))
    ops: list = []
    w.scopes.append({})  # (the caller pops it once it has read the values to yield)
    for name, arg in args:
        w.bind(name, arg)
    w.write_block(ops, sub)
    return ops, sub


def _conditional_block(w, ops, block, op) -> None:
    if not op.attr("is_scalar_condition", False):
        w.fail(op, "a condition that is not a scalar (is_scalar_condition false) has no PIR counterpart")
    cond = w.value(op, op.input("Cond")[0])
    _, writes = block_io(w.program, op.attr("sub_block"))
    outs = _carried(w, block, writes)
    true_ops, _ = _sub_block(w, op)
    true_values = [_current_or_placeholder(w, true_ops, block, n) for n in outs]
    w.scopes.pop()
    w.emit(true_ops, "cf.yield", true_values, [])
    false_ops: list = []
    w.emit(false_ops, "cf.yield", [_current_or_placeholder(w, false_ops, block, n) for n in outs], [])
    regions = [w.region([([], true_ops)]), w.region([([], false_ops)])]
    results = w.emit(ops, "pd_op.if", [cond], [w.var_type(block, n) for n in outs], regions=regions)
    for name, value_id in zip(outs, results):
        w.bind(name, value_id)


def _loop_init(w, ops, block, name) -> int:
    """A loop variable's value before the loop, whose type is the loop's (PaddlePaddle requires a
    while's operands, block arguments and results of one type): a value of another data type
    than the variable's (dy2static's `undefined_var`, a float placeholder of an integer
    counter) is cast to it."""
    init = _current_or_placeholder(w, ops, block, name)
    declared = w.var_type(block, name)
    if w.types[init]["D"][0] != declared["D"][0]:
        init = w.emit(ops, "pd_op.cast", [init], [declared], [("dtype", "dtype", block.var(name).dtype)])[0]
    return init


def _while(w, ops, block, op) -> None:
    cond_name = op.input("Condition")[0]
    _, writes = block_io(w.program, op.attr("sub_block"))
    carried = _carried(w, block, writes)
    inits = [_loop_init(w, ops, block, n) for n in carried]
    args = [(n, w.new_arg(w.types[init])) for n, init in zip(carried, inits)]
    body_ops, _ = _sub_block(w, op, args)
    yielded = [w.value(op, cond_name)] + [w.value(op, n) for n in carried]
    w.scopes.pop()
    w.emit(body_ops, "cf.yield", yielded, [])
    region = w.region([([(arg, w.types[arg]) for _, arg in args], body_ops)])
    results = w.emit(ops, "pd_op.while", [w.value(op, cond_name)] + inits, [w.types[i] for i in inits],
                     regions=[region])
    for name, value_id in zip(carried, results):
        w.bind(name, value_id)


def _select_input(w, ops, block, op) -> None:
    out = op.output("Out")[0]
    operands = [w.value(op, op.input("Mask")[0])] + [w.value(op, n) for n in op.input("X")]
    w.bind(out, w.emit(ops, "pd_op.select_input", operands, [w.var_type(block, out)])[0])


HANDLERS = {
    FEED: _feed, FETCH: _fetch, "fill_constant": _fill_constant, "assign_value": _assign_value,
    **{f"elementwise_{name}": _elementwise for name in ("add", "sub", "mul", "div", "max", "min", "pow", "mod",
                                                         "floordiv")},
    "write_to_array": _write_to_array, "read_from_array": _read_from_array, "lod_array_length": _array_length,
    "tensor_array_to_tensor": _array_to_tensor, "rnn": _rnn, "assign": _assign, "mean": _mean,
    "strided_slice": _strided_slice,
    "conditional_block": _conditional_block, "while": _while, "select_input": _select_input,
}
