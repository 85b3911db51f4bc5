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
    r = subprocess.run([sys.executable, str(script), str(tmp_path)], capture_output=True, text=True, timeout=600,
                       env=env)
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
