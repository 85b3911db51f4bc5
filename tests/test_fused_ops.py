"""fused_elemwise_activation (program/ops/fused.py, kernels/fused.py) and the
fuse_elementwise_activation inference pass.

The kernel is checked against PaddlePaddle 3.3.1's CPU kernel (numbers recorded below with
block.append_op + Executor, save_intermediate_out on, scale 1.7) and against Keel's
separate ops; the pass on small Keel programs keeps the outputs, fuses what it documents
and nothing else, and can be disabled by name. The tests marked `paddle` run the fused op
in PaddlePaddle itself (skipped where it is not installed):
    FLAGS_enable_pir_api=0 PYTHONPATH=. $PADDLE_PYTHON -m pytest -q -m paddle tests/test_fused_ops.py
"""
import os
from collections import Counter

import numpy as np
import pytest

import keel.program as pg
from inference_run import run
from keel.executor import Executor, Scope
from keel.executor.kernel_call import bind, call_kernel
from keel.kernels import fused as fused_kernels
from keel.program.errors import AttrError, DTypeError, ShapeError
from keel.program.ops import registry
from keel.program.ops.fused import FUSED_FUNCTOR_LISTS, broadcast_supported
from keel.program.passes import PASSES, optimize_inference
from keel.proto import pb

OP = "fused_elemwise_activation"
SCALE = 1.7

# -- PaddlePaddle 3.3.1's numbers -----------------------------------------------------------------
# Inputs: case -> (X, Y, axis). A: same shapes, with sums beyond tanh's and sigmoid's clip
# bounds; B: Y [3] over X [2, 3, 2] at axis 1; E: the same with Y [3, 1] (a trailing 1);
# C: X [3] the smaller operand; D: A in float64.
_XA = np.array([[0.5, -1.25, 2.0], [-3.0, 7.5, 0.0]], np.float32)
_YA = np.array([[1.5, -0.75, 14.0], [-45.0, 0.25, -0.5]], np.float32)
_XB = np.arange(12, dtype=np.float32).reshape(2, 3, 2) * 0.5 - 3
_YB = np.array([0.5, -1.0, 2.0], np.float32)
_XC = np.array([0.5, -2.0, 1.0], np.float32)
_YC = np.array([[1.0, 1.5, -3.0], [-0.25, 4.0, 0.0]], np.float32)
INPUTS = {"A": (_XA, _YA, -1), "B": (_XB, _YB, 1), "E": (_XB, _YB.reshape(3, 1), 1),
          "C": (_XC, _YC, -1), "D": (_XA.astype(np.float64), _YA.astype(np.float64), -1)}
OUT_SHAPES = {"A": (2, 3), "B": (2, 3, 2), "E": (2, 3, 2), "C": (2, 3), "D": (2, 3)}

