"""Kernels: pure functions of arrays and attributes, one per op type, written once against
an array module (numpy or cupy). This package imports neither `program` nor `executor`.
Importing it registers every kernel (one module per op family)."""
from kernels import registry  # noqa: F401
from kernels import (activation, elementwise, loss, math, nn, optimizer, random,  # noqa: F401
                     tensor)
from kernels import detection  # noqa: F401
from kernels import fused  # noqa: F401
from kernels import fused_conv  # noqa: F401
from kernels import manip  # noqa: F401
from kernels import amp  # noqa: F401
from kernels import rnn  # noqa: F401
from kernels import vision  # noqa: F401
from kernels import collective  # noqa: F401
from kernels import adam_chunked  # noqa: F401
from kernels import control_flow  # noqa: F401
