"""Elementwise formulas evaluated in cache-sized blocks (kernels/blocked.py) give exactly
what the same formula gives on the whole array."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import blocked
from keel.kernels import registry

# every kernel whose formula goes through kernels.blocked.elementwise
BLOCKED = sorted(op for op, kdef in registry.all_kernels().items() if getattr(kdef.fn, "per_element", False))
ATTRS = {"gelu": [{"approximate": False}, {"approximate": True}], "gelu_grad": [{"approximate": False},
                                                                                 {"approximate": True}]}


def test_the_blocked_kernels_are_the_elementwise_families():
    for op in ("gelu", "erf", "sigmoid", "silu", "mish", "softplus", "elu", "gelu_grad", "swish_grad",
               "log_grad", "erf_grad"):
        assert op in BLOCKED
    assert "softmax" not in BLOCKED and "log_softmax" not in BLOCKED


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("op", BLOCKED)
def test_blocked_evaluation_equals_the_whole_array_formula(op, dtype, monkeypatch):
    kdef = registry.get(op)
    rng = np.random.default_rng(1)
    n = 3 * (blocked.BLOCK_BYTES // np.dtype(dtype).itemsize) + 1234   # several blocks and a tail
    high = 0.95 if op.startswith(("acos", "asin")) else 3.0   # their domain is [-1, 1]
    inputs = {slot: rng.uniform(0.1, high, n).astype(dtype) for slot in kdef.inputs}
    for attrs in ATTRS.get(op, [{}]):
        got = call_kernel(op, inputs, attrs)
        with monkeypatch.context() as m:
            m.setattr(blocked, "BLOCK_BYTES", 1 << 40)   # one block: the formula on the whole array
            want = call_kernel(op, inputs, attrs)
        for slot in want:
            assert got[slot].dtype == want[slot].dtype and got[slot].shape == want[slot].shape
            np.testing.assert_array_equal(got[slot], want[slot], err_msg=f"{op} {attrs} {slot}")


def test_non_contiguous_and_broadcast_inputs_take_the_whole_array_path():
    x = np.random.default_rng(0).standard_normal((600, 400)).astype(np.float32)
    got = call_kernel("gelu", {"X": x.T}, {})["Out"]           # a transposed view
    np.testing.assert_array_equal(got, call_kernel("gelu", {"X": np.ascontiguousarray(x.T)}, {})["Out"])
    assert got.shape == (400, 600)
