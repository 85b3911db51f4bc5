"""Kernels: pure functions of arrays and attributes, one per op type, written once against
an array module (numpy or cupy). This package imports neither `program` nor `executor`.
Each op family is a module that registers its kernels when imported; the registry imports
them all (`load_families`) at its first lookup (`registry.get`, `registry.all_kernels`), so
importing this package, or `keel.kernels.array_module`, is cheap."""
from keel.kernels import registry  # noqa: F401


def load_families() -> None:
    """Import every op family, registering its kernels. The order matters only where a
    family reuses another's kernels when imported (collective: nn's batch_norm)."""
    from keel.kernels import (activation, elementwise, loss, math, nn, optimizer, random,  # noqa: F401
                              tensor, detection, fused, fused_conv, manip, amp, rnn, vision, collective,
                              adam_chunked, control_flow, set_value, linalg, stat)
