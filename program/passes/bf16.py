"""bfloat16 weights: GEMM and convolution weights stored in half the bytes, arithmetic in float32."""
from __future__ import annotations

import numpy as np

from keel.program.passes.fp16 import DEFAULT_KEEP_FP32, FP16_OPS, with_fused_forms
from keel.proto import pb

_T = pb.VarType

# The slots of FP16_OPS that hold weights: what makes up a model's bytes. Other inputs of
# these ops (fc's Bias, conv2d's Bias) are small and stay float32, as does every other
# parameter (biases added by elementwise_add, layer_norm and batch_norm scales and
# statistics): rounding them would save little and cost a cast each.
WEIGHT_SLOTS = {
    "conv2d": ("Filter",), "depthwise_conv2d": ("Filter",), "conv2d_transpose": ("Filter",),
    "matmul_v2": ("X", "Y"), "matmul": ("X", "Y"), "mul": ("X", "Y"), "bmm": ("X", "Y"),
    "fc": ("W",), "lookup_table_v2": ("W",), "fused_conv2d": ("Filter",),
}


def _read_as_weight(op, name: str, op_types) -> bool:
    """`op` is of one of `op_types` and reads `name` only in its weight slots."""
    slots = WEIGHT_SLOTS.get(op.type, ()) if op.type in op_types else ()
    reads = sum(op.input(slot).count(name) for slot in slots)
    return reads > 0 and reads == op.input_arg_names.count(name)


def _weights(graph, op_types) -> list[str]:
    """The float32 constants every reader of which reads them as a weight of `op_types`
    (a fetched parameter has the fetch op among its readers, so it is never one)."""
    found = []
    for name in graph.params:
        if (not graph.is_const(name) or name in graph.fetches or graph.var(name).dtype != _T.FP32
                or graph.const(name).dtype != np.float32):
            continue
        readers = graph.readers(name)
        if readers and all(_read_as_weight(op, name, op_types) for op in readers):
            found.append(name)
    return found


def _store_as_bf16(graph, name: str, evaluate) -> None:
    """Replace the float32 parameter `name` by its bfloat16 bits (rounded by the cast
    kernel, as the cast op would), declare it BF16, and make its readers read a float32
    copy made by one `cast` before the first of them."""
    bits = evaluate("cast", {"X": graph.const(name)}, {"in_dtype": _T.FP32, "out_dtype": _T.BF16})["Out"]
    graph.make_const(name, np.asarray(bits))
    var = graph.var(name)
    var.dtype = _T.BF16  # make_const declared the uint16 array as UINT16
    readers = graph.readers(name)  # in program order
    wide = graph.fresh_name(name + ".cast_fp32")
    graph.block.create_var(wide, list(var.shape), _T.FP32)
    graph.insert_op(graph.index(readers[0]), "cast", {"X": [name]}, {"Out": [wide]},
                    {"in_dtype": _T.BF16, "out_dtype": _T.FP32}, like=readers[0])
    for op in readers:
        op.rename_input(name, wide)


def convert_weights_to_bf16(graph, options) -> dict:
    """Matches: a float32 constant (a parameter no op writes, not fetched) every reader of
    which is an op of FP16_OPS (options.fp16_ops) not in the keep list (options.keep_fp32,
    default DEFAULT_KEEP_FP32) and reads it only in a weight slot (WEIGHT_SLOTS: conv
    filters, matmul/mul/bmm operands, fc and embedding W). The parameter keeps its name and
    holds its value rounded to bfloat16 (to nearest even, by the cast kernel through
    `options.evaluate`), declared BF16 so the params file stores 2 bytes per element; one
    `cast` (in_dtype BF16, out_dtype FP32) before its first reader writes a float32 copy
    that every reader reads instead. Nothing else changes: activations, biases and
    normalization parameters stay float32.

    Safe for the dtypes: every op reads exactly the float32 values it read before, except
    that the weights are rounded (the bfloat16 -> float32 cast is exact), so no kernel
    sees bfloat16 bits. Not exact: bfloat16 keeps 8 significant bits, a relative rounding
    of up to 2**-8 (0.4%) per weight; callers state and check a tolerance. A loader that
    folds constants (the Predictor with ir_optim) turns each cast back into a float32
    parameter holding the rounded values; without folding the casts run on every call."""
    keep = with_fused_forms(options.keep_fp32 if options.keep_fp32 is not None else DEFAULT_KEEP_FP32)
    op_types = (options.fp16_ops if options.fp16_ops is not None else FP16_OPS) - keep
    weights = _weights(graph, op_types)
    for name in weights:
        _store_as_bf16(graph, name, options.evaluate)
    return {"params_bf16": len(weights), "casts_inserted": len(weights)} if weights else {}
