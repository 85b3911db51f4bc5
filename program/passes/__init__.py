"""Inference passes: named transforms of (program, params), in PaddlePaddle's spirit.

    program, params, report = optimize_inference(program, params, evaluate=evaluate,
                                                 fp16=True, disabled=["fuse_fc"])
    print(report)   # what each pass changed

The program is an inference program (feed ops first, fetch ops last, as
`program.io.inference_program` and `load_inference_model` give); `params` maps each
persistable variable to its array. The default order canonicalizes first, then fuses,
then lowers precision (../../docs/architecture.md):

    eliminate_dead_code   ops no fetch target needs                     (dead_code.py)
    remove_identity       inference dropout, assign, scale(1, 0), no-op cast (remove_identity.py)
    fold_constants        ops of constants, run once with `evaluate`    (constant_folding.py)
    fold_batch_norm       batch_norm into conv2d / matmul_v2 / mul / fc (fold_batch_norm.py)
    fuse_conv_bias_activation  conv2d + bias add (+ residual add) (+ activation) -> fused_conv2d
                          (fuse_conv.py; off unless fuse_conv=True, which the Predictor passes)
    fuse_fc               mul/matmul_v2 + bias (+ relu) -> fc           (fuse_fc.py)
    fuse_elementwise_activation  elementwise_add + relu / scale -> fused_elemwise_activation
                                                                  (fuse_elementwise_activation.py)
    convert_to_fp16       float16 weights and activations, casts at the boundaries (fp16.py)
    convert_weights_to_bf16  bfloat16 GEMM/conv weights, cast to float32 where read   (bf16.py)
    column_major_weights  GEMM weights stored column-major (memory layout only; for a
                          CPU's BLAS, so not for a program that runs on a GPU)  (weight_layout.py)

Each pass is verified after it runs and can be disabled by name. A program with control
flow is optimized in its global block, the names its sub-blocks use pinned (graph.py); the
sub-blocks are left as they are, and convert_to_fp16 refuses it. This package never runs
kernels itself: constant folding calls the `evaluate(op_type, inputs, attrs) -> outputs`
its caller injects (the tool and the Predictor build it from
`executor.kernel_call.call_kernel`); without one it is skipped.

bfloat16 is weight-only: convert_weights_to_bf16 stores the weights in bfloat16 (half the
bytes in the params file) and casts them back to float32 where they are read, so the
arithmetic stays float32 (numpy has no bfloat16 type for the kernels to compute in). It
needs `evaluate` too (the cast kernel does the rounding): bf16=True without one is an error.
"""
from __future__ import annotations

import numpy as np

from keel.program.passes.base import Pass, PassOptions, PassRecord, Report
from keel.program.passes.bf16 import convert_weights_to_bf16
from keel.program.passes.constant_folding import fold_constants
from keel.program.passes.dead_code import eliminate_dead_code
from keel.program.passes.fold_batch_norm import fold_batch_norm
from keel.program.passes.fp16 import DEFAULT_KEEP_FP32, FP16_OPS, convert_to_fp16
from keel.program.passes.fuse_conv import fuse_conv_bias_activation
from keel.program.passes.fuse_elementwise_activation import fuse_elementwise_activation
from keel.program.passes.fuse_fc import fuse_fc
from keel.program.passes.graph import Graph, PassError
from keel.program.passes.remove_identity import remove_identity_ops
from keel.program.passes.weight_layout import column_major_weights
from keel.program.program import Program

PASSES: dict[str, Pass] = {p.name: p for p in [
    Pass("eliminate_dead_code", eliminate_dead_code),
    Pass("remove_identity", remove_identity_ops),
    Pass("fold_constants", fold_constants, needs_evaluate=True),
    Pass("fold_batch_norm", fold_batch_norm, group="fuse"),
    Pass("fuse_conv_bias_activation", fuse_conv_bias_activation, group="fuse_conv"),
    Pass("fuse_fc", fuse_fc, group="fuse"),
    Pass("fuse_elementwise_activation", fuse_elementwise_activation, group="fuse"),
    Pass("convert_to_fp16", convert_to_fp16, group="fp16"),
    Pass("convert_weights_to_bf16", convert_weights_to_bf16, group="bf16", needs_evaluate=True),
    Pass("column_major_weights", column_major_weights, group="cpu"),
]}
DEFAULT_ORDER = tuple(PASSES)


