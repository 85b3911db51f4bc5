"""`paddle.linalg`: keel.program.linalg's functions (norm, inv, det, solve, svd, qr,
cholesky, eigh), the same objects."""
from keel.program.linalg import *  # noqa: F401,F403
from keel.program.linalg import __all__  # noqa: F401
