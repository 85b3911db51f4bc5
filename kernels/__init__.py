"""Kernels: pure functions of arrays and attributes, one per op type, written once against
an array module (numpy or cupy). This package imports neither `program` nor `executor`.
Each op family is a module (registry.FAMILIES) that registers its kernels when imported;
the registry imports them all at its first lookup (`registry.get`, `registry.all_kernels`),
so importing this package, or `keel.kernels.array_module`, is cheap."""
from keel.kernels import registry  # noqa: F401
