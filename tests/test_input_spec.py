"""paddle.static.InputSpec's constructors and batch helpers, as PaddlePaddle 3.3.1's behave
(shapes as lists here, PaddlePaddle prints tuples)."""
import numpy as np
import pytest

import keel as paddle
from keel.static import InputSpec


def test_from_tensor_takes_an_eager_tensors_or_a_variables_shape_dtype_and_name():
    spec = InputSpec.from_tensor(paddle.ones([2, 3], dtype="float64"), name="x")
    assert (spec.shape, spec.dtype, spec.name) == ([2, 3], "float64", "x")
    main = paddle.static.Program()
    with paddle.static.program_guard(main):
        image = paddle.static.data("image", [None, 3, 8, 8], "float32")
    assert InputSpec.from_tensor(image) == InputSpec([None, 3, 8, 8], "float32", "image")
    with pytest.raises(TypeError, match="from_numpy takes an ndarray"):
        InputSpec.from_tensor(np.zeros(3))


def test_from_numpy_takes_the_arrays_shape_and_dtype():
    assert InputSpec.from_numpy(np.zeros((4, 8), "int64"), "ids") == InputSpec([4, 8], "int64", "ids")


def test_batch_and_unbatch_change_the_first_dimension_in_place():
    spec = InputSpec([784], "float32", "image")
    assert spec.batch(16) is spec and spec.shape == [16, 784]
    assert spec.unbatch().shape == [784]
    assert InputSpec([784]).batch([8]).shape == [8, 784]
    with pytest.raises(ValueError, match="one batch size"):
        InputSpec([784]).batch([1, 2])
    with pytest.raises(TypeError, match="int batch size"):
        InputSpec([784]).batch(2.5)
    with pytest.raises(ValueError, match="no dimension to unbatch"):
        InputSpec([], "float32", "scalar").unbatch()


def test_equal_specs_hash_alike():
    assert len({InputSpec([None, 4], "float32", "x"), InputSpec([-1, 4], "float32", "x")}) == 1
    assert InputSpec([1], name="a") != InputSpec([1], name="b")
