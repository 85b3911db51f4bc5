"""Recurrent and CTC ops: `rnn` (what paddle.nn.LSTM/GRU/SimpleRNN write in static
graphs), `warpctc` (CTC loss) and `ctc_align` (greedy CTC decoding).

Slots, attributes and shape rules follow PaddlePaddle's legacy ops (RnnInferMeta,
WarpctcInferMeta, ctc_align's padded, LoD-free mode).
"""
from __future__ import annotations

from keel.program.errors import AttrError
from keel.program.ops.infer import dims_match
from keel.program.ops.registry import (BOOL, FLOAT, INT, NOT_DIFFERENTIABLE, STRING, define, grad_op,
                                  many, opt, side)
from keel.proto import pb

_T = pb.VarType
_INTS = (_T.INT32, _T.INT64)
GATES = {"LSTM": 4, "GRU": 3, "RNN_TANH": 1, "RNN_RELU": 1}


def weight_shapes(mode, num_layers, is_bidirec, input_size, hidden_size):
    """The shapes of PaddlePaddle's WeightList: every (layer, direction)'s W_ih
    [G*H, in] and W_hh [G*H, H] in turn, then every (layer, direction)'s b_ih and b_hh
    [G*H]; `in` is input_size for the first layer, D*H after."""
    dirs = 2 if is_bidirec else 1
    g = GATES[mode] * hidden_size
    ws, bs = [], []
    for layer in range(num_layers):
        width = input_size if layer == 0 else hidden_size * dirs
        for _ in range(dirs):
            ws += [[g, width], [g, hidden_size]]
            bs += [[g], [g]]
    return ws + bs


def _attr_error(ctx, message):
    raise AttrError(message, op_type=ctx.op_type, callsite=ctx.callsite)


def _infer_rnn(ctx):
    x = ctx.input("Input")
    ctx.require_float(x)
    if x.ndim != 3:
        ctx.fail(f"Input must be 3-d [time, batch, input_size] (time major), got {x}")
    mode = ctx.attr("mode")
    if mode not in GATES:
        _attr_error(ctx, f"mode must be one of LSTM, GRU, RNN_TANH, RNN_RELU, got {mode!r}")
    layers, hidden = ctx.attr("num_layers"), ctx.attr("hidden_size")
    if layers < 1 or hidden < 1:
        _attr_error(ctx, f"num_layers and hidden_size must be >= 1, got {layers} and {hidden}")
    dirs = 2 if ctx.attr("is_bidirec") else 1
    seq = ctx.input("SequenceLength")
    if seq is not None:
        if seq.dtype not in _INTS:
            ctx.dtype_fail(f"SequenceLength must be int32 or int64, got {seq}")
        if seq.ndim != 1 or not dims_match(seq.shape[0], x.shape[1]):
            ctx.fail(f"SequenceLength must be [batch] with Input's batch size: Input {x}, "
                     f"SequenceLength {seq}")
    pre = ctx.inputs("PreState")
    n_state = 2 if mode == "LSTM" else 1
    if len(pre) != n_state:
        ctx.fail(f"PreState of {mode} must hold {n_state} tensor(s) (h0{', c0' if n_state == 2 else ''}), "
                 f"got {len(pre)}")
    for p in pre:
        want = [layers * dirs, x.shape[1], hidden]
        if p.ndim != 3 or not all(dims_match(a, b) for a, b in zip(p.shape, want)):
            ctx.fail(f"PreState must be [num_layers * directions, batch, hidden_size] = {want}, "
                     f"got {p}")
    ws = ctx.inputs("WeightList")
    want = weight_shapes(mode, layers, dirs == 2, ctx.attr("input_size"), hidden)
    if len(ws) != len(want):
        ctx.fail(f"WeightList must hold {len(want)} tensors for {layers} layer(s) x {dirs} "
                 f"direction(s), got {len(ws)}")
    for i, (w, shape) in enumerate(zip(ws, want)):
        if w.ndim != len(shape) or not all(dims_match(a, b) for a, b in zip(w.shape, shape)):
            ctx.fail(f"WeightList[{i}] must have shape {shape} (PaddlePaddle's layout), got {w}")
    if not dims_match(x.shape[2], ctx.attr("input_size")):
        ctx.fail(f"Input's last dim must be input_size={ctx.attr('input_size')}, got {x}")
    ctx.set_output("Out", [x.shape[0], x.shape[1], dirs * hidden], x.dtype)
    for i, p in enumerate(pre):
        ctx.set_output("State", p.shape, x.dtype, i)
    ctx.set_output("DropoutState", [x.shape[0], x.shape[1], dirs * hidden], _T.UINT8)
    ctx.set_output("Reserve", [-1, -1], x.dtype)


