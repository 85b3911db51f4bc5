"""Each ONNX converter (keel.program.onnx.ops_*) against Keel's executor: a one-op program with
the attribute variants PaddlePaddle writes is exported (onnx.checker full check), run in ONNX
Runtime and compared with Keel's kernels on the same inputs. With `batch` the model is also
exported with a symbolic batch dim and run at another batch size."""
import numpy as np
import pytest

onnx = pytest.importorskip("onnx", reason="the ONNX export needs the onnx package (pip install -e '.[onnx]')")
ort = pytest.importorskip("onnxruntime", reason="running exported models needs onnxruntime")

import keel.program as pg  # noqa: E402
from keel.executor import Executor, Scope  # noqa: E402
from keel.program import dtypes  # noqa: E402
from keel.program.onnx import OnnxExportError, program_to_onnx  # noqa: E402

RNG = np.random.default_rng(0)


def normal(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def ints(low, high, *shape, dtype="int64"):
    return RNG.integers(low, high, shape).astype(dtype)


class Param:
    """An input held as a parameter (an ONNX initializer), not fed."""

    def __init__(self, value):
        self.value = np.asarray(value)


def build(op_type, inputs, attrs, outputs):
    """A program of one op. inputs: slot -> array, Param or a list of them; outputs: slot ->
    count (or an input slot: written in place). Returns (program, feeds, params, fetch names)."""
    program = pg.Program()
    block = program.global_block()
    feeds, params, slots = {}, {}, {}
    for slot, values in inputs.items():
        names = []
        for i, value in enumerate(values if isinstance(values, list) else [values]):
            name = f"{slot.lower()}_{i}"
            array = value.value if isinstance(value, Param) else np.asarray(value)
            block.create_var(name, list(array.shape), dtypes.to_code(array.dtype),
                             persistable=isinstance(value, Param))
            (params if isinstance(value, Param) else feeds)[name] = array
            names.append(block.var(name))
        slots[slot] = names if isinstance(values, list) else names[0]
    # a count of new variables, or the name of the input slot whose variable the op writes in place
    outs = {slot: [slots[count]] if isinstance(count, str) else
            [block.create_var(f"out_{slot.lower()}_{i}") for i in range(count)] for slot, count in outputs.items()}
    block.append_op(op_type, slots, outs, attrs)
    fetches = [v.name for vs in outs.values() for v in vs]
    return program, feeds, params, fetches


def keel_run(program, feeds, params, fetches):
    scope = Scope()
    for name, value in params.items():
        scope.set(name, value)
    return Executor().run(program, feed=feeds, fetch_list=fetches, scope=scope)


def ort_run(model, feeds):
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {i.name: feeds[i.name] for i in session.get_inputs()})


def assert_close(got, want, what, rtol=1e-5, atol=1e-5):
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.shape == w.shape and g.dtype == w.dtype, (what, i, g.shape, g.dtype, w.shape, w.dtype)
        if w.dtype.kind in "fc":
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{what} output {i}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {i}")


def check(op_type, inputs, attrs=None, outputs=None, *, batch=None, opset=17, rtol=1e-5, atol=1e-5, fetch=None):
    """Export the one-op program, compare ORT with Keel on the outputs of the slots `fetch`
    (default: all); with `batch`, also at that batch size with a symbolic batch dim (every
    fed input's first dim)."""
    program, feeds, params, fetches = build(op_type, inputs, attrs or {}, outputs or {"Out": 1})
    if fetch is not None:
        fetches = [n for n in fetches if any(n.startswith(f"out_{slot.lower()}_") for slot in fetch)]
    want = keel_run(program, feeds, params, fetches)
    model = program_to_onnx(program, params, list(feeds), fetches, opset_version=opset)
    assert_close(ort_run(model, feeds), want, op_type, rtol, atol)
    if batch is not None:
        dynamic = program_to_onnx(program, params, list(feeds), fetches, opset_version=opset, dynamic_batch=True)
        resized = {slot: value if isinstance(value, (Param, list)) else _resized(value, batch)
                   for slot, value in inputs.items()}
        batch_program, other, _, _ = build(op_type, resized, attrs or {}, outputs or {"Out": 1})
        assert_close(ort_run(dynamic, other), keel_run(batch_program, other, params, fetches),
                     f"{op_type} at batch {batch}", rtol, atol)
    return model


