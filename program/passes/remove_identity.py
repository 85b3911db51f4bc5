"""Removing ops that compute nothing at inference."""
from __future__ import annotations

import numpy as np

from keel.program.passes.graph import FEED


def _identity_of(graph, op):
    """(source, destination, replacement) when `op` is an identity or a plain scaling at
    inference; replacement is None (drop the op) or ("scale", factor)."""
    if op.type == "dropout" and op.attr("is_test", False):
        src, dst = op.input("X"), op.output("Out")
        if op.attr("dropout_implementation") == "upscale_in_train":
            return src[0], dst[0], None
        keep = np.float32(1.0) - np.float32(op.attr("dropout_prob"))
        return src[0], dst[0], (None if keep == np.float32(1.0) else ("scale", float(keep)))
    if op.type == "assign" and len(op.input("X")) == 1:
        return op.input("X")[0], op.output("Out")[0], None
    if (op.type == "scale" and not op.input("ScaleTensor") and not op.input("BiasTensor")
            and np.float32(op.attr("scale")) == 1.0 and np.float32(op.attr("bias")) == 0.0):
        return op.input("X")[0], op.output("Out")[0], None
    if op.type == "cast" and len(op.input("X")) == 1:
        x = graph.block.find_var(op.input("X")[0])
        if x is not None and x.dtype == op.attr("out_dtype"):
            return op.input("X")[0], op.output("Out")[0], None
    return None


def _bypass(graph, op, src: str, dst: str) -> bool:
    """Remove `op` (dst = src): readers of dst read src instead. When dst is a fetch target
    its name must survive, so src's single producer writes dst directly instead, which is
    possible only when nothing else reads src and src is not itself a feed or fetch target
    or a parameter. Returns False (op kept) otherwise."""
    if graph.producers.get(dst) != [op] or src == dst:
        return False
    if dst not in graph.fetches:
        graph.replace_uses(dst, src)
        graph.remove_ops([op])
        return True
    producer = graph.producer(src)
    if (producer is None or producer.type == FEED or graph.is_interface(src) or src in graph.params
            or graph.readers(src) != [op]):
        return False
    producer.rename_output(src, dst)
    graph.remove_ops([op])
    return True


def remove_identity_ops(graph, options) -> dict:
    """Matches, at inference:
    - `dropout` with is_test: "upscale_in_train" is the identity; "downgrade_in_infer"
      multiplies by (1 - p), computed in float32 as the kernel does, so it becomes a `scale`
      by that factor (bias 0), which gives the same numbers;
    - `assign` (a copy), `scale` with scale 1, bias 0 and no ScaleTensor/BiasTensor, and
      `cast` to the dtype its input already has.
    An identity is removed by making its readers read its input. When its output is a fetch
    target the name is kept: the input's only producer writes it directly, and when that is
    not possible (the input is fed, fetched, a parameter, or read elsewhere) the op stays.
    Safe because each matched op returns its input unchanged (or scaled exactly as before)."""
    counts = {"dropout_removed": 0, "dropout_to_scale": 0, "assign_removed": 0, "scale_removed": 0,
              "cast_removed": 0}
    for op in list(graph.ops):
        found = _identity_of(graph, op)
        if found is None:
            continue
        src, dst, replacement = found
        if replacement is not None:
            graph.insert_op(graph.index(op), "scale", {"X": [src]}, {"Out": [dst]},
                            {"scale": replacement[1], "bias": 0.0, "bias_after_scale": True}, like=op)
            graph.remove_ops([op])
            counts["dropout_to_scale"] += 1
        elif _bypass(graph, op, src, dst):
            counts[f"{op.type}_removed"] += 1
        graph.refresh()
    return counts
