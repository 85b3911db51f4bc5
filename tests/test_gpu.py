"""The GPU path (cupy): the same kernels and executor on CUDAPlace give the CPU's results.
Skipped cleanly where cupy or a CUDA device is missing."""
import numpy as np
import pytest

from keel.kernels.array_module import cupy_available

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not cupy_available(), reason="needs cupy and a CUDA device")]


def _mlp():
    import keel.program as pg
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 7
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x = pg.data("x", [-1, 16])
        label = pg.data("label", [-1, 1], "int64")
        h = pg.nn.fc(x, 32, activation="relu")
        logits = pg.nn.fc(h, 10)
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
    return main, startup, logits, loss


def test_mlp_forward_matches_cpu():
    from keel.executor import CPUPlace, CUDAPlace, Executor, Scope

    main, startup, logits, loss = _mlp()
    rng = np.random.default_rng(0)
    feed = {"x": rng.standard_normal((4, 16)).astype(np.float32), "label": rng.integers(0, 10, (4, 1))}
    cpu_scope, gpu_scope = Scope(), Scope()
    cpu, gpu = Executor(CPUPlace()), Executor(CUDAPlace(0))
    cpu.run(startup, scope=cpu_scope)
    import cupy
    for name in cpu_scope:  # the same initial weights on both devices
        gpu_scope.set(name, cupy.asarray(cpu_scope.get(name)))
    want = cpu.run(main, feed=feed, fetch_list=[logits, loss], scope=cpu_scope)
    got = gpu.run(main, feed=feed, fetch_list=[logits, loss], scope=gpu_scope)
    for w, g in zip(want, got):
        assert isinstance(g, np.ndarray)
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
