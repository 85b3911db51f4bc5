"""bfloat16 as Keel stores it: float32 values as the uint16 bit patterns of their upper halves.
A module of its own (kernels/tensor.py's cast and fill kernels use it) so the executor's
bfloat16 helpers import it without importing an op family."""
import numpy as np


def to_bf16_bits(xp, a):
    """float array -> bfloat16 bit patterns (uint16), rounding to nearest even."""
    f = xp.ascontiguousarray(a.astype(np.float32))
    u = f.view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    out = rounded.astype(np.uint16)
    # ascontiguousarray makes a 0-d array 1-d: the result keeps a's shape
    return xp.where(xp.isnan(f), np.uint16(0x7FC0), out).reshape(a.shape)


def from_bf16_bits(xp, bits):
    """bfloat16 bit patterns (uint16) -> float32, exactly: a bfloat16 is the upper half of
    the float32 of the same value, so the bits shifted up 16 are that float32's bits."""
    wide = xp.asarray(bits).astype(np.uint32)
    wide <<= np.uint32(16)  # in place: a 0-d array stays an array
    return wide.view(np.float32)
