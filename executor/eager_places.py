"""Eager tensors between places: `Tensor.cpu()`, `.cuda()`, `.pin_memory()`, `.to()`.

As PaddlePaddle 3's (its `Tensor._copy_to` under all four): a move to another place is a
copy that starts a new leaf of the tape, with the source's `stop_gradient` and
`persistable`, so the copy collects its own `.grad` there and backward does not cross the
move (PaddlePaddle records no gradient node for it either); a move to the place the tensor
is on already returns the tensor itself. A dtype change in `to()` is the cast op, recorded
like any other op, so gradients do flow back through it (to the source's place: a cast
runs where its input lives), as PaddlePaddle's `to(dtype)` is its cast.
"""
from __future__ import annotations

import numpy as np

from keel.executor.place import CPUPlace, CUDAPinnedPlace, CUDAPlace, default_place, device_count, place_of_device
from keel.program import dtypes
from keel.program.tensor import Tensor

_TO_KEYWORDS = ("device", "dtype", "blocking", "other")


def place_of(t: Tensor):
    """Tensor.place: where its value lives."""
    return CUDAPinnedPlace() if t._pinned else place_of_array(t.value)


def place_of_array(array):
    return CPUPlace() if isinstance(array, np.ndarray) else CUDAPlace(int(array.device.id))


def cuda_place(device_id):
    """`cuda(device_id)`'s place: GPU device_id; None: set_device's GPU, else GPU 0."""
    if device_id is None:
        place = default_place()
        return place if isinstance(place, CUDAPlace) else CUDAPlace(0)
    if not isinstance(device_id, (int, np.integer)) or isinstance(device_id, bool):
        raise ValueError(f"Tensor.cuda: device_id must be an int or None, got {device_id!r}")
    return CUDAPlace(int(device_id))


def moved(t: Tensor, device) -> Tensor:
    """`t` on `device` (a place or a device name): itself when it is there, else a copy
    there that is a new leaf of the tape (see the module docstring)."""
    place = place_of_device(device)
    if place == place_of(t):
        return t
    value = t.value
    if isinstance(place, CUDAPlace):
        if place.device_id >= device_count():
            raise ValueError(f"tensor {t.name} to {place}: Keel finds {device_count()} usable CUDA device(s) "
                             '(a GPU needs cupy and a driver: pip install -e ".[gpu]" in the Keel checkout)')
        with place.device_context():
            value = place.xp.asarray(value)
    elif isinstance(place, CUDAPinnedPlace):
        value = _pinned_copy(t, value)
    else:  # the CPU: a copy of its own, never a buffer the source keeps writing (pinned memory)
        value = value.copy() if isinstance(value, np.ndarray) else value.get()
    out = Tensor(value, t._dtype, stop_gradient=t._stop_gradient, persistable=t._persistable)
    if isinstance(place, CUDAPinnedPlace):
        out._pinned = True
    return out


def _pinned_copy(t: Tensor, value):
    """The value in page-locked host memory (cupyx.empty_pinned: a numpy array over it)."""
    try:
        import cupyx
        empty_pinned = cupyx.empty_pinned
    except (ImportError, AttributeError) as e:
        raise RuntimeError(f"tensor {t.name}.pin_memory(): pinned memory needs cupy and a CUDA device "
                           '(pip install -e ".[gpu]" in the Keel checkout)') from e
    host = value if isinstance(value, np.ndarray) else value.get()
    buffer = empty_pinned(host.shape, host.dtype)
    buffer[...] = host
    return buffer


def converted(t: Tensor, device=None, dtype=None) -> Tensor:
    """Tensor._to: cast (a recorded op) on the tensor's place, then moved to `device`."""
    if dtype is not None and dtypes.to_code(dtype) != t._dtype:
        from keel.program.layers.math import cast
        t = cast(t, dtype)
    return t if device is None else moved(t, device)


def to_arguments(args: tuple, kwargs: dict):
    """(device, dtype) from PaddlePaddle's three forms of `Tensor.to`: to(dtype, blocking),
    to(device, dtype=None, blocking=None), to(other_tensor, blocking). `blocking` is
    checked and otherwise moot: copies here complete before `to` returns."""
    unknown = sorted(set(kwargs) - set(_TO_KEYWORDS))
    if unknown:
        raise TypeError(f"Tensor.to() got an unexpected keyword argument {unknown[0]!r}")
    if not 0 < len(args) + len(kwargs) <= 3:
        raise TypeError("Tensor.to() takes (device, dtype=None, blocking=None), (dtype, blocking=None) or "
                        f"(other_tensor, blocking=None); got {len(args) + len(kwargs)} arguments")
    first = args[0] if args else None
    if isinstance(first, Tensor) or _is_dtype(first):
        device, dtype = (place_of(first), first._dtype) if isinstance(first, Tensor) else (None, first)
        rest = args[1:2]
    elif args:
        device, dtype, rest = first, (args[1] if len(args) > 1 else kwargs.get("dtype")), args[2:3]
    else:
        device, dtype, rest = kwargs.get("device"), kwargs.get("dtype"), ()
        other = kwargs.get("other")
        if device is None and dtype is None and isinstance(other, Tensor):
            device, dtype = place_of(other), other._dtype
    blocking = rest[0] if rest else kwargs.get("blocking")
    if blocking is not None and not isinstance(blocking, bool):
        raise TypeError(f"Tensor.to(): blocking must be True, False or None, got {blocking!r}")
    return device, dtype


def _is_dtype(value) -> bool:
    """A dtype, not a device: a dtype object, a numpy type, or a dtype's name."""
    if isinstance(value, (dtypes.DType, np.dtype)) or isinstance(value, type) and issubclass(value, np.generic):
        return True
    if isinstance(value, str):
        try:
            dtypes.to_code(value)
            return True
        except TypeError:
            return False
    return False
