"""Optimize an inference model for deployment: prune, fold, fuse, optionally float16 or bfloat16.

Reads a `.pdmodel` + `.pdiparams` pair (ours or PaddlePaddle's), optionally re-prunes it to
other feed/fetch targets (program.io.inference_program), runs the passes of
program/passes in their fixed order (dead code, identity ops, constant folding; with
--fuse the fusions: batch_norm folding, fc, ...; with --fp16 float16 conversion; with
--bf16 bfloat16 weights, cast to float32 where read, arithmetic in float32), and writes
`<out>.pdmodel` + `<out>.pdiparams` in save_inference_model's layout. It prints what each
pass rewrote, the op counts by type and the parameter bytes before and after, and the
files written.

Writing is all or nothing: both files go to temporary names beside their targets and are
renamed into place (parameters, then program) only when everything before succeeded,
--verify included; a failure leaves no output files and no directories it created.
Every error is one `error: ...` line on stderr; exit status 2 for a bad command line
(unknown feed/fetch or pass names, --fp16 with --bf16), 1 for anything else (unreadable or corrupt
files, unsupported ops, an unwritable output, a failed --verify).
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass

import numpy as np


from keel.executor import Executor, Scope  # noqa: E402
from keel.executor.kernel_call import call_kernel  # noqa: E402
from keel.program import dtypes  # noqa: E402
from keel.program.errors import KeelError, ProgramError, UnsupportedProgramError  # noqa: E402
from keel.program.io import (inference_program, load_params, load_program, persistable_specs,  # noqa: E402
                        save_params)
from keel.program.io.program_file import model_file_set, model_files  # noqa: E402
from keel.program.io.atomic import FileSet, atomic_write, complete_interrupted  # noqa: E402
from keel.program.passes import PASSES, optimize_inference  # noqa: E402
from keel.program.program import Program  # noqa: E402
from keel.proto import pb  # noqa: E402
from keel.tools.model_inputs import BATCH, InputsFileError, NoShapeError, npz_feeds, random_feeds  # noqa: E402

# Largest |difference| / largest |expected|, per output. float16 keeps 11 significant bits;
# bfloat16 weights keep 8 (up to 2**-8, 0.4%, rounding per weight): with them the largest
# measured is 6e-3 (the test fixtures with and without --fuse, random inputs of seeds 0-4;
# the digits example on its test set: 5e-3), so 3e-2 leaves a factor of 5.
TOLERANCE = {"float32": 1e-5, "float16": 1e-2, "bfloat16": 3e-2}
USAGE, FAILED = 2, 1  # exit statuses
ENGINES = ("keel", "onnxruntime")  # what runs the result in --verify
GROUP = {group: [p.name for p in PASSES.values() if p.group == group] for group in ("fuse", "fp16", "bf16")}

EPILOG = f"""\
examples:
  python tools/prune_for_inference.py out/digits --fuse --fp16 --verify -o deploy/digits
  python tools/prune_for_inference.py out/digits --fuse --bf16 --verify -o deploy/digits-bf16
  python tools/prune_for_inference.py --model net.pdmodel --params net.pdiparams \\
      --fetch pool2d_0.tmp_0 -o deploy/features
  python tools/prune_for_inference.py out/digits --passes fold_batch_norm -o deploy/digits
  python tools/prune_for_inference.py out/digits --verify --engine onnxruntime -o deploy/digits

passes, in the order they run:
{textwrap.fill(', '.join(PASSES), 88, initial_indent='  ', subsequent_indent='  ')}
  with --fuse: {', '.join(GROUP['fuse'])}; with --fp16: {', '.join(GROUP['fp16'])};
  with --bf16: {', '.join(GROUP['bf16'])}

--verify feeds the original (re-pruned to the same targets, not optimized; Keel's
executor runs it) and the optimized model (Keel's executor, or ONNX Runtime with --engine
onnxruntime) the same inputs: --inputs, or random ones (-1 dims become {BATCH}; float
feeds standard normal; integer feeds that index an embedding below its vocabulary size,
other integer feeds 0 or 1). Per output it prints the largest absolute difference and that
difference relative to the output's largest magnitude, and fails when the relative
difference exceeds {TOLERANCE['float32']:g} (float32), {TOLERANCE['float16']:g} (when convert_to_fp16 ran: float16
carries 11 significant bits) or {TOLERANCE['bfloat16']:g} (when convert_weights_to_bf16 ran: bfloat16 weights
carry 8), or when an integer or boolean output differs.

Both files are written under temporary names and renamed into place only when everything
succeeded (--verify included): a failure writes nothing.

