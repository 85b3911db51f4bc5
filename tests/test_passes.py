"""Inference passes (program/passes): each pass on small Keel programs and on PaddlePaddle's
models; outputs before and after agree, op counts change as expected, passes can be
disabled by name, and every result verifies."""
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from inference_run import run
from keel.executor import Executor, Scope
from keel.executor.kernel_call import call_kernel
from keel.program.passes import PASSES, PassError, PassOptions, optimize_inference
from keel.program.passes.bf16 import WEIGHT_SLOTS
from keel.program.passes.fp16 import FP16_OPS
from keel.proto import pb

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "paddle"
MODELS = ["lenet", "resblock_cnn", "mobilenet_v2", "mlp_fc", "mlp_linear", "transformer_encoder"]
FP32_RTOL = 1e-5   # relative to each output's largest magnitude
FP16_RTOL = 1e-2   # float16 keeps 11 bits: ~5e-4 per rounding; these models stay below 2e-3


# -- helpers ------------------------------------------------------------------------------


def rel_diff(got, want) -> float:
    want = np.asarray(want, np.float64)
    return float(np.abs(np.asarray(got, np.float64) - want).max() / max(np.abs(want).max(), 1e-12))


def assert_same_outputs(got, want, rtol):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        assert rel_diff(g, w) <= rtol, rel_diff(g, w)


def op_types(program) -> Counter:
    return Counter(op.type for op in program.global_block().ops)


def load_fixture(name):
    scope = Scope()
    program, feeds, fetches = pg.io.load_inference_model(FIXTURES / name, Executor(), scope=scope)
    params = {n: scope.get(n) for n, _, _ in pg.io.persistable_specs(program)}
    io = np.load(FIXTURES / f"{name}.io.npz")
    feed = {f: io[f"in:{f}"] for f in feeds}
    expected = [io[f"out:{i}"] for i in range(len(fetches))]
    return program, params, feed, expected


def optimize(program, params, **kw):
    kw.setdefault("evaluate", call_kernel)
    return optimize_inference(program, params, **kw)


def build(fn, feed_names, seed=0):
    """Build a model with Keel's layers (`fn` returns the fetch targets), initialize it, give
    every parameter a random non-trivial value, and return its inference program with the
    parameters."""
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = seed
    with pg.program_guard(main, startup), pg.unique_name.guard():
        fetches = fn(main.global_block())
    scope, exe = Scope(), Executor()
    exe.run(startup, scope=scope)
    infer = pg.io.inference_program(main, feed_names, [v.name if hasattr(v, "name") else v for v in fetches])
    rng = np.random.default_rng(seed)
    params = {}
    for name, _, shape in pg.io.persistable_specs(infer):
        value = rng.uniform(0.5, 1.5, shape) if "w_2" in name else rng.standard_normal(shape)
        params[name] = value.astype(np.float32)  # w_2: a batch_norm variance, kept positive
    return infer, params


# -- the registry and the driver -------------------------------------------------------------
def test_passes_run_in_the_documented_order_and_unknown_names_are_refused():
    assert list(PASSES) == ["eliminate_dead_code", "remove_identity", "fold_constants",
                            "fold_batch_norm", "fuse_conv_bias_activation", "fuse_fc",
                            "fuse_elementwise_activation",
                            "convert_to_fp16", "convert_weights_to_bf16", "column_major_weights"]
    for p in PASSES.values():
        assert "Matches" in p.doc and "afe" in p.doc  # what it matches, and why it is safe
    program, params, _, _ = load_fixture("mlp_fc")
    with pytest.raises(ValueError, match="fuse_fx"):
        optimize(program, params, disabled=["fuse_fx"])


def test_a_pass_called_alone_leaves_its_inputs_untouched():
    program, params, feed, expected = load_fixture("lenet")
    before, names = program.serialize_to_string(), set(params)
    new, new_params, changes = PASSES["fold_constants"](program, params, pg_options(call_kernel))
    assert program.serialize_to_string() == before and set(params) == names
    assert changes["ops_folded"] == 2  # the two conv biases' reshape2 to [1, C, 1, 1]
    assert op_types(new)["reshape2"] == 0
    assert_same_outputs(run(new, new_params, feed), expected, FP32_RTOL)


def pg_options(evaluate):
    return PassOptions(evaluate=evaluate)


# -- PaddlePaddle's models: the whole pipeline -------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_paddle_models_optimized_give_paddles_outputs(name):
    program, params, feed, expected = load_fixture(name)
    new, new_params, report = optimize(program, params)
    new.verify()
    assert_same_outputs(run(new, new_params, feed), expected, FP32_RTOL)
    types = op_types(new)
    assert not {"batch_norm", "dropout", "mul"} & set(types)
    assert report["fuse_fc"].changes["fc_fused"] == types["fc"] >= 1
    assert sum(types.values()) < sum(op_types(program).values()) or name == "mobilenet_v2"


