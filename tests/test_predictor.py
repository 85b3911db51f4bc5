"""The inference Predictor (executor/inference.py): PaddlePaddle's fixtures and models we
save ourselves, through handles and run(list); clones sharing weights across threads;
the optimizer hook; every error a user can meet."""
import os
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, FeedError, Scope
from keel.executor.inference import (Config, DataType, PrecisionType, PredictorError, Tensor,
                                create_predictor)
from keel.executor.kernel_call import call_kernel
from inference_run import run
from keel.kernels.array_module import cupy_available
from keel.program.errors import KeelError, ParseError, ProgramError
from keel.program.passes import PASSES, PassOptions
from keel.proto import pb

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "paddle"
MODELS = ["mlp_fc", "mlp_linear", "lenet", "resblock_cnn", "transformer_encoder", "ops_zoo",
          "mobilenet_v2", "shufflenet_v2"]


def _io(name):
    io = np.load(FIXTURES / f"{name}.io.npz", allow_pickle=False)
    return {k: io[k] for k in io.files}


def _assert_close(got, want, rel, what):
    assert got.shape == want.shape and got.dtype == want.dtype, what
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    scale = max(float(np.abs(want).max()), 1e-6)
    assert np.abs(got - want).max() <= rel * scale, what


def _predictor(name, ir_optim=False, **settings):
    config = Config(str(FIXTURES / name))
    config.switch_ir_optim(ir_optim)
    for key, value in settings.items():
        getattr(config, key)(value)
    return create_predictor(config)


# -- PaddlePaddle's fixtures ---------------------------------------------------------------
@pytest.mark.parametrize("name", MODELS)
def test_fixture_through_handles_and_run_list(name):
    io = _io(name)
    pred = _predictor(name)
    names = pred.get_input_names()
    for n in names:
        pred.get_input_handle(n).copy_from_cpu(io[f"in:{n}"])
    assert pred.run() is None
    for i, n in enumerate(pred.get_output_names()):
        out = pred.get_output_handle(n)
        want = io[f"out:{i}"]
        assert out.shape() == list(want.shape) and out.dtype == want.dtype and out.name == n
        _assert_close(out.copy_to_cpu(), want, 1e-5, (name, n))
    got = pred.run([io[f"in:{n}"] for n in names])
    assert len(got) == len(pred.get_output_names())
    for i, g in enumerate(got):
        _assert_close(g, io[f"out:{i}"], 1e-5, (name, i))


@pytest.mark.parametrize("name", MODELS)
def test_fixture_with_default_config(name):
    """ir_optim on (PaddlePaddle's default): the inference passes, once they exist, may
    change rounding (conv+bn folding); the fixtures hold PaddlePaddle's own passes to 1e-4."""
    io = _io(name)
    pred = create_predictor(Config(str(FIXTURES / name)))
    got = pred.run([io[f"in:{n}"] for n in pred.get_input_names()])
    for i, g in enumerate(got):
        _assert_close(g, io[f"out:{i}"], 1e-4, (name, i))


def test_names_follow_col_order_not_op_order():
    """ops_zoo stores its feed ops highest `col` first, as PaddlePaddle does."""
    desc = pb.ProgramDesc.FromString((FIXTURES / "ops_zoo.pdmodel").read_bytes())
    feeds = {op.outputs[0].arguments[0]: next(a.i for a in op.attrs if a.name == "col")
             for op in desc.blocks[0].ops if op.type == "feed"}
    fetches = {op.inputs[0].arguments[0]: next(a.i for a in op.attrs if a.name == "col")
               for op in desc.blocks[0].ops if op.type == "fetch"}
    pred = _predictor("ops_zoo")
    assert pred.get_input_names() == sorted(feeds, key=feeds.get) == ["x", "y", "idx"]
    assert pred.get_output_names() == sorted(fetches, key=fetches.get)
    assert len(pred.get_output_names()) == 8


