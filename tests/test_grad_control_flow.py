"""Gradients through control flow, against central finite differences of the loss run by
the same executor (float64): a cond whose branch depends on the data, and x**n by repeated
multiplication in a while loop (gradient n*x**(n-1)), and an RNN written as a while loop
over a tensor array. The one-op cases of
gradcheck cannot hold a sub-block, so these programs are written out here; the ops they
check are listed in CHECKED_BY_HAND (read by tests/test_grad_coverage.py)."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope

CASES = []
CHECKED_BY_HAND = ("conditional_block", "select_input", "while", "write_to_array", "tensor_array_to_tensor",
                   "read_from_array", "select_output")
nn = pg.static.nn


def _check(main, loss, feed, wrt, grads, delta=1e-6, rtol=1e-6, atol=1e-8):
    exe = Executor()
    got = exe.run(main, feed=feed, fetch_list=grads, scope=Scope())
    for name, analytic in zip(wrt, got):
        numeric = np.zeros_like(feed[name])
        for idx in np.ndindex(feed[name].shape):
            values = []
            for sign in (1, -1):
                moved = {k: v.copy() for k, v in feed.items()}
                moved[name][idx] += sign * delta
                values.append(exe.run(main, feed=moved, fetch_list=[loss], scope=Scope())[0])
            numeric[idx] = (values[0] - values[1]) / (2 * delta)
        np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=atol, err_msg=name)


def cond_program():
    """loss = sum(y**2), y = tanh(x) * w if sum(x) > 0 else x * x - w; its gradients by x, w."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [2, 3], "float64")
        w = pg.data("w", [2, 3], "float64")
        x.stop_gradient = w.stop_gradient = False
        y = nn.cond(pg.sum(x) > 0.0, lambda: pg.tanh(x) * w, lambda: x * x - w)
        loss = pg.sum(y * y)
        grads = pg.gradients(loss, [x, w])
    return main, loss, grads


@pytest.mark.parametrize("shift", [1.5, -1.5])
def test_cond_with_a_data_dependent_branch(shift):
    main, loss, grads = cond_program()
    types = [op.type for op in main.global_block().ops]
    assert types.count("conditional_block_grad") == 2 and "select_output" in types
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((2, 3)) + shift, "w": rng.standard_normal((2, 3))}
    _check(main, loss, feed, ["x", "w"], grads)


def test_nested_cond_gradient():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [3], "float64")
        x.stop_gradient = False
        y = nn.cond(pg.sum(x) > 0.0,
                    lambda: nn.cond(pg.max(x) > 1.0, lambda: pg.exp(x), lambda: x * 3.0),
                    lambda: pg.sin(x))
        loss = pg.sum(y * x)
        grads = pg.gradients(loss, [x])
    for xv in ([0.2, 0.3, 1.5], [0.2, 0.3, 0.4], [-1.0, 0.2, -0.3]):
        _check(main, loss, {"x": np.array(xv)}, ["x"], grads)


def power_program(loss_of=lambda y: pg.sum(y * y)):
    """y = w * x**n by n multiplications in a while loop; loss_of(y) and its gradients by x, w."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [2, 3], "float64")
        w = pg.data("w", [2, 3], "float64")
        n = pg.data("n", [1], "int64")
        x.stop_gradient = w.stop_gradient = False
        i = pg.fill_constant([1], "int64", 0)
        y = w * 1.0  # the loop variable's first value depends on w: its gradient leaves the loop
        i, y = nn.while_loop(lambda i, y: i < n, lambda i, y: [i + 1, y * x], [i, y])
        loss = loss_of(y)
        grads = pg.gradients(loss, [x, w])
    return main, loss, grads


@pytest.mark.parametrize("power", [0, 1, 2, 5])
def test_while_loop_power(power):
    """y = w * x**n: d/dx sum(y**2) = 2 y * n w x**(n-1), d/dw = 2 y x**n."""
    main, loss, grads = power_program()
    rng = np.random.default_rng(power)
    feed = {"x": rng.uniform(0.5, 1.5, (2, 3)), "w": rng.standard_normal((2, 3)), "n": np.array([power])}
    gx, gw = Executor().run(main, feed=feed, fetch_list=grads, scope=Scope())
    x, w = feed["x"], feed["w"]
    y = w * x ** power
    np.testing.assert_allclose(gx, 2 * y * power * w * x ** (power - 1), rtol=1e-10)
    np.testing.assert_allclose(gw, 2 * y * x ** power, rtol=1e-10)
    _check(main, loss, feed, ["x", "w"], grads)


def rnn_program(steps=4):
    """h_t = tanh(x_t wx + h_{t-1} wh) over a while loop, each h_t written to a tensor array
    that is stacked after the loop; loss = sum(out**2) + sum(h_T)."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [2, steps, 3], "float64")
        wx = pg.data("wx", [3, 5], "float64")
        wh = pg.data("wh", [5, 5], "float64")
        h0 = pg.data("h0", [2, 5], "float64")
        for v in (x, wx, wh, h0):
            v.stop_gradient = False
        states = pg.create_array("float64")
        t = pg.fill_constant([1], "int64", 0)

        def body(t, h):
            x_t = pg.squeeze(pg.gather(x, t, axis=1), [1])
            h = pg.tanh(pg.matmul(x_t, wx) + pg.matmul(h, wh))
            pg.array_write(h, t, states)
            return [t + 1, h]
        t, h = nn.while_loop(lambda t, h: t < steps, body, [t, h0 * 1.0])
        block = main.current_block()
        out = block.create_var("rnn_out", (), "float64")
        index = block.create_var("rnn_index", (), "int32")
        block.append_op("tensor_array_to_tensor", {"X": states}, {"Out": out, "OutIndex": index},
                        {"axis": 1, "use_stack": True})
        loss = pg.sum(out * out) + pg.sum(h)
        grads = pg.gradients(loss, [x, wx, wh, h0])
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((2, steps, 3)), "wx": rng.standard_normal((3, 5)) * 0.5,
            "wh": rng.standard_normal((5, 5)) * 0.5, "h0": rng.standard_normal((2, 5))}
    return main, loss, grads, feed


