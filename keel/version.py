"""`paddle.version`: Keel's release, from `keel.__version__` (the one place it is written)."""
from keel import __version__ as full_version

__all__ = ["full_version", "major", "minor", "patch", "rc", "commit", "istaged", "with_mkl", "cuda", "cudnn", "show"]

major, minor, patch = (full_version.split(".") + ["0", "0"])[:3]
rc = "0"
commit = "keel"
istaged = True
with_mkl = "OFF"   # Keel's CPU kernels are numpy's


def cuda() -> str | bool:
    """The CUDA runtime version cupy reports ("12.4"), or False without cupy and a device."""
    from keel.kernels.array_module import cupy_available
    if not cupy_available():
        return False
    import cupy
    version = int(cupy.cuda.runtime.runtimeGetVersion())
    return f"{version // 1000}.{version % 1000 // 10}"


def cudnn() -> bool:
    """False: Keel's GPU kernels do not use cuDNN."""
    return False


def show() -> None:
    """Print the release, as `paddle.version.show()` does."""
    print(f"full_version: {full_version}\nmajor: {major}\nminor: {minor}\npatch: {patch}\nrc: {rc}\n"
          f"cuda: {cuda()}\ncudnn: {cudnn()}")
