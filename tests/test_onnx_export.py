"""keel.onnx.export and tools/export_onnx.py on whole models: every model of the zoo
(tests/fixtures/zoo) and of tests/fixtures/paddle exported (onnx.checker full check), run in
ONNX Runtime on the recorded inputs and compared with PaddlePaddle's recorded outputs at the
zoo's tolerance, and at other batch sizes with a dynamic batch against Keel's executor; the
PIR files, the Layer path, float16, the command line and its errors.

A model that cannot be exported yet is listed, with the op types that stop it, in AWAITING
(converters still to write) or NOT_EXPRESSIBLE (no ONNX equivalent): the test asserts that
the export fails naming exactly those types, so an entry cannot outlive its reason."""
import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX export needs the onnx package (pip install -e '.[onnx]')")
ort = pytest.importorskip("onnxruntime", reason="running exported models needs onnxruntime")

import keel  # noqa: E402
from keel import onnx as keel_onnx  # noqa: E402
from keel.program.errors import KeelError  # noqa: E402
from keel.program.io import load_params, load_program  # noqa: E402
from keel.program.onnx import OnnxExportError, io_names, untranslatable_ops  # noqa: E402
from keel.static import InputSpec  # noqa: E402
from onnx_oracle import keel_run, ort_run, zoo_case  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(FIXTURES / "zoo"))
try:
    from zoo_files import NAMES, unpack, write_recipe_params  # noqa: E402
finally:
    sys.path.pop(0)

# model -> the op types (comma-separated, sorted) whose converters are still to be written
AWAITING: dict[str, str] = {}
# model -> the op types ONNX has no equivalent of (comma-separated, sorted), and why
NOT_EXPRESSIBLE = {
    "pir/bitwise_decompositions": ("eigh, histogram, qr, svd", "matrix decompositions and histograms have no "
                                   "ONNX operator"),
    "pir/losses_linalg": ("bce_loss, cholesky, fold, huber_loss, inverse, kldiv_loss, "
                          "sigmoid_cross_entropy_with_logits, solve",
                          "cholesky, inverse and solve have no ONNX operator; the training losses and fold "
                          "(col2im) are not translated: not inference ops"),
}
# the paddle fixtures' training programs: no fetch ops, not inference models
TRAINING = ("convbn_adam.train", "convbn_adam.train_startup", "mlp_sgd.train", "mlp_sgd.train_startup")
PADDLE_MODELS = sorted(p.name[:-len(".io.npz")] for p in (FIXTURES / "paddle").glob("*.io.npz"))
# PIR fixtures with their own parameters (or none), and recorded outputs
PIR_MODELS = ["activations", "cnn_bn", "mlp", "paddle_ops_zoo", "legacy_instance_norm"]


def assert_refused_naming(program, types: str):
    """The export is refused up front, naming exactly the op types `types`."""
    missing = sorted({op.type for op in untranslatable_ops(program)})
    with pytest.raises(OnnxExportError) as info:
        keel_onnx.program_to_onnx(program, {})
    assert ", ".join(missing) == types and f"untranslatable op types: {types}" in str(info.value), str(info.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_zoo_model_exports_and_matches_paddle_and_keel(name, tmp_path):
    """Recorded Paddle outputs at batch 1 (the recorded batch), Keel's at batch sizes 1, 2, 3."""
    if name in AWAITING:
        prefix, _ = unpack(name, tmp_path)
        assert_refused_naming(load_program(prefix.with_suffix(".pdmodel")), AWAITING[name])
        return
    zoo_case(name, tmp_path, batch_sizes=(1, 2, 3))


def _paddle_fixture(name, directory):
    """(program, params, recorded npz) of tests/fixtures/paddle/<name>; resnet18's
    parameters come from the recipe PaddlePaddle's side used."""
    source = FIXTURES / "paddle" / f"{name}.pdmodel"
    if not source.exists():
        source = Path(directory) / f"{name}.pdmodel"
        source.write_bytes(gzip.decompress((FIXTURES / "paddle" / f"{name}.pdmodel.gz").read_bytes()))
    program = load_program(source)
    params_file = FIXTURES / "paddle" / f"{name}.pdiparams"
    if not params_file.exists():
        params_file = Path(directory) / f"{name}.pdiparams"
        write_recipe_params(source, params_file)
    return program, load_params(program, params_file), np.load(FIXTURES / "paddle" / f"{name}.io.npz")


def _recorded_out(recorded, i):
    return recorded[f"out:{i}"] if f"out:{i}" in recorded.files else recorded[f"ir_off:{i}"]


def _assert_matches_recorded(got, recorded, what):
    for i, g in enumerate(got):
        want = _recorded_out(recorded, i)
        assert g.shape == want.shape and g.dtype == want.dtype, (what, i, g.shape, g.dtype, want.shape, want.dtype)
        if want.size:
            err = float(np.abs(g.astype(np.float64) - want).max())
            assert err <= 1e-4 + 1e-4 * float(np.abs(want).max()), f"{what} output {i}: max error {err:.3g}"


@pytest.mark.parametrize("name", PADDLE_MODELS)
def test_paddle_fixture_exports_and_matches_paddle(name, tmp_path):
    program, params, recorded = _paddle_fixture(name, tmp_path)
    model = keel_onnx.program_to_onnx(program, params, dynamic_batch=True)
    feeds, fetches = io_names(program)
    inputs = {n: recorded[f"in:{n}"] for n in feeds}
    _assert_matches_recorded(ort_run(model, inputs), recorded, name)
    block = program.global_block()
    if all(block.var(n).shape[0] == -1 for n in feeds):  # another batch size, against Keel
        other = {n: np.resize(v, (3, *v.shape[1:])) for n, v in inputs.items()}
        for got, want in zip(ort_run(model, other), keel_run(program, other, fetches, params)):
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=f"{name} at batch 3")


