"""The executor's thread pool (num_threads > 1): which ops of a dependency level it hands to
threads (executor/plan.py `threaded_steps`), that the pooled function computes what the
serial one does, and that the profiler times the levels it did not pool op by op."""
import dataclasses
import sys
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.executor.inference import Config, create_predictor
from keel.executor.plan import THREAD_MIN_ELEMENTS, threaded_steps
from keel.executor.profiler import op_intervals

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "zoo"))
try:
    from zoo_files import feeds, unpack
finally:
    sys.path.pop(0)

BIG = [-1, 256, 256]  # 65536 elements per sample: an op on it touches 2 x THREAD_MIN_ELEMENTS


def _branches(shape, ops=("exp", "tanh", "sigmoid", "relu")):
    """x -> one op per branch -> their sum; every branch in level 0."""
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", shape, "float32", need_check_feed=True)
    outs = []
    for i, op in enumerate(ops):
        b.create_var(f"y{i}", shape, "float32")
        b.append_op(op, {"X": "x"}, {"Out": f"y{i}"})
        outs.append(f"y{i}")
    b.create_var("out", shape, "float32")
    b.append_op("sum", {"X": outs}, {"Out": "out"})
    return p


def _plan(exe, p, feeds_, fetches):
    return exe._plan(p, 0, dict.fromkeys(feeds_), fetches)


def test_large_independent_ops_go_to_the_pool_and_compute_what_the_serial_run_does():
    assert 2 * 256 * 256 >= THREAD_MIN_ELEMENTS
    p = _branches(BIG)
    exe = Executor(num_threads=2)
    plan = _plan(exe, p, ["x"], ["out"])
    assert plan.levels[0] == [0, 1, 2, 3]
    # all four are as large: the last runs in the calling thread while the pool runs the rest
    assert plan.pooled[0] == (0, 1, 2) and plan.has_parallel_levels
    assert exe.plan_source(p, ["x"], ["out"]).count("submit(") == 3
    xv = np.random.default_rng(0).standard_normal((2, 256, 256)).astype(np.float32)
    serial, = Executor().run(p, feed={"x": xv}, fetch_list=["out"], scope=Scope())
    for _ in range(5):
        pooled, = exe.run(p, feed={"x": xv}, fetch_list=["out"], scope=Scope())
        np.testing.assert_array_equal(pooled, serial)
    np.testing.assert_allclose(serial, np.exp(xv) + np.tanh(xv) + 1 / (1 + np.exp(-xv)) + np.maximum(xv, 0),
                               rtol=1e-5, atol=1e-6)
    exe.close()


def test_a_level_of_small_ops_runs_serially():
    p = _branches([-1, 64])
    exe = Executor(num_threads=2)
    plan = _plan(exe, p, ["x"], ["out"])
    assert len(plan.levels[0]) == 4 and plan.pooled[0] == ()
    assert not plan.has_parallel_levels and "submit(" not in exe.plan_source(p, ["x"], ["out"])
    exe.close()


def test_one_large_op_among_small_ones_is_not_submitted():
    """One large op gains nothing from a thread of its own: nothing large runs beside it."""
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", BIG, "float32", need_check_feed=True)
    b.create_var("s", [-1, 8], "float32", need_check_feed=True)
    for n, shape in (("a", BIG), ("c", [-1, 8]), ("d", [-1, 8])):
        b.create_var(n, shape, "float32")
    b.append_op("exp", {"X": "x"}, {"Out": "a"})
    b.append_op("tanh", {"X": "s"}, {"Out": "c"})
    b.append_op("relu", {"X": "s"}, {"Out": "d"})
    plan = _plan(Executor(), p, ["x", "s"], ["a", "c", "d"])
    assert plan.levels == [[0, 1, 2]] and plan.pooled == ((),)


def test_a_conv_counts_its_multiply_adds():
    """Two 3x3 convs of 64 channels on an 8x8 map touch 45056 elements each, fewer than
    THREAD_MIN_ELEMENTS, but do 2.4 M multiply-adds: worth a thread. The same convs of 4
    channels (9216 multiply-adds) are not."""
    def plan_of(channels):
        p = pg.Program()
        b = p.global_block()
        b.create_var("x", [-1, channels, 8, 8], "float32", need_check_feed=True)
        for i in range(2):
            b.create_var(f"w{i}", [channels, channels, 3, 3], "float32", persistable=True)
            b.create_var(f"y{i}", [-1, channels, 8, 8], "float32")
            b.append_op("conv2d", {"Input": "x", "Filter": f"w{i}"}, {"Output": f"y{i}"},
                        {"strides": [1, 1], "paddings": [1, 1], "dilations": [1, 1], "groups": 1})
        return _plan(Executor(), p, ["x"], ["y0", "y1"])
    assert plan_of(64).pooled == ((0,),)
    assert plan_of(4).pooled == ((),)


