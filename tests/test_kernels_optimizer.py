"""Optimizer kernels: several steps against textbook float64 implementations of
PaddlePaddle's update rules (written in the bias-corrected / per-element form rather
than the kernels' arrangement), plus the in-place contract."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import registry as kernel_registry
from keel.program.ops import registry as op_registry

OPTIMIZER_OPS = ["sgd", "momentum", "adam", "adamw", "lamb", "rmsprop", "adagrad"]
STEPS = 5


@pytest.mark.parametrize("op_type", OPTIMIZER_OPS)
def test_kernel_slots_exist_in_op_registry(op_type):
    opdef = op_registry.lookup(op_type)
    if opdef is None:
        pytest.skip(f"op {op_type!r} is not defined in program/ops yet")
    kdef = kernel_registry.get(op_type)
    assert kdef is not None
    assert set(kdef.inputs) <= set(opdef.input_slots)
    assert set(kdef.outputs) <= set(opdef.output_slots)
    for name in kdef.attrs:
        assert opdef.attr_spec(name) is not None, name
    for out_slot, in_slot in kdef.inplace.items():
        assert out_slot in kdef.outputs and in_slot in kdef.inputs


def _data(dtype, shape=(3, 4), seed=0):
    rng = np.random.default_rng(seed)
    param = rng.standard_normal(shape).astype(dtype)
    grads = [rng.standard_normal(shape).astype(dtype) for _ in range(STEPS)]
    return param, grads


def _tol(dtype):
    return dict(rtol=1e-12, atol=1e-14) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)


def _lr(value, dtype=np.float32, zero_d=False):
    return np.array(value, dtype=dtype) if zero_d else np.array([value], dtype=dtype)


# -- sgd -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("zero_d_lr", [False, True])
def test_sgd(dtype, zero_d_lr):
    param, grads = _data(dtype)
    ref = param.astype(np.float64)
    lr = _lr(0.1, dtype, zero_d_lr)
    for g in grads:
        res = call_kernel("sgd", {"Param": param, "LearningRate": lr, "Grad": g})
        assert res["ParamOut"] is param
        ref = ref - 0.1 * g.astype(np.float64)
    assert param.dtype == dtype
    np.testing.assert_allclose(param, ref, **_tol(dtype))


def test_sgd_master_param():
    master = np.random.default_rng(1).standard_normal(6).astype(np.float32)
    param = master.astype(np.float16)
    grad = np.ones(6, dtype=np.float16)
    res = call_kernel("sgd", {"Param": param, "LearningRate": _lr(0.5), "Grad": grad,
                              "MasterParam": master}, {"multi_precision": True})
    assert res["ParamOut"] is param and res["MasterParamOut"] is master
    expected = (np.random.default_rng(1).standard_normal(6).astype(np.float32) - 0.5)
    np.testing.assert_array_equal(master, expected)
    np.testing.assert_array_equal(param, expected.astype(np.float16))


# -- momentum --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("nesterov", [False, True])
@pytest.mark.parametrize("reg", ["", "l2_decay"])
@pytest.mark.parametrize("rescale", [1.0, 0.5])
def test_momentum(dtype, nesterov, reg, rescale):
    param, grads = _data(dtype)
    velocity = np.zeros_like(param)
    mu, lr, coeff = 0.9, 0.05, 0.01
    p, v = param.astype(np.float64), np.zeros(param.shape)
    attrs = {"mu": mu, "use_nesterov": nesterov, "regularization_method": reg,
             "regularization_coeff": coeff, "rescale_grad": rescale}
    for g in grads:
        res = call_kernel("momentum", {"Param": param, "Grad": g, "Velocity": velocity,
                                       "LearningRate": _lr(lr, dtype)}, attrs)
        assert res["ParamOut"] is param and res["VelocityOut"] is velocity
        for i in np.ndindex(p.shape):                       # per element, textbook
            gi = float(g[i]) * rescale + (coeff * p[i] if reg == "l2_decay" else 0.0)
            v[i] = mu * v[i] + gi
            p[i] = p[i] - (gi + mu * v[i]) * lr if nesterov else p[i] - lr * v[i]
    np.testing.assert_allclose(velocity, v, **_tol(dtype))
    np.testing.assert_allclose(param, p, **_tol(dtype))


# -- adam / adamw ----------------------------------------------------------------------

def _adam_reference(param, grads, lr, b1, b2, eps, *, coeff=0.0, lr_ratio=1.0, amsgrad=False):
    """Textbook bias-corrected Adam(W), step t = 1, 2, ...; decoupled decay first."""
    p = param.astype(np.float64)
    m, v, vmax = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    lr = lr * lr_ratio
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        p = p - lr * coeff * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        vmax = np.maximum(vmax, v)
        m_hat = m / (1 - b1 ** t)
        v_hat = (vmax if amsgrad else v) / (1 - b2 ** t)
        p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
    return p, m, v, vmax, b1 ** (len(grads) + 1), b2 ** (len(grads) + 1)


def _adam_state(param, b1, b2, amsgrad=False):
    dt = param.dtype
    state = {"Param": param, "Moment1": np.zeros_like(param), "Moment2": np.zeros_like(param),
             "Beta1Pow": np.array([b1], dtype=dt), "Beta2Pow": np.array([b2], dtype=dt)}
    if amsgrad:
        state["Moment2Max"] = np.zeros_like(param)
    return state


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_adam_steps(dtype, amsgrad):
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 0.01
    if dtype == np.float32:  # FLOAT attributes are float32 on the wire
        b1, b2, eps = (float(np.float32(v)) for v in (b1, b2, eps))
    param, grads = _data(dtype)
    state = _adam_state(param, b1, b2, amsgrad)
    attrs = {"beta1": b1, "beta2": b2, "epsilon": eps, "amsgrad": amsgrad}
    for g in grads:
        res = call_kernel("adam", {**state, "Grad": g, "LearningRate": _lr(lr, dtype)}, attrs)
        for out_slot, in_slot in [("ParamOut", "Param"), ("Moment1Out", "Moment1"),
                                  ("Moment2Out", "Moment2"), ("Beta1PowOut", "Beta1Pow"),
                                  ("Beta2PowOut", "Beta2Pow")]:
            assert res[out_slot] is state[in_slot]
    p, m, v, vmax, b1p, b2p = _adam_reference(_data(dtype)[0], grads, lr, b1, b2, eps,
                                              amsgrad=amsgrad)
    tol = _tol(dtype)
    np.testing.assert_allclose(state["Param"], p, **tol)
    np.testing.assert_allclose(state["Moment1"], m, **tol)
    np.testing.assert_allclose(state["Moment2"], v, **tol)
    if amsgrad:
        np.testing.assert_allclose(state["Moment2Max"], vmax, **tol)
    np.testing.assert_allclose(state["Beta1Pow"], [b1p], **tol)
    np.testing.assert_allclose(state["Beta2Pow"], [b2p], **tol)


def test_adam_epsilon_placement_matters():
    """One step with a tiny second moment distinguishes eps*sqrt(1-b2p) (Paddle) from eps."""
    b1, b2, eps, lr = 0.9, 0.999, 1e-3, 1.0
    param = np.zeros(1)
    g = np.array([1e-3])
    state = _adam_state(param, b1, b2)
    call_kernel("adam", {**state, "Grad": g, "LearningRate": _lr(lr, np.float64)},
                {"beta1": b1, "beta2": b2, "epsilon": eps})
    m, v = (1 - b1) * 1e-3, (1 - b2) * 1e-6
    paddle = -lr * np.sqrt(1 - b2) / (1 - b1) * m / (np.sqrt(v) + eps * np.sqrt(1 - b2))
    naive = -lr * np.sqrt(1 - b2) / (1 - b1) * m / (np.sqrt(v) + eps)
    assert abs(paddle - naive) > 1e-3
    np.testing.assert_allclose(param, [paddle], rtol=1e-12)
    np.testing.assert_allclose(param, [-lr * 1e-3 / (1e-3 + eps)], rtol=1e-12)  # = m_hat/(sqrt(v_hat)+eps)


def test_adam_global_beta_pow_skip_update_and_beta_tensors():
    param, grads = _data(np.float64)
    state = _adam_state(param, 0.9, 0.999)
    call_kernel("adam", {**state, "Grad": grads[0], "LearningRate": _lr(0.1, np.float64)},
                {"use_global_beta_pow": True})
    assert state["Beta1Pow"].tolist() == [0.9] and state["Beta2Pow"].tolist() == [0.999]

    before = {k: v.copy() for k, v in state.items()}
    call_kernel("adam", {**state, "Grad": grads[1], "LearningRate": _lr(0.1, np.float64),
                         "SkipUpdate": np.array([True])}, {})
    for k in state:
        np.testing.assert_array_equal(state[k], before[k])

    # Beta1Tensor / Beta2Tensor / EpsilonTensor override the attributes
    p1, _ = _data(np.float64)
    s1 = _adam_state(p1, 0.5, 0.75)
    call_kernel("adam", {**s1, "Grad": grads[0], "LearningRate": _lr(0.1, np.float64),
                         "Beta1Tensor": np.array([0.5]), "Beta2Tensor": np.array([0.75]),
                         "EpsilonTensor": np.array([1e-4])}, {"beta1": 0.9, "beta2": 0.999})
    ref, *_ = _adam_reference(_data(np.float64)[0], grads[:1], 0.1, 0.5, 0.75, 1e-4)
    np.testing.assert_allclose(s1["Param"], ref, rtol=1e-12)
    assert s1["Beta1Pow"].tolist() == [0.25]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("with_decay, coeff, lr_ratio", [
    (True, 0.01, 1.0), (True, 0.1, 0.5), (False, 0.1, 1.0),
])
def test_adamw_steps(dtype, with_decay, coeff, lr_ratio):
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 0.01
    if dtype == np.float32:
        b1, b2, eps, coeff, lr_ratio = (float(np.float32(v)) for v in (b1, b2, eps, coeff, lr_ratio))
    param, grads = _data(dtype, seed=3)
    state = _adam_state(param, b1, b2)
    attrs = {"beta1": b1, "beta2": b2, "epsilon": eps, "coeff": coeff, "lr_ratio": lr_ratio,
             "with_decay": with_decay}
    for g in grads:
        res = call_kernel("adamw", {**state, "Grad": g, "LearningRate": _lr(lr, dtype)}, attrs)
        assert res["ParamOut"] is state["Param"]
    p, m, v, _, b1p, _ = _adam_reference(_data(dtype, seed=3)[0], grads, lr, b1, b2, eps,
                                         coeff=coeff if with_decay else 0.0, lr_ratio=lr_ratio)
    tol = _tol(dtype)
    np.testing.assert_allclose(state["Param"], p, **tol)
    np.testing.assert_allclose(state["Moment1"], m, **tol)
    np.testing.assert_allclose(state["Moment2"], v, **tol)
    np.testing.assert_allclose(state["Beta1Pow"], [b1p], **tol)


def test_adamw_decay_changes_result():
    param, grads = _data(np.float64)
    a = _adam_state(param.copy(), 0.9, 0.999)
    b = _adam_state(param.copy(), 0.9, 0.999)
    call_kernel("adamw", {**a, "Grad": grads[0], "LearningRate": _lr(0.1, np.float64)},
                {"coeff": 0.5, "with_decay": True})
    call_kernel("adamw", {**b, "Grad": grads[0], "LearningRate": _lr(0.1, np.float64)},
                {"coeff": 0.5, "with_decay": False})
    np.testing.assert_allclose(a["Param"] - b["Param"], -0.1 * 0.5 * param, rtol=1e-10)


def test_adam_master_param_multi_precision():
    master, grads = _data(np.float32, seed=4)
    param = master.astype(np.float16)
    state = {"Param": param, "Moment1": np.zeros_like(master), "Moment2": np.zeros_like(master),
             "Beta1Pow": np.array([0.9], np.float32), "Beta2Pow": np.array([0.999], np.float32),
             "MasterParam": master}
    for g in grads:
        res = call_kernel("adam", {**state, "Grad": g.astype(np.float16),
                                   "LearningRate": _lr(0.01)}, {"multi_precision": True})
        assert res["ParamOut"] is param and res["MasterParamOut"] is master
    assert param.dtype == np.float16 and master.dtype == np.float32
    ref, *_ = _adam_reference(_data(np.float32, seed=4)[0], [g.astype(np.float16) for g in grads],
                              0.01, float(np.float32(0.9)), float(np.float32(0.999)),
                              float(np.float32(1e-8)))
    np.testing.assert_allclose(master, ref, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(param, master.astype(np.float16))


# -- lamb ------------------------------------------------------------------------------

def _lamb_reference(param, grads, lr, b1, b2, eps, wd, always_adapt=False):
    p = param.astype(np.float64)
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t, g in enumerate(grads, start=1):
        g = g.astype(np.float64)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        r = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + wd * p
        trust = 1.0
        if wd > 0 or always_adapt:
            pn, rn = np.linalg.norm(p), np.linalg.norm(r)
            trust = pn / rn if pn > 0 and rn > 0 else 1.0
        p = p - lr * trust * r
    return p, m, v


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("wd, always_adapt", [(0.01, False), (0.0, False), (0.0, True)])
def test_lamb_steps(dtype, wd, always_adapt):
    b1, b2, eps, lr = 0.9, 0.999, 1e-6, 0.02
    if dtype == np.float32:
        b1, b2, eps, wd = (float(np.float32(v)) for v in (b1, b2, eps, wd))
    param, grads = _data(dtype, seed=5)
    state = _adam_state(param, b1, b2)
    attrs = {"weight_decay": wd, "beta1": b1, "beta2": b2, "epsilon": eps, "always_adapt": always_adapt}
    for g in grads:
        res = call_kernel("lamb", {**state, "Grad": g, "LearningRate": _lr(lr, dtype)}, attrs)
        assert res["ParamOut"] is state["Param"] and res["Beta1PowOut"] is state["Beta1Pow"]
    p, m, v = _lamb_reference(_data(dtype, seed=5)[0], grads, lr, b1, b2, eps, wd, always_adapt)
    tol = _tol(dtype)
    np.testing.assert_allclose(state["Param"], p, **tol)
    np.testing.assert_allclose(state["Moment1"], m, **tol)
    np.testing.assert_allclose(state["Moment2"], v, **tol)
    np.testing.assert_allclose(state["Beta1Pow"], [b1 ** (STEPS + 1)], **tol)


def test_lamb_zero_param_uses_trust_one():
    param = np.zeros(4)
    state = _adam_state(param, 0.9, 0.999)
    g = np.array([1.0, -1.0, 2.0, 0.5])
    call_kernel("lamb", {**state, "Grad": g, "LearningRate": _lr(0.1, np.float64)},
                {"weight_decay": 0.01, "epsilon": 1e-6})
    # ||p|| = 0 -> trust 1: p = -lr * m_hat / (sqrt(v_hat) + eps) = -lr * sign(g) (approx)
    np.testing.assert_allclose(param, -0.1 * g / (np.abs(g) + 1e-6), rtol=1e-9)


# -- rmsprop / adagrad -----------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("centered", [False, True])
@pytest.mark.parametrize("mom", [0.0, 0.9])
def test_rmsprop_steps(dtype, centered, mom):
    rho, eps, lr = 0.9, 1e-6, 0.01
    if dtype == np.float32:
        rho, eps, mom = (float(np.float32(v)) for v in (rho, eps, mom))
    param, grads = _data(dtype, seed=6)
    ms, moment, mg = np.zeros_like(param), np.zeros_like(param), np.zeros_like(param)
    p = param.astype(np.float64)
    r_ms, r_mom, r_mg = np.zeros_like(p), np.zeros_like(p), np.zeros_like(p)
    attrs = {"epsilon": eps, "decay": rho, "momentum": mom, "centered": centered}
    for g in grads:
        inputs = {"Param": param, "MeanSquare": ms, "Grad": g, "Moment": moment,
                  "LearningRate": _lr(lr, dtype)}
        if centered:
            inputs["MeanGrad"] = mg
        res = call_kernel("rmsprop", inputs, attrs)
        assert res["ParamOut"] is param and res["MomentOut"] is moment and res["MeanSquareOut"] is ms
        g = g.astype(np.float64)
        r_ms = rho * r_ms + (1 - rho) * g ** 2
        if centered:
            r_mg = rho * r_mg + (1 - rho) * g
            r_mom = mom * r_mom + lr * g / np.sqrt(r_ms - r_mg ** 2 + eps)
        else:
            r_mom = mom * r_mom + lr * g / np.sqrt(r_ms + eps)
        p = p - r_mom
    tol = _tol(dtype)
    np.testing.assert_allclose(param, p, **tol)
    np.testing.assert_allclose(ms, r_ms, **tol)
    np.testing.assert_allclose(moment, r_mom, **tol)
    if centered:
        np.testing.assert_allclose(mg, r_mg, **tol)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_adagrad_steps(dtype):
    eps, lr = 1e-6, 0.1
    param, grads = _data(dtype, seed=7)
    moment = np.full_like(param, 0.1)
    p, acc = param.astype(np.float64), np.full(param.shape, 0.1)
    for g in grads:
        res = call_kernel("adagrad", {"Param": param, "Grad": g, "Moment": moment,
                                      "LearningRate": _lr(lr, dtype)}, {"epsilon": eps})
        assert res["ParamOut"] is param and res["MomentOut"] is moment
        g = g.astype(np.float64)
        acc = acc + g * g
        p = p - lr * g / (np.sqrt(acc) + eps)
    np.testing.assert_allclose(moment, acc, **_tol(dtype))
    np.testing.assert_allclose(param, p, **_tol(dtype))


# -- the same kernels on cupy (skipped without cupy and a CUDA device) --------------------

def _optimizer_cases():
    def adam_like(p):
        return {"Moment1": np.zeros_like(p), "Moment2": np.zeros_like(p),
                "Beta1Pow": np.array([0.9], np.float32), "Beta2Pow": np.array([0.999], np.float32)}
    p = np.random.default_rng(0).standard_normal((4, 5)).astype(np.float32)
    lr = _lr(0.05)
    return [
        ("sgd", {"LearningRate": lr}, {}),
        ("momentum", {"Velocity": np.zeros_like(p), "LearningRate": lr},
         {"mu": 0.9, "use_nesterov": True, "regularization_method": "l2_decay", "regularization_coeff": 0.1}),
        ("adam", {**adam_like(p), "LearningRate": lr}, {}),
        ("adamw", {**adam_like(p), "LearningRate": lr}, {"with_decay": True, "coeff": 0.1, "lr_ratio": 0.5}),
        ("lamb", {**adam_like(p), "LearningRate": lr}, {"weight_decay": 0.01}),
        ("rmsprop", {"MeanSquare": np.zeros_like(p), "Moment": np.zeros_like(p), "MeanGrad": np.zeros_like(p),
                     "LearningRate": lr}, {"centered": True, "momentum": 0.5}),
        ("adagrad", {"Moment": np.zeros_like(p), "LearningRate": lr}, {}),
    ], p


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(7))
def test_optimizers_on_cupy_match_numpy(case):
    from keel.kernels.array_module import cupy_available
    if not cupy_available():
        pytest.skip("needs cupy and a CUDA device")
    import cupy
    cases, p0 = _optimizer_cases()
    op, state, attrs = cases[case]
    grads = [np.random.default_rng(s).standard_normal(p0.shape).astype(np.float32) for s in range(3)]
    cpu = {"Param": p0.copy(), **{k: v.copy() for k, v in state.items()}}
    gpu = {k: cupy.asarray(v) for k, v in cpu.items()}
    for g in grads:
        want = call_kernel(op, {**cpu, "Grad": g}, attrs)
        got = call_kernel(op, {**gpu, "Grad": cupy.asarray(g)}, attrs, xp=cupy)
        assert got["ParamOut"] is gpu["Param"]
    assert set(got) == set(want)
    for slot in want:
        np.testing.assert_allclose(cupy.asnumpy(got[slot]), want[slot], rtol=1e-5, atol=1e-6)
