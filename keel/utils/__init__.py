"""`paddle.utils`: `run_check()` (keel/utils/install_check.py)."""
from keel.utils.install_check import run_check  # noqa: F401