def test_the_largest_op_stays_in_the_calling_thread_and_control_flow_is_never_submitted():
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", BIG, "float32", need_check_feed=True)
    b.create_var("w", [-1, 512, 256], "float32", need_check_feed=True)
    for n, shape in (("a", BIG), ("c", [-1, 512, 256])):
        b.create_var(n, shape, "float32")
    b.append_op("exp", {"X": "w"}, {"Out": "c"})   # twice as large: run here
    b.append_op("exp", {"X": "x"}, {"Out": "a"})
    plan = _plan(Executor(), p, ["x", "w"], ["a", "c"])
    assert plan.pooled == ((1,),)
    steps = [plan.steps[0], dataclasses.replace(plan.steps[1], sub=object())]  # as if a conditional_block
    assert threaded_steps(p.global_block(), steps, [0, 1]) == ()


def test_the_profiler_times_a_level_it_did_not_pool_op_by_op():
    """Level 0 (two exps) and level 1 (their sums, reading them) go through the pool; level
    2 (two small scales) runs serially: its ops get intervals of their own."""
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", BIG, "float32", need_check_feed=True)
    for n in ("a", "t"):
        b.create_var(n, BIG, "float32")
    for n in ("sa", "st", "u", "v", "out"):
        b.create_var(n, [1], "float32")
    b.append_op("exp", {"X": "x"}, {"Out": "a"})
    b.append_op("tanh", {"X": "x"}, {"Out": "t"})
    b.append_op("reduce_sum", {"X": "a"}, {"Out": "sa"}, {"reduce_all": True})
    b.append_op("reduce_sum", {"X": "t"}, {"Out": "st"}, {"reduce_all": True})
    b.append_op("scale", {"X": "sa"}, {"Out": "u"}, {"scale": 2.0})
    b.append_op("scale", {"X": "st"}, {"Out": "v"}, {"scale": 3.0})
    b.append_op("elementwise_add", {"X": "u", "Y": "v"}, {"Out": "out"})
    exe = Executor(num_threads=2, profile=True)
    plan = _plan(exe, p, ["x"], ["out"])
    assert plan.levels == [[0, 1], [2, 3], [4, 5], [6]]
    assert plan.pooled == ((0,), (2,), (), ())
    clock = [float(i) for i in range(len(plan.steps) + 1)]
    assert op_intervals(plan, clock, True) == [
        (0, 0.0, 2.0, 2), (1, 0.0, 2.0, 2), (2, 2.0, 4.0, 2), (3, 2.0, 4.0, 2),
        (4, 4.0, 5.0, 1), (5, 5.0, 6.0, 1), (6, 6.0, 7.0, 1)]
    xv = np.random.default_rng(1).standard_normal((1, 256, 256)).astype(np.float32) * 0.1
    got, = exe.run(p, feed={"x": xv}, fetch_list=["out"], scope=Scope())
    want = 2 * np.exp(xv.astype(np.float64)).sum() + 3 * np.tanh(xv.astype(np.float64)).sum()
    np.testing.assert_allclose(got, [want], rtol=1e-4)
    assert [t for _, t, _ in exe.last_profile] == ["exp", "tanh", "reduce_sum", "reduce_sum", "scale", "scale",
                                                    "elementwise_add"]
    exe.close()


@pytest.mark.parametrize("name", ["squeezenet1_0", "inception_v3"])
def test_a_zoo_model_run_through_the_pool_gives_the_serial_outputs(name, tmp_path, monkeypatch):
    """Every wide level submitted (the size threshold off): the 2-thread predictor's
    outputs are the 1-thread one's."""
    monkeypatch.setattr("keel.executor.plan.THREAD_MIN_ELEMENTS", 0)
    prefix, recorded = unpack(name, tmp_path)
    inputs = feeds(recorded)
    got = {}
    for threads in (1, 2):
        config = Config(str(prefix.with_suffix(".pdmodel")), str(prefix.with_suffix(".pdiparams")))
        config.set_cpu_math_library_num_threads(threads)
        predictor = create_predictor(config)
        got[threads] = [predictor.run([inputs[n] for n in predictor.get_input_names()]) for _ in range(3)]
        if threads == 2:
            plans = [plan for entry in predictor._executor._plans.values() for plan in entry[2].values()]
            assert sum(bool(t) for plan in plans for t in plan.pooled) >= 8
    for serial, pooled in zip(got[1], got[2]):
        for s, q in zip(serial, pooled):
            np.testing.assert_allclose(q, s, rtol=1e-6, atol=1e-6 * float(np.abs(s).max()))


def test_pooled_steps_run_in_the_callers_numpy_errstate():
    """An AMP plan runs with numpy's floating-point warnings off; its pooled steps too."""
    from concurrent.futures import ThreadPoolExecutor
    from keel.executor.plan import _submit_in_context
    with ThreadPoolExecutor(1) as pool:
        with np.errstate(over="ignore", invalid="ignore"):
            inside = _submit_in_context(pool, np.geterr).result()
        outside = _submit_in_context(pool, np.geterr).result()
    assert inside["over"] == inside["invalid"] == "ignore"
    assert outside == np.geterr()
