"""Recurrent and CTC kernels with PaddlePaddle's legacy semantics: `rnn` (LSTM, GRU,
RNN_TANH, RNN_RELU; multi-layer, bidirectional, SequenceLength, inter-layer dropout) and
its gradient, `warpctc` and its gradient, `ctc_align`.

rnn (PaddlePaddle's CPU kernel, paddle/phi/kernels/cpu/rnn_kernel.cc):

- Input [T, B, I] (time major); PreState [L*D, B, H] each (h0, and c0 for LSTM), index
  layer*D + direction; Out [T, B, D*H], the forward direction's hidden state first.
- WeightList: every (layer, direction)'s [W_ih, W_hh] in turn, then every (layer,
  direction)'s [b_ih, b_hh]; W_ih [G*H, in], W_hh [G*H, H], biases [G*H], G the number of
  gates (LSTM 4, GRU 3, simple RNN 1).
- LSTM, gates [i, f, g, o]: i, f, o = sigmoid, g = tanh; c = f*c' + i*g; h = o*tanh(c).
- GRU, gates [r, z, c]: r, z = sigmoid(x W_i^T + b_i + h' W_h^T + b_h);
  n = tanh(x W_ic^T + b_ic + r * (h' W_hc^T + b_hc)); h = z*h' + (1-z)*n.
- RNN_TANH / RNN_RELU: h = act(x W_ih^T + b_ih + h' W_hh^T + b_hh).
- SequenceLength [B] (int): at a step t >= length[b] the output is 0 and the states stay
  as they were (the reverse direction starts from its initial state at t = length-1).
- Between layers, when training (is_test false) with dropout_prob > 0, the previous
  layer's output is multiplied by DropoutState / (1 - p): one uint8 keep-mask of Out's
  shape, drawn once per run (u < p drops) and used at every layer boundary, as PaddlePaddle
  does. DropoutState is all ones when training without dropout; in inference it is not
  produced (nor is Reserve).
- Reserve has PaddlePaddle's shape [rows, D*T*B*H] (rows: G*L gate rows, L cell rows for
  GRU, 2L for LSTM, L-1 rows of hidden outputs). Keel stores there the post-activation
  gates, the cell rows (LSTM c, GRU h' W_hc^T + b_hc), LSTM tanh(c) and each inner layer's
  output; rnn_grad recomputes what it needs from the inputs, so the contents are Keel's
  own (a training program from PaddlePaddle never reads them outside rnn_grad).
"""
from __future__ import annotations

import numpy as np

from keel.kernels.random import generator
from keel.kernels.registry import kernel

_GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def _sigmoid(xp, x):
    return 1.0 / (1.0 + xp.exp(-x))


def _mode_gates(mode):
    if mode not in _GATES:
        raise ValueError(f"rnn: mode must be one of LSTM, GRU, RNN_TANH, RNN_RELU, got {mode!r}")
    return _GATES[mode]


def _step_mask(xp, seq_len, T, B, dtype):
    """[T, B, 1] of 1 where t < length[b], else 0 (None without SequenceLength)."""
    if seq_len is None:
        return None
    t = xp.arange(T).reshape(T, 1)
    return (t < seq_len.reshape(1, B).astype(xp.int64)).astype(dtype).reshape(T, B, 1)


def _weights(weights, layers, dirs):
    """[(w_ih, w_hh, b_ih, b_hh)] per (layer, direction), PaddlePaddle's WeightList order."""
    n = layers * dirs
    if len(weights) != 4 * n:
        raise ValueError(f"rnn: WeightList must hold {4 * n} tensors for {layers} layer(s) x "
                         f"{dirs} direction(s), got {len(weights)}")
    return [(weights[2 * k], weights[2 * k + 1], weights[2 * n + 2 * k], weights[2 * n + 2 * k + 1])
            for k in range(n)]


