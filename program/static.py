"""`program.static`: what PaddlePaddle's `paddle.static` offers that Keel's builder API does
not already have under another name: `InputSpec`, the description of a model input that
`program.jit.save` turns into a feed, and `static.nn`, the control flow (`cond`, `case`,
`switch_case`, `while_loop`: program/control_flow.py)."""
from __future__ import annotations

from keel.program import amp, dtypes  # noqa: F401  (program.static.amp: PaddlePaddle's paddle.static.amp)
from keel.program import control_flow as nn
from keel.program.global_var import create_global_var  # noqa: F401
from keel.program.layers.data import data

__all__ = ["InputSpec", "data", "nn", "amp", "create_global_var"]


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
