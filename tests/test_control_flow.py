"""Control flow: conditional_block / select_input branches, while loops and tensor arrays,
built with pg.static.nn and run by the generated executor (each sub-block its own function);
PaddlePaddle-built control-flow programs (tests/fixtures/control_flow, recorded Paddle
Inference outputs) run by the Predictor."""
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope, inference
from keel.executor.errors import ExecutionError
from keel.program.errors import KeelError
from keel.proto import pb

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "control_flow"
nn = pg.static.nn


def _run(main, feed, fetch, **kwargs):
    return Executor(**kwargs).run(main, feed=feed, fetch_list=fetch, scope=Scope())


def _cond_program():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 3], "float32")
        y = nn.cond(pg.sum(x) > 0.0, lambda: pg.tanh(x) * 2.0, lambda: x - 1.0)
    return main, x, y


@pytest.mark.parametrize("shift", [2.0, -2.0])
def test_cond_runs_the_branch_its_condition_selects(shift):
    main, x, y = _cond_program()
    xv = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32) + shift
    got, = _run(main, {"x": xv}, [y])
    want = np.tanh(xv) * 2 if xv.sum() > 0 else xv - 1
    np.testing.assert_allclose(got, want, rtol=1e-6)
    ops = [op.type for op in main.global_block().ops]
    assert ops.count("conditional_block") == 2 and "select_input" in ops
    assert main.num_blocks == 3 and all(b.parent_idx == 0 for b in main.blocks[1:])


def test_branch_results_of_different_shapes_get_minus_one():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [4, 3], "float32")
        y = nn.cond(pg.sum(x) > 0.0, lambda: x, lambda: pg.concat([x, x], axis=0))
    assert list(y.shape) == [-1, 3]
    xv = -np.ones((4, 3), np.float32)
    got, = _run(main, {"x": xv}, [y])
    assert got.shape == (8, 3)


def test_nested_cond_and_case_and_switch_case():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [1], "float32")
        k = pg.data("k", [1], "int64")
        nested = nn.cond(x > 0.0, lambda: nn.cond(x > 10.0, lambda: x * 100.0, lambda: x * 10.0),
                         lambda: x * 0.0)
        by_case = nn.case([(x > 5.0, lambda: x + 5.0), (x > 0.0, lambda: x + 1.0)], default=lambda: x - 1.0)
        by_index = nn.switch_case(k, {0: lambda: x * 0.0, 2: lambda: x * 2.0}, default=lambda: x * -1.0)
    exe = Executor()
    for xv, kv in ((20.0, 0), (3.0, 2), (-4.0, 1), (7.0, 5)):
        got = exe.run(main, feed={"x": np.array([xv], np.float32), "k": np.array([kv])},
                      fetch_list=[nested, by_case, by_index], scope=Scope())
        want = [xv * 100 if xv > 10 else xv * 10 if xv > 0 else 0.0,
                xv + 5 if xv > 5 else xv + 1 if xv > 0 else xv - 1,
                {0: 0.0, 2: xv * 2}.get(kv, -xv)]
        np.testing.assert_allclose([g[0] for g in got], want, rtol=1e-6)


