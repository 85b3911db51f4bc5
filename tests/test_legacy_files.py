"""Files written by PaddlePaddle 2.x (program/legacy.py): a real 2.3.2 export, 3.3.1 fixtures
edited the way a 2.x exporter writes ops, the fusion values Keel writes out as ops (against
numpy references), the ones it refuses, and op versions."""
import gzip
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from keel.executor import Executor, Scope
from keel.program import Program, legacy
from keel.program.errors import UnsupportedProgramError
from keel.program.io import load_params
from keel.proto import pb
from tests.inference_run import run

FIXTURES = Path(__file__).parent / "fixtures" / "paddle"
ROOT = Path(__file__).resolve().parents[1]
A = pb.AttrType


def _attr(op, name, t, value):
    a = op.attrs.add(name=name, type=t)
    field = {A.BOOLEAN: "b", A.FLOAT: "f", A.STRING: "s", A.INT: "i"}.get(t)
    if field:
        setattr(a, field, value)
    else:
        getattr(a, {A.INTS: "ints", A.FLOATS: "floats"}[t]).extend(value)


def _set_attr(op, name, t, value):
    for i, a in enumerate(op.attrs):
        if a.name == name:
            del op.attrs[i]
            break
    _attr(op, name, t, value)


# What a 2.x exporter wrote on every conv2d (seen in PaddleOCR's 2.3-2.4 exports), neutral.
CONV_2X = [("Scale_in", A.FLOAT, 1.0), ("Scale_in_eltwise", A.FLOAT, 1.0), ("Scale_out", A.FLOAT, 1.0),
           ("Scale_weights", A.FLOATS, [1.0]), ("exhaustive_search", A.BOOLEAN, False),
           ("force_fp32_output", A.BOOLEAN, False), ("fuse_activation", A.STRING, ""),
           ("fuse_alpha", A.FLOAT, 0.0), ("fuse_beta", A.FLOAT, 0.0), ("fuse_brelu", A.BOOLEAN, False),
           ("fuse_brelu_threshold", A.FLOAT, 6.0), ("fuse_relu", A.BOOLEAN, False),
           ("fuse_relu_before_depthwise_conv", A.BOOLEAN, False),
           ("fuse_residual_connection", A.BOOLEAN, False), ("is_test", A.BOOLEAN, True),
           ("mkldnn_data_type", A.STRING, "float32"), ("use_addto", A.BOOLEAN, False),
           ("use_cudnn", A.BOOLEAN, False), ("use_mkldnn", A.BOOLEAN, False),
           ("use_quantizer", A.BOOLEAN, False), ("workspace_size_MB", A.INT, 512)]
MATMUL_2X = [(f"fused_{k}_{io}", A.INTS, []) for k in ("reshape", "transpose") for io in ("X", "Y", "Out")]
ELEMENTWISE_2X = [("Scale_out", A.FLOAT, 1.0), ("Scale_x", A.FLOAT, 1.0), ("Scale_y", A.FLOAT, 1.0),
                  ("mkldnn_data_type", A.STRING, "float32"), ("use_mkldnn", A.BOOLEAN, False),
                  ("use_quantizer", A.BOOLEAN, False), ("x_data_format", A.STRING, ""),
                  ("y_data_format", A.STRING, "")]


def _as_2x(desc: pb.ProgramDesc) -> pb.ProgramDesc:
    """A 3.3.1 export with the slots and extra attributes a 2.3 exporter wrote, neutral."""
    desc.version.version = 2003002
    for op in desc.blocks[0].ops:
        if op.type in ("conv2d", "depthwise_conv2d"):
            op.inputs.add(parameter="Bias")
            op.inputs.add(parameter="ResidualData")
            for name, t, v in CONV_2X:
                _attr(op, name, t, v)
        elif op.type in ("matmul_v2", "matmul"):
            for name, t, v in MATMUL_2X:
                _attr(op, name, t, v)
        elif op.type.startswith("elementwise_"):
            for name, t, v in ELEMENTWISE_2X:
                _attr(op, name, t, v)
        elif op.type == "batch_norm":
            _attr(op, "fuse_with_relu", A.BOOLEAN, False)
    return desc


def _fixture_desc(name):
    desc = pb.ProgramDesc()
    desc.ParseFromString((FIXTURES / f"{name}.pdmodel").read_bytes())
    return desc


