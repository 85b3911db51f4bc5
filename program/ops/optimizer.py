"""Optimizer update ops (sgd, momentum, adam, adamw, lamb, rmsprop, adagrad). Not differentiable.

Every `*Out` output is the updated value of the matching input and normally names the same
variable (ParamOut = Param, Moment1Out = Moment1, ...): the shape rule gives each output
the shape and dtype of its input. Slots and attributes follow PaddlePaddle's legacy ops.
"""
from __future__ import annotations

from keel.program.ops.infer import dims_match, numel
from keel.program.ops.registry import (BOOL, FLOAT, FLOATS, LONG, NOT_DIFFERENTIABLE, STRING, define, many,
                                       opt)


def _make_infer(pairs, per_param=(), scalars=()):
    """pairs: (input slot, output slot) updated in place. per_param: input slots that must
    have Param's shape. scalars: input slots that must hold exactly one element."""

    def infer(ctx):
        param, grad = ctx.input("Param"), ctx.input("Grad")
        ctx.require_float(param)
        if grad is not None and (grad.ndim != param.ndim or
                                 not all(dims_match(a, b) for a, b in zip(param.shape, grad.shape))):
            ctx.fail(f"Grad must have Param's shape: Param {param}, Grad {grad}")
        for slot in per_param:
            v = ctx.input(slot)
            if v is not None and (v.ndim != param.ndim or
                                  not all(dims_match(a, b) for a, b in zip(param.shape, v.shape))):
                ctx.fail(f"{slot} must have Param's shape: Param {param}, {slot} {v}")
        for slot in scalars:
            v = ctx.input(slot)
            if v is not None and numel(v.shape) not in (1, -1):
                ctx.fail(f"{slot} must hold exactly one element, got {v}")
        for src, dst in pairs:
            v = ctx.input(src)
            if v is None:
                v = param  # e.g. rmsprop's MeanGradOut without a MeanGrad input
            ctx.set_output(dst, v.shape, v.dtype)

    return infer


_MP = {"multi_precision": BOOL(False)}
_PARAM = [("Param", "ParamOut"), ("MasterParam", "MasterParamOut")]

define("sgd", inputs=["Param", "LearningRate", "Grad", opt("MasterParam")],
       outputs=["ParamOut", opt("MasterParamOut")], attrs=dict(_MP),
       infer=_make_infer(_PARAM, ("MasterParam",), ("LearningRate",)), grad=NOT_DIFFERENTIABLE,
       doc="ParamOut = Param - LearningRate * Grad.")

define("momentum",
       inputs=["Param", "Grad", "Velocity", "LearningRate", opt("MasterParam")],
       outputs=["ParamOut", "VelocityOut", opt("MasterParamOut")],
       attrs={"mu": FLOAT(), "use_nesterov": BOOL(False), "regularization_method": STRING(""),
              "regularization_coeff": FLOAT(0.0), **_MP, "rescale_grad": FLOAT(1.0)},
       infer=_make_infer(_PARAM + [("Velocity", "VelocityOut")], ("Velocity", "MasterParam"),
                         ("LearningRate",)),
       grad=NOT_DIFFERENTIABLE,
       doc="VelocityOut = mu * Velocity + Grad; ParamOut = Param - lr * VelocityOut (or Nesterov's "
           "form); optional L2 regularization_method.")

_ADAM_INPUTS = ["Param", "Grad", "LearningRate", "Moment1", "Moment2", opt("Moment2Max"), "Beta1Pow",
                "Beta2Pow", opt("MasterParam"), opt("Beta1Tensor"), opt("Beta2Tensor"),
                opt("EpsilonTensor"), opt("SkipUpdate")]
_ADAM_OUTPUTS = ["ParamOut", "Moment1Out", "Moment2Out", opt("Moment2MaxOut"), "Beta1PowOut",
                 "Beta2PowOut", opt("MasterParamOut")]
_ADAM_ATTRS = {"beta1": FLOAT(0.9), "beta2": FLOAT(0.999), "epsilon": FLOAT(1e-8),
               "lazy_mode": BOOL(False), "min_row_size_to_use_multithread": LONG(1000), **_MP,
               "use_global_beta_pow": BOOL(False), "amsgrad": BOOL(False)}
_ADAM_INFER = _make_infer(
    _PARAM + [("Moment1", "Moment1Out"), ("Moment2", "Moment2Out"), ("Moment2Max", "Moment2MaxOut"),
              ("Beta1Pow", "Beta1PowOut"), ("Beta2Pow", "Beta2PowOut")],
    ("Moment1", "Moment2", "Moment2Max", "MasterParam"),
    ("LearningRate", "Beta1Pow", "Beta2Pow", "Beta1Tensor", "Beta2Tensor", "EpsilonTensor"))

define("adam", inputs=_ADAM_INPUTS, outputs=_ADAM_OUTPUTS, attrs=dict(_ADAM_ATTRS),
       infer=_ADAM_INFER, grad=NOT_DIFFERENTIABLE,
       doc="Adam: moment estimates with bias correction by Beta1Pow/Beta2Pow (which it advances).")

define("adamw", inputs=_ADAM_INPUTS, outputs=_ADAM_OUTPUTS,
       attrs={**_ADAM_ATTRS, "lr_ratio": FLOAT(1.0), "coeff": FLOAT(0.01), "with_decay": BOOL(False)},
       infer=_ADAM_INFER, grad=NOT_DIFFERENTIABLE,
       doc="Adam with decoupled weight decay: Param *= 1 - lr * lr_ratio * coeff when with_decay.")

