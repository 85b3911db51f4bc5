"""Errors raised while compiling or running a program."""
from __future__ import annotations

from keel.program.errors import KeelError


class FeedError(KeelError, ValueError):
    """A feed that does not fit the program: unknown name, missing, wrong dtype or shape."""


class ExecutionError(KeelError, RuntimeError):
    """A kernel failed; the message names the op, its index, input shapes and source line."""


class NonFiniteError(ExecutionError):
    """The NaN/Inf check found a non-finite value; names the first op that produced one."""


class LoopLimitError(KeelError, RuntimeError):
    """A while loop ran more iterations than the executor's `max_loop_iterations` allows
    (a bound for serving untrusted programs, whose loops may never end)."""
