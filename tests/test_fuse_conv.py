"""fused_conv2d (kernels/fused_conv.py) against the separate ops, and the pass that writes
it (program/passes/fuse_conv.py): programs optimized with it give the unfused program's
outputs bit for bit (relu: up to the sign of zero, which assert_array_equal ignores)."""
from collections import Counter

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.executor.inference import Config, create_predictor
from keel.executor.kernel_call import call_kernel
from inference_run import run
from keel.program.errors import OpError
from keel.program.layers.math import _act as unary
from keel.program.passes import PASSES, PassOptions, optimize_inference
from keel.program.passes.fuse_conv import fused_form
from keel.proto import pb
from test_passes import build

CONV_ATTRS = dict(strides=[1, 1], paddings=[1, 1], padding_algorithm="EXPLICIT", dilations=[1, 1], groups=1,
                  data_format="NCHW")
ONE_SIXTH = float(np.float32(1 / 6))

# (fuse_activation, fuse_alpha, fuse_beta, the separate op and its attributes)
ACTS = [
    ("", 0.0, 0.0, None, {}),
    ("relu", 0.0, 0.0, "relu", {}),
    ("relu6", 0.0, 6.0, "relu6", {"threshold": 6.0}),
    ("sigmoid", 0.0, 0.0, "sigmoid", {}),
    ("tanh", 0.0, 0.0, "tanh", {}),
    ("hard_sigmoid", 0.2, 0.5, "hard_sigmoid", {"slope": 0.2, "offset": 0.5}),
    ("hard_swish", ONE_SIXTH, 0.5, "hard_swish", {"threshold": 6.0, "scale": 6.0, "offset": 3.0}),
    ("swish", 1.5, 0.0, "swish", {"beta": 1.5}),
]


def _separate(x, w, bias, residual, act, act_attrs, conv_attrs, layout="NCHW"):
    out = call_kernel("conv2d", {"Input": x, "Filter": w}, {**conv_attrs, "data_format": layout})["Output"]
    if bias is not None:
        axis = 1 if layout == "NCHW" else 3
        out = call_kernel("elementwise_add", {"X": out, "Y": bias}, {"axis": axis})["Out"]
    if residual is not None:
        out = call_kernel("elementwise_add", {"X": residual, "Y": out}, {"axis": -1})["Out"]
    if act is not None:
        out = call_kernel(act, {"X": out}, act_attrs)["Out"]
    return out


def _fused(x, w, bias, residual, name, alpha, beta, conv_attrs, layout="NCHW"):
    inputs = {"Input": x, "Filter": w, "Bias": bias, "ResidualData": residual}
    attrs = {**conv_attrs, "data_format": layout, "fuse_activation": name, "fuse_alpha": alpha,
             "fuse_beta": beta, "fuse_residual_connection": residual is not None}
    return call_kernel("fused_conv2d", inputs, attrs)["Output"]


@pytest.mark.parametrize("name, alpha, beta, act, act_attrs", ACTS, ids=[a[0] or "none" for a in ACTS])
@pytest.mark.parametrize("shape, groups", [((2, 4, 7, 9), 1), ((1, 6, 96, 100), 6), ((1, 8, 5, 5), 2)],
                         ids=["dense", "depthwise-taps", "grouped"])
