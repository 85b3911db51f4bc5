"""Shape/dtype inference and build-time errors of the tensor ops (program/ops/tensor.py),
each appended to a fresh program."""
import pytest

import keel.program as pg
from shapecheck import build, expect_error, out
from keel.program.errors import AttrError, DTypeError, ShapeError, SlotError
from keel.program.ops import registry
from keel.proto import pb

F32, F64, I32, I64, BOOL = "float32", "float64", "int32", "int64", "bool"
XS = {"Out": 1, "XShape": 1}


def shape_of(op_type, inputs, attrs=None, outputs=None):
    return build(op_type, inputs, outputs or {"Out": 1}, attrs)["Out"][0]


@pytest.fixture
def blk():
    return pg.Program().global_block()


X = ([-1, 3, 4], F32)


# -- feed / fetch ----------------------------------------------------------------------------------
def test_feed_and_fetch_leave_shapes_alone(blk):
    feed = blk.create_var("feed", type=pb.VarType.FEED_MINIBATCH, persistable=True)
    fetch = blk.create_var("fetch", type=pb.VarType.FETCH_LIST, persistable=True)
    x = blk.create_var("x", [-1, 64])
    y = blk.create_var("y", [-1, 10])
    op = blk.append_op("feed", {"X": feed}, {"Out": x}, {"col": 0})
    blk.append_op("fetch", {"X": y}, {"Out": fetch}, {"col": 0})
    assert op.attr("col") == 0
    assert x.shape == (-1, 64) and y.shape == (-1, 10) and feed.shape is None
    expect_error(AttrError, lambda: blk.append_op("feed", {"X": feed}, {"Out": x}), "feed:", "'col'")
    assert registry.get("feed").grad is registry.NOT_DIFFERENTIABLE


# -- reshape2 -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("x, shape, want", [
    ([-1, 3, 4], [0, -1], [-1, 12]),          # the unknown batch is copied, so -1 is 12
    ([-1, 3, 4], [-1, 12], [-1, 12]),
    ([-1, 3, 4], [0, 3, 2, 2], [-1, 3, 2, 2]),
    ([-1, 3, 4], [-1], [-1]),
    ([-1, 3, 4], [2, -1, 6], [2, -1, 6]),     # the unknown batch is not copied: stays unknown
    ([-1, 3, 4], [0, 0, 0], [-1, 3, 4]),
    ([3, 5], [5, -1], [5, 3]),
    ([3, 5], [0, 5], [3, 5]),
    ([3, 5], [15, 1], [15, 1]),
    ([3, 5], [-1], [15]),
    ([2, 0, 3], [0, 0, 5], [2, 0, 5]),
])
def test_reshape2(x, shape, want):
    r = build("reshape2", {"X": (x, F32)}, XS, {"shape": shape})
    assert r["Out"] == (want, F32)
    assert r["XShape"] == ([0] + x, F32)


def test_reshape2_shape_tensors():
    assert shape_of("reshape2", {"X": ([3, 5], F32), "Shape": ([2], I32)}, outputs=XS) == [-1, -1]
    assert shape_of("reshape2", {"X": ([3, 5], F32), "ShapeTensor": [([1], I32), ([1], I32)]},
                    {"shape": [5, -1]}, outputs=XS) == [5, -1]
    r = build("reshape2", {"X": ([3, 5], F32)}, {"Out": 1}, {"shape": [15]})  # XShape is optional
    assert r["Out"] == ([15], F32)
    assert registry.get("reshape2").attrs["use_quantizer"].default is False


