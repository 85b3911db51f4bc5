"""hapi: Model.fit/evaluate/predict/save over a Layer, callbacks and metrics."""
import csv

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Config, create_predictor
from keel.executor.eager import to_tensor
from keel.hapi import Model, callbacks, metrics
from keel.program.static import InputSpec


class Net(pg.nn.Layer):
    def __init__(self):
        super().__init__()
        self.body = pg.nn.Sequential(pg.nn.Linear(4, 16), pg.nn.ReLU(), pg.nn.Dropout(0.1), pg.nn.Linear(16, 2))

    def forward(self, x):
        return self.body(x)


def dataset(n=64, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)[:, None]
    return pg.io.TensorDataset([x, y])


def model(lr=0.05, metric=None):
    with pg.unique_name.guard():
        m = Model(Net(), inputs=[InputSpec([None, 4], "float32", "x")],
                  labels=[InputSpec([None, 1], "int64", "label")])
        m.prepare(pg.optimizer.Adam(lr, parameters=m.parameters()), pg.nn.CrossEntropyLoss(),
                  metric or metrics.Accuracy())
    return m


def test_fit_evaluate_predict_and_serve(tmp_path, capsys):
    m = model()
    history = m.fit(dataset(), dataset(32, 1), batch_size=16, epochs=8, verbose=1)
    out = capsys.readouterr().out
    assert "Epoch 1/8" in out and "samples/s" in out and "Eval - loss" in out
    assert len(history) == 8 and history[-1]["loss"] < history[0]["loss"]
    assert history[-1]["eval_acc"] > 0.85
    logs = m.evaluate(dataset(32, 1), batch_size=8, verbose=0)
    assert logs["acc"] == history[-1]["eval_acc"] and logs["loss"] == pytest.approx(history[-1]["eval_loss"])
    preds = m.predict(dataset(32, 1), batch_size=8)
    assert len(preds) == 1 and len(preds[0]) == 4 and preds[0][0].shape == (8, 2)
    stacked, = m.predict(dataset(32, 1), batch_size=8, stack_outputs=True)
    np.testing.assert_array_equal(stacked, np.concatenate(preds[0]))
    labels = dataset(32, 1).tensors[1][:, 0]
    assert (stacked.argmax(1) == labels).mean() == pytest.approx(logs["acc"])
    m.save(str(tmp_path / "net"), training=False)
    pred = create_predictor(Config(str(tmp_path / "net")))
    served, = pred.run([dataset(32, 1).tensors[0]])
    np.testing.assert_allclose(served, stacked, rtol=1e-5, atol=1e-6)


def test_save_and_load_a_training_checkpoint(tmp_path):
    m = model()
    m.fit(dataset(), batch_size=16, epochs=2, verbose=0)
    m.save(str(tmp_path / "ckpt" / "model"))
    want = m.predict(dataset(8, 2), batch_size=8, stack_outputs=True)[0]
    m.fit(dataset(), batch_size=16, epochs=1, verbose=0)
    assert not np.allclose(m.predict(dataset(8, 2), batch_size=8, stack_outputs=True)[0], want)
    m.load(str(tmp_path / "ckpt" / "model"))
    np.testing.assert_array_equal(m.predict(dataset(8, 2), batch_size=8, stack_outputs=True)[0], want)


def test_early_stopping_checkpoints_and_csv_logging(tmp_path):
    m = model(lr=0.0)                     # nothing changes: the eval loss never improves
    log = tmp_path / "log.csv"
    stop = callbacks.EarlyStopping("loss", patience=1, verbose=0)
    history = m.fit(dataset(), dataset(16, 1), batch_size=16, epochs=10, verbose=0, save_dir=str(tmp_path / "ck"),
                    callbacks=[stop, callbacks.CSVLogger(log)])
    assert len(history) == 3 and m.stop_training   # best at 1, no better at 2 and 3: stop after patience+1
    rows = list(csv.DictReader(open(log)))
    assert [r["epoch"] for r in rows] == ["1", "2", "3"] and "eval_loss" in rows[0]
    saved = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert saved == ["0.ckpt", "1.ckpt", "2.ckpt", "best_model.ckpt", "final.ckpt"]


def test_the_lr_schedule_steps_once_per_batch():
    schedule = pg.lr.StepDecay(0.1, step_size=3, gamma=0.5)
    with pg.unique_name.guard():
        m = Model(Net(), inputs=[InputSpec([None, 4], "float32", "x")], labels=[InputSpec([None, 1], "int64")])
        m.prepare(pg.optimizer.SGD(schedule, parameters=m.parameters()), pg.nn.CrossEntropyLoss())
    m.fit(dataset(64), batch_size=16, epochs=2, verbose=0)
    assert schedule.last_epoch == 8 and schedule() == pytest.approx(0.1 * 0.5 ** 2)


