"""Rewriting a forward program for mixed precision: PaddlePaddle 3.3.1's
`cast_model_to_fp16` (python/paddle/static/amp/fp16_utils.py), step for step.

1. O2 only: every parameter becomes float16/bfloat16, except those read by an op that must
   stay float32 (an unsupported op, one touching the learning rate, one outside `fp16_guard`
   when the guard is used) or through a slot kept in float32 (batch_norm's and layer_norm's
   Scale, Bias, Mean, Variance).
2. Each op is put in the low-precision set or the float32 set: kept float32 (unsupported,
   learning rate, black variable names, black list), white list -> low precision; an
   existing cast only gets its dtypes right; the rest by level: O2 all low precision; O1
   gray ops follow the op that made their inputs (the last such input decides; no producer
   keeps low precision), any other op float32. The outputs of each op get its dtype
   (batch_norm's and layer_norm's statistics stay float32).
3. Before each op, a `cast` for every float input of the other precision, written once per
   variable as `<name>.cast_fp16` / `<name>.cast_fp32` and reused by later readers.

The backward pass, appended afterwards, differentiates the casts like any op (cast's
gradient is the cast back), so float32 parameters receive float32 gradients.
"""
from __future__ import annotations

from keel.program import default, dtypes
from keel.program.amp.lists import AutoMixedPrecisionLists, FP16_BLACK_LIST
from keel.proto import pb

_T = pb.VarType
FP16, BF16, FP32, FP64 = _T.FP16, _T.BF16, _T.FP32, _T.FP64
FLOAT_TYPES = {FP32, FP16, BF16, FP64}
SUPPORT_FLOAT_TYPES = {FP32, FP16, BF16}
_VALID_TYPES = {_T.DENSE_TENSOR, _T.SELECTED_ROWS, _T.DENSE_TENSOR_ARRAY}
FP16_GUARD_PATTERN = "__use_fp16__"


def fp16_guard():
    """Under O2 with `use_amp_guard=True`, only ops built inside this block compute in low
    precision (PaddlePaddle's `paddle.static.amp.fp16_guard`)."""
    return default.name_scope(FP16_GUARD_PATTERN)


def _keep_fp32_input(op, slot: str) -> bool:
    if op.type in ("batch_norm", "layer_norm", "instance_norm"):
        return slot != "X"
    if op.type == "fused_bn_add_activation":
        return slot not in ("X", "Z")
    if op.type == "resnet_unit":
        return slot not in ("X", "FilterX", "Z", "FilterZ")
    if op.type in ("fused_attention", "fused_feedforward"):
        return slot in ("LnScale", "LnBias", "Ln2Scale", "Ln2Bias", "Ln1Scale", "Ln1Bias")
    if op.type == "fused_multi_transformer":
        return slot in ("LnScale", "LnBias", "FFNLnScale", "FFNLnBias")
    return False


def _keep_fp32_output(op, slot: str) -> bool:
    if op.type in ("batch_norm", "fused_bn_add_activation", "layer_norm"):
        return slot != "Y"
    if op.type == "resnet_unit":
        return slot not in ("Y", "ConvX", "ConvZ")
    if op.type in ("fused_attention", "fused_feedforward"):
        return slot in ("LnMean", "LnVariance", "Ln2Mean", "Ln2Variance", "Ln1Mean", "Ln1Variance")
    return False


def _need_keep_fp32(op, unsupported, use_fp16_guard) -> bool:
    if op.type in unsupported:
        return True
    if any("learning_rate" in n for n in op.input_arg_names + op.output_arg_names):
        return True
    if use_fp16_guard:
        return FP16_GUARD_PATTERN not in (op.attr("op_namescope") or "")
    return False


def _tensor(block, name):
    var = block.find_var(name)
    return var if var is not None and var.type in _VALID_TYPES else None


def _set_param_dtype(program, dest, lists, use_fp16_guard, level) -> set[str]:
    """Step 1: the parameters that stay float32; under O2 the others become `dest`."""
    keep = set()
    if level in ("O1", "OD"):
        return keep
    params = []
    for block in program.blocks:
        params.extend(block.all_parameters())
        for op in block.ops:
            if op.type in lists.black_list:
                continue
            if _need_keep_fp32(op, lists.unsupported_list, use_fp16_guard):
                keep.update(op.input_arg_names)
            else:
                for slot in op.inputs:
                    if _keep_fp32_input(op, slot):
                        keep.update(op.input(slot))
    for param in params:
        if param.name not in keep:
            param.dtype = dest
    return keep


def _need_process(op) -> bool:
    block = op.block

    def supported(name):
        var = block.find_var(name)
        if var is None:
            return True
        return var.type == _T.DENSE_TENSOR and var.dtype in SUPPORT_FLOAT_TYPES

    names = op.input_arg_names
    if names and not any(supported(n) for n in names):
        return False
    if op.type in ("create_py_reader", "read", "feed", "fetch"):
        return False
    if op.type == "set_value":
        return True
    return not (not op.has_attr("in_dtype")
                and any(op.has_attr(a) and op.attr(a) in FLOAT_TYPES for a in ("out_dtype", "dtype")))


def _mark(op, dtype) -> set[str]:
    """The float inputs of `op` (the low-precision candidates); its float outputs set to
    `dtype` (PaddlePaddle's process_op_input_and_outputs)."""
    block = op.block
    low = set()
    for slot, names in op.inputs.items():
        if _keep_fp32_input(op, slot):
            continue
        low.update(n for n in names if (v := _tensor(block, n)) is not None and v.dtype in FLOAT_TYPES)
    for slot, names in op.outputs.items():
        if _keep_fp32_output(op, slot):
            continue
        for n in names:
            var = _tensor(block, n)
            if var is not None and var.dtype in FLOAT_TYPES:
                var.dtype = dtype
    return low