def _power_program():
    """y = x**n by n multiplications in a while loop."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 3], "float32")
        n = pg.data("n", [1], "int64")
        i = pg.fill_constant([1], "int64", 0)
        y = x * 0.0 + 1.0  # (differentiable, unlike ones_like)
        i, y = nn.while_loop(lambda i, y: i < n, lambda i, y: [i + 1, y * x], [i, y])
    return main, x, n, i, y


@pytest.mark.parametrize("power", [0, 1, 5])
def test_while_loop_repeats_its_body(power):
    main, x, n, i, y = _power_program()
    xv = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    got_i, got_y = _run(main, {"x": xv, "n": np.array([power])}, [i, y])
    assert got_i.tolist() == [power]
    np.testing.assert_allclose(got_y, xv ** power, rtol=1e-5)


def test_a_loop_variable_whose_shape_changes_gets_minus_one():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        i = pg.fill_constant([1], "int64", 0)
        s = pg.fill_constant([1, 2], "float32", 1.0)
        i, s = nn.while_loop(lambda i, s: i < 3, lambda i, s: [i + 1, pg.concat([s, s], axis=0)], [i, s])
    assert list(s.shape) == [-1, 2]
    got, = _run(main, {}, [s])
    assert got.shape == (8, 2)


def test_tensor_arrays():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [2, 3], "float32")
        arr = pg.create_array("float32", [x])
        pg.array_write(x * 2.0, 2, arr)
        pg.array_write(x * 3.0, 1, arr)
        n = pg.array_length(arr)
        second = pg.array_read(arr, 1)
        block = main.current_block()
        stacked = block.create_var("stacked", (), "float32")
        index = block.create_var("index", (), "int32")
        block.append_op("tensor_array_to_tensor", {"X": arr}, {"Out": stacked, "OutIndex": index},
                        {"axis": 1, "use_stack": True})
    xv = np.arange(6, dtype=np.float32).reshape(2, 3)
    got_n, got_second, got_stacked, got_index = _run(main, {"x": xv}, [n, second, stacked, index])
    assert got_n.tolist() == [3] and got_index.tolist() == [1, 1, 1]
    np.testing.assert_array_equal(got_second, xv * 3)
    np.testing.assert_array_equal(got_stacked, np.stack([xv, xv * 3, xv * 2], axis=1))


def _rnn_program(steps=4):
    """An Elman RNN as a while loop over time, the states written to a tensor array."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [2, steps, 3], "float32")
        wx = pg.create_parameter([3, 5], "float32", name="wx")
        wh = pg.create_parameter([5, 5], "float32", name="wh")
        states = pg.create_array("float32")
        t = pg.fill_constant([1], "int64", 0)
        h = pg.fill_constant([2, 5], "float32", 0.0)

        def body(t, h):
            x_t = pg.squeeze(pg.gather(x, t, axis=1), [1])
            h = pg.tanh(pg.matmul(x_t, wx) + pg.matmul(h, wh))
            pg.array_write(h, t, states)
            return [t + 1, h]
        nn.while_loop(lambda t, h: t < steps, body, [t, h])
        block = main.current_block()
        out = block.create_var("rnn_out", (), "float32")
        index = block.create_var("rnn_index", (), "int32")
        block.append_op("tensor_array_to_tensor", {"X": states}, {"Out": out, "OutIndex": index},
                        {"axis": 1, "use_stack": True})
    return main, startup, x, out


def test_rnn_over_a_tensor_array_matches_a_python_loop():
    main, startup, x, out = _rnn_program()
    exe, scope = Executor(seed=3), Scope()
    exe.run(startup, scope=scope)
    xv = np.random.default_rng(2).standard_normal((2, 4, 3)).astype(np.float32)
    got, = exe.run(main, feed={"x": xv}, fetch_list=[out], scope=scope)
    wx, wh = np.asarray(scope.get("wx")), np.asarray(scope.get("wh"))
    h, want = np.zeros((2, 5), np.float32), []
    for t in range(4):
        h = np.tanh(xv[:, t] @ wx + h @ wh)
        want.append(h)
    np.testing.assert_allclose(got, np.stack(want, axis=1), rtol=1e-5, atol=1e-6)


def test_each_sub_block_is_a_generated_function_of_its_own():
    main, x, n, i, y = _power_program()
    exe = Executor()
    source = exe.plan_source(main, ["x", "n"], [y])
    assert "while k" in source and "# block 1 (a sub-block)" in source and "def block_1(" in source
    feed = {"x": np.ones((1, 3), np.float32), "n": np.array([2])}
    exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
    (plan,) = exe._plans[id(main)][2].values()
    body = plan.steps[-1].sub.plan
    made = dict(body.functions)
    exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
    assert len(exe._plans[id(main)][2]) == 1 and body.functions == made  # cached with its plan


