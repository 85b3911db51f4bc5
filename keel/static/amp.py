"""`paddle.static.amp`: static mixed precision (`decorate`, `fp16_guard`, the op lists) of
keel.program.amp, the same objects."""
from keel.program.amp import *  # noqa: F401,F403
from keel.program.amp import __all__  # noqa: F401
