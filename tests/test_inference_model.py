"""save_inference_model / load_inference_model: PaddlePaddle's layout, both directions."""
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.proto import pb

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "paddle"
MODELS = ["mlp_fc", "mlp_linear", "lenet", "resblock_cnn", "transformer_encoder", "ops_zoo",
          "mobilenet_v2", "shufflenet_v2"]


def _desc(path) -> pb.ProgramDesc:
    d = pb.ProgramDesc()
    d.ParseFromString(Path(path).read_bytes())
    return d


def _without_debug_attrs(op: pb.OpDesc) -> pb.OpDesc:
    op = pb.OpDesc.FromString(op.SerializeToString())
    kept = [x for x in op.attrs if x.name not in ("op_callstack", "with_quant_attr")]
    del op.attrs[:]
    op.attrs.extend(kept)
    return op


@pytest.mark.parametrize("name", MODELS)
def test_paddle_model_saved_again_is_paddles_file(name, tmp_path):
    """Loading a PaddlePaddle inference model and saving it with our save_inference_model
    gives the same ops (slots, attributes, order), the same variables and a byte-identical
    parameter file. Only op_callstack/with_quant_attr differ: PaddlePaddle leaves them on
    feed/fetch and a few ops (range, pow, gather, unsqueeze2), we drop them everywhere."""
    exe, scope = Executor(), Scope()
    prog, feeds, fetches = pg.io.load_inference_model(FIXTURES / name, exe, scope=scope)
    pg.io.save_inference_model(tmp_path / "m", feeds, fetches, exe, program=prog, scope=scope)
    theirs, ours = _desc(FIXTURES / f"{name}.pdmodel"), _desc(tmp_path / "m.pdmodel")
    assert [op.type for op in theirs.blocks[0].ops] == [op.type for op in ours.blocks[0].ops]
    for a, b in zip(theirs.blocks[0].ops, ours.blocks[0].ops):
        assert _without_debug_attrs(a) == _without_debug_attrs(b), a.type
    our_vars = [v.name for v in ours.blocks[0].vars]
    assert our_vars[-2:] == ["feed", "fetch"] and our_vars[:-2] == sorted(our_vars[:-2])
    their_vars = {v.name: v for v in theirs.blocks[0].vars}
    for v in ours.blocks[0].vars:  # XShape vars PaddlePaddle keeps unreferenced are the only extra ones
        assert their_vars[v.name] == v
    params = FIXTURES / f"{name}.pdiparams"
    if params.exists():
        assert (tmp_path / "m.pdiparams").read_bytes() == params.read_bytes()
    else:
        assert not (tmp_path / "m.pdiparams").exists()
    assert ours.version.version == theirs.version.version


@pytest.mark.parametrize("name", MODELS)
def test_paddle_model_runs_and_matches_paddle(name):
    exe, scope = Executor(), Scope()
    prog, feeds, fetches = pg.io.load_inference_model(FIXTURES / name, exe, scope=scope)
    io = np.load(FIXTURES / f"{name}.io.npz")
    inputs = {f: io[f"in:{f}"] for f in feeds}
    outs = exe.run(prog, feed=inputs, fetch_list=fetches, scope=scope)
    for i, (var, got) in enumerate(zip(fetches, outs)):
        want = io[f"out:{i}"]
        if want.dtype.kind in "biu":
            np.testing.assert_array_equal(got, want)
            continue
        scale = max(float(np.abs(want).max()), 1e-6)
        assert np.abs(got - want).max() <= 1e-5 * scale, (name, var.name)


def _mlp(dropout=0.0):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 11
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 8])
        idx = pg.data("idx", [-1, 1], "int64")
        label = pg.data("label", [-1, 1], "int64")
        h = pg.nn.fc(x, 16, activation="relu")
        if dropout:
            h = pg.nn.dropout(h, dropout_prob=dropout)
        logits = pg.nn.fc(h, 4)
        probs = pg.softmax(logits)
        picked = pg.gather(probs, pg.reshape(idx, [-1]))
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
        pg.optimizer.Adam(0.01).minimize(loss)
    return main, startup, x, idx, probs, picked


