"""`import keel`'s cost: wall time of a fresh interpreter importing it, less the same
interpreter doing nothing, median of --runs (default 5); and the same for numpy + protobuf,
which any import of Keel needs, as the floor. With --tree, the ten Keel modules costliest in their own code, as
`python -X importtime` reports them (one run).

    python benchmarks/bench_import.py [--runs 5] [--tree]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

STATEMENTS = {"nothing": "pass", "numpy + protobuf": "import numpy, google.protobuf.message",
              "import keel": "import keel"}


def fresh_run_seconds(statement: str) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], check=True)
    return time.perf_counter() - start


def median_ms(statement: str, runs: int) -> float:
    return 1000 * statistics.median(fresh_run_seconds(statement) for _ in range(runs))


def costliest_modules(count: int = 10) -> list[tuple[int, str]]:
    """(own us, module) of the costliest keel.* modules in `-X importtime`'s report (own: less
    the modules each imports)."""
    report = subprocess.run([sys.executable, "-X", "importtime", "-c", "import keel"], check=True,
                            capture_output=True, text=True).stderr
    rows = []
    for line in report.splitlines():
        parts = [p.strip() for p in line.removeprefix("import time:").split("|")]
        if len(parts) == 3 and parts[1].isdigit() and parts[2].startswith("keel"):
            rows.append((int(parts[0]), parts[2]))
    return sorted(rows, reverse=True)[:count]


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tree", action="store_true", help="also list the costliest modules")
    args = parser.parse_args(argv)
    times = {label: median_ms(statement, args.runs) for label, statement in STATEMENTS.items()}
    base = times.pop("nothing")
    print(f"fresh interpreter: {base:.0f} ms (subtracted below); median of {args.runs} runs")
    for label, ms in times.items():
        print(f"{label:<18}{ms - base:8.0f} ms")
    if args.tree:
        for us, module in costliest_modules():
            print(f"  {us / 1000:7.1f} ms  {module}")


if __name__ == "__main__":
    main()
