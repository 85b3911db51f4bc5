"""Random inputs for a model's feeds, for the tools' --verify (prune_for_inference,
export_onnx) and `keel.onnx.export(verify=True)`: -1 dims become `batch`; float feeds are
standard normal, boolean ones fair coins, integer feeds that index an embedding
(lookup_table_v2's Ids) lie below its vocabulary size, other integer feeds are 0 or 1."""
from __future__ import annotations

import numpy as np

from keel.program import dtypes

BATCH = 2  # what a -1 dimension becomes


class NoShapeError(ValueError):
    """A feed declares no shape to make a random input of."""


def random_feeds(program, feeds, params, seed: int = 0, batch: int = BATCH) -> dict[str, np.ndarray]:
    """{feed name: a random array of its declared shape and dtype}; `params` (name ->
    array) gives the embedding tables' vocabulary sizes."""
    rng = np.random.default_rng(seed)
    block = program.global_block()
    inputs = {}
    for name in feeds:
        var = block.var(name)
        if var.shape is None:
            raise NoShapeError(f"feed {name!r} has no declared shape to make a random input of")
        shape = [batch if d < 0 else d for d in var.shape]
        dtype = dtypes.to_numpy(var.dtype)
        if dtype.kind == "f":
            inputs[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            inputs[name] = rng.random(shape) < 0.5
        else:
            vocab = [np.shape(params[op.input("W")[0]])[0] for op in block.ops
                     if op.type == "lookup_table_v2" and op.input("Ids") == [name]]
            inputs[name] = rng.integers(0, min(vocab) if vocab else 2, shape).astype(dtype)
    return inputs
