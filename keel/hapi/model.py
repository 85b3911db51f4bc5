"""`Model`: PaddlePaddle's high-level training API (paddle.Model) over a Layer.

`prepare` builds three programs from the one network: training (train mode, loss and the
optimizer's backward and update ops), evaluation and prediction (eval mode, so dropout is
off and batch norm uses its running statistics). They share the parameters by name in the
Model's own scope, so what `fit` trains is what `evaluate`, `predict` and `save` see.
"""
from __future__ import annotations

import os

import numpy as np

import keel.program as pg
from keel.executor import Executor, Scope, load_checkpoint, save_checkpoint
from keel.hapi import callbacks as cbks
from keel.hapi.metrics import Metric
from keel.hapi.summary import summary
from keel.program.static import InputSpec

__all__ = ["Model"]


def _specs(specs, what) -> list[InputSpec]:
    if specs is None:
        return []
    specs = list(specs) if isinstance(specs, (list, tuple)) else [specs]
    for s in specs:
        if not isinstance(s, InputSpec):
            raise TypeError(f"Model: {what} must be InputSpecs, got {s!r}")
    return specs


def _as_list(value) -> list:
    if value is None:
        return []
    if isinstance(value, dict):
        return list(value.values())
    return list(value) if isinstance(value, (list, tuple)) else [value]


class _Programs:
    """One mode's program: its feeds (inputs then labels), outputs and loss."""

    def __init__(self, main, feeds, outputs, loss):
        self.main, self.feeds, self.outputs, self.loss = main, feeds, outputs, loss