def test_metrics_against_independent_computations():
    from sklearn.metrics import precision_score, recall_score, roc_auc_score
    rng = np.random.default_rng(3)
    scores = rng.random((200, 5))
    labels = rng.integers(0, 5, 200)
    acc = metrics.Accuracy(topk=(1, 3))
    for part in np.array_split(np.arange(200), 3):
        acc.update(acc.compute(scores[part], labels[part, None]))
    top1 = (scores.argmax(1) == labels).mean()
    top3 = np.mean([labels[i] in np.argsort(-scores[i])[:3] for i in range(200)])
    assert acc.accumulate() == pytest.approx([top1, top3]) and acc.name() == ["acc_top1", "acc_top3"]
    prob, truth = rng.random(300), rng.integers(0, 2, 300)
    for cls, ref in ((metrics.Precision, precision_score), (metrics.Recall, recall_score)):
        m = cls()
        m.update(prob, truth)
        assert m.accumulate() == pytest.approx(ref(truth, prob > 0.5))
    auc = metrics.Auc()
    auc.update(np.stack([1 - prob, prob], 1), truth)
    assert auc.accumulate() == pytest.approx(roc_auc_score(truth, prob), abs=1e-3)


def test_metrics_follow_paddles_protocol_and_thresholds():
    """Accuracy's compute gives the hit matrix that update sums (labels as ids or one-hot);
    at p = 0.5 Precision counts a positive (floor(p + 0.5)) and Recall a negative (rint), as
    PaddlePaddle's metrics do."""
    scores = np.array([[0.1, 0.2, 0.3, 0.4], [0.1, 0.4, 0.3, 0.2], [0.1, 0.2, 0.4, 0.3], [0.1, 0.2, 0.3, 0.4]])
    acc = metrics.Accuracy(topk=(1, 2))
    correct = acc.compute(scores, np.array([[0], [1], [2], [3]]))
    assert correct.tolist() == [[0, 0], [1, 0], [1, 0], [1, 0]]
    assert acc.update(correct) == [0.75, 0.75]
    assert acc.update(acc.compute(scores, np.eye(4)[[3, 3, 3, 3]])) == [0.5, 0.75]    # one-hot labels
    assert acc.accumulate() == pytest.approx([5 / 8, 6 / 8])
    prob, truth = np.array([0.5, 0.5, 0.7, 0.2]), np.array([1, 0, 1, 1])
    precision, recall = metrics.Precision(), metrics.Recall()
    precision.update(prob, truth)
    recall.update(prob, truth)
    assert (precision.tp, precision.fp) == (2, 1) and precision.accumulate() == pytest.approx(2 / 3)
    assert (recall.tp, recall.fn) == (1, 2) and recall.accumulate() == pytest.approx(1 / 3)


def test_model_calls_a_paddle_style_metric_through_compute():
    """A metric written for PaddlePaddle (compute -> update) works with Model.evaluate."""
    class Seen(metrics.Metric):
        def reset(self):
            self.rows = 0

        def compute(self, pred, label):           # one array back: update gets it alone
            return np.asarray(pred).argmax(-1) == np.asarray(label).reshape(-1)

        def update(self, hits):
            self.rows += hits.size

        def accumulate(self):
            return self.rows

    seen = Seen()
    with pg.unique_name.guard():
        m = Model(Net(), inputs=[InputSpec([None, 4], "float32", "x")], labels=[InputSpec([None, 1], "int64")])
        m.prepare(None, pg.nn.CrossEntropyLoss(), seen)
    assert m.evaluate(dataset(20), batch_size=8, verbose=0)["seen"] == 20


def test_summary_counts_every_parameter_and_the_shapes_of_an_eager_run(capsys):
    """paddle.summary's rows: each called layer's output shape equals what that layer gives
    when the network runs eagerly on one sample; the totals are every parameter's size (an
    LSTM's cells included), BatchNorm's running statistics counted but not trainable."""
    from keel.hapi import summary
    net = pg.nn.Sequential(pg.nn.Conv2D(3, 4, 3, padding=1), pg.nn.BatchNorm2D(4), pg.nn.ReLU(), pg.nn.Flatten(2),
                           pg.nn.LSTM(64, 5))
    seen = {}
    handles = [layer.register_forward_post_hook(
        lambda layer, inputs, outputs: seen.setdefault(type(layer).__name__, outputs)) for layer in net.sublayers()]
    net(to_tensor(np.ones((1, 3, 8, 8), np.float32)))
    for handle in handles:
        handle.remove()
    with pg.unique_name.guard():
        totals = summary(net, (None, 3, 8, 8))
    table = capsys.readouterr().out
    sizes = {p.name: int(np.prod(p.shape)) for p in net.parameters()}
    frozen = sum(size for p, size in zip(net.parameters(), sizes.values()) if not p.trainable)
    assert frozen == 8 and totals == {"total_params": sum(sizes.values()),
                                      "trainable_params": sum(sizes.values()) - frozen}
    for name in ("Conv2D", "BatchNorm2D", "ReLU", "Flatten"):
        row = next(line for line in table.splitlines() if line.strip().startswith(name))
        assert str(list(seen[name].shape)) in row
    lstm_out, (h, c) = seen["LSTM"]
    assert str([list(lstm_out.shape), [list(h.shape), list(c.shape)]]) in table
    assert f"Total params: {sum(sizes.values()):,}" in table


def test_summary_refuses_two_free_dims_and_takes_tensors():
    from keel.hapi import summary
    with pytest.raises(ValueError, match="only the batch dim"):
        summary(pg.nn.Linear(4, 2), (None, -1))
    assert summary(pg.nn.Linear(4, 2), input=to_tensor(np.ones((3, 4), np.float32)))["total_params"] == 10
