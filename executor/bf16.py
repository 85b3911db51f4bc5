"""bfloat16 arithmetic on array modules that have no bfloat16 (numpy; cupy too).

Keel carries a bfloat16 tensor as its uint16 bit patterns (program/dtypes.py). A kernel
would compute on those as integers, so an op that reads or writes a variable declared
bfloat16 runs through `emulated`: its bfloat16 inputs are widened to float32 (exactly),
the kernel computes in float32, and every float result of a bfloat16 output is rounded to
bfloat16 bits (nearest even), as the cast op rounds. Moves (assign, reshape, concat) thus
give the same bits back; arithmetic gives the float32 result rounded once, which is what
PaddlePaddle's CPU bfloat16 kernels compute for elementwise ops and what its matmul gives
with float32 accumulation. Kernels that make bfloat16 bits themselves (cast, fill_constant,
the random ops) return uint16 arrays, which pass through untouched.
"""
from __future__ import annotations

import numpy as np

from keel.kernels.bf16_bits import from_bf16_bits, to_bf16_bits


def emulated(fn, xp, inputs_bf16: list[bool], outputs_bf16: list[bool], single_output: bool):
    """`fn` (a bound kernel) with its flagged inputs widened and flagged outputs rounded."""

    def widen(value):
        if isinstance(value, list):
            return [widen(v) for v in value]
        return from_bf16_bits(xp, value) if value is not None and value.dtype == np.uint16 else value

    def narrow(value):
        if isinstance(value, (list, tuple)):
            return [narrow(v) for v in value]
        if value is None or value.dtype == np.uint16 or value.dtype.kind != "f":
            return value
        return to_bf16_bits(xp, value)

    def run(*args):
        args = [widen(a) if flag else a for a, flag in zip(args, inputs_bf16)]
        result = fn(*args)
        if single_output:
            return narrow(result) if outputs_bf16[0] else result
        return tuple(narrow(r) if flag else r for r, flag in zip(result, outputs_bf16))

    return run
