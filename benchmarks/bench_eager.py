"""Eager-mode benchmarks: per-op dispatch and training steps, Keel against PyTorch eager
where installed, in one process, each contender timed in blocks of its own, alternating.

    python benchmarks/bench_eager.py [--repeat 30] [--cpu-time]

`--cpu-time` times the process's CPU time instead of the wall clock: for a machine other
jobs share, run with one thread per contender (OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1).

Workloads:
- dispatch: 1000 chained `y = y + 1` on a [4] float32 tensor, without and with gradient
  recording (microseconds per op);
- MLP step: x[128,784] -> 1024 relu -> 1024 relu -> 10, softmax cross-entropy, Adam;
- CNN step: x[64,1,28,28] -> conv3x3(16)+relu+maxpool2 -> conv3x3(32)+relu+maxpool2 -> fc 128
  relu -> fc 10, softmax cross-entropy, Momentum.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import blas_line, measure_blocks, peer_skipped, table  # noqa: E402

import keel as paddle  # noqa: E402
from keel import nn  # noqa: E402

CHAIN = 1000


def keel_chain(grad: bool):
    start = paddle.to_tensor(np.zeros(4, "float32"), stop_gradient=not grad)

    def run():
        y = start
        for _ in range(CHAIN):
            y = y + 1
        return y
    return run


def torch_chain(torch, grad: bool):
    start = torch.zeros(4, requires_grad=grad)

    def run():
        y = start
        for _ in range(CHAIN):
            y = y + 1
        return y
    return run


class KeelMLP(nn.Layer):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(784, 1024), nn.Linear(1024, 1024), nn.Linear(1024, 10)

    def forward(self, x):
        return self.fc3(paddle.relu(self.fc2(paddle.relu(self.fc1(x)))))


class KeelCNN(nn.Layer):
    def __init__(self):
        super().__init__()
        self.c1, self.c2 = nn.Conv2D(1, 16, 3, padding=1), nn.Conv2D(16, 32, 3, padding=1)
        self.pool = nn.MaxPool2D(2, 2)
        self.fc1, self.fc2 = nn.Linear(32 * 7 * 7, 128), nn.Linear(128, 10)

    def forward(self, x):
        h = self.pool(paddle.relu(self.c1(x)))
        h = self.pool(paddle.relu(self.c2(h)))
        return self.fc2(paddle.relu(self.fc1(paddle.reshape(h, [-1, 32 * 7 * 7]))))


def keel_step(net, opt, x, y):
    xs, ys = paddle.to_tensor(x), paddle.to_tensor(y)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        loss = loss_fn(net(xs), ys)
        loss.backward()
        opt.step()
        opt.clear_grad()
    return step


def torch_models(torch):
    tnn = torch.nn
    mlp = tnn.Sequential(tnn.Linear(784, 1024), tnn.ReLU(), tnn.Linear(1024, 1024), tnn.ReLU(), tnn.Linear(1024, 10))
    cnn = tnn.Sequential(tnn.Conv2d(1, 16, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2),
                         tnn.Conv2d(16, 32, 3, padding=1), tnn.ReLU(), tnn.MaxPool2d(2), tnn.Flatten(),
                         tnn.Linear(32 * 7 * 7, 128), tnn.ReLU(), tnn.Linear(128, 10))
    return mlp, cnn


def torch_step(torch, net, opt, x, y):
    xs, ys = torch.from_numpy(x), torch.from_numpy(y.ravel())
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        loss = loss_fn(net(xs), ys)
        loss.backward()
        opt.step()
        opt.zero_grad()
    return step


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30, help="timed calls per contender (default 30)")
    parser.add_argument("--cpu-time", action="store_true",
                        help="time CPU time, not wall time (one thread per contender, on a shared machine)")
    args = parser.parse_args(argv)
    clock = time.process_time if args.cpu_time else time.perf_counter
    try:
        import torch
        torch.set_num_threads(max(1, torch.get_num_threads()))
    except ImportError:
        torch = None
        peer_skipped("PyTorch", "pip install torch")
    print(blas_line())
    rng = np.random.default_rng(0)
    rows = []
    for grad in (False, True):
        contenders = {"keel": keel_chain(grad)}
        if torch is not None:
            contenders["torch"] = torch_chain(torch, grad)
        with paddle.set_grad_enabled(grad):
            t = measure_blocks(contenders, args.repeat, clock=clock)
        us = {k: v / CHAIN * 1e6 for k, v in t.items()}
        rows.append((f"dispatch, {'with' if grad else 'no'} grad (us/op)", f"{us['keel']:.2f}",
                     f"{us['torch']:.2f}" if "torch" in us else "-",
                     f"{us['keel'] / us['torch']:.2f}x" if "torch" in us else "-"))
    paddle.seed(0)
    mx, my = rng.standard_normal((128, 784)).astype("float32"), rng.integers(0, 10, (128, 1))
    cx, cy = rng.standard_normal((64, 1, 28, 28)).astype("float32"), rng.integers(0, 10, (64, 1))
    mlp, cnn = KeelMLP(), KeelCNN()
    steps = {"MLP step (ms)": {"keel": keel_step(mlp, paddle.optimizer.Adam(1e-3, parameters=mlp.parameters()),
                                                 mx, my)},
             "CNN step (ms)": {"keel": keel_step(cnn, paddle.optimizer.Momentum(
                 0.01, 0.9, parameters=cnn.parameters()), cx, cy)}}
    if torch is not None:
        tm, tc = torch_models(torch)
        steps["MLP step (ms)"]["torch"] = torch_step(torch, tm, torch.optim.Adam(tm.parameters(), 1e-3), mx, my)
        steps["CNN step (ms)"]["torch"] = torch_step(torch, tc, torch.optim.SGD(tc.parameters(), 0.01, 0.9), cx, cy)
    for name, contenders in steps.items():
        t = measure_blocks(contenders, args.repeat, clock=clock)
        rows.append((name, f"{t['keel'] * 1e3:.2f}", f"{t['torch'] * 1e3:.2f}" if "torch" in t else "-",
                     f"{t['keel'] / t['torch']:.2f}x" if "torch" in t else "-"))
    print(table(f"Eager mode: Keel vs PyTorch eager (medians{', CPU time' if args.cpu_time else ''})", rows, ("workload", "Keel", "PyTorch", "Keel / PyTorch")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