def test_the_training_programs_are_refused_as_not_inference_models():
    for name in TRAINING:
        program = load_program(FIXTURES / "paddle" / f"{name}.pdmodel")
        with pytest.raises(OnnxExportError, match="fetches nothing"):
            keel_onnx.program_to_onnx(program, {}, check=False)


def _pir_file(name):
    for suffix in (".json", ".json.gz", ".pdmodel"):
        if (FIXTURES / "pir" / f"{name}{suffix}").exists():
            return FIXTURES / "pir" / f"{name}{suffix}"
    raise FileNotFoundError(name)


@pytest.mark.parametrize("name", PIR_MODELS)
def test_pir_files_export_through_keel_onnx(name, tmp_path):
    path = _pir_file(name)
    if path.suffix == ".gz":
        unzipped = tmp_path / path.name[:-len(".gz")]
        unzipped.write_bytes(gzip.decompress(path.read_bytes()))
        path = unzipped
    proto = keel_onnx.export(str(path), tmp_path / "m.onnx")
    onnx.checker.check_model(onnx.load(tmp_path / "m.onnx"), full_check=True)
    recorded = np.load(FIXTURES / "pir" / f"{name}.io.npz")
    inputs = {i.name: recorded[f"in:{i.name}"] for i in proto.graph.input}
    _assert_matches_recorded(ort_run(proto, inputs), recorded, name)


@pytest.mark.parametrize("name", sorted(NOT_EXPRESSIBLE))
def test_models_onnx_cannot_express_are_refused_naming_the_ops(name):
    assert_refused_naming(load_program(_pir_file(name.split("/", 1)[1])), NOT_EXPRESSIBLE[name][0])


# -- the Layer path, float16, errors ---------------------------------------------------------------

class SmallNet(keel.nn.Layer):
    def __init__(self):
        super().__init__()
        self.conv = keel.nn.Conv2D(3, 8, 3, padding=1)
        self.bn = keel.nn.BatchNorm2D(8)
        self.pool = keel.nn.AdaptiveAvgPool2D(1)
        self.fc = keel.nn.Linear(8, 4)

    def forward(self, x):
        y = self.pool(keel.nn.functional.relu(self.bn(self.conv(x))))
        return keel.nn.functional.softmax(self.fc(keel.flatten(y, 1)))


