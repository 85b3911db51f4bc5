"""The profiler (executor/profiler.py): started around runs, attached to an executor or a
Predictor (Config.enable_profile); its tables per op type and per op; its Chrome trace,
loaded back as JSON; concurrent levels; tools/profile_model.py; and the plain generated
function when nothing records."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Config, Executor, Profiler, Scope, create_predictor
from keel.executor.profiler import SORT_KEYS

ROOT = Path(__file__).resolve().parent.parent


def _mlp():
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 5
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x = pg.data("x", [-1, 8])
        h = pg.nn.fc(x, 16, activation="relu")
        y = pg.nn.softmax(pg.nn.fc(h, 4))
    return main, startup, x, y


def _ready():
    main, startup, x, y = _mlp()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    return main, x, y, exe, scope


def _saved(tmp_path):
    main, x, y, exe, scope = _ready()
    prefix = str(tmp_path / "mlp")
    pg.io.save_inference_model(prefix, [x], [y], exe, program=main, scope=scope)
    return prefix


def test_started_profiler_records_every_run_per_op_and_type():
    main, x, y, exe, scope = _ready()
    xv = np.ones((3, 8), np.float32)
    want, = exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scope)
    with Profiler() as prof:
        for _ in range(4):
            got, = exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scope)
            prof.step()
    exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scope)  # stopped: not recorded
    np.testing.assert_array_equal(got, want)
    ops = main.global_block().ops
    assert len(prof.runs) == 4 and len(prof.steps) == 4
    types = prof.op_types()
    counts = {}
    for op in ops:
        counts[op.type] = counts.get(op.type, 0) + 4
    assert {k: s.calls for k, s in types.items()} == counts
    per_op = prof.ops()
    assert sorted(per_op) == [(1, 0, i) for i in range(len(ops))]
    for (_, _, i), s in per_op.items():
        assert s.name.startswith(ops[i].type + " -> ") and s.calls == 4
        assert 0 <= s.min <= s.avg <= s.max and s.min <= s.median <= s.max and s.total == pytest.approx(4 * s.avg)
    assert per_op[(1, 0, 0)].shapes == ((3, 8), (8, 16))  # the first fc's inputs: x and its weight
    op_time = sum(s.total for s in types.values())
    assert 0 < op_time <= prof.run_time()
    text = prof.summary()
    assert "4 run(s) of 1 program(s)" in text and "Op types, by total" in text
    for kind in counts:
        assert f"\n{kind} " in text
    rows = [line for line in text.splitlines() if line.split()[:1] and line.split()[0] in counts]
    assert sum(float(r.split()[-1]) for r in rows) == pytest.approx(100, abs=0.1 * len(rows))
    assert "[3,8] [8,16]" in text


def test_summary_sorting_units_and_bad_keys():
    main, x, y, exe, scope = _ready()
    with Profiler() as prof:
        for _ in range(2):
            exe.run(main, feed={"x": np.ones((2, 8), np.float32)}, fetch_list=[y], scope=scope)
    for key in SORT_KEYS:
        assert f"by {key}" in prof.summary(sorted_by=key, time_unit="us")
    by_calls = prof.summary(sorted_by="calls", op_detail=False).splitlines()
    header = next(i for i, line in enumerate(by_calls) if line.startswith("Op type ") and "Calls" in line)
    first = by_calls[header + 2]
    assert first.split()[0] == max(prof.op_types().values(), key=lambda s: s.calls).name
    assert "Top" not in prof.summary(op_detail=False)
    with pytest.raises(ValueError, match="sorted_by"):
        prof.summary(sorted_by="fastest")
    with pytest.raises(ValueError, match="time_unit"):
        prof.summary(time_unit="min")
    with pytest.raises(ValueError, match="json"):
        prof.export("x.pb", format="protobuf")
    assert "no run recorded" in Profiler().summary()


def test_chrome_trace_events(tmp_path):
    main, x, y, exe, scope = _ready()
    ops = main.global_block().ops
    with Profiler() as prof:
        for _ in range(2):
            exe.run(main, feed={"x": np.ones((5, 8), np.float32)}, fetch_list=[y], scope=scope)
            prof.step()
    path = tmp_path / "trace.json"
    prof.export(path)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    op_events = [e for e in events if e.get("cat") == "op"]
    runs = [e for e in events if e.get("cat") == "run"]
    steps = [e for e in events if e.get("cat") == "step"]
    assert len(op_events) == 2 * len(ops) and len(runs) == 2 and len(steps) == 2
    for e in events:
        assert e["pid"] == os.getpid() and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert isinstance(e["ts"], float) and e["dur"] >= 0
        else:
            assert e["ph"] == "M" and e["name"] in ("process_name", "thread_name")
    for r, run in enumerate(runs):
        mine = [e for e in op_events if e["args"]["run"] == r]
        assert [e["name"] for e in mine] == [op.type for op in ops]
        assert [e["args"]["op_index"] for e in mine] == list(range(len(ops)))
        assert [e["args"]["op_type"] for e in mine] == [op.type for op in ops]
        assert all(e["tid"] == run["tid"] for e in mine)
        # the ops follow each other inside their run's span (microseconds, one clock)
        assert run["ts"] <= mine[0]["ts"]
        for a, b in zip(mine, mine[1:]):
            assert b["ts"] == pytest.approx(a["ts"] + a["dur"], abs=1e-3)
        assert mine[-1]["ts"] + mine[-1]["dur"] <= run["ts"] + run["dur"] + 1e-3
        assert mine[0]["args"]["input_shapes"] == [[5, 8], [8, 16]]
        assert mine[0]["args"]["inputs"] == list(ops[0].input("X") + ops[0].input("Y"))
    # durations are the profiler's own figures, in microseconds
    total_us = sum(e["dur"] for e in op_events)
    assert total_us == pytest.approx(1e6 * sum(s.total for s in prof.op_types().values()), rel=1e-6)
    assert steps[0]["ts"] <= runs[0]["ts"] and steps[1]["ts"] >= runs[0]["ts"] + runs[0]["dur"] - 1e-3


def test_concurrent_ops_share_their_levels_interval(monkeypatch):
    monkeypatch.setattr("keel.executor.plan.THREAD_MIN_ELEMENTS", 0)  # submit even these small ops
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 64], "float32", need_check_feed=True)
    for n in ("a", "s", "t", "out"):
        b.create_var(n, [-1, 64], "float32")
    b.append_op("relu", {"X": "x"}, {"Out": "a"})
    b.append_op("sigmoid", {"X": "x"}, {"Out": "s"})
    b.append_op("tanh", {"X": "x"}, {"Out": "t"})
    b.append_op("sum", {"X": ["a", "s", "t"]}, {"Out": "out"})
    exe = Executor(num_threads=2, profile=True)
    xv = np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32)
    with Profiler() as prof:
        got, = exe.run(p, feed={"x": xv}, fetch_list=["out"], scope=Scope())
    np.testing.assert_allclose(got, np.maximum(xv, 0) + 1 / (1 + np.exp(-xv)) + np.tanh(xv), rtol=1e-5)
    events = [e for e in prof.chrome_trace()["traceEvents"] if e.get("cat") == "op"]
    level = events[:3]
    assert [e["name"] for e in level] == ["relu", "sigmoid", "tanh"]
    assert all(e["args"]["concurrent_ops"] == 3 for e in level)
    assert len({e["tid"] for e in level}) == 3 and len({(e["ts"], e["dur"]) for e in level}) == 1
    assert events[3]["ts"] == pytest.approx(level[0]["ts"] + level[0]["dur"], abs=1e-3)
    types = prof.op_types()
    assert types["relu"].total == pytest.approx(level[0]["dur"] / 3e6)
    # the executor's own last_profile splits the level the same way, in op order
    assert [t for _, t, _ in exe.last_profile] == ["relu", "sigmoid", "tanh", "sum"]
    assert exe.last_profile[0][2] == pytest.approx(exe.last_profile[2][2])


def test_predictor_enable_profile_aggregates_its_runs_and_clones(tmp_path):
    prefix = _saved(tmp_path)
    plain = create_predictor(Config(prefix))
    assert plain.profiler is None
    config = Config(prefix)
    assert not config.profile_enabled()
    config.enable_profile()
    assert config.profile_enabled() and "enable_profile" in config.summary()
    pred = create_predictor(config)
    xv = np.random.default_rng(1).standard_normal((2, 8)).astype(np.float32)
    want = plain.run([xv])[0]
    for _ in range(3):
        np.testing.assert_array_equal(pred.run([xv])[0], want)
    clone = pred.clone()
    thread = threading.Thread(target=clone.run, args=([xv],))
    thread.start()
    thread.join()
    assert clone.profiler is pred.profiler and len(pred.profiler.runs) == 4
    assert len({run.thread for run in pred.profiler.runs}) == 2
    calls = {k: s.calls for k, s in pred.profiler.op_types().items()}
    assert set(calls) == {op.type for op in pred._program.global_block().ops if op.type not in ("feed", "fetch")}
    assert all(n % 4 == 0 for n in calls.values())
    plain.run([xv])
    assert len(pred.profiler.runs) == 4  # another predictor's runs are not its own
    pred.profiler.reset()
    assert pred.profiler.runs == [] and "no run recorded" in pred.profiler.summary()


def test_nothing_recording_runs_the_plain_function():
    main, x, y, exe, scope = _ready()
    feed = {"x": np.ones((2, 8), np.float32)}
    exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    plan, = exe._plans[id(main)][2].values()
    assert list(plan.functions) == [(False, False, False, None)]
    plain = plan.functions[False, False, False, None]
    assert "now()" not in plain.source and "S.append" not in plain.source
    with Profiler():
        exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    assert (False, "shapes", False, None) in plan.functions
    timed = plan.functions[False, "shapes", False, None].source
    assert "T.append(now())" in timed and "S.append((shape(" in timed
    exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    assert len(plan.functions) == 2 and exe.last_profile is None
    # a profiler without shapes uses the clock-only variant, the one profile=True uses
    with Profiler(record_shapes=False) as prof:
        exe.run(main, feed=feed, fetch_list=[y], scope=scope)
    assert (False, True, False, None) in plan.functions and prof.runs[0].shapes is None
    assert "Input shapes" not in prof.summary()


def test_profile_model_tool(tmp_path):
    prefix = _saved(tmp_path)
    trace = tmp_path / "out.json"
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "profile_model.py"), prefix + ".pdmodel",
                           "--batch", "3", "--repeat", "4", "--warmup", "1", "--threads", "2",
                           "--sort", "calls", "--trace", str(trace)],
                          capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "feeds x float32[3, 8]" in out and "1 warmup + 4 profiled run(s)" in out
    assert "4 run(s) of 1 program(s)" in out and "Op types, by calls" in out and "[3,8]" in out
    events = json.loads(trace.read_text())["traceEvents"]
    assert len([e for e in events if e.get("cat") == "run"]) == 4
    assert len([e for e in events if e.get("cat") == "step"]) == 4
    bad = subprocess.run([sys.executable, str(ROOT / "tools" / "profile_model.py"), str(tmp_path / "none.pdmodel")],
                         capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert bad.returncode == 1 and "error:" in bad.stderr and "none.pdmodel" in bad.stderr
    wrong = subprocess.run([sys.executable, str(ROOT / "tools" / "profile_model.py"), prefix,
                            "--shape", "y=1,8"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert wrong.returncode == 2 and "--shape names ['y']" in wrong.stderr
