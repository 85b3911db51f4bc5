"""A model and its parameters are replaced as one: a writer killed at any moment leaves the
old pair or the new one, never a mix, and the next save leaves no temporary file behind.

Every step a save takes on the file system (each open, fsync, rename and unlink) is a
point where the writer can die. `die_at(k)` simulates death just before step k: that
call and every later one of the process fail, so no clean-up runs (as under SIGKILL).
The slow test kills real writer processes with SIGKILL at random moments."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope, load_checkpoint, save_checkpoint
from keel.program.io import atomic
from keel.program.io.atomic import InterruptedWriteError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# -- versions of a model: version v scales by v; even versions have parameters equal to v ------

def build(version: int):
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 4])
        h = pg.nn.fc(x, 4) if version % 2 == 0 else x
        y = pg.scale(h, scale=float(version))
    scope = Scope()
    for p in main.all_parameters():
        scope.set(p.name, np.full(p.shape, version, np.float32))
    return main, x, y, scope


def save(prefix, version: int):
    main, x, y, scope = build(version)
    pg.io.save_inference_model(prefix, [x], [y], program=main, scope=scope)


def saved_version(prefix) -> int:
    """The version the pair on disk holds; fails if its program and parameters disagree."""
    scope = Scope()
    program, _, _ = pg.io.load_inference_model(prefix, scope=scope)
    version = int(next(op.attr("scale") for op in program.global_block().ops if op.type == "scale"))
    params = [name for name, _, _ in pg.io.persistable_specs(program)]
    assert bool(params) == (version % 2 == 0), f"version {version} with parameters {params}"
    for name in params:
        np.testing.assert_array_equal(scope.get(name), version, err_msg=f"{name} of version {version}")
    return version


def leftovers(directory) -> list[str]:
    return sorted(n for n in os.listdir(directory) if n.startswith("."))


# -- simulated death at every step ---------------------------------------------------------------

class Died(BaseException):
    """Not an Exception: no `except Exception` clean-up of the writer catches it."""


STEPS = ("open", "fsync", "replace", "rename", "unlink", "chmod")


class die_at:
    """Within the block, the k-th file-system step and all later ones raise Died."""

    def __init__(self, monkeypatch, k: int):
        self.monkeypatch, self.k, self.count, self.dead = monkeypatch, k, 0, False

    def __enter__(self):
        for name in STEPS:
            real = getattr(os, name)

            def step(*args, _real=real, **kwargs):
                if self.dead or self.count == self.k:
                    self.dead = True
                    raise Died()
                self.count += 1
                return _real(*args, **kwargs)
            self.monkeypatch.setattr(os, name, step)
        return self

    def __exit__(self, *exc):
        self.monkeypatch.undo()
        return exc[0] is Died


def kill_at_every_step(monkeypatch, tmp_path, write, old: int, new: int) -> int:
    """Run `write(prefix, new)` over a saved `old`, dying before step 0, 1, 2, ... until a
    write completes; after each death the pair must load as `old` or `new`, and the next save
    must leave no temporary file. Returns the number of steps of a complete write."""
    for k in range(200):
        directory = tmp_path / f"{old}-{new}-{k}"
        directory.mkdir()
        prefix = str(directory / "model")
        save(prefix, old)
        with die_at(monkeypatch, k) as death:
            write(prefix, new)
        got = saved_version(prefix)
        assert got in (old, new), f"killed before step {k}: version {got}"
        save(prefix, new + 2)                       # the next save cleans up
        assert saved_version(prefix) == new + 2
        assert leftovers(directory) == [], f"killed before step {k}: left {leftovers(directory)}"
        if not death.dead:
            assert got == new
            return k
    raise AssertionError("the write never completed")


@pytest.mark.parametrize("old, new", [(2, 4), (4, 5), (5, 6), (1, 3)],
                         ids=["params->params", "params->none", "none->params", "none->none"])
def test_save_inference_model_killed_at_any_step_leaves_the_old_or_the_new_pair(monkeypatch, tmp_path, old, new):
    steps = kill_at_every_step(monkeypatch, tmp_path, save, old, new)
    assert steps >= 6  # the kill points include the moment between the two renames


def test_prune_tool_output_killed_at_any_step_leaves_the_old_or_the_new_pair(monkeypatch, tmp_path):
    from keel.tools import prune_for_inference as tool
    source = str(tmp_path / "source")
    save(source, 4)

    def prune(prefix, version):
        assert version == 4
        assert tool.main([source, "-o", prefix]) == 0

    assert kill_at_every_step(monkeypatch, tmp_path, prune, 2, 4) >= 6


def test_a_death_between_the_renames_is_completed_by_the_next_load(monkeypatch, tmp_path):
    prefix = str(tmp_path / "model")
    save(prefix, 2)
    renamed = []
    real = os.replace

    def replace(src, dst):
        if os.path.basename(dst).startswith("model."):
            if renamed:  # one file of the pair is in place, the other not yet
                raise Died()
            renamed.append(os.path.basename(dst))
        return real(src, dst)
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(Died):
        save(prefix, 4)
    monkeypatch.undo()
    assert renamed == ["model.pdmodel"]
    assert ".model.pdmodel.journal" in os.listdir(tmp_path)
    assert saved_version(prefix) == 4                  # the journal's renames were redone
    assert leftovers(tmp_path) == []


def _interrupted_save(tmp_path, monkeypatch):
    """A pair whose save of version 4 died with its journal written and nothing renamed."""
    prefix = str(tmp_path / "model")
    save(prefix, 2)
    real = os.replace

    def replace(src, dst):
        if dst.endswith((".pdmodel", ".pdiparams")):
            raise Died()
        return real(src, dst)
    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(Died):
        save(prefix, 4)
    monkeypatch.undo()
    journal = tmp_path / ".model.pdmodel.journal"
    return prefix, journal


def test_a_journal_naming_other_files_is_refused_and_moves_nothing(monkeypatch, tmp_path):
    prefix, journal = _interrupted_save(tmp_path, monkeypatch)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    record = json.loads(journal.read_text())
    record["entries"][0]["target"] = "victim.txt"
    journal.write_text(json.dumps(record))
    with pytest.raises(InterruptedWriteError, match="names 'victim.txt', which is not one of the files"):
        pg.io.load_inference_model(prefix, scope=Scope())
    assert victim.read_text() == "keep me" and journal.exists()
    record["entries"][0]["target"] = "model.pdiparams"
    record["entries"][0]["temp"] = "../victim.txt"
    journal.write_text(json.dumps(record))
    with pytest.raises(InterruptedWriteError, match="not a temporary file of model.pdiparams"):
        pg.io.load_inference_model(prefix, scope=Scope())
    journal.write_text("{not json")
    with pytest.raises(InterruptedWriteError, match="is malformed"):
        pg.io.load_inference_model(prefix, scope=Scope())
    assert victim.read_text() == "keep me"
    journal.unlink()                                    # as the message says: keep the files as they are
    assert saved_version(prefix) == 2
    save(prefix, 6)
    assert saved_version(prefix) == 6 and leftovers(tmp_path) == []


def test_stale_temporary_files_of_dead_writers_are_removed_by_the_next_save(tmp_path):
    prefix = str(tmp_path / "model")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead_pid = int(dead.stdout)
    stale = [f".model.pdmodel.{dead_pid}-0123abcd.tmp", ".model.pdiparams.89abcdef.tmp"]  # pid-less: older Keel
    live = f".model.pdmodel.{os.getppid()}-00000000.tmp"   # a live process's write in progress
    for name in stale + [live, "unrelated.tmp"]:
        (tmp_path / name).write_bytes(b"x" * 100)
    save(prefix, 2)
    assert leftovers(tmp_path) == [live]
    assert (tmp_path / "unrelated.tmp").exists()


def test_save_checkpoint_removes_what_a_killed_save_left(tmp_path):
    main, x, y, scope = build(2)
    path = tmp_path / "ckpt.keel"
    exe = Executor()
    save_checkpoint(str(path), main, exe, scope=scope)
    script = ("import sys, os, time\n"
              "from keel.program.io import atomic\n"
              f"with atomic.atomic_open({str(path)!r}) as f:\n"
              "    f.write(b'partial'); f.flush(); print('writing', flush=True); time.sleep(60)\n")
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "writing"
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert len(leftovers(tmp_path)) == 1               # the killed writer's temporary file
    save_checkpoint(str(path), main, exe, scope=scope)
    assert leftovers(tmp_path) == []
    load_checkpoint(str(path), main, exe, scope=Scope())


# -- real SIGKILLs ------------------------------------------------------------------------------

WRITER = """
import sys
sys.path.insert(0, {tests!r})
import test_atomic_pairs as t
version = {start}
while True:
    version += 1
    t.SAVERS[{kind!r}]({prefix!r}, version)
    print(version, flush=True)
