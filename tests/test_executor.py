"""The executor: plans, pruning, freeing intermediates, concurrency, feed checks, errors."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import CPUPlace, ExecutionError, Executor, FeedError, NonFiniteError, Scope

THIS_FILE = __file__


def _chain_program():
    """x -> a = x + x -> b = a * a -> c = b - x ; plus an unrelated d = x * x."""
    p = pg.Program()
    b = p.global_block()
    x = b.create_var("x", [-1, 3], need_check_feed=True)
    for name in "abcd":
        b.create_var(name)
    b.append_op("elementwise_add", {"X": "x", "Y": "x"}, {"Out": "a"})
    b.append_op("elementwise_mul", {"X": "a", "Y": "a"}, {"Out": "b"})
    b.append_op("elementwise_sub", {"X": "b", "Y": "x"}, {"Out": "c"})
    b.append_op("elementwise_mul", {"X": "x", "Y": "x"}, {"Out": "d"})
    return p, x


def test_run_computes_and_frees_intermediates():
    p, x = _chain_program()
    scope = Scope()
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    c, = Executor().run(p, feed={"x": xv}, fetch_list=["c"], scope=scope)
    np.testing.assert_allclose(c, (2 * xv) ** 2 - xv)
    assert scope.has("c")  # fetched values are kept
    for name in ("a", "b", "d", "x"):
        assert not scope.has(name)  # intermediates and feeds are not


def test_plan_prunes_unneeded_ops_and_is_cached_until_the_program_changes():
    p, x = _chain_program()
    exe = Executor()
    exe.run(p, feed={"x": np.ones((1, 3), np.float32)}, fetch_list=["d"])
    plan = exe._plan(p, 0, {"x": None}, ["d"])
    assert [s.op.type for s in plan.steps] == ["elementwise_mul"]
    assert exe._plan(p, 0, {"x": None}, ["d"]) is plan
    p.global_block().ops[3].set_attr("axis", -1)
    assert exe._plan(p, 0, {"x": None}, ["d"]) is not plan


def test_ops_writing_persistable_vars_always_run():
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [3], need_check_feed=True)
    b.create_var("counter", [3], persistable=True)
    b.create_var("y")
    b.append_op("elementwise_add", {"X": "counter", "Y": "x"}, {"Out": "counter"})
    b.append_op("elementwise_mul", {"X": "x", "Y": "x"}, {"Out": "y"})
    scope = Scope()
    scope.set("counter", np.zeros(3, np.float32))
    exe = Executor()
    for _ in range(3):
        y, = exe.run(p, feed={"x": np.ones(3, np.float32)}, fetch_list=["y"], scope=scope)
    np.testing.assert_array_equal(scope.get("counter"), [3, 3, 3])


def test_peak_live_set_is_bounded_by_freeing():
    """A long chain keeps at most a couple of intermediates alive at any time."""
    p = pg.Program()
    b = p.global_block()
    b.create_var("v0", [4], need_check_feed=True)
    for i in range(50):
        b.create_var(f"v{i + 1}")
        b.append_op("elementwise_add", {"X": f"v{i}", "Y": f"v{i}"}, {"Out": f"v{i + 1}"})
    exe = Executor()
    plan = exe._plan(p, 0, {"v0": None}, ["v50"])
    live, peak = {"v0"}, 1
    for step in plan.steps:
        live.update(step.writes)
        peak = max(peak, len(live))
        live.difference_update(step.frees)
    assert peak <= 2
    out, = exe.run(p, feed={"v0": np.ones(4, np.float32)}, fetch_list=["v50"])
    np.testing.assert_array_equal(out, np.full(4, 2.0 ** 50, np.float32))


def test_concurrent_and_serial_runs_agree(monkeypatch):
    monkeypatch.setattr("keel.executor.plan.THREAD_MIN_ELEMENTS", 0)  # submit even these small ops
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 64], need_check_feed=True)
    names = []
    for i in range(8):  # eight independent branches, then a reduction chain
        b.create_var(f"h{i}")
        b.append_op("elementwise_mul", {"X": "x", "Y": "x"}, {"Out": f"h{i}"})
        b.create_var(f"g{i}")
        b.append_op("elementwise_add", {"X": f"h{i}", "Y": "x"}, {"Out": f"g{i}"})
        names.append(f"g{i}")
    acc = names[0]
    for i, n in enumerate(names[1:]):
        b.create_var(f"s{i}")
        b.append_op("elementwise_add", {"X": acc, "Y": n}, {"Out": f"s{i}"})
        acc = f"s{i}"
    xv = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32)
    serial, = Executor().run(p, feed={"x": xv}, fetch_list=[acc], scope=Scope())
    par_exe = Executor(num_threads=4)
    assert max(len(level) for level in par_exe._plan(p, 0, {"x": None}, [acc]).levels) >= 8
    parallel, = par_exe.run(p, feed={"x": xv}, fetch_list=[acc], scope=Scope())
    np.testing.assert_array_equal(serial, parallel)
    par_exe.close()


def test_a_step_writing_into_a_donated_buffer_waits_for_its_other_readers(monkeypatch):
    """t is read by exp (not its last use) and by the scale after it, which writes into
    t's buffer: the two must not share a level of the concurrent runner, and the values
    equal the serial run's."""
    monkeypatch.setattr("keel.executor.plan.THREAD_MIN_ELEMENTS", 0)  # submit even these small ops
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 64], "float32", need_check_feed=True)
    for name in ("t", "u", "v", "w"):
        b.create_var(name, [-1, 64], "float32")
    b.append_op("scale", {"X": "x"}, {"Out": "t"}, {"scale": 2.0})
    b.append_op("exp", {"X": "t"}, {"Out": "u"})
    b.append_op("scale", {"X": "t"}, {"Out": "v"}, {"bias": 1.0})   # t's last use: donated
    b.append_op("elementwise_add", {"X": "u", "Y": "v"}, {"Out": "w"})
    xv = np.random.default_rng(0).standard_normal((32, 64)).astype(np.float32)
    serial, = Executor().run(p, feed={"x": xv}, fetch_list=["w"], scope=Scope())
    np.testing.assert_allclose(serial, np.exp(2 * xv) + 2 * xv + 1, rtol=1e-5, atol=1e-6)
    par_exe = Executor(num_threads=2)
    plan = par_exe._plan(p, 0, {"x": None}, ["w"])
    assert plan.steps[2].clobbers == ("t",)
    level_of = {pos: lv for lv, members in enumerate(plan.levels) for pos in members}
    assert level_of[2] > level_of[1]
    for _ in range(20):
        parallel, = par_exe.run(p, feed={"x": xv}, fetch_list=["w"], scope=Scope())
        np.testing.assert_array_equal(serial, parallel)
    par_exe.close()


