"""`paddle.nn.functional` (`import keel.nn.functional as F`): keel.program.nn.functional's
functions, the same objects."""
from keel.program.nn.functional import *  # noqa: F401,F403
from keel.program.nn.functional import __all__  # noqa: F401
