"""Gradient checks: math ops (program/ops/math.py: scale, clip, cast, pow, sum, matrix
products, cumsum, norms, where, top_k_v2; reduce_* and mean are in test_grad_elementwise),
plus direct kernel tests (ties, bounds, skipped outputs) and the gradient ops' signatures
against PaddlePaddle's."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope
from keel.executor.kernel_call import call_kernel
from gradcheck import Case, away_from, rand, run_case
from keel.program.ops import registry
from test_grad_activation import SIGNATURES, Var, assert_matches_paddle, backward_roles, paddle_entry

_POS = dict(low=0.5, high=2.0)
_INF = float("inf")


def _distinct(*shape, seed=0):
    """Values with well separated magnitudes (no ties in max/min/top-k, none near 0)."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    mags = 0.3 + 0.2 * rng.permutation(n)
    return (mags * rng.choice([-1.0, 1.0], n)).reshape(shape)


def _matmul_cases():
    cases = []
    for xs, ys, attrs in [
        ((2, 3), (3, 4), {}),
        ((2, 3), (4, 3), {"trans_y": True}),
        ((3, 2), (3, 4), {"trans_x": True}),
        ((3, 2), (4, 3), {"trans_x": True, "trans_y": True}),
        ((2, 5, 3), (2, 3, 4), {}),
        ((2, 5, 3), (3, 4), {}),                       # weight shared over the batch
        ((2, 3, 5), (3, 4), {"trans_x": True}),
        ((2, 4, 3), (4, 3), {"trans_y": True}),
        ((5, 3), (2, 3, 4), {}),                       # X broadcast over Y's batch
        ((2, 1, 5, 3), (3, 3, 4), {}),                 # batch dims broadcast both ways
        ((2, 1, 3, 5), (1, 3, 4, 3), {"trans_x": True, "trans_y": True}),
        ((3,), (3,), {}),                              # dot product, 0-d Out
        ((3,), (2, 3, 4), {}),
        ((2, 5, 3), (3,), {}),
        ((3,), (4, 3), {"trans_y": True}),
        ((3,), (3, 4), {"trans_x": True}),             # trans flag of a 1-D operand ignored
    ]:
        cases.append(Case("matmul_v2", {"X": rand(*xs), "Y": rand(*ys, seed=1)}, attrs,
                          id=f"matmul_v2 {xs}@{ys} {attrs or ''}"))
    for xs, ys, attrs in [
        ((2, 3), (3, 4), {}),
        ((2, 3), (4, 3), {"transpose_Y": True, "alpha": 2.0}),
        ((3, 2), (3, 4), {"transpose_X": True}),
        ((2, 3, 5), (2, 4, 3), {"transpose_X": True, "transpose_Y": True, "alpha": -0.5}),
        ((2, 5, 3), (2, 3, 4), {}),
        ((2, 5, 3), (3, 4), {"alpha": 0.5}),
        ((5, 3), (2, 3, 4), {}),
        ((3,), (3,), {}),
        ((3,), (2, 3, 4), {}),
        ((2, 5, 3), (3,), {}),
        ((3,), (3,), {"transpose_X": True, "transpose_Y": True}),  # a dot product: flags ignored
    ]:
        cases.append(Case("matmul", {"X": rand(*xs), "Y": rand(*ys, seed=1)}, attrs,
                          id=f"matmul {xs}@{ys} {attrs or ''}"))
    for xs, ys, attrs in [
        ((2, 3), (3, 4), {}),
        ((2, 3, 4), (12, 5), {"x_num_col_dims": 1}),
        ((2, 3, 4), (4, 5), {"x_num_col_dims": 2}),
        ((2, 6), (2, 3, 5), {"y_num_col_dims": 2}),
        ((2, 3, 4), (3, 4, 2, 3), {"x_num_col_dims": 1, "y_num_col_dims": 2}),
    ]:
        cases.append(Case("mul", {"X": rand(*xs), "Y": rand(*ys, seed=1)}, attrs,
                          id=f"mul {xs}@{ys} {attrs or ''}"))
    cases.append(Case("bmm", {"X": rand(2, 3, 4), "Y": rand(2, 4, 5, seed=1)}))
    return cases


