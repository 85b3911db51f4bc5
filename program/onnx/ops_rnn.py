"""The recurrent op `rnn` (what paddle.nn.LSTM/GRU/SimpleRNN write) as one ONNX LSTM, GRU or
RNN node per layer, both directions in one node.

Facts the translation rests on (kernels/rnn.py states PaddlePaddle's semantics):
- WeightList holds every (layer, direction)'s W_ih [G*H, in] and W_hh [G*H, H], then every
  (layer, direction)'s b_ih and b_hh [G*H]. ONNX wants, per layer, W [D, G*H, in],
  R [D, G*H, H] and B [D, 2*G*H] (W's bias then R's).
- Gate order: PaddlePaddle's LSTM rows are i, f, c(g), o, ONNX's i, o, f, c; PaddlePaddle's
  GRU rows are r, z, c, ONNX's z, r, h. The rows are re-laid out with numpy when the
  weights are parameters (the usual case: an initializer's value is known at export).
- PaddlePaddle's GRU applies the reset gate after the hidden projection
  (n = tanh(x W_ic + b_ic + r * (h W_hc + b_hc))): ONNX's `linear_before_reset=1`.
- SequenceLength: padded steps output zeros and keep the states, the reverse direction
  starting at each sequence's last step: ONNX's `sequence_lens` (int32) behaves the same.
- Out [T, B, D*H] puts the forward direction's H first: ONNX's Y [T, D, B, H] transposed to
  [T, B, D, H] and flattened. State [L*D, B, H] (index layer*D + direction) is every layer's
  Y_h (Y_c for LSTM's cell) concatenated.
"""
from __future__ import annotations

import numpy as np

from keel.program.onnx.registry import converts

_ONNX_OP = {"LSTM": "LSTM", "GRU": "GRU", "RNN_TANH": "RNN", "RNN_RELU": "RNN"}
# row blocks of PaddlePaddle's gates, in the order ONNX stacks them
_GATE_ORDER = {"LSTM": [0, 3, 1, 2], "GRU": [1, 0, 2], "RNN_TANH": [0], "RNN_RELU": [0]}


@converts("rnn")
def rnn(g, op):
    mode = op.attr("mode")
    if mode not in _ONNX_OP:
        raise g.error(f"mode {mode!r} has no ONNX recurrent op (LSTM, GRU, RNN_TANH and RNN_RELU do)")
    if not op.attr("is_test", False) and op.attr("dropout_prob", 0.0) and op.attr("num_layers", 1) > 1:
        raise g.error("dropout between layers while training (is_test false) is random: ONNX's recurrent ops "
                      "have none; export an inference program (is_test true)")
    layers, hidden = op.attr("num_layers", 1), op.attr("hidden_size")
    dirs = 2 if op.attr("is_bidirec", False) else 1
    weights = _relaid_weights(g, op, mode, layers, dirs)
    seq_lens = g.x(op, "SequenceLength")
    if seq_lens is not None:
        seq_lens = g.node("Cast", [seq_lens], to=g.onnx.TensorProto.INT32)
    h0 = g.x(op, "PreState", 0)
    c0 = g.x(op, "PreState", 1) if mode == "LSTM" else None
    value = g.x(op, "Input")
    last_h, last_c = [], []
    for layer in range(layers):
        rows = (layer * dirs, (layer + 1) * dirs)
        inputs = [value, *weights[layer], seq_lens or "", _rows(g, h0, *rows)]
        if mode == "LSTM":
            inputs.append(_rows(g, c0, *rows))
        y, y_h, *y_c = g.node(_ONNX_OP[mode], inputs, 3 if mode == "LSTM" else 2, hidden_size=hidden,
                              direction="bidirectional" if dirs == 2 else "forward", **_mode_attrs(mode))
        value = g.node("Reshape", [g.node("Transpose", [y], perm=[0, 2, 1, 3]), g.ints([0, 0, -1])])
        last_h.append(y_h)
        last_c.extend(y_c)
    g.node("Identity", [value], g.y(op, "Out"))
    for slot_index, states in enumerate([last_h, last_c][:len(op.output("State"))]):
        g.node("Concat", states, g.y(op, "State", slot_index), axis=0)
    if op.output("DropoutState"):
        _ones_like_out(g, op, value)


def _mode_attrs(mode):
    if mode == "GRU":
        return {"linear_before_reset": 1}
    if mode == "RNN_RELU":
        return {"activations": ["Relu"] * 2}
    if mode == "RNN_TANH":
        return {"activations": ["Tanh"] * 2}
    return {}


def _rows(g, value, start, stop):
    """value[start:stop] along the first axis (one layer's initial states)."""
    return g.node("Slice", [value, g.ints([start]), g.ints([stop]), g.ints([0])])


def _relaid_weights(g, op, mode, layers, dirs):
    """Per layer the initializer names (W, R, B) in ONNX's layout and gate order."""
    count = layers * dirs
    values = [g.param(op, "WeightList", i) for i in range(len(op.input("WeightList")))]
    if len(values) != 4 * count:
        raise g.error(f"WeightList holds {len(values)} tensors; {layers} layer(s) x {dirs} direction(s) need "
                      f"{4 * count}")
    if any(v is None for v in values):
        names = [n for n, v in zip(op.input("WeightList"), values) if v is None]
        raise g.error(f"WeightList {names} are computed, not parameters: their rows are re-ordered into ONNX's "
                      f"gate order at export, which needs their values")
    order = _GATE_ORDER[mode]
    out = []
    for layer in range(layers):
        ks = range(layer * dirs, (layer + 1) * dirs)
        w = np.stack([_regate(values[2 * k], order) for k in ks])
        r = np.stack([_regate(values[2 * k + 1], order) for k in ks])
        b = np.stack([np.concatenate([_regate(values[2 * count + 2 * k], order),
                                      _regate(values[2 * count + 2 * k + 1], order)]) for k in ks])
        out.append([g.const(w, hint="W"), g.const(r, hint="R"), g.const(b, hint="B")])
    return out


def _regate(array, order):
    """`array`'s gate row blocks (its first axis split in len(order) equal parts) reordered."""
    blocks = np.split(np.asarray(array), len(order), axis=0)
    return np.concatenate([blocks[i] for i in order], axis=0)


def _ones_like_out(g, op, out):
    """DropoutState: PaddlePaddle's keep-mask, all ones (uint8) where nothing is dropped."""
    ones = g.const(np.array(1, np.uint8), hint="one")
    g.node("Expand", [ones, g.node("Shape", [out])], g.y(op, "DropoutState"))
