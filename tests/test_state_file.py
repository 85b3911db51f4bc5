"""program.save / program.load: state dicts without pickle; PaddlePaddle's pickles refused."""
import pickle

import numpy as np
import pytest

import keel.program as pg
from keel.program.io.state_file import StateFileError


def test_round_trip_of_a_nested_state_dict(tmp_path):
    state = {"fc.weight": np.arange(6, dtype=np.float32).reshape(2, 3), "fc.bias": np.zeros(3, np.float16),
             "step": 7, "opt": {"LR_Scheduler": {"last_epoch": 3, "last_lr": 0.5}, "m": np.ones(2, np.int64)}}
    pg.save(state, tmp_path / "model.pdparams")
    got = pg.load(tmp_path / "model.pdparams", return_numpy=True)
    assert set(got) == {"fc.weight", "fc.bias", "step", "opt"}
    np.testing.assert_array_equal(got["fc.weight"], state["fc.weight"])
    assert got["fc.bias"].dtype == np.float16 and int(got["step"]) == 7
    assert float(got["opt"]["LR_Scheduler"]["last_lr"]) == 0.5 and got["opt"]["m"].dtype == np.int64


def test_a_layer_state_dict_survives_the_file(tmp_path):
    from keel.executor import Executor, Scope
    with pg.unique_name.guard():
        layer = pg.nn.Linear(3, 2)
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        layer(pg.data("x", [-1, 3]))
    scope = Scope()
    Executor().run(startup, scope=scope)
    pg.save(layer.state_dict(scope=scope), tmp_path / "linear.pdparams")
    other = Scope()
    layer.set_state_dict(pg.load(tmp_path / "linear.pdparams"), scope=other)
    np.testing.assert_array_equal(other.get("linear_0.w_0"), scope.get("linear_0.w_0"))


def test_a_pickle_is_refused_without_being_unpickled(tmp_path):
    class Boom:
        def __reduce__(self):
            return (exec, ("raise SystemExit('pickle code ran')",))
    path = tmp_path / "paddle.pdparams"
    path.write_bytes(pickle.dumps({"w": Boom()}, protocol=2))
    with pytest.raises(StateFileError, match="is a pickle.*never does"):
        pg.load(path)
    (tmp_path / "junk").write_bytes(b"hello")
    with pytest.raises(StateFileError, match="not a Keel state file"):
        pg.load(tmp_path / "junk")
    (tmp_path / "torn.pdparams").write_bytes((tmp_path / "junk").read_bytes().replace(b"hello", b"PK\x03\x04xx"))
    with pytest.raises(StateFileError, match="cannot read it"):
        pg.load(tmp_path / "torn.pdparams")


def test_what_cannot_be_stored_is_named(tmp_path):
    with pytest.raises(StateFileError, match="'a/b'"):
        pg.save({"a/b": 1}, tmp_path / "x")
    with pytest.raises(StateFileError, match="'w' is str"):
        pg.save({"w": "text"}, tmp_path / "x")


def test_an_empty_state_dict_round_trips(tmp_path):
    """static.save writes an optimizer-state file even for a program without one."""
    pg.save({}, tmp_path / "empty.pdopt")
    assert pg.load(tmp_path / "empty.pdopt") == {}
