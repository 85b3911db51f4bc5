"""Optimize an inference model for deployment: prune, fold, fuse, and optionally float16.

    python tools/prune_for_inference.py models/net -o out/net --fuse --fp16 --verify

Reads `<in_prefix>.pdmodel` + `<in_prefix>.pdiparams` (ours or PaddlePaddle's), runs the
passes of program/passes in their fixed order (dead code, identity ops, constant folding;
with --fuse batch_norm folding and fc fusion; with --fp16 float16 conversion), and writes
`<out_prefix>.pdmodel` + `.pdiparams` in save_inference_model's layout, atomically. It
prints what each pass changed and the file sizes. With --verify it runs the original and
the optimized model on the same random inputs (-1 dims become 2; integer feeds that index
an embedding take values below its vocabulary size, others 0 or 1; --inputs gives them
instead, as `in:<feed>` arrays in an .npz) and exits 1 when the largest difference of
a float output, relative to that output's largest magnitude, exceeds 1e-5 (float32) or
1e-2 (--fp16: float16 carries 11 bits), or when an integer output differs at all.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from executor import Executor, Scope  # noqa: E402
from executor.kernel_call import call_kernel  # noqa: E402
from program.errors import KeelError  # noqa: E402
from program.io import inference_program, load_inference_model, persistable_specs, save_params  # noqa: E402
from program.io.atomic import atomic_write  # noqa: E402
from program.passes import PASSES, optimize_inference  # noqa: E402
from program import dtypes  # noqa: E402

TOLERANCE = {False: 1e-5, True: 1e-2}  # relative to each output's largest magnitude; by fp16
BATCH = 2


def evaluate(op_type: str, inputs: dict, attrs: dict) -> dict:
    """One op's kernel on host arrays: what constant folding runs."""
    return call_kernel(op_type, inputs, attrs)


def _load(prefix):
    scope = Scope()
    program, feeds, fetches = load_inference_model(prefix, Executor(), scope=scope)
    params = {name: scope.get(name) for name, _, _ in persistable_specs(program)}
    return program, feeds, [v.name for v in fetches], params


def _save(prefix: str, program, feeds, fetches, params) -> None:
    """save_inference_model's layout and order: the parameter file (none when there are no
    parameters), then the program file, each written atomically."""
    out = inference_program(program, feeds, fetches)
    directory = os.path.dirname(prefix)
    if directory:
        os.makedirs(directory, exist_ok=True)
    if persistable_specs(out):
        save_params(out, params, prefix + ".pdiparams")
    elif os.path.exists(prefix + ".pdiparams"):
        os.unlink(prefix + ".pdiparams")
    atomic_write(prefix + ".pdmodel", out.serialize_to_string())


def _random_inputs(program, feeds, params, rng) -> dict:
    block = program.global_block()
    inputs = {}
    for name in feeds:
        var = block.var(name)
        shape = [BATCH if d < 0 else d for d in var.shape or ()]
        dtype = dtypes.to_numpy(var.dtype)
        if dtype.kind == "f":
            inputs[name] = rng.standard_normal(shape).astype(dtype)
        elif dtype.kind == "b":
            inputs[name] = rng.random(shape) < 0.5
        else:
            vocab = [np.shape(params[op.input("W")[0]])[0] for op in block.ops
                     if op.type == "lookup_table_v2" and op.input("Ids") == [name]]
            inputs[name] = rng.integers(0, min(vocab) if vocab else 2, shape).astype(dtype)
    return inputs


def _run(prefix, inputs):
    scope, exe = Scope(), Executor()
    program, feeds, fetches = load_inference_model(prefix, exe, scope=scope)
    return exe.run(program, feed={f: inputs[f] for f in feeds}, fetch_list=fetches, scope=scope)


def _verify(in_prefix, out_prefix, inputs, fp16: bool) -> bool:
    tol = TOLERANCE[fp16]
    ok = True
    for i, (want, got) in enumerate(zip(_run(in_prefix, inputs), _run(out_prefix, inputs))):
        want, got = np.asarray(want), np.asarray(got)
        if want.shape != got.shape:
            print(f"  fetch {i}: shape {list(got.shape)}, expected {list(want.shape)}  FAIL")
            ok = False
            continue
        if want.dtype.kind != "f":
            same = np.array_equal(want, got)
            print(f"  fetch {i}: {want.dtype} values {'identical' if same else 'DIFFER'}")
            ok &= same
            continue
        diff = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
        rel = diff / max(float(np.abs(want).max()) if want.size else 0.0, 1e-12)
        good = rel <= tol
        print(f"  fetch {i}: max abs diff {diff:.3g}, relative {rel:.3g} (tolerance {tol:g})"
              f"{'' if good else '  FAIL'}")
        ok &= good
    return ok


def _sizes(prefix) -> str:
    parts = []
    for ext in (".pdmodel", ".pdiparams"):
        path = prefix + ext
        parts.append(f"{ext[1:]} {os.path.getsize(path) if os.path.exists(path) else 0} bytes")
    return ", ".join(parts)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("in_prefix", help="the model to read: <in_prefix>.pdmodel/.pdiparams")
    parser.add_argument("-o", "--out", required=True, help="the prefix to write")
    parser.add_argument("--fuse", action="store_true", help="fold batch_norm, fuse fc")
    parser.add_argument("--fp16", action="store_true", help="float16 weights and activations")
    parser.add_argument("--keep-io-types", action=argparse.BooleanOptionalAction, default=True,
                        help="with --fp16, keep feeds and fetches float32 (default: on)")
    parser.add_argument("--disable-pass", action="extend", nargs="+", default=[], metavar="NAME",
                        help=f"skip passes by name: {', '.join(PASSES)}")
    parser.add_argument("--verify", action="store_true", help="compare outputs before and after")
    parser.add_argument("--inputs", help="with --verify: an .npz of `in:<feed>` arrays to use")
    parser.add_argument("--seed", type=int, default=0, help="with --verify: the random inputs' seed")
    args = parser.parse_args(argv)
    in_prefix, out_prefix = os.fspath(args.in_prefix), os.fspath(args.out)
    if os.path.abspath(in_prefix) == os.path.abspath(out_prefix):
        parser.error("the output prefix must differ from the input prefix")

    try:
        program, feeds, fetches, params = _load(in_prefix)
        new, new_params, report = optimize_inference(
            program, params, disabled=args.disable_pass, evaluate=evaluate, fuse=args.fuse,
            fp16=args.fp16, keep_io_types=args.keep_io_types)
        _save(out_prefix, new, feeds, fetches, new_params)
    except (KeelError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"passes on {in_prefix}:")
    print(report)
    print(f"in:  {_sizes(in_prefix)}")
    print(f"out: {_sizes(out_prefix)}")
    if not args.verify:
        return 0
    if args.inputs:
        with np.load(args.inputs, allow_pickle=False) as data:
            inputs = {f: data[f"in:{f}"] for f in feeds}
    else:
        inputs = _random_inputs(program, feeds, params, np.random.default_rng(args.seed))
    print("verify:")
    ok = _verify(in_prefix, out_prefix, inputs, args.fp16)
    print("verify: OK" if ok else "verify: FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
