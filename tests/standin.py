"""The cupy stand-in (tests/fake_cupy, tests/fake_cupyx) in tests: installing it as `cupy`
and `cupyx` for one test, reading its synchronisation counts, moving arrays on and off it.

    def test_something(fake_cupy):          # the fixture (tests/conftest.py) installs it
        exe = Executor(CUDAPlace(0))        # CUDAPlace, get_array_module("gpu") and
        ...                                 # cupy_available() now find the stand-in
        assert standin.host_syncs() == 0

Installation goes through pytest's monkeypatch, so sys.modules is restored when the test
ends: no other test sees a `cupy`, and cupy_available() is False again (a real cupy, where
one is installed, is back in place)."""
from __future__ import annotations

import sys

import numpy as np

import fake_cupy
import fake_cupyx
from fake_cupy import _core

MODULES = {
    "cupy": fake_cupy,
    "cupy.random": fake_cupy.random,
    "cupy.cuda": fake_cupy.cuda,
    "cupy.cuda.runtime": fake_cupy.cuda.runtime,
    "cupy.lib": fake_cupy.lib,
    "cupy.linalg": fake_cupy.linalg,
    "cupy.lib.stride_tricks": fake_cupy.lib.stride_tricks,
    "cupyx": fake_cupyx,
}


def install(monkeypatch, device_count: int = 1):
    """Make `import cupy` / `import cupyx` give the stand-in until the test ends, with
    `device_count` devices; counters cleared, device 0 current."""
    for name, module in MODULES.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setitem(_core.CONFIG, "device_count", device_count)
    monkeypatch.setattr(_core.STATE, "device", 0)
    monkeypatch.setattr(_core.STATE, "stream", None)
    reset_counts()
    return fake_cupy


def reset_counts() -> None:
    _core.SYNCS.clear()
    _core.UPLOADS.clear()


def syncs() -> dict:
    """Host synchronisations since the last reset, by kind (see fake_cupy._core.SYNCS)."""
    return dict(_core.SYNCS)


def host_syncs() -> int:
    return sum(_core.SYNCS.values())


def is_device(value) -> bool:
    return type(value) is fake_cupy.ndarray


def to_device(value, _memo=None):
    """numpy arrays (also inside lists, tuples and dicts) as stand-in device arrays; other
    values as they are. One host array given twice becomes one device array (as
    copy.deepcopy keeps aliasing). Not counted as uploads: it is the test's own setup."""
    memo = {} if _memo is None else _memo
    if isinstance(value, np.ndarray):
        if id(value) not in memo:
            memo[id(value)] = _core._new(value.copy())
        return memo[id(value)]
    if isinstance(value, list):
        return [to_device(v, memo) for v in value]
    if isinstance(value, tuple):
        return tuple(to_device(v, memo) for v in value)
    if isinstance(value, dict):
        return {k: to_device(v, memo) for k, v in value.items()}
    return value


def to_host(value):
    """Device arrays (also inside lists, tuples and dicts) as numpy copies, without counting
    a synchronisation (the test's own check)."""
    if is_device(value):
        return value._a.copy()
    if isinstance(value, list):
        return [to_host(v) for v in value]
    if isinstance(value, tuple):
        return tuple(to_host(v) for v in value)
    if isinstance(value, dict):
        return {k: to_host(v) for k, v in value.items()}
    return value
