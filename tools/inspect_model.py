"""Print a program file (`.pdmodel` or PaddlePaddle 3.x's PIR `.json`, ours or PaddlePaddle's) as Keel reads it.

    python tools/inspect_model.py out/digits.pdmodel            # the listing, feeds, fetches, params (dtype, shape)
    python tools/inspect_model.py model.pdmodel --check          # only: can Keel run it? (exit 1 if not)

Every problem Keel has with the file (unknown op types with the nearest known names,
unsupported attributes or slots, undefined variables, legacy fusion values Keel does not
compute, op versions newer than Keel knows) is listed at once. For a file written by an older
PaddlePaddle (2.x), it also says which release wrote it, which of its legacy fields sit at
their neutral value, and what reading it changed (program/legacy.py). With the
matching `.pdiparams` next to it, parameter shapes and sizes are read from that file too;
PaddleX's `inference.yml` beside it (the preprocessing a deployment applies) is shown.
"""
from __future__ import annotations

import argparse
import os
import sys


from keel.program import dtypes, legacy  # noqa: E402
from keel.program.errors import KeelError  # noqa: E402
from keel.program.ops import registry  # noqa: E402
from keel.program.io import load_params, load_program, persistable_specs  # noqa: E402
from keel.program.verify import program_problems  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a program file (.pdmodel or .json)")
    parser.add_argument("--params", help="its parameter file (default: the .pdiparams next to it)")
    parser.add_argument("--check", action="store_true", help="only report whether Keel can run it")
    args = parser.parse_args(argv)

    try:
        program = load_program(args.model, verify=False)
    except KeelError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    problems = program_problems(program)
    if args.check:
        for p in problems:
            print(p)
        for line in _legacy_summary(program):
            print(line)
        print(f"{args.model}: {'cannot run: ' + str(len(problems)) + ' problem(s)' if problems else 'OK, Keel runs it'}")
        return 1 if problems else 0

    print(program)
    block = program.global_block()
    feeds = sorted((op for op in block.ops if op.type == "feed"), key=lambda op: op.attr("col"))
    fetches = sorted((op for op in block.ops if op.type == "fetch"), key=lambda op: op.attr("col"))
    for title, ops, slot in (("feeds", feeds, "Out"), ("fetches", fetches, "X")):
        if ops:
            print(f"\n{title}:")
            for op in ops:
                var = block.var((op.output if slot == "Out" else op.input)(slot)[0])
                print(f"  {op.attr('col')}: {var.name} {var.type_string()}")
    specs = persistable_specs(program)
    params_file = args.params or os.path.splitext(args.model)[0] + ".pdiparams"
    if specs:
        values = {}
        if os.path.exists(params_file):
            try:
                values = load_params(program, params_file)
            except KeelError as e:
                print(f"\nparameters: cannot read {params_file}: {e}")
        total = sum(v.size for v in values.values())
        print(f"\nparameters ({len(specs)}" + (f", {total:,} values from {params_file}" if values else "") + "):")
        for name, dtype, shape in specs:
            print(f"  {name} {dtypes.name(dtype)}{list(shape)}")
    summary = _legacy_summary(program)
    if summary:
        print()
        for line in summary:
            print(line)
    for line in _deployment_description(args.model):
        print(line)
    if problems:
        print(f"\n{len(problems)} problem(s) keep Keel from running this program:")
        for p in problems:
            print(f"  - {p}")
    return 1 if problems else 0


_YML_LINES = 200


def _deployment_description(model_file) -> list[str]:
    """PaddleX's `inference.yml` (preprocessing, label list, model name) beside the model, as text:
    the first lines of `<stem>.yml`, else of `inference.yml` in the model's directory."""
    stem = os.path.splitext(model_file)[0]
    for path in (stem + ".yml", os.path.join(os.path.dirname(model_file) or ".", "inference.yml")):
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    lines = [line.rstrip("\n") for _, line in zip(range(_YML_LINES + 1), f)]
            except OSError as e:
                return [f"\n{path}: cannot read: {e.strerror or e}"]
            more = ["  ..."] if len(lines) > _YML_LINES else []
            return [f"\ndeployment description ({path}):"] + ["  " + line for line in lines[:_YML_LINES]] + more
    return []


def _legacy_summary(program) -> list[str]:
    """What an older release's file holds and what reading it changed."""
    version = program.header.version.version if program.header.HasField("version") else 0
    lines = []
    if version and version != legacy.KEEL_RELEASE:
        lines.append(f"written by PaddlePaddle {legacy.release_name(version)} (Keel follows "
                     f"{legacy.release_name(legacy.KEEL_RELEASE)})")
    neutral: dict[str, int] = {}
    for block in program.blocks:
        for op in block.ops:
            opdef = registry.lookup(op.type)
            if opdef is None:
                continue
            wanted = legacy.asks(op, opdef)
            names = [s for s in op.inputs if s not in opdef.input_slots and legacy.is_legacy_slot(op.type, s)]
            names += [a for a in op.attrs if opdef.attr_spec(a) is None and a in legacy.EXTRA_ATTRS]
            for name in names:
                if name not in wanted:
                    neutral[f"{op.type}.{name}"] = neutral.get(f"{op.type}.{name}", 0) + 1
    if neutral:
        lines.append("legacy fields at their neutral value (no effect): "
                     + ", ".join(f"{k} x{n}" for k, n in sorted(neutral.items())))
    for note in program.upgrade_notes:
        lines.append(f"upgraded: {note}")
    odd_dims = [f"{var.name} {list(var.raw_dims)}" for block in program.blocks for var in block.vars.values()
                if var.raw_dims and any(d < -1 for d in var.raw_dims)]
    if odd_dims:
        lines.append("dims below -1 read as unknown (-1), as PaddlePaddle reads them: " + ", ".join(odd_dims))
    return lines


if __name__ == "__main__":
    sys.exit(main())
