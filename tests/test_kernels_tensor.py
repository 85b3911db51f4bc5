"""Tensor and random kernels against independent references: hand-computed values,
explicit Python loops on small inputs, or plain numpy written another way."""
import itertools
import math

import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from keel.kernels import registry as kernel_registry
from keel.program.ops import registry as op_registry

TENSOR_OPS = [
    "reshape2", "transpose2", "concat", "split", "slice", "strided_slice",
    "flatten_contiguous_range", "squeeze2", "unsqueeze2", "gather", "gather_nd", "scatter",
    "expand_v2", "expand_as_v2", "tile", "stack", "unstack", "range", "linspace", "fill_constant",
    "fill_any_like", "fill_constant_batch_size_like", "assign", "assign_value", "shape",
    "one_hot_v2", "where_index", "pad", "pad3d",
]
RANDOM_OPS = ["uniform_random", "gaussian_random", "truncated_gaussian_random", "randint", "dropout"]


def run(op, inputs=None, attrs=None, rng=None):
    return call_kernel(op, inputs or {}, attrs or {}, rng=rng)


def out(op, inputs=None, attrs=None, rng=None, slot="Out"):
    return run(op, inputs, attrs, rng)[slot]


def arange(*shape, dtype=np.float32):
    return np.arange(math.prod(shape), dtype=dtype).reshape(shape)


# -- slot names agree with the op registry ---------------------------------------------

@pytest.mark.parametrize("op_type", TENSOR_OPS + RANDOM_OPS)
def test_kernel_slots_exist_in_op_registry(op_type):
    opdef = op_registry.lookup(op_type)
    if opdef is None:
        pytest.skip(f"op {op_type!r} is not defined in program/ops yet")
    kdef = kernel_registry.get(op_type)
    assert kdef is not None, f"no kernel registered for {op_type}"
    assert set(kdef.inputs) <= set(opdef.input_slots), "kernel input slot unknown to the op"
    assert set(kdef.outputs) <= set(opdef.output_slots), "kernel output slot unknown to the op"
    for name in kdef.attrs:
        assert opdef.attr_spec(name) is not None, f"kernel attr {name!r} unknown to the op"
    # every slot of the op is consumed / produced by the kernel
    assert {s.name for s in opdef.inputs} <= set(kdef.inputs)
    assert {s.name for s in opdef.outputs} <= set(kdef.outputs)


# -- reshape family ----------------------------------------------------------------------

@pytest.mark.parametrize("shape, expected", [
    ([0, -1], (2, 12)),
    ([-1, 0, 2], (4, 3, 2)),
    ([0, 0, 0], (2, 3, 4)),
    ([4, -1], (4, 6)),
    ([24], (24,)),
])
def test_reshape2_zero_and_minus_one(shape, expected):
    x = arange(2, 3, 4)
    res = run("reshape2", {"X": x}, {"shape": shape})
    y = res["Out"]
    assert y.shape == expected
    assert list(y.reshape(-1)) == list(range(24))  # C order kept
    assert res["XShape"].shape == (0, 2, 3, 4)  # X's shape for the gradient, as in PaddlePaddle


def test_reshape2_tensor_inputs_override_attr():
    x = arange(2, 3, 4)
    shape_t = np.array([6, -1], dtype=np.int32)
    assert out("reshape2", {"X": x, "Shape": shape_t}, {"shape": [24]}).shape == (6, 4)
    # a ShapeTensor list entry of 0 copies x.shape[1] as well
    lst = [np.array([4], np.int64), np.array([0], np.int32), np.array([-1], np.int32)]
    assert out("reshape2", {"X": x, "ShapeTensor": lst}, {"shape": [24]}).shape == (4, 3, 2)


def test_reshape2_shape_tensor_list_beats_shape():
    x = arange(2, 3, 4)
    res = out("reshape2", {"X": x, "Shape": np.array([24], np.int32),
                           "ShapeTensor": [np.array([2]), np.array([12])]})
    assert res.shape == (2, 12)


def test_reshape2_output_does_not_alias_input():
    x = arange(2, 3)
    y = out("reshape2", {"X": x}, {"shape": [3, 2]})
    y[0, 0] = 100
    assert x[0, 0] == 0


@pytest.mark.parametrize("shape", [[-1, -1], [5, -1], [7], [0, 0, 0, 0]])
def test_reshape2_invalid(shape):
    with pytest.raises(ValueError):
        run("reshape2", {"X": arange(2, 3, 4)}, {"shape": shape})


def test_transpose2_matches_loops():
    x = arange(2, 3, 4)
    y = out("transpose2", {"X": x}, {"axis": [2, 0, 1]})
    assert y.shape == (4, 2, 3)
    for i, j, k in itertools.product(range(2), range(3), range(4)):
        assert y[k, i, j] == x[i, j, k]


@pytest.mark.parametrize("start, stop, expected", [
    (0, -1, (24,)), (1, 2, (2, 12)), (0, 1, (6, 4)), (-2, -1, (2, 12)), (2, 2, (2, 3, 4)),
])
def test_flatten_contiguous_range(start, stop, expected):
    x = arange(2, 3, 4)
    y = out("flatten_contiguous_range", {"X": x}, {"start_axis": start, "stop_axis": stop})
    assert y.shape == expected
    assert list(y.reshape(-1)) == list(range(24))


def test_flatten_0d_gives_1d():
    y = out("flatten_contiguous_range", {"X": np.array(5.0, np.float32)}, {"start_axis": 0, "stop_axis": -1})
    assert y.shape == (1,) and y[0] == 5.0


@pytest.mark.parametrize("axes, expected", [
    ([], (3, 2)),
    ([0], (3, 1, 2)),
    ([0, 1], (3, 1, 2)),       # dim 1 has size 3: named but left alone (Paddle)
    ([-2], (1, 3, 2)),
    ([1, 3], (1, 3, 1, 2)),    # neither named dim has size 1: nothing removed
    ([2, 0, 2], (3, 2)),
])
def test_squeeze2_paddle_rule(axes, expected):
    x = arange(1, 3, 1, 2)
    y = out("squeeze2", {"X": x}, {"axes": axes})
    assert y.shape == expected
    assert list(y.reshape(-1)) == list(range(6))