class Model:
    """`Model(network, inputs=[InputSpec...], labels=[InputSpec...])`; then `prepare`,
    `fit`, `evaluate`, `predict`, `save`, `load`. Unnamed input specs are named `input_i`,
    label specs `label_i`.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel import nn
        >>> from keel.static import InputSpec
        >>> _ = paddle.seed(0)
        >>> data = paddle.io.TensorDataset([np.random.rand(64, 4).astype("float32"),
        ...                                 np.random.randint(0, 2, (64, 1))])
        >>> model = paddle.Model(nn.Linear(4, 2), inputs=[InputSpec([None, 4], "float32", "x")],
        ...                      labels=[InputSpec([None, 1], "int64", "label")])
        >>> model.prepare(paddle.optimizer.SGD(0.1, parameters=model.parameters()), nn.CrossEntropyLoss(),
        ...               paddle.metric.Accuracy())
        >>> history = model.fit(data, epochs=2, batch_size=16, verbose=0)   # one dict per epoch
        >>> len(history), sorted(history[-1])
        (2, ['acc', 'batch_size', 'loss'])
        >>> sorted(model.evaluate(data, batch_size=64, verbose=0))
        ['acc', 'loss']
        >>> _ = model.save("out/linear", training=False)   # out/linear.pdmodel + .pdiparams
    """

    def __init__(self, network, inputs=None, labels=None):
        if not isinstance(network, pg.nn.Layer):
            raise TypeError(f"Model: network must be a program.nn.Layer, got {type(network).__name__}")
        self.network = network
        self._inputs = _specs(inputs, "inputs")
        self._labels = _specs(labels, "labels")
        if not self._inputs:
            raise ValueError("Model: give inputs=[InputSpec(shape, dtype, name), ...] (Keel builds programs "
                             "from them; there is no eager run to trace)")
        self._scope = Scope()
        self._executor = Executor()
        self._optimizer = self._loss = None
        self._metrics: list[Metric] = []
        self._modes: dict[str, _Programs] = {}
        self.stop_training = False

    # -- setup -----------------------------------------------------------------------------
    def parameters(self):
        return self.network.parameters()

    def prepare(self, optimizer=None, loss=None, metrics=None):
        """Build the programs and initialize the parameters (in the Model's scope)."""
        self._optimizer, self._loss = optimizer, loss
        self._metrics = _as_list(metrics)
        for m in self._metrics:
            if not isinstance(m, Metric):
                raise TypeError(f"Model.prepare: metrics must be hapi.metrics.Metric objects, got {m!r}")
        train_startup, eval_startup = self._program(), self._program()
        self._modes = {}
        if optimizer is not None:
            if loss is None:
                raise ValueError("Model.prepare: training needs a loss")
            self._modes["train"] = self._build("train", train_startup)
        self._modes["eval"] = self._build("eval", eval_startup)
        self._modes["predict"] = self._build("predict", self._program())
        # the first program built holds every initializer (parameters, optimizer state)
        self._executor.run(train_startup if optimizer is not None else eval_startup, scope=self._scope)
        # the network's own values where it has them (trained eagerly, set_state_dict)
        for param in self.network.parameters():
            if param._value is not None:
                self._scope.set(param.name, param._value)
        self._network_holds_values()

    def _network_holds_values(self) -> None:
        """The network's parameters take the Model scope's values (after prepare and fit,
        so the layer itself holds what was trained: jit.save(network), eager calls)."""
        for param in self.network.parameters():
            if self._scope.find_var(param.name) is not None:
                param._value = self._scope.get(param.name)
                param._version += 1

    @staticmethod
    def _program():
        program = pg.Program()
        program.random_seed = pg.default.global_seed()  # pg.seed(n): repeatable runs
        return program

    def _build(self, mode, startup) -> _Programs:
        main = self._program()
        with self.network.mode(training=mode == "train"), pg.program_guard(main, startup):
            feeds = [pg.data(s.name or f"input_{i}", s.shape, s.dtype) for i, s in enumerate(self._inputs)]
            outputs = pg.jit.flatten_outputs(self.network(*feeds))
            labels = []
            loss = None
            if mode != "predict" and self._labels:
                labels = [pg.data(s.name or f"label_{i}", s.shape, s.dtype) for i, s in enumerate(self._labels)]
                if self._loss is not None:
                    loss = self._loss(*outputs, *labels)
            if mode == "train":
                self._optimizer.minimize(loss)
        return _Programs(main, feeds + labels, outputs, loss)

    def _require(self, mode):
        if mode not in self._modes:
            raise RuntimeError("Model: call prepare() first" if not self._modes else
                               "Model: fit needs prepare(optimizer, loss)")
        return self._modes[mode]

    # -- running ---------------------------------------------------------------------------
    def _loader(self, data, batch_size, shuffle, drop_last, num_workers):
        if data is None or isinstance(data, pg.io.DataLoader):
            return data
        if isinstance(data, (pg.io.Dataset, pg.io.IterableDataset)):
            return pg.io.DataLoader(data, batch_size=batch_size, shuffle=shuffle and isinstance(data, pg.io.Dataset),
                                    drop_last=drop_last, num_workers=num_workers,
                                    seed=pg.default.global_seed() or None)
        return data  # any iterable of batches

    def _run_batch(self, mode, batch):
        prog = self._require(mode)
        fields = _as_list(batch)
        if len(fields) < len(prog.feeds):
            raise ValueError(f"Model: a batch has {len(fields)} field(s), the {mode} program feeds "
                             f"{[v.name for v in prog.feeds]}")
        feed = {v.name: f for v, f in zip(prog.feeds, fields)}
        fetch = ([prog.loss] if prog.loss is not None else []) + prog.outputs
        values = self._executor.run(prog.main, feed=feed, fetch_list=fetch, scope=self._scope)
        loss = values.pop(0) if prog.loss is not None else None
        labels = fields[len(self._inputs):len(self._inputs) + len(self._labels)]
        return loss, values, labels, len(fields[0])

    def _update_metrics(self, outputs, labels):
        """PaddlePaddle's protocol: a metric's `compute` sees every output and label of the
        batch, its `update` what compute returned (a metric written for PaddlePaddle runs)."""
        for m in self._metrics:
            computed = m.compute(*outputs, *labels)
            m.update(*(computed if isinstance(computed, (list, tuple)) else [computed]))

    def _logs(self, losses, batch_size):
        logs = {}
        if losses:
            logs["loss"] = float(np.mean(losses[-1]))
        for m in self._metrics:
            value, names = m.accumulate(), m.name()
            names = names if isinstance(names, list) else [names]
            values = value if isinstance(value, list) else [value]
            logs.update(zip(names, values))
        logs["batch_size"] = batch_size
        return logs

    def _callbacks(self, callbacks, verbose, log_freq, save_dir, save_freq, params):
        items = list(callbacks or [])
        if not any(isinstance(c, cbks.ProgBarLogger) for c in items):
            items.insert(0, cbks.ProgBarLogger(log_freq, verbose))
        if save_dir and not any(isinstance(c, cbks.ModelCheckpoint) for c in items):
            items.append(cbks.ModelCheckpoint(save_freq, save_dir))
        if not any(isinstance(c, cbks.LRScheduler) for c in items):
            items.append(cbks.LRScheduler())
        for c in items:
            c.set_model(self)
            c.set_params(params)
        return items

    def fit(self, train_data=None, eval_data=None, batch_size=1, epochs=1, eval_freq=1, log_freq=10,
            save_dir=None, save_freq=1, verbose=2, drop_last=False, shuffle=True, num_workers=0,
            callbacks=None):
        """Train for `epochs` over `train_data` (a Dataset, a DataLoader or an iterable of
        batches: inputs then labels), evaluating on `eval_data` every `eval_freq` epochs.
        Returns the history: a list of each epoch's logs.

        Examples:
            >>> import numpy as np
            >>> import keel as paddle
            >>> from keel.static import InputSpec
            >>> rng = np.random.default_rng(0)
            >>> x = rng.standard_normal((64, 4)).astype("float32")
            >>> y = (x[:, :1] + x[:, 1:2] > 0).astype("int64")           # a separable task
            >>> train_data = paddle.io.TensorDataset([x, y])
            >>> net = paddle.nn.Sequential(paddle.nn.Linear(4, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 2))
            >>> model = paddle.Model(net, inputs=[InputSpec([None, 4], "float32", "x")],
            ...                      labels=[InputSpec([None, 1], "int64", "label")])
            >>> model.prepare(paddle.optimizer.Adam(0.05, parameters=model.parameters()), paddle.nn.CrossEntropyLoss(),
            ...               paddle.metric.Accuracy())
            >>> history = model.fit(train_data, eval_data=train_data, batch_size=16, epochs=5, verbose=0)
            >>> len(history), sorted(history[-1])                      # one record per epoch
            (5, ['acc', 'batch_size', 'eval_acc', 'eval_loss', 'loss'])
            >>> bool(history[-1]["loss"] < history[0]["loss"])
            True
            >>> _ = model.fit(train_data, batch_size=32, epochs=1, verbose=1)   # verbose=1: a line per epoch
            Epoch 1/1
            epoch 1 - loss: ... - acc: ... - samples/s: ...
        """
        self._require("train")
        loader = self._loader(train_data, batch_size, shuffle, drop_last, num_workers)
        steps = len(loader) if hasattr(loader, "__len__") else None
        params = {"epochs": epochs, "steps": steps, "save_dir": save_dir, "verbose": verbose}
        items = self._callbacks(callbacks, verbose, log_freq, save_dir, save_freq, params)
        self.stop_training = False
        history = []
        for c in items:
            c.on_train_begin({})
        for epoch in range(epochs):
            params["epoch"] = epoch
            for m in self._metrics:
                m.reset()
            for c in items:
                c.on_epoch_begin(epoch, {})
            losses, logs = [], {}
            for step, batch in enumerate(loader):
                for c in items:
                    c.on_train_batch_begin(step, {})
                loss, outputs, labels, size = self._run_batch("train", batch)
                losses.append(loss)
                self._update_metrics(outputs, labels)
                logs = self._logs(losses, size)
                for c in items:
                    c.on_train_batch_end(step, logs)
            for c in items:
                c.on_epoch_end(epoch, logs)
            history.append(dict(logs))
            if eval_data is not None and (epoch + 1) % eval_freq == 0:
                eval_logs = self.evaluate(eval_data, batch_size, verbose=0, num_workers=num_workers)
                history[-1].update({f"eval_{k}": v for k, v in eval_logs.items()})
                for c in items:
                    c.on_eval_end(eval_logs)
            if self.stop_training:
                break
        self._network_holds_values()
        for c in items:
            c.on_train_end(history[-1] if history else {})
        return history

    def evaluate(self, eval_data, batch_size=1, log_freq=10, verbose=2, num_workers=0, callbacks=None):
        """The mean loss over `eval_data` (weighted by batch size) and the metrics.

        Examples:
            >>> import numpy as np
            >>> import keel as paddle
            >>> from keel.static import InputSpec
            >>> rng = np.random.default_rng(0)
            >>> x = rng.standard_normal((64, 4)).astype("float32")
            >>> y = (x[:, :1] + x[:, 1:2] > 0).astype("int64")           # a separable task
            >>> train_data = paddle.io.TensorDataset([x, y])
            >>> net = paddle.nn.Sequential(paddle.nn.Linear(4, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 2))
            >>> model = paddle.Model(net, inputs=[InputSpec([None, 4], "float32", "x")],
            ...                      labels=[InputSpec([None, 1], "int64", "label")])
            >>> model.prepare(paddle.optimizer.Adam(0.05, parameters=model.parameters()), paddle.nn.CrossEntropyLoss(),
            ...               paddle.metric.Accuracy())
            >>> _ = model.fit(train_data, batch_size=16, epochs=5, verbose=0)
            >>> logs = model.evaluate(train_data, batch_size=32, verbose=0)
            >>> sorted(logs), bool(logs["acc"] > 0.8)
            (['acc', 'loss'], True)
        """
        loader = self._loader(eval_data, batch_size, False, False, num_workers)
        for m in self._metrics:
            m.reset()
        total, count = 0.0, 0
        for batch in loader:
            loss, outputs, labels, size = self._run_batch("eval", batch)
            if loss is not None:
                total += float(np.mean(loss)) * size
            count += size
            self._update_metrics(outputs, labels)
        logs = {"loss": total / max(count, 1)} if self._modes["eval"].loss is not None else {}
        for m in self._metrics:
            value, names = m.accumulate(), m.name()
            logs.update(zip(names if isinstance(names, list) else [names],
                            value if isinstance(value, list) else [value]))
        if verbose:
            cbks.ProgBarLogger(log_freq, verbose).on_eval_end(logs)
        return logs

    def predict(self, test_data, batch_size=1, num_workers=0, stack_outputs=False, verbose=1, callbacks=None):
        """The network's outputs over `test_data`: one list per output of per-batch arrays
        (concatenated with stack_outputs=True). Batches may carry labels; they are ignored.

        Examples:
            >>> import numpy as np
            >>> import keel as paddle
            >>> from keel.static import InputSpec
            >>> rng = np.random.default_rng(0)
            >>> x = rng.standard_normal((64, 4)).astype("float32")
            >>> y = (x[:, :1] + x[:, 1:2] > 0).astype("int64")           # a separable task
            >>> train_data = paddle.io.TensorDataset([x, y])
            >>> net = paddle.nn.Sequential(paddle.nn.Linear(4, 16), paddle.nn.ReLU(), paddle.nn.Linear(16, 2))
            >>> model = paddle.Model(net, inputs=[InputSpec([None, 4], "float32", "x")],
            ...                      labels=[InputSpec([None, 1], "int64", "label")])
            >>> model.prepare(paddle.optimizer.Adam(0.05, parameters=model.parameters()), paddle.nn.CrossEntropyLoss(),
            ...               paddle.metric.Accuracy())
            >>> test_data = paddle.io.TensorDataset([x[:10]])           # inputs only
            >>> outputs = model.predict(test_data, batch_size=4, verbose=0)
            >>> len(outputs), [batch.shape for batch in outputs[0]]      # one list per output, one array per batch
            (1, [(4, 2), (4, 2), (2, 2)])
            >>> logits, = model.predict(test_data, batch_size=4, stack_outputs=True, verbose=0)
            >>> logits.shape
            (10, 2)
        """
        loader = self._loader(test_data, batch_size, False, False, num_workers)
        per_output = None
        for batch in loader:
            _, outputs, _, _ = self._run_batch("predict", _as_list(batch)[:len(self._inputs)])
            per_output = per_output or [[] for _ in outputs]
            for store, value in zip(per_output, outputs):
                store.append(value)
        per_output = per_output or []
        return [np.concatenate(v) for v in per_output] if stack_outputs else per_output

    # -- files -------------------------------------------------------------------------------
    def summary(self, input_size=None, dtype=None):
        """Print the network's layer table (paddle.summary) for the Model's input specs, or
        for `input_size`/`dtype` when given; returns {'total_params', 'trainable_params'}.

        Examples:
            >>> import keel as paddle
            >>> from keel.static import InputSpec
            >>> net = paddle.nn.Sequential(paddle.nn.Linear(784, 64), paddle.nn.ReLU(), paddle.nn.Linear(64, 10))
            >>> model = paddle.Model(net, inputs=[InputSpec([None, 784], "float32", "image")])
            >>> model.summary()
            -------------------------------------------------------------------------
             Layer (type)       Input Shape          Output Shape         Param #
            =========================================================================
               Linear-1          [[1, 784]]             [1, 64]            50,240
                ReLU-1           [[1, 64]]              [1, 64]               0
               Linear-2          [[1, 64]]              [1, 10]              650
            =========================================================================
            Total params: 50,890
            Trainable params: 50,890
            Non-trainable params: 0
            -------------------------------------------------------------------------
            Input size (MB): 0.00
            Forward/backward pass size (MB): 0.00
            Params size (MB): 0.19
            Estimated Total Size (MB): 0.20
            -------------------------------------------------------------------------
            {'total_params': 50890, 'trainable_params': 50890}
        """
        return summary(self.network, input_size or self._inputs, dtype)

    def save(self, path, training=True):
        """training=True: a checkpoint `path.ckpt` (parameters, optimizer state, random state,
        LR schedules), for `load`. training=False: the inference files `path.pdmodel` +
        `path.pdiparams` (jit.save's), for the Predictor and Paddle Inference."""
        path = os.fspath(path)
        directory = os.path.dirname(path)
        if directory:
            os.makedirs(directory, exist_ok=True)
        if not training:
            return pg.jit.save(self.network, path, input_spec=self._inputs, scope=self._scope)
        mode = "train" if "train" in self._modes else "eval"
        save_checkpoint(path + ".ckpt", self._require(mode).main, self._executor, scope=self._scope)

    def load(self, path):
        """Restore a checkpoint written by `save(path)`."""
        mode = "train" if "train" in self._modes else "eval"
        load_checkpoint(os.fspath(path) + ".ckpt", self._require(mode).main, self._executor, scope=self._scope)
        self._network_holds_values()

    def state_dict(self):
        return self.network.state_dict(scope=self._scope)

    def set_state_dict(self, state):
        result = self.network.set_state_dict(state, scope=self._scope)
        self._network_holds_values()
        return result
