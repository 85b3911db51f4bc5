"""ONNX export of Keel programs: `program_to_onnx(program, params)` builds the ModelProto
(export.py) from one converter per op type (registry.py, ops_*.py) writing ONNX nodes through
a GraphBuilder (graph.py). Needs the optional `onnx` package (`pip install -e ".[onnx]"` in the Keel checkout),
imported only when a model is built. `keel.onnx.export` is the user's entry point."""
from keel.program.onnx.export import (DEFAULT_OPSET, MIN_OPSET, io_names, program_to_onnx,
                                      untranslatable_ops)
from keel.program.onnx.registry import OnnxExportError, converts

__all__ = ["program_to_onnx", "untranslatable_ops", "io_names", "OnnxExportError", "converts", "DEFAULT_OPSET",
           "MIN_OPSET"]