@pytest.mark.parametrize("name, convs, bns", [("lenet", 2, 1), ("resblock_cnn", 4, 4), ("mobilenet_v2", 52, 52)])
def test_batch_norm_is_folded_into_the_convolutions(name, convs, bns):
    program, params, feed, expected = load_fixture(name)
    assert op_types(program)["batch_norm"] == bns
    new, new_params, report = optimize(program, params, disabled=["fuse_fc"])
    types = op_types(new)
    assert types["batch_norm"] == 0
    assert types["conv2d"] + types["depthwise_conv2d"] == convs
    assert report.changes("fold_batch_norm")["batch_norm_folded_into_conv"] == bns
    assert_same_outputs(run(new, new_params, feed), expected, FP32_RTOL)
    # the running statistics and scales are gone from the parameters
    assert len(new_params) < len(params) - 2 * bns


def test_disabling_a_pass_by_name_keeps_what_it_would_change():
    program, params, feed, expected = load_fixture("lenet")
    new, new_params, report = optimize(program, params, disabled=["fold_batch_norm", "fuse_fc"])
    assert report["fold_batch_norm"].status == "disabled" and report["fuse_fc"].status == "disabled"
    assert op_types(new)["batch_norm"] == 1 and op_types(new)["fc"] == 0
    assert_same_outputs(run(new, new_params, feed), expected, FP32_RTOL)
    # fusion off as a whole, and constant folding without an evaluate callable
    new, _, report = optimize_inference(program, params, fuse=False)
    assert report["fold_constants"].status.startswith("skipped")
    assert report["fold_batch_norm"].status.startswith("skipped")
    assert op_types(new)["reshape2"] == 2 and op_types(new)["batch_norm"] == 1


def test_fc_fusion_on_paddle_mlps():
    for name in ("mlp_fc", "mlp_linear"):
        program, params, feed, expected = load_fixture(name)
        new, new_params, report = optimize(program, params)
        fcs = [op for op in new.global_block().ops if op.type == "fc"]
        assert [op.attr("activation_type") for op in fcs] == ["relu", ""]
        assert [op.attr("in_num_col_dims") for op in fcs] == [1, 1]
        assert report.changes("fuse_fc") == {"fc_fused": 2, "relu_fused": 1, "vars_dropped": 3}
        assert not {"mul", "matmul_v2", "elementwise_add", "relu"} & set(op_types(new))
        assert_same_outputs(run(new, new_params, feed), expected, FP32_RTOL)


def test_transformer_dropouts_constants_and_projections():
    program, params, feed, expected = load_fixture("transformer_encoder")
    new, new_params, report = optimize(program, params)
    assert report.changes("remove_identity")["dropout_removed"] == 1       # upscale_in_train
    assert report.changes("remove_identity")["dropout_to_scale"] == 1      # downgrade_in_infer: x 0.9
    # the position ids (range of three fill_constants) and their embedding are constants now
    assert report.changes("fold_constants")["ops_folded"] == 2
    assert report.changes("fold_constants")["generators_removed"] == 3
    types = op_types(new)
    assert types["fc"] == 7 and types["matmul_v2"] == 2  # attention's products have no constant weight
    assert types["lookup_table_v2"] == 1 and not {"range", "fill_constant", "dropout"} & set(types)
    scales = [op.attr("scale") for op in new.global_block().ops if op.type == "scale"]
    assert np.float32(0.9) in np.float32(scales)
    assert_same_outputs(run(new, new_params, feed), expected, FP32_RTOL)


# -- float16 -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_fp16_keeps_io_float32_and_stays_within_tolerance(name):
    program, params, feed, expected = load_fixture(name)
    new, new_params, report = optimize(program, params, fp16=True)
    new.verify()
    got = run(new, new_params, feed)
    assert_same_outputs(got, expected, FP16_RTOL)
    worst = max(rel_diff(g, w) for g, w in zip(got, expected))
    assert 0 < worst < 2e-3, worst  # float16 did happen, and stayed well inside the tolerance
    assert report.params_bytes_after < 0.55 * report.params_bytes_before
    block = new.global_block()
    halves = [n for n, v in new_params.items() if v.dtype == np.float16]
    assert halves and all(block.var(n).dtype == pb.VarType.FP16 for n in halves)
    kept = {op.type for op in block.ops if op.type in ("softmax", "layer_norm", "reduce_mean")
            for n in op.input_arg_names if block.var(n).dtype == pb.VarType.FP32}
    assert kept == {t for t in ("softmax", "layer_norm", "reduce_mean") if op_types(new)[t]}
    before = program.global_block()
    for op in block.ops:
        if op.type in ("feed", "fetch"):
            target = op.output("Out")[0] if op.type == "feed" else op.input("X")[0]
            assert block.var(target).dtype == before.var(target).dtype  # float32 (int64 ids)


