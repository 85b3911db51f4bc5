"""Two small models built with Keel's vision layers, trained a few steps and round-tripped
through save_inference_model / load_inference_model:

- a spatial transformer: a localization net (conv2d, pool2d, fc) predicts an affine Theta,
  affine_grid + grid_sampler warp the image, a classifier reads the warped image; the
  gradient reaches the localization net only through grid_sampler and affine_grid;
- a UNet-like 3-D net: conv3d, pool3d (max and avg), conv3d_transpose and a skip concat,
  trained on a per-voxel regression.

And the other way: inference models PaddlePaddle 3.3.1 wrote with its own layers
(tests/fixtures/vision_models/, made by tests/fixtures/vision_models.py) load in Keel and give
PaddlePaddle's outputs. With PaddlePaddle installed (`paddle` marker), PaddlePaddle also loads
the files Keel wrote and gives Keel's outputs."""
import os
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.program.initializer import Constant, Normal
from keel.program.param_attr import ParamAttr


def spatial_transformer():
    img = pg.data("img", [-1, 1, 10, 10])
    label = pg.data("label", [-1, 1], "int64")
    h = pg.nn.conv2d(img, 4, 3, padding=1, act="relu")
    h = pg.nn.pool2d(h, 2, "max", 2)                                          # [N, 4, 5, 5]
    h = pg.nn.fc(pg.flatten(h), 16, activation="tanh")
    # the affine parameters start near the identity transform
    delta = pg.nn.fc(h, 6, weight_attr=ParamAttr(initializer=Normal(0.0, 0.05)),
                     bias_attr=ParamAttr(initializer=Constant(0.0)))
    theta = pg.reshape(delta + pg.assign(np.array([1, 0, 0, 0, 1, 0], np.float32)), [-1, 2, 3])
    grid = pg.nn.affine_grid(theta, [-1, 1, 8, 8], align_corners=False)      # [N, 8, 8, 2]
    warped = pg.nn.grid_sample(img, grid, padding_mode="border", align_corners=False)
    c = pg.nn.conv2d(warped, 6, 3, padding=1, act="relu")
    logits = pg.nn.fc(pg.flatten(pg.nn.pool2d(c, 2, "avg", 2)), 3)
    loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
    r = np.random.default_rng(0)
    feed = {"img": r.standard_normal((6, 1, 10, 10)).astype(np.float32),
            "label": r.integers(0, 3, (6, 1)).astype(np.int64)}
    return ["img"], [pg.nn.softmax(logits), warped], loss, feed


def unet3d():
    vol = pg.data("vol", [-1, 1, 8, 8, 8])
    target = pg.data("target", [-1, 2, 8, 8, 8])
    e1 = pg.nn.conv3d(vol, 4, 3, padding=1, act="relu")                      # [N, 4, 8, 8, 8]
    d1 = pg.nn.pool3d(e1, 2, "max", 2)                                       # [N, 4, 4, 4, 4]
    e2 = pg.nn.conv3d(d1, 8, 3, padding=1, act="relu")
    d2 = pg.nn.pool3d(e2, 2, "avg", 2)                                       # [N, 8, 2, 2, 2]
    b = pg.nn.conv3d(d2, 8, 1, act="relu")
    u2 = pg.nn.conv3d_transpose(b, 8, filter_size=2, stride=2)               # [N, 8, 4, 4, 4]
    u2 = pg.nn.conv3d(pg.concat([u2, e2], axis=1), 8, 3, padding=1, act="relu")
    u1 = pg.nn.conv3d_transpose(u2, 4, filter_size=2, stride=2)              # [N, 4, 8, 8, 8]
    out = pg.nn.conv3d(pg.concat([u1, e1], axis=1), 2, 1)                    # [N, 2, 8, 8, 8]
    loss = pg.mean(pg.square(out - target))
    r = np.random.default_rng(1)
    v = r.standard_normal((2, 1, 8, 8, 8)).astype(np.float32)
    feed = {"vol": v, "target": np.concatenate([np.tanh(v), -np.abs(v) / 2], axis=1).astype(np.float32)}
    return ["vol"], [out], loss, feed


MODELS = {"spatial_transformer": spatial_transformer, "unet3d": unet3d}
PADDLE_MODELS = Path(__file__).parent / "fixtures" / "vision_models"


@pytest.mark.parametrize("name", ["spatial", "volume"])
def test_paddle_written_models_give_paddles_outputs(name):
    """PaddlePaddle's layers wrote these (affine_grid, grid_sampler, max_pool2d_with_index +
    unpool, deformable_conv v1/v2, conv3d NCDHW/NDHWC, pool3d, max_pool3d_with_index,
    conv3d_transpose with its "NHWC" channel-last spelling)."""
    exe, scope = Executor(), Scope()
    prog, feeds, fetches = pg.io.load_inference_model(PADDLE_MODELS / name, exe, scope=scope)
    io = np.load(PADDLE_MODELS / f"{name}.io.npz")
    outs = exe.run(prog, feed={f: io[f"in:{f}"] for f in feeds}, fetch_list=fetches, scope=scope)
    assert len(outs) == len([k for k in io.files if k.startswith("out:")])
    for i, got in enumerate(outs):
        want = io[f"out:{i}"]
        assert got.shape == want.shape and got.dtype == want.dtype, i
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())),
                                   err_msg=f"{name} output {i}")


