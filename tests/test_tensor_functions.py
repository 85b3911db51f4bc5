"""The top-level tensor functions PaddlePaddle's model zoos use (issue 30): each against a
numpy reference of PaddlePaddle 3.3.1's documented behaviour, run eagerly and built into a
program (the same function, the same ops), and the differentiable ones gradient-checked
eagerly against central differences in float64; with PaddlePaddle installed, against it."""
import numpy as np
import pytest

import keel as paddle
import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope

_RNG = np.random.default_rng(30)


def _f64(*shape, low=-1.0, high=1.0):
    return _RNG.uniform(low, high, shape)


def _eager(fn, arrays):
    out = fn(*[paddle.to_tensor(a) for a in arrays])
    return [np.asarray(o.numpy()) for o in (out if isinstance(out, (list, tuple)) else [out])]


def _static(fn, arrays):
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        feeds = [pg.data(f"in{i}", list(a.shape), str(a.dtype)) for i, a in enumerate(arrays)]
        out = fn(*feeds)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    exe = Executor(CPUPlace())
    scope = Scope()
    exe.run(startup, scope=scope)
    return exe.run(main, feed={f"in{i}": a for i, a in enumerate(arrays)}, fetch_list=outs, scope=scope)


def _check(fn, arrays, want, **tol):
    wants = want if isinstance(want, list) else [want]
    for mode, got in (("eager", _eager(fn, arrays)), ("static", _static(fn, arrays))):
        assert len(got) == len(wants), mode
        for g, w in zip(got, wants):
            w = np.asarray(w)
            assert g.shape == w.shape, f"{mode}: shape {g.shape}, want {w.shape}"
            assert g.dtype == w.dtype, f"{mode}: dtype {g.dtype}, want {w.dtype}"
            np.testing.assert_allclose(g, w, err_msg=mode, **(tol or {"rtol": 1e-6, "atol": 1e-12}))


def _numeric_grad(fn, arrays, weights, wrt, h=1e-6):
    def loss(values):
        outs = _eager(fn, values)
        return sum(float(np.sum(o * w)) for o, w in zip(outs, weights))
    grad = np.zeros_like(arrays[wrt])
    for idx in np.ndindex(arrays[wrt].shape):
        plus = [a.copy() for a in arrays]
        minus = [a.copy() for a in arrays]
        plus[wrt][idx] += h
        minus[wrt][idx] -= h
        grad[idx] = (loss(plus) - loss(minus)) / (2 * h)
    return grad


def _check_grad(fn, arrays, wrt=(0,), rtol=1e-5, atol=1e-7):
    """Eager backward of sum(out * w) (fixed random w) against central differences."""
    tensors = [paddle.to_tensor(a, stop_gradient=i not in wrt) for i, a in enumerate(arrays)]
    out = fn(*tensors)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    weights = [_RNG.uniform(0.5, 1.5, o.shape) for o in outs]
    loss = paddle.add_n([paddle.sum(o * paddle.to_tensor(w)) for o, w in zip(outs, weights)])
    grads = paddle.grad([loss], [tensors[i] for i in wrt])
    for i, g in zip(wrt, grads):
        np.testing.assert_allclose(g.numpy(), _numeric_grad(fn, arrays, weights, i), rtol=rtol, atol=atol,
                                   err_msg=f"input {i}")


# -- values, eager and static ---------------------------------------------------------------------

def test_addmm():
    inp, x, y = _f64(3, 4), _f64(3, 2), _f64(2, 4)
    _check(lambda i, a, b: paddle.addmm(i, a, b, beta=0.5, alpha=2.0), [inp, x, y], 0.5 * inp + 2.0 * x @ y)
    row = _f64(4)
    _check(lambda i, a, b: paddle.addmm(i, a, b), [row, x, y], row + x @ y)   # input broadcast


def test_fmax_fmin_ignore_one_nan():
    x = np.array([1.0, np.nan, 3.0, np.nan, -2.0])
    y = np.array([2.0, 5.0, np.nan, np.nan, -3.0])
    _check(paddle.fmax, [x, y], np.fmax(x, y))
    _check(paddle.fmin, [x, y], np.fmin(x, y))


