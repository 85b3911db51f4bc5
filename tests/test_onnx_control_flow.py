"""ONNX export of control flow (program/onnx/ops_control.py): cond as If, while_loop as Loop,
tensor arrays as sequences; Keel-built programs against Keel's executor, and PaddlePaddle's
files (tests/fixtures/control_flow) against the outputs PaddlePaddle recorded."""
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnx", reason="ONNX export needs the optional onnx package (pip install -e '.[onnx]' in the Keel checkout)")
pytest.importorskip("onnxruntime", reason="the exported models are checked by running them in onnxruntime")

import keel.program as pg  # noqa: E402
from keel.executor import Executor, Scope  # noqa: E402
from keel.program.io import load_inference_model  # noqa: E402
from keel.program.onnx import program_to_onnx  # noqa: E402
from onnx_oracle import assert_close, export_and_compare, ort_run, require_converters  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "control_flow"
nn = pg.static.nn
rng = np.random.default_rng(0)


def _cond_program():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 3], "float32")
        c = pg.data("c", [1], "bool")
        y = nn.cond(c, lambda: pg.tanh(x), lambda: pg.concat([pg.exp(x), x], axis=0))
    return main, y


@pytest.mark.parametrize("taken", [True, False])
def test_cond_runs_the_branch_its_condition_selects_even_of_another_shape(taken):
    main, y = _cond_program()
    require_converters(main)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    export_and_compare(main, {"x": x, "c": np.array([taken])}, [y.name],
                       feeds_after=[{"x": x[:1], "c": np.array([not taken])}])


def test_nested_cond_inside_a_while_loop():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [2, 3], "float32")
        n = pg.data("n", [1], "int64")
        i = pg.fill_constant([1], "int64", 0)

        def body(i, x):
            odd = pg.equal(i % 2, pg.fill_constant([1], "int64", 1))
            x = nn.cond(odd, lambda: pg.tanh(x), lambda: x * 2.0)
            return [i + 1, x]
        i, y = nn.while_loop(lambda i, x: i < n, body, [i, pg.assign(x)])
    require_converters(main)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    export_and_compare(main, {"x": x, "n": np.array([5])}, [i.name, y.name],
                       feeds_after=[{"x": x, "n": np.array([0])}, {"x": x, "n": np.array([2])}])


def _power_program():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 3], "float32")
        n = pg.data("n", [1], "int64")
        i = pg.fill_constant([1], "int64", 0)
        y = x * 0.0 + 1.0
        i, y = nn.while_loop(lambda i, y: i < n, lambda i, y: [i + 1, y * x], [i, y])
    return main, i, y


def test_while_loop_repeats_its_body_any_number_of_times():
    main, i, y = _power_program()
    require_converters(main)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    feeds = [{"x": x[:1], "n": np.array([p])} for p in (0, 1, 5)]
    export_and_compare(main, {"x": x, "n": np.array([3])}, [i.name, y.name], feeds_after=feeds,
                       dynamic_batch=True)


def test_a_loop_variable_whose_shape_changes_from_step_to_step():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        n = pg.data("n", [1], "int64")
        i = pg.fill_constant([1], "int64", 0)
        s = pg.fill_constant([1, 2], "float32", 1.0)
        i, s = nn.while_loop(lambda i, s: i < n, lambda i, s: [i + 1, pg.concat([s, s], axis=0)], [i, s])
    require_converters(main)
    export_and_compare(main, {"n": np.array([3])}, [s.name], feeds_after=[{"n": np.array([0])}])


def test_tensor_array_written_in_a_loop_and_read_back():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [2, 3], "float32")
        n = pg.data("n", [1], "int64")
        array = pg.create_array("float32")
        i = pg.fill_constant([1], "int64", 0)

        def body(i, h):
            h = pg.tanh(h) + x
            pg.array_write(h, i, array)
            return [i + 1, h]
        nn.while_loop(lambda i, h: i < n, body, [i, x])
        length = pg.array_length(array)
        first = pg.array_read(array, pg.fill_constant([1], "int64", 0))
        block = main.current_block()
        stacked = block.create_var("stacked", (), "float32")
        sizes = block.create_var("sizes", (), "int32")
        block.append_op("tensor_array_to_tensor", {"X": array}, {"Out": stacked, "OutIndex": sizes},
                        {"axis": 1, "use_stack": False})
        # rewriting an entry replaces it
        pg.array_write(pg.exp(x), pg.fill_constant([1], "int64", 1), array)
        second = pg.array_read(array, pg.fill_constant([1], "int64", 1))
        again = pg.array_length(array)
    require_converters(main)
    fetch = [length.name, first.name, stacked.name, sizes.name, second.name, again.name]
    x = rng.standard_normal((2, 3)).astype(np.float32)
    export_and_compare(main, {"x": x, "n": np.array([4])}, fetch, feeds_after=[{"x": x, "n": np.array([2])}])


@pytest.mark.parametrize("name", ["dy2static_if", "dy2static_while", "dy2static_for_range",
                                  "dy2static_list_append", "paddle_cond", "paddle_power", "paddle_rnn"])
def test_paddle_control_flow_files_give_paddles_outputs(name):
    """The recorded cases (`in<k>:<feed>` -> `out<k>:<i>`, and `opt<k>:<i>` with Paddle's
    passes on) run in ONNX Runtime, at the recorded batch sizes (which differ between cases
    of some files)."""
    scope = Scope()
    program, feeds, fetches = load_inference_model(str(FIXTURES / name), Executor(), scope=scope)
    require_converters(program)
    params = {n: np.asarray(scope.get(n)) for n, _, _ in pg.io.persistable_specs(program)}
    model = program_to_onnx(program, params, dynamic_batch=True)
    io = np.load(FIXTURES / f"{name}.io.npz", allow_pickle=False)
    cases = sorted({key.split(":")[0][3:] for key in io.files if key.startswith("out")})
    assert cases
    for k in cases:
        got = ort_run(model, {n: io[f"in{k}:{n}"] for n in feeds})
        for key in ("out", "opt"):
            want = [io[f"{key}{k}:{j}"] for j in range(len(fetches)) if f"{key}{k}:{j}" in io.files]
            if want:
                assert_close(got, want, f"{name} case {k} ({key})", rtol=1e-5, atol=1e-6)
