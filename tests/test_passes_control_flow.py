"""Inference passes on programs with control flow: they run on block 0, where a
conditional_block / while op reads and writes what its sub-blocks do, and every name a
sub-block uses is pinned (kept live, never renamed, removed or folded); the sub-blocks stay
as they are. Each pass alone, and the whole pipeline, on the control-flow fixtures
(PaddlePaddle-built and dy2static-exported) and on examples/decode.py's programs: optimized
outputs equal the unoptimized ones."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.executor.kernel_call import call_kernel
from inference_run import run
from keel.program.errors import ProgramError
from keel.program.passes import PASSES, PassOptions, optimize_inference

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "control_flow"
FIXTURE_MODELS = ["paddle_cond", "paddle_power", "paddle_rnn", "dy2static_if", "dy2static_while",
                  "dy2static_for_range", "dy2static_list_append"]
DECODE_MODELS = ["greedy", "beam"]
RTOL = 1e-5  # relative to each output's largest magnitude (a fused fc adds in another order)


def _load(prefix):
    scope = Scope()
    program, feeds, _ = pg.io.load_inference_model(prefix, Executor(), scope=scope)
    return program, {n: scope.get(n) for n, _, _ in pg.io.persistable_specs(program)}, feeds


def _fixture_cases(name):
    program, params, feeds = _load(FIXTURES / name)
    io = np.load(FIXTURES / f"{name}.io.npz")
    cases = sorted({key.split(":")[0][3:] for key in io.files if key.startswith("out")})
    return program, params, [{f: io[f"in{k}:{f}"] for f in feeds} for k in cases]


@pytest.fixture(scope="module")
def decode_dir(tmp_path_factory):
    """examples/decode.py's greedy and beam-search programs, saved as inference models."""
    spec = importlib.util.spec_from_file_location("decode_example", ROOT / "examples" / "decode.py")
    decode = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(decode)
    out = tmp_path_factory.mktemp("decode")
    for name, build in (("greedy", decode.greedy_program), ("beam", decode.beam_program)):
        main, _, start, *fetches = build()
        scope = Scope()
        for n, value in decode.make_weights().items():
            scope.set(n, value)
        pg.io.save_inference_model(str(out / name), [start], fetches, Executor(), program=main, scope=scope)
    return out


def _model(name, decode_dir):
    if name in DECODE_MODELS:
        program, params, _ = _load(decode_dir / name)
        return program, params, [{"start": np.array([[1], [5]], np.int64)}]
    return _fixture_cases(name)


def _sub_blocks(program):
    return [program.to_desc().blocks[i].SerializeToString() for i in range(1, program.num_blocks)]


def _assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        if w.dtype.kind in "fc" and w.size:
            scale = max(float(np.abs(w).max()), 1e-12)
            assert float(np.abs(g.astype(np.float64) - w).max()) / scale <= RTOL
        else:
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("pass_name", [p for p in PASSES if p != "convert_to_fp16"])
@pytest.mark.parametrize("name", FIXTURE_MODELS + DECODE_MODELS)
def test_each_pass_keeps_control_flow_outputs(name, pass_name, decode_dir):
    """One pass alone: same outputs as the unoptimized program on every recorded input; the
    sub-blocks are byte for byte what they were. (convert_to_fp16 refuses such a program:
    test_fp16_refuses_control_flow_with_its_reason.)"""
    program, params, feeds = _model(name, decode_dir)
    optimized, new_params, _ = PASSES[pass_name](program, params, PassOptions(evaluate=call_kernel))
    assert _sub_blocks(optimized) == _sub_blocks(program)
    for feed in feeds:
        _assert_same(run(optimized, new_params, feed), run(program, params, feed))


@pytest.mark.parametrize("name", FIXTURE_MODELS + DECODE_MODELS)
def test_the_whole_pipeline_keeps_control_flow_outputs(name, decode_dir):
    program, params, feeds = _model(name, decode_dir)
    optimized, new_params, report = optimize_inference(program, params, evaluate=call_kernel, fuse=True,
                                                       fuse_conv=True)
    assert not any(r.status.startswith("skipped (control flow") for r in report.records)
    assert optimized.num_blocks == program.num_blocks and _sub_blocks(optimized) == _sub_blocks(program)
    for feed in feeds:
        _assert_same(run(optimized, new_params, feed), run(program, params, feed))


def _mixed_program():
    """Block 0 holds a dead op, an fc pattern (mul + bias add + relu) and a foldable constant
    expression next to a while loop that reads an `assign`ed copy, a parameter and a folded
    value: the passes must change block 0 around the loop and leave what it uses alone."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 4], "float32")
        w = pg.create_parameter([4, 4], "float32", name="w")
        b = pg.create_parameter([4], "float32", name="b")
        loop_w = pg.create_parameter([4, 4], "float32", name="loop_w")
        dense = pg.relu(pg.matmul(x, w) + b)               # fc + relu
        copy = pg.assign(dense)                            # an identity the loop body reads
        doubled = pg.scale(pg.scale(b, 2.0), 0.5)          # constant: folds
        i = pg.fill_constant([1], "int64", 0)

        def body(i, h):
            return [i + 1, pg.tanh(pg.matmul(h, loop_w) + copy + doubled)]
        _, h = pg.static.nn.while_loop(lambda i, h: i < 3, body, [i, dense * 1.0])
    scope, exe = Scope(), Executor(seed=1)
    exe.run(startup, scope=scope)
    program = pg.io.inference_program(main, ["x"], [h.name])
    block = program.global_block()  # a dead op (inference_program prunes the builder's away)
    block.create_var("dead", [-1, 4], "float32")
    block.insert_op(1, "tanh", {"X": ["x"]}, {"Out": ["dead"]}, {})
    rng = np.random.default_rng(0)
    params = {n: rng.standard_normal(shape).astype(np.float32) * 0.5
              for n, _, shape in pg.io.persistable_specs(program)}
    return program, params


def test_passes_change_block_0_around_a_loop_and_keep_what_it_uses():
    program, params = _mixed_program()
    feed = {"x": np.random.default_rng(1).standard_normal((2, 4)).astype(np.float32)}
    optimized, new_params, report = optimize_inference(program, params, evaluate=call_kernel, fuse=True)
    assert report.changes("eliminate_dead_code").get("ops_removed") == 1
    assert report.changes("fuse_fc") == {"fc_fused": 1, "relu_fused": 1, "vars_dropped": 2}
    assert report.changes("fold_constants").get("ops_folded") == 1  # the inner scale; the loop reads the outer's
    types = [op.type for op in optimized.global_block().ops]
    assert "fc" in types and "tanh" not in types and "while" in types
    assert "assign" in types and types.count("scale") == 2  # the loop reads their outputs by name
    assert "loop_w" in new_params  # read only inside the loop: kept
    assert _sub_blocks(optimized) == _sub_blocks(program)
    _assert_same(run(optimized, new_params, feed), run(program, params, feed))


def test_fp16_refuses_control_flow_with_its_reason():
    program, params, _ = _fixture_cases("paddle_cond")
    with pytest.raises(ProgramError, match="fp16 conversion handles one-block programs.*sub-blocks"):
        optimize_inference(program, params, evaluate=call_kernel, fp16=True)
