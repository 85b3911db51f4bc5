"""The documentation builds and its examples run: `mkdocs build --strict` (mkdocs.yml: the
pages of docs/ and the API reference mkdocstrings reads from the docstrings) fails on any
warning, such as a broken link or a name the reference cannot find; and every `>>>` example
in the docstrings of Keel's packages runs as a doctest, so none can rot. The names a user
reaches first must have such an example. (The pages' own ```python blocks run in
tests/test_readme.py.)"""
import doctest
import importlib
import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

import keel
from test_api_coverage import FIXTURE, resolve

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ["keel", "keel.program", "keel.executor", "keel.hapi", "keel.distributed"]
# The names a user reaches first: each docstring holds an Examples section that runs.
FIRST_NAMES = ["keel.program.program.Program", "keel.program.default.program_guard", "keel.program.layers.data.data",
               "keel.program.nn.fc", "keel.executor.executor.Executor.run",
               "keel.program.io.inference_model.save_inference_model",
               "keel.program.io.inference_model.load_inference_model", "keel.executor.inference.create_predictor",
               "keel.program.nn.layer.Layer", "keel.program.nn.layers.Linear", "keel.program.nn.layers.Conv2D",
               "keel.program.optimizer.Adam", "keel.program.optimizer.SGD", "keel.hapi.model.Model",
               "keel.program.io.data.DataLoader", "keel.program.jit.save", "keel.program.jit.load"]


def test_mkdocs_build_strict(tmp_path):
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    reference = (tmp_path / "site" / "api" / "executor" / "index.html").read_text()
    assert 'id="keel.executor.Executor.run"' in reference      # the mapped packages were found
    assert (tmp_path / "site" / "security" / "index.html").exists()


def _modules():
    """Every module of Keel's Python-facing packages (the kernels and the file format have no
    examples), imported."""
    found = {}
    for name in PACKAGES:
        package = importlib.import_module(name)
        found[name] = package
        for info in pkgutil.walk_packages(package.__path__, prefix=name + "."):
            found[info.name] = importlib.import_module(info.name)
    return found


def _examples():
    finder = doctest.DocTestFinder(exclude_empty=True)
    tests = {}
    for module in _modules().values():
        for test in finder.find(module):
            if test.examples and test.name.startswith(module.__name__):
                tests[test.name] = test
    return tests


EXAMPLES = _examples()


def test_first_names_have_examples():
    missing = [name for name in FIRST_NAMES if name not in EXAMPLES]
    assert not missing, f"docstrings without a runnable Examples section: {missing}"


def _qualified(obj) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def _public_subclasses(namespace, base) -> set[str]:
    """The classes a user reaches as `namespace.Name` that derive from `base` (base too)."""
    return {_qualified(value) for name, value in vars(namespace).items()
            if not name.startswith("_") and inspect.isclass(value) and issubclass(value, base)}


def _documented_names() -> set[str]:
    """The names that must each have an example: every public class of these families (a new
    layer, optimizer, scheduler, ... joins by being exported), every function and class of
    PaddlePaddle's public namespaces (the recorded `__all__` lists of
    tests/fixtures/paddle_api) that Keel has, as PaddlePaddle's own docstrings all show one,
    and the names of QUALIFIED_NAMES, wherever they are defined."""
    import keel as paddle
    from keel.program import gradient_clip, initializer, regularizer
    families = [(paddle.nn, paddle.nn.Layer), (paddle.optimizer, paddle.optimizer.Optimizer),
                (paddle.lr, paddle.lr.LRScheduler), (initializer, initializer.Initializer),
                (gradient_clip, gradient_clip.ClipGradBase), (regularizer, regularizer.WeightDecayRegularizer),
                (paddle.metric, paddle.metric.Metric), (paddle.callbacks, paddle.callbacks.Callback)]
    names = set().union(*(_public_subclasses(namespace, base) for namespace, base in families))
    return names | _paddle_public_names() | set(QUALIFIED_NAMES)


def _paddle_public_names() -> set[str]:
    """The functions and classes Keel resolves for the names of PaddlePaddle's public
    namespaces; a name several namespaces share is one object, so one docstring."""
    found = set()
    for namespace, names in FIXTURE["namespaces"].items():
        for name in names:
            value = resolve(namespace, name)
            if (inspect.isfunction(value) or inspect.isclass(value)) and not value.__module__.startswith(NO_EXAMPLES):
                found.add(_qualified(inspect.unwrap(value)))
    return found


# The kernels hold no examples (they import nothing of Keel above them); a name defined there
# (paddle.device.is_compiled_with_cuda is kernels' cupy_available) is shown in its namespace's
# module docstring instead.
NO_EXAMPLES = ("keel.kernels.",)


# ... and by their full names: hapi's Model methods, keel.distributed's single-process entry points,
# and the top-level one_hot, pad and norm (outside PaddlePaddle's `paddle.__all__`, which has them
# as paddle.nn.functional's and paddle.linalg's).
QUALIFIED_NAMES = ["keel.program.layers.tensor.one_hot", "keel.program.layers.tensor.pad",
                   "keel.program.layers.math.norm", "keel.hapi.model.Model.fit", "keel.hapi.model.Model.evaluate",
                   "keel.hapi.model.Model.predict", "keel.hapi.model.Model.summary", "keel.hapi.summary.summary",
                   "keel.distributed.parallel.get_rank", "keel.distributed.parallel.get_world_size",
                   "keel.distributed.collective.all_reduce", "keel.distributed.collective.reduce",
                   "keel.distributed.collective.broadcast", "keel.distributed.collective.all_gather",
                   "keel.distributed.strategy.DistributedStrategy"]


def test_public_names_have_examples():
    """No layer, optimizer, scheduler, initializer, clip, regularizer, metric or callback class,
    no function or class of PaddlePaddle's public namespaces that Keel has, nor any listed
    name, lacks a runnable Examples section."""
    missing = sorted(name for name in _documented_names() if name not in EXAMPLES)
    assert not missing, f"docstrings without a runnable Examples section: {missing}"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_docstring_example_runs(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)          # the examples write out/...
    test = EXAMPLES[name]
    test.globs = {"__name__": "__main__"}   # each example imports what it uses
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    # fresh names and a fresh global scope: a parameter an earlier example left there under
    # the same generated name is not this example's
    with keel.program.unique_name.guard(), keel.static.scope_guard(keel.static.Scope()):
        result = runner.run(test, out=report.append)
    assert result.failed == 0, "".join(report)
