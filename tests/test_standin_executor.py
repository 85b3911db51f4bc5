"""The GPU path end to end on the cupy stand-in (tests/fake_cupy), on every machine: training
an MLP and a CNN with Executor(CUDAPlace(0)) against the same steps on the CPU from the
same initial weights; the model families initialized and trained on the device; NaN
checking and the concurrent runner there; a saved inference model through the Predictor
with enable_use_gpu against the CPU's; a training step reading back nothing but its
fetches. Also: the stand-in catches what a real GPU catches (a numpy call on a device
array, a numpy operand in a cupy call) where the CPU path runs happily, and it is gone
again after the tests that install it. Cases that fail for reasons another change owns
(the random state in checkpoints, device selection) are xfail, not strict."""
import numpy as np
import pytest

import keel.program as pg
import standin
import test_model_families
import test_training
from keel.executor import (CPUPlace, CUDAPlace, ExecutionError, Executor, NonFiniteError, Scope, load_checkpoint,
                      save_checkpoint)
from keel.executor.inference import Config, PrecisionType, create_predictor
from keel.kernels import registry as kernel_registry
from keel.kernels.array_module import cupy_available, get_array_module

STEPS = 3


def _to_device_scope(cpu_scope, cupy):
    scope = Scope()
    for name in cpu_scope:
        scope.set(name, cupy.asarray(cpu_scope.get(name)))
    return scope


def _train_both(main, startup, loss, batches, cupy, fetch_extra=()):
    """STEPS training steps on the CPU and on the device from the same initial weights
    (the CPU's startup run): per step, the fetched values of both; and both scopes."""
    cpu_exe, cpu_scope = Executor(CPUPlace()), Scope()
    cpu_exe.run(startup, scope=cpu_scope)
    gpu_exe, gpu_scope = Executor(CUDAPlace(0)), _to_device_scope(cpu_scope, cupy)
    fetches = [loss, *fetch_extra]
    cpu_out, gpu_out = [], []
    for feed in batches:
        cpu_out.append(cpu_exe.run(main, feed=feed, fetch_list=fetches, scope=cpu_scope))
        gpu_out.append(gpu_exe.run(main, feed=feed, fetch_list=fetches, scope=gpu_scope))
    return cpu_out, gpu_out, cpu_scope, gpu_scope


def _assert_same_training(cpu_out, gpu_out, cpu_scope, gpu_scope, rtol):
    for step, (want, got) in enumerate(zip(cpu_out, gpu_out)):
        for w, g in zip(want, got):
            assert isinstance(g, np.ndarray), f"step {step}: a fetch came back as {type(g).__name__}"
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=f"step {step}")
    for name in cpu_scope:
        value = gpu_scope.get(name)
        assert standin.is_device(value), f"{name} left the device: {type(value).__name__} in the scope"
        np.testing.assert_allclose(standin.to_host(value), cpu_scope.get(name), rtol=rtol, atol=rtol,
                                   err_msg=f"{name} after {STEPS} steps")


def test_mlp_trains_on_the_device_as_on_the_cpu(fake_cupy):
    main, startup, _, loss, logits = test_training.build_mlp(lambda: pg.optimizer.Adam(0.01), hidden=16)
    x, y = test_training.batches(1)[0]
    batches = [{"x": x, "label": y}] * STEPS
    cpu_out, gpu_out, cpu_scope, gpu_scope = _train_both(main, startup, loss, batches, fake_cupy, [logits])
    _assert_same_training(cpu_out, gpu_out, cpu_scope, gpu_scope, rtol=1e-5)
    assert cpu_out[-1][0] < cpu_out[0][0]  # it learns


