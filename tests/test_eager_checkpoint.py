"""Checkpoints in eager mode, as PaddlePaddle 3.x writes them: `paddle.save(model.state_dict())`
and `paddle.save(opt.state_dict())`, then `paddle.load` (Tensors) and `set_state_dict` on a
fresh model and optimizer. The optimizer's state holds its accumulators by their variable
names (and float32 master weights, and the LR schedule), so a resumed run takes exactly the
steps the uninterrupted run takes."""
import numpy as np
import pytest

import keel as paddle
from keel import nn

OPTIMIZERS = {
    "Adam": lambda params: paddle.optimizer.Adam(learning_rate=paddle.optimizer.lr.StepDecay(0.01, 2, 0.5),
                                                 parameters=params),
    "Momentum": lambda params: paddle.optimizer.Momentum(learning_rate=0.05, momentum=0.9, parameters=params),
    "AdamW": lambda params: paddle.optimizer.AdamW(learning_rate=0.01, parameters=params, weight_decay=0.1),
}


def _batches(n):
    rng = np.random.default_rng(7)
    return [(rng.standard_normal((8, 6)).astype("float32"), rng.integers(0, 3, (8, 1))) for _ in range(n)]


def _model():
    paddle.seed(11)
    return nn.Sequential(nn.Linear(6, 16), nn.ReLU(), nn.Linear(16, 3))


def _fresh_names():
    """Names as a fresh process gives them (layers and accumulators are named in order)."""
    return paddle.utils.unique_name.guard()


def _train(model, opt, batches):
    losses = []
    for x, y in batches:
        loss = nn.functional.cross_entropy(model(paddle.to_tensor(x)), paddle.to_tensor(y))
        loss.backward()
        opt.step()
        opt.clear_grad()
        if isinstance(opt._learning_rate, paddle.optimizer.lr.LRScheduler):
            opt._learning_rate.step()
        losses.append(float(loss))
    return losses


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_a_resumed_run_takes_the_uninterrupted_runs_steps(name, tmp_path):
    batches = _batches(6)
    with _fresh_names():
        model = _model()
        opt = OPTIMIZERS[name](model.parameters())
        whole = _train(model, opt, batches)

    with _fresh_names():
        first = _model()
        first_opt = OPTIMIZERS[name](first.parameters())
        head = _train(first, first_opt, batches[:3])
        state = first_opt.state_dict()
    assert any(isinstance(v, paddle.Tensor) for v in state.values()), sorted(state)
    paddle.save(first.state_dict(), tmp_path / "model.pdparams")
    paddle.save(state, tmp_path / "model.pdopt")

    with _fresh_names():
        resumed = _model()
        resumed_opt = OPTIMIZERS[name](resumed.parameters())
        resumed.set_state_dict(paddle.load(tmp_path / "model.pdparams"))
        resumed_opt.set_state_dict(paddle.load(tmp_path / "model.pdopt"))  # taken when the step creates them
        tail = _train(resumed, resumed_opt, batches[3:])
    np.testing.assert_array_equal(head + tail, whole)
    for mine, theirs in zip(resumed.parameters(), model.parameters()):
        np.testing.assert_array_equal(mine.numpy(), theirs.numpy())


def test_the_state_names_are_paddles_and_set_state_dict_after_a_step_replaces_it():
    model = _model()
    opt = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
    _train(model, opt, _batches(1))
    state = opt.state_dict()
    weight = model[0].weight.name
    assert {f"{weight}_moment1_0", f"{weight}_moment2_0", f"{weight}_beta1_pow_acc_0",
            f"{weight}_beta2_pow_acc_0"} <= set(state)
    zeros = {name: np.zeros(value.shape, "float32") for name, value in state.items()}
    opt.set_state_dict(zeros)
    assert all(not value.numpy().any() for value in opt.state_dict().values())
    with pytest.raises(ValueError, match=f"'{weight}_moment1_0' has shape \\[2\\]"):
        opt.set_state_dict({f"{weight}_moment1_0": np.zeros(2, "float32")})


def test_a_state_dict_of_other_names_is_an_error_not_ignored():
    """PaddlePaddle asserts when an accumulator it creates is not in the given state dict."""
    with _fresh_names():
        model = _model()
        opt = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
        _train(model, opt, _batches(1))
    state = opt.state_dict()
    with _fresh_names():
        nn.Linear(1, 1)                                   # shifts the names: linear_1, linear_2
        other = _model()
        other_opt = paddle.optimizer.Adam(learning_rate=0.01, parameters=other.parameters())
        other_opt.set_state_dict(state)
        with pytest.raises(ValueError, match=r"the state dict has no linear_2\.b_0_moment1_0, .*\(it holds "
                                             r"linear_0\.b_0_beta1_pow_acc_0.*unique_name\.guard"):
            _train(other, other_opt, _batches(1))


def test_load_gives_tensors_eagerly_and_arrays_when_asked_or_static(tmp_path):
    paddle.save({"w": np.ones((2, 2), "float32"), "step": 3}, tmp_path / "s.pdparams")
    eager = paddle.load(tmp_path / "s.pdparams")
    assert isinstance(eager["w"], paddle.Tensor) and int(eager["step"]) == 3
    assert type(paddle.load(tmp_path / "s.pdparams", return_numpy=True)["w"]) is np.ndarray
    paddle.enable_static()
    try:
        assert type(paddle.load(tmp_path / "s.pdparams")["w"]) is np.ndarray
    finally:
        paddle.disable_static()
    with pytest.raises(ValueError, match="keep_name_table"):
        paddle.load(tmp_path / "s.pdparams", keep_name_table=True)


def test_amp_o2_master_weights_are_saved_and_resumed(tmp_path):
    """With float16 parameters (amp.decorate O2) the float32 master weights go under
    "master_weights" by parameter name, and a resumed run continues from them."""
    def run(batches, state=None):
        with _fresh_names():
            model = _model()
            opt = paddle.optimizer.Adam(learning_rate=0.01, parameters=model.parameters())
            model, opt = paddle.amp.decorate(model, opt, level="O2")
            if state is not None:
                model.set_state_dict(state[0])
                opt.set_state_dict(state[1])
            losses = []
            for x, y in batches:
                with paddle.amp.auto_cast(level="O2"):
                    logits = model(paddle.to_tensor(x, dtype="float16"))
                loss = nn.functional.cross_entropy(logits.astype("float32"), paddle.to_tensor(y))
                loss.backward()
                opt.step()
                opt.clear_grad()
                losses.append(float(loss))
            return losses, model, opt

    batches = _batches(4)
    whole, _, _ = run(batches)
    head, model, opt = run(batches[:2])
    state = opt.state_dict()
    masters = state["master_weights"]
    assert sorted(masters) == sorted(p.name for p in model.parameters())
    assert all(v.dtype == paddle.float32 for v in masters.values())
    paddle.save(model.state_dict(), tmp_path / "m.pdparams")
    paddle.save(state, tmp_path / "m.pdopt")
    tail, _, _ = run(batches[2:], (paddle.load(tmp_path / "m.pdparams"), paddle.load(tmp_path / "m.pdopt")))
    np.testing.assert_array_equal(head + tail, whole)
