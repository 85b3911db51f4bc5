"""Linear algebra ops on (batches of) matrices, PaddlePaddle's legacy ops: inverse,
determinant, solve, svd, qr, cholesky, eigh. Each takes [..., m, n] with any leading batch
dimensions; float32 or float64 (complex inputs, which PaddlePaddle's CPU kernels also
take, are refused when the program is built). Kernels: kernels/linalg.py."""
from __future__ import annotations

from keel.program import dtypes
from keel.program.ops.infer import dims_match, merge_dim
from keel.program.ops.math import _batch_broadcast
from keel.program.ops.registry import BOOL, STRING, define, grad_op


def _matrix(ctx, slot, square=True):
    """The input `slot`, checked to be a float (batch of) matrix, square when `square`."""
    x = ctx.input(slot)
    if x.ndim < 2:
        ctx.fail(f"{slot} must be a matrix or a batch of matrices ([..., m, n]), got {x}")
    if square and not dims_match(x.shape[-1], x.shape[-2]):
        ctx.fail(f"{slot} must be square in its last two dimensions, got {x}")
    if dtypes.name(x.dtype) not in ("float32", "float64"):   # real LAPACK kernels only
        ctx.dtype_fail(f"{slot} must be float32 or float64, got {x}")
    return x


def _infer_same(in_slot, out_slot):
    def infer(ctx):
        x = _matrix(ctx, in_slot)
        ctx.set_output(out_slot, list(x.shape), x.dtype)
    return infer


define("inverse", inputs=["Input"], outputs=["Output"], infer=_infer_same("Input", "Output"),
       grad=grad_op(["Output", "Output@GRAD"], ["Input@GRAD"], like={"Input@GRAD": "Output"}),
       doc="Output = the inverse of each square matrix of Input")


def _infer_determinant(ctx):
    x = _matrix(ctx, "Input")
    ctx.set_output("Out", list(x.shape[:-2]), x.dtype)


define("determinant", inputs=["Input"], outputs=["Out"], infer=_infer_determinant,
       grad=grad_op(["Input", "Out", "Out@GRAD"], ["Input@GRAD"]),
       doc="Out[...] = det(Input[..., :, :])")


def _infer_solve(ctx):
    x, y = _matrix(ctx, "X"), ctx.input("Y")
    ctx.same_dtype(x, y)
    vector = y.ndim == x.ndim - 1 or y.ndim == 1
    ys = list(y.shape) + [1] if vector else list(y.shape)
    if len(ys) < 2 or not dims_match(x.shape[-1], ys[-2]):
        ctx.fail(f"Y's rows ({ys[-2] if len(ys) >= 2 else y}) must equal X's size {x.shape[-1]}: X {x}, Y {y}")
    out = _batch_broadcast(ctx, x.shape[:-2], ys[:-2], x, y) + [merge_dim(x.shape[-1], ys[-2])]
    ctx.set_output("Out", out if vector else out + [ys[-1]], x.dtype)


define("solve", inputs=["X", "Y"], outputs=["Out"], infer=_infer_solve,
       grad=grad_op(["X", "Y", "Out", "Out@GRAD"], ["X@GRAD", "Y@GRAD"]),
       doc="Out = X^-1 Y (Y a matrix [..., n, k], or a vector [..., n]); batch dims broadcast")


def _infer_svd(ctx):
    x = _matrix(ctx, "X", square=False)
    *batch, m, n = x.shape
    k = min(m, n) if m >= 0 and n >= 0 else -1
    full = ctx.attr("full_matrices")
    ctx.set_output("U", batch + [m, m if full else k], x.dtype)
    ctx.set_output("S", batch + [k], x.dtype)
    ctx.set_output("VH", batch + [n if full else k, n], x.dtype)


define("svd", inputs=["X"], outputs=["U", "S", "VH"], attrs={"full_matrices": BOOL(False)}, infer=_infer_svd,
       grad=grad_op(["X", "U", "VH", "S", "U@GRAD", "VH@GRAD", "S@GRAD"], ["X@GRAD"]),
       doc="X = U diag(S) VH, S descending; full_matrices: U [m, m] and VH [n, n]")

QR_MODES = ("reduced", "complete", "r")


def _infer_qr(ctx):
    x = _matrix(ctx, "X", square=False)
    mode = ctx.attr("mode")
    if mode not in QR_MODES:
        ctx.fail(f"mode must be one of {QR_MODES}, got {mode!r}")
    *batch, m, n = x.shape
    k = m if mode == "complete" else (min(m, n) if m >= 0 and n >= 0 else -1)
    ctx.set_output("Q", [0] if mode == "r" else batch + [m, k], x.dtype)   # mode "r": no Q, as PaddlePaddle
    ctx.set_output("R", batch + [k, n], x.dtype)


define("qr", inputs=["X"], outputs=["Q", "R"], attrs={"mode": STRING("reduced")}, infer=_infer_qr,
       grad=grad_op(["X", "Q", "R", "Q@GRAD", "R@GRAD"], ["X@GRAD"]),
       doc="X = Q R, Q with orthonormal columns, R upper triangular (mode reduced, complete or r)")


define("cholesky", inputs=["X"], outputs=["Out"], attrs={"upper": BOOL(False)}, infer=_infer_same("X", "Out"),
       grad=grad_op(["Out", "Out@GRAD"], ["X@GRAD"], like={"X@GRAD": "Out"}),
       doc="Out = L (X = L L^T, lower triangular) or, with upper, U = L^T; X symmetric positive definite "
           "(its lower triangle is read)")


def _infer_eigh(ctx):
    x = _matrix(ctx, "X")
    if ctx.attr("UPLO") not in ("L", "U"):
        ctx.fail(f"UPLO must be 'L' or 'U', got {ctx.attr('UPLO')!r}")
    ctx.set_output("Eigenvalues", list(x.shape[:-1]), x.dtype)
    ctx.set_output("Eigenvectors", list(x.shape), x.dtype)


define("eigh", inputs=["X"], outputs=["Eigenvalues", "Eigenvectors"], attrs={"UPLO": STRING("L")},
       infer=_infer_eigh,
       grad=grad_op(["Eigenvalues", "Eigenvectors", "Eigenvalues@GRAD", "Eigenvectors@GRAD"], ["X@GRAD"],
                    like={"X@GRAD": "Eigenvectors"}),
       doc="The eigenvalues (ascending) and eigenvectors (columns) of symmetric X, from its lower "
           "(UPLO 'L') or upper triangle")
