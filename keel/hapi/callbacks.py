"""Callbacks of the fit loop (paddle.callbacks): hooks called at the start and end of
training, epochs, batches and evaluation, with the logs so far (`loss`, metric values,
`samples_per_sec`)."""
from __future__ import annotations

import csv
import json
import os
import sys
import time

import numpy as np

__all__ = ["Callback", "ProgBarLogger", "ModelCheckpoint", "EarlyStopping", "LRScheduler", "CSVLogger",
           "JSONLogger"]


class Callback:
    """Base class of the fit loop's callbacks: override the hooks you need; `self.model`
    is the Model being trained and `self.params` holds epochs, steps, save_dir.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> rng = np.random.default_rng(0)
        >>> data = paddle.io.TensorDataset([rng.random((32, 4), dtype="float32"), rng.integers(0, 2, (32, 1))])
        >>> model = paddle.Model(paddle.nn.Linear(4, 2), inputs=[InputSpec([None, 4], "float32", "x")],
        ...                      labels=[InputSpec([None, 1], "int64", "label")])
        >>> model.prepare(paddle.optimizer.SGD(0.1, parameters=model.parameters()), paddle.nn.CrossEntropyLoss(),
        ...               paddle.metric.Accuracy())
        >>> class LossHistory(paddle.callbacks.Callback):
        ...     def on_train_begin(self, logs=None):
        ...         self.losses = []
        ...     def on_train_batch_end(self, step, logs=None):
        ...         self.losses.append(logs["loss"])
        >>> history = LossHistory()
        >>> _ = model.fit(data, batch_size=8, epochs=2, verbose=0, callbacks=[history])
        >>> len(history.losses), history.params["epochs"]          # 4 steps in each of 2 epochs
        (8, 2)
    """
    def __init__(self):
        self.model = None
        self.params: dict = {}

    def set_model(self, model):
        self.model = model

    def set_params(self, params: dict):
        self.params = params

    def on_train_begin(self, logs=None): pass
    def on_train_end(self, logs=None): pass
    def on_epoch_begin(self, epoch, logs=None): pass
    def on_epoch_end(self, epoch, logs=None): pass
    def on_train_batch_begin(self, step, logs=None): pass
    def on_train_batch_end(self, step, logs=None): pass
    def on_eval_begin(self, logs=None): pass
    def on_eval_end(self, logs=None): pass
    def on_eval_batch_begin(self, step, logs=None): pass
    def on_eval_batch_end(self, step, logs=None): pass
    def on_predict_begin(self, logs=None): pass
    def on_predict_end(self, logs=None): pass
    def on_predict_batch_begin(self, step, logs=None): pass
    def on_predict_batch_end(self, step, logs=None): pass


def _format(logs: dict) -> str:
    parts = []
    for key, value in logs.items():
        if key in ("batch_size", "steps"):
            continue
        if isinstance(value, (list, tuple, np.ndarray)):
            value = np.asarray(value).ravel()
            value = value[0] if value.size == 1 else value
        parts.append(f"{key}: {value:.4f}" if isinstance(value, (float, np.floating)) else f"{key}: {value}")
    return " - ".join(parts)