def test_fp16_without_keep_io_types_declares_half_feeds_and_fetches():
    program, params, feed, expected = load_fixture("resblock_cnn")
    new, new_params, _ = optimize(program, params, fp16=True, keep_io_types=False)
    assert new.global_block().var("x").dtype == pb.VarType.FP16
    got = run(new, new_params, {k: v.astype(np.float16) for k, v in feed.items()})
    assert got[0].dtype == np.float16
    assert rel_diff(got[0], expected[0]) <= FP16_RTOL


def test_fp16_keep_list_is_overridable():
    program, params, feed, expected = load_fixture("lenet")
    new, new_params, report = optimize(program, params, fp16=True, keep_fp32={"conv2d", "fc"})
    block = new.global_block()
    for op in block.ops:
        if op.type in ("conv2d", "fc"):
            assert all(block.var(n).dtype == pb.VarType.FP32 for n in op.input_arg_names)
    assert report.changes("convert_to_fp16").get("ops_fp16", 0) == 0  # nothing starts float16
    assert_same_outputs(run(new, new_params, feed), expected, FP32_RTOL)


# -- bfloat16 weights ---------------------------------------------------------------------------
BF16_RTOL = 3e-2   # the tool's: bfloat16 keeps 8 bits (<= 2**-8 rounding per weight); these stay below 1e-2


def widen(bits):
    """bfloat16 bits -> float32 by the cast kernel (checked bit by bit in test_kernels_math)."""
    return call_kernel("cast", {"X": bits}, {"in_dtype": pb.VarType.BF16, "out_dtype": pb.VarType.FP32})["Out"]


def bf16_mlp(block):
    x = pg.data("x", [-1, 16])
    ids = pg.data("ids", [-1, 4], "int64")
    h = x + pg.flatten(pg.nn.embedding(ids, [50, 4]))            # lookup_table_v2, table 50 x 4
    h = pg.nn.layer_norm(pg.nn.fc(h, 48, activation="relu"))     # mul + bias add + relu, layer_norm
    logits = pg.nn.fc(h, 40)
    return [logits, pg.softmax(logits)]  # (softmax alone, saturated, would hide the rounding)


def bf16_convnet(block):
    x = pg.data("x", [-1, 3, 8, 8])
    h = pg.nn.batch_norm(pg.nn.conv2d(x, 16, 3, padding=1), act="relu")   # with a bias
    h = pg.nn.conv2d(h, 16, 3, groups=16, bias_attr=False)                 # depthwise
    h = pg.flatten(pg.nn.pool2d(h, 2, "max", 2))
    return [pg.nn.fc(h, 10)]


def bf16_feed(program, seed=7):
    rng = np.random.default_rng(seed)
    block = program.global_block()
    feed = {}
    for op in block.ops:
        if op.type == "feed":
            name = op.output("Out")[0]
            shape = [3 if d < 0 else d for d in block.var(name).shape]
            feed[name] = (rng.integers(0, 50, shape) if block.var(name).dtype == pb.VarType.INT64
                          else rng.standard_normal(shape).astype(np.float32))
    return feed


def weights_read_by(program, slots):
    """The parameters read in these (op type, slot) pairs."""
    return {n for op in program.global_block().ops for t, s in slots if op.type == t for n in op.input(s)}


def assert_weights_stored_as_bf16(before, params, after, new_params, weights):
    """Exactly `weights` became bfloat16 bits (within 2**-8 of their value), declared BF16,
    each read through one cast to float32 placed before its first reader; every other
    parameter, variable dtype and op is as it was."""
    block, old_block = after.global_block(), before.global_block()
    casts = {}
    for name in weights:
        assert new_params[name].dtype == np.uint16 and block.var(name).dtype == pb.VarType.BF16, name
        value, rounded = params[name], widen(new_params[name])
        assert np.all(np.abs(rounded - value) <= 2.0 ** -8 * np.abs(value)) and np.any(rounded != value), name
        (cast,) = [op for op in block.ops if name in op.input_arg_names]
        assert cast.type == "cast" and cast.input("X") == [name], name
        assert (cast.attr("in_dtype"), cast.attr("out_dtype")) == (pb.VarType.BF16, pb.VarType.FP32)
        casts[name] = cast
    for name, value in params.items():
        if name not in weights:
            assert new_params[name] is value and block.var(name).dtype == pb.VarType.FP32, name
    named = {n for op in old_block.ops for n in op.input_arg_names + op.output_arg_names}
    for name in named - set(weights):
        assert block.var(name).dtype == old_block.var(name).dtype, name  # activations stay float32
    wide = {name: cast.output("Out")[0] for name, cast in casts.items()}
    ops = [op for op in block.ops if op not in casts.values()]
    assert len(ops) == len(old_block.ops)
    for old, op in zip(old_block.ops, ops):
        assert op.type == old.type and op.outputs == old.outputs
        assert op.inputs == {s: [wide.get(n, n) for n in names] for s, names in old.inputs.items()}
    for name, cast in casts.items():
        first = min(block.ops.index(op) for op in block.ops if wide[name] in op.input_arg_names)
        between = block.ops[block.ops.index(cast) + 1:first]
        assert all(op.type == "cast" for op in between), name  # right before its first reader


