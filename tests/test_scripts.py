"""Every script in tools/, benchmarks/ and examples/ answers --help (and runs nothing); the
benchmarks run where their optional peers (PyTorch, ONNX Runtime, PaddlePaddle) are missing,
one line saying so for each."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("tools", "benchmarks", "examples")
MAIN_GUARD = re.compile(r"^if __name__ == [\"']__main__[\"']:", re.M)


def _python_files():
    """The folders' scripts and helper modules (a package's __init__ is neither)."""
    return sorted(p for folder in FOLDERS for p in (ROOT / folder).glob("*.py") if p.name != "__init__.py")


def _is_script(path: Path) -> bool:
    return bool(MAIN_GUARD.search(path.read_text()))


SCRIPTS = [p for p in _python_files() if _is_script(p)]


def test_discovery_finds_the_scripts_and_every_other_file_is_a_helper_module():
    names = {p.relative_to(ROOT).as_posix() for p in SCRIPTS}
    assert {"tools/inspect_model.py", "tools/prune_for_inference.py", "benchmarks/bench_inference.py",
            "examples/train_digits.py", "examples/define_then_run.py"} <= names
    # a file without a __main__ guard must be a module its folder's scripts import (a new
    # script that forgot the guard would run on import and take --help as nothing)
    for path in _python_files():
        if path in SCRIPTS:
            continue
        importers = [s for s in SCRIPTS if s.parent == path.parent
                     and re.search(rf"^(from (keel\.{path.parent.name}\.)?{path.stem} import|import {path.stem}\b)",
                                   s.read_text(), re.M)]
        assert importers, f"{path.relative_to(ROOT)} has no __main__ guard and no script imports it"


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_help_prints_usage_and_exits_0(script, tmp_path):
    r = subprocess.run([sys.executable, str(script), "--help"], capture_output=True, text=True,
                       timeout=120, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"usage: {script.name} ") and "-h, --help" in r.stdout, r.stdout[:500]
    assert list(tmp_path.iterdir()) == []          # nothing written: it did not run


PEERS = {"torch": "PyTorch", "onnx": "ONNX Runtime", "onnxruntime": "ONNX Runtime", "paddle": "PaddlePaddle"}
# Imports of these fail in the child, as if they were not installed.
_BLOCK = ("import runpy, sys\n"
          "for name in {modules!r}: sys.modules[name] = None\n"
          "sys.argv = {argv!r}\n"
          "runpy.run_path(sys.argv[0], run_name='__main__')\n")


@pytest.mark.slow
@pytest.mark.parametrize("script, args, peers", [
    ("bench_eager.py", ["--repeat", "3"], {"PyTorch"}),
    ("bench_training.py", ["--repeat", "1"], {"PyTorch", "PaddlePaddle"}),
    ("bench_transformer.py", ["--repeat", "1"], {"PyTorch", "PaddlePaddle"}),
    ("bench_inference.py", ["--models", "mlp", "--batches", "1", "--repeat", "10"], {"ONNX Runtime"}),
    ("bench_gpt.py", ["--repeat", "1", "--tokens", "4"], {"PyTorch"}),
])
def test_benchmarks_skip_missing_peers_with_one_line_each(script, args, peers):
    argv = [str(ROOT / "benchmarks" / script), *args]
    code = _BLOCK.format(modules=sorted(PEERS), argv=argv)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stdout + r.stderr
    skipped = [line for line in r.stdout.splitlines() if "is not installed: skipped" in line]
    assert sorted(line.split(" is not installed")[0] for line in skipped) == sorted(peers), r.stdout
    assert "Keel" in r.stdout and "ms" in r.stdout            # the table of what was timed
