"""Loading a PIR program's JSON text as untrusted input: bounded size and nesting depth.

Python's `json` parser recurses once per nesting level and raises RecursionError (or
exhausts the C stack) on a file of a few thousand `[`; a 50 MB file of digits makes one
huge int. So before parsing, the depth is measured without recursion (strings blanked,
then a running sum of opening and closing brackets), and numbers are limited in length.
"""
from __future__ import annotations

import json
import re

import numpy as np

from keel.program.errors import ParseError

# PaddlePaddle's serializer nests a program about 12 levels deep, plus 6 per level of control
# flow (op -> regions -> region -> blocks -> block -> ops); 200 leaves room for 30 nested loops.
MAX_DEPTH = 200
# PP-OCRv5's models are under 2 MB of JSON; large language models' programs stay well under
# 100 MB (parameters live in the .pdiparams file). Parsed, JSON takes about ten times its size
# in Python objects: 256 MiB of text is the most a loader should have to hold.
MAX_BYTES = 256 << 20
_MAX_NUMBER_DIGITS = 400

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_LONG_NUMBER = re.compile(rb"[-+0-9.eE]{%d,}" % (_MAX_NUMBER_DIGITS + 1))


_CHUNK = 1 << 22


def skeleton(data: bytes) -> bytes:
    """JSON text with every string emptied: what is left is structure and numbers."""
    return _STRING.sub(b'""', data)


def nesting_depth(text: bytes) -> int:
    """The deepest bracket nesting of a JSON skeleton, without recursion: a running sum of +1
    per opening and -1 per closing bracket, over chunks (bounded extra memory)."""
    codes = np.frombuffer(text, dtype=np.uint8)
    deepest = depth = 0
    for start in range(0, codes.size, _CHUNK):
        chunk = codes[start:start + _CHUNK]
        steps = ((chunk == ord("[")) | (chunk == ord("{"))).astype(np.int32)
        steps -= (chunk == ord("]")) | (chunk == ord("}"))
        running = np.cumsum(steps) + depth
        deepest, depth = max(deepest, int(running.max())), int(running[-1])
    return deepest


def load_json(data: bytes, source: str):
    """Parse JSON text within the limits above; every failure is a ParseError naming `source`."""
    if len(data) > MAX_BYTES:
        raise ParseError(f"{source}: {len(data):,} bytes of program JSON; allowed: at most {MAX_BYTES:,}")
    structure = skeleton(data)
    depth = nesting_depth(structure)
    if depth > MAX_DEPTH:
        raise ParseError(f"{source}: JSON nested {depth} levels deep; allowed: at most {MAX_DEPTH}")
    if _LONG_NUMBER.search(structure):
        raise ParseError(f"{source}: a number of over {_MAX_NUMBER_DIGITS} characters")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ParseError(f"{source}: program JSON is not UTF-8 text ({e})") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ParseError(f"{source}: not valid JSON: {e}") from None
