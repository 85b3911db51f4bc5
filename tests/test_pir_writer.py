"""Keel writes PaddlePaddle 3.3.1's PIR JSON programs (program/io/pir/write.py; issue 28, Must 3):
every model of the legacy zoo and of the PIR zoo, the control-flow fixtures and Keel-built
branches, loops and tensor arrays, written as PIR and read back by Keel's reader, give the
outputs of the program they were written from; each file has the structure PaddlePaddle's
deserializer checks (serializer version 4, each op's attributes by name and kind as
signatures.py says, values defined before use); `save_inference_model` / `jit.save` take
`format="pir"`; an op no PIR op expresses is refused, named, and nothing is written.
(PaddlePaddle itself loading these files: tests/test_pir_writer_paddle.py.)"""
import gzip
import json
import sys
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.executor.inference import Config, create_predictor
from keel.program.errors import OpError
from keel.program.io import load_program
from keel.program.io.pir import parse_pir_program, schema
from keel.program.io.pir.op_table import ROWS
from keel.program.io.pir.signatures import SIGNATURES
from keel.program.io.pir.write import write_pir_program

FIXTURES = Path(__file__).resolve().parent / "fixtures"
PIR = FIXTURES / "pir"
CONTROL_FLOW = FIXTURES / "control_flow"
sys.path.insert(0, str(FIXTURES / "zoo"))
try:
    from zoo_files import NAMES as LEGACY_ZOO, feeds, unpack
finally:
    sys.path.pop(0)
PIR_ZOO = sorted(p.name[:-len(".io.npz")] for p in PIR.glob("*.io.npz") if not p.name.startswith("legacy_"))
LEGACY_CONTROL_FLOW = sorted(p.name[:-len(".pdmodel")] for p in CONTROL_FLOW.glob("*.pdmodel"))


# -- shared with test_convert_program.py and test_pir_writer_paddle.py -------------------------------
def pir_fixture(name, directory) -> Path:
    """The PIR zoo's program file (unzipped into `directory` when stored gzipped)."""
    plain = PIR / f"{name}.json"
    if plain.exists():
        return plain
    unpacked = Path(directory) / f"{name}.json"
    unpacked.write_bytes(gzip.decompress((PIR / f"{name}.json.gz").read_bytes()))
    return unpacked


def pir_fixture_io(name, directory):
    """(parameter file or None, inputs, Paddle Inference's outputs) recorded for a PIR zoo model
    (recipe-filled parameters are written into `directory`)."""
    from test_pir_zoo import params_file
    recorded = np.load(PIR / f"{name}.io.npz", allow_pickle=False)
    params = params_file(str(recorded["params"]), directory) if str(recorded["params"]) else None
    inputs = {key.split(":", 1)[1]: recorded[key] for key in recorded.files if key.startswith("in:")}
    return params, inputs, [recorded[f"ir_off:{i}"] for i in range(len(recorded["output_names"]))]


def run_model(model_file, params_file, inputs) -> list[np.ndarray]:
    """The Predictor's outputs (Keel's passes off: the program as written)."""
    config = Config(str(model_file), *([str(params_file)] if params_file and Path(params_file).exists() else []))
    config.switch_ir_optim(False)
    predictor = create_predictor(config)
    return predictor.run([inputs[n] for n in predictor.get_input_names()])


def assert_same_outputs(got, want, what, rtol=1e-5, atol=1e-6):
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (what, i, g.dtype, g.shape, w.dtype, w.shape)
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{what} output {i}")


