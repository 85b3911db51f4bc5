"""`paddle.metric`: the metric classes of keel.hapi.metrics (the same objects) and the
`accuracy` function."""
from keel.hapi.accuracy import accuracy  # noqa: F401
from keel.hapi.metrics import *  # noqa: F401,F403
from keel.hapi.metrics import __all__ as _classes

__all__ = [*_classes, "accuracy"]
