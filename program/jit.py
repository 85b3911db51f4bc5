"""`program.jit.save`: a Layer's inference program and parameters as PaddlePaddle's
`paddle.jit.save` writes them (`path.pdmodel` + `path.pdiparams`), for Paddle Inference and
Keel's Predictor alike.

    model = MyNet()            # a program.nn.Layer, trained in some program
    pg.jit.save(model, "out/net", input_spec=[pg.static.InputSpec([None, 784], "float32", "x")])

Keel has no eager mode to trace, so the input specs are required: the layer is called once,
in eval mode, on `data` variables made from them, in a fresh program; the result is pruned
and written by `save_inference_model` (crash-safe, PaddlePaddle's layout). A spec without a
name takes the name of the matching `forward` argument, as PaddlePaddle's does.
"""
from __future__ import annotations

import inspect

from program import default
from program.io.inference_model import save_inference_model
from program.layers.data import data
from program.program import Program
from program.static import InputSpec
from program.variable import Variable

__all__ = ["save"]


def save(layer, path, input_spec=None, scope=None) -> Program:
    """Write `path.pdmodel` and `path.pdiparams` for `layer` called on `input_spec`; the
    parameter values come from `scope` (default: the executor's global scope). Returns the
    inference program written. The layer's train/eval modes are restored afterwards."""
    if not input_spec:
        raise ValueError("jit.save needs input_spec=[InputSpec(shape, dtype, name), ...]: Keel builds "
                         "the program by calling the layer on them (there is no eager run to trace)")
    specs = [s if isinstance(s, InputSpec) else InputSpec(s.shape, s.dtype, s.name) for s in input_spec]
    names = _argument_names(layer, len(specs))
    modes = [(sub, sub.training) for sub in layer.sublayers(include_self=True)]
    main, startup = Program(), Program()
    layer.eval()
    try:
        with default.program_guard(main, startup):
            feeds = [data(spec.name or names[i], spec.shape, spec.dtype) for i, spec in enumerate(specs)]
            outputs = _flatten(layer(*feeds))
    finally:
        for sub, training in modes:
            sub.training = training
    if not outputs:
        raise ValueError(f"jit.save: {type(layer).__name__}.forward returned no variables")
    return save_inference_model(path, feeds, outputs, program=main,
                                scope=scope if scope is not None else default.global_scope())


def _argument_names(layer, count: int) -> list[str]:
    params = [p for p in inspect.signature(layer.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in params[:count]]
    return names + [f"input_{i}" for i in range(len(names), count)]


def _flatten(result) -> list[Variable]:
    if isinstance(result, Variable):
        return [result]
    if isinstance(result, dict):
        result = list(result.values())
    out = []
    for item in result or ():
        out.extend(_flatten(item))
    return out