class ProgBarLogger(Callback):
    """Prints `Epoch e/E`, then every `log_freq` steps `step s/S - loss: ... - acc: ... -
    samples/s: ...` (verbose 2: one line per log; 1: one line per epoch; 0: silent).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> rng = np.random.default_rng(0)
        >>> data = paddle.io.TensorDataset([rng.random((32, 4), dtype="float32"), rng.integers(0, 2, (32, 1))])
        >>> model = paddle.Model(paddle.nn.Linear(4, 2), inputs=[InputSpec([None, 4], "float32", "x")],
        ...                      labels=[InputSpec([None, 1], "int64", "label")])
        >>> model.prepare(paddle.optimizer.SGD(0.1, parameters=model.parameters()), paddle.nn.CrossEntropyLoss(),
        ...               paddle.metric.Accuracy())
        >>> logger = paddle.callbacks.ProgBarLogger(log_freq=2, verbose=2)
        >>> _ = model.fit(data, batch_size=8, epochs=1, verbose=0, callbacks=[logger])
        Epoch 1/1
        step 2/4 - loss: ... - acc: ... - samples/s: ...
        step 4/4 - loss: ... - acc: ... - samples/s: ...
        epoch 1 - loss: ... - acc: ... - samples/s: ...
    """

    def __init__(self, log_freq=10, verbose=2, file=None):
        super().__init__()
        self.log_freq, self.verbose = max(1, int(log_freq)), int(verbose)
        self.file = file

    def _print(self, text):
        print(text, file=self.file or sys.stdout, flush=True)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start, self._samples = time.perf_counter(), 0
        if self.verbose:
            self._print(f"Epoch {epoch + 1}/{self.params.get('epochs', '?')}")

    def on_train_batch_end(self, step, logs=None):
        logs = logs or {}
        self._samples += int(logs.get("batch_size", 0))
        if self.verbose == 2 and (step + 1) % self.log_freq == 0:
            speed = self._samples / max(time.perf_counter() - self._epoch_start, 1e-9)
            self._print(f"step {step + 1}/{self.params.get('steps', '?')} - {_format(logs)} - "
                        f"samples/s: {speed:.1f}")

    def on_epoch_end(self, epoch, logs=None):
        if self.verbose:
            speed = self._samples / max(time.perf_counter() - self._epoch_start, 1e-9)
            self._print(f"epoch {epoch + 1} - {_format(logs or {})} - samples/s: {speed:.1f}")

    def on_eval_end(self, logs=None):
        if self.verbose:
            self._print(f"Eval - {_format(logs or {})}")


class ModelCheckpoint(Callback):
    """Saves a training checkpoint to `save_dir/<epoch>` every `save_freq` epochs and to
    `save_dir/final` at the end.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> rng = np.random.default_rng(0)
        >>> data = paddle.io.TensorDataset([rng.random((32, 4), dtype="float32"), rng.integers(0, 2, (32, 1))])
        >>> model = paddle.Model(paddle.nn.Linear(4, 2), inputs=[InputSpec([None, 4], "float32", "x")],
        ...                      labels=[InputSpec([None, 1], "int64", "label")])
        >>> model.prepare(paddle.optimizer.SGD(0.1, parameters=model.parameters()), paddle.nn.CrossEntropyLoss(),
        ...               paddle.metric.Accuracy())
        >>> checkpoint = paddle.callbacks.ModelCheckpoint(save_freq=1, save_dir="checkpoints")
        >>> _ = model.fit(data, batch_size=8, epochs=2, verbose=0, callbacks=[checkpoint])
        >>> import os
        >>> sorted(os.listdir("checkpoints"))          # epochs 0 and 1, and the end (Model.save's files)
        ['0.ckpt', '1.ckpt', 'final.ckpt']
    """

    def __init__(self, save_freq=1, save_dir=None):
        super().__init__()
        self.save_freq, self.save_dir = max(1, int(save_freq)), save_dir

    def on_epoch_end(self, epoch, logs=None):
        if self.save_dir and (epoch + 1) % self.save_freq == 0:
            self.model.save(os.path.join(self.save_dir, str(epoch)))

    def on_train_end(self, logs=None):
        if self.save_dir:
            self.model.save(os.path.join(self.save_dir, "final"))


