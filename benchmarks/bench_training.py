"""Training-step benchmarks: Keel's executor running forward + backward + optimizer ops
vs the same math written by hand in numpy (the floor), PyTorch eager and PaddlePaddle's
static executor where installed (PaddlePaddle builds legacy programs, see paddle_peer.py),
in one process, each contender timed in blocks of its own, alternating (see main()).

    python benchmarks/bench_training.py [--repeat 30]

Workloads (issue: training):
- MLP: x[128,784] -> 1024 relu -> 1024 relu -> 10, softmax cross-entropy, Adam;
- CNN: x[64,1,28,28] -> conv3x3(16)+relu+maxpool2 -> conv3x3(32)+relu+maxpool2 -> fc 128 relu
  -> fc 10, softmax cross-entropy, momentum.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paddle_peer  # noqa: E402
from common import blas_line, measure_blocks, peer_cell, peer_skipped, table  # noqa: E402

import keel.program as pg  # noqa: E402
from keel.executor import Executor, Scope  # noqa: E402

RNG = np.random.default_rng(0)


# -- numpy floors ---------------------------------------------------------------------------
class NumpyAdam:
    def __init__(self, params, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
        self.p, self.lr, self.b1, self.b2, self.eps = params, lr, b1, b2, eps
        self.m = [np.zeros_like(p) for p in params]
        self.v = [np.zeros_like(p) for p in params]
        self.t = 0

    def step(self, grads):
        self.t += 1
        lr_t = self.lr * np.sqrt(1 - self.b2 ** self.t) / (1 - self.b1 ** self.t)
        for p, g, m, v in zip(self.p, grads, self.m, self.v):
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            p -= lr_t * m / (np.sqrt(v) + self.eps)


def softmax_ce(logits, labels):
    e = np.exp(logits - logits.max(1, keepdims=True))
    p = e / e.sum(1, keepdims=True)
    n = len(labels)
    loss = -np.log(p[np.arange(n), labels]).mean()
    p[np.arange(n), labels] -= 1
    return loss, p / n


def mlp_floor(x, y, sizes=(784, 1024, 1024, 10)):
    ws = [RNG.standard_normal((a, b)).astype(np.float32) * 0.03 for a, b in zip(sizes, sizes[1:])]
    bs = [np.zeros(b, np.float32) for b in sizes[1:]]
    opt = NumpyAdam(ws + bs)

    def step():
        acts, h = [x], x
        for i, (w, b) in enumerate(zip(ws, bs)):
            h = h @ w + b
            if i < len(ws) - 1:
                np.maximum(h, 0, out=h)
            acts.append(h)
        loss, d = softmax_ce(h, y)
        gw, gb = [None] * len(ws), [None] * len(ws)
        for i in range(len(ws) - 1, -1, -1):
            gw[i], gb[i] = acts[i].T @ d, d.sum(0)
            if i:
                d = (d @ ws[i].T) * (acts[i] > 0)
        opt.step(gw + gb)
        return loss
    return step


def _im2col(x, k, pad):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    cols = np.lib.stride_tricks.sliding_window_view(xp, (k, k), axis=(2, 3))  # n c h w k k
    return cols.transpose(0, 2, 3, 1, 4, 5).reshape(n * h * w, c * k * k)


def _col2im(dcols, shape, k, pad):
    n, c, h, w = shape
    d = dcols.reshape(n, h, w, c, k, k).transpose(0, 3, 4, 5, 1, 2)
    out = np.zeros((n, c, h + 2 * pad, w + 2 * pad), dcols.dtype)
    for i in range(k):
        for j in range(k):
            out[:, :, i:i + h, j:j + w] += d[:, :, i, j]
    return out[:, :, pad:pad + h, pad:pad + w]


def cnn_floor(x, y, lr=0.01, mu=0.9):
    params = {"c1": RNG.standard_normal((16, 1, 3, 3)).astype(np.float32) * 0.3,
              "c1b": np.zeros(16, np.float32),
              "c2": RNG.standard_normal((32, 16, 3, 3)).astype(np.float32) * 0.08,
              "c2b": np.zeros(32, np.float32),
              "f1": RNG.standard_normal((32 * 7 * 7, 128)).astype(np.float32) * 0.02,
              "f1b": np.zeros(128, np.float32),
              "f2": RNG.standard_normal((128, 10)).astype(np.float32) * 0.08,
              "f2b": np.zeros(10, np.float32)}
    vel = {k: np.zeros_like(v) for k, v in params.items()}

    def conv_relu_pool(x, w, b):
        n, _, h, wd = x.shape
        cols = _im2col(x, 3, 1)
        out = (cols @ w.reshape(len(w), -1).T + b).reshape(n, h, wd, -1).transpose(0, 3, 1, 2)
        r = np.maximum(out, 0)
        win = r.reshape(n, r.shape[1], h // 2, 2, wd // 2, 2)
        pooled = win.max(axis=(3, 5))
        mask = win == pooled[:, :, :, None, :, None]
        return cols, r, mask, pooled

    def conv_relu_pool_back(d, x, w, cols, r, mask):
        n, c, h, wd = r.shape
        dr = (mask * d[:, :, :, None, :, None]).reshape(n, c, h, wd) * (r > 0)
        d2 = dr.transpose(0, 2, 3, 1).reshape(-1, c)
        gw = (d2.T @ cols).reshape(w.shape)
        dx = _col2im(d2 @ w.reshape(len(w), -1), x.shape, 3, 1)
        return gw, d2.sum(0), dx

    def step():
        p = params
        cols1, r1, m1, p1 = conv_relu_pool(x, p["c1"], p["c1b"])
        cols2, r2, m2, p2 = conv_relu_pool(p1, p["c2"], p["c2b"])
        flat = p2.reshape(len(x), -1)
        h = np.maximum(flat @ p["f1"] + p["f1b"], 0)
        logits = h @ p["f2"] + p["f2b"]
        loss, d = softmax_ce(logits, y)
        g = {"f2": h.T @ d, "f2b": d.sum(0)}
        dh = (d @ p["f2"].T) * (h > 0)
        g["f1"], g["f1b"] = flat.T @ dh, dh.sum(0)
        dp2 = (dh @ p["f1"].T).reshape(p2.shape)
        g["c2"], g["c2b"], dp1 = conv_relu_pool_back(dp2, p1, p["c2"], cols2, r2, m2)
        g["c1"], g["c1b"], _ = conv_relu_pool_back(dp1, x, p["c1"], cols1, r1, m1)
        for k in params:
            vel[k] *= mu
            vel[k] += g[k]
            params[k] -= lr * vel[k]
        return loss
    return step


# -- Keel ----------------------------------------------------------------------------------
def keel_step(build, feed):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 1
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        loss = build()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    return lambda: exe.run(main, feed=feed, fetch_list=[loss], scope=scope)


def build_mlp(wrap=lambda optimizer: optimizer):
    """`wrap`: what to minimize with (bench_distributed.py passes fleet.distributed_optimizer)."""
    x = pg.data("x", [-1, 784])
    y = pg.data("y", [-1, 1], "int64")
    h = pg.nn.fc(x, 1024, activation="relu")
    h = pg.nn.fc(h, 1024, activation="relu")
    loss = pg.mean(pg.nn.softmax_with_cross_entropy(pg.nn.fc(h, 10), y))
    wrap(pg.optimizer.Adam(1e-3)).minimize(loss)
    return loss


def build_cnn(wrap=lambda optimizer: optimizer):
    x = pg.data("x", [-1, 1, 28, 28])
    y = pg.data("y", [-1, 1], "int64")
    h = pg.nn.pool2d(pg.nn.conv2d(x, 16, 3, padding=1, act="relu"), 2, "max", 2)
    h = pg.nn.pool2d(pg.nn.conv2d(h, 32, 3, padding=1, act="relu"), 2, "max", 2)
    h = pg.nn.fc(h, 128, activation="relu")
    loss = pg.mean(pg.nn.softmax_with_cross_entropy(pg.nn.fc(h, 10), y))
    wrap(pg.optimizer.Momentum(0.01, momentum=0.9)).minimize(loss)
    return loss


def torch_steps(mlp_x, mlp_y, cnn_x, cnn_y):
    try:
        import torch
    except ImportError:
        return {}
    torch.set_num_threads(max(1, torch.get_num_threads()))
    nn = torch.nn
    mlp = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
    cnn = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                        nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                        nn.Linear(32 * 49, 128), nn.ReLU(), nn.Linear(128, 10))
    mopt = torch.optim.Adam(mlp.parameters(), 1e-3)
    copt = torch.optim.SGD(cnn.parameters(), 0.01, momentum=0.9)
    tensors = [torch.from_numpy(a) for a in (mlp_x, mlp_y, cnn_x, cnn_y)]

    def step(model, opt, x, y):
        def run():
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        return run
    return {"mlp": step(mlp, mopt, tensors[0], tensors[1]), "cnn": step(cnn, copt, tensors[2], tensors[3])}


def paddle_steps(mlp_x, mlp_y, cnn_x, cnn_y):
    """PaddlePaddle's static executor on the same networks (its own initialization), where
    installed: {"mlp": step, "cnn": step}."""
    paddle = paddle_peer.load()
    if paddle is None:
        return {}
    static, F = paddle.static, paddle.nn.functional

    def mlp():
        x, y = static.data("x", [-1, 784], "float32"), static.data("y", [-1, 1], "int64")
        h = static.nn.fc(static.nn.fc(x, 1024, activation="relu"), 1024, activation="relu")
        loss = paddle.mean(F.softmax_with_cross_entropy(static.nn.fc(h, 10), y))
        paddle.optimizer.Adam(1e-3).minimize(loss)
        return loss

    def cnn():
        x, y = static.data("x", [-1, 1, 28, 28], "float32"), static.data("y", [-1, 1], "int64")
        h = F.max_pool2d(static.nn.conv2d(x, 16, 3, padding=1, act="relu"), 2, 2)
        h = F.max_pool2d(static.nn.conv2d(h, 32, 3, padding=1, act="relu"), 2, 2)
        h = static.nn.fc(h, 128, activation="relu")
        loss = paddle.mean(F.softmax_with_cross_entropy(static.nn.fc(h, 10), y))
        paddle.optimizer.Momentum(0.01, momentum=0.9).minimize(loss)
        return loss
    return {"mlp": paddle_peer.training_step(paddle, mlp, {"x": mlp_x, "y": mlp_y[:, None]}),
            "cnn": paddle_peer.training_step(paddle, cnn, {"x": cnn_x, "y": cnn_y[:, None]})}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=30, help="timed steps per contender (in 5 blocks)")
    args = parser.parse_args(argv)
    print(blas_line(), flush=True)
    mlp_x = RNG.standard_normal((128, 784)).astype(np.float32)
    mlp_y = RNG.integers(0, 10, 128)
    cnn_x = RNG.standard_normal((64, 1, 28, 28)).astype(np.float32)
    cnn_y = RNG.integers(0, 10, 64)
    peers = torch_steps(mlp_x, mlp_y, cnn_x, cnn_y)
    if not peers:
        peer_skipped("PyTorch", "pip install torch")
    paddle_peers = paddle_steps(mlp_x, mlp_y, cnn_x, cnn_y)
    if not paddle_peers:
        peer_skipped("PaddlePaddle", "pip install paddlepaddle")
    rows = []
    for name, build, floor, feed in [
        ("MLP step (784-1024-1024-10, Adam)", build_mlp, mlp_floor(mlp_x, mlp_y),
         {"x": mlp_x, "y": mlp_y[:, None]}),
        ("CNN step (2x conv3x3+pool, fc128, momentum)", build_cnn, cnn_floor(cnn_x, cnn_y),
         {"x": cnn_x, "y": cnn_y[:, None]}),
    ]:
        key = "mlp" if name.startswith("MLP") else "cnn"
        contenders = {"keel": keel_step(build, feed), "floor": floor}
        contenders.update({peer: steps[key] for peer, steps in (("torch", peers), ("paddle", paddle_peers))
                           if key in steps})
        # Each contender in blocks of its own, alternating (common.measure_blocks): PyTorch's
        # OpenMP threads and numpy's OpenBLAS threads busy-wait against each other when they
        # alternate step by step on 2 cores, slowing both; and this machine's speed drifts
        # from minute to minute, which one pass per contender turned into the ratio (the CNN
        # step measured 1.26x-1.49x PyTorch in three runs of a few minutes).
        t = measure_blocks(contenders, repeat=args.repeat)
        rows.append((name, f"{t['keel'] * 1e3:.1f} ms", f"{t['floor'] * 1e3:.1f} ms",
                     f"{t['keel'] / t['floor']:.2f}x", peer_cell(t, "torch"), peer_cell(t, "paddle")))
    print(table("Training-step benchmarks (medians; ratio = Keel / numpy floor)", rows,
                ("workload", "Keel", "numpy floor", "ratio", "PyTorch eager (Keel/torch)",
                 "PaddlePaddle static (Keel/paddle)")))



if __name__ == "__main__":
    main()