@pytest.mark.parametrize("axis, keepdim", [(None, False), (1, False), (0, True), ([0, 2], False), (-1, True)])
def test_logsumexp(axis, keepdim):
    x = _f64(2, 3, 4) * 50      # large values: computed around the maximum
    ax = tuple(axis) if isinstance(axis, list) else axis
    m = np.max(x, axis=ax, keepdims=True)
    want = np.log(np.sum(np.exp(x - m), axis=ax, keepdims=True)) + m
    want = want if keepdim else np.squeeze(want, axis=ax if ax is not None else None)
    _check(lambda t: paddle.logsumexp(t, axis=axis, keepdim=keepdim), [x], want, rtol=1e-12, atol=1e-12)


def test_logsumexp_of_infinities():
    x = np.array([[-np.inf, -np.inf], [np.inf, 1.0], [0.0, 0.0]])
    _check(lambda t: paddle.logsumexp(t, axis=1), [x], np.array([-np.inf, np.inf, np.log(2.0)]))


@pytest.mark.parametrize("axis, unbiased, keepdim", [(None, True, False), (1, False, False), ([0, 2], True, True)])
def test_var(axis, unbiased, keepdim):
    x = _f64(3, 4, 5)
    ax = tuple(axis) if isinstance(axis, list) else axis
    _check(lambda t: paddle.var(t, axis=axis, unbiased=unbiased, keepdim=keepdim), [x],
           np.var(x, axis=ax, ddof=1 if unbiased else 0, keepdims=keepdim))


def test_sort():
    x = _f64(3, 5)
    _check(lambda t: paddle.sort(t), [x], np.sort(x, axis=-1))
    _check(lambda t: paddle.sort(t, axis=0, descending=True), [x], -np.sort(-x, axis=0))


def test_tan():
    x = _f64(2, 3)
    _check(paddle.tan, [x], np.tan(x), rtol=1e-14)


def test_allclose_and_equal_all():
    x = np.array([1.0, np.nan, np.inf, 1e10])
    y = np.array([1.0 + 1e-9, np.nan, np.inf, 1.00001e10])
    for equal_nan in (False, True):
        _check(lambda a, b: paddle.allclose(a, b, equal_nan=equal_nan), [x, y],
               np.array(np.allclose(x, y, equal_nan=equal_nan)))
    _check(lambda a, b: paddle.allclose(a, b, rtol=0.0, atol=0.1), [x[:1], y[:1] + 0.2], np.array(False))
    a = np.arange(6).reshape(2, 3)
    _check(paddle.equal_all, [a, a.copy()], np.array(True))
    b = a.copy()
    b[1, 2] = 0
    _check(paddle.equal_all, [a, b], np.array(False))
    _check(paddle.equal_all, [a, a.reshape(3, 2)], np.array(False))    # shapes differ


def test_bitwise_functions():
    x = np.array([[5, -3], [0, 127]], np.int8)
    y = np.array([3, 6], np.int8)
    _check(paddle.bitwise_not, [x], ~x)
    _check(paddle.bitwise_and, [x, y], x & y)
    _check(paddle.bitwise_or, [x, y], x | y)
    _check(paddle.bitwise_xor, [x, y], x ^ y)
    flags = np.array([True, False])
    _check(paddle.bitwise_not, [flags], ~flags)


def test_bitwise_not_refuses_floats():
    with pytest.raises(pg.DTypeError, match="bitwise_not"):
        paddle.bitwise_not(paddle.to_tensor([1.0]))


def test_histogram_and_unique():
    x = np.array([1.0, 2, 1, 4, 5, 0.5, 7], np.float32)
    _check(lambda t: paddle.histogram(t, bins=4), [x], np.array([4, 0, 2, 1], np.int64))
    _check(lambda t: paddle.histogram(t, bins=4, min=1, max=4), [x], np.array([2, 1, 0, 1], np.int64))
    v = np.array([2, 3, 3, 1, 5, 3], np.int64)
    _check(lambda t: paddle.unique(t), [v], np.array([1, 2, 3, 5]))
    _check(lambda t: paddle.unique(t, return_index=True, return_inverse=True, return_counts=True), [v],
           [np.array([1, 2, 3, 5]), np.array([3, 0, 1, 4]), np.array([1, 2, 2, 0, 3, 2]), np.array([1, 1, 3, 1])])
    _check(lambda t: paddle.unique(t, return_counts=True, dtype="int32"), [v],
           [np.array([1, 2, 3, 5]), np.array([1, 1, 3, 1], np.int32)])
    m = np.array([[2, 1], [3, 3], [2, 1]], np.int64)
    _check(lambda t: paddle.unique(t, axis=0, return_inverse=True), [m], [np.array([[2, 1], [3, 3]]),
                                                                         np.array([0, 1, 0])])