def _direction(xp, x, w, h0, c0, mask, mode, reverse, keep):
    """One direction of one layer. x [T, B, In]; returns out [T, B, H], last h, last c and,
    when `keep`, the per-step cache for the gradient (a dict of [T, ...] arrays)."""
    w_ih, w_hh, b_ih, b_hh = w
    T, B = x.shape[0], x.shape[1]
    H = w_hh.shape[1]
    xw = (x.reshape(T * B, x.shape[2]) @ w_ih.T).reshape(T, B, w_ih.shape[0]) + b_ih  # (T may be 0)
    if mode == "GRU":
        xw[..., :2 * H] += b_hh[:2 * H]
        w_h_rz, w_hc, b_hc = w_hh[:2 * H], w_hh[2 * H:], b_hh[2 * H:]
    else:
        xw += b_hh
    out = xp.zeros((T, B, H), x.dtype)
    h, c = h0, c0
    cache = {"h_prev": [], "c_prev": [], "act": [], "aux": []} if keep else None
    steps = range(T - 1, -1, -1) if reverse else range(T)
    for t in steps:
        if keep:
            cache["h_prev"].append(h)
            cache["c_prev"].append(c)
        if mode == "LSTM":
            a = xw[t] + h @ w_hh.T
            i = _sigmoid(xp, a[:, :H])
            f = _sigmoid(xp, a[:, H:2 * H])
            g = xp.tanh(a[:, 2 * H:3 * H])
            o = _sigmoid(xp, a[:, 3 * H:])
            c_new = f * c + i * g
            tc = xp.tanh(c_new)
            h_new = o * tc
            if keep:
                act, aux = xp.concatenate([i, f, g, o], axis=1), (c_new, tc)
        elif mode == "GRU":
            rz = _sigmoid(xp, xw[t, :, :2 * H] + h @ w_h_rz.T)
            r, z = rz[:, :H], rz[:, H:]
            hc = h @ w_hc.T + b_hc
            n = xp.tanh(xw[t, :, 2 * H:] + r * hc)
            h_new = z * h + (1.0 - z) * n
            c_new = None
            if keep:
                act, aux = xp.concatenate([r, z, n], axis=1), (hc,)
        else:
            a = xw[t] + h @ w_hh.T
            h_new = xp.tanh(a) if mode == "RNN_TANH" else xp.maximum(a, 0)
            c_new = None
            act, aux = h_new, ()  # (kept only when `keep`)
        if mask is not None:
            m = mask[t]
            out[t] = h_new * m
            h = h_new * m + h * (1.0 - m)
            if c_new is not None:
                c = c_new * m + c * (1.0 - m)
        else:
            out[t] = h_new
            h = h_new
            c = c_new
        if keep:
            cache["act"].append(act)
            cache["aux"].append(aux)
    return out, h, c, cache


def _layer_input(xp, prev_out, dropout_mask, dropout_prob):
    if dropout_mask is None:
        return prev_out
    if np.float32(dropout_prob) == np.float32(1.0):
        return prev_out * 0
    keep = prev_out.dtype.type(1.0 - np.float32(dropout_prob))
    return prev_out * dropout_mask.astype(prev_out.dtype) / keep


def _forward(xp, x, pre_state, weights, seq_len, *, mode, num_layers, is_bidirec, dropout_mask,
             dropout_prob, keep):
    """The whole op: out, [last h (, last c)], the layers' (input, caches) when `keep`."""
    dirs = 2 if is_bidirec else 1
    ws = _weights(weights, num_layers, dirs)
    T, B = x.shape[0], x.shape[1]
    mask = _step_mask(xp, seq_len, T, B, x.dtype)
    lstm = mode == "LSTM"
    h0 = pre_state[0]
    c0 = pre_state[1] if lstm else None
    last_h = [None] * (num_layers * dirs)
    last_c = [None] * (num_layers * dirs)
    layers = []
    inp = x
    raw_outputs = []
    for layer in range(num_layers):
        if layer > 0:
            inp = _layer_input(xp, raw_outputs[-1], dropout_mask, dropout_prob)
        outs, caches = [], []
        for d in range(dirs):
            k = layer * dirs + d
            o, h, c, cache = _direction(xp, inp, ws[k], h0[k], c0[k] if lstm else None, mask,
                                        mode, d == 1, keep)
            outs.append(o)
            caches.append(cache)
            last_h[k], last_c[k] = h, c
        out = outs[0] if dirs == 1 else xp.concatenate(outs, axis=2)
        raw_outputs.append(out)
        layers.append((inp, caches))
    states = [xp.stack(last_h)] + ([xp.stack(last_c)] if lstm else [])
    return raw_outputs[-1], states, layers, raw_outputs, mask