# -- feeds --------------------------------------------------------------------------------
def test_unknown_feed_name():
    p, x = _chain_program()
    with pytest.raises(FeedError, match="'xx' is not a variable.*did you mean x"):
        Executor().run(p, feed={"xx": np.ones((1, 3), np.float32)}, fetch_list=["c"])


def test_missing_feed():
    p, x = _chain_program()
    with pytest.raises(FeedError, match="missing feed for 'x'"):
        Executor().run(p, feed={}, fetch_list=["c"])


def test_feed_with_unsafe_dtype():
    p, x = _chain_program()
    with pytest.raises(FeedError, match="'x'.*complex128.*float32"):
        Executor().run(p, feed={"x": np.ones((1, 3), np.complex128)}, fetch_list=["c"])


@pytest.mark.parametrize("value", [np.ones((1, 3)), np.ones((1, 3), np.int64), np.ones((1, 3), np.int32)],
                         ids=["float64", "int64", "int32"])
def test_feed_cast_that_may_change_values_is_refused_saying_how_to_convert(value):
    # PaddlePaddle refuses a fed array of any other dtype; float64 -> float32 rounds and
    # int64/int32 -> float32 can too, so Keel refuses them as well
    p, x = _chain_program()
    with pytest.raises(FeedError, match=rf"feed 'x': got a {value.dtype} array, declared float32\[-1, 3\].*"
                                        r"value.astype\('float32'\)"):
        Executor().run(p, feed={"x": value}, fetch_list=["c"])


def test_feed_casts_that_keep_every_value_are_made():
    p = pg.Program()
    b = p.global_block()
    b.create_var("ids", [-1, 2], "int64", need_check_feed=True)
    b.create_var("x", [-1, 2], "float32", need_check_feed=True)
    for name in ("i", "y"):
        b.create_var(name)
    b.append_op("scale", {"X": "ids"}, {"Out": "i"}, {"scale": 1.0})
    b.append_op("scale", {"X": "x"}, {"Out": "y"}, {"scale": 1.0})
    exe = Executor()
    big = np.int32(2**31 - 1)
    for ids, xv in [(np.array([[1, big]], np.int32), np.array([[0.5, 3]], np.float16)),    # widening arrays
                    (np.array([[1, 2]], np.uint8), np.array([[7, 255]], np.uint8)),
                    ([[1, int(big)]], [[0.1, 2.0]])]:                                   # lists: as meant
        i, y = exe.run(p, feed={"ids": ids, "x": xv}, fetch_list=["i", "y"])
        assert i.dtype == np.int64 and y.dtype == np.float32
        np.testing.assert_array_equal(i, np.asarray(ids, np.int64))
        np.testing.assert_array_equal(y, np.asarray(xv, np.float32))
    with pytest.raises(FeedError, match=r"feed 'ids': the list given holds values that int64 cannot represent"):
        exe.run(p, feed={"ids": [[1.5, 2]], "x": xv}, fetch_list=["i"])
    with pytest.raises(FeedError, match="feed 'ids'.*feed a numpy array of int64"):
        exe.run(p, feed={"ids": [["a", "b"]], "x": xv}, fetch_list=["i"])