# case -> functor_list -> (Out, IntermediateOut), flattened
PADDLE = {
    "A": {
        ("relu", "elementwise_add"): (
            [2.0, -0.0, 16.0, -0.0, 7.75, -0.0],
            [2.0, -2.0, 16.0, -48.0, 7.75, -0.5]),
        ("scale", "elementwise_add"): (
            [3.4000000953674316, -3.4000000953674316, 27.200000762939453,
             -81.60000610351562, 13.175000190734863, -0.8500000238418579],
            [2.0, -2.0, 16.0, -48.0, 7.75, -0.5]),
        ("tanh", "elementwise_add"): (
            [0.9640275239944458, -0.9640275835990906, 0.9999954700469971, -1.0,
             0.9999954700469971, -0.46211713552474976],
            [2.0, -2.0, 16.0, -48.0, 7.75, -0.5]),
        ("gelu", "elementwise_add"): (
            [1.9545977115631104, -0.04540228843688965, 16.0, -0.0, 7.75,
             -0.1542859971523285],
            [2.0, -2.0, 16.0, -48.0, 7.75, -0.5]),
        ("elementwise_add", "relu"): (
            [2.0, -1.25, 16.0, -3.0, 7.75, 0.0],
            [1.5, -0.0, 14.0, -0.0, 0.25, -0.0]),
        ("elementwise_add", "scale"): (
            [3.0500001907348633, -2.5250000953674316, 25.80000114440918, -79.5,
             7.925000190734863, -0.8500000238418579],
            [2.5500001907348633, -1.2750000953674316, 23.80000114440918, -76.5,
             0.42500001192092896, -0.8500000238418579]),
        ("elementwise_mul", "scale"): (
            [1.2750000953674316, 1.5937501192092896, 47.60000228881836, 229.5, 3.1875,
             -0.0],
            [2.5500001907348633, -1.2750000953674316, 23.80000114440918, -76.5,
             0.42500001192092896, -0.8500000238418579]),
        ("elementwise_mul", "tanh"): (
            [0.45257413387298584, 0.7939361929893494, 1.9999909400939941, 3.0,
             1.8368902206420898, -0.0],
            [0.9051482677459717, -0.6351489424705505, 0.9999954700469971, -1.0,
             0.24491870403289795, -0.46211713552474976]),
        ("elementwise_mul", "sigmoid"): (
            [0.40878722071647644, -0.4010266065597534, 1.999995470046997,
             -1.2745062393415979e-17, 4.2163238525390625, 0.0],
            [0.8175744414329529, 0.32082128524780273, 0.9999977350234985,
             4.24835413113866e-18, 0.562176525592804, 0.3775406777858734]),
    },
    "B": {
        ("relu", "elementwise_add"): (
            [-0.0, -0.0, -0.0, -0.0, 1.0, 1.5, 0.5, 1.0, 0.0, 0.5, 4.0, 4.5],
            [-2.5, -2.0, -3.0, -2.5, 1.0, 1.5, 0.5, 1.0, 0.0, 0.5, 4.0, 4.5]),
        ("elementwise_mul", "sigmoid"): (
            [-1.8673779964447021, -1.5561484098434448, -0.5378828644752502,
             -0.4034121632575989, -0.8807970285415649, -0.44039851427078247, 0.0,
             0.3112296760082245, 0.2689414322376251, 0.4034121632575989,
             1.7615940570831299, 2.2019925117492676],
            [0.622459352016449, 0.2689414322376251, 0.8807970285415649]),
        ("elementwise_add", "scale"): (
            [-2.1500000953674316, -1.649999976158142, -3.700000047683716,
             -3.200000047683716, 2.4000000953674316, 2.9000000953674316,
             0.8500000238418579, 1.350000023841858, -0.7000000476837158,
             -0.20000004768371582, 5.400000095367432, 5.900000095367432],
            [0.8500000238418579, -1.7000000476837158, 3.4000000953674316]),
    },
    "E": {
        ("relu", "elementwise_add"): (
            [-0.0, -0.0, -0.0, -0.0, 1.0, 1.5, 0.5, 1.0, 0.0, 0.5, 4.0, 4.5],
            [-2.5, -2.0, -3.0, -2.5, 1.0, 1.5, 0.5, 1.0, 0.0, 0.5, 4.0, 4.5]),
        ("elementwise_mul", "tanh"): (
            [-1.3863515853881836, -1.1552929878234863, 1.5231883525848389,
             1.1423912048339844, -0.9640275239944458, -0.4820137619972229, 0.0,
             0.23105859756469727, -0.7615941762924194, -1.1423912048339844,
             1.9280550479888916, 2.4100687503814697],
            [0.46211719512939453, -0.7615941762924194, 0.9640275239944458]),
    },
    "C": {
        ("elementwise_add", "relu"): (
            [1.5, -0.5, 1.0, 0.5, 2.0, 1.0],
            [1.0, 1.5, -0.0, -0.0, 4.0, 0.0]),
        ("scale", "elementwise_add"): (
            [2.5500001907348633, -0.8500000238418579, -3.4000000953674316,
             0.42500001192092896, 3.4000000953674316, 1.7000000476837158],
            [1.5, -0.5, -2.0, 0.25, 2.0, 1.0]),
    },
    "D": {
        ("tanh", "elementwise_add"): (
            [0.9640275800758169, -0.9640275800758169, 0.9999954793514041, -1.0,
             0.9999954793514041, -0.4621171572600098],
            [2.0, -2.0, 16.0, -48.0, 7.75, -0.5]),
        ("gelu", "elementwise_add"): (
            [1.9545976939197902, -0.0454023060802099, 16.0, -0.0, 7.75,
             -0.15428599026146134],
            [2.0, -2.0, 16.0, -48.0, 7.75, -0.5]),
        ("elementwise_add", "scale"): (
            [3.0500000715255737, -2.525000035762787, 25.80000066757202,
             -79.50000214576721, 7.925000011920929, -0.8500000238418579],
            [2.5500000715255737, -1.2750000357627869, 23.80000066757202,
             -76.50000214576721, 0.42500001192092896, -0.8500000238418579]),
        ("elementwise_mul", "sigmoid"): (
            [0.4087872380968218, -0.4010266260307588, 1.999995479351404,
             -1.2745062765874767e-17, 4.216323756643486, 0.0],
            [0.8175744761936437, 0.320821300824607, 0.999997739675702,
             4.248354255291589e-18, 0.5621765008857981, 0.3775406687981454]),
    },
}
# The functors whose results go through exp/tanh, which numpy rounds differently in the last
# bit on different vector units (AVX-512 against AVX2) and the C library differently again:
# compared within a few ulp; the others must agree bit for bit.
TRANSCENDENTAL = {"tanh", "sigmoid", "gelu"}