def test_reshape2_errors(blk):
    x, o = blk.create_var("x", [3, 5]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("reshape2", {"X": x}, {"Out": o}, {"shape": [4, 4]}), "reshape2:", "x [3, 5] float32", "[4, 4]")
    expect_error(ShapeError, lambda: blk.append_op("reshape2", {"X": x}, {"Out": o}, {"shape": [2, -1]}), "reshape2:", "not divisible by 2")
    expect_error(ShapeError, lambda: blk.append_op("reshape2", {"X": x}, {"Out": o}, {"shape": [-1, -1]}), "more than one -1")
    expect_error(ShapeError, lambda: blk.append_op("reshape2", {"X": x}, {"Out": o}, {"shape": [0, 0, 0]}), "index 2")
    expect_error(ShapeError, lambda: blk.append_op("reshape2", {"X": x}, {"Out": o}, {"shape": [-3, 5]}), "invalid dim -3")
    b = blk.create_var("b", [-1, 3, 4])
    expect_error(ShapeError, lambda: blk.append_op("reshape2", {"X": b}, {"Out": o}, {"shape": [0, 5, -1]}), "12 elements are not divisible by 5")


# -- transpose2, flatten, squeeze2, unsqueeze2 --------------------------------------------------------
def test_transpose2(blk):
    r = build("transpose2", {"X": X}, XS, {"axis": [0, 2, 1]})
    assert r == {"Out": ([-1, 4, 3], F32), "XShape": ([0, -1, 3, 4], F32)}
    assert shape_of("transpose2", {"X": X}, {"axis": [-1, 0, 1]}) == [4, -1, 3]
    assert "data_format" in registry.get("transpose2").extra_attrs
    x, o = blk.create_var("x", [2, 3, 4]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("transpose2", {"X": x}, {"Out": o}, {"axis": [0, 2]}), "transpose2:", "[0, 2]", "x [2, 3, 4]")
    expect_error(ShapeError, lambda: blk.append_op("transpose2", {"X": x}, {"Out": o}, {"axis": [0, 0, 1]}), "not a permutation")
    expect_error(AttrError, lambda: blk.append_op("transpose2", {"X": x}, {"Out": o}), "transpose2:", "'axis'")


@pytest.mark.parametrize("start, stop, want", [
    (1, -1, [-1, 12]), (0, 2, [-1]), (0, 0, [-1, 3, 4]), (-2, -1, [-1, 12]), (0, 1, [-1, 4])])
def test_flatten(start, stop, want):
    r = build("flatten_contiguous_range", {"X": X}, XS, {"start_axis": start, "stop_axis": stop})
    assert r == {"Out": (want, F32), "XShape": ([0, -1, 3, 4], F32)}


def test_flatten_more(blk):
    assert shape_of("flatten_contiguous_range", {"X": ([2, 3, 4], F32)}, {"start_axis": 0, "stop_axis": 1}, XS) == [6, 4]
    assert shape_of("flatten_contiguous_range", {"X": ([], F32)}, {"start_axis": 0, "stop_axis": -1}, XS) == [1]
    x, o, xs = blk.create_var("x", [2, 3, 4]), blk.create_var("o"), blk.create_var("xs")
    expect_error(ShapeError, lambda: blk.append_op("flatten_contiguous_range", {"X": x}, {"Out": o, "XShape": xs}, {"start_axis": 2, "stop_axis": 1}), "flatten_contiguous_range:", "comes after")
    expect_error(ShapeError, lambda: blk.append_op("flatten_contiguous_range", {"X": x}, {"Out": o, "XShape": xs}, {"start_axis": 1, "stop_axis": 3}), "stop_axis 3")
    # XShape is a required output of flatten_contiguous_range (flags: extra only)
    expect_error(SlotError, lambda: blk.append_op("flatten_contiguous_range", {"X": x}, {"Out": o}, {"start_axis": 0, "stop_axis": 1}), "'XShape'")


