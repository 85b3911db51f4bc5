"""Data loading (PaddlePaddle's `paddle.io`): datasets, batch samplers and a DataLoader that
batches, shuffles under a seed and loads in worker threads or processes.

    loader = pg.io.DataLoader(pg.io.TensorDataset([images, labels]), batch_size=64,
                              shuffle=True, seed=0, num_workers=2)
    for epoch in range(3):
        for xb, yb in loader:          # numpy arrays, ready to feed
            exe.run(main, feed={"x": xb, "label": yb}, ...)

Order is a function of (seed, epoch) alone: with the same seed, 0 workers and N workers
yield the same batches in the same order (workers load batches, the loader hands them out
in sampler order). Each pass over the loader is the next epoch of its sampler.
"""
from __future__ import annotations

import math
import multiprocessing
import os
import queue
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from keel.program import dygraph
from keel.program.tensor import Tensor

__all__ = ["Dataset", "IterableDataset", "TensorDataset", "BatchSampler", "DistributedBatchSampler",
           "DataLoader", "default_collate_fn"]


class Dataset:
    """A map-style dataset: `__getitem__(i)` gives sample i (an array, a number, or a tuple,
    list or dict of them) and `__len__` the number of samples.

    Examples:
        >>> import keel as paddle
        >>> import numpy as np
        >>> class RandomDataset(paddle.io.Dataset):
        ...     def __init__(self, num_samples):
        ...         self.num_samples = num_samples
        ...     def __getitem__(self, idx):
        ...         return np.full([3], idx, "float32"), np.array([idx % 2], "int64")
        ...     def __len__(self):
        ...         return self.num_samples
        >>> dataset = RandomDataset(10)
        >>> len(dataset), dataset[3][0].tolist()
        (10, [3.0, 3.0, 3.0])
        >>> image, label = next(iter(paddle.io.DataLoader(dataset, batch_size=4)))
        >>> image.shape, label.shape
        ([4, 3], [4, 1])
    """

    def __getitem__(self, index):
        raise NotImplementedError(f"{type(self).__name__} does not define __getitem__")

    def __len__(self):
        raise NotImplementedError(f"{type(self).__name__} does not define __len__")


class IterableDataset:
    """A stream of samples: `__iter__` yields them (no length, no shuffling by the loader).

    Examples:
        >>> import keel as paddle
        >>> import numpy as np
        >>> class Stream(paddle.io.IterableDataset):
        ...     def __init__(self, num_samples):
        ...         self.num_samples = num_samples
        ...     def __iter__(self):
        ...         for i in range(self.num_samples):
        ...             yield np.full([2], i, "float32"), np.array([i], "int64")
        >>> for x, y in paddle.io.DataLoader(Stream(5), batch_size=2):
        ...     print(x.shape, y.numpy().ravel().tolist())
        [2, 2] [0, 1]
        [2, 2] [2, 3]
        [1, 2] [4]
    """

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} does not define __iter__")


class TensorDataset(Dataset):
    """Samples are the i-th rows of each of `tensors` (arrays of equal first dimension).

    Examples:
        >>> import keel as paddle
        >>> import numpy as np
        >>> images = np.random.rand(4, 3).astype("float32")
        >>> labels = np.array([[0], [1], [0], [1]], "int64")
        >>> dataset = paddle.io.TensorDataset([images, labels])
        >>> len(dataset), dataset[1][1].tolist()
        (4, [1])
    """

    def __init__(self, tensors):
        self.tensors = [np.asarray(t) for t in tensors]
        lengths = {len(t) for t in self.tensors}
        if len(lengths) != 1:
            raise ValueError(f"TensorDataset: the tensors have different lengths {sorted(lengths)}")

    def __getitem__(self, index):
        return tuple(t[index] for t in self.tensors)

    def __len__(self):
        return len(self.tensors[0])