def test_shaping_functions():
    x = _f64(2, 6)
    _check(lambda t: paddle.broadcast_to(t, [3, 2, 6]), [x], np.broadcast_to(x, (3, 2, 6)))
    _check(lambda a, b: paddle.cat([a, b], axis=1), [x, x * 2], np.concatenate([x, x * 2], axis=1))
    _check(lambda t: paddle.chunk(t, 3, axis=1), [x], np.split(x, 3, axis=1))
    _check(paddle.t, [x], x.T)
    _check(paddle.t, [x[0]], x[0])
    _check(lambda t: paddle.unbind(t, axis=1), [x], [x[:, i] for i in range(6)])
    _check(paddle.clone, [x], x)


@pytest.mark.parametrize("offset", [0, 1, -1, 3])
def test_diag_and_diagonal(offset):
    m = _f64(4, 5)
    _check(lambda t: paddle.diag(t, offset), [m], np.diag(m, offset))
    v = _f64(3)
    _check(lambda t: paddle.diag(t, offset), [v], np.diag(v, offset))
    padded = np.diag(v, offset)
    padded[padded == 0] = 7.0
    _check(lambda t: paddle.diag(t, offset, padding_value=7), [v], padded)
    a = _f64(2, 3, 4)
    for axis1, axis2 in ((0, 1), (1, 2), (2, 0), (-1, -2)):
        _check(lambda t: paddle.diagonal(t, offset, axis1, axis2), [a], np.diagonal(a, offset, axis1, axis2))


def test_diag_of_ints_keeps_the_padding_exact():
    v = np.array([1, 2], np.int64)
    want = np.full((2, 2), 2 ** 40, np.int64)
    np.fill_diagonal(want, v)
    _check(lambda t: paddle.diag(t, padding_value=2 ** 40), [v], want)


def test_repeat_interleave():
    x = np.arange(6, dtype=np.float64).reshape(2, 3)
    _check(lambda t: paddle.repeat_interleave(t, 2), [x], np.repeat(x, 2))
    _check(lambda t: paddle.repeat_interleave(t, [1, 0, 3], axis=1), [x], np.repeat(x, [1, 0, 3], axis=1))
    counts = paddle.to_tensor(np.array([2, 1]))
    np.testing.assert_array_equal(paddle.repeat_interleave(paddle.to_tensor(x), counts, axis=0).numpy(),
                                  np.repeat(x, [2, 1], axis=0))


def test_masked_select_and_index_sample():
    x = _f64(3, 4)
    mask = x > 0
    _check(paddle.masked_select, [x, mask], x[mask])
    row_mask = np.array([True, False, True, True])    # broadcast over the rows
    _check(paddle.masked_select, [x, row_mask], x[np.broadcast_to(row_mask, x.shape)])
    index = np.array([[0, 3], [1, 1], [2, 0]], np.int64)
    _check(paddle.index_sample, [x, index], np.take_along_axis(x, index, axis=1))


def test_meshgrid():
    a, b, c = _f64(2), _f64(3), _f64(4)
    _check(lambda *ts: paddle.meshgrid(*ts), [a, b, c], list(np.meshgrid(a, b, c, indexing="ij")))
    _check(lambda p, q: paddle.meshgrid([p, q]), [a, b], list(np.meshgrid(a, b, indexing="ij")))