CASES = [
    Case("scale", {"X": rand(2, 3)}, {"scale": 2.5, "bias": 1.0}, id="scale"),
    Case("scale", {"X": rand(2, 3)}, {"scale": -1.5, "bias": 0.5, "bias_after_scale": False},
         id="scale bias before"),
    Case("scale", {"X": rand(2, 3), "ScaleTensor": np.array([3.0])}, {"scale": 2.0},
         id="scale ScaleTensor"),
    Case("clip", {"X": away_from(rand(3, 5), [-0.5, 0.5])}, {"min": -0.5, "max": 0.5}, id="clip"),
    Case("clip", {"X": away_from(rand(3, 5), [-0.25, 0.75]), "Min": np.array([-0.25]),
                  "Max": np.array([0.75])}, {"min": -9.0, "max": 9.0}, id="clip Min/Max tensors"),
    Case("cast", {"X": rand(2, 3)}, {"in_dtype": 6, "out_dtype": 6}, id="cast float64"),
    Case("cast", {"X": rand(2, 3)}, {"in_dtype": 6, "out_dtype": 5}, delta=1e-2, rtol=1e-3,
         atol=1e-4, id="cast to float32"),
    Case("pow", {"X": rand(2, 3, **_POS)}, {"factor": 2.5}, id="pow 2.5"),
    Case("pow", {"X": rand(2, 3)}, {"factor": 3.0}, id="pow 3"),
    Case("pow", {"X": rand(2, 3, **_POS), "FactorTensor": np.array([-1.5], dtype=np.float32)},
         {"factor": 2.0}, id="pow FactorTensor"),
    Case("sum", {"X": [rand(2, 3), rand(2, 3, seed=1), rand(2, 3, seed=2)]}, id="sum 3 inputs"),
    Case("sum", {"X": [rand(4)]}, id="sum 1 input"),
    *_matmul_cases(),
    Case("cumsum", {"X": rand(3, 4)}, {"axis": 1}, id="cumsum axis=1"),
    Case("cumsum", {"X": rand(3, 4)}, {"axis": 0, "exclusive": True}, id="cumsum exclusive"),
    Case("cumsum", {"X": rand(3, 4)}, {"axis": -1, "reverse": True}, id="cumsum reverse"),
    Case("cumsum", {"X": rand(2, 3, 4)}, {"axis": 1, "exclusive": True, "reverse": True},
         id="cumsum exclusive reverse"),
    Case("cumsum", {"X": rand(3, 4)}, {"flatten": True}, id="cumsum flatten"),
    Case("cumsum", {"X": rand(2, 3)}, {"flatten": True, "reverse": True, "exclusive": True},
         id="cumsum flatten exclusive reverse"),
    Case("p_norm", {"X": rand(3, 4)}, {"porder": 2.0, "axis": 1}, id="p_norm 2"),
    Case("p_norm", {"X": _distinct(3, 4)}, {"porder": 1.0, "axis": 0, "keepdim": True},
         id="p_norm 1 keepdim"),
    Case("p_norm", {"X": rand(2, 3, 4)}, {"porder": 3.0, "axis": -1}, id="p_norm 3"),
    Case("p_norm", {"X": rand(3, 4, **_POS)}, {"porder": 0.5, "axis": 1}, id="p_norm 0.5"),
    Case("p_norm", {"X": _distinct(3, 4)}, {"porder": _INF, "axis": 1}, id="p_norm inf"),
    Case("p_norm", {"X": _distinct(3, 4, seed=1)}, {"porder": -_INF, "axis": 0}, id="p_norm -inf"),
    Case("p_norm", {"X": rand(2, 3)}, {"porder": 2.0, "asvector": True}, id="p_norm asvector"),
    Case("p_norm", {"X": rand(2, 3)}, {"porder": 2.0, "asvector": True, "keepdim": True},
         id="p_norm asvector keepdim"),
    Case("p_norm", {"X": _distinct(2, 3)}, {"porder": 0.0, "axis": 1}, id="p_norm 0"),
    Case("squared_l2_norm", {"X": rand(3, 4)}),
    Case("l1_norm", {"X": _distinct(3, 4)}),
    Case("where", {"Condition": rand(3, 4) > 0, "X": rand(3, 4, seed=1), "Y": rand(3, 4, seed=2)}),
    Case("top_k_v2", {"X": _distinct(3, 5)}, {"k": 2, "axis": -1}, id="top_k"),
    Case("top_k_v2", {"X": _distinct(4, 3, 2)}, {"k": 3, "axis": 0, "largest": False},
         id="top_k smallest axis=0"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


# -- kernels: conventions finite differences cannot see ------------------------------------------


def test_clip_grad_keeps_the_bounds():
    x = np.array([-1.0, -0.5, 0.0, 0.5, 1.0])
    got = call_kernel("clip_grad", {"X": x, "Out@GRAD": np.ones(5)}, {"min": -0.5, "max": 0.5})["X@GRAD"]
    np.testing.assert_array_equal(got, [0, 1, 1, 1, 0])


def test_p_norm_grad_conventions():
    dout = np.array([2.0])
    x = np.array([[1.0, -3.0, 3.0, 0.0]])
    # inf: every element whose |x| equals the norm gets the full gradient, with its sign
    got = call_kernel("p_norm_grad", {"X": x, "Out": np.array([3.0]), "Out@GRAD": dout},
                      {"porder": _INF, "axis": 1})["X@GRAD"]
    np.testing.assert_array_equal(got, [[0, -2, 2, 0]])
    # 2: x / (norm + epsilon); a zero row gets zeros, not NaN
    x = np.array([[0.0, 0.0], [3.0, -4.0]])
    got = call_kernel("p_norm_grad", {"X": x, "Out": np.array([0.0, 5.0]), "Out@GRAD": np.ones(2)},
                      {"porder": 2.0, "axis": 1})["X@GRAD"]
    np.testing.assert_allclose(got, [[0, 0], [0.6, -0.8]], rtol=1e-11)
    # 1: sign(x), zero at zero
    got = call_kernel("p_norm_grad", {"X": x, "Out": np.array([0.0, 7.0]), "Out@GRAD": np.ones(2)},
                      {"porder": 1.0, "axis": 1})["X@GRAD"]
    np.testing.assert_allclose(got, [[0, 0], [1, -1]], rtol=1e-11)


def test_top_k_grad_routes_to_the_selected_elements_only():
    x = np.array([[3.0, 1.0, 3.0, 2.0]])
    out = call_kernel("top_k_v2", {"X": x}, {"k": 2, "axis": -1})
    got = call_kernel("top_k_v2_grad", {"X": x, "Indices": out["Indices"],
                                        "Out@GRAD": np.array([[10.0, 20.0]])}, {"axis": -1})["X@GRAD"]
    np.testing.assert_array_equal(got, [[10, 0, 20, 0]])  # tie: both 3s selected, lower index first
    # with the K tensor (read by the grad op, as in PaddlePaddle) the result is the same
    k = np.array([2], dtype=np.int32)
    got = call_kernel("top_k_v2_grad", {"X": x, "K": k, "Indices": out["Indices"],
                                        "Out@GRAD": np.array([[10.0, 20.0]])}, {"axis": -1})["X@GRAD"]
    np.testing.assert_array_equal(got, [[10, 0, 20, 0]])


def test_l1_and_squared_l2_grads():
    x = np.array([[0.0, -2.0], [3.0, 0.5]])
    got = call_kernel("l1_norm_grad", {"X": x, "Out@GRAD": np.array(1.5)})["X@GRAD"]
    np.testing.assert_array_equal(got, [[0, -1.5], [1.5, 1.5]])
    got = call_kernel("squared_l2_norm_grad", {"X": x, "Out@GRAD": np.array([0.5])})["X@GRAD"]
    np.testing.assert_array_equal(got, x)
    assert got.shape == x.shape


@pytest.mark.parametrize("op_type,attrs,xs,ys", [
    ("matmul_v2_grad", {"trans_x": False, "trans_y": False}, (2, 5, 3), (3, 4)),
    ("matmul_grad", {"transpose_X": False, "transpose_Y": True, "alpha": 2.0}, (5, 3), (4, 3)),
    ("mul_grad", {"x_num_col_dims": 2, "y_num_col_dims": 1}, (2, 5, 3), (3, 4)),
    ("bmm_grad", {}, (2, 5, 3), (2, 3, 4)),
])
def test_matmul_grads_skip_unbound_outputs(op_type, attrs, xs, ys):
    from keel.executor.kernel_call import bind
    x, y = rand(*xs), rand(*ys, seed=1)
    fwd = op_type[:-len("_grad")]
    out = call_kernel(fwd, {"X": x, "Y": y}, attrs)["Out"]
    dout = rand(*out.shape, seed=2)
    full, _ = bind(op_type, attrs)
    dx_all, dy_all = full(x, y, dout)
    only_y, _ = bind(op_type, attrs, need={"Y@GRAD"})
    dx, dy = only_y(x, y, dout)
    assert dx is None
    np.testing.assert_allclose(dy, dy_all, rtol=1e-12)
    only_x, _ = bind(op_type, attrs, need={"X@GRAD"})
    dx, dy = only_x(x, y, dout)
    assert dy is None
    np.testing.assert_allclose(dx, dx_all, rtol=1e-12)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_matmul_grads_keep_the_dtype(dtype):
    x, y = rand(2, 5, 3).astype(dtype), rand(3, 4, seed=1).astype(dtype)
    dout = rand(2, 5, 4, seed=2).astype(dtype)
    got = call_kernel("matmul_v2_grad", {"X": x, "Y": y, "Out@GRAD": dout})
    want = call_kernel("matmul_v2_grad", {"X": x.astype(np.float64), "Y": y.astype(np.float64),
                                          "Out@GRAD": dout.astype(np.float64)})
    for slot, ref in (("X@GRAD", x), ("Y@GRAD", y)):
        assert got[slot].dtype == ref.dtype and got[slot].shape == ref.shape
        np.testing.assert_allclose(got[slot], want[slot], rtol=1e-2, atol=1e-2)


def test_fc_and_predicates_are_not_differentiable():
    # PaddlePaddle registers an EmptyGradOpMaker for fc, comparisons, logic, arg_max/arg_min,
    # the isfinite family and reduce_all/any; its increment "gradient" only undoes a counter.
    for op_type in ("fc", "equal", "not_equal", "less_than", "less_equal", "greater_than",
                    "greater_equal", "logical_and", "logical_or", "logical_xor", "logical_not",
                    "arg_max", "arg_min", "isfinite_v2", "isinf_v2", "isnan_v2", "increment",
                    "reduce_all", "reduce_any"):
        assert registry.get(op_type).grad is registry.NOT_DIFFERENTIABLE, op_type


def test_cast_gradient_is_a_cast_back():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()), pg.unique_name.guard():
        block = main.global_block()
        x = block.create_var("x", [2, 3], "float64", need_check_feed=True, stop_gradient=False)
        out = block.create_var("out", dtype="float32")
        block.append_op("cast", {"X": ["x"]}, {"Out": ["out"]}, {"in_dtype": 6, "out_dtype": 5})
        loss = pg.reduce_sum(out * 3.0)
        (dx,) = pg.gradients([loss], [x])
    cast_back = [op for op in block.ops if op.type == "cast" and op.output("Out") == [dx.name]]
    assert len(cast_back) == 1
    assert cast_back[0].attr("in_dtype") == 5 and cast_back[0].attr("out_dtype") == 6
    assert dx.dtype == 6
    got, = Executor(CPUPlace()).run(main, feed={"x": rand(2, 3)}, fetch_list=[dx], scope=Scope())
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, np.full((2, 3), 3.0))


