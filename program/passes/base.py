"""Passes: named transforms of (program, params), run in a fixed order and checked after each.

A `Pass` is a name, a function that edits a `Graph` in place and returns what it changed
(counts), and a docstring saying what it matches and why the rewrite is safe. Calling a
pass is pure: it copies the program and the parameter dict, edits the copies, drops the
variables and parameters nothing uses any more, verifies the program (`verify_program`:
known ops, slots, defined variables, attribute types) and checks every persistable
variable against its value, then returns (program, params, changes).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from keel.program.passes.graph import Graph, PassError, check_params, sweep_unused
from keel.program.program import Program
from keel.program.verify import program_problems


@dataclass
class PassOptions:
    """What passes may need besides the program: `evaluate(op_type, inputs, attrs) ->
    outputs` runs one op's kernel (slot -> array or list of arrays, both ways; constant
    folding and the bfloat16 pass need it and are skipped without it); the fp16 pass's
    settings (keep_fp32 and fp16_ops choose the bfloat16 pass's ops too); the largest
    constant (bytes) folding may create when it has more elements than the constants it
    replaces; the largest result (bytes) folding may compute at all (`fold_limit_bytes`:
    bigger or value-dependent results leave their op in the program); the smallest GEMM
    weight (bytes) column_major_weights moves; `in_memory`: the result is run, never written
    to a file, so fusions may use attributes files drop (fuse_conv.py PARAMETERISED)."""
    evaluate: Callable | None = None
    keep_io_types: bool = True
    keep_fp32: frozenset | None = None   # None: fp16.DEFAULT_KEEP_FP32
    fp16_ops: frozenset | None = None    # None: fp16.FP16_OPS
    fold_max_bytes: int = 8 << 20
    fold_limit_bytes: int = 256 << 20
    column_major_min_bytes: int = 2 << 20
    in_memory: bool = False


@dataclass(frozen=True)
class Pass:
    name: str
    apply: Callable[[Graph, PassOptions], dict]
    group: str = "cleanup"  # "cleanup" (always), "fuse" (fuse=True), "fp16" (fp16=True), "bf16" (bf16=True),
    #                         "cpu" (cpu=True: a memory layout for the CPU's BLAS)
    needs_evaluate: bool = False

    @property
    def doc(self) -> str:
        return (self.apply.__doc__ or "").strip()

    def __call__(self, program: Program, params: dict, options: PassOptions | None = None):
        """(program, params) -> (new program, new params, changes); the inputs are untouched."""
        program = Program.from_desc(program.to_desc(), verify=False, source="program")
        params = dict(params)
        changes = self.run_in_place(program, params, options or PassOptions())
        return program, params, changes

    def run_in_place(self, program: Program, params: dict, options: PassOptions) -> dict:
        graph = Graph(program, params)
        changes = dict(self.apply(graph, options) or {})
        dropped = sweep_unused(program, params)
        if dropped:
            changes["vars_dropped"] = changes.get("vars_dropped", 0) + dropped
        problems = program_problems(program)
        if problems:
            raise PassError(f"pass {self.name} left an invalid program: " + "; ".join(problems[:8]))
        check_params(program, params, self.name)
        return {k: v for k, v in changes.items() if v}


@dataclass
class PassRecord:
    name: str
    status: str  # "ran", "disabled", or "skipped (why)"
    changes: dict = field(default_factory=dict)
    ops_before: int = 0
    ops_after: int = 0


@dataclass
class Report:
    records: list[PassRecord] = field(default_factory=list)
    params_bytes_before: int = 0
    params_bytes_after: int = 0

    def __getitem__(self, name: str) -> PassRecord:
        for r in self.records:
            if r.name == name:
                return r
        raise KeyError(name)

    def changes(self, name: str) -> dict:
        return self[name].changes

    def __str__(self) -> str:
        lines = []
        for r in self.records:
            if r.status != "ran":
                lines.append(f"  {r.name:<27} {r.status}")
                continue
            what = ", ".join(f"{k} {v}" for k, v in r.changes.items()) or "no change"
            lines.append(f"  {r.name:<27} ops {r.ops_before} -> {r.ops_after}: {what}")
        lines.append(f"  parameters: {self.params_bytes_before} -> {self.params_bytes_after} bytes")
        return "\n".join(lines)