class EarlyStopping(Callback):
    """Stops training when the evaluated `monitor` has not improved by `min_delta` for
    `patience` evaluations; with `save_best_model`, the best model is saved to
    `save_dir/best_model` (the fit's save_dir).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> rng = np.random.default_rng(0)
        >>> data = paddle.io.TensorDataset([rng.random((32, 4), dtype="float32"), rng.integers(0, 2, (32, 1))])
        >>> model = paddle.Model(paddle.nn.Linear(4, 2), inputs=[InputSpec([None, 4], "float32", "x")],
        ...                      labels=[InputSpec([None, 1], "int64", "label")])
        >>> model.prepare(paddle.optimizer.SGD(0.1, parameters=model.parameters()), paddle.nn.CrossEntropyLoss(),
        ...               paddle.metric.Accuracy())
        >>> stop = paddle.callbacks.EarlyStopping(monitor="loss", mode="min", patience=0, min_delta=10.0,
        ...                                       verbose=0, save_best_model=False)
        >>> history = model.fit(data, eval_data=data, batch_size=8, epochs=5, verbose=0, callbacks=[stop])
        >>> len(history), model.stop_training           # no eval loss 10 below the best: stopped after 2
        (2, True)
    """

    def __init__(self, monitor="loss", mode="auto", patience=0, verbose=1, min_delta=0, baseline=None,
                 save_best_model=True):
        super().__init__()
        if mode not in ("auto", "min", "max"):
            raise ValueError(f"EarlyStopping: mode must be 'auto', 'min' or 'max', got {mode!r}")
        self.monitor, self.patience, self.verbose = monitor, int(patience), int(verbose)
        self.min_delta, self.baseline, self.save_best_model = abs(float(min_delta)), baseline, save_best_model
        self.mode = mode if mode != "auto" else ("max" if "acc" in monitor or "auc" in monitor else "min")
        self.best = None
        self.wait = 0
        self.stopped_epoch = None

    def on_train_begin(self, logs=None):
        self.wait, self.stopped_epoch = 0, None
        self.best = self.baseline

    def _better(self, value):
        if self.best is None:
            return True
        return value < self.best - self.min_delta if self.mode == "min" else value > self.best + self.min_delta

    def on_eval_end(self, logs=None):
        if not logs or self.monitor not in logs:
            return
        value = float(np.asarray(logs[self.monitor]).ravel()[0])
        if self._better(value):
            self.best, self.wait = value, 0
            save_dir = self.params.get("save_dir")
            if self.save_best_model and save_dir:
                self.model.save(os.path.join(save_dir, "best_model"))
        else:
            self.wait += 1
            if self.wait > self.patience:
                self.model.stop_training = True
                self.stopped_epoch = self.params.get("epoch")
                if self.verbose:
                    print(f"EarlyStopping: {self.monitor} has not improved for {self.wait} evaluation(s); "
                          f"stopping", flush=True)


class LRScheduler(Callback):
    """Steps the optimizer's LRScheduler after every batch (`by_step`) or epoch (`by_epoch`).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> rng = np.random.default_rng(0)
        >>> data = paddle.io.TensorDataset([rng.random((32, 4), dtype="float32"), rng.integers(0, 2, (32, 1))])
        >>> model = paddle.Model(paddle.nn.Linear(4, 2), inputs=[InputSpec([None, 4], "float32", "x")],
        ...                      labels=[InputSpec([None, 1], "int64", "label")])
        >>> scheduler = paddle.optimizer.lr.StepDecay(learning_rate=0.1, step_size=1, gamma=0.5)
        >>> model.prepare(paddle.optimizer.SGD(scheduler, parameters=model.parameters()), paddle.nn.CrossEntropyLoss())
        >>> by_epoch = paddle.callbacks.LRScheduler(by_step=False, by_epoch=True)
        >>> _ = model.fit(data, batch_size=8, epochs=3, verbose=0, callbacks=[by_epoch])
        >>> scheduler.last_epoch, scheduler()
        (3, 0.0125)
    """

    def __init__(self, by_step=True, by_epoch=False):
        super().__init__()
        if by_step == by_epoch:
            raise ValueError("LRScheduler: choose one of by_step and by_epoch")
        self.by_step = by_step

    def _step(self):
        schedule = getattr(self.model._optimizer, "_learning_rate", None)
        if hasattr(schedule, "step"):
            schedule.step()

    def on_train_batch_end(self, step, logs=None):
        if self.by_step:
            self._step()

    def on_epoch_end(self, epoch, logs=None):
        if not self.by_step:
            self._step()


