"""Kernels of the linear algebra ops (program/ops/linalg.py) and their gradients, on
`xp.linalg` (numpy's LAPACK, cupy's cuSOLVER), batched over leading dimensions.

The gradient formulas are the standard real-matrix ones (Giles 2008 for inverse, det and
solve; Townsend 2016 for the SVD; Walter & Lehmann 2018 for QR; Murray 2016 for
Cholesky; the eigenvector formula of Magnus 1985 for eigh). Decompositions of a
symmetric input (cholesky, eigh) give the symmetric gradient, as PaddlePaddle's do:
their kernels read one triangle, and the gradient is the one on symmetric matrices.
"""
from __future__ import annotations

import numpy as np

from keel.kernels.registry import kernel


def _t(a):
    return a.swapaxes(-1, -2)


def _sum_to(xp, g, shape):
    """`g` summed over the batch dimensions broadcasting added to an input of `shape`."""
    shape = tuple(shape)
    lead = g.ndim - len(shape)
    if lead:
        g = g.sum(axis=tuple(range(lead)))
    axes = tuple(i for i, (a, b) in enumerate(zip(g.shape, shape)) if b == 1 and a != 1)
    return g.sum(axis=axes, keepdims=True) if axes else g


def _diag_embed(xp, v):
    """[..., k] -> [..., k, k] with v on the diagonal."""
    out = xp.zeros(v.shape + (v.shape[-1],), dtype=v.dtype)
    idx = xp.arange(v.shape[-1])
    out[..., idx, idx] = v
    return out


def _decomposition(op, fn, *args):
    """Run a LAPACK call; a matrix it cannot decompose is an error naming the op."""
    try:
        return fn(*args)
    except Exception as e:  # numpy's LinAlgError, cupy's
        if type(e).__name__ != "LinAlgError":
            raise
        raise ValueError(f"{op}: {e}") from None


# -- inverse, determinant, solve ------------------------------------------------------------------
@kernel("inverse", inputs=["Input"], outputs=["Output"])
def inverse(xp, x):
    return _decomposition("inverse (the matrix is singular)", xp.linalg.inv, x)


@kernel("inverse_grad", inputs=["Output", "Output@GRAD"], outputs=["Input@GRAD"])
def inverse_grad(xp, out, dout):
    """d(X^-1) = -X^-1 dX X^-1, so dX = -Out^T dOut Out^T."""
    return -(_t(out) @ dout @ _t(out))


@kernel("determinant", inputs=["Input"], outputs=["Out"])
def determinant(xp, x):
    return xp.asarray(xp.linalg.det(x)).astype(x.dtype, copy=False)


@kernel("determinant_grad", inputs=["Input", "Out", "Out@GRAD"], outputs=["Input@GRAD"])
def determinant_grad(xp, x, out, dout):
    """d det(X) = det(X) tr(X^-1 dX): dX = dOut det(X) X^-T."""
    inv = _decomposition("determinant_grad (the matrix is singular)", xp.linalg.inv, x)
    return (dout * out)[..., None, None] * _t(inv)


def _solve_operands(xp, x, y):
    """X and Y broadcast over their batch dimensions, Y as a matrix; and whether Y was a vector."""
    vector = y.ndim == x.ndim - 1 or y.ndim == 1
    ym = y[..., None] if vector else y
    batch = np.broadcast_shapes(x.shape[:-2], ym.shape[:-2])
    return (xp.broadcast_to(x, batch + x.shape[-2:]), xp.broadcast_to(ym, batch + ym.shape[-2:]), vector)


@kernel("solve", inputs=["X", "Y"], outputs=["Out"])
def solve(xp, x, y):
    xb, yb, vector = _solve_operands(xp, x, y)
    out = _decomposition("solve (X is singular)", xp.linalg.solve, xb, yb)
    return out[..., 0] if vector else out


@kernel("solve_grad", inputs=["X", "Y", "Out", "Out@GRAD"], outputs=["X@GRAD", "Y@GRAD"])
def solve_grad(xp, x, y, out, dout):
    """Out = X^-1 Y: dY = X^-T dOut, dX = -dY Out^T (summed over broadcast batch dims)."""
    xb, _, vector = _solve_operands(xp, x, y)
    o, g = (out[..., None], dout[..., None]) if vector else (out, dout)
    dy = xp.linalg.solve(_t(xb), xp.broadcast_to(g, xb.shape[:-2] + g.shape[-2:]))
    dx = -(dy @ _t(o))
    dy = dy[..., 0] if vector else dy
    return _sum_to(xp, dx, x.shape), _sum_to(xp, dy, y.shape)


# -- decompositions ------------------------------------------------------------------------------------
@kernel("svd", inputs=["X"], outputs=["U", "S", "VH"], attrs=["full_matrices"])
def svd(xp, x, *, full_matrices=False):
    u, s, vh = _decomposition("svd", xp.linalg.svd, x, full_matrices)
    return u, s, vh


@kernel("svd_grad", inputs=["X", "U", "VH", "S", "U@GRAD", "VH@GRAD", "S@GRAD"], outputs=["X@GRAD"],
        attrs=["full_matrices"])
