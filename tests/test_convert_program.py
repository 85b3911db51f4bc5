"""tools/convert_program.py (`keel-convert`): an inference model converted between the legacy
(.pdmodel) and PIR (.json) program formats, both ways, with its parameters: legacy -> PIR ->
legacy and PIR -> legacy -> PIR keep every zoo model's and control-flow fixture's outputs; the
input's format is told by content, the output's by --to or its suffix; a failure (an op the
output format cannot express, named) writes nothing."""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from keel.program.io import load_program
from keel.tools import convert_program
from test_pir_writer import (CONTROL_FLOW, LEGACY_CONTROL_FLOW, LEGACY_ZOO, PIR_ZOO, assert_same_outputs,
                             check_structure, feeds, pir_fixture, pir_fixture_io, run_model, unpack)


def convert(*args) -> int:
    return convert_program.main([str(a) for a in args])


@pytest.mark.parametrize("name", LEGACY_ZOO)
def test_legacy_to_pir_to_legacy_keeps_the_outputs(name, tmp_path):
    prefix, recorded = unpack(name, tmp_path)
    inputs = feeds(recorded)
    want = run_model(f"{prefix}.pdmodel", f"{prefix}.pdiparams", inputs)
    assert convert(f"{prefix}.pdmodel", tmp_path / "pir" / "m.json") == 0
    check_structure((tmp_path / "pir" / "m.json").read_bytes())
    assert convert(tmp_path / "pir" / "m.json", tmp_path / "back" / "m.pdmodel") == 0
    for model in (tmp_path / "pir" / "m.json", tmp_path / "back" / "m.pdmodel"):
        assert_same_outputs(run_model(model, model.with_suffix(".pdiparams"), inputs), want, f"{name} {model}")
    if Path(f"{prefix}.pdiparams").exists():  # (PaddlePaddle's record order, kept both ways)
        original = Path(f"{prefix}.pdiparams").read_bytes()
        assert (tmp_path / "pir" / "m.pdiparams").read_bytes() == original
        # (a legacy rnn's dropout state is a persistable record; PIR's rnn reads a placeholder
        # instead, so the file read back from PIR no longer holds it)
        if "rnn" not in {op.type for op in load_program(f"{prefix}.pdmodel").global_block().ops}:
            assert (tmp_path / "back" / "m.pdiparams").read_bytes() == original


@pytest.mark.parametrize("name", PIR_ZOO)
def test_pir_to_legacy_to_pir_keeps_paddles_outputs(name, tmp_path):
    params, inputs, want = pir_fixture_io(name, tmp_path)
    source = pir_fixture(name, tmp_path)
    args = ["--params", params] if params else []
    assert convert(source, tmp_path / "legacy" / "m", "--to", "legacy", *args) == 0
    assert convert(tmp_path / "legacy" / "m.pdmodel", tmp_path / "again" / "m.json") == 0
    scale = max((float(np.abs(w).max()) for w in want if w.size), default=0.0)
    for model in (tmp_path / "legacy" / "m.pdmodel", tmp_path / "again" / "m.json"):
        assert_same_outputs(run_model(model, model.with_suffix(".pdiparams"), inputs), want, f"{name} {model}",
                            rtol=1e-4, atol=1e-4 + 1e-4 * scale)


@pytest.mark.parametrize("name", LEGACY_CONTROL_FLOW)
def test_control_flow_both_ways(name, tmp_path):
    """conditional_block / while / tensor arrays -> pd_op.if / pd_op.while -> the legacy ops again."""
    io = np.load(CONTROL_FLOW / f"{name}.io.npz")
    inputs = {key.split(":", 1)[1]: io[key] for key in io.files if key.startswith("in0:")}
    want = [io[f"out0:{j}"] for j in range(sum(1 for key in io.files if key.startswith("out0:")))]
    assert convert(CONTROL_FLOW / f"{name}.pdmodel", tmp_path / "m.json") == 0
    assert convert(tmp_path / "m.json", tmp_path / "back.pdmodel") == 0
    types = {op.type for b in load_program(tmp_path / "back.pdmodel").blocks for op in b.ops}
    original = {op.type for b in load_program(CONTROL_FLOW / f"{name}.pdmodel").blocks for op in b.ops}
    assert {"conditional_block", "while"} & original <= types
    for model in (tmp_path / "m.json", tmp_path / "back.pdmodel"):
        assert_same_outputs(run_model(model, model.with_suffix(".pdiparams"), inputs), want, f"{name} {model}")


# -- the command line ------------------------------------------------------------------------------
@pytest.fixture
def lenet(tmp_path):
    (tmp_path / "in").mkdir()
    prefix, recorded = unpack("lenet", tmp_path / "in")
    return Path(prefix), feeds(recorded)