def check_structure(data: bytes) -> dict:
    """The checks PaddlePaddle 3.3.1's deserializer makes of a file, made here: JSON of the PIR
    layout (the reader's schema decodes it), version 4, dialect-numbered op names, each op with
    a signature carrying its attributes by name and kind and its number of results, each operand
    a value defined earlier in its block or an enclosing one (or a block argument), ids unique."""
    doc = json.loads(data)
    assert doc["base_code"] == {"magic": "pir", "trainable": True, "version": 4}
    schema.decode_program(doc, "written")
    seen: set[int] = set()
    kinds = {"bool": "0.a_bool", "i32": "0.a_i32", "i64": "0.a_i64", "f32": "0.a_f32", "f64": "0.a_f64",
             "str": "0.a_str", "intarray": "1.a_intarray", "dtype": "1.a_dtype", "place": "1.a_place"}

    def kind_of(at):
        if at["#"] == "0.a_array":
            inner = {item["#"] for item in at["D"]}
            assert len(inner) <= 1, at
            return ("array", inner.pop() if inner else None)
        return at["#"]

    def block(b, visible):
        visible = set(visible) | {a["#"] for a in b["args"]}
        for a in b["args"]:
            assert a["#"] < 0 and a["#"] not in seen
            seen.add(a["#"])
        for op in b["ops"]:
            if op["#"] == "p":
                assert len(op["A"]) == 4 and isinstance(op["A"][3], str) and len(op["OA"]) == 3
                results = [op["O"]]
            else:
                dialect, _, short = op["#"].partition(".")
                name = f"{schema.DIALECTS[dialect]}.{short}"
                for operand in op["I"]:
                    assert operand["%"] == 0 or operand["%"] in visible, (name, operand, "used before defined")
                signature = SIGNATURES.get(name)
                if signature is not None:
                    assert len(op["O"]) == signature.results, name
                    written = {a["N"]: kind_of(a["AT"]) for a in op["A"]}
                    for attr, kind in signature.attrs:
                        assert attr in written, (name, attr)
                        if kind == "scalars":
                            assert written[attr][0] == "array", (name, attr)
                            continue
                        want = ("array", kinds[kind[:-1]]) if kind.endswith("s") and kind != "place" else kinds[kind]
                        got = written[attr]
                        assert got == want or (isinstance(got, tuple) and got[1] is None and want[0] == "array"), \
                            (name, attr, got, want)
                if name in ROWS:
                    assert len(op["I"]) == (signature.operands if signature and signature.operands
                                            else len(ROWS[name].inputs)), name
                results = op["O"]
                for region in op.get("regions", []):
                    for inner in region["blocks"]:
                        block(inner, visible)
            for value in results:
                assert value["%"] > 0 and value["%"] not in seen
                seen.add(value["%"])
                visible.add(value["%"])

    block(doc["program"]["regions"][0]["blocks"][0], set())
    return doc


def op_names(doc) -> set[str]:
    names = set()

    def walk(ops):
        for op in ops:
            names.add(op["#"])
            for region in op.get("regions", []):
                for b in region["blocks"]:
                    walk(b["ops"])
    walk(doc["program"]["regions"][0]["blocks"][0]["ops"])
    return names


# -- every model, written and read back -----------------------------------------------------------
@pytest.mark.parametrize("name", LEGACY_ZOO)
def test_legacy_zoo_model_written_as_pir_reads_back_with_its_outputs(name, tmp_path):
    prefix, recorded = unpack(name, tmp_path)
    inputs = feeds(recorded)
    params = Path(f"{prefix}.pdiparams")
    data = write_pir_program(load_program(f"{prefix}.pdmodel"), name)
    check_structure(data)
    (tmp_path / "written.json").write_bytes(data)
    assert_same_outputs(run_model(tmp_path / "written.json", params, inputs),
                        run_model(f"{prefix}.pdmodel", params, inputs), name)


@pytest.mark.parametrize("name", PIR_ZOO)
def test_pir_zoo_model_read_and_written_again_gives_paddles_outputs(name, tmp_path):
    """PIR -> Keel's program -> PIR: the rewritten file gives Paddle Inference's recorded outputs
    (control flow, tensor arrays and PaddlePaddle-translated legacy programs among them)."""
    params, inputs, want = pir_fixture_io(name, tmp_path)
    data = write_pir_program(load_program(pir_fixture(name, tmp_path)), name)
    check_structure(data)
    (tmp_path / "written.json").write_bytes(data)
    assert_same_outputs(run_model(tmp_path / "written.json", params, inputs), want, name,
                        rtol=1e-4, atol=1e-4 * max(float(np.abs(w).max()) if w.size else 0 for w in want) + 1e-4)


