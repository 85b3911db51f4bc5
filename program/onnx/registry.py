"""The table of op converters: Keel op type -> a function that appends the ONNX nodes computing
that op to a GraphBuilder (graph.py). Converter modules (ops_*.py) fill it with `@converts`;
`CONVERTERS` is read only after `load_converters()` imported them all."""
from __future__ import annotations

import importlib
from typing import Callable

from keel.program.errors import OpError

CONVERTERS: dict[str, Callable] = {}

# The modules holding converters, imported on first use (they import nothing heavy themselves,
# but the table must be complete before an export asks it).
CONVERTER_MODULES = ("ops_basic",)


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
        for module in CONVERTER_MODULES:
            importlib.import_module(f"{__package__}.{module}")
        _loaded = True
    return CONVERTERS