def fused(x, y, functor_list, axis=-1, scale=SCALE):
    return call_kernel(OP, {"X": x, "Y": y}, {"functor_list": list(functor_list), "axis": axis,
                                               "scale": scale})


def assert_bits(got, want):
    """Equal values, equal signs of zero, equal NaN positions."""
    np.testing.assert_array_equal(got, want)
    assert_same_signs(got, want)


def assert_same_signs(got, want):
    number = ~np.isnan(want)
    np.testing.assert_array_equal(np.signbit(got[number]), np.signbit(want[number]))


def is_unary_compound(functors):
    return functors[1] in ("elementwise_add", "elementwise_mul")


# -- the definition ---------------------------------------------------------------------------------
def test_definition_has_paddles_slots_attributes_and_defaults():
    # PaddlePaddle 3.3.1: OpProtoHolder's proto and core.get_op_attrs_default_value
    opdef = registry.get(OP)
    assert [(s.name, s.duplicable, s.dispensable, s.intermediate) for s in opdef.inputs] == [
        ("X", False, False, False), ("Y", False, False, False)]
    assert [(s.name, s.duplicable, s.dispensable, s.intermediate) for s in opdef.outputs] == [
        ("Out", False, False, False), ("IntermediateOut", False, False, True)]
    attrs = {n: (s.type, s.default) for n, s in opdef.attrs.items()}
    assert attrs == {"functor_list": (pb.AttrType.STRINGS, registry.REQUIRED),
                     "axis": (pb.AttrType.INT, -1), "scale": (pb.AttrType.FLOAT, 0.0),
                     "save_intermediate_out": (pb.AttrType.BOOLEAN, False)}
    # its gradient op reads every forward slot (checked by finite differences in
    # tests/test_grad_added_ops.py)
    assert opdef.grad.inputs == ("X", "Y", "Out", "IntermediateOut", "Out@GRAD")
    assert opdef.grad.outputs == ("X@GRAD", "Y@GRAD")


def test_the_op_and_the_kernel_support_paddles_nine_functor_lists():
    assert len(FUSED_FUNCTOR_LISTS) == 9
    assert set(FUSED_FUNCTOR_LISTS) == fused_kernels.SUPPORTED
    assert {(case, f) for case in PADDLE for f in PADDLE[case]} >= {("A", f) for f in FUSED_FUNCTOR_LISTS}


# -- the kernel against PaddlePaddle -----------------------------------------------------------------
@pytest.mark.parametrize("case, functors", [(c, f) for c in PADDLE for f in PADDLE[c]],
                         ids=lambda v: ",".join(v) if isinstance(v, tuple) else v)
def test_kernel_gives_paddles_numbers(case, functors):
    x, y, axis = INPUTS[case]
    want_out, want_inter = PADDLE[case][functors]
    got = fused(x, y, functors, axis)
    out_shape = OUT_SHAPES[case]
    inter_shape = out_shape if is_unary_compound(functors) else y.shape
    for got_v, want, shape in ((got["Out"], want_out, out_shape), (got["IntermediateOut"], want_inter, inter_shape)):
        want = np.array(want, x.dtype).reshape(shape)
        assert got_v.shape == want.shape and got_v.dtype == want.dtype
        if not TRANSCENDENTAL & set(functors):
            assert_bits(got_v, want)
        elif x.dtype == np.float64:  # numpy's exp/tanh differ by an ulp between its SIMD paths
            np.testing.assert_array_max_ulp(got_v, want, maxulp=4)
            assert_same_signs(got_v, want)
        else:
            np.testing.assert_allclose(got_v, want, rtol=1e-6, atol=1e-7)


