"""Recurrent layers and CTC: `pg.nn.lstm`, `pg.nn.gru`, `pg.nn.simple_rnn` (the `rnn` op
that paddle.nn.LSTM/GRU/SimpleRNN write in static graphs, with their parameter names and
initialisation), `pg.nn.warpctc`, `pg.nn.ctc_loss` and `pg.nn.ctc_greedy_decoder`.

    x = pg.data("x", [-1, 20, 8])                 # [batch, time, features]
    lens = pg.data("lens", [-1], "int64")
    out, (h, c) = pg.nn.lstm(x, 16, num_layers=2, direction="bidirect", sequence_length=lens)
"""
from __future__ import annotations

import math

from keel.program import initializer as init
from keel.program.errors import AttrError, ShapeError
from keel.program.layers.helper import LayerHelper
from keel.program.ops.rnn import GATES, weight_shapes
from keel.proto import pb

_DIRECTIONS = {"forward": False, "bidirect": True, "bidirectional": True}


def rnn(input, hidden_size, mode="LSTM", num_layers=1, direction="forward", time_major=False,
        dropout=0.0, sequence_length=None, initial_states=None, weight_ih_attr=None,
        weight_hh_attr=None, bias_ih_attr=None, bias_hh_attr=None, is_test=False, name=None):
    """A multi-layer recurrent network as the op `rnn` (mode LSTM, GRU, RNN_TANH or
    RNN_RELU), as paddle.nn.LSTM/GRU/SimpleRNN build it: per layer and direction a cell
    `<mode>_cell_N` with `w_0` (W_ih [G*H, in]), `w_1` (W_hh [G*H, H]), `b_0`, `b_1`,
    all Uniform(-1/sqrt(H), 1/sqrt(H)); batch-major input transposed to time major and
    back; zero initial states unless `initial_states` (h, or (h, c) for LSTM, each
    [num_layers * directions, batch, H]). Returns (output [batch, time, D*H] (time major
    if `time_major`), final states: h, or (h, c) for LSTM)."""
    if mode not in GATES:
        raise AttrError(f"rnn: mode must be one of {sorted(GATES)}, got {mode!r}")
    if direction not in _DIRECTIONS:
        raise AttrError(f"rnn: direction must be 'forward' or 'bidirect', got {direction!r}")
    bidirec = _DIRECTIONS[direction]
    dirs = 2 if bidirec else 1
    if input.ndim != 3 or input.shape[-1] < 0:
        raise ShapeError(f"rnn: input must be 3-d with a known feature size, got {input.name} "
                         f"{input.type_string()}")
    input_size = input.shape[-1]
    cell = {"LSTM": "lstm", "GRU": "gru"}.get(mode, "simple_rnn")
    helper = LayerHelper(cell, name)
    dtype = input.dtype
    bound = 1.0 / math.sqrt(hidden_size)
    shapes = weight_shapes(mode, num_layers, bidirec, input_size, hidden_size)
    n = num_layers * dirs
    weights, biases = [], []
    def attr(value, k):  # one attr for every cell, or one per cell (the Layer classes' names)
        return value[k] if isinstance(value, (list, tuple)) else value

    for k in range(n):
        cell_helper = LayerHelper(f"{cell}_cell")
        uniform = init.Uniform(-bound, bound)
        weights += [cell_helper.create_parameter(attr(weight_ih_attr, k), shapes[2 * k], dtype, uniform),
                    cell_helper.create_parameter(attr(weight_hh_attr, k), shapes[2 * k + 1], dtype, uniform)]
        biases += [cell_helper.create_parameter(attr(bias_ih_attr, k), shapes[2 * n + 2 * k], dtype, uniform,
                                                suffix="b"),
                   cell_helper.create_parameter(attr(bias_hh_attr, k), shapes[2 * n + 2 * k + 1], dtype,
                                                uniform, suffix="b")]
    if any(p is None for p in weights + biases):
        raise AttrError("rnn: every weight and bias is needed (an attr of False is not supported)")
    x = input if time_major else _transpose(helper, input)
    n_state = 2 if mode == "LSTM" else 1
    if initial_states is None:
        states = [_zeros_state(helper, x, n, hidden_size, dtype) for _ in range(n_state)]
    else:
        states = list(initial_states) if isinstance(initial_states, (list, tuple)) else [initial_states]
        if len(states) != n_state:
            raise AttrError(f"rnn: {mode} takes {n_state} initial state(s), got {len(states)}")
    out = helper.create_tmp(dtype)
    finals = [helper.create_tmp(dtype) for _ in range(n_state)]
    reserve = helper.create_tmp(dtype, stop_gradient=True)
    dropout_state = helper.create_tmp(pb.VarType.UINT8, stop_gradient=True)
    inputs = {"Input": x, "PreState": states, "WeightList": weights + biases}
    if sequence_length is not None:
        inputs["SequenceLength"] = sequence_length
    helper.append_op("rnn", inputs,
                     {"Out": out, "State": finals, "Reserve": reserve, "DropoutState": dropout_state},
                     {"mode": mode, "num_layers": num_layers, "is_bidirec": bidirec,
                      "input_size": input_size, "hidden_size": hidden_size,
                      "dropout_prob": float(dropout), "is_test": is_test, "seed": 0})
    if not time_major:
        out = _transpose(helper, out)
    return out, (finals[0] if n_state == 1 else tuple(finals))


def lstm(input, hidden_size, num_layers=1, direction="forward", **kwargs):
    """LSTM (paddle.nn.LSTM): returns (output, (h, c)); see `rnn`."""
    return rnn(input, hidden_size, "LSTM", num_layers, direction, **kwargs)