define("lamb",
       inputs=["Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow", "Beta2Pow",
               opt("MasterParam"), opt("SkipUpdate")],
       outputs=["ParamOut", "Moment1Out", "Moment2Out", opt("Beta1PowOut"), opt("Beta2PowOut"),
                opt("MasterParamOut")],
       attrs={"weight_decay": FLOAT(), "beta1": FLOAT(0.9), "beta2": FLOAT(0.999),
              "epsilon": FLOAT(1e-6), "always_adapt": BOOL(False), **_MP},
       infer=_make_infer(_PARAM + [("Moment1", "Moment1Out"), ("Moment2", "Moment2Out"),
                                   ("Beta1Pow", "Beta1PowOut"), ("Beta2Pow", "Beta2PowOut")],
                         ("Moment1", "Moment2", "MasterParam"),
                         ("LearningRate", "Beta1Pow", "Beta2Pow")),
       grad=NOT_DIFFERENTIABLE,
       doc="LAMB: Adam's update scaled per parameter by the trust ratio ||Param|| / ||update||.")

define("rmsprop",
       inputs=["Param", "MeanSquare", opt("MeanGrad"), "LearningRate", "Grad", "Moment",
               opt("MasterParam")],
       outputs=["ParamOut", "MomentOut", "MeanSquareOut", "MeanGradOut", opt("MasterParamOut")],
       attrs={"epsilon": FLOAT(1e-10), "decay": FLOAT(0.9), "momentum": FLOAT(0.0),
              "centered": BOOL(False), **_MP},
       infer=_make_infer(_PARAM + [("Moment", "MomentOut"), ("MeanSquare", "MeanSquareOut"),
                                   ("MeanGrad", "MeanGradOut")],
                         ("Moment", "MeanSquare", "MeanGrad", "MasterParam"), ("LearningRate",)),
       grad=NOT_DIFFERENTIABLE,
       doc="RMSProp: MeanSquare = decay*MeanSquare + (1-decay)*Grad^2 (centered subtracts MeanGrad^2), "
           "with momentum.")

define("adagrad", inputs=["Param", "Grad", "Moment", "LearningRate", opt("MasterParam")],
       outputs=["ParamOut", "MomentOut", opt("MasterParamOut")],
       attrs={"epsilon": FLOAT(1e-6), **_MP},
       infer=_make_infer(_PARAM + [("Moment", "MomentOut")], ("Moment", "MasterParam"),
                         ("LearningRate",)),
       grad=NOT_DIFFERENTIABLE,
       doc="Adagrad: MomentOut = Moment + Grad^2; ParamOut = Param - lr * Grad / (sqrt(MomentOut) + eps).")


def _infer_clip_by_norm(ctx):
    x = ctx.input("X")
    ctx.require_float(x)
    ctx.set_output("Out", x.shape, x.dtype)


define("clip_by_norm", inputs=["X"], outputs=["Out"], attrs={"max_norm": FLOAT()},
       infer=_infer_clip_by_norm, grad=NOT_DIFFERENTIABLE,
       doc="Out = X * max_norm / ||X||_2 when ||X||_2 > max_norm, else X (gradient clipping).")


def _infer_lars_momentum(ctx):
    """Lists of parameters updated together: ParamOut[i] / VelocityOut[i] / MasterParamOut[i]
    take Param[i]'s / Velocity[i]'s / MasterParam[i]'s shape and dtype."""
    params, grads, velocities = ctx.inputs("Param"), ctx.inputs("Grad"), ctx.inputs("Velocity")
    masters, rates = ctx.inputs("MasterParam"), ctx.inputs("LearningRate")
    if not (len(grads) == len(velocities) == len(params)) or (masters and len(masters) != len(params)):
        ctx.fail(f"Param, Grad, Velocity (and MasterParam) must list as many variables: "
                 f"{len(params)}, {len(grads)}, {len(velocities)}, {len(masters)}")
    if len(rates) not in (1, len(params)):
        ctx.fail(f"needs one LearningRate or one per Param, got {len(rates)} for {len(params)}")
    decay = ctx.attr("lars_weight_decay")
    if len(decay) not in (1, len(params)):
        ctx.fail(f"lars_weight_decay needs one value or one per Param, got {len(decay)} for "
                 f"{len(params)} parameters")
    for i, (p, g, v) in enumerate(zip(params, grads, velocities)):
        ctx.require_float(p)
        for other in (g, v):
            if other.ndim != p.ndim or not all(dims_match(a, b) for a, b in zip(p.shape, other.shape)):
                ctx.fail(f"Grad and Velocity must have Param's shape: Param {p}, {other}")
        ctx.set_output("ParamOut", p.shape, p.dtype, index=i)
        ctx.set_output("VelocityOut", v.shape, v.dtype, index=i)
        if masters:
            ctx.set_output("MasterParamOut", masters[i].shape, masters[i].dtype, index=i)


define("lars_momentum",
       inputs=[many("Param"), many("Grad"), many("Velocity"), many("LearningRate"),
               many("MasterParam", optional=True)],
       outputs=[many("ParamOut"), many("VelocityOut"), many("MasterParamOut", optional=True)],
       attrs={"mu": FLOAT(), "lars_coeff": FLOAT(0.001), "lars_weight_decay": FLOATS([0.0005]),
              "epsilon": FLOAT(0.0), **_MP, "rescale_grad": FLOAT(1.0)},
       infer=_infer_lars_momentum, grad=NOT_DIFFERENTIABLE,
       doc="Layer-wise adaptive rate scaling per Param: g = Grad * rescale_grad, local_lr = lr * "
           "lars_coeff * |Param| / (|g| + lars_weight_decay * |Param| + epsilon) (lr itself unless "
           "decay, |Param| and |g| are all positive); VelocityOut = mu * Velocity + local_lr * "
           "(g + lars_weight_decay * Param); ParamOut = Param - VelocityOut.")