def test_functors_clip_and_propagate_as_paddles_do():
    # PaddlePaddle 3.3.1's fused kernel on these sums (Y = 0, or X = 1 for [binary, unary])
    v = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, -3.0, 7.0, 10.0, 14.0, -14.0, -45.0, 20.0], np.float32)
    zero, one = np.zeros_like(v), np.ones_like(v)
    t = 0.9999954700469971  # 2 / (1 + exp(-13)) - 1: tanh's argument 2x is clipped at 13
    nan = np.nan
    with np.errstate(invalid="ignore"):
        relu = fused(v, zero, ("relu", "elementwise_add"))["Out"]
        tanh = fused(v, zero, ("tanh", "elementwise_add"))["Out"]
        sigm = fused(one, v, ("elementwise_mul", "sigmoid"))["Out"]
        plus_relu = fused(one, v, ("elementwise_add", "relu"))["Out"]
    # relu is x * (x > 0): NaN and -inf give NaN, a negative x gives -0.0
    assert_bits(relu, np.array([nan, nan, np.inf, 0.0, 0.0, -0.0, 7, 10, 14, -0.0, -0.0, 20], np.float32))
    assert_bits(plus_relu, np.array([nan, nan, np.inf, 1, 1, 1, 8, 11, 15, 1, 1, 21], np.float32))
    np.testing.assert_allclose(tanh, np.array([nan, -1, t, 0, 0, -0.9950547814369202, t, t, t, -1, -1, t],
                                              np.float32), rtol=1e-6, atol=1e-7)
    want = [nan, 4.24835413113866e-18, 0.9999977350234985, 0.5, 0.5, 0.04742587357759476,
            0.9990890026092529, 0.9999545812606812, 0.9999977350234985, 8.315280410897685e-07,
            4.24835413113866e-18, 0.9999977350234985]  # sigmoid clips x to [-40, 13]
    np.testing.assert_allclose(sigm, np.array(want, np.float32), rtol=1e-6)


# -- the kernel against Keel's separate ops ----------------------------------------------------------
SHAPES = [((2, 3, 4), (2, 3, 4), -1), ((2, 3, 4), (4,), -1), ((2, 3, 4), (3,), 1),
          ((2, 3, 4), (3, 1), 1), ((2, 3, 4), (2, 3, 1), -1), ((3,), (2, 3, 4), 1), ((2, 3, 4), (), -1)]


def unfused(x, y, functors, axis):
    """The same computation with Keel's elementwise and activation kernels."""
    def unary(name, a):
        attrs = {"scale": {"scale": SCALE, "bias": 0.0}, "gelu": {"approximate": True}}.get(name, {})
        return call_kernel(name, {"X": a}, attrs)["Out"]

    def binary(name, a, b):
        return call_kernel(name, {"X": a, "Y": b}, {"axis": axis})["Out"]

    if is_unary_compound(functors):
        inter = binary(functors[1], x, y)
        return unary(functors[0], inter), inter
    inter = unary(functors[1], y)
    return binary(functors[0], x, inter), inter


@pytest.mark.parametrize("functors", FUSED_FUNCTOR_LISTS, ids=",".join)
@pytest.mark.parametrize("xs, ys, axis", SHAPES)
def test_kernel_equals_the_separate_ops(functors, xs, ys, axis):
    rng = np.random.default_rng(len(xs) * 10 + len(ys))
    x = rng.uniform(-3, 3, xs).astype(np.float32)   # sums within (-6.5, 6.5): tanh is not clipped
    y = np.asarray(rng.uniform(-3, 3, ys).astype(np.float32))
    got = fused(x, y, functors, axis)
    want_out, want_inter = unfused(x, y, functors, axis)
    assert got["Out"].shape == want_out.shape and got["IntermediateOut"].shape == want_inter.shape
    if TRANSCENDENTAL & set(functors):
        # Paddle's tanh is 2 / (1 + exp(-2x)) - 1 and its gelu has rounded constants: a few
        # float32 ulps from np.tanh and the gelu op
        np.testing.assert_allclose(got["Out"], want_out, rtol=1e-6, atol=3e-7)
        np.testing.assert_allclose(got["IntermediateOut"], want_inter, rtol=1e-6, atol=3e-7)
    else:  # relu, scale, add, mul: the same values (relu's -0.0 compares equal to 0.0)
        np.testing.assert_array_equal(got["Out"], want_out)
        np.testing.assert_array_equal(got["IntermediateOut"], want_inter)


