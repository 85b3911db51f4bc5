"""`paddle.utils`: `run_check()` (keel/utils/install_check.py), `try_import` and
`unique_name` (keel.program.unique_name: `unique_name.guard()`, `generate`)."""
from keel.program import unique_name
from keel.utils.install_check import run_check
from keel.utils.optional import try_import

__all__ = ["run_check", "try_import", "unique_name"]