def test_bf16_stores_mlp_weights_and_keeps_the_rest_float32():
    program, params = build(bf16_mlp, ["x", "ids"])
    feed = bf16_feed(program)
    expected = run(program, params, feed)
    weights = weights_read_by(program, [("mul", "Y"), ("lookup_table_v2", "W")])
    assert len(weights) == 3  # two fc weights and the embedding table; biases and layer_norm stay
    new, new_params, changes = PASSES["convert_weights_to_bf16"](program, params, pg_options(call_kernel))
    new.verify()
    changes.pop("vars_dropped")  # flatten's XShape, which inference_program leaves unused
    assert changes == {"params_bf16": 3, "casts_inserted": 3}
    assert_weights_stored_as_bf16(program, params, new, new_params, weights)
    got = run(new, new_params, feed)
    worst = max(rel_diff(g, w) for g, w in zip(got, expected))
    assert 0 < worst <= BF16_RTOL, f"max relative difference {worst:.3g}"
    assert_same_outputs(got, expected, BF16_RTOL)


@pytest.mark.parametrize("fuse", [False, True])
def test_bf16_stores_conv_filters_and_fc_weights_with_the_driver(fuse):
    program, params = build(bf16_convnet, ["x"])
    feed = bf16_feed(program)
    expected = run(program, params, feed)
    new, new_params, report = optimize(program, params, bf16=True, fuse=fuse)
    new.verify()
    assert report.changes("convert_weights_to_bf16") == {"params_bf16": 3, "casts_inserted": 3}
    block = new.global_block()
    halves = {n for n, v in new_params.items() if v.dtype == np.uint16}
    casts = {op.output("Out")[0]: op.input("X")[0] for op in block.ops if op.type == "cast"}
    assert set(casts.values()) == halves and all(block.var(n).dtype == pb.VarType.BF16 for n in halves)
    read_as = {(op.type, slot) for op in block.ops for slot, names in op.inputs.items() if set(names) & set(casts)}
    assert read_as == {("conv2d", "Filter"), ("depthwise_conv2d", "Filter"), ("fc", "W") if fuse else ("mul", "Y")}
    floats = {n for n, v in new_params.items() if v.dtype == np.float32}
    assert all(block.var(n).dtype == pb.VarType.FP32 for n in floats)
    if not fuse:  # batch_norm's scale, shift and statistics and the conv bias: untouched
        assert_weights_stored_as_bf16(program, params, new, new_params, halves)
        assert {n for n in params if n.startswith(("batch_norm", "conv2d_0.b"))} <= floats
    else:  # folded into the first conv; the fused fc's Bias stays float32
        assert op_types(new)["batch_norm"] == 0
        assert {n for op in block.ops if op.type == "fc" for n in op.input("Bias")} <= floats
    assert op_types(new)["cast"] == 3
    assert report.params_bytes_after < 0.55 * report.params_bytes_before
    got = run(new, new_params, feed)
    worst = max(rel_diff(g, w) for g, w in zip(got, expected))
    assert 0 < worst <= BF16_RTOL, f"max relative difference {worst:.3g}"


def test_bf16_leaves_weights_that_are_fetched_kept_or_read_otherwise():
    def model(block):
        x = pg.data("x", [-1, 4])
        shared = block.create_parameter("shared", [4, 4])
        plain = block.create_parameter("plain", [4, 4])
        fetched = block.create_parameter("fetched", [4, 4])
        y = pg.matmul(x, shared) + shared             # also read by elementwise_add
        y = pg.matmul(y, plain) + pg.matmul(y, fetched)
        return [y, fetched]

    program, params = build(model, ["x"])
    new, new_params, changes = PASSES["convert_weights_to_bf16"](program, params, pg_options(call_kernel))
    assert changes == {"params_bf16": 1, "casts_inserted": 1} and new_params["plain"].dtype == np.uint16
    assert all(new_params[n] is params[n] for n in ("shared", "fetched"))
    for keep, fp16_ops in ((frozenset({"matmul_v2"}), None), (None, frozenset({"conv2d"}))):
        options = PassOptions(evaluate=call_kernel, keep_fp32=keep, fp16_ops=fp16_ops)
        _, kept, changes = PASSES["convert_weights_to_bf16"](program, params, options)
        assert changes == {} and all(v.dtype == np.float32 for v in kept.values())