# -- a real file exported by PaddlePaddle 2.3.2 ------------------------------------------------
def _ppocr_cls(tmp_path):
    model = tmp_path / "ppocr_cls_v2_0.pdmodel"
    model.write_bytes(gzip.decompress((FIXTURES / "ppocr_cls_v2_0.pdmodel.gz").read_bytes()))
    return model


def test_real_2x_ocr_classifier_runs_as_paddle_3_3_1_does(tmp_path):
    model = _ppocr_cls(tmp_path)
    program = Program.parse_from_string(model.read_bytes(), source=str(model))
    assert program.header.version.version == 2003002
    types = {op.type for op in program.global_block().ops}
    assert {"conv2d", "depthwise_conv2d", "matmul_v2", "hard_swish", "batch_norm"} <= types
    conv = next(op for op in program.global_block().ops if op.type == "conv2d")
    assert conv.input("Bias") == [] and conv.attr("fuse_brelu") is False  # kept, neutral
    params = load_params(program, FIXTURES / "ppocr_cls_v2_0.pdiparams")
    io = np.load(FIXTURES / "ppocr_cls_v2_0.io.npz")
    (out,) = run(program, params, {"x": io["in:x"]})
    np.testing.assert_allclose(out, io["out:0"], atol=2e-5, rtol=0)  # PaddlePaddle 3.3.1's numbers
    assert np.argmax(out[1]) == 1  # the second image is decided, not a coin flip


def test_inspect_check_says_keel_runs_the_2x_file(tmp_path):
    model = _ppocr_cls(tmp_path)
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "inspect_model.py"), "--check", str(model)],
                         capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "written by PaddlePaddle 2.3.2" in res.stdout
    assert "conv2d.Bias x42" in res.stdout and "matmul_v2.fused_reshape_X x1" in res.stdout
    assert res.stdout.strip().endswith("OK, Keel runs it")


def test_inspect_check_names_what_keel_refuses(tmp_path):
    desc = _as_2x(_fixture_desc("lenet"))
    conv = next(op for op in desc.blocks[0].ops if op.type == "conv2d")
    _set_attr(conv, "fuse_activation", A.STRING, "mish")
    path = tmp_path / "mish.pdmodel"
    path.write_bytes(desc.SerializeToString())
    res = subprocess.run([sys.executable, str(ROOT / "tools" / "inspect_model.py"), "--check", str(path)],
                         capture_output=True, text=True)
    assert res.returncode == 1
    assert "(conv2d)" in res.stdout and "'mish'" in res.stdout and "cannot run: 1 problem(s)" in res.stdout


# -- 3.3.1 fixtures in 2.x dress: neutral values change nothing ---------------------------------
@pytest.mark.parametrize("name", ["lenet", "resblock_cnn", "mobilenet_v2", "transformer_encoder"])
def test_neutral_2x_fields_load_and_give_the_same_outputs(name):
    program = Program.parse_from_string(_as_2x(_fixture_desc(name)).SerializeToString())
    assert program.upgrade_notes == []
    params = load_params(program, FIXTURES / f"{name}.pdiparams")
    io = np.load(FIXTURES / f"{name}.io.npz")
    feed = {k[3:]: v for k, v in io.items() if k.startswith("in:")}
    outs = run(program, params, feed)
    for i, out in enumerate(outs):
        np.testing.assert_allclose(out, io[f"out:{i}"], rtol=1e-5, atol=1e-5)


# -- conv2d's fusion values, written out as ops, against numpy ----------------------------------
def _conv_ref(x, w, stride=1, pad=1):
    """Direct convolution, NCHW, groups 1 (no im2col, no BLAS formulation)."""
    n, c, h, wd = x.shape
    o, _, kh, kw = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for i in range(kh):
        for j in range(kw):
            patch = xp[:, :, i:i + stride * oh:stride, j:j + stride * ow:stride]
            out += np.einsum("nchw,oc->nohw", patch, w[:, :, i, j].astype(np.float64))
    return out


