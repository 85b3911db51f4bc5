"""Optimizer kernels: sgd, momentum, lamb, rmsprop, adagrad (adam, adamw: kernels/adam_chunked.py).

Every kernel updates its state in place (`inplace` maps each *Out slot to its input)
and returns the same array objects. Formulas are PaddlePaddle's (phi kernels); where its
CPU and GPU kernels disagree the GPU one is followed and the difference is noted.

Precision: the update is computed in the dtype of the optimizer state (the moments or
velocity), as PaddlePaddle's GPU kernels compute in the "master" type. With
`multi_precision` and a MasterParam, the master copy is updated and Param receives it
cast to Param's dtype; without a MasterParam, a Param of another dtype than the state is
widened for the update and cast back. LearningRate (0-D or [1]) and the beta-power
accumulators stay on the device: no value is read to the host except SkipUpdate.
"""
from __future__ import annotations

from keel.kernels.registry import kernel


def _scalar(t, dt):
    """A 1-element tensor as a 0-D array of dtype `dt` (a new array, never a view)."""
    return t.reshape(()).astype(dt, copy=True)


def _skip(skip_update) -> bool:
    return skip_update is not None and bool(skip_update.reshape(-1)[0])


def _work(param, master, multi_precision, dt):
    """The array the update is computed in: the master copy, Param itself, or a widened copy."""
    if multi_precision and master is not None:
        return master
    if param.dtype == dt:
        return param
    return param.astype(dt)


def _store(param, work):
    if work is not param:
        param[...] = work


@kernel("sgd", inputs=["Param", "LearningRate", "Grad", "MasterParam"],
        outputs=["ParamOut", "MasterParamOut"], attrs=["multi_precision"],
        inplace={"ParamOut": "Param", "MasterParamOut": "MasterParam"})
def sgd(xp, param, learning_rate, grad, master_param, *, multi_precision=False):
    """ParamOut = Param - lr * Grad."""
    dt = master_param.dtype if (multi_precision and master_param is not None) else param.dtype
    p = _work(param, master_param, multi_precision, dt)
    p -= _scalar(learning_rate, dt) * grad.astype(dt, copy=False)
    _store(param, p)
    return param, master_param


@kernel("momentum", inputs=["Param", "Grad", "Velocity", "LearningRate", "MasterParam"],
        outputs=["ParamOut", "VelocityOut", "MasterParamOut"],
        attrs=["mu", "use_nesterov", "regularization_method", "regularization_coeff",
               "multi_precision", "rescale_grad"],
        inplace={"ParamOut": "Param", "VelocityOut": "Velocity", "MasterParamOut": "MasterParam"})
def momentum(xp, param, grad, velocity, learning_rate, master_param, *, mu, use_nesterov=False,
             regularization_method="", regularization_coeff=0.0, multi_precision=False,
             rescale_grad=1.0):
    """g = Grad * rescale_grad (+ regularization_coeff * Param for "l2_decay");
    VelocityOut = Velocity * mu + g;
    ParamOut = Param - (g + VelocityOut * mu) * lr   (use_nesterov)
             = Param - lr * VelocityOut              (otherwise).
    PaddlePaddle's CPU kernel ignores rescale_grad; its GPU kernel (followed) applies it."""
    dt = velocity.dtype
    T = dt.type
    p = _work(param, master_param, multi_precision, dt)
    lr = _scalar(learning_rate, dt)
    g = grad.astype(dt, copy=False)
    if rescale_grad != 1.0:  # (times 1 is the identity: one pass over Grad saved)
        g = g * T(rescale_grad)
    if regularization_method == "l2_decay":
        g = g + T(regularization_coeff) * p
    velocity *= T(mu)
    velocity += g
    if use_nesterov:
        p -= (g + velocity * T(mu)) * lr
    else:
        p -= lr * velocity
    _store(param, p)
    return param, velocity, master_param


@kernel("lamb", inputs=["Param", "Grad", "LearningRate", "Moment1", "Moment2", "Beta1Pow",
                        "Beta2Pow", "MasterParam", "SkipUpdate"],
        outputs=["ParamOut", "Moment1Out", "Moment2Out", "Beta1PowOut", "Beta2PowOut",
                 "MasterParamOut"],
        attrs=["weight_decay", "beta1", "beta2", "epsilon", "always_adapt", "multi_precision"],
        inplace={"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2",
                 "Beta1PowOut": "Beta1Pow", "Beta2PowOut": "Beta2Pow",
                 "MasterParamOut": "MasterParam"})