@pytest.mark.parametrize("name", LEGACY_CONTROL_FLOW)
def test_legacy_control_flow_becomes_pir_if_and_while(name, tmp_path):
    """PaddlePaddle's legacy conditional_block / while / tensor-array programs (dy2static's
    among them) as pd_op.if / pd_op.while with cf.yield and array ops; each recorded case gives
    Paddle's outputs."""
    program = load_program(CONTROL_FLOW / f"{name}.pdmodel")
    data = write_pir_program(program, name)
    doc = check_structure(data)
    legacy_ops = {op.type for b in program.blocks for op in b.ops}
    written = op_names(doc)
    assert ("conditional_block" in legacy_ops) <= ("1.if" in written)
    assert ("while" in legacy_ops) <= ({"1.while", "2.yield"} <= written)
    assert ("write_to_array" in legacy_ops) <= ({"1.create_array", "1.array_write_"} <= written)
    (tmp_path / "written.json").write_bytes(data)
    params = CONTROL_FLOW / f"{name}.pdiparams"
    io = np.load(CONTROL_FLOW / f"{name}.io.npz")
    cases = sorted({key.split(":")[0][3:] for key in io.files if key.startswith("out")})
    for k in cases:
        inputs = {key.split(":", 1)[1]: io[key] for key in io.files if key.startswith(f"in{k}:")}
        want = [io[f"out{k}:{j}"] for j in range(sum(1 for key in io.files if key.startswith(f"out{k}:")))]
        assert_same_outputs(run_model(tmp_path / "written.json", params, inputs), want, f"{name} case {k}")