def test_cnn_trains_on_the_device_as_on_the_cpu(fake_cupy):
    """Convolutions (plain, strided, depthwise, 1x1), batch norm with its running
    statistics updated in place, max and adaptive pooling, a residual add, Adam."""
    main, startup, _, logits, loss, feed = test_model_families.build("cnn")
    cpu_out, gpu_out, cpu_scope, gpu_scope = _train_both(main, startup, loss, [feed] * STEPS, fake_cupy,
                                                         [logits])
    _assert_same_training(cpu_out, gpu_out, cpu_scope, gpu_scope, rtol=1e-4)
    assert cpu_out[-1][0] < cpu_out[0][0]


def _cnn_with_soft_labels():
    """The CNN family with a soft-label loss (hard labels are range-checked: one bool read
    back per step) and per-parameter gradient clipping by norm."""
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 7
    with pg.program_guard(main, startup), pg.unique_name.guard():
        logits, _, feed = test_model_families.cnn()
        target = pg.data("target", [-1, 10])
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, target, soft_label=True))
        pg.optimizer.Adam(1e-3, grad_clip=pg.nn.ClipGradByNorm(0.05)).minimize(loss)
    feed = {"image": feed["image"], "target": np.full((2, 10), 0.1, np.float32)}
    return main, startup, loss, logits, feed


def test_a_training_step_reads_back_only_its_fetches(fake_cupy):
    """No kernel of a training step synchronises with the host (conv, adaptive pooling,
    batch norm, clipping by norm, Adam...): the only reads back are the fetched values."""
    main, startup, loss, logits, feed = _cnn_with_soft_labels()
    cpu_exe, cpu_scope = Executor(CPUPlace()), Scope()
    cpu_exe.run(startup, scope=cpu_scope)
    exe, scope = Executor(CUDAPlace(0)), _to_device_scope(cpu_scope, fake_cupy)
    want = [cpu_exe.run(main, feed=feed, fetch_list=[loss, logits], scope=cpu_scope) for _ in range(2)]
    exe.run(main, feed=feed, fetch_list=[loss, logits], scope=scope)  # compiles the plan
    standin.reset_counts()
    got = exe.run(main, feed=feed, fetch_list=[loss, logits], scope=scope)
    assert standin.syncs() == {"get": 2}
    for g, w in zip(got, want[1]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", ["mlp", "cnn", "transformer"])
def test_the_model_families_train_from_a_device_startup(fake_cupy, family):
    """Initialized on the device (random init kernels on cupy's Generator), trained there
    (dropout masks drawn there too): reproducible for a seed, the loss goes down, every
    value stays on the device, and the evaluation program gives the CPU's outputs for the
    device's weights."""
    main, startup, test_program, logits, loss, feed = test_model_families.build(family)
    inits = []
    for _ in range(2):
        exe, scope = Executor(CUDAPlace(0)), Scope()
        exe.run(startup, scope=scope)
        inits.append({name: standin.to_host(scope.get(name)) for name in scope})
    for name, value in inits[0].items():
        np.testing.assert_array_equal(value, inits[1][name], err_msg=f"{name}: same seed, other numbers")
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0]) for _ in range(8)]
    assert np.isfinite(losses).all() and losses[-1] < losses[0]
    assert all(standin.is_device(scope.get(name)) for name in scope)
    infer_feed = {k: v for k, v in feed.items() if k != "label"}
    got, = exe.run(test_program, feed=infer_feed, fetch_list=[logits], scope=scope)
    cpu_scope = Scope()
    for name in scope:
        cpu_scope.set(name, standin.to_host(scope.get(name)))
    want, = Executor(CPUPlace()).run(test_program, feed=infer_feed, fetch_list=[logits], scope=cpu_scope)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_nan_checking_and_the_concurrent_runner_on_the_device(fake_cupy):
    main, startup, test_program, logits, loss, feed = test_model_families.build("transformer")
    cpu_scope = Scope()
    Executor(CPUPlace()).run(startup, scope=cpu_scope)
    ids = {"ids": feed["ids"]}
    want, = Executor(CPUPlace()).run(test_program, feed=ids, fetch_list=[logits], scope=cpu_scope)
    for exe in (Executor(CUDAPlace(0), num_threads=2), Executor(CUDAPlace(0), check_nan_inf=True)):
        got, = exe.run(test_program, feed=ids, fetch_list=[logits], scope=_to_device_scope(cpu_scope, fake_cupy))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    scope = _to_device_scope(cpu_scope, fake_cupy)
    scope.set("embedding_0.w_0", fake_cupy.full((50, 32), np.nan, dtype=np.float32))
    with pytest.raises(NonFiniteError, match=r"variable 'embedding_0.w_0' \(read from the scope"):
        Executor(CUDAPlace(0), check_nan_inf=True).run(test_program, feed=ids, fetch_list=[logits], scope=scope)


