"""Control flow: conditional_block as ONNX If, while as Loop, select_input/select_output as
Ifs choosing among values, the tensor-array ops as ONNX sequences.

A branch or loop body becomes a subgraph built by a GraphBuilder nested in the enclosing one
(its names resolve through it: a subgraph reads outer values directly, as ONNX allows).
What the sub-block writes that lives outside (the op's Out slot) becomes the If's or Loop's
outputs, and later readers in the enclosing graph read those.

Where PaddlePaddle leaves a variable as it was (a branch not taken, a loop that runs no
step), the ONNX graph must still produce a value: the variable's previous value when it has
one, else an empty placeholder of its dtype and rank (a tensor with no elements, or an empty
sequence for a tensor array), which PaddlePaddle's programs never read (select_input picks
the taken branch's value)."""
from __future__ import annotations

import numpy as np

from keel.program import dtypes
from keel.program.onnx.export import convert_ops
from keel.program.onnx.graph import GraphBuilder
from keel.program.onnx.registry import OnnxExportError, converts
from keel.proto import pb

_ARRAY = pb.VarType.DENSE_TENSOR_ARRAY

# -- branches --------------------------------------------------------------------------------------
@converts("conditional_block")
def conditional_block(g, op):
    """If(Cond) then the sub-block's values of Out, else Out's values as they were."""
    outs = op.output("Out")
    branch = GraphBuilder(_sub_block(op), g.params, g.opset, parent=g)
    convert_ops(branch, _sub_block(op).ops)
    then_graph = _graph(g, branch, [branch.value(n) for n in outs], outs, "then")
    else_graph = _select_graph(g, [_current_or_placeholder(g, n) for n in outs], outs, "else")
    g.node("If", [_condition(g, op)], [g.bind(n) for n in outs], then_branch=then_graph, else_branch=else_graph)


def _condition(g, op):
    """One bool element: Cond's, or with is_scalar_condition false, whether every Cond tensor
    has elements (PaddlePaddle's rule for that form)."""
    conds = g.xs(op, "Cond")
    if op.attr("is_scalar_condition", False):
        return g.node("Reshape", [conds[0], g.ints([])])
    nonempty = [g.node("Greater", [g.node("Size", [c]), g.const(0, np.int64)]) for c in conds]
    while len(nonempty) > 1:
        nonempty = [g.node("And", nonempty[:2]), *nonempty[2:]]
    return nonempty[0]


@converts("select_input")
def select_input(g, op):
    """Out = X[Mask]: a chain of Ifs on Mask == k (the branches' values may differ in shape,
    which rules out Where)."""
    choices = g.xs(op, "X")
    name = op.output("Out")[0]
    mask = g.node("Reshape", [g.x(op, "Mask"), g.ints([])])
    chosen = choices[-1]
    for k in range(len(choices) - 2, -1, -1):
        chosen = _choose(g, mask, k, choices[k], chosen, name)
    g.node("Identity", [chosen], g.y(op, "Out"))


@converts("select_output")
def select_output(g, op):
    """Out[Mask] = X; the other outputs keep their values."""
    mask = g.node("Reshape", [g.x(op, "Mask"), g.ints([])])
    x = g.x(op, "X")
    for k, name in enumerate(op.output("Out")):
        if name == "@EMPTY@":
            continue
        chosen = _choose(g, mask, k, x, _current_or_placeholder(g, name), name)
        g.node("Identity", [chosen], g.bind(name))


def _choose(g, mask, k, when_k, otherwise, keel_name):
    """If(mask == k) then `when_k` else `otherwise` (values of Keel variable `keel_name`'s type)."""
    is_k = g.node("Equal", [mask, g.const(k, np.int32)])
    return g.node("If", [is_k], 1, then_branch=_select_graph(g, [when_k], [keel_name], "then"),
                  else_branch=_select_graph(g, [otherwise], [keel_name], "else"))


