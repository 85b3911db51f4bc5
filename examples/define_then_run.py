"""A first define-then-run script: define an MLP as a Program, look at it, save it as a
PaddlePaddle-compatible file, load it back, and run it.

    python examples/define_then_run.py
"""
import argparse
import tempfile
from pathlib import Path

import numpy as np

import keel.program as pg
from keel.executor import CPUPlace, Executor


def main(argv=None):
    argparse.ArgumentParser(description=__doc__.split("\n\n")[0]).parse_args(argv)

    # 1. Define: nothing is computed here, ops are only recorded.
    main_program, startup = pg.Program(), pg.Program()
    startup.random_seed = 42  # the initializer ops get this seed: same weights on every run
    with pg.program_guard(main_program, startup):
        x = pg.data("x", shape=[-1, 64], dtype="float32")
        label = pg.data("label", shape=[-1, 1], dtype="int64")
        h = pg.nn.fc(x, 128, activation="relu")
        logits = pg.nn.fc(h, 10)
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
        probs = pg.nn.softmax(logits)

    print(main_program)  # a readable listing: vars with shapes and dtypes, ops with slots and attributes

    # 2. The program is a protobuf ProgramDesc: serialize, parse, compare.
    blob = main_program.serialize_to_string()
    again = pg.Program.parse_from_string(blob)
    assert again == main_program
    out_dir = Path(tempfile.mkdtemp())
    pg.io.save_program(main_program, out_dir / "mlp.pdmodel")
    print(f"\nsaved {len(blob)} bytes to {out_dir / 'mlp.pdmodel'}; parsed back equal: {again == main_program}")

    # 3. Run: the startup program fills the parameters, then the main program computes.
    exe = Executor(CPUPlace())
    exe.run(startup)
    rng = np.random.default_rng(0)
    xb = rng.standard_normal((8, 64)).astype(np.float32)
    yb = rng.integers(0, 10, size=(8, 1))
    loss_value, p = exe.run(main_program, feed={"x": xb, "label": yb}, fetch_list=[loss, probs])
    print(f"loss on a random batch: {float(loss_value):.4f} (about ln(10) = {np.log(10):.4f} for random weights)")
    print(f"class probabilities of the first example sum to {p[0].sum():.6f}")


if __name__ == "__main__":
    main()
