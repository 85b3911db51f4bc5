"""Random tensors (paddle.rand, randn, uniform, normal, randint, standard_normal): one op
each (uniform_random, gaussian_random, randint), drawn from the executor's stream in a
program, from the eager engine's stream eagerly, both seeded by `seed()`."""
from __future__ import annotations

from keel.program import dtypes
from keel.program.layers.helper import LayerHelper
from keel.program.layers.tensor import _fail

__all__ = ["rand", "randn", "standard_normal", "uniform", "normal", "randint"]


def _shape(layer: str, shape) -> list[int]:
    items = list(shape) if isinstance(shape, (list, tuple)) else [shape]
    try:
        dims = [int(d) for d in items]
    except (TypeError, ValueError):
        _fail(layer, f"shape must be a list of ints, got {shape!r}", TypeError)
    if any(d < 0 for d in dims):
        _fail(layer, f"shape must not have negative dims, got {dims}", ValueError)
    return dims


def _float_dtype(layer: str, dtype) -> int:
    code = dtypes.to_code("float32" if dtype is None else dtype)
    if not dtypes.is_floating(code):
        _fail(layer, f"dtype must be a floating-point type, got {dtypes.name(code)}", TypeError)
    return code


def _draw(op_type: str, layer: str, shape, dtype: int, attrs: dict, name, seed=0):
    """One random op; `seed` non-zero: the op draws from a generator of its own, seeded so."""
    helper = LayerHelper(layer, name)
    out = helper.create_tmp(dtype, stop_gradient=True)
    helper.append_op(op_type, {}, {"Out": out}, {"shape": _shape(layer, shape), "dtype": dtype, "seed": int(seed),
                                                 **attrs})
    return out


def uniform(shape, dtype=None, min=-1.0, max=1.0, seed=0, name=None):  # noqa: A002 (PaddlePaddle's names)
    """Samples from U(min, max) (op uniform_random). A non-zero `seed` fixes this op's draws.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.uniform([2, 3], min=-1.0, max=1.0)
        >>> x.shape, bool(x.numpy().min() >= -1.0 and x.numpy().max() < 1.0)
        ([2, 3], True)
        >>> a = paddle.uniform([4], seed=7).numpy()              # a fixed seed repeats its draws
        >>> b = paddle.uniform([4], seed=7).numpy()
        >>> bool((a == b).all())
        True
    """
    if not float(min) < float(max):
        _fail("uniform", f"min ({min}) must be less than max ({max})", ValueError)
    return _draw("uniform_random", "uniform", shape, _float_dtype("uniform", dtype),
                 {"min": float(min), "max": float(max)}, name, seed)


def rand(shape, dtype=None, name=None):
    """Samples from U(0, 1).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.rand([2, 3])
        >>> x.shape, x.numpy().dtype, bool(x.numpy().min() >= 0.0 and x.numpy().max() < 1.0)
        ([2, 3], dtype('float32'), True)
        >>> paddle.rand([2], dtype="float64").numpy().dtype
        dtype('float64')
    """
    return _draw("uniform_random", "rand", shape, _float_dtype("rand", dtype), {"min": 0.0, "max": 1.0}, name)


def normal(mean=0.0, std=1.0, shape=None, name=None):
    """Samples from N(mean, std^2) (op gaussian_random), float32.

    Examples:
        >>> import keel as paddle
        >>> paddle.seed(2023)
        >>> x = paddle.normal(mean=1.0, std=2.0, shape=[10000])
        >>> round(float(paddle.mean(x)), 1), round(float(x.numpy().std()), 1)
        (1.0, 2.0)
    """
    if float(std) < 0:
        _fail("normal", f"std must be >= 0, got {std}", ValueError)
    return _draw("gaussian_random", "normal", [1] if shape is None else shape, _float_dtype("normal", None),
                 {"mean": float(mean), "std": float(std)}, name)


def randn(shape, dtype=None, name=None):
    """Samples from N(0, 1).

    Examples:
        >>> import keel as paddle
        >>> paddle.seed(2023)
        >>> x = paddle.randn([2, 3])
        >>> x.shape, x.numpy().dtype
        ([2, 3], dtype('float32'))
        >>> paddle.seed(2023)                                    # the same seed, the same numbers
        >>> bool((paddle.randn([2, 3]).numpy() == x.numpy()).all())
        True
    """
    return _draw("gaussian_random", "randn", shape, _float_dtype("randn", dtype), {"mean": 0.0, "std": 1.0}, name)


standard_normal = randn


def randint(low=0, high=None, shape=(1,), dtype=None, name=None):
    """Uniform integers in [low, high) (op randint); with one bound, [0, low). int64 unless `dtype`.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.randint(low=-5, high=5, shape=[3, 4])
        >>> x.shape, x.numpy().dtype, bool(x.numpy().min() >= -5 and x.numpy().max() < 5)
        ([3, 4], dtype('int64'), True)
        >>> y = paddle.randint(10, shape=[100])                  # one bound: [0, 10)
        >>> sorted(set(y.numpy().tolist()) - set(range(10)))
        []
    """
    if high is None:
        low, high = 0, low
    if not int(low) < int(high):
        _fail("randint", f"low ({low}) must be less than high ({high})", ValueError)
    code = dtypes.to_code("int64" if dtype is None else dtype)
    if code not in (dtypes.to_code("int32"), dtypes.to_code("int64")):
        _fail("randint", f"dtype must be int32 or int64, got {dtypes.name(code)}", TypeError)
    return _draw("randint", "randint", shape, code, {"low": int(low), "high": int(high)}, name)

