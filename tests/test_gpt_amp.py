"""examples/train_gpt.py with --amp: a short mixed-precision run of the example's model (the
example's own `train`, on the first 20,000 characters of its corpus) learns like float32,
the dynamic loss scale halves on each overflowing step and skips it, and what is exported
is the float32 model (O2: the master weights), which generates through the Predictor."""
import contextlib
import io
import math
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import keel as paddle

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples"))
import train_gpt  # noqa: E402

pytestmark = pytest.mark.slow   # five short trainings: about 30 s of one core

SMALL = ["--steps", "30", "--steps-per-epoch", "10", "--context", "16", "--width", "32", "--layers", "2",
         "--heads", "2", "--batch-size", "16", "--lr", "1e-2", "--warmup", "5"]
EPOCH = re.compile(r"epoch +(\d+) +step +(\d+) +train loss ([\d.]+|nan|inf) +valid loss ([\d.]+|nan|inf)"
                   r" +tokens/s [\d,]+ +elapsed \d+s(?:  loss scale ([\d.e+]+) \((\d+) skipped\))?")


@pytest.fixture(scope="module")
def text():
    return train_gpt.corpus()[:20000]


def train(text, *options):
    """The example's training on `text`: (model, data, scope, the epoch lines' fields)."""
    args = train_gpt.parse_args(SMALL + list(options))
    paddle.seed(args.seed)
    data = train_gpt.CharData(text, args.context)
    model = train_gpt.GPT(data.vocab_size, args.context, args.width, args.layers, args.heads)
    scope = paddle.Scope()
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        train_gpt.train(args, data, model, scope)
    epochs = [m.groups() for m in EPOCH.finditer(printed.getvalue())]
    assert [(e, s) for e, s, *_ in epochs] == [("1", "10"), ("2", "20"), ("3", "30")], printed.getvalue()
    return model, data, scope, epochs


def valid_losses(epochs):
    return [float(e[3]) for e in epochs]


@pytest.fixture(scope="module")
def float32_losses(text):
    """Each epoch's validation loss in the same run in float32."""
    _, _, _, epochs = train(text)
    assert all(e[4] is None for e in epochs)   # no loss scale without AMP
    return valid_losses(epochs)


def assert_learns_like_float32(epochs, float32_losses, data):
    """The validation loss falls from below log(vocab) and stays within 2% of float32's at
    every epoch (the runs share the seed, the batches and the initial weights)."""
    losses = valid_losses(epochs)
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < losses[0] < math.log(data.vocab_size)
    np.testing.assert_allclose(losses, float32_losses, rtol=0.02)


def assert_exports_float32_and_generates(model, data, scope, prefix, valid_loss, rtol):
    """The exported whole-context model is the trained one in float32: its loss over the
    validation text is the last epoch's (within `rtol`: O2 evaluated in float16); the step
    program generates."""
    assert {v.dtype for v in model.state_dict(scope=scope).values()} == {np.dtype(np.float32)}
    train_gpt.export(model, data, str(prefix), scope)
    whole = paddle.inference.create_predictor(paddle.inference.Config(str(prefix)))
    total, count = 0.0, 0
    for x, y in data.validation_batches(64):
        logits, = whole.run([x])
        assert logits.dtype == np.float32
        shifted = logits - logits.max(-1, keepdims=True)
        log_probs = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
        total += -np.take_along_axis(log_probs, y[..., None], -1).sum()
        count += y.size
    np.testing.assert_allclose(total / count, valid_loss, rtol=rtol)
    text = train_gpt.Generator(str(prefix)).generate("The ", 20)
    assert text.startswith("The ") and len(text) == 24


def test_o1_float16_loss_scale_halves_on_overflow_and_skips_the_step(text, tmp_path):
    # 2**24 makes the float16 gradients overflow at first: each such step is skipped and
    # halves the scale (decr_every_n_nan_or_inf 1); none grows it back (incr_every_n_steps 2000)
    model, data, scope, epochs = train(text, "--amp", "O1", "--init-loss-scaling", str(2.0 ** 24))
    scales = [float(e[4]) for e in epochs]
    skipped = [int(e[5]) for e in epochs]
    assert skipped[0] >= 1 and skipped == sorted(skipped)
    assert scales == [2.0 ** 24 / 2 ** s for s in skipped]
    losses = valid_losses(epochs)
    assert all(math.isfinite(v) for v in losses) and losses[-1] < losses[0]
    assert_exports_float32_and_generates(model, data, scope, tmp_path / "gpt", losses[-1], rtol=1e-3)


def test_o1_float16_learns_like_float32(text, float32_losses):
    _, data, _, epochs = train(text, "--amp", "O1")
    assert all(e[4] is not None for e in epochs)
    assert_learns_like_float32(epochs, float32_losses, data)


def test_o2_float16_exports_the_float32_master_weights(text, tmp_path, float32_losses):
    model, data, scope, epochs = train(text, "--amp", "O2")
    assert_learns_like_float32(epochs, float32_losses, data)
    masters = [name for name in scope.local_var_names() if "_fp32_master" in name]
    assert masters, "O2 keeps float32 master copies of the parameters"
    for param in model.parameters():
        master = [m for m in masters if m.startswith(param.name + "_fp32_master")]
        if master:   # the float16 parameter was replaced by its master after training
            np.testing.assert_array_equal(scope.get(param.name), scope.get(master[0]))
    assert_exports_float32_and_generates(model, data, scope, tmp_path / "gpt", valid_losses(epochs)[-1], rtol=1e-2)


def test_o1_bfloat16_learns_like_float32_without_a_loss_scale(text, float32_losses):
    _, data, _, epochs = train(text, "--amp", "O1", "--amp-dtype", "bfloat16")
    assert all(e[4] is None for e in epochs)   # bfloat16 has float32's range: no loss scaling
    assert_learns_like_float32(epochs, float32_losses, data)