def test_handle_types_shapes_and_copies():
    pred = _predictor("transformer_encoder")
    ids = pred.get_input_handle(pred.get_input_names()[0])
    assert isinstance(ids, Tensor) and ids.type() is DataType.INT64 and ids.dtype == np.int64
    assert ids.shape() == [-1, 8]  # declared, before any data
    ids.reshape([3, 8])
    assert ids.shape() == [3, 8]
    data = np.arange(16, dtype=np.int64).reshape(2, 8) % 50
    ids.copy_from_cpu(data)
    assert ids.shape() == [2, 8]  # the data's shape wins, as in PaddlePaddle
    pred.run()
    out = pred.get_output_handle(pred.get_output_names()[0])
    first = out.copy_to_cpu()
    data[:] = 0  # the handle holds a copy, not the caller's array
    pred.run()
    np.testing.assert_array_equal(out.copy_to_cpu(), first)
    a = out.copy_to_cpu()
    a[:] = 7  # and copy_to_cpu returns a copy
    np.testing.assert_array_equal(out.copy_to_cpu(), first)
    assert out.type() is DataType.FLOAT32 and out.shape() == [2, 4]


def test_a_dtype_that_may_change_values_is_refused_like_an_executor_feed():
    io = _io("lenet")
    pred = _predictor("lenet")
    with pytest.raises(FeedError, match=r"feed 'x': got a float64 array, declared float32.*astype\('float32'\)"):
        pred.run([io["in:x"].astype(np.float64)])
    got, = pred.run([io["in:x"].astype(np.float16).astype(np.float32)])
    _assert_close(got, io["out:0"], 2e-2, "lenet from float16-rounded inputs")
    got, = pred.run([io["in:x"].astype(np.float16)])  # float16 -> float32 keeps every value: cast
    _assert_close(got, io["out:0"], 2e-2, "lenet from float16")


def test_bool_and_int_outputs_are_exact():
    io = _io("ops_zoo")
    pred = _predictor("ops_zoo")
    got = pred.run([io[f"in:{n}"] for n in pred.get_input_names()])
    kinds = {g.dtype.kind for g in got}
    assert {"b", "i", "f"} <= kinds
    for i, g in enumerate(got):
        if g.dtype.kind in "biu":
            np.testing.assert_array_equal(g, io[f"out:{i}"])


# -- models we save ourselves --------------------------------------------------------------
def _save_tiny_model(prefix):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 3
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 6])
        h = pg.nn.fc(x, 8, activation="relu")
        probs = pg.softmax(pg.nn.fc(h, 3))
        label = pg.argmax(probs, axis=1)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    pg.io.save_inference_model(prefix, [x], [probs, label], exe, program=main, scope=scope)
    return main, scope, probs, label


@pytest.mark.parametrize("form", ["prefix", "model_file", "both_files", "set_model"])
def test_model_saved_with_keel(tmp_path, form):
    main, scope, probs, label = _save_tiny_model(tmp_path / "tiny")
    prefix = str(tmp_path / "tiny")
    if form == "set_model":
        config = Config()
        config.set_model(prefix + ".pdmodel", prefix + ".pdiparams")
    else:
        config = {"prefix": lambda: Config(prefix), "model_file": lambda: Config(prefix + ".pdmodel"),
                  "both_files": lambda: Config(prefix + ".pdmodel", prefix + ".pdiparams")}[form]()
    assert config.prog_file() == prefix + ".pdmodel" and config.params_file() == prefix + ".pdiparams"
    pred = create_predictor(config)
    assert pred.get_input_names() == ["x"]
    assert pred.get_output_names() == [probs.name, label.name]
    xv = np.random.default_rng(1).standard_normal((5, 6)).astype(np.float32)
    want = Executor().run(main, feed={"x": xv}, fetch_list=[probs, label], scope=scope)
    got = pred.run([xv])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
    assert got[1].dtype == np.int64


def test_parameter_free_model_needs_no_params_file(tmp_path):
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 3])
        y = pg.relu(x) * 2.0
    pg.io.save_inference_model(tmp_path / "free", [x], [y], Executor(), program=main, scope=Scope())
    assert not (tmp_path / "free.pdiparams").exists()
    pred = create_predictor(Config(str(tmp_path / "free")))
    out, = pred.run([np.array([[-1.0, 0.5, 2.0]], np.float32)])
    np.testing.assert_array_equal(out, [[0.0, 1.0, 4.0]])


