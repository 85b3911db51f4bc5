"""Keel installs under one import name: the repository's folders program/, executor/,
kernels/, proto/ and tools/ become keel.program, keel.executor, ... (setup.py), nothing
imports them under their bare names, and a wheel adds only `keel` to site-packages."""
import ast
import os
import re
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

import keel

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("program", "executor", "kernels", "proto", "tools")
BARE = FOLDERS + ("hapi", "distributed")
CONSOLE_SCRIPTS = {"keel-prune": "keel.tools.prune_for_inference:main",
                   "keel-inspect": "keel.tools.inspect_model:main",
                   "keel-profile": "keel.tools.profile_model:main",
                   "keel-convert": "keel.tools.convert_program:main",
                   "keel-export-onnx": "keel.tools.export_onnx:main"}


def _tracked_python_files():
    out = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True)
    return [ROOT / p for p in out.stdout.split()]


def test_no_code_imports_a_bare_package_name():
    """Every import of Keel's packages is keel-qualified (tests, tools, examples and
    benchmarks too): a bare `program`/`proto`/`distributed` would be another project's."""
    bare = []
    for path in _tracked_python_files():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            else:
                continue
            bare += [f"{path.relative_to(ROOT)}:{node.lineno}: {name}" for name in names
                     if name.split(".")[0] in BARE]
    assert not bare, "bare imports (write keel.X):\n" + "\n".join(bare)


def test_the_packages_are_keels_subpackages():
    import keel.executor
    import keel.kernels
    import keel.program
    import keel.proto
    import keel.tools
    for name in FOLDERS:
        module = sys.modules[f"keel.{name}"]
        assert Path(module.__file__).resolve() == ROOT / name / "__init__.py"
        assert getattr(keel, name, module) is module       # not shadowed by a star import
    assert keel.program.Program is keel.Program
    assert keel.__version__ == re.search(r'^__version__ = "(.+)"$', (ROOT / "keel" / "__init__.py").read_text(),
                                         re.M).group(1)


SHADOWED_RUN = textwrap.dedent("""
    import numpy as np
    import keel
    import keel.program as pg
    from keel.executor import Executor
    from keel.tools import inspect_model
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [-1, 3])
        y = pg.nn.fc(x, 2, activation="relu")
    exe = Executor()
    exe.run(startup)
    out, = exe.run(main, feed={"x": np.ones((2, 3), "float32")}, fetch_list=[y])
    keel.distributed.get_world_size()
    assert out.shape == (2, 2)
    import sys
    assert not [m for m in sys.modules if m.split(".")[0] in %r], "a bare name was imported"
    print("ran")
""")


def test_other_projects_packages_of_the_same_names_do_not_interfere(tmp_path):
    """Packages named program, executor, kernels, proto, tools, hapi and distributed (Dask's
    `distributed` and proto-plus's `proto` are real ones) first on the path, each failing
    on import: Keel builds, runs a program and loads its tools without touching them."""
    for name in BARE:
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(f"raise ImportError('the other project\\'s {name}')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    r = subprocess.run([sys.executable, "-c", SHADOWED_RUN % (BARE,)], cwd=tmp_path, env=env,
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ran", r.stderr


def test_pyproject_declares_the_console_scripts():
    text = (ROOT / "pyproject.toml").read_text()
    for name, target in CONSOLE_SCRIPTS.items():
        assert f'{name} = "{target}"' in text
        module, function = target.split(":")
        assert callable(getattr(__import__(module, fromlist=[function]), function))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    """Keel's wheel, built from the checkout as `pip install .` builds it."""
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    wheels = list(out.glob("keel-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


@pytest.mark.slow
def test_the_wheel_holds_one_top_level_name_and_every_package(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = z.namelist()
        metadata = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
        entry_points = z.read(next(n for n in names if n.endswith(".dist-info/entry_points.txt"))).decode()
    top = {n.split("/")[0] for n in names}
    assert top == {"keel", f"keel-{keel.__version__}.dist-info"}, top
    # every package folder of the checkout, under keel/
    for folder in FOLDERS:
        for init in (ROOT / folder).rglob("__init__.py"):
            if "__pycache__" not in init.parts:
                assert f"keel/{init.relative_to(ROOT).as_posix()}" in names
    for init in (ROOT / "keel").rglob("__init__.py"):
        assert init.relative_to(ROOT).as_posix() in names
    assert "keel/proto/framework.proto" in names
    assert not [n for n in names if n.startswith("keel/tests") or "__pycache__" in n]
    assert f"Version: {keel.__version__}" in metadata and "License-Expression: Apache-2.0" in metadata
    assert "Classifier: Programming Language :: Python :: 3" in metadata
    assert metadata.count("\n") > 50                    # the README as the long description
    for name, target in CONSOLE_SCRIPTS.items():
        assert f"{name} = {target}" in entry_points


@pytest.mark.slow
def test_pip_install_adds_only_keel_and_its_tools_run(wheel, tmp_path):
    """The wheel in a clean virtual environment (its dependencies, numpy and protobuf, are
    this environment's, reached through PYTHONPATH): site-packages gains keel and its
    dist-info, the console scripts and `python -m keel.tools.X` answer, a program runs."""
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    python = bindir / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    before = set(os.listdir(site))
    r = subprocess.run([str(python), "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    added = set(os.listdir(site)) - before - {"__pycache__"}
    assert added == {"keel", f"keel-{keel.__version__}.dist-info"}, added
    # numpy and protobuf from this environment's site-packages (a PYTHONPATH entry runs no .pth
    # file, so this environment's editable keel stays out)
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    r = subprocess.run([str(python), "-c", SHADOWED_RUN % (BARE,) + "print(keel.__file__)"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert Path(r.stdout.split()[-1]).resolve().is_relative_to(site.resolve())
    for script in CONSOLE_SCRIPTS:
        r = subprocess.run([str(bindir / script), "--help"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.startswith("usage: "), (script, r.stderr)
    for module in ("prune_for_inference", "convert_program", "export_onnx"):
        r = subprocess.run([str(python), "-m", f"keel.tools.{module}", "--help"], cwd=tmp_path, env=env,
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stdout.startswith("usage: "), (module, r.stderr)