def test_our_training_program_exports_a_clean_inference_model(tmp_path):
    main, startup, x, idx, probs, picked = _mlp(dropout=0.5)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    infer = pg.io.save_inference_model(tmp_path / "mlp", [x, idx], [probs, picked], exe, program=main, scope=scope)
    types = [op.type for op in infer.global_block().ops]
    assert types[:2] == ["feed", "feed"] and types[-2:] == ["fetch", "fetch"]
    assert [op.attr("col") for op in infer.global_block().ops[:2]] == [1, 0]  # prepended: highest first
    assert not any(t.endswith("_grad") or t in ("adam", "softmax_with_cross_entropy", "mean") for t in types)
    dropout = next(op for op in infer.global_block().ops if op.type == "dropout")
    assert dropout.attr("is_test") and dropout.output("Mask") == []
    params = {n for n, _, _ in pg.io.persistable_specs(infer)}
    assert params == {"fc_0.w_0", "fc_0.b_0", "fc_1.w_0", "fc_1.b_0"}  # no optimizer state, no LR
    # loads back and computes what the evaluation program computes
    prog, feeds, fetches = pg.io.load_inference_model(tmp_path / "mlp", exe, scope=Scope())
    assert feeds == ["x", "idx"] and [v.name for v in fetches] == [probs.name, picked.name]
    xv = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    iv = np.array([[0], [3], [1], [2], [0]])
    want = exe.run(main.clone(for_test=True), feed={"x": xv, "idx": iv}, fetch_list=[probs, picked], scope=scope)
    new_scope = Scope()
    prog, feeds, fetches = pg.io.load_inference_model(tmp_path / "mlp", exe, scope=new_scope)
    got = exe.run(prog, feed={"x": xv, "idx": iv}, fetch_list=fetches, scope=new_scope)
    for w, g in zip(want, got):
        np.testing.assert_array_equal(w, g)


def test_parameter_free_model_writes_no_params_file(tmp_path):
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 3])
        y = pg.relu(x) * 2.0
    (tmp_path / "m.pdiparams").write_bytes(b"stale")
    pg.io.save_inference_model(tmp_path / "m", [x], [y], Executor(), program=main, scope=Scope())
    assert (tmp_path / "m.pdmodel").exists() and not (tmp_path / "m.pdiparams").exists()
    prog, feeds, fetches = pg.io.load_inference_model(tmp_path / "m", Executor(), scope=Scope())
    out, = Executor().run(prog, feed={"x": np.array([[-1., 0.5, 2.]], np.float32)}, fetch_list=fetches,
                          scope=Scope())
    np.testing.assert_allclose(out, [[0., 1., 4.]])


def test_save_inference_model_errors_name_the_problem(tmp_path):
    main, startup, x, idx, probs, picked = _mlp()
    exe = Executor()
    with pytest.raises(pg.ProgramError, match="nope"):
        pg.io.save_inference_model(tmp_path / "m", [x], ["nope"], exe, program=main, scope=Scope())
    with pytest.raises(pg.ProgramError, match="idx"):  # picked needs idx, which is not fed
        pg.io.save_inference_model(tmp_path / "m", [x], [picked], exe, program=main, scope=Scope())
    with pytest.raises(pg.ProgramError, match="startup"):  # parameters never initialized
        pg.io.save_inference_model(tmp_path / "m", [x], [probs], exe, program=main, scope=Scope())
    assert not (tmp_path / "m.pdmodel").exists()
    with pytest.raises(pg.ProgramError, match="does not exist"):
        (tmp_path / "only.pdmodel").write_bytes((FIXTURES / "mlp_fc.pdmodel").read_bytes())
        pg.io.load_inference_model(tmp_path / "only", exe, scope=Scope())


def test_paddle_resnet18_runs_with_recipe_weights():
    """paddle.vision.models.resnet18 (exported by PaddlePaddle without its 45 MB of
    weights): filled from the shared recipe, it gives PaddlePaddle's outputs."""
    import sys
    sys.path.insert(0, str(FIXTURES))
    try:
        from recipe import recipe_params
    finally:
        sys.path.pop(0)
    program = pg.io.load_program(FIXTURES / "resnet18.pdmodel")
    block = program.global_block()
    ops = [(op.type, op.inputs) for op in block.ops]
    shapes = {name: shape for name, _, shape in pg.io.persistable_specs(program)}
    scope = Scope()
    for name, value in recipe_params(ops, shapes).items():
        scope.set(name, value)
    feeds = sorted((op for op in block.ops if op.type == "feed"), key=lambda op: op.attr("col"))
    fetches = sorted((op for op in block.ops if op.type == "fetch"), key=lambda op: op.attr("col"))
    io = np.load(FIXTURES / "resnet18.io.npz")
    got, = Executor().run(program, feed={op.output("Out")[0]: io[f"in:{op.output('Out')[0]}"] for op in feeds},
                          fetch_list=[fetches[0].input("X")[0]], scope=scope)
    want = io["out:0"]
    assert np.abs(got - want).max() <= 1e-5 * np.abs(want).max()
    assert sum(op.type == "conv2d" for op in block.ops) == 20