def gru(input, hidden_size, num_layers=1, direction="forward", **kwargs):
    """GRU (paddle.nn.GRU): returns (output, h); see `rnn`."""
    return rnn(input, hidden_size, "GRU", num_layers, direction, **kwargs)


def simple_rnn(input, hidden_size, num_layers=1, direction="forward", activation="tanh", **kwargs):
    """Elman RNN (paddle.nn.SimpleRNN), activation tanh or relu: returns (output, h)."""
    if activation not in ("tanh", "relu"):
        raise AttrError(f"simple_rnn: activation must be 'tanh' or 'relu', got {activation!r}")
    return rnn(input, hidden_size, "RNN_" + activation.upper(), num_layers, direction, **kwargs)


def _transpose(helper, x):
    out = helper.create_tmp(x.dtype)
    xshape = helper.create_tmp(x.dtype, stop_gradient=True)
    helper.append_op("transpose2", {"X": x}, {"Out": out, "XShape": xshape}, {"axis": [1, 0, 2]})
    return out


def _zeros_state(helper, x, n, hidden, dtype):
    out = helper.create_tmp(dtype, stop_gradient=True)
    helper.append_op("fill_constant_batch_size_like", {"Input": x}, {"Out": out},
                     {"shape": [n, -1, hidden], "dtype": dtype, "value": 0.0,
                      "input_dim_idx": 1, "output_dim_idx": 1})
    return out


# -- CTC ---------------------------------------------------------------------------------------------
def warpctc(input, label, input_length=None, label_length=None, blank=0, norm_by_times=False):
    """CTC loss of unnormalized logits `input` [max_time, batch, classes] (time major)
    against padded `label` [batch, max_label_length] (int32), op `warpctc`: Loss
    [batch, 1]. Without the lengths, PaddlePaddle's LoD form: `input` [total_time, classes]
    and `label` [total_label_length, 1], the sequences one after another, fed with a LoD
    each (keel.LoDTensor)."""
    helper = LayerHelper("warpctc")
    loss = helper.create_tmp(input.dtype)
    grad = helper.create_tmp(input.dtype, stop_gradient=True)
    lengths = {"LogitsLength": input_length, "LabelLength": label_length}
    helper.append_op("warpctc", {"Logits": input, "Label": label,
                                 **{slot: v for slot, v in lengths.items() if v is not None}},
                     {"Loss": loss, "WarpCTCGrad": grad},
                     {"blank": int(blank), "norm_by_times": bool(norm_by_times)})
    return loss


def ctc_loss(log_probs, labels, input_lengths, label_lengths, blank=0, reduction="mean",
             norm_by_times=False, zero_infinity=False):
    """paddle.nn.functional.ctc_loss: `warpctc`, then reduction 'none' (the [batch] losses),
    'sum', or 'mean' (each loss divided by its label length, then averaged). zero_infinity:
    an infinite loss (no alignment fits) counts as 0.

    Examples:
        >>> import keel as paddle
        >>> import keel.nn.functional as F
        >>> log_probs = paddle.log(paddle.full([3, 1, 3], 1 / 3))   # [max_time, batch, classes], uniform
        >>> labels = paddle.to_tensor([[1, 2]], dtype="int32")
        >>> in_len, label_len = paddle.to_tensor([3], dtype="int64"), paddle.to_tensor([2], dtype="int64")
        >>> print(F.ctc_loss(log_probs, labels, in_len, label_len, reduction="none").numpy().round(4))
        [1.6864]
    """
    from keel.program.layers import math as M
    from keel.program.layers import tensor as Tn

    loss = Tn.squeeze(warpctc(log_probs, labels, input_lengths, label_lengths, blank,
                              norm_by_times), [-1])
    if zero_infinity:
        loss = M.where(M.isinf(loss), Tn.zeros_like(loss), loss)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return M.reduce_sum(loss)
    if reduction == "mean":
        lengths = M.cast(label_lengths, loss.dtype)
        return M.mean(M.divide(loss, lengths))
    raise AttrError(f"ctc_loss: reduction must be 'none', 'sum' or 'mean', got {reduction!r}")


def ctc_greedy_decoder(input, blank, input_length, padding_value=0):
    """Greedy CTC decoding (paddle.static.nn.ctc_greedy_decoder, padded mode): the arg max
    class of `input` [batch, time, classes] per step, then `ctc_align` (merge repeats,
    drop blanks). Returns (decoded [batch, time] int64, lengths [batch, 1] int64);
    `input_length` [batch, 1] int64."""
    helper = LayerHelper("ctc_greedy_decoder")
    values = helper.create_tmp(input.dtype, stop_gradient=True)
    ids = helper.create_tmp(pb.VarType.INT64, stop_gradient=True)
    helper.append_op("top_k_v2", {"X": input}, {"Out": values, "Indices": ids},
                     {"k": 1, "axis": -1, "largest": True, "sorted": True})
    from keel.program.layers import tensor as Tn

    ids = Tn.squeeze(ids, [2])
    out = helper.create_tmp(pb.VarType.INT64, stop_gradient=True)
    out_len = helper.create_tmp(pb.VarType.INT64, stop_gradient=True)
    helper.append_op("ctc_align", {"Input": ids, "InputLength": input_length},
                     {"Output": out, "OutputLength": out_len},
                     {"blank": int(blank), "merge_repeated": True, "padding_value": int(padding_value)})
    return out, out_len
