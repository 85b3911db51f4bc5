"""Places: where a program's arrays live and its kernels run.

`place.device_context()` is what a thread enters before it makes arrays or runs kernels
for the place: cupy's current device is per thread (CUDA's is), so the executor enters
it in whichever thread runs, around every run, and leaves the thread's previous device
current afterwards. On CPUPlace it is one shared no-op context."""
from __future__ import annotations

from contextlib import nullcontext

from keel.kernels.array_module import get_array_module

_NO_DEVICE = nullcontext()  # reusable and reentrant


class _HostPlace:
    """Host memory, numpy arrays: the CPU and pinned places differ only in name (a pinned
    array is a host array to the kernels). Places of one kind with one device are equal."""
    device = "cpu"

    @property
    def xp(self):
        return get_array_module("cpu")

    def device_context(self):
        """numpy has no current device: a no-op context."""
        return _NO_DEVICE

    def __repr__(self):
        return f"{type(self).__name__}()"

    def __eq__(self, other):
        return type(other) is type(self)

    def __hash__(self):
        return hash(type(self))


class CPUPlace(_HostPlace):
    """The host CPU, where tensors live and ops run unless a CUDAPlace is chosen.

    Examples:
        >>> import keel as paddle
        >>> place = paddle.CPUPlace()
        >>> place
        CPUPlace()
        >>> paddle.to_tensor([1.0], place=place).place
        CPUPlace()
    """


class CUDAPlace:
    """GPU `device_id`, through cupy (`pip install -e ".[gpu]"` in the Keel checkout).

    Examples:
        >>> import keel as paddle
        >>> place = paddle.CUDAPlace(0)      # GPU 0; tensors and executors placed there need cupy and a GPU
        >>> place
        CUDAPlace(0)
    """
    device = "gpu"

    def __init__(self, device_id: int = 0):
        self.device_id = int(device_id)

    def get_device_id(self) -> int:
        """The GPU's index (PaddlePaddle's CUDAPlace.get_device_id)."""
        return self.device_id

    @property
    def xp(self):
        return get_array_module("gpu")

    def device_context(self):
        """`with place.device_context():` makes GPU `device_id` current in the calling
        thread and restores the thread's previous device on exit. A new cupy Device each
        time: one Device object keeps a single stack of previous devices, which threads
        entering it at once would interleave."""
        return self.xp.cuda.Device(self.device_id)

    def __repr__(self):
        return f"CUDAPlace({self.device_id})"

    def __eq__(self, other):
        return isinstance(other, CUDAPlace) and other.device_id == self.device_id

    def __hash__(self):
        return hash((CUDAPlace, self.device_id))


class CUDAPinnedPlace(_HostPlace):
    """Page-locked host memory (`Tensor.pin_memory()`): numpy arrays whose copies to a GPU
    can run asynchronously. Kernels see host arrays, so ops on a pinned tensor run on the
    CPU, as PaddlePaddle's do.

    Examples:
        >>> import keel as paddle
        >>> place = paddle.CUDAPinnedPlace()
        >>> place
        CUDAPinnedPlace()
        >>> paddle.to_tensor([1.0, 2.0], place=place).numpy()
        array([1., 2.], dtype=float32)
    """


def place_of_device(device) -> CPUPlace | CUDAPlace | CUDAPinnedPlace:
    """A place from PaddlePaddle's device names: "cpu", "gpu" (device 0), "gpu:N",
    "gpu_pinned", or a place itself."""
    if isinstance(device, (CPUPlace, CUDAPlace, CUDAPinnedPlace)):
        return device
    text = str(device).strip().lower() if isinstance(device, str) else None
    if text == "cpu":
        return CPUPlace()
    if text == "gpu_pinned":
        return CUDAPinnedPlace()
    if text == "gpu":
        return CUDAPlace(0)
    if text and text.startswith("gpu:") and text[4:].isdigit():
        return CUDAPlace(int(text[4:]))
    raise ValueError(f"unknown device {device!r}: Keel runs on \"cpu\", \"gpu\", \"gpu:N\" or "
                     "\"gpu_pinned\" (or a CPUPlace / CUDAPlace / CUDAPinnedPlace)")


# -- the default place: paddle.set_device / paddle.get_device ----------------------------------
_default_place = None  # None: CPUPlace()


def default_place():
    """The place `Executor()` and `to_tensor` use when given none, and where eager ops of
    no input (parameters' initializers, zeros, rand) put their results (`set_device`)."""
    return _default_place or CPUPlace()


def set_device(device: str):
    """PaddlePaddle's `paddle.set_device`: "cpu", "gpu" (GPU 0) or "gpu:N" (or a place)
    becomes the place `Executor()` and `to_tensor` use when given none; returns that place.
    A GPU needs cupy and that device: a ValueError says how many devices there are.

    Examples:
        >>> import keel as paddle
        >>> paddle.set_device("cpu")
        CPUPlace()
        >>> paddle.to_tensor([1.0]).place
        CPUPlace()
        >>> if paddle.device.cuda.device_count() > 0:
        ...     _ = paddle.set_device("gpu:0")
        ...     place = paddle.to_tensor([1.0]).place          # CUDAPlace(0)
        ...     _ = paddle.set_device("cpu")
    """
    place = place_of_device(device)
    if isinstance(place, CUDAPinnedPlace):
        raise ValueError("set_device('gpu_pinned'): pinned host memory holds tensors (Tensor.pin_memory()), "
                         "it runs no ops; set \"cpu\" or \"gpu\"")
    if place.device != "cpu" and place.device_id >= device_count():
        raise ValueError(f"set_device({device!r}): Keel finds {device_count()} usable CUDA device(s) (a GPU "
                         f'needs cupy and a driver: pip install -e ".[gpu]" in the Keel checkout)')
    global _default_place
    _default_place = place
    return place


def get_device() -> str:
    """"cpu" or "gpu:N": the default place `set_device` chose.

    Examples:
        >>> import keel as paddle
        >>> paddle.set_device("cpu")
        CPUPlace()
        >>> paddle.get_device()
        'cpu'
    """
    place = default_place()
    return "cpu" if place.device == "cpu" else f"gpu:{place.device_id}"


def device_count() -> int:
    """How many CUDA devices cupy finds (0 without cupy or a driver).

    Examples:
        >>> import keel as paddle
        >>> n = paddle.device.cuda.device_count()
        >>> isinstance(n, int) and n >= 0           # 0 on a machine without cupy or a GPU
        True
    """
    try:
        import cupy
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # no cupy, no driver, or no device
        return 0