# -- clones and threads --------------------------------------------------------------------
def test_clone_shares_parameter_arrays_but_not_state():
    io = _io("resblock_cnn")
    pred = _predictor("resblock_cnn")
    twin = pred.clone()
    params = [n for n, _, _ in pg.io.persistable_specs(pred._program)]
    assert len(params) > 10
    for n in params:
        assert twin._scope.get(n) is pred._scope.get(n)  # the same arrays, not copies
    assert twin._executor is not pred._executor
    assert twin.get_input_handle("x") is not pred.get_input_handle("x")
    pred.get_input_handle("x").copy_from_cpu(io["in:x"])
    with pytest.raises(PredictorError, match="not set"):
        twin.run()  # its inputs are its own
    pred.run()
    twin.run([io["in:x"] * 0.5])
    _assert_close(pred.get_output_handle(pred.get_output_names()[0]).copy_to_cpu(), io["out:0"], 1e-5, "pred")
    for n in params:  # running either left the shared weights in place
        assert twin._scope.get(n) is pred._scope.get(n)


def test_cloned_predictors_on_threads_match_serial_runs():
    pred = _predictor("lenet")
    rng = np.random.default_rng(0)
    inputs = [[rng.standard_normal((1 + (t + r) % 3, 1, 16, 16)).astype(np.float32) for r in range(20)]
              for t in range(4)]
    want = [[pred.run([x])[0] for x in per_thread] for per_thread in inputs]
    got = [[None] * 20 for _ in range(4)]
    clones = [pred.clone() for _ in range(4)]
    start = threading.Barrier(4)
    errors = []

    def work(t):
        try:
            p = clones[t]
            x_in, out = p.get_input_handle("x"), p.get_output_handle(p.get_output_names()[0])
            start.wait()
            for r, x in enumerate(inputs[t]):
                x_in.copy_from_cpu(x)
                p.run()
                got[t][r] = out.copy_to_cpu()
        except Exception as e:  # reported below, in the test's thread
            errors.append(e)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    for t in range(4):
        for r in range(20):
            np.testing.assert_array_equal(got[t][r], want[t][r])


def test_cpu_math_threads_run_ops_concurrently_with_the_same_results():
    io = _io("resblock_cnn")
    pred = _predictor("resblock_cnn", set_cpu_math_library_num_threads=3)
    assert pred._executor.num_threads == 3 and pred.clone()._executor.num_threads == 3
    got, = pred.run([io["in:x"]])
    _assert_close(got, io["out:0"], 1e-5, "resblock_cnn, 3 threads")
    with pytest.raises(ValueError, match="at least 1"):
        Config().set_cpu_math_library_num_threads(0)


# -- the optimizer hook --------------------------------------------------------------------
def test_ir_optim_runs_the_passes_but_deleted_ones():
    io = _io("lenet")
    config = Config(str(FIXTURES / "lenet"))
    config.delete_pass("fold_batch_norm")
    config.delete_pass("fuse_fc")
    pred = create_predictor(config)
    report = pred._report
    assert report["fold_batch_norm"].status == "disabled" and report["fuse_fc"].status == "disabled"
    assert report["fold_constants"].changes["ops_folded"] == 2   # folded with the kernels (evaluate)
    op_types = [op.type for op in pred._program.global_block().ops]
    assert "batch_norm" in op_types and "fc" not in op_types and "reshape2" not in op_types
    _assert_close(pred.run([io["in:x"]])[0], io["out:0"], 1e-5, "lenet, two passes deleted")
    twin = pred.clone()  # clones reuse the optimized program and parameters
    assert twin._program is pred._program


def test_ir_optim_with_the_real_passes():
    """Whatever the passes fold, the clone shares it, and the result holds to 1e-4."""
    io = _io("resblock_cnn")
    pred = _predictor("resblock_cnn", ir_optim=True)
    twin = pred.clone()
    for n, _, _ in pg.io.persistable_specs(pred._program):
        assert twin._scope.get(n) is pred._scope.get(n)
    for p in (pred, twin):
        _assert_close(p.run([io["in:x"]])[0], io["out:0"], 1e-4, "resblock_cnn optimized")


def test_ir_optim_off_runs_the_program_as_loaded():
    io = _io("lenet")
    pred = _predictor("lenet", ir_optim=False)
    assert pred._report is None
    loaded, _, _ = pg.io.load_inference_model(str(FIXTURES / "lenet"), Executor(), scope=Scope())
    assert [op.type for op in pred._program.global_block().ops] == [op.type for op in loaded.global_block().ops]
    _assert_close(pred.run([io["in:x"]])[0], io["out:0"], 1e-5, "lenet unoptimized")


