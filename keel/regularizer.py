"""`paddle.regularizer`: `L1Decay`, `L2Decay` of keel.program.regularizer (the same objects)."""
from keel.program.regularizer import *  # noqa: F401,F403
from keel.program.regularizer import __all__  # noqa: F401