def test_bf16_requests_are_checked_and_off_by_default():
    assert set(WEIGHT_SLOTS) == FP16_OPS  # the weight slots of every op type the pass reads
    program, params = build(bf16_mlp, ["x", "ids"])
    _, _, report = optimize(program, params)
    assert report["convert_weights_to_bf16"].status == "skipped (bf16 not requested)"
    with pytest.raises(ValueError, match="fp16=True and bf16=True"):
        optimize(program, params, fp16=True, bf16=True)
    with pytest.raises(ValueError, match="needs evaluate"):
        optimize_inference(program, params, bf16=True)


def test_bf16_weights_save_as_bf16_records_and_load_back(tmp_path):
    from keel.program.io.tensor_file import combined_order, read_all_records
    program, params = build(bf16_convnet, ["x"])
    feed = bf16_feed(program)
    new, new_params, _ = optimize(program, params, bf16=True)
    want = run(new, new_params, feed)
    for prefix, prog, values in (("fp32", program, params), ("bf16", new, new_params)):
        pg.io.save_params(prog, values, tmp_path / f"{prefix}.pdiparams")
        pg.io.save_program(prog, tmp_path / f"{prefix}.pdmodel")
    size = {p: (tmp_path / f"{p}.pdiparams").stat().st_size for p in ("fp32", "bf16")}
    assert size["bf16"] < 0.55 * size["fp32"]
    records = dict(zip(combined_order(new_params), read_all_records(tmp_path / "bf16.pdiparams")))
    for name, record in records.items():
        declared = new.global_block().var(name).dtype
        assert record.dtype_code == declared in (pb.VarType.BF16, pb.VarType.FP32), name
        np.testing.assert_array_equal(record.array, new_params[name])
    assert sum(r.dtype_code == pb.VarType.BF16 for r in records.values()) == 3
    scope, exe = Scope(), Executor()
    loaded, feeds, fetches = pg.io.load_inference_model(tmp_path / "bf16", exe, scope=scope)
    for name in new_params:
        assert scope.get(name).dtype == new_params[name].dtype
        np.testing.assert_array_equal(scope.get(name), new_params[name])
    got = exe.run(loaded, feed={f: feed[f] for f in feeds}, fetch_list=fetches, scope=scope)
    assert_same_outputs(got, want, 0.0)


def test_constant_folding_turns_bf16_casts_into_float32_weights_at_any_size():
    """The cast of a bfloat16 weight folds into a float32 parameter of the same values,
    also above fold_max_bytes (it adds no elements), while an expand above it stays."""
    def model(block):
        x = pg.data("x", [-1, 16])
        h = pg.nn.fc(x, 8)
        return [h + pg.expand(block.create_parameter("row", [1, 8]), [4, 8])]

    program, params = build(model, ["x"])
    feed = {"x": np.random.default_rng(3).standard_normal((4, 16)).astype(np.float32)}
    bf16, bf16_params, _ = optimize(program, params, bf16=True, fuse=False, disabled=["fold_constants"])
    assert op_types(bf16)["cast"] == 1 and op_types(bf16)["expand_v2"] == 1
    want = run(bf16, bf16_params, feed)
    options = PassOptions(evaluate=call_kernel, fold_max_bytes=16)  # smaller than the weight and the expand
    new, new_params, changes = PASSES["fold_constants"](bf16, bf16_params, options)
    assert changes["ops_folded"] == 1
    assert op_types(new)["cast"] == 0 and op_types(new)["expand_v2"] == 1
    (fc_w,) = [n for n, v in bf16_params.items() if v.dtype == np.uint16]
    (folded,) = [op.input("Y")[0] for op in new.global_block().ops if op.type == "mul"]
    assert new_params[folded].dtype == np.float32 and new.global_block().var(folded).dtype == pb.VarType.FP32
    np.testing.assert_array_equal(new_params[folded], widen(bf16_params[fc_w]))
    assert_same_outputs(run(new, new_params, feed), want, 0.0)


# -- small Keel programs, one pass at a time -----------------------------------------------------
def test_dead_code_is_removed_with_its_parameters():
    def model(block):
        x = pg.data("x", [-1, 4])
        y = pg.nn.fc(x, 3)
        pg.nn.fc(x, 5)  # nobody fetches this branch
        return [y]

    infer, params = build(model, ["x"])
    # inference_program already prunes; graft a dead op back in to have something to remove
    block = infer.global_block()
    dead = block.create_var("dead_out", [-1, 4])
    block.insert_op(1, "relu", {"X": ["x"]}, {"Out": [dead]})
    new, new_params, changes = PASSES["eliminate_dead_code"](infer, params)
    assert changes == {"ops_removed": 1, "vars_dropped": 1}
    assert "relu" not in op_types(new) and not new.global_block().has_var("dead_out")
    new.verify()


