"""dy2static (program/dy2static): Python if/while on tensors inside to_static / jit.save
become cond / while_loop, and so do for loops over a tensor's rows or a tensor range. The examples are PaddlePaddle's documented ones (paddle.jit.to_static's
docstring, the dy2static guide's control-flow section), written as its docs write them
with `import keel as paddle`; each runs converted and eagerly, with equal results; gradients
flow through the converted control flow; jit.save writes a program Keel's Predictor (and
Paddle Inference, when installed) runs with equal outputs."""
import inspect
import types

import numpy as np
import pytest

import keel as paddle
from keel.program.errors import OpError
from keel.static import InputSpec


# -- PaddlePaddle's examples ---------------------------------------------------------------------
def func(x):                                    # paddle.jit.to_static's docstring
    if paddle.mean(x) < 0:
        x_v = x - 1
    else:
        x_v = x + 1
    return x_v


def depend_tensor_if(x):                        # dy2static guide: if on a Tensor
    if paddle.mean(x) > 5.:
        out = x - 1
    else:
        out = x + 1
    return out


def depend_tensor_while(x):                     # dy2static guide: while on a Tensor counter
    i = paddle.zeros([1], dtype="int64")
    n = paddle.full([1], 4, dtype="int64")
    while i < n:
        x = x * 2 + 1
        i = i + 1
    return x, i


def depend_tensor_for(x):                       # dy2static guide: for over range(a Tensor)
    bs = paddle.shape(x)[0]
    for i in range(bs):
        x = x + 1
    return x


def depend_tensor_for_rows(x):                  # dy2static guide: for over a Tensor's rows
    z = paddle.zeros([2])
    for row in x:
        z = z + row
    return z


def for_enumerate_rows(x):                      # enumerate(a Tensor): a tensor counter and the rows
    even, odd = paddle.zeros([2]), paddle.zeros([2])
    for i, row in enumerate(x):
        if i % 2 == 0:
            even = even + row
        else:
            odd = odd + row * 2.0
    return even, odd


def for_range_of_a_tensor_argument(x, n):       # range(n), n a Tensor argument
    for i in range(n):
        x = x * 2.0 + 1.0
    return x


def python_for(x):                              # range over Python ints stays a Python loop
    total = x * 0
    for k in range(1, 7, 2):
        total = total + x * k
    return total


def fill_rows(x):                               # x[i] = v with the loop's tensor counter
    out = paddle.zeros([4, 3], dtype="float32")
    i = paddle.zeros([1], dtype="int64")
    while i < 4:
        out[i] = x * i.astype("float32")
        i = i + 1
    return out


def break_and_continue(x):                      # exits decided by tensors
    i = paddle.zeros([1], dtype="int64")
    total = paddle.zeros([1], dtype="float32")
    while i < 6:
        if x[i] > 3:
            break
        if x[i] < 0:
            i = i + 1
            continue
        total = total + x[i]
        i = i + 1
    return total, i


def if_in_while(x, limit):                      # nested: an if inside a while
    i = 0
    total = paddle.zeros([1], dtype="float32")
    while i < limit:
        if x.sum() > total:
            total = total + x.sum()
        else:
            total = total - 1.0
        x = x * 0.5
        i += 1
    return total


def python_control_flow(x, use_double=True):    # Python conditions stay Python
    steps = 0
    while True:
        steps += 1
        if steps % 2:
            continue
        if steps > 2:
            break
    if use_double and steps == 4:
        x = x * 2
    return x


def logical_condition(x, y):                    # and / not on tensors
    if x.mean() > 0 and not (y.mean() > 0):
        z = x - y
    elif x.mean() > 0 or y.mean() > 0:
        z = x + y
    else:
        z = x * y
    return z


def if_expression(x):                           # a if cond else b
    y = x * 2 if x.mean() > 0 else x - 1
    return y + (1.0 if x.shape[0] > 1 else 0.0)


def number_then_tensor(x):                      # a name a number before, a tensor in one branch
    scale = 1.0
    if x.sum() > 0:
        scale = x.max()
    return x * scale