def test_creation_functions():
    assert paddle.empty([2, 3]).shape == [2, 3] and paddle.empty([2, 3]).dtype == paddle.float32
    assert paddle.empty([2], dtype="int64").dtype == paddle.int64
    like = paddle.empty_like(paddle.to_tensor(np.ones((2, 2), np.int32)))
    assert like.shape == [2, 2] and like.dtype == paddle.int32
    np.testing.assert_array_equal(paddle.eye(3).numpy(), np.eye(3, dtype=np.float32))
    np.testing.assert_array_equal(paddle.eye(2, 4, dtype="int64").numpy(), np.eye(2, 4, dtype=np.int64))
    perm = paddle.randperm(50).numpy()
    assert perm.dtype == np.int64 and sorted(perm.tolist()) == list(range(50))
    assert paddle.randperm(5, dtype="int32").numpy().dtype == np.int32
    x = paddle.to_tensor(np.zeros((40, 3), np.float32))
    drawn = paddle.randint_like(x, 2, 5).numpy()
    assert drawn.dtype == np.float32 and drawn.shape == (40, 3)
    assert set(np.unique(drawn).tolist()) == {2.0, 3.0, 4.0}
    assert set(np.unique(paddle.randint_like(x, 3, dtype="int32").numpy()).tolist()) <= {0, 1, 2}


def test_creation_functions_in_a_program():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        outs = [paddle.eye(3, 2), paddle.randperm(6), paddle.empty([2], "int32")]
    got = Executor(CPUPlace()).run(main, fetch_list=outs, scope=Scope())
    np.testing.assert_array_equal(got[0], np.eye(3, 2, dtype=np.float32))
    assert sorted(got[1].tolist()) == list(range(6))
    assert got[2].dtype == np.int32 and got[2].shape == (2,)


def test_predicates():
    t = paddle.to_tensor([1.0])
    assert paddle.is_tensor(t) and not paddle.is_tensor(np.ones(1)) and not paddle.is_tensor([1.0])
    assert paddle.is_floating_point(t) and not paddle.is_floating_point(paddle.to_tensor([1]))
    with pytest.raises(TypeError, match="is_floating_point"):
        paddle.is_floating_point(np.ones(2))


def test_build_time_errors_name_the_function():
    with pytest.raises(pg.ShapeError, match="t: expects a tensor of at most 2 dims"):
        paddle.t(paddle.to_tensor(np.ones((2, 2, 2))))
    with pytest.raises(pg.AttrError, match="repeats must be one count or 3"):
        paddle.repeat_interleave(paddle.to_tensor(np.ones(3)), [1, 2])
    with pytest.raises(pg.ShapeError, match="do not broadcast"):
        paddle.masked_select(paddle.to_tensor(np.ones((2, 3))), paddle.to_tensor(np.ones(4, bool)))


# -- gradients ------------------------------------------------------------------------------------

_GRAD_CASES = {
    "addmm": (lambda i, a, b: paddle.addmm(i, a, b, beta=0.7, alpha=-1.3), [_f64(3), _f64(2, 2), _f64(2, 3)],
              (0, 1, 2)),
    "fmax": (paddle.fmax, [_f64(3, 4), _f64(3, 4) + 0.05], (0, 1)),
    "fmin": (paddle.fmin, [_f64(3, 4), _f64(3, 4) + 0.05], (0, 1)),
    "logsumexp": (lambda t: paddle.logsumexp(t, axis=1), [_f64(3, 4) * 3], (0,)),
    "logsumexp_all": (paddle.logsumexp, [_f64(2, 3)], (0,)),
    "var": (lambda t: paddle.var(t, axis=0), [_f64(4, 3)], (0,)),
    "sort": (lambda t: paddle.sort(t, axis=1, descending=True), [_f64(3, 5)], (0,)),
    "diag_matrix": (lambda t: paddle.diag(t, -1), [_f64(4, 3)], (0,)),
    "diag_vector": (lambda t: paddle.diag(t, 1, padding_value=2), [_f64(3)], (0,)),
    "diagonal": (lambda t: paddle.diagonal(t, 1, 2, 0), [_f64(3, 2, 4)], (0,)),
    "masked_select": (lambda t: paddle.masked_select(t, paddle.to_tensor(np.array([[True, False, True]] * 2))),
                      [_f64(2, 3)], (0,)),
    "index_sample": (lambda t: paddle.index_sample(t, paddle.to_tensor(np.array([[2, 2], [0, 1]]))), [_f64(2, 3)],
                     (0,)),
    "repeat_interleave": (lambda t: paddle.repeat_interleave(t, [2, 0, 1], axis=1), [_f64(2, 3)], (0,)),
    "meshgrid": (lambda a, b: paddle.meshgrid(a, b), [_f64(2), _f64(3)], (0, 1)),
    "broadcast_to": (lambda t: paddle.broadcast_to(t, [2, 3]), [_f64(3)], (0,)),
    "chunk": (lambda t: paddle.chunk(t, 2, axis=1), [_f64(2, 4)], (0,)),
    "unbind": (lambda t: paddle.unbind(t, 1), [_f64(2, 3)], (0,)),
    "t": (paddle.t, [_f64(2, 3)], (0,)),
    "cat": (lambda a, b: paddle.cat([a, b]), [_f64(2, 3), _f64(1, 3)], (0, 1)),
    "clone": (paddle.clone, [_f64(2, 3)], (0,)),
    "tan": (paddle.tan, [_f64(2, 3)], (0,)),
}