@pytest.mark.parametrize("x, axes, want", [
    ([-1, 1, 4, 1], [], [-1, 4]),
    ([-1, 1, 4, 1], [1, -1], [-1, 4]),
    ([-1, 1, 4, 1], [2], [-1, 1, 4, 1]),     # a named dim of size 4 is kept
    ([-1, 1, 4], [0], [1, 4]),                # a named unknown dim is taken to be 1 (as Paddle)
    ([1], [], []),
    ([], [], []),
])
def test_squeeze2(x, axes, want):
    r = build("squeeze2", {"X": (x, F32)}, XS, {"axes": axes})
    assert r == {"Out": (want, F32), "XShape": ([0] + x, F32)}


@pytest.mark.parametrize("x, axes, want", [
    ([-1, 3, 4], [0, 4], [1, -1, 3, 4, 1]),
    ([-1, 3, 4], [-1], [-1, 3, 4, 1]),
    ([2, 3], [-1, 0], [1, 2, 3, 1]),
    ([2, 3], [1, 1], [2, 1, 1, 3]),
    ([], [0], [1]),
])
def test_unsqueeze2(x, axes, want):
    assert shape_of("unsqueeze2", {"X": (x, F32)}, {"axes": axes}, XS) == want


def test_squeeze_unsqueeze_errors(blk):
    x, o = blk.create_var("x", [2, 1, 4]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("squeeze2", {"X": x}, {"Out": o}, {"axes": [5]}), "squeeze2:", "axis 5")
    expect_error(ShapeError, lambda: blk.append_op("unsqueeze2", {"X": x}, {"Out": o}, {"axes": [5]}), "unsqueeze2:", "axis 5", "x [2, 1, 4]")
    assert shape_of("unsqueeze2", {"X": ([2, 3], F32), "AxesTensorList": [([1], I32)]}, outputs=XS) == [-1, -1, -1]


# -- concat, split, stack, unstack -----------------------------------------------------------------
def test_concat(blk):
    assert out("concat", {"X": [X, ([-1, 2, 4], F32)]}, {"axis": 1}) == ([-1, 5, 4], F32)
    assert out("concat", {"X": [X, ([5, 3, 4], F32)]}, {"axis": 0}) == ([-1, 3, 4], F32)
    assert out("concat", {"X": [X, ([2, 3, 4], F32)]}, {"axis": -1}) == ([2, 3, 8], F32)
    assert out("concat", {"X": [X, X], "AxisTensor": ([1], I32)}) == ([-1, -1, -1], F32)
    a, b, c, o = (blk.create_var("a", [2, 3]), blk.create_var("b", [2, 4, 1]),
                  blk.create_var("c", [5, 3]), blk.create_var("o"))
    expect_error(ShapeError, lambda: blk.append_op("concat", {"X": [a, b]}, {"Out": o}), "concat:", "same rank", "b [2, 4, 1]")
    expect_error(ShapeError, lambda: blk.append_op("concat", {"X": [a, c]}, {"Out": o}, {"axis": 1}), "concat:", "dim 0", "c [5, 3]")
    expect_error(ShapeError, lambda: blk.append_op("concat", {"X": [a, a]}, {"Out": o}, {"axis": 2}), "axis 2")
    i = blk.create_var("i", [2, 3], "int64")
    expect_error(DTypeError, lambda: blk.append_op("concat", {"X": [a, i]}, {"Out": o}), "concat:", "i [2, 3] int64")


def test_split():
    r = build("split", {"X": X}, {"Out": 3}, {"axis": 1, "num": 3})["Out"]
    assert r == [([-1, 1, 4], F32)] * 3
    r = build("split", {"X": X}, {"Out": 2}, {"axis": -1, "sections": [1, -1]})["Out"]
    assert r == [([-1, 3, 1], F32), ([-1, 3, 3], F32)]
    r = build("split", {"X": X}, {"Out": 2}, {"axis": 0, "sections": [1, -1]})["Out"]
    assert r == [([1, 3, 4], F32), ([-1, 3, 4], F32)]
    r = build("split", {"X": X}, {"Out": 2}, {"axis": 0, "num": 2})["Out"]
    assert r == [([-1, 3, 4], F32)] * 2