def early_return(x):                            # returns under a tensor-decided if
    if x.mean() > 0:
        return x * 2, x
    y = x - 1
    if y.sum() > -10:
        return y, x + 1
    return x, x


class BranchNet(paddle.nn.Layer):               # a Layer whose forward branches on a tensor
    def __init__(self):
        super().__init__()
        self.linear = paddle.nn.Linear(4, 3)
        self.other = paddle.nn.Linear(4, 3)

    def forward(self, x):
        if x.mean() > 0:
            out = self.linear(x)
        else:
            out = self.other(x) * 2.0
        step = paddle.zeros([1], dtype="int64")
        while step < 2:
            out = paddle.tanh(out) + 0.5
            step = step + 1
        return out


def scale_if_big(h):                            # a helper function the forward calls
    if h.max() > 1:
        h = h / h.max()
    return h


class Gate(paddle.nn.Layer):                    # a sub-layer whose forward returns early on a tensor
    def forward(self, x):
        if x.mean() > 0:
            return x * 2
        return -x


class Outer(paddle.nn.Layer):                   # no control flow of its own: calls converted
    def __init__(self):
        super().__init__()
        self.fc = paddle.nn.Linear(4, 4)
        self.gate = Gate()

    def forward(self, x):
        h = self.fc(x)
        return self.gate(h) + scale_if_big(h)


def _tensor(values):
    return paddle.to_tensor(np.asarray(values, dtype="float32"))


def _numpy(result):
    return [r.numpy() for r in result] if isinstance(result, (tuple, list)) else result.numpy()