def test_profile_and_nan_checks_cover_control_flow():
    main, x, n, i, y = _power_program()
    feed = {"x": np.full((1, 3), 2.0, np.float32), "n": np.array([3])}
    exe = Executor(profile=True)
    got, = exe.run(main, feed=feed, fetch_list=[y], scope=Scope())
    np.testing.assert_array_equal(got, np.full((1, 3), 8.0))
    assert any(op_type == "while" for _, op_type, _ in exe.last_profile)
    feed["x"] = np.full((1, 3), 1e30, np.float32)
    with pytest.raises(KeelError, match=r"elementwise_mul \(op \d+ of block 1\) produced a non-finite"), \
            np.errstate(over="ignore"):
        Executor(check_nan_inf=True).run(main, feed=feed, fetch_list=[y], scope=Scope())


def test_an_error_inside_a_sub_block_names_the_block_op_and_line():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 3], "float32")
        w = pg.data("w", [-1, 4], "float32")
        y = nn.cond(pg.sum(x) > 0.0, lambda: pg.matmul(x, w), lambda: pg.matmul(w, w))  # THE LINE
    with pytest.raises(ExecutionError) as info:
        _run(main, {"x": np.ones((2, 3), np.float32), "w": np.ones((5, 4), np.float32)}, [y])
    message = str(info.value)
    assert "matmul_v2 (op 0 of block 1) failed" in message and "THE LINE" in message, message


def test_a_loop_that_never_updates_its_condition_is_refused():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        i = pg.fill_constant([1], "int64", 0)
        c = i < 3
        block = main.create_block()
        block.append_op("increment", {"X": i}, {"Out": i}, {"step": 1.0})
        main.rollback()
        scopes = main.global_block().create_var("scopes", type=pb.VarType.STEP_SCOPES)
        main.global_block().append_op("while", {"X": [i], "Condition": [c]}, {"Out": [i], "StepScopes": [scopes]},
                                      {"sub_block": block.idx})
    with pytest.raises(ExecutionError, match="never writes its condition"):
        _run(main, {}, [i])


def test_max_loop_iterations_stops_a_loop_that_runs_past_it_and_names_the_while():
    main, x, n, i, y = _power_program()
    xv = np.ones((1, 3), np.float32)
    got_i, = _run(main, {"x": xv, "n": np.array([7])}, [i], max_loop_iterations=7)  # exactly the bound: runs
    assert got_i.tolist() == [7]
    with pytest.raises(ExecutionError, match=r"while \(op \d+\).*did not end within 6 iterations") as info:
        _run(main, {"x": xv, "n": np.array([7])}, [i], max_loop_iterations=6)
    assert "test_control_flow.py" in str(info.value)  # the user's line that built the loop
    assert isinstance(info.value.__cause__, KeelError)
    for bad in (0, -1, 2.5, True, "10"):
        with pytest.raises(ValueError, match="max_loop_iterations"):
            Executor(max_loop_iterations=bad)


def test_config_set_max_loop_iterations_bounds_a_served_model(tmp_path):
    main, x, n, i, y = _power_program()
    exe = Executor()
    pg.io.save_inference_model(str(tmp_path / "power"), [x, n], [y], exe, program=main, scope=Scope())
    config = inference.Config(str(tmp_path / "power"))
    assert config.max_loop_iterations() is None
    config.set_max_loop_iterations(3)
    predictor = inference.create_predictor(config)
    xv = np.full((1, 3), 2.0, np.float32)
    out, = predictor.run([xv, np.array([3])])
    np.testing.assert_array_equal(out, xv ** 3)
    with pytest.raises(ExecutionError, match="did not end within 3 iterations"):
        predictor.run([xv, np.array([4])])
    with pytest.raises(ValueError, match="set_max_loop_iterations"):
        config.set_max_loop_iterations(0)


