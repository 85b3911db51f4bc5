"""Collective communication ops, in PaddlePaddle's legacy form (paddle/fluid/operators/
collective/*_op.cc of the 2.x releases; 3.3.1's registry keeps c_identity,
c_sync_calc_stream, c_sync_comm_stream, barrier and c_comm_init, whose snapshot
tests/test_op_signatures.py checks).

`ring_id` names a communicator (kernels/communicators.py). Keel sets communicators up
from Python (`distributed.init_parallel_env`), which is what PaddlePaddle's `c_gen_nccl_id`
+ `c_comm_init` pair does inside a startup program; those two ops are defined here so
PaddlePaddle programs that carry them load and print, but have no kernel (running one
says so), since Keel bootstraps NCCL over MPI rather than PaddlePaddle's sockets.

Not differentiable in Keel: data parallelism never differentiates through them (the
optimizer appends them after backward). PaddlePaddle's model-parallel gradients
(c_identity <-> c_allreduce_sum) are not written yet.
"""
from __future__ import annotations

import math
from dataclasses import replace

from keel.program.ops import nn  # noqa: F401  (defines batch_norm, which sync_batch_norm mirrors)
from keel.program.ops.registry import (BOOL, FLOAT, INT, LONGS, NOT_DIFFERENTIABLE, STRING, STRINGS, define, get,
                                  grad_maker, many)