def _resized(value, batch):
    """`value` with `batch` rows along its first dim (its rows repeated, then cut)."""
    value = np.asarray(value)
    return np.concatenate([value] * batch, axis=0)[:batch]


# -- elementwise and activations -----------------------------------------------------------

UNARY = ["relu", "sigmoid", "tanh", "exp", "abs", "sin", "cos", "atan", "sinh", "floor", "ceil", "erf",
         "sign", "softsign", "square", "logsigmoid", "tanh_shrink", "silu", "mish", "expm1"]
POSITIVE = ["sqrt", "rsqrt", "log", "log2", "log10", "log1p", "reciprocal", "acosh"]


@pytest.mark.parametrize("op_type", UNARY)
def test_unary(op_type):
    check(op_type, {"X": normal(2, 3, 4)}, batch=3)


@pytest.mark.parametrize("op_type", POSITIVE)
def test_unary_of_positive_numbers(op_type):
    check(op_type, {"X": np.abs(normal(2, 5)) + 1.1})


@pytest.mark.parametrize("op_type, attrs", [
    ("leaky_relu", {"alpha": 0.1}), ("elu", {"alpha": 0.7}), ("celu", {"alpha": 1.3}),
    ("selu", {"scale": 1.05, "alpha": 1.67}), ("hard_sigmoid", {"slope": 0.1666667, "offset": 0.5}),
    ("hard_sigmoid", {"slope": 0.2, "offset": 0.4}), ("hard_swish", {}),
    ("hard_swish", {"threshold": 5.0, "scale": 4.0, "offset": 2.0}), ("hard_shrink", {"threshold": 0.4}),
    ("softshrink", {"lambda": 0.3}), ("relu6", {}), ("brelu", {"t_min": -0.5, "t_max": 0.7}),
    ("softplus", {}), ("softplus", {"beta": 2.0, "threshold": 1.0}), ("swish", {}),
    ("gelu", {}), ("gelu", {"approximate": True}), ("stanh", {"scale_a": 0.5, "scale_b": 2.0}),
    ("thresholded_relu", {"threshold": 0.2}), ("mish", {"threshold": 0.5}),
])
def test_activation_attributes(op_type, attrs):
    check(op_type, {"X": 3 * normal(2, 3, 4)}, attrs, batch=1)


def test_round_halves_away_from_zero():
    check("round", {"X": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.49, -3.7], np.float32)})


def test_isnan_isinf_isfinite():
    x = np.array([1.0, np.nan, np.inf, -np.inf, 0.0], np.float32)
    for op_type in ("isnan_v2", "isinf_v2", "isfinite_v2"):
        check(op_type, {"X": x})


@pytest.mark.parametrize("op_type", ["elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
                                     "elementwise_max", "elementwise_min", "elementwise_pow"])
@pytest.mark.parametrize("y_shape, axis", [((2, 3, 4), -1), ((4,), -1), ((3,), 1), ((3, 4), 1), ((2, 3), 0)])
def test_elementwise_with_axis(op_type, y_shape, axis):
    x = np.abs(normal(2, 3, 4)) + 0.5
    y = np.abs(normal(*y_shape)) + 0.5
    check(op_type, {"X": x, "Y": y}, {"axis": axis})


@pytest.mark.parametrize("dtype", ["float32", "int32", "int64"])
@pytest.mark.parametrize("op_type", ["elementwise_mod", "elementwise_floordiv"])
def test_mod_and_floordiv_round_as_python(op_type, dtype):
    x = np.array([7, -7, 7, -7, 6, -6, 0, 5], dtype)
    y = np.array([3, 3, -3, -3, 3, -3, 4, 7], dtype)
    check(op_type, {"X": x, "Y": y})


@pytest.mark.parametrize("op_type", ["equal", "not_equal", "greater_than", "greater_equal", "less_than", "less_equal"])
def test_comparisons(op_type):
    x = ints(0, 3, 3, 4).astype("float32")
    check(op_type, {"X": x, "Y": ints(0, 3, 4).astype("float32")})