def test_sum_gradient_skips_inputs_without_gradient():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()), pg.unique_name.guard():
        block = main.global_block()
        a = block.create_var("a", [2], "float32", stop_gradient=False)
        block.create_var("b", [2], "float32", stop_gradient=True)
        out = block.create_var("out", dtype="float32")
        block.append_op("sum", {"X": ["a", "b"]}, {"Out": ["out"]})
        n = len(block.ops)
        pg.gradients([out], [a])
    scales = [op for op in block.ops[n:] if op.type == "scale"]
    assert [op.output("Out") for op in scales] == [["a@GRAD"]]


# -- the gradient ops PaddlePaddle writes ----------------------------------------------------------

_SIGNATURE_CASES = {
    "scale": ({"X": Var((2, 3))}, {"scale": 2.0, "bias": 1.0}, None),
    "clip": ({"X": Var((2, 3))}, {"min": -0.5, "max": 0.5}, None),
    "cast": ({"X": Var((2, 3))}, {"in_dtype": 5, "out_dtype": 6}, {"Out": "float64"}),
    "pow": ({"X": Var((2, 3))}, {"factor": 2.0}, None),
    "sum": ({"X": [Var((2, 3)), Var((2, 3)), Var((2, 3))]}, {}, None),
    "matmul": ({"X": Var((2, 3)), "Y": Var((3, 4))}, {}, None),
    "matmul_v2": ({"X": Var((2, 3)), "Y": Var((3, 4))}, {}, None),
    "mul": ({"X": Var((2, 3)), "Y": Var((3, 4))}, {}, None),
    "bmm": ({"X": Var((2, 2, 3)), "Y": Var((2, 3, 4))}, {}, None),
    "cumsum": ({"X": Var((2, 3))}, {"axis": 1}, None),
    "p_norm": ({"X": Var((2, 3))}, {}, None),
    "squared_l2_norm": ({"X": Var((2, 3))}, {}, None),
    "l1_norm": ({"X": Var((2, 3))}, {}, None),
    "where": ({"Condition": Var((2, 3), "bool", grad=False), "X": Var((2, 3)), "Y": Var((2, 3))},
              {}, None),
    "top_k_v2": ({"X": Var((2, 3))}, {"k": 2}, {"Out": "float32", "Indices": "int64"}),
}

