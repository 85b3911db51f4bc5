"""`paddle.jit.not_to_static`: marks a function that dy2static conversion leaves as it is
(called as plain Python while a to_static function is traced)."""
from __future__ import annotations

_MARK = "_keel_not_to_static"


def not_to_static(func=None):
    """Mark `func` (as a decorator, with or without parentheses) to be called unconverted
    by converted code; returns the function itself.

    Examples:
        >>> import keel as paddle
        >>> @paddle.jit.not_to_static
        ... def helper_fn(x):
        ...     return x + 1                          # called as it is, not converted
        >>> @paddle.jit.to_static
        ... def f(x):
        ...     return helper_fn(x) * 2
        >>> print(f(paddle.to_tensor([1.0, 2.0])).numpy())
        [4. 6.]
    """
    if func is None:
        return not_to_static
    setattr(getattr(func, "__func__", func), _MARK, True)
    return func


def is_not_to_static(func) -> bool:
    """Whether `func` (a function or a bound method) was marked by not_to_static."""
    return bool(getattr(getattr(func, "__func__", func), _MARK, False))
