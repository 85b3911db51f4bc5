"""`keel.onnx.export`: a model as an ONNX file, as `paddle2onnx` writes PaddlePaddle's.

    import keel
    from keel.static import InputSpec
    keel.onnx.export("inference/net.pdmodel", "net.onnx", verify=True)   # a saved model (or PIR .json)
    keel.onnx.export(layer, "net.onnx", [InputSpec([None, 3, 224, 224], "float32", "image")])

The model is Keel's inference program (read from its files, traced from a Layer as
`jit.save` traces it, or a Program with its parameters); keel.program.onnx translates it op
by op into an ONNX graph built with the `onnx` package's helpers (`pip install -e ".[onnx]"` in the Keel checkout)
and checked with `onnx.checker`. `verify=True` also runs the result in ONNX Runtime against
Keel's executor on random inputs. The file is written atomically.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from keel.program.errors import KeelError
from keel.program.onnx import DEFAULT_OPSET, MIN_OPSET, OnnxExportError, io_names, program_to_onnx

__all__ = ["export", "inference_model", "compare_with_keel", "OnnxExportError", "OnnxVerificationError",
           "DEFAULT_OPSET", "MIN_OPSET", "TOLERANCE"]

# The largest |ONNX Runtime - Keel| allowed per output, relative to 1 + max|Keel|: the model
# zoo's bar against PaddlePaddle (1e-4 + 1e-4 * max) for float32; float16 keeps 11
# significant bits, so a float16 model is held to 1e-2.
TOLERANCE = {"float32": 1e-4, "float16": 1e-2}


class OnnxVerificationError(KeelError):
    """The exported model's outputs differ from Keel's beyond the tolerance."""


def export(model, path, input_spec=None, opset_version: int = DEFAULT_OPSET, *, params=None, fp16: bool = False,
           dynamic_batch: bool = False, verify: bool = False):
    """Write `model` as the ONNX file `path` (None: write nothing) and return its ModelProto.

    Args:
        model: a model file or prefix Keel reads (legacy `.pdmodel` or PIR `.json`, with its
            `.pdiparams`), a Layer (traced on `input_spec` as `jit.save` traces it), or an
            inference Program (with feed and fetch ops).
        path: the `.onnx` file to write (atomically), or None.
        input_spec: for a Layer, its inputs (InputSpec list; default: its to_static specs).
        opset_version: the ONNX opset (13 to what the installed onnx knows; default 17).
        params: for a Program, its parameters: a dict name -> array or a Scope (default: the
            global scope); for a model file, its parameter file (default: beside it).
        fp16: convert to float16 first (Keel's convert_to_fp16 pass, inputs and outputs kept
            float32), as the Predictor does for PrecisionType.Half.
        dynamic_batch: every input's first dim is symbolic ("batch"), also where the
            program fixed it.
        verify: run the result in ONNX Runtime and Keel's executor on the same random
            inputs; raise OnnxVerificationError when an output differs beyond TOLERANCE.

    Raises OnnxExportError naming the first op with no ONNX translation (its type, place and
    the user's line) and every such op type, or an attribute value ONNX cannot express.

    Examples:
        >>> import numpy as np
        >>> import keel
        >>> from keel.static import InputSpec
        >>> net = keel.nn.Sequential(keel.nn.Linear(4, 8), keel.nn.ReLU(), keel.nn.Linear(8, 2))
        >>> proto = keel.onnx.export(net, "out/mlp.onnx", [InputSpec([None, 4], "float32", "x")], verify=True)
        >>> [i.name for i in proto.graph.input], proto.opset_import[0].version
        (['x'], 17)
    """
    program, values = inference_model(model, input_spec, params)
    if fp16:
        program, values = half_precision(program, values)
    proto = program_to_onnx(program, values, opset_version=opset_version, dynamic_batch=dynamic_batch)
    if verify:
        checks = compare_with_keel(program, values, proto, tolerance=TOLERANCE["float16" if fp16 else "float32"])
        failed = [c for c in checks if not c.ok]
        if failed:
            raise OnnxVerificationError("the ONNX model's outputs differ from Keel's: " +
                                        "; ".join(c.describe() for c in failed))
    if path is not None:
        from keel.program.io.atomic import atomic_write
        path = os.fspath(path)
        if os.path.dirname(path):
            os.makedirs(os.path.dirname(path), exist_ok=True)  # as save_inference_model does
        atomic_write(path, proto.SerializeToString())
    return proto


def inference_model(model, input_spec=None, params=None):
    """(inference Program, {parameter name: numpy array}) of what `export` takes."""
    from keel.program.nn.layer import Layer
    from keel.program.program import Program

    if isinstance(model, Layer):
        from keel.program.jit import trace_inference
        return trace_inference(model, input_spec, where="keel.onnx.export")
    if isinstance(model, Program):
        return model, _program_values(model, params)
    if isinstance(model, (str, os.PathLike)):
        return _read(os.fspath(model), params)
    raise TypeError(f"keel.onnx.export: model is a {type(model).__name__}; give a model file or prefix, a "
                    "Layer or an inference Program")


def _program_values(program, params) -> dict:
    from keel.executor import global_scope
    from keel.program.io import persistable_specs

    names = [name for name, _, _ in persistable_specs(program)]
    if isinstance(params, dict):
        missing = [n for n in names if n not in params]
        values = params
    else:
        scope = params if params is not None else global_scope()
        missing = [n for n in names if scope.find_var(n) is None]
        values = {n: scope.get(n) for n in names if n not in missing}
    if missing:
        raise OnnxExportError(f"keel.onnx.export: no value for the program's parameter(s) {', '.join(missing)} "
                              "(pass params=, or run the startup program first)")
    return {n: np.asarray(values[n].get() if hasattr(values[n], "get") and not isinstance(values[n], np.ndarray)
                          else values[n]) for n in names}


def _read(path: str, params_file) -> tuple:
    from keel.executor import Executor, Scope
    from keel.program.io import load_inference_model, persistable_specs

    scope = Scope()
    program, _, _ = load_inference_model(path, Executor(), scope=scope,
                                         params_filename=None if params_file is None else os.fspath(params_file))
    return program, {name: np.asarray(scope.get(name)) for name, _, _ in persistable_specs(program)}


def half_precision(program, values):
    """(program, values) after Keel's float16 conversion, feeds and fetches kept float32."""
    from keel.program.passes import PASSES, optimize_inference

    program, values, _ = optimize_inference(program, values, fuse=False, fp16=True, keep_io_types=True,
                                            disabled=tuple(sorted(set(PASSES) - {"convert_to_fp16"})))
    return program, values


@dataclass
class OutputCheck:
    """One output of `compare_with_keel`: the largest |ONNX Runtime - Keel| and max |Keel|."""
    name: str
    max_abs: float
    max_keel: float
    ok: bool
    problem: str = ""  # a shape or dtype mismatch, differing integers

    def describe(self) -> str:
        if self.problem:
            return f"{self.name}: {self.problem}"
        return f"{self.name}: max abs error {self.max_abs:.3g} (max |keel| {self.max_keel:.3g})"


def compare_with_keel(program, params, proto, inputs=None, *, seed: int = 0,
                      tolerance: float = TOLERANCE["float32"]) -> list[OutputCheck]:
    """Run `proto` in ONNX Runtime (CPU) and `program` in Keel's executor on `inputs`
    (default: tools/model_inputs' random ones of `seed`); per output, whether
    max|ort - keel| <= tolerance * (1 + max|keel|) (integer and boolean outputs: equal)."""
    import onnxruntime

    from keel.executor import Executor, Scope
    from keel.tools.model_inputs import random_feeds

    feeds, fetches = io_names(program)
    if inputs is None:
        inputs = random_feeds(program, feeds, params, seed)
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    want = Executor().run(program, feed=dict(inputs), fetch_list=fetches, scope=scope)
    session = onnxruntime.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    got = session.run(None, {i.name: inputs[i.name] for i in session.get_inputs()})
    return [_check(name, np.asarray(w), np.asarray(g), tolerance) for name, w, g in zip(fetches, want, got)]


def _check(name, want, got, tolerance) -> OutputCheck:
    if want.shape != got.shape or want.dtype != got.dtype:
        return OutputCheck(name, np.inf, 0.0, False, f"{got.dtype}{list(got.shape)} from ONNX Runtime, "
                                                     f"{want.dtype}{list(want.shape)} from Keel")
    if want.dtype.kind not in "fc":
        same = np.array_equal(want, got)
        return OutputCheck(name, 0.0 if same else np.inf, 0.0, same, "" if same else f"{want.dtype} values differ")
    if not want.size:
        return OutputCheck(name, 0.0, 0.0, True)
    with np.errstate(invalid="ignore"):
        diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
        both_nan = np.isnan(got) & np.isnan(want)
        max_abs = float(np.where(both_nan, 0.0, diff).max())
    scale = float(np.nanmax(np.abs(want))) if np.isfinite(want).any() else 0.0
    return OutputCheck(name, max_abs, scale, bool(max_abs <= tolerance * (1.0 + scale)))