# -- Config ------------------------------------------------------------------------------
def test_config_switches_and_summary():
    config = Config(str(FIXTURES / "mlp_fc"))
    assert config.ir_optim() and not config.use_gpu() and config.cpu_math_library_num_threads() == 1
    config.switch_ir_optim(False)
    config.enable_mkldnn()  # accepted, no effect
    config.set_cpu_math_library_num_threads(2)
    config.delete_pass("fc_fuse_pass")
    config.enable_low_precision_io()
    config.enable_use_gpu(256, 1)
    assert config.use_gpu() and config.gpu_device_id() == 1 and config.memory_pool_init_size_mb() == 256
    config.disable_gpu()
    assert not config.use_gpu() and config.Precision is PrecisionType
    text = config.summary()
    for row in ("mlp_fc.pdmodel", "mlp_fc.pdiparams", "| ir_optim", "false", "fc_fuse_pass",
                "| cpu_math_thread ", "| 2 ", "enable_mkldnn"):
        assert row in text, row
    pred = create_predictor(config)
    config.set_model("elsewhere")  # the predictor took a copy of the config
    io = _io("mlp_fc")
    _assert_close(pred.clone().run([io["in:x"]])[0], io["out:0"], 1e-5, "mlp_fc")


# -- errors --------------------------------------------------------------------------------
def test_unknown_names_are_reported_with_suggestions():
    pred = _predictor("ops_zoo")
    with pytest.raises(PredictorError, match=r"no input named 'idy'.*did you mean 'idx'"):
        pred.get_input_handle("idy")
    with pytest.raises(PredictorError, match=r"'x', 'y', 'idx'"):
        pred.get_input_handle("zzz")  # no close match: the inputs are listed
    out = pred.get_output_names()[0]
    with pytest.raises(PredictorError, match="is an output.*get_output_handle"):
        pred.get_input_handle(out)
    with pytest.raises(PredictorError, match="no output named"):
        pred.get_output_handle("nope")


def test_run_before_every_input_is_set():
    pred = _predictor("ops_zoo")
    pred.get_input_handle("y").copy_from_cpu(np.zeros((2, 6), np.float32))
    with pytest.raises(PredictorError, match=r"\['x', 'idx'\] not set"):
        pred.run()
    with pytest.raises(PredictorError, match="expected a list of 3"):
        pred.run([np.zeros((2, 4, 6), np.float32)])
    with pytest.raises(PredictorError, match="expected a list of 3"):
        pred.run({"x": 1})
    with pytest.raises(PredictorError, match="run\\(\\) first"):
        pred.get_output_handle(pred.get_output_names()[0]).copy_to_cpu()
    with pytest.raises(PredictorError, match="is an output"):
        pred.get_output_handle(pred.get_output_names()[0]).copy_from_cpu(np.zeros(3))


def test_wrong_dtype_or_shape_names_the_input():
    pred = _predictor("transformer_encoder")
    ids = pred.get_input_handle(pred.get_input_names()[0])
    with pytest.raises(FeedError, match=f"{ids.name}.*float32 array, declared int64"):
        ids.copy_from_cpu(np.zeros((2, 8), np.float32))
    with pytest.raises(FeedError, match=f"{ids.name}.*shape \\[2, 7\\].*\\[-1, 8\\]"):
        ids.copy_from_cpu(np.zeros((2, 7), np.int64))
    with pytest.raises(FeedError, match="shape \\[16\\]"):
        pred.run([np.zeros(16, np.int64)])
    lenet = _predictor("lenet")
    with pytest.raises(FeedError, match="'x'.*\\[2, 3, 16, 16\\]"):
        lenet.get_input_handle("x").copy_from_cpu(np.zeros((2, 3, 16, 16), np.float32))


