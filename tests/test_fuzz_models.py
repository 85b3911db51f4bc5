"""A bounded run of tools/fuzz_models.py (fixed seed, about a minute on two cores): mutated
model, parameter and checkpoint files must each load and run, or be refused with a Keel
error; no raw exception, hang, out-of-memory or crash (SECURITY.md)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOL = ROOT / "tools" / "fuzz_models.py"


@pytest.mark.slow
def test_bounded_campaign_has_no_raw_hang_oom_or_crash():
    result = subprocess.run([sys.executable, str(TOOL), "--cases", "800", "--seed", "16", "--jobs", "2",
                             "--timeout", "60", "--json"], capture_output=True, text=True, timeout=900)
    summary = json.loads(result.stdout)
    outcomes = summary["outcomes"]
    bad = {k: outcomes[k] for k in ("raw", "hang", "oom", "crash")}
    assert bad == {"raw": 0, "hang": 0, "oom": 0, "crash": 0}, json.dumps(summary["findings"][:10], indent=1)
    assert result.returncode == 0
    assert sum(outcomes.values()) == 800
    # the mutants exercise both paths: many still run, many are refused with a clean error
    assert outcomes["ran"] > 80 and outcomes["clean"] > 250


def test_bounded_pir_campaign_has_no_raw_hang_oom_or_crash():
    """Mutated PIR JSON programs (program/io/pir/): each runs or is refused with a Keel error."""
    result = subprocess.run([sys.executable, str(TOOL), "--corpus", "pir", "--cases", "400", "--seed", "28",
                             "--jobs", "2", "--timeout", "60", "--json"], capture_output=True, text=True, timeout=900)
    summary = json.loads(result.stdout)
    outcomes = summary["outcomes"]
    bad = {k: outcomes[k] for k in ("raw", "hang", "oom", "crash")}
    assert bad == {"raw": 0, "hang": 0, "oom": 0, "crash": 0}, json.dumps(summary["findings"][:10], indent=1)
    assert result.returncode == 0 and sum(outcomes.values()) == 400
    assert outcomes["ran"] > 30 and outcomes["clean"] > 200


def test_reproduce_replays_one_case(tmp_path):
    result = subprocess.run([sys.executable, str(TOOL), "--seed", "16", "--reproduce", "3", "--save-dir",
                             str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "case 3 (seed 16): mutant of" in result.stdout
    assert result.stdout.strip().splitlines()[-1] in ("outcome: ran", "outcome: clean", "outcome: wrapped")
    assert any(tmp_path.iterdir())


def test_help():
    result = subprocess.run([sys.executable, str(TOOL), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    for flag in ("--cases", "--seed", "--jobs", "--timeout", "--memory-mb", "--reproduce"):
        assert flag in result.stdout
