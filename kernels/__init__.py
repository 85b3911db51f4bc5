"""Kernels: pure functions of arrays and attributes, one per op type, written once against
an array module (numpy or cupy). This package imports neither `program` nor `executor`.
Importing it registers every kernel (one module per op family)."""
from keel.kernels import registry  # noqa: F401
from keel.kernels import (activation, elementwise, loss, math, nn, optimizer, random,  # noqa: F401
                     tensor)
from keel.kernels import detection  # noqa: F401
from keel.kernels import fused  # noqa: F401
from keel.kernels import fused_conv  # noqa: F401
from keel.kernels import manip  # noqa: F401
from keel.kernels import amp  # noqa: F401
from keel.kernels import rnn  # noqa: F401
from keel.kernels import vision  # noqa: F401
from keel.kernels import collective  # noqa: F401
from keel.kernels import adam_chunked  # noqa: F401
from keel.kernels import control_flow  # noqa: F401
from keel.kernels import set_value  # noqa: F401
from keel.kernels import linalg  # noqa: F401
from keel.kernels import stat  # noqa: F401