class _FileLogger(Callback):
    """One record per epoch: the training logs, and `eval_`-prefixed logs when the epoch
    ended with an evaluation. Written when training ends."""

    def __init__(self, path):
        super().__init__()
        self.path = os.fspath(path)
        self.records: list[dict] = []

    def on_epoch_end(self, epoch, logs=None):
        self.records.append({"epoch": epoch + 1,
                             **{k: _plain(v) for k, v in (logs or {}).items() if k != "batch_size"}})

    def on_eval_end(self, logs=None):  # the fit loop evaluates after the epoch's end
        if self.records:
            self.records[-1].update({f"eval_{k}": _plain(v) for k, v in (logs or {}).items()})

    def on_train_end(self, logs=None):
        directory = os.path.dirname(self.path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        self.write()


def _plain(value):
    value = np.asarray(value).ravel()
    return float(value[0]) if value.size == 1 else [float(v) for v in value]


class CSVLogger(_FileLogger):
    """Writes one row per epoch (the training logs, and `eval_` columns after an evaluation)
    to a CSV file when training ends.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> rng = np.random.default_rng(0)
        >>> data = paddle.io.TensorDataset([rng.random((32, 4), dtype="float32"), rng.integers(0, 2, (32, 1))])
        >>> model = paddle.Model(paddle.nn.Linear(4, 2), inputs=[InputSpec([None, 4], "float32", "x")],
        ...                      labels=[InputSpec([None, 1], "int64", "label")])
        >>> model.prepare(paddle.optimizer.SGD(0.1, parameters=model.parameters()), paddle.nn.CrossEntropyLoss(),
        ...               paddle.metric.Accuracy())
        >>> _ = model.fit(data, eval_data=data, batch_size=8, epochs=2, verbose=0,
        ...               callbacks=[paddle.callbacks.CSVLogger("logs/train.csv")])
        >>> import csv
        >>> rows = list(csv.DictReader(open("logs/train.csv")))
        >>> len(rows), list(rows[0])
        (2, ['epoch', 'loss', 'acc', 'eval_loss', 'eval_acc'])
    """
    def write(self):
        keys = list(dict.fromkeys(k for r in self.records for k in r))
        with open(self.path, "w", newline="") as f:
            writer = csv.DictWriter(f, keys)
            writer.writeheader()
            writer.writerows(self.records)


class JSONLogger(_FileLogger):
    """Writes the list of per-epoch records (as CSVLogger's rows) to a JSON file when
    training ends.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> rng = np.random.default_rng(0)
        >>> data = paddle.io.TensorDataset([rng.random((32, 4), dtype="float32"), rng.integers(0, 2, (32, 1))])
        >>> model = paddle.Model(paddle.nn.Linear(4, 2), inputs=[InputSpec([None, 4], "float32", "x")],
        ...                      labels=[InputSpec([None, 1], "int64", "label")])
        >>> model.prepare(paddle.optimizer.SGD(0.1, parameters=model.parameters()), paddle.nn.CrossEntropyLoss(),
        ...               paddle.metric.Accuracy())
        >>> _ = model.fit(data, batch_size=8, epochs=2, verbose=0,
        ...               callbacks=[paddle.callbacks.JSONLogger("logs/train.json")])
        >>> import json
        >>> records = json.load(open("logs/train.json"))
        >>> [r["epoch"] for r in records], sorted(records[0])
        ([1, 2], ['acc', 'epoch', 'loss'])
    """
    def write(self):
        with open(self.path, "w") as f:
            json.dump(self.records, f, indent=1)
