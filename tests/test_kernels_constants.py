"""kernels/constants.py `filled`: read-only arrays of one value, shared between calls."""
import numpy as np
import pytest

from keel.kernels import constants
from keel.kernels.constants import filled


def test_filled_gives_read_only_arrays_of_the_value_shape_and_dtype():
    for dtype, value, shape in [(np.float32, 0, (2, 3)), (np.float64, 6.0, (1, 4, 5)), (np.int64, 0, (7,)),
                                (np.float16, 6.0, ())]:
        like = np.empty(shape, dtype)
        got = filled(np, value, like)
        assert got.shape == shape and got.dtype == dtype and got.flags.c_contiguous
        assert not got.flags.writeable
        np.testing.assert_array_equal(got, np.full(shape, value, dtype))
        with pytest.raises(ValueError):
            got[...] = 1


def test_views_of_a_grown_buffer_keep_their_values_and_the_cache_is_bounded(monkeypatch):
    small = filled(np, 3.0, np.empty((4, 4), np.float32))
    big = filled(np, 3.0, np.empty((70000,), np.float32))   # beyond the first buffer: it grows
    assert big.size == 70000 and np.all(big == 3.0) and np.all(small == 3.0)
    assert filled(np, 3.0, np.empty((4, 4), np.float32)) is small   # one view per shape, kept
    monkeypatch.setattr(constants, "_VIEWS_KEPT", 2)
    for n in range(1, 6):   # more shapes than kept: the cache starts over, the values stay right
        assert np.all(filled(np, 1.0, np.empty((n, 3), np.float64)) == 1.0)
    assert len(constants._views) <= 2


def test_filled_as_the_operand_of_numpy_passes():
    x = np.array([[-1.5, 0.0, 2.0], [np.nan, -0.0, 3.0]], np.float32)
    out = np.maximum(x, filled(np, 0, x))
    np.testing.assert_array_equal(out, np.array([[0, 0, 2], [np.nan, 0, 3]], np.float32))
