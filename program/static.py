"""`program.static`: the program-side half of PaddlePaddle's `paddle.static`: `data`,
`InputSpec` (a model input that `program.jit.save` turns into a feed), `Program`,
`program_guard`, the default programs, `name_scope`, `append_backward`/`gradients`,
`save_inference_model`/`load_inference_model`, `amp`, and `static.nn` (the
builder layers and the control flow: program/static_nn.py). `keel.static` adds what runs
programs (Executor, scopes, save/load, CompiledProgram, cpu_places), which lives in the executor package."""
from __future__ import annotations

import contextlib

import numpy as np

from keel.program import amp, dtypes  # noqa: F401  (program.static.amp: PaddlePaddle's paddle.static.amp)
from keel.program import static_nn as nn
from keel.program.backward import append_backward, gradients  # noqa: F401
from keel.program.default import (default_main_program, default_startup_program, name_scope,  # noqa: F401
                                  program_guard)
from keel.program.global_var import create_global_var  # noqa: F401
from keel.program.io.atomic import atomic_write
from keel.program.io.inference_model import (_names, inference_program, load_inference_model,  # noqa: F401
                                             save_inference_model)
from keel.program.io.program_file import parse_program
from keel.program.layers.data import data
from keel.program.layers.parameter import create_parameter  # noqa: F401
from keel.program.nn import accuracy  # noqa: F401
from keel.program.program import Program  # noqa: F401
from keel.program.variable import Variable  # noqa: F401

__all__ = ["InputSpec", "data", "nn", "amp", "create_global_var", "Program", "Variable", "program_guard",
           "default_main_program", "default_startup_program", "name_scope", "append_backward", "gradients",
           "save_inference_model", "load_inference_model", "create_parameter", "accuracy", "device_guard",
           "normalize_program", "serialize_program", "deserialize_program", "save_to_file", "load_from_file"]


@contextlib.contextmanager
def device_guard(device=None):
    """PaddlePaddle's `static.device_guard`: ops built inside run on `device` ("cpu", "gpu",
    "gpu:N" or None). Keel runs a program's ops on its Executor's place, copying host inputs
    over where an op needs them, so the block only checks the name.

    Examples:
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 4])
        ...     with paddle.static.device_guard("cpu"):     # PaddlePaddle places these ops on the CPU;
        ...         y = paddle.scale(x, 2.0)                # Keel runs all on the Executor's place
        >>> exe = paddle.static.Executor(paddle.CPUPlace())
        >>> exe.run(main, feed={"x": paddle.ones([1, 4]).numpy()}, fetch_list=[y])[0]
        array([[2., 2., 2., 2.]], dtype=float32)
    """
    if device is not None and not (device in ("cpu", "gpu") or str(device).startswith("gpu:")):
        raise ValueError(f"device_guard: device must be 'cpu', 'gpu' or 'gpu:N', got {device!r}")
    yield


def normalize_program(program, feed_vars, fetch_vars, **kwargs):
    """The inference program of `program` from `feed_vars` to `fetch_vars` (what
    save_inference_model writes): pruned, with feed and fetch ops.

    Examples:
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 4])
        ...     y = paddle.scale(x, 2.0)
        ...     unused = paddle.scale(x, 3.0)
        >>> pruned = paddle.static.normalize_program(main, [x], [y])      # only what y needs, feed and fetch ops added
        >>> [op.type for op in pruned.global_block().ops]
        ['feed', 'scale', 'fetch']
    """
    return inference_program(program, _names(feed_vars, "feed_vars"), _names(fetch_vars, "fetch_vars"))


def serialize_program(feed_vars, fetch_vars, **kwargs) -> bytes:
    """normalize_program(kwargs' `program`, default the main program) as ProgramDesc bytes.

    Examples:
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 4])
        ...     y = paddle.scale(x, 2.0)
        >>> data = paddle.static.serialize_program([x], [y], program=main)      # .pdmodel bytes
        >>> type(data), len(paddle.static.deserialize_program(data).global_block().ops)
        (<class 'bytes'>, 3)
    """
    program = kwargs.get("program") or default_main_program()
    return normalize_program(program, feed_vars, fetch_vars).serialize_to_string()


def deserialize_program(data: bytes):
    """A Program from serialize_program's bytes (a ProgramDesc, or PIR JSON).

    Examples:
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 4])
        ...     y = paddle.scale(x, 2.0)
        >>> data = paddle.static.serialize_program([x], [y], program=main)
        >>> program = paddle.static.deserialize_program(data)
        >>> [op.type for op in program.global_block().ops]
        ['feed', 'scale', 'fetch']
    """
    return parse_program(bytes(data), source="<serialized program>")


