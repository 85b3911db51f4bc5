"""Binary elementwise kernels with PaddlePaddle's `axis` broadcasting rule."""
from __future__ import annotations

import numpy as np

from keel.kernels.registry import UfuncCall, kernel


def align(x, y, axis: int):
    """Reshape the lower-rank operand so plain numpy broadcasting implements Paddle's rule:
    with axis != -1 the smaller operand's dims line up with the bigger one's starting at
    dimension `axis` (trailing size-1 dims of the smaller one may be dropped first)."""
    if axis == -1 or x.ndim == y.ndim:
        return x, y
    swap = x.ndim < y.ndim
    big, small = (y, x) if swap else (x, y)
    start = axis if axis >= 0 else axis + big.ndim
    shape = small.shape
    while shape and shape[-1] == 1 and start + len(shape) > big.ndim:
        shape = shape[:-1]
    small = small.reshape(shape + (1,) * (big.ndim - start - len(shape)))
    return (small, big) if swap else (big, small)


_UFUNCS = {"elementwise_add": "add", "elementwise_sub": "subtract", "elementwise_mul": "multiply"}


def _specialize_binary(op_type):
    """One ufunc call when Paddle's `axis` means plain numpy broadcasting (axis -1, or Y
    aligned with X's trailing dims, as fc's bias add; with a donated X any axis, Y being
    reshaped to line up), written into X's buffer when X is donated and the result has
    X's shape (numpy refuses with ValueError otherwise, and we fall back to a fresh
    array). With axis -1 and both inputs declared float32/float64 of one dtype, that call
    is a UfuncCall the executor makes itself. Anything else takes the general kernel."""
    def specialize(xp, attrs, present, donated):
        name = _UFUNCS.get(op_type)
        if name is None or tuple(p is not None for p in present) != (True, True):
            return None
        ufunc, axis, general = getattr(xp, name), attrs.get("axis", -1), _GENERAL[op_type]
        if axis == -1 and present[0] == present[1] and present[0].kind == "f" and present[0].itemsize >= 4:
            return UfuncCall(ufunc, into_input=donated, binary=True)  # the executor calls it

        def run(x, y):
            if axis != -1 and axis != x.ndim - y.ndim:
                if not donated or y.ndim > x.ndim:
                    return general(xp, x, y, axis=axis)
                x, y = align(x, y, axis)  # Y reshaped to line up at `axis` (conv's bias add)
            if donated and x.base is None and x.dtype.kind == "f" and x.ndim and x.dtype == y.dtype:
                try:
                    return ufunc(x, y, out=x)
                except ValueError:  # Y broadcasts X to a bigger shape
                    pass
            return ufunc(x, y)
        return run
    return specialize


_GENERAL = {}  # op type -> its general kernel function


def _binary(op_type, compute):
    @kernel(op_type, inputs=["X", "Y"], outputs=["Out"], attrs=["axis"],
            specialize=_specialize_binary(op_type))
    def run(xp, x, y, *, axis=-1):
        x, y = align(x, y, axis)
        return xp.asarray(compute(xp, x, y))  # (numpy gives 0-d operands a scalar back)
    run.__name__ = op_type
    _GENERAL[op_type] = run
    return run


def _int_divide(xp, x, y):
    """Integer division truncating toward zero, as C++ (and PaddlePaddle) do."""
    q = xp.floor_divide(x, y)
    fix = (xp.remainder(x, y) != 0) & ((x < 0) != (y < 0))
    return q + fix.astype(q.dtype)


def _divide(xp, x, y):
    if x.dtype.kind in "iu" and y.dtype.kind in "iu":
        return _int_divide(xp, x, y)
    return xp.divide(x, y)


_binary("elementwise_add", lambda xp, x, y: xp.add(x, y))
_binary("elementwise_sub", lambda xp, x, y: xp.subtract(x, y))
_binary("elementwise_mul", lambda xp, x, y: xp.multiply(x, y))
_binary("elementwise_div", _divide)
def _power(xp, x, y):
    """Integers: PaddlePaddle's pow in double, truncated back (a negative exponent gives 0
    for |x| > 1, where numpy's integer power refuses)."""
    if x.dtype.kind in "iu" and y.dtype.kind in "iu":
        dtype = xp.result_type(x, y)
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            return xp.power(x.astype(xp.float64), y.astype(xp.float64)).astype(dtype)
    return xp.power(x, y)


_binary("elementwise_pow", _power)
_binary("elementwise_max", lambda xp, x, y: xp.maximum(x, y))
_binary("elementwise_min", lambda xp, x, y: xp.minimum(x, y))
_binary("elementwise_floordiv", lambda xp, x, y: xp.floor_divide(x, y))
_binary("elementwise_mod", lambda xp, x, y: xp.remainder(x, y))


# -- gradients ---------------------------------------------------------------------------
def sum_to(xp, g, shape):
    """Sum gradient `g` down to `shape` (undoing numpy broadcasting): leading dims and dims
    where `shape` has 1 are summed away. float16 is summed in float32 and rounded once, as
    PaddlePaddle's reductions accumulate (numpy would add along a non-contiguous axis in
    float16, where a bias gradient over 4096 rows of ones stops at 2048; also 3x slower)."""
    if g.shape == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape) if d == 1 and g.shape[lead + i] != 1)
    if not axes:
        return g.reshape(shape)
    around = _around_kept_block(g, axes)
    if around is not None:
        return around.reshape(shape)
    accumulate = xp.float32 if g.dtype == xp.float16 else None
    return g.sum(axis=axes, keepdims=True, dtype=accumulate).astype(g.dtype, copy=False).reshape(shape)


