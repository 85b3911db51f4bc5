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


class InputsFileError(ValueError):
    """An --inputs file that cannot be read, or lacks a feed's array."""


def npz_feeds(npz: str, feeds) -> dict[str, np.ndarray]:
    """{feed name: its array} from an .npz holding one array per feed, named `in:<feed>`
    (as the test fixtures record them) or `<feed>`."""
    try:
        data = np.load(npz, allow_pickle=False)
    except Exception as e:  # OSError, zipfile.BadZipFile, ValueError: all say "not a readable .npz"
        raise InputsFileError(f"--inputs {npz}: cannot read it as an .npz file: {e}") from None
    with data:
        inputs = {}
        for feed in feeds:
            key = next((k for k in (f"in:{feed}", feed) if k in data.files), None)
            if key is None:
                raise InputsFileError(f"--inputs {npz} has no array `in:{feed}` for feed {feed!r} "
                                      f"(it has {', '.join(data.files) or 'none'})")
            inputs[feed] = data[key]
        return inputs
