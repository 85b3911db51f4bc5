"""The linear algebra kernels (kernels/linalg.py) against what defines each result, not
against the LAPACK call the kernel makes: X X^-1 = I, Sarrus' rule for det, X Out = Y,
U S VH = X with orthonormal factors, Q R = X with R upper triangular, L L^T = X, X V = V W;
and each gradient kernel against central differences of its forward kernel along a
random direction (symmetric for cholesky and eigh). Run again on the cupy stand-in by
tests/test_standin_kernels.py."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel

RNG = np.random.default_rng(7)


def _mat(*shape, shift=0.0):
    """Uniform values; `shift` times the identity added to square matrices."""
    return RNG.uniform(-1, 1, shape) + (shift * np.eye(shape[-1]) if shift else 0.0)


def _spd(*shape):
    a = _mat(*shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def _t(a):
    return np.swapaxes(a, -1, -2)


def test_inverse_times_the_matrix_is_the_identity():
    x = _mat(2, 4, 4, shift=2.0)
    out = call_kernel("inverse", {"Input": x})["Output"]
    np.testing.assert_allclose(x @ out, np.broadcast_to(np.eye(4), x.shape), atol=1e-12)
    with pytest.raises(ValueError, match="inverse.*singular"):
        call_kernel("inverse", {"Input": np.zeros((3, 3))})


def test_determinant_by_sarrus_rule():
    x = _mat(5, 3, 3)
    a, b, c, d, e, f, g, h, i = (x[:, r, k] for r in range(3) for k in range(3))
    want = a * e * i + b * f * g + c * d * h - c * e * g - b * d * i - a * f * h
    np.testing.assert_allclose(call_kernel("determinant", {"Input": x})["Out"], want, rtol=1e-12)
    assert call_kernel("determinant", {"Input": _mat(3, 3).astype("float32")})["Out"].dtype == np.float32


@pytest.mark.parametrize("xs, ys", [((3, 3), (3, 2)), ((2, 3, 3), (2, 3)), ((3, 3), (4, 3, 1)),
                                    ((2, 1, 3, 3), (1, 5, 3, 2))])
def test_solve_satisfies_the_system(xs, ys):
    x, y = _mat(*xs, shift=2.0), _mat(*ys)
    out = call_kernel("solve", {"X": x, "Y": y})["Out"]
    vector = len(ys) == len(xs) - 1
    lhs = (x @ out[..., None])[..., 0] if vector else x @ out
    np.testing.assert_allclose(lhs, np.broadcast_to(y, lhs.shape), atol=1e-12)


@pytest.mark.parametrize("shape, full", [((4, 3), False), ((3, 5), False), ((2, 3, 3), False), ((4, 3), True)])
def test_svd_reconstructs_with_orthonormal_factors(shape, full):
    x = _mat(*shape)
    out = call_kernel("svd", {"X": x}, {"full_matrices": full})
    u, s, vh = out["U"], out["S"], out["VH"]
    k = min(shape[-2:])
    np.testing.assert_allclose((u[..., :, :k] * s[..., None, :]) @ vh[..., :k, :], x, atol=1e-12)
    np.testing.assert_allclose(_t(u) @ u, np.broadcast_to(np.eye(u.shape[-1]), u.shape[:-2] + (u.shape[-1],) * 2),
                               atol=1e-12)
    assert np.all(np.diff(s, axis=-1) <= 0) and np.all(s >= 0)


@pytest.mark.parametrize("shape, mode", [((4, 3), "reduced"), ((4, 3), "complete"), ((3, 5), "reduced"),
                                         ((2, 3, 3), "reduced"), ((4, 3), "r")])
def test_qr_reconstructs_with_orthonormal_q_and_triangular_r(shape, mode):
    x = _mat(*shape)
    out = call_kernel("qr", {"X": x}, {"mode": mode})
    q, r = out["Q"], out["R"]
    assert np.allclose(r, np.triu(r))
    if mode == "r":
        assert q.shape == (0,)
        np.testing.assert_allclose(np.abs(r), np.abs(np.linalg.cholesky(_t(x) @ x).T)[:r.shape[-2]], atol=1e-12)
        return
    np.testing.assert_allclose(q @ r, x, atol=1e-12)
    np.testing.assert_allclose(_t(q) @ q, np.broadcast_to(np.eye(q.shape[-1]), q.shape[:-2] + (q.shape[-1],) * 2),
                               atol=1e-12)


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_factor_reproduces_the_matrix(upper):
    x = _spd(2, 4, 4)
    out = call_kernel("cholesky", {"X": x}, {"upper": upper})["Out"]
    if upper:
        assert np.allclose(out, np.triu(out))
        np.testing.assert_allclose(_t(out) @ out, x, atol=1e-12)
    else:
        assert np.allclose(out, np.tril(out))
        np.testing.assert_allclose(out @ _t(out), x, atol=1e-12)
    assert np.all(np.diagonal(out, axis1=-2, axis2=-1) > 0)
    with pytest.raises(ValueError, match="not symmetric positive definite"):
        call_kernel("cholesky", {"X": -np.eye(3)})


@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_reads_one_triangle_and_diagonalizes(uplo):
    sym = _spd(2, 4, 4) - 4 * np.eye(4)
    x = np.tril(sym) + np.triu(RNG.uniform(5, 9, sym.shape), 1) if uplo == "L" else \
        np.triu(sym) + np.tril(RNG.uniform(5, 9, sym.shape), -1)   # the other triangle is not read
    out = call_kernel("eigh", {"X": x}, {"UPLO": uplo})
    w, v = out["Eigenvalues"], out["Eigenvectors"]
    np.testing.assert_allclose(sym @ v, v * w[..., None, :], atol=1e-12)
    assert np.all(np.diff(w, axis=-1) >= 0)


# -- gradient kernels: directional derivatives of the forward kernels -----------------------------------
def _directional(op, inputs, attrs, wrt, direction, outs, grads_in, h=1e-6):
    """(forward(x + h d) - forward(x - h d)) . W / 2h, for the cotangents W of `outs`."""
    def loss(sign):
        shifted = dict(inputs)
        shifted[wrt] = inputs[wrt] + sign * h * direction
        res = call_kernel(op, shifted, attrs)
        return sum(float(np.sum(res[o] * grads_in[o + "@GRAD"])) for o in outs)
    return (loss(1) - loss(-1)) / (2 * h)


GRAD_CASES = [
    ("inverse", {"Input": _mat(3, 3, shift=2.0)}, {}, ["Output"], False),
    ("determinant", {"Input": _mat(2, 3, 3, shift=2.0)}, {}, ["Out"], False),
    ("solve", {"X": _mat(3, 3, shift=2.0), "Y": _mat(3, 2)}, {}, ["Out"], False),
    ("svd", {"X": _mat(4, 3)}, {"full_matrices": False}, ["U", "S", "VH"], False),
    ("svd", {"X": _mat(3, 4)}, {"full_matrices": False}, ["U", "S", "VH"], False),
    ("qr", {"X": _mat(4, 3)}, {"mode": "reduced"}, ["Q", "R"], False),
    ("qr", {"X": _mat(3, 4)}, {"mode": "reduced"}, ["Q", "R"], False),
    ("cholesky", {"X": _spd(3, 3)}, {"upper": False}, ["Out"], True),
    ("cholesky", {"X": _spd(3, 3)}, {"upper": True}, ["Out"], True),
    ("eigh", {"X": _spd(3, 3)}, {"UPLO": "L"}, ["Eigenvalues", "Eigenvectors"], True),
]


@pytest.mark.parametrize("op, inputs, attrs, outs, symmetric", GRAD_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(GRAD_CASES)])
def test_gradient_kernel_is_the_directional_derivative(op, inputs, attrs, outs, symmetric):
    forward = call_kernel(op, inputs, attrs)
    rng = np.random.default_rng(3)
    cot = {o + "@GRAD": rng.uniform(0.5, 1.5, forward[o].shape) for o in outs}
    grads = call_kernel(f"{op}_grad", {**inputs, **forward, **cot}, attrs)
    for wrt in inputs:
        direction = rng.uniform(-1, 1, inputs[wrt].shape)
        if symmetric:
            direction = direction + _t(direction)
        want = _directional(op, inputs, attrs, wrt, direction, outs, cot)
        got = float(np.sum(grads[wrt + "@GRAD"] * direction))
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=f"{op} d/d{wrt}")
