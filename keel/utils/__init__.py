"""`paddle.utils`: `run_check()` (keel/utils/install_check.py) and `unique_name`
(keel.program.unique_name: `unique_name.guard()`, `generate`)."""
from keel.program import unique_name
from keel.utils.install_check import run_check

__all__ = ["run_check", "unique_name"]