def test_missing_files(tmp_path):
    with pytest.raises(ParseError, match="nope.pdmodel"):
        create_predictor(Config(str(tmp_path / "nope")))
    (tmp_path / "only.pdmodel").write_bytes((FIXTURES / "mlp_fc.pdmodel").read_bytes())
    with pytest.raises(ProgramError, match="parameter.*only.pdiparams does not exist"):
        create_predictor(Config(str(tmp_path / "only")))
    with pytest.raises(PredictorError, match="names no model"):
        create_predictor(Config())


def test_unsupported_ops_are_listed_at_once(tmp_path):
    desc = pb.ProgramDesc.FromString((FIXTURES / "mlp_fc.pdmodel").read_bytes())
    ops = desc.blocks[0].ops
    ops[1].type, ops[3].type = "fancy_mul", "relu_x"
    (tmp_path / "m.pdmodel").write_bytes(desc.SerializeToString())
    (tmp_path / "m.pdiparams").write_bytes((FIXTURES / "mlp_fc.pdiparams").read_bytes())
    with pytest.raises(KeelError, match="2 problem") as info:
        create_predictor(Config(str(tmp_path / "m")))
    assert "fancy_mul" in str(info.value) and "relu_x" in str(info.value)


@pytest.mark.parametrize("missing", ["cupy", "device"])
def test_gpu_request_without_a_gpu_warns_and_falls_back_to_the_cpu(monkeypatch, missing):
    """As Paddle Inference's CPU build does (it used to be an error here)."""
    if missing == "cupy":
        monkeypatch.setitem(sys.modules, "cupy", None)  # as if cupy were not installed
        reason = "cupy is not installed"
    else:
        import standin
        standin.install(monkeypatch, device_count=0)   # cupy, but no CUDA device
        reason = r"GPU 0 was asked for, but cupy finds 0 CUDA device"
    config = Config(str(FIXTURES / "mlp_fc"))
    config.enable_use_gpu(100, 0)
    with pytest.warns(RuntimeWarning, match=reason):
        pred = create_predictor(config)
    assert pred._executor.place.device == "cpu" and config.use_gpu()
    io = _io("mlp_fc")
    _assert_close(pred.run([io["in:x"]])[0], io["out:0"], 1e-5, "mlp_fc, GPU fallback")


@pytest.mark.parametrize("low_io", [False, True])
@pytest.mark.parametrize("ir_optim", [True, False])
def test_half_precision_converts_the_program_to_float16_at_load(monkeypatch, ir_optim, low_io):
    """Precision Half runs the float16 pass at load (also with ir_optim off, alone): half
    weights, float32 inputs and outputs unless low-precision io is asked for, outputs
    within float16 tolerance. Half is a GPU setting, so the test runs it on the CPU place
    (the same kernels through the array module)."""
    from keel.executor.place import CPUPlace
    monkeypatch.setattr(Config, "_place", lambda self: CPUPlace())
    io = _io("mlp_fc")
    config = Config(str(FIXTURES / "mlp_fc"))
    config.enable_use_gpu(100, 0, PrecisionType.Half)
    config.switch_ir_optim(ir_optim)
    config.enable_low_precision_io(low_io)
    pred = create_predictor(config)
    op_types = [op.type for op in pred._program.global_block().ops]
    assert ("fc" in op_types) == ir_optim            # the fusions ran only with ir_optim
    weights = [n for n in pred._params if pred._params.get(n).ndim == 2]
    assert weights and all(pred._params.get(n).dtype == np.float16 for n in weights)
    handle = pred.get_input_handle(pred.get_input_names()[0])
    assert handle.dtype == (np.float16 if low_io else np.float32)
    got, = pred.run([io["in:x"].astype(handle.dtype)])
    # the output is softmax's, which the pass keeps in float32 either way (its keep list)
    assert got.dtype == pred.get_output_handle(pred.get_output_names()[0]).dtype == np.float32
    _assert_close(got.astype(np.float32), io["out:0"], 2e-2, "mlp_fc in float16")


@pytest.mark.parametrize("precision", [PrecisionType.Bfloat16, PrecisionType.Int8])
def test_reduced_precision_is_not_implemented_yet(precision):
    config = Config(str(FIXTURES / "mlp_fc"))
    config.enable_use_gpu(100, 0, precision)
    config.enable_low_precision_io(True)
    with pytest.raises(NotImplementedError, match="pass"):
        create_predictor(config)


