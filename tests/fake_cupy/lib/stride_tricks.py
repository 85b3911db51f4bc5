"""cupy.lib.stride_tricks: views of a device array with other shapes and strides."""
from numpy.lib import stride_tricks as _np_tricks

from .. import _core


def as_strided(x, shape=None, strides=None):
    a = _core._require_device(x, "cupy.lib.stride_tricks.as_strided")
    return _core._new(_np_tricks.as_strided(a, shape, strides), x._dev)


def sliding_window_view(x, window_shape, axis=None, *, subok=False, writeable=False):
    a = _core._require_device(x, "cupy.lib.stride_tricks.sliding_window_view")
    return _core._new(_np_tricks.sliding_window_view(a, window_shape, axis, writeable=writeable), x._dev)