def _around_kept_block(g, axes):
    """The sum of a contiguous float32/float64 `g` over `axes` when they are a run of leading
    dims and a run of trailing dims around the kept ones (a bias's gradient: [N, C, H, W] to
    [C]): g as [lead, kept, trail], the leading rows added first (whole rows at a time), then
    each row of what is left summed. numpy's reduction over axes (0, 2, 3) at once measured
    1.9-2.6x slower on [64, 16, 28, 28] and [64, 32, 14, 14] (CPU time, one thread). None
    where `g` does not have that form (summing leading dims only is one numpy call already)."""
    if axes[-1] != g.ndim - 1 or g.dtype.kind != "f" or g.dtype.itemsize < 4 or not g.flags.c_contiguous:
        return None
    kept = [i for i in range(g.ndim) if i not in axes]
    if not kept or kept[-1] - kept[0] != len(kept) - 1:
        return None
    lead = size = 1
    for i in range(kept[-1] + 1):
        if i < kept[0]:
            lead *= g.shape[i]
        else:
            size *= g.shape[i]
    g3 = g.reshape(lead, size, -1)
    rows = g3.sum(axis=0) if lead > 1 else g3[0]
    return rows.sum(axis=1)


def as_grad_of(xp, g, dtype):
    """Gradient `g` in its input's dtype: an integer input's gradient stays integer (as
    PaddlePaddle's kernels instantiated for it compute), a real input promoted to complex
    by a complex operand gets the real part."""
    g = xp.asarray(g)  # (numpy gives 0-d operands a scalar back)
    if g.dtype == dtype:
        return g
    if g.dtype.kind == "c" and dtype.kind != "c":
        g = g.real
    return g.astype(dtype)


def _conj(xp, a):
    return xp.conj(a) if a.dtype.kind == "c" else a


def _binary_grad(op_type, dx_fn, dy_fn, reads_out=False):
    """Register `<op>_grad`: dx_fn/dy_fn(xp, x, y, out, dout) give the broadcast-shaped
    gradients, which are then summed back to X's and Y's shapes, in X's and Y's dtypes.
    Complex operands reach the formulas conjugated (PaddlePaddle's convention X@GRAD =
    Out@GRAD * conj(dOut/dX)), so each formula is the real one."""
    inputs = ["X", "Y", "Out", "Out@GRAD"] if reads_out else ["X", "Y", "Out@GRAD"]

    @kernel(op_type + "_grad", inputs=inputs, outputs=["X@GRAD", "Y@GRAD"], attrs=["axis"])
    def run(xp, x, y, *rest, axis=-1, need=frozenset({"X@GRAD", "Y@GRAD"})):
        out, dout = rest if reads_out else (None, rest[0])
        xa, ya = align(_conj(xp, x), _conj(xp, y), axis)
        out = None if out is None else _conj(xp, out)
        dx = dy = None
        if "X@GRAD" in need:
            dx = as_grad_of(xp, sum_to(xp, dx_fn(xp, xa, ya, out, dout), xa.shape).reshape(x.shape), x.dtype)
        if "Y@GRAD" in need:
            dy = as_grad_of(xp, sum_to(xp, dy_fn(xp, xa, ya, out, dout), ya.shape).reshape(y.shape), y.dtype)
        return dx, dy
    run.__name__ = op_type + "_grad"
    return run


def _pow_dy(xp, x, y, out, dout):
    # d(x**y)/dy = x**y * ln(x); PaddlePaddle gives 0 where x <= 0 (ln undefined).
    safe = xp.where(x > 0, x, 1)
    return dout * xp.power(safe, y) * xp.log(safe)


_binary_grad("elementwise_add", lambda xp, x, y, o, d: d, lambda xp, x, y, o, d: d)
_binary_grad("elementwise_sub", lambda xp, x, y, o, d: d, lambda xp, x, y, o, d: -d)
_binary_grad("elementwise_mul", lambda xp, x, y, o, d: d * y, lambda xp, x, y, o, d: d * x)
def _div_dx(xp, x, y, out, dout):
    return _divide(xp, dout, y)  # integers: C++'s truncating division, as PaddlePaddle's


def _div_dy(xp, x, y, out, dout):
    return _divide(xp, -dout * out, y)


_binary_grad("elementwise_div", _div_dx, _div_dy, reads_out=True)
_binary_grad("elementwise_pow", lambda xp, x, y, o, d: d * y * xp.power(x, y - 1), _pow_dy)
# max/min: the gradient goes to the operand that won; PaddlePaddle gives ties to Y.
_binary_grad("elementwise_max", lambda xp, x, y, o, d: d * (x > y), lambda xp, x, y, o, d: d * (x <= y))
_binary_grad("elementwise_min", lambda xp, x, y, o, d: d * (x < y), lambda xp, x, y, o, d: d * (x >= y))
