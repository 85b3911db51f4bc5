"""cupy.cuda, the parts Keel uses: Device (use(), a context manager; the current device is
per thread, as in cupy), get_device_id, is_available, runtime, Stream and
get_current_stream."""
from .. import _core
from . import runtime


class Device:
    """cupy.cuda.Device(i): `use()` makes it the calling thread's current device; `with
    Device(i):` does so for the block and restores the previous one after. The id is
    checked when the device is used (CUDARuntimeError for a device that does not exist)."""

    def __init__(self, device=None):
        self.id = _core.STATE.device if device is None else int(device)
        self._before = []

    def use(self):
        runtime.setDevice(self.id)

    def synchronize(self):
        if not 0 <= self.id < runtime.getDeviceCount():
            raise runtime.CUDARuntimeError(101)

    @property
    def compute_capability(self):
        return "90"

    @property
    def mem_info(self):
        return runtime.memGetInfo()

    def __enter__(self):
        self._before.append(_core.STATE.device)
        self.use()
        return self

    def __exit__(self, *exc):
        _core.STATE.device = self._before.pop()

    def __int__(self):
        return self.id

    def __repr__(self):
        return f"<CUDA Device {self.id}>"

    def __eq__(self, other):
        return isinstance(other, Device) and other.id == self.id

    __hash__ = None


def get_device_id() -> int:
    return _core.STATE.device


def is_available() -> bool:
    return runtime.getDeviceCount() > 0


class Stream:
    """cupy.cuda.Stream: `use()` / `with stream:` make it the thread's current stream. The
    stand-in runs everything at once, so synchronize() and done have nothing to wait for."""
    null = None  # set below: the default (legacy null) stream

    def __init__(self, null=False, non_blocking=False, ptds=False, priority=None):
        self.ptr = 0 if null else id(self)
        self.device_id = _core.STATE.device
        self._before = []

    def use(self):
        _core.STATE.stream = self
        return self

    def synchronize(self):
        pass

    @property
    def done(self):
        return True

    def __enter__(self):
        self._before.append(get_current_stream())
        return self.use()

    def __exit__(self, *exc):
        _core.STATE.stream = self._before.pop()

    def __repr__(self):
        return f"<Stream {self.ptr} (device {self.device_id})>"


Stream.null = Stream(null=True)


def get_current_stream(device_id=None):
    return _core.STATE.stream or Stream.null


def __getattr__(name):
    from .._names import CUPY_CUDA
    if name in CUPY_CUDA:
        raise AttributeError(f"cupy.cuda.{name} exists in cupy but the cupy stand-in does not imitate it")
    raise AttributeError(f"module 'cupy.cuda' has no attribute {name!r}")
