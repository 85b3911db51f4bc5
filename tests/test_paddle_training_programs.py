"""Training programs written by PaddlePaddle 3.3.1 (`main.desc.serialize_to_string()` after
`minimize`: *_grad ops, sgd/adam ops, op_role attributes, the fill_constant seeding
loss@GRAD) run in our executor: from Paddle's initial parameters and batches, the loss
trajectory and the final parameters match what PaddlePaddle computed (fixtures made by
tests/fixtures/paddle/generate.py)."""
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "paddle"

# convbn_adam: the conv bias feeds batch_norm, which cancels it, so its true gradient is 0
# and Adam turns float noise into +-lr steps; the bias and the running mean that tracks
# it are not compared.
NOISE = {"mlp_sgd": (), "convbn_adam": ("conv2d_0.b_0", "batch_norm2d_0.w_1")}


@pytest.mark.parametrize("name, min_checked", [("mlp_sgd", 5), ("convbn_adam", 20)])
def test_paddle_training_program_replays(name, min_checked):
    data = np.load(FIXTURES / f"{name}.train.trajectory.npz", allow_pickle=False)
    main = pg.Program.parse_from_string((FIXTURES / f"{name}.train.pdmodel").read_bytes())
    assert any(op.type.endswith("_grad") for op in main.global_block().ops)
    scope = Scope()
    for key in data.files:
        if key.startswith("param:"):
            scope.set(key[len("param:"):], data[key].copy())
    exe = Executor(CPUPlace())
    loss_name = str(data["loss_name"].reshape(-1)[0])
    steps = len(data["loss"])
    losses = [float(exe.run(main, feed={str(f): data[f"batch{i}:{f}"] for f in data["feed_names"]},
                            fetch_list=[loss_name], scope=scope)[0]) for i in range(steps)]
    np.testing.assert_allclose(losses, data["loss"], rtol=1e-5)
    checked = 0
    for key in data.files:
        param = key[len("final:"):]
        if not key.startswith("final:") or param.startswith(NOISE[name]):
            continue
        want = data[key]
        np.testing.assert_allclose(np.asarray(scope.get(param)), want, rtol=1e-5,
                                   atol=1e-5 * max(float(np.abs(want).max()), 1e-3), err_msg=param)
        checked += 1
    assert checked >= min_checked