@pytest.mark.parametrize("axes, expected", [
    ([0], (1, 2, 3)),
    ([-1], (2, 3, 1)),
    ([0, 2], (1, 2, 1, 3)),     # applied in order: (1,2,3) then insert at 2
    ([2, 0], (1, 2, 3, 1)),     # (2,3,1) then insert at 0
    ([-1, 0], (1, 2, 3, 1)),    # -1 -> 2 on rank 2, then 0
    ([0, -1], (1, 2, 3, 1)),    # -1 counts on the grown rank 3 -> 3
    ([1, 1], (2, 1, 1, 3)),
    ([1, 0], (1, 2, 1, 3)),
    ([0, 1, 2, 3], (1, 1, 1, 1, 2, 3)),
])
def test_unsqueeze2_multiple_axes(axes, expected):
    x = arange(2, 3)
    y = out("unsqueeze2", {"X": x}, {"axes": axes})
    assert y.shape == expected
    assert list(y.reshape(-1)) == list(range(6))


def test_unsqueeze2_axes_tensor_inputs():
    x = arange(2, 3)
    assert out("unsqueeze2", {"X": x, "AxesTensor": np.array([0, 3], np.int32)}, {"axes": [1]}).shape \
        == (1, 2, 3, 1)
    assert out("unsqueeze2", {"X": x, "AxesTensor": np.array([0], np.int32),
                              "AxesTensorList": [np.array([1], np.int32)]}).shape == (2, 1, 3)


# -- joining / splitting -----------------------------------------------------------------

def test_concat_axis_and_axis_tensor():
    a, b = arange(2, 2), arange(2, 3) + 10
    y = out("concat", {"X": [a, b]}, {"axis": -1})
    assert y.tolist() == [[0, 1, 10, 11, 12], [2, 3, 13, 14, 15]]
    c = arange(1, 2) + 100
    y = out("concat", {"X": [a, c], "AxisTensor": np.array([0], np.int32)}, {"axis": 1})
    assert y.tolist() == [[0, 1], [2, 3], [100, 101]]


@pytest.mark.parametrize("attrs, sizes", [
    ({"sections": [2, -1, 1], "axis": 1}, [2, 3, 1]),
    ({"num": 3, "axis": 1}, [2, 2, 2]),
    ({"sections": [-1, 5], "axis": -1}, [1, 5]),
])
def test_split_sections(attrs, sizes):
    x = arange(2, 6)
    parts = out("split", {"X": x}, attrs)
    assert isinstance(parts, list) and [p.shape[1] for p in parts] == sizes
    start = 0
    for p, n in zip(parts, sizes):
        for i in range(2):
            assert p[i].tolist() == [x[i, j] for j in range(start, start + n)]
        start += n


def test_split_tensor_inputs():
    x = arange(4, 3)
    parts = out("split", {"X": x, "AxisTensor": np.array([0], np.int32),
                          "SectionsTensorList": [np.array([1]), np.array([-1])]},
                {"axis": 1, "sections": [1, 1, 1]})
    assert [p.shape for p in parts] == [(1, 3), (3, 3)]
    assert parts[1].tolist() == x[1:].tolist()


def test_split_invalid():
    with pytest.raises(ValueError):
        run("split", {"X": arange(2, 5)}, {"num": 2, "axis": 1})
    with pytest.raises(ValueError):
        run("split", {"X": arange(2, 5)}, {"sections": [-1, -1], "axis": 1})


def test_stack_and_unstack():
    a, b = arange(2, 3), arange(2, 3) + 6
    y = out("stack", {"X": [a, b]}, {"axis": 1}, slot="Y")
    assert y.shape == (2, 2, 3)
    for i, j, k in itertools.product(range(2), range(2), range(3)):
        assert y[i, j, k] == (a, b)[j][i, k]
    parts = out("unstack", {"X": y}, {"axis": -1, "num": 3}, slot="Y")
    assert len(parts) == 3
    for k, p in enumerate(parts):
        assert p.shape == (2, 2)
        assert p.tolist() == [[y[i, j, k] for j in range(2)] for i in range(2)]


# -- slicing -----------------------------------------------------------------------------

@pytest.mark.parametrize("start, end", [
    (0, 3), (-3, -1), (-100, 2), (2, 1000), (-100, 1000), (3, 3), (5, 9), (-1, 100), (0, -4),
])
def test_slice_clamps_like_python(start, end):
    x = arange(6)
    y = out("slice", {"Input": x}, {"axes": [0], "starts": [start], "ends": [end]})
    assert y.tolist() == list(range(6))[start:end]


def test_slice_end_before_start_is_empty():
    y = out("slice", {"Input": arange(6)}, {"axes": [0], "starts": [4], "ends": [2]})
    assert y.shape == (0,)


def test_slice_multi_axis_and_decrease_axis():
    x = arange(3, 4, 5)
    y = out("slice", {"Input": x}, {"axes": [0, 2], "starts": [1, -2], "ends": [2, 100],
                                    "decrease_axis": [0]})
    assert y.shape == (4, 2)
    assert y.tolist() == [[x[1, j, k] for k in (3, 4)] for j in range(4)]


def test_slice_decrease_all_axes_gives_0d():
    x = arange(3, 4)
    y = out("slice", {"Input": x}, {"axes": [0, 1], "starts": [2, -1], "ends": [3, 4],
                                    "decrease_axis": [0, 1]})
    assert y.shape == () and float(y) == x[2, 3]


def test_slice_decrease_axis_requires_size_one():
    with pytest.raises(ValueError):
        run("slice", {"Input": arange(3, 4)}, {"axes": [0], "starts": [0], "ends": [2],
                                               "decrease_axis": [0]})


def test_slice_tensor_inputs_override():
    x = arange(8)
    y = out("slice", {"Input": x, "StartsTensor": np.array([2], np.int64),
                      "EndsTensorList": [np.array([-1], np.int32)]},
            {"axes": [0], "starts": [0], "ends": [1]})
    assert y.tolist() == [2, 3, 4, 5, 6]
    y = out("slice", {"Input": x, "StartsTensor": np.array([1], np.int64),
                      "StartsTensorList": [np.array([5], np.int32)], "EndsTensor": np.array([3])},
            {"axes": [0], "starts": [0], "ends": [1]})
    assert y.tolist() == [1, 2]   # StartsTensor wins over StartsTensorList