def test_the_output_format_comes_from_to_else_the_suffix_else_the_other_format(lenet, tmp_path, capsys):
    prefix, inputs = lenet
    assert convert(prefix, tmp_path / "a") == 0            # a legacy prefix in, no suffix out: PIR
    assert (tmp_path / "a.json").exists() and (tmp_path / "a.pdiparams").exists()
    assert "wrote" in capsys.readouterr().out
    assert convert(tmp_path / "a.json", tmp_path / "b") == 0  # PIR in (by content): legacy
    assert (tmp_path / "b.pdmodel").exists()
    assert convert(tmp_path / "b.pdmodel", tmp_path / "c", "--to", "legacy") == 0  # legacy -> legacy
    assert (tmp_path / "c.pdmodel").exists()
    (tmp_path / "renamed.pdmodel").write_bytes((tmp_path / "a.json").read_bytes())  # content, not name
    (tmp_path / "renamed.pdiparams").write_bytes((tmp_path / "a.pdiparams").read_bytes())
    assert convert(tmp_path / "renamed.pdmodel", tmp_path / "d") == 0
    assert (tmp_path / "d.pdmodel").exists()
    want = run_model(f"{prefix}.pdmodel", f"{prefix}.pdiparams", inputs)
    for model in ("a.json", "b.pdmodel", "c.pdmodel", "d.pdmodel"):
        assert_same_outputs(run_model(tmp_path / model, (tmp_path / model).with_suffix(".pdiparams"), inputs),
                            want, model)


def test_a_directory_holding_one_model_is_an_input(lenet, tmp_path):
    prefix, inputs = lenet
    assert convert(prefix.parent, tmp_path / "out" / "inference.json") == 0
    assert json.loads((tmp_path / "out" / "inference.json").read_bytes())["base_code"]["version"] == 4


def test_bad_command_lines_exit_2_and_write_nothing(lenet, tmp_path, capsys):
    prefix, _ = lenet
    assert convert(prefix, tmp_path / "x.json", "--to", "legacy") == 2
    assert "--to legacy writes a .pdmodel program, but the output is named" in capsys.readouterr().err
    assert convert(f"{prefix}.pdmodel", f"{prefix}.pdmodel", "--to", "legacy") == 2
    assert "would overwrite the input" in capsys.readouterr().err
    assert not list(tmp_path.glob("x*"))


def test_a_missing_parameter_file_is_named(lenet, tmp_path, capsys):
    prefix, _ = lenet
    (tmp_path / "alone.pdmodel").write_bytes(Path(f"{prefix}.pdmodel").read_bytes())
    assert convert(tmp_path / "alone.pdmodel", tmp_path / "out.json") == 1
    assert f"{tmp_path / 'alone.pdiparams'}: no such file" in capsys.readouterr().err
    assert not (tmp_path / "out.json").exists()


def test_an_op_the_output_format_cannot_express_is_named_and_nothing_is_written(tmp_path, capsys):
    import keel.program as pg
    from keel.executor import Scope
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 4], "float32")
        y = main.current_block().create_var("y", (-1, 4), "float32")
        main.current_block().append_op("l1_norm", {"X": [x]}, {"Out": [y]})
    pg.io.save_inference_model(str(tmp_path / "m"), [x], [y], program=main, scope=Scope())
    assert convert(tmp_path / "m.pdmodel", tmp_path / "out" / "m.json") == 1
    assert "l1_norm: cannot be written as a PIR program" in capsys.readouterr().err
    assert not (tmp_path / "out" / "m.json").exists()
    # and PIR -> legacy: an op the reader has no legacy counterpart for
    doc = json.loads(convert_program_json(tmp_path))
    for op in doc["program"]["regions"][0]["blocks"][0]["ops"]:
        if op["#"] == "1.relu":
            op["#"] = "1.no_such_op"
    (tmp_path / "odd.json").write_text(json.dumps(doc))
    assert convert(tmp_path / "odd.json", tmp_path / "odd_out.pdmodel") == 1
    assert "'pd_op.no_such_op' has no legacy counterpart" in capsys.readouterr().err
    assert not (tmp_path / "odd_out.pdmodel").exists()


def convert_program_json(tmp_path) -> bytes:
    """A small PIR program with a relu, written by Keel."""
    import keel.program as pg
    from keel.executor import Scope
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 4], "float32")
        y = pg.relu(x)
    pg.io.save_inference_model(str(tmp_path / "small"), [x], [y], program=main, scope=Scope(), format="pir")
    return (tmp_path / "small.json").read_bytes()


def test_python_dash_m_runs_the_tool(tmp_path):
    r = subprocess.run([sys.executable, "-m", "keel.tools.convert_program", "--help"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.startswith("usage: ") and "--to {legacy,pir}" in r.stdout
