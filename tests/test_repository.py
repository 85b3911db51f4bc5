"""The repository as a newcomer gets it: no paths of the machine it was written on, and one
GPU install hint everywhere (Keel is installed from its checkout; there is no `keel` on PyPI)."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
THIS = Path(__file__).resolve()
GPU_HINT = 'pip install -e ".[gpu]"'
# Spelled in pieces so that this file does not match itself.
MACHINE_DIRS = ["/" + d + "/" for d in ("work", "tmp", "home", "root")]
_SKIP_DIRS = {".git", ".venv", ".ci-venv", "__pycache__", "build", "dist", "out", "deploy", ".pytest_cache"}


def _files() -> list[Path]:
    """The tracked files (git ls-files); without git, the tree minus build and venv folders."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        return [ROOT / p for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for folder, dirs, names in os.walk(ROOT):
            dirs[:] = [d for d in dirs if d not in _SKIP_DIRS and not d.endswith(".egg-info")]
            found += [Path(folder) / n for n in names]
        return found


def _text_files():
    """(path relative to the root, text) of every text file; binary files (a NUL byte in the
    first 8 KiB, as git decides) are left out: the PaddlePaddle fixtures' op_callstack
    attributes record the paths of the machine that generated them, as PaddlePaddle wrote them."""
    for path in _files():
        if path.resolve() == THIS or not path.is_file():
            continue
        data = path.read_bytes()
        if b"\0" in data[:8192]:
            continue
        yield path.relative_to(ROOT).as_posix(), data.decode("utf-8", errors="replace")


def test_the_file_walk_sees_the_repository():
    names = {name for name, _ in _text_files()}
    assert {"README.md", "executor/place.py", "tests/fixtures/paddle/README.md", "pyproject.toml"} <= names


def test_no_paths_of_one_machine():
    found = []
    for name, text in _text_files():
        for lineno, line in enumerate(text.splitlines(), 1):
            if any(d in line for d in MACHINE_DIRS):
                found.append(f"{name}:{lineno}: {line.strip()}")
    assert not found, "machine-specific paths (use a generic one):\n" + "\n".join(found)


def test_gpu_install_hint_is_the_same_everywhere():
    wrong = []
    for name, text in _text_files():
        for lineno, line in enumerate(text.splitlines(), 1):
            if re.search(r"keel\[|pip3? install +(-U +|--upgrade +)?['\"]?keel\b", line, re.I):
                wrong.append(f"{name}:{lineno}: {line.strip()}")
            for m in re.finditer(r"\[gpu\]", line):
                start = m.start() - len('pip install -e ".')
                if line[max(start, 0):m.end() + 1] != GPU_HINT:
                    wrong.append(f"{name}:{lineno}: {line.strip()}")
    assert not wrong, f"GPU install hints other than {GPU_HINT}:\n" + "\n".join(wrong)


def test_gpu_errors_give_the_hint(monkeypatch, tmp_path):
    import keel.program as pg
    from keel.executor import Config, Executor, Scope, create_predictor
    from keel.kernels.array_module import get_array_module
    main, startup = pg.Program(), pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x = pg.data("x", [-1, 4])
        y = pg.nn.fc(x, 2)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    pg.io.save_inference_model(tmp_path / "m", [x], [y], exe, program=main, scope=scope)

    monkeypatch.setitem(sys.modules, "cupy", None)   # as if cupy were not installed
    with pytest.raises(RuntimeError) as e:
        get_array_module("gpu")
    assert GPU_HINT in str(e.value)
    cfg = Config(str(tmp_path / "m.pdmodel"), str(tmp_path / "m.pdiparams"))
    cfg.enable_use_gpu(100, 0)
    with pytest.warns(RuntimeWarning) as caught:   # Paddle Inference's fallback: the CPU, with a warning
        create_predictor(cfg)
    assert GPU_HINT in str(caught[0].message)