def _reserve(xp, layers, raw_outputs, mode, num_layers, dirs, T, B, H, dtype):
    """PaddlePaddle's Reserve shape [rows, D*T*B*H] filled with Keel's caches (see the
    module docstring)."""
    g = _GATES[mode]
    block = dirs * T * B * H
    rows = g * num_layers + (num_layers - 1)
    rows += 2 * num_layers if mode == "LSTM" else num_layers if mode == "GRU" else 0
    res = xp.zeros((rows, block), dtype)
    for layer, (_, caches) in enumerate(layers):
        acts = xp.stack([xp.stack(cache["act"]) for cache in caches])  # [D, T, B, g*H]
        res[g * layer:g * (layer + 1)] = acts.reshape(g, block)
        if mode in ("LSTM", "GRU"):
            first = xp.stack([xp.stack([a[0] for a in cache["aux"]]) for cache in caches])
            res[g * num_layers + layer] = first.reshape(-1)
        if mode == "LSTM":
            second = xp.stack([xp.stack([a[1] for a in cache["aux"]]) for cache in caches])
            res[(g + 1) * num_layers + layer] = second.reshape(-1)
    start = rows - (num_layers - 1)
    for layer in range(num_layers - 1):
        res[start + layer] = raw_outputs[layer].reshape(-1)
    return res


@kernel("rnn", inputs=["Input", "PreState", "WeightList", "SequenceLength"],
        outputs=["Out", "DropoutState", "State", "Reserve"],
        attrs=["dropout_prob", "is_bidirec", "input_size", "hidden_size", "num_layers", "mode",
               "seed", "is_test"], rng=True)
def rnn(xp, x, pre_state, weights, seq_len=None, *, dropout_prob=0.0, is_bidirec=False,
        input_size=10, hidden_size=100, num_layers=1, mode="RNN_TANH", seed=0, is_test=False,
        rng=None, need=frozenset({"Out", "DropoutState", "State", "Reserve"})):
    """See the module docstring."""
    _mode_gates(mode)
    dirs = 2 if is_bidirec else 1
    T, B = x.shape[0], x.shape[1]
    if T == 0:
        raise ValueError(f"rnn: Input {tuple(x.shape)} has no time steps (its first dim is time)")
    H = hidden_size
    out_shape = (T, B, dirs * H)
    dropout_state = None
    dropout_mask = None
    if not is_test:
        if dropout_prob != 0 and num_layers > 1:
            if np.float32(dropout_prob) == np.float32(1.0):
                dropout_state = xp.zeros(out_shape, np.uint8)
            else:
                u = generator(xp, rng, seed).random(out_shape, dtype=np.float32)
                dropout_state = (u >= np.float32(dropout_prob)).astype(np.uint8)
            dropout_mask = dropout_state
        else:
            dropout_state = xp.ones(out_shape, np.uint8)
    keep = not is_test and "Reserve" in need
    out, states, layers, raw, _ = _forward(
        xp, x, pre_state, weights, seq_len, mode=mode, num_layers=num_layers,
        is_bidirec=is_bidirec, dropout_mask=dropout_mask, dropout_prob=dropout_prob, keep=keep)
    reserve = _reserve(xp, layers, raw, mode, num_layers, dirs, T, B, H, x.dtype) if keep else None
    return out, dropout_state, states, reserve


