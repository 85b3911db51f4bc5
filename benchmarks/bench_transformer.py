"""Training-step benchmark for one Transformer encoder layer: Keel's executor vs the same
math written by hand in numpy (forward, backward and Adam: the floor), and PyTorch eager
and PaddlePaddle's static executor where installed, in one process (medians).

    python benchmarks/bench_transformer.py [--repeat 10]

Workload: x[8,128,256], 4 heads of 64, post-norm (LN(x + attn), then LN(h + FFN)), FFN
256 -> 1024 (exact erf gelu, PaddlePaddle's default) -> 256, no dropout; the loss is a
linear head to 10 classes on the mean over the sequence, softmax cross-entropy (a mean of a
post-norm output would leave most gradients at zero); Adam lr 1e-3, float32.

Before timing, all three start from Keel's initialized parameters and one step is checked:
numpy and Keel must agree on the loss, every gradient and every updated parameter to 1e-4
relative (PyTorch's loss is checked too), so the floor is known to compute the same math.

Keel and the floor are interleaved; PyTorch and PaddlePaddle (its own initialization, not
checked) are timed in passes of their own, because PyTorch's OpenMP threads and numpy's
OpenBLAS threads busy-wait against each other when the two alternate (on 2 cores that
doubled PyTorch's time and added ~15% to the numpy contenders).
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import paddle_peer  # noqa: E402
from common import blas_line, measure, peer_cell, peer_skipped, table  # noqa: E402

import keel.program as pg  # noqa: E402
from keel.executor import Executor, Scope  # noqa: E402

B, T, D, H, F, C = 8, 128, 256, 4, 1024, 10
DH = D // H
EPS = 1e-5
RNG = np.random.default_rng(0)
# parameter names, in the order the floor and PyTorch use them
NAMES = ["q.w", "q.b", "k.w", "k.b", "v.w", "v.b", "o.w", "o.b", "ln1.w", "ln1.b",
         "ff1.w", "ff1.b", "ff2.w", "ff2.b", "ln2.w", "ln2.b", "head.w", "head.b"]


# -- Keel --------------------------------------------------------------------------------------
def build_keel():
    x = pg.data("x", [-1, T, D])
    y = pg.data("y", [-1, 1], "int64")

    def fc(h, size, name, act=None):
        return pg.nn.fc(h, size, num_flatten_dims=h.ndim - 1, activation=act,
                        weight_attr=pg.ParamAttr(name=name + ".w"),
                        bias_attr=pg.ParamAttr(name=name + ".b"))

    def heads(h):  # [B, T, D] -> [B, H, T, DH]
        return pg.transpose(pg.reshape(h, [0, 0, H, DH]), [0, 2, 1, 3])

    def norm(h, name):
        return pg.nn.layer_norm(h, begin_norm_axis=2, epsilon=EPS, param_attr=pg.ParamAttr(
            name=name + ".w"), bias_attr=pg.ParamAttr(name=name + ".b"))

    q, k, v = (heads(fc(x, D, n)) for n in ("q", "k", "v"))
    p = pg.softmax(pg.scale(pg.matmul(q, k, transpose_y=True), 1 / math.sqrt(DH)))
    ctx = pg.reshape(pg.transpose(pg.matmul(p, v), [0, 2, 1, 3]), [0, 0, D])
    h1 = norm(x + fc(ctx, D, "o"), "ln1")
    h2 = norm(h1 + fc(fc(h1, F, "ff1", "gelu"), D, "ff2"), "ln2")
    logits = fc(pg.mean(h2, axis=1), C, "head")
    loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, y))
    pg.optimizer.Adam(1e-3).minimize(loss)
    return loss


# -- numpy floor -------------------------------------------------------------------------------
# erf as float32 kernels compute it (Eigen's approximation, which PaddlePaddle's erf uses
# and so does Keel's float32 kernel): x * P(x^2) / Q(x^2) on x clamped to [-4, 4].
_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
      -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
      -1.42647390514189e-02)


def erf(x):
    c = np.clip(x, np.float32(-4), np.float32(4))
    z = c * c
    p, q = z * np.float32(_P[0]), z * np.float32(_Q[0])
    p += np.float32(_P[1])
    q += np.float32(_Q[1])
    for coef in _P[2:]:
        p *= z
        p += np.float32(coef)
    for coef in _Q[2:]:
        q *= z
        q += np.float32(coef)
    p *= c
    p /= q
    return p


def layer_norm(x, g, b):
    mu = x.mean(1, keepdims=True)
    xc = x - mu
    inv = 1 / np.sqrt((xc * xc).mean(1, keepdims=True) + EPS)
    xhat = xc * inv
    return xhat * g + b, (xhat, inv)


def layer_norm_back(dy, g, cache):
    xhat, inv = cache
    gdy = dy * g
    dx = inv * (gdy - gdy.mean(1, keepdims=True) - xhat * (gdy * xhat).mean(1, keepdims=True))
    return dx, (dy * xhat).sum(0), dy.sum(0)


def numpy_floor(params, x, y, lr=1e-3, b1=0.9, b2=0.999, eps=1e-8):
    """One training step per call on `params` (a list in NAMES order, updated in place);
    returns (loss, grads)."""
    m = [np.zeros_like(p) for p in params]
    v = [np.zeros_like(p) for p in params]
    state = {"t": 0}
    x2, scale = x.reshape(B * T, D), np.float32(1 / math.sqrt(DH))

    def split(a):  # [B*T, D] -> [B, H, T, DH]
        return a.reshape(B, T, H, DH).transpose(0, 2, 1, 3)

    def merge(a):  # [B, H, T, DH] -> [B*T, D]
        return a.transpose(0, 2, 1, 3).reshape(B * T, D)

    def step():
        wq, bq, wk, bk, wv, bv, wo, bo, g1, be1, w1, c1, w2, c2, g2, be2, wc, bc = params
        # forward
        q, k, vv = split(x2 @ wq + bq), split(x2 @ wk + bk), split(x2 @ wv + bv)
        s = (q @ k.transpose(0, 1, 3, 2)) * scale
        e = np.exp(s - s.max(-1, keepdims=True))
        p = e / e.sum(-1, keepdims=True)
        ctx = merge(p @ vv)
        h1, ln1 = layer_norm(x2 + ctx @ wo + bo, g1, be1)
        u = h1 @ w1 + c1
        phi = 0.5 * (1 + erf(u * np.float32(math.sqrt(0.5))))
        f = u * phi
        h2, ln2 = layer_norm(h1 + f @ w2 + c2, g2, be2)
        pooled = h2.reshape(B, T, D).mean(1)
        z = pooled @ wc + bc
        e = np.exp(z - z.max(1, keepdims=True))
        dz = e / e.sum(1, keepdims=True)
        loss = -np.log(dz[np.arange(B), y]).mean()
        dz[np.arange(B), y] -= 1
        dz /= B
        # backward
        g = {"head.w": pooled.T @ dz, "head.b": dz.sum(0)}
        dh2 = np.broadcast_to((dz @ wc.T)[:, None, :] / T, (B, T, D)).reshape(B * T, D)
        dr2, g["ln2.w"], g["ln2.b"] = layer_norm_back(dh2, g2, ln2)
        g["ff2.w"], g["ff2.b"] = f.T @ dr2, dr2.sum(0)
        du = (dr2 @ w2.T) * (phi + u * np.exp(-0.5 * u * u) * np.float32(1 / math.sqrt(2 * math.pi)))
        g["ff1.w"], g["ff1.b"] = h1.T @ du, du.sum(0)
        dr1, g["ln1.w"], g["ln1.b"] = layer_norm_back(dr2 + du @ w1.T, g1, ln1)
        g["o.w"], g["o.b"] = ctx.T @ dr1, dr1.sum(0)
        dctx = split(dr1 @ wo.T)
        dp = dctx @ vv.transpose(0, 1, 3, 2)
        ds = p * (dp - (dp * p).sum(-1, keepdims=True)) * scale
        for name, d in (("q", ds @ k), ("k", ds.transpose(0, 1, 3, 2) @ q),
                        ("v", p.transpose(0, 1, 3, 2) @ dctx)):
            d = merge(d)
            g[name + ".w"], g[name + ".b"] = x2.T @ d, d.sum(0)
        grads = [g[n] for n in NAMES]
        # Adam, in PaddlePaddle's form (epsilon scaled by sqrt(1 - beta2^t), as PyTorch's)
        state["t"] += 1
        c1t, c2t = 1 - b1 ** state["t"], math.sqrt(1 - b2 ** state["t"])
        for pa, gr, m1, m2 in zip(params, grads, m, v):
            m1 *= b1
            m1 += (1 - b1) * gr
            m2 *= b2
            m2 += (1 - b2) * gr * gr
            pa -= np.float32(lr * c2t / c1t) * m1 / (np.sqrt(m2) + np.float32(eps * c2t))
        return loss, grads
    return step


# -- PyTorch eager (the same layer, functional, autograd for the backward) -----------------------
def torch_step(params, x, y):
    try:
        import torch
    except ImportError:
        return None
    F_ = torch.nn.functional
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    opt = torch.optim.Adam(ps, 1e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)

    def split(a):
        return a.view(B, T, H, DH).transpose(1, 2)

    def step():
        wq, bq, wk, bk, wv, bv, wo, bo, g1, be1, w1, c1, w2, c2, g2, be2, wc, bc = ps
        opt.zero_grad()
        q, k, v = split(xt @ wq + bq), split(xt @ wk + bk), split(xt @ wv + bv)
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(DH), -1)
        ctx = (p @ v).transpose(1, 2).reshape(B, T, D)
        h1 = F_.layer_norm(xt + ctx @ wo + bo, (D,), g1, be1, EPS)
        h2 = F_.layer_norm(h1 + F_.gelu(h1 @ w1 + c1) @ w2 + c2, (D,), g2, be2, EPS)
        loss = F_.cross_entropy(h2.mean(1) @ wc + bc, yt)
        loss.backward()
        opt.step()
        return loss.item()
    return step


def paddle_step(x, y):
    """PaddlePaddle's static executor on the same layer (its own initialization), where
    installed; None otherwise."""
    paddle = paddle_peer.load()
    if paddle is None:
        return None
    static, F_ = paddle.static, paddle.nn.functional

    def build():
        xv, yv = static.data("x", [-1, T, D], "float32"), static.data("y", [-1, 1], "int64")

        def fc(h, size):
            return static.nn.fc(h, size, num_flatten_dims=2)

        def heads(h):
            return paddle.transpose(paddle.reshape(h, [0, 0, H, DH]), [0, 2, 1, 3])

        def norm(h):
            return static.nn.layer_norm(h, begin_norm_axis=2, epsilon=EPS)

        q, k, v = heads(fc(xv, D)), heads(fc(xv, D)), heads(fc(xv, D))
        s = paddle_peer.append(paddle, "matmul_v2", {"X": q, "Y": k}, {"trans_x": False, "trans_y": True})
        p = F_.softmax(paddle.scale(s, 1 / math.sqrt(DH)))
        ctx = paddle_peer.append(paddle, "matmul_v2", {"X": p, "Y": v}, {"trans_x": False, "trans_y": False})
        ctx = paddle.reshape(paddle.transpose(ctx, [0, 2, 1, 3]), [0, 0, D])
        h1 = norm(xv + fc(ctx, D))
        u = paddle_peer.append(paddle, "gelu", {"X": fc(h1, F)}, {"approximate": False})
        h2 = norm(h1 + fc(u, D))
        logits = static.nn.fc(paddle.mean(h2, axis=1), C)
        loss = paddle.mean(F_.softmax_with_cross_entropy(logits, yv))
        paddle.optimizer.Adam(1e-3).minimize(loss)
        return loss
    return paddle_peer.training_step(paddle, build, {"x": x, "y": y[:, None]})


# -- correctness, then timing -----------------------------------------------------------------
def rel(a, b, floor=1e-30):
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), floor))


def check(scope, keel_first, floor_step, floor_params, torch_first):
    """One step of each from the same weights: loss, gradients, updated parameters."""
    k_loss, *k_grads = keel_first()
    n_loss, n_grads = floor_step()
    report = {"loss": rel(k_loss, n_loss)}
    if torch_first is not None:
        report["torch loss"] = rel(torch_first(), n_loss)
    gscale = max(np.linalg.norm(g) for g in n_grads)
    for name, kg, ng, after in zip(NAMES, k_grads, n_grads, floor_params):
        # k.b's gradient is zero in exact arithmetic (softmax ignores a per-query shift): both
        # sides hold rounding noise, judged against the largest gradient; its update (Adam
        # turns that noise into +-lr steps) is not compared.
        report[name + "@GRAD"] = rel(kg, ng, 1e-3 * gscale)
        if name != "k.b":
            report[name] = rel(scope.get(name), after)
    print(f"check, one step from the same weights: loss {float(k_loss):.6f} (Keel), "
          f"{float(n_loss):.6f} (numpy); largest relative differences:")
    for kind, keys in (("losses", [k for k in report if "loss" in k]),
                       ("gradients", [k for k in report if k.endswith("@GRAD")]),
                       ("updated params", [k for k in report if k in NAMES])):
        worst = max(keys, key=report.get)
        print(f"  {kind:15s} {report[worst]:.1e} ({worst})")
    bad = {k: r for k, r in report.items() if r > 1e-4}
    assert not bad, f"Keel and the numpy floor disagree: {bad}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=10)
    args = parser.parse_args(argv)
    print(blas_line(), flush=True)
    x = RNG.standard_normal((B, T, D)).astype(np.float32)
    y = RNG.integers(0, C, B)
    main_prog, startup = pg.Program(), pg.Program()
    startup.random_seed = 1
    with pg.unique_name.guard(), pg.program_guard(main_prog, startup):
        loss = build_keel()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    feed = {"x": x, "y": y[:, None]}
    floor_params = [np.array(scope.get(n), copy=True) for n in NAMES]
    peer = torch_step(floor_params, x, y)  # copies them
    if peer is None:
        peer_skipped("PyTorch", "pip install torch")
    floor = numpy_floor(floor_params, x, y)
    check(scope, lambda: exe.run(main_prog, feed=feed, scope=scope,
                                 fetch_list=[loss] + [n + "@GRAD" for n in NAMES]),
          floor, floor_params, peer)

    t = measure({"keel": lambda: exe.run(main_prog, feed=feed, fetch_list=[loss], scope=scope),
                 "floor": floor}, repeat=args.repeat, warmup=2)
    if peer is not None:  # a pass of its own: see the docstring
        t.update(measure({"torch": peer}, repeat=args.repeat, warmup=2))
    paddle_peer_step = paddle_step(x, y)
    if paddle_peer_step is None:
        peer_skipped("PaddlePaddle", "pip install paddlepaddle")
    else:  # likewise
        t.update(measure({"paddle": paddle_peer_step}, repeat=args.repeat, warmup=2))
    rows = [(f"Transformer layer step ({B}x{T}x{D}, {H} heads, FFN {F} gelu, Adam)",
             f"{t['keel'] * 1e3:.1f} ms", f"{t['floor'] * 1e3:.1f} ms",
             f"{t['keel'] / t['floor']:.2f}x", peer_cell(t, "torch"), peer_cell(t, "paddle"))]
    print(table("Training-step benchmark (medians; ratio = Keel / numpy floor)", rows,
                ("workload", "Keel", "numpy floor", "ratio", "PyTorch eager (Keel/torch)",
                 "PaddlePaddle static (Keel/paddle)")))


if __name__ == "__main__":
    main()
