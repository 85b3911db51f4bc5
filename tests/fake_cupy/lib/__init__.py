"""cupy.lib: stride_tricks."""
from . import stride_tricks  # noqa: F401
