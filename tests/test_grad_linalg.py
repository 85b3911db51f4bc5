"""Gradient checks: the linear algebra ops (program/ops/linalg.py). cholesky and eigh read
one triangle of a symmetric input and give the symmetric gradient, so they are checked by
hand along symmetric directions (E_ij + E_ji); the rest through gradcheck's cases. Plus
PaddlePaddle's own gradients, where it is installed."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope
from gradcheck import Case, build_case, rand, run_case

CHECKED_BY_HAND = ("cholesky", "eigh")


def _well_conditioned(*shape, seed=0):
    """Square matrices comfortably far from singular (a scaled identity added)."""
    a = rand(*shape, seed=seed)
    return a + 2.0 * np.eye(shape[-1])


def _spd(*shape, seed=0):
    a = rand(*shape, seed=seed)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


CASES = [
    Case("inverse", {"Input": _well_conditioned(3, 3)}, id="inverse 3x3"),
    Case("inverse", {"Input": _well_conditioned(2, 3, 3, seed=1)}, id="inverse batch"),
    Case("determinant", {"Input": _well_conditioned(3, 3)}, id="determinant 3x3"),
    Case("determinant", {"Input": _well_conditioned(2, 4, 4, seed=2)}, id="determinant batch"),
    Case("solve", {"X": _well_conditioned(3, 3), "Y": rand(3, 2, seed=3)}, id="solve matrix"),
    Case("solve", {"X": _well_conditioned(2, 3, 3), "Y": rand(2, 3, seed=4)}, id="solve vector batch"),
    Case("solve", {"X": _well_conditioned(3, 3), "Y": rand(2, 3, 4, seed=5)}, id="solve X broadcast"),
    Case("solve", {"X": _well_conditioned(2, 1, 3, 3), "Y": rand(1, 3, 3, 2, seed=6)}, id="solve both broadcast"),
    Case("svd", {"X": rand(4, 3, seed=7)}, id="svd tall"),
    Case("svd", {"X": rand(3, 5, seed=8)}, id="svd wide"),
    Case("svd", {"X": rand(2, 3, 3, seed=9)}, id="svd square batch"),
    Case("svd", {"X": rand(3, 3, seed=10)}, {"full_matrices": True}, id="svd full square"),
    Case("qr", {"X": rand(4, 3, seed=11)}, id="qr tall"),
    Case("qr", {"X": rand(2, 3, 3, seed=12)}, {"mode": "complete"}, id="qr square complete"),
    Case("qr", {"X": rand(3, 5, seed=13)}, id="qr wide"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


# -- symmetric inputs, by hand -------------------------------------------------------------------------
def _symmetric_check(op_type, x, attrs, delta=1e-6, rtol=1e-5):
    """d loss along E_ij + E_ji (i < j) and E_ii, by central differences, against the
    analytic gradient G's G_ij + G_ji and G_ii."""
    built = build_case(Case(op_type, {"X": x}, attrs))
    exe, scope = Executor(CPUPlace()), Scope()

    def run(value, fetches):
        return exe.run(built.main, feed={**built.feed, "x0": value}, fetch_list=fetches, scope=scope)

    _, grad = run(x, [built.loss, built.grads[0]])
    assert np.allclose(grad, np.swapaxes(grad, -1, -2)), f"{op_type}: the gradient is not symmetric"
    n = x.shape[-1]
    for batch in np.ndindex(*x.shape[:-2]):
        for i in range(n):
            for j in range(i, n):
                step = np.zeros_like(x)
                step[batch + (i, j)] = step[batch + (j, i)] = delta
                numeric = (float(run(x + step, [built.loss])[0]) - float(run(x - step, [built.loss])[0])) / (2 * delta)
                analytic = grad[batch + (i, j)] + (grad[batch + (j, i)] if i != j else 0.0)
                np.testing.assert_allclose(analytic, numeric, rtol=rtol, atol=1e-8,
                                           err_msg=f"{op_type} {attrs} at {batch + (i, j)}")


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_cholesky_gradient_on_symmetric_inputs(upper, shape):
    _symmetric_check("cholesky", _spd(*shape, seed=14), {"upper": upper})


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("shape", [(3, 3), (2, 4, 4)])
def test_eigh_gradient_on_symmetric_inputs(uplo, shape):
    a = rand(*shape, seed=15)
    _symmetric_check("eigh", a + np.swapaxes(a, -1, -2), {"UPLO": uplo})


