"""The executor's random stream (executor/random_state.py): Keel's own (seed, counter)
state, plain JSON data on every array module, saved in checkpoints and resumed bit for
bit; seeding as documented; fixed-seed ops' generators (kernels/random.py)."""
import json
import threading
import zipfile
from types import SimpleNamespace

import numpy as np
import pytest

import keel.program as pg
from keel.executor import CheckpointError, CPUPlace, Executor, Scope, load_checkpoint, save_checkpoint
from keel.executor.random_state import SCHEME, RandomState
from keel.kernels.random import seeded_generator


class DeviceStateGenerator:
    """A Generator as cupy's behaves for checkpoints: the methods numpy and cupy share,
    numbers from numpy, and a state with no host form (cupy's `bit_generator.state` is a
    method giving a device pointer)."""

    def __init__(self, seed):
        self._g = np.random.default_rng(seed)
        self.bit_generator = SimpleNamespace(state=lambda: 0x7F00DEAD)

    def random(self, size=None, dtype=np.float64):
        return self._g.random(size, dtype=dtype)

    def standard_normal(self, size=None, dtype=np.float64):
        return self._g.standard_normal(size, dtype=dtype)

    def integers(self, low, high=None, size=None, dtype=np.int64):
        return self._g.integers(low, high, size=size, dtype=dtype)


CUPY_LIKE = SimpleNamespace(__name__="cupy_like", random=SimpleNamespace(default_rng=DeviceStateGenerator))


def _draws(rng):
    return [rng.random((4,), dtype=np.float32), rng.standard_normal((3,)), rng.integers(0, 100, size=(5,))]


def _assert_same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("xp", [np, CUPY_LIKE], ids=["numpy", "cupy-like"])
def test_state_is_json_data_and_resumes_bit_for_bit(xp):
    rng = RandomState(xp, 7)
    _draws(rng)
    state = json.loads(json.dumps(rng.get_state()))
    assert state == {"scheme": SCHEME, "seed": 7, "counter": 3}
    want = _draws(rng)
    other = RandomState(xp, None)
    other.set_state(state)
    _assert_same(_draws(other), want)


def test_each_draw_is_the_counter_th_child_of_the_seed():
    """Draw k comes from SeedSequence(seed).spawn(...)[k]: numpy's documented way to make
    independent streams, computed here without RandomState."""
    rng = RandomState(np, 123)
    children = np.random.SeedSequence(123).spawn(3)
    got = [rng.random((6,)), rng.standard_normal((6,), dtype=np.float32), rng.integers(-3, 4, size=(6,))]
    want = [np.random.default_rng(children[0]).random((6,)),
            np.random.default_rng(children[1]).standard_normal((6,), dtype=np.float32),
            np.random.default_rng(children[2]).integers(-3, 4, size=(6,))]
    _assert_same(got, want)
    assert not np.array_equal(got[0], np.random.default_rng(123).random((6,)))


def test_reseed_restarts_and_fresh_entropy_is_kept_in_the_state():
    rng = RandomState(np, 5)
    first = _draws(rng)
    rng.seed(5)
    _assert_same(_draws(rng), first)
    a, b = RandomState(np, None), RandomState(np, None)
    assert a.get_state()["seed"] != b.get_state()["seed"]
    replay = RandomState(np, 0)
    replay.set_state(a.get_state())
    _assert_same(_draws(replay), _draws(a))
    with pytest.raises(ValueError, match="non-negative"):
        RandomState(np, -1)


