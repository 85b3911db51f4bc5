"""Integer gradients keep their input's dtype (issue 32): PaddlePaddle's gradient kernels
instantiated for an integer type compute in it (C++ truncating division)."""
import numpy as np
import pytest

from oprun import grads


def _trunc_div(a, b):
    return (np.trunc(a / b)).astype(a.dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_elementwise_div_integer_gradient(dtype):
    x = np.array([4, -3, 7, 9], dtype)
    y = np.array([2, 4, -3, 2], dtype)
    dout = np.array([1, 5, -7, 3], dtype)
    out = _trunc_div(x, y)
    g = grads("elementwise_div", {"X": x, "Y": y}, {"Out": dout})
    assert g["X"].dtype == dtype and g["Y"].dtype == dtype
    np.testing.assert_array_equal(g["X"], _trunc_div(dout, y))             # dout / y
    np.testing.assert_array_equal(g["Y"], _trunc_div(-dout * out, y))      # -dout * out / y


def test_issue_values():
    # the issue's case: 0.5 and 0.25 came back as float64; PaddlePaddle gives 0 and 0
    g = grads("elementwise_div", {"X": np.array([4, 3], np.int32), "Y": np.array([2, 4], np.int32)},
              {"Out": np.array([1, 1], np.int32)})
    np.testing.assert_array_equal(g["X"], np.array([0, 0], np.int32))
    np.testing.assert_array_equal(g["Y"], np.array([-1, 0], np.int32))


@pytest.mark.parametrize("op_type", ["elementwise_add", "elementwise_sub", "elementwise_mul"])
def test_integer_gradients_keep_dtype(op_type):
    x = np.array([[3, -2, 5]], np.int32)
    y = np.array([4, 6, -1], np.int32)
    dout = np.array([[2, -1, 3]], np.int32)
    g = grads(op_type, {"X": x, "Y": y}, {"Out": dout})
    want_x = {"elementwise_add": dout, "elementwise_sub": dout, "elementwise_mul": dout * y}[op_type]
    want_y = {"elementwise_add": dout[0], "elementwise_sub": -dout[0], "elementwise_mul": dout[0] * x[0]}[op_type]
    assert g["X"].dtype == np.int32 and g["Y"].dtype == np.int32
    np.testing.assert_array_equal(g["X"], want_x)
    np.testing.assert_array_equal(g["Y"], want_y)
