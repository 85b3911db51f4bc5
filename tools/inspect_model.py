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


_YML_LINES = 120          # lines of inference.yml shown
_YML_LIST_ITEMS = 8       # items of one list shown (a recognizer's character list has thousands)
_YML_BYTES = 16 << 20     # read at most this much of it


def _deployment_description(model_file) -> list[str]:
    """PaddleX's `inference.yml` (model name, preprocessing, postprocessing) beside the model, as
    text: `<stem>.yml`, else `inference.yml` in the model's directory; long lists shortened."""
    stem = os.path.splitext(model_file)[0]
    for path in (stem + ".yml", os.path.join(os.path.dirname(model_file) or ".", "inference.yml")):
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    text = f.read(_YML_BYTES)
            except OSError as e:
                return [f"\n{path}: cannot read: {e.strerror or e}"]
            shown = _shorten_lists(text.splitlines())
            more = ["  ..."] if len(shown) > _YML_LINES else []
            return [f"\ndeployment description ({path}):"] + ["  " + line for line in shown[:_YML_LINES]] + more
    return []


def _shorten_lists(lines: list[str]) -> list[str]:
    """Runs of YAML list items (`- x` at one indent) beyond _YML_LIST_ITEMS become one line."""
    shown, run_indent, run = [], None, 0
    for line in lines:
        stripped = line.lstrip()
        indent = len(line) - len(stripped)
        if stripped.startswith("- ") and indent == run_indent:
            run += 1
        else:
            if run > _YML_LIST_ITEMS:
                shown.append(" " * run_indent + f"... ({run - _YML_LIST_ITEMS} more items)")
            run_indent, run = (indent, 1) if stripped.startswith("- ") else (None, 0)
        if run <= _YML_LIST_ITEMS:
            shown.append(line)
    if run > _YML_LIST_ITEMS:
        shown.append(" " * run_indent + f"... ({run - _YML_LIST_ITEMS} more items)")
    return shown


def _legacy_summary(program) -> list[str]:
    """What an older release's file holds and what reading it changed."""
    version = program.header.version.version if program.header.HasField("version") else 0
    lines = []
    pir_version = getattr(program, "pir_version", None)
    if pir_version is not None:
        lines.append(f"a PIR JSON program (base_code.version {pir_version}, PaddlePaddle 3.x), read as legacy ops "
                     f"(program/io/pir/FORMAT.md)")
    elif version and version != legacy.KEEL_RELEASE:
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