def _conv_program(*, bias=False, residual=False, attrs=()):
    """feed x -> conv2d (2.x fields, some set) -> fetch, as a 2.x file."""
    main = Program()
    blk = main.global_block()
    x = blk.create_var("x", [-1, 3, 6, 6], "float32", need_check_feed=True)
    w = blk.create_parameter("w", [4, 3, 3, 3])
    out = blk.create_var("out", [-1, 4, 6, 6])
    blk.append_op("conv2d", {"Input": [x], "Filter": [w]}, {"Output": [out]},
                  {"paddings": [1, 1]})
    blk.create_parameter("b", [4])
    blk.create_var("r", [-1, 4, 6, 6], need_check_feed=True)
    desc = main.to_desc()
    desc.version.version = 2004002
    op = desc.blocks[0].ops[0]
    op.inputs.add(parameter="Bias", arguments=["b"] if bias else [])
    op.inputs.add(parameter="ResidualData", arguments=["r"] if residual else [])
    given = dict((n, (t, v)) for n, t, v in attrs)
    for name, t, v in CONV_2X:
        t, v = given.pop(name, (t, v))
        _attr(op, name, t, v)
    assert not given
    return Program.parse_from_string(desc.SerializeToString())


def _run_conv(program, x, w, b, r):
    scope = Scope()
    for name, value in (("w", w), ("b", b)):
        scope.set(name, value)
    feed = {"x": x}
    if any(op.type == "elementwise_add" and "r" in op.input("Y") for op in program.global_block().ops):
        feed["r"] = r
    (out,) = Executor().run(program, feed=feed, fetch_list=["out"], scope=scope)
    return out


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


ACTIVATIONS = [  # (fuse_activation, fuse_alpha, fuse_beta, reference)
    ("relu", 0.0, 0.0, lambda v: np.maximum(v, 0)),
    ("relu", 0.1, 0.0, lambda v: np.where(v > 0, v, 0.1 * v)),  # oneDNN eltwise_relu's alpha
    ("leaky_relu", 0.2, 0.0, lambda v: np.where(v > 0, v, 0.2 * v)),
    ("relu6", 1.5, 0.0, lambda v: np.clip(v, 0, 1.5)),  # bounded_relu(alpha), 2.0-2.4
    ("relu6", 0.0, 2.5, lambda v: np.clip(v, 0, 2.5)),  # clip(0, beta), 2.5+
    ("swish", 0.7, 0.0, lambda v: v * _sigmoid(0.7 * v)),
    ("sigmoid", 0.0, 0.0, _sigmoid),
    ("tanh", 0.0, 0.0, np.tanh),
    ("hard_sigmoid", 0.2, 0.4, lambda v: np.clip(0.2 * v + 0.4, 0, 1)),
    ("clip", -0.5, 0.75, lambda v: np.clip(v, -0.5, 0.75)),
]


@pytest.mark.parametrize("act,alpha,beta,ref", ACTIVATIONS, ids=[f"{a[0]}-{a[1]}-{a[2]}" for a in ACTIVATIONS])
def test_conv2d_bias_residual_and_fused_activation(act, alpha, beta, ref):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
    w = (0.3 * rng.standard_normal((4, 3, 3, 3))).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    r = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    program = _conv_program(bias=True, residual=True, attrs=[
        ("fuse_residual_connection", A.BOOLEAN, True), ("fuse_activation", A.STRING, act),
        ("fuse_alpha", A.FLOAT, alpha), ("fuse_beta", A.FLOAT, beta)])
    assert len(program.upgrade_notes) == 1
    # conv2d itself is back to 3.3.1's meaning: its legacy fields are neutral
    conv = program.global_block().ops[0]
    assert conv.input("Bias") == [] and conv.attr("fuse_activation") == ""
    out = _run_conv(program, x, w, b, r)
    want = ref(_conv_ref(x, w) + b[None, :, None, None] + r)
    np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("flags,ref", [
    ([("fuse_relu", A.BOOLEAN, True)], lambda v: np.maximum(v, 0)),
    ([("fuse_brelu", A.BOOLEAN, True), ("fuse_brelu_threshold", A.FLOAT, 0.5)], lambda v: np.clip(v, 0, 0.5)),
], ids=["fuse_relu", "fuse_brelu"])
def test_conv2d_1x_relu_flags(flags, ref):
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    w = (0.3 * rng.standard_normal((4, 3, 3, 3))).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    out = _run_conv(_conv_program(bias=True, attrs=flags), x, w, b, None)
    np.testing.assert_allclose(out, ref(_conv_ref(x, w) + b[None, :, None, None]), rtol=1e-5, atol=1e-5)


