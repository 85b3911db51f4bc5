"""The builder API of program/layers/math.py and program/layers/tensor.py, and the Python
operators on Variable: which ops they append, with which attributes, how outputs are named,
and that every program built round-trips through its serialized form."""
import inspect

import numpy as np
import pytest

import keel.program as pg
from keel.program import dtypes
from keel.program.errors import DTypeError, ShapeError
from keel.proto import pb

F32, I32, I64, BOOL = pb.VarType.FP32, pb.VarType.INT32, pb.VarType.INT64, pb.VarType.BOOL


@pytest.fixture
def prog():
    """A fresh main program, current for the test, with deterministic names; checks on exit
    that it round-trips through serialization."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        yield main
    assert pg.Program.parse_from_string(main.serialize_to_string()) == main
    main.verify()


def ops(p):
    return p.global_block().ops


def last(p, type=None):
    found = [op for op in ops(p) if type is None or op.type == type]
    return found[-1]


def attrs_of(op, *names):
    return {n: op.attr(n) for n in names}


def info(v):
    return list(v.shape), dtypes.name(v.dtype)


def data(name, shape, dtype="float32"):
    return pg.data(name, shape, dtype)


# -- activations ----------------------------------------------------------------------------------
def test_relu_name_and_op(prog):
    x = data("x", [-1, 3, 4])
    y = pg.relu(x)
    assert y.name == "relu_0.tmp_0" and info(y) == ([-1, 3, 4], "float32")
    assert pg.relu(y).name == "relu_1.tmp_0"
    op = last(prog)
    assert op.type == "relu" and op.input("X") == ["relu_0.tmp_0"] and op.output("Out") == ["relu_1.tmp_0"]
    assert pg.nn.relu is pg.relu


@pytest.mark.parametrize("fn, op_type, attrs", [
    (lambda x: pg.relu6(x), "relu6", {"threshold": 6.0}),
    (lambda x: pg.leaky_relu(x), "leaky_relu", {"alpha": np.float32(0.01)}),
    (lambda x: pg.leaky_relu(x, 0.2), "leaky_relu", {"alpha": np.float32(0.2)}),
    (lambda x: pg.gelu(x), "gelu", {"approximate": False}),
    (lambda x: pg.gelu(x, approximate=True), "gelu", {"approximate": True}),
    (lambda x: pg.hard_swish(x), "hard_swish", {"threshold": 6.0, "scale": 6.0, "offset": 3.0}),
    (lambda x: pg.hard_sigmoid(x), "hard_sigmoid", {"slope": np.float32(0.1666667), "offset": 0.5}),
    (lambda x: pg.swish(x), "swish", {"beta": 1.0}),
    (lambda x: pg.mish(x), "mish", {"threshold": 20.0}),
    (lambda x: pg.elu(x, 0.5), "elu", {"alpha": 0.5}),
    (lambda x: pg.selu(x), "selu", {"scale": np.float32(1.0507009873554805), "alpha": np.float32(1.6732632423543772)}),
    (lambda x: pg.celu(x, 2.0), "celu", {"alpha": 2.0}),
    (lambda x: pg.softplus(x), "softplus", {"beta": 1.0, "threshold": 20.0}),
    (lambda x: pg.thresholded_relu(x), "thresholded_relu", {"threshold": 1.0, "value": 0.0}),
    (lambda x: pg.round(x), "round", {"decimals": 0}),
    (lambda x: pg.softmax(x), "softmax", {"axis": -1}),
    (lambda x: pg.softmax(x, axis=1), "softmax", {"axis": 1}),
    (lambda x: pg.log_softmax(x, 0), "log_softmax", {"axis": 0}),
])
def test_activation_attrs(prog, fn, op_type, attrs):
    x = data("x", [-1, 3, 4])
    y = fn(x)
    op = last(prog)
    assert op.type == op_type and info(y) == ([-1, 3, 4], "float32")
    for name, want in attrs.items():
        assert op.attr(name) == want, name


@pytest.mark.parametrize("name", ["tanh", "sigmoid", "silu", "softsign", "log_sigmoid", "tanh_shrink",
                                  "exp", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
                                  "abs", "square", "reciprocal", "floor", "ceil", "sign", "sin",
                                  "cos", "erf"])
def test_plain_activations(prog, name):
    x = data("x", [-1, 5])
    y = getattr(pg, name)(x)
    op_type = {"log_sigmoid": "logsigmoid"}.get(name, name)
    assert last(prog).type == op_type and y.name == f"{name}_0.tmp_0"
    assert info(y) == ([-1, 5], "float32")


# -- elementwise arithmetic -------------------------------------------------------------------------
@pytest.mark.parametrize("fn, op_type", [
    (pg.add, "elementwise_add"), (pg.subtract, "elementwise_sub"), (pg.multiply, "elementwise_mul"),
    (pg.divide, "elementwise_div"), (pg.maximum, "elementwise_max"), (pg.minimum, "elementwise_min"),
    (pg.floor_divide, "elementwise_floordiv"), (pg.remainder, "elementwise_mod"),
])
def test_elementwise_layers(prog, fn, op_type):
    x, y = data("x", [-1, 3, 4]), data("y", [3, 1])
    z = fn(x, y)
    assert z.name == f"{op_type}_0.tmp_0" and info(z) == ([-1, 3, 4], "float32")
    op = last(prog)
    assert op.type == op_type and op.attr("axis") == -1
    b = data("b", [3])
    w = fn(x, b, axis=1)                    # PaddlePaddle's axis: b aligns with dim 1
    assert info(w) == ([-1, 3, 4], "float32") and last(prog).attr("axis") == 1


def test_pow(prog):
    x, y = data("x", [-1, 3]), data("y", [3])
    a = pg.pow(x, 2.0)
    assert a.name == "pow_0.tmp_0" and last(prog).type == "pow" and last(prog).attr("factor") == 2.0
    b = pg.pow(x, y)
    assert b.name == "elementwise_pow_0.tmp_0" and last(prog).type == "elementwise_pow"


def test_elementwise_shape_error_names_the_line(prog):
    x, y = data("x", [-1, 3, 4]), data("y", [5])
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(ShapeError) as e:
        pg.add(x, y)
    msg = str(e.value)
    assert "elementwise_add" in msg and "x [-1, 3, 4] float32" in msg and "y [5] float32" in msg
    assert f"op created at {__file__}:{line}" in msg


# -- matrix products ----------------------------------------------------------------------------------
def test_matmul_layers(prog):
    x, y = data("x", [-1, 3, 4]), data("y", [6, 4])
    z = pg.matmul(x, y, transpose_y=True)
    op = last(prog)
    assert op.type == "matmul_v2" and attrs_of(op, "trans_x", "trans_y") == {"trans_x": False, "trans_y": True}
    assert z.name == "matmul_v2_0.tmp_0" and info(z) == ([-1, 3, 6], "float32")
    m = pg.mm(data("a", [2, 4]), data("b", [4, 5]))
    assert m.name == "mm_0.tmp_0" and last(prog).type == "matmul_v2" and info(m) == ([2, 5], "float32")
    b = pg.bmm(data("c", [-1, 2, 4]), data("d", [-1, 4, 5]))
    assert last(prog).type == "bmm" and info(b) == ([-1, 2, 5], "float32")


def test_matmul_error_mentions_both_shapes_and_line(prog):
    x, y = data("x", [-1, 64]), data("y", [32, 10])
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(ShapeError) as e:
        pg.matmul(x, y)
    msg = str(e.value)
    assert msg.startswith("matmul_v2: ") and "[-1, 64]" in msg and "[32, 10]" in msg
    assert f"op created at {__file__}:{line}: pg.matmul(x, y)" in msg


# -- scale, clip, cast, sum, mean, reductions ---------------------------------------------------------
def test_scale_clip_cast(prog):
    x = data("x", [-1, 3])
    s = pg.scale(x, 2.0, 1.0)
    assert s.name == "scale_0.tmp_0"
    assert attrs_of(last(prog), "scale", "bias", "bias_after_scale") == {"scale": 2.0, "bias": 1.0, "bias_after_scale": True}
    t = pg.scale(x, data("k", [1]))
    assert last(prog).input("ScaleTensor") == ["k"] and info(t) == ([-1, 3], "float32")
    pg.clip(x, -1.0, 1.0)
    assert attrs_of(last(prog), "min", "max") == {"min": -1.0, "max": 1.0}
    pg.clip(x, max=3.0)
    assert last(prog).attr("min") == float(np.finfo(np.float32).min) and last(prog).attr("max") == 3.0
    c = pg.cast(x, "int64")
    assert c.name == "cast_0.tmp_0" and c.dtype == I64
    assert attrs_of(last(prog), "in_dtype", "out_dtype") == {"in_dtype": F32, "out_dtype": I64}


def test_sum_and_add_n(prog):
    x, y = data("x", [-1, 3]), data("y", [-1, 3])
    s = pg.sum([x, y])
    assert s.name == "add_n_0.tmp_0" and last(prog).type == "sum" and last(prog).input("X") == ["x", "y"]
    r = pg.sum(x)
    op = last(prog)
    assert op.type == "reduce_sum" and r.name == "sum_0.tmp_0" and info(r) == ([], "float32")
    assert attrs_of(op, "dim", "keep_dim", "reduce_all", "in_dtype", "out_dtype") == \
        {"dim": [], "keep_dim": False, "reduce_all": True, "in_dtype": -1, "out_dtype": -1}
    r = pg.sum(x, axis=1, keepdim=True)
    assert attrs_of(last(prog), "dim", "keep_dim", "reduce_all") == {"dim": [1], "keep_dim": True, "reduce_all": False}
    assert info(r) == ([-1, 1], "float32")
    i = pg.sum(data("i", [-1, 3], "int32"), axis=0)
    assert info(i) == ([3], "int64")
    d = pg.sum(x, axis=0, dtype="float64")
    assert attrs_of(last(prog), "in_dtype", "out_dtype") == {"in_dtype": F32, "out_dtype": pb.VarType.FP64}
    assert info(d) == ([3], "float64")


def test_mean(prog):
    x = data("x", [-1, 3, 4])
    m = pg.mean(x)
    assert last(prog).type == "mean" and m.name == "mean_0.tmp_0" and info(m) == ([], "float32")
    m = pg.mean(x, axis=[1, 2], keepdim=True)
    op = last(prog)
    assert op.type == "reduce_mean" and m.name == "mean_1.tmp_0" and info(m) == ([-1, 1, 1], "float32")
    assert attrs_of(op, "dim", "keep_dim", "reduce_all") == {"dim": [1, 2], "keep_dim": True, "reduce_all": False}
    m = pg.mean(x, axis=-1)
    assert info(m) == ([-1, 3], "float32")


@pytest.mark.parametrize("fn, op_type, name", [
    (pg.max, "reduce_max", "max"), (pg.min, "reduce_min", "min"), (pg.prod, "reduce_prod", "reduce_prod"),
])
def test_reduce_aliases(prog, fn, op_type, name):
    x = data("x", [-1, 3, 4])
    y = fn(x, axis=1)
    assert last(prog).type == op_type and y.name == f"{name}_0.tmp_0" and info(y) == ([-1, 4], "float32")
    z = fn(x)
    assert last(prog).attr("reduce_all") is True and info(z) == ([], "float32")


def test_fluid_reduce_names(prog):
    x = data("x", [-1, 3, 4])
    for fn, op_type in [(pg.reduce_sum, "reduce_sum"), (pg.reduce_mean, "reduce_mean"),
                        (pg.reduce_max, "reduce_max"), (pg.reduce_min, "reduce_min"),
                        (pg.reduce_prod, "reduce_prod")]:
        y = fn(x, dim=[1, 2], keep_dim=True)
        assert y.name == f"{op_type}_0.tmp_0" and last(prog).type == op_type
        assert info(y) == ([-1, 1, 1], "float32")
    b = data("b", [2, 3], "bool")
    assert info(pg.all(b, axis=1)) == ([2], "bool") and last(prog).type == "reduce_all"
    assert info(pg.any(b)) == ([], "bool") and last(prog).type == "reduce_any"


# -- comparisons and logic ------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal"])
def test_compare_layers(prog, name):
    x, y = data("x", [-1, 3]), data("y", [3])
    z = getattr(pg, name)(x, y)
    op = last(prog)
    assert op.type == name and z.name == f"{name}_0.tmp_0" and z.stop_gradient
    assert info(z) == ([-1, 3], "bool") and attrs_of(op, "axis", "force_cpu") == {"axis": -1, "force_cpu": False}
    w = getattr(pg, name)(x, 1.0)        # a number: a 0-d constant of x's dtype
    fill = ops(prog)[-2]
    assert fill.type == "fill_constant" and fill.attr("shape") == [] and fill.attr("value") == 1.0
    assert info(w) == ([-1, 3], "bool")


def test_logical_layers(prog):
    a, b = data("a", [-1, 3], "bool"), data("b", [3], "bool")
    for name in ("logical_and", "logical_or", "logical_xor"):
        z = getattr(pg, name)(a, b)
        assert last(prog).type == name and info(z) == ([-1, 3], "bool")
    assert info(pg.logical_not(a)) == ([-1, 3], "bool")
    x = data("x", [2])
    assert last(prog).type == "logical_not"
    for name, op_type in (("isnan", "isnan_v2"), ("isinf", "isinf_v2"), ("isfinite", "isfinite_v2")):
        assert info(getattr(pg, name)(x)) == ([2], "bool") and last(prog).type == op_type


# -- cumsum, argmax, topk, where, norm ---------------------------------------------------------------------
def test_cumsum_argmax_topk(prog):
    x = data("x", [-1, 3, 4])
    c = pg.cumsum(x)
    assert attrs_of(last(prog), "axis", "flatten", "exclusive", "reverse") == \
        {"axis": -1, "flatten": True, "exclusive": False, "reverse": False}
    assert info(c) == ([-1], "float32")
    c = pg.cumsum(x, axis=1)
    assert last(prog).attr("flatten") is False and info(c) == ([-1, 3, 4], "float32")
    a = pg.argmax(x, axis=1)
    op = last(prog)
    assert op.type == "arg_max" and a.name == "arg_max_0.tmp_0" and info(a) == ([-1, 4], "int64")
    assert attrs_of(op, "axis", "keepdims", "flatten", "dtype") == {"axis": 1, "keepdims": False, "flatten": False, "dtype": I64}
    a = pg.argmin(x)
    assert attrs_of(last(prog), "axis", "flatten") == {"axis": 0, "flatten": True} and info(a) == ([], "int64")
    a = pg.argmax(x, axis=-1, keepdim=True, dtype="int32")
    assert info(a) == ([-1, 3, 1], "int32")
    with pytest.raises(DTypeError, match="argmax|arg_max"):
        pg.argmax(x, dtype="float32")
    v, i = pg.topk(x, 2)
    op = last(prog)
    assert op.type == "top_k_v2" and attrs_of(op, "k", "axis", "largest", "sorted") == \
        {"k": 2, "axis": -1, "largest": True, "sorted": True}
    assert (v.name, i.name) == ("top_k_v2_0.tmp_0", "top_k_v2_0.tmp_1")
    assert info(v) == ([-1, 3, 2], "float32") and info(i) == ([-1, 3, 2], "int64")


def test_where_and_norm(prog):
    c, x, y = data("c", [-1, 3], "bool"), data("x", [-1, 3]), data("y", [-1, 3])
    w = pg.where(c, x, y)
    assert last(prog).type == "where" and w.name == "where_0.tmp_0" and info(w) == ([-1, 3], "float32")
    w = pg.where(c, x, 0.0)                       # the number becomes a full_like of x
    assert [op.type for op in ops(prog)[-2:]] == ["fill_any_like", "where"] and info(w) == ([-1, 3], "float32")
    b = data("b", [3])
    w = pg.where(c, x, b)                         # broadcast by adding zeros
    assert last(prog).type == "where" and info(w) == ([-1, 3], "float32")
    idx = pg.where(c)
    assert last(prog).type == "where_index" and info(idx) == ([-1, 2], "int64")
    n = pg.norm(x, p=2, axis=1)
    assert last(prog).type == "p_norm" and info(n) == ([-1], "float32")
    assert attrs_of(last(prog), "porder", "axis", "asvector") == {"porder": 2.0, "axis": 1, "asvector": False}


# -- tensor layers: constants -------------------------------------------------------------------------------
def test_fill_constant_and_full(prog):
    a = pg.fill_constant([2, 3], "float32", 1.5)
    op = last(prog)
    assert a.name == "fill_constant_0.tmp_0" and a.stop_gradient and info(a) == ([2, 3], "float32")
    assert attrs_of(op, "shape", "dtype", "value", "str_value", "force_cpu") == \
        {"shape": [2, 3], "dtype": F32, "value": 1.5, "str_value": "1.5", "force_cpu": False}
    assert op.attr_type("shape") == pb.AttrType.LONGS
    b = pg.zeros([2], "int64")
    assert attrs_of(last(prog), "str_value", "value", "dtype") == {"str_value": "0", "value": 0.0, "dtype": I64}
    assert info(b) == ([2], "int64")
    c = pg.ones([], "float32")
    assert last(prog).attr("str_value") == "1.0" and info(c) == ([], "float32")
    d = pg.full([4], 7, "int32")
    assert last(prog).attr("str_value") == "7" and info(d) == ([4], "int32")
    n = data("n", [1], "int64")
    e = pg.fill_constant([n, 3], "float32", 0.0)
    op = last(prog, "fill_constant")
    assert op.input("ShapeTensorList")[0] == "n" and op.attr("shape") == [-1, 3] and info(e) == ([-1, 3], "float32")


def test_like_and_assign(prog):
    x = data("x", [-1, 3])
    o = pg.ones_like(x)
    assert last(prog).type == "fill_any_like" and o.name == "full_like_0.tmp_0"
    assert attrs_of(last(prog), "value", "dtype") == {"value": 1.0, "dtype": F32}
    z = pg.zeros_like(x, "int64")
    assert last(prog).attr("dtype") == I64 and info(z) == ([-1, 3], "int64")
    f = pg.full_like(x, 2.5)
    assert last(prog).attr("value") == 2.5 and info(f) == ([-1, 3], "float32")
    a = pg.assign(x)
    assert last(prog).type == "assign" and a.name == "assign_0.tmp_0" and info(a) == ([-1, 3], "float32")
    v = pg.assign(np.array([[1, 2]], dtype="int32"))
    op = last(prog)
    assert op.type == "assign_value" and attrs_of(op, "shape", "dtype", "values") == \
        {"shape": [1, 2], "dtype": I32, "values": [1, 2]}
    assert info(v) == ([1, 2], "int32")
    w = pg.assign([1.5, 2.0])
    assert attrs_of(last(prog), "dtype", "values") == {"dtype": F32, "values": [1.5, 2.0]}
    assert info(w) == ([2], "float32")
    t = pg.assign(np.array([True, False]))
    assert last(prog).attr("values") == [True, False] and info(t) == ([2], "bool")


# -- tensor layers: shapes -----------------------------------------------------------------------------------
def test_reshape_creates_xshape(prog):
    x = data("x", [-1, 3, 4])
    y = pg.reshape(x, [0, -1])
    op = last(prog)
    assert op.type == "reshape2" and op.attr("shape") == [0, -1] and op.attr("use_quantizer") is False
    assert op.output("Out") == ["reshape2_0.tmp_0"] and op.output("XShape") == ["reshape2_0.tmp_1"]
    assert info(y) == ([-1, 12], "float32")
    assert info(prog.global_block().var("reshape2_0.tmp_1")) == ([0, -1, 3, 4], "float32")
    s = data("s", [2], "int32")
    z = pg.reshape(x, s)
    assert last(prog).input("Shape") == ["s"] and info(z) == ([-1, -1], "float32")
    n = data("n", [1], "int32")
    w = pg.reshape(x, [n, 12])
    op = last(prog, "reshape2")
    assert op.attr("shape") == [-1, 12] and op.input("ShapeTensor")[0] == "n"
    assert last(prog, "fill_constant").attr("shape") == [1]
    assert info(w) == ([-1, 12], "float32")


def test_transpose_flatten_squeeze_unsqueeze(prog):
    x = data("x", [-1, 3, 1, 4])
    t = pg.transpose(x, [0, 3, 1, 2])
    assert last(prog).type == "transpose2" and t.name == "transpose_0.tmp_0" and info(t) == ([-1, 4, 3, 1], "float32")
    assert last(prog).output("XShape") == ["transpose_0.tmp_1"]
    f = pg.flatten(x)
    assert attrs_of(last(prog), "start_axis", "stop_axis") == {"start_axis": 1, "stop_axis": 3}
    assert f.name == "flatten_0.tmp_0" and info(f) == ([-1, 12], "float32")
    s = pg.squeeze(x, 2)
    assert last(prog).type == "squeeze2" and last(prog).attr("axes") == [2] and info(s) == ([-1, 3, 4], "float32")
    assert info(pg.squeeze(x)) == ([-1, 3, 4], "float32") and last(prog).attr("axes") == []
    u = pg.unsqueeze(x, [0, -1])
    assert last(prog).type == "unsqueeze2" and info(u) == ([1, -1, 3, 1, 4, 1], "float32")


def test_concat_split_stack_unstack(prog):
    x, y = data("x", [-1, 3, 4]), data("y", [-1, 2, 4])
    c = pg.concat([x, y], axis=1)
    assert last(prog).type == "concat" and last(prog).attr("axis") == 1 and info(c) == ([-1, 5, 4], "float32")
    parts = pg.split(x, 3, axis=1)
    op = last(prog)
    assert attrs_of(op, "axis", "num", "sections") == {"axis": 1, "num": 3, "sections": []}
    assert [p.name for p in parts] == ["split_0.tmp_0", "split_0.tmp_1", "split_0.tmp_2"]
    assert [info(p) for p in parts] == [([-1, 1, 4], "float32")] * 3
    parts = pg.split(x, [1, -1], axis=-1)
    assert attrs_of(last(prog), "axis", "num", "sections") == {"axis": 2, "num": 0, "sections": [1, -1]}
    assert [info(p)[0] for p in parts] == [[-1, 3, 1], [-1, 3, 3]]
    s = pg.stack([x, x], axis=1)
    assert last(prog).output("Y") == [s.name] and info(s) == ([-1, 2, 3, 4], "float32")
    us = pg.unstack(x, axis=1)
    assert len(us) == 3 and last(prog).attr("num") == 3 and info(us[0]) == ([-1, 4], "float32")


def test_slice_layers(prog):
    x = data("x", [-1, 3, 4])
    s = pg.slice(x, [1, 2], [0, -3], [2, 100])
    op = last(prog)
    assert op.type == "slice" and s.name == "slice_0.tmp_0"
    assert attrs_of(op, "axes", "starts", "ends", "infer_flags", "decrease_axis") == \
        {"axes": [1, 2], "starts": [0, -3], "ends": [2, 100], "infer_flags": [1, 1], "decrease_axis": []}
    assert info(s) == ([-1, 2, 3], "float32")
    t = pg.strided_slice(x, [2], [3], [0], [-1])
    assert last(prog).attr("strides") == [-1] and info(t) == ([-1, 3, 3], "float32")
    start = data("start", [1], "int64")
    u = pg.slice(x, [1], [start], [3])
    assert last(prog).input("StartsTensorList") == ["start"] and last(prog).attr("infer_flags") == [-1]
    assert info(u) == ([-1, -1, 4], "float32")


def test_gather_scatter_expand_tile(prog):
    x, i = data("x", [-1, 3, 4]), data("i", [5], "int64")
    g = pg.gather(x, i, axis=1)
    assert last(prog).attr("axis") == 1 and g.name == "gather_0.tmp_0" and info(g) == ([-1, 5, 4], "float32")
    assert info(pg.gather_nd(x, data("n", [-1, 2], "int64"))) == ([-1, 4], "float32")
    t, u = data("t", [10, 4]), data("u", [5, 4])
    s = pg.scatter(t, i, u)
    assert last(prog).attr("overwrite") is True and info(s) == ([10, 4], "float32")
    e = pg.expand(data("e", [3, 1]), [2, -1, 5])
    assert last(prog).type == "expand_v2" and last(prog).attr("shape") == [2, -1, 5] and info(e) == ([2, 3, 5], "float32")
    ea = pg.expand_as(data("f", [3, 1]), data("g", [2, 3, 5]))
    assert last(prog).attr("target_shape") == [2, 3, 5] and info(ea) == ([2, 3, 5], "float32")
    tl = pg.tile(x, [2, 1, 1])
    assert last(prog).attr("repeat_times") == [2, 1, 1] and info(tl) == ([-1, 3, 4], "float32")


def test_arange_linspace_shape_one_hot_pad(prog):
    r = pg.arange(0, 10, 2)
    fills = [op for op in ops(prog) if op.type == "fill_constant"]
    assert [f.attr("str_value") for f in fills] == ["0", "10", "2"]
    assert all(f.attr("shape") == [1] and f.attr("force_cpu") and f.attr("dtype") == I64 for f in fills)
    op = last(prog)
    assert op.type == "range" and op.input("Start") == [fills[0].output("Out")[0]]
    assert r.name == "range_0.tmp_0" and info(r) == ([5], "int64")
    assert info(pg.arange(1.0, 2.0, 0.25)) == ([4], "float32")
    assert info(pg.arange(7)) == ([7], "int64")
    ls = pg.linspace(0.0, 1.0, 5)
    assert last(prog).type == "linspace" and last(prog).attr("dtype") == F32 and info(ls) == ([5], "float32")
    x = data("x", [-1, 3])
    s = pg.shape(x)
    assert last(prog).type == "shape" and info(s) == ([2], "int32")
    oh = pg.one_hot(data("lab", [-1, 1], "int64"), 10)
    assert attrs_of(last(prog), "depth", "dtype", "allow_out_of_range") == {"depth": 10, "dtype": F32, "allow_out_of_range": False}
    assert info(oh) == ([-1, 1, 10], "float32")
    p = pg.pad(x, [0, 0, 1, 2], pad_value=0.5)
    assert attrs_of(last(prog), "paddings", "pad_value") == {"paddings": [0, 0, 1, 2], "pad_value": 0.5}
    assert info(p) == ([-1, 6], "float32")
    nz = pg.nonzero(x)
    assert last(prog).type == "where_index" and info(nz) == ([-1, 2], "int64")


# -- Python operators on Variable ------------------------------------------------------------------------
def _scale_attrs(op):
    return attrs_of(op, "scale", "bias", "bias_after_scale")


@pytest.mark.parametrize("expr, scale, bias", [
    (lambda x: x + 2.0, 1.0, 2.0),
    (lambda x: 2.0 + x, 1.0, 2.0),
    (lambda x: x - 2.0, 1.0, -2.0),
    (lambda x: 2.0 - x, -1.0, 2.0),
    (lambda x: x * 3, 3.0, 0.0),
    (lambda x: 3 * x, 3.0, 0.0),
    (lambda x: x / 4.0, 0.25, 0.0),
    (lambda x: -x, -1.0, 0.0),
])
def test_scalar_arithmetic_is_one_scale_op(prog, expr, scale, bias):
    x = data("x", [-1, 3])
    y = expr(x)
    assert len(ops(prog)) == 1
    op = ops(prog)[0]
    assert op.type == "scale" and _scale_attrs(op) == {"scale": scale, "bias": bias, "bias_after_scale": True}
    assert op.input("X") == ["x"] and y.name == "tmp_0" and info(y) == ([-1, 3], "float32")


@pytest.mark.parametrize("expr, op_type, x_first", [
    (lambda x: x ** 2.0, "elementwise_pow", True),
    (lambda x: 2.0 ** x, "elementwise_pow", False),
    (lambda x: 2.0 / x, "elementwise_div", False),
    (lambda x: x % 3.0, "elementwise_mod", True),
    (lambda x: x // 3.0, "elementwise_floordiv", True),
    (lambda x: 1.0 // x, "elementwise_floordiv", False),
])
def test_other_scalar_cases_fill_a_constant(prog, expr, op_type, x_first):
    x = data("x", [-1, 3])
    y = expr(x)
    fill, op = ops(prog)
    assert fill.type == "fill_constant" and fill.attr("shape") == [] and fill.attr("dtype") == F32
    const = fill.output("Out")[0]
    assert op.type == op_type and op.attr("axis") == -1
    assert (op.input("X"), op.input("Y")) == ((["x"], [const]) if x_first else ([const], ["x"]))
    assert info(y) == ([-1, 3], "float32") and prog.global_block().var(const).stop_gradient


@pytest.mark.parametrize("expr, op_type", [
    (lambda x, y: x + y, "elementwise_add"), (lambda x, y: x - y, "elementwise_sub"),
    (lambda x, y: x * y, "elementwise_mul"), (lambda x, y: x / y, "elementwise_div"),
    (lambda x, y: x // y, "elementwise_floordiv"), (lambda x, y: x % y, "elementwise_mod"),
    (lambda x, y: x ** y, "elementwise_pow"),
])
def test_variable_arithmetic(prog, expr, op_type):
    x, y = data("x", [-1, 3]), data("y", [3])
    z = expr(x, y)
    op = last(prog)
    assert op.type == op_type and op.input("X") == ["x"] and op.input("Y") == ["y"] and op.attr("axis") == -1
    assert z.name == "tmp_0" and info(z) == ([-1, 3], "float32")


@pytest.mark.parametrize("expr, op_type", [
    (lambda x, y: x == y, "equal"), (lambda x, y: x != y, "not_equal"), (lambda x, y: x < y, "less_than"),
    (lambda x, y: x <= y, "less_equal"), (lambda x, y: x > y, "greater_than"), (lambda x, y: x >= y, "greater_equal"),
])
def test_comparison_operators(prog, expr, op_type):
    x, y = data("x", [-1, 3]), data("y", [3])
    z = expr(x, y)
    assert last(prog).type == op_type and info(z) == ([-1, 3], "bool") and z.stop_gradient
    w = expr(x, 0.5)
    fill = ops(prog)[-2]
    assert fill.type == "fill_constant" and fill.attr("value") == 0.5 and last(prog).type == op_type
    assert info(w) == ([-1, 3], "bool")


def test_identity_hash_survives_eq(prog):
    x, y = data("x", [2]), data("y", [2])
    assert len({x, y, x}) == 2 and {x: 1}[x] == 1
    assert (x == None) is False and (x != "x") is True  # noqa: E711 (not numbers: no op)
    assert len(ops(prog)) == 0


def test_matmul_neg_abs_astype(prog):
    x, w = data("x", [-1, 3]), data("w", [3, 5])
    y = x @ w
    assert last(prog).type == "matmul_v2" and info(y) == ([-1, 5], "float32")
    assert attrs_of(last(prog), "trans_x", "trans_y") == {"trans_x": False, "trans_y": False}
    a = abs(x)
    assert last(prog).type == "abs" and info(a) == ([-1, 3], "float32")
    c = x.astype("int32")
    assert last(prog).type == "cast" and attrs_of(last(prog), "in_dtype", "out_dtype") == {"in_dtype": F32, "out_dtype": I32}
    assert c.name.startswith("tmp_") and info(c) == ([-1, 3], "int32")
    assert x.astype("float32") is x


def test_integer_promotion(prog):
    i = data("i", [-1, 3], "int64")
    q = i / 2
    assert [op.type for op in ops(prog)] == ["cast", "scale"] and info(q) == ([-1, 3], "float32")
    assert _scale_attrs(last(prog))["scale"] == 0.5
    r = i + 2.5
    assert [op.type for op in ops(prog)[-2:]] == ["cast", "scale"] and info(r) == ([-1, 3], "float32")
    s = i * 2
    assert last(prog).type == "scale" and info(s) == ([-1, 3], "int64")
    j = data("j", [3], "int64")
    d = i / j
    assert [op.type for op in ops(prog)[-3:]] == ["cast", "cast", "elementwise_div"] and info(d) == ([-1, 3], "float32")


def test_operator_errors_name_the_line(prog):
    x, y = data("x", [-1, 3]), data("y", [4])
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(ShapeError) as e:
        x + y  # noqa: B018
    msg = str(e.value)
    assert msg.startswith("elementwise_add: ") and "x [-1, 3] float32" in msg and "y [4] float32" in msg
    assert f"op created at {__file__}:{line}: x + y" in msg
    i = data("i", [3], "int64")
    with pytest.raises(DTypeError, match="elementwise_mul"):
        x * i  # noqa: B018
    with pytest.raises(TypeError):
        x @ 2.0  # noqa: B018
    with pytest.raises(TypeError):
        x + "a"  # noqa: B018


# -- __getitem__ ---------------------------------------------------------------------------------------------------
def test_getitem_int_and_slices(prog):
    x = data("x", [-1, 3, 4])
    a = x[0]
    op = last(prog)
    assert op.type == "slice" and a.name == "x_slice_0"
    assert attrs_of(op, "axes", "starts", "ends", "decrease_axis", "infer_flags") == \
        {"axes": [0], "starts": [0], "ends": [1], "decrease_axis": [0], "infer_flags": [1]}
    assert info(a) == ([3, 4], "float32")
    b = x[:, 1:3]
    assert attrs_of(last(prog), "axes", "starts", "ends", "decrease_axis") == \
        {"axes": [1], "starts": [1], "ends": [3], "decrease_axis": []}
    assert info(b) == ([-1, 2, 4], "float32")
    c = x[:, -1]
    assert attrs_of(last(prog), "starts", "ends") == {"starts": [-1], "ends": [2147483647]}
    assert info(c) == ([-1, 4], "float32")
    d = x[..., 1:]
    assert last(prog).attr("axes") == [2] and info(d) == ([-1, 3, 3], "float32")
    assert x[:] is x and x[...] is x


def test_getitem_steps_none_and_gather(prog):
    x = data("x", [-1, 3, 4])
    a = x[::2]
    op = last(prog)
    assert op.type == "strided_slice" and a.name == "x_strided_slice_0"
    assert attrs_of(op, "axes", "starts", "ends", "strides") == \
        {"axes": [0], "starts": [0], "ends": [2147483647], "strides": [2]}
    assert info(a) == ([-1, 3, 4], "float32")
    b = x[:, -1, ::-1]
    op = last(prog)
    assert attrs_of(op, "axes", "strides", "decrease_axis") == {"axes": [1, 2], "strides": [1, -1], "decrease_axis": [1]}
    assert info(b) == ([-1, 4], "float32")
    c = x[None, :, 0, None]
    assert [o.type for o in ops(prog)[-2:]] == ["slice", "unsqueeze2"] and last(prog).attr("axes") == [0, 2]
    assert info(c) == ([1, -1, 1, 4], "float32")      # numpy: (1, N, 1, 4)
    i = data("i", [2], "int64")
    g = x[i]
    assert last(prog).type == "gather" and info(g) == ([2, 3, 4], "float32")


def test_getitem_errors(prog):
    x = data("x", [-1, 3, 4])
    with pytest.raises(IndexError):
        x[0, 3]
    with pytest.raises(IndexError):
        x[0, 0, 0, 0]
    with pytest.raises(TypeError):
        x["a"]
    with pytest.raises(TypeError):
        list(x)
    with pytest.raises(ValueError, match="step"):
        x[:, 1:2:0]
    line = inspect.currentframe().f_lineno + 2
    with pytest.raises(ShapeError) as e:
        pg.strided_slice(x, [1], [0], [2], [0])
    assert str(e.value).startswith("strided_slice: ") and f"op created at {__file__}:{line}" in str(e.value)
