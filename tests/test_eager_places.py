"""Eager tensors between places (keel/executor/eager_places.py): Tensor.place, cpu(), cuda(),
pin_memory() and to(), as PaddlePaddle 3.3's. A move to another place is a copy that starts
a new leaf with the source's stop_gradient (PaddlePaddle's _copy_to records no gradient
node), a move to the same place is the tensor itself, and a dtype change is the recorded
cast op, so gradients flow back through it to the source's place. The GPU path runs on the
cupy stand-in (tests/fake_cupy)."""
import numpy as np
import pytest

import keel as paddle
from keel.executor.place import CPUPlace, CUDAPinnedPlace, CUDAPlace


def _leaf(values, dtype="float32"):
    return paddle.to_tensor(np.asarray(values, dtype), stop_gradient=False)


def test_a_move_to_the_place_the_tensor_is_on_is_the_tensor_itself():
    x = _leaf([1.0, 2.0])
    assert x.cpu() is x and x.to("cpu") is x and x.to(CPUPlace()) is x and x.to("float32") is x
    assert x.to(x) is x and x.to(device="cpu", dtype="float32", blocking=False) is x
    assert type(x.place) is CPUPlace and not x.is_cuda


def test_cuda_copies_to_the_gpu_as_a_new_leaf_that_collects_its_own_gradient(fake_cupy):
    x = _leaf([1.0, 2.0, 3.0])
    y = x.cuda()
    assert type(y.place) is CUDAPlace and y.place.device_id == 0 and y.is_cuda
    assert type(y.value) is fake_cupy.ndarray and type(x.value) is np.ndarray
    assert y.is_leaf and y.stop_gradient is False and y.cuda() is y
    (y * y).sum().backward()
    assert type(y.grad.value) is fake_cupy.ndarray and y.grad.numpy().tolist() == [2.0, 4.0, 6.0]
    assert x.grad is None                                  # the copy is not recorded
    back = y.cpu()
    assert type(back.value) is np.ndarray and back.numpy().tolist() == [1.0, 2.0, 3.0] and back.is_leaf
    data = paddle.to_tensor([1.0])
    assert data.cuda().stop_gradient is True              # stop_gradient travels with the copy


def test_cuda_takes_a_device_id_and_defaults_to_set_devices_gpu(fake_cupy):
    x = paddle.to_tensor([1.0])
    assert x.cuda(0).place == CUDAPlace(0) and x.to("gpu:0").place == CUDAPlace(0)
    with pytest.raises(ValueError, match="device_id must be an int or None"):
        x.cuda("0")
    with pytest.raises(ValueError, match="finds 1 usable CUDA device"):
        x.cuda(3)


def test_without_a_gpu_cuda_says_what_is_missing():
    with pytest.raises(ValueError, match="usable CUDA device"):
        paddle.to_tensor([1.0]).cuda()
    with pytest.raises(RuntimeError, match="pinned memory needs cupy"):
        paddle.to_tensor([1.0]).pin_memory()


def test_to_a_dtype_is_the_cast_op_and_gradients_flow_back_through_it(fake_cupy):
    x = _leaf([1.0, 2.0]).cuda()                           # a leaf on the GPU
    z = x.to("float64")
    assert z.dtype == paddle.float64 and not z.is_leaf and type(z.value) is fake_cupy.ndarray
    (z * z).sum().backward()
    assert type(x.grad.value) is fake_cupy.ndarray and x.grad.dtype == paddle.float32
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])
    w = _leaf([3.0]).to("cpu", "float64")                  # cast on the CPU, then no move
    assert w.dtype == paddle.float64 and not w.is_leaf


def test_to_takes_paddles_three_forms(fake_cupy):
    x = paddle.to_tensor([1, 2, 3])                        # int64 on the CPU
    other = paddle.to_tensor([1.0], dtype="float16", place=CUDAPlace(0))
    for moved in (x.to(other), x.to(other, True), x.to(other=other)):
        assert moved.dtype == paddle.float16 and moved.place == CUDAPlace(0)
        assert moved.numpy().tolist() == [1.0, 2.0, 3.0]
    assert x.to("gpu", "int16").dtype == paddle.int16 and x.to("gpu", "int16").is_cuda
    assert x.to(paddle.float32).dtype == paddle.float32 and x.to(np.int32, False).dtype == paddle.int32
    assert x.to(device=CUDAPlace(0)).is_cuda and x.to(dtype="float64").place == CPUPlace()
    with pytest.raises(TypeError, match="unexpected keyword argument 'place'"):
        x.to(place="cpu")
    with pytest.raises(TypeError, match="blocking must be"):
        x.to("cpu", None, "yes")
    with pytest.raises(TypeError, match="got 0 arguments"):
        x.to()
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        x.to("tpu")


def test_pin_memory_copies_into_pinned_host_memory_that_ops_read_on_the_cpu(fake_cupy):
    x = _leaf([1.0, -2.0])
    p = x.pin_memory()
    assert p.place == CUDAPinnedPlace() and type(p.value) is np.ndarray and p.is_leaf
    assert p.stop_gradient is False and p.pin_memory() is p and p.to("gpu_pinned") is p
    assert p.value is not x.value and p.numpy().tolist() == [1.0, -2.0]
    r = paddle.nn.functional.relu(p)
    assert r.place == CPUPlace() and r.numpy().tolist() == [1.0, 0.0]
    assert p.cuda().is_cuda and p.cpu().place == CPUPlace() and p.cpu().value is not p.value
    with pytest.raises(ValueError, match="pinned host memory holds tensors"):
        paddle.set_device("gpu_pinned")


@pytest.mark.paddle
def test_the_same_flags_and_gradients_as_paddlepaddle():
    ref = pytest.importorskip("paddle")
    if ref.device.is_compiled_with_cuda():
        pytest.skip("compares the CPU build's behaviour")
    for lib in (paddle, ref):
        x = lib.to_tensor([1.0, 2.0], stop_gradient=False)
        z = x.to("float64")
        (z * z * z).sum().backward()
        got = (x.to("cpu") is x, x.cpu() is x, z.stop_gradient, z.is_leaf, x.grad.numpy().tolist())
        if lib is paddle:
            ours = got
    assert ours == got


def test_places_are_equal_by_kind_and_device_and_hash_alike():
    """Places as dict keys and set members: equal places hash alike (PaddlePaddle's compare
    equal by kind and device id); the pinned place is not the CPU place."""
    assert CPUPlace() == CPUPlace() and hash(CPUPlace()) == hash(CPUPlace())
    assert CUDAPinnedPlace() == CUDAPinnedPlace() and CUDAPinnedPlace() != CPUPlace()
    assert CUDAPlace(1) == CUDAPlace(1) != CUDAPlace(0) and len({CUDAPlace(1), CUDAPlace(1), CPUPlace()}) == 2
    assert CUDAPlace(3).get_device_id() == 3
    assert repr(CUDAPinnedPlace()) == "CUDAPinnedPlace()" and repr(CPUPlace()) == "CPUPlace()"