class BatchSampler:
    """Lists of indices of `batch_size` (the last one shorter unless `drop_last`), in order
    or, with `shuffle`, in a permutation drawn from (seed, epoch). Each iteration is the next
    epoch; `set_epoch` chooses it.

    Examples:
        >>> import keel as paddle
        >>> import numpy as np
        >>> dataset = paddle.io.TensorDataset([np.arange(10, dtype="float32")])
        >>> list(paddle.io.BatchSampler(dataset, batch_size=4))
        [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        >>> list(paddle.io.BatchSampler(dataset, batch_size=4, drop_last=True))
        [[0, 1, 2, 3], [4, 5, 6, 7]]
        >>> sampler = paddle.io.BatchSampler(sampler=paddle.io.SequenceSampler(range(5)), batch_size=2)
        >>> list(sampler)
        [[0, 1], [2, 3], [4]]
    """

    def __init__(self, dataset=None, sampler=None, shuffle=False, batch_size=1, drop_last=False,
                 seed: int | None = None):
        if (dataset is None) == (sampler is None):
            raise ValueError("BatchSampler: give either a dataset or a sampler (an iterable of indices)")
        if int(batch_size) < 1:
            raise ValueError(f"BatchSampler: batch_size must be at least 1, got {batch_size}")
        self.dataset, self.sampler = dataset, sampler
        self.shuffle, self.batch_size, self.drop_last = bool(shuffle), int(batch_size), bool(drop_last)
        self.seed = np.random.SeedSequence().entropy if seed is None else int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def _indices(self) -> list[int]:
        if self.sampler is not None:
            return list(self.sampler)
        n = len(self.dataset)
        if self.shuffle:
            return np.random.default_rng([self.seed, self.epoch]).permutation(n).tolist()
        return list(range(n))

    def __iter__(self):
        indices = self._indices()
        self.epoch += 1
        for start in range(0, len(indices), self.batch_size):
            batch = indices[start:start + self.batch_size]
            if len(batch) < self.batch_size and self.drop_last:
                return
            yield batch

    def __len__(self):
        n = len(self.sampler) if self.sampler is not None else len(self.dataset)
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


class DistributedBatchSampler(BatchSampler):
    """The share of replica `rank` of `num_replicas`: the (shuffled) indices padded by
    repeating from the start to a multiple of num_replicas, dealt out a batch at a time in
    turn (batch k of the dataset to replica k % num_replicas; a last round shorter than
    num_replicas batches split evenly), PaddlePaddle's rule. Every replica sees the same
    number of batches.

    Examples:
        >>> import keel as paddle
        >>> import numpy as np
        >>> dataset = paddle.io.TensorDataset([np.arange(10, dtype="float32")])
        >>> list(paddle.io.DistributedBatchSampler(dataset, batch_size=2, num_replicas=2, rank=0))
        [[0, 1], [4, 5], [8]]
        >>> list(paddle.io.DistributedBatchSampler(dataset, batch_size=2, num_replicas=2, rank=1))
        [[2, 3], [6, 7], [9]]
    """

    def __init__(self, dataset, batch_size, num_replicas=None, rank=None, shuffle=False, drop_last=False,
                 seed: int | None = 0):
        super().__init__(dataset, None, shuffle, batch_size, drop_last, seed)
        # defaults: the process group's (distributed.init_parallel_env exports them), as PaddlePaddle's
        self.nranks = int(os.environ.get("PADDLE_TRAINERS_NUM", "1")) if num_replicas is None else int(num_replicas)
        self.local_rank = int(os.environ.get("PADDLE_TRAINER_ID", "0")) if rank is None else int(rank)
        if not 0 <= self.local_rank < self.nranks:
            raise ValueError(f"DistributedBatchSampler: rank {rank} is not in [0, {self.nranks})")
        self.num_samples = math.ceil(len(dataset) / self.nranks)

    def _indices(self) -> list[int]:
        indices = super()._indices()
        total = self.num_samples * self.nranks
        indices = (indices * math.ceil(total / len(indices)))[:total]
        round_size = self.batch_size * self.nranks
        full = total - total % round_size
        mine = [i for start in range(self.local_rank * self.batch_size, full, round_size)
                for i in indices[start:start + self.batch_size]]
        last_share = (total - full) // self.nranks
        return mine + indices[full + self.local_rank * last_share:full + (self.local_rank + 1) * last_share]

    def __len__(self):
        n = self.num_samples
        return n // self.batch_size if self.drop_last else math.ceil(n / self.batch_size)


def default_collate_fn(samples):
    """Stack a list of samples field by field: arrays and numbers into one array, tuples and
    lists position by position, dicts key by key."""
    first = samples[0]
    if isinstance(first, dict):
        return {k: default_collate_fn([s[k] for s in samples]) for k in first}
    if isinstance(first, (tuple, list)):
        if any(len(s) != len(first) for s in samples):
            raise ValueError("default_collate_fn: samples have different numbers of fields")
        return [default_collate_fn(list(field)) for field in zip(*samples)]
    return np.stack([np.asarray(s) for s in samples])


def _load_batch(dataset, collate_fn, indices):
    return collate_fn([dataset[i] for i in indices])


_WORKER_STATE: dict = {}


def _worker_init(dataset, collate_fn):
    _WORKER_STATE["dataset"], _WORKER_STATE["collate_fn"] = dataset, collate_fn


def _worker_load(indices):
    return _load_batch(_WORKER_STATE["dataset"], _WORKER_STATE["collate_fn"], indices)