# -- rnn_grad ----------------------------------------------------------------------------------
def _direction_grad(xp, x, w, cache, mask, mode, reverse, dout, dh_last, dc_last):
    """Backpropagation through time for one direction of one layer: (dx, [dW_ih, dW_hh,
    db_ih, db_hh], dh0, dc0)."""
    w_ih, w_hh, b_ih, b_hh = w
    T, B = x.shape[0], x.shape[1]
    H = w_hh.shape[1]
    G = w_ih.shape[0]
    steps = list(range(T - 1, -1, -1) if reverse else range(T))
    da_in = xp.zeros((T, B, G), x.dtype)      # gradient of the input projection x W_ih^T + b_ih
    da_h = xp.zeros((T, B, G), x.dtype)       # gradient of the hidden projection h' W_hh^T (+ b_hh)
    h_prev_all = xp.zeros((T, B, H), x.dtype)
    dh = dh_last
    dc = dc_last
    for k in range(T - 1, -1, -1):
        t = steps[k]
        h_prev = cache["h_prev"][k]
        act = cache["act"][k]
        aux = cache["aux"][k]
        h_prev_all[t] = h_prev
        if mask is not None:
            m = mask[t]
            dh_cell = (dh + dout[t]) * m
            dh_keep = dh * (1.0 - m)
        else:
            m = None
            dh_cell = dh + dout[t]
            dh_keep = None
        if mode == "LSTM":
            c_prev = cache["c_prev"][k]
            i, f, g, o = act[:, :H], act[:, H:2 * H], act[:, 2 * H:3 * H], act[:, 3 * H:]
            tc = aux[1]
            dc_cell = dc * m if m is not None else dc
            dct = dc_cell + dh_cell * o * (1.0 - tc * tc)
            da = xp.concatenate([dct * g * i * (1.0 - i), dct * c_prev * f * (1.0 - f),
                                 dct * i * (1.0 - g * g), dh_cell * tc * o * (1.0 - o)], axis=1)
            da_in[t] = da
            da_h[t] = da
            dc = dct * f + (dc * (1.0 - m) if m is not None else 0)
            dh_prev = da @ w_hh
        elif mode == "GRU":
            r, z, n = act[:, :H], act[:, H:2 * H], act[:, 2 * H:]
            hc = aux[0]
            dn = dh_cell * (1.0 - z)
            dz = dh_cell * (h_prev - n)
            dan = dn * (1.0 - n * n)
            dar = dan * hc * r * (1.0 - r)
            daz = dz * z * (1.0 - z)
            dhc = dan * r
            da_in[t] = xp.concatenate([dar, daz, dan], axis=1)
            dah = xp.concatenate([dar, daz, dhc], axis=1)
            da_h[t] = dah
            dh_prev = dh_cell * z + dah @ w_hh
        else:
            deriv = 1.0 - act * act if mode == "RNN_TANH" else (act > 0).astype(x.dtype)
            da = dh_cell * deriv
            da_in[t] = da
            da_h[t] = da
            dh_prev = da @ w_hh
        dh = dh_prev + dh_keep if dh_keep is not None else dh_prev
    flat_in = da_in.reshape(T * B, G)
    flat_h = da_h.reshape(T * B, G)
    dx = (flat_in @ w_ih).reshape(x.shape)
    dw_ih = flat_in.T @ x.reshape(T * B, -1)
    dw_hh = flat_h.T @ h_prev_all.reshape(T * B, H)
    db_ih = flat_in.sum(axis=0)
    db_hh = flat_h.sum(axis=0)
    return dx, [dw_ih, dw_hh, db_ih, db_hh], dh, (dc if mode == "LSTM" else None)


@kernel("rnn_grad",
        inputs=["Input", "PreState", "WeightList", "SequenceLength", "Out", "DropoutState",
                "Reserve", "Out@GRAD", "State@GRAD"],
        outputs=["Input@GRAD", "PreState@GRAD", "WeightList@GRAD"],
        attrs=["dropout_prob", "is_bidirec", "input_size", "hidden_size", "num_layers", "mode",
               "seed", "is_test"])
