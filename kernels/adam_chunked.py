"""The `adam` and `adamw` kernels: PaddlePaddle's Adam update (with decoupled weight decay
for adamw), computed chunk by chunk.

Adam is memory-bound: a dozen elementwise passes over the parameter, its gradient and the
two moments, each pass streaming whole arrays (7.4 MB each for a 1.86 M-parameter MLP)
through the memory. On numpy the passes run here on chunks of CHUNK elements instead,
each chunk's passes back to back while its four slices stay in the core's L2 cache, into
one preallocated scratch chunk: no full-size temporaries, each array read from memory
about once. Each element sees the same operations in the same order as in the formulas
evaluated on whole arrays (tests/test_kernels_adam_chunked.py holds that arrangement), so
the results are bitwise the same. On a GPU (cupy) the whole array is one chunk (per-chunk
launches would cost more than they save). Measured on 1.86 M float32 parameters: 3.5 ->
2.6 ms a step (benchmarks/bench_distributed.py's MLP; a loaded machine).

Parameters of up to WHOLE_MAX elements are updated in one pass per formula over the whole
arrays (still into one scratch array): their five arrays stay in the L3 cache from one pass
to the next, and chunks would only add a dozen calls each. AdamW, one thread, CPU time,
alternating blocks (AMD EPYC, 1 MiB L2 per core, 32 MiB L3): one pass against chunks of
32K elements 0.85-0.90x on [128, 384] to [1024, 128] (the GPT's parameters), 0.88-0.92x up
to [4096, 128], 0.95x at [8192, 128], 1.33x at [16384, 128]; chunks of 64K elements
against 32K 0.90-0.92x from [2048, 128] to [16384, 128].
"""
from __future__ import annotations

import numpy as np

from keel.kernels.optimizer import _scalar, _skip, _store, _work
from keel.kernels.registry import kernel

CHUNK = 1 << 16  # elements: 4 float32 slices of 256 KiB + the scratch, about a core's L2
WHOLE_MAX = 1 << 19  # elements: up to this, one chunk (the module's doc)


def _chunks(xp, size: int, states) -> list | None:
    """The chunks of the C-contiguous flattened states (slices of CHUNK elements), or None
    for one chunk of the arrays as they are: on a GPU (per-chunk launches would cost more
    than they save), for a state of up to WHOLE_MAX elements, or a strided one (a reshape
    would copy it)."""
    if xp is not np or size <= WHOLE_MAX or not all(a.flags.c_contiguous for a in states):
        return None
    return [slice(start, start + CHUNK) for start in range(0, size, CHUNK)]


_ADAM_INPUTS = ["Param", "Grad", "LearningRate", "Moment1", "Moment2", "Moment2Max", "Beta1Pow",
                "Beta2Pow", "MasterParam", "SkipUpdate", "Beta1Tensor", "Beta2Tensor", "EpsilonTensor"]
_ADAM_OUTPUTS = ["ParamOut", "Moment1Out", "Moment2Out", "Moment2MaxOut", "Beta1PowOut",
                 "Beta2PowOut", "MasterParamOut"]
_ADAM_INPLACE = {"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2",
                 "Moment2MaxOut": "Moment2Max", "Beta1PowOut": "Beta1Pow",
                 "Beta2PowOut": "Beta2Pow", "MasterParamOut": "MasterParam"}


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
    return _adam_update(xp, param, grad, learning_rate, moment1, moment2, moment2_max, beta1_pow,
                        beta2_pow, master_param, skip_update, beta1_t, beta2_t, epsilon_t,
                        beta1=beta1, beta2=beta2, epsilon=epsilon, multi_precision=multi_precision,
                        use_global_beta_pow=use_global_beta_pow, amsgrad=amsgrad)


@kernel("adamw", inputs=_ADAM_INPUTS, outputs=_ADAM_OUTPUTS,
        attrs=["beta1", "beta2", "epsilon", "lr_ratio", "coeff", "with_decay", "multi_precision",
               "use_global_beta_pow", "amsgrad"],
        inplace=_ADAM_INPLACE)
def adamw(xp, param, grad, learning_rate, moment1, moment2, moment2_max, beta1_pow, beta2_pow,
          master_param, skip_update, beta1_t, beta2_t, epsilon_t, *, beta1=0.9, beta2=0.999,
          epsilon=1e-8, lr_ratio=1.0, coeff=0.01, with_decay=False, multi_precision=False,
          use_global_beta_pow=False, amsgrad=False):
    """Adam with decoupled weight decay: lr' = lr * lr_ratio; when with_decay,
    p -= lr' * coeff * p first; then the Adam step above with lr'.
    (PaddlePaddle's GPU kernel; its CPU kernel applies lr_ratio to the decay only, and
    without with_decay runs plain Adam without lr_ratio. Identical when lr_ratio == 1.)"""
    return _adam_update(xp, param, grad, learning_rate, moment1, moment2, moment2_max, beta1_pow,
                        beta2_pow, master_param, skip_update, beta1_t, beta2_t, epsilon_t,
                        beta1=beta1, beta2=beta2, epsilon=epsilon, multi_precision=multi_precision,
                        use_global_beta_pow=use_global_beta_pow, amsgrad=amsgrad,
                        decay_coeff=coeff if with_decay else None, lr_ratio=lr_ratio)


def _adam_update(xp, param, grad, learning_rate, moment1, moment2, moment2_max, beta1_pow,
                 beta2_pow, master_param, skip_update, beta1_t, beta2_t, epsilon_t, *, beta1, beta2,
                 epsilon, multi_precision, use_global_beta_pow, amsgrad, decay_coeff=None,
                 lr_ratio=1.0):
    """adam's step (adamw's with `decay_coeff`), chunk by chunk."""
    outs = (param, moment1, moment2, moment2_max, beta1_pow, beta2_pow, master_param)
    if _skip(skip_update):
        return outs
    dt = moment1.dtype
    T = dt.type
    one = T(1)

    def scalar(t):
        # a numpy scalar (a ufunc takes one faster than a 0-d array, and there are a dozen
        # calls per chunk); on cupy `[()]` keeps the 0-d array on the device
        return _scalar(t, dt)[()]
    b1 = scalar(beta1_t) if beta1_t is not None else T(beta1)
    b2 = scalar(beta2_t) if beta2_t is not None else T(beta2)
    eps = scalar(epsilon_t) if epsilon_t is not None else T(epsilon)
    b1p, b2p = scalar(beta1_pow), scalar(beta2_pow)
    lr = scalar(learning_rate)
    if lr_ratio != 1.0:
        lr = lr * T(lr_ratio)
    decay = None if decay_coeff is None else lr * T(decay_coeff)
    lr_t = lr * (xp.sqrt(one - b2p) / (one - b1p))
    eps_t = eps * xp.sqrt(one - b2p)
    keep1, keep2 = one - b1, one - b2
    p = _work(param, master_param, multi_precision, dt)
    use_max = amsgrad and moment2_max is not None
    states = [p, moment1, moment2] + ([moment2_max] if use_max else [])
    chunks = _chunks(xp, p.size, states)
    if chunks is None:
        g, chunks, scratch = grad, [...], xp.empty(p.shape, dt)
    else:
        states, g, scratch = [a.reshape(-1) for a in states], grad.reshape(-1), xp.empty(CHUNK, dt)
    for part in chunks:
        pc, m1, m2 = (a[part] for a in states[:3])
        gc = g[part].astype(dt, copy=False)
        t = scratch if part is ... else scratch[:pc.size]
        if decay is not None:  # adamw: decoupled decay on the parameter before the step
            xp.multiply(pc, decay, out=t)
            pc -= t
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
