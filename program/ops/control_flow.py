"""Control-flow ops: branches (`conditional_block`, `select_input`, `select_output`), loops
(`while`) and tensor arrays (`write_to_array`, `read_from_array`, `lod_array_length`,
`tensor_array_to_tensor`), with PaddlePaddle's legacy slots and attributes.

`conditional_block` and `while` own a sub-block (`sub_block`, a block index checked at load
by program/verify.py); they have no kernel: the executor compiles the sub-block into a
function of its own and calls it under an `if` or a `while` (executor/plan.py). Which
variables a sub-block reads from and writes to its enclosing blocks is found from its ops
(`block_io`), not trusted from the op's `Input`/`X`/`Out` slots, which PaddlePaddle's
builders fill approximately.

A tensor array (a DENSE_TENSOR_ARRAY variable) holds a Python list of tensors at run time;
`create_array` is not an op in PaddlePaddle, only a variable of that kind, and an array no
op has written yet starts empty.
"""
from __future__ import annotations

from program.ops.registry import (BOOL, BLOCK, INT, NOT_DIFFERENTIABLE, STRINGS, define, many,
                                  opt)
from proto import pb

_T = pb.VarType
CONTROL_FLOW_OPS = ("conditional_block", "while")
# the skip list PaddlePaddle's garbage collector reads; a hint Keel does not need
_SKIP_VARS = {"skip_eager_deletion_vars": STRINGS([])}


def block_io(program, block_idx: int) -> tuple[list[str], list[str]]:
    """(reads, writes): the variables the ops of block `block_idx` and of its own sub-blocks
    read and write that are declared outside it (in an enclosing block), in first-use
    order. A sub-block that refers to itself or an enclosing block is refused at load."""
    block = program.block(block_idx)
    reads: dict[str, None] = {}
    writes: dict[str, None] = {}
    for op in block.ops:
        if op.type in CONTROL_FLOW_OPS:
            r, w = control_io(program, op)
        else:
            r, w = op.input_arg_names, op.output_arg_names
        reads.update(dict.fromkeys(n for n in r if n not in block.vars and n != "@EMPTY@"))
        writes.update(dict.fromkeys(n for n in w if n not in block.vars and n != "@EMPTY@"))
    return list(reads), list(writes)


def control_io(program, op) -> tuple[list[str], list[str]]:
    """What a conditional_block or while op reads and writes in its block: its condition and
    what its sub-block reads from outside, and what its sub-block writes outside."""
    reads, writes = block_io(program, op.attr("sub_block"))
    cond = op.input("Cond" if op.type == "conditional_block" else "Condition")
    return list(dict.fromkeys(cond + reads)), writes


# -- branches ---------------------------------------------------------------------------------
define("conditional_block", inputs=[many("Cond"), many("Input")],
       outputs=[many("Out"), "Scope"],
       attrs={"is_scalar_condition": BOOL(False), "sub_block": BLOCK()}, extra_attrs=_SKIP_VARS,
       infer=None, grad=None,
       doc="Run block `sub_block` when Cond holds: Cond's one element when `is_scalar_condition`, "
           "else every Cond tensor being non-empty. Input/Out list the outer variables the block "
           "reads and writes; Scope is PaddlePaddle's scope holder for the gradient")


def _infer_select_input(ctx):
    xs = ctx.inputs("X")
    if ctx.input("Mask").dtype != _T.INT32:
        ctx.dtype_fail(f"Mask must be int32, got {ctx.input('Mask')}")
    shape = list(xs[0].shape)
    for x in xs[1:]:
        if len(x.shape) != len(shape):
            shape = [-1] * len(shape)  # branches of different ranks: PaddlePaddle keeps the first rank
            continue
        shape = [a if a == b else -1 for a, b in zip(shape, x.shape)]
    ctx.set_output("Out", shape, xs[0].dtype)


define("select_input", inputs=[many("X"), "Mask"], outputs=["Out"], infer=_infer_select_input,
       grad=None,
       doc="Out = X[Mask]: the branch result the int32 Mask selects (a dim the branches disagree "
           "on is -1)")


def _infer_select_output(ctx):
    x = ctx.input("X")
    for i in range(ctx.num_outputs("Out")):
        ctx.set_output("Out", x.shape, x.dtype, index=i)


define("select_output", inputs=["X", "Mask"], outputs=[many("Out")], infer=_infer_select_output,
       grad=None,
       doc="Out[Mask] = X: routes X to the branch the int32 Mask selects")


# -- loops --------------------------------------------------------------------------------------
define("while", inputs=[many("X"), many("Condition")],
       outputs=[many("Out"), "StepScopes"],
       attrs={"is_test": BOOL(False), "sub_block": BLOCK()}, extra_attrs=_SKIP_VARS,
       infer=None, grad=None,
       doc="Run block `sub_block` while the one-element bool Condition holds (the block "
           "recomputes it). X/Out list the outer variables the body reads and writes; "
           "StepScopes holds each step's values for the gradient")


# -- tensor arrays ------------------------------------------------------------------------------
def _infer_write_to_array(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


define("write_to_array", inputs=["X", "I"], outputs=["Out"], infer=_infer_write_to_array,
       grad=None,
       doc="Out[I] = X for the tensor array Out (grown with empty entries up to I; the rest kept)")


def _infer_read_from_array(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


define("read_from_array", inputs=["X", "I", opt("X_W")], outputs=["Out"],
       infer=_infer_read_from_array, grad=None,
       doc="Out = X[I], entry I of the tensor array X")


def _infer_array_length(ctx):
    ctx.set_output("Out", [1], _T.INT64)


define("lod_array_length", inputs=["X"], outputs=["Out"], infer=_infer_array_length,
       grad=NOT_DIFFERENTIABLE,
       doc="Out (int64 [1]) = the number of entries of the tensor array X")


def _infer_array_to_tensor(ctx):
    x, axis = ctx.input("X"), ctx.attr("axis")
    shape = list(x.shape)
    rank = len(shape) + (1 if ctx.attr("use_stack") else 0)
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for entries of rank {len(shape)}")
    axis %= rank
    if ctx.attr("use_stack"):
        shape.insert(axis, -1)
    elif shape:
        shape[axis] = -1
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("OutIndex", [-1], _T.INT32)


define("tensor_array_to_tensor", inputs=["X"], outputs=["Out", "OutIndex"],
       attrs={"axis": INT(0), "use_stack": BOOL(False)}, infer=_infer_array_to_tensor, grad=None,
       doc="Out = the entries of tensor array X concatenated along `axis` (stacked on a new "
           "axis when `use_stack`); OutIndex (int32) = each entry's size along it")
