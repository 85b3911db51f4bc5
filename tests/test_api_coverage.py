"""PaddlePaddle 3.3.1's public API against Keel's (issue 30): `paddle.X.name` must be
`keel.X.name` for every name the model zoos reach (tests/fixtures/paddle_api/paddle_3.3.1.json,
`used_by_zoo`: PaddleClas, PaddleSeg and PaddleDetection's code, parsed by record.py), and the
coverage table of docs/compatibility.md is what tools/api_coverage.py computes now (run it
to print the table)."""
import re
from pathlib import Path

from keel.tools.api_coverage import coverage, load_fixture, markdown_table, overall_percent, resolve

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = load_fixture()


# The namespaces whose every name the zoos use Keel must have (issue 30); the zoo names of the
# others (autograd's PyLayer, the profiler, datasets that download, utils.try_import, ...) are
# counted in the table.
REQUIRED = ["paddle", "paddle.nn", "paddle.nn.functional", "paddle.nn.initializer", "paddle.nn.utils",
            "paddle.static", "paddle.static.nn", "paddle.inference", "paddle.io", "paddle.optimizer",
            "paddle.optimizer.lr", "paddle.regularizer", "paddle.metric", "paddle.callbacks", "paddle.jit",
            "paddle.linalg", "paddle.amp", "paddle.vision.transforms", "paddle.device"]


def test_every_zoo_name_resolves():
    missing = [f"{ns}.{name}" for ns in REQUIRED for name in sorted(FIXTURE["used_by_zoo"].get(ns, {}))
               if resolve(ns, name) is None]
    assert not missing, f"PaddlePaddle names the model zoos use that keel lacks: {missing}"


def test_the_fixture_is_the_recorded_api():
    assert FIXTURE["paddle_version"] == "3.3.1"
    assert set(REQUIRED) <= set(FIXTURE["namespaces"])
    for ns, names in FIXTURE["used_by_zoo"].items():
        outside = set(FIXTURE["used_outside_all"].get(ns, []))
        assert set(names) - outside <= set(FIXTURE["namespaces"][ns]), f"{ns}: zoo names outside its __all__"
    assert FIXTURE["used_by_zoo"]["paddle"]["set_device"] > 0     # reached though not in paddle.__all__


def test_resolve_finds_keels_names_and_only_those():
    assert resolve("paddle.nn", "Conv2D") is not None and resolve("paddle.vision.ops", "roi_align") is not None
    assert resolve("paddle.sparse", "matmul") is None and resolve("paddle", "no_such_name") is None


def test_compatibility_page_holds_the_table_as_computed_now():
    rows = coverage(FIXTURE)
    page = (ROOT / "docs" / "compatibility.md").read_text()
    assert markdown_table(rows) in page, "docs/compatibility.md's table is stale: paste python -m keel.tools.api_coverage"
    readme = (ROOT / "README.md").read_text()
    assert re.search(rf"\b{overall_percent(rows)}% of PaddlePaddle 3\.3\.1's\s+public names", readme), \
        "README.md's coverage figure is stale"
