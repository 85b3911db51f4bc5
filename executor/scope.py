"""Scope: where the values of variables live between runs (parameters, optimizer state,
running statistics, fetched results)."""
from __future__ import annotations

from typing import Iterator

import numpy as np

from keel.program import default


class VarHandle:
    """What `Scope.find_var` / `Scope.var` return, for PaddlePaddle habits:
    `np.array(scope.find_var("fc_0.w_0").get_tensor())`,
    `scope.var("w").get_tensor().set(array, place)`."""

    def __init__(self, scope: "Scope", name: str):
        self._scope, self.name = scope, name

    def get_tensor(self) -> "ScopeTensor":
        return ScopeTensor(self._scope, self.name)

    def set(self, value, place=None):
        self._scope.set(self.name, value)


class ScopeTensor:
    """A scope entry seen as PaddlePaddle's DenseTensor: `np.array(t)` reads the value the
    scope holds now, `t.set(array, place)` replaces it (a copy, as PaddlePaddle copies),
    `t.shape()` and `t._is_initialized()` describe it. The scope where the entry lives is
    the one written, so a value found through a child scope is set in its parent."""

    def __init__(self, scope: "Scope", name: str):
        self._scope, self.name = scope, name

    def _value(self):
        value = self._scope.get(self.name)
        if value is None:
            raise ValueError(f"variable {self.name!r} holds no value yet (run the startup program, or set it)")
        return value

    def __array__(self, dtype=None, copy=None):
        value = self._value()
        value = value.get() if hasattr(value, "get") and not isinstance(value, np.ndarray) else value  # cupy
        return np.array(value, dtype=dtype, copy=True if copy is None else copy)

    def set(self, value, place=None) -> None:
        array = np.array(value)  # a copy: later changes to `value` do not reach the scope
        if place is not None and getattr(place, "device", "cpu") == "gpu":
            with place.device_context():
                array = place.xp.asarray(array)
        (self._scope.find_scope(self.name) or self._scope).set(self.name, array)

    def shape(self) -> list[int]:
        return list(self._value().shape)

    def _dtype(self):
        return self._value().dtype

    def _is_initialized(self) -> bool:
        return self._scope.has(self.name) and self._scope.get(self.name) is not None

    def __repr__(self):
        return f"ScopeTensor({self.name!r})"


class Scope:
    """name -> array, with optional parent scopes (lookups fall back to the parent)."""

    def __init__(self, parent: "Scope | None" = None):
        self.parent = parent
        self._vars: dict = {}

    def get(self, name: str):
        scope = self
        while scope is not None:
            if name in scope._vars:
                return scope._vars[name]
            scope = scope.parent
        raise KeyError(f"variable {name!r} is not in the scope (run the startup program first, "
                       f"or feed/set it)")

    def set(self, name: str, value) -> None:
        self._vars[name] = value

    def has(self, name: str) -> bool:
        return self.find_scope(name) is not None

    def find_scope(self, name: str) -> "Scope | None":
        scope = self
        while scope is not None:
            if name in scope._vars:
                return scope
            scope = scope.parent
        return None

    def find_var(self, name: str) -> VarHandle | None:
        return VarHandle(self, name) if self.has(name) else None

    def var(self, name: str) -> VarHandle:
        """A handle for `name`, creating the entry (as None) if needed."""
        if not self.has(name):
            self._vars[name] = None
        return VarHandle(self, name)

    def erase(self, names) -> None:
        for name in names:
            self._vars.pop(name, None)

    def new_scope(self) -> "Scope":
        return Scope(self)

    def local_var_names(self) -> list[str]:
        return list(self._vars)

    def __contains__(self, name: str) -> bool:
        return self.has(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._vars)

    def __len__(self) -> int:
        return len(self._vars)


_global_scope = Scope()


def global_scope() -> Scope:
    """The scope programs run in unless scope_guard or Executor.run(scope=...) name another:
    where the startup program leaves the parameters.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     y = paddle.static.nn.fc(paddle.static.data("x", [None, 4]), 2)
        >>> _ = paddle.static.Executor().run(startup)       # parameters go to the global scope
        >>> w = main.all_parameters()[0].name
        >>> np.array(paddle.static.global_scope().find_var(w).get_tensor()).shape
        (4, 2)
    """
    return _global_scope


default.register_global_scope(global_scope)  # Layer.state_dict's default, without importing us


class scope_guard:
    """`with scope_guard(scope):` makes `scope` the default of Executor.run inside the block.

    Examples:
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     y = paddle.static.nn.fc(paddle.static.data("x", [None, 4]), 2)
        >>> scope = paddle.static.Scope()
        >>> with paddle.static.scope_guard(scope):
        ...     _ = paddle.static.Executor().run(startup)   # the parameters go to `scope`
        >>> w = main.all_parameters()[0].name
        >>> scope.find_var(w) is not None, paddle.static.global_scope().find_var(w) is None
        (True, True)
    """

    def __init__(self, scope: Scope):
        self.scope = scope

    def __enter__(self):
        global _global_scope
        self._saved, _global_scope = _global_scope, self.scope
        return self.scope

    def __exit__(self, *exc):
        global _global_scope
        _global_scope = self._saved
