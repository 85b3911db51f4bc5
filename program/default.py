"""The default main/startup programs that layers append to, and the guards that switch them."""
from __future__ import annotations

import contextlib

from keel.program.program import Program

_main = Program()
_startup = Program()


def default_main_program() -> Program:
    """The program layers append their ops to (switch it with `program_guard`).

    Examples:
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     x = paddle.static.data("x", [None, 4])
        ...     print(paddle.static.default_main_program() is main)
        True
        >>> [op.type for op in main.global_block().ops] == [], x.name in main.global_block().vars
        (True, True)
    """
    return _main


def default_startup_program() -> Program:
    """The program that receives parameter-initializer ops.

    Examples:
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     y = paddle.static.nn.fc(paddle.static.data("x", [None, 4]), 2)
        ...     print(paddle.static.default_startup_program() is startup)
        True
        >>> [op.type for op in startup.global_block().ops]           # the parameters' initializers
        ['uniform_random', 'fill_constant']
    """
    return _startup


_global_scope_provider = None
_global_seed = 0


def seed(value: int) -> None:
    """paddle.seed: the default programs' `random_seed` (their random initializers and the
    executor's random stream) becomes `value`, and so does that of the programs the
    high-level API builds (hapi.Model) and the eager engine's stream (eager initializers,
    dropout, keel.rand), so a run is repeatable.

    Examples:
        >>> import keel as paddle
        >>> paddle.seed(102)
        >>> a = paddle.rand([2, 2]).numpy()
        >>> paddle.seed(102)
        >>> b = paddle.rand([2, 2]).numpy()
        >>> bool((a == b).all())                      # the same seed, the same draws
        True
        >>> paddle.seed(102)
        >>> w1 = paddle.nn.Linear(3, 3).weight.numpy()    # initializers draw from it too
        >>> paddle.seed(102)
        >>> bool((paddle.nn.Linear(3, 3).weight.numpy() == w1).all())
        True
    """
    global _global_seed
    _global_seed = int(value)
    _main.random_seed = _startup.random_seed = _global_seed
    from keel.program import dygraph
    if dygraph._engine is not None:      # the eager engine's random stream too
        dygraph._engine.seed(_global_seed)


def global_seed() -> int:
    """The seed set by `seed()` (0: none)."""
    return _global_seed


def register_global_scope(provider) -> None:
    """The executor package registers its `global_scope` here when imported, so that
    program-level code reading parameter values (Layer.state_dict) can default to it
    without importing the executor."""
    global _global_scope_provider
    _global_scope_provider = provider


_runner = None


def register_runner(run) -> None:
    """The executor package registers `run(program, feed, fetch_names, scope) -> arrays`
    here when imported, for program-level objects that run themselves on arrays
    (jit.load's TranslatedLayer), without importing the executor."""
    global _runner
    _runner = run


def run_program(program, feed: dict, fetch_names, scope):
    if _runner is None:
        raise RuntimeError("running a program needs the executor package: from keel.executor import Executor")
    return _runner(program, feed, fetch_names, scope)


def global_scope():
    """The executor's global scope (the one `Executor.run` uses when given none)."""
    if _global_scope_provider is None:
        raise RuntimeError("no scope: import the executor package (from keel.executor import Executor), "
                           "or pass scope=...")
    return _global_scope_provider()


def switch_main_program(program: Program) -> Program:
    global _main
    previous, _main = _main, program
    return previous


def switch_startup_program(program: Program) -> Program:
    global _startup
    previous, _startup = _startup, program
    return previous


@contextlib.contextmanager
def program_guard(main_program: Program, startup_program: Program | None = None):
    """Build into `main_program` (and put initializers into `startup_program`) inside the
    block: layer calls append ops there instead of running eagerly.

    Examples:
        >>> import keel.program as pg
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 3])
        ...     y = pg.nn.fc(x, 2)
        >>> [op.type for op in startup.global_block().ops]
        ['uniform_random', 'fill_constant']
    """
    if not isinstance(main_program, Program):
        raise TypeError(f"program_guard expects a Program, got {type(main_program).__name__}")
    from keel.program import dygraph
    old_main = switch_main_program(main_program)
    old_startup = switch_startup_program(startup_program) if startup_program is not None else None
    try:
        with dygraph.building():
            yield
    finally:
        switch_main_program(old_main)
        if startup_program is not None:
            switch_startup_program(old_startup)


@contextlib.contextmanager
def name_scope(prefix: str):
    """Group the ops built inside under `prefix` (recorded in each op's `op_namescope`).

    Examples:
        >>> import keel as paddle
        >>> main = paddle.static.Program()
        >>> with paddle.static.program_guard(main, paddle.static.Program()):
        ...     with paddle.static.name_scope("encoder"):
        ...         x = paddle.static.data("x", [None, 4])
        ...         y = paddle.scale(x, 2.0)
        >>> main.global_block().ops[-1].attr("op_namescope")
        '/encoder/'
    """
    scopes = _main._namescopes
    scopes.append(prefix)
    try:
        yield
    finally:
        scopes.pop()
