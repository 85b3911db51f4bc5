"""PaddlePaddle's recurrent layer classes (paddle.nn.LSTM, GRU, SimpleRNN) over the `rnn`
op (program/nn/rnn.py). Their structure and names are PaddlePaddle's: the network is a list
of per-layer sublayers `0`, `1`, ... each holding a `cell` (or `cell_fw` and `cell_bw` when
bidirectional) whose parameters are `weight_ih`, `weight_hh`, `bias_ih`, `bias_hh`
(`lstm_cell_N.w_0`, `.w_1`, `.b_0`, `.b_1`), Uniform(-1/sqrt(H), 1/sqrt(H))."""
from __future__ import annotations

import math

from keel.program import initializer as init
from keel.program.nn.rnn import rnn as _rnn
from keel.program.ops.rnn import GATES
from keel.program.nn.layer import Layer

__all__ = ["LSTM", "GRU", "SimpleRNN"]


class _Cell(Layer):
    """The four parameters of one layer and direction; named like PaddlePaddle's cells."""

    def __init__(self, name_scope, gates, input_size, hidden_size, attrs):
        super().__init__(name_scope)
        uniform = init.Uniform(-1.0 / math.sqrt(hidden_size), 1.0 / math.sqrt(hidden_size))
        g = gates * hidden_size
        w_ih, w_hh, b_ih, b_hh = attrs
        self.weight_ih = self.create_parameter([g, input_size], w_ih, default_initializer=uniform)
        self.weight_hh = self.create_parameter([g, hidden_size], w_hh, default_initializer=uniform)
        self.bias_ih = self.create_parameter([g], b_ih, is_bias=True, default_initializer=uniform)
        self.bias_hh = self.create_parameter([g], b_hh, is_bias=True, default_initializer=uniform)


class _Layer(Layer):
    """One layer of the network: a cell, or a forward and a backward cell."""

    def __init__(self, cells):
        super().__init__()
        if len(cells) == 1:
            self.cell = cells[0]
        else:
            self.cell_fw, self.cell_bw = cells


class _RNNBase(Layer):
    _mode = ""
    _cell = ""

    def __init__(self, input_size, hidden_size, num_layers=1, direction="forward", time_major=False,
                 dropout=0.0, weight_ih_attr=None, weight_hh_attr=None, bias_ih_attr=None, bias_hh_attr=None,
                 name=None):
        super().__init__(name)
        if direction not in ("forward", "bidirect", "bidirectional"):
            raise ValueError(f"{type(self).__name__}: direction must be 'forward' or 'bidirect', got {direction!r}")
        self.hidden_size, self.num_layers = int(hidden_size), int(num_layers)
        self.direction = "bidirect" if direction.startswith("bidirect") else "forward"
        self.time_major, self.dropout = time_major, float(dropout)
        dirs = 2 if self.direction == "bidirect" else 1
        attrs = (weight_ih_attr, weight_hh_attr, bias_ih_attr, bias_hh_attr)
        gates = GATES[self._rnn_mode()]
        self._cells = []
        for i in range(self.num_layers):
            width = input_size if i == 0 else self.hidden_size * dirs
            cells = [_Cell(self._cell, gates, width, self.hidden_size, attrs) for _ in range(dirs)]
            self.add_sublayer(str(i), _Layer(cells))
            self._cells += cells

    def _rnn_mode(self):
        return self._mode

    def _attrs(self, key):
        return [cell._parameters[key].attr for cell in self._cells]

    def forward(self, inputs, initial_states=None, sequence_length=None):
        return _rnn(inputs, self.hidden_size, self._rnn_mode(), self.num_layers, self.direction, self.time_major,
                    self.dropout, sequence_length, initial_states, self._attrs("weight_ih"),
                    self._attrs("weight_hh"), self._attrs("bias_ih"), self._attrs("bias_hh"),
                    is_test=not self.training, name=self._full_name)


class LSTM(_RNNBase):
    """Returns (outputs [batch, time, D*H], (h, c)), each state [num_layers * D, batch, H].

    Examples:
        >>> import keel as paddle
        >>> lstm = paddle.nn.LSTM(16, 32, num_layers=2)
        >>> x = paddle.rand([4, 23, 16])              # [batch, time, input_size]
        >>> y, (h, c) = lstm(x)
        >>> y.shape, h.shape, c.shape
        ([4, 23, 32], [2, 4, 32], [2, 4, 32])
        >>> y, (h, c) = paddle.nn.LSTM(16, 32, direction="bidirect")(x)
        >>> y.shape, h.shape
        ([4, 23, 64], [2, 4, 32])
    """
    _mode, _cell = "LSTM", "lstm_cell"


class GRU(_RNNBase):
    """Returns (outputs, h).

    Examples:
        >>> import keel as paddle
        >>> gru = paddle.nn.GRU(16, 32, num_layers=2)
        >>> y, h = gru(paddle.rand([4, 23, 16]))
        >>> y.shape, h.shape
        ([4, 23, 32], [2, 4, 32])
    """
    _mode, _cell = "GRU", "gru_cell"


class SimpleRNN(_RNNBase):
    """Elman network, activation tanh or relu; returns (outputs, h).

    Examples:
        >>> import keel as paddle
        >>> rnn = paddle.nn.SimpleRNN(16, 32, num_layers=2)
        >>> y, h = rnn(paddle.rand([4, 23, 16]))
        >>> y.shape, h.shape
        ([4, 23, 32], [2, 4, 32])
    """
    _cell = "simple_rnn_cell"

    def __init__(self, input_size, hidden_size, num_layers=1, direction="forward", time_major=False,
                 dropout=0.0, activation="tanh", **kwargs):
        if activation not in ("tanh", "relu"):
            raise ValueError(f"SimpleRNN: activation must be 'tanh' or 'relu', got {activation!r}")
        self._activation = activation
        super().__init__(input_size, hidden_size, num_layers, direction, time_major, dropout, **kwargs)

    def _rnn_mode(self):
        return "RNN_" + self._activation.upper()