def test_split_errors(blk):
    x, o1, o2 = blk.create_var("x", [-1, 3, 4]), blk.create_var("o1"), blk.create_var("o2")
    expect_error(ShapeError, lambda: blk.append_op("split", {"X": x}, {"Out": [o1, o2]}, {"axis": 1, "num": 2}), "split:", "not divisible by num=2", "x [-1, 3, 4]")
    expect_error(ShapeError, lambda: blk.append_op("split", {"X": x}, {"Out": [o1, o2]}, {"axis": 2, "sections": [1, 2]}), "add up to 3", "is 4")
    expect_error(ShapeError, lambda: blk.append_op("split", {"X": x}, {"Out": [o1, o2]}, {"axis": 2, "num": 4}), "num=4 but 2 outputs")
    expect_error(ShapeError, lambda: blk.append_op("split", {"X": x}, {"Out": [o1, o2]}, {"axis": 2}), "num > 0 or non-empty sections")
    expect_error(SlotError, lambda: blk.append_op("split", {"X": x}, {}), "split:", "'Out'")


def test_stack_unstack(blk):
    assert build("stack", {"X": [X, X]}, {"Y": 1}, {"axis": 1})["Y"] == ([-1, 2, 3, 4], F32)
    assert build("stack", {"X": [X, ([2, 3, 4], F32)]}, {"Y": 1}, {"axis": -1})["Y"] == ([2, 3, 4, 2], F32)
    ys = build("unstack", {"X": X}, {"Y": 3}, {"axis": 1, "num": 3})["Y"]
    assert ys == [([-1, 4], F32)] * 3
    x, y, o = blk.create_var("x", [2, 3]), blk.create_var("y", [2, 4]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("stack", {"X": [x, y]}, {"Y": o}), "stack:", "y [2, 4]")
    expect_error(ShapeError, lambda: blk.append_op("stack", {"X": [x, x]}, {"Y": o}, {"axis": 3}), "axis 3")
    expect_error(ShapeError, lambda: blk.append_op("unstack", {"X": x}, {"Y": [o]}, {"axis": 1, "num": 1}), "unstack:", "num=1", "x [2, 3]")


# -- slice, strided_slice --------------------------------------------------------------------------------
@pytest.mark.parametrize("axes, starts, ends, extra, want", [
    ([1, 2], [0, 1], [2, 100], {}, [-1, 2, 3]),       # 100 clamps to 4
    ([1], [-2], [10000], {}, [-1, 2, 4]),              # negative start counts from the end
    ([2], [-100], [-1], {}, [-1, 3, 3]),               # -100 clamps to 0
    ([2], [3], [1], {}, [-1, 3, 0]),                   # empty
    ([0], [0], [1], {}, [-1, 3, 4]),                   # the unknown dim stays unknown
    ([-1], [0], [2], {}, [-1, 3, 2]),
    ([0, 1], [0, 1], [1, 2], {"decrease_axis": [0, 1]}, [4]),
    ([1], [0], [2], {"infer_flags": [-1]}, [-1, -1, 4]),
])
def test_slice(axes, starts, ends, extra, want):
    attrs = {"axes": axes, "starts": starts, "ends": ends, "infer_flags": [1] * len(axes), **extra}
    assert out("slice", {"Input": X}, attrs) == (want, F32)


def test_slice_to_0d_and_tensors():
    assert out("slice", {"Input": ([3], I64)}, {"axes": [0], "starts": [1], "ends": [2], "decrease_axis": [0]}) == ([], I64)
    assert out("slice", {"Input": X, "StartsTensor": ([1], I64)},
               {"axes": [1], "starts": [-1], "ends": [2], "infer_flags": [-1]}) == ([-1, -1, 4], F32)


