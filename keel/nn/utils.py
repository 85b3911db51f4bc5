"""`paddle.nn.utils`: keel.program.nn.utils' functions (gradient clipping, parameters as one
vector), the same objects."""
from keel.program.nn.utils import *  # noqa: F401,F403
from keel.program.nn.utils import __all__  # noqa: F401
