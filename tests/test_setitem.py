"""`x[index] = value` (set_value) on eager Tensors and program Variables, against numpy's
item assignment; gradients through the write by finite differences; errors that name the
op and the user's line."""
import inspect

import numpy as np
import pytest

import keel as paddle
import keel.program as pg
from keel.executor import Executor, Scope
from keel.executor.eager import EagerError
from keel.program.errors import OpError, ShapeError

# (index, value) pairs: ints, negative indices, slices with steps, Ellipsis, None, broadcasts
ASSIGNMENTS = [
    (1, 0.0),
    (-1, 7.5),
    ((slice(None), 2), np.arange(3, dtype="float32")),
    ((slice(0, 3, 2), slice(None, None, -2)), 9.0),
    ((slice(None, None, -1), slice(1, None, 2)), np.array([[1.0, 2.0]], "float32")),
    ((Ellipsis, -1), np.array([4.0, 5.0, 6.0], "float32")),
    ((None, 1, slice(1, 3)), np.array([[3.0, 4.0]], "float32")),
    ((slice(-2, None), slice(None, -1)), np.float32(2.0)),
    ((slice(3, None, -1), 0), np.array([1.0, 2.0, 3.0], "float32")),
    (Ellipsis, 1.0),
]


def _expected(item, value):
    x = np.arange(12, dtype="float32").reshape(3, 4)
    ref = x.copy()
    ref[item] = value
    return x, ref


@pytest.mark.parametrize("item,value", ASSIGNMENTS, ids=repr)
def test_eager_assignment_equals_numpy(item, value):
    x, ref = _expected(item, value)
    t = paddle.to_tensor(x)
    t[item] = value if np.ndim(value) == 0 else paddle.to_tensor(value)
    np.testing.assert_array_equal(t.numpy(), ref)


@pytest.mark.parametrize("item,value", ASSIGNMENTS, ids=repr)
def test_static_assignment_equals_numpy(item, value):
    x, ref = _expected(item, value)
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        v = pg.data("x", [3, 4], "float32")
        before = v
        v[item] = value
        assert v is before and v.name != "x"   # the Python object names the written variable
        doubled = v * 2
    out, doubled_out = Executor().run(main, feed={"x": x}, fetch_list=[v, doubled], scope=Scope())
    np.testing.assert_array_equal(out, ref)
    np.testing.assert_array_equal(doubled_out, ref * 2)
    assert [op.type for op in main.global_block().ops].count("set_value") == 1


def test_a_value_of_another_dtype_is_cast_and_a_list_value_works():
    t = paddle.to_tensor(np.zeros((2, 3), "float32"))
    t[0] = paddle.to_tensor([1, 2, 3])      # int64 -> float32
    t[1, 1:] = [7, 8]
    np.testing.assert_array_equal(t.numpy(), [[1, 2, 3], [0, 7, 8]])
    i = paddle.to_tensor(np.zeros(4, "int64"))
    i[1::2] = 5
    np.testing.assert_array_equal(i.numpy(), [0, 5, 0, 5])


def test_a_one_element_int_tensor_indexes_like_an_int():
    t = paddle.to_tensor(np.zeros((3, 2), "float32"))
    t[paddle.to_tensor(1)] = 4.0                      # eager: its value
    np.testing.assert_array_equal(t.numpy(), [[0, 0], [4, 4], [0, 0]])
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        v = pg.data("x", [3, 2], "float32")
        i = pg.data("i", [1], "int32")
        v[i, 1:] = 7.0                                # static: the bounds become StartsTensorList, ...
    op = next(op for op in main.global_block().ops if op.type == "set_value")
    assert len(op.input("StartsTensorList")) == 2 and op.attr("decrease_axes") == [0]
    for row in (0, 2):
        (out,) = Executor().run(main, feed={"x": np.zeros((3, 2), "float32"), "i": np.array([row], "int32")},
                                fetch_list=[v], scope=Scope())
        want = np.zeros((3, 2), "float32")
        want[row, 1:] = 7.0
        np.testing.assert_array_equal(out, want)


def _finite_difference(f, x, h=1e-6):
    grad = np.zeros_like(x)
    for k in range(x.size):
        step = np.zeros_like(x)
        step.flat[k] = h
        grad.flat[k] = (f(x + step) - f(x - step)) / (2 * h)
    return grad