def test_slice_errors(blk):
    x, o = blk.create_var("x", [-1, 3, 4]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("slice", {"Input": x}, {"Out": o}, {"axes": [1], "starts": [0], "ends": [2], "decrease_axis": [1]}), "slice:", "size 2, not 1", "x [-1, 3, 4]")
    expect_error(ShapeError, lambda: blk.append_op("slice", {"Input": x}, {"Out": o}, {"axes": [1, 2], "starts": [0], "ends": [2, 2]}), "starts [0]", "axes [1, 2]")
    expect_error(ShapeError, lambda: blk.append_op("slice", {"Input": x}, {"Out": o}, {"axes": [3], "starts": [0], "ends": [1]}), "axis 3")
    expect_error(ShapeError, lambda: blk.append_op("slice", {"Input": x}, {"Out": o}, {"axes": [1], "starts": [0], "ends": [1], "decrease_axis": [2]}), "not in axes")
    expect_error(AttrError, lambda: blk.append_op("slice", {"Input": x}, {"Out": o}, {"starts": [0], "ends": [1]}), "slice:", "'axes'")


@pytest.mark.parametrize("axes, starts, ends, strides, extra, want", [
    ([1], [0], [3], [2], {}, [-1, 2, 4]),
    ([2], [-1], [-2147483647], [-1], {}, [-1, 3, 4]),     # reversed
    ([2], [3], [0], [-2], {}, [-1, 3, 2]),                 # indices 3, 1
    ([1, 2], [-1, 1], [2147483647, -1], [1, 2], {"decrease_axis": [1]}, [-1, 1]),
    ([2], [10], [20], [1], {}, [-1, 3, 0]),
])
def test_strided_slice(axes, starts, ends, strides, extra, want):
    attrs = {"axes": axes, "starts": starts, "ends": ends, "strides": strides,
             "infer_flags": [1] * len(axes), **extra}
    assert out("strided_slice", {"Input": X}, attrs) == (want, F32)


def test_strided_slice_zero_step(blk):
    x, o = blk.create_var("x", [2, 3]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("strided_slice", {"Input": x}, {"Out": o}, {"axes": [1], "starts": [0], "ends": [3], "strides": [0]}), "strided_slice:", "0 step")


# -- gather, gather_nd, scatter ------------------------------------------------------------------------------
def test_gather(blk):
    assert out("gather", {"X": X, "Index": ([5], I64)}, {"axis": 1}) == ([-1, 5, 4], F32)
    assert out("gather", {"X": X, "Index": ([-1], I32)}) == ([-1, 3, 4], F32)
    assert out("gather", {"X": X, "Index": ([], I64)}, {"axis": 2}) == ([-1, 3], F32)
    assert out("gather", {"X": X, "Index": ([5, 1], I64)}) == ([5, 3, 4], F32)
    assert out("gather", {"X": X, "Index": ([5], I64), "Axis": ([1], I64)}) == ([-1, -1, -1], F32)
    x, o = blk.create_var("x", [2, 3]), blk.create_var("o")
    f, m = blk.create_var("f", [5]), blk.create_var("m", [5, 2], "int64")
    expect_error(DTypeError, lambda: blk.append_op("gather", {"X": x, "Index": f}, {"Out": o}), "gather:", "f [5] float32")
    expect_error(ShapeError, lambda: blk.append_op("gather", {"X": x, "Index": m}, {"Out": o}), "gather:", "m [5, 2] int64")
    i = blk.create_var("i", [5], "int64")
    expect_error(ShapeError, lambda: blk.append_op("gather", {"X": x, "Index": i}, {"Out": o}, {"axis": 2}), "axis 2")


def test_gather_nd(blk):
    assert out("gather_nd", {"X": X, "Index": ([-1, 2], I64)}) == ([-1, 4], F32)
    assert out("gather_nd", {"X": X, "Index": ([5, 3], I64)}) == ([5], F32)
    assert out("gather_nd", {"X": X, "Index": ([2, 2, 1], I32)}) == ([2, 2, 3, 4], F32)
    x, o, i = blk.create_var("x", [2, 3]), blk.create_var("o"), blk.create_var("i", [5, 3], "int64")
    expect_error(ShapeError, lambda: blk.append_op("gather_nd", {"X": x, "Index": i}, {"Out": o}), "gather_nd:", "exceeds", "i [5, 3] int64")


