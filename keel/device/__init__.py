"""`paddle.device`: which device Keel runs on by default, and what devices there are.

    import keel as paddle
    paddle.device.set_device("gpu:0")     # Executor() and to_tensor use GPU 0 from now on
    paddle.device.get_device()            # 'gpu:0'
    paddle.device.cuda.device_count()     # CUDA devices cupy finds (0 without cupy)

The default place lives in keel.executor.place; this package only gathers the names.
`is_compiled_with_cuda` is the kernels' `cupy_available`: cupy imports and finds a device.

Examples:
    >>> import keel as paddle
    >>> paddle.device.is_compiled_with_cuda() == (paddle.device.cuda.device_count() > 0)
    True
"""
from keel.device import cuda  # noqa: F401
from keel.executor.place import get_device, set_device  # noqa: F401
from keel.kernels.array_module import cupy_available as is_compiled_with_cuda  # noqa: F401

__all__ = ["cuda", "get_device", "set_device", "is_compiled_with_cuda", "is_compiled_with_rocm",
           "is_compiled_with_xpu", "is_compiled_with_custom_device", "get_all_device_type",
           "get_all_custom_device_type", "get_available_device", "get_cudnn_version"]


def is_compiled_with_rocm() -> bool:
    """False: Keel's GPU path is CUDA's, through cupy.

    Examples:
        >>> import keel as paddle
        >>> paddle.device.is_compiled_with_rocm()
        False
    """
    return False


def is_compiled_with_xpu() -> bool:
    """False: Keel has no XPU backend.

    Examples:
        >>> import keel as paddle
        >>> paddle.device.is_compiled_with_xpu()
        False
    """
    return False


def is_compiled_with_custom_device(device_type: str) -> bool:
    """False for every type: Keel has no custom-device (NPU, MLU, ...) plugins.

    Examples:
        >>> import keel as paddle
        >>> paddle.device.is_compiled_with_custom_device("npu")
        False
    """
    return False


def get_all_custom_device_type() -> list[str]:
    """No custom-device types: Keel has no device plugins.

    Examples:
        >>> import keel as paddle
        >>> paddle.device.get_all_custom_device_type()
        []
    """
    return []


def get_cudnn_version() -> None:
    """None, as PaddlePaddle returns without cuDNN: Keel's GPU kernels do not use it.

    Examples:
        >>> import keel as paddle
        >>> print(paddle.device.get_cudnn_version())
        None
    """
    return None


def get_all_device_type() -> list[str]:
    """The device types Keel can run on here: 'cpu', and 'gpu' when cupy finds a device.

    Examples:
        >>> import keel as paddle
        >>> types = paddle.device.get_all_device_type()
        >>> "cpu" in types, set(types) <= {"cpu", "gpu"}
        (True, True)
    """
    return ["cpu"] + (["gpu"] if is_compiled_with_cuda() else [])


def get_available_device() -> list[str]:
    """'cpu' and 'gpu:N' for each CUDA device cupy finds.

    Examples:
        >>> import keel as paddle
        >>> devices = paddle.device.get_available_device()
        >>> devices[0], len(devices) == 1 + paddle.device.cuda.device_count()
        ('cpu', True)
    """
    return ["cpu"] + [f"gpu:{i}" for i in range(cuda.device_count())]
