"""Metrics over numpy predictions and labels (paddle.metric): `update` per batch,
`accumulate` for the running value, `reset` between epochs."""
from __future__ import annotations

import numpy as np

__all__ = ["Metric", "Accuracy", "Precision", "Recall", "Auc"]


class Metric:
    def reset(self) -> None:
        raise NotImplementedError

    def update(self, pred, label) -> None:
        raise NotImplementedError

    def accumulate(self):
        raise NotImplementedError

    def name(self):
        return type(self).__name__.lower()


class Accuracy(Metric):
    """Top-k accuracy of scores [N, C] against integer labels [N] or [N, 1]; accumulate()
    gives one value per k (a float when topk has one k)."""

    def __init__(self, topk=(1,), name=None):
        self.topk = tuple(topk)
        self._name = name or "acc"
        self.reset()

    def reset(self):
        self.correct = np.zeros(len(self.topk))
        self.count = 0

    def update(self, pred, label):
        pred, label = np.asarray(pred), np.asarray(label).reshape(-1)
        order = np.argsort(-pred, axis=-1, kind="stable")[:, :max(self.topk)]
        hits = order == label[:, None]
        for i, k in enumerate(self.topk):
            self.correct[i] += hits[:, :k].any(axis=1).sum()
        self.count += len(label)

    def accumulate(self):
        values = (self.correct / max(self.count, 1)).tolist()
        return values[0] if len(values) == 1 else values

    def name(self):
        return [self._name] if len(self.topk) == 1 else [f"{self._name}_top{k}" for k in self.topk]


class _Binary(Metric):
    """Binary classification counts: a prediction is positive when > 0.5."""

    def __init__(self, name=None):
        self._name = name or type(self).__name__.lower()
        self.reset()

    def reset(self):
        self.tp = self.fp = self.fn = 0

    def update(self, pred, label):
        pred = np.asarray(pred).reshape(-1) > 0.5
        label = np.asarray(label).reshape(-1).astype(bool)
        self.tp += int((pred & label).sum())
        self.fp += int((pred & ~label).sum())
        self.fn += int((~pred & label).sum())

    def name(self):
        return self._name


class Precision(_Binary):
    def accumulate(self):
        return self.tp / (self.tp + self.fp) if self.tp + self.fp else 0.0


class Recall(_Binary):
    def accumulate(self):
        return self.tp / (self.tp + self.fn) if self.tp + self.fn else 0.0


class Auc(Metric):
    """Area under the ROC curve of binary scores, from histograms over `num_thresholds`
    buckets as PaddlePaddle's Auc (preds [N, 2] take column 1, or [N] / [N, 1])."""

    def __init__(self, curve="ROC", num_thresholds=4095, name=None):
        if curve != "ROC":
            raise ValueError("Auc: only curve='ROC' is supported")
        self.num_thresholds = int(num_thresholds)
        self._name = name or "auc"
        self.reset()

    def reset(self):
        self.pos = np.zeros(self.num_thresholds + 1, np.int64)
        self.neg = np.zeros(self.num_thresholds + 1, np.int64)

    def update(self, pred, label):
        pred = np.asarray(pred)
        score = pred[:, 1] if pred.ndim == 2 and pred.shape[1] == 2 else pred.reshape(-1)
        bins = np.clip((score * self.num_thresholds).astype(np.int64), 0, self.num_thresholds)
        label = np.asarray(label).reshape(-1).astype(bool)
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
