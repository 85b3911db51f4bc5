"""What the executor accepts as a feed: the dtype rule, the shape check, and (with
check_nan_inf) the check that feeds and the scope's values are finite."""
from __future__ import annotations

import numpy as np

from keel.executor.errors import FeedError, NonFiniteError
from keel.program.tensor import Tensor


def checked(name: str, spec, value):
    """`value` in its declared dtype and of its declared shape, or a FeedError naming the
    variable: `spec` is (numpy dtype, declared shape with -1 for any, type string)."""
    want, declared, type_string = spec
    value = feed_dtype(name, value, want, type_string)
    shape = value.shape
    if len(shape) != len(declared) or any(d >= 0 and d != s for d, s in zip(declared, shape)):
        raise FeedError(f"feed {name!r}: got shape {list(shape)}, declared {list(declared)} (-1 matches any size)")
    return value


def check_finite(xp, env: dict, feed_names) -> None:
    """With check_nan_inf, a NaN or Inf fed in (or held by a parameter) is named as such,
    before the first op that reads it would be blamed for it."""
    for name, value in env.items():
        if getattr(value, "dtype", None) is None or value.dtype.kind not in "fc":
            continue
        if not bool(xp.isfinite(value).all()):
            bad = value.size - int(xp.count_nonzero(xp.isfinite(value)))
            what = (f"feed {name!r}" if name in feed_names
                    else f"variable {name!r} (read from the scope: a parameter or other persistable)")
            raise NonFiniteError(f"{what} holds {bad} NaN/Inf value(s) of {value.size} "
                                 f"(shape {list(value.shape)}); check_nan_inf is on")


def feed_dtype(name: str, value, want: np.dtype, type_string: str):
    """`value` in dtype `want`, or a FeedError saying how to convert it.

    PaddlePaddle's executor refuses an array of any other dtype and casts Python lists and
    scalars to the declared one. Keel is as strict where a cast could change a value and
    lenient where it cannot: an array is cast only when numpy calls the cast safe (every
    value kept: int32 -> int64, float16 -> float32, uint8 -> float32, bool -> int64), and
    a list or scalar only when its values survive the cast (a float list into a float input
    is taken as the numbers it means). float64 into float32, int64 into float32 or a float
    into an int input is refused. An eager Tensor is fed as its array."""
    if isinstance(value, Tensor):
        value = value.value
    if hasattr(value, "dtype") and hasattr(value, "shape"):  # numpy or cupy array
        if value.dtype == want:
            return value
        if np.can_cast(value.dtype, want, casting="safe"):
            return value.astype(want)
        raise FeedError(f"feed {name!r}: got a {value.dtype} array, declared {type_string}; Keel casts a "
                        f"feed only where every value survives (e.g. int32 -> int64), and {value.dtype} -> "
                        f"{want} may change values. Convert it yourself: value.astype({str(want)!r})")
    array = np.asarray(value)
    if array.dtype == want:
        return array
    if array.dtype.kind not in "biuf":
        raise FeedError(f"feed {name!r}: got {type(value).__name__} of {array.dtype}, declared {type_string}; "
                        f"feed a numpy array of {want}")
    with np.errstate(all="ignore"):
        cast = array.astype(want)
        kept = (array.dtype.kind == "f" and want.kind == "f") or bool(
            np.array_equal(cast.astype(array.dtype), array, equal_nan=array.dtype.kind == "f"))
    if not kept:
        raise FeedError(f"feed {name!r}: the {type(value).__name__} given holds values that {want} cannot "
                        f"represent (declared {type_string}); convert it yourself: "
                        f"np.asarray(value).astype({str(want)!r}), or fix the data")
    return cast
