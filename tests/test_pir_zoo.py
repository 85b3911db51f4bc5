"""PIR JSON programs (PaddlePaddle 3.x's default format, issue 28) run in Keel's Predictor and
give Paddle Inference 3.3.1's outputs: the PIR zoo of tests/fixtures/pir/ (generate.py there:
native `paddle.jit.save` exports and every legacy fixture with parameters translated by
PaddlePaddle's own translator, at base_code.version 1 to 4), with Keel's passes off and on,
against Paddle Inference's outputs with its passes off and on. Same tolerance as the legacy
zoo: max|keel - paddle| <= 1e-4 + 1e-4 * max|paddle|, same shapes and dtypes."""
import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from keel.executor.inference import Config, create_predictor
from test_model_zoo import assert_matches  # (the legacy zoo's tolerance)

FIXTURES = Path(__file__).resolve().parent / "fixtures"
sys.path.insert(0, str(FIXTURES / "zoo"))
try:
    from zoo_files import unzip_program, write_recipe_params
finally:
    sys.path.pop(0)
PIR = FIXTURES / "pir"
NAMES = sorted(p.name[:-len(".io.npz")] for p in PIR.glob("*.io.npz") if not p.name.startswith("legacy_"))


def params_file(params: str, tmp_path) -> Path:
    """A fixture, or `recipe:zoo/<name>`: the legacy zoo model's recipe-filled parameters,
    written as the generator wrote them for Paddle Inference."""
    if not params.startswith("recipe:"):
        return FIXTURES / params
    stem = params.split("/", 1)[1]
    target = tmp_path / f"{stem}.recipe.pdiparams"
    write_recipe_params(unzip_program(stem, tmp_path), target)
    return target


def program_file(name, tmp_path) -> Path:
    plain = PIR / f"{name}.json"
    if plain.exists():
        return plain
    unpacked = tmp_path / f"{name}.json"
    unpacked.write_bytes(gzip.decompress((PIR / f"{name}.json.gz").read_bytes()))
    return unpacked


def test_the_pir_zoo_covers_every_version_and_the_legacy_zoo():
    versions = {int(np.load(PIR / f"{n}.io.npz")["version"]) for n in NAMES}
    assert versions == {1, 2, 3, 4}
    legacy_with_params = {f"{d}_{p.name[:-len('.pdiparams')]}" for d in ("zoo", "paddle")
                          for p in (FIXTURES / d).glob("*.pdiparams")}
    whole_zoo = {f"zoo_{p.name[:-len('.io.npz')]}" for p in (FIXTURES / "zoo").glob("*.io.npz")}  # recipe ones too
    skipped = json.loads((PIR / "skipped.json").read_text())  # what Paddle Inference cannot run itself
    assert legacy_with_params | whole_zoo <= set(NAMES) | set(skipped)
    assert len(skipped) <= 5
    assert {"control_flow_paddle_cond", "control_flow_dy2static_while", "rnn_lstm_classifier"} <= set(NAMES)
    assert {"mlp", "cnn_bn", "ops_mix", "control_flow"} <= set(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_keel_gives_paddle_inference_outputs(name, tmp_path):
    recorded = np.load(PIR / f"{name}.io.npz", allow_pickle=False)
    n_out = len(recorded["output_names"])
    params = [str(params_file(str(recorded["params"]), tmp_path))] if str(recorded["params"]) else []
    cases = sorted({key.split(":")[0][2:] for key in recorded.files if key.startswith("in")})  # "", "1", ...
    for keel_passes in (False, True):
        config = Config(str(program_file(name, tmp_path)), *params)
        config.switch_ir_optim(keel_passes)
        predictor = create_predictor(config)
        if name in ("mlp", "cnn_bn"):  # PaddlePaddle's names: fetch_name_<i>
            assert predictor.get_output_names() == list(recorded["output_names"])
        for case in cases:
            inputs = {key.split(":", 1)[1]: recorded[key] for key in recorded.files if key.startswith(f"in{case}:")}
            got = predictor.run([inputs[n] for n in predictor.get_input_names()])
            for setting in ("ir_off", "ir_on"):
                assert_matches(got, [recorded[f"{setting}{case}:{i}"] for i in range(n_out)],
                               f"{name} case {case or 0} (Keel passes {'on' if keel_passes else 'off'}, "
                               f"Paddle {setting})")


def test_a_legacy_instance_norm_export_with_dims_minus_8_loads_and_matches():
    """PaddlePaddle 3.3.1's legacy export declares instance_norm's saved mean/variance [-8]."""
    from keel.program.io import load_program
    model = PIR / "legacy_instance_norm.pdmodel"
    program = load_program(model)
    assert sorted(v.raw_dims for v in program.global_block().vars.values()
                  if v.raw_dims and min(v.raw_dims, default=0) < -1) == [(-8,), (-8,)]
    recorded = np.load(PIR / "legacy_instance_norm.io.npz", allow_pickle=False)
    predictor = create_predictor(Config(str(model)))
    got = predictor.run([recorded["in:x"]])
    assert_matches(got, [recorded["ir_off:0"]], "legacy instance_norm")


@pytest.mark.parametrize("name", ["mlp", "cnn_bn", "transformer"])
def test_the_passes_run_on_a_pir_program(monkeypatch, name, tmp_path):
    """Fusion (ir_optim) and float16 (Precision Half) run on a program read from PIR JSON as on a
    legacy one: fc fused from matmul_v2 + elementwise_add, float16 weights, outputs within
    float16 tolerance of Paddle Inference's."""
    from keel.executor.inference import PrecisionType
    from keel.executor.place import CPUPlace
    monkeypatch.setattr(Config, "_place", lambda self: CPUPlace())  # (Half is a GPU setting)
    recorded = np.load(PIR / f"{name}.io.npz", allow_pickle=False)
    config = Config(str(program_file(name, tmp_path)), str(FIXTURES / str(recorded["params"])))
    config.enable_use_gpu(100, 0, PrecisionType.Half)
    predictor = create_predictor(config)
    ops = [op.type for op in predictor._program.global_block().ops]
    assert "matmul_v2" not in ops or name == "transformer"  # fused into fc (attention's matmuls stay)
    weights = [n for n in predictor._params if predictor._params.get(n).ndim == 2]
    assert weights and all(predictor._params.get(n).dtype == np.float16 for n in weights)
    inputs = {k.split(":", 1)[1]: recorded[k] for k in recorded.files if k.startswith("in:")}
    got = predictor.run([inputs[n] for n in predictor.get_input_names()])
    want = recorded["ir_off:0"]
    err = float(np.abs(got[0].astype(np.float64) - want).max())
    assert err <= 2e-2 * (1 + float(np.abs(want).max())), (name, err)
