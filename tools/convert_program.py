"""Convert an inference model between PaddlePaddle's two program formats: a legacy ProgramDesc
(`.pdmodel`) and a PaddlePaddle 3.x PIR program (`.json`), both ways; the parameters
(`.pdiparams`) go along. PaddlePaddle translates legacy programs to PIR only; the PIR ->
legacy direction is Keel's.

    python -m keel.tools.convert_program model.pdmodel model.json
    keel-convert inference.json deploy/model.pdmodel
    keel-convert out/digits deploy/digits --to pir           (prefixes: out/digits.pdmodel ...)

The input's format is told by its content (PIR JSON starts with `{`), not its name; the
output's by `--to`, else the output name's suffix, else it is the other format. The program is
read as Keel reads either format, laid out as an inference program (feeds first, fetches
last, the parameters it reads) and written; the parameters are read against the program and
written in PaddlePaddle's record order (by name). The pair is replaced as one: a failure, such
as an op the output format cannot express (named, with where it came from), writes nothing.

exit status: 0 written, 1 failed (nothing written), 2 bad command line.
"""
from __future__ import annotations

import argparse
import os
import sys

from keel.program.errors import KeelError
from keel.program.io import inference_program, load_params, load_program, persistable_specs
from keel.program.io.atomic import complete_interrupted
from keel.program.io.inference_model import PROGRAM_FORMATS, write_model_pair
from keel.program.io.pir import is_pir_json
from keel.program.io.program_file import PARAMS_SUFFIX, PROGRAM_SUFFIXES, model_file_set, model_files

USAGE, FAILED = 2, 1


class ToolError(Exception):
    def __init__(self, message: str, status: int = FAILED):
        super().__init__(message)
        self.status = status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description="Convert an inference model between PaddlePaddle's legacy "
        "(.pdmodel) and PIR (.json) program formats, with its parameters.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="examples:\n  keel-convert model.pdmodel model.json\n  keel-convert inference.json model.pdmodel\n"
               "  keel-convert out/digits deploy/digits --to pir\n\n"
               "exit status: 0 written, 1 failed (nothing written), 2 bad command line.")
    parser.add_argument("input", help="a program file (.json or .pdmodel; its .pdiparams beside it), a "
                                      "prefix, or a directory holding one model")
    parser.add_argument("output", help="the program file to write (.json or .pdmodel), or a prefix")
    parser.add_argument("--to", choices=sorted(PROGRAM_FORMATS),
                        help="the output format (default: from the output's suffix, else the other format)")
    parser.add_argument("--params", metavar="FILE", help="the input's parameter file, when not beside it")
    return parser


def output_files(output: str, to: str | None, input_is_pir: bool) -> tuple[str, str]:
    """(program file, parameter file) to write."""
    suffix = next((s for s in PROGRAM_SUFFIXES if output.endswith(s)), None)
    if to is None:
        to = ({v: k for k, v in PROGRAM_FORMATS.items()}[suffix] if suffix
              else ("legacy" if input_is_pir else "pir"))
    wanted = PROGRAM_FORMATS[to]
    if suffix is not None and suffix != wanted:
        raise ToolError(f"--to {to} writes a {wanted} program, but the output is named {output}", USAGE)
    stem = output[:-len(suffix)] if suffix else output
    return stem + wanted, stem + PARAMS_SUFFIX


def convert(args) -> list[str]:
    model_file, params_file = model_files(args.input)
    params_file = args.params or params_file
    if not os.path.isfile(model_file):
        raise ToolError(f"{model_file}: no such program file (the input is a program file, a prefix or a "
                        f"directory)")
    complete_interrupted(model_file_set(model_file, params_file))  # a save killed mid-way is finished first
    with open(model_file, "rb") as f:
        input_is_pir = is_pir_json(f.read(64))
    out_model, out_params = output_files(os.fspath(args.output), args.to, input_is_pir)
    if {os.path.abspath(out_model), os.path.abspath(out_params)} & {os.path.abspath(model_file),
                                                                     os.path.abspath(params_file)}:
        raise ToolError(f"{out_model} would overwrite the input; choose another output name", USAGE)
    program = load_program(model_file)
    values = {}
    if persistable_specs(program):
        if not os.path.isfile(params_file):
            raise ToolError(f"{params_file}: no such file ({model_file} has parameters): give it with --params")
        values = load_params(program, params_file)
    block = program.global_block()
    feeds = [op.output("Out")[0] for op in sorted((op for op in block.ops if op.type == "feed"),
                                                   key=lambda op: op.attr("col"))]
    fetches = [op.input("X")[0] for op in sorted((op for op in block.ops if op.type == "fetch"),
                                                  key=lambda op: op.attr("col"))]
    if not fetches:
        raise ToolError(f"{model_file} has no fetch ops: it is not an inference model")
    infer = inference_program(program, feeds, fetches)
    directory = os.path.dirname(out_model)
    if directory:
        os.makedirs(directory, exist_ok=True)
    write_model_pair(infer, out_model, out_params, values)
    return [out_model] + ([out_params] if persistable_specs(infer) else [])


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        written = convert(args)
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status
    except (KeelError, OSError, ValueError) as e:  # unreadable or unsupported input; an op with no mapping; I/O
        print(f"error: {' '.join(line.strip() for line in str(e).splitlines() if line.strip())}", file=sys.stderr)
        return FAILED
    for path in written:
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