@pytest.mark.parametrize("functors", [("relu", "elementwise_add"), ("scale", "elementwise_add")], ids=",".join)
@pytest.mark.parametrize("xs, ys, axis", SHAPES)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # the NaN and -inf sums
def test_the_executors_fast_path_gives_the_kernels_bits(functors, xs, ys, axis, dtype):
    """relu/scale of a sum as the passes fuse it runs through the kernel's specialized path
    (the sum written into a donated X): the same bits as the general kernel, -0.0 and NaN
    included, with X fed (not donated) and X an intermediate (donated)."""
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", list(xs), dtype, need_check_feed=True)
    b.create_var("y", list(ys), dtype, need_check_feed=True)
    for name in ("fed_out", "mid", "donated_out"):
        b.create_var(name, None, dtype)
    attrs = {"functor_list": list(functors), "axis": axis, "scale": SCALE}
    b.append_op(OP, {"X": "x", "Y": "y"}, {"Out": "fed_out"}, attrs)
    b.append_op("scale", {"X": "x"}, {"Out": "mid"}, {"scale": 1.0, "bias": 0.5})
    b.append_op(OP, {"X": "mid", "Y": "y"}, {"Out": "donated_out"}, attrs)
    rng = np.random.default_rng(3)
    x = rng.uniform(-3, 3, xs).astype(dtype)
    y = np.asarray(rng.uniform(-3, 3, ys).astype(dtype))
    if x.size > 2:
        x.flat[0], x.flat[1] = np.nan, -np.inf
    before = x.copy()
    fed_out, donated_out = Executor().run(p, feed={"x": x, "y": y}, fetch_list=["fed_out", "donated_out"],
                                          scope=Scope())
    np.testing.assert_array_equal(x, before)
    for got, xin in ((fed_out, before), (donated_out, before + np.asarray(0.5, dtype))):
        want = call_kernel(OP, {"X": xin, "Y": y}, attrs)["Out"]
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


def test_tanh_and_sigmoid_differ_from_the_separate_ops_only_where_paddle_clips():
    x = np.array([6.0, 6.6, 8.0, 12.0, 13.5, 20.0, -50.0], np.float32)
    tanh = fused(x, np.zeros_like(x), ("tanh", "elementwise_add"))["Out"]
    sep = call_kernel("tanh", {"X": x})["Out"]
    assert np.abs(tanh[:1] - sep[:1]).max() < 1e-6 and np.abs(tanh[1:] - sep[1:]).max() > 1e-6
    assert np.abs(tanh - sep).max() < 5e-6
    sigm = fused(np.ones_like(x), x, ("elementwise_mul", "sigmoid"))["IntermediateOut"]
    sep = call_kernel("sigmoid", {"X": x})["Out"]
    assert np.abs(sigm[:4] - sep[:4]).max() < 1e-6 and sigm[5] < sep[5]


def test_intermediate_out_is_computed_only_when_bound():
    x, y = _XA, _YA
    run, _ = bind(OP, {"functor_list": ["relu", "elementwise_add"]}, need={"Out"})
    out, inter = run(x, y)
    assert inter is None
    np.testing.assert_array_equal(out, np.maximum(x + y, 0))
    np.testing.assert_array_equal(x, _XA)  # the inputs are not written to


def test_float16_and_0d_inputs():
    x, y = _XA.astype(np.float16), _YA.astype(np.float16)
    for functors in FUSED_FUNCTOR_LISTS:
        got = fused(x, y, functors)
        assert got["Out"].dtype == np.float16 and got["IntermediateOut"].dtype == np.float16
        want = fused(x.astype(np.float32), y.astype(np.float32), functors)["Out"]
        np.testing.assert_allclose(got["Out"].astype(np.float32), want, rtol=2e-3, atol=1e-3)
    got = fused(np.array(2.0, np.float32), np.array(-3.0, np.float32), ("gelu", "elementwise_add"))
    assert isinstance(got["Out"], np.ndarray) and got["Out"].shape == ()
    np.testing.assert_allclose(got["Out"], -0.158808, rtol=1e-5)


def test_kernel_refuses_other_functor_lists():
    with pytest.raises(ValueError, match="elementwise_sub"):
        fused(_XA, _YA, ("relu", "elementwise_sub"))


# -- the shape rule -----------------------------------------------------------------------------------
def build_op(xs, ys, functors, axis=-1, dtype="float32", ydtype=None, bind_inter=True):
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x, y = pg.data("x", list(xs), dtype), pg.data("y", list(ys), ydtype or dtype)
        block = main.global_block()
        outs = {"Out": [block.create_var("out")]}
        if bind_inter:
            outs["IntermediateOut"] = [block.create_var("inter")]
        block.append_op(OP, {"X": [x], "Y": [y]}, outs, {"functor_list": list(functors), "axis": axis})
    return main


def test_shape_rule_gives_out_and_intermediate_shapes():
    block = build_op([-1, 3, 4], [3], ("relu", "elementwise_add"), axis=1).global_block()
    assert list(block.var("out").shape) == [-1, 3, 4] and list(block.var("inter").shape) == [-1, 3, 4]
    block = build_op([-1, 3, 4], [4], ("elementwise_mul", "sigmoid")).global_block()
    assert list(block.var("out").shape) == [-1, 3, 4] and list(block.var("inter").shape) == [4]
    block = build_op([3], [2, 3, 4], ("elementwise_add", "relu"), axis=1).global_block()
    assert list(block.var("out").shape) == [2, 3, 4] and list(block.var("inter").shape) == [2, 3, 4]
    block = build_op([2, 3], [2, 3], ("scale", "elementwise_add"), dtype="float64",
                     bind_inter=False).global_block()
    assert list(block.var("out").shape) == [2, 3] and block.var("out").dtype == pb.VarType.FP64
    assert not block.has_var("inter")