def test_identity_ops_are_removed_and_fetch_names_survive():
    def model(block):
        x = pg.data("x", [-1, 6])
        h = pg.nn.fc(x, 6)
        h = pg.nn.dropout(h, 0.25, is_test=True)                       # -> scale by 0.75
        h = pg.nn.dropout(h, 0.5, is_test=True, dropout_implementation="upscale_in_train")
        h = pg.scale(pg.assign(h), 1.0, 0.0)
        return [pg.relu(h), pg.assign(h)]  # the second fetch target is an identity's output

    infer, params = build(model, ["x"])
    fetch_names = [op.input("X")[0] for op in infer.global_block().ops if op.type == "fetch"]
    x = np.random.default_rng(1).standard_normal((3, 6)).astype(np.float32)
    want = run(infer, params, {"x": x})
    new, new_params, changes = PASSES["remove_identity"](infer, params)
    assert changes["dropout_to_scale"] == 1 and changes["dropout_removed"] == 1
    assert changes["scale_removed"] == 1 and changes["assign_removed"] == 1
    assert [op.input("X")[0] for op in new.global_block().ops if op.type == "fetch"] == fetch_names
    types = op_types(new)
    # the fetched assign stays: its input is also read by relu, so its producer cannot be
    # renamed to the fetch target's name
    assert types["dropout"] == 0 and types["assign"] == 1 and types["scale"] == 1
    assert_same_outputs(run(new, new_params, {"x": x}), want, 0.0)


def test_fetched_identity_is_dropped_by_renaming_its_producer():
    def model(block):
        x = pg.data("x", [-1, 3])
        return [pg.assign(pg.relu(x))]

    infer, params = build(model, ["x"])
    out = [op.input("X")[0] for op in infer.global_block().ops if op.type == "fetch"]
    new, _, changes = PASSES["remove_identity"](infer, params)
    assert changes == {"assign_removed": 1, "vars_dropped": 1}
    relu = next(op for op in new.global_block().ops if op.type == "relu")
    assert relu.output("Out") == out
    got, = run(new, {}, {"x": np.array([[-1, 0, 2]], np.float32)})
    np.testing.assert_array_equal(got, [[0, 0, 2]])


def test_constant_subgraphs_fold_into_new_parameters():
    def model(block):
        x = pg.data("x", [-1, 4])
        w = block.create_parameter("w", [2, 4])
        w2 = pg.scale(pg.transpose(w, [1, 0]), 2.0, 1.0)   # constant: folded
        return [pg.matmul(x, w2) + pg.full([1], 3.0)]

    infer, params = build(model, ["x"])
    x = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    want = run(infer, params, {"x": x})
    new, new_params, changes = PASSES["fold_constants"](infer, params, pg_options(call_kernel))
    assert changes["ops_folded"] == 2 and "w" not in new_params
    assert not {"transpose2", "scale"} & set(op_types(new))
    assert op_types(new)["fill_constant"] == 1  # alone, a generator stays an op
    folded = [n for n in new_params if n != "w"]
    assert len(folded) == 1 and new_params[folded[0]].shape == (4, 2)
    assert_same_outputs(run(new, new_params, {"x": x}), want, 0.0)


def test_constant_folding_errors_name_the_op():
    def model(block):
        x = pg.data("x", [-1, 2])
        return [x + pg.relu(block.create_parameter("w", [2]))]

    infer, params = build(model, ["x"])

    def broken(op_type, inputs, attrs):
        raise RuntimeError("no kernel today")

    with pytest.raises(PassError, match="relu failed on constant inputs"):
        PASSES["fold_constants"](infer, params, pg_options(broken))


def test_conv_bias_batch_norm_fold_on_a_keel_model():
    def model(block):
        x = pg.data("x", [-1, 3, 8, 8])
        h = pg.nn.conv2d(x, 4, 3, padding=1)                 # with a bias (elementwise_add, axis 1)
        h = pg.nn.batch_norm(h, act="relu")
        h = pg.nn.conv2d(h, 4, 3, groups=4, bias_attr=False)  # depthwise, no bias
        return [pg.nn.batch_norm(h)]                          # fetched directly

    infer, params = build(model, ["x"])
    assert op_types(infer)["batch_norm"] == 2
    x = np.random.default_rng(3).standard_normal((2, 3, 8, 8)).astype(np.float32)
    want = run(infer, params, {"x": x})
    new, new_params, changes = PASSES["fold_batch_norm"](infer, params)
    assert changes["batch_norm_folded_into_conv"] == 2
    assert op_types(new)["batch_norm"] == 0 and op_types(new)["elementwise_add"] == 2
    assert_same_outputs(run(new, new_params, {"x": x}), want, FP32_RTOL)


def test_batch_norm_folds_into_a_linear_layer_then_fc_fuses():
    def model(block):
        x = pg.data("x", [-1, 5])
        h = pg.nn.batch_norm(pg.nn.linear(x, 6))  # 2-D: the channel is the last axis
        return [pg.relu(h)]

    infer, params = build(model, ["x"])
    x = np.random.default_rng(4).standard_normal((3, 5)).astype(np.float32)
    want = run(infer, params, {"x": x})
    new, new_params, report = optimize(infer, params)
    assert report.changes("fold_batch_norm")["batch_norm_folded_into_linear"] == 1
    assert dict(op_types(new)) == {"feed": 1, "fc": 1, "fetch": 1}
    fc = next(op for op in new.global_block().ops if op.type == "fc")
    assert fc.attr("activation_type") == "relu"
    assert_same_outputs(run(new, new_params, {"x": x}), want, FP32_RTOL)


