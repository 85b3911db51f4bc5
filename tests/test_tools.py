"""Command-line tools."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "paddle"


def _run(*args):
    return subprocess.run([sys.executable, str(ROOT / "tools" / "inspect_model.py"), *map(str, args)],
                          capture_output=True, text=True, timeout=120)


def test_inspect_model_lists_program_feeds_fetches_and_params():
    r = _run(FIXTURES / "lenet.pdmodel")
    assert r.returncode == 0, r.stderr
    assert "conv2d(" in r.stdout and "0: x float32[-1, 1, 16, 16]" in r.stdout
    assert "  linear_0.w_0 float32[72, 10]\n" in r.stdout and "1,082 values" in r.stdout


def test_inspect_model_shows_each_parameters_dtype_and_shape(tmp_path):
    import keel.program as pg
    from keel.executor import Executor, Scope
    main, startup = pg.Program(), pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x = pg.data("x", [-1, 3], "float64")
        w = pg.create_parameter([3, 2], "float64", name="w64")
        k = pg.create_parameter([2], "int64", name="k", default_initializer=pg.initializer.Constant(1))
        h = pg.create_parameter([2], "float16", name="h")
        y = pg.matmul(x, w) + pg.cast(k, "float64") + pg.cast(h, "float64")
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    pg.io.save_inference_model(tmp_path / "m", [x], [y], exe, program=main, scope=scope)
    r = _run(tmp_path / "m.pdmodel")
    assert r.returncode == 0, r.stderr
    params = r.stdout.split("\nparameters (3, 10 values from ")[1].splitlines()[1:4]
    assert params == ["  h float16[2]", "  k int64[2]", "  w64 float64[3, 2]"]


def test_inspect_model_check_lists_every_problem(tmp_path):
    from keel.proto import pb
    desc = pb.ProgramDesc.FromString((FIXTURES / "mlp_fc.pdmodel").read_bytes())
    desc.blocks[0].ops[1].type = "mull"
    desc.blocks[0].ops[2].type = "frobnicate"
    bad = tmp_path / "bad.pdmodel"
    bad.write_bytes(desc.SerializeToString())
    r = _run(bad, "--check")
    assert r.returncode == 1
    assert "'mull' (did you mean mul" in r.stdout and "'frobnicate'" in r.stdout
    assert "2 problem(s)" in r.stdout
    assert _run(FIXTURES / "convbn_adam.train.pdmodel", "--check").returncode == 0


def test_inspect_model_check_suggests_forward_ops_for_forward_types(tmp_path):
    from keel.proto import pb
    desc = pb.ProgramDesc.FromString((FIXTURES / "lenet.pdmodel").read_bytes())
    pools = [op for op in desc.blocks[0].ops if op.type == "pool2d"]
    pools[0].type = "pool2d_fancy"
    pools[1].type = "pool2d_gradd"
    bad = tmp_path / "bad.pdmodel"
    bad.write_bytes(desc.SerializeToString())
    r = _run(bad, "--check")
    assert r.returncode == 1
    fancy = next(line for line in r.stdout.splitlines() if "'pool2d_fancy'" in line)
    assert "(did you mean pool2d" in fancy and "_grad" not in fancy   # not pool2d_grad
    assert "'pool2d_gradd' (did you mean pool2d_grad" in r.stdout     # a gradient type: gradient ops


def test_inspect_model_reports_unreadable_file(tmp_path):
    junk = tmp_path / "junk.pdmodel"
    junk.write_bytes(b"\xff\x00not a program")
    r = _run(junk)
    assert r.returncode == 1 and "junk.pdmodel" in r.stderr and "Traceback" not in r.stderr


def test_ops_doc_is_generated_and_up_to_date():
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_ops_doc.py"), "--check"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    text = (ROOT / "docs" / "ops.md").read_text()
    from keel import program  # noqa: F401
    from keel.program.ops import registry
    for op_type, opdef in registry.all_ops().items():
        if not opdef.grad_of and op_type not in ("feed", "fetch"):
            assert f"| `{op_type}` |" in text, op_type
