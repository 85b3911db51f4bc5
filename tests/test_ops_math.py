"""Shape/dtype inference and build-time errors of the activation and math ops
(program/ops/activation.py, program/ops/math.py), each appended to a fresh program."""
import pytest

import keel.program as pg
from shapecheck import build, expect_error, out
from keel.program.errors import AttrError, DTypeError, ShapeError, SlotError, UndefinedVariableError
from keel.program.ops import registry
from keel.proto import pb

F32, F64, I32, I64, BOOL = "float32", "float64", "int32", "int64", "bool"


@pytest.fixture
def blk():
    return pg.Program().global_block()


# -- activations ----------------------------------------------------------------------------
UNARY = ["relu", "relu6", "leaky_relu", "gelu", "tanh", "sigmoid", "hard_swish", "hard_sigmoid",
         "swish", "silu", "mish", "elu", "selu", "celu", "softplus", "softsign", "logsigmoid",
         "tanh_shrink", "thresholded_relu", "exp", "expm1", "log", "log2", "log10", "log1p",
         "sqrt", "rsqrt", "abs", "square", "reciprocal", "floor", "ceil", "round", "sign", "sin",
         "cos", "erf", "softmax", "log_softmax"]


@pytest.mark.parametrize("op_type", UNARY)
def test_unary_keeps_shape_and_dtype(op_type):
    assert out(op_type, {"X": ([-1, 3, 4], F32)}) == ([-1, 3, 4], F32)
    assert out(op_type, {"X": ([], F64)}) == ([], F64)


@pytest.mark.parametrize("op_type", UNARY)
def test_unary_ops_are_differentiable_and_documented(op_type):
    d = registry.get(op_type)
    assert isinstance(d.grad, registry.GradRule) and d.doc and d.infer is not None


def test_activation_defaults_and_extra_attrs(blk):
    x, o = blk.create_var("x", [2, 3]), blk.create_var("o")
    op = blk.append_op("leaky_relu", {"X": x}, {"Out": o})
    assert op.attr("alpha") == pytest.approx(0.02)
    # relu6 threshold and swish beta are runtime-extra attributes in PaddlePaddle 3.x
    assert registry.get("relu6").attrs == {}
    assert registry.get("relu6").extra_attrs["threshold"].default == 6.0
    assert registry.get("swish").extra_attrs["beta"].default == 1.0
    op = blk.append_op("relu6", {"X": x}, {"Out": blk.create_var("o2")}, {"threshold": 3.0})
    assert op.attr("threshold") == 3.0
    assert registry.get("selu").attrs["alpha"].default == pytest.approx(1.6732632)


def test_softmax_axis_and_dtype_errors(blk):
    assert out("softmax", {"X": ([-1, 3, 4], F32)}, {"axis": 1}) == ([-1, 3, 4], F32)
    assert out("log_softmax", {"X": ([-1, 3, 4], F32)}, {"axis": -3}) == ([-1, 3, 4], F32)
    x, o = blk.create_var("x", [-1, 3, 4]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("softmax", {"X": x}, {"Out": o}, {"axis": 3}), "softmax:", "axis 3")
    ids = blk.create_var("ids", [4], "int64")
    expect_error(DTypeError, lambda: blk.append_op("log_softmax", {"X": ids}, {"Out": o}), "log_softmax:", "ids [4] int64")


def test_unknown_attr_and_missing_slot(blk):
    x, o = blk.create_var("x", [2]), blk.create_var("o")
    expect_error(AttrError, lambda: blk.append_op("relu", {"X": x}, {"Out": o}, {"alpha": 1.0}), "relu:", "'alpha'")
    expect_error(AttrError, lambda: blk.append_op("leaky_relu", {"X": x}, {"Out": o}, {"alpha": "big"}), "leaky_relu:", "alpha")
    expect_error(SlotError, lambda: blk.append_op("relu", {}, {"Out": o}), "relu:", "'X'")
    with pytest.raises(UndefinedVariableError, match="nope"):
        blk.append_op("relu", {"X": "nope"}, {"Out": o})