def lamb(xp, param, grad, learning_rate, moment1, moment2, beta1_pow, beta2_pow, master_param,
         skip_update, *, weight_decay, beta1=0.9, beta2=0.999, epsilon=1e-6, always_adapt=False,
         multi_precision=False):
    """PaddlePaddle's LAMB:
        m1 = beta1 m1 + (1 - beta1) g;   m2 = beta2 m2 + (1 - beta2) g g
        r = (m1 / (1 - b1p)) / (sqrt(m2 / (1 - b2p)) + epsilon) + weight_decay p
        trust = ||p|| / ||r|| when both norms are > 0, else 1; the norms are only taken
                when weight_decay > 0 or always_adapt (otherwise trust = 1)
        p -= lr trust r;   Beta1PowOut = b1p beta1, Beta2PowOut = b2p beta2."""
    outs = (param, moment1, moment2, beta1_pow, beta2_pow, master_param)
    if _skip(skip_update):
        return outs
    dt = moment1.dtype
    T = dt.type
    one = T(1)
    b1, b2, eps, wd = T(beta1), T(beta2), T(epsilon), T(weight_decay)
    b1p = _scalar(beta1_pow, dt)
    b2p = _scalar(beta2_pow, dt)
    p = _work(param, master_param, multi_precision, dt)
    g = grad.astype(dt, copy=False)
    moment1 *= b1
    moment1 += (one - b1) * g
    moment2 *= b2
    moment2 += ((one - b2) * g) * g
    m1_hat = moment1 / (one - b1p)
    m2_hat = moment2 / (one - b2p)
    ratio = m1_hat / (xp.sqrt(m2_hat) + eps) + wd * p
    lr = _scalar(learning_rate, dt)
    if weight_decay > 0 or always_adapt:
        pn = xp.sqrt(xp.sum(p * p))
        tn = xp.sqrt(xp.sum(ratio * ratio))
        safe_tn = xp.where(tn > 0, tn, one)
        trust = xp.where((pn > 0) & (tn > 0), pn / safe_tn, one)
        lr = lr * trust.astype(dt)
    p -= lr * ratio
    _store(param, p)
    beta1_pow *= beta1_pow.dtype.type(beta1)
    beta2_pow *= beta2_pow.dtype.type(beta2)
    return outs


@kernel("rmsprop", inputs=["Param", "MeanSquare", "Grad", "Moment", "LearningRate", "MeanGrad",
                           "MasterParam"],
        outputs=["ParamOut", "MomentOut", "MeanSquareOut", "MeanGradOut", "MasterParamOut"],
        attrs=["epsilon", "decay", "momentum", "centered", "multi_precision"],
        inplace={"ParamOut": "Param", "MomentOut": "Moment", "MeanSquareOut": "MeanSquare",
                 "MeanGradOut": "MeanGrad", "MasterParamOut": "MasterParam"})
def rmsprop(xp, param, mean_square, grad, moment, learning_rate, mean_grad, master_param, *,
            epsilon=1e-10, decay=0.9, momentum=0.0, centered=False, multi_precision=False):
    """PaddlePaddle's RMSProp (epsilon inside the square root):
        ms = decay ms + (1 - decay) g g
        centered: mg = decay mg + (1 - decay) g;  mom = momentum mom + lr g / sqrt(ms - mg^2 + eps)
        else:                                     mom = momentum mom + lr g / sqrt(ms + eps)
        p -= mom."""
    dt = moment.dtype
    T = dt.type
    one, rho, eps, mu = T(1), T(decay), T(epsilon), T(momentum)
    p = _work(param, master_param, multi_precision, dt)
    g = grad.astype(dt, copy=False)
    lr = _scalar(learning_rate, dt)
    mean_square *= rho
    mean_square += ((one - rho) * g) * g
    if centered:
        if mean_grad is None:
            raise ValueError("rmsprop: centered=True needs the MeanGrad input")
        mean_grad *= rho
        mean_grad += (one - rho) * g
        denom = xp.sqrt(mean_square - mean_grad * mean_grad + eps)
    else:
        denom = xp.sqrt(mean_square + eps)
    moment *= mu
    moment += lr * g / denom
    p -= moment
    _store(param, p)
    return param, moment, mean_square, mean_grad, master_param