def _same(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


def _each_same(ctx):
    for name, x in zip(ctx.output_names("Out"), ctx.inputs("X")):
        ctx.set_var(name, x.shape, x.dtype)


_STREAM = {"ring_id": INT(0), "use_calc_stream": BOOL(False)}

for _op in ("sum", "max", "min", "prod"):
    define(f"c_allreduce_{_op}", inputs=["X"], outputs=["Out"],
           attrs={**_STREAM, "use_model_parallel": BOOL(False)}, infer=_same, grad=NOT_DIFFERENTIABLE,
           doc=f"Out: the elementwise {_op} of X over the ranks of ring `ring_id`.")

for _op in ("sum", "max", "min", "prod"):
    define(f"c_reduce_{_op}", inputs=["X"], outputs=["Out"], attrs={**_STREAM, "root_id": INT(0)},
           infer=_same, grad=NOT_DIFFERENTIABLE,
           doc=f"Out: on rank `root_id`, the elementwise {_op} of X over the ranks of ring `ring_id`; "
               f"X on the other ranks.")

define("c_broadcast", inputs=["X"], outputs=["Out"], attrs={**_STREAM, "root": INT(0)},
       infer=_same, grad=NOT_DIFFERENTIABLE, doc="Out: rank `root`'s X, on every rank.")


def _infer_allgather(ctx):
    x, nranks = ctx.input("X"), ctx.attr("nranks")
    if nranks < 1:
        ctx.fail(f"nranks must be at least 1, got {nranks}")
    if not x.shape:
        ctx.set_output("Out", [nranks], x.dtype)
        return
    first = x.shape[0] * nranks if x.shape[0] >= 0 else -1
    ctx.set_output("Out", [first] + list(x.shape[1:]), x.dtype)


define("c_allgather", inputs=["X"], outputs=["Out"], attrs={**_STREAM, "nranks": INT()},
       infer=_infer_allgather, grad=NOT_DIFFERENTIABLE,
       doc="Out: the ranks' X concatenated along axis 0 in rank order (stacked for 0-d X).")


def _infer_reducescatter(ctx):
    x, nranks = ctx.input("X"), ctx.attr("nranks")
    if nranks < 1:
        ctx.fail(f"nranks must be at least 1, got {nranks}")
    if not x.shape:
        ctx.fail("X must have at least one dimension to scatter along")
    first = x.shape[0]
    if first >= 0:
        if first % nranks:
            ctx.fail(f"dim 0 of X {list(x.shape)} is not divisible by nranks {nranks}")
        first //= nranks
    ctx.set_output("Out", [first] + list(x.shape[1:]), x.dtype)


define("c_reducescatter", inputs=["X"], outputs=["Out"], attrs={"ring_id": INT(0), "nranks": INT(1),
                                                                  "use_calc_stream": BOOL(False)},
       infer=_infer_reducescatter, grad=NOT_DIFFERENTIABLE,
       doc="Out: this rank's 1/nranks part (along axis 0) of the sum of X over the ranks.")

define("c_identity", inputs=["X"], outputs=["Out"],
       attrs={"ring_id": INT(0), "use_calc_stream": BOOL(True), "use_model_parallel": BOOL(True)},
       infer=_same, grad=NOT_DIFFERENTIABLE, doc="Out = X (model parallelism's marker).")

define("c_sync_calc_stream", inputs=["X"], outputs=["Out"], infer=_same, grad=NOT_DIFFERENTIABLE,
       doc="Out = X once the compute stream has finished.")

define("c_sync_comm_stream", inputs=[many("X")], outputs=[many("Out")], attrs={"ring_id": INT(0)},
       infer=_each_same, grad=NOT_DIFFERENTIABLE,
       doc="Out = X once the ring's collectives started with use_calc_stream=False are complete.")

define("barrier", inputs=["X"], outputs=["Out"], attrs={"ring_id": INT(0)}, infer=_same,
       grad=NOT_DIFFERENTIABLE, doc="Out = X once every rank of the ring has reached it.")

# -- coalesce_tensor: the one buffer a bucket of gradients is all-reduced in ----------------------

def _infer_coalesce_tensor(ctx):
    """Output[i] is Input[i]; FusedOutput is 1-D, its length known here without padding
    (use_align=False; the default alignment depends on the place, as in PaddlePaddle,
    which leaves it unknown too unless align_size is given)."""
    inputs, dtype = ctx.inputs("Input"), ctx.attr("dtype")
    if not inputs:
        ctx.fail("Input is empty: nothing to coalesce")
    if ctx.num_outputs("Output") != len(inputs):
        ctx.fail(f"{len(inputs)} Input but {ctx.num_outputs('Output')} Output variables")
    for name, x in zip(ctx.output_names("Output"), inputs):
        if x.dtype != dtype:
            ctx.fail(f"Input {x.name} has dtype {x.dtype}, not the fused dtype {dtype}")
        ctx.set_var(name, x.shape, x.dtype)
    sizes = [math.prod(x.shape) if all(d >= 0 for d in x.shape) else -1 for x in inputs]
    numel = -1 if ctx.attr("use_align") or -1 in sizes else sum(sizes)
    ctx.set_output("FusedOutput", [numel], dtype)


define("coalesce_tensor", inputs=[many("Input")], outputs=[many("Output"), "FusedOutput"],
       attrs={"dtype": INT(), "copy_data": BOOL(False), "set_constant": BOOL(False),
              "persist_output": BOOL(False), "constant": FLOAT(0.0), "use_align": BOOL(True),
              "align_size": INT(-1), "user_defined_size_of_dtype": INT(-1), "concated_shapes": LONGS([]),
              "concated_ranks": LONGS([])},
       infer=_infer_coalesce_tensor, grad=NOT_DIFFERENTIABLE,
       doc="FusedOutput: one 1-D buffer of `dtype` holding every Input flattened, in order (each "
           "padded to the alignment when use_align), filled with the inputs (copy_data, "
           "persist_output), `constant` (set_constant) or zeros; Output[i]: Input[i]'s part of it, "
           "in Input[i]'s shape.")

define("c_gen_nccl_id", outputs=["Out"],
       attrs={"endpoint": STRING(), "other_endpoints": STRINGS([]), "rank": INT(0), "ring_id": INT(0)},
       grad=NOT_DIFFERENTIABLE,
       doc="PaddlePaddle's NCCL id exchange over sockets; Keel's equivalent is init_parallel_env.")

define("c_comm_init", inputs=["X"],
       attrs={"nranks": INT(), "rank": INT(), "ring_id": INT(0), "device_id": INT(-1), "endpoints": STRING("")},
       grad=NOT_DIFFERENTIABLE,
       doc="PaddlePaddle's communicator setup from an NCCL id; Keel's equivalent is init_parallel_env.")


# -- sync_batch_norm: batch_norm with the statistics of the whole global batch -----------------

_BATCH_NORM, _BATCH_NORM_GRAD = get("batch_norm"), get("batch_norm_grad")


def _sync_batch_norm_grad(op, g):
    """batch_norm's gradient maker (the same inputs), emitting sync_batch_norm_grad."""
    return [replace(grad, type="sync_batch_norm_grad") for grad in _BATCH_NORM.grad.maker(op, g)]


define("sync_batch_norm", inputs=_BATCH_NORM.inputs, outputs=_BATCH_NORM.outputs,
       attrs=dict(_BATCH_NORM.attrs), infer=_BATCH_NORM.infer,
       grad=grad_maker(_sync_batch_norm_grad, inputs=["Y@GRAD"], outputs=["X@GRAD", "Scale@GRAD", "Bias@GRAD"]),
       doc="batch_norm whose batch mean and variance are those of the union of every rank's batch "
           "(ring 0); on one process, batch_norm.")

define("sync_batch_norm_grad", inputs=_BATCH_NORM_GRAD.inputs, outputs=_BATCH_NORM_GRAD.outputs,
       attrs=dict(_BATCH_NORM_GRAD.attrs), infer=_BATCH_NORM_GRAD.infer, grad=NOT_DIFFERENTIABLE,
       doc="The gradient of sync_batch_norm: batch_norm_grad with the per-channel sums over every rank.",
       grad_of="sync_batch_norm")
