"""The `adam` kernel: PaddlePaddle's Adam update, computed chunk by chunk.

Adam is memory-bound: a dozen elementwise passes over the parameter, its gradient and the
two moments, each pass streaming whole arrays (7.4 MB each for a 1.86 M-parameter MLP)
through the memory. On numpy the passes run here on chunks of CHUNK elements instead,
each chunk's passes back to back while its four slices stay in the core's L2 cache, into
one preallocated scratch chunk: no full-size temporaries, each array read from memory
about once. The arithmetic, operand order and dtype are those of
kernels/optimizer.py's `_adam_update` (shared with adamw), so the results are bitwise
the same. On a GPU (cupy) the whole array is one chunk (per-chunk launches would cost
more than they save). Measured on 1.86 M float32 parameters: 3.5 -> 2.6 ms a step
(benchmarks/bench_distributed.py's MLP; a loaded machine).
"""
from __future__ import annotations

import numpy as np

from kernels.optimizer import (_ADAM_INPLACE, _ADAM_INPUTS, _ADAM_OUTPUTS, _scalar, _skip, _store,
                               _work)
from kernels.registry import kernel

CHUNK = 1 << 15  # elements: 4 float32 slices of 128 KiB + the scratch fit a 1-2 MiB L2


def _flat(a):
    """a as a 1-D view (None when a is not C-contiguous: a reshape would copy)."""
    return a.reshape(-1) if a.flags.c_contiguous else None


def _chunks(xp, size: int) -> list[tuple[int, int]]:
    """[(start, stop)] covering range(size): CHUNK elements each on numpy, one on a GPU."""
    step = CHUNK if xp is np else max(size, 1)
    return [(start, min(start + step, size)) for start in range(0, size, step)]


@kernel("adam", inputs=_ADAM_INPUTS, outputs=_ADAM_OUTPUTS,
        attrs=["beta1", "beta2", "epsilon", "multi_precision", "use_global_beta_pow", "amsgrad"],
        inplace=_ADAM_INPLACE)
def adam(xp, param, grad, learning_rate, moment1, moment2, moment2_max, beta1_pow, beta2_pow,
         master_param, skip_update, beta1_t, beta2_t, epsilon_t, *, beta1=0.9, beta2=0.999,
         epsilon=1e-8, multi_precision=False, use_global_beta_pow=False, amsgrad=False):
    """PaddlePaddle's Adam, with b1p/b2p the beta powers BEFORE this step (Beta1Pow starts
    at beta1):
        m1 = beta1 m1 + (1 - beta1) g;   m2 = beta2 m2 + (1 - beta2) g g
        lr_t = lr sqrt(1 - b2p) / (1 - b1p);   eps_t = epsilon sqrt(1 - b2p)
        p -= lr_t m1 / (sqrt(m2) + eps_t)       (amsgrad: max(m2max, m2) under the sqrt)
        Beta1PowOut = b1p beta1, Beta2PowOut = b2p beta2 (unless use_global_beta_pow).
    Beta1Tensor/Beta2Tensor/EpsilonTensor override the attributes; a true SkipUpdate
    leaves everything unchanged. The update runs in the moments' dtype (kernels/optimizer.py
    on precision: MasterParam with multi_precision, else Param, widened if need be)."""
    outs = (param, moment1, moment2, moment2_max, beta1_pow, beta2_pow, master_param)
    if _skip(skip_update):
        return outs
    dt = moment1.dtype
    T = dt.type
    one = T(1)
    b1 = _scalar(beta1_t, dt) if beta1_t is not None else T(beta1)
    b2 = _scalar(beta2_t, dt) if beta2_t is not None else T(beta2)
    eps = _scalar(epsilon_t, dt) if epsilon_t is not None else T(epsilon)
    b1p, b2p = _scalar(beta1_pow, dt), _scalar(beta2_pow, dt)
    lr = _scalar(learning_rate, dt)
    lr_t = lr * (xp.sqrt(one - b2p) / (one - b1p))
    eps_t = eps * xp.sqrt(one - b2p)
    p = _work(param, master_param, multi_precision, dt)
    use_max = amsgrad and moment2_max is not None
    states = [p, moment1, moment2] + ([moment2_max] if use_max else [])
    flats = [_flat(a) for a in states]
    if all(f is not None for f in flats):
        states, g, bounds = flats, grad.reshape(-1), _chunks(xp, p.size)
    else:  # a strided state (a reshape would copy it): one chunk, the arrays as they are
        g, bounds = grad, [(None, None)]
    longest = max((stop - start for start, stop in bounds if start is not None), default=None)
    scratch = xp.empty(p.shape if longest is None else longest, dt)
    # 0-d arrays as numpy scalars: a ufunc call takes a scalar faster, and there are a dozen
    # per chunk (on cupy `[()]` keeps them on the device)
    b1, b2, keep1, keep2, eps_t, lr_t = (xp.asarray(v, dt)[()] for v in (b1, b2, one - b1, one - b2, eps_t, lr_t))
    for start, stop in bounds:
        part = slice(start, stop)
        pc, m1, m2 = (a[part] for a in states[:3])
        gc = g[part].astype(dt, copy=False)
        t = scratch if start is None else scratch[:stop - start]
        m1 *= b1
        xp.multiply(gc, keep1, out=t)
        m1 += t
        m2 *= b2
        xp.multiply(gc, keep2, out=t)
        t *= gc
        m2 += t
        second = m2
        if use_max:
            second = states[3][part]
            xp.maximum(second, m2, out=second)
        xp.sqrt(second, out=t)
        t += eps_t
        xp.divide(m1, t, out=t)
        t *= lr_t
        pc -= t
    _store(param, p)
    if not use_global_beta_pow:
        beta1_pow *= b1.astype(beta1_pow.dtype)
        beta2_pow *= b2.astype(beta2_pow.dtype)
    return outs
