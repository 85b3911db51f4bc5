"""Row-wise kernels over cache-sized blocks of rows (kernels/blocked.py `row_blocks`):
layer_norm, layer_norm_grad and softmax_grad over the last axis, in many blocks, against
float64 references; and the row and column sums and dot products they use
(kernels/sums.py) against numpy's."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import activation, blocked, registry, sums

SMALL_BLOCKS = 4096  # bytes: many blocks even for small test tensors


def _rng(seed=0):
    return np.random.default_rng(seed)


def _small_blocks(monkeypatch):
    """(A helper, not a fixture: the tests rerun on the cupy stand-in,
    tests/test_standin_kernels.py, without this module's fixtures.)"""
    monkeypatch.setattr(blocked, "BLOCK_BYTES", SMALL_BLOCKS)


# -- the sums and dots --------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_and_column_dots_and_sums_equal_numpys(dtype):
    a = _rng().standard_normal((37, 129)).astype(dtype)
    b = _rng(1).standard_normal((37, 129)).astype(dtype)
    tol = {"rtol": 1e-5, "atol": 1e-5} if dtype == np.float32 else {"rtol": 1e-12, "atol": 1e-12}
    for got, want in [(sums.last_axis_dots(np, a, b), (a * b).sum(axis=1)),
                      (sums.column_sums(np, a), a.sum(axis=0)),
                      (sums.column_dots(np, a, b), (a * b).sum(axis=0))]:
        assert got.dtype == dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, **tol)
    assert sums.last_axis_dots(np, a.reshape(37, 3, 43), b.reshape(37, 3, 43)).shape == (37, 3)


# -- row_blocks ---------------------------------------------------------------------------------

