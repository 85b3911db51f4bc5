"""Export an inference model to ONNX: `export_onnx.py MODEL [PARAMS] -o OUT.onnx`.

Reads a model Keel reads (legacy `.pdmodel` or PIR `.json`, ours or PaddlePaddle's, or a
prefix or directory naming one; its `.pdiparams` beside it unless PARAMS is given),
optionally converts it to float16 (--fp16: Keel's convert_to_fp16 pass, feeds and fetches
kept float32), translates it into ONNX (keel.onnx.export; `pip install -e ".[onnx]"` in the Keel checkout) and
checks it with onnx.checker. With --verify it first runs the ONNX model in ONNX Runtime and
the model in Keel's executor on the same inputs and prints the largest error per output.

The file is written atomically, and only when everything before succeeded (--verify
included). Every error is one `error: ...` line on stderr; exit status 2 for a bad command
line, 1 for anything else (an unreadable model, an op ONNX cannot express: named with its
line in the user's script, a failed --verify, an unwritable output).
"""
from __future__ import annotations

import argparse
import os
import sys

from keel.program.errors import KeelError, UnsupportedProgramError
from keel.program.onnx import DEFAULT_OPSET, MIN_OPSET, OnnxExportError

USAGE, FAILED = 2, 1  # exit statuses

EPILOG = """\
examples:
  python tools/export_onnx.py inference/net.pdmodel -o net.onnx --verify
  python tools/export_onnx.py model/inference.json model/inference.pdiparams -o det.onnx --dynamic-batch
  python tools/export_onnx.py inference/net -o net-fp16.onnx --fp16 --opset 18

--verify runs both engines on --inputs (an .npz with one array per feed, named `in:<feed>` or
`<feed>`) or on random inputs (-1 dims become 2; float feeds standard normal; integer
feeds that index an embedding below its vocabulary size, other integer feeds 0 or 1),
prints max |onnxruntime - keel| per output, and fails when it exceeds 1e-4 * (1 +
max |keel|) (1e-2 with --fp16), or an integer or boolean output differs.

exit status: 0 written (and verified), 1 failed (nothing written), 2 bad command line."""


class ToolError(Exception):
    """A failure the user can act on: printed as one `error: ...` line, exit with `status`."""

    def __init__(self, message: str, status: int = FAILED):
        super().__init__(message)
        self.status = status


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", help="the program file (.pdmodel or .json), or a prefix or directory naming it")
    parser.add_argument("params", nargs="?", help="its parameter file (default: the .pdiparams beside it)")
    parser.add_argument("-o", "--out", required=True, metavar="OUT.onnx", help="the ONNX file to write")
    parser.add_argument("--opset", type=int, default=DEFAULT_OPSET,
                        help=f"the ONNX opset to write ({MIN_OPSET} or later; default {DEFAULT_OPSET})")
    parser.add_argument("--fp16", action="store_true",
                        help="convert weights and activations to float16 first (feeds and fetches stay float32)")
    parser.add_argument("--dynamic-batch", action="store_true",
                        help="make every input's first dim symbolic ('batch'), also where the model fixed it")
    parser.add_argument("--verify", action="store_true",
                        help="compare ONNX Runtime's outputs with Keel's before writing (see below)")
    parser.add_argument("--inputs", metavar="NPZ", help="with --verify: the inputs (default: random ones)")
    parser.add_argument("--seed", type=int, default=0, help="with --verify: the random inputs' seed (default 0)")
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return export(args)
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status
    except (KeelError, OSError, ValueError, KeyError) as e:  # unreadable or untranslatable model; I/O
        print(f"error: {one_line(e)}", file=sys.stderr)
        return FAILED


def one_line(e: Exception) -> str:
    if isinstance(e, UnsupportedProgramError):
        return str(e).splitlines()[0].rstrip(":") + ": " + "; ".join(e.problems)
    if isinstance(e, OSError) and e.filename and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return " ".join(line.strip() for line in str(e).splitlines() if line.strip())


def export(args) -> int:
    try:
        import onnx
    except ImportError:
        raise ToolError("exporting to ONNX needs the onnx package: pip install -e '.[onnx]' in the Keel checkout") from None
    newest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= args.opset <= newest:
        raise ToolError(f"--opset {args.opset}: choose {MIN_OPSET} to {newest} (the installed onnx "
                        f"{onnx.__version__} knows up to {newest})", USAGE)
    if args.inputs and not args.verify:
        raise ToolError("--inputs is for --verify", USAGE)
    if not os.path.exists(args.model) and not any(os.path.exists(args.model + s) for s in (".pdmodel", ".json")):
        raise ToolError(f"{args.model}: no such model file (nor {args.model}.pdmodel / {args.model}.json)")

    from keel import onnx as keel_onnx
    from keel.program.onnx import io_names, program_to_onnx

    program, values = keel_onnx.inference_model(args.model, params=args.params)
    if args.fp16:
        program, values = keel_onnx.half_precision(program, values)
    feeds, fetches = io_names(program)
    print(f"model: {args.model}" + (f" + {args.params}" if args.params else ""))
    print(f"feeds: {', '.join(feeds)}; fetches: {', '.join(fetches)}")
    try:
        proto = program_to_onnx(program, values, opset_version=args.opset, dynamic_batch=args.dynamic_batch)
    except OnnxExportError as e:
        raise ToolError(f"cannot export {args.model} to ONNX: {one_line(e)}") from None
    ops = sum(1 for op in program.global_block().ops if op.type not in ("feed", "fetch"))
    print(f"onnx: opset {args.opset}, {ops} ops -> {len(proto.graph.node)} nodes, "
          f"{len(proto.graph.initializer)} initializers; onnx.checker (full check): OK")
    if args.verify:
        verify(args, program, values, proto, feeds)
    data = proto.SerializeToString()
    from keel.program.io.atomic import atomic_write
    directory = os.path.dirname(os.path.abspath(args.out))
    if not os.path.isdir(directory):
        raise ToolError(f"cannot write {args.out}: the directory {directory} does not exist")
    atomic_write(args.out, data)
    print(f"wrote: {args.out} ({len(data)} bytes)")
    return 0


def verify(args, program, values, proto, feeds) -> None:
    from keel import onnx as keel_onnx
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        raise ToolError("--verify needs onnxruntime: pip install -e '.[onnx]' in the Keel checkout") from None
    from keel.tools.model_inputs import InputsFileError, npz_feeds
    try:
        inputs = npz_feeds(args.inputs, feeds) if args.inputs else None
    except InputsFileError as e:
        raise ToolError(str(e)) from None
    tolerance = keel_onnx.TOLERANCE["float16" if args.fp16 else "float32"]
    source = f"--inputs {args.inputs}" if args.inputs else f"random inputs, seed {args.seed}"
    print(f"verify ({source}; onnxruntime against keel):")
    checks = keel_onnx.compare_with_keel(program, values, proto, inputs, seed=args.seed, tolerance=tolerance)
    for check in checks:
        if check.problem:
            print(f"  {check.name}: {check.problem}  FAIL")
        else:
            print(f"  {check.name}: max abs error {check.max_abs:.3g} (max |keel| {check.max_keel:.3g}, "
                  f"tolerance {tolerance:g} * (1 + max)){'' if check.ok else '  FAIL'}")
    failed = [c.name for c in checks if not c.ok]
    if failed:
        print("verify: FAILED")
        raise ToolError(f"--verify: {', '.join(failed)} differ(s) from Keel's beyond the tolerance; nothing written")
    print("verify: OK")


if __name__ == "__main__":
    sys.exit(main())
