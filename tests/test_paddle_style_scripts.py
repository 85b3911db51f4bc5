"""PaddlePaddle-documentation-style scripts run with only their import line changed: a
functional CNN trained eagerly (examples/paddle_functional_cnn.py) and the static-graph
tutorial workflow (examples/paddle_static_tutorial.py); keel.static's pieces and the mode
switches behave as PaddlePaddle's."""
from __future__ import annotations

import os
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import keel as paddle

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ["paddle_functional_cnn.py", "paddle_static_tutorial.py"]


def _module(name):
    return runpy.run_path(str(ROOT / "examples" / name))


def test_the_functional_cnn_learns():
    assert _module("paddle_functional_cnn.py")["main"]() >= 0.9


def test_the_static_tutorial_trains_saves_loads_and_serves(tmp_path):
    test_loss, reloaded, served = _module("paddle_static_tutorial.py")["main"](str(tmp_path))
    assert test_loss < 0.2 and reloaded == test_loss
    assert served.shape == (4, 1)
    assert sorted(p.name for p in (tmp_path / "checkpoint").iterdir()) == ["model.pdmodel", "model.pdopt",
                                                                          "model.pdparams"]
    assert paddle.in_dynamic_mode()                      # disable_static() at its end


@pytest.mark.paddle
@pytest.mark.parametrize("name", SCRIPTS)
def test_the_same_scripts_run_in_paddle(name, tmp_path):
    pytest.importorskip("paddle")
    text = (ROOT / "examples" / name).read_text()
    assert "import keel as paddle  # import paddle\n" in text
    script = tmp_path / name
    script.write_text(text.replace("import keel as paddle  # import paddle\n", "import paddle\n"))
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    args = [str(tmp_path)] if name == "paddle_static_tutorial.py" else []
    r = subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "accuracy" in r.stdout or "served" in r.stdout


def test_enable_static_builds_functional_calls_into_the_default_program():
    assert paddle.in_dynamic_mode()
    paddle.enable_static()
    try:
        assert not paddle.in_dynamic_mode()
        main, startup = paddle.static.Program(), paddle.static.Program()
        with paddle.static.program_guard(main, startup):
            x = paddle.static.data("x", [None, 4], "float32")
            y = paddle.nn.functional.relu(x)
        assert [op.type for op in main.global_block().ops] == ["relu"]
        out, = paddle.static.Executor().run(main, feed={"x": -np.ones((2, 4), "float32")}, fetch_list=[y])
        assert (out == 0).all()
    finally:
        paddle.disable_static()
    assert paddle.in_dynamic_mode()
    assert isinstance(paddle.nn.functional.relu(paddle.to_tensor([-1.0])), paddle.Tensor)


def test_static_namespace_is_paddles():
    for name in ["data", "InputSpec", "Program", "program_guard", "default_main_program", "default_startup_program",
                 "Executor", "global_scope", "scope_guard", "save", "load", "save_inference_model",
                 "load_inference_model", "append_backward", "gradients", "amp", "name_scope", "cpu_places",
                 "CompiledProgram", "BuildStrategy"]:
        assert hasattr(paddle.static, name), name
    for name in ["fc", "conv2d", "batch_norm", "embedding", "cond", "while_loop", "case", "switch_case"]:
        assert hasattr(paddle.static.nn, name), name
    assert len(paddle.static.cpu_places(2)) == 2
    import keel.static.nn  # noqa: F401  (importable as PaddlePaddle's)
    import keel.nn.functional as F
    assert F is paddle.nn.functional


def test_static_load_refuses_values_that_do_not_fit(tmp_path):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup), paddle.unique_name.guard():
        paddle.static.nn.fc(paddle.static.data("x", [None, 3]), 2)
    exe = paddle.static.Executor()
    exe.run(startup)
    paddle.static.save(main, tmp_path / "a")
    other, other_startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(other, other_startup), paddle.unique_name.guard():
        paddle.static.nn.fc(paddle.static.data("x", [None, 5]), 2)
    with pytest.raises(ValueError, match=r"fc_0.w_0: the file holds shape \[3, 2\], the program \[5, 2\]"):
        paddle.static.load(other, tmp_path / "a")
    with pytest.raises(ValueError, match="does not exist"):
        paddle.static.load(main, tmp_path / "missing")


def test_program_state_and_serialization_functions(tmp_path):
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup), paddle.unique_name.guard():
        x = paddle.static.data("x", [None, 3])
        with paddle.static.device_guard("cpu"):
            y = paddle.static.nn.fc(x, 2)
        label = paddle.static.data("label", [None, 1], "int64")
        acc = paddle.static.accuracy(paddle.nn.functional.softmax(y), label)
        w = paddle.static.create_parameter([2], "float32", name="extra_w")
    exe = paddle.static.Executor()
    exe.run(startup)
    paddle.static.save(main, tmp_path / "m")
    state = paddle.static.load_program_state(str(tmp_path / "m"))
    assert {"fc_0.w_0", "fc_0.b_0", "extra_w"} <= set(state)
    assert list(paddle.static.load_program_state(str(tmp_path / "m"), var_list=[w])) == ["extra_w"]
    paddle.static.set_program_state(main, {"fc_0.b_0": np.array([1.0, 2.0], "float32"), "unused": np.zeros(1)})
    np.testing.assert_array_equal(paddle.static.global_scope().get("fc_0.b_0"), [1.0, 2.0])
    with pytest.raises(ValueError, match=r"fc_0.b_0: the file holds shape \[3\], the program \[2\]"):
        paddle.static.set_program_state(main, {"fc_0.b_0": np.zeros(3, "float32")})

    blob = paddle.static.serialize_program([x], [y], program=main)
    paddle.static.save_to_file(str(tmp_path / "p.pdmodel"), blob)
    program = paddle.static.deserialize_program(paddle.static.load_from_file(str(tmp_path / "p.pdmodel")))
    assert program == paddle.static.normalize_program(main, [x], [y])
    xs = np.ones((2, 3), "float32")
    want, got_acc = exe.run(main, feed={"x": xs, "label": np.zeros((2, 1), "int64")}, fetch_list=[y, acc])
    got, = exe.run(program, feed={"x": xs})
    np.testing.assert_allclose(got, want)
    assert 0.0 <= float(got_acc) <= 1.0
    with pytest.raises(ValueError, match="device_guard"):
        with paddle.static.device_guard("tpu"):
            pass
