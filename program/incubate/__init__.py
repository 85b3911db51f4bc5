"""`program.incubate`: PaddlePaddle's `paddle.incubate` names Keel has (the optimizer
wrappers for large models)."""
from keel.program.incubate import optimizer  # noqa: F401