# -- scale, clip, cast, pow, sum, mean ------------------------------------------------------------
def test_scale_clip_pow_keep_shape(blk):
    assert out("scale", {"X": ([-1, 5], F32)}, {"scale": 2.0, "bias": 1.0}) == ([-1, 5], F32)
    assert out("scale", {"X": ([-1, 5], F32), "ScaleTensor": ([1], F32)}) == ([-1, 5], F32)
    assert out("clip", {"X": ([3], I64)}, {"min": 0.0, "max": 2.0}) == ([3], I64)
    assert out("pow", {"X": ([-1, 2], F32)}, {"factor": 3.0}) == ([-1, 2], F32)
    x, o = blk.create_var("x", [3]), blk.create_var("o")
    op = blk.append_op("scale", {"X": x}, {"Out": o})
    assert (op.attr("scale"), op.attr("bias"), op.attr("bias_after_scale")) == (1.0, 0.0, True)
    expect_error(AttrError, lambda: blk.append_op("clip", {"X": x}, {"Out": o}, {"min": 0.0}), "clip:", "'max'")


def test_cast_sets_out_dtype(blk):
    assert out("cast", {"X": ([-1, 3], F32)}, {"in_dtype": 5, "out_dtype": 3}) == ([-1, 3], I64)
    assert out("cast", {"X": ([2], I64)}, {"in_dtype": 3, "out_dtype": 0}) == ([2], BOOL)
    x, o = blk.create_var("x", [3]), blk.create_var("o")
    expect_error(DTypeError, lambda: blk.append_op("cast", {"X": x}, {"Out": o}, {"in_dtype": 5, "out_dtype": 99}), "cast:", "out_dtype 99")
    expect_error(AttrError, lambda: blk.append_op("cast", {"X": x}, {"Out": o}, {"in_dtype": 5}), "cast:", "out_dtype")


def test_sum_merges_shapes_and_checks(blk):
    assert out("sum", {"X": [([-1, 3], F32), ([2, 3], F32), ([2, -1], F32)]}) == ([2, 3], F32)
    a, b, c, o = (blk.create_var("a", [2, 3]), blk.create_var("b", [2, 4]),
                  blk.create_var("c", [2, 3], "int64"), blk.create_var("o"))
    expect_error(ShapeError, lambda: blk.append_op("sum", {"X": [a, b]}, {"Out": o}), "sum:", "a [2, 3] float32", "b [2, 4] float32")
    expect_error(DTypeError, lambda: blk.append_op("sum", {"X": [a, c]}, {"Out": o}), "sum:", "c [2, 3] int64")


def test_mean_is_0d():
    assert out("mean", {"X": ([-1, 3, 4], F32)}) == ([], F32)


