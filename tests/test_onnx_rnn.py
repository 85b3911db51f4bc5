"""ONNX export of the recurrent op `rnn` (program/onnx/ops_rnn.py): LSTM, GRU and simple
RNNs, one or two layers, one or two directions, with and without SequenceLength, run in
ONNX Runtime against Keel's executor; the zoo's recurrent models against the outputs
PaddlePaddle recorded."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="ONNX export needs the optional onnx package (pip install -e '.[onnx]' in the Keel checkout)")
pytest.importorskip("onnxruntime", reason="the exported models are checked by running them in onnxruntime")

from keel.program.ops.rnn import GATES, weight_shapes  # noqa: E402
from keel.program.onnx import OnnxExportError  # noqa: E402
from onnx_oracle import op_case, zoo_case  # noqa: E402


def _rnn_inputs(rng, mode, layers, bidirec, T=5, B=3, I=4, H=6, seq_len=None):
    dirs = 2 if bidirec else 1
    weights = [rng.uniform(-0.5, 0.5, s).astype(np.float32) for s in weight_shapes(mode, layers, bidirec, I, H)]
    states = [rng.standard_normal((layers * dirs, B, H)).astype(np.float32)
              for _ in range(2 if mode == "LSTM" else 1)]
    inputs = {"Input": rng.standard_normal((T, B, I)).astype(np.float32), "PreState": states,
              "WeightList": weights}
    if seq_len is not None:
        inputs["SequenceLength"] = np.asarray(seq_len)
    attrs = dict(mode=mode, num_layers=layers, is_bidirec=bidirec, input_size=I, hidden_size=H, is_test=True)
    return inputs, attrs, len(states)


@pytest.mark.parametrize("mode", sorted(GATES))
@pytest.mark.parametrize("layers,bidirec", [(1, False), (2, True), (2, False)])
def test_rnn_modes_layers_and_directions(mode, layers, bidirec):
    inputs, attrs, n_states = _rnn_inputs(np.random.default_rng(0), mode, layers, bidirec)
    op_case("rnn", inputs, attrs, params=["WeightList"], outputs={"State": n_states}, fetch=["Out", "State"])


@pytest.mark.parametrize("mode", ["LSTM", "GRU", "RNN_TANH"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_rnn_sequence_lengths_zero_padded_steps_and_keep_states(mode, dtype):
    inputs, attrs, n_states = _rnn_inputs(np.random.default_rng(1), mode, 2, True, seq_len=[5, 2, 3])
    inputs["SequenceLength"] = inputs["SequenceLength"].astype(dtype)
    op_case("rnn", inputs, attrs, params=["WeightList"], outputs={"State": n_states}, fetch=["Out", "State"])


def test_rnn_weights_that_are_not_parameters_are_refused_naming_why():
    inputs, attrs, n_states = _rnn_inputs(np.random.default_rng(2), "GRU", 1, False)
    with pytest.raises(OnnxExportError, match="rnn.*WeightList.*computed, not parameters"):
        op_case("rnn", inputs, attrs, outputs={"State": n_states}, fetch=["Out"])


def _paddle_model(prefix):
    """(program, params, feed names, fetch names) of a saved inference model."""
    import keel.program as pg
    from keel.executor import Executor, Scope
    scope = Scope()
    program, feeds, fetches = pg.io.load_inference_model(str(prefix), Executor(), scope=scope)
    params = {n: np.asarray(scope.get(n)) for n, _, _ in pg.io.persistable_specs(program)}
    return program, params, feeds, fetches


def test_paddle_lstm_classifier_gives_paddles_outputs_at_any_batch_size():
    """tests/fixtures/rnn/lstm_classifier: embedding, a bidirectional LSTM over padded
    sequences (SequenceLength), a classifier; PaddlePaddle's recorded outputs at batch 4,
    and Keel's executor's at batch 2."""
    from pathlib import Path
    from onnx_oracle import assert_close, keel_run, ort_run, require_converters
    from keel.program.onnx import program_to_onnx
    fixtures = Path(__file__).resolve().parent / "fixtures" / "rnn"
    program, params, feeds, fetches = _paddle_model(fixtures / "lstm_classifier")
    require_converters(program)
    model = program_to_onnx(program, params, dynamic_batch=True)
    io = np.load(fixtures / "lstm_classifier.io.npz", allow_pickle=False)
    feed = {n: io[f"in:{n}"] for n in feeds}
    assert_close(ort_run(model, feed), [io["out:0"], io["out:1"]], "lstm_classifier", rtol=1e-5, atol=1e-6)
    half = {n: v[:2] for n, v in feed.items()}
    assert_close(ort_run(model, half), keel_run(program, half, [f.name for f in fetches], params),
                 "lstm_classifier at batch 2", rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("name", ["nlp_lstm", "nlp_bigru", "nlp_bilstm_seqlen", "nlp_simple_rnn", "ocr_crnn_lstm",
                                  "ocr_crnn_gru"])
def test_recurrent_zoo_models_give_paddles_outputs(name, tmp_path):
    zoo_case(name, tmp_path)