"""


def prune_save(prefix, version):
    """The prune tool's -o, from a source saved beside the output."""
    from keel.tools import prune_for_inference as tool
    source = prefix + "-source"
    save(source, version)
    with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
        assert tool.main([source, "-o", prefix]) == 0


def checkpoint_save(prefix, version):
    main, _, _, scope = build(2)
    scope.set("fc_0.w_0", np.full([4, 4], version, np.float32))
    save_checkpoint(prefix + ".ckpt", main, Executor(), scope=scope, extra={"version": version})


def checkpoint_version(prefix) -> int:
    main, _, _, _ = build(2)
    scope = Scope()
    extra = load_checkpoint(prefix + ".ckpt", main, Executor(), scope=scope)
    np.testing.assert_array_equal(scope.get("fc_0.w_0"), extra["version"])
    return extra["version"]


SAVERS = {"save_inference_model": save, "prune_tool": prune_save, "save_checkpoint": checkpoint_save}
READERS = {"save_inference_model": saved_version, "prune_tool": saved_version, "save_checkpoint": checkpoint_version}


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(SAVERS))
def test_sigkill_at_random_moments_never_tears_a_save(tmp_path, kind):
    """KEEL_SIGKILL_TRIALS sets the number of kills (default 12 a kind; the README quotes a run of 100)."""
    prefix = str(tmp_path / "model")
    SAVERS[kind](prefix, 1)
    rng = np.random.default_rng(0)
    last = 1
    for trial in range(int(os.environ.get("KEEL_SIGKILL_TRIALS", "12"))):
        script = WRITER.format(root=ROOT, tests=os.path.join(ROOT, "tests"), prefix=prefix, start=last, kind=kind)
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
        assert child.stdout.readline()                 # imports done, one save complete
        time.sleep(float(rng.uniform(0, 0.05)))        # then die somewhere in the following saves
        child.send_signal(signal.SIGKILL)
        child.wait()
        child.stdout.close()
        got = READERS[kind](prefix)
        assert got > last, f"trial {trial}: version {got} after {last}"
        last = got
    SAVERS[kind](prefix, last + 1)
    assert READERS[kind](prefix) == last + 1
    assert leftovers(tmp_path) == []