# PaddlePaddle 3.3.1's strided_slice follows Python's slice rules (checked against its static
# executor on 1,176 start/end/stride combinations, including ends like -1 and INT_MIN with
# negative strides), so Python slicing is the reference.
@pytest.mark.parametrize("start, end, stride", [
    (8, 1, -3), (-1, -1, -1), (5, -1, -2), (100, -1, -4), (9, -3, -1), (9, -100, -1),
    (-100, -1, -1), (1, 100, 3), (-4, 10, 2), (-100, 3, 1), (2, 2, -1), (9, -2**31, -1),
    (-1, -2**31, -1), (0, 2**31 - 1, 1),
])
def test_strided_slice_paddle_normalisation(start, end, stride):
    x = np.arange(10, dtype=np.int64)
    y = out("strided_slice", {"Input": x}, {"axes": [0], "starts": [start], "ends": [end],
                                            "strides": [stride]})
    assert y.tolist() == x[start:end:stride].tolist()


def test_strided_slice_2d_negative_strides_and_decrease():
    x = arange(4, 5)
    y = out("strided_slice", {"Input": x}, {"axes": [0, 1], "starts": [-1, 4], "ends": [-5, 0],
                                            "strides": [-2, -3]})
    assert y.tolist() == x[-1:-5:-2, 4:0:-3].tolist() == [[x[i, j] for j in (4, 1)] for i in (3, 1)]
    y = out("strided_slice", {"Input": x}, {"axes": [0, 1], "starts": [2, 4], "ends": [3, -2**31],
                                            "strides": [1, -2], "decrease_axis": [0]})
    assert y.tolist() == [x[2, 4], x[2, 2], x[2, 0]]  # x[2, ::-2]: PaddlePaddle writes end INT_MIN


def test_strided_slice_decrease_affect_rule():
    # start -1, end 0, infer flag -1 on a decrease axis selects the last element
    x = arange(3, 4)
    y = out("strided_slice", {"Input": x}, {"axes": [1], "starts": [-1], "ends": [0], "strides": [1],
                                            "infer_flags": [-1], "decrease_axis": [1]})
    assert y.tolist() == [x[i, 3] for i in range(3)]


def test_strided_slice_tensor_inputs():
    x = np.arange(10)
    y = out("strided_slice", {"Input": x, "StartsTensor": np.array([7]),
                              "EndsTensorList": [np.array([0])],
                              "StridesTensor": np.array([-3])},
            {"axes": [0], "starts": [0], "ends": [1], "strides": [1]})
    assert y.tolist() == [7, 4, 1]


# -- gathers / scatters ------------------------------------------------------------------

def test_gather_axis_not_zero_matches_loops():
    x = arange(3, 4, 5)
    idx = np.array([3, 0, 3], dtype=np.int64)
    y = out("gather", {"X": x, "Index": idx}, {"axis": 1})
    assert y.shape == (3, 3, 5)
    for i, j, k in itertools.product(range(3), range(3), range(5)):
        assert y[i, j, k] == x[i, idx[j], k]
    y2 = out("gather", {"X": x, "Index": idx.astype(np.int32), "Axis": np.array([2], np.int32)},
             {"axis": 1})
    for i, j, k in itertools.product(range(3), range(4), range(3)):
        assert y2[i, j, k] == x[i, j, idx[k]]


def test_gather_index_n_by_1_and_axis_0():
    x = arange(4, 2)
    y = out("gather", {"X": x, "Index": np.array([[2], [0]], np.int32)})
    assert y.tolist() == [[4, 5], [0, 1]]


def test_gather_nd_matches_loops():
    x = arange(3, 4, 2)
    idx = np.array([[[0, 1], [2, 3]], [[1, 0], [2, 2]]], dtype=np.int64)  # [2, 2, 2]
    y = out("gather_nd", {"X": x, "Index": idx})
    assert y.shape == (2, 2, 2)
    for a, b in itertools.product(range(2), range(2)):
        i, j = idx[a, b]
        assert y[a, b].tolist() == x[i, j].tolist()
    idx1 = np.array([[2], [0]], dtype=np.int32)
    assert out("gather_nd", {"X": x, "Index": idx1}).tolist() == [x[2].tolist(), x[0].tolist()]
    idx0 = np.zeros((2, 0), dtype=np.int64)
    assert out("gather_nd", {"X": x, "Index": idx0}).shape == (2, 3, 4, 2)


def test_scatter_overwrite_false_accumulates_after_zeroing():
    x = np.array([[1, 1], [2, 2], [3, 3]], dtype=np.float32)
    ids = np.array([1, 1, 0], dtype=np.int64)
    upd = np.array([[10, 10], [20, 20], [5, 5]], dtype=np.float32)
    y = out("scatter", {"X": x, "Ids": ids, "Updates": upd}, {"overwrite": False})
    assert y.tolist() == [[5, 5], [30, 30], [3, 3]]
    assert x.tolist() == [[1, 1], [2, 2], [3, 3]]  # input untouched


def test_scatter_overwrite_true_last_duplicate_wins():
    x = np.array([[1, 1], [2, 2], [3, 3]], dtype=np.float32)
    ids = np.array([1, 1, 0], dtype=np.int32)
    upd = np.array([[10, 10], [20, 20], [5, 5]], dtype=np.float32)
    y = out("scatter", {"X": x, "Ids": ids, "Updates": upd}, {"overwrite": True})
    assert y.tolist() == [[5, 5], [20, 20], [3, 3]]


def test_scatter_add_fallback_without_ufunc_at():
    from keel.kernels.tensor import scatter_add

    class NoAt:
        """numpy, but its `add` ufunc has no `.at` (as some array modules)."""
        def __getattr__(self, name):
            if name == "add":
                return lambda *a, **k: np.add(*a, **k)
            return getattr(np, name)

    o = np.zeros((3, 2))
    scatter_add(NoAt(), o, np.array([2, 0, 2]), np.array([[1., 2.], [3., 4.], [5., 6.]]))
    assert o.tolist() == [[3, 4], [0, 0], [6, 8]]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_scatter_add_of_rows_sums_runs_of_sorted_indices_as_ufunc_at_does(dtype):
    """numpy rows (1-D idx) take the sorted-runs path: the result of add.at, negative
    indices counted from the end (-1 and n-1 one row), into a non-zero output."""
    from keel.kernels.tensor import scatter_add
    rng = np.random.default_rng(3)
    idx = rng.integers(-7, 7, 500)
    values = rng.integers(-50, 50, (500, 3, 4)).astype(dtype)
    if dtype != np.int64:
        values /= 8
    start = rng.integers(-5, 5, (7, 3, 4)).astype(dtype)
    want = start.copy()
    np.add.at(want, idx, values)
    got = scatter_add(np, start.copy(), idx, values)
    np.testing.assert_array_equal(got, want)    # eighths: exact in any summation order
    assert scatter_add(np, start.copy(), idx[:0], values[:0]).tolist() == start.tolist()