def _train(name, steps, lr):
    main, startup = pg.Program(), pg.Program()
    main.random_seed = startup.random_seed = 3
    with pg.program_guard(main, startup), pg.unique_name.guard():
        feeds, fetches, loss, feed = MODELS[name]()
        test_program = main.clone(for_test=True)
        pg.optimizer.Adam(lr).minimize(loss)
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    losses = [float(exe.run(main, feed=feed, fetch_list=[loss], scope=scope)[0]) for _ in range(steps)]
    return main, test_program, feeds, fetches, loss, feed, exe, scope, losses


def _params(main, scope):
    return {p.name: np.array(scope.get(p.name)) for p in main.global_block().all_parameters()}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_trains_and_round_trips_through_save_inference_model(name, tmp_path):
    main, test_program, feeds, fetches, loss, feed, exe, scope, losses = _train(name, 12, 0.01)
    assert all(np.isfinite(losses))
    assert losses[-1] < 0.9 * losses[0], losses
    ops = {op.type for op in main.global_block().ops}
    if name == "spatial_transformer":
        assert {"affine_grid", "grid_sampler", "affine_grid_grad", "grid_sampler_grad"} <= ops
    else:
        assert {"conv3d", "pool3d", "conv3d_transpose", "conv3d_grad", "pool3d_grad",
                "conv3d_transpose_grad"} <= ops
    inputs = {k: feed[k] for k in feeds}
    want = exe.run(test_program, feed=inputs, fetch_list=fetches, scope=scope)
    pg.io.save_inference_model(tmp_path / name, feeds, fetches, exe, program=main, scope=scope)
    exe2, scope2 = Executor(), Scope()
    prog, feed_names, fetch_targets = pg.io.load_inference_model(tmp_path / name, exe2, scope=scope2)
    assert feed_names == feeds
    got = exe2.run(prog, feed=inputs, fetch_list=fetch_targets, scope=scope2)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    kept = {op.type for op in prog.global_block().ops}
    assert not any(t.endswith("_grad") for t in kept)


def test_spatial_transformer_gradient_reaches_the_localization_net():
    """The fc predicting Theta is read only by affine_grid -> grid_sampler: its weights move
    only if both ops pass gradients through."""
    main, *_, scope, losses = _train("spatial_transformer", 0, 0.01)
    before = _params(main, scope)
    main, *_, scope, losses = _train("spatial_transformer", 3, 0.01)
    after = _params(main, scope)
    theta_fc = [n for n in before if n.startswith("fc_1.")]
    assert theta_fc and all(np.abs(after[n] - before[n]).max() > 1e-4 for n in theta_fc)


@pytest.mark.paddle
@pytest.mark.parametrize("name", sorted(MODELS))
def test_paddle_runs_keels_saved_model(name, tmp_path):
    """PaddlePaddle 3.3.1 loads the inference model Keel wrote (trained weights) and gives
    Keel's outputs."""
    os.environ.setdefault("FLAGS_enable_pir_api", "0")
    paddle = pytest.importorskip("paddle")
    main, test_program, feeds, fetches, loss, feed, exe, scope, _ = _train(name, 2, 0.01)
    inputs = {k: feed[k] for k in feeds}
    pg.io.save_inference_model(tmp_path / name, feeds, fetches, exe, program=main, scope=scope)
    want = exe.run(test_program, feed=inputs, fetch_list=fetches, scope=scope)
    paddle.enable_static()
    pexe = paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(paddle.static.Scope()):
        program, feed_names, fetch_vars = paddle.static.load_inference_model(str(tmp_path / name), pexe)
        got = pexe.run(program, feed={n: inputs[n] for n in feed_names}, fetch_list=fetch_vars)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5 * max(1.0, float(np.abs(w).max())))


@pytest.mark.parametrize("name", ["spatial", "volume"])
@pytest.mark.parametrize("ir_optim", [False, True])
def test_paddle_written_models_through_the_predictor(name, ir_optim):
    """The Predictor, with and without its inference passes (constant folding, fusions),
    gives PaddlePaddle's outputs for the vision models."""
    from keel.executor.inference import Config, create_predictor
    config = Config(str(PADDLE_MODELS / name))
    config.switch_ir_optim(ir_optim)
    pred = create_predictor(config)
    io = np.load(PADDLE_MODELS / f"{name}.io.npz")
    got = pred.run([io[f"in:{n}"] for n in pred.get_input_names()])
    for i, g in enumerate(got):
        want = io[f"out:{i}"]
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5 * max(1.0, float(np.abs(want).max())),
                                   err_msg=f"{name} output {i}")