def test_concurrent_draws_take_distinct_counters():
    rng = RandomState(np, 11)
    barrier = threading.Barrier(4)
    results = []

    def draw():
        barrier.wait()
        results.extend(rng.random((8,)) for _ in range(50))
    threads = [threading.Thread(target=draw) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert rng.get_state()["counter"] == 200
    assert len({r.tobytes() for r in results}) == 200


@pytest.mark.parametrize("state, match", [
    ({"scheme": "other", "seed": 1, "counter": 0}, "scheme"),
    ({"scheme": SCHEME, "seed": 1, "counter": -2}, "non-negative"),
    ({"scheme": SCHEME, "seed": "1", "counter": 0}, "non-negative"),
    ({"bit_generator": "NoSuchBitGen", "state": {}}, "unknown numpy bit generator"),
    ([1, 2], "dict"),
])
def test_bad_states_are_named(state, match):
    with pytest.raises(ValueError, match=match):
        RandomState(np, 1).set_state(state)


# -- the executor and checkpoints ---------------------------------------------------------


def _dropout_mlp(seed=3):
    """An MLP whose dropout draws from the executor's stream (no fixed seed: the main
    program's random_seed is 0); initialisers seeded by the startup program."""
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = seed
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 6])
        label = pg.data("label", [-1, 1], "int64")
        h = pg.nn.dropout(pg.nn.fc(x, 16, activation="relu"), dropout_prob=0.5,
                          dropout_implementation="upscale_in_train")
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(pg.nn.fc(h, 3), label))
        pg.optimizer.SGD(0.1).minimize(loss)
    assert not main.global_block().ops[2].attr("fix_seed")
    return main, startup, loss


def _batches(n):
    r = np.random.default_rng(0)
    return [(r.standard_normal((8, 6)).astype(np.float32), r.integers(0, 3, (8, 1))) for _ in range(n)]


def _losses(exe, main, loss, scope, data):
    return [float(exe.run(main, feed={"x": x, "label": y}, fetch_list=[loss], scope=scope)[0]) for x, y in data]


def _executor(xp, seed):
    exe = Executor(CPUPlace(), seed=seed)
    if xp is not np:  # the stream as on a GPU: generators whose state has no host form
        exe.rng = RandomState(xp, seed)
    return exe


@pytest.mark.parametrize("xp", [np, CUPY_LIKE], ids=["numpy", "cupy-like"])
def test_checkpoint_resumes_the_executor_stream_bit_for_bit(tmp_path, xp):
    data = _batches(8)
    main, startup, loss = _dropout_mlp()
    exe, scope = _executor(xp, 21), Scope()
    exe.run(startup, scope=scope)
    full = _losses(exe, main, loss, scope, data[:4])
    save_checkpoint(tmp_path / "ckpt.keel", main, exe, scope)
    full += _losses(exe, main, loss, scope, data[4:])

    main2, _, loss2 = _dropout_mlp()
    exe2, scope2 = _executor(xp, 999), Scope()  # another seed: the checkpoint's state wins
    load_checkpoint(tmp_path / "ckpt.keel", main2, exe2, scope2)
    assert _losses(exe2, main2, loss2, scope2, data[4:]) == full[4:]
    with zipfile.ZipFile(tmp_path / "ckpt.keel") as zf:
        manifest = json.loads(zf.read("manifest.json"))
    assert manifest["version"] == 2 and manifest["random_state"]["seed"] == 21
    assert manifest["random_state"]["counter"] > 0  # the dropout drew from the stream


def test_executor_seed_then_program_seed_then_fresh_entropy():
    """Executor(seed=) seeds the stream, else the random_seed of the first program it
    runs, else fresh entropy (as documented on Executor.random_state)."""
    data = _batches(3)

    def trajectory(exe_seed=None, program_seed=0):
        main, startup, loss = _dropout_mlp(program_seed)  # 0: the initialisers draw from the stream too
        main.random_seed = program_seed
        exe, scope = Executor(seed=exe_seed), Scope()
        exe.run(startup, scope=scope)
        return _losses(exe, main, loss, scope, data), exe.rng.get_state()["seed"]

    assert trajectory(exe_seed=4)[0] == trajectory(exe_seed=4)[0]
    assert trajectory(exe_seed=4)[0] != trajectory(exe_seed=5)[0]
    losses, seed = trajectory(program_seed=8)
    assert seed == 8 and losses == trajectory(program_seed=8)[0]
    assert trajectory(exe_seed=4, program_seed=8)[1] == 4
    assert trajectory()[0] != trajectory()[0]


