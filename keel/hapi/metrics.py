"""Metrics over numpy predictions and labels (paddle.metric): `update` per batch,
`accumulate` for the running value, `reset` between epochs."""
from __future__ import annotations

import numpy as np

__all__ = ["Metric", "Accuracy", "Precision", "Recall", "Auc"]


def _numpy(value):
    """A Tensor's or array's values as a numpy array (metrics accept either, as PaddlePaddle's)."""
    return value.numpy() if hasattr(value, "numpy") else np.asarray(value)


class Metric:
    """Base class of the metrics hapi.Model computes: per batch, Model calls
    `update(*compute(*outputs, *labels))`; `accumulate()` gives the running value and
    `reset()` starts over (each epoch). `compute` passes its arguments on unchanged unless a
    metric overrides it (Accuracy turns scores and labels into a hit matrix there).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> class MeanError(paddle.metric.Metric):
        ...     def __init__(self):
        ...         self.reset()
        ...     def reset(self):
        ...         self.total, self.count = 0.0, 0
        ...     def compute(self, pred, label):        # a batch's outputs and labels -> what update takes
        ...         return np.abs(np.asarray(pred) - np.asarray(label))
        ...     def update(self, errors):
        ...         self.total += float(errors.sum())
        ...         self.count += errors.size
        ...     def accumulate(self):
        ...         return self.total / self.count
        ...     def name(self):
        ...         return "mean_error"
        >>> m = MeanError()
        >>> m.update(m.compute(np.array([1.0, 2.0]), np.array([1.5, 2.0])))
        >>> m.update(m.compute(np.array([3.0, 4.0]), np.array([3.0, 3.5])))
        >>> m.accumulate()
        0.25
    """

    def reset(self) -> None:
        raise NotImplementedError

    def update(self, *args) -> None:
        raise NotImplementedError

    def accumulate(self):
        raise NotImplementedError

    def name(self):
        return type(self).__name__.lower()

    def compute(self, *args):
        return args


class Accuracy(Metric):
    """Top-k accuracy of scores [N, C] against integer labels [N] or [N, 1] (or one-hot
    [N, C]): `compute` gives the hit matrix [N, max k] (1.0 where the label is among the
    top k scores), `update` adds it up and returns the batch's accuracy; accumulate() gives
    one value per k (a float when topk has one k).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([[0.1, 0.2, 0.3, 0.4], [0.1, 0.4, 0.3, 0.2],
        ...                       [0.1, 0.2, 0.4, 0.3], [0.1, 0.2, 0.3, 0.4]])
        >>> y = paddle.to_tensor([[0], [1], [2], [3]])
        >>> m = paddle.metric.Accuracy()
        >>> correct = m.compute(x, y)                 # 1.0 where the label is the top score
        >>> m.update(correct)
        0.75
        >>> m.accumulate(), m.name()
        (0.75, ['acc'])
        >>> m = paddle.metric.Accuracy(topk=(1, 2))
        >>> m.update(m.compute(x, paddle.to_tensor([[3], [3], [3], [3]])))
        [0.5, 0.75]
    """

    def __init__(self, topk=(1,), name=None):
        self.topk = tuple(topk)
        self.maxk = max(self.topk)
        self._name = name or "acc"
        self.reset()

    def reset(self):
        self.correct = np.zeros(len(self.topk))
        self.count = 0

    def compute(self, pred, label):
        pred, label = _numpy(pred), _numpy(label)
        order = np.argsort(-pred, axis=-1, kind="stable")[..., :self.maxk]
        if label.ndim == pred.ndim and label.shape[-1] != 1:      # one-hot labels
            label = label.argmax(-1)[..., None]
        return (order == label.reshape(*order.shape[:-1], 1)).astype(np.float32)

    def update(self, correct, *args):
        correct = _numpy(correct)
        samples = int(np.prod(correct.shape[:-1]))
        batch = []
        for i, k in enumerate(self.topk):
            hits = float(correct[..., :k].sum())
            self.correct[i] += hits
            batch.append(hits / max(samples, 1))
        self.count += samples
        return batch[0] if len(batch) == 1 else batch

    def accumulate(self):
        values = (self.correct / max(self.count, 1)).tolist()
        return values[0] if len(values) == 1 else values

    def name(self):
        return [self._name] if len(self.topk) == 1 else [f"{self._name}_top{k}" for k in self.topk]