@pytest.mark.parametrize("name", sorted(_GRAD_CASES))
def test_gradient(name):
    fn, arrays, wrt = _GRAD_CASES[name]
    _check_grad(fn, arrays, wrt)


# -- PaddlePaddle as the oracle -------------------------------------------------------------------

_ORACLE_CASES = [
    ("addmm", lambda P, i, a, b: P.addmm(i, a, b, beta=0.5, alpha=2.0), [_f64(3, 4), _f64(3, 2), _f64(2, 4)]),
    ("fmax", lambda P, a, b: P.fmax(a, b), [np.array([1.0, np.nan, 3.0]), np.array([np.nan, 2.0, 4.0])]),
    ("logsumexp", lambda P, a: P.logsumexp(a, axis=[0, 2], keepdim=True), [_f64(2, 3, 4)]),
    ("var", lambda P, a: P.var(a, axis=1, unbiased=False), [_f64(3, 4)]),
    ("diag", lambda P, a: P.diag(a, -2, padding_value=3), [_f64(3)]),
    ("diagonal", lambda P, a: P.diagonal(a, 1, 2, 0), [_f64(3, 2, 4)]),
    ("histogram", lambda P, a: P.histogram(a, bins=6), [_RNG.normal(size=40).astype(np.float32)]),
    ("unique", lambda P, a: P.unique(a, return_index=True, return_inverse=True, return_counts=True),
     [_RNG.integers(0, 5, (4, 6))]),
    ("unique_axis", lambda P, a: P.unique(a, axis=1, return_inverse=True), [_RNG.integers(0, 2, (2, 6))]),
    ("masked_select", lambda P, a, m: P.masked_select(a, m), [_f64(3, 4), _RNG.random((1, 4)) > 0.5]),
    ("repeat_interleave", lambda P, a: P.repeat_interleave(a, 3, axis=0), [_f64(2, 3)]),
    ("meshgrid", lambda P, a, b: P.meshgrid(a, b), [_f64(2), _f64(3)]),
    ("bitwise_not", lambda P, a: P.bitwise_not(a), [np.array([0, 5, 255], np.uint8)]),
    ("allclose", lambda P, a, b: P.allclose(a, b, rtol=1e-3), [np.ones(3), np.ones(3) + 5e-4]),
    ("equal_all", lambda P, a, b: P.equal_all(a, b), [np.ones(3), np.ones(3)]),
    ("sort", lambda P, a: P.sort(a, axis=0, descending=True), [_f64(4, 3)]),
    ("index_sample", lambda P, a, i: P.index_sample(a, i), [_f64(2, 4), np.array([[3, 0, 0], [1, 2, 3]])]),
]


@pytest.mark.paddle
@pytest.mark.parametrize("name, fn, arrays", _ORACLE_CASES, ids=[c[0] for c in _ORACLE_CASES])
def test_equals_paddle(name, fn, arrays):
    P = pytest.importorskip("paddle")
    P.disable_static()
    want = fn(P, *[P.to_tensor(a) for a in arrays])
    wants = [np.asarray(w.numpy()) for w in (want if isinstance(want, (list, tuple)) else [want])]
    _check(lambda *ts: fn(paddle, *ts), arrays, wants, rtol=1e-6, atol=1e-12)
