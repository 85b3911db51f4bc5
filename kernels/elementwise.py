"""Binary elementwise kernels with PaddlePaddle's `axis` broadcasting rule."""
from __future__ import annotations

from kernels.registry import kernel


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


def _binary(op_type, compute):
    @kernel(op_type, inputs=["X", "Y"], outputs=["Out"], attrs=["axis"])
    def run(xp, x, y, *, axis=-1):
        x, y = align(x, y, axis)
        return compute(xp, x, y)
    run.__name__ = op_type
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
_binary("elementwise_pow", lambda xp, x, y: xp.power(x, y))
_binary("elementwise_max", lambda xp, x, y: xp.maximum(x, y))
_binary("elementwise_min", lambda xp, x, y: xp.minimum(x, y))
_binary("elementwise_floordiv", lambda xp, x, y: xp.floor_divide(x, y))
_binary("elementwise_mod", lambda xp, x, y: xp.remainder(x, y))
