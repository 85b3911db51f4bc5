"""Greedy and beam-search decoding inside one exported inference program: a small
Transformer decoder (one attention layer and a feed-forward block) whose every step runs in
a `while` loop of the program, with its key/value cache carried as loop variables. Each
program is saved with save_inference_model, run by the Predictor, and checked token for
token against a Python loop in numpy.

    python examples/decode.py
"""
import argparse
import tempfile
from pathlib import Path

import numpy as np

import keel.program as pg
from keel.executor import Executor, Scope, inference

VOCAB, WIDTH, STEPS, BEAM, BATCH = 24, 16, 8, 4, 2
NAMES = ("emb", "pos", "wq", "wk", "wv", "wo", "w1", "w2", "wout")


def make_weights(seed=0) -> dict:
    rng = np.random.default_rng(seed)
    shapes = {"emb": (VOCAB, WIDTH), "pos": (STEPS, WIDTH), "wq": (WIDTH, WIDTH), "wk": (WIDTH, WIDTH),
              "wv": (WIDTH, WIDTH), "wo": (WIDTH, WIDTH), "w1": (WIDTH, 4 * WIDTH), "w2": (4 * WIDTH, WIDTH),
              "wout": (WIDTH, VOCAB)}
    return {n: (rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32) * (3.0 if n == "wout" else 1.0)
            for n, s in shapes.items()}


# -- the decoder step, as program ops ------------------------------------------------------------
def decoder_step(w, t, tok, k_cache, v_cache, rows):
    """Logits [rows, VOCAB] for the tokens `tok` [rows, 1] at position t, and the caches
    with this position's key and value appended ([rows, t+1, WIDTH])."""
    h = pg.gather(w["emb"], pg.reshape(tok, [rows])) + pg.gather(w["pos"], t)
    k = pg.unsqueeze(pg.matmul(h, w["wk"]), [1])
    v = pg.unsqueeze(pg.matmul(h, w["wv"]), [1])
    k_cache, v_cache = pg.concat([k_cache, k], axis=1), pg.concat([v_cache, v], axis=1)
    q = pg.unsqueeze(pg.matmul(h, w["wq"]), [1])
    scores = pg.softmax(pg.scale(pg.matmul(q, k_cache, transpose_y=True), 1.0 / np.sqrt(WIDTH)))
    h = h + pg.matmul(pg.reshape(pg.matmul(scores, v_cache), [rows, WIDTH]), w["wo"])
    h = h + pg.matmul(pg.relu(pg.matmul(h, w["w1"])), w["w2"])
    return pg.matmul(h, w["wout"]), k_cache, v_cache


def _weights_and_start():
    w = {n: pg.create_parameter(list(s.shape), "float32", name=n) for n, s in make_weights().items()}
    start = pg.data("start", [BATCH, 1], "int64")
    return w, start