def test_matmul_with_transposed_weight_bias_and_activations():
    def model(block):
        x = pg.data("x", [-1, 3, 4])
        w = block.create_parameter("w", [6, 4])
        b = block.create_parameter("b", [6])
        h = pg.relu(pg.matmul(x, w, transpose_y=True) + b)   # 3-D input: in_num_col_dims 2
        g = pg.gelu(pg.nn.linear(h, 2))                          # gelu: not fused
        return [g]

    infer, params = build(model, ["x"])
    x = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)
    want = run(infer, params, {"x": x})
    new, new_params, changes = PASSES["fuse_fc"](infer, params)
    assert changes["fc_fused"] == 2 and changes["relu_fused"] == 1
    fcs = [op for op in new.global_block().ops if op.type == "fc"]
    assert [(op.attr("in_num_col_dims"), op.attr("activation_type")) for op in fcs] == [(2, "relu"), (2, "")]
    assert new_params[fcs[0].input("W")[0]].shape == (4, 6)  # stored transposed
    assert op_types(new)["gelu"] == 1
    assert_same_outputs(run(new, new_params, {"x": x}), want, FP32_RTOL)


def test_shared_intermediates_are_not_fused():
    def model(block):
        x = pg.data("x", [-1, 4])
        w = block.create_parameter("w", [4, 4])
        b = block.create_parameter("b", [4])
        y = pg.matmul(x, w)
        return [y + b, y]  # the product is fetched: it must stay

    infer, params = build(model, ["x"])
    new, _, changes = PASSES["fuse_fc"](infer, params)
    assert changes == {} and op_types(new) == op_types(infer)


def test_gemm_weights_are_stored_column_major_with_the_same_values(tmp_path):
    """column_major_weights: the right-hand matrices (of at least column_major_min_bytes)
    of fc/mul/matmul_v2 become Fortran-ordered arrays of the same values; a weight also read otherwise, a transposed product's
    weight and the outputs are left as they are; the saved params file is unchanged."""
    def model(block):
        x = pg.data("x", [-1, 6])
        h = pg.nn.fc(x, 5, activation="relu")                  # mul + add + relu -> fc
        w = block.create_parameter("wt", [4, 5], "float32")    # read transposed
        t = pg.matmul(h, w, transpose_y=True)
        shared = block.create_parameter("shared", [4, 4], "float32")
        u = pg.matmul(t, shared)
        v = pg.matmul(shared, pg.data("y", [4, 2]))            # also read as a left operand
        return [u, v]
    program, params = build(model, ["x", "y"])
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((3, 6)).astype(np.float32), "y": rng.standard_normal((4, 2)).astype(np.float32)}
    expected = run(program, params, feed)
    # weights under column_major_min_bytes (2 MiB by default) keep their layout
    _, kept, report = optimize(program, params)
    assert report.changes("column_major_weights") == {} and all(a.flags.c_contiguous for a in kept.values())
    new, new_params, report = optimize(program, params, column_major_min_bytes=5 * 6 * 4)
    assert report.changes("column_major_weights") == {"weights_column_major": 1}
    (fc_w,) = [op.input("W")[0] for op in new.global_block().ops if op.type == "fc"]
    assert new_params[fc_w].flags.f_contiguous and not new_params[fc_w].flags.c_contiguous
    assert not new_params[fc_w].flags.writeable     # a constant (kernels may keep a row-major copy)
    np.testing.assert_array_equal(new_params[fc_w], params[fc_w])
    assert new_params["wt"].flags.c_contiguous and new_params["shared"].flags.c_contiguous
    assert_same_outputs(run(new, new_params, feed), expected, FP32_RTOL)
    from keel.program.io.tensor_file import save_combined
    save_combined(tmp_path / "moved", {fc_w: new_params[fc_w]})
    save_combined(tmp_path / "kept", {fc_w: params[fc_w]})
    assert (tmp_path / "moved").read_bytes() == (tmp_path / "kept").read_bytes()
    # disabled by name: nothing moves
    _, kept, report = optimize(program, params, disabled=["column_major_weights"], column_major_min_bytes=0)
    assert report["column_major_weights"].status == "disabled" and kept[fc_w].flags.c_contiguous
    # for a GPU (cpu=False) the CPU layout pass does not run: cuBLAS gains nothing from it
    _, kept, report = optimize(program, params, cpu=False, column_major_min_bytes=0)
    assert report["column_major_weights"].status.startswith("skipped (a CPU memory layout")
    assert all(a.flags.c_contiguous for a in kept.values())


