"""examples/train_gpt.py: the cached decoding step computes what the whole-context model
computes, the Predictor runs it with one compiled plan while the cache grows, sampling keeps
to top-k / top-p, and a short run is repeatable under its seed and exports working files."""
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import keel.executor.executor as executor_module
import keel as paddle

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import train_gpt  # noqa: E402

CONTEXT, WIDTH, LAYERS, HEADS = 12, 16, 2, 2


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """A small GPT with initialized (untrained) weights, exported; its full-context predictor."""
    paddle.seed(11)
    data = train_gpt.CharData("the quick brown fox jumps over the lazy dog. " * 40, CONTEXT)
    model = train_gpt.GPT(data.vocab_size, CONTEXT, WIDTH, LAYERS, HEADS)
    scope = paddle.Scope()
    startup, _, _, _ = train_gpt.build_programs(model, CONTEXT, 1e-3, 2, 10, 0.01)
    paddle.Executor().run(startup, scope=scope)
    # larger weights than the initializers give, so that every position's logits differ
    rng = np.random.default_rng(0)
    model.set_state_dict({k: (v + rng.normal(0, 0.3, v.shape)).astype(np.float32)
                          for k, v in model.state_dict(scope=scope).items()}, scope=scope)
    prefix = str(tmp_path_factory.mktemp("gpt") / "gpt")
    train_gpt.export(model, data, prefix, scope)
    whole = paddle.inference.create_predictor(paddle.inference.Config(prefix))
    return prefix, data, whole


def test_cached_steps_give_the_whole_context_logits_at_every_position(exported):
    prefix, data, whole = exported
    ids = np.array([data.encode("the lazy fox")], np.int64)
    assert ids.shape == (1, CONTEXT)
    expected, = whole.run([ids])                         # [1, context, vocab]
    generator = train_gpt.Generator(prefix)
    caches = generator.empty_caches()
    for position in range(CONTEXT):
        logits, caches = generator.step(int(ids[0, position]), position, caches)
        np.testing.assert_allclose(logits, expected[0, position], rtol=1e-4, atol=1e-5)
        assert [c.shape for c in caches] == [(1, HEADS, position + 1, WIDTH // HEADS)] * (2 * LAYERS)
    assert np.ptp(expected[0].argmax(-1)) > 0 or np.ptp(expected[0]) > 0.1   # the positions differ


def test_the_step_plan_is_compiled_once_while_the_cache_grows(exported, monkeypatch):
    prefix, _, _ = exported
    compiled = []
    real = executor_module.compile_plan
    monkeypatch.setattr(executor_module, "compile_plan", lambda *a, **k: compiled.append(1) or real(*a, **k))
    generator = train_gpt.Generator(prefix)
    text = generator.generate("the", 2 * CONTEXT)   # past the context: the cache is refilled
    assert len(text) == 3 + 2 * CONTEXT
    assert len(compiled) == 1


def test_greedy_generation_is_the_argmax_of_the_whole_context_model(exported):
    prefix, data, whole = exported
    generator = train_gpt.Generator(prefix)
    text = generator.generate("the", CONTEXT - 3)
    ids = np.array([data.encode(text)], np.int64)
    logits, = whole.run([ids])
    predicted = logits[0, 2:-1].argmax(-1)            # what each position says comes next
    assert list(predicted) == list(ids[0, 3:])


def test_sampling_keeps_to_top_k_and_top_p():
    logits = np.log(np.array([0.5, 0.3, 0.1, 0.06, 0.04]))
    rng = np.random.default_rng(0)
    draws = [train_gpt.choose(logits, rng, top_k=0, top_p=1.0, temperature=1.0) for _ in range(4000)]
    np.testing.assert_allclose(np.bincount(draws, minlength=5) / 4000, [0.5, 0.3, 0.1, 0.06, 0.04], atol=0.03)
    assert set(train_gpt.choose(logits, rng, top_k=2, top_p=1.0, temperature=1.0) for _ in range(300)) == {0, 1}
    # top-p 0.75: the smallest set reaching 0.75 is {0, 1} (0.5, then 0.8)
    assert set(train_gpt.choose(logits, rng, top_k=0, top_p=0.75, temperature=1.0) for _ in range(300)) == {0, 1}
    assert train_gpt.choose(logits, rng, top_k=1, top_p=1.0, temperature=1.0) == 0
    assert train_gpt.choose(logits, None, top_k=0, top_p=1.0, temperature=1.0) == 0   # greedy


def _run(out):
    argv = [sys.executable, str(ROOT / "examples" / "train_gpt.py"), "--steps", "12", "--steps-per-epoch", "6",
            "--context", "32", "--width", "32", "--layers", "2", "--heads", "2", "--batch-size", "8",
            "--generate", "40", "--out", str(out)]
    r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return r.stdout


@pytest.mark.slow
def test_a_short_run_trains_exports_generates_and_repeats_under_its_seed(tmp_path):
    runs = [_run(tmp_path / "gpt") for _ in range(2)]
    timing = r"tokens/s [\d,]+|elapsed \d+s|\d+\.\d+s|\(\d+\.\d+ ms per character\)"
    assert re.sub(timing, "", runs[0]) == re.sub(timing, "", runs[1])        # the same numbers twice
    epochs = re.findall(r"epoch +(\d+) +step +(\d+) +train loss ([\d.]+) +valid loss ([\d.]+) +tokens/s", runs[0])
    assert [(e, s) for e, s, _, _ in epochs] == [("1", "6"), ("2", "12")]
    assert float(epochs[1][3]) < float(epochs[0][3]) < 4.7                     # log(103) = 4.63 at the start
    assert "greedy" in runs[0] and "sampled (top-k" in runs[0]
    for suffix in (".pdmodel", ".pdiparams", "_step.pdmodel", "_step.pdiparams", ".vocab.json"):
        assert (tmp_path / ("gpt" + suffix)).exists()