# -- reductions --------------------------------------------------------------------------------
@pytest.mark.parametrize("op_type", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"])
def test_reductions(op_type):
    x = {"X": ([-1, 3, 4], F32)}
    assert out(op_type, x, {"dim": [1]}) == ([-1, 4], F32)
    assert out(op_type, x, {"dim": [1, -1], "keep_dim": True}) == ([-1, 1, 1], F32)
    assert out(op_type, x, {"dim": [0], "reduce_all": True}) == ([], F32)
    assert out(op_type, x, {"dim": [0], "reduce_all": True, "keep_dim": True}) == ([1, 1, 1], F32)
    assert out(op_type, x, {"dim": []}) == ([], F32)            # empty dim: everything
    assert out(op_type, x, {"dim": [0, 1, 2]}) == ([], F32)     # every dim named
    assert out(op_type, x) == ([3, 4], F32)                     # default dim [0]
    assert out(op_type, {"X": ([], F32)}) == ([], F32)


def test_reduce_dtypes():
    assert out("reduce_sum", {"X": ([2, 3], I32)}, {"dim": [0]}) == ([3], I64)
    assert out("reduce_sum", {"X": ([2, 3], BOOL)}, {"dim": [0]}) == ([3], I64)
    assert out("reduce_sum", {"X": ([2, 3], I64)}, {"dim": [0]}) == ([3], I64)
    assert out("reduce_sum", {"X": ([2, 3], F32)}, {"dim": [0], "out_dtype": 6}) == ([3], F64)
    assert out("reduce_max", {"X": ([2, 3], I32)}, {"dim": [0]}) == ([3], I32)
    assert out("reduce_all", {"X": ([2, 3], BOOL)}, {"dim": [1]}) == ([2], BOOL)
    assert out("reduce_any", {"X": ([2, 3], BOOL)}, {"dim": [0, 1], "keep_dim": True}) == ([1, 1], BOOL)


def test_reduce_errors(blk):
    x, o = blk.create_var("x", [2, 3, 4]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("reduce_mean", {"X": x}, {"Out": o}, {"dim": [3]}), "reduce_mean:", "dim 3", "3-d")
    expect_error(ShapeError, lambda: blk.append_op("reduce_sum", {"X": x}, {"Out": o}, {"dim": [1, -2]}), "reduce_sum:", "twice", "x [2, 3, 4] float32")
    expect_error(AttrError, lambda: blk.append_op("reduce_sum", {"X": x}, {"Out": o}, {"dim": 1}), "reduce_sum:", "dim")


# -- matrix products ------------------------------------------------------------------------------
@pytest.mark.parametrize("x, y, attrs, want", [
    ([4], [4], {}, []),
    ([4], [4, 6], {}, [6]),
    ([2, 3, 4], [4], {}, [2, 3]),
    ([1, 4], [4, 6], {}, [1, 6]),
    ([-1, 3, 4], [4, 6], {}, [-1, 3, 6]),
    ([-1, 3, 4], [-1, 4, 6], {}, [-1, 3, 6]),
    ([2, 1, 3, 4], [5, 4, 6], {}, [2, 5, 3, 6]),
    ([-1, 4], [6, 4], {"trans_y": True}, [-1, 6]),
    ([4, -1], [4, 6], {"trans_x": True}, [-1, 6]),
    ([4], [6, 4], {"trans_x": True, "trans_y": True}, [6]),
])
def test_matmul_v2(x, y, attrs, want):
    assert out("matmul_v2", {"X": (x, F32), "Y": (y, F32)}, attrs) == (want, F32)


def test_matmul_v2_errors(blk):
    x, y, o = blk.create_var("x", [-1, 64]), blk.create_var("y", [32, 10]), blk.create_var("o")
    msg = expect_error(ShapeError, lambda: blk.append_op("matmul_v2", {"X": x, "Y": y}, {"Out": o}), "matmul_v2:", "x [-1, 64] float32", "y [32, 10] float32")
    assert msg.startswith("matmul_v2: ")
    a, b = blk.create_var("a", [2, 3, 4]), blk.create_var("b", [5, 4, 6])
    expect_error(ShapeError, lambda: blk.append_op("matmul_v2", {"X": a, "Y": b}, {"Out": o}), "batch", "a [2, 3, 4]", "b [5, 4, 6]")
    i = blk.create_var("i", [4, 6], "int64")
    expect_error(DTypeError, lambda: blk.append_op("matmul_v2", {"X": a, "Y": i}, {"Out": o}), "matmul_v2:", "i [4, 6] int64")
    s = blk.create_var("s", [])
    expect_error(ShapeError, lambda: blk.append_op("matmul_v2", {"X": s, "Y": x}, {"Out": o}), "at least 1 dimension", "s [] float32")


def test_legacy_matmul():
    assert out("matmul", {"X": ([2, 3, 4], F32), "Y": ([4, 6], F32)}) == ([2, 3, 6], F32)
    assert out("matmul", {"X": ([4, 6], F32), "Y": ([2, 6, 5], F32)}) == ([2, 4, 5], F32)
    assert out("matmul", {"X": ([-1, 4], F32), "Y": ([6, 4], F32)},
               {"transpose_Y": True, "alpha": 0.5}) == ([-1, 6], F32)
    assert out("matmul", {"X": ([4], F32), "Y": ([4], F32)}) == ([], F32)
    assert registry.get("matmul").attrs["head_number"].default == 1


def test_legacy_matmul_errors(blk):
    x, y, o = blk.create_var("x", [2, 3, 4]), blk.create_var("y", [3, 4, 6]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("matmul", {"X": x, "Y": y}, {"Out": o}), "matmul:", "batch", "x [2, 3, 4]")
    w = blk.create_var("w", [5, 6])
    expect_error(ShapeError, lambda: blk.append_op("matmul", {"X": x, "Y": w}, {"Out": o}), "matmul:", "(4 vs 5)")


def test_mul_and_bmm_and_fc(blk):
    assert out("mul", {"X": ([-1, 3, 4], F32), "Y": ([12, 5], F32)}) == ([-1, 5], F32)
    assert out("mul", {"X": ([-1, 3, 4], F32), "Y": ([4, 5], F32)}, {"x_num_col_dims": 2}) == ([-1, 3, 5], F32)
    assert out("mul", {"X": ([-1, 3, 4], F32), "Y": ([4, 5, 6], F32)}, {"x_num_col_dims": 2}) == ([-1, 3, 5, 6], F32)
    assert out("bmm", {"X": ([-1, 3, 4], F32), "Y": ([2, 4, 5], F32)}) == ([2, 3, 5], F32)
    assert out("fc", {"Input": ([-1, 3, 4], F32), "W": ([12, 5], F32), "Bias": ([5], F32)}) == ([-1, 5], F32)
    assert out("fc", {"Input": ([-1, 3, 4], F32), "W": ([4, 5], F32)}, {"in_num_col_dims": 2}) == ([-1, 3, 5], F32)
    assert out("fc", {"Input": ([-1, 3, 4], F32), "W": ([8, 9], F32)},
               {"in_num_col_dims": 2, "padding_weights": True}) == ([-1, 3, 5], F32)
    x, y, o = blk.create_var("x", [-1, 3, 4]), blk.create_var("y", [5, 5]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("mul", {"X": x, "Y": y}, {"Out": o}, {"x_num_col_dims": 2}), "mul:", "[-1, 4]", "[5, 5]")
    expect_error(ShapeError, lambda: blk.append_op("mul", {"X": x, "Y": y}, {"Out": o}, {"x_num_col_dims": 3}), "x_num_col_dims 3")
    m = blk.create_var("m", [3, 4])
    expect_error(ShapeError, lambda: blk.append_op("bmm", {"X": m, "Y": y}, {"Out": o}), "bmm:", "3-D", "m [3, 4]")
    b3 = blk.create_var("b3", [2, 5, 5])
    expect_error(ShapeError, lambda: blk.append_op("bmm", {"X": x, "Y": b3}, {"Out": o}), "bmm:", "(4 vs 5)")
    w, bias = blk.create_var("w", [12, 5]), blk.create_var("bias", [6])
    expect_error(ShapeError, lambda: blk.append_op("fc", {"Input": x, "W": w, "Bias": bias}, {"Out": o}), "fc:", "bias [6]")
    expect_error(ShapeError, lambda: blk.append_op("fc", {"Input": x, "W": y}, {"Out": o}), "fc:", "12 columns", "5 rows")


# -- comparisons and logic --------------------------------------------------------------------------
@pytest.mark.parametrize("op_type", ["equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal"])
def test_comparisons(op_type):
    x = ([-1, 3, 4], F32)
    assert out(op_type, {"X": x, "Y": ([3, 4], F32)}) == ([-1, 3, 4], BOOL)
    assert out(op_type, {"X": x, "Y": ([], F32)}) == ([-1, 3, 4], BOOL)
    assert out(op_type, {"X": ([3, 1], I64), "Y": ([1, 5], I64)}) == ([3, 5], BOOL)
    d = registry.get(op_type)
    assert d.grad is registry.NOT_DIFFERENTIABLE
    assert d.attrs["axis"].default == -1 and d.attrs["force_cpu"].default is False


def test_comparison_errors_and_axis_is_ignored(blk):
    x, y, o = blk.create_var("x", [-1, 3, 4]), blk.create_var("y", [3]), blk.create_var("o")
    # PaddlePaddle 3.x compares with numpy broadcasting whatever `axis` says
    expect_error(ShapeError, lambda: blk.append_op("less_than", {"X": x, "Y": y}, {"Out": o}, {"axis": 1}), "less_than:", "x [-1, 3, 4] float32", "y [3] float32")
    i = blk.create_var("i", [4], "int64")
    expect_error(DTypeError, lambda: blk.append_op("equal", {"X": x, "Y": i}, {"Out": o}), "equal:", "i [4] int64")


def test_logical_ops():
    assert out("logical_and", {"X": ([2, 3], BOOL), "Y": ([3], BOOL)}) == ([2, 3], BOOL)
    assert out("logical_or", {"X": ([-1, 1], BOOL), "Y": ([1, 4], BOOL)}) == ([-1, 4], BOOL)
    assert out("logical_xor", {"X": ([2, 3], I64), "Y": ([2, 1], I64)}) == ([2, 3], BOOL)
    assert out("logical_not", {"X": ([-1, 3], F32)}) == ([-1, 3], BOOL)
    for t in ("isfinite_v2", "isinf_v2", "isnan_v2"):
        assert out(t, {"X": ([-1, 3], F32)}) == ([-1, 3], BOOL)
        assert registry.get(t).grad is registry.NOT_DIFFERENTIABLE


# -- cumsum, arg_max/arg_min, top_k ----------------------------------------------------------------------
def test_cumsum(blk):
    assert out("cumsum", {"X": ([-1, 3, 4], F32)}, {"axis": 1}) == ([-1, 3, 4], F32)
    assert out("cumsum", {"X": ([2, 3], F32)}, {"flatten": True}) == ([6], F32)
    assert out("cumsum", {"X": ([-1, 3], F32)}, {"flatten": True}) == ([-1], F32)
    x, o = blk.create_var("x", [2, 3]), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("cumsum", {"X": x}, {"Out": o}, {"axis": 2}), "cumsum:", "axis 2")