exit status: 0 written (and verified), 1 failed (nothing written), 2 bad command line."""


class ToolError(Exception):
    """A failure the user can act on: printed as one `error: ...` line, exit with `status`."""

    def __init__(self, message: str, status: int = FAILED):
        super().__init__(message)
        self.status = status


@dataclass
class Model:
    """An inference program, its feed and fetch targets (in `col` order) and parameters."""
    program: Program
    feeds: list[str]
    fetches: list[str]
    params: dict[str, np.ndarray]


# -- the command line ---------------------------------------------------------------------

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_argument_group("input (a prefix, or --model with --params)")
    source.add_argument("prefix", nargs="?",
                        help="the model to read: PREFIX.pdmodel and PREFIX.pdiparams (the latter only when "
                             "the model has parameters)")
    source.add_argument("--model", metavar="FILE", help="the program file to read, instead of a prefix")
    source.add_argument("--params", metavar="FILE",
                        help="with --model: its parameter file (not needed for a parameter-free model)")
    source.add_argument("--feed", nargs="+", metavar="NAME",
                        help="re-prune the program to take these variables as inputs "
                             "(default: the model's own feed targets)")
    source.add_argument("--fetch", nargs="+", metavar="NAME",
                        help="re-prune the program to compute these variables "
                             "(default: the model's own fetch targets)")

    passes = parser.add_argument_group("passes")
    passes.add_argument("--fuse", action="store_true",
                        help=f"also run the fusion passes ({', '.join(GROUP['fuse'])}): batch_norm "
                             "folded into conv2d/matmul/fc, mul/matmul + bias (+ relu) fused into fc, ...")
    passes.add_argument("--fp16", action="store_true",
                        help="also convert weights and activations to float16 (ops that need float32 "
                             "stay float32, with casts at the boundaries)")
    passes.add_argument("--bf16", action="store_true",
                        help="also store the convolution, matmul/fc and embedding weights in bfloat16 "
                             "(half the parameter bytes), cast back to float32 where read: the "
                             "arithmetic stays float32; not with --fp16")
    passes.add_argument("--keep-io-types", action=argparse.BooleanOptionalAction, default=True,
                        help="with --fp16: keep the feeds and fetches in their original float32 "
                             "(default: on); --no-keep-io-types makes them float16 too")
    passes.add_argument("--passes", nargs="+", metavar="NAME",
                        help="run only these passes, in the standard order (naming a fusion, "
                             "convert_to_fp16 or convert_weights_to_bf16 runs it without "
                             "--fuse/--fp16/--bf16)")
    passes.add_argument("--disable-pass", action="extend", nargs="+", default=[], metavar="NAME",
                        help="skip these passes")

    output = parser.add_argument_group("output and checks")
    output.add_argument("-o", "--out", required=True, metavar="PREFIX",
                        help="write PREFIX.pdmodel and PREFIX.pdiparams (missing directories are "
                             "created; no .pdiparams for a parameter-free result)")
    output.add_argument("--verify", action="store_true",
                        help="run the original and the result on the same inputs and compare every "
                             "output before writing (see below)")
    output.add_argument("--inputs", metavar="NPZ",
                        help="with --verify: the inputs, an .npz with one array per feed, named "
                             "`in:<feed>` (or just `<feed>`)")
    output.add_argument("--seed", type=int, default=0,
                        help="with --verify: the seed of the random inputs (default 0)")
    output.add_argument("--engine", choices=ENGINES, default="keel",
                        help="with --verify: what runs the result: Keel's executor (default) or ONNX Runtime "
                             "on the result exported to ONNX in memory, as Config.enable_onnxruntime() "
                             "serves it (needs onnx and onnxruntime; the fusions' ops have no ONNX form: "
                             "use it without --fuse); the original always runs on Keel's executor")
    return parser


def input_files(args) -> tuple[str, str | None]:
    """(model file, params file or None) from the prefix or --model/--params."""
    if args.prefix and (args.model or args.params):
        raise ToolError("give a model prefix or --model/--params, not both", USAGE)
    if args.prefix:
        return model_files(args.prefix)  # PREFIX.json (PIR) or PREFIX.pdmodel, or a directory
    if not args.model:
        raise ToolError("no model given: pass a prefix (PREFIX.pdmodel) or --model FILE", USAGE)
    return args.model, args.params


def pass_selection(args) -> tuple[list[str], bool, bool, bool]:
    """(disabled pass names, fuse, fp16, bf16) for optimize_inference."""
    for flag, names in (("--passes", args.passes or []), ("--disable-pass", args.disable_pass)):
        unknown = [n for n in names if n not in PASSES]
        if unknown:
            raise ToolError(f"{flag}: unknown pass name(s) {', '.join(unknown)}; "
                            f"the passes are {', '.join(PASSES)}", USAGE)
    selected = set(args.passes) if args.passes else set(PASSES)
    disabled = [n for n in PASSES if n not in selected or n in args.disable_pass]
    runs = {PASSES[n].group for n in selected}
    fuse = args.fuse or (args.passes is not None and "fuse" in runs)
    fp16 = args.fp16 or (args.passes is not None and "fp16" in runs)
    bf16 = args.bf16 or (args.passes is not None and "bf16" in runs)
    if fp16 and bf16:
        raise ToolError(f"--fp16 and --bf16 together ({', '.join(GROUP['fp16'] + GROUP['bf16'])}): "
                        "choose float16 weights and activations or bfloat16 weights", USAGE)
    return disabled, fuse, fp16, bf16


# -- reading ------------------------------------------------------------------------------

def load_model(model_file: str, params_file: str | None) -> Model:
    if params_file is not None:
        complete_interrupted(model_file_set(model_file, params_file))  # a save killed mid-way is finished first
    program = load_program(model_file)  # ParseError, or UnsupportedProgramError listing every problem
    specs = persistable_specs(program)
    params = {}
    if specs:
        if params_file is None:
            raise ToolError(f"{model_file} has {len(specs)} parameter(s): give their file with --params FILE")
        if not os.path.isfile(params_file):
            raise ToolError(f"{params_file}: no such file ({model_file} has {len(specs)} parameter(s))")
        params = load_params(program, params_file)  # TensorFileError names the file and the record
    block = program.global_block()
    feeds = sorted((op for op in block.ops if op.type == "feed"), key=lambda op: op.attr("col"))
    fetches = sorted((op for op in block.ops if op.type == "fetch"), key=lambda op: op.attr("col"))
    return Model(program, [op.output("Out")[0] for op in feeds], [op.input("X")[0] for op in fetches], params)


def retarget(model: Model, source: str, feeds, fetches) -> Model:
    """The model pruned to other feed/fetch targets (None: keep the model's own)."""
    feeds, fetches = feeds or model.feeds, fetches or model.fetches
    if not fetches:
        raise ToolError(f"{source} has no fetch ops: name the outputs with --fetch", USAGE)
    block = model.program.global_block()
    tensors = [name for name, var in block.vars.items() if var.type == pb.VarType.DENSE_TENSOR]
    for flag, names in (("--feed", feeds), ("--fetch", fetches)):
        for name in names:
            if name not in block.vars:
                closest = difflib.get_close_matches(name, tensors, n=3, cutoff=0.0)
                raise ToolError(f"{flag} {name!r} is not a variable of {source}; the closest are "
                                f"{', '.join(closest)}", USAGE)
    if (feeds, fetches) == (model.feeds, model.fetches):
        return model
    try:
        program = inference_program(model.program, feeds, fetches)  # feed/fetch ops are rebuilt
    except ProgramError as e:
        message = str(e).removeprefix("save_inference_model: ")
        raise ToolError(f"cannot prune {source} to --feed {' '.join(feeds)} --fetch {' '.join(fetches)}: "
                        f"{message}", USAGE) from None
    names = [name for name, _, _ in persistable_specs(program)]
    return Model(program, list(feeds), list(fetches), {n: model.params[n] for n in names})


# -- writing ------------------------------------------------------------------------------

class StagedOutput:
    """The output written under temporary names beside its targets; `commit()` replaces the
    pair as one (program/io/atomic.py's FileSet: a kill at any moment leaves the old pair or
    the new one). Leaving the `with` block removes any temporary file left and, without a
    commit, the directories `write` created."""

    def __init__(self, prefix: str):
        self.model_file, self.params_file = prefix + ".pdmodel", prefix + ".pdiparams"
        self.files: FileSet | None = None
        self.has_params = False
        self.created_dirs: list[str] = []
        self.committed = False

    def write(self, program: Program, params: dict) -> None:
        for target in (self.params_file, self.model_file):
            if os.path.isdir(target):
                raise ToolError(f"cannot write {target}: it is a directory")
        self._make_dirs(os.path.dirname(self.model_file))
        target = self.params_file
        try:
            self.files = FileSet([self.model_file, self.params_file])
            if persistable_specs(program):
                self.has_params = True
                save_params(program, params, self.files.temp(target))
            else:
                self.files.remove(target)  # a parameter-free model has no parameter file (as in Paddle)
            target = self.model_file
            atomic_write(self.files.temp(target), program.serialize_to_string())
        except OSError as e:  # name the target, not the temporary file
            raise ToolError(f"cannot write {target}: {e.strerror or e}") from None

    def temp_files(self) -> tuple[str, str | None]:
        """(program, parameters or None): the written files under their temporary names."""
        return (self.files.temp(self.model_file),
                self.files.temp(self.params_file) if self.has_params else None)

    def commit(self) -> list[str]:
        """Replace the pair; returns the paths written."""
        self.files.commit()
        self.committed = True
        return [self.params_file, self.model_file] if self.has_params else [self.model_file]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.files is not None:
            self.files.__exit__(*exc)
        if not self.committed:
            for directory in reversed(self.created_dirs):
                with contextlib.suppress(OSError):
                    os.rmdir(directory)

    def _make_dirs(self, directory: str) -> None:
        missing = []
        while directory and not os.path.exists(directory):
            missing.append(directory)
            directory = os.path.dirname(directory)
        for d in reversed(missing):
            try:
                os.mkdir(d)
            except OSError as e:
                raise ToolError(f"cannot create the output directory {d}: {e.strerror or e}") from None
            self.created_dirs.append(d)


# -- verifying ----------------------------------------------------------------------------

def verify_inputs(model: Model, npz: str | None, seed: int) -> dict[str, np.ndarray]:
    try:
        if npz:
            return npz_feeds(npz, model.feeds)
        return random_feeds(model.program, model.feeds, model.params, seed, BATCH)
    except InputsFileError as e:
        raise ToolError(str(e)) from None
    except NoShapeError as e:
        raise ToolError(f"{e}: give --inputs") from None


def run_model(model: Model, inputs: dict, engine: str = "keel") -> list[np.ndarray]:
    if engine == "onnxruntime":
        return run_onnxruntime(model, inputs)
    scope, exe = Scope(), Executor()
    for name, value in model.params.items():
        scope.set(name, value)
    block = model.program.global_block()
    feed = {f: np.asarray(inputs[f]).astype(dtypes.to_numpy(block.var(f).dtype), copy=False)
            for f in model.feeds}  # float16 feeds with --no-keep-io-types
    return [np.asarray(v) for v in exe.run(model.program, feed=feed, fetch_list=model.fetches, scope=scope)]


def run_onnxruntime(model: Model, inputs: dict) -> list[np.ndarray]:
    """The model's outputs from ONNX Runtime, the program exported in memory
    (executor/onnx_engine.py, with a default Config: one thread, the CPU)."""
    from keel.executor.inference_config import Config
    from keel.executor.onnx_engine import CPU, OrtEngine, OrtUnavailable
    try:
        engine = OrtEngine(Config(), model.program, model.params, model.feeds, model.fetches, [CPU])
    except OrtUnavailable as e:
        raise ToolError(f"--engine onnxruntime: {e}") from None
    block = model.program.global_block()
    feed = {f: np.ascontiguousarray(inputs[f], dtype=dtypes.to_numpy(block.var(f).dtype)) for f in model.feeds}
    return [np.asarray(v) for v in engine.runner(Scope(), observe=False)(feed)]


def verify(reference: Model, result: Model, inputs: dict, tolerance: float, engine: str = "keel") -> list[str]:
    """Print each output's differences (the result run by `engine`); returns the outputs
    beyond `tolerance`."""
    failed = []
    with np.errstate(all="ignore"):  # float16 overflow shows as a difference (and is named below)
        outputs = zip(reference.fetches, run_model(reference, inputs), run_model(result, inputs, engine))
    for name, want, got in outputs:
        if want.shape != got.shape:
            print(f"  {name}: shape {list(got.shape)}, expected {list(want.shape)}  FAIL")
            failed.append(name)
        elif want.dtype.kind != "f":
            same = np.array_equal(want, got)
            print(f"  {name}: {want.dtype} values {'identical' if same else 'DIFFER  FAIL'}")
            if not same:
                failed.append(name)
        else:
            diff = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
            scale = float(np.abs(want).max()) if want.size else 0.0
            rel = diff / max(scale, 1e-12)
            good = rel <= tolerance  # False for NaN too
            overflow = not np.isfinite(got).all() and np.isfinite(want).all()
            print(f"  {name}: max abs diff {diff:.3g}, relative {rel:.3g} (tolerance {tolerance:g})"
                  f"{', inf/NaN in the result' if overflow else ''}{'' if good else '  FAIL'}")
            if not good:
                failed.append(name)
    return failed


def precision(report) -> str:
    """The TOLERANCE key for what the passes did to the numbers."""
    if report["convert_to_fp16"].status == "ran":
        return "float16"
    if report["convert_weights_to_bf16"].status == "ran":
        return "bfloat16"
    return "float32"


# -- the report ---------------------------------------------------------------------------

def print_passes(report, selected: list[str] | None) -> None:
    print("passes:")
    width = max(len(r.name) for r in report.records)
    for r in report.records:
        if r.status == "disabled" and selected is not None and r.name not in selected:
            print(f"  {r.name:<{width}} not in --passes")
        elif r.status != "ran":
            print(f"  {r.name:<{width}} {r.status}")
        else:
            rewrites = ", ".join(f"{k} {v}" for k, v in r.changes.items()) or "no change"
            print(f"  {r.name:<{width}} ops {r.ops_before} -> {r.ops_after}: {rewrites}")


def print_op_counts(before: Program, after: Program) -> None:
    old = Counter(op.type for op in before.global_block().ops)
    new = Counter(op.type for op in after.global_block().ops)
    width = max(len("total"), *(len(t) for t in old | new))
    print(f"ops by type:{' ' * (width - 8)}before  after")
    for op_type in sorted(old | new):
        print(f"  {op_type:<{width}} {old[op_type]:>6} {new[op_type]:>6}")
    print(f"  {'total':<{width}} {sum(old.values()):>6} {sum(new.values()):>6}")


def param_bytes(params: dict) -> int:
    return sum(np.asarray(v).nbytes for v in params.values())


def print_params(before: dict, after: dict) -> None:
    old, new = param_bytes(before), param_bytes(after)
    share = f" ({100 * new / old:.1f}%)" if old else ""
    print(f"parameters: {old} bytes in {len(before)} tensors -> {new} bytes in {len(after)} tensors{share}")


# -- main ---------------------------------------------------------------------------------

def one_line(e: Exception) -> str:
    if isinstance(e, UnsupportedProgramError):  # "<file> cannot be run by Keel (n problem(s)):" + a list
        return str(e).splitlines()[0].rstrip(":") + ": " + "; ".join(e.problems)
    if isinstance(e, OSError) and e.filename and e.strerror:
        return f"{e.filename}: {e.strerror}"
    return " ".join(line.strip() for line in str(e).splitlines() if line.strip())


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return optimize(args)
    except ToolError as e:
        print(f"error: {e}", file=sys.stderr)
        return e.status
    except (KeelError, OSError, ValueError, KeyError) as e:  # unreadable, corrupt or unsupported input; I/O
        print(f"error: {one_line(e)}", file=sys.stderr)
        return FAILED


def optimize(args) -> int:
    model_file, params_file = input_files(args)
    out = os.fspath(args.out)
    out = out[:-len(".pdmodel")] if out.endswith(".pdmodel") else out
    inputs_files = {os.path.abspath(f) for f in (model_file, params_file) if f}
    if inputs_files & {os.path.abspath(out + ".pdmodel"), os.path.abspath(out + ".pdiparams")}:
        raise ToolError(f"-o {out} would overwrite the input model; choose another prefix", USAGE)
    disabled, fuse, fp16, bf16 = pass_selection(args)

    original = load_model(model_file, params_file)
    reference = retarget(original, model_file, args.feed, args.fetch)
    program, params, report = optimize_inference(
        reference.program, reference.params, disabled=disabled, evaluate=call_kernel, fuse=fuse,
        fp16=fp16, bf16=bf16, keep_io_types=args.keep_io_types)
    result_program = inference_program(program, reference.feeds, reference.fetches)
    result_params = {n: params[n] for n, _, _ in persistable_specs(result_program)}

    print(f"model: {model_file}" + (f" + {params_file}" if original.params else ""))
    print(f"feeds: {', '.join(reference.feeds)}; fetches: {', '.join(reference.fetches)}")
    print_passes(report, args.passes)
    print_op_counts(original.program, result_program)
    print_params(original.params, result_params)

    inputs = verify_inputs(reference, args.inputs, args.seed) if args.verify else None
    with StagedOutput(out) as staged:
        staged.write(result_program, result_params)
        if args.verify:
            tolerance = TOLERANCE[precision(report)]
            source = f"--inputs {args.inputs}" if args.inputs else f"random inputs, seed {args.seed}"
            engine = "" if args.engine == "keel" else ", the result run by ONNX Runtime"
            print(f"verify ({source}{engine}):")
            failed = verify(reference, load_model(*staged.temp_files()), inputs, tolerance, args.engine)
            if failed:
                print("verify: FAILED")
                raise ToolError(f"--verify: {', '.join(failed)} differ(s) from the original beyond the "
                                f"tolerance {tolerance:g}; nothing written")
            print("verify: OK")
        written = staged.commit()
    print("wrote:")
    for path in written:
        print(f"  {path} ({os.path.getsize(path)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