def save_to_file(path, content: bytes) -> None:
    """Write `content` (bytes) to `path`, atomically.

    Examples:
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 4])
        ...     y = paddle.scale(x, 2.0)
        >>> import os
        >>> os.makedirs("out", exist_ok=True)       # (the folder must exist, as for PaddlePaddle's)
        >>> paddle.static.save_to_file("out/model.pdmodel", paddle.static.serialize_program([x], [y], program=main))
        >>> program = paddle.static.deserialize_program(paddle.static.load_from_file("out/model.pdmodel"))
        >>> [op.type for op in program.global_block().ops]
        ['feed', 'scale', 'fetch']
    """
    if not isinstance(content, (bytes, bytearray)):
        raise TypeError(f"save_to_file: content must be bytes, got {type(content).__name__}")
    atomic_write(path, bytes(content))


def load_from_file(path) -> bytes:
    """The bytes of the file at path (the pair of save_to_file).

    Examples:
        >>> import os
        >>> import keel as paddle
        >>> os.makedirs("out", exist_ok=True)
        >>> paddle.static.save_to_file("out/blob.bin", b"keel")
        >>> paddle.static.load_from_file("out/blob.bin")
        b'keel'
    """
    with open(path, "rb") as f:
        return f.read()


class InputSpec:
    """An input's shape (-1 or None for a size known only at run time), dtype and name
    (paddle.static.InputSpec).

    Examples:
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> spec = InputSpec([None, 784], "float32", "image")
        >>> spec
        InputSpec(shape=[-1, 784], dtype=float32, name='image')
        >>> spec.shape, spec.dtype, spec.name
        ([-1, 784], 'float32', 'image')
    """

    def __init__(self, shape, dtype="float32", name: str | None = None, stop_gradient: bool = False):
        self.shape = [-1 if d is None else int(d) for d in shape]
        self.dtype = dtypes.name(dtypes.to_code(dtype))
        self.name = name
        self.stop_gradient = stop_gradient

    @classmethod
    def from_tensor(cls, tensor, name: str | None = None) -> "InputSpec":
        """The spec of an eager Tensor or a static Variable: its shape, dtype and (unless
        `name` is given) its name.

        Examples:
            >>> import keel as paddle
            >>> from keel.static import InputSpec
            >>> InputSpec.from_tensor(paddle.ones([2, 3]), name="x")
            InputSpec(shape=[2, 3], dtype=float32, name='x')
        """
        if not hasattr(tensor, "shape") or not hasattr(tensor, "dtype") or isinstance(tensor, np.ndarray):
            raise TypeError(f"InputSpec.from_tensor takes a Tensor or a static Variable, not "
                            f"{type(tensor).__name__} (InputSpec.from_numpy takes an ndarray)")
        return cls(tensor.shape, tensor.dtype, name if name is not None else getattr(tensor, "name", None))

    @classmethod
    def from_numpy(cls, ndarray, name: str | None = None) -> "InputSpec":
        """The spec of a numpy array: its shape and dtype.

        Examples:
            >>> import numpy as np
            >>> from keel.static import InputSpec
            >>> InputSpec.from_numpy(np.zeros((4, 8), "int64"), name="ids")
            InputSpec(shape=[4, 8], dtype=int64, name='ids')
        """
        return cls(np.shape(ndarray), np.asarray(ndarray).dtype, name)

    def batch(self, batch_size) -> "InputSpec":
        """Put `batch_size` (an int, or a list/tuple of one) before the shape; returns self.

        Examples:
            >>> from keel.static import InputSpec
            >>> InputSpec([784], "float32", "image").batch(16)
            InputSpec(shape=[16, 784], dtype=float32, name='image')
        """
        if isinstance(batch_size, (list, tuple)):
            if len(batch_size) != 1:
                raise ValueError(f"InputSpec.batch takes one batch size, got {list(batch_size)}")
            batch_size = batch_size[0]
        if not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool):
            raise TypeError(f"InputSpec.batch takes an int batch size, got {type(batch_size).__name__}")
        self.shape = [int(batch_size)] + self.shape
        return self

    def unbatch(self) -> "InputSpec":
        """Drop the first dimension (the batch); returns self.

        Examples:
            >>> from keel.static import InputSpec
            >>> InputSpec([None, 784], "float32", "image").unbatch()
            InputSpec(shape=[784], dtype=float32, name='image')
        """
        if not self.shape:
            raise ValueError(f"InputSpec {self.name!r} has no dimension to unbatch (its shape is [])")
        self.shape = self.shape[1:]
        return self

    def __repr__(self):
        return f"InputSpec(shape={self.shape}, dtype={self.dtype}, name={self.name!r})"

    def __eq__(self, other):
        return (isinstance(other, InputSpec)
                and (self.shape, self.dtype, self.name) == (other.shape, other.dtype, other.name))

    def __hash__(self):
        return hash((tuple(self.shape), self.dtype, self.name))
