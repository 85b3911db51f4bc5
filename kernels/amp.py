"""Loss-scaling kernels of PaddlePaddle's automatic mixed precision (program/ops/amp.py), as
PaddlePaddle 3.3.1's CPU kernels compute them. The decisions stay on the device (`where` on
one-element arrays): no value is read back, except a StopUpdate tensor."""
from __future__ import annotations

import numpy as np

from keel.kernels.registry import kernel
from keel.kernels.tensor import host_int, present


@kernel("check_finite_and_unscale", inputs=["X", "Scale"], outputs=["Out", "FoundInfinite"])
def check_finite_and_unscale(xp, xs, scale):
    """Out[i] = X[i] * (1 / Scale), computed in Scale's type; once an X holding Inf or NaN
    is met, that X and every later one are multiplied by 0 instead (PaddlePaddle's CPU
    kernel checks each X before scaling it)."""
    found = xp.zeros((1,), dtype=bool)
    inverse = (1 / scale.reshape(1)).astype(scale.dtype)
    outs = []
    for x in xs:
        if x.size:
            found = found | ~xp.isfinite(x).all().reshape(1)
        factor = xp.where(found, xp.zeros((), dtype=scale.dtype), inverse)
        outs.append((x.astype(scale.dtype, copy=False) * factor.reshape(())).astype(x.dtype, copy=False))
    return outs, found


@kernel("update_loss_scaling",
        inputs=["X", "FoundInfinite", "PrevLossScaling", "InGoodSteps", "InBadSteps", "StopUpdate"],
        outputs=["Out", "LossScaling", "OutGoodSteps", "OutBadSteps"],
        attrs=["incr_every_n_steps", "decr_every_n_nan_or_inf", "incr_ratio", "decr_ratio", "stop_update"])
def update_loss_scaling(xp, xs, found, prev, good, bad, stop_t, *, incr_every_n_steps, decr_every_n_nan_or_inf,
                        incr_ratio, decr_ratio, stop_update=False):
    """Out[i] = zeros where FoundInfinite, else X[i]. Unless stop_update (a StopUpdate tensor
    replaces the attribute): a bad step resets the good count and counts a bad one, and the
    decr_every_n_nan_or_inf-th multiplies the scale by decr_ratio (at least 1) and resets the
    bad count; a finite step resets the bad count, and the incr_every_n_steps-th multiplies the
    scale by incr_ratio (kept when that is not finite) and resets the good count."""
    # 0-d, so that the state outputs keep the state's own shape ([1], or [] for a 0-d one)
    inf = found.reshape(-1)[:1].astype(bool).reshape(())
    outs = [xp.where(inf, xp.zeros((), dtype=x.dtype), x) for x in xs]
    if present(stop_t):
        stop_update = bool(host_int(stop_t))
    if stop_update:
        return outs, prev.copy(), good.copy(), bad.copy()
    one = xp.ones((), dtype=good.dtype)
    zero = xp.zeros((), dtype=good.dtype)
    bad_next = bad + one
    good_next = good + one
    shrink = inf & (bad_next == decr_every_n_nan_or_inf)
    grow = ~inf & (good_next == incr_every_n_steps)
    dtype = prev.dtype.type
    smaller = prev * dtype(np.float32(decr_ratio))
    smaller = xp.where(smaller < dtype(1), xp.ones((), dtype=prev.dtype), smaller)
    larger = prev * dtype(np.float32(incr_ratio))
    larger = xp.where(xp.isfinite(larger), larger, prev)
    scale = xp.where(shrink, smaller, xp.where(grow, larger, prev))
    good_out = xp.where(inf | grow, zero, good_next)
    bad_out = xp.where(~inf | shrink, zero, bad_next)
    # (one element each: each output in its own input's shape, which the shape rule declares)
    return outs, scale.reshape(prev.shape), good_out.reshape(good.shape), bad_out.reshape(bad.shape)