def _as_tensors(batch):
    """A collated batch with each numpy array as a Tensor (the same memory)."""
    if isinstance(batch, np.ndarray):
        return Tensor(batch)
    if isinstance(batch, dict):
        return {k: _as_tensors(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(_as_tensors(v) for v in batch)
    return batch


class DataLoader:
    """Batches of `dataset`: with `batch_size` and `shuffle`/`drop_last`/`seed`, or with a
    `batch_sampler`; `collate_fn` (default: stack field by field). `num_workers` > 0 loads
    batches in worker processes (`worker_mode="process"`, the default, as PaddlePaddle; the
    dataset and collate_fn must be picklable) or threads (`"thread"`), keeping up to
    `prefetch_factor` batches per worker ahead; the order is the sampler's either way.
    An IterableDataset is read in the calling thread, `batch_size` samples a batch.
    In eager mode (outside program_guard, no enable_static) each array of a batch arrives as
    a Tensor, as in PaddlePaddle's dygraph mode; when a program is being built, as the numpy
    array collated. `return_list` is accepted for PaddlePaddle compatibility (batches are
    lists or dicts, as collated). `for batch in loader` and `for batch in loader()` are the same.

    Examples:
        >>> import numpy as np
        >>> from keel.io import DataLoader, TensorDataset
        >>> data = TensorDataset([np.arange(10, dtype="float32")[:, None], np.arange(10)[:, None]])
        >>> [x.shape for x, y in DataLoader(data, batch_size=4)]
        [[4, 1], [4, 1], [2, 1]]
    """

    def __init__(self, dataset, batch_size=1, shuffle=False, drop_last=False, batch_sampler=None,
                 collate_fn=None, num_workers=0, seed: int | None = None, worker_mode="process",
                 prefetch_factor=2, return_list=True):
        if worker_mode not in ("process", "thread"):
            raise ValueError(f"DataLoader: worker_mode must be 'process' or 'thread', got {worker_mode!r}")
        self.dataset = dataset
        self.collate_fn = collate_fn or default_collate_fn
        self.num_workers, self.worker_mode = int(num_workers), worker_mode
        self.prefetch_factor = max(1, int(prefetch_factor))
        self.iterable = isinstance(dataset, IterableDataset)
        self.batch_size = int(batch_size) if batch_size is not None else None
        if self.iterable:
            if shuffle or batch_sampler is not None:
                raise ValueError("DataLoader: an IterableDataset cannot be shuffled or given a batch_sampler")
            self.batch_sampler = None
        elif batch_sampler is not None:
            if batch_size != 1 or shuffle or drop_last:
                raise ValueError("DataLoader: batch_sampler excludes batch_size, shuffle and drop_last")
            self.batch_sampler = batch_sampler
        else:
            self.batch_sampler = BatchSampler(dataset, shuffle=shuffle, batch_size=batch_size,
                                              drop_last=drop_last, seed=seed)

    def __len__(self):
        if self.batch_sampler is None:
            raise TypeError("DataLoader over an IterableDataset has no length")
        return len(self.batch_sampler)

    def __call__(self):
        return iter(self)

    def __iter__(self):
        if self.iterable:
            collated = self._iterate_stream()
        elif self.num_workers == 0:
            collated = (_load_batch(self.dataset, self.collate_fn, b) for b in iter(self.batch_sampler))
        else:
            collated = self._iterate_workers(iter(self.batch_sampler))
        return (_as_tensors(batch) for batch in collated) if dygraph.in_dynamic_mode() else collated

    def _iterate_stream(self):
        samples = iter(self.dataset)
        while True:
            batch = [s for _, s in zip(range(self.batch_size or 1), samples)]
            if not batch:
                return
            yield self.collate_fn(batch)

    def _iterate_workers(self, batches):
        """Keep num_workers * prefetch_factor batches in flight; yield them in sampler order."""
        ahead = self.num_workers * self.prefetch_factor
        if self.worker_mode == "thread":
            pool = ThreadPoolExecutor(self.num_workers)
            submit = lambda b: pool.submit(_load_batch, self.dataset, self.collate_fn, b)  # noqa: E731
            result = lambda f: f.result()  # noqa: E731
            close = lambda: pool.shutdown(cancel_futures=True)  # noqa: E731
        else:
            method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
            pool = multiprocessing.get_context(method).Pool(self.num_workers, _worker_init,
                                                            (self.dataset, self.collate_fn))
            submit = lambda b: pool.apply_async(_worker_load, (b,))  # noqa: E731
            result = lambda r: r.get()  # noqa: E731
            close = pool.terminate
        pending: queue.SimpleQueue = queue.SimpleQueue()
        in_flight = 0
        try:
            for b in batches:
                pending.put(submit(b))
                in_flight += 1
                if in_flight >= ahead:
                    yield result(pending.get())
                    in_flight -= 1
            while in_flight:
                yield result(pending.get())
                in_flight -= 1
        finally:
            close()