def test_feed_with_wrong_shape():
    p, x = _chain_program()
    with pytest.raises(FeedError, match=r"'x': got shape \[2, 4\], declared \[-1, 3\]"):
        Executor().run(p, feed={"x": np.ones((2, 4), np.float32)}, fetch_list=["c"])
    with pytest.raises(FeedError, match=r"got shape \[3\], declared \[-1, 3\]"):
        Executor().run(p, feed={"x": np.ones(3, np.float32)}, fetch_list=["c"])


def test_fetching_an_unknown_variable():
    p, x = _chain_program()
    with pytest.raises(FeedError, match="cannot fetch 'nope'"):
        Executor().run(p, feed={"x": np.ones((1, 3), np.float32)}, fetch_list=["nope"])


# -- run-time errors ------------------------------------------------------------------------
def test_kernel_failure_names_op_index_shapes_and_line():
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 3], need_check_feed=True)
    b.create_var("y", [-1, 3], need_check_feed=True)
    b.create_var("z")
    b.append_op("elementwise_add", {"X": "x", "Y": "y"}, {"Out": "z"})  # MARK-runtime
    line = next(i for i, s in enumerate(open(THIS_FILE), 1) if "MARK-runtime" in s and "next(" not in s)
    with pytest.raises(ExecutionError) as e:
        Executor().run(p, feed={"x": np.ones((2, 3), np.float32), "y": np.ones((3, 3), np.float32)},
                       fetch_list=["z"])
    text = str(e.value)
    assert "elementwise_add (op 0)" in text and "x[2, 3]" in text and "y[3, 3]" in text
    assert f"{THIS_FILE}:{line}" in text


def test_nan_check_names_the_first_op(monkeypatch):
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [2], need_check_feed=True)
    for n in ("q", "r"):
        b.create_var(n)
    b.append_op("elementwise_div", {"X": "x", "Y": "x"}, {"Out": "q"})
    b.append_op("elementwise_add", {"X": "q", "Y": "q"}, {"Out": "r"})
    feed = {"x": np.array([0.0, 1.0], np.float32)}
    with np.errstate(all="ignore"):
        r, = Executor().run(p, feed=feed, fetch_list=["r"])  # unchecked: NaN flows through
        assert np.isnan(r[0])
        with pytest.raises(NonFiniteError, match=r"elementwise_div \(op 0\).*'q'"):
            Executor(check_nan_inf=True).run(p, feed=feed, fetch_list=["r"])
        monkeypatch.setenv("KEEL_CHECK_NAN_INF", "1")
        with pytest.raises(NonFiniteError):
            Executor().run(p, feed=feed, fetch_list=["r"])


def _relu_mlp():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 3])
        y = pg.nn.fc(x, 2, activation="relu")
    return main, startup, y


def test_nan_in_a_feed_is_named_as_the_feed_when_checking(monkeypatch):
    main, startup, y = _relu_mlp()
    scope = Scope()
    Executor().run(startup, scope=scope)
    bad = np.array([[np.nan, 1, 2], [0, np.inf, 1]], np.float32)
    # unchecked (the default, as PaddlePaddle's FLAGS_check_nan_inf): relu hides the NaN
    with np.errstate(invalid="ignore"):
        out, = Executor().run(main, feed={"x": bad}, fetch_list=[y], scope=scope)
    assert out.shape == (2, 2) and not np.isnan(out).any()
    with pytest.raises(NonFiniteError, match=r"^feed 'x' holds 2 NaN/Inf value\(s\) of 6 \(shape \[2, 3\]\)"):
        Executor(check_nan_inf=True).run(main, feed={"x": bad}, fetch_list=[y], scope=scope)
    monkeypatch.setenv("KEEL_CHECK_NAN_INF", "1")
    exe = Executor()
    run = exe.prepare(main, ["x"], [y], scope=scope, check_feed=False)  # the Predictor's path
    with pytest.raises(NonFiniteError, match="^feed 'x'"):
        run({"x": bad})
    ok = np.ones((2, 3), np.float32)
    np.testing.assert_array_equal(run({"x": ok})[0], Executor().run(main, feed={"x": ok}, fetch_list=[y],
                                                                     scope=scope)[0])
    w = main.all_parameters()[0].name
    scope.get(w)[0, 0] = np.nan  # a parameter gone bad (a loaded checkpoint, say) is named too
    with pytest.raises(NonFiniteError, match=rf"^variable '{w}' \(read from the scope: a parameter"):
        run({"x": ok})