# -- broadcasting ------------------------------------------------------------------------

def test_expand_v2_with_minus_one():
    x = np.array([[1], [2], [3]], dtype=np.int32)
    y = out("expand_v2", {"X": x}, {"shape": [2, -1, 4]})
    assert y.shape == (2, 3, 4)
    for a, i, k in itertools.product(range(2), range(3), range(4)):
        assert y[a, i, k] == x[i, 0]
    y[0, 0, 0] = 99  # a real array, not a read-only broadcast view
    assert x[0, 0] == 1


def test_expand_v2_shape_tensors():
    x = np.array([1, 2], dtype=np.float32)
    assert out("expand_v2", {"X": x, "Shape": np.array([3, 2], np.int32)}, {"shape": [9]}).shape == (3, 2)
    assert out("expand_v2", {"X": x, "expand_shapes_tensor": [np.array([2]), np.array([-1])]}).shape == (2, 2)


@pytest.mark.parametrize("shape", [[3, 3], [-1, 1, 2], [2]])
def test_expand_v2_invalid(shape):
    # x is [1, 2]: dim 1 (size 2) cannot become 3; -1 is not allowed for a new leading
    # dim; the target rank cannot be lower than the input's
    with pytest.raises(ValueError):
        run("expand_v2", {"X": np.ones((1, 2))}, {"shape": shape})


def test_expand_as_v2():
    x = np.array([[7], [8]], dtype=np.float64)
    y = out("expand_as_v2", {"X": x}, {"target_shape": [3, 2, 2]})
    assert y.tolist() == [[[7, 7], [8, 8]]] * 3
    y = out("expand_as_v2", {"X": x, "Y": np.zeros((2, 5))}, {"target_shape": [-1, 5]})
    assert y.tolist() == [[7] * 5, [8] * 5]


def test_tile():
    x = np.array([[1, 2]], dtype=np.int64)
    assert out("tile", {"X": x}, {"repeat_times": [2, 2]}).tolist() == [[1, 2, 1, 2], [1, 2, 1, 2]]
    assert out("tile", {"X": x}, {"repeat_times": [2, 1, 1]}).tolist() == [[[1, 2]], [[1, 2]]]
    assert out("tile", {"X": np.array([3, 4]), "RepeatTimes": np.array([3], np.int32)},
               {"repeat_times": [1]}).tolist() == [3, 4, 3, 4, 3, 4]


# -- ranges and fills --------------------------------------------------------------------

@pytest.mark.parametrize("start, end, step, dtype, expected", [
    (1, 10, 3, np.int64, [1, 4, 7]),
    (5, 0, -2, np.int32, [5, 3, 1]),
    (0, 0, 1, np.int64, []),
    (0.0, 1.0, 0.25, np.float32, [0.0, 0.25, 0.5, 0.75]),
    (0.5, 2.0, 0.5, np.float64, [0.5, 1.0, 1.5]),
])
def test_range_values_and_dtype(start, end, step, dtype, expected):
    t = lambda v: np.array([v], dtype=dtype)  # noqa: E731
    y = out("range", {"Start": t(start), "End": t(end), "Step": t(step)})
    assert y.dtype == dtype
    assert y.tolist() == expected


def test_range_float32_size_uses_float32_division():
    t = lambda v: np.array([v], dtype=np.float32)  # noqa: E731
    y = out("range", {"Start": t(0), "End": t(1), "Step": t(0.1)})
    assert y.dtype == np.float32 and len(y) == 10
    assert np.allclose(y, [i * 0.1 for i in range(10)], atol=1e-6)


def test_range_wrong_direction():
    t = lambda v: np.array([v], dtype=np.int64)  # noqa: E731
    with pytest.raises(ValueError):
        run("range", {"Start": t(0), "End": t(5), "Step": t(-1)})


def test_linspace_symmetric_fill_and_int_truncation():
    num = np.array([4], np.int32)
    y = out("linspace", {"Start": np.array([0.0], np.float32), "Stop": np.array([10.0], np.float32),
                         "Num": num}, {"dtype": 2})
    assert y.dtype == np.int32 and y.tolist() == [0, 3, 6, 10]
    y = out("linspace", {"Start": np.array([-1.0]), "Stop": np.array([1.0]), "Num": np.array([5], np.int32)},
            {"dtype": 6})
    assert y.tolist() == [-1.0, -0.5, 0.0, 0.5, 1.0]
    y = out("linspace", {"Start": np.array([2.0]), "Stop": np.array([3.0]), "Num": np.array([1], np.int32)},
            {"dtype": 5})
    assert y.tolist() == [2.0]


@pytest.mark.parametrize("str_value, check", [
    ("inf", lambda v: v == math.inf),
    ("-inf", lambda v: v == -math.inf),
    ("nan", math.isnan),
    ("2.5", lambda v: v == 2.5),
])
def test_fill_constant_str_value_wins(str_value, check):
    y = out("fill_constant", {}, {"shape": [2, 3], "dtype": 5, "value": 7.0, "str_value": str_value})
    assert y.shape == (2, 3) and y.dtype == np.float32
    assert all(check(float(v)) for v in y.reshape(-1))


def test_fill_constant_dtypes_and_shape_inputs():
    y = out("fill_constant", {}, {"shape": [3], "dtype": 3, "value": 0.0, "str_value": "12345678901"})
    assert y.dtype == np.int64 and y.tolist() == [12345678901] * 3
    y = out("fill_constant", {}, {"shape": [2], "dtype": 0, "value": 1.0})
    assert y.dtype == np.bool_ and y.tolist() == [True, True]
    y = out("fill_constant", {"ShapeTensor": np.array([2, 2], np.int32)},
            {"shape": [5], "dtype": 6, "value": 1.5})
    assert y.shape == (2, 2) and y.dtype == np.float64 and (y == 1.5).all()
    y = out("fill_constant", {"ShapeTensorList": [np.array([3]), np.array([1], np.int32)]},
            {"shape": [5], "dtype": 2, "value": 4.0})
    assert y.shape == (3, 1) and y.dtype == np.int32 and (y == 4).all()
    y = out("fill_constant", {"ValueTensor": np.array([2.75], np.float64)},
            {"shape": [2], "dtype": 5, "value": 1.0, "str_value": "9"})
    assert y.dtype == np.float32 and y.tolist() == [2.75, 2.75]
    y = out("fill_constant", {}, {"shape": [], "dtype": 5, "value": 3.0})
    assert y.shape == () and float(y) == 3.0


