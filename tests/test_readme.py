"""README.md runs as written: every ```python block, in order, in one namespace (as a
reader pastes them into one session), after the commands that make the files they read;
a block followed by a `Traceback` block must fail with that error. Each other command is
either run here or listed in SKIPPED_COMMANDS with the reason, so a new one must be placed."""
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
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
# train_digits as written takes 12 epochs (tests/test_examples.py runs that); one makes the files.
SHORTENED = {"python examples/train_digits.py": ["--epochs", "1"],
             # train_gpt as written trains for about ten minutes; a few steps make its files
             "python examples/train_gpt.py": ["--steps", "4", "--generate", "20"],
             "python examples/train_gpt.py --amp O1": ["--steps", "4", "--generate", "20"]}


def blocks():
    """(language, text, line) of each fenced block of the README."""
    text = README.read_text()
    return [(m.group(1), m.group(2), text.count("\n", 0, m.start()) + 1)
            for m in re.finditer(r"^```(\w*)\n(.*?)^```$", text, re.M | re.S)]


def commands():
    """The commands of the plain blocks, `&&` chains split."""
    found = []
    for lang, text, _ in blocks():
        if lang == "":
            for line in text.splitlines():
                if line.startswith(("python", ". ")):
                    found += [part.strip() for part in line.split("&&")]
    return found


def test_every_command_is_run_or_skipped_with_a_reason():
    unplaced = [c for c in commands() if c not in SKIPPED_COMMANDS and not c.startswith(
        ("python examples/", "python tools/"))]
    assert not unplaced
    assert any(c.startswith("python tools/prune_for_inference.py") for c in commands())
    assert sum(lang == "python" for lang, _, _ in blocks()) >= 6


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


@pytest.mark.slow
def test_readme_runs_as_written(tmp_path):
    for folder in ("examples", "tools"):
        (tmp_path / folder).symlink_to(ROOT / folder)
    for command in commands():
        if command in SKIPPED_COMMANDS:
            continue
        argv = command.split()
        assert argv[0] == "python"
        argv = [sys.executable, *argv[1:], *SHORTENED.get(command, [])]
        r = subprocess.run(argv, cwd=tmp_path, capture_output=True, text=True, timeout=600)
        assert r.returncode == 0, f"{command}\n{r.stdout}\n{r.stderr}"

    runs, expected = [], {}
    listed = blocks()
    for i, (lang, text, line) in enumerate(listed):
        if lang != "python":
            continue
        following = listed[i + 1] if i + 1 < len(listed) else None
        fails = following is not None and following[0] == "" and following[1].startswith("Traceback")
        name = "train.py" if fails else f"readme_line_{line}.py"
        path = tmp_path / name
        path.write_text(text)
        runs.append((str(path), fails))
        if fails:   # the README's last lines of the traceback, with the reader's path
            expected[str(path)] = following[1].split("  ...\n")[1].rstrip().replace(
                "/path/to/train.py", str(path))
    driver = _DRIVER.format(cwd=str(tmp_path), runs=runs)
    r = subprocess.run([sys.executable, "-c", driver], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr
    assert expected, "the README shows an error"
    for path, text in expected.items():
        got = r.stdout.split(f"RAISED {path}\n")[1].split("\nEND")[0]
        assert got == text, f"README:\n{textwrap.indent(text, '  ')}\nactual:\n{textwrap.indent(got, '  ')}"
    assert (tmp_path / "ckpt" / "last.keel").exists() and (tmp_path / "out" / "model.pdmodel").exists()