def test_missing_persistable_value_says_run_startup():
    p = pg.Program()
    b = p.global_block()
    b.create_var("w", [3], persistable=True)
    b.create_var("y")
    b.append_op("elementwise_add", {"X": "w", "Y": "w"}, {"Out": "y"})
    with pytest.raises(ExecutionError, match="'w' has no value in the scope: run the startup program"):
        Executor().run(p, fetch_list=["y"], scope=Scope())


def test_scope_basics():
    parent = Scope()
    parent.set("a", np.ones(2))
    child = parent.new_scope()
    assert child.has("a") and np.array(child.find_var("a").get_tensor()).tolist() == [1.0, 1.0]
    assert child.find_var("zz") is None
    with pytest.raises(KeyError, match="run the startup program"):
        child.get("zz")


def test_scope_tensor_reads_and_sets_as_paddles_dense_tensor():
    """PaddlePaddle's `scope.find_var(n).get_tensor()`: np.array reads a copy of the current
    value, `.set(array, place)` replaces it where the entry lives, shape() is a list."""
    parent = Scope()
    parent.set("w", np.zeros((2, 3), "float32"))
    child = parent.new_scope()
    tensor = child.find_var("w").get_tensor()
    assert tensor.shape() == [2, 3] and tensor._dtype() == np.float32 and tensor._is_initialized()
    source = np.arange(6, dtype="float32").reshape(2, 3)
    tensor.set(source, CPUPlace())
    source[0, 0] = 100.0                                        # the scope holds a copy
    assert parent.get("w")[0, 0] == 0.0 and "w" not in child.local_var_names()
    read = np.array(tensor)
    read[1, 1] = -1.0                                           # and np.array gives one
    np.testing.assert_array_equal(np.array(parent.find_var("w").get_tensor()), np.arange(6).reshape(2, 3))
    fresh = parent.var("fresh").get_tensor()
    assert not fresh._is_initialized()
    with pytest.raises(ValueError, match="'fresh' holds no value yet"):
        np.array(fresh)
    fresh.set([[1, 2]], CPUPlace())
    assert np.array(fresh).dtype == np.int64 and fresh.shape() == [1, 2]


def test_keep_intermediates_leaves_every_value_in_the_scope():
    p, x = _chain_program()
    scope = Scope()
    Executor(keep_intermediates=True).run(p, feed={"x": np.ones((1, 3), np.float32)}, fetch_list=["c"],
                                          scope=scope)
    for name in ("a", "b", "c"):
        assert scope.has(name)


def test_donated_buffers_never_clobber_feeds_fetches_or_persistables():
    """Cheap elementwise ops write into their first input's buffer only when that input
    is an intermediate nobody reads afterwards: feeds, fetched values and parameters keep
    their values, and results equal the undonated computation."""
    main, startup = pg.Program(), pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x = pg.data("x", [2, 3])
        w = main.global_block().create_var("w", [2, 3], "float32", persistable=True)
        y = x + 1.0                     # reads the feed: must not write into it
        t = w * 3.0                     # reads a persistable: must not write into it
        z = pg.relu(y * 2.0 - 3.0)      # chain of dead intermediates: donated
        v = z + x                       # z dead after this: donated; x is a feed
        u = v * v
        out = u + y + t                 # y is fetched: not donated
    xv = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    before = xv.copy()
    exe, scope = Executor(), Scope()
    scope.set("w", np.full((2, 3), 2.0, np.float32))
    got_y, got_out, got_v = exe.run(main, feed={"x": xv}, fetch_list=[y, out, v], scope=scope)
    np.testing.assert_array_equal(xv, before)
    np.testing.assert_array_equal(scope.get("w"), np.full((2, 3), 2.0))
    ry = before + 1
    rv = np.maximum(ry * 2 - 3, 0) + before
    np.testing.assert_allclose(got_y, ry)
    np.testing.assert_allclose(got_v, rv)
    np.testing.assert_allclose(got_out, rv * rv + ry + 6.0)
    # a second run gives the same (fetched arrays were not reused as scratch space)
    again = exe.run(main, feed={"x": xv}, fetch_list=[y, out, v], scope=scope)
    for a, b in zip((got_y, got_out, got_v), again):
        np.testing.assert_array_equal(a, b)


def test_donated_add_with_paddle_axis_matches_the_general_kernel():
    """A conv-style bias add (Y [C] at axis 1 of X [N, C, H, W]) into a donated buffer."""
    main = pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, pg.Program()):
        x = pg.data("x", [2, 3, 4, 4])
        b = pg.data("b", [3])
        h = x * 2.0                                   # an intermediate: donated to the add
        out = pg.elementwise_add(h, b, axis=1)
    xv = np.random.default_rng(0).standard_normal((2, 3, 4, 4)).astype(np.float32)
    bv = np.array([1.0, -2.0, 3.0], np.float32)
    got, = Executor().run(main, feed={"x": xv, "b": bv}, fetch_list=[out], scope=Scope())
    np.testing.assert_allclose(got, xv * 2 + bv[None, :, None, None], rtol=1e-6)


