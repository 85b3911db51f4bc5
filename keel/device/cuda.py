"""`paddle.device.cuda`: the CUDA devices, through cupy (none without it)."""
from keel.executor.place import device_count

__all__ = ["device_count", "synchronize", "empty_cache", "memory_allocated", "memory_reserved", "get_device_name",
           "get_device_capability"]


def _cupy():
    from keel.kernels.array_module import get_array_module
    return get_array_module("gpu")


def synchronize(device=None) -> None:
    """Wait for every kernel queued on the device (the current one by default).

    Examples:
        >>> import keel as paddle
        >>> if paddle.device.cuda.device_count() > 0:
        ...     y = paddle.ones([1024, 1024]).cuda().matmul(paddle.ones([1024, 1024]).cuda())
        ...     paddle.device.cuda.synchronize()      # the matmul has finished (e.g. before reading a timer)
    """
    cupy = _cupy()
    with cupy.cuda.Device(_index(device)):
        cupy.cuda.runtime.deviceSynchronize()


def empty_cache() -> None:
    """Give the memory pool's free blocks back to the device (cupy keeps freed blocks).

    Examples:
        >>> import keel as paddle
        >>> if paddle.device.cuda.device_count() > 0:
        ...     x = paddle.ones([1024, 1024]).cuda()
        ...     del x
        ...     paddle.device.cuda.empty_cache()     # the freed block goes back to the device
    """
    if device_count():
        _cupy().get_default_memory_pool().free_all_blocks()


def memory_allocated(device=None) -> int:
    """Bytes of device memory Keel's arrays hold (cupy's pool, in use).

    Examples:
        >>> import keel as paddle
        >>> if paddle.device.cuda.device_count() > 0:
        ...     before = paddle.device.cuda.memory_allocated()
        ...     x = paddle.ones([256, 1024]).cuda()                   # 1 MiB of float32
        ...     assert paddle.device.cuda.memory_allocated() - before >= 256 * 1024 * 4
    """
    return int(_cupy().get_default_memory_pool().used_bytes()) if device_count() else 0


def memory_reserved(device=None) -> int:
    """Bytes the memory pool holds from the device, in use or free.

    Examples:
        >>> import keel as paddle
        >>> if paddle.device.cuda.device_count() > 0:
        ...     x = paddle.ones([256, 1024]).cuda()
        ...     assert paddle.device.cuda.memory_reserved() >= paddle.device.cuda.memory_allocated()
    """
    return int(_cupy().get_default_memory_pool().total_bytes()) if device_count() else 0


def get_device_name(device=None) -> str:
    """The name of a CUDA device (the current one by default), as the driver reports it.

    Examples:
        >>> import keel as paddle
        >>> if paddle.device.cuda.device_count() > 0:
        ...     name = paddle.device.cuda.get_device_name(0)     # e.g. 'NVIDIA H100 80GB HBM3'
    """
    cupy = _cupy()
    name = cupy.cuda.runtime.getDeviceProperties(_index(device))["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def get_device_capability(device=None) -> tuple[int, int]:
    """The compute capability (major, minor) of a CUDA device (the current one by default).

    Examples:
        >>> import keel as paddle
        >>> if paddle.device.cuda.device_count() > 0:
        ...     major, minor = paddle.device.cuda.get_device_capability(0)   # (9, 0) on an H100
    """
    props = _cupy().cuda.runtime.getDeviceProperties(_index(device))
    return int(props["major"]), int(props["minor"])


def _index(device) -> int:
    """A device index from None (the current), an int, "gpu:N" or a CUDAPlace."""
    if device is None:
        return int(_cupy().cuda.runtime.getDevice())
    if isinstance(device, int):
        return device
    if hasattr(device, "device_id"):
        return int(device.device_id)
    text = str(device)
    if text.startswith(("gpu:", "cuda:")) and text.split(":", 1)[1].isdigit():
        return int(text.split(":", 1)[1])
    raise ValueError(f"expected a GPU index, 'gpu:N' or a CUDAPlace, got {device!r}")