define("rnn", inputs=["Input", many("PreState"), many("WeightList"), opt("SequenceLength")],
       outputs=["Out", opt("DropoutState"), many("State"), side("Reserve")],
       attrs={"dropout_prob": FLOAT(0.0), "is_bidirec": BOOL(False), "input_size": INT(10),
              "hidden_size": INT(100), "num_layers": INT(1), "mode": STRING("RNN_TANH"),
              "seed": INT(0), "is_test": BOOL(False)},
       infer=_infer_rnn,
       grad=grad_op(["Input", "PreState", "WeightList", "SequenceLength", "Out", "DropoutState",
                     "Reserve", "Out@GRAD", "State@GRAD"],
                    ["Input@GRAD", "PreState@GRAD", "WeightList@GRAD"]),
       doc="Multi-layer (bidirectional) LSTM/GRU/simple RNN over time-major Input [T, B, I] "
           "with PaddlePaddle's WeightList layout; padded steps (SequenceLength) give zero "
           "outputs and keep the states.")


# -- warpctc ---------------------------------------------------------------------------------
def _infer_warpctc(ctx):
    logits, label = ctx.input("Logits"), ctx.input("Label")
    ctx.require_float(logits)
    if label.dtype not in _INTS:
        ctx.dtype_fail(f"Label must be int32 or int64 class ids, got {label}")
    logits_len, label_len = ctx.input("LogitsLength"), ctx.input("LabelLength")
    if (logits_len is None) != (label_len is None):
        ctx.fail("LogitsLength and LabelLength must be given together")
    if logits_len is None:
        return _infer_warpctc_packed(ctx, logits, label)
    if logits.ndim != 3:
        ctx.fail(f"Logits must be 3-d [max_time, batch, classes], got {logits}")
    if label.ndim != 2 or not dims_match(label.shape[0], logits.shape[1]):
        ctx.fail(f"Label must be [batch, max_label_length] with Logits' batch size: Logits {logits}, "
                 f"Label {label}")
    for v in (logits_len, label_len):
        if v.dtype not in _INTS:
            ctx.dtype_fail(f"lengths must be int64 (or int32), got {v}")
    _check_blank(ctx, logits.shape[2])
    ctx.set_output("Loss", [logits.shape[1], 1], logits.dtype)
    ctx.set_output("WarpCTCGrad", logits.shape, logits.dtype)


def _infer_warpctc_packed(ctx, logits, label):
    """Without lengths, PaddlePaddle's LoD form: the sequences one after another, Logits
    [total_time, classes] and Label [total_label_length, 1], split by the LoDs fed with them
    (executor/lod.py gives the kernel those as LogitsLength and LabelLength)."""
    if logits.ndim != 2 or label.ndim != 2 or label.shape[1] not in (-1, 1):
        ctx.fail(f"without LogitsLength and LabelLength, Logits must be [total_time, classes] and Label "
                 f"[total_label_length, 1], fed with a LoD each (keel.LoDTensor); or give padded "
                 f"Logits [max_time, batch, classes] with the lengths: got Logits {logits}, Label {label}")
    _check_blank(ctx, logits.shape[1])
    ctx.set_output("Loss", [-1, 1], logits.dtype)
    ctx.set_output("WarpCTCGrad", [-1, -1, logits.shape[1]], logits.dtype)


def _check_blank(ctx, classes):
    blank = ctx.attr("blank")
    if blank < 0 or (classes >= 0 and blank >= classes):
        _attr_error(ctx, f"blank must be in [0, {classes}), got {blank}")


define("warpctc", inputs=["Logits", "Label", opt("LogitsLength"), opt("LabelLength")],
       outputs=["Loss", side("WarpCTCGrad")],
       attrs={"blank": INT(0), "norm_by_times": BOOL(False)},
       infer=_infer_warpctc, lod_lengths={"Logits": "LogitsLength", "Label": "LabelLength"},
       grad=grad_op(["Logits", "LogitsLength", "WarpCTCGrad", "Loss@GRAD"], ["Logits@GRAD"]),
       doc="CTC loss -log p(Label | softmax(Logits)) per sequence (Loss [batch, 1]); "
           "WarpCTCGrad keeps its gradient with respect to Logits.")


# -- ctc_align -------------------------------------------------------------------------------
def _infer_ctc_align(ctx):
    x = ctx.input("Input")
    if x.dtype not in _INTS:
        ctx.dtype_fail(f"Input must hold int32 or int64 token ids, got {x}")
    length = ctx.input("InputLength")
    if length is None:
        ctx.fail("ctc_align needs InputLength (Keel has no LoD tensors): Input padded "
                 "[batch, max_length], InputLength [batch, 1]")
    if x.ndim != 2:
        ctx.fail(f"Input must be 2-d [batch, max_length], got {x}")
    if length.dtype != x.dtype:
        ctx.dtype_fail(f"InputLength must have Input's dtype: Input {x}, InputLength {length}")
    ctx.set_output("Output", x.shape, x.dtype)
    ctx.set_output("OutputLength", [x.shape[0], 1], x.dtype)


define("ctc_align", inputs=["Input", opt("InputLength")], outputs=["Output", opt("OutputLength")],
       attrs={"blank": INT(0), "merge_repeated": BOOL(True), "padding_value": INT(0)},
       infer=_infer_ctc_align, grad=NOT_DIFFERENTIABLE,
       doc="Greedy CTC decoding of padded token ids: merge repeats (merge_repeated), drop "
           "blanks, pad with padding_value; OutputLength the decoded lengths.")