@pytest.mark.parametrize("with_bias, with_residual", [(True, False), (True, True), (False, True)])
def test_fused_conv2d_equals_the_separate_ops_bit_for_bit(name, alpha, beta, act, act_attrs, shape, groups,
                                                          with_bias, with_residual):
    rng = np.random.default_rng(0)
    c = shape[1]
    o = c if groups == c else 6
    x = rng.standard_normal(shape).astype(np.float32) * 3
    w = rng.standard_normal((o, c // groups, 3, 3)).astype(np.float32)
    bias = rng.standard_normal(o).astype(np.float32) if with_bias else None
    conv_attrs = {**CONV_ATTRS, "groups": groups}
    out_shape = (shape[0], o, shape[2], shape[3])
    residual = rng.standard_normal(out_shape).astype(np.float32) if with_residual else None
    want = _separate(x, w, bias, residual, act, act_attrs, conv_attrs)
    got = _fused(x, w, bias, residual, name, alpha, beta, conv_attrs)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_fused_conv2d_nhwc_and_other_dtypes(dtype):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 6, 4)).astype(dtype)
    w = rng.standard_normal((3, 4, 3, 3)).astype(dtype)
    bias = rng.standard_normal(3).astype(dtype)
    residual = rng.standard_normal((2, 5, 6, 3)).astype(dtype)
    got = _fused(x, w, bias, residual, "relu6", 0.0, 6.0, CONV_ATTRS, layout="NHWC")
    assert got.dtype == dtype and got.shape == (2, 5, 6, 3)
    # float64 reference: the formula itself
    conv = call_kernel("conv2d", {"Input": x.astype(np.float64), "Filter": w.astype(np.float64)},
                       {**CONV_ATTRS, "data_format": "NHWC"})["Output"]
    want = np.clip(conv + bias.astype(np.float64) + residual.astype(np.float64), 0, 6)
    tol = 1e-12 if dtype == np.float64 else 2e-2
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol * 6)


