"""Gradient checks of set_value (`x[index] = value`): finite differences through the op
(region from attributes or from tensor lists, steps, decreased and None axes, a value
broadcast to the region), and the gradient kernel's conventions checked directly."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from gradcheck import Case, rand, run_case

INT_MAX = 2**31 - 1
F64 = 6

CASES = [
    Case("set_value", {"Input": rand(4, 5), "ValueTensor": rand(2, 5, seed=1)},
         {"axes": [0], "starts": [1], "ends": [3], "steps": [1]}, id="set_value rows"),
    Case("set_value", {"Input": rand(4, 5), "ValueTensor": rand(5, seed=1)},
         {"axes": [0], "starts": [1], "ends": [3], "steps": [1]}, id="set_value value broadcast over rows"),
    Case("set_value", {"Input": rand(4, 5), "ValueTensor": rand(2, 1, seed=1)},
         {"axes": [0, 1], "starts": [0, 4], "ends": [4, 0], "steps": [2, -2]},
         id="set_value negative step, value broadcast along columns"),
    Case("set_value", {"Input": rand(3, 4, 2), "ValueTensor": rand(4, seed=1)},
         {"axes": [0, 2], "starts": [-1, 1], "ends": [INT_MAX, 2], "steps": [1, 1], "decrease_axes": [0, 2]},
         id="set_value decrease_axes (x[-1, :, 1] = v)"),
    Case("set_value", {"Input": rand(3, 4), "ValueTensor": rand(1, 4, seed=1)},
         {"axes": [0], "starts": [2], "ends": [3], "steps": [1], "decrease_axes": [0], "none_axes": [0]},
         id="set_value none_axes (x[None, 2] = v)"),
    Case("set_value", {"Input": rand(4, 5), "ValueTensor": rand(2, 2, seed=1),
                       "StartsTensorList": [np.array([1], np.int64), np.array([-2], np.int64)],
                       "EndsTensorList": [np.array([3], np.int64), np.array([INT_MAX], np.int64)]},
         {"axes": [0, 1], "starts": [0, 0], "ends": [1, 1], "steps": [1, 1]}, id="set_value bounds from tensors"),
    Case("set_value", {"Input": rand(4, 5)},
         {"axes": [1], "starts": [1], "ends": [4], "steps": [2], "shape": [1], "values": [0.5], "dtype": F64},
         id="set_value values attribute"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


def _grads(inputs, attrs):
    return call_kernel("set_value_grad", inputs, attrs)


def test_grad_zeroes_the_region_for_input_and_sums_broadcast_dims_for_value():
    dout = np.arange(20.0).reshape(4, 5)
    got = _grads({"Out@GRAD": dout, "ValueTensor": np.zeros((1, 5))},
                 {"axes": [0], "starts": [1], "ends": [3], "steps": [1]})
    want_dx = dout.copy()
    want_dx[1:3] = 0
    np.testing.assert_array_equal(got["Input@GRAD"], want_dx)
    np.testing.assert_array_equal(got["ValueTensor@GRAD"], dout[1:3].sum(axis=0, keepdims=True))


def test_end_minus_one_with_a_negative_step_reaches_element_zero():
    """PaddlePaddle's convention (CheckAndUpdateSliceAttrs): there an end of -1 is not the
    last element but 'through element 0'."""
    out = call_kernel("set_value", {"Input": np.zeros(5)},
                      {"axes": [0], "starts": [3], "ends": [-1], "steps": [-1], "shape": [1], "values": [1.0],
                       "dtype": F64})["Out"]
    np.testing.assert_array_equal(out, [1, 1, 1, 1, 0])
