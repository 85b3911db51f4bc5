"""Print a program file (`.pdmodel`, ours or PaddlePaddle's) as Keel reads it.

    python tools/inspect_model.py out/digits.pdmodel            # the listing, feeds, fetches, params (dtype, shape)
    python tools/inspect_model.py model.pdmodel --check          # only: can Keel run it? (exit 1 if not)

Every problem Keel has with the file (unknown op types with the nearest known names,
unsupported attributes or slots, undefined variables) is listed at once. With the
matching `.pdiparams` next to it, parameter shapes and sizes are read from that file too.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from program import dtypes  # noqa: E402
from program.errors import KeelError  # noqa: E402
from program.io import load_params, load_program, persistable_specs  # noqa: E402
from program.verify import program_problems  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a .pdmodel file")
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
        print(f"{args.model}: {'cannot run: ' + str(len(problems)) + ' problem(s)' if problems else 'OK'}")
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
    if problems:
        print(f"\n{len(problems)} problem(s) keep Keel from running this program:")
        for p in problems:
            print(f"  - {p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
