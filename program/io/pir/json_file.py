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
# PP-OCRv5's server models are under 2 MB of JSON; large language models' programs stay under
# 100 MB. (Parameters live in the .pdiparams file.)
MAX_BYTES = 512 << 20
_MAX_NUMBER_DIGITS = 400

_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.S)
_LONG_NUMBER = re.compile(rb"[-+0-9.eE]{%d,}" % (_MAX_NUMBER_DIGITS + 1))


def nesting_depth(data: bytes) -> int:
    """The deepest bracket nesting of JSON text (strings ignored), without recursion."""
    skeleton = _STRING.sub(b'""', data)
    codes = np.frombuffer(skeleton, dtype=np.uint8)
    steps = np.zeros(codes.shape, dtype=np.int32)
    steps[(codes == ord("[")) | (codes == ord("{"))] = 1
    steps[(codes == ord("]")) | (codes == ord("}"))] = -1
    return int(np.cumsum(steps).max()) if steps.size else 0


def load_json(data: bytes, source: str):
    """Parse JSON text within the limits above; every failure is a ParseError naming `source`."""
    if len(data) > MAX_BYTES:
        raise ParseError(f"{source}: {len(data):,} bytes of program JSON; allowed: at most {MAX_BYTES:,}")
    depth = nesting_depth(data)
    if depth > MAX_DEPTH:
        raise ParseError(f"{source}: JSON nested {depth} levels deep; allowed: at most {MAX_DEPTH}")
    if _LONG_NUMBER.search(_STRING.sub(b'""', data)):
        raise ParseError(f"{source}: a number of over {_MAX_NUMBER_DIGITS} characters")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ParseError(f"{source}: program JSON is not UTF-8 text ({e})") from None
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ParseError(f"{source}: not valid JSON: {e}") from None