@pytest.mark.parametrize("op_type", ["logical_and", "logical_or", "logical_xor"])
def test_logical(op_type):
    check(op_type, {"X": ints(0, 2, 3, 4).astype(bool), "Y": ints(0, 3, 3, 4).astype("int32")})
    check("logical_not", {"X": ints(0, 2, 5).astype(bool)})


def test_bitwise_on_bools_and_integers():
    check("bitwise_and", {"X": ints(0, 2, 6).astype(bool), "Y": ints(0, 2, 6).astype(bool)})
    check("bitwise_xor", {"X": ints(0, 100, 6, dtype="int32"), "Y": ints(0, 100, 6, dtype="int32")}, opset=18)
    with pytest.raises(OnnxExportError, match="opset 18"):
        check("bitwise_or", {"X": ints(0, 100, 6, dtype="int32"), "Y": ints(0, 100, 6, dtype="int32")}, opset=17)


# -- arithmetic with attributes ---------------------------------------------------------------------

@pytest.mark.parametrize("attrs", [{"scale": 2.5, "bias": 0.5}, {"scale": 2.5, "bias": 0.5, "bias_after_scale": False},
                                   {"scale": 1.0, "bias": 0.0}, {"scale": -1.0}])
def test_scale(attrs):
    check("scale", {"X": normal(2, 3)}, attrs, batch=4)


def test_scale_tensor_and_clip_bounds():
    check("scale", {"X": normal(2, 3), "ScaleTensor": np.array([3.0], np.float32)}, {"bias": 1.0})
    check("clip", {"X": normal(2, 6)}, {"min": -0.5, "max": 0.3})
    check("clip", {"X": normal(2, 6), "Min": np.array([-0.2], np.float32), "Max": np.array([0.9], np.float32)},
          {"min": -1.0, "max": 1.0})


def test_pow_increment_sum_cast():
    check("pow", {"X": np.abs(normal(3, 4)) + 0.1}, {"factor": 2.5})
    check("pow", {"X": np.abs(normal(3, 4)) + 0.1, "FactorTensor": np.array([0.5], np.float32)})
    check("increment", {"X": np.array([3], np.int64)}, {"step": 2.0})
    check("sum", {"X": [normal(2, 3), normal(2, 3), normal(2, 3)]})
    check("cast", {"X": 5 * normal(3, 4)}, {"in_dtype": 5, "out_dtype": 2})  # float32 -> int32 truncates


@pytest.mark.parametrize("op_type", ["reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod"])
@pytest.mark.parametrize("attrs", [{"dim": [1]}, {"dim": [-1], "keep_dim": True}, {"dim": [0, 2]},
                                   {"dim": [0], "reduce_all": True}, {"dim": [1], "reduce_all": True, "keep_dim": True}])
