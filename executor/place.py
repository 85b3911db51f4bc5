"""Places: where a program's arrays live and its kernels run."""
from __future__ import annotations

from kernels.array_module import get_array_module


class CPUPlace:
    device = "cpu"

    @property
    def xp(self):
        return get_array_module("cpu")

    def __repr__(self):
        return "CPUPlace()"

    def __eq__(self, other):
        return isinstance(other, CPUPlace)

    __hash__ = object.__hash__


class CUDAPlace:
    """GPU `device_id`, through cupy (`pip install -e ".[gpu]"` in the Keel checkout)."""
    device = "gpu"

    def __init__(self, device_id: int = 0):
        self.device_id = int(device_id)

    @property
    def xp(self):
        xp = get_array_module("gpu")
        xp.cuda.Device(self.device_id).use()
        return xp

    def __repr__(self):
        return f"CUDAPlace({self.device_id})"

    def __eq__(self, other):
        return isinstance(other, CUDAPlace) and other.device_id == self.device_id

    __hash__ = object.__hash__