# -- loops -------------------------------------------------------------------------------------------
@converts("while")
def while_(g, op):
    """Loop with no trip count, its condition the Condition variable as the body leaves it.
    Loop-carried: the variables of Out (the body's writes that live outside) that a step
    reads before writing or that are read after the loop (the condition among them). The
    others are the body's own temporaries, which dy2static also lists, sometimes with a
    placeholder of another dtype outside (ONNX's loop-carried values keep one type)."""
    block = _sub_block(op)
    cond_name = op.input("Condition")[0]
    carried = [n for n in op.output("Out") if n == cond_name or _reads_before_writing(block, n)
               or _read_after(g, op, n)]
    helper, tensor_proto = g.onnx.helper, g.onnx.TensorProto
    body = GraphBuilder(block, g.params, g.opset, parent=g)
    inputs = [helper.make_tensor_value_info(body.fresh("iteration"), tensor_proto.INT64, []),
              helper.make_tensor_value_info(body.fresh("cond_in"), tensor_proto.BOOL, [])]
    initial = [_current_or_placeholder(g, n) for n in carried]
    for name in carried:
        inputs.append(_value_info(g, body.bind(name, body.fresh(name)), name))
    convert_ops(body, block.ops)
    cond_out = body.node("Reshape", [body.value(cond_name), body.ints([])])
    graph = _graph(g, body, [body.value(n) for n in carried], carried, "body", inputs=inputs,
                   first=[helper.make_tensor_value_info(cond_out, tensor_proto.BOOL, [])])
    start = g.node("Reshape", [g.value(cond_name), g.ints([])])
    g.node("Loop", ["", start, *initial], [g.bind(n) for n in carried], body=graph)


# -- tensor arrays -----------------------------------------------------------------------------------
@converts("write_to_array")
def write_to_array(g, op):
    """Out[I] = X: the entry replaced where I < length, else X appended (PaddlePaddle grows the
    array with empty entries up to I; programs write I = length, as loops over steps do)."""
    name = op.output("Out")[0]
    array = _current_or_placeholder(g, name)
    x = g.x(op, "X")
    index = g.node("Reshape", [g.node("Cast", [g.x(op, "I")], to=g.onnx.TensorProto.INT64), g.ints([])])
    inside = g.node("Less", [index, g.node("SequenceLength", [array])])
    replace = GraphBuilder(g.block, g.params, g.opset, parent=g)
    replaced = replace.node("SequenceInsert", [replace.node("SequenceErase", [array, index]), x, index])
    append = GraphBuilder(g.block, g.params, g.opset, parent=g)
    appended = append.node("SequenceInsert", [array, x])
    g.node("If", [inside], g.y(op, "Out"), then_branch=_graph(g, replace, [replaced], [name], "replace"),
           else_branch=_graph(g, append, [appended], [name], "append"))


@converts("read_from_array")
def read_from_array(g, op):
    index = g.node("Reshape", [g.x(op, "I"), g.ints([])])
    g.node("SequenceAt", [g.x(op, "X"), index], g.y(op, "Out"))


@converts("lod_array_length")
def lod_array_length(g, op):
    g.node("Reshape", [g.node("SequenceLength", [g.x(op, "X")]), g.ints([1])], g.y(op, "Out"))


@converts("tensor_array_to_tensor")
def tensor_array_to_tensor(g, op):
    array = g.x(op, "X")
    axis, stack = op.attr("axis", 0), bool(op.attr("use_stack", False))
    g.node("ConcatFromSequence", [array], g.y(op, "Out"), axis=axis, new_axis=int(stack))
    if stack:  # one entry per step along the new axis
        count = g.node("Reshape", [g.node("SequenceLength", [array]), g.ints([1])])
        g.node("Expand", [g.const(np.ones(1, np.int32)), count], g.y(op, "OutIndex"))
        return
    if g.opset < 17:
        raise g.error(f"OutIndex (each entry's size along axis {axis}) needs ONNX's SequenceMap, opset 17 or "
                      f"later (asked: {g.opset})")
    sizes = GraphBuilder(g.block, g.params, g.opset, parent=g)
    entry = sizes.fresh("entry")
    size = sizes.node("Gather", [sizes.node("Shape", [entry]), sizes.ints([axis])], axis=0)
    size = sizes.node("Cast", [size], to=g.onnx.TensorProto.INT32)
    entry_info = g.onnx.helper.make_tensor_value_info(entry, g.onnx.helper.np_dtype_to_tensor_dtype(
        _np_dtype(g, op.input("X")[0])), None)
    body = g.onnx.helper.make_graph(sizes.nodes, "entry_size", [entry_info],
                                    [g.onnx.helper.make_tensor_value_info(size, g.onnx.TensorProto.INT32, [1])])
    per_entry = g.node("SequenceMap", [array], 1, body=body)
    g.node("ConcatFromSequence", [per_entry], g.y(op, "OutIndex"), axis=0)


