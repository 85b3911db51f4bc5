"""Typed op attributes: checking Python values against an attribute type, and
encoding/decoding them to and from `OpDesc.Attr` messages."""
from __future__ import annotations

import numbers

import numpy as np

from keel.proto import pb

A = pb.AttrType
_INT32 = (-(2**31), 2**31 - 1)

# attr type -> the OpDesc.Attr field holding its value
_FIELD = {
    A.INT: "i", A.FLOAT: "f", A.STRING: "s", A.INTS: "ints", A.FLOATS: "floats",
    A.STRINGS: "strings", A.BOOLEAN: "b", A.BOOLEANS: "bools", A.BLOCK: "block_idx",
    A.LONG: "l", A.BLOCKS: "blocks_idx", A.LONGS: "longs", A.FLOAT64S: "float64s",
    A.VAR: "var_name", A.VARS: "vars_name", A.FLOAT64: "float64",
    A.SCALAR: "scalar", A.SCALARS: "scalars",
}
_LISTS = {A.INTS, A.FLOATS, A.STRINGS, A.BOOLEANS, A.BLOCKS, A.LONGS, A.FLOAT64S, A.VARS, A.SCALARS}


def type_name(t: int) -> str:
    return A.Name(t) if t in A.values() else f"attr type #{t}"


def _is_int(v) -> bool:
    return isinstance(v, (numbers.Integral, np.integer)) and not isinstance(v, (bool, np.bool_))


def _is_real(v) -> bool:
    return isinstance(v, (numbers.Real, np.floating)) and not isinstance(v, (bool, np.bool_))


def _check_scalar(t: int, v):
    """Return v converted to the canonical Python type of attr type t, or raise TypeError."""
    if t in (A.INT, A.BLOCK):
        if _is_int(v) and _INT32[0] <= int(v) <= _INT32[1]:
            return int(v)
        raise TypeError("an int32")
    if t == A.LONG:
        if _is_int(v):
            return int(v)
        raise TypeError("an int")
    if t in (A.FLOAT, A.FLOAT64):
        if _is_real(v):
            # FLOAT attrs are float32 on the wire: keep the value a reader will see.
            return float(np.float32(v)) if t == A.FLOAT else float(v)
        raise TypeError("a float")
    if t == A.STRING:
        if isinstance(v, str):
            return v
        raise TypeError("a string")
    if t == A.BOOLEAN:
        if isinstance(v, (bool, np.bool_)):
            return bool(v)
        raise TypeError("a bool")
    if t == A.SCALAR:
        if isinstance(v, (bool, np.bool_)) or _is_int(v) or _is_real(v) or isinstance(v, complex):
            return v
        raise TypeError("a bool, int, float or complex")
    raise TypeError(f"a value of type {type_name(t)}")


_ELEMENT = {A.INTS: A.INT, A.FLOATS: A.FLOAT, A.STRINGS: A.STRING, A.BOOLEANS: A.BOOLEAN,
            A.BLOCKS: A.BLOCK, A.LONGS: A.LONG, A.FLOAT64S: A.FLOAT64, A.VARS: A.STRING,
            A.SCALARS: A.SCALAR}


def check(t: int, value):
    """Validate `value` for attr type `t` and return it in canonical form (lists for
    list types, float32-rounded floats for FLOAT). Raises TypeError('expected ...')."""
    if t in _LISTS:
        if isinstance(value, np.ndarray):
            value = value.tolist()
        if not isinstance(value, (list, tuple)):
            raise TypeError(f"expected a list for {type_name(t)}, got {type(value).__name__} {value!r}")
        try:
            return [_check_scalar(_ELEMENT[t], v) for v in value]
        except TypeError as e:
            raise TypeError(f"expected a list of {e} values for {type_name(t)}, got {value!r}") from None
    if t == A.VAR:
        if isinstance(value, str):
            return value
        raise TypeError(f"expected a variable name for VAR, got {value!r}")
    try:
        return _check_scalar(t, value)
    except TypeError as e:
        raise TypeError(f"expected {e} for {type_name(t)}, got {type(value).__name__} {value!r}") from None


def guess_type(value) -> int:
    """The attr type for a Python value when no definition says (user-added attrs)."""
    if isinstance(value, (bool, np.bool_)):
        return A.BOOLEAN
    if _is_int(value):
        return A.INT if _INT32[0] <= int(value) <= _INT32[1] else A.LONG
    if _is_real(value):
        return A.FLOAT
    if isinstance(value, str):
        return A.STRING
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(value)
        if items and all(isinstance(v, (bool, np.bool_)) for v in items):
            return A.BOOLEANS
        if all(_is_int(v) for v in items):
            return A.INTS if all(_INT32[0] <= int(v) <= _INT32[1] for v in items) else A.LONGS
        if all(_is_int(v) or _is_real(v) for v in items):
            return A.FLOATS
        if all(isinstance(v, str) for v in items):
            return A.STRINGS
    raise TypeError(f"cannot store {type(value).__name__} {value!r} as an op attribute")


def _scalar_to_pb(msg, v):
    if isinstance(v, (bool, np.bool_)):
        msg.type, msg.b = pb.Scalar.BOOLEAN, bool(v)
    elif _is_int(v):
        msg.type, msg.i = pb.Scalar.LONG, int(v)
    elif isinstance(v, complex):
        msg.type = pb.Scalar.COMPLEX128
        msg.c.r, msg.c.i = v.real, v.imag
    else:
        msg.type, msg.r = pb.Scalar.FLOAT64, float(v)


def _scalar_from_pb(msg):
    if msg.type == pb.Scalar.BOOLEAN:
        return msg.b
    if msg.type == pb.Scalar.LONG:
        return msg.i
    if msg.type == pb.Scalar.COMPLEX128:
        return complex(msg.c.r, msg.c.i)
    return msg.r


def encode(msg, name: str, t: int, value) -> None:
    """Fill an `OpDesc.Attr` message (value already checked by `check`)."""
    msg.Clear()
    msg.name, msg.type = name, t
    f = _FIELD[t]
    if t == A.SCALAR:
        _scalar_to_pb(msg.scalar, value)
    elif t == A.SCALARS:
        for v in value:
            _scalar_to_pb(msg.scalars.add(), v)
    elif t in _LISTS:
        getattr(msg, f).extend(value)
    else:
        setattr(msg, f, value)


def decode(msg):
    """The Python value of an `OpDesc.Attr` message."""
    t = msg.type
    if t == A.SCALAR:
        return _scalar_from_pb(msg.scalar)
    if t == A.SCALARS:
        return [_scalar_from_pb(s) for s in msg.scalars]
    if t in _LISTS:
        return list(getattr(msg, _FIELD[t]))
    return getattr(msg, _FIELD[t])
