"""Choosing the array module: numpy always; cupy only when asked for and installed."""
from __future__ import annotations

import numpy as np


def get_array_module(device: str = "cpu"):
    """numpy for "cpu"; cupy for "gpu" (imported only here, only on request)."""
    if device == "cpu":
        return np
    try:
        import cupy
    except ImportError as e:
        raise RuntimeError('GPU execution needs cupy: pip install -e ".[gpu]" in the Keel checkout') from e
    return cupy


def cupy_available() -> bool:
    try:
        import cupy
        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no cupy, no driver, or no device
        return False
