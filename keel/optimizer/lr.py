"""`paddle.optimizer.lr` (also `keel.lr`): keel.program.lr's schedulers, the same objects."""
from keel.program.lr import *  # noqa: F401,F403
from keel.program.lr import __all__  # noqa: F401
