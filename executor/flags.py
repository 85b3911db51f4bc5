"""`paddle.set_flags` / `paddle.get_flags` for the flags Keel honours.

Each flag is one of Keel's environment variables, read where it takes effect (so setting a
flag and setting the variable are the same thing, and a flag set here reaches code that
reads the variable). `FLAGS` lists them: PaddlePaddle's own name where Keel does what that
flag does, `FLAGS_keel_*` for Keel's own. Any other name is an error naming it and the
flags there are, as PaddlePaddle refuses a flag it does not have.
"""
from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Flag:
    env: str        # the environment variable that holds the value
    kind: type      # bool, int or float
    default: object
    doc: str


FLAGS = {
    "FLAGS_check_nan_inf": Flag("KEEL_CHECK_NAN_INF", bool, False,
                                "an Executor made afterwards stops at the first op that produces a NaN or Inf"),
    "FLAGS_paddle_num_threads": Flag("KEEL_KERNEL_THREADS", int, 1,
                                     "CPU kernels split large work into up to this many threads "
                                     "(kernels/parallel.py)"),
    "FLAGS_keel_max_tensor_bytes": Flag("KEEL_MAX_TENSOR_BYTES", int, 2 << 30,
                                        "the largest tensor a loaded program may ask for (program/limits.py)"),
    "FLAGS_keel_tune_malloc": Flag("KEEL_TUNE_MALLOC", bool, True,
                                   "keep freed memory mapped for the next step (executor/memory.py; read "
                                   "when the first Executor is made)"),
    "FLAGS_keel_comm_timeout": Flag("KEEL_COMM_TIMEOUT", float, 300.0,
                                    "seconds a collective waits for its peers (kernels/communicators.py)"),
}

_FALSE = ("", "0", "false", "no", "off")


def get_flags(flags) -> dict:
    """{name: value} for a flag name or a list of them.

    Examples:
        >>> import keel as paddle
        >>> paddle.get_flags("FLAGS_check_nan_inf")
        {'FLAGS_check_nan_inf': False}
        >>> paddle.get_flags(["FLAGS_check_nan_inf"])
        {'FLAGS_check_nan_inf': False}
    """
    names = [flags] if isinstance(flags, str) else list(flags)
    return {name: _read(_flag(name, "get_flags")) for name in names}


def set_flags(flags: dict) -> None:
    """Set each flag of {name: value}; every name and value is checked before any is set.

    Examples:
        >>> import keel as paddle
        >>> paddle.set_flags({"FLAGS_check_nan_inf": True})
        >>> paddle.get_flags("FLAGS_check_nan_inf")
        {'FLAGS_check_nan_inf': True}
        >>> paddle.set_flags({"FLAGS_check_nan_inf": False})
    """
    if not isinstance(flags, dict):
        raise TypeError(f"set_flags: expected a dict {{flag name: value}}, got {type(flags).__name__}")
    updates = {}
    for name, value in flags.items():
        flag = _flag(name, "set_flags")
        updates[flag.env] = _text(name, flag, value)
    os.environ.update(updates)


def _flag(name, where) -> Flag:
    flag = FLAGS.get(name)
    if flag is None:
        raise ValueError(f"{where}: Keel has no flag {name!r}; the flags it honours are {sorted(FLAGS)}")
    return flag


def _read(flag: Flag):
    text = os.environ.get(flag.env)
    if text is None:
        return flag.default
    if flag.kind is bool:
        return text.strip().lower() not in _FALSE
    if flag.env == "KEEL_KERNEL_THREADS" and text == "auto":
        from keel.kernels import parallel
        return parallel.threads()
    return flag.kind(text)


def _text(name, flag: Flag, value) -> str:
    if flag.kind is bool:
        if not isinstance(value, (bool, int)) or value not in (0, 1):
            raise ValueError(f"set_flags: {name} takes True or False, got {value!r}")
        return "1" if value else "0"
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (flag.kind is int and value != int(value)):
        raise ValueError(f"set_flags: {name} takes a{'n integer' if flag.kind is int else ' number'}, "
                         f"got {value!r}")
    if value <= 0:
        raise ValueError(f"set_flags: {name} must be positive, got {value!r}")
    return str(flag.kind(value))
