"""Running a Layer once on made-up inputs, with a hook on chosen sublayers: what
`summary` and `flops` (PaddlePaddle's `paddle.summary`, `paddle.flops`) build on."""
from __future__ import annotations

import numbers

import numpy as np

from keel.executor.eager import no_grad, to_tensor


def inputs_for(input_size, dtypes=None) -> list:
    """Tensors of the shapes `input_size` names: one shape ([1, 3, 32, 32], (1, 784)) or a
    list of shapes; `dtypes` one dtype for all or one per shape (default float32). Values
    are uniform in [0, 1), as PaddlePaddle's `paddle.rand` gives."""
    if isinstance(input_size, (list, tuple)) and all(isinstance(d, numbers.Integral) for d in input_size):
        shapes = [list(input_size)]
    elif isinstance(input_size, (list, tuple)) and input_size:
        shapes = [list(s) for s in input_size]
    else:
        raise ValueError(f"input_size: expected a shape such as [1, 3, 32, 32] or a list of shapes, got "
                         f"{input_size!r}")
    if any(not isinstance(d, numbers.Integral) or d < 1 for s in shapes for d in s):
        raise ValueError(f"input_size: every dimension must be a positive integer (no -1/None: a summary "
                         f"runs the layer once), got {input_size!r}")
    kinds = dtypes if isinstance(dtypes, (list, tuple)) else [dtypes or "float32"] * len(shapes)
    if len(kinds) != len(shapes):
        raise ValueError(f"dtypes: {len(kinds)} given for {len(shapes)} input shape(s)")
    rng = np.random.default_rng(0)
    return [to_tensor(rng.random(s).astype(kind or "float32")) for s, kind in zip(shapes, kinds)]


def trace(model, inputs, hook, chosen) -> None:
    """Call `model(*inputs)` without gradients, `hook(layer, inputs, outputs)` running after
    each sublayer for which `chosen(layer)` is true; the hooks are removed afterwards."""
    handles = [layer.register_forward_post_hook(hook) for layer in model.sublayers(include_self=True)
               if chosen(layer)]
    try:
        with no_grad():
            model(*inputs)
    finally:
        for handle in handles:
            handle.remove()


def shape_of(value):
    """A tensor's shape, or the nested list of shapes of a tuple/list of them."""
    if isinstance(value, (list, tuple)):
        return [shape_of(v) for v in value]
    return list(value.shape) if hasattr(value, "shape") else []


def numel(value) -> int:
    if isinstance(value, (list, tuple)):
        return sum(numel(v) for v in value)
    return int(np.prod(value.shape)) if hasattr(value, "shape") else 0