def test_unserializable_random_state_is_named_not_blamed_on_extra(tmp_path, monkeypatch):
    main, startup, _ = _dropout_mlp()
    exe, scope = Executor(seed=1), Scope()
    exe.run(startup, scope=scope)
    monkeypatch.setattr(exe.rng, "get_state", lambda: {"state": lambda: 0})
    with pytest.raises(CheckpointError, match="random state") as info:
        save_checkpoint(tmp_path / "c.keel", main, exe, scope, extra={"epoch": 1})
    assert "`extra`" not in str(info.value)
    monkeypatch.undo()
    with pytest.raises(CheckpointError, match="`extra` must be JSON data"):
        save_checkpoint(tmp_path / "c.keel", main, exe, scope, extra={"epoch": object()})


def _rewrite_as_version_1(path, random_state):
    """The checkpoint at `path` as the previous Keel wrote it: version 1, numpy's state."""
    with zipfile.ZipFile(path) as zf:
        manifest, tensors = json.loads(zf.read("manifest.json")), zf.read("tensors.bin")
    manifest["version"], manifest["random_state"] = 1, random_state
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.writestr("tensors.bin", tensors)


def test_version_1_checkpoints_continue_their_numpy_stream(tmp_path):
    main, startup, loss = _dropout_mlp()
    exe, scope = Executor(seed=2), Scope()
    exe.run(startup, scope=scope)
    path = tmp_path / "old.keel"
    save_checkpoint(path, main, exe, scope)
    old = np.random.default_rng(77)
    old.random(10)  # somewhere along an old run's stream
    _rewrite_as_version_1(path, json.loads(json.dumps(old.bit_generator.state)))

    exe2 = Executor(seed=2)
    load_checkpoint(path, main, exe2, Scope())
    _assert_same([exe2.rng.random((5,)), exe2.rng.integers(0, 9, size=(4,))],
                 [old.random((5,)), old.integers(0, 9, size=(4,))])
    assert exe2.rng.get_state()["bit_generator"] == "PCG64"  # saved again as it was loaded
    exe2.rng.seed(3)
    assert exe2.rng.get_state() == {"scheme": SCHEME, "seed": 3, "counter": 0}

    gpu_like = Executor(seed=2)
    gpu_like.rng = RandomState(CUPY_LIKE, 2)
    scope3 = Scope()
    with pytest.raises(CheckpointError, match=r"old\.keel: cannot restore the random state: .*older Keel"):
        load_checkpoint(path, main, gpu_like, scope3)
    assert not list(scope3)  # nothing was loaded


def test_a_damaged_random_state_names_the_file(tmp_path):
    main, startup, _ = _dropout_mlp()
    exe, scope = Executor(seed=2), Scope()
    exe.run(startup, scope=scope)
    save_checkpoint(tmp_path / "bad.keel", main, exe, scope)
    _rewrite_as_version_1(tmp_path / "bad.keel", {"scheme": SCHEME, "seed": 1})
    with pytest.raises(CheckpointError, match=r"bad\.keel: cannot restore the random state: .*'counter'"):
        load_checkpoint(tmp_path / "bad.keel", main, Executor(), Scope())


# -- fixed-seed ops ------------------------------------------------------------------------


def test_seeded_generator_restarts_its_seed_and_is_made_once_per_thread():
    want = np.random.default_rng(9).random((5,))
    g = seeded_generator(np, 9)
    np.testing.assert_array_equal(g.random((5,)), want)
    g.random((3,))
    again = seeded_generator(np, 9)
    assert again is g
    np.testing.assert_array_equal(again.random((5,)), want)
    other = []
    t = threading.Thread(target=lambda: other.append(seeded_generator(np, 9)))
    t.start()
    t.join()
    assert other[0] is not g
    np.testing.assert_array_equal(other[0].random((5,)), want)
