"""`program.incubate`: PaddlePaddle's `paddle.incubate` names Keel has (the optimizer
wrappers for large models)."""
from program.incubate import optimizer  # noqa: F401
