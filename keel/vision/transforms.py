"""`paddle.vision.transforms`: keel.program.transforms' classes and functions (the same
objects; `functional` is its module of functions, `import ... functional as F`)."""
from keel.program.transforms import *  # noqa: F401,F403
from keel.program.transforms import __all__  # noqa: F401
