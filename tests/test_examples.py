"""The examples run end to end (scikit-learn is in the `test` extra for the digits data)."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

import keel.program as pg
from keel.executor import Executor, Scope

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_train_digits_reaches_98_percent_and_exports_a_working_model(tmp_path):
    out = tmp_path / "digits"
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "train_digits.py"), "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[-1].startswith("test accuracy: ")
    accuracy = float(lines[-1].split(": ")[1])
    assert accuracy >= 0.98
    assert any(line.startswith("epoch  1  loss") and "examples/s" in line for line in lines)

    # the exported model alone (no model code) reproduces the held-out accuracy
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from train_digits import load_data
    finally:
        sys.path.pop(0)
    _, (test_x, test_y) = load_data()
    exe, scope = Executor(), Scope()
    program, feeds, fetches = pg.io.load_inference_model(out, exe, scope=scope)
    probs, = exe.run(program, feed={feeds[0]: test_x}, fetch_list=fetches, scope=scope)
    assert f"{(probs.argmax(1) == test_y[:, 0]).mean():.4f}" == f"{accuracy:.4f}"


def test_define_then_run_example():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "define_then_run.py")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "parsed back equal: True" in r.stdout
    assert "sum to 1.000000" in r.stdout


@pytest.mark.slow
def test_train_and_serve_example_trains_a_layer_and_serves_the_same_outputs(tmp_path):
    out = tmp_path / "net"
    runs = [subprocess.run([sys.executable, str(ROOT / "examples" / "train_and_serve.py"), "--out", str(out),
                            "--epochs", "3"], capture_output=True, text=True, timeout=600) for _ in range(2)]
    for r in runs:
        assert r.returncode == 0, r.stderr
    same = [re.sub(r"samples/s: [\d.]+", "", r.stdout) for r in runs]
    assert same[0] == same[1]                                                 # pg.seed: the same run twice
    last = runs[0].stdout.strip().splitlines()[-1]
    served, evaluated = (float(v) for v in last.split("served accuracy ")[1].rstrip(")").split(" (evaluate: "))
    assert served == evaluated and served >= 0.95
    assert "Epoch 3/3" in runs[0].stdout and "Eval - loss" in runs[0].stdout
    assert (tmp_path / "net.pdmodel").exists() and (tmp_path / "net.pdiparams").exists()
