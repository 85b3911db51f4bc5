"""`paddle.utils.run_check()`: does Keel work here, and on which devices?

It builds a tiny regression program (fc + mean squared error + SGD), trains it a few
steps on the CPU and on every CUDA device cupy finds, and checks that the loss is finite
and falls; then it prints which devices work, as PaddlePaddle's check does. A device that
fails raises with the device named; no GPU is not a failure (Keel runs on the CPU, and the
printout says why there is no GPU).
"""
from __future__ import annotations

import numpy as np

import keel.program as pg
from keel.executor import CPUPlace, CUDAPlace, Executor, Scope
from keel.executor.place import device_count

STEPS = 10


def run_check() -> None:
    """Check that Keel works here: train a tiny program a few steps on the CPU and on every CUDA
    device cupy finds, and print which devices work (a failing device raises, naming it).

    Examples:
        >>> import keel as paddle
        >>> paddle.utils.run_check()
        Running verify Keel program ...
        Keel works well on 1 CPU.
        ...
        Keel is installed successfully! Let's start deep learning with Keel now.
    """
    print("Running verify Keel program ... ")
    gpus = device_count()
    places = [CPUPlace()] + [CUDAPlace(i) for i in range(gpus)]
    for place in places:
        try:
            first, last = _train(place)
        except Exception as e:
            raise RuntimeError(f"Keel does not work on {_describe(place)}: {type(e).__name__}: {e}") from e
        if not (np.isfinite(last) and last < first):
            raise RuntimeError(f"Keel does not work on {_describe(place)}: {STEPS} SGD steps took the loss from "
                               f"{first:.6g} to {last:.6g}, which should have fallen")
    print("Keel works well on 1 CPU.")
    if gpus:
        print(f"Keel works well on {gpus} GPU{'s' if gpus > 1 else ''}.")
    else:
        print(f"No GPU in use: {_why_no_gpu()}.")
    print("Keel is installed successfully! Let's start deep learning with Keel now.")


def _train(place) -> tuple[float, float]:
    """(first loss, last loss) of STEPS SGD steps of y = x.w + b on `place`."""
    main, startup = pg.Program(), pg.Program()
    main.random_seed = startup.random_seed = 1
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x = pg.data("x", [-1, 4])
        y = pg.data("y", [-1, 1])
        loss = pg.mean(pg.square(pg.subtract(pg.nn.fc(x, 1), y)))
        pg.optimizer.SGD(learning_rate=0.1).minimize(loss)
    rng = np.random.default_rng(0)
    xs = rng.standard_normal((32, 4)).astype("float32")
    ys = xs @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32") + 0.25
    exe, scope = Executor(place), Scope()
    exe.run(startup, scope=scope)
    losses = [float(exe.run(main, feed={"x": xs, "y": ys}, fetch_list=[loss], scope=scope)[0])
              for _ in range(STEPS)]
    return losses[0], losses[-1]


def _describe(place) -> str:
    return "the CPU" if place.device == "cpu" else f"GPU {place.device_id}"


def _why_no_gpu() -> str:
    try:
        import cupy  # noqa: F401
    except ImportError:
        return 'cupy is not installed (pip install -e ".[gpu]" in the Keel checkout for CUDA GPUs)'
    return "cupy finds no CUDA device"