def test_a_checkpoint_of_a_device_run_saves_and_restores(tmp_path, fake_cupy):
    """cupy's Generator has no serializable state (its bit generator's `state` is a method);
    the executor's random stream is a seed and a counter Keel owns, so it checkpoints on a
    GPU as on the CPU."""
    main, startup, _, loss, _ = test_training.build_mlp(lambda: pg.optimizer.Adam(0.01), dropout=0.3)
    exe, scope = Executor(CUDAPlace(0)), Scope()
    exe.run(startup, scope=scope)
    x, y = test_training.batches(1)[0]
    exe.run(main, feed={"x": x, "label": y}, fetch_list=[loss], scope=scope)
    save_checkpoint(tmp_path / "run.ckpt", main, exe, scope)
    again = Scope()
    load_checkpoint(tmp_path / "run.ckpt", main, exe, again)
    assert {p.name for p in main.all_parameters()} <= set(again)
    for name in again:
        np.testing.assert_array_equal(standin.to_host(again.get(name)), standin.to_host(scope.get(name)))


@pytest.mark.parametrize("threads, moved", [
    (1, False), (1, True), (2, False),
], ids=["serial", "serial, the caller's device changed after", "2 threads"])
def test_cuda_place_1_keeps_everything_on_device_1(monkeypatch, threads, moved):
    """With two devices, CUDAPlace(1) runs every kernel on device 1, whatever device the
    calling thread (or a worker thread) has current: the stand-in, like cupy without peer
    access, refuses an operation on arrays of another device than the current one."""
    cupy = standin.install(monkeypatch, device_count=2)
    main, startup, _, logits, loss, feed = test_model_families.build("transformer")
    exe, scope = Executor(CUDAPlace(1), num_threads=threads), Scope()
    exe.run(startup, scope=scope)
    if moved:
        cupy.cuda.Device(0).use()  # e.g. the caller used another executor meanwhile
    exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    assert {scope.get(name).device.id for name in scope} == {1}


# -- the Predictor ------------------------------------------------------------------------------

def _trained_cnn(tmp_path):
    main, startup, test_program, logits, loss, feed = test_model_families.build("cnn")
    exe, scope = Executor(CPUPlace()), Scope()
    exe.run(startup, scope=scope)
    for _ in range(2):  # moves the batch-norm statistics away from their initial values
        exe.run(main, feed=feed, fetch_list=[loss], scope=scope)
    prefix = str(tmp_path / "cnn")
    pg.io.save_inference_model(prefix, [test_program.global_block().var("image")], [logits], exe,
                               program=test_program, scope=scope)
    return prefix, feed["image"]


@pytest.mark.parametrize("ir_optim, precision", [(False, PrecisionType.Float32), (True, PrecisionType.Float32),
                                                 (True, PrecisionType.Half)],
                         ids=["as saved", "inference passes", "inference passes, float16"])
