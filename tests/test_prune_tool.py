"""tools/prune_for_inference.py: optimize a saved model, write it, verify it.

The tool runs as a subprocess, as a user runs it; each error case checks the exit status,
a single `error: ...` line naming the culprit, no traceback, and that nothing was written.
"""
import errno
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.program.passes import PASSES
from keel.proto import pb

ROOT = Path(__file__).resolve().parents[1]
TOOL = ROOT / "tools" / "prune_for_inference.py"
FIXTURES = ROOT / "tests" / "fixtures" / "paddle"
PASS_NAMES = list(PASSES)


def tool(*args):
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def assert_error(r, status, *culprits):
    """Exit `status`, one `error: ...` line on stderr that names every culprit, no traceback."""
    assert r.returncode == status, r.stdout + r.stderr
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
    for culprit in culprits:
        assert culprit in lines[0], (culprit, lines[0])
    return lines[0]


def files_under(path: Path) -> list[str]:
    return sorted(str(p.relative_to(path)) for p in path.rglob("*")) if path.exists() else []


def op_types(model_file) -> list[str]:
    return [op.type for op in pg.io.load_program(model_file).global_block().ops]


def op_totals(stdout: str) -> tuple[int, int]:
    """(before, after) from the report's `total` row of the op counts."""
    before, after = re.search(r"^  total +(\d+) +(\d+)$", stdout, re.M).groups()
    return int(before), int(after)


def param_nbytes(prefix) -> int:
    scope = Scope()
    program, _, _ = pg.io.load_inference_model(prefix, Executor(), scope=scope)
    return sum(scope.get(name).nbytes for name, _, _ in pg.io.persistable_specs(program))


def run_saved(prefix, inputs: dict) -> list[np.ndarray]:
    exe, scope = Executor(), Scope()
    program, feeds, fetches = pg.io.load_inference_model(prefix, exe, scope=scope)
    return exe.run(program, feed={f: inputs[f] for f in feeds}, fetch_list=fetches, scope=scope)


# -- what it writes ---------------------------------------------------------------------------

