"""README.md and every page of docs/ run as written: each page's ```python blocks, in order,
in one namespace (as a reader pastes them into one session; each page a namespace of its
own), after the page's commands that make the files they read; a block followed by a
`Traceback` block must fail with that error. ```py blocks are illustrations and are not run.
Each other command is either run here or listed in SKIPPED_COMMANDS with the reason, so a
new one must be placed."""
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md"] + sorted((ROOT / "docs").glob("*.md"))
SKIPPED_COMMANDS = {
    "python3 -m venv .venv": "the environment these tests run in is made already",
    ". .venv/bin/activate": "likewise",
    'python -m pip install -e ".[examples]"': "installed already (the test extra includes scikit-learn)",
    'python -m pip install -e ".[test]"': "likewise",
    "python -m pytest -q": "this is that run",
    "python benchmarks/bench_executor.py": "tests/test_scripts.py runs the benchmarks (--help, missing peers)",
    "python benchmarks/bench_training.py": "likewise",
    "python benchmarks/bench_transformer.py": "likewise",
    "python benchmarks/bench_inference.py": "likewise",
    "python benchmarks/bench_gpt.py": "likewise",
    "python tools/fuzz_models.py --cases 20000 --seed 2031 --jobs 2":
        "a six-minute campaign; tests/test_fuzz_models.py runs a bounded one (800 cases)",
}
# The examples as written train for minutes (tests/test_examples.py runs them so); a short
# run makes the same files.
SHORTENED = {"python examples/train_digits.py": ["--epochs", "1"],
             "python examples/train_and_serve.py": ["--epochs", "1"],
             "python examples/train_gpt.py": ["--steps", "4", "--generate", "20"],
             "python examples/train_gpt.py --amp O1": ["--steps", "4", "--generate", "20"]}


def blocks(page: Path):
    """(language, text, line) of each fenced block of a page."""
    text = page.read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)]


def commands(page: Path):
    """The commands of the page's plain blocks, `&&` chains split."""
    found = []
    for lang, text, _ in blocks(page):
        if lang == "":
            for line in text.splitlines():
                if line.startswith(("python", ". ")):
                    found += [part.strip() for part in line.split("&&")]
    return found


def test_every_command_is_run_or_skipped_with_a_reason():
    every = [c for page in PAGES for c in commands(page)]
    unplaced = [c for c in every if c not in SKIPPED_COMMANDS and not c.startswith(
        ("python examples/", "python tools/"))]
    assert not unplaced
    assert any(c.startswith("python tools/prune_for_inference.py") for c in every)
    assert sum(lang == "python" for page in PAGES for lang, _, _ in blocks(page)) >= 15


def test_readme_holds_the_two_commands_and_the_quickstart():
    readme = commands(ROOT / "README.md")
    assert "python examples/train_digits.py" in readme and "python -m pytest -q" in readme
    quickstart = blocks(ROOT / "README.md")
    assert any(lang == "python" and "create_predictor" in text and "nn.Layer" in text
               for lang, text, _ in quickstart)


_DRIVER = '''
import linecache, os, sys, traceback
os.chdir({cwd!r})
namespace = {{"__name__": "__main__"}}
for path, expect_error in {runs!r}:
    code = compile(open(path).read(), path, "exec")
    try:
        exec(code, namespace if not expect_error else {{"__name__": "__main__"}})
    except Exception as e:
        if not expect_error:
            raise
        print("RAISED " + path)
        print("".join(traceback.format_exception_only(type(e), e)).rstrip())
        print("END")
    else:
        if expect_error:
            sys.exit(path + " did not fail")
'''


def _runnable(page: Path) -> bool:
    return any(lang == "python" for lang, _, _ in blocks(page)) or any(
        c not in SKIPPED_COMMANDS for c in commands(page))


@pytest.mark.slow
@pytest.mark.parametrize("page", [p for p in PAGES if _runnable(p)], ids=lambda p: p.relative_to(ROOT).as_posix())
def test_page_runs_as_written(page, tmp_path):
    for folder in ("examples", "tools"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    for command in commands(page):
        if command in SKIPPED_COMMANDS:
            continue
        argv = command.split()
        assert argv[0] == "python"
        argv = [sys.executable, *argv[1:], *SHORTENED.get(command, [])]
        r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{command}\n{r.stdout}\n{r.stderr}"

    runs, expected = [], {}
    listed = blocks(page)
    for i, (lang, text, line) in enumerate(listed):
        if lang != "python":
            continue
        following = listed[i + 1] if i + 1 < len(listed) else None
        fails = following is not None and following[0] == "" and following[1].startswith("Traceback")
        name = "train.py" if fails else f"{page.stem}_line_{line}.py"
        path = tmp_path / name
        path.write_text(text)
        runs.append((str(path), fails))
        if fails:   # the page's last lines of the traceback, with the reader's path
            expected[str(path)] = following[1].split("  ...\n")[1].rstrip().replace(
                "/path/to/train.py", str(path))
    driver = _DRIVER.format(cwd=str(tmp_path), runs=runs)
    r = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    for path, text in expected.items():
        got = r.stdout.split(f"RAISED {path}\n")[1].split("\nEND")[0]
        assert got == text, f"{page.name}:\n{textwrap.indent(text, '  ')}\nactual:\n{textwrap.indent(got, '  ')}"
    if page.name == "layers-and-training.md":   # the files its blocks say they write
        assert (tmp_path / "ckpt" / "last.keel").exists() and (tmp_path / "out" / "model.pdmodel").exists()
    if page.name == "static-programs.md":
        assert expected, "the page shows an error"