# -- Keel-built programs, saved with format="pir" ----------------------------------------------------
def _keel_control_flow_program():
    """A cond, a nested cond, a while loop and an RNN writing a tensor array."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [2, 3], "float32")
        n = pg.data("n", [1], "int64")
        w = pg.create_parameter([3, 3], "float32", name="w")
        branch = pg.static.nn.cond(pg.sum(x) > 0.0, lambda: pg.tanh(pg.matmul(x, w)) * 2.0, lambda: x - 1.0)
        nested = pg.static.nn.cond(pg.mean(x) > 0.5, lambda: pg.static.nn.cond(pg.mean(x) > 2.0, lambda: x * 100.0,
                                                                    lambda: x * 10.0), lambda: x * 0.0)
        i = pg.fill_constant([1], "int64", 0)
        power = x * 0.0 + 1.0
        states = pg.create_array("float32")

        def body(i, y):
            y = y * x
            pg.array_write(y, i, states)
            return [i + 1, y]
        i, power = pg.static.nn.while_loop(lambda i, y: i < n, body, [i, power])
        count = pg.array_length(states)
    return main, startup, [x, n], [branch, nested, power, count]


def keel_control_flow_run(shift):
    """_keel_control_flow_program run once on inputs shifted by `shift` (which branch is
    taken): (main, feeds, fetches, executor, scope, inputs, outputs)."""
    main, startup, feeds_, fetches = _keel_control_flow_program()
    exe, scope = Executor(seed=1), Scope()
    exe.run(startup, scope=scope)
    inputs = {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32) + shift,
              "n": np.array([3])}
    return main, feeds_, fetches, exe, scope, inputs, exe.run(main, feed=inputs, fetch_list=fetches, scope=scope)


@pytest.mark.parametrize("shift", [1.5, -1.5])
def test_save_inference_model_format_pir_keeps_keel_built_control_flow(shift, tmp_path):
    main, feeds_, fetches, exe, scope, inputs, want = keel_control_flow_run(shift)
    prefix = tmp_path / "cf"
    pg.io.save_inference_model(str(prefix), feeds_, fetches, exe, program=main, scope=scope, format="pir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cf.json", "cf.pdiparams"]
    doc = check_structure((tmp_path / "cf.json").read_bytes())
    assert {"1.if", "1.while", "1.create_array", "1.array_write_", "1.array_length"} <= op_names(doc)
    assert_same_outputs(run_model(tmp_path / "cf.json", tmp_path / "cf.pdiparams", inputs), want, "control flow")
    program, feed_names, fetch_vars = pg.io.load_inference_model(str(prefix), exe, scope=Scope())
    assert feed_names == ["x", "n"] and len(fetch_vars) == len(fetches)
    fetch_ops = [op for op in doc["program"]["regions"][0]["blocks"][0]["ops"] if op["#"] == "1.fetch"]
    assert [op["A"][0]["AT"]["D"] for op in fetch_ops] == [v.name for v in fetches]  # (Paddle's output names)


def _ops_program():
    """One of each op whose signature only signatures_3_3_1.json.gz shows (unary math,
    activations with parameters, reductions, indexing, sorting, normalization), built by Keel:
    the legacy ops, their legacy attributes (strided_slice dropping an axis among them)."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [2, 3, 4, 4], "float32")
        i = pg.data("i", [2, 3], "int64")
        b = pg.data("b", [2, 3], "bool")
        m = pg.slice(pg.reshape(x, [2, 48]), [1], [0], [3])
        pos = pg.exp(m) + 0.5
        outs = [fn(pos) for fn in (pg.log, pg.sqrt, pg.rsqrt, pg.ceil, pg.floor, pg.cos, pg.sin, pg.square,
                                   pg.reciprocal, pg.round, pg.sign, pg.erf, pg.log1p, pg.log_sigmoid,
                                   pg.softsign)]
        outs += [pg.stanh(m), pg.elu(m, 0.5), pg.celu(m, 0.7), pg.selu(m), pg.softplus(m, 2.0, 10.0),
                 pg.thresholded_relu(m, 0.3), pg.maximum(m, pos), pg.minimum(m, pos), pg.floor_divide(i, i + 1),
                 pg.cast(pg.not_equal(m, pos), "float32"), pg.cast(pg.logical_and(b, b), "float32"),
                 pg.cast(pg.logical_or(b, b), "float32"), pg.cast(pg.logical_xor(b, b), "float32"),
                 pg.cast(pg.isinf(m), "float32"), pg.cast(pg.isnan(m), "float32"), pg.prod(m, [1]),
                 pg.prod(m), pg.min(m, [1]), pg.cast(pg.all(b, [1]), "float32"), pg.cast(pg.any(b), "float32"),
                 pg.cumsum(m, 1), pg.argmin(m, 1), pg.argsort(m, 1, descending=True),
                 pg.bmm(pg.unsqueeze(m, [0]), pg.unsqueeze(pg.transpose(m, [1, 0]), [0])),
                 pg.expand_as(pg.slice(m, [0], [0], [1]), m), pg.strided_slice(m, [1], [0], [3], [2]),
                 pg.triu(m, 1), pg.tile(m, [2, 1]), pg.one_hot(pg.floor_divide(i, i + 1), 3),
                 pg.gather_nd(m, pg.fill_constant([1, 2], "int64", 0)),
                 pg.index_select(m, pg.fill_constant([2], "int64", 1), 1), pg.pad(m, [1, 1, 0, 2], 0.5),
                 pg.norm(m, 3.0, 1), pg.nonzero(b), pg.dist(m, pos, 2.0),
                 pg.scatter(m, pg.fill_constant([1], "int64", 0), pg.slice(pos, [0], [0], [1])),
                 pg.scatter_nd_add(m, pg.fill_constant([1, 1], "int64", 1), pg.slice(pos, [0], [0], [1])),
                 pg.nn.group_norm(x, 3), pg.nn.prelu(x, "channel")]
        outs += list(pg.unstack(m, 0)) + list(pg.topk(m, 2, 1))
        block = main.current_block()  # (a strided_slice dropping its axis: PIR squeezes after it)
        dropped = block.create_var("dropped", (3,), "float32")
        block.append_op("strided_slice", {"Input": [m]}, {"Out": [dropped]},
                        {"axes": [0], "starts": [1], "ends": [2], "strides": [1], "decrease_axis": [0],
                         "infer_flags": [1]})
        outs.append(dropped)
    return main, startup, [x, i, b], outs


