"""Automatic-mixed-precision loss-scaling ops (PaddlePaddle's AMP decorator writes them into
training programs): unscale the gradients and detect non-finite values, then update the
dynamic loss scale. PaddlePaddle 3.3.1's legacy slots and attributes."""
from __future__ import annotations

from keel.program.ops.registry import BOOL, FLOAT, INT, NOT_DIFFERENTIABLE, define, many, opt
from keel.proto import pb

_T = pb.VarType


def _require_one(ctx, slot):
    info = ctx.input(slot)
    if info.ndim > 1 or (info.ndim == 1 and info.shape[0] not in (1, -1)):
        ctx.fail(f"{slot} must hold one value, got {info}")
    return info


def _infer_check_finite_and_unscale(ctx):
    scale = _require_one(ctx, "Scale")
    ctx.require_float(scale)
    for i, x in enumerate(ctx.inputs("X")):
        if i < ctx.num_outputs("Out"):
            ctx.set_output("Out", x.shape, x.dtype, i)
    ctx.set_output("FoundInfinite", [1], _T.BOOL)


define("check_finite_and_unscale", inputs=[many("X"), "Scale"], outputs=[many("Out"), "FoundInfinite"],
       infer=_infer_check_finite_and_unscale, grad=NOT_DIFFERENTIABLE,
       doc="Out[i] = X[i] / Scale; FoundInfinite = whether any X holds an Inf or NaN (from the "
           "first such X on, Out is X * 0)")


def _infer_update_loss_scaling(ctx):
    if _require_one(ctx, "FoundInfinite").dtype != _T.BOOL:
        ctx.dtype_fail(f"FoundInfinite must be bool, got {ctx.input('FoundInfinite')}")
    for i, x in enumerate(ctx.inputs("X")):
        if i < ctx.num_outputs("Out"):
            ctx.set_output("Out", x.shape, x.dtype, i)
    for src, dst in (("PrevLossScaling", "LossScaling"), ("InGoodSteps", "OutGoodSteps"),
                     ("InBadSteps", "OutBadSteps")):
        info = _require_one(ctx, src)
        ctx.set_output(dst, info.shape, info.dtype)


define("update_loss_scaling",
       inputs=[many("X"), "FoundInfinite", "PrevLossScaling", "InGoodSteps", "InBadSteps", opt("StopUpdate")],
       outputs=[many("Out"), "LossScaling", "OutGoodSteps", "OutBadSteps"],
       attrs={"incr_every_n_steps": INT(), "decr_every_n_nan_or_inf": INT(), "incr_ratio": FLOAT(),
              "decr_ratio": FLOAT(), "stop_update": BOOL(False)},
       infer=_infer_update_loss_scaling, grad=NOT_DIFFERENTIABLE,
       doc="Out[i] = 0 where FoundInfinite, else X[i]; unless stop_update (or StopUpdate), count "
           "good/bad steps and multiply the loss scale by incr_ratio after incr_every_n_steps "
           "finite steps, by decr_ratio (not below 1) after decr_every_n_nan_or_inf bad ones")
