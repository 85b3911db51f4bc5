"""`program.static.amp`: PaddlePaddle's static automatic mixed precision
(`paddle.static.amp`): `decorate(optimizer, ...)`, the op lists, `fp16_guard`; and eager mode's
(`paddle.amp`): `auto_cast` and `GradScaler` (program/amp/eager.py).

    opt = pg.static.amp.decorate(pg.optimizer.Adam(1e-3), level="O1", dtype="float16")
    opt.minimize(loss)         # casts, the scaled loss, unscale + overflow check, loss-scale update

On the CPU, numpy computes float16 correctly but slowly (no native half arithmetic: each
op converts), and has no bfloat16: Keel carries bfloat16 values as their uint16 bit
patterns, and kernels reading or writing bfloat16 compute in float32 on the widened values
and round the results to bfloat16 (nearest even). The arithmetic is right on the CPU;
mixed precision is a speed and memory matter for a GPU.
"""
from keel.program.amp.decorator import OptimizerWithMixedPrecision, decorate  # noqa: F401
from keel.program.amp.eager import GradScaler, amp_guard, auto_cast  # noqa: F401
from keel.program.amp.lists import AutoMixedPrecisionLists, CustomOpLists  # noqa: F401
from keel.program.amp.rewrite import cast_model_to_fp16, fp16_guard  # noqa: F401

__all__ = ["auto_cast", "amp_guard", "GradScaler", "decorate", "OptimizerWithMixedPrecision", "AutoMixedPrecisionLists", "CustomOpLists",
           "fp16_guard", "cast_model_to_fp16"]