def test_scatter(blk):
    assert out("scatter", {"X": ([10, 4], F32), "Ids": ([3], I64), "Updates": ([3, 4], F32)}) == ([10, 4], F32)
    assert out("scatter", {"X": ([-1, 4], F32), "Ids": ([-1], I64), "Updates": ([-1, 4], F32)}) == ([-1, 4], F32)
    x, ids, u = blk.create_var("x", [10, 4]), blk.create_var("ids", [3], "int64"), blk.create_var("u", [2, 4])
    o = blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("scatter", {"X": x, "Ids": ids, "Updates": u}, {"Out": o}), "scatter:", "u [2, 4] float32", "ids [3] int64")
    assert registry.get("scatter").attrs["overwrite"].default is True


# -- expand, tile ----------------------------------------------------------------------------------------------
def test_expand_v2(blk):
    assert out("expand_v2", {"X": X}, {"shape": [2, -1, 3, 4]}) == ([2, -1, 3, 4], F32)
    assert out("expand_v2", {"X": ([3, 1], F32)}, {"shape": [2, 3, 5]}) == ([2, 3, 5], F32)
    assert out("expand_v2", {"X": ([3, 1], F32)}, {"shape": [-1, 5]}) == ([3, 5], F32)
    assert out("expand_v2", {"X": ([3, 1], F32), "expand_shapes_tensor": [([1], I32)]},
               {"shape": [3, -2]}) == ([3, -1], F32)
    assert out("expand_v2", {"X": ([3, 1], F32), "Shape": ([3], I32)}) == ([-1, -1, -1], F32)
    x, o = blk.create_var("x", [3, 2]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("expand_v2", {"X": x}, {"Out": o}, {"shape": [3, 5]}), "expand_v2:", "x [3, 2] float32", "[3, 5]")
    expect_error(ShapeError, lambda: blk.append_op("expand_v2", {"X": x}, {"Out": o}, {"shape": [2]}), "fewer dims")
    expect_error(ShapeError, lambda: blk.append_op("expand_v2", {"X": x}, {"Out": o}, {"shape": [-1, 3, 2]}), "new leading dim")


def test_expand_as_v2_and_tile(blk):
    assert out("expand_as_v2", {"X": ([3, 1], F32)}, {"target_shape": [2, 3, 5]}) == ([2, 3, 5], F32)
    assert out("expand_as_v2", {"X": ([3, 1], F32), "Y": ([-1, 3, 5], F32)}) == ([-1, 3, 5], F32)
    assert out("tile", {"X": X}, {"repeat_times": [2, 1, 1]}) == ([-1, 3, 4], F32)
    assert out("tile", {"X": X}, {"repeat_times": [2]}) == ([-1, 3, 8], F32)
    assert out("tile", {"X": X}, {"repeat_times": [2, 2, 1, 3]}) == ([2, -1, 3, 12], F32)
    assert out("tile", {"X": ([3], F32), "repeat_times_tensor": [([1], I32), ([1], I32)]},
               {"repeat_times": [2, -1]}) == ([2, -1], F32)
    x, o = blk.create_var("x", [3, 1]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("expand_as_v2", {"X": x}, {"Out": o}), "expand_as_v2:", "target_shape or the Y input")
    expect_error(ShapeError, lambda: blk.append_op("tile", {"X": x}, {"Out": o}, {"repeat_times": [0]}), "tile:", "positive")


