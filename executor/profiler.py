"""The profiler: where a run's time goes, per op type and per op, over many runs.

    from keel.executor.profiler import Profiler
    with Profiler() as prof:            # every Executor / Predictor run in between is timed
        for batch in batches:
            exe.run(main, feed=batch, fetch_list=[loss])
            prof.step()                 # optional: marks steps in the trace
    print(prof.summary())               # per op type and per op: calls, time, share of total
    prof.export("trace.json")           # Chrome trace: chrome://tracing or ui.perfetto.dev

A Predictor profiles itself with `config.enable_profile()` (PaddlePaddle's name):
`predictor.profiler` is then a Profiler recording every run of it (and of its clones).
`Executor(profiler=p)` does the same for one executor.

How it measures: a profiled run executes the variant of the plan's generated function that
reads `time.perf_counter` after each op (executor/plan.py `generate(profile=True)`;
`record_shapes` adds a tuple of the op's input shapes, read just before the op). An op's
time is the interval between the readings before and after it, so it includes the freeing
of the previous op's dead values and the call itself; `Profiler.summary` also reports what a
run costs outside the ops. When no profiler records, executors run the plain function: the
cost of the profiler being off is one check per run, the generated code is unchanged.
Ops that an executor with num_threads > 1 runs concurrently (a dependency level it pools:
executor/plan.py `threaded_steps`) are timed together: each gets the level's interval in
the trace (on a row of its own) and an equal share of it in the tables. On a GPU place
kernels are asynchronous: an op's time is its launch, and waiting lands on whichever op
synchronizes.

Names follow paddle.profiler.Profiler (start, stop, step, summary(sorted_by=...), export);
the trace is the Chrome trace event format (complete "X" events, microseconds).
"""
from __future__ import annotations

import json
import statistics
import os
import threading
import time
from dataclasses import dataclass

from keel.executor.plan import bound_names

started: list = []  # the started profilers: they record every executor's runs
_lock = threading.Lock()

SORT_KEYS = ("total", "avg", "median", "max", "min", "calls", "name")


def listeners(own=None) -> tuple:
    """The profilers recording a run of an executor whose own (attached) profiler is `own`."""
    if own is None or own in started:
        return tuple(started)
    return (*started, own)


def op_intervals(plan, clock, parallel: bool):
    """[(step position, start, end, ops sharing the interval)] from a profiled run's clock
    readings. The function reads the clock after each step in the order it runs them: step
    order, or level by level with a pool, where the steps of a level run through the pool
    (plan.pooled) finish together."""
    if not parallel:
        return [(pos, clock[pos], clock[pos + 1], 1) for pos in range(len(plan.steps))]
    out, k = [], 0
    for level, threaded in zip(plan.levels, plan.pooled):
        if threaded:
            start, end = clock[k], clock[k + len(level)]
            out.extend((pos, start, end, len(level)) for pos in level)
        else:
            out.extend((pos, clock[k + i], clock[k + i + 1], 1) for i, pos in enumerate(level))
        k += len(level)
    return out


@dataclass
class _Program:
    """What the profiler shows of a plan: a tag for its program, the block, each step's op."""
    tag: int
    block: int
    ops: list   # per step position: (op index, op type, first output name, input names)


@dataclass
class _Run:
    program: _Program
    thread: int
    intervals: list      # op_intervals(...)
    shapes: list | None  # per step position: the shapes of its inputs (record_shapes)
    start: float
    end: float


