"""kernels/sums.py: sums along the last axis against float64 sums, on numpy and on the cupy
stand-in."""
import numpy as np
import pytest

from keel.kernels.sums import last_axis_sums


@pytest.mark.parametrize("shape", [(7,), (3, 1), (4, 10), (2, 3, 6625), (1, 5, 2, 33)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_last_axis_sums(shape, dtype):
    a = np.random.default_rng(0).uniform(-1, 1, shape).astype(dtype)
    want = a.astype(np.float64).sum(axis=-1)
    got = last_axis_sums(np, a)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=0, atol=4 * np.finfo(dtype).eps * np.abs(a).sum(axis=-1).max())
    kept = last_axis_sums(np, a, keepdims=True)
    assert kept.shape == shape[:-1] + (1,)
    np.testing.assert_array_equal(kept[..., 0], got)


def test_on_the_device(fake_cupy):
    import standin
    a = np.random.default_rng(1).uniform(-1, 1, (3, 4, 50)).astype(np.float32)
    got = last_axis_sums(fake_cupy, standin.to_device(a), keepdims=True)
    assert standin.is_device(got) and got.shape == (3, 4, 1)
    np.testing.assert_allclose(standin.to_host(got), a.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-6)