# -- range, linspace, fill_*, assign --------------------------------------------------------------------------------
def test_range_and_linspace(blk):
    one = ([1], I64)
    assert out("range", {"Start": one, "End": one, "Step": one}) == ([-1], I64)
    assert out("range", {"Start": ([], F32), "End": ([], F32), "Step": ([], F32)}) == ([-1], F32)
    assert out("linspace", {"Start": ([1], F32), "Stop": ([1], F32), "Num": ([1], I32)}, {"dtype": 6}) == ([-1], F64)
    s, e, f, o = (blk.create_var("s", [1], "int64"), blk.create_var("e", [2], "int64"),
                  blk.create_var("f", [1], "float32"), blk.create_var("o"))
    expect_error(ShapeError, lambda: blk.append_op("range", {"Start": s, "End": e, "Step": s}, {"Out": o}), "range:", "End", "e [2] int64")
    expect_error(DTypeError, lambda: blk.append_op("range", {"Start": s, "End": s, "Step": f}, {"Out": o}), "range:", "f [1] float32")
    expect_error(DTypeError, lambda: blk.append_op("linspace", {"Start": f, "Stop": f, "Num": f}, {"Out": o}, {"dtype": 5}), "linspace:", "Num")


def test_fill_constant(blk):
    assert out("fill_constant", {}, {"shape": [2, 3], "dtype": 5, "value": 1.0}) == ([2, 3], F32)
    assert out("fill_constant", {}, {"shape": [], "dtype": 3}) == ([], I64)
    assert out("fill_constant", {}, {"dtype": 0}) == ([], BOOL)
    assert out("fill_constant", {"ShapeTensor": ([2], I64)}, {"dtype": 5}) == ([-1, -1], F32)
    assert out("fill_constant", {"ShapeTensorList": [([1], I64), ([1], I64)]}, {"shape": [-1, 3], "dtype": 5}) == ([-1, 3], F32)
    o = blk.create_var("o")
    op = blk.append_op("fill_constant", {}, {"Out": o}, {"shape": [2**40], "dtype": 5})
    assert op.attr_type("shape") == pb.AttrType.LONGS and op.attr("shape") == [2**40]
    assert (op.attr("value"), op.attr("str_value"), op.attr("force_cpu"), op.attr("place_type")) == (0.0, "", False, -1)
    expect_error(ShapeError, lambda: blk.append_op("fill_constant", {}, {"Out": o}, {"shape": [-1, 3], "dtype": 5}), "fill_constant:", "negative")
    expect_error(DTypeError, lambda: blk.append_op("fill_constant", {}, {"Out": o}, {"shape": [1], "dtype": 77}), "fill_constant:", "dtype 77")


def test_fill_like_ops(blk):
    assert out("fill_any_like", {"X": X}, {"value": 1.0}) == ([-1, 3, 4], F32)
    assert out("fill_any_like", {"X": X}, {"value": 1.0, "dtype": 3}) == ([-1, 3, 4], I64)
    assert out("fill_constant_batch_size_like", {"Input": X}, {"shape": [-1, 7], "dtype": 5}) == ([-1, 7], F32)
    assert out("fill_constant_batch_size_like", {"Input": ([5, 3, 4], F32)},
               {"shape": [7, -1], "dtype": 3, "input_dim_idx": 2, "output_dim_idx": 1}) == ([7, 4], I64)
    x, o = blk.create_var("x", [2, 3]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("fill_constant_batch_size_like", {"Input": x}, {"Out": o}, {"shape": [1], "input_dim_idx": 2}), "input_dim_idx 2")


def test_assign_and_assign_value(blk):
    assert out("assign", {"X": X}) == ([-1, 3, 4], F32)
    assert out("assign_value", {}, {"shape": [2, 2], "dtype": 2, "values": [1, 2, 3, 4]}) == ([2, 2], I32)
    o = blk.create_var("o")
    op = blk.append_op("assign_value", {}, {"Out": o}, {"shape": [2], "dtype": 5, "values": [1.5, 2.0]})
    assert op.attr_type("values") == pb.AttrType.SCALARS and op.attr("values") == [1.5, 2.0]
    expect_error(ShapeError, lambda: blk.append_op("assign_value", {}, {"Out": o}, {"shape": [3], "dtype": 5, "values": [1.0]}), "assign_value:", "3 elements but 1 values")
    expect_error(AttrError, lambda: blk.append_op("assign_value", {}, {"Out": o}, {"dtype": 5}), "assign_value:", "'shape'")


