"""The `keel` facade (issue 30): an explicit `__all__` whose every name resolves, namespaces
that hold their PaddlePaddle names and no helper modules, and the rarely used packages
loaded on first use, not by `import keel`."""
import importlib
import json
import subprocess
import sys
import types
from pathlib import Path

import pytest

import keel

ROOT = Path(__file__).resolve().parents[1]
# Modules a namespace's own code imports for itself; none may show as a public name of one.
HELPERS = {"np", "numpy", "os", "sys", "copy", "math", "functools", "itertools", "inspect", "re", "json", "time",
           "warnings", "threading", "collections", "dataclasses", "typing", "numbers", "enum", "difflib", "legacy",
           "annotations"}
# Keel's own packages: attributes of `keel` once imported (as any subpackage is), not in __all__.
KEEL_PACKAGES = {"program", "executor", "kernels", "proto", "tools"}
NAMESPACES = ["keel", "keel.tensor", "keel.nn", "keel.nn.functional", "keel.nn.initializer", "keel.nn.utils",
              "keel.static", "keel.static.nn", "keel.static.amp", "keel.io", "keel.optimizer", "keel.optimizer.lr",
              "keel.metric", "keel.jit", "keel.inference", "keel.linalg", "keel.utils", "keel.device", "keel.amp",
              "keel.vision", "keel.vision.ops", "keel.vision.transforms", "keel.regularizer", "keel.callbacks",
              "keel.incubate", "keel.incubate.optimizer", "keel.distributed", "keel.version", "keel.program"]


def test_every_name_of_all_resolves():
    assert len(keel.__all__) == len(set(keel.__all__))
    missing = [name for name in keel.__all__ if getattr(keel, name, None) is None]
    assert not missing, f"keel.__all__ names keel lacks: {missing}"


def test_all_is_what_the_module_holds():
    """Every public name keel holds, or loads on first use, is in __all__ (and no other),
    but for Keel's own packages and a lazily named module not in this build (onnx)."""
    public = {n for n in vars(keel) if not n.startswith("_")} - KEEL_PACKAGES
    lazy_present = {name for name in keel._ON_FIRST_USE if hasattr(keel, name)}
    assert public | lazy_present == set(keel.__all__)


def test_dir_of_keel_lists_no_helpers_or_private_names():
    listed = dir(keel)
    assert not [n for n in listed if n.startswith("_") and not n.startswith("__")]
    assert not HELPERS & set(listed)
    assert set(keel.__all__) <= set(listed)


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_namespace_leaks_no_helper_modules(namespace):
    """A namespace's public names are its `__all__`, the modules it declares there, and its own
    submodules: no numpy as np, os, `from __future__ import annotations`, nor Keel's internal
    modules (dtypes, legacy, unique_name) imported for its code."""
    module = importlib.import_module(namespace)
    assert hasattr(module, "__all__"), f"{namespace} has no __all__"
    def own_submodule(name):
        value = getattr(module, name)
        return isinstance(value, types.ModuleType) and value.__name__.startswith(module.__name__ + ".")

    public = {n for n in dir(module) if not n.startswith("_")}
    helpers = sorted(n for n in HELPERS & public if not own_submodule(n))
    assert not helpers, f"{namespace} exposes {helpers}"
    undeclared_modules = sorted(n for n in public - set(module.__all__)
                                if isinstance(getattr(module, n), types.ModuleType) and not own_submodule(n))
    assert not undeclared_modules, f"{namespace} exposes modules {undeclared_modules}"


@pytest.mark.parametrize("namespace", [n for n in NAMESPACES if n not in ("keel", "keel.program")])
def test_namespace_all_resolves(namespace):
    module = importlib.import_module(namespace)
    assert not [n for n in module.__all__ if not hasattr(module, n)]


LAZY_CHECK = """
import sys, json
import keel
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("keel", "mpi4py", "onnx", "onnxruntime"))
model = keel.Model          # loads keel.hapi now
print(json.dumps({"loaded": loaded, "model": model.__module__, "hapi": "keel.hapi" in sys.modules}))
"""
# What `import keel` leaves for first use: the high-level API, distributed training (mpi4py),
# the Predictor and its passes, ONNX, dy2static's AST transformer, PIR's tables, the kernels
HEAVY = ["keel.hapi", "keel.distributed", "mpi4py", "onnx", "keel.program.onnx", "keel.program.dy2static",
         "keel.executor.inference", "keel.program.passes", "keel.program.io.pir", "keel.program.vision",
         "keel.program.linalg", "keel.kernels.nn", "keel.kernels.math"]


def test_import_keel_leaves_the_heavy_packages_for_first_use():
    out = subprocess.run([sys.executable, "-c", LAZY_CHECK], capture_output=True, text=True, check=True, cwd=ROOT)
    result = json.loads(out.stdout)
    assert not set(HEAVY) & set(result["loaded"]), sorted(set(HEAVY) & set(result["loaded"]))
    assert result["model"] == "keel.hapi.model" and result["hapi"]


def test_lazy_names_import_and_from_import_alike():
    code = ("import keel.inference as a\nfrom keel import inference as b\nimport keel\n"
            "from keel.vision.transforms import functional\nfrom keel.incubate.optimizer import RecomputeOptimizer\n"
            "assert a is b is keel.inference and keel.vision.transforms.functional is functional\n"
            "assert keel.lr is keel.optimizer.lr and keel.DataParallel.__module__.startswith('keel.distributed')\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_unknown_names_are_attribute_errors():
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        keel.no_such_name  # noqa: B018
    assert not hasattr(keel, "legacy") and not hasattr(keel, "np")