def test_donation_skips_views_that_share_a_buffer():
    """elementwise_add_grad's X@GRAD and Y@GRAD are views of Out@GRAD: a later op donated
    one of them must not write into the buffer the other (fetched) still shows."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()), pg.unique_name.guard():
        a, b = pg.data("a", [2, 3]), pg.data("b", [2, 3])
        a.stop_gradient = b.stop_gradient = False
        da, db = pg.gradients([pg.mean(a + b)], [a, b])
        s = da * 2.0
    feed = {"a": np.ones((2, 3), np.float32), "b": np.ones((2, 3), np.float32)}
    got_db, got_s = Executor().run(main, feed=feed, fetch_list=[db, s], scope=Scope())
    np.testing.assert_allclose(got_db, np.full((2, 3), 1 / 6), rtol=1e-6)
    np.testing.assert_allclose(got_s, np.full((2, 3), 1 / 3), rtol=1e-6)


@pytest.mark.parametrize("family", ["mlp", "cnn", "transformer"])
def test_kernels_never_return_an_input_object(family):
    """Donation relies on it: two variables of a run never hold the same array object
    (a view is a different object and is never written in place)."""
    from test_model_families import build
    main, startup, _, _, loss, feed = build(family)
    exe, scope = Executor(keep_intermediates=True), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    seen = {}
    for name in scope:
        var = main.global_block().find_var(name)
        if var is None or var.persistable or name in feed:
            continue
        value = scope.get(name)
        assert id(value) not in seen, f"{name} and {seen.get(id(value))} are the same array"
        seen[id(value)] = name


def test_a_failing_later_op_is_named_by_its_own_index():
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 3], need_check_feed=True)
    b.create_var("y", [-1, 3], need_check_feed=True)
    for name in ("s", "t", "z"):
        b.create_var(name)
    b.append_op("scale", {"X": "x"}, {"Out": "s"}, {"scale": 2.0})
    b.append_op("tanh", {"X": "s"}, {"Out": "t"})
    b.append_op("elementwise_add", {"X": "t", "Y": "y"}, {"Out": "z"})
    with pytest.raises(ExecutionError, match=r"elementwise_add \(op 2\)"):
        Executor().run(p, feed={"x": np.ones((2, 3), np.float32), "y": np.ones((3, 3), np.float32)},
                       fetch_list=["z"])


UFUNC_OPS = ["tanh", "exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "sin", "cos"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op_type", UFUNC_OPS + ["scale_add", "scale_mul"])
def test_ops_the_executor_calls_as_one_ufunc_match_their_kernels(op_type, dtype):
    """scale and the plain unary math ops are made by the executor as one ufunc call
    (kernels.registry.UfuncCall), into a donated buffer where there is one: the results
    equal the general kernel's, for a fed input (not donated, left untouched), an
    intermediate (donated) and a 0-d input."""
    from keel.executor.kernel_call import call_kernel
    op, attrs = {"scale_add": ("scale", {"bias": 0.5}), "scale_mul": ("scale", {"scale": 3.0})}.get(
        op_type, (op_type, {}))
    for shape in ([2, 3], []):
        p = pg.Program()
        b = p.global_block()
        b.create_var("x", shape, dtype, need_check_feed=True)
        for name in ("fed_out", "mid", "donated_out"):
            b.create_var(name, shape, dtype)
        b.append_op(op, {"X": "x"}, {"Out": "fed_out"}, attrs)          # X is a feed
        b.append_op("scale", {"X": "x"}, {"Out": "mid"}, {"scale": 0.5})  # an intermediate...
        b.append_op(op, {"X": "mid"}, {"Out": "donated_out"}, attrs)     # ...donated here
        xv = np.random.default_rng(0).uniform(0.2, 2.0, shape).astype(dtype)
        before = xv.copy()
        fed_out, donated_out = Executor().run(p, feed={"x": xv}, fetch_list=["fed_out", "donated_out"],
                                              scope=Scope())
        np.testing.assert_array_equal(xv, before)
        want_fed = call_kernel(op, {"X": before}, attrs)["Out"]
        want_donated = call_kernel(op, {"X": before * np.asarray(0.5, dtype)}, attrs)["Out"]
        for got, want in ((fed_out, want_fed), (donated_out, want_donated)):
            assert isinstance(got, np.ndarray) and got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


def test_prepared_run_matches_run_checks_feeds_and_follows_program_changes():
    p, x = _chain_program()
    exe, scope = Executor(), Scope()
    call = exe.prepare(p, ["x"], ["c", "d"], scope)
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    for got, want in zip(call({"x": xv}), exe.run(p, feed={"x": xv}, fetch_list=["c", "d"], scope=scope)):
        np.testing.assert_array_equal(got, want)
    with pytest.raises(FeedError, match="'x'.*shape"):
        call({"x": np.ones((2, 4), np.float32)})
    with pytest.raises(FeedError, match=r"takes feeds \['x'\], got \['y'\]"):
        call({"y": xv})
    # the program changes after prepare: the next call compiles it again
    c_before, _ = call({"x": xv})
    p.global_block().append_op("scale", {"X": "c"}, {"Out": "c"}, {"scale": 2.0})
    c_after, _ = call({"x": xv})
    np.testing.assert_array_equal(c_after, 2 * c_before)


def test_prepared_run_without_feed_checks_takes_values_as_given():
    p, _ = _chain_program()
    call = Executor().prepare(p, ["x"], ["c"], Scope(), check_feed=False)
    xv = np.arange(6, dtype=np.float64).reshape(2, 3)  # not cast to the declared float32
    c, = call({"x": xv})
    assert c.dtype == np.float64
    np.testing.assert_array_equal(c, (2 * xv) ** 2 - xv)


@pytest.mark.parametrize("in_shape,num_col_dims,bias_shape,act", [
    ([4, 6], 1, [5], "relu"), ([4, 6], 1, [1, 5], ""), ([2, 3, 6], 2, [5], "relu"),
    ([2, 3, 2], 1, [5], "relu"), ([4, 6], 1, [5], "gelu"), ([2, 3, 2, 2], 1, [5], "relu"),
    ([2, 3, 2, 2], 2, [5], ""),
    # W [512, 512] is large enough for the few-row formulations of kernels/math.py `_gemm`
    ([1, 512], 1, [512], "relu"), ([4, 512], 1, [512], "relu"), ([20, 512], 1, [1, 512], "relu"),
    ([40, 512], 1, [512], "")])
@pytest.mark.parametrize("w_order", ["C", "F"])
def test_executors_fc_path_matches_the_fc_kernel(in_shape, num_col_dims, bias_shape, act, w_order):
    """fc's specialized path (matmul, bias and ReLU in place, no flattening where the rank
    allows) gives the general kernel's results, NaN and -0 handling included, also with W
    column-major as column_major_weights stores it and for the few-row formulations."""
    from keel.executor.kernel_call import call_kernel
    k, n = int(np.prod(in_shape[num_col_dims:])), bias_shape[-1]
    p = pg.Program()
    b = p.global_block()
    for name, shape in (("x", in_shape), ("w", [k, n]), ("bias", bias_shape)):
        b.create_var(name, shape, "float32", need_check_feed=True)
    b.create_var("out", None, "float32")
    attrs = {"in_num_col_dims": num_col_dims, "activation_type": act}
    b.append_op("fc", {"Input": "x", "W": "w", "Bias": "bias"}, {"Out": "out"}, attrs)
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal(in_shape).astype(np.float32),
            "w": rng.standard_normal((k, n)).astype(np.float32),
            "bias": rng.standard_normal(bias_shape).astype(np.float32)}
    feed["w"] = np.asarray(feed["w"], order=w_order)
    feed["x"].flat[0] = np.nan
    got, = Executor().run(p, feed=feed, fetch_list=["out"], scope=Scope())
    want = call_kernel("fc", {"Input": feed["x"], "W": feed["w"], "Bias": feed["bias"]}, attrs)["Out"]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("setting,expected", [(None, "True"), ("0", "False")])
def test_malloc_tuning_applies_on_glibc_and_can_be_turned_off(setting, expected):
    """Executor() keeps freed memory mapped (executor/memory.py) unless KEEL_TUNE_MALLOC=0."""
    import os
    import subprocess
    import sys
    import platform
    if platform.libc_ver()[0] != "glibc":
        pytest.skip("mallopt is glibc's")
    env = {k: v for k, v in os.environ.items() if k != "KEEL_TUNE_MALLOC"}
    if setting is not None:
        env["KEEL_TUNE_MALLOC"] = setting
    code = "from keel.executor import Executor; from keel.executor import memory; Executor(); print(memory._tuned)"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert out.stdout.strip() == expected


def _sqrt_scale_log(factor):
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 3], "float32", need_check_feed=True)
    for name in ("s", "r", "n", "y"):
        b.create_var(name, [-1, 3], "float32")
    b.append_op("scale", {"X": "x"}, {"Out": "s"}, {"scale": 2.0})   # reads the feed: its own run
    b.append_op("sqrt", {"X": "s"}, {"Out": "r"})
    b.append_op("scale", {"X": "r"}, {"Out": "n"}, {"scale": factor})
    b.append_op("log", {"X": "n"}, {"Out": "y"})
    return p


def _op_lines(source):
    """plan_source's lines by op index (each line's `# op N` annotation)."""
    by_op = {}
    for line in source.splitlines():
        if "  # op " in line:
            code, note = line.split("  # op ", 1)
            by_op.setdefault(int(note.split()[0]), []).append(code.strip())
    return by_op


def test_chained_ufunc_steps_run_as_one_and_a_failure_names_its_own_op():
    """sqrt -> scale -> log on dead intermediates are each one direct ufunc call of the
    generated function, written into the previous op's buffer, and give the ops' values;
    an error inside the chain still names the op that failed, its index and its input's
    shape."""
    exe = Executor()
    xv = np.array([[1.0, 2.0, 8.0]], np.float32)
    y, = exe.run(_sqrt_scale_log(3.0), feed={"x": xv}, fetch_list=["y"], scope=Scope())
    np.testing.assert_allclose(y, np.log(np.sqrt(xv * 2) * 3), rtol=1e-6)
    ops = _op_lines(exe.plan_source(_sqrt_scale_log(3.0), ["x"], ["y"]))
    assert sorted(ops) == [0, 1, 2, 3] and "out=" not in ops[0][0]   # scale reads the feed
    for i in (1, 2, 3):   # one call into its (owned, donated) input's buffer, then a del
        target, call = ops[i][0].split(" = ")
        assert ops[i][1:] == [f"del {call.split('(')[1].split(',')[0].rstrip(')')}"]
        assert call.endswith(f"out={ops[i][1][4:]})")
    with np.errstate(invalid="raise"):
        with pytest.raises(ExecutionError, match=r"sqrt \(op 1\).*s\[1, 3\]"):
            exe.run(_sqrt_scale_log(3.0), feed={"x": -xv}, fetch_list=["y"], scope=Scope())
        with pytest.raises(ExecutionError, match=r"log \(op 3\).*n\[1, 3\]"):
            exe.run(_sqrt_scale_log(-1.0), feed={"x": xv}, fetch_list=["y"], scope=Scope())


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_binary_ufunc_steps_inline_chain_and_broadcast_like_the_kernels(dtype):
    """elementwise add/sub/mul with axis -1 are made in the step (and chained): a Y that
    broadcasts X to a bigger shape falls back to a fresh array, a Y read for the last time
    is dropped, feeds and fetched values keep their values; results equal the kernels'."""
    from keel.executor.kernel_call import call_kernel
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 1], dtype, need_check_feed=True)      # [N, 1]
    b.create_var("y", [-1, 5], dtype, need_check_feed=True)      # [N, 5]
    b.create_var("r", [5], dtype, need_check_feed=True)          # a row
    for name in ("t", "s", "m", "d", "o"):
        b.create_var(name, [-1, 5] if name != "t" else [-1, 1], dtype)
    b.append_op("scale", {"X": "x"}, {"Out": "t"}, {"scale": 3.0})           # [N, 1], donated next
    b.append_op("elementwise_add", {"X": "t", "Y": "y"}, {"Out": "s"})      # broadcasts t: fresh
    b.append_op("elementwise_mul", {"X": "s", "Y": "r"}, {"Out": "m"})      # in place into s
    b.append_op("elementwise_sub", {"X": "m", "Y": "y"}, {"Out": "d"})      # y's last use
    b.append_op("elementwise_add", {"X": "d", "Y": "r"}, {"Out": "o"})
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((4, 1)).astype(dtype), "y": rng.standard_normal((4, 5)).astype(dtype),
            "r": rng.standard_normal(5).astype(dtype)}
    before = {k: v.copy() for k, v in feed.items()}
    exe = Executor()
    o, s = exe.run(p, feed=feed, fetch_list=["o", "s"], scope=Scope())
    for k in feed:
        np.testing.assert_array_equal(feed[k], before[k])
    k = lambda op, x, y: call_kernel(op, {"X": x, "Y": y}, {"axis": -1})["Out"]  # noqa: E731
    want_s = k("elementwise_add", before["x"] * np.asarray(3.0, dtype), before["y"])
    want_o = k("elementwise_add", k("elementwise_sub", k("elementwise_mul", want_s, before["r"]), before["y"]),
               before["r"])
    np.testing.assert_array_equal(s, want_s)
    np.testing.assert_array_equal(o, want_o)
    assert o.dtype == dtype
    # s is fetched, so the mul does not write into it; the others are direct ufunc calls,
    # into a donated X (a try for the one whose Y may broadcast X)
    ops = _op_lines(exe.plan_source(p, ["x", "y", "r"], ["o", "s"]))
    assert "out=" not in ops[0][0] and ops[1][0] == "try:" and "out=" in ops[1][1]
    assert "out=" not in "".join(ops[2])
    for i in (3, 4):
        assert ops[i][0] == "try:" and "out=" in ops[i][1]