def test_hard_swish_with_other_parameters_follows_the_onednn_formula():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float64) * 4
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float64)
    got = _fused(x, w, None, None, "hard_swish", 0.25, 0.4, CONV_ATTRS)
    conv = call_kernel("conv2d", {"Input": x, "Filter": w}, CONV_ATTRS)["Output"]
    beta = float(np.float32(0.4))  # a FLOAT attribute: float32, widened for float64 data
    np.testing.assert_allclose(got, conv * np.clip(0.25 * conv + beta, 0, 1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("attrs, match", [
    ({"fuse_activation": "mish"}, "fuse_activation 'mish'"),
    ({"fuse_activation": "relu", "fuse_alpha": 0.1}, "leaky"),
    ({"fuse_activation": "relu6", "fuse_beta": 0.0}, "threshold"),
    ({"fuse_residual_connection": True}, "needs ResidualData"),
])
def test_fused_conv2d_refuses_what_it_does_not_implement(attrs, match):
    x = np.ones((1, 2, 4, 4), np.float32)
    w = np.ones((2, 2, 3, 3), np.float32)
    full = {**CONV_ATTRS, "fuse_activation": "", "fuse_alpha": 0.0, "fuse_beta": 0.0,
            "fuse_residual_connection": False, **attrs}
    with pytest.raises(ValueError, match=match):
        call_kernel("fused_conv2d", {"Input": x, "Filter": w}, full)


# -- the pass --------------------------------------------------------------------------------
def _types(program):
    return Counter(op.type for op in program.global_block().ops)


def _mobile_block(block):
    """conv-bn-relu, depthwise-bn-tanh, 1x1-bn + residual, conv-bias-sigmoid, conv-bn-hard_swish
    (hard_swish stays separate), a conv whose output is also fetched (its relu stays)."""
    x = pg.data("x", [-1, 4, 10, 12])
    h = pg.relu(pg.nn.batch_norm(pg.nn.conv2d(x, 8, 3, padding=1, bias_attr=False)))
    d = pg.nn.batch_norm(pg.nn.conv2d(h, 8, 3, padding=1, groups=8, bias_attr=False))
    d = pg.tanh(d)
    p = pg.nn.batch_norm(pg.nn.conv2d(d, 8, 1, bias_attr=False))
    r = p + h                                   # residual
    s = pg.sigmoid(pg.nn.conv2d(r, 4, 3, padding=1))
    s = pg.hard_swish(pg.nn.batch_norm(pg.nn.conv2d(s, 4, 3, padding=1, bias_attr=False)))
    shared = pg.nn.conv2d(s, 4, 1)              # conv + bias add, also fetched below
    return [pg.relu(shared), shared]


def test_pass_fuses_mobile_blocks_and_keeps_the_outputs_bit_for_bit():
    infer, params = build(_mobile_block, ["x"])
    x = np.random.default_rng(3).standard_normal((2, 4, 10, 12)).astype(np.float32)
    opt, opt_params, report = optimize_inference(infer, params, evaluate=call_kernel,
                                                 disabled=["fuse_conv_bias_activation", "fuse_elementwise_activation"])
    want = run(opt, opt_params, {"x": x})
    fused, fused_params, changes = PASSES["fuse_conv_bias_activation"](opt, opt_params)
    types = _types(fused)
    assert changes["conv_fused"] == 6, changes
    assert types["fused_conv2d"] == 6 and types["tanh"] == types["sigmoid"] == 0
    fused_ops = [op for op in fused.global_block().ops if op.type == "fused_conv2d"]
    assert [op.attr("fuse_activation") for op in fused_ops] == ["relu", "tanh", "", "sigmoid", "", ""]
    assert [op.attr("fuse_residual_connection") for op in fused_ops] == [False, False, True, False, False, False]
    assert fused_ops[1].attr("groups") == 8
    assert types["relu"] == 1 and types["hard_swish"] == 1  # the fetched conv's relu; no saved form
    got = run(fused, fused_params, {"x": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    # the whole pipeline runs it when asked (it is off by default)
    _, _, report = optimize_inference(infer, params, evaluate=call_kernel, fuse_conv=True)
    assert report.changes("fuse_conv_bias_activation")["conv_fused"] == 6
    _, _, report = optimize_inference(infer, params, evaluate=call_kernel)
    assert report["fuse_conv_bias_activation"].status.startswith("skipped (off by default")


def _parameterised_block(block):
    """Convolutions followed by each activation whose fused form needs fuse_alpha /
    fuse_beta, and a hard_swish with other than its default parameters."""
    x = pg.data("x", [-1, 2, 6, 6])

    def conv(h):
        return pg.nn.conv2d(h, 3, 3, padding=1, bias_attr=False)
    return [pg.relu6(conv(x)), pg.hard_sigmoid(conv(x), slope=0.2), pg.hard_swish(conv(x)),
            pg.swish(conv(x)),
            unary("hard_swish", conv(x), None, {"threshold": 4.0, "scale": 6.0, "offset": 3.0})]


def test_pass_fuses_activations_whose_parameters_a_file_would_drop_only_in_memory():
    infer, params = build(_parameterised_block, ["x"])
    new, _, changes = PASSES["fuse_conv_bias_activation"](infer, params)
    assert changes == {} and _types(new) == _types(infer)       # for files: left as they are
    fused, fused_params, changes = PASSES["fuse_conv_bias_activation"](infer, params, PassOptions(in_memory=True))
    assert changes["conv_fused"] == 4
    ops = [op for op in fused.global_block().ops if op.type == "fused_conv2d"]
    assert [(op.attr("fuse_activation"), op.attr("fuse_alpha"), op.attr("fuse_beta")) for op in ops] == [
        ("relu6", 0.0, 6.0), ("hard_sigmoid", pytest.approx(0.2), 0.5), ("hard_swish", ONE_SIXTH, 0.5),
        ("swish", 1.0, 0.0)]
    assert _types(fused)["hard_swish"] == 1 and _types(fused)["conv2d"] == 1  # threshold 4: oneDNN's form differs
    x = np.random.default_rng(5).standard_normal((2, 2, 6, 6)).astype(np.float32) * 4
    for got, want in zip(run(fused, fused_params, {"x": x}), run(infer, params, {"x": x})):
        np.testing.assert_array_equal(got, want)


def test_parameterised_fused_forms_need_float32_values_on_float64_data():
    def act(op_type, **attrs):
        op = type("Op", (), {})()
        op.type, op.attr = op_type, lambda name, default=None: attrs.get(name, default)
        return op
    for dtype, slope, fused in [(pb.VarType.FP32, 0.2, True), (pb.VarType.FP64, 0.2, False),
                                (pb.VarType.FP64, 0.25, True)]:
        form = fused_form(act("hard_sigmoid", slope=slope, offset=0.5), dtype)
        assert (form == ("hard_sigmoid", slope, 0.5)) if fused else form is None
    assert fused_form(act("relu6", threshold=0.0), pb.VarType.FP32) is None
    assert fused_form(act("hard_swish", threshold=6.0, scale=5.0, offset=3.0), pb.VarType.FP32) is None


def test_an_inference_file_refuses_a_fused_activation_it_would_drop_the_parameters_of(tmp_path):
    infer, params = build(_parameterised_block, ["x"])
    fused, fused_params, _ = optimize_inference(infer, params, evaluate=call_kernel, fuse_conv=True, in_memory=True)
    scope = Scope()
    for name, value in fused_params.items():
        scope.set(name, value)
    block = fused.global_block()
    fetches = [block.var(op.input("X")[0]) for op in block.ops if op.type == "fetch"]
    with pytest.raises(OpError, match=r"fused_conv2d: .*fuse_beta=6\.0, an extra attribute"):
        pg.io.save_inference_model(str(tmp_path / "m"), ["x"], fetches, Executor(), program=fused, scope=scope)
    assert not list(tmp_path.iterdir())


def test_fused_program_saves_loads_back_and_runs(tmp_path):
    infer, params = build(_mobile_block, ["x"])
    opt, opt_params, _ = optimize_inference(infer, params, evaluate=call_kernel, fuse_conv=True)
    x = np.random.default_rng(4).standard_normal((1, 4, 10, 12)).astype(np.float32)
    want = run(opt, opt_params, {"x": x})
    scope = Scope()
    for name, value in opt_params.items():
        scope.set(name, value)
    block = opt.global_block()
    fetches = [block.var(op.input("X")[0]) for op in block.ops if op.type == "fetch"]
    pg.io.save_inference_model(str(tmp_path / "m"), ["x"], fetches, Executor(), program=opt, scope=scope)
    exe, loaded_scope = Executor(), Scope()
    loaded, feeds, loaded_fetches = pg.io.load_inference_model(str(tmp_path / "m"), exe, scope=loaded_scope)
    assert _types(loaded)["fused_conv2d"] == 6
    got = exe.run(loaded, feed={"x": x}, fetch_list=loaded_fetches, scope=loaded_scope)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_the_predictor_fuses_at_load_and_gives_the_unfused_outputs(tmp_path):
    """The Predictor runs optimize_inference with fuse_conv=True (in memory; the default of
    optimize_inference, for files, stays off): the specialized fused kernels give the outputs
    of the program run with the passes off."""
    infer, params = build(_mobile_block, ["x"])
    pg.io.save_program(infer, tmp_path / "m.pdmodel")
    pg.io.save_params(infer, params, tmp_path / "m.pdiparams")
    x = np.random.default_rng(7).standard_normal((1, 4, 10, 12)).astype(np.float32)
    outs = {}
    for ir_optim in (False, True):
        config = Config(str(tmp_path / "m.pdmodel"), str(tmp_path / "m.pdiparams"))
        config.switch_ir_optim(ir_optim)
        predictor = create_predictor(config)
        outs[ir_optim] = predictor.run([x])
        if ir_optim:
            types = Counter(op.type for op in predictor._program.global_block().ops)
            assert types["fused_conv2d"] == 6 and types["conv2d"] == types["depthwise_conv2d"] == 0
            assert types["hard_swish"] == 0   # in memory: its epilogue too
    for got, want in zip(outs[True], outs[False]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
