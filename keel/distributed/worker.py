"""One rank of a launched job: `python -m keel.distributed.worker LOG_DIR script.py args...`
(what distributed.launch asks mpiexec to start on every rank).

It writes this rank's output to LOG_DIR/workerlog.<rank> (PaddlePaddle's name), its pid to
LOG_DIR/rank.<rank>.pid, exports PaddlePaddle's environment variables, runs the script as
`__main__`, and records how it ended in LOG_DIR/rank.<rank>.status (JSON: exit code, time,
the error's last line). A rank that fails aborts the whole MPI job, so no peer waits for
it; the launcher reads the status files to name the rank that failed first.
"""
from __future__ import annotations

import json
import os
import runpy
import sys
import time
import traceback
from pathlib import Path


def _redirect_output(path: Path) -> None:
    """Point this process's stdout and stderr (the file descriptors, so C libraries' and
    child processes' output too) at `path`."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    sys.stdout.reconfigure(line_buffering=True)
    sys.stderr.reconfigure(line_buffering=True)


def _write_status(log_dir: Path, rank: int, code: int, error: str) -> None:
    path = log_dir / f"rank.{rank}.status"
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_text(json.dumps({"rank": rank, "code": code, "time": time.time(), "error": error}))
    os.replace(tmp, path)


def main(argv: list[str]) -> None:
    if len(argv) < 2:
        sys.exit("usage: python -m keel.distributed.worker LOG_DIR script.py [args...]")
    log_dir, script, args = Path(argv[0]), argv[1], argv[2:]
    from mpi4py import MPI  # initializes MPI: this process is one rank of mpiexec's job
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    log_dir.mkdir(parents=True, exist_ok=True)
    _redirect_output(log_dir / f"workerlog.{rank}")
    (log_dir / f"rank.{rank}.pid").write_text(str(os.getpid()))
    os.environ.update(PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM=str(size))
    sys.argv = [script] + args
    sys.path.insert(0, str(Path(script).resolve().parent))
    code, error = 0, ""
    try:
        runpy.run_path(script, run_name="__main__")
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        error = "" if code == 0 else f"SystemExit({e.code!r})"
    except BaseException as e:  # noqa: BLE001 - every failure must end the group
        traceback.print_exc()
        code, error = 1, f"{type(e).__name__}: {e}".splitlines()[0] if str(e) else type(e).__name__
    sys.stdout.flush()
    sys.stderr.flush()
    _write_status(log_dir, rank, code, error)
    if code != 0 and size > 1:
        world.Abort(code)  # the peers may be waiting in a collective: end them now
    sys.exit(code)


if __name__ == "__main__":
    main(sys.argv[1:])