def test_block_tree_is_checked_at_load():
    main, *_ = _power_program()
    desc = main.to_desc()
    desc.blocks[1].parent_idx = 1
    with pytest.raises(KeelError, match="its own parent"):
        pg.Program.from_desc(desc)
    desc = main.to_desc()
    for attr in desc.blocks[0].ops[-1].attrs:
        if attr.name == "sub_block":
            attr.block_idx = 7
    with pytest.raises(KeelError, match="names no sub-block"):
        pg.Program.from_desc(desc)


def test_a_thousand_iterations_keep_peak_memory_flat():
    """Each iteration makes a 256 KiB intermediate; the body frees it, so the peak does not
    grow with the iteration count."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [256, 256], "float32")
        n = pg.data("n", [1], "int64")
        i = pg.fill_constant([1], "int64", 0)
        acc = pg.fill_constant([1], "float32", 0.0)
        _, acc = nn.while_loop(lambda i, a: i < n,
                               lambda i, a: [i + 1, a + pg.mean(pg.tanh(x * 0.5))], [i, acc])
    exe, xv = Executor(), np.ones((256, 256), np.float32)

    def peak(iterations):
        tracemalloc.start()
        exe.run(main, feed={"x": xv, "n": np.array([iterations])}, fetch_list=[acc], scope=Scope())
        result = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return result
    peak(2)  # compile
    small, large = peak(10), peak(1000)
    assert large < small + (256 << 10), (small, large)  # less than one intermediate more


def test_save_inference_model_keeps_sub_blocks(tmp_path):
    main, startup, x, out = _rnn_program()
    exe, scope = Executor(seed=3), Scope()
    exe.run(startup, scope=scope)
    xv = np.random.default_rng(4).standard_normal((2, 4, 3)).astype(np.float32)
    want, = exe.run(main, feed={"x": xv}, fetch_list=[out], scope=scope)
    prefix = tmp_path / "rnn"
    pg.io.save_inference_model(str(prefix), [x], [out], exe, program=main, scope=scope)
    predictor = inference.create_predictor(inference.Config(str(prefix)))
    assert predictor.program.num_blocks == 2 if hasattr(predictor, "program") else True
    predictor.get_input_handle("x").copy_from_cpu(xv)
    predictor.run()
    got = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
    np.testing.assert_array_equal(got, want)


DY2STATIC = ["dy2static_if", "dy2static_while", "dy2static_for_range", "dy2static_list_append"]


@pytest.mark.parametrize("name", ["paddle_cond", "paddle_power", "paddle_rnn"] + DY2STATIC)
@pytest.mark.parametrize("ir_optim", [False, True])
def test_paddle_built_control_flow_matches_paddle_inference(name, ir_optim):
    """Programs PaddlePaddle's own legacy builders wrote (generate.py) and PaddlePaddle 2.6.2's
    dy2static exported from Python `if`/`while`/`for range(tensor)`/list appends
    (generate_dy2static.py): Keel's Predictor gives Paddle Inference's recorded outputs
    (those with ir_optim on too, where recorded)."""
    config = inference.Config(str(FIXTURES / name))
    config.switch_ir_optim(ir_optim)
    predictor = inference.create_predictor(config)
    io = np.load(FIXTURES / f"{name}.io.npz")
    cases = sorted({key.split(":")[0][3:] for key in io.files if key.startswith("out")})
    assert cases
    for k in cases:
        for feed_name in predictor.get_input_names():
            predictor.get_input_handle(feed_name).copy_from_cpu(io[f"in{k}:{feed_name}"])
        predictor.run()
        for j, out_name in enumerate(predictor.get_output_names()):
            got = predictor.get_output_handle(out_name).copy_to_cpu()
            for key in ("out", "opt"):
                if f"{key}{k}:{j}" in io.files:
                    want = io[f"{key}{k}:{j}"]
                    assert got.shape == want.shape and got.dtype == want.dtype
                    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_dy2static_fixtures_hold_the_control_flow_they_were_made_for():
    """The dy2static files really carry sub-blocks: a tensor `if` as two conditional_blocks
    and a select_input, loops as `while`, a list append as write_to_array."""
    def types(name):
        program = pg.io.load_program(FIXTURES / f"{name}.pdmodel")
        return program.num_blocks, {op.type for b in range(program.num_blocks) for op in program.block(b).ops}
    blocks, ops = types("dy2static_if")
    assert blocks == 3 and {"conditional_block", "select_input", "logical_not"} <= ops
    assert {"while"} <= types("dy2static_while")[1]
    blocks, ops = types("dy2static_for_range")
    assert blocks == 4 and {"while", "conditional_block", "select_input"} <= ops
    assert {"while", "write_to_array", "lod_array_length", "tensor_array_to_tensor"} <= types("dy2static_list_append")[1]


def test_prune_for_inference_keeps_control_flow(tmp_path):
    """tools/prune_for_inference.py on a while-loop RNN: the passes run on block 0, the
    sub-block is kept, outputs unchanged."""
    import subprocess
    import sys
    root = Path(__file__).resolve().parent.parent
    out = tmp_path / "pruned"
    run = subprocess.run([sys.executable, str(root / "tools" / "prune_for_inference.py"),
                          str(FIXTURES / "paddle_rnn"), "-o", str(out), "--fuse"],
                         capture_output=True, text=True, timeout=300, cwd=root)
    assert run.returncode == 0, run.stderr
    assert "skipped (control flow" not in run.stdout and "eliminate_dead_code         ops 10 -> 10" in run.stdout
    predictor = inference.create_predictor(inference.Config(str(out)))
    io = np.load(FIXTURES / "paddle_rnn.io.npz")
    predictor.get_input_handle("x").copy_from_cpu(io["in1:x"])
    predictor.run()
    got = predictor.get_output_handle(predictor.get_output_names()[0]).copy_to_cpu()
    np.testing.assert_allclose(got, io["out1:0"], rtol=1e-5, atol=1e-6)


def test_decoding_example_matches_its_python_loop(tmp_path):
    """examples/decode.py: greedy and width-4 beam search in exported programs, run by the
    Predictor, token for token as the numpy loop (the example asserts it)."""
    import subprocess
    import sys
    root = Path(__file__).resolve().parent.parent
    run = subprocess.run([sys.executable, str(root / "examples" / "decode.py"), "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=300, cwd=root)
    assert run.returncode == 0, run.stderr
    assert "match the Python loop token for token" in run.stdout
    program = pg.io.load_program(tmp_path / "beam.pdmodel")
    assert program.num_blocks == 2 and "while" in [op.type for op in program.global_block().ops]


@pytest.mark.parametrize("name", DY2STATIC)
def test_repruning_dy2static_programs_keeps_their_loops(name):
    """inference_program (save_inference_model's pruning, the prune tool's) on dy2static's
    files: a loop whose loop variable is the fed tensor itself (`h = x; for ...: h = f(h)`)
    updates the feed in place, so it stays; the `undefined_var` placeholders a while lists
    in its X slot keep their producers. Outputs as Paddle Inference recorded them."""
    from inference_run import run
    scope = Scope()
    program, feeds, fetches = pg.io.load_inference_model(FIXTURES / name, Executor(), scope=scope)
    pruned = pg.io.inference_program(program, feeds, [v.name for v in fetches])
    assert [op.type for op in pruned.global_block().ops] == [op.type for op in program.global_block().ops]
    params = {n: scope.get(n) for n, _, _ in pg.io.persistable_specs(pruned)}
    io = np.load(FIXTURES / f"{name}.io.npz")
    for k in sorted({key.split(":")[0][3:] for key in io.files if key.startswith("out")}):
        got = run(pruned, params, {f: io[f"in{k}:{f}"] for f in feeds})
        for j, value in enumerate(got):
            np.testing.assert_allclose(value, io[f"out{k}:{j}"], rtol=1e-5, atol=1e-6)
