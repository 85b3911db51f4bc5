"""`paddle.static.nn`: the static builders of keel.program.static_nn (`fc`, `conv2d`,
`batch_norm`, `embedding`, `cond`, `while_loop`, ...), the same objects."""
from keel.program.static_nn import *  # noqa: F401,F403
from keel.program.static_nn import __all__  # noqa: F401