# -- bounds and non-finite values --------------------------------------------------------------
def _program_with_constants(make):
    """An inference program x -> make(block, x) -> y, its parameters given by `make`."""
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 2], need_check_feed=True)
    b.create_var("feed", type=pb.VarType.FEED_MINIBATCH, persistable=True)
    b.create_var("fetch", type=pb.VarType.FETCH_LIST, persistable=True)
    b.append_op("feed", {"X": ["feed"]}, {"Out": ["x"]}, {"col": 0})
    params = make(b)
    b.create_var("y")
    b.append_op("elementwise_add", {"X": ["x"], "Y": ["c"]}, {"Out": ["y"]}, {"axis": -1})
    b.append_op("fetch", {"X": ["y"]}, {"Out": ["fetch"]}, {"col": 0})
    return p, params


def test_folding_never_computes_a_constant_over_the_limit():
    def make(b):
        b.create_var("big", [20000, 20000])
        b.create_var("c", [])
        b.append_op("fill_constant", outputs={"Out": ["big"]},
                    attrs={"shape": [20000, 20000], "dtype": pb.VarType.FP32, "value": 1.0})
        b.append_op("reduce_sum", {"X": ["big"]}, {"Out": ["c"]}, {"dim": [0, 1], "keep_dim": False})
        return {}
    program, params = _program_with_constants(make)
    evaluated = []

    def evaluate(op_type, inputs, attrs):
        evaluated.append((op_type, attrs.get("shape")))
        return call_kernel(op_type, inputs, attrs)
    new, _, report = optimize(program, params, evaluate=evaluate)
    assert evaluated == []                               # 1.6 GB never allocated
    assert report.changes("fold_constants")["not_folded_size"] == 1
    assert op_types(new)["fill_constant"] == 1           # the op stays in the program


@pytest.mark.parametrize("op, inputs, attrs", [
    ("elementwise_mul", {"X": [np.inf, 1.0], "Y": [0.0, 1.0]}, {"axis": -1}),   # inf * 0
    ("log", {"X": [0.0, 1.0]}, {}),                                              # log 0
    ("sqrt", {"X": [-1.0, 4.0]}, {}),                                            # sqrt(-1)
], ids=["inf*0", "log0", "sqrt-1"])
def test_folding_leaves_ops_that_make_nan_or_inf(op, inputs, attrs):
    def make(b):
        for slot in inputs:
            b.create_var(f"k{slot}", [2], persistable=True)
        b.create_var("c", [2])
        b.append_op(op, {slot: [f"k{slot}"] for slot in inputs}, {"Out": ["c"]}, attrs)
        return {f"k{slot}": np.array(v, np.float32) for slot, v in inputs.items()}
    program, params = _program_with_constants(make)
    with np.errstate(all="ignore"):
        new, new_params, report = optimize(program, params)
    assert report.changes("fold_constants")["not_folded_non_finite"] == 1
    assert op_types(new)[op] == 1 and "c" not in new_params
    assert set(new_params) == set(params)                          # no constant made
    with np.errstate(all="ignore"):
        got, = run(new, new_params, {"x": np.zeros((1, 2), np.float32)})
    assert not np.isfinite(got[0, 0]) and np.isfinite(got[0, 1])   # computed at run time, as before


@pytest.mark.parametrize("scale, why", [(1e5, "overflows float16"), (1e-9, "underflows float16")])
def test_fp16_keeps_weights_float16_cannot_hold_in_float32(scale, why):
    def model(block):
        x = pg.data("x", [-1, 8])
        return [pg.nn.fc(pg.nn.fc(x, 8), 4)]
    program, params = build(model, ["x"])
    params["fc_1.w_0"] = (params["fc_1.w_0"] * scale).astype(np.float32)
    feed = {"x": np.random.default_rng(1).standard_normal((3, 8)).astype(np.float32)}
    want, = run(program, params, feed)
    new, new_params, report = optimize(program, params, fp16=True, fuse=False)
    changes = report.changes("convert_to_fp16")
    assert changes["weights_kept_fp32"] == 1
    assert f"fc_1.w_0 {why}" in changes["kept_fp32_because"]
    assert new_params["fc_1.w_0"].dtype == np.float32 and new_params["fc_0.w_0"].dtype == np.float16
    got, = run(new, new_params, feed)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2 * np.abs(want).max())


def test_fp16_ignores_a_few_decayed_entries_of_an_ordinary_weight():
    def model(block):
        return [pg.nn.fc(pg.data("x", [-1, 8]), 4)]
    program, params = build(model, ["x"])
    params["fc_0.w_0"].flat[:3] = 1e-9          # weight decay leaves such entries in trained models
    new, new_params, report = optimize(program, params, fp16=True, fuse=False)
    assert report.changes("convert_to_fp16").get("weights_kept_fp32", 0) == 0
    assert new_params["fc_0.w_0"].dtype == np.float16
