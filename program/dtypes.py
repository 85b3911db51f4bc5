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
