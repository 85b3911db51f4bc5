"""`paddle.vision.ops`: the detection ops' builders of keel.program.vision (the same objects)."""
from keel.program.vision import *  # noqa: F401,F403
from keel.program.vision import __all__  # noqa: F401
