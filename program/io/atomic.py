"""Write files so that readers see either the old content or the complete new content.

One file (`atomic_open`, `atomic_write`): the data goes to a temporary file next to the
target (same directory, hence the same file system, so the final rename is atomic). The
temporary file is flushed and fsynced, then `os.replace`d onto the target. If anything
fails before that point the temporary file is removed and the target is left exactly as
it was.

Several files as one (`FileSet`: a model and its parameters): one rename per file cannot
be atomic across files, so a process killed between two renames would leave a mix of old
and new. Each file is written to its temporary name first; then a small journal (written
atomically beside the first target) records the renames to make; then they are made and
the journal is removed. Whatever moment the writer dies, the files are the old set (no
journal yet) or the journal completes them to the new set: `complete_interrupted`, which
every save and load of the set calls first, redoes the recorded renames (each is
idempotent). A journal is obeyed only for the very files being loaded or saved, each
temporary file beside its own target, so a journal shipped inside a model directory
cannot move anything else.

Temporary names carry the writer's pid (`.<name>.<pid>-<hex>.tmp`); each write removes the
temporary files that dead writers left beside its target.
"""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
from typing import BinaryIO, Iterator

__all__ = ["atomic_open", "atomic_write", "FileSet", "complete_interrupted", "InterruptedWriteError"]

_JOURNAL_VERSION = 1


class InterruptedWriteError(OSError):
    """An interrupted multi-file write cannot be completed (its journal is malformed, names
    other files, or the directory is not writable)."""

# O_BINARY only exists (and only matters) on Windows.
_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0)


def _temp_pattern(base: str) -> re.Pattern:
    """Our temporary names beside `base`: `.<base>.<pid>-<hex>.tmp` (and the pid-less
    `.<base>.<hex>.tmp` of earlier versions)."""
    return re.compile(r"\." + re.escape(base) + r"\.(?:(\d+)-)?[0-9a-f]{8}\.tmp\Z")


# This process's temporary files being written now: the others that carry its pid were
# left by a write that died inside it (an exception that skipped the clean-up).
_live_temps: set[str] = set()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # exists, owned by someone else
        return True
    return True


def remove_stale_temps(path: str) -> None:
    """Delete the temporary files that writers of `path` which have since died left beside
    it (a write killed before its rename). Temporary files of live writers stay."""
    directory, base = os.path.split(os.fspath(path))
    pattern = _temp_pattern(base)
    try:
        names = os.listdir(directory or ".")
    except OSError:
        return
    for name in names:
        m = pattern.match(name)
        if not m:
            continue
        temp = os.path.join(directory, name)
        pid = int(m.group(1)) if m.group(1) else None
        stale = (temp not in _live_temps) if pid == os.getpid() else (pid is None or not _pid_alive(pid))
        if stale:
            with contextlib.suppress(OSError):
                os.unlink(temp)