def test_shape_rule_refuses_what_paddles_kernel_cannot_do():
    with pytest.raises(AttrError, match=r"\[relu, elementwise_add\].*\[elementwise_mul, sigmoid\]"):
        build_op([2, 3], [2, 3], ("elementwise_mul", "relu"))
    with pytest.raises(AttrError, match="not a supported combination"):
        build_op([2, 3], [2, 3], ("relu", "elementwise_sub"))
    with pytest.raises(AttrError):
        build_op([2, 3], [2, 3], ("relu",))
    # numpy-style broadcasting PaddlePaddle's fused kernel gets wrong (checked: garbage)
    for xs, ys in [([2, 3, 4], [1, 3, 4]), ([2, 3, 4], [2, 1, 4]), ([3], [1, 3]), ([2, 1], [1, 3])]:
        with pytest.raises(ShapeError, match="contiguous|run of the other"):
            build_op(xs, ys, ("relu", "elementwise_add"))
    with pytest.raises(ShapeError, match="axis"):
        build_op([2, 3, 4], [3], ("relu", "elementwise_add"), axis=-2)
    with pytest.raises(DTypeError):
        build_op([2, 3], [2, 3], ("relu", "elementwise_add"), dtype="int64")
    with pytest.raises(DTypeError):
        build_op([2, 3], [2, 3], ("relu", "elementwise_add"), ydtype="float64")


def test_broadcast_rule_matches_paddles_kernel():
    # (X, Y, axis) -> whether PaddlePaddle 3.3.1's fused kernel gave elementwise_add's numbers
    for xs, ys, axis, ok in [((2, 3, 4), (3,), 1, True), ((2, 3, 4), (4,), -1, True),
                             ((2, 3, 4), (3, 1), 1, True), ((2, 3, 4), (2, 3), 0, True),
                             ((2, 3, 4), (3, 4), -1, True), ((3,), (2, 3, 4), 1, True),
                             ((3, 4), (2, 3, 4), -1, True), ((2, 3, 4), (2, 3, 1), -1, True),
                             ((1, 3), (3,), -1, True), ((2, 3, 4), (3, 1), -1, True),
                             ((2, 3, 4), (1,), -1, True), ((2, 3, 4), (), -1, True),
                             ((2, 3, 4), (1, 3, 4), -1, False), ((2, 3, 4), (2, 1, 4), -1, False)]:
        assert broadcast_supported(xs, ys, axis) == ok, (xs, ys, axis)


# -- files ----------------------------------------------------------------------------------------------
def test_a_program_with_the_fused_op_round_trips_and_verifies():
    main = build_op([-1, 3, 2], [3], ("elementwise_mul", "sigmoid"), axis=1)
    data = main.serialize_to_string()
    again = pg.Program.parse_from_string(data)
    again.verify()
    assert again.serialize_to_string() == data
    op = next(op for op in again.global_block().ops if op.type == OP)
    assert op.attr("functor_list") == ["elementwise_mul", "sigmoid"] and op.attr("axis") == 1
    assert op.attr("scale") == 0.0 and op.attr("save_intermediate_out") is False
    x, y, _ = INPUTS["B"]
    got = Executor().run(again, feed={"x": x, "y": y}, fetch_list=["out", "inter"], scope=Scope())
    want_out, want_inter = PADDLE["B"][("elementwise_mul", "sigmoid")]
    np.testing.assert_allclose(got[0], np.reshape(want_out, (2, 3, 2)), rtol=1e-6)
    np.testing.assert_allclose(got[1], want_inter, rtol=1e-6)


# -- the pass -----------------------------------------------------------------------------------------------


def build(fn, feed_names, seed=0, magnitude=1.0):
    """An inference program built with Keel's layers (`fn` returns the fetch targets), with
    random parameters (standard normal times `magnitude`)."""
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = seed
    with pg.program_guard(main, startup), pg.unique_name.guard():
        fetches = fn(main.global_block())
    infer = pg.io.inference_program(main, feed_names, [v.name for v in fetches])
    rng = np.random.default_rng(seed)
    params = {name: (rng.standard_normal(shape) * magnitude).astype(np.float32)
              for name, _, shape in pg.io.persistable_specs(infer)}
    return infer, params


def op_types(program) -> Counter:
    return Counter(op.type for op in program.global_block().ops)