def test_arg_max_min(blk):
    x = {"X": ([-1, 3, 4], F32)}
    assert out("arg_max", x, {"axis": 1}) == ([-1, 4], I64)
    assert out("arg_min", x, {"axis": -1, "keepdims": True, "dtype": 2}) == ([-1, 3, 1], I32)
    assert out("arg_max", x, {"axis": 0, "flatten": True}) == ([], I64)
    assert out("arg_max", x, {"axis": 0, "flatten": True, "keepdims": True}) == ([1, 1, 1], I64)
    assert registry.get("arg_max").attrs["axis"].type == pb.AttrType.LONG
    v, o = blk.create_var("v", [2, 3]), blk.create_var("o")
    expect_error(AttrError, lambda: blk.append_op("arg_max", {"X": v}, {"Out": o}), "arg_max:", "'axis'")
    expect_error(ShapeError, lambda: blk.append_op("arg_min", {"X": v}, {"Out": o}, {"axis": 2}), "arg_min:", "axis 2")
    expect_error(DTypeError, lambda: blk.append_op("arg_max", {"X": v}, {"Out": o}, {"axis": 0, "dtype": 5}), "arg_max:", "dtype")


def test_top_k_v2(blk):
    outs = {"Out": 1, "Indices": 1}
    r = build("top_k_v2", {"X": ([-1, 3, 4], F32)}, outs, {"k": 2})
    assert r == {"Out": ([-1, 3, 2], F32), "Indices": ([-1, 3, 2], I64)}
    r = build("top_k_v2", {"X": ([-1, 3, 4], F32)}, outs, {"k": 2, "axis": 0})
    assert r["Out"] == ([2, 3, 4], F32)
    r = build("top_k_v2", {"X": ([2, 5], F32), "K": ([1], I32)}, outs)
    assert r["Indices"] == ([2, -1], I64)
    x, o, i = blk.create_var("x", [2, 3]), blk.create_var("o"), blk.create_var("i")
    expect_error(ShapeError, lambda: blk.append_op("top_k_v2", {"X": x}, {"Out": o, "Indices": i}, {"k": 4}), "top_k_v2:", "k=4", "x [2, 3] float32")