def test_fill_constant_bf16_bits():
    y = out("fill_constant", {}, {"shape": [2], "dtype": 22, "value": 1.0})
    assert y.dtype == np.uint16 and y.tolist() == [0x3F80, 0x3F80]


def test_fill_any_like():
    x = np.zeros((2, 3), dtype=np.int32)
    y = out("fill_any_like", {"X": x}, {"value": 5.0, "dtype": -1})
    assert y.dtype == np.int32 and y.shape == (2, 3) and (y == 5).all()
    y = out("fill_any_like", {"X": x}, {"value": 0.5, "dtype": 6})
    assert y.dtype == np.float64 and (y == 0.5).all()


def test_fill_constant_batch_size_like():
    x = np.zeros((7, 3), dtype=np.float32)
    y = out("fill_constant_batch_size_like", {"Input": x},
            {"shape": [-1, 4], "input_dim_idx": 0, "output_dim_idx": 0, "dtype": 5, "value": 2.0})
    assert y.shape == (7, 4) and (y == 2.0).all()
    y = out("fill_constant_batch_size_like", {"Input": x},
            {"shape": [2, -1], "input_dim_idx": 1, "output_dim_idx": 1, "dtype": 3, "str_value": "-3"})
    assert y.shape == (2, 3) and y.dtype == np.int64 and (y == -3).all()


def test_assign_copies():
    x = arange(2, 2)
    y = out("assign", {"X": x})
    assert y.tolist() == x.tolist() and y is not x
    y[0, 0] = 9
    assert x[0, 0] == 0


@pytest.mark.parametrize("dtype, values, expected_dtype", [
    (5, [1.5, 2.0, -3.0, 4.25], np.float32),
    (2, [1, 2, 3, 4], np.int32),
    (3, [2**40, -1, 0, 7], np.int64),
    (0, [True, False, True, True], np.bool_),
    (6, [0.1, 0.2, 0.3, 0.4], np.float64),
])
def test_assign_value(dtype, values, expected_dtype):
    y = out("assign_value", {}, {"shape": [2, 2], "dtype": dtype, "values": values})
    assert y.dtype == expected_dtype and y.shape == (2, 2)
    assert y.reshape(-1).tolist() == [expected_dtype(v).item() for v in values]


def test_assign_value_legacy_keyword():
    from keel.kernels.tensor import assign_value
    y = assign_value(np, None, shape=[3], dtype=5, fp32_values=[1.0, 2.0, 3.0])
    assert y.tolist() == [1.0, 2.0, 3.0]


def test_shape():
    y = out("shape", {"Input": np.zeros((2, 0, 5))})
    assert y.dtype == np.int32 and y.tolist() == [2, 0, 5]
    assert out("shape", {"Input": np.float32(1.0) * np.ones(())}).tolist() == []


def test_one_hot_v2():
    x = np.array([[0, 2], [1, 3]], dtype=np.int64)
    y = out("one_hot_v2", {"X": x}, {"depth": 4})
    assert y.shape == (2, 2, 4) and y.dtype == np.float32
    for i, j, k in itertools.product(range(2), range(2), range(4)):
        assert y[i, j, k] == (1.0 if k == x[i, j] else 0.0)
    y = out("one_hot_v2", {"X": np.array([1, 5, -1]), "depth_tensor": np.array([3], np.int32)},
            {"depth": 10, "dtype": 3, "allow_out_of_range": True})
    assert y.dtype == np.int64 and y.tolist() == [[0, 1, 0], [0, 0, 0], [0, 0, 0]]
    with pytest.raises(ValueError):
        run("one_hot_v2", {"X": np.array([1, 5])}, {"depth": 3})


def test_where_index():
    c = np.array([[True, False, True], [False, False, True]])
    y = out("where_index", {"Condition": c})
    assert y.dtype == np.int64
    assert y.tolist() == [[i, j] for i in range(2) for j in range(3) if c[i, j]]
    assert out("where_index", {"Condition": np.zeros((2, 2), bool)}).shape == (0, 2)


def test_pad_matches_loops():
    x = arange(2, 3)
    y = out("pad", {"X": x}, {"paddings": [1, 0, 2, 1], "pad_value": -1.0})
    assert y.shape == (3, 6)
    for i, j in itertools.product(range(3), range(6)):
        src_i, src_j = i - 1, j - 2
        inside = 0 <= src_i < 2 and 0 <= src_j < 3
        assert y[i, j] == (x[src_i, src_j] if inside else -1.0)


def _pad3d_reference(x, p, mode, value, channels_last):
    """Output built element-wise from index maps (no np.pad)."""
    if channels_last:
        x = np.moveaxis(x, -1, 1)
    n, c, d, h, w = x.shape
    left, right, top, bottom, front, back = p
    out_shape = (n, c, d + front + back, h + top + bottom, w + left + right)
    y = np.empty(out_shape, dtype=x.dtype)

    def src(i, size, before):
        k = i - before
        if 0 <= k < size:
            return k
        if mode == "constant":
            return None
        if mode == "reflect":
            return -k if k < 0 else 2 * (size - 1) - k
        if mode == "replicate":
            return min(max(k, 0), size - 1)
        return k % size  # circular

    for a, b, e in itertools.product(range(out_shape[2]), range(out_shape[3]), range(out_shape[4])):
        s = (src(a, d, front), src(b, h, top), src(e, w, left))
        y[:, :, a, b, e] = value if None in s else x[:, :, s[0], s[1], s[2]]
    return np.moveaxis(y, 1, -1) if channels_last else y