def fused_lists(program):
    return [tuple(op.attr("functor_list")) for op in program.global_block().ops if op.type == OP]


def assert_close(got, want, rtol=1e-6):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        assert np.abs(g - w).max() <= rtol * max(np.abs(w).max(), 1e-12)


def test_add_then_relu_fuses_into_one_op():
    def model(block):
        x, y = pg.data("x", [-1, 4]), pg.data("y", [-1, 4])
        return [pg.relu(x + y)]

    infer, params = build(model, ["x", "y"])
    rng = np.random.default_rng(1)
    feed = {"x": rng.standard_normal((3, 4)).astype(np.float32),
            "y": rng.standard_normal((3, 4)).astype(np.float32)}
    want = run(infer, params, feed)
    new, new_params, changes = PASSES["fuse_elementwise_activation"](infer, params)
    assert changes == {"relu_fused": 1, "vars_dropped": 1}
    assert dict(op_types(new)) == {"feed": 2, OP: 1, "fetch": 1}
    assert fused_lists(new) == [("relu", "elementwise_add")]
    new.verify()
    assert_close(run(new, new_params, feed), want)
    np.testing.assert_array_equal(run(new, new_params, feed)[0], want[0])


def residual_cnn(block):
    x = pg.data("x", [-1, 3, 8, 8])
    h = pg.relu(pg.nn.conv2d(x, 4, 3, padding=1))                         # bias add (axis 1) + relu
    r = pg.nn.conv2d(h, 4, 3, padding=1, bias_attr=False)
    o = pg.relu(r + h)                                                     # residual add + relu
    s = pg.scale(o + h, 0.5)                                               # add + scale(bias 0)
    t = pg.tanh(o + r)                                                     # tanh: left alone
    return [s, t]


