"""`program.save(state_dict, path)` / `program.load(path)`: parameter dicts in a file that
loading cannot run code from.

PaddlePaddle's `paddle.save` writes a pickle (`.pdparams`), and unpickling runs whatever
the file says; Keel never unpickles. Its state files are NumPy's documented `.npz` format
(a zip of `.npy` arrays), read with `allow_pickle=False`. Nested dicts are stored with
their keys joined by "/" and come back nested; numbers come back as 0-d arrays. A pickle
given to `load` is refused with a message saying how to convert it.
"""
from __future__ import annotations

import os
import zipfile

import numpy as np

from keel.program.dygraph import in_dynamic_mode
from keel.program.errors import KeelError
from keel.program.io.atomic import atomic_open
from keel.program.tensor import Tensor

__all__ = ["save", "load", "StateFileError"]

_SEP = "/"


class StateFileError(KeelError, ValueError):
    """A state file that is not one, or a state dict that cannot be stored."""


def _flatten(state, prefix="") -> dict:
    flat = {}
    for key, value in state.items():
        if not isinstance(key, str) or not key or _SEP in key:
            raise StateFileError(f"save: key {key!r} must be a non-empty string without {_SEP!r}")
        name = prefix + key
        if isinstance(value, dict):
            flat.update(_flatten(value, name + _SEP))
            continue
        array = np.asarray(value.get() if hasattr(value, "get") and not isinstance(value, np.ndarray) else value)
        if array.dtype == object or array.dtype.kind in "OSUV":
            raise StateFileError(f"save: {name!r} is {type(value).__name__}, not an array or a number")
        flat[name] = array
    return flat


def save(state_dict: dict, path) -> None:
    """Write `state_dict` (name -> array or number, dicts nested) to `path`, atomically.

    Examples:
        >>> import keel as paddle
        >>> layer = paddle.nn.Linear(2, 3)
        >>> paddle.save(layer.state_dict(), "out/linear.pdparams")
        >>> opt = paddle.optimizer.Adam(parameters=layer.parameters())
        >>> paddle.save(opt.state_dict(), "out/linear.pdopt")
        >>> sorted(paddle.load("out/linear.pdparams"))
        ['bias', 'weight']
    """
    if not isinstance(state_dict, dict):
        raise StateFileError(f"save: expects a dict (a state_dict), got {type(state_dict).__name__}")
    flat = _flatten(state_dict)
    directory = os.path.dirname(os.fspath(path))
    if directory:
        os.makedirs(directory, exist_ok=True)
    with atomic_open(path) as f:
        np.savez(f, **flat)


def load(path, return_numpy: bool = False, **configs) -> dict:
    """Read a state file written by `save` (nested dicts restored). In dynamic mode (the
    default) its arrays come back as Tensors, as PaddlePaddle's `paddle.load` gives them;
    with `return_numpy=True`, or under `enable_static()`, as numpy arrays. A number saved
    (a 0-d array) comes back as a 0-d numpy array either way: `int()`/`float()` read it.
    PaddlePaddle's other `configs` (`model_filename`, `params_filename`,
    `keep_name_table`) name pieces of its pickled formats, which Keel does not read.

    Examples:
        >>> import keel as paddle
        >>> layer = paddle.nn.Linear(2, 3)
        >>> paddle.save(layer.state_dict(), "out/linear.pdparams")
        >>> state = paddle.load("out/linear.pdparams")
        >>> sorted(state)
        ['bias', 'weight']
        >>> layer.set_state_dict(state)
        ([], [])
    """
    if configs:
        raise StateFileError(f"load: {sorted(configs)} {'is' if len(configs) == 1 else 'are'} not taken: Keel's "
                             f"state files are .npz archives (save/load), and its models load with jit.load or "
                             f"static.load_inference_model")
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(4)
    if head[:1] == b"\x80":
        raise StateFileError(f"{path} is a pickle (PaddlePaddle's paddle.save format); loading a pickle can run "
                             "code, so Keel never does. Convert it where PaddlePaddle is installed and you trust the "
                             "file: state = paddle.load(path); np.savez(out, **{k: np.asarray(v) for k, v in "
                             "state.items()}), then program.load(out)")
    if head not in (b"PK\x03\x04", b"PK\x05\x06"):  # an archive's first entry, or an empty archive (save({}))
        raise StateFileError(f"{path} is not a Keel state file (an .npz archive written by program.save)")
    out: dict = {}
    try:
        with np.load(path, allow_pickle=False) as archive:
            for name in archive.files:
                node = out
                *parents, leaf = name.split(_SEP)
                for p in parents:
                    node = node.setdefault(p, {})
                node[leaf] = archive[name]
    except (ValueError, OSError, zipfile.BadZipFile, KeyError) as e:
        raise StateFileError(f"{path}: cannot read it as a state file: {e}") from None
    return out if return_numpy or not in_dynamic_mode() else _as_tensors(out)


def _as_tensors(state: dict) -> dict:
    """The arrays of a loaded state (nested dicts too) as eager Tensors, 0-d arrays kept."""
    return {key: _as_tensors(value) if isinstance(value, dict)
            else value if value.ndim == 0 else Tensor(value) for key, value in state.items()}