@pytest.mark.parametrize("mode", ["constant", "reflect", "replicate", "circular"])
@pytest.mark.parametrize("data_format", ["NCDHW", "NDHWC"])
def test_pad3d_every_mode(mode, data_format):
    rng = np.random.default_rng(0)
    shape = (2, 3, 3, 4, 5) if data_format == "NCDHW" else (2, 3, 4, 5, 3)
    x = rng.standard_normal(shape).astype(np.float32)
    p = [2, 1, 0, 3, 1, 2]
    y = out("pad3d", {"X": x}, {"paddings": p, "mode": mode, "value": 0.5, "data_format": data_format})
    ref = _pad3d_reference(x, p, mode, 0.5, data_format == "NDHWC")
    np.testing.assert_array_equal(y, ref)
    # and against np.pad with the corresponding mode
    np_mode = {"constant": "constant", "reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode]
    sp = [(0, 0), (0, 0), (1, 2), (0, 3), (2, 1)] if data_format == "NCDHW" else \
        [(0, 0), (1, 2), (0, 3), (2, 1), (0, 0)]
    kw = {"constant_values": 0.5} if mode == "constant" else {}
    np.testing.assert_array_equal(y, np.pad(x, sp, mode=np_mode, **kw))


def test_pad3d_paddings_tensor():
    x = arange(1, 1, 1, 1, 2)
    y = out("pad3d", {"X": x, "Paddings": np.array([1, 0, 0, 0, 0, 0], np.int32)},
            {"paddings": [0] * 6, "mode": "constant", "value": 9.0})
    assert y.reshape(-1).tolist() == [9.0, 0.0, 1.0]


# -- random ops --------------------------------------------------------------------------

def gen(seed=123):
    return np.random.default_rng(seed)


@pytest.mark.parametrize("dtype, np_dtype", [(5, np.float32), (6, np.float64), (4, np.float16)])
def test_uniform_random_shape_dtype_bounds_stats(dtype, np_dtype):
    y = out("uniform_random", {}, {"shape": [200, 500], "dtype": dtype, "min": -2.0, "max": 3.0},
            rng=gen())
    assert y.shape == (200, 500) and y.dtype == np_dtype
    yf = y.astype(np.float64)
    assert yf.min() >= -2.0 and yf.max() <= 3.0
    assert abs(yf.mean() - 0.5) < 0.02
    assert abs(yf.std() - 5 / math.sqrt(12)) < 0.02


def test_uniform_random_seeds():
    attrs = {"shape": [1000], "min": 0.0, "max": 1.0}
    a = out("uniform_random", {}, {**attrs, "seed": 7}, rng=gen(1))
    b = out("uniform_random", {}, {**attrs, "seed": 7}, rng=gen(2))
    np.testing.assert_array_equal(a, b)            # fixed seed: the executor's rng is ignored
    c = out("uniform_random", {}, {**attrs, "seed": 8}, rng=gen(1))
    assert not np.array_equal(a, c)
    d = out("uniform_random", {}, {**attrs, "seed": 0}, rng=gen(5))
    e = out("uniform_random", {}, {**attrs, "seed": 0}, rng=gen(5))
    np.testing.assert_array_equal(d, e)            # seed 0: same rng state, same numbers
    r = gen(5)
    f1 = out("uniform_random", {}, {**attrs, "seed": 0}, rng=r)
    f2 = out("uniform_random", {}, {**attrs, "seed": 0}, rng=r)
    assert not np.array_equal(f1, f2)              # the executor's generator advances


def test_uniform_random_shape_inputs_and_diag():
    y = out("uniform_random", {"ShapeTensor": np.array([3, 4], np.int64)}, {"shape": [1]}, rng=gen())
    assert y.shape == (3, 4)
    y = out("uniform_random", {"ShapeTensorList": [np.array([2]), np.array([5])]}, {}, rng=gen())
    assert y.shape == (2, 5)
    y = out("uniform_random", {}, {"shape": [4, 4], "min": -1.0, "max": 0.0, "diag_num": 4,
                                   "diag_step": 4, "diag_val": 1.0}, rng=gen())
    flat = y.reshape(-1)
    for pos in range(16):
        if pos in (0, 5, 10, 15):
            assert flat[pos] == 1.0
        else:
            assert flat[pos] <= 0.0


def test_random_ops_need_rng_when_unseeded():
    with pytest.raises(ValueError):
        run("uniform_random", {}, {"shape": [2]})


@pytest.mark.parametrize("dtype, np_dtype", [(5, np.float32), (6, np.float64)])
def test_gaussian_random_stats(dtype, np_dtype):
    y = out("gaussian_random", {}, {"shape": [400, 500], "mean": 1.5, "std": 0.5, "dtype": dtype}, rng=gen())
    assert y.dtype == np_dtype and y.shape == (400, 500)
    assert abs(y.mean() - 1.5) < 0.005
    assert abs(y.std() - 0.5) < 0.005
    a = out("gaussian_random", {}, {"shape": [50], "seed": 3}, rng=gen(1))
    b = out("gaussian_random", {}, {"shape": [50], "seed": 3}, rng=gen(9))
    np.testing.assert_array_equal(a, b)


def _truncnorm_moments(mean, std, a, b):
    pdf = lambda z: math.exp(-z * z / 2) / math.sqrt(2 * math.pi)  # noqa: E731
    cdf = lambda z: (1 + math.erf(z / math.sqrt(2))) / 2  # noqa: E731
    al, be = (a - mean) / std, (b - mean) / std
    z = cdf(be) - cdf(al)
    m = mean + std * (pdf(al) - pdf(be)) / z
    var = std ** 2 * (1 + (al * pdf(al) - be * pdf(be)) / z - ((pdf(al) - pdf(be)) / z) ** 2)
    return m, math.sqrt(var)


@pytest.mark.parametrize("mean, std, a, b", [
    (0.0, 1.0, -2.0, 2.0),
    (5.0, 2.0, 3.0, 9.0),       # a, b are absolute bounds (PaddlePaddle), not multiples of std
    (0.0, 0.02, -2.0, 2.0),     # bounds far outside: effectively an untruncated normal
    (1.0, 1.0, 1.5, 4.0),
])
def test_truncated_gaussian_random_bounds_and_moments(mean, std, a, b):
    y = out("truncated_gaussian_random", {}, {"shape": [300, 400], "mean": mean, "std": std,
                                              "a": a, "b": b, "dtype": 5}, rng=gen())
    assert y.dtype == np.float32 and y.shape == (300, 400)
    assert y.min() >= np.float32(a) and y.max() <= np.float32(b)
    m, s = _truncnorm_moments(mean, std, a, b)
    assert abs(float(y.mean()) - m) < 0.01 * max(std, 0.1)
    assert abs(float(y.std()) - s) < 0.01 * max(std, 0.1)


def test_truncated_gaussian_random_seed():
    attrs = {"shape": [64], "seed": 11, "dtype": 6}
    np.testing.assert_array_equal(out("truncated_gaussian_random", {}, attrs, rng=gen(1)),
                                  out("truncated_gaussian_random", {}, attrs, rng=gen(2)))


def test_erfinv_against_scipy():
    special = pytest.importorskip("scipy.special")
    from keel.kernels.random import erfinv
    x = np.concatenate([np.linspace(-0.999999, 0.999999, 20001), [-1 + 1e-12, 1 - 1e-12, 0.85, -0.86]])
    np.testing.assert_allclose(erfinv(np, x), special.erfinv(x), rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("dtype, np_dtype", [(2, np.int32), (3, np.int64)])
def test_randint(dtype, np_dtype):
    y = out("randint", {}, {"low": -3, "high": 4, "shape": [10000], "dtype": dtype}, rng=gen())
    assert y.dtype == np_dtype and y.shape == (10000,)
    assert y.min() == -3 and y.max() == 3
    counts = np.bincount(y - (-3))
    assert (abs(counts / 10000 - 1 / 7) < 0.02).all()
    a = out("randint", {}, {"low": 0, "high": 100, "shape": [20], "seed": 5}, rng=gen(1))
    b = out("randint", {}, {"low": 0, "high": 100, "shape": [20], "seed": 5}, rng=gen(2))
    np.testing.assert_array_equal(a, b)


# -- dropout -----------------------------------------------------------------------------

@pytest.mark.parametrize("impl", ["upscale_in_train", "downgrade_in_infer"])
def test_dropout_train_mask_consistent(impl):
    x = np.random.default_rng(0).uniform(1, 2, size=(200, 300)).astype(np.float32)
    res = run("dropout", {"X": x}, {"dropout_prob": 0.3, "is_test": False,
                                    "dropout_implementation": impl}, rng=gen())
    y, mask = res["Out"], res["Mask"]
    assert y.dtype == np.float32 and mask.dtype == np.uint8 and mask.shape == x.shape
    assert set(np.unique(mask).tolist()) <= {0, 1}
    assert abs(1 - mask.mean() - 0.3) < 0.01
    kept = mask == 1
    assert (y[~kept] == 0).all()
    if impl == "upscale_in_train":
        np.testing.assert_allclose(y[kept], x[kept] / np.float32(0.7), rtol=1e-6)
    else:
        np.testing.assert_array_equal(y[kept], x[kept])


@pytest.mark.parametrize("impl, factor", [("upscale_in_train", 1.0), ("downgrade_in_infer", 0.75)])
def test_dropout_test_mode(impl, factor):
    x = arange(3, 4) + 1
    res = run("dropout", {"X": x}, {"dropout_prob": 0.25, "is_test": True,
                                    "dropout_implementation": impl}, rng=gen())
    np.testing.assert_allclose(res["Out"], x * factor, rtol=1e-7)
    # a bound Mask (dropout_grad reads it) is all ones; an unbound one is not computed
    assert res["Mask"].dtype == np.uint8 and res["Mask"].all()
    assert res["Out"] is not x
    from keel.executor.kernel_call import bind
    fn, _ = bind("dropout", {"dropout_prob": 0.25, "is_test": True}, need={"Out"})
    assert fn(x, None)[1] is None


def test_dropout_fixed_seed_reproducible():
    x = np.ones((50, 50), dtype=np.float32)
    attrs = {"dropout_prob": 0.5, "fix_seed": True, "seed": 42}
    a = run("dropout", {"X": x}, attrs, rng=gen(1))
    b = run("dropout", {"X": x}, attrs, rng=gen(2))
    np.testing.assert_array_equal(a["Mask"], b["Mask"])
    np.testing.assert_array_equal(a["Out"], b["Out"])
    # seed without fix_seed is ignored: the executor's generator is used
    c = run("dropout", {"X": x}, {"dropout_prob": 0.5, "seed": 42}, rng=gen(1))
    d = run("dropout", {"X": x}, {"dropout_prob": 0.5, "seed": 42}, rng=gen(2))
    assert not np.array_equal(c["Mask"], d["Mask"])
    # the Seed input overrides the attributes
    e = run("dropout", {"X": x, "Seed": np.array([42], np.int32)}, {"dropout_prob": 0.5}, rng=gen(3))
    np.testing.assert_array_equal(e["Mask"], a["Mask"])


@pytest.mark.parametrize("impl", ["upscale_in_train", "downgrade_in_infer"])
def test_dropout_p0_and_p1(impl):
    x = arange(4, 5) + 1
    r0 = run("dropout", {"X": x}, {"dropout_prob": 0.0, "dropout_implementation": impl}, rng=gen())
    np.testing.assert_array_equal(r0["Out"], x)
    assert (r0["Mask"] == 1).all()
    r1 = run("dropout", {"X": x}, {"dropout_prob": 1.0, "dropout_implementation": impl}, rng=gen())
    assert (r1["Out"] == 0).all() and (r1["Mask"] == 0).all()
    assert r1["Out"].dtype == x.dtype and r1["Mask"].dtype == np.uint8


def test_dropout_float64_scale_uses_float32_keep():
    x = np.ones(1000, dtype=np.float64)
    y = run("dropout", {"X": x}, {"dropout_prob": 0.1, "dropout_implementation": "upscale_in_train"},
            rng=gen())["Out"]
    kept = y[y != 0]
    assert (kept == 1.0 / float(np.float32(1) - np.float32(0.1))).all()


# -- the same kernels on cupy (skipped without cupy and a CUDA device) --------------------

def _gpu_cases():
    x = arange(2, 3, 4)
    return [
        ("reshape2", {"X": x}, {"shape": [0, -1]}),
        ("reshape2", {"X": x, "Shape": np.array([4, -1], np.int32)}, {}),
        ("transpose2", {"X": x}, {"axis": [2, 0, 1]}),
        ("flatten_contiguous_range", {"X": x}, {"start_axis": 1, "stop_axis": 2}),
        ("squeeze2", {"X": arange(1, 3, 1)}, {"axes": [0, 1]}),
        ("unsqueeze2", {"X": x}, {"axes": [0, -1]}),
        ("concat", {"X": [x, x + 1]}, {"axis": 1}),
        ("split", {"X": x}, {"sections": [1, -1], "axis": 2}),
        ("stack", {"X": [x, x]}, {"axis": 1}),
        ("unstack", {"X": x}, {"axis": 1}),
        ("slice", {"Input": x}, {"axes": [1, 2], "starts": [-2, 1], "ends": [100, 3], "decrease_axis": []}),
        ("slice", {"Input": x}, {"axes": [0], "starts": [1], "ends": [2], "decrease_axis": [0]}),
        ("strided_slice", {"Input": x}, {"axes": [2], "starts": [-1], "ends": [-1], "strides": [-2]}),
        ("gather", {"X": x, "Index": np.array([2, 0], np.int64)}, {"axis": 1}),
        ("gather_nd", {"X": x, "Index": np.array([[1, 2], [0, 0]], np.int64)}, {}),
        ("scatter", {"X": arange(3, 2), "Ids": np.array([1, 1, 0]), "Updates": arange(3, 2) + 1},
         {"overwrite": False}),
        ("scatter", {"X": arange(3, 2), "Ids": np.array([2, 0]), "Updates": arange(2, 2) + 1}, {}),
        ("expand_v2", {"X": arange(3, 1)}, {"shape": [2, -1, 4]}),
        ("expand_as_v2", {"X": arange(3, 1), "Y": np.zeros((3, 5))}, {"target_shape": [-1, 5]}),
        ("tile", {"X": arange(2, 2)}, {"repeat_times": [2, 1, 3]}),
        ("range", {"Start": np.array([1.0], np.float32), "End": np.array([3.0], np.float32),
                   "Step": np.array([0.5], np.float32)}, {}),
        ("linspace", {"Start": np.array([0.0]), "Stop": np.array([1.0]), "Num": np.array([7], np.int32)},
         {"dtype": 5}),
        ("fill_constant", {}, {"shape": [2, 2], "dtype": 5, "str_value": "-inf"}),
        ("fill_constant", {"ValueTensor": np.array([3.5])}, {"shape": [3], "dtype": 6}),
        ("fill_constant", {}, {"shape": [2], "dtype": 22, "value": 1.5}),
        ("fill_any_like", {"X": x}, {"value": 2.0, "dtype": 3}),
        ("fill_constant_batch_size_like", {"Input": x}, {"shape": [-1, 2], "dtype": 5, "value": 1.0}),
        ("assign", {"X": x}, {}),
        ("assign_value", {}, {"shape": [2], "dtype": 3, "values": [5, -6]}),
        ("shape", {"Input": x}, {}),
        ("one_hot_v2", {"X": np.array([0, 3, 1])}, {"depth": 4}),
        ("where_index", {"Condition": x > 10}, {}),
        ("pad", {"X": arange(2, 2)}, {"paddings": [1, 0, 0, 2], "pad_value": 7.0}),
    ] + [("pad3d", {"X": arange(1, 2, 2, 3, 3)}, {"paddings": [1, 2, 0, 1, 1, 1], "mode": m, "value": 0.5})
         for m in ("constant", "reflect", "replicate", "circular")]


def _to_host(v):
    if isinstance(v, list):
        return [_to_host(t) for t in v]
    import cupy
    assert isinstance(v, cupy.ndarray)
    return cupy.asnumpy(v)


def _to_device(v):
    import cupy
    if isinstance(v, list):
        return [cupy.asarray(t) for t in v]
    return cupy.asarray(v)


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(len(_gpu_cases())))
def test_tensor_kernels_on_cupy_match_numpy(case):
    from keel.kernels.array_module import cupy_available
    if not cupy_available():
        pytest.skip("needs cupy and a CUDA device")
    import cupy
    op, inputs, attrs = _gpu_cases()[case]
    want = call_kernel(op, inputs, attrs)
    got = call_kernel(op, {k: _to_device(v) for k, v in inputs.items()}, attrs, xp=cupy)
    assert set(got) == set(want)
    for slot in want:
        g, w = _to_host(got[slot]), want[slot]
        if isinstance(w, list):
            assert len(g) == len(w)
            for a, b in zip(g, w):
                assert a.dtype == b.dtype
                np.testing.assert_array_equal(a, b)
        else:
            assert g.dtype == w.dtype and g.shape == w.shape
            np.testing.assert_allclose(g, w, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("op, attrs", [
    ("uniform_random", {"shape": [100, 100], "min": -2.0, "max": 3.0, "dtype": 5}),
    ("gaussian_random", {"shape": [100, 100], "mean": 1.0, "std": 2.0, "dtype": 6}),
    ("truncated_gaussian_random", {"shape": [100, 100], "mean": 1.0, "std": 2.0, "a": 0.0, "b": 3.0}),
    ("randint", {"low": -3, "high": 4, "shape": [1000], "dtype": 2}),
])
def test_random_kernels_on_cupy(op, attrs):
    from keel.kernels.array_module import cupy_available
    if not cupy_available():
        pytest.skip("needs cupy and a CUDA device")
    import cupy
    want = out(op, {}, attrs, rng=gen())
    a = call_kernel(op, {}, {**attrs, "seed": 9}, xp=cupy, rng=cupy.random.default_rng(1))["Out"]
    b = call_kernel(op, {}, {**attrs, "seed": 9}, xp=cupy, rng=cupy.random.default_rng(2))["Out"]
    assert isinstance(a, cupy.ndarray) and a.dtype == want.dtype and a.shape == want.shape
    np.testing.assert_array_equal(cupy.asnumpy(a), cupy.asnumpy(b))
    h = cupy.asnumpy(a).astype(np.float64)
    if op == "uniform_random":
        assert h.min() >= -2.0 and h.max() <= 3.0
    if op == "truncated_gaussian_random":
        assert h.min() >= 0.0 and h.max() <= 3.0
    if op == "randint":
        assert h.min() >= -3 and h.max() <= 3


@pytest.mark.gpu
def test_dropout_on_cupy():
    from keel.kernels.array_module import cupy_available
    if not cupy_available():
        pytest.skip("needs cupy and a CUDA device")
    import cupy
    x = cupy.ones((100, 100), dtype=cupy.float32)
    res = call_kernel("dropout", {"X": x},
                      {"dropout_prob": 0.25, "dropout_implementation": "upscale_in_train"},
                      xp=cupy, rng=cupy.random.default_rng(0))
    y, mask = cupy.asnumpy(res["Out"]), cupy.asnumpy(res["Mask"])
    assert mask.dtype == np.uint8 and abs(1 - mask.mean() - 0.25) < 0.03
    np.testing.assert_allclose(y[mask == 1], 1 / np.float32(0.75), rtol=1e-6)
    assert (y[mask == 0] == 0).all()