def _reshape_transpose_program():
    """x -> scale -> t -> reshape2 (XShape xs) -> r -> transpose2 -> u -> relu -> y, and
    z = relu(t) read before the reshape (t's last reader is the reshape)."""
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 6], "float32", need_check_feed=True)
    for name, shape in (("t", [-1, 6]), ("z", [-1, 6]), ("r", [-1, 3, 2]), ("xs", [0, -1, 6]),
                        ("u", [-1, 2, 3]), ("y", [-1, 2, 3]), ("w", [-1, 2, 3])):
        b.create_var(name, shape, "float32")
    b.append_op("scale", {"X": "x"}, {"Out": "t"}, {"scale": -2.0})
    b.append_op("relu", {"X": "t"}, {"Out": "z"})
    b.append_op("reshape2", {"X": "t"}, {"Out": "r", "XShape": "xs"}, {"shape": [0, 3, 2]})
    b.append_op("transpose2", {"X": "r"}, {"Out": "u"}, {"axis": [0, 2, 1]})
    b.append_op("relu", {"X": "u"}, {"Out": "y"})              # u is a view: not written into
    b.append_op("elementwise_add", {"X": "y", "Y": "y"}, {"Out": "w"})
    return p


def test_reshape_and_transpose_of_dead_intermediates_are_views_and_unread_outputs_are_not_made():
    """A reshape2/transpose2 whose X nobody reads afterwards gives a view of X (no copy), an
    XShape nobody reads is not made, and the ops after a view do not write into it (values
    as the copying kernels give). Fetching XShape, or X being read later, keeps the copy."""
    xv = np.arange(12, dtype=np.float32).reshape(2, 6) - 5
    t = xv * -2
    want_y = np.maximum(t.reshape(2, 3, 2).transpose(0, 2, 1), 0)
    exe = Executor()
    y, z, w = exe.run(_reshape_transpose_program(), feed={"x": xv}, fetch_list=["y", "z", "w"], scope=Scope())
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(z, np.maximum(t, 0))
    np.testing.assert_array_equal(w, want_y * 2)
    u, = Executor().run(_reshape_transpose_program(), feed={"x": xv}, fetch_list=["u"], scope=Scope())
    assert u.base is not None and not u.flags.c_contiguous   # a strided view (of t's buffer)
    ops = _op_lines(exe.plan_source(_reshape_transpose_program(), ["x"], ["y", "z", "w"]))
    assert ops[2][0].split(" = ")[0].count("v") == 1   # reshape2 binds Out only: XShape unmade
    assert ops[2][1].startswith("del ")                 # t dropped after its last reader
    # XShape fetched: made (shape [0] + X's shape); X read afterwards (fetched): Out is a copy
    xs, = Executor().run(_reshape_transpose_program(), feed={"x": xv}, fetch_list=["xs"], scope=Scope())
    assert xs.shape == (0, 2, 6)
    r, t_got = Executor().run(_reshape_transpose_program(), feed={"x": xv}, fetch_list=["r", "t"], scope=Scope())
    assert r.base is None and not np.shares_memory(r, t_got)
    np.testing.assert_array_equal(r, t.reshape(2, 3, 2))
    np.testing.assert_array_equal(t_got, t)