def test_predictor_on_the_device_gives_the_cpus_results(tmp_path, fake_cupy, ir_optim, precision):
    """The saved CNN through the Predictor on the CPU and with enable_use_gpu: the same
    outputs (float16 on the device: to float16's precision), parameters on the device."""
    prefix, image = _trained_cnn(tmp_path)
    cpu = Config(prefix)
    cpu.switch_ir_optim(ir_optim)
    want, = create_predictor(cpu).run([image])
    config = Config(prefix)
    config.switch_ir_optim(ir_optim)
    config.enable_use_gpu(100, 0, precision)
    pred = create_predictor(config)
    assert pred._executor.place == CUDAPlace(0)
    assert all(standin.is_device(pred._params.get(name)) for name in pred._params)
    pred.get_input_handle(pred.get_input_names()[0]).copy_from_cpu(image)
    pred.run()
    got = pred.get_output_handle(pred.get_output_names()[0]).copy_to_cpu()
    again, = pred.run([image])
    for out in (got, again):
        assert isinstance(out, np.ndarray) and out.dtype == want.dtype and out.shape == want.shape == (2, 10)
        tol = 2e-2 if precision is PrecisionType.Half else 1e-5
        np.testing.assert_allclose(out, want, rtol=tol, atol=tol * float(np.abs(want).max()))


def test_lod_feeds_on_the_device(tmp_path, fake_cupy):
    """A LoD fed to roi_align and warpctc (tests/test_lod_feeds.py) on the device gives the
    CPU's results (values and gradients), through the Executor and the Predictor's set_lod."""
    import test_lod_feeds as lod
    from keel.executor import create_lod_tensor
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    rois = lod._boxes(5, seed=1)
    packed, labels = lod._ctc_data()
    roi_main, out, dx = lod._roi_program("roi_align", with_num=False)
    ctc_main, loss, dlogits = lod._ctc_program(True)

    def roi_feed():
        return {"x": x, "rois": create_lod_tensor(rois, [lod.LENGTHS])}

    def ctc_feed():
        return {"logits": create_lod_tensor(packed, [lod.CTC_T]), "label": create_lod_tensor(labels, [lod.CTC_L]),
                "seed": np.ones((3, 1), np.float32)}

    cpu_roi = None
    for main, make_feed, fetches in [(roi_main, roi_feed, [out, dx]), (ctc_main, ctc_feed, [loss, dlogits])]:
        want = Executor(CPUPlace()).run(main, feed=make_feed(), fetch_list=fetches, scope=Scope())
        got = Executor(CUDAPlace(0)).run(main, feed=make_feed(), fetch_list=fetches, scope=Scope())
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
        cpu_roi = want[0] if cpu_roi is None else cpu_roi
    infer = roi_main.clone(for_test=True)
    block = infer.global_block()
    pg.io.save_inference_model(tmp_path / "roi", [block.var("x"), block.var("rois")], [block.var("out")],
                               Executor(), program=infer, scope=Scope())
    config = Config(str(tmp_path / "roi"))
    config.enable_use_gpu(100, 0)
    pred = create_predictor(config)
    pred.get_input_handle("x").copy_from_cpu(x)
    pred.get_input_handle("rois").copy_from_cpu(rois)
    pred.get_input_handle("rois").set_lod([[0, 2, 5]])
    pred.run()
    np.testing.assert_allclose(pred.get_output_handle("out").copy_to_cpu(), cpu_roi, rtol=1e-6, atol=1e-7)


# -- the stand-in catches GPU-path bugs the CPU path hides ---------------------------------------

def _with_kernel(monkeypatch, op_type, fn):
    """Replace `op_type`'s kernel function for this test (the registry entry is restored after)."""
    import dataclasses
    kdef = kernel_registry.get(op_type)
    monkeypatch.setitem(kernel_registry._KERNELS, op_type, dataclasses.replace(kdef, fn=fn, specialize=None))


def _relu_program():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 4])
        y = pg.relu(x * 2.0)
    return main, y


def _host_conversion_relu(xp, x):
    return xp.asarray(np.maximum(np.asarray(x), 0))  # a numpy call on a device array


def _numpy_operand_relu(xp, x):
    return xp.maximum(x, np.zeros(x.shape, x.dtype))  # a host array in a cupy call


