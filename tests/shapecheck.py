"""Shape-inference test helpers: append one op to a fresh program and read back the
shapes and dtypes its rule gave the outputs."""
import pytest

import keel.program as pg
from keel.program import dtypes


def build(op_type, inputs, outputs=None, attrs=None):
    """Append `op_type` to a fresh program. inputs: slot -> (shape, dtype) or a list of them;
    outputs: slot -> count (default {"Out": 1}). Returns slot -> (shape, dtype name), or a
    list of those for slots with several outputs."""
    block = pg.Program().global_block()
    ins, n = {}, 0
    for slot, spec in inputs.items():
        specs = spec if isinstance(spec, list) else [spec]
        ins[slot] = []
        for shape, dtype in specs:
            ins[slot].append(block.create_var(f"in{n}", shape, dtype))
            n += 1
    outs = {slot: [block.create_var(f"{slot.lower()}{i}") for i in range(count)]
            for slot, count in (outputs or {"Out": 1}).items()}
    block.append_op(op_type, ins, outs, attrs)
    result = {}
    for slot, vs in outs.items():
        got = [(list(v.shape), dtypes.name(v.dtype)) for v in vs]
        result[slot] = got[0] if len(got) == 1 else got
    return result


def out(op_type, inputs, attrs=None):
    return build(op_type, inputs, None, attrs)["Out"]


def expect_error(cls, fn, *fragments):
    """fn (a one-line lambda) must raise `cls` whose message has every fragment and points
    at the lambda's line (the user's line that created the op)."""
    with pytest.raises(cls) as info:
        fn()
    msg = str(info.value)
    for fragment in fragments:
        assert fragment in msg, f"{fragment!r} not in {msg!r}"
    assert f"op created at {fn.__code__.co_filename}:{fn.__code__.co_firstlineno}" in msg, msg
    return msg