def test_eager_gradients_through_the_write_match_finite_differences():
    rng = np.random.default_rng(0)
    x0, v0 = rng.normal(size=(3, 4)), rng.normal(size=(4,))
    w = rng.normal(size=(3, 4))

    def loss(x, v):
        y = np.sin(x)
        y[::2] = v * 3
        return float((y * y * w).sum())

    x = paddle.to_tensor(x0, stop_gradient=False)
    v = paddle.to_tensor(v0, stop_gradient=False)
    y = paddle.sin(x)
    y[::2] = v * 3
    (y * y * paddle.to_tensor(w)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), _finite_difference(lambda a: loss(a, v0), x0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(v.grad.numpy(), _finite_difference(lambda b: loss(x0, b), v0), rtol=1e-6, atol=1e-8)


def test_static_gradients_through_the_write_match_finite_differences():
    rng = np.random.default_rng(1)
    x0, v0 = rng.normal(size=(3, 4)), rng.normal(size=(3, 1))
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [3, 4], "float64")
        v = pg.data("v", [3, 1], "float64")
        x.stop_gradient = v.stop_gradient = False
        y = pg.tanh(x)
        y[:, 1:3] = v
        y[-1] = 0.25
        loss = pg.sum(y * y)
        gx, gv = pg.gradients([loss], [x, v])

    def f(a, b):
        y = np.tanh(a)
        y[:, 1:3] = b
        y[-1] = 0.25
        return float((y * y).sum())

    got_x, got_v = Executor().run(main, feed={"x": x0, "v": v0}, fetch_list=[gx, gv], scope=Scope())
    np.testing.assert_allclose(got_x, _finite_difference(lambda a: f(a, v0), x0), rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(got_v, _finite_difference(lambda b: f(x0, b), v0), rtol=1e-6, atol=1e-8)


def test_the_write_bumps_the_version_so_an_earlier_reader_is_refused_at_backward():
    x = paddle.to_tensor(np.ones(3, "float32"), stop_gradient=False)
    y = x * 1.0
    z = paddle.exp(y)       # exp's gradient reads y's value... of before the write
    y[0] = 5.0
    with pytest.raises(EagerError, match="changed in place"):
        (z.sum() + y.sum()).backward()


def test_a_leaf_that_needs_a_gradient_is_refused_unless_under_no_grad():
    x = paddle.to_tensor(np.zeros(3, "float32"), stop_gradient=False)
    with pytest.raises(RuntimeError, match="leaf tensor"):
        x[0] = 1.0
    with paddle.no_grad():
        x[0] = 1.0
    np.testing.assert_array_equal(x.numpy(), [1, 0, 0])


def test_bad_indices_and_shapes_name_the_op_and_the_users_line():
    t = paddle.to_tensor(np.zeros((2, 3), "float32"))
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(IndexError) as e:
        t[2] = 1.0
    assert isinstance(e.value, OpError) and str(e.value).startswith("set_value: ")
    assert f"{__file__}:{line}" in str(e.value)
    with pytest.raises(IndexError, match="too many indices"):
        t[0, 0, 0] = 1.0
    with pytest.raises(TypeError, match="scatter"):
        t[paddle.to_tensor([0, 1])] = 1.0
    with pytest.raises(TypeError, match="scatter"):
        t[[0, 1]] = 1.0
    with pytest.raises(ValueError, match="step"):
        t[::0] = 1.0
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(EagerError) as e:
        t[0] = paddle.to_tensor(np.ones(2, "float32"))
    assert "set_value" in str(e.value) and f"{__file__}:{line}" in str(e.value) and "broadcast" in str(e.value)

    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        v = pg.data("x", [2, 3], "float32")
        line = inspect.currentframe().f_lineno + 2
        with pytest.raises(ShapeError) as e:
            v[:, 1:] = np.ones((2, 3), "float32")
    assert str(e.value).startswith("set_value: ") and f"{__file__}:{line}" in str(e.value)
    assert "[2, 3]" in str(e.value) and "[2, 2]" in str(e.value)


@pytest.mark.paddle
@pytest.mark.parametrize("item,value", ASSIGNMENTS + [((slice(3, -1, -1), 1), 4.0), ((slice(-1, -5, -2),), 3.0)],
                         ids=repr)
def test_paddle_assigns_the_same_region(item, value):
    paddle_ref = pytest.importorskip("paddle")
    x = np.arange(12, dtype="float32").reshape(3, 4)
    ref = paddle_ref.to_tensor(x)
    ref[item] = float(value) if np.ndim(value) == 0 else paddle_ref.to_tensor(value)
    t = paddle.to_tensor(x)
    t[item] = value if np.ndim(value) == 0 else paddle.to_tensor(value)
    np.testing.assert_array_equal(t.numpy(), ref.numpy())