# -- shape, one_hot, where_index, pad -------------------------------------------------------------------------
def test_shape_one_hot_where_index(blk):
    assert out("shape", {"Input": X}) == ([3], I32)
    assert out("shape", {"Input": ([], F32)}) == ([0], I32)
    assert out("one_hot_v2", {"X": ([-1, 3], I64)}, {"depth": 5}) == ([-1, 3, 5], F32)
    assert out("one_hot_v2", {"X": ([-1, 1], I32)}, {"depth": 5, "dtype": 3}) == ([-1, 1, 5], I64)
    assert out("one_hot_v2", {"X": ([4], I64), "depth_tensor": ([1], I32)}) == ([4, -1], F32)
    assert out("where_index", {"Condition": X}) == ([-1, 3], I64)
    x, o, f = blk.create_var("x", [4], "int64"), blk.create_var("o"), blk.create_var("f", [4])
    expect_error(ShapeError, lambda: blk.append_op("one_hot_v2", {"X": x}, {"Out": o}), "one_hot_v2:", "depth must be positive")
    expect_error(DTypeError, lambda: blk.append_op("one_hot_v2", {"X": f}, {"Out": o}, {"depth": 3}), "one_hot_v2:", "f [4] float32")
    s = blk.create_var("s", [], "bool")
    expect_error(ShapeError, lambda: blk.append_op("where_index", {"Condition": s}, {"Out": o}), "where_index:", "s [] bool")


def test_pad_and_pad3d(blk):
    assert out("pad", {"X": X}, {"paddings": [0, 0, 1, 2, 3, 4], "pad_value": 1.0}) == ([-1, 6, 11], F32)
    assert out("pad3d", {"X": ([-1, 3, 4, 5, 6], F32)}, {"paddings": [1, 2, 3, 4, 5, 6]}) == ([-1, 3, 15, 12, 9], F32)
    assert out("pad3d", {"X": ([-1, 4, 5, 6, 3], F32)},
               {"paddings": [1, 2, 3, 4, 5, 6], "data_format": "NDHWC"}) == ([-1, 15, 12, 9, 3], F32)
    assert out("pad3d", {"X": ([1, 3, 4, 5, 6], F32), "Paddings": ([6], I32)}, {"paddings": []}) == ([1, 3, -1, -1, -1], F32)
    x, o = blk.create_var("x", [2, 3]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("pad", {"X": x}, {"Out": o}, {"paddings": [1, 1]}), "pad:", "x [2, 3] float32")
    expect_error(ShapeError, lambda: blk.append_op("pad3d", {"X": x}, {"Out": o}, {"paddings": [1] * 6}), "pad3d:", "5-D")
    v = blk.create_var("v", [1, 3, 4, 5, 6])
    expect_error(ShapeError, lambda: blk.append_op("pad3d", {"X": v}, {"Out": o}, {"paddings": [1] * 6, "mode": "wrap"}), "mode")


def test_grad_flags():
    for t in ("fill_constant", "fill_any_like", "assign_value", "range", "linspace", "shape",
              "one_hot_v2", "where_index", "fill_constant_batch_size_like", "fetch"):
        assert registry.get(t).grad is registry.NOT_DIFFERENTIABLE, t
    for t in ("reshape2", "transpose2", "concat", "split", "slice", "strided_slice", "gather",
              "scatter", "expand_v2", "tile", "stack", "unstack", "assign", "pad", "pad3d"):
        assert isinstance(registry.get(t).grad, registry.GradRule) and registry.get(t).doc, t