def test_relu_before_depthwise_conv_and_ungated_residual():
    """fuse_relu_before_depthwise_conv: ReLU on Input first. A ResidualData input without
    fuse_residual_connection is not read (as PaddlePaddle's oneDNN kernel)."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    w = (0.3 * rng.standard_normal((4, 3, 3, 3))).astype(np.float32)
    program = _conv_program(residual=True, attrs=[("fuse_relu_before_depthwise_conv", A.BOOLEAN, True)])
    out = _run_conv(program, x, w, None, None)
    np.testing.assert_allclose(out, _conv_ref(np.maximum(x, 0), w), rtol=1e-5, atol=1e-5)


def test_batch_norm_fuse_with_relu():
    rng = np.random.default_rng(6)
    main = Program()
    blk = main.global_block()
    x = blk.create_var("x", [-1, 3, 2, 2], need_check_feed=True)
    names = {n: blk.create_parameter(n, [3]) for n in ("scale", "bias", "mean", "var")}
    y = blk.create_var("y", [-1, 3, 2, 2])
    blk.append_op("batch_norm", {"X": [x], "Scale": [names["scale"]], "Bias": [names["bias"]],
                                 "Mean": [names["mean"]], "Variance": [names["var"]]},
                  {"Y": [y], "MeanOut": [names["mean"]], "VarianceOut": [names["var"]],
                   "SavedMean": [blk.create_var("sm", [3])], "SavedVariance": [blk.create_var("sv", [3])]},
                  {"is_test": True, "epsilon": 1e-5})
    desc = main.to_desc()
    _attr(desc.blocks[0].ops[0], "fuse_with_relu", A.BOOLEAN, True)
    program = Program.parse_from_string(desc.SerializeToString())
    vals = {"scale": rng.uniform(0.5, 2, 3), "bias": rng.standard_normal(3), "mean": rng.standard_normal(3),
            "var": rng.uniform(0.5, 2, 3)}
    vals = {k: v.astype(np.float32) for k, v in vals.items()}
    xv = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    scope = Scope()
    for k, v in vals.items():
        scope.set(k, v)
    (out,) = Executor().run(program, feed={"x": xv}, fetch_list=["y"], scope=scope)
    c = lambda v: v[None, :, None, None]  # noqa: E731
    want = c(vals["scale"]) * (xv - c(vals["mean"])) / np.sqrt(c(vals["var"]) + 1e-5) + c(vals["bias"])
    np.testing.assert_allclose(out, np.maximum(want, 0), rtol=1e-5, atol=1e-5)


def test_matmul_v2_fused_reshape_transpose():
    """X reshaped then transposed, Y likewise, the product transposed then reshaped: the
    reshape2/transpose2 pairs PaddlePaddle's oneDNN passes folded into matmul."""
    rng = np.random.default_rng(7)
    main = Program()
    blk = main.global_block()
    x = blk.create_var("x", [2, 3, 8], need_check_feed=True)
    y = blk.create_var("y", [2, 3, 8], need_check_feed=True)
    out = blk.create_var("out", [2, 6, 4, 4])
    # the op as a fused file has it: X and Y are [2, 3, 8] before the fused reshape/transpose
    blk.append_op("matmul_v2", {"X": [x], "Y": [y]}, {"Out": [out]}, {"trans_y": True}, infer_shape=False)
    desc = main.to_desc()
    op = desc.blocks[0].ops[0]
    for name, value in (("fused_reshape_X", [0, 3, 2, 4]), ("fused_transpose_X", [0, 2, 1, 3]),
                        ("fused_reshape_Y", [0, 3, 2, 4]), ("fused_transpose_Y", [0, 2, 1, 3]),
                        ("fused_transpose_Out", [0, 2, 1, 3]), ("fused_reshape_Out", [0, 0, 6])):
        _attr(op, name, A.INTS, value)
    program = Program.parse_from_string(desc.SerializeToString())
    types = [o.type for o in program.global_block().ops]
    assert types == ["reshape2", "transpose2", "reshape2", "transpose2", "matmul_v2", "transpose2", "reshape2"]
    xv = rng.standard_normal((2, 3, 8)).astype(np.float32)
    yv = rng.standard_normal((2, 3, 8)).astype(np.float32)
    (got,) = Executor().run(program, feed={"x": xv, "y": yv}, fetch_list=["out"], scope=Scope())
    xs = xv.reshape(2, 3, 2, 4).transpose(0, 2, 1, 3)  # [2, 2, 3, 4]
    ys = yv.reshape(2, 3, 2, 4).transpose(0, 2, 1, 3)
    prod = np.einsum("bhik,bhjk->bhij", xs.astype(np.float64), ys)  # trans_y: [2, 2, 3, 3]
    want = prod.transpose(0, 2, 1, 3).reshape(2, 3, 6)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# -- what Keel refuses, by name ---------------------------------------------------------------
