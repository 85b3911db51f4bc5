"""pg.create_parameter (paddle.static.create_parameter): a parameter for ops written by hand,
initialized by the startup program and trained like a layer's."""
import math

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope


def _build(**param_kwargs):
    """y = x @ w + b, loss = mean((y - t)^2), SGD(lr 0.1); w and b from create_parameter."""
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 7
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x = pg.data("x", [-1, 3])
        t = pg.data("t", [-1, 2])
        w = pg.create_parameter([3, 2], "float32", **param_kwargs)
        b = pg.create_parameter([2], "float32", is_bias=True)
        loss = pg.mean(pg.square(pg.matmul(x, w) + b - t))
        pg.optimizer.SGD(learning_rate=0.1).minimize(loss)
    return main, startup, w, b, loss


def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((4, 2)).astype(np.float32)


def test_names_block_and_startup_ops_follow_paddle():
    main, startup, w, b, _ = _build()
    assert isinstance(w, pg.Parameter) and isinstance(b, pg.Parameter)
    assert (w.name, b.name) == ("create_parameter_0.w_0", "create_parameter_1.b_0")
    block = main.global_block()
    assert block.vars[w.name] is w and w.block is block
    assert w.persistable and w.trainable and not w.stop_gradient
    assert list(w.shape) == [3, 2] and w.dtype_name == "float32"
    init_ops = {op.output("Out")[0]: op for op in startup.global_block().ops}
    # Xavier (uniform) for weights: limit sqrt(6 / (fan_in + fan_out)); Constant(0) for biases
    assert init_ops[w.name].type == "uniform_random"
    limit = math.sqrt(6.0 / (3 + 2))
    assert init_ops[w.name].attr("max") == pytest.approx(limit) and init_ops[w.name].attr("min") == pytest.approx(-limit)
    assert init_ops[b.name].type == "fill_constant" and init_ops[b.name].attr("value") == 0.0
    assert startup.global_block().vars[w.name].persistable


