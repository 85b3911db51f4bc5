"""Index samplers (PaddlePaddle's paddle.io.Sampler family): iterables of dataset indices
that a BatchSampler groups into batches (`BatchSampler(sampler=RandomSampler(ds), ...)`).
Random draws come from numpy's global generator, as PaddlePaddle's do."""
from __future__ import annotations

import numpy as np

__all__ = ["Sampler", "SequenceSampler", "RandomSampler", "WeightedRandomSampler", "SubsetRandomSampler"]


class Sampler:
    """The base class: a subclass yields indices from __iter__ (and may give __len__).

    Examples:
        >>> import keel as paddle
        >>> class EvenSampler(paddle.io.Sampler):
        ...     def __iter__(self):
        ...         return iter(range(0, len(self.data_source), 2))
        ...     def __len__(self):
        ...         return (len(self.data_source) + 1) // 2
        >>> sampler = EvenSampler(range(7))
        >>> list(sampler), len(sampler)
        ([0, 2, 4, 6], 4)
        >>> list(paddle.io.BatchSampler(sampler=sampler, batch_size=3))
        [[0, 2, 4], [6]]
    """

    def __init__(self, data_source=None):
        self.data_source = data_source

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__, yielding dataset indices")


class SequenceSampler(Sampler):
    """0, 1, ..., len(data_source) - 1 in order.

    Examples:
        >>> import keel as paddle
        >>> list(paddle.io.SequenceSampler(range(5)))
        [0, 1, 2, 3, 4]
    """

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A permutation of the indices, or with `replacement` `num_samples` independent draws;
    `generator`, when given, is an iterable of indices used instead of drawing.

    Examples:
        >>> import keel as paddle
        >>> sampler = paddle.io.RandomSampler(range(6))
        >>> sorted(sampler)                 # every index once, in a random order
        [0, 1, 2, 3, 4, 5]
        >>> len(list(paddle.io.RandomSampler(range(6), replacement=True, num_samples=10)))
        10
    """

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        super().__init__(data_source)
        if not isinstance(replacement, bool):
            raise TypeError(f"RandomSampler: replacement must be a bool, got {replacement!r}")
        if num_samples is not None and not replacement:
            raise ValueError("RandomSampler: num_samples should not be specified while replacement is False")
        self.replacement, self.generator, self._num_samples = replacement, generator, num_samples
        if self.num_samples <= 0:
            raise ValueError(f"RandomSampler: num_samples must be positive, got {self.num_samples}")

    @property
    def num_samples(self) -> int:
        return len(self.data_source) if self._num_samples is None else int(self._num_samples)

    def __iter__(self):
        n = len(self.data_source)
        if self.generator is not None:
            for i, index in enumerate(self.generator):
                if i == self.num_samples:
                    return
                yield index
            return
        draws = np.random.randint(0, n, self.num_samples) if self.replacement else np.random.permutation(n)
        yield from (int(i) for i in draws)

    def __len__(self):
        return self.num_samples


class WeightedRandomSampler(Sampler):
    """`num_samples` indices drawn with probability proportional to `weights` (with
    replacement unless `replacement=False`).

    Examples:
        >>> import keel as paddle
        >>> sampler = paddle.io.WeightedRandomSampler([0.0, 0.0, 1.0, 0.0], num_samples=3)
        >>> list(sampler)                    # only index 2 has weight
        [2, 2, 2]
        >>> sorted(paddle.io.WeightedRandomSampler([0.1, 0.3, 0.5, 0.1], 4, replacement=False))
        [0, 1, 2, 3]
    """

    def __init__(self, weights, num_samples, replacement=True):
        super().__init__()
        weights = np.asarray(weights.numpy() if hasattr(weights, "numpy") else weights, dtype=np.float64).reshape(-1)
        if weights.size == 0 or (weights < 0).any() or not weights.sum() > 0:
            raise ValueError("WeightedRandomSampler: weights must be non-negative with a positive sum")
        if not isinstance(num_samples, int) or num_samples <= 0:
            raise ValueError(f"WeightedRandomSampler: num_samples must be a positive int, got {num_samples!r}")
        if not replacement and num_samples > np.count_nonzero(weights):
            raise ValueError(f"WeightedRandomSampler: {num_samples} samples without replacement, but only "
                             f"{np.count_nonzero(weights)} weights are positive")
        self.weights, self.num_samples, self.replacement = weights, num_samples, bool(replacement)

    def __iter__(self):
        draws = np.random.choice(len(self.weights), self.num_samples, replace=self.replacement,
                                 p=self.weights / self.weights.sum())
        return iter(int(i) for i in draws)

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices in a random order.

    Examples:
        >>> import keel as paddle
        >>> sampler = paddle.io.SubsetRandomSampler([1, 3, 5, 7])
        >>> sorted(sampler), len(sampler)
        ([1, 3, 5, 7], 4)
    """

    def __init__(self, indices):
        super().__init__()
        self.indices = list(indices)
        if not self.indices:
            raise ValueError("SubsetRandomSampler: indices must not be empty")

    def __iter__(self):
        return iter(self.indices[int(i)] for i in np.random.permutation(len(self.indices)))

    def __len__(self):
        return len(self.indices)