def test_gradients_that_do_not_exist_are_refused_by_name():
    for case, message in [(Case("qr", {"X": rand(4, 3)}, {"mode": "complete"}), "mode='complete'"),
                          (Case("svd", {"X": rand(4, 3)}, {"full_matrices": True}), "full_matrices=True")]:
        built = build_case(case)
        with pytest.raises(Exception, match=message):
            Executor().run(built.main, feed=built.feed, fetch_list=built.grads, scope=Scope())


# -- PaddlePaddle's gradients ----------------------------------------------------------------------------
def _paddle_grads(paddle, fn, x, weights):
    t = paddle.to_tensor(x, stop_gradient=False)
    outs = fn(t)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    loss = sum((o * paddle.to_tensor(w)).sum() for o, w in zip(outs, weights))
    loss.backward()
    return [o.numpy() for o in outs], t.grad.numpy()


@pytest.mark.paddle
@pytest.mark.parametrize("name, make, kwargs", [
    ("inv", lambda: _well_conditioned(2, 3, 3), {}),
    ("det", lambda: _well_conditioned(2, 3, 3), {}),
    ("svd", lambda: rand(4, 3, seed=7), {}),
    ("qr", lambda: rand(4, 3, seed=11), {}),
    ("qr", lambda: rand(3, 5, seed=13), {}),
    ("cholesky", lambda: _spd(3, 3, seed=14), {}),
    ("cholesky", lambda: _spd(3, 3, seed=14), {"upper": True}),
    ("eigh", lambda: _spd(3, 3, seed=16), {}),
    ("eigh", lambda: _spd(3, 3, seed=16), {"UPLO": "U"}),
])
def test_values_and_gradients_match_paddles(name, make, kwargs):
    paddle = pytest.importorskip("paddle")
    import keel
    x = make()
    ours_out = getattr(keel.linalg, name)(keel.to_tensor(x), **kwargs)
    ours_out = ours_out if isinstance(ours_out, (list, tuple)) else [ours_out]
    rng = np.random.default_rng(0)
    weights = [rng.uniform(0.5, 1.5, o.shape) for o in ours_out]
    theirs_out, theirs_grad = _paddle_grads(paddle, lambda t: getattr(paddle.linalg, name)(t, **kwargs), x, weights)
    t = keel.to_tensor(x, stop_gradient=False)
    outs = getattr(keel.linalg, name)(t, **kwargs)
    outs = outs if isinstance(outs, (list, tuple)) else [outs]
    loss = outs[0].multiply(keel.to_tensor(weights[0])).sum()
    for o, w in zip(outs[1:], weights[1:]):
        loss = loss + o.multiply(keel.to_tensor(w)).sum()
    loss.backward()
    for ours, theirs in zip(outs, theirs_out):
        np.testing.assert_allclose(ours.numpy(), theirs, rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(t.grad.numpy(), theirs_grad, rtol=1e-8, atol=1e-10)


@pytest.mark.paddle
def test_solve_matches_paddles():
    paddle = pytest.importorskip("paddle")
    import keel
    x, y = _well_conditioned(2, 3, 3), rand(2, 3, 2, seed=3)
    got = keel.linalg.solve(keel.to_tensor(x), keel.to_tensor(y)).numpy()
    want = paddle.linalg.solve(paddle.to_tensor(x), paddle.to_tensor(y)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10)


def test_in_a_program_the_ops_infer_their_shapes():
    main = pg.Program()
    with pg.program_guard(main):
        x = pg.data("x", [-1, 5, 3], "float64")
        u, s, vh = pg.linalg.svd(x)
        q, r = pg.linalg.qr(x, mode="complete")
        w, v = pg.linalg.eigh(pg.matmul(x, x, transpose_y=True))
        d = pg.linalg.det(v)
    assert [list(t.shape) for t in (u, s, vh)] == [[-1, 5, 3], [-1, 3], [-1, 3, 3]]
    assert [list(t.shape) for t in (q, r)] == [[-1, 5, 5], [-1, 5, 3]]
    assert [list(t.shape) for t in (w, v, d)] == [[-1, 5], [-1, 5, 5], [-1]]
    with pytest.raises(Exception, match="square"):
        with pg.program_guard(pg.Program()):
            pg.linalg.inv(pg.data("y", [4, 3], "float64"))