@pytest.mark.parametrize("attrs,expect", [
    ([("fuse_activation", A.STRING, "mish")], "'mish'"),
    ([("fuse_activation", A.STRING, "hard_swish")], "'hard_swish'"),
    ([("fuse_activation", A.STRING, "relu"), ("fuse_relu", A.BOOLEAN, True)], "more than one fused activation"),
    ([("fuse_residual_connection", A.BOOLEAN, True)], "ResidualData input, and it is empty"),
    ([("Scale_in", A.FLOAT, 0.5)], "Scale_in=0.5 asks for a oneDNN int8 quantization scale"),
    ([("fuse_activation", A.STRING, "relu6"), ("fuse_alpha", A.FLOAT, 2.0), ("fuse_beta", A.FLOAT, 3.0)],
     "names no one threshold"),
])
def test_refused_legacy_values_are_named(attrs, expect):
    with pytest.raises(UnsupportedProgramError) as e:
        _conv_program(attrs=attrs)
    assert "(conv2d)" in str(e.value) and expect in str(e.value)


def test_half_a_fused_reshape_pair_is_refused():
    main = Program()
    blk = main.global_block()
    x = blk.create_var("x", [2, 3], need_check_feed=True)
    out = blk.create_var("out", [2, 2])
    blk.append_op("matmul_v2", {"X": [x], "Y": [x]}, {"Out": [out]}, {"trans_y": True})
    desc = main.to_desc()
    _attr(desc.blocks[0].ops[0], "fused_reshape_X", A.INTS, [3, 2])
    with pytest.raises(UnsupportedProgramError, match=r"\(matmul_v2\): fused_reshape_X=\[3, 2\] without"):
        Program.parse_from_string(desc.SerializeToString())


def test_nonneutral_extra_on_an_op_without_a_lowering_is_refused():
    desc = _as_2x(_fixture_desc("lenet"))
    op = next(op for op in desc.blocks[0].ops if op.type.startswith("elementwise_"))
    _set_attr(op, "Scale_y", A.FLOAT, 0.25)
    with pytest.raises(UnsupportedProgramError, match=r"Scale_y=0\.25.*which Keel does not implement"):
        Program.parse_from_string(desc.SerializeToString())


def test_hints_take_any_value():
    desc = _as_2x(_fixture_desc("lenet"))
    for op in desc.blocks[0].ops:
        if op.type == "conv2d":
            _set_attr(op, "use_mkldnn", A.BOOLEAN, True)
            _set_attr(op, "mkldnn_data_type", A.STRING, "bfloat16")
            _set_attr(op, "workspace_size_MB", A.INT, 4096)
            _set_attr(op, "exhaustive_search", A.BOOLEAN, True)
    Program.parse_from_string(desc.SerializeToString())  # no error


# -- versions ----------------------------------------------------------------------------------
def test_a_later_major_release_is_refused():
    desc = _fixture_desc("lenet")
    desc.version.version = 99999999
    with pytest.raises(UnsupportedProgramError, match=r"PaddlePaddle 99\.999\.999 \(version 99999999\)"):
        Program.parse_from_string(desc.SerializeToString())


def test_a_later_minor_release_warns():
    desc = _fixture_desc("lenet")
    desc.version.version = 3004000
    with pytest.warns(legacy.NewerFileWarning, match=r"3\.4\.0"):
        Program.parse_from_string(desc.SerializeToString())


