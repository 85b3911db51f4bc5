"""Fusing a convolution with the per-channel bias add, residual add and activation after it
into PaddlePaddle's `fused_conv2d` (program/ops/fused_conv.py), so the output is written
by one kernel call: the epilogue runs on each part of the output while it is in cache
(kernels/conv.py), instead of one pass over the whole tensor per op."""
from __future__ import annotations

import numpy as np

from keel.program.passes.graph import bias_vector
from keel.proto import pb

_FLOATS = (pb.VarType.FP32, pb.VarType.FP64)
_CONVS = ("conv2d", "depthwise_conv2d")

# Activations fused into every fused_conv2d: those whose fused form needs no fuse_alpha /
# fuse_beta.
ACTIVATIONS = ("relu", "sigmoid", "tanh")
# Activations fused only into a program that stays in memory (options.in_memory, the
# Predictor's): their fused form is parameterised by fuse_alpha / fuse_beta, extra
# attributes that files drop (as PaddlePaddle's own writer does), so a saved relu6,
# hard_sigmoid, hard_swish or swish epilogue would come back with 0 and 0 (clip to [0, 0],
# a zero slope) and mean something else; program/io refuses to write one. The fused kernel
# evaluates each with the activation op's own formula (kernels/fused_conv.py).
PARAMETERISED = ("relu6", "hard_sigmoid", "hard_swish", "swish")


def fused_form(act, dtype: int):
    """(fuse_activation, fuse_alpha, fuse_beta) giving the activation op `act`'s numbers bit
    for bit on an output of `dtype`, or None. The fused kernel reads fuse_alpha / fuse_beta
    as float32 (FLOAT attributes), so on float64 data an attribute must be a float32 value
    already; hard_swish's fused form (oneDNN's x * clip(alpha x + beta, 0, 1)) is the
    op's only with its default threshold 6, scale 6 and offset 3 (fuse_alpha 1/6,
    fuse_beta 1/2: the fused kernel then runs the op's own formula)."""
    def f32(*values):
        return dtype == pb.VarType.FP32 or all(float(np.float32(v)) == v for v in values)
    if act.type in ACTIVATIONS:
        return act.type, 0.0, 0.0
    if act.type == "relu6":
        threshold = act.attr("threshold", 6.0)
        return ("relu6", 0.0, threshold) if threshold > 0 and f32(threshold) else None
    if act.type == "hard_sigmoid":
        slope, offset = act.attr("slope", 0.2), act.attr("offset", 0.5)
        return ("hard_sigmoid", slope, offset) if f32(slope, offset) else None
    if act.type == "hard_swish":
        defaults = tuple(act.attr(n, d) for n, d in (("threshold", 6.0), ("scale", 6.0), ("offset", 3.0)))
        return ("hard_swish", float(np.float32(1 / 6)), 0.5) if defaults == (6.0, 6.0, 3.0) else None
    if act.type == "swish":
        beta = act.attr("beta", 1.0)
        return ("swish", beta, 0.0) if f32(beta) else None
    return None


def _conv_ok(graph, conv) -> bool:
    if conv.attr("data_format", "NCHW") not in ("NCHW", "AnyLayout"):
        return False
    filters, outs = conv.input("Filter"), conv.output("Output")
    if len(filters) != 1 or not graph.is_const(filters[0]) or len(outs) != 1:
        return False
    var = graph.var(outs[0])
    return var.dtype in _FLOATS and var.shape is not None and len(var.shape) == 4


def _bias(graph, conv, add):
    """The bias vector `add` adds per output channel of conv's output, or None."""
    if add is None or add.input("X") != conv.output("Output"):
        return None
    channels = graph.const(conv.input("Filter")[0]).shape[0]
    vec = bias_vector(graph, add, 4, 1, channels)
    if vec is None or vec.dtype != graph.const(conv.input("Filter")[0]).dtype:
        return None
    return vec


def _residual(graph, add, value: str):
    """The other operand of `add` (elementwise_add of `value` and a tensor of its exact
    shape and dtype), or None."""
    xs, ys = add.input("X"), add.input("Y")
    if len(xs) != 1 or len(ys) != 1 or add.attr("axis", -1) not in (-1, 0):
        return None
    other = ys[0] if xs[0] == value else xs[0] if ys[0] == value else None
    if other is None or other == value:
        return None
    mine, theirs = graph.var(value), graph.var(other)
    if theirs.shape is None or list(theirs.shape) != list(mine.shape) or -1 in mine.shape[1:]:
        return None
    return other if theirs.dtype == mine.dtype else None


def _next(graph, op, slot, types, in_slots=("X",)):
    for in_slot in in_slots:
        nxt = graph.chain(op, slot, types, in_slot)
        if nxt is not None:
            return nxt
    return None


def _written_between(graph, names, first, last) -> bool:
    """An op between `first` and `last` writes one of `names` (a program reusing names),
    so the fused op, which takes `last`'s place, would read other values."""
    names = set(names)
    ops = graph.ops
    return any(names & set(op.output_arg_names) for op in ops[graph.index(first) + 1:graph.index(last)])


