"""Data-parallel scaling and fault handling (issue: distributed training).

    python benchmarks/bench_distributed.py [--repeat 3] [--steps 30] [--sharding] [--ops]  # scaling table
    python benchmarks/bench_distributed.py --faults 20                    # kill-a-rank loop

Scaling: the MLP and CNN of bench_training.py at their global batch (128, 64), one process
with one BLAS thread against 2 ranks x 1 thread each (`distributed.launch`, half the batch
per rank; `--sharding`: with ZeRO-1), alternating the two runs `--repeat` times;
examples/s (global), the ratio, and the communication share of the 2-rank step from the
executor's per-op profile: the collectives and the wait for them (c_allreduce_sum,
c_reducescatter, c_allgather, c_sync_comm_stream, c_broadcast) and, apart, the bucket
copies around them (coalesce_tensor, the write-back split/reshape2, the shards' padding).
"CPU/wall" is the CPU time rank 0 got over its wall time: under 100% it waited for a core
(a loaded machine), so the wall-time speed-up then says more about the load than about
Keel; "CPU speed-up" is rank 0's CPU time per step on 1 rank over that on 2 ranks (what a
quiet machine would show if no rank waited for the other; a wait that spins counts as
CPU). Rerun on a quiet machine for the wall-time figure. `--ops` adds rank 0's step by op
type, 1 rank against 2 ranks (where the 2-rank step's time goes). `--explain` also runs
one process on half the batch alone, and two such processes at once with no
communication, and splits the speed-up into three factors: batch efficiency (does half the
batch take half the time?), the machine's contention (do two busy processes slow each
other: shared caches, memory, clocks?) and communication with its copies.

Faults: `--faults N` runs N 2-rank trainings and SIGKILLs a random rank at a random moment
of each (0.3-4 s after the start, in a training of 6000 steps that lasts longer), or with
`--stop` SIGSTOPs it (a hang: the peer's collective times out after the launcher's
--timeout, 10 s here); each run must end (non-zero exit, the rank named) within the
bound, never hang.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from statistics import median

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from common import blas_line, table  # noqa: E402

BATCH = {"mlp": 128, "cnn": 64}
COMM_OPS = {"c_allreduce_sum", "c_reducescatter", "c_allgather", "c_sync_comm_stream", "c_broadcast"}
FAULT_BOUND_S = 60.0


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env.pop("PADDLE_TRAINERS_NUM", None)
    return env


# -- one rank -----------------------------------------------------------------------------------

def worker(model: str, steps: int, sharding: bool = False, share: int = 0) -> None:
    """Train `steps` steps; rank 0 prints `RESULT {json}` (examples/s, communication shares).
    `share`: this process's batch (default: the global batch over the ranks)."""
    import bench_training
    import keel.program as pg
    from keel.executor import Executor, Scope

    nranks = int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))
    wrap = lambda optimizer: optimizer  # noqa: E731
    rank = 0
    if nranks > 1:
        from keel.distributed import fleet
        rank = fleet.init(is_collective=True).rank
        strategy = fleet.DistributedStrategy(sharding=sharding)
        wrap = lambda optimizer: fleet.distributed_optimizer(optimizer, strategy)  # noqa: E731
    build = {"mlp": bench_training.build_mlp, "cnn": bench_training.build_cnn}[model]
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 1
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        loss = build(wrap)
    rng = np.random.default_rng(rank)
    share = share or BATCH[model] // nranks
    x = rng.standard_normal((share, 784) if model == "mlp" else (share, 1, 28, 28)).astype(np.float32)
    feed = {"x": x, "y": rng.integers(0, 10, (share, 1)).astype(np.int64)}
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    for _ in range(3):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    start, cpu_start = time.perf_counter(), time.process_time()
    for _ in range(steps):
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    profiler = Executor(profile=True)
    comm, copies, total, by_type = [], [], [], {}
    for _ in range(5):
        profiler.run(main, feed=feed, fetch_list=[loss], scope=scope)
        ops = main.global_block().ops
        comm.append(sum(s for i, t, s in profiler.last_profile if t in COMM_OPS))
        copies.append(sum(s for i, t, s in profiler.last_profile if t not in COMM_OPS and _bucket_op(ops[i])))
        total.append(sum(s for _, _, s in profiler.last_profile))
        run = {}
        for _, t, s in profiler.last_profile:
            run[t] = run.get(t, 0.0) + s
        for t, s in run.items():
            by_type.setdefault(t, []).append(s)
    if rank == 0:
        print("RESULT " + json.dumps({"examples_per_s": share * nranks * steps / seconds,
                                      "cpu_share": cpu / seconds, "cpu_per_step": cpu / steps,
                                      "comm_share": median(comm) / median(total),
                                      "copy_share": median(copies) / median(total),
                                      "op_ms": {t: 1e3 * median(v) for t, v in by_type.items()}}), flush=True)