def test_startup_initializes_it_and_sgd_trains_it():
    main, startup, w, b, loss = _build()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    w0, b0 = np.array(scope.get(w.name)), np.array(scope.get(b.name))
    limit = math.sqrt(6.0 / 5)
    assert w0.shape == (3, 2) and np.all(np.abs(w0) <= limit) and np.abs(w0).max() > 0.05
    np.testing.assert_array_equal(b0, np.zeros(2, np.float32))

    x, t = _data()
    loss_v, gw, gb = exe.run(main, feed={"x": x, "t": t}, fetch_list=[loss, w.name + "@GRAD", b.name + "@GRAD"],
                             scope=scope)
    r = x.astype(np.float64) @ w0 + b0 - t                  # mean over 8 elements of r^2
    np.testing.assert_allclose(loss_v, (r ** 2).mean(), rtol=1e-5)
    np.testing.assert_allclose(gw, x.T @ (2 * r / r.size), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(gb, (2 * r / r.size).sum(0), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(scope.get(w.name), w0 - 0.1 * gw, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(scope.get(b.name), b0 - 0.1 * gb, rtol=1e-5, atol=1e-7)


def test_names_are_unique_and_name_is_honoured():
    main, startup = pg.Program(), pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        a = pg.create_parameter([2], "float32")
        b = pg.create_parameter([2], "float32")
        c = pg.create_parameter([2], "float32", is_bias=True)
        named = pg.create_parameter([2, 2], "float64", name="my_w")
        again = pg.create_parameter([2, 2], "float64", name="my_w")   # shared, as a layer's named param
    assert [a.name, b.name, c.name] == ["create_parameter_0.w_0", "create_parameter_1.w_0",
                                        "create_parameter_2.b_0"]
    assert named.name == "my_w" and again is named and named.dtype_name == "float64"
    # outside a guard, names never collide with earlier ones (one counter per process)
    outside = set()
    for _ in range(2):
        with pg.program_guard(pg.Program(), pg.Program()):
            outside.add(pg.create_parameter([2], "float32").name)
    assert len(outside) == 2
    with pytest.raises(ValueError, match="shared with shape"):
        with pg.program_guard(main, startup):
            pg.create_parameter([3], "float64", name="my_w")


def test_attr_name_initializer_trainable_learning_rate_and_regularizer():
    frozen = pg.ParamAttr(name="frozen", initializer=pg.initializer.Constant(0.5), trainable=False)
    main, startup, w, b, loss = _build(attr=frozen)
    assert w.name == "frozen" and not w.trainable
    init_op = next(op for op in startup.global_block().ops if op.output("Out") == ["frozen"])
    assert init_op.type == "fill_constant" and init_op.attr("value") == 0.5
    assert not any(op.type == "sgd" and op.input("Param") == ["frozen"] for op in main.global_block().ops)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    x, t = _data()
    exe.run(main, feed={"x": x, "t": t}, scope=scope)
    np.testing.assert_array_equal(scope.get("frozen"), np.full((3, 2), 0.5, np.float32))   # not updated
    assert np.abs(np.array(scope.get(b.name))).max() > 0                                  # b still trains

    # learning_rate scales the step, regularizer adds coeff * w to the gradient
    attr = pg.ParamAttr(name="scaled", initializer=pg.initializer.Constant(0.25), learning_rate=0.5,
                        regularizer=pg.regularizer.L2Decay(0.1))
    main, startup, w, b, loss = _build(attr=attr, default_initializer=pg.initializer.Constant(9.0))
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    w0 = np.array(scope.get("scaled"))
    np.testing.assert_array_equal(w0, np.full((3, 2), 0.25, np.float32))   # attr's initializer wins
    _, gw = exe.run(main, feed={"x": x, "t": t}, fetch_list=[loss, "scaled@GRAD"], scope=scope)
    r = x @ w0 - t
    np.testing.assert_allclose(gw, x.T @ (2 * r / r.size), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(scope.get("scaled"), w0 - 0.1 * 0.5 * (gw + 0.1 * w0), rtol=1e-5, atol=1e-7)


def test_default_initializer_and_unnamed_attr():
    main, startup = pg.Program(), pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        k = pg.create_parameter([2, 3], "int64", default_initializer=pg.initializer.Constant(3))
        n = pg.create_parameter([4], "float32", name="n", attr=pg.ParamAttr(learning_rate=2.0))
    assert k.name == "create_parameter_0.w_0" and k.dtype_name == "int64"
    assert n.name == "n.w_0" and n.optimize_attr == {"learning_rate": 2.0}   # helper named after `name`
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    np.testing.assert_array_equal(scope.get(k.name), np.full((2, 3), 3, np.int64))


@pytest.mark.parametrize("args, kwargs, error, match", [
    (([2], "int64"), {}, TypeError, "no default initializer for a parameter of dtype int64"),
    (([2, -1], "float32"), {}, ValueError, "fully known shape"),
    (([2.0], "float32"), {}, TypeError, "list or tuple of ints"),
    ((2, "float32"), {}, TypeError, "list or tuple of ints"),
    (([2], "float32"), {"attr": "w"}, TypeError, "attr must be a ParamAttr"),
    (([2], "float32"), {"default_initializer": 0.0}, TypeError, "default_initializer must be"),
    (([2], "floatx"), {}, TypeError, "unknown dtype"),
])
def test_bad_arguments_are_refused(args, kwargs, error, match):
    with pg.unique_name.guard(), pg.program_guard(pg.Program(), pg.Program()):
        with pytest.raises(error, match=match):
            pg.create_parameter(*args, **kwargs)


def test_assign_initializer_fills_the_given_values():
    value = np.arange(6, dtype=np.float64).reshape(2, 3) / 7
    main, startup = pg.Program(), pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        w = pg.create_parameter([2, 3], "float32", default_initializer=pg.initializer.Assign(value))
        k = pg.create_parameter([3], "int64", default_initializer=pg.initializer.Assign([4, -5, 6]))
    op = startup.global_block().ops[0]
    assert op.type == "assign_value" and op.attr("shape") == [2, 3]
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    np.testing.assert_array_equal(scope.get(w.name), value.astype(np.float32))
    np.testing.assert_array_equal(scope.get(k.name), np.array([4, -5, 6], np.int64))
    with pytest.raises(ValueError, match="of shape"):
        with pg.program_guard(main, startup):
            pg.create_parameter([4], "float32", default_initializer=pg.initializer.Assign([1.0, 2.0]))


# -- eager mode: a parameter Tensor holding its initializer's value ---------------------------------
def test_in_eager_mode_it_is_a_parameter_tensor_holding_its_initializers_value():
    import keel
    with pg.unique_name.guard():
        keel.seed(11)
        w = keel.create_parameter([3, 2], "float32")
        b = keel.static.create_parameter([2], "float32", is_bias=True)
        c = pg.create_parameter([2], "float32", attr=pg.ParamAttr(name="mine", initializer=pg.initializer.Constant(0.5)))
    assert (w.name, b.name, c.name) == ("create_parameter_0.w_0", "create_parameter_1.b_0", "mine")
    assert isinstance(w, keel.Tensor) and w.persistable and w.trainable and not w.stop_gradient and w.is_leaf
    limit = math.sqrt(6.0 / (3 + 2))                         # Xavier (uniform), as in a program
    assert w.shape == [3, 2] and np.all(np.abs(w.numpy()) <= limit) and np.abs(w.numpy()).max() > 0.05
    np.testing.assert_array_equal(b.numpy(), [0.0, 0.0])
    np.testing.assert_array_equal(c.numpy(), [0.5, 0.5])
    keel.seed(11)                                            # drawn at creation, in keel.seed's stream
    np.testing.assert_array_equal(keel.create_parameter([3, 2], "float32").numpy(), w.numpy())
    layer = keel.nn.Linear(2, 2)
    keel.seed(11)
    own = layer.create_parameter([3, 2])                     # a Layer's: the same initializer and stream
    np.testing.assert_array_equal(own.numpy(), w.numpy())
    assert own.name.startswith(layer.full_name() + ".w_")


def test_eager_parameters_train_with_an_optimizer_as_the_static_program_trains_them():
    import keel
    x, t = _data()
    w_init = np.linspace(-1, 1, 6).reshape(3, 2)

    def eager_losses():
        w = keel.create_parameter([3, 2], "float32", default_initializer=pg.initializer.Assign(w_init))
        b = keel.create_parameter([2], "float32", is_bias=True)
        opt = keel.optimizer.SGD(learning_rate=0.1, parameters=[w, b])
        losses = []
        for _ in range(3):
            loss = keel.mean(keel.square(keel.matmul(keel.to_tensor(x), w) + b - keel.to_tensor(t)))
            loss.backward()
            opt.step()
            opt.clear_grad()
            losses.append(float(loss))
        return losses, w.numpy()

    main, startup, w, _, loss = _build(default_initializer=pg.initializer.Assign(w_init))
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    static = [float(exe.run(main, feed={"x": x, "t": t}, fetch_list=[loss], scope=scope)[0]) for _ in range(3)]
    losses, w_eager = eager_losses()
    assert losses == static and static[2] < static[0]
    np.testing.assert_array_equal(w_eager, scope.get(w.name))


@pytest.mark.paddle
def test_eager_names_flags_and_default_values_match_paddlepaddle():
    ref = pytest.importorskip("paddle")
    import keel
    got = {}
    for lib in (keel, ref):
        with (pg.unique_name.guard() if lib is keel else ref.utils.unique_name.guard()):
            w = lib.create_parameter([3, 2], "float32")
            b = lib.create_parameter([2], "float32", is_bias=True)
        got[lib.__name__] = (w.name, b.name, w.stop_gradient, w.persistable, w.trainable, b.numpy().tolist())
    assert got["keel"] == got["paddle"]
