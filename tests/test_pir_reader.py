"""The PIR JSON reader (program/io/pir/, issue 28): every place a program file is accepted takes
a `.json`; a malformed, foreign or newer file is a clear ParseError naming the op and field;
the untrusted text is bounded (depth, size) so no file drives a recursion to a crash."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from keel.executor.inference import Config, create_predictor
from keel.program.errors import ParseError
from keel.program.io import load_inference_model, load_program
from keel.program.io.pir import op_table, schema
from keel.program.io.pir.json_file import MAX_DEPTH
from keel.program.io.program_file import model_files, parse_program
from keel.program.ops import registry

PIR = Path(__file__).resolve().parent / "fixtures" / "pir"


def cnn_doc():
    return json.loads((PIR / "cnn_bn.json").read_text())


def parse_doc(doc):
    return parse_program(json.dumps(doc).encode(), source="m.json")


def ops_of(doc):
    return doc["program"]["regions"][0]["blocks"][0]["ops"]


def test_every_row_names_a_keel_op_and_its_slots_and_attributes():
    for pir_name, row in op_table.ROWS.items():
        opdef = registry.lookup(row.legacy)
        assert opdef is not None, (pir_name, row.legacy)
        slots = [s for s in row.inputs if isinstance(s, str)]
        slots += [f.tensor for f in row.inputs if isinstance(f, op_table.Fold) and f.tensor]
        slots += [f.tensors for f in row.inputs if isinstance(f, op_table.Fold) and f.tensors]
        assert set(slots) <= set(opdef.input_slots), (pir_name, slots)
        assert {s for s in row.outputs if s} <= set(opdef.output_slots), pir_name
        folded = {f.attr for f in row.inputs if isinstance(f, op_table.Fold) and f.attr}
        renamed = {a for a in row.attrs.values() if a}
        assert folded | renamed | set(row.fixed) <= set(opdef.attrs), (pir_name, folded | renamed)
        for alternative in row.when_absent.values():
            assert registry.lookup(alternative) is not None, (pir_name, alternative)


def test_prefix_directory_and_file_find_the_json(tmp_path):
    for suffix in (".json", ".pdiparams"):
        shutil.copy(PIR / f"mlp{suffix}", tmp_path / f"inference{suffix}")
    (tmp_path / "inference.yml").write_text("Global:\n  model_name: mlp\n")
    want = (str(tmp_path / "inference.json"), str(tmp_path / "inference.pdiparams"))
    assert model_files(tmp_path) == want
    assert model_files(tmp_path / "inference") == want
    assert model_files(tmp_path / "inference.json") == want
    recorded = np.load(PIR / "mlp.io.npz")
    for config in (Config(str(tmp_path)), Config(str(tmp_path / "inference")),
                   Config(str(tmp_path / "inference.json"), str(tmp_path / "inference.pdiparams"))):
        out = create_predictor(config).run([recorded["in:x"]])
        np.testing.assert_allclose(out[0], recorded["ir_off:0"], rtol=1e-5, atol=1e-6)
    from keel.executor import Scope
    program, feeds, fetches = load_inference_model(str(tmp_path / "inference"), scope=Scope())
    assert feeds == ["x"] and [v.name for v in fetches] == ["fetch_name_0"]
    from keel.program import jit
    layer = jit.load(str(tmp_path / "inference"))
    np.testing.assert_allclose(np.asarray(layer(recorded["in:x"])), recorded["ir_off:0"], rtol=1e-5, atol=1e-6)


def test_a_directory_with_two_models_is_named_in_the_error(tmp_path):
    for stem in ("a", "b"):
        shutil.copy(PIR / "mlp.json", tmp_path / f"{stem}.json")
    with pytest.raises(ParseError, match="expected one model .* found 2: a, b"):
        model_files(tmp_path)


def test_the_tools_take_a_json(tmp_path, capsys):
    from keel.tools import inspect_model, profile_model, prune_for_inference
    assert inspect_model.main([str(PIR / "cnn_bn.json"), "--check"]) == 0
    text = capsys.readouterr().out
    assert "OK, Keel runs it" in text and "a PIR JSON program (base_code.version 4, PaddlePaddle 3.x)" in text
    for suffix in (".json", ".pdiparams"):
        shutil.copy(PIR / f"cnn_bn{suffix}", tmp_path / f"inference{suffix}")
    (tmp_path / "inference.yml").write_text("Global:\n  model_name: PP-LCNet_x1_0\nPreProcess:\n  - Resize\n"
                                            "PostProcess:\n  label_list:\n" + "".join(f"  - c{i}\n" for i in range(30)))
    assert inspect_model.main([str(tmp_path / "inference.json")]) == 0
    text = capsys.readouterr().out
    assert "fetch_name_0 float32[-1, 10]" in text and "parameters (10" in text
    assert f"deployment description ({tmp_path / 'inference.yml'}):\n  Global:\n    model_name: PP-LCNet_x1_0" in text
    assert "    - c7\n    ... (22 more items)\n" in text and "c8" not in text  # a long list shortened
    assert profile_model.main([str(PIR / "cnn_bn.json"), "--repeat", "1", "--warmup", "0"]) == 0
    capsys.readouterr()
    assert prune_for_inference.main([str(PIR / "cnn_bn"), "--out", str(tmp_path / "pruned")]) == 0
    assert (tmp_path / "pruned.pdmodel").exists()


def test_a_json_that_is_not_pir_says_what_keel_saw():
    with pytest.raises(ParseError, match=r"is JSON but not a PaddlePaddle PIR program: expected the fields "
                                         r"'base_code' and 'program', found \['name'\]"):
        parse_program(b'{"name": "resnet"}', source="m.json")
    with pytest.raises(ParseError, match="base_code.magic is 'onnx'"):
        parse_program(b'{"base_code": {"magic": "onnx", "version": 1}, "program": {}}', source="m.json")


def test_a_newer_version_is_named_with_the_newest_known():
    doc = cnn_doc()
    doc["base_code"]["version"] = 7
    with pytest.raises(ParseError, match=f"version 7, newer than Keel reads: Keel reads versions 1 to "
                                         f"{schema.NEWEST_VERSION}"):
        parse_doc(doc)


def test_an_op_without_a_mapping_is_named_with_the_nearest_keel_op():
    doc = cnn_doc()
    relu = next(op for op in ops_of(doc) if op["#"] == "1.relu")
    relu["#"] = "1.relu7"
    with pytest.raises(ParseError, match=r"op \d+ \(pd_op.relu7\): op 'pd_op.relu7' has no legacy counterpart "
                                         r"Keel runs \(did you mean relu, relu6"):
        parse_doc(doc)


@pytest.mark.parametrize("edit, expected", [
    (lambda ops: ops[11].update({"I": "x"}), r"op 11 \(pd_op.conv2d\): field 'I' must be a list, got 'x'"),
    (lambda ops: ops[11]["I"][0].pop("%"), r"op 11 \(pd_op.conv2d\) input 0: field '%' is missing"),
    (lambda ops: ops[11]["O"][0]["TT"]["D"].__setitem__(1, ["a"]),
     r"op 11 \(pd_op.conv2d\) output 0 type: dims must be a list of integers"),
    (lambda ops: ops[11]["I"][0].update({"%": 999}), r"op 11 \(pd_op.conv2d\): reads value %999, which no earlier op"),
    (lambda ops: ops[0].update({"A": [0, 1]}), r"op 0 \(parameter\): field 'A' must be \[is_distributed"),
    (lambda ops: ops[11]["A"][0]["AT"].update({"D": "wide"}), r"op 11 \(pd_op.conv2d\) attribute 'strides': "
                                                             r"0.a_array data must be a list"),
    (lambda ops: ops[11].update({"#": "9.conv2d"}), r"op 11: op name '9.conv2d' is not <dialect number>"),
])
def test_a_malformed_file_names_the_op_and_field(edit, expected):
    doc = cnn_doc()
    edit(ops_of(doc))
    with pytest.raises(ParseError, match=expected):
        parse_doc(doc)


def test_deep_nesting_is_refused_before_parsing():
    deep = b'{"base_code": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    with pytest.raises(ParseError, match=f"nested 100001 levels deep; allowed: at most {MAX_DEPTH}"):
        parse_program(deep, source="m.json")


def test_attribute_widths_do_not_matter():
    """Version 1 files write pool2d strides as i32 and interpolation scales as f32; version 4 as
    i64 and f64 (patch/2.yaml, patch/4.yaml): the same legacy attribute either way."""
    doc = cnn_doc()
    pool = next(op for op in ops_of(doc) if op["#"] == "1.pool2d")
    for attr in pool["A"]:
        if attr["AT"]["#"] == "0.a_array":
            for item in attr["AT"]["D"]:
                item["#"] = "0.a_i32" if item["#"] == "0.a_i64" else "0.a_i64"
    original = load_program(PIR / "cnn_bn.json")
    assert str(parse_doc(doc)) == str(original)


def test_an_attribute_value_the_legacy_op_cannot_express_is_refused():
    doc = json.loads((PIR / "more_ops.json").read_text())
    shuffle = next(op for op in ops_of(doc) if op["#"] == "1.channel_shuffle")
    layout = next(a for a in shuffle["A"] if a["N"] == "data_format")
    layout["AT"]["D"] = "NHWC"
    with pytest.raises(ParseError, match=r"\(pd_op.channel_shuffle\): attribute 'data_format' = 'NHWC': the legacy "
                                         r"op shuffle_channel computes only data_format = 'NCHW'"):
        parse_doc(doc)


def test_a_huge_constant_folded_into_an_attribute_is_refused():
    doc = cnn_doc()
    shape = next(op for op in ops_of(doc) if op["#"] == "1.full_int_array")
    pool_size = next(op for op in ops_of(doc) if op["#"] == "1.full_int_array" and op is not shape)
    full = {"#": "1.full", "I": [], "O": pool_size["O"], "OA": pool_size.get("OA", []),
            "A": [{"N": "shape", "AT": {"#": "1.a_intarray", "D": [1 << 40]}},
                  {"N": "value", "AT": {"#": "0.a_f64", "D": 2.0}},
                  {"N": "dtype", "AT": {"#": "1.a_dtype", "D": "int64"}}]}
    ops = ops_of(doc)
    ops[ops.index(pool_size)] = full
    with pytest.raises(ParseError, match=r"a constant of shape \[1099511627776\] \(1,099,511,627,776 values\) as "
                                         r"an attribute; allowed: at most 65,536 values"):
        parse_doc(doc)


def test_each_legacy_op_names_the_pir_op_it_comes_from():
    program = load_program(PIR / "cnn_bn.json")
    conv = next(op for op in program.global_block().ops if op.type == "conv2d")
    assert conv.callsite == f'File "{PIR / "cnn_bn.json"}", op 11 (pd_op.conv2d)'


def test_a_required_operand_written_as_no_value_is_named():
    """Fuzzing finding: a `mean` whose input is %0 ("no value") reached a derived-attribute rule."""
    doc = cnn_doc()
    softmax = next(op for op in ops_of(doc) if op["#"] == "1.softmax")
    softmax["I"][0]["%"] = 0
    with pytest.raises(ParseError, match=r"\(pd_op.softmax\): the legacy op softmax needs input X, which the "
                                         r"op's operands leave out"):
        parse_doc(doc)
    doc = json.loads((PIR / "control_flow.json").read_text())
    mean = next(op for op in ops_of(doc) if op["#"] == "1.mean")
    mean["I"][0]["%"] = 0
    with pytest.raises(ParseError, match=r"\(pd_op.mean\): the legacy op reduce_mean needs input X"):
        parse_doc(doc)
