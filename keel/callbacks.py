"""`paddle.callbacks`: keel.hapi.callbacks' classes (the same objects), for `Model.fit`."""
from keel.hapi.callbacks import *  # noqa: F401,F403
from keel.hapi.callbacks import __all__  # noqa: F401
