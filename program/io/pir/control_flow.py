"""PIR control flow onto legacy blocks. `pd_op.if` (a condition, two regions ending in
`cf.yield`) becomes two conditional_blocks, on the condition and on its negation, each copying
its yielded values into variables of the enclosing block, and one select_input per result.
`pd_op.while` (a condition and loop variables; a body whose block arguments are the loop
variables and whose `cf.yield` gives the new condition, then the new loop variables) becomes a
while over variables of the enclosing block, assigned before the loop and at the end of each
iteration. `pd_op.select_input` (translated legacy programs) is the legacy op."""
from __future__ import annotations

from keel.program.io.pir import schema
from keel.program.io.pir.special_ops import one_result
from keel.program.ops.control_flow import block_io
from keel.proto import pb

_T = pb.VarType


def _select_input(tr, block, op, on_yield):
    """`select_input(mask, x0, x1, ...)`: the legacy op with the candidates in X."""
    if len(op.operands) < 2:
        tr.fail(op, f"takes a mask and candidates, got {len(op.operands)} operands")
    mask, *candidates = (tr.tensor(block, op, tr.lookup(op, v)) for v in op.operands)
    value_id, vtype = one_result(tr, op)
    out = tr.new_var(block, "select_input", vtype, value_id=value_id)
    block.append_op("select_input", {"X": candidates, "Mask": [mask]}, {"Out": [out]})
    tr.define(op, value_id, out)


def _yield(tr, block, op, on_yield):
    if on_yield is None:
        tr.fail(op, "cf.yield outside an if or while body")
    on_yield(op, [tr.lookup(op, v) for v in op.operands])


def _sub_block(tr, parent):
    block = tr.program.create_block(parent.idx)
    tr.program.rollback()
    return block


def _control_op(tr, parent, op_type, cond_slot, cond, sub, attrs):
    reads, writes = block_io(tr.program, sub.idx)
    # (the legacy op lists at least one input: a block that reads nothing from outside lists the
    # condition, which it does not use)
    reads = reads or [cond]
    scope = tr.fresh(parent, f"_{op_type}_scope")
    parent.create_var(scope, type=_T.STEP_SCOPES)
    in_slot = "X" if op_type == "while" else "Input"
    parent.append_op(op_type, {cond_slot: [cond], in_slot: reads},
                     {"Out": writes, "StepScopes" if op_type == "while" else "Scope": [scope]},
                     {"sub_block": sub.idx, **attrs})


def _if(tr, parent, op, on_yield):
    if len(op.regions) != 2 or any(len(r) != 1 for r in op.regions) or len(op.operands) != 1:
        tr.fail(op, "pd_op.if takes a condition and two regions of one block each")
    cond = tr.tensor(parent, op, tr.lookup(op, op.operands[0]))
    negated = tr.new_var(parent, "logical_not", schema.TensorType("dense", _T.BOOL, ()))
    parent.append_op("logical_not", {"X": [cond]}, {"Out": [negated]})
    branch_outputs = []
    for region, condition in zip(op.regions, (cond, negated)):
        sub = _sub_block(tr, parent)
        outer = [tr.new_var(parent, "cond", vtype) for _, vtype in op.results]

        def copy_out(yield_op, entries, sub=sub, outer=outer):
            if len(entries) != len(outer):
                tr.fail(yield_op, f"yields {len(entries)} values for the {len(outer)} results of the if")
            for entry, name in zip(entries, outer):
                sub.append_op("assign", {"X": [tr.tensor(sub, yield_op, entry)]}, {"Out": [name]})
        tr.translate_block(sub, region[0], copy_out)
        _control_op(tr, parent, "conditional_block", "Cond", condition, sub, {"is_scalar_condition": True})
        branch_outputs.append(outer)
    if op.results:
        mask = tr.new_var(parent, "cast", schema.TensorType("dense", _T.INT32, ()))
        parent.append_op("cast", {"X": [cond]}, {"Out": [mask]}, {"in_dtype": _T.BOOL, "out_dtype": _T.INT32})
        for (value_id, vtype), t, f in zip(op.results, *branch_outputs):
            out = tr.new_var(parent, "select_input", vtype, value_id=value_id)
            parent.append_op("select_input", {"X": [f, t], "Mask": [mask]}, {"Out": [out]})
            tr.define(op, value_id, out)


def _while(tr, parent, op, on_yield):
    if len(op.regions) != 1 or len(op.regions[0]) != 1 or not op.operands:
        tr.fail(op, "pd_op.while takes a condition, its loop variables and one region of one block")
    body = op.regions[0][0]
    inits = op.operands[1:]
    if len(body.args) != len(inits) or len(op.results) != len(inits):
        tr.fail(op, f"has {len(inits)} loop variables, {len(body.args)} block arguments and "
                    f"{len(op.results)} results; they must agree")
    cond = tr.new_var(parent, "while_cond", schema.TensorType("dense", _T.BOOL, ()))
    parent.append_op("assign", {"X": [tr.tensor(parent, op, tr.lookup(op, op.operands[0]))]}, {"Out": [cond]})
    loop_vars = []
    for value_id, (arg_id, vtype) in zip(inits, body.args):
        name = tr.new_var(parent, "loop_var", vtype)
        parent.append_op("assign", {"X": [tr.tensor(parent, op, tr.lookup(op, value_id))]}, {"Out": [name]})
        tr.define(op, arg_id, name)
        loop_vars.append(name)
    sub = _sub_block(tr, parent)

    def next_iteration(yield_op, entries):
        if len(entries) != len(loop_vars) + 1:
            tr.fail(yield_op, f"yields {len(entries)} values; the while needs the condition and "
                              f"{len(loop_vars)} loop variables")
        sources = [tr.tensor(sub, yield_op, e) for e in entries]
        # a loop variable yielded as another's new value is copied first (a swap must not
        # read a variable already overwritten)
        for k, source in enumerate(sources):
            if source in loop_vars or source == cond:
                vtype = schema.TensorType("dense", sub.var(source).dtype, tuple(sub.var(source).shape or ()))
                copy = tr.new_var(sub, "loop_copy", vtype)
                sub.append_op("assign", {"X": [source]}, {"Out": [copy]})
                sources[k] = copy
        for source, target in zip(sources, [cond] + loop_vars):
            sub.append_op("assign", {"X": [source]}, {"Out": [target]})
    tr.translate_block(sub, body, next_iteration)
    _control_op(tr, parent, "while", "Condition", cond, sub, {"is_test": True})
    for (value_id, _), name in zip(op.results, loop_vars):
        tr.define(op, value_id, name)


HANDLERS = {"pd_op.if": _if, "pd_op.while": _while, "cf.yield": _yield, "pd_op.select_input": _select_input}