def test_a_layer_exports_as_jit_save_traces_it_and_matches_its_eager_output(tmp_path):
    keel.seed(3)
    net = SmallNet()
    net.eval()
    proto = keel_onnx.export(net, tmp_path / "net.onnx", [InputSpec([None, 3, 32, 32], "float32", "x")],
                             verify=True)
    assert [i.name for i in proto.graph.input] == ["x"]
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param  # the None batch stays symbolic
    x = np.random.default_rng(0).standard_normal((5, 3, 32, 32)).astype(np.float32)
    want = net(keel.to_tensor(x)).numpy()
    got, = ort_run(onnx.load(tmp_path / "net.onnx"), {"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fp16_export_keeps_float32_io_and_matches_within_float16(tmp_path):
    program, params, recorded = _paddle_fixture("lenet", tmp_path)
    proto = keel_onnx.export(str(FIXTURES / "paddle" / "lenet.pdmodel"), None, fp16=True, verify=True)
    assert {i.type.tensor_type.elem_type for i in proto.graph.input} == {onnx.TensorProto.FLOAT}
    assert any(t.data_type == onnx.TensorProto.FLOAT16 for t in proto.graph.initializer)
    feed = {n: recorded[f"in:{n}"] for n in io_names(program)[0]}
    got, = ort_run(proto, feed)
    want = recorded["out:0"]
    assert float(np.abs(got - want).max()) <= 1e-2 * (1 + float(np.abs(want).max()))


def test_export_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(OnnxExportError, match="opset_version 12 is not one Keel writes"):
        keel_onnx.export(str(FIXTURES / "paddle" / "lenet.pdmodel"), None, opset_version=12)
    with pytest.raises(KeelError, match="cannot read program file .*missing.pdmodel: No such file"):
        keel_onnx.export(str(tmp_path / "missing.pdmodel"), None)
    with pytest.raises(TypeError, match="give a model file or prefix, a Layer or an inference Program"):
        keel_onnx.export(42, None)
    with pytest.raises(ValueError, match="keel.onnx.export needs input_spec"):
        keel_onnx.export(SmallNet(), None)


def test_the_file_is_written_atomically_and_nothing_is_written_on_failure(tmp_path, monkeypatch):
    out = tmp_path / "out.onnx"
    out.write_bytes(b"old")
    monkeypatch.setattr(keel_onnx, "compare_with_keel", lambda *a, **k: [keel_onnx.OutputCheck("y", 1.0, 1.0, False)])
    with pytest.raises(keel_onnx.OnnxVerificationError, match="y: max abs error 1"):
        keel_onnx.export(str(FIXTURES / "paddle" / "lenet.pdmodel"), out, verify=True)
    assert out.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["out.onnx"]


# -- the command line --------------------------------------------------------------------------

def run_tool(*args, cwd):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "export_onnx.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=600, cwd=cwd)


def test_cli_verify_prints_the_error_per_output_and_writes(tmp_path):
    r = run_tool(FIXTURES / "paddle" / "ops_zoo.pdmodel", "-o", tmp_path / "z.onnx", "--verify", "--dynamic-batch",
                 cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "onnx.checker (full check): OK" in r.stdout and lines[-2] == "verify: OK"
    per_output = [line for line in lines if line.startswith("  ") and "max abs error" in line]
    assert len(per_output) == 8 and not any("FAIL" in line for line in per_output), r.stdout
    assert lines[-1].startswith(f"wrote: {tmp_path / 'z.onnx'}")
    onnx.checker.check_model(onnx.load(tmp_path / "z.onnx"), full_check=True)


def test_cli_recorded_inputs_and_a_pir_model_with_its_params(tmp_path):
    r = run_tool(FIXTURES / "pir" / "cnn_bn.json", FIXTURES / "pir" / "cnn_bn.pdiparams", "-o", tmp_path / "c.onnx",
                 "--verify", "--inputs", FIXTURES / "pir" / "cnn_bn.io.npz", "--opset", "18", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "verify (--inputs" in r.stdout and onnx.load(tmp_path / "c.onnx").opset_import[0].version == 18


def test_cli_untranslatable_model_exits_1_naming_the_ops_and_writes_nothing(tmp_path):
    r = run_tool(FIXTURES / "pir" / "losses_linalg.json", "-o", tmp_path / "x.onnx", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("error: cannot export"), r.stderr
    assert "no ONNX translation" in r.stderr and "cholesky" in r.stderr and "op created at" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "x.onnx").exists()


def test_cli_bad_command_lines_exit_2_and_bad_files_exit_1(tmp_path):
    r = run_tool(FIXTURES / "paddle" / "lenet.pdmodel", "-o", tmp_path / "l.onnx", "--opset", "11", cwd=tmp_path)
    assert r.returncode == 2 and "--opset 11: choose 13 to" in r.stderr, r.stderr
    r = run_tool(FIXTURES / "paddle" / "lenet.pdmodel", cwd=tmp_path)
    assert r.returncode == 2 and "-o" in r.stderr
    r = run_tool(tmp_path / "nothing.pdmodel", "-o", tmp_path / "l.onnx", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "no such model file" in r.stderr
    r = run_tool(FIXTURES / "paddle" / "lenet.pdmodel", "-o", tmp_path / "no" / "dir" / "l.onnx", cwd=tmp_path)
    assert r.returncode == 1 and "does not exist" in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "junk.pdmodel").write_bytes(b"\x00not a program")
    r = run_tool(tmp_path / "junk.pdmodel", "-o", tmp_path / "l.onnx", cwd=tmp_path)
    assert r.returncode == 1 and r.stderr.startswith("error: ") and "Traceback" not in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junk.pdmodel"]
