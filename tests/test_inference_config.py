"""keel.inference against PaddlePaddle 3.3.1's `paddle.inference`: every name it has
(tests/fixtures/paddle_inference_api_3.3.1.json, written by
tests/fixtures/extract_inference_api.py), and what each Config setting that changes a run
does to one: memory reuse, passes, threads, the GPU request and its CPU fallback, TensorRT's
precision on Keel's GPU path, hooks, the pool, mixed-precision conversion."""
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

import keel
import keel.program as pg
from keel import inference
from keel.executor import CPUPlace, CUDAPlace, Executor
from keel.executor.inference import Config, PrecisionType, PredictorError, create_predictor
from keel.executor.inference_config import _GETTERS, _RECORDED, _REQUIRED
from keel.executor.memory import peak_bytes
from keel.kernels import parallel

FIXTURES = Path(__file__).resolve().parent / "fixtures"
API = json.loads((FIXTURES / "paddle_inference_api_3.3.1.json").read_text())
MLP = str(FIXTURES / "paddle" / "mlp_fc")


def _io(name="mlp_fc"):
    io = np.load(FIXTURES / "paddle" / f"{name}.io.npz", allow_pickle=False)
    return {k: io[k] for k in io.files}


# -- names -----------------------------------------------------------------------------------
@pytest.mark.parametrize("where", ["module", "Config", "Predictor", "Tensor"])
def test_every_paddle_inference_name_exists(where):
    owner = inference if where == "module" else getattr(inference, where)
    missing = [name for name in API[where] if not hasattr(owner, name)]
    assert not missing, f"keel.inference.{where} lacks {missing}"


@pytest.mark.parametrize("enum_name", ["PrecisionType", "PlaceType"])
def test_enums_have_paddles_members_and_numbers(enum_name):
    ours = getattr(inference, enum_name)
    assert {m.name: m.value for m in ours} == API[enum_name]


def test_data_type_has_paddles_members_and_byte_sizes():
    assert set(API["DataType"]) <= {m.name for m in inference.DataType}
    sizes = {"FLOAT64": 8, "FLOAT32": 4, "FLOAT16": 2, "BFLOAT16": 2, "INT64": 8, "INT32": 4,
             "UINT8": 1, "INT8": 1, "BOOL": 1}
    assert {n: inference.get_num_bytes_of_data_type(inference.DataType[n]) for n in sizes} == sizes


def test_version_names_keels_release():
    assert inference.get_version().splitlines()[0] == f"version: {keel.__version__}"
    assert inference.get_trt_compile_version() == inference.get_trt_runtime_version() == (0, 0, 0)


# -- recorded settings -----------------------------------------------------------------------
def _arguments(params):
    return [f"value-{name}" for name, default in params if default is _REQUIRED]


@pytest.mark.parametrize("method", sorted(_RECORDED))
def test_each_recorded_setting_is_kept_and_shown(method):
    config = Config(MLP)
    key, params = _RECORDED[method]
    args = _arguments(params)
    getattr(config, method)(*args)
    values = {**dict(params), **dict(zip([name for name, _ in params], args))}
    want = True if not params else values[params[0][0]] if len(params) == 1 else values
    assert config._recorded[key] == want
    with pytest.raises(TypeError, match=method):
        getattr(config, method)(*range(len(params) + 1))
    text = config.summary()
    assert text.startswith("+") and text.endswith("+")


def test_getters_read_what_was_recorded_and_paddles_defaults():
    config = Config()
    assert not config.glog_info_disabled() and not config.use_feed_fetch_ops_enabled()
    assert config.tensorrt_optimization_level() == 3 and config.xpu_device_id() == 0
    assert config.prog_file() == "" and config.model_dir() == "" and config.memory_pool_init_size_mb() == 100
    config.disable_glog_info()
    config.switch_use_feed_fetch_ops(False)
    config.set_tensorrt_optimization_level(5)
    config.enable_mkldnn()
    config.collect_shape_range_info("shapes.pbtxt")
    assert config.glog_info_disabled() and not config.use_feed_fetch_ops_enabled()
    assert config.tensorrt_optimization_level() == 5 and config.mkldnn_enabled() and config.onednn_enabled()
    assert config.shape_range_info_collected() and config.shape_range_info_path() == "shapes.pbtxt"
    config.disable_onednn()
    assert not config.mkldnn_enabled()
    assert set(_GETTERS) <= set(API["Config"])
    assert config.to_native_config()._recorded == config._recorded


def _rows(summary):
    return dict(tuple(cell.strip() for cell in line.strip("|").split("|")) for line in summary.splitlines()
                if line.startswith("| ") and not line.startswith("| Option"))