class Profiler:
    """Records profiled runs and sums them up (see the module doc). `record_shapes`: keep
    each op's input shapes for the trace and the per-op table (a tuple made per op while
    profiling)."""

    def __init__(self, *, record_shapes: bool = True):
        self.record_shapes = record_shapes
        self.runs: list[_Run] = []
        self.steps: list[float] = []   # the times of step() calls
        self._programs: dict = {}       # id(plan) -> (plan, _Program); the plan is kept alive
        self._program_tags: dict = {}   # id(program) -> (program, tag)
        self._origin = time.perf_counter()

    # -- control ------------------------------------------------------------------------
    def start(self) -> "Profiler":
        """Record every executor run of this process from now until `stop()`."""
        with _lock:
            if self not in started:
                started.append(self)
        if not self.runs and not self.steps:
            self._origin = time.perf_counter()
        return self

    def stop(self) -> None:
        with _lock:
            if self in started:
                started.remove(self)

    def step(self) -> None:
        """Mark the end of a step (a batch, a request): the trace shows steps as spans."""
        self.steps.append(time.perf_counter())

    def reset(self) -> None:
        """Forget what was recorded (the programs seen stay known)."""
        self.runs.clear()
        self.steps.clear()
        self._origin = time.perf_counter()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # -- recording (called by the Executor) -----------------------------------------------
    def record(self, plan, clock, shapes, parallel: bool, begin: float, end: float) -> None:
        """One profiled run of `plan` (called by the Executor): the function's clock
        readings and input shapes, whether it ran levels through a pool, and when the
        executor's run began and ended (feeding and fetching included)."""
        entry = self._programs.get(id(plan))
        if entry is None or entry[0] is not plan:
            entry = self._programs[id(plan)] = (plan, self._describe(plan))
        order = op_intervals(plan, clock, parallel)
        by_pos = None
        if shapes is not None:  # in the order the steps ran: store them by step position
            by_pos = [None] * len(plan.steps)
            for (pos, *_), s in zip(order, shapes):
                by_pos[pos] = s
        self.runs.append(_Run(entry[1], threading.get_ident(), order, by_pos, begin, end))

    def record_span(self, label: str, begin: float, end: float, program=None) -> None:
        """One run of an engine that times no ops of its own (ONNX Runtime, for a Predictor
        with enable_onnxruntime): the whole run shows as one op of type `label`."""
        key = ("span", label, id(program))
        entry = self._programs.get(key)
        if entry is None:
            tag = len(self._program_tags) + 1
            self._program_tags[key] = (program, tag)
            entry = self._programs[key] = (program, _Program(tag, 0, [(0, label, "", [])]))
        self.runs.append(_Run(entry[1], threading.get_ident(), [(0, begin, end, 1)], None, begin, end))

    def _describe(self, plan) -> _Program:
        program = plan.block.program
        known = self._program_tags.get(id(program))
        if known is None or known[0] is not program:
            known = self._program_tags[id(program)] = (program, len(self._program_tags) + 1)
        ops = [(s.index, s.op.type, s.writes[0] if s.writes else "", list(bound_names(s.ins))) for s in plan.steps]
        return _Program(known[1], plan.block.idx, ops)

    # -- results --------------------------------------------------------------------------
    def op_types(self) -> dict[str, "Stats"]:
        """Op type -> its Stats over all recorded runs."""
        stats: dict[str, Stats] = {}
        for run in self.runs:
            for pos, start, end, shared in run.intervals:
                kind = run.program.ops[pos][1]
                stats.setdefault(kind, Stats(kind)).add((end - start) / shared)
        return stats

    def ops(self) -> dict[tuple, "Stats"]:
        """(program tag, block, op index) -> the op's Stats over all recorded runs (its
        name: "op type -> first output", its shapes: the input shapes last seen)."""
        stats: dict[tuple, Stats] = {}
        for run in self.runs:
            prog = run.program
            for pos, start, end, shared in run.intervals:
                index, kind, output, _ = prog.ops[pos]
                key = (prog.tag, prog.block, index)
                entry = stats.get(key)
                if entry is None:
                    entry = stats[key] = Stats(f"{kind} -> {output}" if output else kind)
                entry.add((end - start) / shared)
                if run.shapes is not None:
                    entry.shapes = run.shapes[pos]
        return stats

    def run_time(self) -> float:
        """Seconds of all recorded runs (each: the executor's whole run, feeds and fetches
        included)."""
        return sum(run.end - run.start for run in self.runs)

    def summary(self, sorted_by: str = "total", op_detail: bool = True, top: int = 20,
                time_unit: str = "ms") -> str:
        """The tables: op types (calls, total, per run, avg, median, max, min, share of all op
        time) and, with `op_detail`, the `top` single ops by the same key. `sorted_by`: one
        of SORT_KEYS; `time_unit`: "s", "ms" or "us"."""
        if sorted_by not in SORT_KEYS:
            raise ValueError(f"summary(sorted_by=...): one of {', '.join(SORT_KEYS)}, got {sorted_by!r}")
        if time_unit not in _UNITS:
            raise ValueError(f"summary(time_unit=...): one of {', '.join(_UNITS)}, got {time_unit!r}")
        if not self.runs:
            return "Profiler: no run recorded (run a program or a Predictor while it is started)"
        scale, n = _UNITS[time_unit], len(self.runs)
        types = self.op_types()
        total = sum(s.total for s in types.values()) or 1e-12
        programs = len({run.program.tag for run in self.runs})
        lines = [f"Keel profile: {n} run(s) of {programs} program(s); per run: "
                 f"{self.run_time() / n * scale:.3f} {time_unit}, of which ops "
                 f"{total / n * scale:.3f} {time_unit} (the rest: feeding, fetching, writing back)"
                 + (f"; {len(self.steps)} step(s)" if self.steps else "")]
        lines += _table(f"Op types, by {sorted_by}", "Op type", _sorted(types.values(), sorted_by),
                        n, total, scale, time_unit)
        if op_detail:
            ops = self.ops()
            label = (lambda key: f"{key[0]}:{key[1]}:{key[2]}") if programs > 1 else (lambda key: f"{key[2]}")
            for key, s in ops.items():
                s.label = f"#{label(key)} {s.name}"
            rows = _sorted(ops.values(), sorted_by)[:top]
            lines += _table(f"Top {len(rows)} of {len(ops)} ops, by {sorted_by}", "Op (#index type -> output)",
                            rows, n, total, scale, time_unit, shapes=self.record_shapes)
        return "\n".join(lines)

    def chrome_trace(self) -> dict:
        """The recorded runs as a Chrome trace (the JSON object format): one complete ("X")
        event per op per run, `ts`/`dur` in microseconds from the profiler's start, `args`
        naming the op (index, type, inputs, outputs, input shapes); one event per run
        (category "run") and per step (category "step") around them."""
        pid, rows, events = os.getpid(), {}, []

        def row(thread, lane=0):
            key = (thread, lane)
            if key not in rows:
                rows[key] = len(rows) + 1
                name = f"thread {len({t for t, _ in rows})}" + (f" (concurrent op {lane + 1})" if lane else "")
                events.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": rows[key],
                               "args": {"name": name}})
            return rows[key]

        us = lambda t: (t - self._origin) * 1e6  # noqa: E731
        events.append({"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "args": {"name": "keel"}})
        for r, run in enumerate(self.runs):
            prog, tid = run.program, row(run.thread)
            events.append({"name": f"run (program {prog.tag}, block {prog.block})", "cat": "run", "ph": "X",
                           "ts": us(run.start), "dur": (run.end - run.start) * 1e6, "pid": pid, "tid": tid,
                           "args": {"run": r, "program": prog.tag, "block": prog.block}})
            lane_of: dict = {}
            for pos, start, end, shared in run.intervals:
                index, kind, output, inputs = prog.ops[pos]
                lane = 0
                if shared > 1:
                    lane = lane_of[start] = lane_of.get(start, -1) + 1
                args = {"op_index": index, "op_type": kind, "inputs": inputs,
                        "output": output, "run": r, "program": prog.tag, "block": prog.block}
                if run.shapes is not None:
                    args["input_shapes"] = [list(s) if s is not None else None for s in run.shapes[pos]]
                if shared > 1:
                    args["concurrent_ops"] = shared
                events.append({"name": kind, "cat": "op", "ph": "X", "ts": us(start), "dur": (end - start) * 1e6,
                               "pid": pid, "tid": row(run.thread, lane), "args": args})
        begin = self._origin
        for s, t in enumerate(self.steps):
            events.append({"name": f"ProfileStep#{s}", "cat": "step", "ph": "X", "ts": us(begin),
                           "dur": (t - begin) * 1e6, "pid": pid, "tid": 0, "args": {"step": s}})
            begin = t
        return {"traceEvents": events, "displayTimeUnit": "ms"}

    def export(self, path, format: str = "json") -> None:  # noqa: A002  (paddle.profiler's name)
        """Write the Chrome trace to `path` (format "json", the only one)."""
        if format != "json":
            raise ValueError(f"Profiler.export: format must be 'json' (a Chrome trace), got {format!r}")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(self.chrome_trace(), f)


class Stats:
    """Times (seconds) of one op or op type over the recorded runs."""

    def __init__(self, name: str):
        self.name = self.label = name
        self.times: list[float] = []
        self.shapes = None

    def add(self, seconds: float) -> None:
        self.times.append(seconds)

    calls = property(lambda self: len(self.times))
    total = property(lambda self: sum(self.times))
    max = property(lambda self: max(self.times, default=0.0))
    min = property(lambda self: min(self.times, default=0.0))
    avg = property(lambda self: self.total / self.calls if self.times else 0.0)
    # the middle call: on a busy machine, where a few slow calls make the average
    median = property(lambda self: statistics.median(self.times) if self.times else 0.0)


_UNITS = {"s": 1.0, "ms": 1e3, "us": 1e6}


def _sorted(stats, key):
    if key == "name":
        return sorted(stats, key=lambda s: s.label)
    return sorted(stats, key=lambda s: -getattr(s, key))


def _table(title, first, rows, runs, total, scale, unit, shapes=False):
    head = [first, "Calls", f"Total({unit})", f"Per run({unit})", f"Avg({unit})", f"Median({unit})",
            f"Max({unit})", f"Min({unit})", "Ratio(%)"] + (["Input shapes"] if shapes else [])
    body = [[s.label, str(s.calls)] + [f"{v * scale:.3f}" for v in (s.total, s.total / runs, s.avg, s.median,
                                                                     s.max, s.min)]
            + [f"{100 * s.total / total:.1f}"]
            + ([_shapes_text(s.shapes)] if shapes else []) for s in rows]
    widths = [max(len(r[i]) for r in [head] + body) for i in range(len(head))]
    left = (0, 9)  # the names and the shapes; the numbers right-aligned

    def fmt(r):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))).rstrip()
    return ["", title, fmt(head), "-" * len(fmt(head))] + [fmt(r) for r in body]


def _shapes_text(shapes) -> str:
    if shapes is None:
        return ""
    return " ".join("-" if s is None else "[" + ",".join(map(str, s)) + "]" for s in shapes)