def rnn_grad(xp, x, pre_state, weights, seq_len, out, dropout_state, reserve, dout, dstate, *,
             dropout_prob=0.0, is_bidirec=False, input_size=10, hidden_size=100, num_layers=1,
             mode="RNN_TANH", seed=0, is_test=False,
             need=frozenset({"Input@GRAD", "PreState@GRAD", "WeightList@GRAD"})):
    """Gradients of Input, PreState and WeightList (same order and shapes). The forward
    pass is recomputed from the inputs (with DropoutState's mask), then back-propagated
    through time layer by layer, last layer first. A missing Out@GRAD or State@GRAD counts
    as zeros."""
    _mode_gates(mode)
    dirs = 2 if is_bidirec else 1
    H = hidden_size
    use_dropout = (not is_test and dropout_prob != 0 and num_layers > 1
                   and dropout_state is not None)
    dmask = dropout_state if use_dropout else None
    _, _, layers, _, mask = _forward(
        xp, x, pre_state, weights, seq_len, mode=mode, num_layers=num_layers,
        is_bidirec=is_bidirec, dropout_mask=dmask, dropout_prob=dropout_prob, keep=True)
    ws = _weights(weights, num_layers, dirs)
    lstm = mode == "LSTM"
    n_states = 2 if lstm else 1
    dstate = list(dstate) if dstate is not None else [None] * n_states
    dstate += [None] * (n_states - len(dstate))
    dstate = [xp.zeros_like(p) if d is None else d for d, p in zip(dstate, pre_state)]
    d_out = xp.zeros_like(out) if dout is None else dout
    d_weights = [None] * len(weights)
    d_h0 = [None] * (num_layers * dirs)
    d_c0 = [None] * (num_layers * dirs)
    n = num_layers * dirs
    dx = None
    for layer in range(num_layers - 1, -1, -1):
        inp, caches = layers[layer]
        dinp = None
        for d in range(dirs):
            k = layer * dirs + d
            part = d_out[..., d * H:(d + 1) * H]
            gx, gw, gh, gc = _direction_grad(xp, inp, ws[k], caches[d], mask, mode, d == 1, part,
                                             dstate[0][k], dstate[1][k] if lstm else None)
            dinp = gx if dinp is None else dinp + gx
            d_weights[2 * k], d_weights[2 * k + 1] = gw[0], gw[1]
            d_weights[2 * n + 2 * k], d_weights[2 * n + 2 * k + 1] = gw[2], gw[3]
            d_h0[k], d_c0[k] = gh, gc
        if layer > 0:
            d_out = _layer_input(xp, dinp, dmask, dropout_prob)  # d(prev out) = d(inp) * mask / keep
        else:
            dx = dinp
    d_pre = [xp.stack(d_h0)] + ([xp.stack(d_c0)] if lstm else [])
    return (dx if "Input@GRAD" in need else None,
            d_pre if "PreState@GRAD" in need else None,
            d_weights if "WeightList@GRAD" in need else None)


# -- warpctc -----------------------------------------------------------------------------------
def _shift(xp, a, k, fill):
    """a [B, S] shifted right by k along S (k < 0: left), `fill` where nothing came in."""
    out = xp.full(a.shape, fill, a.dtype)
    if k > 0:
        out[:, k:] = a[:, :-k]
    else:
        out[:, :k] = a[:, -k:]
    return out


