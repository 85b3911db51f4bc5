"""cupy.linalg: numpy.linalg's solvers and decompositions on the device arrays' data, with
cupy's parameters (the ones Keel's kernels call: kernels/linalg.py)."""
import numpy as _np

from . import _core

for _name in ("inv", "det", "solve", "svd", "qr", "cholesky", "eigh", "norm"):
    globals()[_name] = _core.function(f"linalg.{_name}", getattr(_np.linalg, _name))
LinAlgError = _np.linalg.LinAlgError   # cupy raises numpy's
