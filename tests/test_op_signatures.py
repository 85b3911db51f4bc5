"""Every op Keel defines has PaddlePaddle's slots and attributes (names, flags, types,
defaults), checked against a snapshot of PaddlePaddle 3.3.1's op registry
(tests/fixtures/paddle_op_signatures.json, made by extract_op_signatures.py)."""
import json
from pathlib import Path

import numpy as np
import pytest

from keel.program.attrs import type_name
from keel.program.ops import registry

SNAPSHOT = json.loads((Path(__file__).parent / "fixtures" / "paddle_op_signatures.json").read_text())
OURS = registry.all_ops()
SHARED = sorted(set(OURS) & set(SNAPSHOT))


def _flags(slot):
    return sorted(f for f in ("duplicable", "dispensable", "intermediate", "extra") if getattr(slot, f))


def _same_default(a, b):
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_default(x, y) for x, y in zip(a, b))
    if isinstance(a, float) or isinstance(b, float):
        return np.float32(a) == np.float32(b)
    return a == b


def test_most_ops_are_paddle_ops():
    assert len(SHARED) >= 20


@pytest.mark.parametrize("op_type", SHARED)
def test_slots_match_paddle(op_type):
    ours, ref = OURS[op_type], SNAPSHOT[op_type]
    assert {s.name: _flags(s) for s in ours.inputs} == {k: sorted(v) for k, v in ref["inputs"].items()}
    assert {s.name: _flags(s) for s in ours.outputs} == {k: sorted(v) for k, v in ref["outputs"].items()}


@pytest.mark.parametrize("op_type", SHARED)
def test_attrs_match_paddle(op_type):
    ours, ref = OURS[op_type], SNAPSHOT[op_type]
    assert sorted(ours.attrs) == sorted(ref["attrs"]), "attribute names differ"
    for name, spec in ours.attrs.items():
        want = ref["attrs"][name]
        assert type_name(spec.type) == want["type"], f"{name}: type"
        if "default" in want:
            assert not spec.required and _same_default(spec.default, want["default"]), f"{name}: default"
        else:
            assert spec.required, f"{name}: Paddle has no default, so it is required"
    accepted = set(ours.extra_attrs) | set(registry.COMMON_ATTRS) | registry.RUNTIME_EXTRA_ATTRS
    assert set(ref["extra_attrs"]) <= accepted, "runtime-extra attributes Paddle files may carry"