class _Binary(Metric):
    """Binary classification counts of predicted probabilities against 0/1 labels."""

    def __init__(self, name=None):
        self._name = name or type(self).__name__.lower()
        self.reset()

    def reset(self):
        self.tp = self.fp = self.fn = 0

    @staticmethod
    def _positive(pred):
        raise NotImplementedError

    def update(self, preds, labels):
        pred = self._positive(_numpy(preds).reshape(-1))
        label = _numpy(labels).reshape(-1) == 1
        self.tp += int((pred & label).sum())
        self.fp += int((pred & ~label).sum())
        self.fn += int((~pred & label).sum())

    def name(self):
        return self._name


class Precision(_Binary):
    """tp / (tp + fp) of binary predictions: a probability p counts as positive when
    floor(p + 0.5) == 1, so 0.5 is positive (PaddlePaddle's rule for Precision).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> x = np.array([0.1, 0.5, 0.6, 0.7])       # predicted probabilities
        >>> y = np.array([0, 1, 1, 1])
        >>> m = paddle.metric.Precision()
        >>> m.update(x, y)
        >>> m.accumulate()
        1.0
    """

    @staticmethod
    def _positive(pred):
        return np.floor(pred + 0.5).astype(np.int32) == 1

    def accumulate(self):
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0


class Recall(_Binary):
    """tp / (tp + fn) of binary predictions: a probability p counts as positive when it
    rounds half to even to 1 (np.rint), so 0.5 is negative (PaddlePaddle's rule for Recall).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> x = np.array([0.1, 0.5, 0.6, 0.7])
        >>> y = np.array([1, 0, 1, 1])
        >>> m = paddle.metric.Recall()
        >>> m.update(x, y)
        >>> round(m.accumulate(), 4)                  # 2 of the 3 positives found
        0.6667
    """

    @staticmethod
    def _positive(pred):
        return np.rint(pred).astype(np.int32) == 1

    def accumulate(self):
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0


class Auc(Metric):
    """Area under the ROC curve of binary scores, from histograms over `num_thresholds`
    buckets as PaddlePaddle's Auc (preds [N, 2] take column 1, or [N] / [N, 1]).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> positive = np.array([0.9, 0.3, 0.6, 0.8, 0.1, 0.4])   # the score of class 1
        >>> preds = np.stack([1 - positive, positive], axis=1)       # [N, 2] class probabilities
        >>> labels = np.array([[1], [1], [1], [0], [0], [0]])
        >>> m = paddle.metric.Auc()
        >>> m.update(preds, labels)
        >>> round(m.accumulate(), 4)                  # 6 of the 9 (positive, negative) pairs ordered
        0.6667
    """

    def __init__(self, curve="ROC", num_thresholds=4095, name=None):
        if curve != "ROC":
            raise ValueError("Auc: only curve='ROC' is supported")
        self.num_thresholds = int(num_thresholds)
        self._name = name or "auc"
        self.reset()

    def reset(self):
        self.pos = np.zeros(self.num_thresholds + 1, np.int64)
        self.neg = np.zeros(self.num_thresholds + 1, np.int64)

    def update(self, preds, labels):
        pred = _numpy(preds)
        score = pred[:, 1] if pred.ndim == 2 and pred.shape[1] == 2 else pred.reshape(-1)
        bins = np.clip((score * self.num_thresholds).astype(np.int64), 0, self.num_thresholds)
        label = _numpy(labels).reshape(-1).astype(bool)
        self.pos += np.bincount(bins[label], minlength=self.num_thresholds + 1)
        self.neg += np.bincount(bins[~label], minlength=self.num_thresholds + 1)

    def accumulate(self):
        # walk the buckets from the highest score down: trapezoids of (FPR, TPR)
        pos, neg = self.pos[::-1].astype(np.float64), self.neg[::-1].astype(np.float64)
        tot_pos, tot_neg = pos.sum(), neg.sum()
        if tot_pos == 0 or tot_neg == 0:
            return 0.0
        tp, fp = np.concatenate([[0], np.cumsum(pos)]), np.concatenate([[0], np.cumsum(neg)])
        return float(np.sum((fp[1:] - fp[:-1]) * (tp[1:] + tp[:-1]) / 2) / (tot_pos * tot_neg))

    def name(self):
        return self._name
