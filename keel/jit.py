"""`paddle.jit`: `to_static`, `save`, `load`, `not_to_static` of keel.program.jit (the same
objects)."""
from keel.program.jit import *  # noqa: F401,F403
from keel.program.jit import __all__  # noqa: F401