@pytest.mark.parametrize("bug", [_host_conversion_relu, _numpy_operand_relu],
                         ids=["np.asarray(device array)", "numpy operand in a cupy call"])
def test_the_stand_in_catches_what_the_cpu_path_hides(monkeypatch, fake_cupy, bug):
    _with_kernel(monkeypatch, "relu", bug)
    main, y = _relu_program()
    x = np.array([[-1.0, 0.5, 2.0, -3.0]], np.float32)
    cpu, = Executor(CPUPlace()).run(main, feed={"x": x}, fetch_list=[y], scope=Scope())
    np.testing.assert_array_equal(cpu, [[0, 1, 4, 0]])  # numpy runs the buggy kernel happily
    with pytest.raises(ExecutionError, match=r"relu \(op \d+\) failed .*TypeError"):
        Executor(CUDAPlace(0)).run(main, feed={"x": x}, fetch_list=[y], scope=Scope())


@pytest.mark.parametrize("bug", [_host_conversion_relu, _numpy_operand_relu],
                         ids=["np.asarray(device array)", "numpy operand in a cupy call"])
def test_the_kernel_tests_on_the_stand_in_catch_them_too(monkeypatch, fake_cupy, bug):
    from test_standin_kernels import device_call_kernel
    _with_kernel(monkeypatch, "relu", bug)
    with pytest.raises(TypeError):
        device_call_kernel("relu", {"X": np.array([-1.0, 2.0], np.float32)})


def test_the_stand_in_counts_host_synchronisation(monkeypatch, fake_cupy):
    """A kernel that reads a value back (here float() of a reduction) runs, but counted."""
    def syncing_relu(xp, x):
        if float(x.max()) <= 0:
            return xp.zeros_like(x)
        return xp.maximum(x, 0)
    _with_kernel(monkeypatch, "relu", syncing_relu)
    main, y = _relu_program()
    exe = Executor(CUDAPlace(0))
    x = np.ones((2, 4), np.float32)
    exe.run(main, feed={"x": x}, fetch_list=[y], scope=Scope())
    standin.reset_counts()
    exe.run(main, feed={"x": x}, fetch_list=[y], scope=Scope())
    assert standin.syncs() == {"float": 1, "get": 1}
    from test_standin_kernels import device_call_kernel
    with pytest.raises(AssertionError, match="relu read values back from the device"):
        device_call_kernel("relu", {"X": x})  # the kernel tests' read-back audit


def test_index_arrays_wrap_around_as_on_a_gpu(fake_cupy):
    """cupy's gathers do not check bounds: an index past the end wraps around (the stand-in
    too), where numpy raises."""
    x = np.arange(5.0)
    with pytest.raises(IndexError):
        x[np.array([7])]
    d = fake_cupy.asarray(x)
    idx = fake_cupy.asarray(np.array([7, -6]))
    np.testing.assert_array_equal(d[idx].get(), [2.0, 4.0])
    np.testing.assert_array_equal(fake_cupy.take(d, idx).get(), [2.0, 4.0])


# -- installed for a test only ------------------------------------------------------------------

def test_the_stand_in_is_installed_for_one_test_only(monkeypatch):
    import sys
    before = cupy_available(), sys.modules.get("cupy"), sys.modules.get("cupyx")
    with monkeypatch.context() as m:
        fake = standin.install(m)
        assert cupy_available() and get_array_module("gpu") is fake and CUDAPlace(0).xp is fake
        import cupy
        import cupyx
        assert cupy is fake and cupyx is standin.fake_cupyx
    assert (cupy_available(), sys.modules.get("cupy"), sys.modules.get("cupyx")) == before
    if before[1] is None:  # no real cupy here: the GPU path is unavailable again
        assert not cupy_available()
        with pytest.raises(RuntimeError, match="needs cupy"):
            get_array_module("gpu")