def test_fuse_fp16_verify_writes_a_smaller_model_that_loads_and_runs(tmp_path):
    out = tmp_path / "sub" / "resblock"
    r = tool(FIXTURES / "resblock_cnn", "--fuse", "--fp16", "--keep-io-types", "--verify", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fold_batch_norm" in r.stdout and "batch_norm_folded_into_conv 4" in r.stdout
    assert "verify: OK" in r.stdout and "tolerance 0.01" in r.stdout
    model, params = Path(f"{out}.pdmodel"), Path(f"{out}.pdiparams")
    assert files_under(out.parent) == ["resblock.pdiparams", "resblock.pdmodel"]  # no temporary files left
    assert params.stat().st_size < 0.55 * (FIXTURES / "resblock_cnn.pdiparams").stat().st_size

    exe, scope = Executor(), Scope()
    program, feeds, fetches = pg.io.load_inference_model(out, exe, scope=scope)
    types = [op.type for op in program.global_block().ops]
    assert "batch_norm" not in types and types[0] == "feed" and types[-1] == "fetch"
    assert any(scope.get(n).dtype == np.float16 for n, _, _ in pg.io.persistable_specs(program))
    assert program.global_block().var(feeds[0]).dtype == pb.VarType.FP32  # --keep-io-types
    io = np.load(FIXTURES / "resblock_cnn.io.npz")
    got, = exe.run(program, feed={f: io[f"in:{f}"] for f in feeds}, fetch_list=fetches, scope=scope)
    want = io["out:0"]
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max()
    # save_inference_model's layout: sorted variables, then feed and fetch
    desc = pb.ProgramDesc.FromString(model.read_bytes())
    names = [v.name for v in desc.blocks[0].vars]
    assert names[-2:] == ["feed", "fetch"] and names[:-2] == sorted(names[:-2])


def test_bf16_verify_writes_bfloat16_weights_that_load_and_run(tmp_path):
    from keel.program.io.tensor_file import read_all_records
    out = tmp_path / "lenet"
    r = tool(FIXTURES / "lenet", "--fuse", "--bf16", "--verify", "--inputs", FIXTURES / "lenet.io.npz", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^  convert_weights_to_bf16 +ops \d+ -> \d+: params_bf16 3, casts_inserted 3$", r.stdout, re.M)
    assert "tolerance 0.03" in r.stdout and "verify: OK" in r.stdout
    relative = float(re.search(r"relative (\S+) \(tolerance 0.03\)", r.stdout)[1])
    assert 0 < relative < 1e-2, relative  # rounded, and well inside the tolerance
    assert Path(f"{out}.pdiparams").stat().st_size < 0.55 * (FIXTURES / "lenet.pdiparams").stat().st_size
    codes = [record.dtype_code for record in read_all_records(f"{out}.pdiparams")]
    assert codes.count(pb.VarType.BF16) == 3 and set(codes) == {pb.VarType.BF16, pb.VarType.FP32}
    io = np.load(FIXTURES / "lenet.io.npz")
    got, = run_saved(out, {"x": io["in:x"]})
    assert got.dtype == np.float32 and np.abs(got - io["out:0"]).max() <= 3e-2 * np.abs(io["out:0"]).max()


def test_naming_the_bf16_pass_runs_it_without_the_flag(tmp_path):
    r = tool(FIXTURES / "mlp_fc", "--passes", "convert_weights_to_bf16", "--verify", "-o", tmp_path / "m")
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^  convert_weights_to_bf16 +ops 8 -> 10: params_bf16 2, casts_inserted 2$", r.stdout, re.M)
    assert re.search(r"^  fold_constants +not in --passes$", r.stdout, re.M)
    assert "tolerance 0.03" in r.stdout and "verify: OK" in r.stdout


@pytest.mark.parametrize("flags", [["--fp16", "--bf16"], ["--passes", "convert_to_fp16", "convert_weights_to_bf16"]])
def test_fp16_with_bf16_is_a_usage_error(tmp_path, flags):
    r = tool(FIXTURES / "mlp_fc", *flags, "-o", tmp_path / "m")
    assert_error(r, 2, "--fp16", "--bf16", "convert_to_fp16", "convert_weights_to_bf16")
    assert files_under(tmp_path) == []


def test_the_report_names_passes_rewrites_op_counts_parameter_bytes_and_files(tmp_path):
    out = tmp_path / "mlp"
    r = tool(FIXTURES / "mlp_fc", "--fuse", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^  fuse_fc +ops 8 -> 5: fc_fused 2, relu_fused 1", r.stdout, re.M), r.stdout
    assert re.search(r"^  convert_to_fp16 +skipped", r.stdout, re.M)
    assert re.search(r"^  convert_weights_to_bf16 +skipped \(bf16 not requested\)$", r.stdout, re.M)
    assert re.search(r"^  mul +2 +0$", r.stdout, re.M) and re.search(r"^  fc +0 +2$", r.stdout, re.M)
    assert op_totals(r.stdout) == (8, 5) == (len(op_types(FIXTURES / "mlp_fc.pdmodel")),
                                             len(op_types(f"{out}.pdmodel")))
    before, after = param_nbytes(FIXTURES / "mlp_fc"), param_nbytes(out)
    assert f"parameters: {before} bytes in 4 tensors -> {after} bytes in 4 tensors" in r.stdout
    for path in (f"{out}.pdmodel", f"{out}.pdiparams"):
        assert f"  {path} ({os.path.getsize(path)} bytes)" in r.stdout


def test_model_and_params_flags_read_the_same_model_as_the_prefix(tmp_path):
    a = tool(FIXTURES / "lenet", "--fuse", "-o", tmp_path / "a")
    b = tool("--model", FIXTURES / "lenet.pdmodel", "--params", FIXTURES / "lenet.pdiparams", "--fuse",
             "-o", tmp_path / "b")
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    for ext in (".pdmodel", ".pdiparams"):
        assert (tmp_path / f"a{ext}").read_bytes() == (tmp_path / f"b{ext}").read_bytes()


def test_a_parameter_free_model_needs_no_params_file(tmp_path):
    out = tmp_path / "zoo"
    r = tool("--model", FIXTURES / "ops_zoo.pdmodel", "--verify", "--inputs", FIXTURES / "ops_zoo.io.npz",
             "--disable-pass", "fold_constants", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verify: OK" in r.stdout and re.search(r"^  fold_constants +disabled$", r.stdout, re.M)
    assert files_under(tmp_path) == ["zoo.pdmodel"]  # no parameters, no .pdiparams (as in Paddle)
    io = np.load(FIXTURES / "ops_zoo.io.npz")
    got = run_saved(out, {k[3:]: io[k] for k in io.files if k.startswith("in:")})
    for i, value in enumerate(got):
        np.testing.assert_allclose(value, io[f"out:{i}"], rtol=1e-5, atol=1e-6)


def test_fetch_re_prunes_to_an_intermediate_output(tmp_path):
    out = tmp_path / "features"
    r = tool(FIXTURES / "resblock_cnn", "--fetch", "relu_1.tmp_0", "--fuse", "--verify", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fetches: relu_1.tmp_0" in r.stdout and "relu_1.tmp_0: max abs diff" in r.stdout
    exe, scope = Executor(), Scope()
    program, feeds, fetches = pg.io.load_inference_model(out, exe, scope=scope)
    assert feeds == ["x"] and [v.name for v in fetches] == ["relu_1.tmp_0"]
    types = [op.type for op in program.global_block().ops]
    assert types[0] == "feed" and types[-1] == "fetch" and types.count("conv2d") == 2
    assert not {"batch_norm", "pool2d", "matmul_v2"} & set(types)  # folded, or pruned away
    desc = pb.ProgramDesc.FromString(Path(f"{out}.pdmodel").read_bytes())
    names = [v.name for v in desc.blocks[0].vars]
    assert names[-2:] == ["feed", "fetch"] and names[:-2] == sorted(names[:-2])

    # the same values as the full model's intermediate
    x = np.load(FIXTURES / "resblock_cnn.io.npz")["in:x"]
    full, full_scope = Executor(), Scope()
    full_program, _, _ = pg.io.load_inference_model(FIXTURES / "resblock_cnn", full, scope=full_scope)
    want, = full.run(full_program, feed={"x": x}, fetch_list=["relu_1.tmp_0"], scope=full_scope)
    got, = exe.run(program, feed={"x": x}, fetch_list=fetches, scope=scope)
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()


def test_feed_re_prunes_from_an_intermediate_input(tmp_path):
    out = tmp_path / "head"
    r = tool(FIXTURES / "mlp_fc", "--feed", "fc_0.tmp_2", "--fuse", "--verify", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert op_types(f"{out}.pdmodel") == ["feed", "fc", "softmax", "fetch"]
    program = pg.io.load_program(f"{out}.pdmodel")
    assert "x" not in program.global_block().vars
    assert [n for n, _, _ in pg.io.persistable_specs(program)] == ["fc_1.b_0", "fc_1.w_0"]


def test_fp32_verify_reports_the_differences_and_disabled_passes(tmp_path):
    out = tmp_path / "enc"
    r = tool(FIXTURES / "transformer_encoder", "--fuse", "--verify", "--disable-pass", "fuse_fc",
             "--inputs", FIXTURES / "transformer_encoder.io.npz", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^  fuse_fc +disabled$", r.stdout, re.M)
    assert re.search(r"^  convert_to_fp16 +skipped", r.stdout, re.M)
    assert "tolerance 1e-05" in r.stdout and "verify: OK" in r.stdout
    types = set(op_types(f"{out}.pdmodel"))
    assert "fc" not in types and "dropout" not in types


def test_passes_runs_only_the_named_passes(tmp_path):
    out = tmp_path / "rb"
    r = tool(FIXTURES / "resblock_cnn", "--passes", "fold_batch_norm", "--verify", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert re.search(r"^  fold_batch_norm +ops \d+ -> \d+: batch_norm_folded_into_conv 4", r.stdout, re.M)
    for name in PASS_NAMES:
        if name != "fold_batch_norm":
            assert re.search(rf"^  {name} +not in --passes$", r.stdout, re.M), name
    types = op_types(f"{out}.pdmodel")
    assert "batch_norm" not in types and "fc" not in types and "matmul_v2" in types
    assert "tolerance 1e-05" in r.stdout and "verify: OK" in r.stdout


def test_keep_io_types_decides_the_dtype_of_the_feeds(tmp_path):
    for flag, dtype in (("--keep-io-types", pb.VarType.FP32), ("--no-keep-io-types", pb.VarType.FP16)):
        out = tmp_path / flag.strip("-")
        r = tool(FIXTURES / "mlp_fc", "--fp16", flag, "--verify", "-o", out)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "verify: OK" in r.stdout and "tolerance 0.01" in r.stdout
        block = pg.io.load_program(f"{out}.pdmodel").global_block()
        assert block.var("x").dtype == dtype, flag  # (softmax itself stays float32: fp16.DEFAULT_KEEP_FP32)


def test_verify_fails_above_the_tolerance_and_writes_nothing(tmp_path):
    inputs = tmp_path / "huge.npz"
    np.savez(inputs, **{"in:x": np.full((2, 16), 1e5, np.float32)})  # float16 overflows
    (tmp_path / "old.pdmodel").write_bytes(b"old model")
    r = tool(FIXTURES / "mlp_fc", "--fp16", "--verify", "--inputs", inputs, "-o", tmp_path / "old")
    assert_error(r, 1, "--verify", "softmax_0.tmp_0", "0.01")
    assert "softmax_0.tmp_0: max abs diff" in r.stdout and "FAIL" in r.stdout
    assert files_under(tmp_path) == ["huge.npz", "old.pdmodel"]
    assert (tmp_path / "old.pdmodel").read_bytes() == b"old model"


def test_help_documents_every_flag_and_has_an_example():
    r = tool("--help")
    assert r.returncode == 0
    for flag in ["--model", "--params", "--feed", "--fetch", "--fuse", "--fp16", "--bf16", "--keep-io-types",
                 "--no-keep-io-types", "--passes", "--disable-pass", "-o", "--out", "--verify", "--inputs",
                 "--seed"]:
        assert re.search(rf"(^|[ ,]){flag}\b", r.stdout, re.M), flag
    assert "examples:" in r.stdout and "tools/prune_for_inference.py out/digits --fuse" in r.stdout
    assert "1e-05" in r.stdout and "0.01" in r.stdout and "0.03" in r.stdout and "exit status" in r.stdout
    assert all(name in r.stdout for name in PASS_NAMES)


# -- errors -----------------------------------------------------------------------------------

def test_unknown_pass_names_are_an_error_listing_the_valid_ones(tmp_path):
    for flag in ("--disable-pass", "--passes"):
        r = tool(FIXTURES / "mlp_fc", flag, "no_such_pass", "-o", tmp_path / "out" / "m")
        line = assert_error(r, 2, flag, "no_such_pass")
        assert all(name in line for name in PASS_NAMES)
    assert files_under(tmp_path) == []


@pytest.mark.parametrize("flag, name, closest", [("--fetch", "softmax_0.tmp", "softmax_0.tmp_0"),
                                                 ("--feed", "fc_0.tmp2", "fc_0.tmp_2")])
def test_unknown_feed_or_fetch_names_the_closest_variables(tmp_path, flag, name, closest):
    r = tool(FIXTURES / "mlp_fc", flag, name, "-o", tmp_path / "out" / "m")
    line = assert_error(r, 2, flag, repr(name), closest)
    assert line.index(closest) > line.index("closest")
    assert files_under(tmp_path) == []


def test_targets_the_feeds_cannot_compute_are_an_error(tmp_path):
    r = tool(FIXTURES / "mlp_fc", "--feed", "fc_1.tmp_0", "--fetch", "fc_0.tmp_2", "-o", tmp_path / "m")
    assert_error(r, 2, "'x'", "fc_1.tmp_0")
    assert files_under(tmp_path) == []


def test_a_missing_model_file_is_an_error(tmp_path):
    r = tool(tmp_path / "nope", "-o", tmp_path / "out" / "m")
    assert_error(r, 1, str(tmp_path / "nope.pdmodel"))
    assert files_under(tmp_path) == []


def test_a_missing_params_file_is_an_error(tmp_path):
    shutil.copy(FIXTURES / "mlp_fc.pdmodel", tmp_path / "in.pdmodel")
    r = tool(tmp_path / "in", "-o", tmp_path / "out" / "m")
    assert_error(r, 1, str(tmp_path / "in.pdiparams"))
    r = tool("--model", tmp_path / "in.pdmodel", "-o", tmp_path / "out" / "m")
    assert_error(r, 1, str(tmp_path / "in.pdmodel"), "--params")
    assert files_under(tmp_path) == ["in.pdmodel"]


def test_a_corrupt_model_file_is_an_error(tmp_path):
    (tmp_path / "in.pdmodel").write_bytes((FIXTURES / "mlp_fc.pdmodel").read_bytes()[:100])
    shutil.copy(FIXTURES / "mlp_fc.pdiparams", tmp_path / "in.pdiparams")
    r = tool(tmp_path / "in", "-o", tmp_path / "out" / "m")
    assert_error(r, 1, str(tmp_path / "in.pdmodel"))
    assert files_under(tmp_path) == ["in.pdiparams", "in.pdmodel"]


def test_a_corrupt_params_file_is_an_error(tmp_path):
    shutil.copy(FIXTURES / "mlp_fc.pdmodel", tmp_path / "in.pdmodel")
    (tmp_path / "in.pdiparams").write_bytes((FIXTURES / "mlp_fc.pdiparams").read_bytes()[:500])
    r = tool(tmp_path / "in", "-o", tmp_path / "out" / "m")
    assert_error(r, 1, str(tmp_path / "in.pdiparams"), "fc_0.w_0")
    assert files_under(tmp_path) == ["in.pdiparams", "in.pdmodel"]


def test_unsupported_ops_are_listed_on_one_line(tmp_path):
    desc = pb.ProgramDesc.FromString((FIXTURES / "mlp_fc.pdmodel").read_bytes())
    desc.blocks[0].ops[3].type = "fancy_relu"
    desc.blocks[0].ops[6].type = "softmax_v9"
    (tmp_path / "in.pdmodel").write_bytes(desc.SerializeToString())
    shutil.copy(FIXTURES / "mlp_fc.pdiparams", tmp_path / "in.pdiparams")
    r = tool(tmp_path / "in", "-o", tmp_path / "out" / "m")
    assert_error(r, 1, str(tmp_path / "in.pdmodel"), "'fancy_relu'", "'softmax_v9'")
    assert files_under(tmp_path) == ["in.pdiparams", "in.pdmodel"]


def test_an_unwritable_output_directory_is_an_error(tmp_path):
    (tmp_path / "afile").write_text("a file, not a directory")
    r = tool(FIXTURES / "mlp_fc", "-o", tmp_path / "afile" / "sub" / "m")
    assert_error(r, 1, str(tmp_path / "afile" / "sub"))
    assert files_under(tmp_path) == ["afile"]


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="needs POSIX permissions, not root")
def test_a_read_only_output_directory_is_an_error(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o555)
    try:
        r = tool(FIXTURES / "mlp_fc", "-o", tmp_path / "ro" / "m")
        assert_error(r, 1, str(tmp_path / "ro"))
        assert files_under(tmp_path / "ro") == []
    finally:
        (tmp_path / "ro").chmod(0o755)


def test_overwriting_the_input_is_refused(tmp_path):
    shutil.copy(FIXTURES / "mlp_fc.pdmodel", tmp_path / "in.pdmodel")
    shutil.copy(FIXTURES / "mlp_fc.pdiparams", tmp_path / "in.pdiparams")
    r = tool(tmp_path / "in", "--fuse", "-o", tmp_path / "in")
    assert_error(r, 2, "-o", "overwrite")
    assert (tmp_path / "in.pdmodel").read_bytes() == (FIXTURES / "mlp_fc.pdmodel").read_bytes()


def test_a_prefix_and_model_together_or_neither_are_errors(tmp_path):
    assert_error(tool(FIXTURES / "mlp_fc", "--model", FIXTURES / "mlp_fc.pdmodel", "-o", tmp_path / "m"),
                 2, "--model")
    assert_error(tool("-o", tmp_path / "m"), 2, "--model")
    assert files_under(tmp_path) == []


def test_a_failed_program_write_leaves_the_previous_output_untouched(tmp_path, monkeypatch, capsys):
    """The parameters are written first; when the program write then fails, neither file
    is replaced and no temporary file remains (in process, to make the write fail)."""
    from keel.tools import prune_for_inference as prune
    (tmp_path / "m.pdmodel").write_bytes(b"old model")
    (tmp_path / "m.pdiparams").write_bytes(b"old params")

    def disk_full(path, data):
        raise OSError(errno.ENOSPC, "No space left on device", os.fspath(path))
    monkeypatch.setattr(prune, "atomic_write", disk_full)
    assert prune.main([str(FIXTURES / "mlp_fc"), "--fuse", "-o", str(tmp_path / "m")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert f"{tmp_path / 'm.pdmodel'}: No space left on device" in err
    assert files_under(tmp_path) == ["m.pdiparams", "m.pdmodel"]
    assert (tmp_path / "m.pdmodel").read_bytes() == b"old model"
    assert (tmp_path / "m.pdiparams").read_bytes() == b"old params"


# -- the done-when check ----------------------------------------------------------------

@pytest.mark.slow
def test_digits_fused_fp16_or_bf16_is_smaller_and_as_accurate(tmp_path):
    """Train the main example, prune it with --fuse --fp16 --verify and with --fuse --bf16
    --verify, and serve each result with the Predictor: fewer ops, parameters at most ~55%
    of the bytes, and the held-out accuracy within half a point of the original's."""
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "train_digits.py"), "--out", tmp_path / "digits"],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    original_accuracy = float(re.fullmatch(r"test accuracy: ([\d.]+)", r.stdout.strip().splitlines()[-1])[1])
    from keel.executor.inference import Config, create_predictor
    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from train_digits import load_data
    finally:
        sys.path.pop(0)
    _, (test_x, test_y) = load_data()

    for precision in ("--fp16", "--bf16"):
        deploy = tmp_path / f"deploy{precision.strip('-')}"
        r = tool(tmp_path / "digits", "--fuse", precision, "--verify", "-o", deploy)
        assert r.returncode == 0, r.stdout + r.stderr
        assert "verify: OK" in r.stdout
        assert re.search(r"^  fold_batch_norm +ops \d+ -> \d+: batch_norm_folded_into_conv 2", r.stdout, re.M)
        assert re.search(r"^  fuse_fc +ops \d+ -> \d+: fc_fused 2", r.stdout, re.M)
        before, after = op_totals(r.stdout)
        assert before == len(op_types(tmp_path / "digits.pdmodel"))
        assert after == len(op_types(f"{deploy}.pdmodel"))
        assert after < before  # with --bf16 too: the fusions remove more ops than its casts add
        if precision == "--bf16":
            assert re.search(r"^  convert_weights_to_bf16 +ops \d+ -> \d+: params_bf16 4, casts_inserted 4",
                             r.stdout, re.M)
        size = {name: Path(f"{prefix}.pdiparams").stat().st_size
                for name, prefix in (("digits", tmp_path / "digits"), ("deploy", deploy))}
        assert size["deploy"] <= 0.55 * size["digits"]

        predictor = create_predictor(Config(f"{deploy}.pdmodel", f"{deploy}.pdiparams"))
        probs, = predictor.run([test_x])
        accuracy = float((probs.argmax(1) == test_y[:, 0]).mean())
        print(f"{precision}: ops {before} -> {after}; params {size['digits']} -> {size['deploy']} bytes; "
              f"accuracy {original_accuracy:.4f} -> {accuracy:.4f}")
        assert abs(accuracy - original_accuracy) <= 0.005


@pytest.mark.paddle
@pytest.mark.parametrize("name", ["lenet", "resblock_cnn", "mobilenet_v2", "shufflenet_v2", "mlp_fc",
                                  "mlp_linear", "transformer_encoder"])
def test_optimized_float32_models_run_in_paddle(name, tmp_path):
    """The fused float32 result (fc ops, folded batch_norm, new parameters) is still a
    PaddlePaddle model: its static executor loads it and computes the recorded outputs.
    (Float16 models are not checked here: PaddlePaddle's CPU build has no float16 conv2d,
    fc or elementwise_add kernels.) Run with PaddlePaddle installed, e.g.
    FLAGS_enable_pir_api=0 PYTHONPATH=. $PADDLE_PYTHON -m pytest -q -m paddle
    tests/test_prune_tool.py"""
    os.environ.setdefault("FLAGS_enable_pir_api", "0")
    paddle = pytest.importorskip("paddle")
    r = tool(FIXTURES / name, "--fuse", "-o", tmp_path / name)
    assert r.returncode == 0, r.stdout + r.stderr
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(paddle.static.Scope()):
        program, feeds, fetches = paddle.static.load_inference_model(str(tmp_path / name), exe)
        io = np.load(FIXTURES / f"{name}.io.npz")
        got, = exe.run(program, feed={f: io[f"in:{f}"] for f in feeds}, fetch_list=fetches)
    want = io["out:0"]
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    assert "fc" in {op.type for op in program.global_block().ops}


def tool_with(prelude: str, *args):
    """The tool run after `prelude` (Python run first in the same process: a package made
    unimportable, a converter taken away)."""
    script = (f"import runpy, sys\n{prelude}\nsys.argv = {[str(TOOL), *map(str, args)]!r}\n"
              f"runpy.run_path({str(TOOL)!r}, run_name='__main__')")
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)


def test_verify_with_the_onnxruntime_engine_runs_the_result_in_onnx_runtime(tmp_path):
    pytest.importorskip("onnxruntime", reason="--engine onnxruntime needs onnx and onnxruntime")
    r = tool(FIXTURES / "mlp_linear", "--verify", "--engine", "onnxruntime", "-o", tmp_path / "out")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verify (random inputs, seed 0, the result run by ONNX Runtime):" in r.stdout
    assert re.search(r"linear_1\.tmp_1: max abs diff \S+, relative \S+ \(tolerance 1e-05\)\n", r.stdout)
    assert "verify: OK" in r.stdout and (tmp_path / "out.pdmodel").exists()


def test_verify_with_the_onnxruntime_engine_names_what_keeps_it_from_running(tmp_path):
    pytest.importorskip("onnxruntime", reason="--engine onnxruntime needs onnx and onnxruntime")
    taken = "from keel.program.onnx.registry import load_converters\ndel load_converters()['relu']"
    r = tool_with(taken, FIXTURES / "mlp_linear", "--verify", "--engine", "onnxruntime", "-o", tmp_path / "out")
    assert_error(r, 1, "--engine onnxruntime: relu: op #", "Keel has no ONNX translation")
    missing = "sys.modules['onnxruntime'] = None"
    r = tool_with(missing, FIXTURES / "mlp_linear", "--verify", "--engine", "onnxruntime", "-o", tmp_path / "out")
    assert_error(r, 1, "--engine onnxruntime: the onnxruntime package is not installed (pip install onnx "
                    "onnxruntime, or pip install -e \".[onnx]\" in the Keel checkout)")
    assert files_under(tmp_path) == []
