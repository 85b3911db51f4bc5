"""Resource bounds for untrusted programs (see SECURITY.md).

A program file can ask for allocations whose size its attributes fix before anything runs:
`fill_constant`, `uniform_random`, `gaussian_random`, `truncated_gaussian_random`, `randint`
and `assign_value` with a constant `shape`, `expand_v2`/`tile` to a constant size,
`reshape2` to constant dims, `one_hot_v2`'s depth, `pad`/`pad3d`'s paddings, the
interpolations' `out_h`/`out_w`. The verifier (program/verify_rules.py) works out each such
size at load and refuses the program when one exceeds `max_tensor_bytes()`, naming the op,
the attribute, the value and the limit, so nothing is allocated first.

The limit is 2 GiB per tensor by default; set the environment variable
`KEEL_MAX_TENSOR_BYTES` (bytes, read at each check) to raise or lower it. Dimensions unknown
at load (-1, the batch) count as 1: what the caller feeds is the caller's choice.
"""
from __future__ import annotations

import os

DEFAULT_MAX_TENSOR_BYTES = 2 << 30
"""2 GiB: the largest tensor a program may ask for through constant attributes."""

MAX_RANK = 64
"""The most dimensions a shape attribute or a variable may have (PaddlePaddle allows 9)."""


def max_tensor_bytes() -> int:
    """The per-tensor limit in bytes: `KEEL_MAX_TENSOR_BYTES`, else 2 GiB."""
    text = os.environ.get("KEEL_MAX_TENSOR_BYTES")
    if text:
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"KEEL_MAX_TENSOR_BYTES must be a number of bytes, got {text!r}") from None
        if value > 0:
            return value
    return DEFAULT_MAX_TENSOR_BYTES


def tensor_bytes(dims, itemsize: int) -> int:
    """The bytes of a tensor of `dims` (unknown dims, -1, counted as 1). Python ints: no
    overflow, whatever the file says."""
    n = itemsize
    for d in dims:
        n *= max(int(d), 1) if int(d) != 0 else 0
    return n


def describe_bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.4g} {unit}"
    return f"{n} bytes"
