"""Profile an inference model file: where a Predictor's run spends its time, per op type and
per op (executor/profiler.py).

    python tools/profile_model.py model.pdmodel --batch 8                 # the tables
    python tools/profile_model.py model.pdmodel --trace trace.json        # and a Chrome trace
    python tools/profile_model.py model.pdmodel --repeat 50 --warmup 5 --threads 2 --sort avg

The model runs through a Predictor (`Config.enable_profile()`), with the inference passes
unless --no-ir-optim. Its feeds are made from the file's feed variables: their declared
shapes with -1 replaced by --batch (or as --shape NAME=D0,D1,... says), random normal values
for floating point feeds, zeros for integer and bool ones. --warmup runs are not counted;
the tables sum up --repeat runs; --trace writes them as a Chrome trace (open it in
chrome://tracing or ui.perfetto.dev).
"""
from __future__ import annotations

import argparse
import sys


import numpy as np  # noqa: E402

from keel.executor import Config, create_predictor  # noqa: E402
from keel.executor.profiler import SORT_KEYS  # noqa: E402
from keel.program.errors import KeelError  # noqa: E402


def feeds(predictor, batch: int, shapes: dict, rng) -> list:
    """An array per input of `predictor`, from its declared shape and dtype."""
    arrays = []
    for name in predictor.get_input_names():
        handle = predictor.get_input_handle(name)
        shape = shapes.get(name) or [batch if d < 0 else d for d in handle.shape()]
        dtype = handle.dtype
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        else:
            arrays.append(np.zeros(shape, dtype))
    return arrays


def parse_shape(text: str):
    name, _, dims = text.partition("=")
    try:
        return name, [int(d) for d in dims.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape wants NAME=D0,D1,..., got {text!r}") from None


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model", help="a .pdmodel file (or its path prefix)")
    parser.add_argument("--params", help="its parameter file (default: the .pdiparams next to it)")
    parser.add_argument("--batch", type=int, default=1, help="replaces -1 in the feeds' shapes (default 1)")
    parser.add_argument("--shape", type=parse_shape, action="append", default=[], metavar="NAME=D0,D1,...",
                        help="a feed's whole shape (repeatable)")
    parser.add_argument("--repeat", type=int, default=20, help="profiled runs (default 20)")
    parser.add_argument("--warmup", type=int, default=3, help="runs before, not counted (default 3)")
    parser.add_argument("--threads", type=int, default=1, help="Config.set_cpu_math_library_num_threads")
    parser.add_argument("--no-ir-optim", action="store_true", help="run the program as saved, without the passes")
    parser.add_argument("--sort", choices=SORT_KEYS, default="total", help="the tables' order (default total)")
    parser.add_argument("--top", type=int, default=20, help="how many single ops to list (default 20)")
    parser.add_argument("--trace", metavar="OUT.json", help="write a Chrome trace of the profiled runs")
    args = parser.parse_args(argv)
    if args.batch < 1 or args.repeat < 1 or args.warmup < 0:
        parser.error("--batch and --repeat must be >= 1, --warmup >= 0")

    config = Config(args.model, args.params)
    config.switch_ir_optim(not args.no_ir_optim)
    config.set_cpu_math_library_num_threads(args.threads)
    config.enable_profile()
    try:
        predictor = create_predictor(config)
        unknown = sorted(set(dict(args.shape)) - set(predictor.get_input_names()))
        if unknown:
            parser.error(f"--shape names {unknown}: the model's inputs are {predictor.get_input_names()}")
        inputs = feeds(predictor, args.batch, dict(args.shape), np.random.default_rng(0))
        for _ in range(args.warmup):
            predictor.run(inputs)
        predictor.profiler.reset()
        for _ in range(args.repeat):
            predictor.run(inputs)
            predictor.profiler.step()
    except (KeelError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    described = ", ".join(f"{n} {a.dtype}{list(a.shape)}" for n, a in zip(predictor.get_input_names(), inputs))
    print(f"{config.prog_file()}: feeds {described}; passes {'off' if args.no_ir_optim else 'on'}, "
          f"{args.threads} thread(s), {args.warmup} warmup + {args.repeat} profiled run(s)")
    print(predictor.profiler.summary(sorted_by=args.sort, top=args.top))
    if args.trace:
        predictor.profiler.export(args.trace)
        print(f"\nChrome trace written to {args.trace} (open it in chrome://tracing or ui.perfetto.dev)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
