"""The GPU path's device handling, without a GPU: a tiny stand-in for cupy (installed in
sys.modules by each test) with CUDA's per-thread current device and numpy for the
arrays. It checks that every kernel call of a CUDAPlace executor runs with that
executor's device current, whichever thread calls it and however many executors there
are; that a GPU place runs serially (no thread pool); and that a GPU Predictor leaves
out the CPU-only column_major_weights pass."""
import dataclasses
import functools
import sys
import threading
import types
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import CPUPlace, CUDAPlace, Executor, Scope
from keel.executor.inference import Config, create_predictor
from keel.kernels import registry as kernel_registry

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "paddle"


class FakeCuda:
    """cupy.cuda as far as device selection goes: the current device is per thread (0 in
    a new thread), and a Device keeps one stack of previous devices, as cupy's does."""

    def __init__(self, count=2):
        self._local = threading.local()
        self.runtime = types.SimpleNamespace(getDeviceCount=lambda: count, getDevice=self.current)
        cuda = self

        class Device:
            def __init__(self, device=None):
                self.id = cuda.current() if device is None else int(device)
                self._stack = []

            def use(self):
                cuda._local.device = self.id

            def __enter__(self):
                self._stack.append(cuda.current())
                self.use()
                return self

            def __exit__(self, *exc):
                cuda._local.device = self._stack.pop()
        self.Device = Device

    def current(self) -> int:
        return getattr(self._local, "device", 0)


def fake_cupy(count=2):
    module = types.ModuleType("cupy")
    module.cuda = FakeCuda(count)
    module.asnumpy = np.asarray
    module.__getattr__ = lambda name: getattr(np, name)  # arrays: numpy's (PEP 562)
    return module


@pytest.fixture
def cupy(monkeypatch):
    module = fake_cupy()
    monkeypatch.setitem(sys.modules, "cupy", module)
    return module


CALLER = threading.local()  # .device: the executor's device the calling thread runs


@pytest.fixture
def calls(monkeypatch, cupy):
    """Every kernel call from now on appends (op type, current device, the calling
    thread's CALLER.device or None for a thread that is no caller, e.g. a pool's)."""
    log = []
    for op_type, kdef in kernel_registry.all_kernels().items():
        def recording(xp, *args, _fn=kdef.fn, _op=op_type, **kwargs):
            log.append((_op, cupy.cuda.current(), getattr(CALLER, "device", None)))
            return _fn(xp, *args, **kwargs)
        functools.update_wrapper(recording, kdef.fn)  # the signature the registry inspects
        # no specialized fast path: every op goes through its (recording) kernel
        monkeypatch.setitem(kernel_registry._KERNELS, op_type,
                            dataclasses.replace(kdef, fn=recording, specialize=None))
    return log


def _branchy_program():
    """Two independent branches (so the plan has levels with several steps) and dropout
    (a draw from the executor's stream)."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [-1, 4])
        a = pg.tanh(pg.scale(x, 2.0))
        b = pg.exp(pg.scale(x, 0.5))
        c = pg.sigmoid(pg.scale(x, -1.0))
        y = pg.nn.dropout(a + b + c, 0.25, dropout_implementation="upscale_in_train")
    return main, y


def _reference(feed):
    x = feed["x"]
    return np.tanh(2 * x) + np.exp(0.5 * x) + 1 / (1 + np.exp(x))


def test_every_kernel_call_runs_on_its_executors_device(cupy, calls):
    main, y = _branchy_program()
    feed = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)}
    exes = {dev: Executor(CUDAPlace(dev), num_threads=2, seed=dev) for dev in (0, 1)}
    assert all(exe._pool is None for exe in exes.values())  # a GPU place runs serially
    prepared = {dev: exe.prepare(main, ["x"], [y], Scope()) for dev, exe in exes.items()}
    errors = []

    def work(dev, rounds):
        CALLER.device = dev
        try:
            for i in range(rounds):
                out, = (prepared[dev](feed) if i % 2 else exes[dev].run(main, feed, [y], Scope()))
                kept = out != 0
                assert kept.any() and np.allclose(out[kept] * 0.75, _reference(feed)[kept], rtol=1e-5)
        except Exception as e:  # reported by the main thread
            errors.append(e)
        finally:
            CALLER.device = None

    threads = [threading.Thread(target=work, args=(dev, 6)) for dev in (1, 0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # and from this thread, whose current device is another one, which each run leaves as it was
    cupy.cuda.Device(1).use()
    work(0, 4)
    assert cupy.cuda.current() == 1
    cupy.cuda.Device(0).use()
    work(1, 4)
    assert cupy.cuda.current() == 0

    assert not errors, errors
    assert len(calls) > 0
    wrong = [call for call in calls if call[1] != call[2]]
    assert not wrong, f"(op, device, caller's device) of calls on the wrong device or thread: {wrong[:5]}"
    assert {dev for _, dev, _ in calls} == {0, 1}


def test_arrays_made_outside_a_run_go_to_the_executors_device(cupy, monkeypatch):
    made_on = []
    monkeypatch.setattr(cupy, "asarray", lambda v, *a, **k: made_on.append(cupy.cuda.current()) or np.asarray(v, *a, **k),
                        raising=False)
    exe = Executor(CUDAPlace(1))
    spec = (np.dtype(np.float32), (-1, 2), "float32[-1, 2]")
    exe.check_feed("x", spec, np.ones((3, 2), np.float32))   # a Predictor's copy_from_cpu does this
    exe.to_device(np.zeros(3))
    assert made_on == [1, 1] and cupy.cuda.current() == 0


def test_cpu_place_selects_no_device_and_keeps_its_thread_pool():
    exe = Executor(CPUPlace(), num_threads=2)
    assert exe._pool is not None
    assert CPUPlace().device_context() is CPUPlace().device_context()  # one shared no-op
    exe.close()


def test_gpu_predictor_leaves_out_the_cpu_layout_pass(cupy, calls):
    io = np.load(FIXTURES / "mlp_fc.io.npz")
    cpu = create_predictor(Config(str(FIXTURES / "mlp_fc")))
    assert cpu._report["column_major_weights"].status == "ran"
    config = Config(str(FIXTURES / "mlp_fc"))
    config.enable_use_gpu(100, 1)
    gpu = create_predictor(config)
    assert gpu._executor.place == CUDAPlace(1)
    assert gpu._report["column_major_weights"].status.startswith("skipped (a CPU memory layout")
    assert all(gpu._params.get(n).flags.c_contiguous for n in gpu._params)
    del calls[:]
    got, = gpu.run([io["in:x"]])
    assert calls and {dev for _, dev, _ in calls} == {1}
    np.testing.assert_allclose(got, cpu.run([io["in:x"]])[0], rtol=1e-6)
    np.testing.assert_allclose(got, io["out:0"], rtol=1e-5, atol=1e-6)
