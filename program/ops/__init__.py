"""Op definitions. Importing this package registers every op (one module per family)."""
from program.ops import registry  # noqa: F401