def greedy_program():
    """tokens [BATCH, STEPS + 1]: the start token, then each step's most likely next token."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        w, start = _weights_and_start()
        empty = pg.fill_constant([BATCH, 0, WIDTH], "float32", 0.0)

        def body(t, tok, tokens, k_cache, v_cache):
            logits, k_cache, v_cache = decoder_step(w, t, tok, k_cache, v_cache, BATCH)
            tok = pg.unsqueeze(pg.argmax(logits, axis=-1), [1])
            return [t + 1, tok, pg.concat([tokens, tok], axis=1), k_cache, v_cache]
        t = pg.fill_constant([1], "int64", 0)
        loop = pg.static.nn.while_loop(lambda t, *_: t < STEPS, body, [t, start, start * 1, empty, empty * 1.0],
                                       is_test=True)
    return main, startup, start, loop[2]


def beam_program():
    """tokens [BATCH * BEAM, STEPS + 1] and scores [BATCH * BEAM] (summed log-probabilities),
    beams of one batch row in descending score order: top_k over every beam's extensions,
    then the caches and tokens gathered from the beams kept."""
    rows = BATCH * BEAM
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        w, start = _weights_and_start()
        first = np.tile(np.array([0.0] + [-1e9] * (BEAM - 1), np.float32), BATCH)  # one live beam at first
        scores = pg.assign(first)
        base = pg.assign(np.repeat(np.arange(BATCH) * BEAM, BEAM).astype(np.int64))  # each row's batch's first beam
        tok = pg.reshape(pg.tile(start, [1, BEAM]), [rows, 1])
        empty = pg.fill_constant([rows, 0, WIDTH], "float32", 0.0)

        def body(t, tok, tokens, scores, k_cache, v_cache):
            logits, k_cache, v_cache = decoder_step(w, t, tok, k_cache, v_cache, rows)
            total = pg.log_softmax(logits) + pg.unsqueeze(scores, [1])
            best, index = pg.topk(pg.reshape(total, [BATCH, BEAM * VOCAB]), BEAM)
            vocab = pg.full([1], VOCAB, "int64")
            source = pg.reshape(pg.floor_divide(index, vocab), [rows]) + base  # the beam each new row extends
            tok = pg.reshape(pg.remainder(index, vocab), [rows, 1])
            tokens = pg.concat([pg.gather(tokens, source), tok], axis=1)
            return [t + 1, tok, tokens, pg.reshape(best, [rows]),
                    pg.gather(k_cache, source), pg.gather(v_cache, source)]
        t = pg.fill_constant([1], "int64", 0)
        loop = pg.static.nn.while_loop(lambda t, *_: t < STEPS, body,
                                       [t, tok, tok * 1, scores, empty, empty * 1.0], is_test=True)
    return main, startup, start, loop[2], loop[3]


# -- the Python-loop reference -------------------------------------------------------------------
def reference_step(w, t, tok, k_cache, v_cache):
    h = w["emb"][tok] + w["pos"][t]
    k_cache = np.concatenate([k_cache, (h @ w["wk"])[:, None]], axis=1)
    v_cache = np.concatenate([v_cache, (h @ w["wv"])[:, None]], axis=1)
    s = np.einsum("rd,rtd->rt", h @ w["wq"], k_cache) / np.sqrt(WIDTH)
    a = np.exp(s - s.max(axis=1, keepdims=True))
    a /= a.sum(axis=1, keepdims=True)
    h = h + np.einsum("rt,rtd->rd", a, v_cache) @ w["wo"]
    h = h + np.maximum(h @ w["w1"], 0) @ w["w2"]
    return h @ w["wout"], k_cache, v_cache


def reference_greedy(w, start):
    tokens, caches = [start], (np.zeros((len(start), 0, WIDTH)),) * 2
    for t in range(STEPS):
        logits, *caches = reference_step(w, t, tokens[-1], *caches)
        tokens.append(logits.argmax(axis=1))
    return np.stack(tokens, axis=1)


def reference_beam(w, start):
    rows = np.repeat(start, BEAM)
    scores = np.tile([0.0] + [-1e9] * (BEAM - 1), len(start))
    tokens, caches = rows[:, None], (np.zeros((len(rows), 0, WIDTH)),) * 2
    for t in range(STEPS):
        logits, *caches = reference_step(w, t, tokens[:, -1], *caches)
        logp = logits - logits.max(axis=1, keepdims=True)
        logp -= np.log(np.exp(logp).sum(axis=1, keepdims=True))
        total = (logp + scores[:, None]).reshape(len(start), BEAM * VOCAB)
        index = np.argsort(-total, axis=1, kind="stable")[:, :BEAM]
        scores = np.take_along_axis(total, index, axis=1).reshape(-1)
        source = (index // VOCAB + np.arange(len(start))[:, None] * BEAM).reshape(-1)
        tokens = np.concatenate([tokens[source], (index % VOCAB).reshape(-1, 1)], axis=1)
        caches = [c[source] for c in caches]
    return tokens, scores


# -- export, run, compare ------------------------------------------------------------------------
def export_and_run(build, out_dir: Path, name: str, start: np.ndarray) -> list:
    """Build, save as an inference model, run with the Predictor; returns its outputs."""
    main, startup, start_var, *fetches = build()
    exe, scope = Executor(), Scope()
    for n, value in make_weights().items():
        scope.set(n, value)
    prefix = out_dir / name
    pg.io.save_inference_model(str(prefix), [start_var], fetches, exe, program=main, scope=scope)
    predictor = inference.create_predictor(inference.Config(str(prefix)))
    predictor.get_input_handle("start").copy_from_cpu(start)
    predictor.run()
    return [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write the models (default: a temporary folder)")
    args = parser.parse_args(argv)
    w = {n: v.astype(np.float64) for n, v in make_weights().items()}
    start = np.array([[1], [5]], np.int64)
    with tempfile.TemporaryDirectory() as tmp:
        out_dir = args.out or Path(tmp)
        out_dir.mkdir(parents=True, exist_ok=True)
        greedy, = export_and_run(greedy_program, out_dir, "greedy", start)
        beams, scores = export_and_run(beam_program, out_dir, "beam", start)
    want = reference_greedy(w, start[:, 0])
    print("greedy tokens:", greedy.tolist())
    assert np.array_equal(greedy, want), f"greedy decoding differs from the Python loop: {want.tolist()}"
    want_beams, want_scores = reference_beam(w, start[:, 0])
    print("beam 0 tokens:", beams.reshape(BATCH, BEAM, -1)[:, 0].tolist())
    assert np.array_equal(beams, want_beams), "beam search differs from the Python loop"
    assert np.allclose(scores, want_scores, rtol=1e-4, atol=1e-4), (scores, want_scores)
    print(f"greedy and beam search (width {BEAM}) over {STEPS} steps: the exported programs match "
          f"the Python loop token for token")


if __name__ == "__main__":
    main()