def _bucket_op(op) -> bool:
    """An op fleet added around the collectives: a bucket's coalesce_tensor, the split and
    reshape2 writing its parts back (names ending @PART), a shard's padding."""
    names = op.input_arg_names + op.output_arg_names
    return op.type == "coalesce_tensor" or any("@PART" in n or n.startswith("shard_padding") for n in names)


# -- the driver ---------------------------------------------------------------------------------

def _worker_cmd(model: str, steps: int, sharding: bool = False, share: int = 0) -> list[str]:
    return ([str(Path(__file__).resolve()), "--worker", model, "--steps", str(steps)] + ["--sharding"] * sharding
            + ["--share", str(share)] * bool(share))


def _result(cmd, stdout: str, stderr: str, returncode: int) -> dict:
    if returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{stdout}\n{stderr}")
    line = next(ln for ln in stdout.splitlines() if ln.startswith("RESULT "))
    return json.loads(line[len("RESULT "):])


def _run(model: str, steps: int, nproc: int, log_dir: str, sharding: bool = False, share: int = 0) -> dict:
    me = _worker_cmd(model, steps, sharding, share)
    cmd = [sys.executable] + me if nproc == 1 else [
        sys.executable, "-m", "keel.distributed.launch", "--nproc_per_node", str(nproc), "--log_dir", log_dir, *me]
    r = subprocess.run(cmd, capture_output=True, text=True, env=_env(), timeout=900)
    return _result(cmd, r.stdout, r.stderr, r.returncode)


def _run_independent(model: str, steps: int) -> float:
    """Two single processes at once, each training on half the batch with no communication:
    their summed examples/s (what 2 ranks could reach if communicating cost nothing)."""
    cmd = [sys.executable] + _worker_cmd(model, steps, share=BATCH[model] // 2)
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env())
             for _ in range(2)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        results.append(_result(cmd, out, err, p.returncode))
    return sum(r["examples_per_s"] for r in results)


def _op_table(model: str, one: list, two: list) -> str:
    """Rank 0's step by op type (ms, the executor's per-op profile; medians), 1 rank vs 2."""
    ms = [{t: median(r["op_ms"].get(t, 0.0) for r in runs) for t in {t for r in runs for t in r["op_ms"]}}
          for runs in (one, two)]
    kinds = sorted(set(ms[0]) | set(ms[1]), key=lambda t: -max(ms[0].get(t, 0.0), ms[1].get(t, 0.0)))
    rows = [(t, f"{ms[0].get(t, 0.0):.2f}", f"{ms[1].get(t, 0.0):.2f}") for t in kinds
            if max(ms[0].get(t, 0.0), ms[1].get(t, 0.0)) >= 0.05]
    rows.append(("(all ops)", f"{sum(ms[0].values()):.2f}", f"{sum(ms[1].values()):.2f}"))
    return table(f"{model.upper()}: rank 0's step by op type, ms (ops under 0.05 ms left out)", rows,
                 ("op type", "1 rank", "2 ranks"))


