"""`paddle.utils.try_import`: an optional dependency, or an error saying what to install."""
from __future__ import annotations

import importlib
import types


def try_import(module_name: str, err_msg: str | None = None) -> types.ModuleType:
    """The module `module_name`, imported; if it is not installed, an ImportError with
    `err_msg`, or one naming the package to install, as PaddlePaddle's does.

    Examples:
        >>> from keel.utils import try_import
        >>> try_import("json").dumps([1])
        '[1]'
    """
    try:
        return importlib.import_module(module_name)
    except ImportError as e:
        package = module_name.split(".")[0]
        raise ImportError(err_msg or f"Failed importing {module_name}: it is an optional dependency of what you "
                                     f"called; install it (usually `pip install {package}`)") from e
