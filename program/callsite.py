"""Find the line of the user's own script that is building an op.

Ops record it in their `op_callstack` attribute (as PaddlePaddle does), so errors at
build time, load time and run time can point at the user's code, even for a program
parsed from a file.
"""
from __future__ import annotations

import linecache
import os
import re
import sys

# Frames from these directories are Keel's own; the first frame outside them is the user's.
# (In the repository hapi/ and distributed/ live in keel/; installed, beside program/.)
OWN_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), pkg) + os.sep
    for pkg in ("program", "executor", "kernels", "proto", "keel", "hapi", "distributed", "tools")
)


# a frame of an installed PaddlePaddle package (site-packages/paddle/...)
_PADDLE_FRAME = re.compile(r"[\\/](?:site|dist)-packages[\\/]paddle[\\/]")


def called_from_keel(depth: int = 1) -> bool:
    """Whether the frame `depth` levels above the caller is Keel's own code."""
    return sys._getframe(depth + 1).f_code.co_filename.startswith(OWN_DIRS)


def user_frame_lines() -> list[str]:
    """The innermost non-Keel frame, as PaddlePaddle's op_callstack entries:
    ['  File "train.py", line 12, in <module>', '    h = pg.nn.fc(x, 128)']."""
    frame = sys._getframe(1)
    while frame is not None and frame.f_code.co_filename.startswith(OWN_DIRS):
        frame = frame.f_back
    if frame is None:
        return []
    filename, lineno = frame.f_code.co_filename, frame.f_lineno
    lines = [f'  File "{filename}", line {lineno}, in {frame.f_code.co_name}']
    code = linecache.getline(filename, lineno).strip()
    if code:
        lines.append(f"    {code}")
    return lines


def describe(callstack: list[str]) -> str | None:
    """Compress op_callstack entries into one 'file:line (code)' phrase for messages.
    Uses the innermost `File ...` entry (the last, in Paddle's layout too) outside an
    installed PaddlePaddle: a file PaddlePaddle wrote records its whole stack, whose
    innermost frames are its own framework's (framework.py's Operator)."""
    file_lines = [i for i, s in enumerate(callstack) if s.lstrip().startswith("File ")]
    if not file_lines:
        return None
    users = [i for i in file_lines if not _PADDLE_FRAME.search(callstack[i])]
    i = (users or file_lines)[-1]
    where = callstack[i].strip()
    code = callstack[i + 1].strip() if i + 1 < len(callstack) and not callstack[i + 1].lstrip().startswith("File ") else ""
    # 'File "x.py", line 3, in <module>' -> 'x.py:3'
    try:
        path = where.split('"')[1]
        line = where.split("line ")[1].split(",")[0]
        where = f"{path}:{line}"
    except IndexError:
        pass
    return f"{where}: {code}" if code else where