def svd_grad(xp, x, u, vh, s, du, dvh, ds, *, full_matrices=False):
    """Townsend's formula, with F_ij = 1 / (s_j^2 - s_i^2) off the diagonal:
    dX = U [F o (U^T dU - dU^T U) S + diag(dS) + S F o (V^T dV - dV^T V)] V^T
         + (I - U U^T) dU S^-1 V^T + U S^-1 dV^T (I - V V^T).
    Singular values must be distinct and nonzero (where they are not, the SVD has no
    derivative); full_matrices only for square X, as in PaddlePaddle."""
    m, n = x.shape[-2:]
    k = s.shape[-1]
    if full_matrices and m != n:
        raise ValueError(f"svd_grad: the gradient with full_matrices=True exists only for square matrices, "
                         f"got [{m}, {n}]; use full_matrices=False")
    s2 = s * s
    e = s2[..., None, :] - s2[..., :, None]
    eye = xp.eye(k, dtype=bool)
    f = xp.where(eye, 0, 1 / xp.where(eye, 1, e))
    utdu = _t(u) @ du
    vtdv = vh @ _t(dvh)
    inner = (f * (utdu - _t(utdu))) * s[..., None, :] + s[..., :, None] * (f * (vtdv - _t(vtdv)))
    inner = inner + _diag_embed(xp, ds)
    dx = u @ inner @ vh
    inv_s = 1 / s
    if m > k:
        dx = dx + ((du - u @ utdu) * inv_s[..., None, :]) @ vh
    if n > k:
        dx = dx + u @ (inv_s[..., :, None] * (dvh - (dvh @ _t(vh)) @ vh))
    return dx


@kernel("qr", inputs=["X"], outputs=["Q", "R"], attrs=["mode"])
def qr(xp, x, *, mode="reduced"):
    if mode == "r":
        return xp.zeros((0,), dtype=x.dtype), _decomposition("qr", xp.linalg.qr, x, "r")
    q, r = _decomposition("qr", xp.linalg.qr, x, mode)
    return q, r


@kernel("qr_grad", inputs=["X", "Q", "R", "Q@GRAD", "R@GRAD"], outputs=["X@GRAD"], attrs=["mode"])
def qr_grad(xp, x, q, r, dq, dr, *, mode="reduced"):
    """For m >= n: M = R dR^T - dQ^T Q, C = its lower triangle mirrored (copyltu), and
    dX = (dQ + Q C) R^-T. As PaddlePaddle, not for mode "r" (no Q) nor for m < n with
    mode "complete"; m < n (reduced) splits X = [A | B]."""
    m, n = x.shape[-2:]
    if mode == "r":
        raise ValueError("qr_grad: no gradient for mode='r' (Q is not computed); use mode='reduced'")
    if m >= n:
        if mode == "complete" and m > n:
            raise ValueError(f"qr_grad: no gradient for mode='complete' with more rows than columns "
                             f"([{m}, {n}]); use mode='reduced'")
        return _qr_grad_tall(xp, q, r, dq, dr)
    # m < n: X = [A | B] with A square; A = Q R_A, B = Q R_B
    ra = r[..., :, :m]
    dra, drb = dr[..., :, :m], dr[..., :, m:]
    dq_a = dq + x[..., :, m:] @ _t(drb)
    da = _qr_grad_tall(xp, q, ra, dq_a, dra)
    db = q @ drb
    return xp.concatenate([da, db], axis=-1)


def _qr_grad_tall(xp, q, r, dq, dr):
    m_ = r @ _t(dr) - _t(dq) @ q
    low = xp.tril(m_, -1)
    c = low + _t(low) + _diag_embed(xp, xp.diagonal(m_, axis1=-2, axis2=-1))
    b = dq + q @ c
    return _t(xp.linalg.solve(r, _t(b)))   # b R^-T


@kernel("cholesky", inputs=["X"], outputs=["Out"], attrs=["upper"])
def cholesky(xp, x, *, upper=False):
    lower = _decomposition("cholesky (the matrix is not symmetric positive definite)", xp.linalg.cholesky, x)
    return _t(lower).copy() if upper else lower


@kernel("cholesky_grad", inputs=["Out", "Out@GRAD"], outputs=["X@GRAD"], attrs=["upper"])
def cholesky_grad(xp, out, dout, *, upper=False):
    """X = L L^T: with P = Phi(L^T dL) (the lower triangle, diagonal halved),
    G = L^-T P L^-1 and dX = (G + G^T) / 2."""
    lower, dl = (_t(out), _t(dout)) if upper else (out, dout)
    p = xp.tril(_t(lower) @ dl)
    p = p - 0.5 * _diag_embed(xp, xp.diagonal(p, axis1=-2, axis2=-1))
    g = xp.linalg.solve(_t(lower), p)           # L^-T P
    g = _t(xp.linalg.solve(_t(lower), _t(g)))   # (L^-T P) L^-1 = (L^-T (L^-T P)^T)^T
    return 0.5 * (g + _t(g))


@kernel("eigh", inputs=["X"], outputs=["Eigenvalues", "Eigenvectors"], attrs=["UPLO"])
def eigh(xp, x, *, UPLO="L"):  # noqa: N803  (PaddlePaddle's attribute name)
    w, v = _decomposition("eigh", xp.linalg.eigh, x, UPLO)
    return w, v


@kernel("eigh_grad", inputs=["Eigenvalues", "Eigenvectors", "Eigenvalues@GRAD", "Eigenvectors@GRAD"],
        outputs=["X@GRAD"])
def eigh_grad(xp, w, v, dw, dv):
    """dX = V (diag(dW) + F o (V^T dV)) V^T, F_ij = 1 / (w_j - w_i) off the diagonal,
    made symmetric. Eigenvalues must be distinct."""
    n = w.shape[-1]
    e = w[..., None, :] - w[..., :, None]
    eye = xp.eye(n, dtype=bool)
    f = xp.where(eye, 0, 1 / xp.where(eye, 1, e))
    g = v @ (_diag_embed(xp, dw) + f * (_t(v) @ dv)) @ _t(v)
    return 0.5 * (g + _t(g))