def _create_temp(path: str) -> tuple[int, str]:
    """Create a new, empty, hidden file beside `path`; returns (fd, its path).

    Created with mode 0o666 so the process umask applies as for a plain `open(path, "wb")`
    (tempfile.mkstemp would force 0o600)."""
    directory, base = os.path.split(path)
    for _ in range(100):
        tmp = os.path.join(directory, f".{base}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
        try:
            fd = os.open(tmp, _FLAGS, 0o666)
            _live_temps.add(tmp)
            return fd, tmp
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
    if path in _live_temps:  # a FileSet's temporary file: nobody reads it until the commit
        with open(path, "wb") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        return
    remove_stale_temps(path)
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
        _live_temps.discard(tmp)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _live_temps.discard(tmp)
    if os.name == "posix":
        _fsync_directory(os.path.dirname(path))


def atomic_write(path: str | os.PathLike, data: bytes) -> None:
    """Replace the content of `path` with `data` atomically (see `atomic_open`)."""
    with atomic_open(path) as f:
        f.write(data)


# -- several files as one ------------------------------------------------------------------

def _journal_path(first_target: str) -> str:
    directory, base = os.path.split(first_target)
    return os.path.join(directory, f".{base}.journal")


class FileSet:
    """Replace several files as one (see the module docstring).

        with FileSet([model_file, params_file]) as files:
            save_params(program, values, files.temp(params_file))   # or files.remove(params_file)
            atomic_write(files.temp(model_file), blob)
            files.commit()

    Leaving the `with` block without `commit()` deletes the temporary files and leaves the
    targets as they were."""

    def __init__(self, targets):
        self.targets = [os.fspath(t) for t in targets]
        if len(set(map(os.path.abspath, self.targets))) != len(self.targets):
            raise ValueError(f"FileSet: the same file twice in {self.targets}")
        complete_interrupted(self.targets)
        for target in self.targets:
            remove_stale_temps(target)
        self._temps: dict[str, str] = {}
        self._removals: set[str] = set()
        self.committed = self._journaled = False

    def temp(self, target) -> str:
        """The temporary name to write `target`'s new content to (an empty file exists there)."""
        target = self._own(target)
        if target not in self._temps:
            fd, self._temps[target] = _create_temp(target)
            os.close(fd)
        return self._temps[target]

    def remove(self, target) -> None:
        """The new set has no such file: `commit` deletes it."""
        self._removals.add(self._own(target))

    def commit(self) -> None:
        entries = []
        for target in self.targets:
            if target in self._temps:
                _fsync_file(self._temps[target])
                entries.append({"target": target, "temp": self._temps[target]})
            elif target in self._removals:
                entries.append({"target": target, "remove": True})
        journal = _journal_path(self.targets[0])
        self._journaled = True  # from here on the temporary files belong to the journal
        atomic_write(journal, json.dumps({"version": _JOURNAL_VERSION, "entries": [
            {k: os.path.basename(v) if k in ("target", "temp") else v for k, v in e.items()}
            | {"dir": os.path.relpath(os.path.dirname(os.path.abspath(e["target"])),
                                      os.path.dirname(os.path.abspath(journal)))}
            for e in entries]}).encode())
        _apply(journal, entries)
        self.committed = True
        _live_temps.difference_update(self._temps.values())

    def _own(self, target) -> str:
        target = os.fspath(target)
        if target not in self.targets:
            raise ValueError(f"FileSet: {target!r} is not one of {self.targets}")
        return target

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.committed:
            return
        _live_temps.difference_update(self._temps.values())
        if self._journaled:
            # The journal may be on disk: deleting a temporary file now would let the next
            # load take its target for renamed already and mix the sets. complete_interrupted
            # (the next save or load) finishes or, if the journal never landed, the stale
            # temporary files are removed.
            return
        for temp in self._temps.values():
            with contextlib.suppress(OSError):
                os.unlink(temp)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _apply(journal: str, entries: list[dict]) -> None:
    """Make the journal's renames and removals (each idempotent), then drop the journal."""
    for e in entries:
        if e.get("remove"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(e["target"])
        else:
            with contextlib.suppress(FileNotFoundError):  # renamed already, before a crash
                os.replace(e["temp"], e["target"])
    if os.name == "posix":
        for directory in {os.path.dirname(e["target"]) for e in entries}:
            _fsync_directory(directory)
    os.unlink(journal)
    if os.name == "posix":
        _fsync_directory(os.path.dirname(journal))


def complete_interrupted(targets) -> None:
    """If a write of exactly these files was interrupted after its journal was written,
    finish it (a save or load of the set calls this first). A journal that is malformed or
    names any other file raises InterruptedWriteError and changes nothing."""
    targets = [os.fspath(t) for t in targets]
    journal = _journal_path(targets[0])
    if not os.path.exists(journal):
        return
    journal_dir = os.path.dirname(os.path.abspath(journal))
    wanted = {os.path.abspath(t): t for t in targets}

    def refuse(why: str):
        raise InterruptedWriteError(f"{journal}: the record of an interrupted save of {targets[0]} {why}; "
                                    f"it was left as it is. Delete it to keep the files as they are.")

    try:
        with open(journal, "rb") as f:
            record = json.loads(f.read(64 * 1024).decode("utf-8"))
        if record.get("version") != _JOURNAL_VERSION:
            refuse(f"has version {record.get('version')!r}, this Keel reads {_JOURNAL_VERSION}")
        entries = []
        for e in record["entries"]:
            target = os.path.abspath(os.path.join(journal_dir, e["dir"], e["target"]))
            if target not in wanted or os.path.basename(target) != e["target"]:
                refuse(f"names {e['target']!r}, which is not one of the files it belongs to")
            entry = {"target": wanted[target], "remove": bool(e.get("remove"))}
            if not entry["remove"]:
                temp = e["temp"]
                if not isinstance(temp, str) or not _temp_pattern(e["target"]).match(temp):
                    refuse(f"names {temp!r}, which is not a temporary file of {e['target']}")
                entry["temp"] = os.path.join(os.path.dirname(wanted[target]), temp)
            entries.append(entry)
    except (ValueError, KeyError, TypeError, AttributeError, UnicodeDecodeError) as e:
        refuse(f"is malformed ({type(e).__name__}: {e})")
    try:
        _apply(journal, entries)
    except OSError as e:
        raise InterruptedWriteError(f"{targets[0]}: an interrupted save left its files half replaced and "
                                    f"they cannot be completed here ({e.strerror or e}); run once as a user "
                                    f"who can write {os.path.dirname(journal) or '.'!r}") from None