def _ctc(xp, logits, label, logits_length, label_length, blank):
    """CTC loss per sequence and its gradient with respect to the logits, as warp-ctc
    computes them (float64 log space here): Loss[b] = -log sum over alignments of
    prod_t softmax(logits[t, b])[path_t]; grad[t, b] = softmax - the posterior occupancy of
    each class, 0 at t >= length. A sequence no alignment fits (label length plus repeated
    neighbours longer than the input) gets loss 0 and gradient 0, as warp-ctc gives."""
    T, B, C = logits.shape
    z = logits.astype(xp.float64)
    z = z - z.max(axis=2, keepdims=True)
    logp = z - xp.log(xp.exp(z).sum(axis=2, keepdims=True))
    L = label.shape[1]
    S = 2 * L + 1
    lab = label.astype(xp.int64)
    ext = xp.full((B, S), blank, xp.int64)
    ext[:, 1::2] = lab
    t_len = logits_length.reshape(B).astype(xp.int64)
    s_len = 2 * label_length.reshape(B).astype(xp.int64) + 1
    s_idx = xp.arange(S).reshape(1, S)
    valid_s = s_idx < s_len.reshape(B, 1)
    skip = xp.zeros((B, S), dtype=bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    emit = logp[:, xp.arange(B).reshape(B, 1), ext]  # [T, B, S]
    neg = -xp.inf
    alpha = xp.full((T, B, S), neg)
    a = xp.where(valid_s & (s_idx < 2), emit[0], neg)
    alpha[0] = xp.where((t_len > 0).reshape(B, 1), a, neg)
    for t in range(1, T):
        prev = alpha[t - 1]
        new = xp.logaddexp(xp.logaddexp(prev, _shift(xp, prev, 1, neg)),
                           xp.where(skip, _shift(xp, prev, 2, neg), neg)) + emit[t]
        alpha[t] = xp.where(valid_s & (t < t_len).reshape(B, 1), new, neg)
    skip_next = _shift(xp, skip, -2, False)  # s -> s + 2 allowed
    beta = xp.full((T, B, S), neg)
    nxt = xp.full((B, S), neg)
    ends = valid_s & (s_idx >= (s_len - 2).reshape(B, 1))
    for t in range(T - 1, -1, -1):
        rec = xp.logaddexp(xp.logaddexp(nxt, _shift(xp, nxt, -1, neg)),
                           xp.where(skip_next, _shift(xp, nxt, -2, neg), neg)) + emit[t]
        last = (t == t_len - 1).reshape(B, 1)
        inner = (t < t_len - 1).reshape(B, 1)
        cur = xp.where(last & ends, emit[t], xp.where(inner & valid_s, rec, neg))
        beta[t] = cur
        nxt = cur
    t_last = xp.maximum(t_len - 1, 0)
    final = alpha[t_last, xp.arange(B)]  # [B, S]
    end_a = xp.take_along_axis(final, (s_len - 1).reshape(B, 1), axis=1).reshape(B)
    end_b = xp.take_along_axis(final, xp.maximum(s_len - 2, 0).reshape(B, 1), axis=1).reshape(B)
    log_like = xp.where(s_len >= 2, xp.logaddexp(end_a, end_b), end_a)
    feasible = xp.isfinite(log_like)
    safe_ll = xp.where(feasible, log_like, 0.0)
    log_gamma = alpha + beta - emit - safe_ll.reshape(1, B, 1)
    gamma = xp.where(xp.isfinite(log_gamma), xp.exp(xp.where(xp.isfinite(log_gamma), log_gamma, 0.0)), 0.0)
    onehot = (ext.reshape(B, S, 1) == xp.arange(C).reshape(1, 1, C)).astype(xp.float64)
    occupancy = xp.einsum("tbs,bsc->tbc", gamma, onehot)
    live = ((xp.arange(T).reshape(T, 1) < t_len.reshape(1, B)) & feasible.reshape(1, B)).reshape(T, B, 1)
    grad = xp.where(live, xp.exp(logp) - occupancy, 0.0)
    loss = xp.where(feasible, -log_like, 0.0).reshape(B, 1)
    return loss, grad


def _padded(xp, packed, lengths, fill, time_major):
    """Sequences packed one after another along dim 0 (split by `lengths`) as one padded
    array: [max_length, batch, ...] when time_major, else [batch, max_length, ...]."""
    lengths = [int(n) for n in lengths.reshape(-1).tolist()]  # (read back from a device)
    if sum(lengths) != packed.shape[0]:
        raise ValueError(f"the LoD's sequence lengths {lengths} add up to {sum(lengths)}, the input has "
                         f"{packed.shape[0]} rows")
    out = xp.full((len(lengths), max(lengths, default=0)) + tuple(packed.shape[1:]), fill, packed.dtype)
    start = 0
    for b, n in enumerate(lengths):
        out[b, :n] = packed[start:start + n]
        start += n
    return out.swapaxes(0, 1) if time_major else out


def _packed(xp, padded, lengths):
    """The inverse of _padded(time_major=True): [max_length, batch, ...] -> [sum(lengths), ...]."""
    lengths = [int(n) for n in lengths.reshape(-1).tolist()]  # (read back from a device)
    return xp.concatenate([padded[:n, b] for b, n in enumerate(lengths)], axis=0)


@kernel("warpctc", inputs=["Logits", "Label", "LogitsLength", "LabelLength"],
        outputs=["Loss", "WarpCTCGrad"], attrs=["blank", "norm_by_times"])
def warpctc(xp, logits, label, logits_length=None, label_length=None, *, blank=0,
            norm_by_times=False):
    """Padded mode: Logits [Tmax, B, C] (unnormalized; softmax is applied inside), Label
    [B, Lmax], LogitsLength and LabelLength [B]. Loss [B, 1] = -log p(label | logits),
    not divided by the length even with norm_by_times (PaddlePaddle applies that to the
    gradient only). WarpCTCGrad [Tmax, B, C]: d Loss[b] / d Logits[:, b].
    PaddlePaddle's LoD mode: Logits [sum T, C] and Label [sum L, 1], the sequences one after
    another, split by the lengths of their LoDs (here LogitsLength, LabelLength: the
    executor wires a fed LoD in, executor/lod.py); padded as above, the same results."""
    if logits_length is None or label_length is None:
        raise ValueError("warpctc: without LogitsLength and LabelLength, Logits and Label must be fed "
                         "with a LoD (keel.LoDTensor) saying where each sequence ends")
    if logits.ndim == 2:  # the LoD form
        logits = _padded(xp, logits, logits_length, 0, time_major=True)
        label = _padded(xp, label.reshape(-1), label_length, 0, time_major=False)
    if logits.shape[0] == 0:  # (a shape: no value read back from a device)
        raise ValueError(f"warpctc: Logits {tuple(logits.shape)} has no time steps")
    loss, grad = _ctc(xp, logits, label, logits_length, label_length, blank)
    return loss.astype(logits.dtype), grad.astype(logits.dtype)


@kernel("warpctc_grad", inputs=["Logits", "LogitsLength", "WarpCTCGrad", "Loss@GRAD"],
        outputs=["Logits@GRAD"], attrs=["blank", "norm_by_times"])
def warpctc_grad(xp, logits, logits_length, warpctc_grad_in, loss_grad, *, blank=0,
                 norm_by_times=False):
    """Logits@GRAD[t, b] = WarpCTCGrad[t, b] * Loss@GRAD[b], divided by LogitsLength[b]
    when norm_by_times (PaddlePaddle's padded-mode gradient; in the LoD mode, 2-D Logits,
    the same values packed back as Logits are)."""
    B = warpctc_grad_in.shape[1]
    scale = loss_grad.reshape(1, B, 1).astype(warpctc_grad_in.dtype)
    if norm_by_times:
        scale = scale / logits_length.reshape(1, B, 1).astype(warpctc_grad_in.dtype)
    grad = warpctc_grad_in * scale
    if logits.ndim == 2:
        grad = _packed(xp, grad, logits_length)
    return grad.astype(logits.dtype)


# -- ctc_align ---------------------------------------------------------------------------------
@kernel("ctc_align", inputs=["Input", "InputLength"], outputs=["Output", "OutputLength"],
        attrs=["blank", "merge_repeated", "padding_value"])
def ctc_align(xp, x, input_length=None, *, blank=0, merge_repeated=True, padding_value=0):
    """Padded mode (PaddlePaddle's LoD-free ctc_align): per row, over its first
    InputLength tokens, drop blanks and (merge_repeated) a token equal to the one before it
    (blanks included: a, blank, a keeps both a); the kept tokens go first, the rest of the
    row is padding_value. OutputLength [B, 1] counts the kept tokens."""
    if input_length is None:
        raise ValueError("ctc_align: Keel runs the padded mode only: give InputLength")
    B, T = x.shape
    t = xp.arange(T).reshape(1, T)
    valid = t < input_length.reshape(B, 1).astype(xp.int64)
    keep = valid & (x != blank)
    if merge_repeated and T > 1:
        same = xp.zeros((B, T), dtype=bool)
        same[:, 1:] = x[:, 1:] == x[:, :-1]
        keep &= ~same
    order = xp.argsort(xp.where(keep, t, t + T), axis=1)  # kept positions first, in order
    count = keep.sum(axis=1).reshape(B, 1)
    gathered = xp.take_along_axis(x, order, axis=1)
    out = xp.where(t < count, gathered, xp.asarray(padding_value, dtype=x.dtype))
    return out.astype(x.dtype), count.astype(x.dtype)
