"""The benchmark's OCR-family mobile CNNs (benchmarks/mobile_cnns.py): each saved model runs,
with and without the inference passes, to the shapes PaddleOCR's give; served with
Config.enable_onnxruntime() (Keel's ONNX export run by ONNX Runtime, where onnx and
onnxruntime are installed) it computes what Keel computes; Paddle Inference, where installed, too."""
from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from keel.executor import Config, create_predictor

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import mobile_cnns  # noqa: E402

OUTPUTS = {"detector": (1, 1, 320, 480), "recognizer": (1, 80, 6625), "classifier": (1, 2)}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    directory = tmp_path_factory.mktemp("ocr")
    return {name: mobile_cnns.save(name, str(directory)) for name in mobile_cnns.MODELS}


def _input(name):
    return np.random.default_rng(0).standard_normal((1, *mobile_cnns.SHAPES[name])).astype(np.float32)


def _predict(prefix, x, optim=True):
    config = Config(prefix)
    config.switch_ir_optim(optim)
    return create_predictor(config).run([x])[0]


def _assert_agree(got, want, what):
    assert got.shape == want.shape, what
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max(), what


@pytest.mark.slow
@pytest.mark.parametrize("name", list(mobile_cnns.MODELS))
def test_models_run_with_and_without_passes(saved, name):
    x = _input(name)
    plain, optimized = _predict(saved[name], x, False), _predict(saved[name], x)
    assert plain.shape == OUTPUTS[name] and np.isfinite(plain).all()
    _assert_agree(optimized, plain, name)
    if name == "detector":
        assert 0 < plain.min() and plain.max() < 1 and plain.std() > 1e-3   # a sigmoid map, not constant
    else:
        np.testing.assert_allclose(plain.sum(-1), 1, rtol=1e-5)               # softmax over the classes
        assert plain.std() > 0


def test_divisible_follows_mobilenets_rounding():
    assert [mobile_cnns.divisible(v) for v in (8, 12, 20, 36, 56, 240 * 0.35)] == [8, 16, 24, 40, 56, 88]


def test_batch_norms_get_random_statistics(saved):
    import keel.program as pg
    program = pg.io.load_program(saved["classifier"] + ".pdmodel")
    params = pg.io.load_params(program, saved["classifier"] + ".pdiparams")
    bn = next(op for op in program.global_block().ops if op.type == "batch_norm")
    assert not np.allclose(params[bn.input("Variance")[0]], 1) and not np.allclose(params[bn.input("Mean")[0]], 0)


@pytest.mark.slow
@pytest.mark.parametrize("name", list(mobile_cnns.MODELS))
def test_onnx_runtime_engine_computes_what_keel_computes(saved, name):
    pytest.importorskip("onnx", reason="the ONNX Runtime engine needs onnx (pip install onnx onnxruntime)")
    pytest.importorskip("onnxruntime", reason="the ONNX Runtime engine needs onnxruntime (pip install onnxruntime)")
    from keel.executor.onnx_engine import OrtFallbackWarning
    config = Config(saved[name])
    config.enable_onnxruntime()
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrtFallbackWarning)  # every op of the mobile CNNs exports
        predictor = create_predictor(config)
    x = _input(name)
    _assert_agree(predictor.run([x])[0], _predict(saved[name], x, False), name)


@pytest.mark.paddle
@pytest.mark.parametrize("name", ["classifier", "recognizer"])
def test_paddle_inference_computes_what_keel_computes(saved, name):
    paddle = pytest.importorskip("paddle")
    import paddle_peer
    x = _input(name)
    _assert_agree(paddle_peer.inference_call(paddle, saved[name], x, 1)(), _predict(saved[name], x), name)