def test_residual_cnn_fuses_bias_relu_residual_relu_and_scale():
    infer, params = build(residual_cnn, ["x"])
    feed = {"x": np.random.default_rng(2).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    want = run(infer, params, feed)
    new, new_params, report = optimize_inference(infer, params, evaluate=call_kernel)
    assert report.changes("fuse_elementwise_activation") == {"relu_fused": 2, "scale_fused": 1,
                                                             "vars_dropped": 3}
    types = op_types(new)
    assert types[OP] == 3 and types["relu"] == 0 and types["scale"] == 0
    assert types["elementwise_add"] == 1 and types["tanh"] == 1
    assert sorted(fused_lists(new)) == [("relu", "elementwise_add")] * 2 + [("scale", "elementwise_add")]
    ops = [op for op in new.global_block().ops if op.type == OP]
    assert [op.attr("axis") for op in ops] == [1, -1, -1]     # the conv bias keeps its axis
    assert ops[2].attr("scale") == np.float32(0.5)
    new.verify()
    assert_close(run(new, new_params, feed), want)


def test_what_is_not_fused():
    def model(block):
        x, y = pg.data("x", [-1, 4]), pg.data("y", [-1, 4])
        z = pg.data("z", [3, 1])
        w = pg.data("w", [-1, 1, 4])
        a = x + y
        shared = x * y + x
        return [a, pg.relu(a),                          # the sum is fetched
                pg.relu(shared), pg.sigmoid(shared),    # the sum has two readers
                pg.relu(w + z),                         # numpy broadcasting: [-1, 1, 4] + [3, 1]
                pg.scale(x + y, 2.0, 1.0),              # scale with a bias
                pg.gelu(x + y, approximate=True),       # gelu / tanh: the fused functors differ
                pg.relu(x - y), pg.relu(x * y)]         # no fused form

    infer, params = build(model, ["x", "y", "z", "w"])
    new, _, changes = PASSES["fuse_elementwise_activation"](infer, params)
    assert changes == {} and op_types(new) == op_types(infer)


def test_fc_takes_its_bias_and_relu_first():
    def model(block):
        x = pg.data("x", [-1, 5])
        h = pg.relu(pg.nn.linear(x, 6))     # matmul_v2 + bias + relu: fuse_fc's
        return [pg.relu(h + x[:, :1])]      # [-1, 6] + [-1, 1]: ours

    infer, params = build(model, ["x"])
    feed = {"x": np.random.default_rng(3).standard_normal((4, 5)).astype(np.float32)}
    want = run(infer, params, feed)
    new, new_params, report = optimize_inference(infer, params, evaluate=call_kernel)
    fc = next(op for op in new.global_block().ops if op.type == "fc")
    assert fc.attr("activation_type") == "relu"
    assert report.changes("fuse_fc")["relu_fused"] == 1
    assert report.changes("fuse_elementwise_activation")["relu_fused"] == 1
    assert dict(op_types(new)) == {"feed": 1, "fc": 1, "slice": 1, OP: 1, "fetch": 1}
    assert_close(run(new, new_params, feed), want)


def test_the_pass_can_be_disabled_by_name():
    infer, params = build(residual_cnn, ["x"])
    feed = {"x": np.random.default_rng(4).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    want = run(infer, params, feed)
    new, new_params, report = optimize_inference(infer, params, evaluate=call_kernel,
                                                 disabled=["fuse_elementwise_activation"])
    assert report["fuse_elementwise_activation"].status == "disabled"
    assert op_types(new)[OP] == 0 and op_types(new)["relu"] == 2
    assert_close(run(new, new_params, feed), want)
    _, _, report = optimize_inference(infer, params, fuse=False)
    assert report["fuse_elementwise_activation"].status.startswith("skipped")
    assert list(PASSES).index("fuse_elementwise_activation") == list(PASSES).index("fuse_fc") + 1


def test_fused_program_round_trips_and_runs_in_float16():
    infer, params = build(residual_cnn, ["x"], magnitude=0.3)  # activations of order 1
    feed = {"x": np.random.default_rng(5).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    want = run(infer, params, feed)
    new, new_params, _ = optimize_inference(infer, params, evaluate=call_kernel)
    again = pg.Program.parse_from_string(new.serialize_to_string())
    again.verify()
    assert fused_lists(again) == fused_lists(new)
    assert_close(run(again, new_params, feed), want)
    half, half_params, _ = optimize_inference(infer, params, evaluate=call_kernel, fp16=True)
    assert op_types(half)[OP] == 3
    assert_close(run(half, half_params, feed), want, rtol=1e-2)


# -- PaddlePaddle runs the op (optional) -----------------------------------------------------------------
def _paddle():
    os.environ.setdefault("FLAGS_enable_pir_api", "0")
    return pytest.importorskip("paddle")


@pytest.mark.paddle
def test_paddle_runs_keels_fused_program(tmp_path):
    paddle = _paddle()
    infer, params = build(residual_cnn, ["x"], magnitude=0.3)
    feed = {"x": np.random.default_rng(6).standard_normal((2, 3, 8, 8)).astype(np.float32)}
    new, new_params, _ = optimize_inference(infer, params, evaluate=call_kernel)
    want = run(new, new_params, feed)
    prefix = tmp_path / "fused"
    (tmp_path / "fused.pdmodel").write_bytes(new.serialize_to_string())
    pg.io.save_params(new, new_params, tmp_path / "fused.pdiparams")
    paddle.enable_static()
    exe = paddle.static.Executor(paddle.CPUPlace())
    with paddle.static.scope_guard(paddle.static.Scope()):
        program, feeds, fetches = paddle.static.load_inference_model(str(prefix), exe)
        assert sum(op.type == OP for op in program.global_block().ops) == 3
        got = exe.run(program, feed={feeds[0]: feed["x"]}, fetch_list=fetches)
    assert_close(got, want, rtol=1e-5)  # conv2d's sums are ordered differently


@pytest.mark.paddle
@pytest.mark.parametrize("functors", FUSED_FUNCTOR_LISTS, ids=",".join)
def test_paddle_written_fused_op_loads_and_gives_paddles_numbers(tmp_path, functors):
    paddle = _paddle()
    paddle.enable_static()
    x, y, axis = INPUTS["B"]
    main, startup = paddle.static.Program(), paddle.static.Program()
    with paddle.static.program_guard(main, startup):
        xv = paddle.static.data("x", [-1, 3, 2], "float32")
        yv = paddle.static.data("y", [3], "float32")
        block = main.global_block()
        out, inter = block.create_var(name="out", dtype="float32"), block.create_var(name="inter", dtype="float32")
        block.append_op(type=OP, inputs={"X": xv, "Y": yv}, outputs={"Out": out, "IntermediateOut": inter},
                        attrs={"functor_list": list(functors), "axis": axis, "scale": SCALE})
        res = paddle.scale(out, 1.0)
    exe = paddle.static.Executor(paddle.CPUPlace())
    prefix = str(tmp_path / "paddle_fused")
    paddle.static.save_inference_model(prefix, [xv, yv], [res], exe, program=main)
    want, = exe.run(main, feed={"x": x, "y": y}, fetch_list=[res])
    scope = Scope()
    program, feeds, fetches = pg.io.load_inference_model(prefix, Executor(), scope=scope)
    program.verify()
    got, = Executor().run(program, feed={"x": x, "y": y}, fetch_list=fetches, scope=scope)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
