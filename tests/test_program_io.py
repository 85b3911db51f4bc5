"""Program and parameter files: PaddlePaddle's files load, and what we write back is identical."""
import gzip
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.program.io import TensorFileError

FIXTURES = Path(__file__).parent / "fixtures" / "paddle"
WITH_PARAMS = sorted(p.with_suffix("") for p in FIXTURES.glob("*.pdiparams"))


@pytest.mark.parametrize("prefix", WITH_PARAMS, ids=lambda p: p.name)
def test_paddle_params_load_and_rewrite_identically(prefix, tmp_path):
    model = prefix.with_suffix(".pdmodel")
    if not model.exists():  # a real 2.x file, stored gzip-compressed (fixtures/paddle/README.md)
        model = tmp_path / model.name
        model.write_bytes(gzip.decompress(prefix.with_suffix(".pdmodel.gz").read_bytes()))
    program = pg.io.load_program(model, verify=False)
    values = pg.io.load_params(program, prefix.with_suffix(".pdiparams"))
    specs = pg.io.persistable_specs(program)
    assert set(values) == {name for name, _, _ in specs}
    for name, dtype, shape in specs:
        assert values[name].shape == tuple(shape), name
    out = tmp_path / "again.pdiparams"
    pg.io.save_params(program, values, out)
    assert out.read_bytes() == prefix.with_suffix(".pdiparams").read_bytes()


def test_program_file_round_trip(tmp_path):
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        pg.data("x", [-1, 3])
        main.global_block().create_var("y", [-1, 3])
    pg.io.save_program(main, tmp_path / "m.pdmodel")
    assert pg.io.load_program(tmp_path / "m.pdmodel") == main


def test_missing_and_corrupt_program_files_name_the_file(tmp_path):
    with pytest.raises(pg.ParseError, match="nope.pdmodel"):
        pg.io.load_program(tmp_path / "nope.pdmodel")
    bad = tmp_path / "bad.pdmodel"
    bad.write_bytes(b"\x0a\xff\xff\xff\x0f not a program")
    with pytest.raises(pg.ParseError, match="bad.pdmodel.*not a valid program file"):
        pg.io.load_program(bad)


def test_params_file_that_does_not_fit_the_program(tmp_path):
    program = pg.io.load_program(FIXTURES / "mlp_fc.pdmodel", verify=False)
    other = pg.io.load_program(FIXTURES / "lenet.pdmodel", verify=False)
    with pytest.raises(TensorFileError, match="lenet.pdiparams"):
        pg.io.load_params(program, FIXTURES / "lenet.pdiparams")
    with pytest.raises(KeyError, match="no value for persistable"):
        pg.io.save_params(other, {}, tmp_path / "x.pdiparams")


def test_save_params_writes_fp16_and_int_tensors(tmp_path):
    main = pg.Program()
    block = main.global_block()
    block.create_var("h", [2, 2], "float16", persistable=True)
    block.create_var("i", [3], "int64", persistable=True)
    block.create_var("b", [], "bool", persistable=True)
    values = {"h": np.ones((2, 2), np.float16), "i": np.arange(3), "b": np.array(True)}
    pg.io.save_params(main, values, tmp_path / "p.pdiparams")
    back = pg.io.load_params(main, tmp_path / "p.pdiparams")
    for name, v in values.items():
        assert back[name].dtype == v.dtype and np.array_equal(back[name], v)
