"""lars_momentum (issue 32) against its documented update, written out per parameter with
Python floats: local_lr = lr * lars_coeff * |p| / (|g| + decay * |p| + epsilon),
v = mu * v + local_lr * (g + decay * p), p = p - v."""
import math

import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from oprun import run as run_op


def _reference(p, g, v, lr, mu, coeff, decay, eps, rescale):
    g = [x * rescale for x in g]
    pn, gn = math.sqrt(sum(x * x for x in p)), math.sqrt(sum(x * x for x in g))
    local = lr * coeff * pn / (gn + decay * pn + eps) if decay > 0 and pn > 0 and gn > 0 else lr
    v = [mu * vi + local * (gi + decay * pi) for vi, gi, pi in zip(v, g, p)]
    return [pi - vi for pi, vi in zip(p, v)], v


def _run(params, grads, velocities, rates, attrs):
    attrs = {"lars_coeff": 0.001, "lars_weight_decay": [0.0005], "epsilon": 0.0, "multi_precision": False,
             "rescale_grad": 1.0, **attrs}
    # FLOAT attributes as a program holds them: float32 values
    attrs = {k: ([float(np.float32(x)) for x in v] if isinstance(v, list) else
                 float(np.float32(v)) if isinstance(v, float) else v) for k, v in attrs.items()}
    out = call_kernel("lars_momentum", {"Param": params, "Grad": grads, "Velocity": velocities,
                                        "LearningRate": rates}, attrs)
    return out["ParamOut"], out["VelocityOut"]


@pytest.mark.parametrize("decay,rescale,eps", [([0.0005], 1.0, 0.0), ([0.01, 0.1], 0.5, 1e-3), ([0.0], 1.0, 0.0)])
def test_update_matches_the_formula(decay, rescale, eps):
    rng = np.random.default_rng(0)
    params = [rng.normal(size=(3, 2)), rng.normal(size=(4,))]
    grads = [rng.normal(size=(3, 2)), rng.normal(size=(4,))]
    velocities = [rng.normal(size=(3, 2)), rng.normal(size=(4,))]
    rates = [np.array([0.1])]
    attrs = {"mu": 0.9, "lars_coeff": 0.002, "lars_weight_decay": decay, "epsilon": eps,
             "rescale_grad": rescale}
    p_out, v_out = _run(params, grads, velocities, rates, attrs)
    for i in range(2):
        d = decay[i] if len(decay) > 1 else decay[0]
        want_p, want_v = _reference(params[i].ravel().tolist(), grads[i].ravel().tolist(),
                                    velocities[i].ravel().tolist(), 0.1, float(np.float32(0.9)),
                                    float(np.float32(0.002)), float(np.float32(d)), float(np.float32(eps)),
                                    rescale)
        np.testing.assert_allclose(p_out[i].ravel(), want_p, rtol=1e-12)
        np.testing.assert_allclose(v_out[i].ravel(), want_v, rtol=1e-12)


def test_zero_gradient_uses_the_plain_rate():
    p, v = [np.ones(3)], [np.zeros(3)]
    p_out, v_out = _run(p, [np.zeros(3)], v, [np.array([0.5])], {"mu": 0.9})
    decay = float(np.float32(0.0005))
    np.testing.assert_allclose(v_out[0], 0.5 * decay * np.ones(3), rtol=1e-12)  # (Velocity 0: mu unused)
    np.testing.assert_allclose(p_out[0], 1 - 0.5 * decay, rtol=1e-12)


def test_mismatched_lists_are_refused():
    from keel.program.errors import ShapeError
    with pytest.raises(ShapeError, match="lars_weight_decay needs one value or one per Param"):
        run_op("lars_momentum", {"Param": [np.ones(2)], "Grad": [np.ones(2)], "Velocity": [np.ones(2)],
                                 "LearningRate": [np.ones(1)]}, {"mu": 0.9, "lars_weight_decay": [0.1, 0.2]})