@pytest.mark.parametrize("num_col_dims", [1, 2])
def test_fc_fast_path_on_a_strided_input(num_col_dims):
    """The fc fast path on a non-contiguous Input (a transposed view, as the reshape
    family now gives) equals the general kernel, flattening or multiplying the stack."""
    from keel.executor.kernel_call import call_kernel
    from keel.kernels import registry as kernel_registry
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 4, 6)).astype(np.float32).transpose(1, 0, 2)   # [4, 3, 6], strided
    k = int(np.prod(x.shape[num_col_dims:]))
    w, bias = rng.standard_normal((k, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    attrs = {"in_num_col_dims": num_col_dims, "activation_type": "relu", "padding_weights": False}
    f32 = np.dtype(np.float32)
    fast = kernel_registry.get("fc").specialize(np, attrs, (f32, f32, f32), False)
    want = call_kernel("fc", {"Input": x, "W": w, "Bias": bias}, attrs)["Out"]
    got = fast(x, w, bias)
    assert got.shape == want.shape == x.shape[:num_col_dims] + (5,)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_fetching_a_parameter_returns_its_value_with_or_without_the_ops_that_read_it():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 3])
        y = pg.nn.fc(x, 2)
    scope, exe = Scope(), Executor()
    exe.run(startup, scope=scope)
    w = main.all_parameters()[0].name
    out, got = exe.run(main, feed={"x": np.ones((1, 3), np.float32)}, fetch_list=[y, w], scope=scope)
    np.testing.assert_array_equal(got, scope.get(w))
    alone, = exe.run(main, feed={}, fetch_list=[w], scope=scope)       # no op runs at all
    np.testing.assert_array_equal(alone, scope.get(w))
    alone[:] = 0                                                        # a copy: the scope keeps its value
    assert np.abs(scope.get(w)).max() > 0
