"""The table of op converters: Keel op type -> a function that appends the ONNX nodes computing
that op to a GraphBuilder (graph.py). Converter modules (ops_*.py) fill it with `@converts`;
`CONVERTERS` is read only after `load_converters()` imported them all (every `ops_*` module of
this package: a new family of converters is a new module, nothing else to edit)."""
from __future__ import annotations

import importlib
import pkgutil
from typing import Callable

from keel.program.errors import OpError

CONVERTERS: dict[str, Callable] = {}


class OnnxExportError(OpError):
    """A program cannot be written as ONNX: an op with no ONNX equivalent (or none at the
    opset asked for), or attribute values ONNX cannot express. Names the op and its line."""


def converts(*op_types: str):
    """Register the decorated function `f(g, op)` as the converter of `op_types`."""
    def register(function):
        for op_type in op_types:
            if op_type in CONVERTERS:
                raise ValueError(f"two ONNX converters for op {op_type!r}")
            CONVERTERS[op_type] = function
        return function
    return register


_loaded = False


def load_converters() -> dict[str, Callable]:
    global _loaded
    if not _loaded:
        for module in pkgutil.iter_modules(_package_path()):
            if module.name.startswith("ops_"):
                importlib.import_module(f"{__package__}.{module.name}")
        _loaded = True
    return CONVERTERS


def _package_path():
    import keel.program.onnx as package
    return package.__path__