_VARIANTS = [
    ("matmul", "y_stop_gradient", {"X": Var((2, 3)), "Y": Var((3, 4), grad=False)}),
    ("matmul_v2", "x_stop_gradient", {"X": Var((2, 3), grad=False), "Y": Var((3, 4))}),
    ("matmul_v2", "y_stop_gradient", {"X": Var((2, 3)), "Y": Var((3, 4), grad=False)}),
]


@pytest.mark.skipif(not SIGNATURES.exists(), reason="no PaddlePaddle grad signature fixture")
@pytest.mark.parametrize("op_type", sorted(_SIGNATURE_CASES))
def test_grad_op_signature_matches_paddle(op_type):
    inputs, attrs, outputs = _SIGNATURE_CASES[op_type]
    assert_matches_paddle(backward_roles(op_type, inputs, attrs, outputs), paddle_entry(op_type))


@pytest.mark.skipif(not SIGNATURES.exists(), reason="no PaddlePaddle grad signature fixture")
@pytest.mark.parametrize("op_type,variant,inputs", _VARIANTS, ids=lambda v: v if isinstance(v, str) else "")
def test_grad_op_signature_variant_matches_paddle(op_type, variant, inputs):
    assert_matches_paddle(backward_roles(op_type, inputs), paddle_entry(op_type, variant))
