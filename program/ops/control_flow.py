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

from keel.program.ops.registry import (BOOL, BLOCK, INT, NOT_DIFFERENTIABLE, STRINGS, GradOp, define, grad_maker,
                                  grad_op, many, opt)
from keel.proto import pb

_T = pb.VarType
CONTROL_FLOW_OPS = ("conditional_block", "while", "conditional_block_grad", "while_grad")
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
    what its sub-block reads from outside, and what its sub-block writes outside. A
    conditional_block_grad reads what its forward block and gradient block (run one after
    the other) read from outside both, and writes its Input@GRAD."""
    cond = op.input("Condition" if op.type == "while" else "Cond")
    if op.type in ("conditional_block_grad", "while_grad"):
        slot = "Input" if op.type == "conditional_block_grad" else "X"
        reads = [n for n in gradient_block_reads(program, op) if n != "@EMPTY@"]
        extra = op.input("StepScopes") if op.type == "while_grad" else []
        return (list(dict.fromkeys(cond + extra + op.input(slot) + op.input("Out@GRAD") + reads)),
                [n for n in op.output(slot + "@GRAD") if n != "@EMPTY@"])
    reads, writes = block_io(program, op.attr("sub_block"))
    scopes = op.output("StepScopes") if op.type == "while" else []  # each step's inputs, for while_grad
    return list(dict.fromkeys(cond + reads)), writes + scopes


def gradient_block_reads(program, op) -> list[str]:
    """What a conditional_block_grad's forward block and gradient block read from outside
    both (the gradient block reads the forward block's values: its parent is that block)."""
    grad = program.block(op.attr("sub_block"))
    forward = grad.parent
    local = set(forward.vars) | set(grad.vars)
    return [n for b in (forward, grad) for n in block_io(program, b.idx)[0] if n not in local]


# -- branches ---------------------------------------------------------------------------------
def _conditional_block_grad(op, g):
    """PaddlePaddle's conditional_block_grad: a gradient block (child of the forward block,
    whose values it reads) holding the gradient ops of the forward block's ops, from the
    gradients of its outputs (read from outside) to those of its inputs (`x@GRAD` inside,
    handed out as the op's Input@GRAD). When the branch did not run, the input gradients
    are zeros."""
    made = _gradient_block(op, g, "Input")
    if made is None:
        return []
    grad_block, outputs = made
    return [GradOp("conditional_block_grad",
                   {"Cond": op.input("Cond"), "Input": op.input("Input"), "Out": op.output("Out"),
                    "Out@GRAD": g.out("Out"), "Scope": op.output("Scope")},
                   {"Input@GRAD": outputs},
                   {"sub_block": grad_block.idx, "is_scalar_condition": op.attr("is_scalar_condition")})]


def _gradient_block(op, g, slot):
    """The gradient block of a conditional_block / while op (its sub-block's ops
    differentiated, from the gradients of its Out to those of its `slot` inputs) and the
    op's input gradient names (@EMPTY@ where none); None when no input gets one."""
    from keel.program.backward import differentiate_block
    program = op.block.program
    forward = program.block(op.attr("sub_block"))
    inputs, in_grads = op.input(slot), g.inp(slot)
    wanted = [n for n, gn in zip(inputs, in_grads) if gn]
    if not wanted:
        return None
    for name, grad in zip(op.output("Out"), g.out("Out")):  # made here, before the backward ops are
        if op.block.find_var(grad) is None:                   # appended, so the gradient block can read them
            var = op.block.var(name)
            op.block.create_var(grad, var.shape, var.dtype, type=var.type)
    current = program.current_block().idx
    grad_block = program.create_block(parent_idx=forward.idx)
    try:
        made = differentiate_block(forward, grad_block, dict(zip(op.output("Out"), g.out("Out"))), wanted)
    finally:
        program._current_block_idx = current
    outputs = [gn if gn and n in made else "@EMPTY@" for n, gn in zip(inputs, in_grads)]
    if all(n == "@EMPTY@" for n in outputs):
        return None
    return grad_block, outputs


def _while_grad(op, g):
    """while_grad, in PaddlePaddle's slots: the gradient block runs once per step, last step
    first, on that step's saved inputs (StepScopes); a loop variable's gradient flows from
    one step to the one before, the gradients of what the body only reads add up."""
    made = _gradient_block(op, g, "X")
    if made is None:
        return []
    grad_block, outputs = made
    return [GradOp("while_grad",
                   {"X": op.input("X"), "Out": op.output("Out"), "Out@GRAD": g.out("Out"),
                    "StepScopes": op.output("StepScopes")},
                   {"X@GRAD": outputs},
                   {"sub_block": grad_block.idx, "original_output_grad": g.out("Out"), "is_test": False})]


def _infer_input_grads(ctx):
    slot = "Input" if ctx.op_type == "conditional_block_grad" else "X"
    for name, var in zip(ctx.output_names(slot + "@GRAD"), ctx.inputs(slot)):
        if name != "@EMPTY@":
            ctx.set_var(name, var.shape, var.dtype)


define("conditional_block", inputs=[many("Cond"), many("Input")],
       outputs=[many("Out"), "Scope"],
       attrs={"is_scalar_condition": BOOL(False), "sub_block": BLOCK()}, extra_attrs=_SKIP_VARS,
       infer=None, grad=grad_maker(_conditional_block_grad, inputs=["Out@GRAD"], outputs=["Input@GRAD"]),
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


define("conditional_block_grad",
       inputs=[many("Cond"), many("Input"), many("Out"), many("Out@GRAD"), many("Scope")],
       outputs=[many("Input@GRAD")],
       attrs={"is_scalar_condition": BOOL(False), "sub_block": BLOCK()}, extra_attrs=_SKIP_VARS,
       infer=_infer_input_grads, grad=NOT_DIFFERENTIABLE, grad_of="conditional_block",
       doc="The gradient of conditional_block: runs the forward block, then gradient block "
           "`sub_block`, when Cond holds; else Input@GRAD are zeros")


def _select_input_grad(op, g):
    """select_input's gradient is a select_output routing Out@GRAD to the taken branch, as
    PaddlePaddle writes it (the other branch's gradient is left unset)."""
    dx = g.inp("X")
    if not any(dx):
        return []
    return [GradOp("select_output", {"X": g.out("Out"), "Mask": op.input("Mask")},
                   {"Out": [n or "@EMPTY@" for n in dx]})]


define("select_input", inputs=[many("X"), "Mask"], outputs=["Out"], infer=_infer_select_input,
       grad=grad_maker(_select_input_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
       doc="Out = X[Mask]: the branch result the int32 Mask selects (a dim the branches disagree "
           "on is -1)")


def _infer_select_output(ctx):
    x = ctx.input("X")
    for i in range(ctx.num_outputs("Out")):
        ctx.set_output("Out", x.shape, x.dtype, index=i)


def _select_output_grad(op, g):
    """select_output's gradient is a select_input of the branches' gradients, as PaddlePaddle
    writes it: the taken branch's gradient is X's."""
    dx = g.inp("X")
    if not dx or not dx[0]:
        return []
    return [GradOp("select_input", {"X": g.out("Out"), "Mask": op.input("Mask")}, {"Out": [dx[0]]})]


define("select_output", inputs=["X", "Mask"], outputs=[many("Out")], infer=_infer_select_output,
       grad=grad_maker(_select_output_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
       doc="Out[Mask] = X: routes X to the branch the int32 Mask selects")


# -- loops --------------------------------------------------------------------------------------
define("while", inputs=[many("X"), many("Condition")],
       outputs=[many("Out"), "StepScopes"],
       attrs={"is_test": BOOL(False), "sub_block": BLOCK()}, extra_attrs=_SKIP_VARS,
       infer=None, grad=grad_maker(_while_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
       doc="Run block `sub_block` while the one-element bool Condition holds (the block "
           "recomputes it). X/Out list the outer variables the body reads and writes; "
           "StepScopes holds each step's values for the gradient")


# -- tensor arrays ------------------------------------------------------------------------------
def _infer_write_to_array(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


def _write_to_array_grad(op, g):
    """write_to_array's gradient is a read_from_array of the array's gradient at I, as
    PaddlePaddle writes it; X_W (the written value) gives the shape of a zero gradient
    where nothing wrote the array gradient's entry."""
    dx = g.inp("X")
    if not dx or not dx[0]:
        return []
    return [GradOp("read_from_array", {"X": g.out("Out"), "I": op.input("I"), "X_W": op.input("X")},
                   {"Out": [dx[0]]})]


define("write_to_array", inputs=["X", "I"], outputs=["Out"], infer=_infer_write_to_array,
       grad=grad_maker(_write_to_array_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
       doc="Out[I] = X for the tensor array Out (grown with empty entries up to I; the rest kept)")


def _infer_read_from_array(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


def _read_from_array_grad(op, g):
    """read_from_array's gradient is a write_to_array of Out@GRAD into the array's gradient
    at I, as PaddlePaddle writes it (several reads' gradients add up entrywise: `sum` of
    tensor arrays)."""
    dx = g.inp("X")
    if not dx or not dx[0]:
        return []
    return [GradOp("write_to_array", {"X": g.out("Out"), "I": op.input("I")}, {"Out": [dx[0]]})]


define("read_from_array", inputs=["X", "I", opt("X_W")], outputs=["Out"],
       infer=_infer_read_from_array,
       grad=grad_maker(_read_from_array_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
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
       attrs={"axis": INT(0), "use_stack": BOOL(False)}, infer=_infer_array_to_tensor,
       grad=grad_op(["X", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = the entries of tensor array X concatenated along `axis` (stacked on a new "
           "axis when `use_stack`); OutIndex (int32) = each entry's size along it")


define("while_grad", inputs=[many("X"), many("Out"), many("Out@GRAD"), many("StepScopes")],
       outputs=[many("X@GRAD")],
       attrs={"is_test": BOOL(False), "sub_block": BLOCK(), "original_output_grad": STRINGS([])},
       extra_attrs=_SKIP_VARS, infer=_infer_input_grads, grad=NOT_DIFFERENTIABLE, grad_of="while",
       doc="The gradient of while: gradient block `sub_block` once per step, last first, on the "
           "step's saved inputs (StepScopes), from Out@GRAD to X@GRAD")
