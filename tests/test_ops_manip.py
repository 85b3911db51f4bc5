"""Shape/dtype inference and build-time errors of the ops in program/ops/manip.py and of
acos, asin, atan, brelu, stanh, each appended to a fresh program."""
import pytest

import keel.program as pg
from keel.program.errors import DTypeError, ShapeError
from shapecheck import build, expect_error, out

F32, F64, I32, I64 = "float32", "float64", "int32", "int64"


def test_shape_preserving_ops():
    x = ([-1, 3, 4], F32)
    for op, attrs in [("tril_triu", {"lower": True}), ("flip", {"axis": [0, -1]}),
                      ("roll", {"shifts": [1], "axis": [1]}), ("share_data", {}),
                      ("acos", {}), ("asin", {}), ("atan", {}), ("brelu", {}), ("stanh", {})]:
        assert out(op, {"X": x}, attrs) == ([-1, 3, 4], F32), op
    assert out("shuffle_channel", {"X": ([2, 6, 3, 3], F64)}, {"group": 3}) == ([2, 6, 3, 3], F64)


def test_argsort_index_select_take_put():
    got = build("argsort", {"X": ([2, 5], F32)}, {"Out": 1, "Indices": 1}, {"axis": 0})
    assert got == {"Out": ([2, 5], F32), "Indices": ([2, 5], I64)}
    assert out("index_select", {"X": ([4, -1, 3], F32), "Index": ([7], I32)}, {"dim": 1}) == ([4, 7, 3], F32)
    got = build("take_along_axis", {"Input": ([4, 5], F64), "Index": ([2, 3], I64)}, {"Result": 1}, {"Axis": 1})
    assert got == {"Result": ([2, 3], F64)}
    got = build("put_along_axis", {"Input": ([4, 5], F64), "Index": ([4, 2], I64), "Value": ([4, 2], F64)},
                {"Result": 1}, {"Axis": 1, "Reduce": "amax"})
    assert got == {"Result": ([4, 5], F64)}


def test_einsum_dist_size_norm_maxout_unfold_scatter_nd_add():
    got = build("einsum", {"Operands": [([-1, 3, 4], F32), ([-1, 4, 5], F32)]},
                {"Out": 1, "InnerCache": 2, "XShape": 2}, {"equation": "bij,bjk->bki"})
    assert got["Out"] == ([-1, 5, 3], F32)
    assert got["XShape"] == [([-1, 3, 4], F32), ([-1, 4, 5], F32)]
    got = build("einsum", {"Operands": [([2, 1, 1, 3], F32), ([4, 3, 6], F32)]}, {"Out": 1, "InnerCache": 2, "XShape": 2},
                {"equation": "...ij,...jk->...ik"})
    assert got["Out"] == ([2, 4, 1, 6], F32)
    assert out("dist", {"X": ([2, 3], F32), "Y": ([3], F32)}) == ([], F32)
    assert build("size", {"Input": ([-1, 3], F32)}) == {"Out": ([], I64)}
    got = build("norm", {"X": ([2, 3, 4], F32)}, {"Out": 1, "Norm": 1}, {"axis": -2})
    assert got == {"Out": ([2, 3, 4], F32), "Norm": ([2, 1, 4], F32)}
    assert out("maxout", {"X": ([2, 6, 4, 4], F32)}, {"groups": 3}) == ([2, 2, 4, 4], F32)
    assert out("maxout", {"X": ([2, 4, 4, 6], F32)}, {"groups": 2, "axis": -1}) == ([2, 4, 4, 3], F32)
    got = build("unfold", {"X": ([-1, 2, 5, 6], F32)}, {"Y": 1},
                {"kernel_sizes": [2, 3], "strides": [1, 2], "paddings": [1, 0, 0, 2], "dilations": [1, 1]})
    assert got == {"Y": ([-1, 12, 15], F32)}
    got = out("scatter_nd_add", {"X": ([3, 4, 2], F32), "Index": ([5, 2], I64), "Updates": ([5, 2], F32)})
    assert got == ([3, 4, 2], F32)


@pytest.fixture
def blk():
    return pg.Program().global_block()


def test_build_time_errors(blk):
    x = blk.create_var("x", [3, 5], F32)
    o = blk.create_var("o")
    fi = blk.create_var("fi", [2], F32)
    expect_error(DTypeError, lambda: blk.append_op("index_select", {"X": x, "Index": fi}, {"Out": o}), "index_select:", "Index")
    expect_error(ShapeError, lambda: blk.append_op("flip", {"X": x}, {"Out": o}, {"axis": [0, -2]}), "flip:", "twice")
    expect_error(ShapeError, lambda: blk.append_op("tril_triu", {"X": blk.create_var("v", [3], F32)}, {"Out": o}),
                 "tril_triu:", "at least 2 dims")
    a, b = blk.create_var("a", [2, 3], F32), blk.create_var("b", [4, 5], F32)
    expect_error(ShapeError, lambda: blk.append_op("einsum", {"Operands": [a, b]}, {"Out": o}, {"equation": "ij,jk->ik"}),
                 "einsum:", "label 'j' has sizes 3 and 4")
    expect_error(ShapeError, lambda: blk.append_op("einsum", {"Operands": [a, b]}, {"Out": o}, {"equation": "ij,jk"}),
                 "einsum:", "'->'")
    expect_error(ShapeError, lambda: blk.append_op("maxout", {"X": blk.create_var("m", [1, 5, 2, 2], F32)},
                                                   {"Out": o}, {"groups": 2}), "maxout:", "5 channels")
    i64 = blk.create_var("i", [3, 2], I64)
    expect_error(ShapeError, lambda: blk.append_op("put_along_axis", {"Input": x, "Index": i64, "Value": i64},
                                                   {"Result": o}, {"Axis": 1, "Reduce": "max"}), "put_along_axis:", "Reduce")
    expect_error(ShapeError, lambda: blk.append_op("unfold", {"X": blk.create_var("u", [1, 1, 2, 2], F32)}, {"Y": o},
                                                   {"kernel_sizes": [3, 3], "strides": [1, 1], "paddings": [0, 0, 0, 0],
                                                    "dilations": [1, 1]}), "unfold:", "do not fit")
