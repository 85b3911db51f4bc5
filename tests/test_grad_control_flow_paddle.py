"""Gradients through Keel's control flow against PaddlePaddle's (optional: needs `paddle`,
skipped without it): the same functions in PaddlePaddle's eager mode, where a Python `if`
/ `while` on tensor values and autograd give the reference gradients.

    FLAGS_enable_pir_api=0 PYTHONPATH=.:tests $PADDLE_PYTHON -m pytest -q -m paddle tests/test_grad_control_flow_paddle.py
"""
import os

import numpy as np
import pytest

os.environ.setdefault("FLAGS_enable_pir_api", "0")
paddle = pytest.importorskip("paddle")

import keel.program as pg  # noqa: E402
from keel.executor import Executor, Scope  # noqa: E402

pytestmark = pytest.mark.paddle


def _paddle_grads(fn, *arrays):
    tensors = [paddle.to_tensor(a, stop_gradient=False) for a in arrays]
    loss = fn(*tensors)
    loss.backward()
    return [np.zeros_like(a) if t.grad is None else t.grad.numpy() for t, a in zip(tensors, arrays)]  # unused: zero


@pytest.mark.parametrize("shift", [1.5, -1.5])
def test_cond_gradients_match_paddle(shift):
    from test_grad_control_flow import cond_program
    main, loss, grads = cond_program()
    rng = np.random.default_rng(0)
    xv, wv = rng.standard_normal((2, 3)) + shift, rng.standard_normal((2, 3))
    ours = Executor().run(main, feed={"x": xv, "w": wv}, fetch_list=grads, scope=Scope())

    def reference(x, w):
        y = paddle.tanh(x) * w if float(x.sum()) > 0 else x * x - w
        return (y * y).sum()
    for got, want in zip(ours, _paddle_grads(reference, xv, wv)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("power", [0, 1, 4])
def test_while_loop_power_gradients_match_paddle(power):
    from test_grad_control_flow import power_program
    main, loss, grads = power_program(lambda y: pg.sum(pg.sin(y)))
    rng = np.random.default_rng(power)
    xv, wv = rng.uniform(0.5, 1.5, (2, 3)), rng.standard_normal((2, 3))
    ours = Executor().run(main, feed={"x": xv, "w": wv, "n": np.array([power])}, fetch_list=grads,
                          scope=Scope())

    def reference(x, w):
        y = w * 1.0
        k = 0
        while k < power:
            y = y * x
            k += 1
        return paddle.sin(y).sum()
    for got, want in zip(ours, _paddle_grads(reference, xv, wv)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_rnn_over_a_tensor_array_gradients_match_paddle():
    from test_grad_control_flow import rnn_program
    main, loss, grads, feed = rnn_program()
    ours = Executor().run(main, feed=feed, fetch_list=grads, scope=Scope())

    def reference(x, wx, wh, h0):
        h, states = h0 * 1.0, []
        for t in range(x.shape[1]):
            h = paddle.tanh(paddle.matmul(x[:, t], wx) + paddle.matmul(h, wh))
            states.append(h)
        out = paddle.stack(states, axis=1)
        return (out * out).sum() + h.sum()
    wants = _paddle_grads(reference, feed["x"], feed["wx"], feed["wh"], feed["h0"])
    for got, want in zip(ours, wants):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def test_a_loop_reading_a_tensor_array_matches_paddle():
    """read_from_array's gradient (a write_to_array into the array's gradient) in a loop, as
    PaddlePaddle's autograd differentiates indexing a Python list of tensors."""
    from test_grad_control_flow import array_loop_program
    main, loss, grads, feed = array_loop_program()
    ours = Executor().run(main, feed=feed, fetch_list=grads, scope=Scope())
    steps = len(feed) - 2

    def reference(*values):
        *xs, w, h = values
        for t in range(steps):
            h = paddle.tanh(paddle.matmul(h, w) + xs[t])
        return (h * h).sum()
    for got, want in zip(ours, _paddle_grads(reference, *feed.values())):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


def _keel_and_paddle_static(main, loss, grads, feed):
    """The loss and gradients of Keel's training program (its conditional_block_grad /
    while_grad blocks as Keel wrote them) run by Keel and by PaddlePaddle's executor."""
    ours = Executor().run(main, feed=feed, fetch_list=[loss] + grads)
    paddle.enable_static()
    try:
        prog = paddle.static.Program.parse_from_string(main.serialize_to_string())
        theirs = paddle.static.Executor(paddle.CPUPlace()).run(
            prog, feed=feed, fetch_list=[loss.name] + [g.name for g in grads])
    finally:
        paddle.disable_static()
    return ours, theirs


def _training_programs():
    from test_grad_control_flow import cond_program, power_program, rnn_program
    rng = np.random.default_rng(4)
    for shift in (1.5, -1.5):
        main, loss, grads = cond_program()
        yield f"cond{shift:+}", main, loss, grads, {"x": rng.standard_normal((2, 3)) + shift, "w": np.ones((2, 3))}
    main, loss, grads = power_program()
    yield "power", main, loss, grads, {"x": rng.standard_normal((2, 3)), "w": np.ones((2, 3)), "n": np.array([3])}
    main, loss, grads, feed = rnn_program()
    yield "rnn", main, loss, grads, feed


def test_keel_control_flow_training_programs_run_in_paddle():
    """Keel's gradient programs through a branch, a loop and a tensor array are PaddlePaddle's
    form: its executor runs them to the same loss and gradients."""
    for name, main, loss, grads, feed in _training_programs():
        ours, theirs = _keel_and_paddle_static(main, loss, grads, feed)
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(np.asarray(a), b, rtol=1e-12, atol=1e-12, err_msg=name)
