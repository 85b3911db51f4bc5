"""The three model families the builder API is meant for (an MLP, a CNN with residual and
depthwise blocks, a Transformer encoder), built with Keel's layers, trained with
`minimize`: each program survives serialize -> parse unchanged (vars, ops, attrs,
shapes), and each runs a forward and a training step."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope


def mlp():
    x = pg.data("x", [-1, 64])
    label = pg.data("label", [-1, 1], "int64")
    h = pg.nn.fc(x, 128, activation="relu")
    h = pg.nn.dropout(h, 0.1)
    logits = pg.nn.fc(h, 10)
    feed = {"x": np.random.default_rng(0).standard_normal((4, 64)).astype(np.float32),
            "label": np.array([[1], [2], [3], [4]])}
    return logits, label, feed


def cnn():
    """LeNet/ResNet/MobileNet-style: conv+BN+relu, a strided projection shortcut, a
    depthwise separable block, max and adaptive average pooling, flatten."""
    x = pg.data("image", [-1, 3, 16, 16])
    label = pg.data("label", [-1, 1], "int64")
    h = pg.nn.batch_norm(pg.nn.conv2d(x, 8, 3, padding=1), act="relu")
    h = pg.nn.pool2d(h, 2, "max", 2)                                   # [N, 8, 8, 8]
    branch = pg.nn.batch_norm(pg.nn.conv2d(h, 16, 3, stride=2, padding=1), act="relu")
    branch = pg.nn.batch_norm(pg.nn.conv2d(branch, 16, 3, padding="SAME"))
    shortcut = pg.nn.batch_norm(pg.nn.conv2d(h, 16, 1, stride=2))
    h = pg.relu(branch + shortcut)                                     # [N, 16, 4, 4]
    h = pg.nn.conv2d(h, 16, 3, padding=1, groups=16)                  # depthwise
    h = pg.nn.relu6(pg.nn.batch_norm(pg.nn.conv2d(h, 32, 1)))         # pointwise
    h = pg.nn.adaptive_avg_pool2d(h, 1)
    logits = pg.nn.fc(pg.flatten(h), 10)
    feed = {"image": np.random.default_rng(1).standard_normal((2, 3, 16, 16)).astype(np.float32),
            "label": np.array([[3], [7]])}
    return logits, label, feed


def transformer(d=32, heads=4, seq=6, vocab=50):
    """One post-norm encoder layer over token and position embeddings, mean-pooled."""
    ids = pg.data("ids", [-1, seq], "int64")
    label = pg.data("label", [-1, 1], "int64")
    pos = pg.unsqueeze(pg.arange(0, seq, dtype="int64"), [0])
    h = pg.nn.embedding(ids, [vocab, d]) + pg.nn.embedding(pos, [seq, d])
    q, k, v = (pg.nn.fc(h, d, num_flatten_dims=2) for _ in range(3))

    def split_heads(t):
        return pg.transpose(pg.reshape(t, [0, seq, heads, d // heads]), [0, 2, 1, 3])
    q, k, v = split_heads(q), split_heads(k), split_heads(v)
    scores = pg.scale(pg.matmul(q, k, transpose_y=True), (d // heads) ** -0.5)
    attn = pg.matmul(pg.nn.dropout(pg.softmax(scores), 0.1), v)
    attn = pg.reshape(pg.transpose(attn, [0, 2, 1, 3]), [0, seq, d])
    h = pg.nn.layer_norm(h + pg.nn.fc(attn, d, num_flatten_dims=2), begin_norm_axis=2)
    ffn = pg.nn.fc(pg.gelu(pg.nn.fc(h, 4 * d, num_flatten_dims=2)), d, num_flatten_dims=2)
    h = pg.nn.layer_norm(h + ffn, begin_norm_axis=2)
    logits = pg.nn.fc(pg.reduce_mean(h, dim=[1]), 10)
    feed = {"ids": np.random.default_rng(2).integers(0, vocab, (3, seq)), "label": np.array([[0], [5], [9]])}
    return logits, label, feed


FAMILIES = {"mlp": mlp, "cnn": cnn, "transformer": transformer}


def build(family):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = main.random_seed = 7
    with pg.program_guard(main, startup), pg.unique_name.guard():
        logits, label, feed = FAMILIES[family]()
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
        test_program = main.clone(for_test=True)
        pg.optimizer.Adam(1e-3).minimize(loss)
    return main, startup, test_program, logits, loss, feed


def _signature(program):
    return [([(v.name, v.shape, v.dtype, v.persistable, v.stop_gradient) for v in b.vars.values()],
             [(op.type, op.inputs, op.outputs, sorted(op.attrs.items(), key=lambda kv: kv[0]))
              for op in b.ops]) for b in program.blocks]


@pytest.mark.parametrize("family", FAMILIES)
def test_family_round_trips(family):
    main, startup, test_program, *_ = build(family)
    for prog in (main, startup, test_program):
        again = pg.Program.parse_from_string(prog.serialize_to_string())
        assert again == prog
        assert _signature(again) == _signature(prog)
        assert str(again) == str(prog)
        assert again.serialize_to_string() == prog.serialize_to_string()


@pytest.mark.parametrize("family", FAMILIES)
def test_family_trains(family):
    main, startup, test_program, logits, loss, feed = build(family)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0]) for _ in range(15)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    out, = exe.run(test_program, feed={k: v for k, v in feed.items() if k != "label"},
                   fetch_list=[logits], scope=scope)
    assert out.shape == (len(feed["label"]), 10)
