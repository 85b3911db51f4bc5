"""`paddle.io`: datasets, samplers and the DataLoader, and Keel's file functions, of
keel.program.io (the same objects)."""
from keel.program.io import *  # noqa: F401,F403
from keel.program.io import __all__  # noqa: F401