def _producer_before(ops, index, name):
    for j in range(index - 1, -1, -1):
        if name in ops[j].output_arg_names:
            return ops[j]
    return None


def _o1_dtype(op, index, dest, lists, keep_fp32_ops, keep_fp16_ops):
    """O1's choice for an op in no list but gray: float32; a gray op follows its inputs."""
    if op.type not in lists.gray_list:
        return FP32
    chosen = dest
    ops = op.block.ops
    for name in op.input_arg_names:
        prev = _producer_before(ops, index, name)
        if prev is None:
            continue
        if id(prev) in keep_fp32_ops or prev.type in lists.black_list:
            chosen = FP32
        elif id(prev) in keep_fp16_ops or prev.type in lists.white_list:
            chosen = dest
    return chosen


def _promote_dtype(op, dest):
    chosen = dest
    for slot, names in op.inputs.items():
        if _keep_fp32_input(op, slot):
            continue
        if any((v := op.block.find_var(n)) is not None and v.dtype == FP32 for n in names):
            chosen = FP32
    return chosen


def _insert_casts(block, op, index, src, dest) -> int:
    """Step 3 for one op: cast its `src` inputs to `dest` before it; return how many casts."""
    count = 0
    tag = "fp16" if dest in (FP16, BF16) else "fp32"
    for slot, names in op.inputs.items():
        if src == FP32 and _keep_fp32_input(op, slot):
            continue
        for name in names:
            var = _tensor(block, name)
            if var is None or var.dtype == dest:
                continue
            cast_name = f"{name}.cast_{tag}"
            cast_var = block.find_var(cast_name)
            if cast_var is not None and cast_var.dtype == dest:
                op.rename_input(name, cast_name)
                continue
            if var.dtype != src:
                continue
            cast_var = block.create_var(cast_name, var.shape, dest, stop_gradient=var.stop_gradient)
            cast = block.insert_op(index, "cast", {"X": [var]}, {"Out": [cast_var]},
                                   {"in_dtype": var.dtype, "out_dtype": dest, "op_role": op.attr("op_role") or 0})
            if op.callstack:
                cast.set_attr("op_callstack", op.callstack)
            count += 1
            op.rename_input(name, cast_name)
    for attr in ("in_dtype", "out_dtype", "dtype"):
        if op.has_attr(attr) and op.attr(attr) in FLOAT_TYPES:
            op.set_attr(attr, dest)
    return count


def cast_model_to_fp16(program, amp_lists=None, use_fp16_guard=True, dest_type=FP16, level="O2",
                       use_promote=False) -> set[str]:
    """Rewrite `program` in place (see the module's docstring); return the names of the
    parameters read in low precision (PaddlePaddle's `to_fp16_var_names`)."""
    dest = dtypes.to_code(dest_type)
    if amp_lists is None:
        amp_lists = AutoMixedPrecisionLists(dtypes.name(dest))
    if level == "O2":
        amp_lists.black_list = amp_lists.black_list - FP16_BLACK_LIST
    if level == "OD":
        amp_lists = AutoMixedPrecisionLists(dtypes.name(dest))
        amp_lists.black_list = amp_lists.all_list - amp_lists.white_list
    keep_fp32_vars = _set_param_dtype(program, dest, amp_lists, use_fp16_guard, level)
    keep_fp32_ops, keep_fp16_ops = set(), set()   # ids of ops
    to_fp16 = set()
    params = {p.name for p in program.global_block().all_parameters()}
    for block in program.blocks:
        for index, op in enumerate(block.ops):
            if not _need_process(op):
                continue
            keep_fp32 = (_need_keep_fp32(op, amp_lists.unsupported_list, use_fp16_guard)
                         or (amp_lists.black_varnames is not None
                             and any(n in amp_lists.black_varnames
                                     for n in op.input_arg_names + op.output_arg_names)))
            if not keep_fp32 and op.type in amp_lists.black_list:
                keep_fp32 = True
                to_fp16.update(n for n in op.input_arg_names if n in params)
            if keep_fp32:
                keep_fp32_ops.add(id(op))
                _mark(op, FP32)
            elif op.type in amp_lists.white_list:
                keep_fp16_ops.add(id(op))
                to_fp16 |= _mark(op, dest)
            elif op.type == "cast":  # its dtypes follow its input and its out_dtype
                op.set_attr("in_dtype", block.var(op.input("X")[0]).dtype)
                block.var(op.output("Out")[0]).dtype = op.attr("out_dtype")
            else:
                if use_promote:
                    chosen = _promote_dtype(op, dest)
                elif level == "O2":
                    chosen = dest
                else:
                    chosen = _o1_dtype(op, index, dest, amp_lists, keep_fp32_ops, keep_fp16_ops)
                if chosen == dest:
                    keep_fp16_ops.add(id(op))
                    to_fp16 |= _mark(op, dest)
                else:
                    keep_fp32_ops.add(id(op))
                    _mark(op, FP32)
    for block in program.blocks:
        index = 0
        while index < len(block.ops):
            op = block.ops[index]
            added = 0
            if id(op) in keep_fp16_ops:
                added += _insert_casts(block, op, index, FP32, dest)
            if id(op) in keep_fp32_ops:
                added += _insert_casts(block, op, index, dest, FP32)
            index += added + 1
    return to_fp16 - keep_fp32_vars
