"""Activations written as in-place formulas (kernels/activation.py `_in_place_unary`): the
kernel writes one new array, and its `specialize` callable writes into a donated X's buffer.
Both give the kernel's numbers bit for bit, on one block and on several; a view (whose
buffer another value may share) or another dtype is never written into."""
import numpy as np
import pytest

from keel.executor.kernel_call import bind, call_kernel
from keel.kernels import blocked, registry

OPS = [("relu", {}), ("relu6", {"threshold": 6.0}), ("relu6", {"threshold": 2.5}),
       ("hard_sigmoid", {"slope": 0.2, "offset": 0.5}), ("hard_swish", {"threshold": 6.0, "scale": 6.0, "offset": 3.0}),
       ("hard_swish", {"threshold": 4.0, "scale": 5.0, "offset": 1.0}), ("sigmoid", {}), ("silu", {}),
       ("swish", {"beta": 1.0}), ("swish", {"beta": 1.7}), ("gelu", {"approximate": True}),
       ("gelu", {"approximate": False})]
IDS = [op + "".join(f"-{v}" for v in attrs.values()) for op, attrs in OPS]


def _donated(op, attrs, dtype):
    kdef = registry.get(op)
    return kdef.specialize(np, attrs, (np.dtype(dtype),), True)


def _x(shape, dtype, seed=0):
    return (np.random.default_rng(seed).standard_normal(shape) * 5).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [7 * 13, 3 * (blocked.BLOCK_BYTES // 4) + 123], ids=["one block", "blocks"])
@pytest.mark.parametrize("op, attrs", OPS, ids=IDS)
def test_donated_buffer_gets_the_kernels_result(op, attrs, size, dtype):
    x = _x(size, dtype)
    want = call_kernel(op, {"X": x}, attrs)["Out"]
    assert not np.shares_memory(want, x)
    run = _donated(op, attrs, dtype)
    got = run(x)
    assert got is x
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op, attrs", OPS, ids=IDS)
def test_views_and_other_dtypes_are_not_written_into(op, attrs):
    base = _x((6, 8), np.float32)
    view = base[:, :5]
    before = base.copy()
    got = _donated(op, attrs, np.float32)(view)
    np.testing.assert_array_equal(base, before)
    np.testing.assert_array_equal(got, call_kernel(op, {"X": np.ascontiguousarray(view)}, attrs)["Out"])
    x64 = _x((4, 3), np.float64)                     # declared float32, got float64: the kernel
    np.testing.assert_array_equal(_donated(op, attrs, np.float32)(x64), call_kernel(op, {"X": x64}, attrs)["Out"])
    assert _donated(op, attrs, np.float16) is None   # computed in float32: not in place
    assert registry.get(op).specialize(np, attrs, (np.dtype(np.float32),), False) is None


@pytest.mark.parametrize("op, attrs", OPS, ids=IDS)
def test_kernel_leaves_its_input_alone(op, attrs):
    x = _x((5, 40), np.float32)
    before = x.copy()
    fn, _ = bind(op, attrs)
    out = fn(x)
    np.testing.assert_array_equal(x, before)
    assert out.dtype == x.dtype and out.shape == x.shape and not np.shares_memory(out, x)


@pytest.mark.parametrize("op, attrs", OPS, ids=IDS)
def test_donated_buffer_on_the_device(op, attrs, fake_cupy):
    """On cupy (the stand-in) the donated callable writes the whole array in place, reading
    nothing back to the host."""
    import standin
    x = _x((6, 50), np.float32)
    want = call_kernel(op, {"X": x}, attrs)["Out"]
    dev = standin.to_device(x)
    before = standin.host_syncs()
    got = registry.get(op).specialize(fake_cupy, attrs, (np.dtype(np.float32),), True)(dev)
    assert got is dev and standin.host_syncs() == before
    np.testing.assert_array_equal(standin.to_host(got), want)


@pytest.mark.parametrize("dtype", [np.bool_, np.uint8, np.int8, np.int64, np.float16])
def test_relu_and_relu6_on_other_dtypes(dtype):
    """Computed in X's own dtype (exact there): bool stays bool, unsigned values stay."""
    x = np.array([[-1, 0, 2, 9]]).astype(dtype)
    for op, want in [("relu", np.where(x > 0, x, 0)), ("relu6", np.clip(x, 0, 6))]:
        got = call_kernel(op, {"X": x}, {"threshold": 6.0} if op == "relu6" else {})["Out"]
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got, want.astype(dtype), err_msg=f"{op} {np.dtype(dtype)}")
