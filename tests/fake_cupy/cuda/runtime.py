"""cupy.cuda.runtime (cupy_backends/cuda/api/runtime): the device count and the current
device. The count is what tests/standin.py's install() was given (1 by default)."""
from .. import _core

is_hip = False


class CUDARuntimeError(RuntimeError):
    def __init__(self, status):
        self.status = status
        super().__init__({101: "cudaErrorInvalidDevice: invalid device ordinal"}.get(status, f"CUDA error {status}"))


def getDeviceCount() -> int:
    return _core.CONFIG["device_count"]


def getDevice() -> int:
    return _core.STATE.device


def setDevice(device: int) -> None:
    device = int(device)
    if not 0 <= device < getDeviceCount():
        raise CUDARuntimeError(101)
    _core.STATE.device = device


def deviceSynchronize() -> None:
    pass


def runtimeGetVersion() -> int:
    return 12080


def driverGetVersion() -> int:
    return 12080


def memGetInfo():
    return 140 << 30, 141 << 30  # free, total bytes


def __getattr__(name):
    from .._names import CUPY_CUDA_RUNTIME
    if name in CUPY_CUDA_RUNTIME:
        raise AttributeError(f"cupy.cuda.runtime.{name} exists in cupy but the cupy stand-in does not imitate it")
    raise AttributeError(f"module 'cupy.cuda.runtime' has no attribute {name!r}")
