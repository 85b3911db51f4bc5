"""`paddle.nn.initializer`: keel.program.initializer's classes, the same objects."""
from keel.program.initializer import (Assign, Constant, Dirac, Initializer, KaimingNormal, KaimingUniform,
                                      MSRAInitializer, Normal, TruncatedNormal, Uniform, XavierNormal, XavierUniform,
                                      calculate_gain)

__all__ = ["Initializer", "Assign", "Constant", "Dirac", "KaimingNormal", "KaimingUniform", "MSRAInitializer",
           "Normal", "TruncatedNormal", "Uniform", "XavierNormal", "XavierUniform", "calculate_gain"]