# -- where, norms, increment --------------------------------------------------------------------------------
def test_where(blk):
    assert out("where", {"Condition": ([-1, 3], BOOL), "X": ([2, 3], F32), "Y": ([2, -1], F32)}) == ([2, 3], F32)
    c, x, y, o = (blk.create_var("c", [2, 3], "bool"), blk.create_var("x", [2, 3]),
                  blk.create_var("y", [3]), blk.create_var("o"))
    expect_error(ShapeError, lambda: blk.append_op("where", {"Condition": c, "X": x, "Y": y}, {"Out": o}), "where:", "y [3] float32")
    expect_error(DTypeError, lambda: blk.append_op("where", {"Condition": x, "X": x, "Y": x}, {"Out": o}), "where:", "Condition must be bool")


def test_norms_and_increment(blk):
    x = {"X": ([-1, 3, 4], F32)}
    assert out("p_norm", x, {"axis": 1}) == ([-1, 4], F32)
    assert out("p_norm", x, {"axis": -1, "keepdim": True}) == ([-1, 3, 1], F32)
    assert out("p_norm", x, {"asvector": True}) == ([], F32)
    assert out("squared_l2_norm", x) == ([1], F32)
    assert out("l1_norm", x) == ([], F32)
    assert out("increment", {"X": ([1], I64)}, {"step": 2.0}) == ([1], I64)
    assert out("increment", {"X": ([], F32)}) == ([], F32)
    v, o = blk.create_var("v", [2], "int64"), blk.create_var("o")
    expect_error(ShapeError, lambda: blk.append_op("increment", {"X": v}, {"Out": o}), "increment:", "v [2] int64")
