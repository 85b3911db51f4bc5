"""program.nn's Transformer layers against a numpy transformer written from the definition
(post-norm and pre-norm, relu and gelu, masks), in eval mode with the trained-form weights
read from the scope; a GPT-style causal decoder; decoder cross attention."""
import math
import zlib

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope

B, S, T_, E, H, F = 2, 5, 4, 8, 2, 16


def _np_linear(scope, layer, x):
    return x @ scope.get(layer._parameters["weight"].name) + scope.get(layer._parameters["bias"].name)


def _np_norm(scope, layer, x, eps=1e-5):
    mu, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * scope.get(layer._parameters["weight"].name) + \
        scope.get(layer._parameters["bias"].name)


def _np_attention(scope, attn, q_in, kv_in, mask):
    def heads(x):
        return x.reshape(x.shape[0], x.shape[1], attn.num_heads, attn.head_dim).transpose(0, 2, 1, 3)
    q, k, v = (heads(_np_linear(scope, p, x)) for p, x in ((attn.q_proj, q_in), (attn.k_proj, kv_in),
                                                            (attn.v_proj, kv_in)))
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(attn.head_dim)
    if mask is not None:
        scores = scores + (np.where(mask, 0.0, -1e9) if mask.dtype == bool else mask)
    w = np.exp(scores - scores.max(-1, keepdims=True))
    w /= w.sum(-1, keepdims=True)
    out = (w @ v).transpose(0, 2, 1, 3).reshape(q_in.shape[0], q_in.shape[1], attn.embed_dim)
    return _np_linear(scope, attn.out_proj, out)


def _np_act(name, x):
    if name == "relu":
        return np.maximum(x, 0)
    from math import erf
    return 0.5 * x * (1 + np.vectorize(erf)(x / math.sqrt(2)))


def _np_residual(x, norm, body, before):
    out = x + body(norm(x) if before else x)
    return out if before else norm(out)


def _np_encoder_layer(scope, layer, x, mask, act):
    before = layer.normalize_before
    x = _np_residual(x, lambda v: _np_norm(scope, layer.norm1, v),
                     lambda v: _np_attention(scope, layer.self_attn, v, v, mask), before)
    return _np_residual(x, lambda v: _np_norm(scope, layer.norm2, v),
                        lambda v: _np_linear(scope, layer.linear2, _np_act(act, _np_linear(scope, layer.linear1, v))),
                        before)


def _run(build, feeds):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 11
    with pg.program_guard(main, startup), pg.unique_name.guard():
        layer, out = build()
    scope, exe = Scope(), Executor()
    exe.run(startup, scope=scope)
    for p in main.all_parameters():   # distinct values per element: a swapped weight cannot pass
        scope.set(p.name, np.random.default_rng(zlib.crc32(p.name.encode())).standard_normal(p.shape)
                  .astype(np.float32) * (0.3 if len(p.shape) > 1 else 0.1) + (1.0 if p.name.endswith("w_0")
                                                                             and len(p.shape) == 1 else 0.0))
    got, = exe.run(main, feed=feeds, fetch_list=[out], scope=scope)
    return layer, scope, got


@pytest.mark.parametrize("before, act, masked", [(False, "relu", False), (True, "gelu", True), (False, "gelu", True)])
def test_encoder_matches_numpy(before, act, masked):
    x = np.random.default_rng(0).standard_normal((B, S, E)).astype(np.float32)
    mask = np.random.default_rng(1).random((B, 1, S, S)) > 0.3
    mask[..., 0] = True                                   # every row attends to something

    def build():
        xin = pg.data("x", [-1, S, E])
        m = pg.data("mask", [-1, 1, S, S], "bool") if masked else None
        layer = pg.nn.TransformerEncoderLayer(E, H, F, dropout=0.1, activation=act, normalize_before=before)
        enc = pg.nn.TransformerEncoder(layer, 2, norm=pg.nn.LayerNorm(E) if before else None)
        enc.eval()
        return enc, enc(xin, m)
    feeds = {"x": x, **({"mask": mask} if masked else {})}
    enc, scope, got = _run(build, feeds)
    want = x.astype(np.float64)
    for layer in enc.layers:
        want = _np_encoder_layer(scope, layer, want, mask if masked else None, act)
    if enc.norm is not None:
        want = _np_norm(scope, enc.norm, want)
    assert len({p.name for p in enc.parameters()}) == len(enc.parameters()) == 2 * 16 + (2 if before else 0)
    np.testing.assert_allclose(got, want, rtol=2e-4, atol=2e-4)


def test_gpt_style_causal_decoder_does_not_look_ahead():
    vocab = 11
    ids = np.random.default_rng(2).integers(0, vocab, (B, S))
    causal = np.triu(np.full((S, S), -1e9, np.float32), 1)[None, None]

    def build():
        tokens, m = pg.data("ids", [-1, S], "int64"), pg.data("mask", [1, 1, S, S])
        embed, pos = pg.nn.Embedding(vocab, E), pg.create_parameter([S, E], "float32")
        blocks = pg.nn.TransformerEncoder(pg.nn.TransformerEncoderLayer(E, H, F, 0.0, normalize_before=True), 2,
                                          pg.nn.LayerNorm(E))
        head = pg.nn.Linear(E, vocab)
        return None, head(blocks(pg.add(embed(tokens), pos), m))
    _, _, full = _run(build, {"ids": ids, "mask": causal})
    changed = ids.copy()
    changed[:, -1] = (changed[:, -1] + 1) % vocab          # a later token changes...
    _, _, again = _run(build, {"ids": changed, "mask": causal})
    np.testing.assert_allclose(again[:, :-1], full[:, :-1], rtol=1e-5, atol=1e-6)   # ...no earlier output
    assert np.abs(again[:, -1] - full[:, -1]).max() > 1e-3


def test_decoder_cross_attends_to_memory():
    tgt = np.random.default_rng(3).standard_normal((B, T_, E)).astype(np.float32)
    memory = np.random.default_rng(4).standard_normal((B, S, E)).astype(np.float32)

    def build():
        t, m = pg.data("tgt", [-1, T_, E]), pg.data("memory", [-1, S, E])
        dec = pg.nn.TransformerDecoder(pg.nn.TransformerDecoderLayer(E, H, F, 0.0), 1)
        return dec, dec(t, m)
    dec, scope, got = _run(build, {"tgt": tgt, "memory": memory})
    layer = dec.layers[0]
    x = tgt.astype(np.float64)
    x = _np_norm(scope, layer.norm1, x + _np_attention(scope, layer.self_attn, x, x, None))
    x = _np_norm(scope, layer.norm2, x + _np_attention(scope, layer.cross_attn, x, memory, None))
    x = _np_norm(scope, layer.norm3, x + _np_linear(scope, layer.linear2,
                                                    np.maximum(_np_linear(scope, layer.linear1, x), 0)))
    np.testing.assert_allclose(got, x, rtol=2e-4, atol=2e-4)
