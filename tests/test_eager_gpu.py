"""Eager mode on a GPU place: tensors made there (`to_tensor(place=)`, `Layer.to("gpu")`),
ops, backward and optimizer steps run there with the CPU's results. Through the cupy
stand-in (tests/fake_cupy) everywhere; on a real device where cupy and one exist."""
import numpy as np
import pytest

import keel as paddle
from keel.executor.place import CPUPlace, CUDAPlace, place_of_device
from keel.kernels.array_module import cupy_available


def _losses(device_plan, steps=4):
    """Train a small MLP eagerly for `steps` steps; before step i move the layer (and the
    batch) to device_plan[i]. Returns the losses and the device type of each step's loss."""
    paddle.seed(3)
    net = paddle.nn.Sequential(paddle.nn.Linear(6, 8), paddle.nn.ReLU(), paddle.nn.Linear(8, 3))
    opt = paddle.optimizer.Adam(0.05, parameters=net.parameters())
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((5, 6)).astype("float32"), rng.integers(0, 3, (5, 1))
    losses, kinds = [], []
    for i in range(steps):
        net.to(device_plan[i])
        xs = paddle.to_tensor(x, place=place_of_device(device_plan[i]))
        ys = paddle.to_tensor(y, place=place_of_device(device_plan[i]))
        loss = paddle.nn.CrossEntropyLoss()(net(xs), ys)
        loss.backward()
        opt.step()
        opt.clear_grad()
        kinds.append(type(loss.place).__name__)
        assert all(type(p.place) is type(loss.place) for p in net.parameters())
        losses.append(float(loss))
    return losses, kinds


def _check_gpu_training_matches_cpu():
    want, _ = _losses(["cpu"] * 4)
    got, kinds = _losses(["gpu"] * 4)
    assert kinds == ["CUDAPlace"] * 4
    np.testing.assert_allclose(got, want, rtol=1e-5)
    moved, kinds = _losses(["cpu", "gpu", "gpu", "cpu"])   # Adam's moments move with the parameters
    assert kinds == ["CPUPlace", "CUDAPlace", "CUDAPlace", "CPUPlace"]
    np.testing.assert_allclose(moved, want, rtol=1e-5)


def test_eager_training_on_the_gpu_stand_in_matches_the_cpu(fake_cupy):
    _check_gpu_training_matches_cpu()
    t = paddle.to_tensor([1.0, 2.0], place=CUDAPlace(0), stop_gradient=False)
    assert type(t.place) is CUDAPlace and type(t.value) is fake_cupy.ndarray
    (t * t).sum().backward()
    assert type(t.grad.value) is fake_cupy.ndarray and t.grad.numpy().tolist() == [2.0, 4.0]
    assert isinstance(paddle.to_tensor(t, place=CPUPlace()).value, np.ndarray)


@pytest.mark.gpu
@pytest.mark.skipif(not cupy_available(), reason="needs cupy and a CUDA device")
def test_eager_training_on_a_real_gpu_matches_the_cpu():
    _check_gpu_training_matches_cpu()


def test_device_names_and_a_clear_error_for_others():
    assert place_of_device("cpu") == CPUPlace() and place_of_device("gpu:1") == CUDAPlace(1)
    assert place_of_device("GPU") == CUDAPlace(0)
    for bad in ("xpu:0", "gpu:x", "", 3):
        with pytest.raises(ValueError, match="unknown device"):
            place_of_device(bad)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        paddle.nn.Linear(2, 2).to("tpu")
