"""Fusing a matrix product with a constant weight, its bias and a ReLU into one `fc` op."""
from __future__ import annotations

import numpy as np

from keel.program.passes.graph import bias_vector

# Activations PaddlePaddle's fc kernel applies. Its shape check accepts "", "relu" and
# "gelu", but the CPU kernel (and ours, kernels/math.py) applies only "relu": a "gelu" fc
# gives the plain linear result on CPU. tanh and sigmoid are refused outright.
FC_ACTIVATIONS = ("relu",)


def _product(graph, op):
    """(input name, weight array, in_num_col_dims, weight needs transposing) for a mul or
    matmul_v2 of a non-transposed input and a constant 2-D weight; else None."""
    ws = op.input("Y")
    if len(ws) != 1 or not graph.is_const(ws[0]) or graph.const(ws[0]).ndim != 2:
        return None
    x = op.input("X")[0]
    rank = graph.rank(x)
    if op.type == "mul":  # a file may rely on the defaults (1, 1)
        k = op.attr("x_num_col_dims", 1)
        if op.attr("y_num_col_dims", 1) != 1 or not isinstance(k, int) or rank is None or not 1 <= k < rank:
            return None
        return x, ws[0], k, False
    if op.type == "matmul_v2":
        if op.attr("trans_x") or rank is None or rank < 2:
            return None
        return x, ws[0], rank - 1, bool(op.attr("trans_y"))
    return None


def fuse_fc(graph, options) -> dict:
    """Matches: `mul` (y_num_col_dims 1) or `matmul_v2` (no trans_x, input of rank >= 2)
    with a constant 2-D weight, whose output is read only by an `elementwise_add` (as X) of
    a constant bias varying only along the last output axis; optionally followed by the
    sole reader `relu`. Replaced by PaddlePaddle's `fc(Input, W, Bias)` with in_num_col_dims
    = mul's x_num_col_dims, or rank - 1 for matmul_v2 (both flatten the input to 2-D at
    that dim and multiply by W), activation_type "relu" when the relu was fused. With
    trans_y the weight is stored transposed (a new parameter). A bias not already a 1-D
    vector is stored as one.

    Safe because fc computes flatten(Input) @ W + Bias (then ReLU) with the same shapes as
    the ops it replaces; the intermediates were read by nothing else and were not fetched."""
    counts = {"fc_fused": 0, "relu_fused": 0}
    for op in [op for op in graph.ops if op.type in ("mul", "matmul_v2")]:
        found = _product(graph, op)
        if found is None:
            continue
        x, w_name, k, transpose = found
        add = graph.chain(op, "Out", "elementwise_add", "X")
        if add is None:
            continue
        out_rank = k + 1
        w = graph.const(w_name)
        n = w.shape[0] if transpose else w.shape[1]
        bias = bias_vector(graph, add, out_rank, out_rank - 1, n)
        if bias is None or graph.rank(op.output("Out")[0]) != out_rank:
            continue
        b_name = add.input("Y")[0]
        if graph.const(b_name).shape != (n,):
            b_name = graph.add_param(b_name + ".fc_bias", bias.astype(w.dtype))
        if transpose:
            w_name = graph.add_param(w_name + ".transposed", np.ascontiguousarray(w.T))
        act = graph.chain(add, "Out", FC_ACTIVATIONS, "X")
        last = act or add
        out = last.output("Out")[0]
        graph.insert_op(graph.index(op), "fc", {"Input": [x], "W": [w_name], "Bias": [b_name]},
                        {"Out": [out]}, {"in_num_col_dims": k, "activation_type": act.type if act else "",
                                         "padding_weights": False}, like=op)
        graph.remove_ops([op, add] + ([act] if act else []))
        counts["fc_fused"] += 1
        counts["relu_fused"] += act is not None
        graph.refresh()
    return counts
