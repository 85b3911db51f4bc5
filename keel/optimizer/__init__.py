"""`paddle.optimizer`: keel.program.optimizer's optimizers (the same objects) and `lr`, the
learning-rate schedulers."""
from keel.optimizer import lr
from keel.program.optimizer import *  # noqa: F401,F403
from keel.program.optimizer import __all__ as _optimizers

__all__ = [*_optimizers, "lr"]
