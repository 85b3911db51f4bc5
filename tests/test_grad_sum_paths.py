"""Summing a broadcast gradient back to an operand's shape (kernels/elementwise.py sum_to):
the bias-gradient form (leading and trailing dims summed around a kept block: [N, C, H, W]
to [C]) summed as [lead, kept, trail] rows, against a float64 reference and against numpy's
one reduction over all the axes (the general route, which every other form still takes).
This module reruns on the cupy stand-in (tests/test_standin_kernels.py)."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel

# (X shape, Y shape, axis): Y@GRAD is Out@GRAD summed to Y's shape
CASES = [
    ((6, 5, 7, 3), (5,), 1),            # conv's bias: [N, C, H, W] -> [C]
    ((1, 5, 7, 3), (5,), 1),            # batch 1: no leading rows to add
    ((4, 3, 2, 5, 6), (3, 2), 1),       # two kept dims, two summed after them
    ((4, 9), (9,), -1),                 # fc's bias: leading dims only (numpy's one call)
    ((3, 4, 6), (4, 1), 1),             # Y keeps a size-1 dim: kept block [4], trailing [6]
    ((3, 4, 6), (1, 4, 1), -1),         # same rank, ones around the kept dim
    ((3, 4, 6, 2), (3, 1, 6, 1), -1),   # summed dims not around one block: the general route
    ((2, 3, 4), (1, 1, 1), -1),         # everything summed
]
IDS = [f"{x}->{y} axis {a}" for x, y, a in CASES]


def _add_grad(x, y, dout, axis):
    got = call_kernel("elementwise_add_grad", {"X": x, "Y": y, "Out@GRAD": dout}, {"axis": axis})
    return got["X@GRAD"], got["Y@GRAD"]


def _reference(dout, yshape, axis, xndim):
    """float64: Out@GRAD summed over every dim that Y (lined up at `axis`) does not span or has as 1."""
    start = xndim - len(yshape) if axis == -1 else axis
    full = [1] * xndim
    full[start:start + len(yshape)] = yshape
    axes = tuple(i for i in range(xndim) if full[i] == 1 and dout.shape[i] != 1)
    return dout.astype(np.float64).sum(axis=axes).reshape(yshape)


@pytest.mark.parametrize("xshape,yshape,axis", CASES, ids=IDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_bias_gradient_matches_reference(xshape, yshape, axis, dtype):
    r = np.random.default_rng(0)
    x = r.standard_normal(xshape).astype(dtype)
    y = r.standard_normal(yshape).astype(dtype)
    dout = r.standard_normal(xshape).astype(dtype)
    dx, dy = _add_grad(x, y, dout, axis)
    np.testing.assert_array_equal(dx, dout)
    assert dy.shape == y.shape and dy.dtype == dtype
    terms = dout.size // max(y.size, 1)
    eps = np.finfo(dtype).eps
    np.testing.assert_allclose(dy, _reference(dout, yshape, axis, len(xshape)), rtol=0, atol=4 * eps * terms)


@pytest.mark.parametrize("xshape,yshape,axis", CASES, ids=IDS)
def test_rows_then_trailing_sum_equals_one_reduction(xshape, yshape, axis):
    """Small integers (exact in float32 in any order): the two routes give the same bits."""
    r = np.random.default_rng(1)
    dout = r.integers(-8, 9, xshape).astype(np.float32)
    x, y = np.zeros(xshape, np.float32), np.zeros(yshape, np.float32)
    _, dy = _add_grad(x, y, dout, axis)
    np.testing.assert_array_equal(dy, _reference(dout, yshape, axis, len(xshape)).astype(np.float32))


def test_non_contiguous_and_half_precision_take_the_general_route():
    r = np.random.default_rng(2)
    dout = r.standard_normal((6, 5, 8, 4)).astype(np.float32)[:, :, ::2]      # a strided view
    x, y = np.zeros(dout.shape, np.float32), np.zeros(5, np.float32)
    _, dy = _add_grad(x, y, dout, 1)
    np.testing.assert_allclose(dy, dout.astype(np.float64).sum(axis=(0, 2, 3)), rtol=0, atol=1e-5)
    half = r.standard_normal((3, 4, 2, 2)).astype(np.float16)
    _, dy = _add_grad(np.zeros_like(half), np.zeros(4, np.float16), half, 1)
    assert dy.dtype == np.float16
    np.testing.assert_allclose(dy.astype(np.float64), half.astype(np.float64).sum(axis=(0, 2, 3)), rtol=0, atol=1e-2)