def ops_program_inputs():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((2, 3, 4, 4)).astype(np.float32),
            "i": rng.integers(0, 5, (2, 3)).astype(np.int64), "b": rng.random((2, 3)) > 0.5}


def test_ops_paddle_writes_with_attributes_write_and_read_back(tmp_path):
    main, startup, feed_vars, fetches = _ops_program()
    exe, scope = Executor(seed=3), Scope()
    exe.run(startup, scope=scope)
    inputs = ops_program_inputs()
    want = exe.run(main, feed=inputs, fetch_list=fetches, scope=scope)
    pg.io.save_inference_model(str(tmp_path / "ops"), feed_vars, fetches, exe, program=main, scope=scope,
                               format="pir")
    doc = check_structure((tmp_path / "ops.json").read_bytes())
    written = op_names(doc)
    assert {"1.strided_slice", "1.squeeze", "1.group_norm", "1.p_norm", "1.argsort", "1.unstack"} <= written
    assert not [n for n in written if n != "p" and (f"{schema.DIALECTS[n[0]]}.{n[2:]}" not in SIGNATURES)
                and n[0] == "1"], "every pd_op written has a signature"
    assert_same_outputs(run_model(tmp_path / "ops.json", tmp_path / "ops.pdiparams", inputs), want, "ops")


def _linear_program():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [-1, 4], "float32")
        y = pg.nn.fc(x, 3, activation="relu")
    exe, scope = Executor(seed=2), Scope()
    exe.run(startup, scope=scope)
    return main, x, y, exe, scope


def test_save_inference_model_replaces_the_other_formats_file(tmp_path):
    """A .json beside a .pdmodel would be loaded in its place (PaddlePaddle 3.x and Keel look for
    prefix.json first): each save replaces the pair and removes the other format's program."""
    main, x, y, exe, scope = _linear_program()
    prefix = str(tmp_path / "m")
    xv = np.ones((2, 4), np.float32)
    want, = exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scope)
    pg.io.save_inference_model(prefix, [x], [y], exe, program=main, scope=scope)
    pg.io.save_inference_model(prefix, [x], [y], exe, program=main, scope=scope, format="pir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "m.pdiparams"]
    assert_same_outputs(run_model(prefix + ".json", prefix + ".pdiparams", {"x": xv}), [want], "pir")
    pg.io.save_inference_model(prefix, [x], [y], exe, program=main, scope=scope, format="legacy")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pdiparams", "m.pdmodel"]


def test_an_unknown_format_is_refused_before_anything_is_written(tmp_path):
    main, x, y, exe, scope = _linear_program()
    with pytest.raises(ValueError, match=r"format='onnx'; allowed: 'legacy', 'pir'"):
        pg.io.save_inference_model(str(tmp_path / "m"), [x], [y], exe, program=main, scope=scope, format="onnx")
    net = pg.nn.Linear(4, 2)
    with pytest.raises(ValueError, match="format='PIR'"):
        pg.jit.save(net, str(tmp_path / "net"), input_spec=[pg.static.InputSpec([None, 4], "float32", "x")],
                    format="PIR")
    assert list(tmp_path.iterdir()) == []


def test_jit_save_format_pir_then_jit_load(tmp_path):
    net = pg.nn.Linear(4, 2)
    state = net.state_dict()  # (its own values now: a same-named one another test left in the global scope
    #                            would otherwise be saved: jit.save's current_value)
    spec = [pg.static.InputSpec([None, 4], "float32", "x")]
    pg.jit.save(net, str(tmp_path / "net"), input_spec=spec, format="pir")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["net.json", "net.pdiparams"]
    check_structure((tmp_path / "net.json").read_bytes())
    xv = np.arange(12, dtype=np.float32).reshape(3, 4)
    np.testing.assert_allclose(pg.jit.load(str(tmp_path / "net"))(xv), xv @ state["weight"] + state["bias"],
                               rtol=1e-5)


def test_an_op_with_no_pir_counterpart_is_named_and_nothing_is_written(tmp_path):
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 4], "float32")
        block = main.current_block()
        y = block.create_var("y", (-1, 4), "float32")
        block.append_op("l1_norm", {"X": [x]}, {"Out": [y]})
    with pytest.raises(OpError, match=r"l1_norm: cannot be written as a PIR program .*no PIR op Keel writes"):
        pg.io.save_inference_model(str(tmp_path / "m"), [x], [y], program=main, scope=Scope(), format="pir")
    assert list(tmp_path.iterdir()) == []
    # the legacy format still holds it
    pg.io.save_inference_model(str(tmp_path / "m"), [x], [y], program=main, scope=Scope())
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.pdmodel"]


