"""Write a file so that readers see either the old content or the complete new content.

The data goes to a temporary file next to the target (same directory, hence the same file
system, so the final rename is atomic). The temporary file is flushed and fsynced, then
`os.replace`d onto the target. If anything fails before that point the temporary file is
removed and the target is left exactly as it was.
"""
from __future__ import annotations

import contextlib
import os
import secrets
from typing import BinaryIO, Iterator

__all__ = ["atomic_open", "atomic_write"]

# O_BINARY only exists (and only matters) on Windows.
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def _create_temp(path: str) -> tuple[int, str]:
    """Create a new, empty, hidden file beside `path`; returns (fd, its path).

    Created with mode 0o666 so the process umask applies as for a plain `open(path, "wb")`
    (tempfile.mkstemp would force 0o600)."""
    directory, base = os.path.split(path)
    for _ in range(100):
        tmp = os.path.join(directory, f".{base}.{secrets.token_hex(4)}.tmp")
        try:
            return os.open(tmp, _FLAGS, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as e:  # name the target and its directory, not the temp file
            raise type(e)(e.errno, f"cannot create a file in {directory or '.'!r}: {e.strerror}",
                          path) from None
    raise FileExistsError(f"{path}: could not create a unique temporary file beside it")


def _fsync_directory(directory: str) -> None:
    """Make the rename itself durable (POSIX). Best effort: not possible on every platform."""
    try:
        fd = os.open(directory or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextlib.contextmanager
def atomic_open(path: str | os.PathLike) -> Iterator[BinaryIO]:
    """Context manager yielding a binary file object; its content replaces `path` on a clean exit.

    On an exception inside the `with` block (or while finishing the write) the temporary file is
    deleted, `path` is untouched and the exception propagates."""
    path = os.fspath(path)
    fd, tmp = _create_temp(path)
    try:
        try:
            f = os.fdopen(fd, "wb")
        except BaseException:
            os.close(fd)
            raise
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        # Keep the permission bits of a file we replace (chmod on the temp file, not the target).
        try:
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        except FileNotFoundError:
            pass
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    if os.name == "posix":
        _fsync_directory(os.path.dirname(path))


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Replace the content of `path` with `data` atomically (see `atomic_open`)."""
    with atomic_open(path) as f:
        f.write(data)
