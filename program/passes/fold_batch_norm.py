"""Folding inference batch_norm into the convolution or matrix product before it."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from keel.program.passes.graph import bias_vector, uses_global_stats


@dataclass(frozen=True)
class Linear:
    """A linear op whose output channel c is produced by the slice `weight_axis` = c of a
    constant weight: scaling that slice scales that output channel."""
    op: object
    weight_slot: str
    weight_axis: int
    channel_axis: int  # of the op's output
    bias_slot: str | None = None  # the op's own bias input (fc)


def _linear(graph, op, out_rank: int):
    """The Linear view of `op`, or None when it is not a linear op with a constant weight."""
    def weight(slot, ndim):
        names = op.input(slot)
        ok = len(names) == 1 and graph.is_const(names[0]) and graph.const(names[0]).ndim == ndim
        return names[0] if ok else None

    if op.type in ("conv2d", "depthwise_conv2d"):
        if weight("Filter", 4) and op.attr("data_format", "NCHW") in ("NCHW", "AnyLayout"):
            return Linear(op, "Filter", 0, 1)
    elif op.type == "matmul_v2":
        if weight("Y", 2):
            return Linear(op, "Y", 0 if op.attr("trans_y") else 1, out_rank - 1)
    elif op.type == "mul":
        if weight("Y", 2) and op.attr("y_num_col_dims") == 1:
            return Linear(op, "Y", 1, out_rank - 1)
    elif op.type == "fc":
        if weight("W", 2) and not op.attr("padding_weights") and op.attr("activation_type") == "":
            bias = op.input("Bias")
            if not bias or graph.is_const(bias[0]):
                return Linear(op, "W", 1, out_rank - 1, "Bias")
    return None


def _bn_channel_axis(bn, rank: int) -> int:
    return rank - 1 if bn.attr("data_layout") == "NHWC" else 1


def _match(graph, bn):
    """(linear, add or None, existing bias vector) feeding `bn`, or None."""
    if bn.type != "batch_norm" or not uses_global_stats(bn):
        return None
    if any(graph.readers(n) for slot in ("SavedMean", "SavedVariance", "ReserveSpace")
           for n in bn.output(slot)):
        return None
    params = [n for s in ("Scale", "Bias", "Mean", "Variance") for n in bn.input(s)]
    if not all(graph.is_const(n) for n in params) or len(bn.input("X")) != 1:
        return None
    x = bn.input("X")[0]
    rank = graph.rank(x)
    if rank is None or rank < 2 or graph.sole_reader(x) is not bn:
        return None
    axis = _bn_channel_axis(bn, rank)
    channels = graph.const(bn.input("Mean")[0]).size
    for slot in ("Scale", "Bias", "Variance"):  # each a vector of one value per channel
        names = bn.input(slot)
        if names and graph.const(names[0]).size != channels:
            return None
    prev, add = graph.producer(x), None
    if prev is not None and prev.type == "elementwise_add":
        add = prev
        inner = prev.input("X")
        if len(inner) != 1 or graph.sole_reader(inner[0]) is not add or graph.rank(inner[0]) != rank:
            return None
        prev = graph.producer(inner[0])
    if prev is None:
        return None
    lin = _linear(graph, prev, rank)
    if lin is None or lin.channel_axis != axis or len(prev.output_arg_names) != 1:
        return None
    w = graph.const(prev.input(lin.weight_slot)[0])
    if w.shape[lin.weight_axis] != channels:
        return None
    bias = np.zeros(channels)
    if add is not None:
        bias = bias_vector(graph, add, rank, axis, channels)
        if bias is None:
            return None
    if lin.bias_slot and prev.input(lin.bias_slot):
        own = graph.const(prev.input(lin.bias_slot)[0])
        if own.size != channels:
            return None
        bias = bias + own.reshape(-1)
    return lin, add, bias


def _stat(graph, bn, slot, default):
    """A batch_norm parameter as a float64 vector (`default` when the slot is empty)."""
    names = bn.input(slot)
    return graph.const(names[0]).astype(np.float64).reshape(-1) if names else default


def fold_batch_norm(graph, options) -> dict:
    """Matches: `batch_norm` using its running statistics (is_test, or use_global_stats;
    constant Scale/Bias/Mean/Variance; its SavedMean/SavedVariance unread) whose input is
    the sole use of either a linear op's output or of an `elementwise_add` of a constant
    per-channel bias to it. Linear ops with a constant weight: conv2d/depthwise_conv2d
    (NCHW; out-channel = Filter dim 0, output dim 1), matmul_v2 (2-D Y; column j of Y, or
    row j with trans_y, gives output channel j on the last axis), mul (2-D Y), fc (no
    activation, no padding; its Bias is folded too). The batch_norm's channel axis (1 for
    NCHW, last for NHWC) must be the linear op's output channel axis.

    Safe because, with s = Scale / sqrt(Variance + epsilon), batch_norm(W x + b) =
    (s W) x + (b - Mean) s + Bias exactly in real arithmetic (per channel), so the weight slice of each channel is
    multiplied by s (a new parameter, computed in float64) and one `elementwise_add` of the
    new bias (or fc's Bias) writes batch_norm's Y. Rounding differs from the unfolded
    program by float32 round-off only."""
    counts = {"batch_norm_folded_into_conv": 0, "batch_norm_folded_into_linear": 0}
    for bn in [op for op in graph.ops if op.type == "batch_norm"]:
        found = _match(graph, bn)
        if found is None:
            continue
        lin, add, bias = found
        op, y = lin.op, bn.output("Y")[0]
        mean, var = _stat(graph, bn, "Mean", None), _stat(graph, bn, "Variance", None)
        scale, shift = _stat(graph, bn, "Scale", np.ones_like(mean)), _stat(graph, bn, "Bias", np.zeros_like(mean))
        s = scale / np.sqrt(var + np.float64(np.float32(bn.attr("epsilon"))))
        w_name = op.input(lin.weight_slot)[0]
        w = graph.const(w_name)
        shape = [1] * w.ndim
        shape[lin.weight_axis] = -1
        new_w = (w.astype(np.float64) * s.reshape(shape)).astype(w.dtype)
        new_b = ((bias - mean) * s + shift).astype(w.dtype)
        op.set_input(lin.weight_slot, [graph.add_param(w_name + ".bn_folded", new_w)])
        b_name = graph.add_param(y + ".bn_bias", new_b)
        if lin.bias_slot and op.input(lin.bias_slot):
            op.set_input(lin.bias_slot, [b_name])
            op.rename_output(op.output_arg_names[0], y)
            graph.remove_ops([bn] + ([add] if add is not None else []))
        elif add is not None:
            add.set_input("Y", [b_name])
            add.set_attr("axis", lin.channel_axis)
            add.rename_output(add.output("Out")[0], y)
            graph.remove_ops([bn])
        else:
            graph.insert_op(graph.index(bn), "elementwise_add", {"X": op.output_arg_names, "Y": [b_name]},
                            {"Out": [y]}, {"axis": lin.channel_axis}, like=bn)
            graph.remove_ops([bn])
        conv = op.type in ("conv2d", "depthwise_conv2d")
        counts["batch_norm_folded_into_conv" if conv else "batch_norm_folded_into_linear"] += 1
        graph.refresh()
    return counts