def fuse_conv_bias_activation(graph, options) -> dict:
    """Matches: a `conv2d` or `depthwise_conv2d` (NCHW, constant Filter, float32/float64
    output) followed by a chain, each step the sole reader of the previous value, which
    is not fetched:
      - an `elementwise_add` of a constant per-output-channel bias (X the conv's output,
        as fold_batch_norm writes it), optional;
      - an `elementwise_add` of another tensor of exactly the output's shape and dtype
        (a residual, in X or Y), optional;
      - an activation in ACTIVATIONS (relu, sigmoid, tanh), or, with options.in_memory,
        in PARAMETERISED (relu6, hard_sigmoid, hard_swish, swish) where `fused_form` has
        its exact form, optional;
    at least one present. Replaced by one `fused_conv2d` (groups = input channels for
    depthwise_conv2d, whose kernel ignores the attribute) writing the chain's last value,
    in the last op's place (skipped when an op in between overwrites the conv's Input or
    the residual).

    Safe because the fused kernel computes conv(Input, Filter), then adds the bias per
    channel, then the residual, then applies the activation, each in the same dtype and
    order as the separate ops (kernels/fused_conv.py): the same numbers bit for bit (a + b
    is exact in either operand order), except relu, computed as max(x, 0): a NaN stays
    NaN where the relu op gives 0, as in PaddlePaddle's fused kernels (x * (x > 0)), the
    difference fuse_elementwise_activation accepts too. Runs after fold_batch_norm (which leaves conv + bias add) and before
    fuse_elementwise_activation (which would otherwise take the bias add + relu).

    Off by default in optimize_inference (fuse_conv=True runs it), so that files written
    from its result keep ops every PaddlePaddle build runs (its fused_conv2d kernels are
    oneDNN's and GPU's); the Predictor runs it at load (executor/inference.py). Unspecialized, the fused
    kernel measured 0.92-0.98x of the separate ops on MobileNet shapes (it worked out the
    geometry on every call, which the specialized conv2d does once per shape); specialized
    per shape (kernels/fused_conv.py), with a widening 1x1 convolution's bias added inside
    its GEMM, against the specialized conv and the bias add (+ relu) written into its
    buffer (CPU time, one thread, medians of alternating blocks, loaded machine): 1x1
    [1, 48, 2, 160] -> 288 1.16x, [1, 24, 3, 160] -> 120 1.27x, [1, 32, 2, 96] -> 200
    1.05x, [1, 8, 24, 160] -> 16 + relu 1.16x; [1, 288, 2, 160] -> 48 1.00x, depthwise
    5x5 [1, 288, 2, 160] 1.03x, 3x3 [1, 48, 6, 160] + relu 1.03x, [1, 72, 1, 1] -> 18
    + relu 1.02x. The in-memory epilogues (PARAMETERISED) on the OCR models (105 -> 78,
    106 -> 79 and 135 -> 107 ops): classifier 0.98x, recognizer 1.03x, detector 1.05x (CPU
    time, one thread, medians of 7 alternating rounds, loaded machine): the hard_swish pass
    moves into the convolution's epilogue, in cache, and one array fewer is allocated."""
    counts = {"conv_fused": 0}
    activations = ACTIVATIONS + (PARAMETERISED if options.in_memory else ())
    for conv in [op for op in graph.ops if op.type in _CONVS]:
        if not _conv_ok(graph, conv):
            continue
        chain, value, slot = [conv], conv.output("Output")[0], "Output"
        bias = residual = act = None
        add = _next(graph, conv, slot, "elementwise_add")
        bias = _bias(graph, conv, add)
        if bias is not None:
            chain.append(add)
            value, slot = add.output("Out")[0], "Out"
        add = _next(graph, chain[-1], slot, "elementwise_add", ("X", "Y"))
        residual = None if add is None else _residual(graph, add, value)
        if residual is not None:
            chain.append(add)
            slot = "Out"
        act = _next(graph, chain[-1], slot, activations)
        form = None if act is None else fused_form(act, graph.var(act.output("Out")[0]).dtype)
        if form is not None:
            chain.append(act)
        if len(chain) == 1 or _written_between(graph, conv.input("Input") + ([residual] if residual else []),
                                               conv, chain[-1]):
            continue
        if conv.type == "depthwise_conv2d" and graph.var(conv.input("Input")[0]).shape[1] < 0:
            continue  # groups = input channels, unknown here
        _replace(graph, chain, bias, residual, form)
        counts["conv_fused"] += 1
        graph.refresh()
    return counts if counts["conv_fused"] else {}


def _replace(graph, chain, bias, residual, form):
    conv, last = chain[0], chain[-1]
    c = graph.var(conv.input("Input")[0]).shape[1]
    attrs = {name: conv.attr(name) for name in ("strides", "paddings", "padding_algorithm", "dilations",
                                                "groups", "data_format")}
    if conv.type == "depthwise_conv2d":
        attrs["groups"] = c
    name, alpha, beta = form or ("", 0.0, 0.0)
    attrs.update(fuse_activation=name, fuse_residual_connection=residual is not None, force_fp32_output=False)
    if alpha or beta:
        attrs.update(fuse_alpha=alpha, fuse_beta=beta)
    inputs = {"Input": conv.input("Input"), "Filter": conv.input("Filter")}
    if bias is not None:
        y = chain[1].input("Y")[0]
        same = graph.const(y).shape == bias.shape  # already a vector: read it as it is
        inputs["Bias"] = [y if same else graph.add_param(conv.output("Output")[0] + ".fused_bias", bias)]
    if residual is not None:
        inputs["ResidualData"] = [residual]
    out = last.output("Out") if last is not conv else conv.output("Output")
    graph.insert_op(graph.index(last), "fused_conv2d", inputs, {"Output": out}, attrs, like=conv)
    graph.remove_ops(chain)