@kernel("adagrad", inputs=["Param", "Grad", "Moment", "LearningRate", "MasterParam"],
        outputs=["ParamOut", "MomentOut", "MasterParamOut"], attrs=["epsilon", "multi_precision"],
        inplace={"ParamOut": "Param", "MomentOut": "Moment", "MasterParamOut": "MasterParam"})
def adagrad(xp, param, grad, moment, learning_rate, master_param, *, epsilon=1e-6,
            multi_precision=False):
    """moment += g g;   p -= lr g / (sqrt(moment) + epsilon)."""
    dt = moment.dtype
    p = _work(param, master_param, multi_precision, dt)
    g = grad.astype(dt, copy=False)
    moment += g * g
    p -= _scalar(learning_rate, dt) * g / (xp.sqrt(moment) + dt.type(epsilon))
    _store(param, p)
    return param, moment, master_param


@kernel("clip_by_norm", inputs=["X"], outputs=["Out"], attrs=["max_norm"])
def clip_by_norm(xp, x, *, max_norm):
    """x * (max_norm / norm) where the L2 norm exceeds max_norm, else x (a copy). The norm
    stays on the device (no read back per parameter and step on a GPU): the factor is
    computed in float64, as the Python float it was, and rounded to x's dtype."""
    acc = xp.float32 if x.dtype == xp.float16 else x.dtype
    norm = xp.sqrt(xp.sum(xp.square(x, dtype=acc))).astype(xp.float64)
    clipped = norm > max_norm
    factor = xp.where(clipped, max_norm / xp.where(clipped, norm, 1.0), 1.0)
    if x.dtype.kind == "f":
        factor = factor.astype(x.dtype)
    return xp.asarray(x * factor).astype(x.dtype, copy=False)


@kernel("lars_momentum", inputs=["Param", "Grad", "Velocity", "LearningRate", "MasterParam"],
        outputs=["ParamOut", "VelocityOut", "MasterParamOut"],
        attrs=["mu", "lars_coeff", "lars_weight_decay", "epsilon", "multi_precision", "rescale_grad"])
def lars_momentum(xp, params, grads, velocities, rates, masters, *, mu, lars_coeff=0.001,
                  lars_weight_decay=(0.0005,), epsilon=0.0, multi_precision=False, rescale_grad=1.0):
    """PaddlePaddle's CPU kernel, per parameter i (its own learning rate when one is given per
    parameter, its own weight decay likewise):
        g = Grad * rescale_grad;  local_lr = lr * lars_coeff * |p| / (|g| + decay * |p| + epsilon)
        when decay, |p| and |g| are all > 0, else lr;
        VelocityOut = Velocity * mu + local_lr * (g + decay * p);  ParamOut = p - VelocityOut,
    p the float32 master copy under multi_precision (ParamOut then its value cast back)."""
    param_outs, velocity_outs, master_outs = [], [], []
    for i, (param, grad, velocity) in enumerate(zip(params, grads, velocities)):
        master = masters[i] if masters else None
        dt = velocity.dtype
        T = dt.type
        p = (master if multi_precision and master is not None else param).astype(dt, copy=False)
        g = grad.astype(dt, copy=False) * T(rescale_grad)
        lr = _scalar(rates[i] if len(rates) > 1 else rates[0], dt)
        decay = T(lars_weight_decay[i] if len(lars_weight_decay) > 1 else lars_weight_decay[0])
        p_norm, g_norm = xp.sqrt(xp.sum(p * p)), xp.sqrt(xp.sum(g * g))
        if decay > 0:  # (the norms stay on the device: chosen with where, not read back)
            scaled = lr * T(lars_coeff) * p_norm / (g_norm + decay * p_norm + T(epsilon))
            lr = xp.where((p_norm > 0) & (g_norm > 0), scaled, lr)
        v_out = velocity * T(mu) + lr * (g + decay * p)
        p_out = p - v_out
        velocity_outs.append(v_out.astype(dt, copy=False))
        param_outs.append(p_out.astype(param.dtype))
        master_outs.append(p_out.astype(master.dtype) if master is not None else None)
    return param_outs, velocity_outs, (master_outs if masters else None)
