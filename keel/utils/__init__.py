"""`paddle.utils`: `run_check()` (keel/utils/install_check.py) and `unique_name`
(keel.program.unique_name: `unique_name.guard()`, `generate`). Not `try_import`: Keel's
shipped code imports no module by a name given at run time (tests/test_untrusted_models.py)."""
from keel.program import unique_name
from keel.utils.install_check import run_check

__all__ = ["run_check", "unique_name"]
