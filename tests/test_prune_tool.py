"""tools/prune_for_inference.py: optimize a saved model, write it, verify it."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import program as pg
from executor import Executor, Scope
from proto import pb

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "paddle"


def tool(*args):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "prune_for_inference.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_fuse_fp16_verify_writes_a_smaller_model_that_loads_and_runs(tmp_path):
    out = tmp_path / "sub" / "resblock"
    r = tool(FIXTURES / "resblock_cnn", "--fuse", "--fp16", "--keep-io-types", "--verify", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fold_batch_norm" in r.stdout and "batch_norm_folded_into_conv 4" in r.stdout
    assert "verify: OK" in r.stdout and "tolerance 0.01" in r.stdout
    model, params = Path(f"{out}.pdmodel"), Path(f"{out}.pdiparams")
    assert model.exists() and params.exists()
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".tmp")]  # atomic writes
    assert params.stat().st_size < 0.55 * (FIXTURES / "resblock_cnn.pdiparams").stat().st_size

    exe, scope = Executor(), Scope()
    program, feeds, fetches = pg.io.load_inference_model(out, exe, scope=scope)
    types = [op.type for op in program.global_block().ops]
    assert "batch_norm" not in types and types[0] == "feed" and types[-1] == "fetch"
    assert any(scope.get(n).dtype == np.float16 for n, _, _ in pg.io.persistable_specs(program))
    io = np.load(FIXTURES / "resblock_cnn.io.npz")
    got, = exe.run(program, feed={f: io[f"in:{f}"] for f in feeds}, fetch_list=fetches, scope=scope)
    want = io["out:0"]
    assert got.dtype == np.float32 and got.shape == want.shape
    assert np.abs(got - want).max() <= 1e-2 * np.abs(want).max()
    # save_inference_model's layout: sorted variables, then feed and fetch
    desc = pb.ProgramDesc.FromString(model.read_bytes())
    names = [v.name for v in desc.blocks[0].vars]
    assert names[-2:] == ["feed", "fetch"] and names[:-2] == sorted(names[:-2])


def test_fp32_verify_reports_the_differences_and_disabled_passes(tmp_path):
    out = tmp_path / "enc"
    r = tool(FIXTURES / "transformer_encoder", "--fuse", "--verify", "--disable-pass", "fuse_fc",
             "--inputs", FIXTURES / "transformer_encoder.io.npz", "-o", out)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fuse_fc              disabled" in r.stdout
    assert "convert_to_fp16      skipped" in r.stdout
    assert "tolerance 1e-05" in r.stdout and "verify: OK" in r.stdout
    program = pg.io.load_program(f"{out}.pdmodel")
    types = {op.type for op in program.global_block().ops}
    assert "fc" not in types and "dropout" not in types


def test_unknown_pass_name_is_an_error(tmp_path):
    r = tool(FIXTURES / "mlp_fc", "--disable-pass", "no_such_pass", "-o", tmp_path / "m")
    assert r.returncode == 1
    assert "no_such_pass" in r.stderr and "fuse_fc" in r.stderr
    assert not (tmp_path / "m.pdmodel").exists()


@pytest.mark.paddle
@pytest.mark.parametrize("name", ["lenet", "resblock_cnn", "mobilenet_v2", "mlp_fc", "transformer_encoder"])
def test_optimized_float32_models_run_in_paddle(name, tmp_path):
    """The fused float32 result (fc ops, folded batch_norm, new parameters) is still a
    PaddlePaddle model: its static executor loads it and computes the recorded outputs.
    (Float16 models are not checked here: PaddlePaddle's CPU build has no float16 conv2d,
    fc or elementwise_add kernels.) Run with PaddlePaddle installed, e.g.
    FLAGS_enable_pir_api=0 PYTHONPATH=. /work/paddle-venv/bin/python -m pytest -q -m paddle
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