@pytest.mark.parametrize("function,args", [
    (func, [np.ones((1, 2))]), (func, [-np.ones((1, 2))]),
    (depend_tensor_if, [np.full((2, 2), 6.0)]), (depend_tensor_if, [np.ones((2, 2))]),
    (depend_tensor_while, [np.ones(3)]),
    (depend_tensor_for, [np.ones((4, 2))]), (python_for, [np.array([1.0, -2.0])]),
    (depend_tensor_for_rows, [np.arange(8.0).reshape(4, 2)]), (for_enumerate_rows, [np.arange(10.0).reshape(5, 2)]),
    (for_range_of_a_tensor_argument, [np.array([0.5, -1.0]), np.array([3], "int64")]),
    (fill_rows, [np.array([1.0, 2.0, 3.0])]),
    (break_and_continue, [np.array([1.0, 2.0, 5.0, 1.0, 1.0, 1.0])]),
    (break_and_continue, [np.array([1.0, -2.0, 2.0, -1.0, 0.5, 9.0])]),
    (break_and_continue, [np.ones(6)]),
    (if_expression, [np.array([1.0, 2.0])]), (if_expression, [np.array([-1.0, -2.0])]),
    (if_in_while, [np.array([1.0, 2.0]), np.array([3], "int64")]),
    (if_in_while, [np.array([-1.0, 2.0]), np.array([1], "int64")]),
    (python_control_flow, [np.ones(2)]),
    (logical_condition, [np.ones(2), -np.ones(2)]), (logical_condition, [-np.ones(2), np.ones(2)]),
    (logical_condition, [-np.ones(2), -np.ones(2)]),
    (number_then_tensor, [np.array([1.0, 3.0])]), (number_then_tensor, [np.array([-1.0, -3.0])]),
    (early_return, [np.array([1.0, 3.0])]), (early_return, [np.array([-1.0, -3.0])]),
    (early_return, [np.full(3, -20.0)]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_converted_functions_equal_eager_execution(function, args):
    tensors = [paddle.to_tensor(a if a.dtype == np.int64 else a.astype("float32")) for a in args]
    eager = _numpy(function(*tensors))
    static = paddle.jit.to_static(function)
    got = _numpy(static(*tensors))
    for e, g in zip(eager if isinstance(eager, list) else [eager], got if isinstance(got, list) else [got]):
        np.testing.assert_allclose(g, e, rtol=1e-6)


def test_the_docstring_example_gives_its_documented_result():
    x_v = paddle.jit.to_static(func)(paddle.ones([1, 2], dtype="float32"))
    np.testing.assert_array_equal(x_v.numpy(), [[2.0, 2.0]])


def test_the_traced_program_holds_cond_and_while_and_one_trace_serves_both_branches():
    static = paddle.jit.to_static(if_in_while)
    a = static(_tensor([1.0, 2.0]), paddle.to_tensor(np.array([3], "int64")))
    b = static(_tensor([-5.0, 2.0]), paddle.to_tensor(np.array([2], "int64")))
    assert len(static.concrete_programs) == 1
    types = [op.type for block in static.concrete_programs[0].blocks for op in block.ops]
    assert "while" in types and "conditional_block" in types and "select_input" in types
    np.testing.assert_allclose(a.numpy(), _numpy(if_in_while(_tensor([1.0, 2.0]), paddle.to_tensor(
        np.array([3], "int64")))))
    np.testing.assert_allclose(b.numpy(), [-2.0])


def test_a_to_static_layer_equals_eager_and_trains_through_cond_and_while():
    paddle.seed(3)
    eager_net = BranchNet()
    static_net = BranchNet()
    static_net.set_state_dict(eager_net.state_dict())
    static_net = paddle.jit.to_static(static_net)
    eager_opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=eager_net.parameters())
    static_opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=static_net.parameters())
    rng = np.random.default_rng(0)
    for step in range(4):
        x = rng.normal(size=(2, 4)).astype("float32") + (0.5 if step % 2 else -0.5)
        losses = []
        for net, opt in ((eager_net, eager_opt), (static_net, static_opt)):
            loss = (net(paddle.to_tensor(x)) ** 2).mean()
            loss.backward()
            opt.step()
            opt.clear_grad()
            losses.append(float(loss))
        np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    for name, value in eager_net.state_dict().items():   # both branches' layers were trained alike
        np.testing.assert_allclose(np.asarray(static_net.state_dict()[name]), np.asarray(value), rtol=1e-5, atol=1e-6)


def test_gradients_flow_through_an_item_assignment_in_a_converted_loop():
    x = paddle.to_tensor(np.array([1.0, 2.0, 3.0], "float32"), stop_gradient=False)
    out = paddle.jit.to_static(fill_rows)(x)
    (out * out).sum().backward()
    # out[i] = x * i for i = 0..3: d/dx sum(out^2) = 2 x (0 + 1 + 4 + 9)
    np.testing.assert_allclose(x.grad.numpy(), 2 * x.numpy() * 14, rtol=1e-6)


def test_gradients_through_a_converted_loop_match_finite_differences():
    static = paddle.jit.to_static(depend_tensor_while)
    x0 = np.array([0.3, -0.2], "float64")
    x = paddle.to_tensor(x0, stop_gradient=False)
    out, _ = static(x)
    (out * out).sum().backward()
    # out = 16 x + 15 after four steps of x -> 2x + 1
    np.testing.assert_allclose(x.grad.numpy(), 2 * (16 * x0 + 15) * 16, rtol=1e-10)


def test_a_loop_over_a_tensors_rows_is_a_while_loop_gradients_flow_through():
    static = paddle.jit.to_static(for_enumerate_rows)
    x0 = np.arange(6.0, dtype="float32").reshape(3, 2)
    x = paddle.to_tensor(x0, stop_gradient=False)
    even, odd = static(x)
    (even * even + odd).sum().backward()
    # even = rows 0 + 2, odd = 2 * row 1: d/dx = 2 even on rows 0 and 2, 2 on row 1
    want = np.stack([2 * (x0[0] + x0[2]), np.full(2, 2.0), 2 * (x0[0] + x0[2])])
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-6)


