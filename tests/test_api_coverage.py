"""PaddlePaddle 3.3.1's public API against Keel's (issue 30): `paddle.X.name` must be
`keel.X.name` for every name the model zoos reach (tests/fixtures/paddle_api/paddle_3.3.1.json,
`used_by_zoo`: PaddleClas, PaddleSeg and PaddleDetection's code, parsed by record.py), and
a table of each namespace's coverage (of its `__all__`, and of what the zoos use) is printed.
Run with -s to see it; the test writes nothing."""
import importlib
import json
from pathlib import Path

import pytest

import keel

FIXTURE = json.loads((Path(__file__).parent / "fixtures" / "paddle_api" / "paddle_3.3.1.json").read_text())

def resolve(namespace: str, name: str):
    """`keel.<namespace without paddle>.<name>`, or None when Keel lacks it."""
    module_name = "keel" + namespace[len("paddle"):]
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        module = keel
        for part in namespace.split(".")[1:]:
            module = getattr(module, part, None)
            if module is None:
                return None
    return getattr(module, name, None)


def test_every_zoo_name_resolves():
    missing = [f"{ns}.{name}" for ns, names in sorted(FIXTURE["used_by_zoo"].items()) for name in sorted(names)
               if resolve(ns, name) is None]
    assert not missing, f"PaddlePaddle names the model zoos use that keel lacks: {missing}"


def test_the_fixture_is_the_recorded_api():
    assert FIXTURE["paddle_version"] == "3.3.1"
    for ns, names in FIXTURE["used_by_zoo"].items():
        assert set(names) <= set(FIXTURE["namespaces"][ns]), f"{ns}: zoo names outside its __all__"


def test_coverage_table(capsys):
    rows = []
    for ns, public in sorted(FIXTURE["namespaces"].items()):
        used = FIXTURE["used_by_zoo"].get(ns, {})
        have = [n for n in public if resolve(ns, n) is not None]
        used_have = [n for n in used if resolve(ns, n) is not None]
        rows.append((ns, len(have), len(public), len(used_have), len(used)))
    with capsys.disabled():
        print(f"\n{'namespace':<26}{'public names':>16}{'zoo names':>14}")
        for ns, have, total, used_have, used in rows:
            print(f"{ns:<26}{f'{have}/{total}':>12} {100 * have / total:3.0f}%"
                  f"{f'{used_have}/{used}':>10}{'' if not used else f' {100 * used_have / used:3.0f}%'}")
    assert all(0 <= have <= total for _, have, total, _, _ in rows)
