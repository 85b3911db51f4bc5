"""kernels/adam_chunked.py: the `adam` and `adamw` kernels over arrays of several chunks
(the small cases of tests/test_kernels_optimizer.py fit in one) against the textbook float64
Adam, and bitwise against the same formulas evaluated on whole arrays (`_whole_array_step`,
with the same operand order)."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import adam_chunked
from keel.kernels.optimizer import _scalar, _store, _work
from test_kernels_optimizer import _adam_reference, _adam_state, _lr

SHAPE = (3, adam_chunked.CHUNK // 2 + 17)  # 1.5 chunks and a ragged last one (with WHOLE_MAX 0)
STEPS = 3
B1, B2, EPS, LR = 0.9, 0.999, 1e-8, 0.01


def _data(dtype, shape=SHAPE, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape).astype(dtype),
            [rng.standard_normal(shape).astype(dtype) for _ in range(STEPS)])


def _several_chunks(monkeypatch):
    """Chunks for every size (a helper, not a fixture: the tests rerun on the cupy stand-in)."""
    monkeypatch.setattr(adam_chunked, "WHOLE_MAX", 0)


def _whole_array_step(state, grad, lr, *, beta1, beta2, epsilon, multi_precision=False, amsgrad=False,
                      coeff=None, lr_ratio=1.0):
    """One adam step (adamw's with `coeff`), each formula on the whole arrays, in place."""
    dt = state["Moment1"].dtype
    T = dt.type
    one, b1, b2, eps = T(1), T(beta1), T(beta2), T(epsilon)
    b1p, b2p = _scalar(state["Beta1Pow"], dt), _scalar(state["Beta2Pow"], dt)
    p = _work(state["Param"], state.get("MasterParam"), multi_precision, dt)
    g = grad.astype(dt, copy=False)
    lr = _scalar(lr, dt)
    if lr_ratio != 1.0:
        lr = lr * T(lr_ratio)
    if coeff is not None:
        p -= (lr * T(coeff)) * p
    m1, m2 = state["Moment1"], state["Moment2"]
    m1 *= b1
    m1 += (one - b1) * g
    m2 *= b2
    m2 += ((one - b2) * g) * g
    second = m2
    if amsgrad:
        np.maximum(state["Moment2Max"], m2, out=state["Moment2Max"])
        second = state["Moment2Max"]
    lr_t = lr * (np.sqrt(one - b2p) / (one - b1p))
    eps_t = eps * np.sqrt(one - b2p)
    p -= lr_t * (m1 / (np.sqrt(second) + eps_t))
    _store(state["Param"], p)
    state["Beta1Pow"] *= b1.astype(state["Beta1Pow"].dtype)
    state["Beta2Pow"] *= b2.astype(state["Beta2Pow"].dtype)


def _whole_array(state, grad, attrs):
    """The same step by _whole_array_step, on copies of the state."""
    s = {k: v.copy() for k, v in state.items()}
    decay = attrs.get("coeff", 0.01) if attrs.get("with_decay") else None
    _whole_array_step(s, grad, _lr(LR, state["Moment1"].dtype), beta1=B1, beta2=B2, epsilon=EPS,
                      multi_precision=attrs.get("multi_precision", False), amsgrad=attrs.get("amsgrad", False),
                      coeff=decay, lr_ratio=attrs.get("lr_ratio", 1.0))
    return s


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("amsgrad", [False, True])
def test_several_chunks_match_the_whole_array_bitwise_and_textbook_adam(dtype, amsgrad, monkeypatch):
    _several_chunks(monkeypatch)
    param, grads = _data(dtype)
    state = _adam_state(param, B1, B2, amsgrad)
    attrs = {"beta1": B1, "beta2": B2, "epsilon": EPS, "amsgrad": amsgrad}
    for g in grads:
        want = _whole_array(state, g, attrs)
        res = call_kernel("adam", {**state, "Grad": g, "LearningRate": _lr(LR, dtype)}, attrs)
        assert res["ParamOut"] is state["Param"] and res["Moment1Out"] is state["Moment1"]  # in place
        for slot in want:
            np.testing.assert_array_equal(state[slot], want[slot], err_msg=slot)
    b1, b2, eps = (float(dtype(v)) for v in (B1, B2, EPS))  # attributes travel as float32
    p, m, v, *_ = _adam_reference(_data(dtype)[0], grads, LR, b1, b2, eps, amsgrad=amsgrad)
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(state["Param"], p, **tol)
    np.testing.assert_allclose(state["Moment1"], m, **tol)
    np.testing.assert_allclose(state["Moment2"], v, **tol)


def test_a_strided_parameter_is_updated_in_place_through_its_view(monkeypatch):
    _several_chunks(monkeypatch)
    base, grads = _data(np.float64, shape=(SHAPE[1], SHAPE[0]))
    param = base.T  # not C-contiguous: one chunk, the arrays as they are
    state = _adam_state(param, B1, B2)
    state["Param"] = param
    attrs = {"beta1": B1, "beta2": B2, "epsilon": EPS}
    for g in grads:
        want = _whole_array(state, np.ascontiguousarray(g.T), attrs)
        call_kernel("adam", {**state, "Grad": np.ascontiguousarray(g.T), "LearningRate": _lr(LR, np.float64)},
                    attrs)
        np.testing.assert_array_equal(base.T, want["Param"])


def test_master_weights_and_low_precision_gradients_across_chunks(monkeypatch):
    _several_chunks(monkeypatch)
    master, grads = _data(np.float32, seed=4)
    param = master.astype(np.float16)
    state = {"Param": param, "Moment1": np.zeros_like(master), "Moment2": np.zeros_like(master),
             "Beta1Pow": np.array([B1], np.float32), "Beta2Pow": np.array([B2], np.float32), "MasterParam": master}
    attrs = {"beta1": B1, "beta2": B2, "epsilon": EPS, "multi_precision": True}
    for g in grads:
        want = _whole_array(state, g.astype(np.float16), attrs)
        call_kernel("adam", {**state, "Grad": g.astype(np.float16), "LearningRate": _lr(LR)}, attrs)
        for slot in ("Param", "MasterParam", "Moment1", "Moment2"):
            np.testing.assert_array_equal(state[slot], want[slot], err_msg=slot)
    assert param.dtype == np.float16
    np.testing.assert_array_equal(param, master.astype(np.float16))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("with_decay,lr_ratio", [(True, 1.0), (True, 0.5), (False, 1.0)])
def test_adamw_over_several_chunks_matches_the_whole_array_bitwise_and_textbook_adamw(dtype, with_decay, lr_ratio,
                                                                                      monkeypatch):
    _several_chunks(monkeypatch)
    param, grads = _data(dtype, seed=5)
    state = _adam_state(param, B1, B2)
    coeff = 0.25
    attrs = {"beta1": B1, "beta2": B2, "epsilon": EPS, "coeff": coeff, "with_decay": with_decay,
             "lr_ratio": lr_ratio}
    for g in grads:
        want = _whole_array(state, g, attrs)
        res = call_kernel("adamw", {**state, "Grad": g, "LearningRate": _lr(LR, dtype)}, attrs)
        assert res["ParamOut"] is state["Param"]  # in place
        for slot in want:
            np.testing.assert_array_equal(state[slot], want[slot], err_msg=slot)
    b1, b2, eps, c, r = (float(dtype(v)) for v in (B1, B2, EPS, coeff, lr_ratio))
    p, m, v, *_ = _adam_reference(_data(dtype, seed=5)[0], grads, LR, b1, b2, eps,
                                  coeff=c if with_decay else 0.0, lr_ratio=r)
    tol = dict(rtol=1e-12, atol=1e-14) if dtype == np.float64 else dict(rtol=2e-5, atol=2e-6)
    np.testing.assert_allclose(state["Param"], p, **tol)
    np.testing.assert_allclose(state["Moment1"], m, **tol)
    np.testing.assert_allclose(state["Moment2"], v, **tol)


def test_parameters_up_to_whole_max_are_one_chunk_larger_ones_chunks_of_chunk():
    small, large = np.zeros(adam_chunked.WHOLE_MAX, np.float32), np.zeros(adam_chunked.WHOLE_MAX + 1, np.float32)
    assert adam_chunked._chunks(np, small.size, [small]) is None
    chunks = adam_chunked._chunks(np, large.size, [large])
    assert [c.start for c in chunks] == list(range(0, large.size, adam_chunked.CHUNK))
    assert all(c.stop - c.start == adam_chunked.CHUNK for c in chunks)
    assert adam_chunked._chunks(np, large.size, [large[::-1]]) is None  # strided: one chunk
