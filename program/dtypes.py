"""Element types: the one table that maps between user spellings, numpy dtypes and
the `VarType.Type` numbers stored in program and parameter files."""
from __future__ import annotations

import numpy as np

from keel.proto import pb

_T = pb.VarType

# VarType number -> (canonical name, numpy dtype, bytes per element)
_TABLE = {
    _T.BOOL: ("bool", np.dtype(np.bool_)),
    _T.INT8: ("int8", np.dtype(np.int8)),
    _T.UINT8: ("uint8", np.dtype(np.uint8)),
    _T.INT16: ("int16", np.dtype(np.int16)),
    _T.UINT16: ("uint16", np.dtype(np.uint16)),
    _T.INT32: ("int32", np.dtype(np.int32)),
    _T.UINT32: ("uint32", np.dtype(np.uint32)),
    _T.INT64: ("int64", np.dtype(np.int64)),
    _T.UINT64: ("uint64", np.dtype(np.uint64)),
    _T.FP16: ("float16", np.dtype(np.float16)),
    # numpy has no bfloat16: its bits travel as uint16 (see to_numpy / bf16 helpers).
    _T.BF16: ("bfloat16", np.dtype(np.uint16)),
    _T.FP32: ("float32", np.dtype(np.float32)),
    _T.FP64: ("float64", np.dtype(np.float64)),
    _T.COMPLEX64: ("complex64", np.dtype(np.complex64)),
    _T.COMPLEX128: ("complex128", np.dtype(np.complex128)),
}
_BY_NAME = {name: code for code, (name, _) in _TABLE.items()}
_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "int": "int32",
            "long": "int64", "bf16": "bfloat16", "fp16": "float16", "fp32": "float32",
            "fp64": "float64"}
_BY_NUMPY = {np_dtype: code for code, (_, np_dtype) in _TABLE.items() if code != _T.BF16}

FLOATING = frozenset({_T.FP16, _T.BF16, _T.FP32, _T.FP64})
INTEGER = frozenset({_T.INT8, _T.UINT8, _T.INT16, _T.UINT16, _T.INT32, _T.UINT32, _T.INT64, _T.UINT64})


def to_code(dtype) -> int:
    """Any dtype spelling ('float32', np.float32, np.dtype, a VarType number) -> VarType number."""
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        if int(dtype) in _TABLE:
            return int(dtype)
        raise TypeError(f"unknown VarType dtype number {int(dtype)}")
    if isinstance(dtype, str):
        name = _ALIASES.get(dtype.lower(), dtype.lower())
        if name in _BY_NAME:
            return _BY_NAME[name]
    try:
        return _BY_NUMPY[np.dtype(dtype)]
    except (TypeError, KeyError):
        pass
    known = ", ".join(sorted(_BY_NAME))
    raise TypeError(f"unknown dtype {dtype!r}; expected one of: {known}")


def name(code: int) -> str:
    """VarType number -> canonical name ('float32')."""
    try:
        return _TABLE[code][0]
    except KeyError:
        return pb.VarType.Type.Name(code) if code in pb.VarType.Type.values() else f"dtype#{code}"


def to_numpy(code: int) -> np.dtype:
    """VarType number -> numpy dtype (bfloat16 is carried as its uint16 bit pattern)."""
    try:
        return _TABLE[code][1]
    except KeyError:
        raise TypeError(f"dtype {name(code)} has no numpy equivalent") from None


def is_floating(code: int) -> bool:
    return code in FLOATING


def is_integer(code: int) -> bool:
    return code in INTEGER


def codes() -> list[int]:
    """Every VarType number Keel has an element type for, ascending."""
    return sorted(_TABLE)


class DType(int):
    """An element type as PaddlePaddle 3.x names it (`paddle.float32`): the VarType number
    itself, so it equals the codes Keel stores and compares (`x.dtype == pb.VarType.FP32`),
    hashes like them and is accepted wherever a dtype is; only its text differs, as
    PaddlePaddle prints `paddle.float32`. Strings stay strings: like PaddlePaddle's,
    `paddle.float32 == "float32"` is False.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0])
        >>> x.dtype, x.dtype == paddle.float32
        (paddle.float32, True)
        >>> print(paddle.int64)
        paddle.int64
        >>> isinstance(paddle.float32, paddle.dtype)
        True
    """

    def __new__(cls, code: int):
        return super().__new__(cls, code)

    @property
    def name(self) -> str:
        return _TABLE[int(self)][0]

    def __repr__(self) -> str:
        return f"paddle.{self.name}"

    __str__ = __repr__

    def __reduce__(self):
        return (DType, (int(self),))


_DTYPES = {code: DType(code) for code in _TABLE}


def dtype_of(code):
    """A stored VarType number (or None) -> its DType object (None stays None)."""
    if code is None:
        return None
    return _DTYPES.get(code, code)


# The floating dtype that creation functions use when given none (paddle.set_default_dtype).
_DEFAULT_FLOAT = [_DTYPES[_T.FP32]]


def get_default_dtype() -> str:
    """The default floating dtype's name ('float32' unless set_default_dtype changed it).

    Examples:
        >>> import keel as paddle
        >>> paddle.get_default_dtype()
        'float32'
    """
    return _DEFAULT_FLOAT[0].name


def set_default_dtype(d) -> None:
    """Set the default floating dtype: float16, bfloat16, float32 or float64, as PaddlePaddle
    allows (an integer or complex dtype is refused).

    Examples:
        >>> import keel as paddle
        >>> paddle.set_default_dtype("float64")
        >>> paddle.to_tensor([1.0]).dtype, paddle.get_default_dtype()
        (paddle.float64, 'float64')
        >>> paddle.set_default_dtype("float32")
    """
    code = to_code(d)
    if code not in FLOATING:
        raise TypeError(f"set_default_dtype only supports [float16, float32, float64, bfloat16], "
                        f"but received {name(code)}")
    _DEFAULT_FLOAT[0] = _DTYPES[code]


def default_float(dtype=None) -> int:
    """`dtype` as a VarType number, or the default floating dtype's when it is None."""
    return _DEFAULT_FLOAT[0] if dtype is None else to_code(dtype)