def _save_bf16_weights(name, prefix):
    """The fixture `name` after convert_weights_to_bf16 alone, saved as prefix.pdmodel +
    prefix.pdiparams (BF16 records); returns the pass's (program, params)."""
    scope = Scope()
    program, _, _ = pg.io.load_inference_model(str(FIXTURES / name), Executor(), scope=scope)
    params = {n: scope.get(n) for n, _, _ in pg.io.persistable_specs(program)}
    program, params, changes = PASSES["convert_weights_to_bf16"](program, params, PassOptions(evaluate=call_kernel))
    assert changes["params_bf16"] >= 3
    pg.io.save_program(program, f"{prefix}.pdmodel")
    pg.io.save_params(program, params, f"{prefix}.pdiparams")
    return program, params


@pytest.mark.parametrize("ir_optim", [True, False])
def test_bfloat16_weights_run_with_and_without_ir_optim(tmp_path, ir_optim):
    """A model whose weights are bfloat16 (float32 arithmetic): with ir_optim, constant
    folding turns each cast into a float32 weight once, at load; without, the casts run on
    every call. Either way the outputs are the pass's program's (run by the Executor)."""
    program, params = _save_bf16_weights("lenet", tmp_path / "lenet")
    casts = sum(op.type == "cast" for op in program.global_block().ops)
    io = _io("lenet")
    want, = run(program, params, {"x": io["in:x"]})
    config = Config(str(tmp_path / "lenet"))
    config.switch_ir_optim(ir_optim)
    pred = create_predictor(config)
    op_types = [op.type for op in pred._program.global_block().ops]
    dtypes = {pred._params.get(n).dtype for n, _, _ in pg.io.persistable_specs(pred._program)}
    got, = pred.run([io["in:x"]])
    if ir_optim:
        assert "cast" not in op_types and dtypes == {np.dtype(np.float32)}
        assert pred._report["fold_constants"].changes["ops_folded"] == casts + 2  # and lenet's two reshape2
        _assert_close(got, want, 1e-5, "lenet, bfloat16 weights, ir_optim")
    else:
        assert op_types.count("cast") == casts and np.dtype(np.uint16) in dtypes
        np.testing.assert_array_equal(got, want)
    _assert_close(got, io["out:0"], 3e-2, "lenet, bfloat16 weights vs float32")  # the tool's tolerance


# -- other backends and oracles ------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.skipif(not cupy_available(), reason="needs cupy and a CUDA device")
def test_gpu_predictor_matches_cpu():
    io = _io("resblock_cnn")
    config = Config(str(FIXTURES / "resblock_cnn"))
    config.enable_use_gpu(100, 0)
    pred = create_predictor(config)
    got, = pred.run([io["in:x"]])
    assert isinstance(got, np.ndarray)
    _assert_close(got, io["out:0"], 1e-4, "resblock_cnn on GPU")
    _assert_close(pred.clone().run([io["in:x"]])[0], io["out:0"], 1e-4, "clone on GPU")


@pytest.mark.paddle
@pytest.mark.parametrize("name", ["lenet", "transformer_encoder", "ops_zoo"])
def test_matches_paddles_own_predictor(name):
    os.environ.setdefault("FLAGS_enable_pir_api", "0")
    inference = pytest.importorskip("paddle.inference")
    theirs_config = inference.Config()
    theirs_config.set_prog_file(str(FIXTURES / f"{name}.pdmodel"))
    if (FIXTURES / f"{name}.pdiparams").exists():  # ops_zoo has no parameters
        theirs_config.set_params_file(str(FIXTURES / f"{name}.pdiparams"))
    theirs_config.switch_ir_optim(False)
    theirs_config.disable_glog_info()
    theirs = inference.create_predictor(theirs_config)
    ours = _predictor(name)
    assert ours.get_input_names() == theirs.get_input_names()
    assert ours.get_output_names() == theirs.get_output_names()
    io = _io(name)
    for n in theirs.get_input_names():
        theirs.get_input_handle(n).copy_from_cpu(io[f"in:{n}"])
    theirs.run()
    got = ours.run([io[f"in:{n}"] for n in ours.get_input_names()])
    for n, g in zip(theirs.get_output_names(), got):
        _assert_close(g, theirs.get_output_handle(n).copy_to_cpu(), 1e-5, (name, n))