def test_rnn_over_a_tensor_array():
    main, loss, grads, feed = rnn_program()
    types = [op.type for op in main.global_block().ops]
    assert "while_grad" in types and "tensor_array_to_tensor_grad" in types
    assert "read_from_array" in [op.type for b in main.blocks[1:] for op in b.ops]  # write_to_array's gradient
    _check(main, loss, feed, ["x", "wx", "wh", "h0"], grads)


def test_reads_from_a_tensor_array():
    """read_from_array's gradient, a write_to_array into the array's gradient: the entry
    read twice (the two writes' arrays add up entrywise in a `sum`)."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [2, 3], "float64")
        w = pg.data("w", [2, 3], "float64")
        x.stop_gradient = w.stop_gradient = False
        array = pg.create_array("float64", [pg.tanh(x) * w])
        y = pg.array_read(array, 0) * pg.array_read(array, 0) + pg.array_read(array, 0) * x
        loss = pg.sum(y * y)
        grads = pg.gradients(loss, [x, w])
    types = [op.type for op in main.global_block().ops]
    assert types.count("write_to_array") == 1 + 3 and "sum" in types
    rng = np.random.default_rng(1)
    _check(main, loss, {"x": rng.standard_normal((2, 3)), "w": rng.standard_normal((2, 3))}, ["x", "w"], grads)


def array_loop_program(steps=3):
    """The usual RNN input pattern: x_t written to an array before the loop, read by the
    body at its step: h_t = tanh(h_{t-1} w + x_t), loss = sum(h_T**2)."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        xs = [pg.data(f"x{k}", [2, 3], "float64") for k in range(steps)]
        w = pg.data("w", [3, 3], "float64")
        h0 = pg.data("h0", [2, 3], "float64")
        for v in xs + [w, h0]:
            v.stop_gradient = False
        inputs = pg.create_array("float64", [x * 1.0 for x in xs])
        t = pg.fill_constant([1], "int64", 0)

        def body(t, h):
            return [t + 1, pg.tanh(pg.matmul(h, w) + pg.array_read(inputs, t))]
        t, h = nn.while_loop(lambda t, h: t < steps, body, [t, h0 * 1.0])
        loss = pg.sum(h * h)
        grads = pg.gradients(loss, xs + [w, h0])
    rng = np.random.default_rng(2)
    feed = {f"x{k}": rng.standard_normal((2, 3)) for k in range(steps)}
    feed["w"] = rng.standard_normal((3, 3)) * 0.5
    feed["h0"] = rng.standard_normal((2, 3))
    return main, loss, grads, feed


def test_a_loop_reading_its_inputs_from_a_tensor_array():
    """read_from_array's gradient inside while_grad's gradient block: each step's array
    gradient adds up entrywise across steps."""
    main, loss, grads, feed = array_loop_program()
    assert "write_to_array" in [op.type for b in main.blocks[1:] for op in b.ops]  # read_from_array's gradient
    _check(main, loss, feed, list(feed), grads)


@pytest.mark.parametrize("branch", [0, 1])
def test_select_output_routes_the_gradient_back(branch):
    """select_output sends x into the branch the mask picks; its gradient, a select_input,
    takes that branch's gradient back (here: the branch computes tanh(o) * w or o * o)."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [2, 3], "float64")
        w = pg.data("w", [2, 3], "float64")
        mask = pg.data("mask", [1], "int32")
        x.stop_gradient = w.stop_gradient = False
        block = main.current_block()
        routed = [block.create_var(f"routed{k}", (2, 3), "float64") for k in range(2)]
        block.append_op("select_output", {"X": [x], "Mask": [mask]}, {"Out": routed})
        y = nn.cond(pg.equal(mask, pg.fill_constant([1], "int32", 0)),
                    lambda: pg.tanh(routed[0]) * w, lambda: routed[1] * routed[1])
        loss = pg.sum(y * y)
        grads = pg.gradients(loss, [x, w])
    assert "select_input" in [op.type for op in main.global_block().ops[-12:]]
    rng = np.random.default_rng(3)
    feed = {"x": rng.standard_normal((2, 3)), "w": rng.standard_normal((2, 3)),
            "mask": np.array([branch], np.int32)}
    exe = Executor()
    if branch == 1:  # w does not reach the loss: its gradient is zeros
        assert not np.any(exe.run(main, feed=feed, fetch_list=[grads[1]], scope=Scope())[0])
    _check(main, loss, feed, ["x", "w"], grads)
