"""keel.linalg (program/linalg.py): PaddlePaddle's `paddle.linalg` names, eager and in a
program; `norm`'s vector and matrix norms against numpy's definitions, with gradients."""
import numpy as np
import pytest

import keel as paddle
import keel.program as pg
from keel.executor import Executor

RNG = np.random.default_rng(11)
X = RNG.standard_normal((2, 4, 3))


def test_every_name_of_the_issue_is_there():
    import keel.linalg as linalg
    assert linalg is paddle.linalg
    for name in ("norm", "inv", "det", "solve", "svd", "qr", "cholesky", "eigh"):
        assert getattr(paddle.linalg, name) is getattr(pg.linalg, name), name


@pytest.mark.parametrize("p, axis, want", [
    (None, None, np.linalg.norm(X.ravel())),
    ("fro", None, np.linalg.norm(X.ravel())),
    (2, 1, np.linalg.norm(X, 2, axis=1)),
    (1, -1, np.linalg.norm(X, 1, axis=-1)),
    (3.5, 0, np.sum(np.abs(X) ** 3.5, axis=0) ** (1 / 3.5)),
    (float("inf"), 2, np.linalg.norm(X, np.inf, axis=2)),
    (float("-inf"), 2, np.linalg.norm(X, -np.inf, axis=2)),
    ("fro", [-2, -1], np.linalg.norm(X, "fro", axis=(-2, -1))),
    ("nuc", [-2, -1], np.linalg.norm(X, "nuc", axis=(-2, -1))),
    ("nuc", None, np.linalg.norm(X, "nuc", axis=(-2, -1))),
    (1, [1, 2], np.linalg.norm(X, 1, axis=(1, 2))),
    (-1, [1, 2], np.linalg.norm(X, -1, axis=(1, 2))),
    (float("inf"), [1, 2], np.linalg.norm(X, np.inf, axis=(1, 2))),
    (float("-inf"), [2, 1], np.linalg.norm(X, -np.inf, axis=(2, 1))),
    (2, [1, 2], np.linalg.norm(X, 2, axis=(1, 2))),
    (-2, [0, 2], np.linalg.norm(X, -2, axis=(0, 2))),
])
def test_norm_matches_the_definitions(p, axis, want):
    got = paddle.linalg.norm(paddle.to_tensor(X), p=p, axis=axis).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-12)
    kept = paddle.linalg.norm(paddle.to_tensor(X), p=p, axis=axis, keepdim=True).numpy()
    assert kept.size == np.size(want)


def test_norm_refuses_what_paddle_has_not():
    x = paddle.to_tensor(X)
    with pytest.raises(ValueError, match="matrix norm; give two axes"):
        paddle.linalg.norm(x, p="nuc", axis=1)
    with pytest.raises(ValueError, match="not a matrix norm"):
        paddle.linalg.norm(x, p=3, axis=[1, 2])
    with pytest.raises(ValueError, match="must differ"):
        paddle.linalg.norm(x, p="fro", axis=[1, 1])


@pytest.mark.parametrize("p", ["fro", "nuc", 2])
def test_matrix_norm_gradients(p):
    """d ||X||_fro = X / ||X||; d ||X||_nuc = U VH; d ||X||_2 = u1 v1^T."""
    x = paddle.to_tensor(X[0], stop_gradient=False)
    paddle.linalg.norm(x, p=p, axis=[0, 1]).backward()
    u, s, vh = np.linalg.svd(X[0], full_matrices=False)
    want = {"fro": X[0] / np.linalg.norm(X[0]), "nuc": u @ vh, 2: np.outer(u[:, 0], vh[0])}[p]
    np.testing.assert_allclose(x.grad.numpy(), want, rtol=1e-9, atol=1e-12)


def test_the_functions_build_programs_that_train():
    """In a program: x -> qr -> solve with R -> det of an inverse; the gradients flow."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [3, 3], "float64")
        x.stop_gradient = False
        q, r = pg.linalg.qr(x)
        y = pg.linalg.solve(r, pg.linalg.inv(q))
        loss = pg.linalg.det(y) + pg.sum(pg.linalg.eigh(pg.matmul(x, x, transpose_y=True))[0])
        grad, = pg.gradients([loss], [x])
    a = RNG.standard_normal((3, 3)) + 3 * np.eye(3)
    got_loss, got_grad = Executor().run(main, feed={"x": a}, fetch_list=[loss, grad])
    # X = QR: R^-1 Q^-1 = X^-1, so det(y) = 1 / det(X); the eigenvalues of X X^T sum to ||X||_F^2
    np.testing.assert_allclose(got_loss, 1 / np.linalg.det(a) + np.sum(a * a), rtol=1e-10)
    want = -np.linalg.inv(a).T / np.linalg.det(a) + 2 * a
    np.testing.assert_allclose(got_grad, want, rtol=1e-8)