# -- the facts the writer relies on --------------------------------------------------------------------
def test_signatures_agree_with_the_files_paddle_3_3_1_wrote():
    """Every op of a version-4 fixture (what 3.3.1 writes) that signatures.py has a row for has
    exactly that row's attributes (PaddlePaddle's struct_name aside) at those kinds, and that
    many results."""
    kinds = {"0.a_bool": "bool", "0.a_i32": "i32", "0.a_i64": "i64", "0.a_f32": "f32", "0.a_f64": "f64",
             "0.a_str": "str", "1.a_intarray": "intarray", "1.a_dtype": "dtype", "1.a_place": "place"}
    # 3.3.1 writes full's value as f64 from its Python API and as f32 from its legacy translator,
    # and takes either
    EITHER = {("pd_op.full", "value"): {"f32", "f64"}}
    checked = set()

    def walk(ops):
        for op in ops:
            for region in op.get("regions", []):
                for b in region["blocks"]:
                    walk(b["ops"])
            if op["#"] == "p":
                continue
            dialect, _, short = op["#"].partition(".")
            name = f"{schema.DIALECTS[dialect]}.{short}"
            if name not in SIGNATURES:
                continue
            signature = SIGNATURES[name]
            written = [a for a in op["A"] if a["N"] not in ("struct_name", "op_callstack")]
            assert [a["N"] for a in written] == [n for n, _ in signature.attrs], name
            for a, (_, kind) in zip(written, signature.attrs):
                at = a["AT"]
                if at["#"] == "0.a_array":
                    allowed = set(kinds.values()) if kind == "scalars" else {kind[:-1]}
                    assert all(kinds[item["#"]] in allowed for item in at["D"]), (name, a)
                else:
                    assert kinds[at["#"]] in EITHER.get((name, a["N"]), {kind}), (name, a)
            assert len(op["O"]) == signature.results, name
            checked.add(name)

    for path in sorted(PIR.glob("*.json*")):
        if path.name == "skipped.json":
            continue
        doc = json.loads(gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes())
        if doc["base_code"]["version"] == 4:
            walk(doc["program"]["regions"][0]["blocks"][0]["ops"])
    assert len(checked) >= 80, len(checked)


def test_every_signature_names_an_op_the_reader_reads():
    from keel.program.io.pir.translate import _SPECIAL
    assert sorted(set(SIGNATURES) - set(ROWS) - set(_SPECIAL)) == []


def test_a_written_program_reads_back_with_the_same_feeds_fetches_and_parameters(tmp_path):
    main, x, y, exe, scope = _linear_program()
    pg.io.save_inference_model(str(tmp_path / "m"), [x], [y], exe, program=main, scope=scope, format="pir")
    program = parse_pir_program((tmp_path / "m.json").read_bytes())
    block = program.global_block()
    assert [op.output("Out")[0] for op in block.ops if op.type == "feed"] == ["x"]
    assert [op.input("X")[0] for op in block.ops if op.type == "fetch"] == [y.name]
    assert sorted(n for n, v in block.vars.items() if v.persistable and n not in ("feed", "fetch")) == \
        sorted(p.name for p in main.all_parameters())
