"""Fusing an elementwise add and the activation that reads it into one
`fused_elemwise_activation` op (PaddlePaddle's; program/ops/fused.py)."""
from __future__ import annotations

from keel.program.ops.fused import broadcast_supported
from keel.proto import pb

_FLOATS = (pb.VarType.FP16, pb.VarType.FP32, pb.VarType.FP64)

# Activations fused after an elementwise_add: those whose fused functor gives the separate
# op's numbers. PaddlePaddle's fused op also has tanh and gelu of a sum, left alone here:
# its tanh clips 2x to [-40, 13], so tanh(x) for x > 6.5 comes out as 0.9999955 instead
# of ~1 (4.5e-6 off), and its gelu is the tanh approximation with rounded constants
# (the gelu op defaults to the erf form, and even gelu(approximate=True) differs in the
# last bits). elementwise_mul and elementwise_sub have no activation-of-product form.
ACTIVATIONS = ("relu", "scale")


def _activation_ok(graph, act) -> bool:
    if act.type == "relu":
        return True
    # scale: the fused functor multiplies by `scale` and adds nothing, so only a zero bias
    # given as an attribute (no ScaleTensor/BiasTensor input) fits.
    return (act.type == "scale" and float(act.attr("bias", 0.0)) == 0.0
            and not act.input("ScaleTensor") and not act.input("BiasTensor"))


def _operands_ok(graph, add) -> bool:
    xs, ys, outs = add.input("X"), add.input("Y"), add.output("Out")
    if len(xs) != 1 or len(ys) != 1 or len(outs) != 1:
        return False
    x, y, out = graph.var(xs[0]), graph.var(ys[0]), graph.var(outs[0])
    if x.shape is None or y.shape is None or x.dtype not in _FLOATS or not x.dtype == y.dtype == out.dtype:
        return False
    return broadcast_supported(x.shape, y.shape, add.attr("axis", -1))


def _rewritten_between(graph, add, act) -> bool:
    """An op between the add and the activation overwrites X or Y (a program that reuses
    names), so the fused op, which takes the activation's place, would read other values."""
    inputs = set(add.input_arg_names)
    ops = graph.ops
    return any(inputs & set(op.output_arg_names) for op in ops[graph.index(add) + 1:graph.index(act)])


def fuse_elementwise_activation(graph, options) -> dict:
    """Matches: an `elementwise_add` of two float tensors (float16/32/64, one dtype) whose
    output is read only by (and only in the X slot of) a `relu`, or a `scale` with bias 0
    and no ScaleTensor/BiasTensor input, and is not fetched; the shapes of X and Y must be
    ones PaddlePaddle's fused kernel broadcasts (equal, or one a contiguous run of the
    other's dims at `axis`). Replaced by `fused_elemwise_activation(X, Y)` with
    functor_list [relu, elementwise_add] or [scale, elementwise_add], the add's axis, the
    scale's scale, writing the activation's output, in the activation's place (skipped
    when an op in between overwrites X or Y); IntermediateOut is left unbound (the sum
    was read by nothing else).

    Safe because the fused op computes relu(X + Y) as X + Y then (X + Y) * (X + Y > 0),
    and scale * (X + Y) as X + Y then one product, with the same broadcasting, dtype and
    output shape: for finite values the result equals the two ops' exactly, except that a
    zero result may carry the other sign (a negative sum gives -0.0 where relu gives
    +0.0; a scale with bias_after_scale false turned -0.0 into +0.0 first); a NaN or -inf
    sum gives NaN where relu gives 0 (PaddlePaddle's functor, x * 0). Runs after fuse_fc,
    so an add + relu that fuse_fc folds into an `fc` is taken there first."""
    counts = {"relu_fused": 0, "scale_fused": 0}
    for add in [op for op in graph.ops if op.type == "elementwise_add"]:
        if not _operands_ok(graph, add):
            continue
        act = graph.chain(add, "Out", ACTIVATIONS, "X")
        if act is None or not _activation_ok(graph, act):
            continue
        if _rewritten_between(graph, add, act):
            continue
        attrs = {"functor_list": [act.type, "elementwise_add"], "axis": add.attr("axis", -1),
                 "scale": float(act.attr("scale", 1.0)) if act.type == "scale" else 0.0,
                 "save_intermediate_out": False}
        graph.insert_op(graph.index(act), "fused_elemwise_activation",
                        {"X": add.input("X"), "Y": add.input("Y")}, {"Out": act.output("Out")},
                        attrs, like=add)
        graph.remove_ops([add, act])
        counts[f"{act.type}_fused"] += 1
        graph.refresh()
    return counts