def scaling(repeat: int, steps: int, sharding: bool = False, ops: bool = False, explain: bool = False) -> None:
    rows, op_tables, why = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for model in ("mlp", "cnn"):
            one, two, half, apart = [], [], [], []
            for _ in range(repeat):  # alternate, so machine noise hits both alike
                one.append(_run(model, steps, 1, tmp))
                two.append(_run(model, steps, 2, tmp, sharding))
                if explain:
                    half.append(_run(model, steps, 1, tmp, share=BATCH[model] // 2)["examples_per_s"])
                    apart.append(_run_independent(model, steps))
            e1 = median(r["examples_per_s"] for r in one)
            e2 = median(r["examples_per_s"] for r in two)
            rows.append((model.upper(), f"{BATCH[model]}", f"{e1:,.0f}", f"{e2:,.0f}", f"{e2 / e1:.2f}x",
                         f"{median(a['cpu_per_step'] / b['cpu_per_step'] for a, b in zip(one, two)):.2f}x",
                         f"{100 * median(r['comm_share'] for r in two):.1f}%",
                         f"{100 * median(r['copy_share'] for r in two):.1f}%",
                         f"{100 * median(r['cpu_share'] for r in one):.0f}% / "
                         f"{100 * median(r['cpu_share'] for r in two):.0f}%",
                         " ".join(f"{b['examples_per_s'] / a['examples_per_s']:.2f}" for a, b in zip(one, two))))
            op_tables.append(_op_table(model, one, two))
            if explain:
                e_half, e_apart = median(half), median(apart)
                why.append((model.upper(), f"{e_half / e1:.2f}", f"{e_apart / (2 * e_half):.2f}",
                            f"{e2 / e_apart:.2f}", f"{e2 / e1:.2f}x"))
    print(table(f"Data-parallel scaling{' with ZeRO-1 sharding' if sharding else ''}, 1 BLAS thread per process (median of {repeat} alternating runs, "
                f"{steps} steps each)", rows,
                ("model", "global batch", "1 rank ex/s", "2 ranks ex/s", "speed-up", "CPU speed-up", "comm share",
                 "bucket copies", "CPU/wall 1 / 2 ranks", "speed-up per run")))
    if explain:
        print(table("Where the 2-rank speed-up goes: speed-up = 2 x (half-batch ex/s / whole-batch ex/s, one "
                     "process alone) x (two half-batch processes at once, no communication / twice one alone) "
                     "x (2 ranks / those two)", why,
                     ("model", "half batch alone / whole", "two at once / 2x alone", "2 ranks / two at once",
                      "speed-up")))
    if ops:
        print("\n\n".join(op_tables))


def faults(runs: int, stop: bool = False) -> None:
    """SIGKILL (or, `stop`, SIGSTOP: a hang) a random rank at a random moment of each run;
    count runs that ended in time with the rank named."""
    ended, named, worst = 0, 0, 0.0
    script = HERE.parent / "tests" / "distributed_script.py"
    for i in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            log = Path(tmp) / "log"
            cmd = [sys.executable, "-m", "keel.distributed.launch", "--nproc_per_node", "2", "--log_dir", str(log),
                   "--timeout", "10", str(script), "train", str(Path(tmp) / "out"), "--steps", "6000"]
            env = dict(_env(), PYTHONPATH=os.pathsep.join([str(HERE.parent), str(HERE.parent / "tests")]))
            start = time.monotonic()
            proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
            victim, delay = random.randrange(2), random.uniform(0.3, 4.0)
            time.sleep(delay)
            pid_file = log / f"rank.{victim}.pid"
            while not pid_file.exists() and proc.poll() is None:
                time.sleep(0.05)
            killed = proc.poll() is None and pid_file.exists()
            if killed:
                try:
                    os.kill(int(pid_file.read_text()), signal.SIGSTOP if stop else signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    killed = False  # it had finished already
            try:
                _, err = proc.communicate(timeout=FAULT_BOUND_S)
            except subprocess.TimeoutExpired:
                proc.kill()
                for pid_path in log.glob("rank.*.pid"):  # leave no stopped rank behind
                    try:
                        os.kill(int(pid_path.read_text()), signal.SIGKILL)
                    except (ProcessLookupError, ValueError):
                        pass
                print(f"run {i}: HUNG (rank {victim} signalled at {delay:.1f} s)")
                continue
            seconds = time.monotonic() - start
            worst = max(worst, seconds - delay)
            ended += 1
            named_as = (f"rank(s) [{victim}] did not finish" if stop else
                        f"rank {victim} died first: Killed (signal 9)")
            ok = proc.returncode != 0 and named_as in err
            named += ok
            what = ("stopped" if stop else "killed") if killed else "finished before the signal"
            print(f"run {i}: rank {victim} {what} at {delay:.1f} s; "
                  f"exit {proc.returncode} after {seconds:.1f} s; victim named: {ok}", flush=True)
    print(f"{ended}/{runs} runs ended (0 hangs: {ended == runs}); the killed rank named in {named}; "
          f"at most {worst:.1f} s from the kill to the end")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--faults", type=int, default=0, help="run the kill-a-rank loop this many times instead")
    p.add_argument("--stop", action="store_true", help="with --faults: SIGSTOP the rank (a hang), not SIGKILL")
    p.add_argument("--sharding", action="store_true", help="2 ranks with ZeRO-1 sharding of the optimizer state")
    p.add_argument("--ops", action="store_true", help="also rank 0's step by op type, 1 rank vs 2 ranks")
    p.add_argument("--explain", action="store_true",
                   help="also split the speed-up into batch efficiency, machine contention and communication")
    p.add_argument("--share", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--worker", choices=sorted(BATCH), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if not args.worker:
        print(blas_line(), flush=True)
    if args.worker:
        worker(args.worker, args.steps, args.sharding, args.share)
    elif args.faults:
        faults(args.faults, args.stop)
    else:
        scaling(args.repeat, args.steps, args.sharding, args.ops, args.explain)


if __name__ == "__main__":
    main()