# -- shared ---------------------------------------------------------------------------------------------
def _sub_block(op):
    return op.block.program.block(op.attr("sub_block"))


def _reads_before_writing(block, keel_name) -> bool:
    """Whether a step of `block` reads `keel_name`'s value from the step before (or from
    before the loop): an op reads it before any op of the block writes it."""
    for op in block.ops:
        if keel_name in op.input_arg_names:
            return True
        if keel_name in op.output_arg_names:
            return False
    return False


def _read_after(g, loop_op, keel_name) -> bool:
    """Whether anything outside the loop's body reads `keel_name`: an op of another block
    than the body's (and its nested blocks), or the model's outputs."""
    if keel_name in g.fetches:
        return True
    program = loop_op.block.program
    inside = _nested_blocks(program, loop_op.attr("sub_block"))
    return any(keel_name in op.input_arg_names for block in program.blocks if block.idx not in inside
               for op in block.ops if op is not loop_op)


def _nested_blocks(program, idx) -> set:
    """Block `idx` and the blocks whose ancestor it is."""
    found = {idx}
    for block in program.blocks:  # (a child block always comes after its parent)
        if block.parent_idx in found:
            found.add(block.idx)
    return found


def _current_or_placeholder(g, keel_name) -> str:
    """The ONNX name of `keel_name`'s value now, or an empty placeholder where it has none."""
    try:
        return g.value(keel_name)
    except OnnxExportError:
        pass
    var = g.var(keel_name)
    if var.type == _ARRAY:
        return g.node("SequenceEmpty", [], dtype=g.onnx.helper.np_dtype_to_tensor_dtype(_np_dtype(g, keel_name)))
    rank = len(var.shape) if var.shape is not None else 1
    return g.const(np.zeros([0] * rank, _np_dtype(g, keel_name)), hint=f"{keel_name}_unset")


def _np_dtype(g, keel_name):
    return dtypes.to_numpy(g.var(keel_name).dtype)


def _value_info(g, onnx_name, keel_name):
    """The type of a subgraph's input or output holding `keel_name` (shape left open: it may
    change from step to step or branch to branch)."""
    helper = g.onnx.helper
    elem = helper.np_dtype_to_tensor_dtype(_np_dtype(g, keel_name))
    if g.var(keel_name).type == _ARRAY:
        return helper.make_tensor_sequence_value_info(onnx_name, elem, None)
    return helper.make_tensor_value_info(onnx_name, elem, None)


def _graph(g, builder, values, keel_names, hint, inputs=(), first=()):
    """A subgraph of `builder`'s nodes returning `values` (each as a fresh name made by an
    Identity: ONNX Runtime wants a subgraph's outputs produced inside it), typed as the Keel
    variables `keel_names`; `first`: outputs put before them (a Loop body's condition)."""
    outputs = list(first)
    for value, keel_name in zip(values, keel_names):
        out = builder.node("Identity", [value], builder.fresh(f"{keel_name}_{hint}"))
        outputs.append(_value_info(g, out, keel_name))
    return g.onnx.helper.make_graph(builder.nodes, g.fresh(hint), list(inputs), outputs)


def _select_graph(g, values, keel_names, hint):
    """A subgraph that only passes on values of the enclosing graph."""
    return _graph(g, GraphBuilder(g.block, g.params, g.opset, parent=g), values, keel_names, hint)
