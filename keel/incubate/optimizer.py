"""`paddle.incubate.optimizer`: `GradientMergeOptimizer`, `RecomputeOptimizer` (the same
objects as keel.program's)."""
from keel.program.incubate.optimizer import *  # noqa: F401,F403
from keel.program.incubate.optimizer import __all__  # noqa: F401