@pytest.mark.parametrize("n_rows,width", [(0, 8), (1, 8), (5, 3), (1000, 7), (257, 128), (64, 2000)])
def test_row_blocks_cover_every_row_once_in_whole_blocks(n_rows, width, monkeypatch):
    _small_blocks(monkeypatch)
    seen = np.zeros(n_rows, np.int64)
    ranges = blocked.row_blocks(np, n_rows, width * 4)
    for lo, hi in ranges:
        seen[lo:hi] += 1
    assert (seen == 1).all()
    per = max(1, SMALL_BLOCKS // (width * 4))
    assert all(hi - lo == per for lo, hi in ranges[:-1])
    assert all(0 < hi - lo <= per for lo, hi in ranges)
    assert len(blocked.row_blocks(np, n_rows, 0)) == min(n_rows, 1)   # rows of no bytes: one block


# -- the kernels --------------------------------------------------------------------------------

def _layer_norm_inputs(shape, begin, dtype, seed=3):
    r = _rng(seed)
    right = int(np.prod(shape[begin:]))
    x = (r.standard_normal(shape) * 2 + 1).astype(dtype)
    return {"X": x, "Scale": r.standard_normal(right).astype(dtype), "Bias": r.standard_normal(right).astype(dtype)}


def _layer_norm_reference(x, scale, bias, begin, eps=1e-5):
    x2 = x.astype(np.float64).reshape(int(np.prod(x.shape[:begin])), -1)
    mu, var = x2.mean(1), x2.var(1)
    xhat = (x2 - mu[:, None]) / np.sqrt(var[:, None] + eps)
    return (xhat * scale + bias).reshape(x.shape), mu, var, xhat


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,begin", [((6, 50, 64), 2), ((300, 40), 1), ((4, 9, 5, 7), 1)])
def test_layer_norm_in_many_blocks(shape, begin, dtype, monkeypatch):
    _small_blocks(monkeypatch)
    inputs = _layer_norm_inputs(shape, begin, dtype)
    attrs = {"begin_norm_axis": begin, "epsilon": 1e-5}
    got = call_kernel("layer_norm", inputs, attrs)
    y, mu, var, _ = _layer_norm_reference(inputs["X"], inputs["Scale"], inputs["Bias"], begin)
    tol = 2e-5 if dtype == np.float32 else 1e-10
    np.testing.assert_allclose(got["Y"], y, rtol=tol, atol=tol)
    assert got["Mean"].shape == got["Variance"].shape == shape[:begin]   # PaddlePaddle 3.3.1's
    np.testing.assert_allclose(got["Mean"].reshape(-1), mu, rtol=tol, atol=tol)
    np.testing.assert_allclose(got["Variance"].reshape(-1), var, rtol=tol, atol=tol)
    assert got["Y"].dtype == dtype


def test_layer_norm_of_rows_of_no_items_gives_nan_statistics_without_warnings():
    x = np.zeros((3, 0), np.float32)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = call_kernel("layer_norm", {"X": x, "Scale": None, "Bias": None}, {"begin_norm_axis": 1, "epsilon": 1e-5})
    assert got["Y"].shape == (3, 0) and np.isnan(got["Mean"]).all() and np.isnan(got["Variance"]).all()


def _layer_norm_grad(inputs, attrs, need):
    """The kernel's outputs by slot; `need`: the slots the op binds (None: all, through
    call_kernel, which binds all)."""
    if need is None:
        return call_kernel("layer_norm_grad", inputs, attrs)
    kdef = registry.get("layer_norm_grad")
    values = kdef.fn(np, *(inputs[slot] for slot in kdef.inputs), **attrs, need=frozenset(need))
    return dict(zip(kdef.outputs, values))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("need", [None, {"X@GRAD"}, {"Scale@GRAD", "Bias@GRAD"}, {"Bias@GRAD"}])
def test_layer_norm_grad_in_many_blocks(dtype, need, monkeypatch):
    _small_blocks(monkeypatch)
    shape, begin = (8, 60, 48), 2
    inputs = _layer_norm_inputs(shape, begin, dtype)
    attrs = {"begin_norm_axis": begin, "epsilon": 1e-5}
    fwd = call_kernel("layer_norm", inputs, attrs)
    dy = _rng(9).standard_normal(shape).astype(dtype)
    grad_inputs = {**inputs, "Mean": fwd["Mean"], "Variance": fwd["Variance"], "Y@GRAD": dy}
    got = _layer_norm_grad(grad_inputs, attrs, need)
    _, mu, var, xhat = _layer_norm_reference(inputs["X"], inputs["Scale"], inputs["Bias"], begin)
    g = dy.astype(np.float64).reshape(xhat.shape) * inputs["Scale"]
    inv_std = 1 / np.sqrt(var + 1e-5)[:, None]
    dx = inv_std * (g - g.mean(1, keepdims=True) - xhat * (g * xhat).mean(1, keepdims=True))
    want = {"X@GRAD": dx.reshape(shape), "Scale@GRAD": (dy.reshape(xhat.shape) * xhat).sum(0),
            "Bias@GRAD": dy.reshape(xhat.shape).astype(np.float64).sum(0)}
    tol = 1e-4 if dtype == np.float32 else 1e-9
    for slot in need or want:
        np.testing.assert_allclose(got[slot], want[slot], rtol=tol, atol=tol, err_msg=slot)
        assert got[slot].dtype == dtype
    for slot in set(want) - set(need or want):
        assert got[slot] is None


def test_layer_norm_grad_needing_nothing_computes_nothing():
    inputs = _layer_norm_inputs((4, 6), 1, np.float32)
    fwd = call_kernel("layer_norm", inputs, {"begin_norm_axis": 1, "epsilon": 1e-5})
    got = _layer_norm_grad({**inputs, "Mean": fwd["Mean"], "Variance": fwd["Variance"], "Y@GRAD": inputs["X"]},
                           {"begin_norm_axis": 1, "epsilon": 1e-5}, set())
    assert got == {"X@GRAD": None, "Scale@GRAD": None, "Bias@GRAD": None}


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_softmax_grad_over_rows_equals_the_general_form_and_float64(dtype, monkeypatch):
    _small_blocks(monkeypatch)
    r = _rng(5)
    z = r.standard_normal((3, 4, 30, 33))  # 11880 elements: the row form
    out = np.exp(z - z.max(-1, keepdims=True))
    out = (out / out.sum(-1, keepdims=True)).astype(dtype)
    dout = r.standard_normal(z.shape).astype(dtype)
    rows_form = []
    monkeypatch.setattr(activation, "_softmax_grad_rows",
                        lambda *a, _f=activation._softmax_grad_rows: rows_form.append(1) or _f(*a))
    got = call_kernel("softmax_grad", {"Out": out, "Out@GRAD": dout}, {"axis": -1})["X@GRAD"]
    assert rows_form  # out.size >= _SOFTMAX_GRAD_ROWS_MIN: the row form ran
    o, d = out.astype(np.float64), dout.astype(np.float64)
    want = o * (d - (d * o).sum(-1, keepdims=True))
    assert got.dtype == dtype and got.shape == out.shape
    tol = {np.float16: 2e-3, np.float32: 1e-6, np.float64: 1e-13}[dtype]
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)
    # the general form (another axis: no rows) agrees
    moved = call_kernel("softmax_grad", {"Out": np.moveaxis(out, -1, 1), "Out@GRAD": np.moveaxis(dout, -1, 1)},
                        {"axis": 1})["X@GRAD"]
    np.testing.assert_allclose(np.moveaxis(moved, 1, -1).astype(np.float64), want, rtol=tol, atol=tol)
