"""histogram, unique and the bitwise kernels against independent references: explicit
Python loops over the values, and PaddlePaddle 3.3.1's documented results."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel

_T_INT32, _T_INT64 = 2, 3


def _histogram_loop(values, bins, lo, hi):
    """PaddlePaddle's binning, one value at a time."""
    counts = [0] * bins
    for v in values:
        if lo <= v <= hi:
            counts[min(int((v - lo) * bins / (hi - lo)), bins - 1)] += 1
    return counts


def test_histogram_documented_example():
    x = np.array([1.0, 2, 1, 4, 5, 0.5, 7], np.float32)
    out = call_kernel("histogram", {"X": x}, {"bins": 4})["Out"]
    assert out.dtype == np.int64
    np.testing.assert_array_equal(out, [4, 0, 2, 1])   # PaddlePaddle 3.3.1's result
    np.testing.assert_array_equal(call_kernel("histogram", {"X": x}, {"bins": 4, "min": 1.0, "max": 4.0})["Out"],
                                  [2, 1, 0, 1])
    # one value: the range widened to [2, 4]
    np.testing.assert_array_equal(call_kernel("histogram", {"X": np.array([3, 3, 3], np.int64)}, {"bins": 3})["Out"],
                                  [0, 3, 0])


@pytest.mark.parametrize("bins, lo, hi", [(10, 0.0, 0.0), (7, -1.0, 1.5), (1, 0.0, 0.0), (5, 0.25, 0.5)])
def test_histogram_against_a_loop(bins, lo, hi):
    x = np.random.default_rng(bins).normal(size=(6, 9)).astype(np.float64)
    got = call_kernel("histogram", {"X": x}, {"bins": bins, "min": lo, "max": hi})["Out"]
    a, b = (x.min(), x.max()) if lo == hi == 0.0 else (lo, hi)
    assert got.tolist() == _histogram_loop(x.reshape(-1).tolist(), bins, a, b)


def test_histogram_weight_and_density():
    x = np.array([0.0, 0.5, 1.0, 1.5, 2.0], np.float32)
    w = np.array([1.0, 2.0, 3.0, 4.0, 5.0], np.float32)
    weighted = call_kernel("histogram", {"X": x, "Weight": w}, {"bins": 2, "min": 0.0, "max": 2.0})["Out"]
    assert weighted.dtype == np.float32
    np.testing.assert_allclose(weighted, [1 + 2, 3 + 4 + 5])
    density = call_kernel("histogram", {"X": np.array([1.0, 2, 1, 4, 5, 0.5, 7], np.float32)},
                          {"bins": 4, "density": True})["Out"]
    # PaddlePaddle 3.3.1's documented-example result
    np.testing.assert_allclose(density, [0.35164836, 0.0, 0.17582418, 0.08791209], rtol=1e-6)


def test_unique_sorted_with_index_inverse_counts():
    x = np.array([2, 3, 3, 1, 5, 3], np.int64)
    got = call_kernel("unique", {"X": x}, {"is_sorted": True, "dtype": _T_INT64})
    np.testing.assert_array_equal(got["Out"], [1, 2, 3, 5])
    np.testing.assert_array_equal(got["Indices"], [3, 0, 1, 4])
    np.testing.assert_array_equal(got["Index"], [1, 2, 2, 0, 3, 2])
    np.testing.assert_array_equal(got["Counts"], [1, 1, 3, 1])


def test_unique_along_an_axis_and_int32_indices():
    x = np.array([[2, 1], [3, 3], [2, 1]], np.float32)
    got = call_kernel("unique", {"X": x}, {"is_sorted": True, "axis": [0], "dtype": _T_INT32})
    np.testing.assert_array_equal(got["Out"], [[2, 1], [3, 3]])
    for slot, want in (("Indices", [0, 1]), ("Index", [0, 1, 0]), ("Counts", [2, 1])):
        assert got[slot].dtype == np.int32
        np.testing.assert_array_equal(got[slot], want)


def test_unique_unsorted_keeps_first_appearance_order():
    x = np.array([5, 2, 5, 9, 2, 1], np.int32)
    got = call_kernel("unique", {"X": x}, {"is_sorted": False, "dtype": _T_INT64})
    seen = list(dict.fromkeys(x.tolist()))
    assert got["Out"].tolist() == seen
    assert got["Index"].tolist() == [seen.index(v) for v in x.tolist()]
    assert got["Indices"].tolist() == [x.tolist().index(v) for v in seen]
    assert got["Counts"].tolist() == [x.tolist().count(v) for v in seen]


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.int64, np.bool_])
def test_bitwise_ops_against_python_operators(dtype):
    rng = np.random.default_rng(3)
    info = np.iinfo(dtype) if dtype != np.bool_ else None
    if info is None:
        x, y = rng.random((3, 4)) < 0.5, rng.random((4,)) < 0.5
    else:
        x = rng.integers(info.min, info.max, (3, 4), endpoint=True).astype(dtype)
        y = rng.integers(info.min, info.max, (4,), endpoint=True).astype(dtype)
    yb = np.broadcast_to(y, x.shape)
    width = 1 if info is None else info.bits
    for op, fn in (("bitwise_and", lambda a, b: a & b), ("bitwise_or", lambda a, b: a | b),
                   ("bitwise_xor", lambda a, b: a ^ b)):
        got = call_kernel(op, {"X": x, "Y": y}, {})["Out"]
        assert got.dtype == x.dtype
        assert got.tolist() == [[fn(a, b) for a, b in zip(r, s)] for r, s in zip(x.tolist(), yb.tolist())]
    got = call_kernel("bitwise_not", {"X": x}, {})["Out"]
    if info is None:
        want = [[not a for a in r] for r in x.tolist()]
    elif info.min < 0:
        want = [[-a - 1 for a in r] for r in x.tolist()]    # two's complement
    else:
        want = [[(1 << width) - 1 - a for a in r] for r in x.tolist()]
    assert got.dtype == x.dtype and got.tolist() == want