def test_summary_is_sectioned_like_paddles():
    config = Config(MLP)
    config.enable_memory_optim()
    config.delete_pass("fc_fuse_pass")
    config.delete_pass("embedding_eltwise_layernorm_fuse_pass")
    lines = config.summary().splitlines()
    rules = [i for i, line in enumerate(lines) if line.startswith("+-")]
    assert len(rules) == 7   # header, then the model, CPU, GPU, other devices, runtime sections
    rows = _rows(config.summary())
    assert rows["model_file"].endswith("mlp_fc.pdmodel") and rows["memory_optim"] == "true"
    assert rows["use_gpu"] == "false" and rows["ir_optim"] == "true" and rows["cpu_math_thread"] == "1"
    assert rows["deleted_passes"] == ("fc_fuse_pass (= fuse_fc), "
                                      "embedding_eltwise_layernorm_fuse_pass (no such pass in Keel)")


# -- settings that change the run --------------------------------------------------------------
def _chain_model(tmp_path):
    """x -> scale -> relu -> exp -> tanh: each op's input dies with it."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [-1, 512])
        y = pg.tanh(pg.exp(pg.relu(pg.scale(x, scale=0.5, bias=-0.1))))
    exe = Executor()
    exe.run(startup)
    pg.io.save_inference_model(str(tmp_path / "chain"), [x], [y], exe, program=main)
    return str(tmp_path / "chain")


def _config(path, **settings):
    config = Config(path)
    for name, args in settings.items():
        getattr(config, name)(*args)
    return config


def test_memory_optim_lets_ops_write_into_dying_inputs(tmp_path):
    path = _chain_model(tmp_path)
    x = np.random.default_rng(0).standard_normal((256, 512)).astype("float32")
    plain = create_predictor(_config(path))
    reuse = create_predictor(_config(path, enable_memory_optim=(True,)))
    assert not plain._executor.reuse_buffers and reuse._executor.reuse_buffers
    want, peak_plain = peak_bytes(plain.run, [x])
    got, peak_reuse = peak_bytes(reuse.run, [x])
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_allclose(want[0], np.tanh(np.exp(np.maximum(0.5 * x - 0.1, 0))), rtol=1e-6)
    donating = [[step.op.type for step in _plan(p).steps if step.clobbers] for p in (plain, reuse)]
    assert donating == [[], ["relu", "exp", "tanh"]]   # each writes into its input, which dies there
    # never more memory (alone, one buffer of x's size less; in a long run malloc's reuse of
    # freed blocks can hide the difference from tracemalloc's peak, which also counts a few
    # hundred bytes of Python objects that vary from run to run: 197 more were seen once)
    assert peak_reuse <= peak_plain + 4096, (peak_reuse, peak_plain)


def _plan(predictor):
    """The compiled plan a predictor runs (after a run)."""
    (entry,) = predictor._executor._plans.values()
    (plan,) = entry[2].values()
    return plan


def test_deleted_pass_by_paddles_name_does_not_run():
    io = _io("lenet")
    pred = create_predictor(_config(str(FIXTURES / "paddle" / "lenet"), delete_pass=("conv_bn_fuse_pass",)))
    assert pred._report["fold_batch_norm"].status == "disabled"
    assert "batch_norm" in [op.type for op in pred._program.global_block().ops]
    full = create_predictor(_config(str(FIXTURES / "paddle" / "lenet")))
    assert "batch_norm" not in [op.type for op in full._program.global_block().ops]
    np.testing.assert_allclose(pred.run([io["in:x"]])[0], io["out:0"], rtol=1e-4, atol=1e-5)


def test_pass_builder_lists_and_edits_the_passes():
    config = Config(MLP)
    builder = config.pass_builder()
    assert builder.all_passes()[0] == "eliminate_dead_code" and "fuse_fc" in builder.all_passes()
    builder.delete_pass("fc_fuse_pass")
    assert "fuse_fc" not in builder.all_passes()
    builder.append_pass("fuse_fc")
    assert "fuse_fc" in builder.all_passes()
    builder.set_passes(["eliminate_dead_code", "constant_folding_pass"])
    assert builder.all_passes() == ["eliminate_dead_code", "fold_constants"]
    pred = create_predictor(config)
    assert pred._report["fuse_fc"].status == "disabled" and pred._report["fold_constants"].status == "ran"
    with pytest.raises(ValueError, match="no pass named"):
        builder.append_pass("no_such_pass")


def test_ir_optim_off_runs_no_pass():
    pred = create_predictor(_config(MLP, switch_ir_optim=(False,)))
    assert pred._report is None


def test_cpu_math_threads_reach_the_kernels(monkeypatch):
    seen = []
    real = parallel.parts

    def spy(xp, total, work):
        seen.append(parallel.threads())
        return real(xp, total, work)
    monkeypatch.setattr(parallel, "parts", spy)
    io = _io("mobilenet_v2")   # depthwise convolutions split their work (kernels/parallel.py)
    want = create_predictor(Config(str(FIXTURES / "paddle" / "mobilenet_v2"))).run([io["in:x"]])[0]
    before = parallel.threads()
    assert seen and set(seen) == {before}
    seen.clear()
    pred = create_predictor(_config(str(FIXTURES / "paddle" / "mobilenet_v2"),
                                    set_cpu_math_library_num_threads=(3,)))
    got = pred.run([io["in:x"]])[0]
    assert seen and set(seen) == {3} and pred._executor.num_threads == 3
    assert parallel.threads() == before   # the count applied while the predictor ran, only then
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_gpu_request_without_a_gpu_warns_and_runs_on_the_cpu():
    io = _io()
    config = _config(MLP, enable_use_gpu=(100, 0))
    assert "CPU (falls back" in config.summary()
    with pytest.warns(RuntimeWarning, match=r"enable_use_gpu\(\) \(GPU 0, Float32\): .*running on the CPU"):
        pred = create_predictor(config)
    assert pred._executor.place == CPUPlace()
    np.testing.assert_array_equal(pred.run([io["in:x"]])[0], create_predictor(Config(MLP)).run([io["in:x"]])[0])


def test_tensorrt_half_without_a_gpu_falls_back_to_float32():
    io = _io()
    config = Config(MLP)
    config.enable_tensorrt_engine(1 << 30, 1, 3, PrecisionType.Half, False, False)
    assert config.tensorrt_engine_enabled() and config.tensorrt_precision_mode() is PrecisionType.Half
    rows = _rows(config.summary())
    assert rows["use_tensorrt"] == "true" and rows["tensorrt_precision_mode"] == "fp16"
    assert rows["keel_device"].startswith("CPU (falls back") and rows["keel_precision"] == "Float32"
    with pytest.warns(RuntimeWarning, match=r"enable_tensorrt_engine\(\) \(GPU 0, Half\)"):
        pred = create_predictor(config)
    assert pred._executor.place == CPUPlace() and pred._report["convert_to_fp16"].status.startswith("skipped")
    np.testing.assert_allclose(pred.run([io["in:x"]])[0], io["out:0"], rtol=1e-5, atol=1e-6)


def test_tensorrt_half_runs_float16_on_keels_gpu_path(fake_cupy):
    io = _io()
    config = Config(MLP)
    config.enable_use_gpu(100, 0)
    config.enable_tensorrt_engine(1 << 30, 1, 3, PrecisionType.Half, False, False)
    rows = _rows(config.summary())
    assert rows["keel_device"] == "GPU 0 through Keel's GPU path (cupy; no TensorRT)"
    assert rows["keel_precision"] == "Half"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        pred = create_predictor(config)
    assert pred._executor.place == CUDAPlace(0) and pred._report["convert_to_fp16"].status == "ran"
    weights = [n for n in pred._params if pred._params.get(n).ndim == 2]
    assert weights and all(pred._params.get(n).dtype == np.float16 for n in weights)
    got = pred.run([io["in:x"]])[0]
    assert got.dtype == np.float32   # inputs and outputs stay float32 (enable_low_precision_io: not)
    np.testing.assert_allclose(got, io["out:0"], rtol=2e-2, atol=2e-2)


def test_mixed_precision_ops_choose_what_stays_float32(fake_cupy):
    config = Config(MLP)
    config.enable_use_gpu(100, 0, PrecisionType.Half)
    config.exp_disable_mixed_precision_ops({"fc"})
    pred = create_predictor(config)
    assert all(pred._params.get(n).dtype == np.float32 for n in pred._params)


def test_model_buffer_is_refused_with_what_to_do():
    config = Config()
    config.set_model_buffer(b"", 0, b"", 0)
    assert config.model_from_memory()
    with pytest.raises(PredictorError, match="from files only"):
        create_predictor(config)


# -- handles, hooks, pool, conversion ----------------------------------------------------------
def test_tensor_handle_lod_and_shared_data():
    io = _io()
    pred = create_predictor(Config(MLP))
    handle = pred.get_input_handle(pred.get_input_names()[0])
    assert handle.lod() == []
    x = io["in:x"].copy()
    handle.share_external_data(x)
    pred.run()
    first = pred.get_output_handle(pred.get_output_names()[0]).copy_to_cpu()
    x *= 2   # shared, not copied: the next run reads the new values
    pred.run()
    second = pred.get_output_handle(pred.get_output_names()[0]).copy_to_cpu()
    np.testing.assert_array_equal(second, pred.run([io["in:x"] * 2])[0])
    assert not np.array_equal(first, second)
    with pytest.raises(PredictorError, match="share_external_data"):
        handle.share_external_data_by_ptr_name(0, [1], None)


def test_hooks_see_every_op_and_intermediates_can_be_cleared():
    io = _io()
    pred = create_predictor(_config(MLP, switch_ir_optim=(False,)))
    seen = []
    pred.register_output_hook(lambda op_type, name, tensor: seen.append((op_type, name, tensor.copy_to_cpu())))
    got, = pred.run([io["in:x"]])
    ops = [op for op in pred._program.global_block().ops if op.type not in ("feed", "fetch")]
    assert [t for t, _, _ in seen] == [op.type for op in ops for _ in op.output_arg_names]
    np.testing.assert_array_equal(seen[-1][2], got)
    assert pred._scope.local_var_names()
    pred.clear_intermediate_tensor()
    assert not pred._scope.local_var_names() and pred.try_shrink_memory() == 0
    np.testing.assert_array_equal(pred.run([io["in:x"]])[0], got)   # the parameters stay
    with pytest.raises(PredictorError, match="callable"):
        pred.register_input_hook("print")


def test_predictor_pool_shares_one_model():
    io = _io()
    pool = inference.PredictorPool(Config(MLP), 3)
    first, third = pool.retrieve(0), pool.retrieve(2)
    assert third._params is first._params and third is not first
    np.testing.assert_array_equal(third.run([io["in:x"]])[0], first.run([io["in:x"]])[0])
    with pytest.raises(PredictorError, match="holds 3"):
        pool.retrieve(3)


def test_convert_to_mixed_precision_writes_a_float16_pair(tmp_path):
    io = _io()
    out = tmp_path / "half"
    inference.convert_to_mixed_precision(MLP + ".pdmodel", MLP + ".pdiparams", str(out) + ".pdmodel",
                                         str(out) + ".pdiparams", PrecisionType.Half, inference.PlaceType.GPU)
    program = pg.io.load_program(str(out) + ".pdmodel")
    dtypes = {program.global_block().var(n).dtype for n, _, _ in pg.io.persistable_specs(program)}
    assert dtypes == {pg.dtypes.to_code("float16")}
    got, = create_predictor(Config(str(out))).run([io["in:x"]])
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, io["out:0"], rtol=2e-2, atol=2e-2)
    with pytest.raises(NotImplementedError, match="Int8"):
        inference.convert_to_mixed_precision(MLP + ".pdmodel", MLP + ".pdiparams", "a", "b", PrecisionType.Int8)


# -- PaddlePaddle's documented inference script, its import line changed ----------------------------
TUTORIAL = '''
import numpy as np
import keel.inference as paddle_infer      # was: import paddle.inference as paddle_infer


def main(model_file, params_file):
    config = paddle_infer.Config(model_file, params_file)
    config.enable_use_gpu(1000, 0)
    config.enable_tensorrt_engine(workspace_size=1 << 30, max_batch_size=1, min_subgraph_size=3,
                                  precision_mode=paddle_infer.PrecisionType.Half,
                                  use_static=False, use_calib_mode=False)
    config.enable_memory_optim()
    config.switch_ir_optim(True)
    config.disable_glog_info()
    print(config.summary())
    predictor = paddle_infer.create_predictor(config)
    input_names = predictor.get_input_names()
    input_handle = predictor.get_input_handle(input_names[0])
    fake_input = np.random.randn(2, 3, 32, 32).astype("float32")
    input_handle.reshape([2, 3, 32, 32])
    input_handle.copy_from_cpu(fake_input)
    predictor.run()
    output_names = predictor.get_output_names()
    output_handle = predictor.get_output_handle(output_names[0])
    output_data = output_handle.copy_to_cpu()
    print("Output data size is {}".format(output_data.size))
    print("Output data shape is {}".format(output_data.shape))
    return fake_input, output_data
'''


def _run_tutorial():
    namespace = {}
    exec(compile(TUTORIAL, "paddle_inference_tutorial.py", "exec"), namespace)  # noqa: S102
    model = FIXTURES / "paddle" / "mobilenet_v2"
    return namespace["main"](f"{model}.pdmodel", f"{model}.pdiparams")


def test_inference_tutorial_without_a_gpu_runs_float32_on_the_cpu(capsys):
    with pytest.warns(RuntimeWarning, match=r"enable_tensorrt_engine\(\) \(GPU 0, Half\)"):
        x, out = _run_tutorial()
    printed = capsys.readouterr().out
    assert "| use_tensorrt " in printed and "Output data shape is (2, 10)" in printed
    want, = create_predictor(Config(str(FIXTURES / "paddle" / "mobilenet_v2"))).run([x])
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_inference_tutorial_on_keels_gpu_path_runs_float16(fake_cupy, capsys):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x, out = _run_tutorial()
    assert "GPU 0 through Keel's GPU path" in capsys.readouterr().out
    want, = create_predictor(Config(str(FIXTURES / "paddle" / "mobilenet_v2"))).run([x])
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, want, rtol=5e-2, atol=5e-2 * float(np.abs(want).max()))