def test_reductions(op_type, attrs):
    check(op_type, {"X": normal(2, 3, 4)}, attrs, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op_type", ["reduce_all", "reduce_any"])
def test_logical_reductions(op_type):
    check(op_type, {"X": ints(0, 2, 3, 4).astype(bool)}, {"dim": [1]})
    check(op_type, {"X": ints(0, 2, 3, 4).astype(bool)}, {"dim": [0], "reduce_all": True})


def test_mean_frobenius_norm_and_p_norm():
    check("mean", {"X": normal(3, 4)})
    check("frobenius_norm", {"X": normal(3, 4, 5)}, {"dim": [1, 2], "keep_dim": False, "reduce_all": False})
    for attrs in ({"porder": 2.0, "axis": 1}, {"porder": 1.0, "axis": -1, "keepdim": True},
                  {"porder": 3.0, "axis": 0}, {"porder": float("inf"), "axis": 1},
                  {"porder": 2.0, "axis": 0, "asvector": True}):
        check("p_norm", {"X": normal(3, 4)}, attrs)


@pytest.mark.parametrize("op_type", ["arg_max", "arg_min"])
@pytest.mark.parametrize("attrs", [{"axis": 1}, {"axis": -1, "keepdims": True}, {"axis": 0, "dtype": 2},
                                   {"axis": 0, "flatten": True}])
def test_arg_max_min(op_type, attrs):
    check(op_type, {"X": normal(3, 4, 5)}, attrs)


@pytest.mark.parametrize("attrs", [{"axis": 1}, {"axis": -1, "exclusive": True}, {"axis": 0, "reverse": True},
                                   {"axis": -1, "flatten": True}])
def test_cumsum(attrs):
    check("cumsum", {"X": normal(3, 4)}, attrs)


def test_top_k_and_argsort():
    x = RNG.permutation(60).reshape(3, 20).astype(np.float32)  # distinct: no ties to order
    check("top_k_v2", {"X": x}, {"k": 4}, {"Out": 1, "Indices": 1})
    check("top_k_v2", {"X": x}, {"k": 2, "axis": 0, "largest": False}, {"Out": 1, "Indices": 1})
    check("top_k_v2", {"X": x, "K": np.array([3], np.int32)}, {"k": 1}, {"Out": 1, "Indices": 1})
    check("argsort", {"X": x}, {"axis": -1}, {"Out": 1, "Indices": 1})
    check("argsort", {"X": x}, {"axis": 0, "descending": True}, {"Out": 1, "Indices": 1})


def test_determinant():
    check("determinant", {"Input": normal(3, 4, 4)}, rtol=1e-4, atol=1e-5)


def test_where_and_einsum():
    check("where", {"Condition": ints(0, 2, 3, 4).astype(bool), "X": normal(3, 4), "Y": normal(3, 4)})
    check("einsum", {"Operands": [normal(2, 3, 4), normal(2, 4, 5)]}, {"equation": "bij,bjk->bik"},
          {"Out": 1})


# -- matmul family ------------------------------------------------------------------------------------

@pytest.mark.parametrize("attrs, x_shape, y_shape", [
    ({}, (2, 3, 4), (4, 5)), ({"trans_x": True}, (2, 4, 3), (4, 5)), ({"trans_y": True}, (2, 3, 4), (2, 5, 4)),
    ({"trans_x": True, "trans_y": True}, (4, 3), (5, 4)), ({}, (4,), (4, 3)),
])
def test_matmul_v2(attrs, x_shape, y_shape):
    check("matmul_v2", {"X": normal(*x_shape), "Y": normal(*y_shape)}, attrs)


def test_matmul_v1_bmm_mul_fc():
    check("matmul", {"X": normal(2, 3, 4), "Y": normal(2, 5, 4)}, {"transpose_Y": True, "alpha": 0.5}, batch=3)
    check("bmm", {"X": normal(2, 3, 4), "Y": normal(2, 4, 2)})
    check("mul", {"X": normal(2, 3, 4), "Y": Param(normal(12, 5))}, {"x_num_col_dims": 1}, batch=3)
    check("mul", {"X": normal(2, 3, 4), "Y": Param(normal(4, 5))}, {"x_num_col_dims": 2}, batch=3)
    check("fc", {"Input": normal(2, 3, 4), "W": Param(normal(12, 5)), "Bias": Param(normal(5))},
          {"in_num_col_dims": 1}, batch=3)
    check("fc", {"Input": normal(2, 3, 4), "W": Param(normal(4, 6)), "Bias": Param(normal(1, 6))},
          {"in_num_col_dims": 2, "activation_type": "relu"}, batch=3)


def test_softmax_and_log_softmax():
    for axis in (-1, 1, 0):
        check("softmax", {"X": normal(2, 3, 4)}, {"axis": axis})
        check("log_softmax", {"X": normal(2, 3, 4)}, {"axis": axis})


# -- convolution and pooling ----------------------------------------------------------------------------

@pytest.mark.parametrize("attrs, filter_shape", [
    ({"paddings": [1, 1]}, (4, 3, 3, 3)), ({"paddings": [0, 1, 2, 1], "strides": [2, 1]}, (4, 3, 3, 3)),
    ({"padding_algorithm": "SAME", "strides": [2, 2]}, (4, 3, 3, 3)),
    ({"padding_algorithm": "VALID", "paddings": [5, 5]}, (4, 3, 3, 3)),
    ({"groups": 3, "paddings": [1, 1], "dilations": [2, 2]}, (6, 1, 3, 3)),
])
def test_conv2d(attrs, filter_shape):
    check("conv2d", {"Input": normal(2, 3, 9, 8), "Filter": Param(normal(*filter_shape))},
          {"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1, **attrs},
          {"Output": 1}, batch=3, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("attrs", [
    {"paddings": [1, 1], "strides": [2, 2]}, {"paddings": [0, 0], "strides": [2, 2], "output_padding": [1, 1]},
    {"paddings": [1, 1], "strides": [2, 2], "output_size": [10, 12]}, {"paddings": [0, 1, 1, 0], "strides": [1, 2]},
    {"padding_algorithm": "SAME", "strides": [2, 2]}, {"groups": 2, "paddings": [1, 1], "dilations": [2, 1]},
])
def test_conv2d_transpose(attrs):
    groups = attrs.get("groups", 1)
    check("conv2d_transpose", {"Input": normal(2, 4, 5, 6), "Filter": Param(normal(4, 6 // groups, 3, 3))},
          {"strides": [1, 1], "paddings": [0, 0], "dilations": [1, 1], "groups": 1, **attrs}, {"Output": 1},
          batch=1, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pooling_type", ["max", "avg"])
@pytest.mark.parametrize("attrs", [
    {"ksize": [2, 2], "strides": [2, 2]}, {"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1]},
    {"ksize": [3, 3], "strides": [2, 2], "paddings": [1, 1], "exclusive": False},
    {"ksize": [3, 3], "strides": [2, 2], "ceil_mode": True}, {"ksize": [3, 2], "strides": [1, 2], "paddings": [1, 0, 0, 1]},
    {"ksize": [3, 3], "strides": [2, 2], "padding_algorithm": "SAME"},
    {"ksize": [3, 3], "strides": [1, 1], "padding_algorithm": "VALID", "paddings": [4, 4]},
    {"ksize": [1, 1], "global_pooling": True}, {"ksize": [1, 1], "adaptive": True},
    {"ksize": [3, 2], "adaptive": True}, {"ksize": [4, 5], "adaptive": True},  # bins of 2 and 3 cells
])
def test_pool2d(pooling_type, attrs):
    check("pool2d", {"X": normal(2, 3, 9, 8)}, {"pooling_type": pooling_type, **attrs}, batch=3)


def test_pool2d_refusals_name_why():
    with pytest.raises(OnnxExportError, match="full window size"):
        check("pool2d", {"X": normal(1, 1, 8, 8)}, {"pooling_type": "avg", "ksize": [3, 3], "strides": [2, 2],
                                                    "ceil_mode": True, "exclusive": False})


# -- normalizations -----------------------------------------------------------------------------------------

def test_batch_norm():
    c = 4
    stats = dict(Scale=Param(normal(c)), Bias=Param(normal(c)), Mean=Param(normal(c)),
                 Variance=Param(np.abs(normal(c)) + 0.5))
    outputs = {"Y": 1, "MeanOut": "Mean", "VarianceOut": "Variance"}
    check("batch_norm", {"X": normal(2, c, 5, 5), **stats}, {"is_test": True, "epsilon": 1e-3}, outputs,
          batch=3, rtol=1e-4, atol=1e-5, fetch=["Y"])
    check("batch_norm", {"X": normal(2, 5, 5, c), **stats}, {"is_test": True, "data_layout": "NHWC"}, outputs,
          rtol=1e-4, atol=1e-5, fetch=["Y"])
    check("batch_norm", {"X": normal(3, c), **stats}, {"is_test": True}, outputs, rtol=1e-4, atol=1e-5, fetch=["Y"])


@pytest.mark.parametrize("opset", [17, 13])
@pytest.mark.parametrize("axis, with_affine", [(1, True), (2, True), (3, True), (2, False)])
def test_layer_norm(opset, axis, with_affine):
    x = normal(2, 3, 4, 5)
    size = int(np.prod(x.shape[axis:]))
    affine = {"Scale": Param(normal(size)), "Bias": Param(normal(size))} if with_affine else {}
    check("layer_norm", {"X": x, **affine}, {"begin_norm_axis": axis, "epsilon": 1e-5}, {"Y": 1},
          batch=3, opset=opset, rtol=1e-4, atol=1e-5)


def test_instance_group_norm_lrn_l2_normalize_affine_channel():
    x = normal(2, 6, 5, 4)
    check("instance_norm", {"X": x, "Scale": Param(normal(6)), "Bias": Param(normal(6))}, {"epsilon": 1e-5},
          {"Y": 1}, batch=3, rtol=1e-4, atol=1e-5)
    check("instance_norm", {"X": x}, {}, {"Y": 1}, rtol=1e-4, atol=1e-5)
    check("group_norm", {"X": x, "Scale": Param(normal(6)), "Bias": Param(normal(6))}, {"groups": 3},
          {"Y": 1}, batch=3, rtol=1e-4, atol=1e-5)
    check("lrn", {"X": x}, {"n": 3, "k": 1.5, "alpha": 0.01, "beta": 0.6}, {"Out": 1, "MidOut": 1}, rtol=1e-4,
          fetch=["Out"])
    check("norm", {"X": x}, {"axis": 1, "epsilon": 1e-10}, {"Out": 1, "Norm": 1}, rtol=1e-5)
    check("affine_channel", {"X": x, "Scale": Param(normal(6)), "Bias": Param(normal(6))}, {"data_layout": "NCHW"})


@pytest.mark.parametrize("mode, alpha_shape", [("all", (1,)), ("channel", (3,)), ("element", (1, 3, 4, 5))])
def test_prelu(mode, alpha_shape):
    check("prelu", {"X": normal(2, 3, 4, 5), "Alpha": Param(normal(*alpha_shape))}, {"mode": mode}, batch=3)


@pytest.mark.parametrize("implementation", ["downgrade_in_infer", "upscale_in_train"])
def test_dropout_at_inference(implementation):
    check("dropout", {"X": normal(3, 4)}, {"dropout_prob": 0.3, "is_test": True,
                                           "dropout_implementation": implementation})


# -- tensors: shapes, joining, indexing -----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [[0, -1], [-1, 4], [2, 0, 2, 2], [0, 12]])
def test_reshape2(shape):
    check("reshape2", {"X": normal(2, 3, 4)}, {"shape": shape}, batch=3 if shape[0] in (0, -1) else None)


def test_reshape2_shape_from_tensors():
    check("reshape2", {"X": normal(2, 3, 4), "Shape": np.array([4, 6], np.int32)}, {"shape": [4, -1]})
    check("reshape2", {"X": normal(2, 3, 4), "ShapeTensor": [np.array([6], np.int32), np.array([-1], np.int64)]},
          {"shape": [-1, -1]})


def test_transpose_flatten_squeeze_unsqueeze():
    check("transpose2", {"X": normal(2, 3, 4)}, {"axis": [2, 0, 1]}, batch=3)
    for start, stop in ((1, -1), (0, 1), (1, 2), (0, -1), (2, 2)):
        check("flatten_contiguous_range", {"X": normal(2, 3, 4, 5)}, {"start_axis": start, "stop_axis": stop},
              {"Out": 1, "XShape": 1}, batch=3, fetch=["Out"])
    check("squeeze2", {"X": normal(2, 1, 3, 1)}, {"axes": [1, -1]}, batch=3)
    check("squeeze2", {"X": normal(2, 1, 3, 1)}, {"axes": [2]})  # a listed dim that is not 1 stays
    check("squeeze2", {"X": normal(2, 1, 3, 1)}, {"axes": []})
    check("unsqueeze2", {"X": normal(2, 3)}, {"axes": [0, -1]}, batch=None)
    check("unsqueeze2", {"X": normal(2, 3)}, {"axes": [1, 1, -1]}, batch=3)
    check("unsqueeze2", {"X": normal(2, 3), "AxesTensor": Param(np.array([2, 0], np.int32))}, {"axes": []})


def test_concat_split_stack_unstack():
    check("concat", {"X": [normal(2, 3), normal(2, 4)]}, {"axis": -1}, batch=3)
    check("concat", {"X": [normal(2, 3), normal(1, 3)], "AxisTensor": Param(np.array([0], np.int32))}, {"axis": 1})
    check("split", {"X": normal(2, 6, 4)}, {"axis": 1, "num": 3}, {"Out": 3}, batch=3)
    check("split", {"X": normal(2, 6, 4)}, {"axis": -1, "sections": [1, -1, 2]}, {"Out": 3})
    check("split", {"X": normal(2, 6, 4)}, {"axis": 1, "num": 2}, {"Out": 2}, opset=18)
    check("split", {"X": normal(2, 6, 4), "SectionsTensorList": [np.array([2], np.int32), np.array([4], np.int32)]},
          {"axis": 1, "sections": [-1, -1]}, {"Out": 2})
    check("stack", {"X": [normal(2, 3), normal(2, 3)]}, {"axis": 1}, {"Y": 1}, batch=3)
    check("stack", {"X": [normal(2, 3), normal(2, 3), normal(2, 3)]}, {"axis": -1}, {"Y": 1})
    check("unstack", {"X": normal(2, 3, 4)}, {"axis": 1, "num": 3}, {"Y": 3})


@pytest.mark.parametrize("attrs", [
    {"axes": [1], "starts": [1], "ends": [3]}, {"axes": [0, 2], "starts": [-1, 0], "ends": [10000, -1]},
    {"axes": [1], "starts": [2], "ends": [3], "decrease_axis": [1]},
    {"axes": [2], "starts": [0], "ends": [2147483647]},
    {"axes": [0, 1, 2], "starts": [0, 1, 2], "ends": [1, 2, 3], "decrease_axis": [0, 1, 2]},
])
def test_slice(attrs):
    check("slice", {"Input": normal(2, 3, 4)}, {"infer_flags": [1] * len(attrs["axes"]), **attrs})


def test_slice_from_tensors_and_strided_slice():
    check("slice", {"Input": normal(2, 3, 4), "StartsTensorList": [np.array([1], np.int64)],
                    "EndsTensor": np.array([3], np.int32)}, {"axes": [2], "starts": [-1], "ends": [-1],
                                                            "infer_flags": [-1]})
    check("strided_slice", {"Input": normal(5, 6, 4)}, {"axes": [0, 1], "starts": [0, 5], "ends": [5, 0],
                                                         "strides": [2, -2], "infer_flags": [1, 1]})
    check("strided_slice", {"Input": normal(5, 6, 4)}, {"axes": [2], "starts": [-1], "ends": [-10000],
                                                         "strides": [-1], "infer_flags": [1]})


def test_gather_family():
    check("gather", {"X": normal(5, 3), "Index": np.array([4, 0, 2], np.int32)}, {"axis": 0})
    check("gather", {"X": normal(5, 3), "Index": np.array([2, 1], np.int64)}, {"axis": 1}, batch=3)
    check("index_select", {"X": normal(4, 5), "Index": np.array([4, 4, 1], np.int64)}, {"dim": 1})
    check("gather_nd", {"X": normal(4, 5, 3), "Index": np.array([[1, 2], [3, 0]], np.int32)})
    check("take_along_axis", {"Input": normal(3, 4), "Index": ints(0, 4, 3, 2)}, {"Axis": 1}, {"Result": 1})
    check("flip", {"X": normal(2, 3, 4)}, {"axis": [0, -1]})
    check("where_index", {"Condition": ints(0, 2, 3, 4).astype(bool)})


def test_expand_tile():
    check("expand_v2", {"X": normal(1, 3, 1)}, {"shape": [2, -1, 4]})
    check("expand_v2", {"X": normal(3, 1)}, {"shape": [2, 3, 5]})
    check("expand_v2", {"X": normal(1, 1, 4), "expand_shapes_tensor": [np.array([2], np.int32),
                                                                       np.array([3], np.int32),
                                                                       np.array([-1], np.int32)]},
          {"shape": [-2, -2, -2]})
    check("expand_v2", {"X": normal(1, 3), "Shape": np.array([4, -1], np.int32)}, {"shape": []})
    check("expand_as_v2", {"X": normal(1, 3), "Y": normal(4, 3)}, {"target_shape": [4, 3]})
    check("tile", {"X": normal(2, 3)}, {"repeat_times": [2, 1]}, batch=3)
    check("tile", {"X": normal(2, 3)}, {"repeat_times": [2, 1, 3]})
    check("tile", {"X": normal(2, 3, 2)}, {"repeat_times": [3]})
    check("tile", {"X": normal(2, 3), "RepeatTimes": np.array([1, 2], np.int32)}, {"repeat_times": []})


def test_shape_size_range():
    check("shape", {"Input": normal(2, 3, 4)}, {}, batch=5)
    check("size", {"Input": normal(2, 3, 4)})
    check("range", {"Start": np.array([1], np.int64), "End": np.array([10], np.int64),
                    "Step": np.array([3], np.int64)})
    check("range", {"Start": np.array([0.5], np.float32), "End": np.array([2.0], np.float32),
                    "Step": np.array([0.25], np.float32)})


def test_constants():
    check("fill_constant", {}, {"shape": [2, 3], "dtype": 5, "value": 1.5})
    check("fill_constant", {}, {"shape": [3], "dtype": 3, "value": 0.0, "str_value": "9007199254740993"})
    check("fill_constant", {"ShapeTensor": np.array([2, 4], np.int32)}, {"dtype": 2, "value": 7.0})
    check("fill_constant", {"ValueTensor": np.array([2.5], np.float32)}, {"shape": [2, 2], "dtype": 5})
    check("fill_any_like", {"X": normal(2, 3)}, {"value": 3.0, "dtype": -1}, batch=4)
    check("fill_any_like", {"X": normal(2, 3)}, {"value": 1.0, "dtype": 3})
    check("fill_constant_batch_size_like", {"Input": normal(2, 3)},
          {"shape": [-1, 5], "dtype": 5, "value": 0.5, "input_dim_idx": 0, "output_dim_idx": 0}, batch=3)
    check("assign_value", {}, {"shape": [2, 2], "dtype": 5, "values": [1.0, 2.0, 3.0, 4.0]})
    check("assign", {"X": normal(2, 3)})


def test_one_hot_tril_triu_pads_shuffles():
    check("one_hot_v2", {"X": np.array([[0, 3], [2, 1]], np.int64)}, {"depth": 4, "dtype": 5})
    check("one_hot_v2", {"X": np.array([0, 4, 2], np.int32)}, {"depth": 4, "allow_out_of_range": True})
    for lower, diagonal in ((True, 0), (False, 1), (True, -1)):
        check("tril_triu", {"X": normal(2, 4, 5)}, {"lower": lower, "diagonal": diagonal}, batch=3)
    x = normal(2, 3, 4, 5, 6)
    for mode in ("constant", "reflect", "replicate"):
        check("pad3d", {"X": x}, {"paddings": [1, 2, 0, 1, 2, 0], "mode": mode, "value": 0.5}, batch=3)
    check("pad3d", {"X": x}, {"paddings": [1, 2, 0, 1, 1, 0], "mode": "circular"}, opset=19)
    check("pad", {"X": normal(2, 3)}, {"paddings": [0, 1, 2, 0], "pad_value": -1.0})
    check("pixel_shuffle", {"X": normal(2, 8, 3, 4)}, {"upscale_factor": 2}, batch=3)
    check("shuffle_channel", {"X": normal(2, 6, 3, 4)}, {"group": 3}, batch=3)


def test_an_op_with_no_translation_is_refused_naming_it_and_the_users_line():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        x = pg.data("x", [-1, 3, 3], "float32")
        y = pg.linalg.cholesky(x)  # ONNX has no Cholesky: this line must be named
    with pytest.raises(OnnxExportError) as info:
        program_to_onnx(main, {}, ["x"], [y.name])
    message = str(info.value)
    assert "cholesky" in message and "no ONNX translation" in message
    assert "test_onnx_ops.py" in message and "pg.linalg.cholesky(x)" in message, message


def test_opset_below_13_is_refused():
    program, feeds, params, fetches = build("relu", {"X": normal(2, 3)}, {}, {"Out": 1})
    with pytest.raises(OnnxExportError, match="opset_version 12 is not one Keel writes: choose 13"):
        program_to_onnx(program, params, list(feeds), fetches, opset_version=12)
