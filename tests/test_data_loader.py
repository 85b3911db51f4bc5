"""program.io: datasets, samplers and the DataLoader (order under a seed, workers)."""
import numpy as np
import pytest

import keel.program as pg


class Squares(pg.io.Dataset):
    """Sample i: (a [3] float32 row of i, i*i); picklable for worker processes."""

    def __len__(self):
        return 10

    def __getitem__(self, i):
        return np.full(3, i, np.float32), np.int64(i * i)


def batches(loader):
    return [[np.array(f) for f in b] for b in loader]


def test_batches_in_order_with_the_last_one_shorter_unless_dropped():
    got = batches(pg.io.DataLoader(Squares(), batch_size=4))
    assert [b[1].tolist() for b in got] == [[0, 1, 4, 9], [16, 25, 36, 49], [64, 81]]
    assert got[0][0].shape == (4, 3) and got[0][0].dtype == np.float32
    assert len(pg.io.DataLoader(Squares(), batch_size=4)) == 3
    dropped = pg.io.DataLoader(Squares(), batch_size=4, drop_last=True)
    assert len(dropped) == 2 and [len(b[1]) for b in dropped] == [4, 4]


def test_shuffle_is_a_function_of_seed_and_epoch():
    a = pg.io.DataLoader(Squares(), batch_size=3, shuffle=True, seed=7)
    b = pg.io.DataLoader(Squares(), batch_size=3, shuffle=True, seed=7)
    first, second = batches(a), batches(a)             # two epochs
    assert [x[1].tolist() for x in first] == [x[1].tolist() for x in batches(b)]
    assert [x[1].tolist() for x in first] != [x[1].tolist() for x in second]
    seen = sorted(int(v) for x in first for v in x[1])
    assert seen == [i * i for i in range(10)]            # a permutation: every sample once


@pytest.mark.parametrize("mode", ["thread", "process"])
def test_workers_yield_the_same_batches_as_no_workers(mode):
    want = batches(pg.io.DataLoader(Squares(), batch_size=3, shuffle=True, seed=1))
    got = batches(pg.io.DataLoader(Squares(), batch_size=3, shuffle=True, seed=1, num_workers=2,
                                   worker_mode=mode))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        for gf, wf in zip(g, w):
            np.testing.assert_array_equal(gf, wf)


def test_tensor_dataset_collate_and_dict_samples():
    x, y = np.arange(12, dtype=np.float32).reshape(6, 2), np.arange(6)
    (xb, yb), = list(pg.io.DataLoader(pg.io.TensorDataset([x, y]), batch_size=6))
    np.testing.assert_array_equal(xb, x)
    np.testing.assert_array_equal(yb, y)
    with pytest.raises(ValueError, match="different lengths"):
        pg.io.TensorDataset([x, y[:5]])

    class Dicts(pg.io.Dataset):
        def __len__(self):
            return 4

        def __getitem__(self, i):
            return {"x": np.ones(2) * i, "y": i}
    batch, = list(pg.io.DataLoader(Dicts(), batch_size=4))
    assert batch["y"].tolist() == [0, 1, 2, 3] and batch["x"].shape == [4, 2]


def test_distributed_batch_sampler_splits_padded_indices_between_replicas():
    data = Squares()
    shares = [[i for b in pg.io.DistributedBatchSampler(data, 2, num_replicas=3, rank=r) for i in b]
              for r in range(3)]
    assert shares == [[0, 1, 6, 7], [2, 3, 8, 9], [4, 5, 0, 1]]   # 10 padded to 12 from the start, a batch each in turn
    assert sorted(set(i for s in shares for i in s)) == list(range(10))
    shuffled = [pg.io.DistributedBatchSampler(data, 2, num_replicas=2, rank=r, shuffle=True, seed=3)
                for r in range(2)]
    a, b = ([i for batch in s for i in batch] for s in shuffled)
    assert sorted(a + b) == list(range(10))
    loader = pg.io.DataLoader(data, batch_sampler=pg.io.DistributedBatchSampler(data, 2, num_replicas=2, rank=1))
    assert [x[1].tolist() for x in batches(loader)] == [[4, 9], [36, 49], [81]]   # the last round split evenly
    tiny = [list(pg.io.DistributedBatchSampler(np.arange(2), 1, num_replicas=5, rank=r)) for r in range(5)]
    assert tiny == [[[0]], [[1]], [[0]], [[1]], [[0]]]            # fewer samples than replicas: repeated
    dropped = [list(pg.io.DistributedBatchSampler(np.arange(11), 3, num_replicas=2, rank=r, drop_last=True))
               for r in range(2)]
    assert dropped == [[[0, 1, 2], [6, 7, 8]], [[3, 4, 5], [9, 10, 0]]]   # (all as PaddlePaddle 3.3.1 deals them)


def test_iterable_dataset_is_batched_as_it_streams():
    class Stream(pg.io.IterableDataset):
        def __iter__(self):
            for i in range(5):
                yield np.array([i])
    got = [b.numpy().ravel().tolist() for b in pg.io.DataLoader(Stream(), batch_size=2)]
    assert got == [[0, 1], [2, 3], [4]]
    with pytest.raises(ValueError, match="cannot be shuffled"):
        pg.io.DataLoader(Stream(), shuffle=True)


def test_batches_are_tensors_in_eager_mode_and_arrays_while_a_program_is_built():
    """PaddlePaddle's dygraph DataLoader yields Tensors (`for x, y in loader` and
    `for x, y in loader()` alike); building a program (program_guard), the collated arrays."""
    loader = pg.io.DataLoader(Squares(), batch_size=4)
    for batches_of in (lambda: loader, loader):
        (x, y), = [b for b, _ in zip(batches_of(), range(1))]
        assert isinstance(x, pg.Tensor) and x.stop_gradient and x.shape == [4, 3]
        np.testing.assert_array_equal(y.numpy(), [0, 1, 4, 9])
    with pg.program_guard(pg.Program()):
        x, y = next(iter(loader))
    assert isinstance(x, np.ndarray) and y.tolist() == [0, 1, 4, 9]