def test_an_op_version_above_keels_is_refused_only_for_ops_used():
    desc = _fixture_desc("lenet")
    for pair in desc.op_version_map.pair:
        if pair.op_name in ("conv2d", "roi_align"):  # roi_align: not in the program
            pair.op_version.version += 1
    with pytest.raises(UnsupportedProgramError) as e:
        Program.parse_from_string(desc.SerializeToString())
    assert "op 'conv2d' was written at op version 2; Keel knows it up to version 1" in str(e.value)
    assert "roi_align" not in str(e.value)


def _leaky_program(alpha, version):
    main = Program()
    blk = main.global_block()
    x = blk.create_var("x", [-1, 4], need_check_feed=True)
    out = blk.create_var("out", [-1, 4])
    blk.append_op("leaky_relu", {"X": [x]}, {"Out": [out]}, {"alpha": alpha})
    desc = main.to_desc()
    for pair in desc.op_version_map.pair:
        if pair.op_name == "leaky_relu":
            pair.op_version.version = version
    return Program.parse_from_string(desc.SerializeToString())


@pytest.mark.parametrize("version,alpha", [(0, 2.0), (0, -0.5), (1, 2.0), (0, 0.3)])
def test_leaky_relu_before_version_1_computes_max(version, alpha):
    xv = np.array([[-2.0, -0.5, 0.5, 3.0], [1.0, -1.0, 0.0, -4.0]], np.float32)
    program = _leaky_program(alpha, version)
    (out,) = Executor().run(program, feed={"x": xv}, fetch_list=["out"], scope=Scope())
    want = np.maximum(xv, alpha * xv) if version == 0 else np.where(xv > 0, xv, alpha * xv)
    np.testing.assert_allclose(out, want)
    assert bool(program.upgrade_notes) == (version == 0 and not 0 <= alpha <= 1)


def test_set_value_written_at_version_3_with_typed_lists_runs():
    """PaddlePaddle 2.x wrote set_value's value as fp32_values (and int32_values, ...);
    version 4 replaced them by `values`."""
    main = Program()
    blk = main.global_block()
    x = blk.create_var("x", [2, 3], "float32", need_check_feed=True)
    out = blk.create_var("out", [2, 3], "float32")
    blk.append_op("set_value", {"Input": [x]}, {"Out": [out]},
                  {"axes": [1], "starts": [0], "ends": [3], "steps": [2], "shape": [1], "dtype": 5})
    desc = main.to_desc()
    op = desc.blocks[0].ops[0]
    del op.attrs[[a.name for a in op.attrs].index("values")]
    _attr(op, "fp32_values", A.FLOATS, [7.5])
    _attr(op, "int32_values", A.INTS, [])
    for pair in desc.op_version_map.pair:
        if pair.op_name == "set_value":
            pair.op_version.version = 3
    program = Program.parse_from_string(desc.SerializeToString())
    assert not program.global_block().ops[0].has_attr("fp32_values")
    (got,) = Executor().run(program, feed={"x": np.zeros((2, 3), np.float32)}, fetch_list=["out"], scope=Scope())
    np.testing.assert_array_equal(got, [[7.5, 0, 7.5], [7.5, 0, 7.5]])


def test_assign_value_typed_lists_and_linspace_without_dtype():
    main = Program()
    blk = main.global_block()
    a = blk.create_var("a", [2, 2], "float32")
    blk.append_op("assign_value", {}, {"Out": [a]}, {"shape": [2, 2], "dtype": 5}, infer_shape=False)
    desc = main.to_desc()
    op = desc.blocks[0].ops[0]
    _set_attr(op, "values", A.FLOATS, [])
    del op.attrs[[x.name for x in op.attrs].index("values")]
    _attr(op, "fp32_values", A.FLOATS, [1.5, -2.0, 3.25, 0.0])
    _attr(op, "int32_values", A.INTS, [])
    desc.ClearField("op_version_map")  # assign_value's old form shows itself
    program = Program.parse_from_string(desc.SerializeToString())
    assert not program.global_block().ops[0].has_attr("fp32_values")
    (out,) = Executor().run(program, feed={}, fetch_list=["a"], scope=Scope())
    np.testing.assert_array_equal(out, np.array([[1.5, -2.0], [3.25, 0.0]], np.float32))
