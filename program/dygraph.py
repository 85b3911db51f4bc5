"""Which mode an op call runs in: appended to a program (static) or run at once (eager).

Keel's layer functions and Layers are written once. A call builds into the current
program while a program is being built: inside `program_guard`, or everywhere after
`enable_static()` (PaddlePaddle's switch). Otherwise it runs eagerly: `LayerHelper.block`
is then the eager engine's block, whose `create_var` makes an empty Tensor and whose
`append_op` runs the op's kernel on the spot (keel/executor/eager.py).

The engine lives in the executor package (it runs kernels, which this package may not
import); it registers itself here when imported.
"""
from __future__ import annotations

import contextlib
import weakref

_static_enabled = False
_building = 0  # depth of program_guard blocks
_engine = None
# Layer parameters by name: layer functions given only a parameter's name (BatchNorm's
# moving_mean_name) use the parameter itself in eager mode (LayerHelper.create_parameter)
parameters_by_name: "weakref.WeakValueDictionary" = weakref.WeakValueDictionary()
# what amp.auto_cast put in place (program/amp/eager.py): the eager engine casts op inputs by it
autocast_state = None


def register_engine(engine) -> None:
    """The executor package's eager engine (keel/executor/eager.py) registers itself here."""
    global _engine
    _engine = engine


def engine():
    if _engine is None:
        raise RuntimeError("eager execution needs the executor package: import keel")
    return _engine


def in_dynamic_mode() -> bool:
    """True when op calls run at once (no program is being built).

    Examples:
        >>> import keel as paddle
        >>> paddle.in_dynamic_mode()
        True
        >>> paddle.enable_static()
        >>> paddle.in_dynamic_mode()
        False
        >>> paddle.disable_static()
    """
    return not (_static_enabled or _building)


def enable_static() -> None:
    """PaddlePaddle's `paddle.enable_static()`: layer calls append to the default programs.

    Examples:
        >>> import keel as paddle
        >>> paddle.enable_static()
        >>> x = paddle.static.data("x", [None, 3], "float32")     # a variable of the default program
        >>> x.name, paddle.in_dynamic_mode()
        ('x', False)
        >>> paddle.disable_static()
    """
    global _static_enabled
    _static_enabled = True


def disable_static() -> None:
    """Back to eager execution (the default) outside `program_guard`.

    Examples:
        >>> import keel as paddle
        >>> paddle.enable_static()
        >>> paddle.in_dynamic_mode()
        False
        >>> paddle.disable_static()
        >>> paddle.in_dynamic_mode()
        True
    """
    global _static_enabled
    _static_enabled = False


@contextlib.contextmanager
def building():
    """Inside the block, layer calls append ops to a program (program_guard uses it)."""
    global _building
    _building += 1
    try:
        yield
    finally:
        _building -= 1


def current_block():
    """Where a layer appends its ops: the eager engine's block in dynamic mode, else the
    current block of the default main program."""
    if in_dynamic_mode():
        return engine().block
    from keel.program import default
    return default.default_main_program().current_block()
