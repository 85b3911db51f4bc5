"""Declaring the inputs of a program."""
from __future__ import annotations

from keel.program import default


def data(name: str, shape, dtype="float32", lod_level: int = 0):
    """Declare a variable the user feeds at run time. Use -1 (or None) for dims that vary
    between runs, e.g. the batch: `x = data("x", [-1, 784])`.

    Examples:
        >>> import keel.program as pg
        >>> with pg.program_guard(pg.Program()):
        ...     x = pg.data("x", [None, 784])
        >>> x.name, x.shape
        ('x', (-1, 784))
    """
    block = default.default_main_program().global_block()
    shape = [-1 if d is None else int(d) for d in shape]
    return block.create_var(name, shape, dtype, lod_level=lod_level, stop_gradient=True,
                            need_check_feed=True)
