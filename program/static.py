"""`program.static`: the program-side half of PaddlePaddle's `paddle.static`: `data`,
`InputSpec` (a model input that `program.jit.save` turns into a feed), `Program`,
`program_guard`, the default programs, `name_scope`, `append_backward`/`gradients`,
`save_inference_model`/`load_inference_model`, `amp`, and `static.nn` (the
builder layers and the control flow: program/static_nn.py). `keel.static` adds what runs
programs (Executor, scopes, save/load, CompiledProgram, cpu_places), which lives in the executor package."""
from __future__ import annotations

from keel.program import amp, dtypes  # noqa: F401  (program.static.amp: PaddlePaddle's paddle.static.amp)
from keel.program import static_nn as nn
from keel.program.backward import append_backward, gradients  # noqa: F401
from keel.program.default import (default_main_program, default_startup_program, name_scope,  # noqa: F401
                                  program_guard)
from keel.program.global_var import create_global_var  # noqa: F401
from keel.program.io.inference_model import load_inference_model, save_inference_model  # noqa: F401
from keel.program.layers.data import data
from keel.program.program import Program  # noqa: F401
from keel.program.variable import Variable  # noqa: F401

__all__ = ["InputSpec", "data", "nn", "amp", "create_global_var", "Program", "Variable", "program_guard",
           "default_main_program", "default_startup_program", "name_scope", "append_backward", "gradients",
           "save_inference_model", "load_inference_model"]


class InputSpec:
    """An input's shape (-1 or None for a size known only at run time), dtype and name
    (paddle.static.InputSpec)."""

    def __init__(self, shape, dtype="float32", name: str | None = None, stop_gradient: bool = False):
        self.shape = [-1 if d is None else int(d) for d in shape]
        self.dtype = dtypes.name(dtypes.to_code(dtype))
        self.name = name
        self.stop_gradient = stop_gradient

    def __repr__(self):
        return f"InputSpec(shape={self.shape}, dtype={self.dtype}, name={self.name!r})"

    def __eq__(self, other):
        return (isinstance(other, InputSpec)
                and (self.shape, self.dtype, self.name) == (other.shape, other.dtype, other.name))
