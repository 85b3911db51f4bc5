"""What a shape/dtype inference rule sees: `InferContext`, plus the shape helpers rules share.

A rule is a function `rule(ctx)` that reads input shapes/dtypes and attributes and
calls `ctx.set_output(...)`. Unknown dimensions are -1 and must propagate: helpers
here treat -1 as "compatible with anything".
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NoReturn, Sequence

from keel.program import dtypes
from keel.program.errors import DTypeError, ShapeError
from keel.proto import pb

_T = pb.VarType
# complex dtype <-> the real dtype of its parts
_COMPLEX_OF = {_T.FP32: _T.COMPLEX64, _T.FP64: _T.COMPLEX128,
               _T.COMPLEX64: _T.COMPLEX64, _T.COMPLEX128: _T.COMPLEX128}
_REAL_OF = {_T.COMPLEX64: _T.FP32, _T.COMPLEX128: _T.FP64}


def is_complex(dtype: int) -> bool:
    return dtype in _REAL_OF


def real_of(dtype: int) -> int:
    """The dtype of a complex dtype's parts (complex128 -> float64); other dtypes unchanged."""
    return _REAL_OF.get(dtype, dtype)


def promote_complex(a: int, b: int) -> int | None:
    """PaddlePaddle's promotion of a real and a complex operand (promoteTypesIfComplexExists):
    the complex type wide enough for both (float64 with complex64 -> complex128); None when
    neither is complex or the real one is not float32/float64."""
    if not (is_complex(a) or is_complex(b)):
        return None
    if a not in _COMPLEX_OF or b not in _COMPLEX_OF:
        return None
    wide = {_COMPLEX_OF[a], _COMPLEX_OF[b]}
    return _T.COMPLEX128 if _T.COMPLEX128 in wide else _T.COMPLEX64


@dataclass(frozen=True)
class VarInfo:
    name: str
    shape: tuple[int, ...]
    dtype: int  # VarType number

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __str__(self):
        return f"{self.name} {list(self.shape)} {dtypes.name(self.dtype)}"


class InferContext:
    """Inputs, attributes and output setters of one op while its shapes are inferred."""

    def __init__(self, op_type: str, inputs: dict[str, list[str]], outputs: dict[str, list[str]],
                 attrs: dict, lookup: Callable[[str], VarInfo],
                 set_var: Callable[[str, Sequence[int], int], None], callsite: str | None = None):
        self.op_type = op_type
        self._inputs, self._outputs, self._attrs = inputs, outputs, attrs
        self._lookup, self._set_var = lookup, set_var
        self.callsite = callsite

    # -- inputs and attributes --------------------------------------------------
    def has_input(self, slot: str) -> bool:
        return bool(self._inputs.get(slot))

    def input(self, slot: str) -> VarInfo | None:
        """The single variable in `slot`, or None when the (optional) slot is empty."""
        names = self._inputs.get(slot) or []
        return self._lookup(names[0]) if names else None

    def inputs(self, slot: str) -> list[VarInfo]:
        return [self._lookup(n) for n in self._inputs.get(slot) or []]

    def attr(self, name: str):
        return self._attrs[name]

    # -- outputs ------------------------------------------------------------------
    def has_output(self, slot: str) -> bool:
        return bool(self._outputs.get(slot))

    def output_names(self, slot: str) -> list[str]:
        return list(self._outputs.get(slot) or [])

    def input_names(self, slot: str) -> list[str]:
        return list(self._inputs.get(slot) or [])

    def num_outputs(self, slot: str) -> int:
        return len(self._outputs.get(slot) or [])

    def set_output(self, slot: str, shape: Sequence[int], dtype: int, index: int = 0) -> None:
        """Set the shape/dtype of output `slot` (its `index`-th variable). No-op for an empty
        optional slot, so rules need not test for one."""
        names = self._outputs.get(slot) or []
        if index < len(names):
            self._set_var(names[index], [int(d) for d in shape], dtype)

    def set_var(self, name: str, shape: Sequence[int], dtype: int) -> None:
        """Set the shape/dtype of output variable `name` (rules that walk a duplicable slot)."""
        self._set_var(name, [int(d) for d in shape], dtype)

    # -- errors -------------------------------------------------------------------
    def fail(self, message: str) -> NoReturn:
        raise ShapeError(message, op_type=self.op_type, callsite=self.callsite)

    def dtype_fail(self, message: str) -> NoReturn:
        raise DTypeError(message, op_type=self.op_type, callsite=self.callsite)

    def same_dtype(self, *infos: VarInfo) -> int:
        """Check the given inputs share one dtype and return it."""
        first = infos[0]
        for other in infos[1:]:
            if other.dtype != first.dtype:
                self.dtype_fail(f"inputs must have the same dtype, got {first} and {other}")
        return first.dtype

    def require_float(self, info: VarInfo) -> None:
        if not dtypes.is_floating(info.dtype):
            self.dtype_fail(f"expects a floating-point input, got {info}")

    def refuse_complex(self, info: VarInfo, why: str = "") -> None:
        """A DTypeError for a complex input of an op whose kernel computes in real numbers
        (it would drop the imaginary part)."""
        if is_complex(info.dtype):
            self.dtype_fail(f"does not take complex inputs, got {info}"
                            f"{'; ' + why if why else ''}")


# -- shape helpers ------------------------------------------------------------------
def dims_match(a: int, b: int) -> bool:
    return a == b or a < 0 or b < 0


def merge_dim(a: int, b: int) -> int:
    """The known one of two compatible dims."""
    return b if a < 0 else a


def numel(shape: Sequence[int]) -> int:
    """Number of elements, or -1 if any dim is unknown."""
    n = 1
    for d in shape:
        if d < 0:
            return -1
        n *= d
    return n


def normalize_axis(ctx: InferContext, axis: int, ndim: int, what: str = "axis") -> int:
    if not -max(ndim, 1) <= axis < max(ndim, 1):
        ctx.fail(f"{what} {axis} is out of range for a {ndim}-d input")
    return axis % max(ndim, 1)


def broadcast_dim(ctx: InferContext, a: int, b: int, x: VarInfo, y: VarInfo) -> int:
    if a == 1:
        return b
    if b == 1:
        return a
    if a < 0:
        return b if b >= 0 and b != 1 else a
    if b < 0:
        return a
    if a != b:
        ctx.fail(f"shapes cannot be broadcast: {x} and {y}")
    return a


def broadcast_shapes(ctx: InferContext, x: VarInfo, y: VarInfo, axis: int = -1) -> list[int]:
    """Result shape of an elementwise op with PaddlePaddle's `axis` rule: with axis == -1 the
    shapes are right-aligned (numpy broadcasting); otherwise the shorter shape is aligned
    to start at dimension `axis` of the longer one."""
    xs, ys = list(x.shape), list(y.shape)
    big, small = (xs, ys) if len(xs) >= len(ys) else (ys, xs)
    if axis == -1 or len(xs) == len(ys):
        start = len(big) - len(small)
    else:
        start = axis if axis >= 0 else axis + len(big)
        if not 0 <= start <= len(big) - len(small):
            # Paddle trims trailing 1s of the smaller operand before aligning it.
            while small and small[-1] == 1 and start + len(small) > len(big):
                small = small[:-1]
            if not 0 <= start <= len(big) - len(small):
                ctx.fail(f"axis {axis} cannot align {y} with {x}")
    aligned = [1] * start + small + [1] * (len(big) - start - len(small))
    return [broadcast_dim(ctx, a, b, x, y) for a, b in zip(big, aligned)]