def test_a_loop_over_a_tensors_rows_is_saved_as_a_while_that_follows_the_batch_size(tmp_path):
    class RowSum(paddle.nn.Layer):
        def forward(self, x):
            return depend_tensor_for_rows(x)
    path = str(tmp_path / "row_sum")
    program = paddle.jit.save(RowSum(), path, input_spec=[InputSpec([None, 2], "float32", "x")])
    assert "while" in {op.type for op in program.global_block().ops}
    for batch in (1, 4):
        x = np.arange(2.0 * batch, dtype="float32").reshape(batch, 2)
        np.testing.assert_array_equal(_predict(path, x), x.sum(0))


@pytest.mark.paddle
@pytest.mark.parametrize("function,args", [
    (depend_tensor_for_rows, [np.arange(8.0).reshape(4, 2)]), (for_enumerate_rows, [np.arange(10.0).reshape(5, 2)]),
    (for_range_of_a_tensor_argument, [np.array([0.5, -1.0]), np.array([3], "int64")]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_for_loops_over_tensors_give_paddlepaddles_to_static_results(function, args):
    """The same source, its `paddle` PaddlePaddle 3.3.1 (to_static with full_graph: its AST
    conversion) and Keel."""
    ref = pytest.importorskip("paddle")
    results = []
    for lib in (paddle, ref):
        scope = dict(function.__globals__, paddle=lib)
        same_source = types.FunctionType(function.__code__, scope, function.__name__)
        static = lib.jit.to_static(same_source, full_graph=True) if lib is ref else lib.jit.to_static(same_source)
        out = static(*[lib.to_tensor(a if a.dtype == np.int64 else a.astype("float32")) for a in args])
        results.append([t.numpy().tolist() for t in (out if isinstance(out, (tuple, list)) else [out])])
    assert results[0] == results[1]


def test_sub_layers_and_helpers_the_forward_calls_are_converted_too(tmp_path):
    paddle.seed(7)
    net = Outer()
    net.eval()
    inputs = [np.full((2, 4), v, "float32") for v in (-3.0, 0.1, 3.0)]
    expected = [net(paddle.to_tensor(x)).numpy() for x in inputs]
    path = str(tmp_path / "outer")
    paddle.jit.save(net, path, input_spec=[InputSpec([None, 4], "float32", "x")])
    assert net.gate.__dict__.get("forward") is None          # the sub-layer's forward is its own again
    static = paddle.jit.to_static(Outer())
    static.set_state_dict(net.state_dict())
    for x, want in zip(inputs, expected):
        np.testing.assert_allclose(_predict(path, x), want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(static(paddle.to_tensor(x)).numpy(), want, rtol=1e-5, atol=1e-6)


def _predict(path, x):
    config = paddle.inference.Config(path + ".pdmodel", path + ".pdiparams")
    predictor = paddle.inference.create_predictor(config)
    predictor.get_input_handle(predictor.get_input_names()[0]).copy_from_cpu(x)
    predictor.run()
    return predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()


@pytest.mark.parametrize("to_static", [False, True], ids=["plain layer", "to_static layer"])
def test_jit_save_of_a_branching_layer_runs_in_the_predictor_with_equal_outputs(tmp_path, to_static):
    paddle.seed(5)
    net = BranchNet()
    net.eval()
    positive = np.abs(np.random.default_rng(1).normal(size=(3, 4))).astype("float32")
    expected = {sign: net(paddle.to_tensor(sign * positive)).numpy() for sign in (1, -1)}
    if to_static:
        net = paddle.jit.to_static(net, input_spec=[InputSpec([None, 4], "float32", "x")])
    path = str(tmp_path / "branch_net")
    program = paddle.jit.save(net, path, input_spec=[InputSpec([None, 4], "float32", "x")])
    assert {"conditional_block", "while"} <= {op.type for b in program.blocks for op in b.ops}
    for sign in (1, -1):
        np.testing.assert_allclose(_predict(path, sign * positive), expected[sign], rtol=1e-5, atol=1e-6)


def test_a_loop_over_a_tensor_range_is_saved_as_a_while_that_follows_the_batch_size(tmp_path):
    class Counter(paddle.nn.Layer):
        def forward(self, x):
            return depend_tensor_for(x)
    path = str(tmp_path / "counter")
    program = paddle.jit.save(Counter(), path, input_spec=[InputSpec([None, 2], "float32", "x")])
    assert "while" in {op.type for op in program.global_block().ops}
    for batch in (1, 3):
        np.testing.assert_array_equal(_predict(path, np.zeros((batch, 2), "float32")), np.full((batch, 2), batch))


@pytest.mark.paddle
def test_paddle_inference_runs_the_saved_branching_layer(tmp_path):
    paddle_ref = pytest.importorskip("paddle")
    from paddle import inference as paddle_inference
    paddle.seed(6)
    net = BranchNet()
    net.eval()
    path = str(tmp_path / "branch_net")
    paddle.jit.save(net, path, input_spec=[InputSpec([None, 4], "float32", "x")])
    x = np.abs(np.random.default_rng(2).normal(size=(2, 4))).astype("float32")
    for sign in (1, -1):
        config = paddle_inference.Config(path + ".pdmodel", path + ".pdiparams")
        config.disable_gpu()
        predictor = paddle_inference.create_predictor(config)
        predictor.get_input_handle(predictor.get_input_names()[0]).copy_from_cpu(sign * x)
        predictor.run()
        got = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
        np.testing.assert_allclose(got, net(paddle.to_tensor(sign * x)).numpy(), rtol=1e-5, atol=1e-6)
    assert paddle_ref is not None


# -- what cannot be converted ------------------------------------------------------------------------
def return_in_loop(x):
    i = paddle.zeros([1], dtype="int64")
    while i < 3:
        if x.sum() > 100:
            return x
        i = i + 1
    return x * 2


def break_inside_try(x):
    i = paddle.zeros([1], dtype="int64")
    while i < 10:
        try:
            if i > 3:
                break
        finally:
            i = i + 1
    return i


def bound_inside_the_loop_only(x):
    i = paddle.zeros([1], dtype="int64")
    while i < 3:
        last = x * 2
        i = i + 1
    return last


def list_in_one_branch(x):
    y = x
    if x.mean() > 0:
        y = [x, x]
    return y


def string_in_one_branch(x):
    y = "small"
    if x.mean() > 0:
        y = x
    return y


@pytest.mark.parametrize("function,words", [
    (return_in_loop, ["return", "return after the loop"]),
    (break_inside_try, ["break", "loop condition"]),
    (bound_inside_the_loop_only, ["last", "give it a value before the loop"]),
    (list_in_one_branch, ["`y`", "a list of 2 and a tensor", "same in both"]),
    (string_in_one_branch, ["`y` is a str", "make it a tensor in both branches"]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_unconvertible_constructs_stop_with_the_line_and_what_to_write(function, words):
    lines, first = inspect.getsourcelines(function)
    with pytest.raises(OpError) as e:
        paddle.jit.to_static(function)(_tensor([1.0, 2.0]))
    message = str(e.value)
    for word in words:
        assert word in message
    line = int(message.split(f"{__file__}:")[1].split(":")[0])
    assert first < line < first + len(lines)
    assert lines[line - first].strip().startswith(("if", "while"))


def break_in_a_for_over_rows(x):
    total = paddle.zeros([2])
    for row in x:
        if total.sum() > 10:
            break
        total = total + row
    return total


def for_else_over_rows(x):
    total = paddle.zeros([2])
    for row in x:
        total = total + row
    else:
        total = total * 2
    return total


def over_a_0d_tensor(x):
    total = paddle.zeros([1])
    for v in x.sum():
        total = total + v
    return total


def range_of_a_tensor_with_break(x, n):
    for i in range(n):
        if i > 2:
            break
        x = x + 1
    return x


@pytest.mark.parametrize("function,words", [
    (break_in_a_for_over_rows, ["iterates over a tensor", "`break`", "write it as a while loop over an index"]),
    (for_else_over_rows, ["`for ... else`", "move the else: part after the loop"]),
    (over_a_0d_tensor, ["a 0-D tensor"]),
    (range_of_a_tensor_with_break, ["`break`", "write it as a while loop over an index"]),
], ids=lambda v: getattr(v, "__name__", ""))
def test_a_for_loop_over_a_tensor_that_cannot_be_converted_stops_at_its_line(function, words):
    lines, first = inspect.getsourcelines(function)
    args = [_tensor(np.ones((3, 2)))] + ([paddle.to_tensor(np.array([5], "int64"))] if "n" in
                                          inspect.signature(function).parameters else [])
    with pytest.raises(OpError) as e:
        paddle.jit.to_static(function)(*args)
    message = str(e.value)
    for word in words:
        assert word in message
    line = int(message.split(f"{__file__}:")[1].split(":")[0])
    assert lines[line - first].strip().startswith("for")


def test_a_function_without_source_is_traced_as_it_is():
    static = paddle.jit.to_static(lambda x: x * 3)
    np.testing.assert_array_equal(static(_tensor([1.0])).numpy(), [3.0])


def test_the_converted_function_keeps_its_closure_defaults_and_globals():
    offset = 10.0

    def shifted(x, scale=3.0, *, bias=1.0):
        if x.sum() > 0:
            x = x * scale + offset       # a closure cell and a default
        else:
            x = x - bias + _SHIFT        # a keyword-only default and a global
        return x
    static = paddle.jit.to_static(shifted)
    np.testing.assert_allclose(static(_tensor([1.0, 2.0])).numpy(), [13.0, 16.0])
    np.testing.assert_allclose(static(_tensor([-1.0, -2.0])).numpy(), [-1.5, -2.5])


_SHIFT = 0.5


def test_a_converted_forward_in_a_static_program_differentiates_by_the_static_rules():
    """The same layer built into a program (cond and while ops, differentiated by
    conditional_block_grad / while_grad) and run by to_static (the eager tape over the
    steps taken) give one gradient."""
    import keel.program as pg
    from keel.executor import Executor, Scope
    paddle.seed(11)
    net = paddle.jit.to_static(BranchNet())
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [2, 4], "float32")
        x.stop_gradient = False
        loss = pg.mean(net(x) * net(x))
        (gx,) = pg.gradients([loss], [x])
    types = {op.type for b in main.blocks for op in b.ops}
    assert {"conditional_block_grad", "while_grad"} <= types
    scope = Scope()
    Executor().run(startup, scope=scope)
    net.set_state_dict(net.state_dict(), scope)          # the layer's values in the program's scope
    for sign in (1.0, -1.0):
        xv = sign * np.abs(np.random.default_rng(3).normal(size=(2, 4))).astype("float32")
        (static_grad,) = Executor().run(main, feed={"x": xv}, fetch_list=[gx], scope=scope)
        t = paddle.to_tensor(xv, stop_gradient=False)
        out = net(t)
        (out * out).mean().backward()
        np.testing.assert_allclose(static_grad, t.grad.numpy(), rtol=1e-5, atol=1e-7)


class SimpleNet(paddle.nn.Layer):               # paddle.jit.save's docstring: a decorated forward
    def __init__(self):
        super().__init__()
        self.linear = paddle.nn.Linear(10, 3)

    @paddle.jit.to_static(input_spec=[InputSpec(shape=[None, 10], name="x")])
    def forward(self, x, y=None):
        out = self.linear(x)
        if y is not None:
            loss = paddle.mean((out - y) ** 2)
            return out, loss
        return out


def test_a_decorated_forward_with_an_optional_argument_saves_and_trains(tmp_path):
    paddle.seed(12)
    net = SimpleNet()
    x = paddle.to_tensor(np.random.default_rng(4).normal(size=(4, 10)).astype("float32"))
    y = paddle.zeros([4, 3], dtype="float32")
    out, loss = net(x, y)                        # eager: Python decides `y is not None`
    loss.backward()
    assert net.linear.weight.grad is not None
    expected = net(x).numpy()
    path = str(tmp_path / "simple_net")
    paddle.jit.save(net, path)                   # the decorator's input_spec; y absent
    np.testing.assert_allclose(_predict(path, x.numpy()), expected, rtol=1e-5, atol=1e-6)