def optimize_inference(program: Program, params: dict, *, disabled=(), evaluate=None, fuse: bool = True,
                       fp16: bool = False, bf16: bool = False, fuse_conv: bool = False, in_memory: bool = False,
                       keep_io_types: bool = True,
                       keep_fp32=None, fp16_ops=None, cpu: bool = True,
                       fold_max_bytes: int = 8 << 20, fold_limit_bytes: int = 256 << 20,
                       column_major_min_bytes: int = 2 << 20):
    """Run the passes in DEFAULT_ORDER on a copy of (program, params); returns (program,
    params, report). `disabled`: pass names to skip. `fuse`: run the fusion passes
    (fold_batch_norm, fuse_fc, fuse_elementwise_activation; with `fuse_conv` also
    fuse_conv_bias_activation, off by default so that a program written to a file keeps
    ops every PaddlePaddle build runs (PaddlePaddle's fused_conv2d kernels are oneDNN's and
    GPU's); the Predictor, which runs the program in memory, turns it on: its kernel,
    specialized per shape, measured 1.0-1.27x the separate conv and bias add (+ relu) on
    the mobile CNNs' shapes, program/passes/fuse_conv.py). `in_memory`: the result will be
    run, not written to a file (the Predictor's case), so fuse_conv_bias_activation also
    fuses the activations whose parameters live in attributes files drop (relu6,
    hard_sigmoid, hard_swish, swish; program/io refuses to write such a program). `fp16`: run convert_to_fp16 (`keep_io_types`, `keep_fp32`,
    `fp16_ops`: see program/passes/fp16.py). `bf16`: run convert_weights_to_bf16 (`keep_fp32`
    and `fp16_ops` choose its ops too: see program/passes/bf16.py); not with `fp16`.
    `cpu`: the program will run on a CPU, so the CPU memory-layout pass (column_major_weights)
    runs; False for a GPU, whose GEMMs (cuBLAS) gain nothing from it.
    `fold_max_bytes`, `fold_limit_bytes`, `column_major_min_bytes`: see PassOptions. The inputs are not modified."""
    unknown = sorted(set(disabled) - set(PASSES))
    if unknown:
        raise ValueError(f"unknown pass name(s) {unknown}; the passes are {list(PASSES)}")
    if fp16 and bf16:
        raise ValueError("fp16=True and bf16=True together: choose one (float16 weights and "
                         "activations, or bfloat16 weights with float32 arithmetic)")
    if bf16 and evaluate is None and "convert_weights_to_bf16" not in disabled:
        raise ValueError("bf16=True needs evaluate= (the cast kernel rounds the weights to bfloat16)")
    options = PassOptions(evaluate=evaluate, keep_io_types=keep_io_types,
                          keep_fp32=None if keep_fp32 is None else frozenset(keep_fp32),
                          fp16_ops=None if fp16_ops is None else frozenset(fp16_ops),
                          fold_max_bytes=fold_max_bytes, fold_limit_bytes=fold_limit_bytes,
                          column_major_min_bytes=column_major_min_bytes, in_memory=in_memory)
    program = Program.from_desc(program.to_desc(), verify=True, source="program to optimize")
    params = dict(params)
    report = Report(params_bytes_before=_nbytes(params))
    for p in PASSES.values():
        record = PassRecord(p.name, "ran")
        report.records.append(record)
        if p.name in disabled:
            record.status = "disabled"
        elif p.group in ("fuse", "fuse_conv") and not fuse:
            record.status = "skipped (fusion not requested)"
        elif p.group == "fuse_conv" and not fuse_conv:
            record.status = "skipped (off by default: fuse_conv=True runs it; program/passes/fuse_conv.py)"
        elif p.group == "fp16" and not fp16:
            record.status = "skipped (fp16 not requested)"
        elif p.group == "bf16" and not bf16:
            record.status = "skipped (bf16 not requested)"
        elif p.group == "cpu" and not cpu:
            record.status = "skipped (a CPU memory layout; the program runs on a GPU)"
        elif p.needs_evaluate and evaluate is None:
            record.status = "skipped (no evaluate callable given)"
        else:
            record.ops_before = len(program.global_block().ops)
            record.changes = p.run_in_place(program, params, options)
            record.ops_after = len(program.global_block().ops)
    report.params_bytes_after = _nbytes(params)
    return program, params, report


def _nbytes(params: dict) -> int:
    return sum(np.asarray(v).nbytes for v in params.values())


__all__ = ["Pass", "PassOptions", "PassError", "Report", "PASSES", "DEFAULT_ORDER", "FP16_OPS",
           "DEFAULT_KEEP_FP32", "optimize_inference", "Graph"]
