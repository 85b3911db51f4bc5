"""Shape/dtype inference and build-time checks of the nn, loss, random and optimizer ops
(program/ops/{nn,loss,random,optimizer}.py). Expected shapes were cross-checked against
PaddlePaddle 3.3.1's own InferShape where noted ("Paddle:")."""
import pytest

import keel.program as pg
from keel.program import dtypes
from keel.program.errors import AttrError, DTypeError, ShapeError, SlotError
from keel.program.ops import registry
from keel.proto import pb

THIS_FILE = __file__
F32, F64, F16, I32, I64, U8 = "float32", "float64", "float16", "int32", "int64", "uint8"


def _line_of(marker: str) -> int:
    with open(THIS_FILE) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


def _vars(block, inputs):
    """inputs: slot -> (shape, dtype) or a list of them. Returns slot -> Variable(s)."""
    out = {}
    for slot, spec in inputs.items():
        specs = spec if isinstance(spec, list) else [spec]
        vs = [block.create_var(f"{slot}_{i}", shape, dtype) for i, (shape, dtype) in enumerate(specs)]
        out[slot] = vs if isinstance(spec, list) else vs[0]
    return out


def build(op_type, inputs, outputs, attrs=None, inplace=None):
    """Append `op_type` in a fresh program. `outputs`: output slot names; `inplace`: output
    slot -> input slot whose variable it reuses. Returns ({slot: (shape, dtype name)}, op),
    after checking that the program round-trips through its bytes."""
    p = pg.Program()
    b = p.global_block()
    ins = _vars(b, inputs)
    outs = {slot: b.create_var(f"out_{slot}") for slot in outputs}
    for slot, src in (inplace or {}).items():
        outs[slot] = ins[src]
    op = b.append_op(op_type, ins, outs, attrs or {})
    assert pg.Program.parse_from_string(p.serialize_to_string()) == p
    return {s: (list(v.shape), dtypes.name(v.dtype)) for s, v in outs.items()}, op


def shape_of(op_type, inputs, outputs, attrs=None, slot=None):
    res, _ = build(op_type, inputs, outputs, attrs)
    return res[slot or outputs[0]]


def check_error(excinfo, cls, op_type, marker, *needles):
    err = excinfo.value
    assert type(err) is cls, f"expected {cls.__name__}, got {type(err).__name__}: {err}"
    msg = str(err)
    assert msg.startswith(f"{op_type}: "), msg
    assert err.op_type == op_type
    for n in needles:
        assert n in msg, f"{n!r} not in {msg!r}"
    assert f"op created at {THIS_FILE}:{_line_of(marker)}" in msg, msg


def fresh():
    p = pg.Program()
    return p, p.global_block()


# -- conv2d ------------------------------------------------------------------------------------
def conv(x, w, dtype=F32, op="conv2d", **attrs):
    return shape_of(op, {"Input": (x, dtype), "Filter": (w, dtype)}, ["Output"], attrs)


def test_conv2d_explicit_symmetric_padding():
    assert conv([2, 3, 32, 32], [8, 3, 3, 3], paddings=[1, 1]) == ([2, 8, 32, 32], F32)
    assert conv([2, 3, 32, 32], [8, 3, 5, 5]) == ([2, 8, 28, 28], F32)


def test_conv2d_asymmetric_four_value_paddings_and_strides():
    # [top, bottom, left, right] = [1, 2, 0, 3]: H = (32+3-3)//2 + 1, W = (32+3-3)//1 + 1
    assert conv([2, 3, 32, 32], [8, 3, 3, 3], paddings=[1, 2, 0, 3], strides=[2, 1]) == \
        ([2, 8, 17, 33], F32)


def test_conv2d_dilations():
    # effective kernel 2*(3-1)+1 = 5
    assert conv([2, 3, 32, 32], [8, 3, 3, 3], dilations=[2, 2]) == ([2, 8, 28, 28], F32)
    assert conv([2, 3, 32, 32], [8, 3, 3, 3], dilations=[1, 3], paddings=[1, 3]) == ([2, 8, 32, 32], F32)


def test_conv2d_same_and_valid():
    # SAME: out = ceil(in / stride), dilations ignored (Paddle: [-1, 6, 5, 5])
    assert conv([-1, 4, 9, 9], [6, 4, 3, 3], strides=[2, 2], dilations=[2, 2],
                padding_algorithm="SAME") == ([-1, 6, 5, 5], F32)
    assert conv([1, 4, 10, 7], [6, 4, 5, 5], strides=[3, 1], padding_algorithm="SAME") == \
        ([1, 6, 4, 7], F32)
    # VALID ignores the paddings attr
    assert conv([1, 4, 9, 9], [6, 4, 3, 3], strides=[2, 2], paddings=[5, 5],
                padding_algorithm="VALID") == ([1, 6, 4, 4], F32)


def test_conv2d_unknown_dims_propagate():
    # Paddle: [2, 6, -1, 3]
    assert conv([2, 4, -1, 10], [6, 4, 3, 3], strides=[2, 3], paddings=[1, 0, 2, 1],
                dilations=[1, 2]) == ([2, 6, -1, 3], F32)
    assert conv([-1, 4, -1, -1], [6, 4, 3, 3], padding_algorithm="SAME") == ([-1, 6, -1, -1], F32)
    # unknown channels: no channel check possible, still infers
    assert conv([-1, -1, 8, 8], [6, 4, 3, 3]) == ([-1, 6, 6, 6], F32)


def test_conv2d_groups_and_depthwise():
    assert conv([2, 8, 16, 16], [16, 4, 3, 3], groups=2) == ([2, 16, 14, 14], F32)
    assert conv([-1, 8, 16, 16], [8, 1, 3, 3], op="depthwise_conv2d", groups=8, strides=[2, 2],
                paddings=[1, 1]) == ([-1, 8, 8, 8], F32)
    assert conv([-1, 8, 16, 16], [16, 1, 3, 3], op="depthwise_conv2d", groups=8) == \
        ([-1, 16, 14, 14], F32)


def test_conv2d_nhwc():
    assert conv([2, 32, 32, 3], [8, 3, 3, 3], data_format="NHWC", strides=[2, 2], paddings=[1, 1]) == \
        ([2, 16, 16, 8], F32)
    assert conv([-1, 9, 9, 4], [6, 4, 3, 3], data_format="NHWC", padding_algorithm="SAME",
                strides=[2, 2]) == ([-1, 5, 5, 6], F32)


def test_conv2d_float64_and_attr_defaults():
    res, op = build("conv2d", {"Input": ([1, 2, 5, 5], F64), "Filter": ([3, 2, 3, 3], F64)}, ["Output"])
    assert res["Output"] == ([1, 3, 3, 3], F64)
    assert op.attr("strides") == [1, 1] and op.attr("paddings") == [0, 0]
    assert op.attr("padding_algorithm") == "EXPLICIT" and op.attr("groups") == 1
    assert op.attr("data_format") == "NCHW" and op.attr("dilations") == [1, 1]


def test_conv2d_error_channels_not_divisible_by_groups():
    p, b = fresh()
    v = _vars(b, {"Input": ([2, 6, 8, 8], F32), "Filter": ([4, 1, 3, 3], F32)})
    out = b.create_var("out")
    with pytest.raises(ShapeError) as e:
        b.append_op("conv2d", v, {"Output": out}, {"groups": 4})  # @conv-groups
    check_error(e, ShapeError, "conv2d", "@conv-groups", "divisible by groups (4)",
                "Input_0 [2, 6, 8, 8] float32", "Filter_0 [4, 1, 3, 3] float32")


def test_conv2d_error_filter_channel_mismatch():
    p, b = fresh()
    v = _vars(b, {"Input": ([2, 3, 8, 8], F32), "Filter": ([8, 4, 3, 3], F32)})
    out = b.create_var("out")
    with pytest.raises(ShapeError) as e:
        b.append_op("conv2d", v, {"Output": out})  # @conv-mismatch
    check_error(e, ShapeError, "conv2d", "@conv-mismatch", "input channels (3)",
                "filter channels (4)", "[2, 3, 8, 8]", "[8, 4, 3, 3]")


def test_conv2d_error_3d_input():
    p, b = fresh()
    v = _vars(b, {"Input": ([2, 3, 8], F32), "Filter": ([8, 3, 3, 3], F32)})
    out = b.create_var("out")
    with pytest.raises(ShapeError) as e:
        b.append_op("conv2d", v, {"Output": out})  # @conv-3d
    check_error(e, ShapeError, "conv2d", "@conv-3d", "4-d", "Input_0 [2, 3, 8] float32")


def test_conv2d_error_empty_output_dtype_and_attrs():
    p, b = fresh()
    v = _vars(b, {"Input": ([2, 3, 2, 2], F32), "Filter": ([8, 3, 5, 5], F32)})
    with pytest.raises(ShapeError) as e:
        b.append_op("conv2d", v, {"Output": b.create_var("o1")})  # @conv-empty
    check_error(e, ShapeError, "conv2d", "@conv-empty", "would be -2", "[2, 3, 2, 2]")
    w64 = b.create_var("w64", [8, 3, 1, 1], F64)
    with pytest.raises(DTypeError) as e:
        b.append_op("conv2d", {"Input": v["Input"], "Filter": w64}, {"Output": b.create_var("o2")})  # @conv-dt
    check_error(e, DTypeError, "conv2d", "@conv-dt", "float32", "float64")
    with pytest.raises(AttrError) as e:
        b.append_op("conv2d", v, {"Output": b.create_var("o3")}, {"padding_algorithm": "FULL"})  # @conv-algo
    check_error(e, AttrError, "conv2d", "@conv-algo", "'FULL'")
    with pytest.raises(AttrError) as e:
        b.append_op("conv2d", v, {"Output": b.create_var("o4")}, {"paddings": [1, 1, 1]})  # @conv-pads
    check_error(e, AttrError, "conv2d", "@conv-pads", "[1, 1, 1]")
    with pytest.raises(AttrError) as e:
        b.append_op("conv2d", v, {"Output": b.create_var("o5")}, {"data_format": "CHWN"})  # @conv-fmt
    check_error(e, AttrError, "conv2d", "@conv-fmt", "'CHWN'")
    with pytest.raises(AttrError) as e:
        b.append_op("conv2d", v, {"Output": b.create_var("o6")}, {"groups": 1.5})  # @conv-type
    check_error(e, AttrError, "conv2d", "@conv-type", "groups")


# -- conv2d_transpose --------------------------------------------------------------------------
def convt(x, w, **attrs):
    return shape_of("conv2d_transpose", {"Input": (x, F32), "Filter": (w, F32)}, ["Output"], attrs)


def test_conv2d_transpose_shapes():
    # Paddle: [-1, 6, 16, 18]
    assert convt([-1, 4, 9, 9], [4, 6, 3, 3], strides=[2, 2], paddings=[1, 2, 0, 1]) == \
        ([-1, 6, 16, 18], F32)
    # output_size picks within [base, base + stride); groups multiply the filter's dim 1
    assert convt([-1, 4, 9, 9], [4, 3, 3, 3], strides=[2, 2], output_size=[20, 19], groups=2) == \
        ([-1, 6, 20, 19], F32)
    # Paddle: SAME pads like a forward conv, then output_padding [1, 0] -> [-1, 3, 18, 17]
    assert convt([-1, 4, 9, 9], [4, 3, 3, 3], strides=[2, 2], output_padding=[1, 0],
                 padding_algorithm="SAME") == ([-1, 3, 18, 17], F32)
    assert convt([2, 5, 7, 4], [4, 3, 2, 2], strides=[2, 2], data_format="NHWC") == ([2, 10, 14, 3], F32)
    assert convt([2, 4, -1, 5], [4, 3, 3, 3]) == ([2, 3, -1, 7], F32)


def test_conv2d_transpose_errors():
    p, b = fresh()
    v = _vars(b, {"Input": ([1, 4, 9, 9], F32), "Filter": ([4, 3, 3, 3], F32)})
    with pytest.raises(ShapeError) as e:
        b.append_op("conv2d_transpose", v, {"Output": b.create_var("o")},  # @convt-size
                    {"strides": [2, 2], "output_size": [25, 19]})
    check_error(e, ShapeError, "conv2d_transpose", "@convt-size", "output_size[0] = 25", "[19, 21)")
    w = b.create_var("w5", [5, 3, 3, 3], F32)
    with pytest.raises(ShapeError) as e:
        b.append_op("conv2d_transpose", {"Input": v["Input"], "Filter": w},  # @convt-ch
                    {"Output": b.create_var("o2")})
    check_error(e, ShapeError, "conv2d_transpose", "@convt-ch", "[1, 4, 9, 9]", "[5, 3, 3, 3]")


# -- pool2d -------------------------------------------------------------------------------------
def pool(x, dtype=F32, **attrs):
    attrs.setdefault("pooling_type", "max")
    return shape_of("pool2d", {"X": (x, dtype)}, ["Out"], attrs)


def test_pool2d_ceil_mode():
    assert pool([2, 4, 10, 10], ksize=[3, 3], strides=[2, 2]) == ([2, 4, 4, 4], F32)
    assert pool([2, 4, 10, 10], ksize=[3, 3], strides=[2, 2], ceil_mode=True) == ([2, 4, 5, 5], F32)
    # Paddle: [-1, 4, 4, 4] for F.max_pool2d(x[.., 9, 9], 3, 2, ceil_mode=True)
    assert pool([-1, 4, 9, 9], ksize=[3, 3], strides=[2, 2], ceil_mode=True) == ([-1, 4, 4, 4], F32)


def test_pool2d_paddings_same_valid_nhwc():
    assert pool([2, 4, 9, 9], ksize=[2, 2], strides=[2, 2], paddings=[1, 1],
                pooling_type="avg") == ([2, 4, 5, 5], F32)
    assert pool([2, 4, 9, 9], ksize=[2, 2], strides=[2, 2], paddings=[1, 0, 0, 1]) == ([2, 4, 5, 5], F32)
    assert pool([2, 4, 8, 9], ksize=[2, 2], strides=[1, 2], paddings=[1, 0, 0, 0]) == ([2, 4, 8, 4], F32)
    assert pool([-1, 4, 9, 9], ksize=[3, 3], strides=[2, 2], padding_algorithm="SAME") == \
        ([-1, 4, 5, 5], F32)
    assert pool([1, 4, 9, 9], ksize=[3, 3], strides=[2, 2], paddings=[3, 3],
                padding_algorithm="VALID") == ([1, 4, 4, 4], F32)
    assert pool([2, 9, 9, 4], ksize=[3, 3], strides=[3, 3], data_format="NHWC") == ([2, 3, 3, 4], F32)


def test_pool2d_global_and_adaptive():
    assert pool([2, 4, -1, 10], ksize=[3, 3], global_pooling=True, pooling_type="avg") == \
        ([2, 4, 1, 1], F32)
    assert pool([-1, 7, 9, 9], ksize=[-1, -1], global_pooling=True) == ([-1, 7, 1, 1], F32)
    assert pool([2, 4, -1, 10], ksize=[2, 3], adaptive=True, pooling_type="avg") == ([2, 4, 2, 3], F32)
    assert pool([2, 5, 5, 4], ksize=[1, 1], adaptive=True, data_format="NHWC") == ([2, 1, 1, 4], F32)


def test_pool2d_unknown_dims_and_dtype():
    assert pool([-1, 4, -1, 8], dtype=F64, ksize=[2, 2], strides=[2, 2]) == ([-1, 4, -1, 4], F64)


def test_pool2d_errors():
    p, b = fresh()
    x = b.create_var("x", [2, 4, 8, 8], F32)
    with pytest.raises(AttrError) as e:
        b.append_op("pool2d", {"X": x}, {"Out": b.create_var("o1")}, {"ksize": [2, 2]})  # @pool-type
    check_error(e, AttrError, "pool2d", "@pool-type", "pooling_type", "''")
    with pytest.raises(AttrError) as e:
        b.append_op("pool2d", {"X": x}, {"Out": b.create_var("o2")})  # @pool-ksize
    check_error(e, AttrError, "pool2d", "@pool-ksize", "missing required attribute 'ksize'")
    with pytest.raises(AttrError) as e:
        b.append_op("pool2d", {"X": x}, {"Out": b.create_var("o3")},  # @pool-k3
                    {"ksize": [2, 2, 2], "pooling_type": "max"})
    check_error(e, AttrError, "pool2d", "@pool-k3", "[2, 2, 2]", "x [2, 4, 8, 8] float32")
    x3 = b.create_var("x3", [2, 4, 8], F32)
    with pytest.raises(ShapeError) as e:
        b.append_op("pool2d", {"X": x3}, {"Out": b.create_var("o4")},  # @pool-3d
                    {"ksize": [2, 2], "pooling_type": "max"})
    check_error(e, ShapeError, "pool2d", "@pool-3d", "4-d", "x3 [2, 4, 8] float32")
    with pytest.raises(ShapeError) as e:
        b.append_op("pool2d", {"X": x}, {"Out": b.create_var("o5")},  # @pool-big
                    {"ksize": [9, 9], "pooling_type": "max"})
    check_error(e, ShapeError, "pool2d", "@pool-big", "would be 0", "[2, 4, 8, 8]")


# -- normalization ------------------------------------------------------------------------------
def _bn_program(x_shape, x_dtype=F32, c=4, layout="NCHW", mean_out_same=True):
    p, b = fresh()
    x = b.create_var("x", x_shape, x_dtype)
    pdt = F32 if x_dtype == F16 else x_dtype
    s, bias = b.create_var("scale", [c], pdt), b.create_var("bias", [c], pdt)
    m, v = b.create_var("mean", [c], pdt), b.create_var("var", [c], pdt)
    outs = {n: b.create_var(n) for n in ("y", "saved_mean", "saved_var", "reserve")}
    mean_out = m if mean_out_same else b.create_var("other_mean")
    return p, b, {"X": x, "Scale": s, "Bias": bias, "Mean": m, "Variance": v}, \
        {"Y": outs["y"], "MeanOut": mean_out, "VarianceOut": v, "SavedMean": outs["saved_mean"],
         "SavedVariance": outs["saved_var"], "ReserveSpace": outs["reserve"]}, {"data_layout": layout}


def test_batch_norm_in_place_running_stats():
    p, b, ins, outs, attrs = _bn_program([-1, 4, 9, 9])
    op = b.append_op("batch_norm", ins, outs, attrs)
    assert op.output("MeanOut") == op.input("Mean") == ["mean"]
    assert op.output("VarianceOut") == op.input("Variance") == ["var"]
    y = b.var("y")
    assert list(y.shape) == [-1, 4, 9, 9] and y.dtype == pb.VarType.FP32
    assert list(b.var("mean").shape) == [4]
    assert list(b.var("saved_mean").shape) == [4] and list(b.var("saved_var").shape) == [4]
    assert list(b.var("reserve").shape) == [-1]  # Paddle: [-1]
    assert op.attr("momentum") == pytest.approx(0.9) and op.attr("epsilon") == pytest.approx(1e-5)
    assert op.attr("is_test") is False and op.attr("use_global_stats") is False
    assert pg.Program.parse_from_string(p.serialize_to_string()) == p


def test_batch_norm_nhwc_fp16_and_2d():
    p, b, ins, outs, attrs = _bn_program([8, 5, 5, 4], F16, layout="NHWC")
    b.append_op("batch_norm", ins, outs, attrs)
    assert b.var("y").dtype == pb.VarType.FP16 and b.var("saved_mean").dtype == pb.VarType.FP32
    p, b, ins, outs, attrs = _bn_program([-1, 4])
    b.append_op("batch_norm", ins, outs, attrs)
    assert list(b.var("y").shape) == [-1, 4]


def test_batch_norm_errors():
    p, b, ins, outs, attrs = _bn_program([2, 4, 9, 9], mean_out_same=False)
    with pytest.raises(ShapeError) as e:
        b.append_op("batch_norm", ins, outs, attrs)  # @bn-inplace
    check_error(e, ShapeError, "batch_norm", "@bn-inplace", "MeanOut must be the same variable as Mean",
                "'other_mean'")
    p, b, ins, outs, attrs = _bn_program([2, 3, 9, 9], c=4)
    with pytest.raises(ShapeError) as e:
        b.append_op("batch_norm", ins, outs, attrs)  # @bn-channels
    check_error(e, ShapeError, "batch_norm", "@bn-channels", "scale [4] float32", "x [2, 3, 9, 9] float32")
    p, b, ins, outs, attrs = _bn_program([2, 4, 9, 9], layout="NCWH")
    with pytest.raises(AttrError) as e:
        b.append_op("batch_norm", ins, outs, attrs)  # @bn-layout
    check_error(e, AttrError, "batch_norm", "@bn-layout", "'NCWH'")


def test_layer_norm():
    res, op = build("layer_norm", {"X": ([2, 3, 4, 5], F32), "Scale": ([20], F32), "Bias": ([20], F32)},
                    ["Y", "Mean", "Variance"], {"begin_norm_axis": 2})
    # Paddle 3.x: Mean/Variance are X.shape[:begin_norm_axis]
    assert res == {"Y": ([2, 3, 4, 5], F32), "Mean": ([2, 3], F32), "Variance": ([2, 3], F32)}
    res, _ = build("layer_norm", {"X": ([-1, 8, 16], F16)}, ["Y", "Mean", "Variance"], {"begin_norm_axis": 2})
    assert res == {"Y": ([-1, 8, 16], F16), "Mean": ([-1, 8], F32), "Variance": ([-1, 8], F32)}
    p, b = fresh()
    v = _vars(b, {"X": ([2, 3, 4, 5], F32), "Scale": ([12], F32)})
    with pytest.raises(ShapeError) as e:
        b.append_op("layer_norm", v, {"Y": b.create_var("y")}, {"begin_norm_axis": 2})  # @ln-scale
    check_error(e, ShapeError, "layer_norm", "@ln-scale", "20 values", "Scale_0 [12] float32")
    with pytest.raises(AttrError) as e:
        b.append_op("layer_norm", {"X": v["X"]}, {"Y": b.create_var("y2")}, {"begin_norm_axis": 4})  # @ln-axis
    check_error(e, AttrError, "layer_norm", "@ln-axis", "begin_norm_axis", "[2, 3, 4, 5]")


def test_group_norm_and_instance_norm():
    res, _ = build("group_norm", {"X": ([-1, 4, 9, 9], F32), "Scale": ([4], F32), "Bias": ([4], F32)},
                   ["Y", "Mean", "Variance"], {"groups": 2})
    assert res == {"Y": ([-1, 4, 9, 9], F32), "Mean": ([-1, 2], F32), "Variance": ([-1, 2], F32)}
    res, _ = build("group_norm", {"X": ([3, 9, 9, 6], F32)}, ["Y", "Mean"], {"groups": 3, "data_layout": "NHWC"})
    assert res["Mean"] == ([3, 3], F32)
    p, b = fresh()
    x = b.create_var("x", [2, 6, 4, 4], F32)
    with pytest.raises(ShapeError) as e:
        b.append_op("group_norm", {"X": x}, {"Y": b.create_var("y")}, {"groups": 4})  # @gn-groups
    check_error(e, ShapeError, "group_norm", "@gn-groups", "channels (6)", "groups (4)")

    res, _ = build("instance_norm", {"X": ([2, 3, 4, 5], F32)}, ["Y", "SavedMean", "SavedVariance"])
    assert res == {"Y": ([2, 3, 4, 5], F32), "SavedMean": ([6], F32), "SavedVariance": ([6], F32)}
    res, _ = build("instance_norm", {"X": ([-1, 3, 4, 5], F32), "Scale": ([3], F32), "Bias": ([3], F32)},
                   ["Y", "SavedMean"])
    assert res["SavedMean"] == ([-1], F32)


def test_affine_channel_and_lrn():
    assert shape_of("affine_channel", {"X": ([2, 3, 4, 4], F32), "Scale": ([3], F32), "Bias": ([3], F32)},
                    ["Out"]) == ([2, 3, 4, 4], F32)
    res, _ = build("lrn", {"X": ([-1, 4, 9, 9], F32)}, ["Out", "MidOut"])
    assert res == {"Out": ([-1, 4, 9, 9], F32), "MidOut": ([-1, 4, 9, 9], F32)}
    p, b = fresh()
    x = b.create_var("x", [2, 4, 9, 9], F32)
    with pytest.raises(AttrError) as e:
        b.append_op("lrn", {"X": x}, {"Out": b.create_var("o"), "MidOut": b.create_var("m")}, {"n": 4})  # @lrn-n
    check_error(e, AttrError, "lrn", "@lrn-n", "odd", "4")


# -- dropout, embedding, prelu, resize, pixel_shuffle ---------------------------------------------
def test_dropout_mask_is_uint8_and_seed_attrs_are_emitted():
    res, op = build("dropout", {"X": ([-1, 4, 9, 9], F32)}, ["Out", "Mask"],
                    {"dropout_prob": 0.3, "fix_seed": True, "seed": 7})
    assert res == {"Out": ([-1, 4, 9, 9], F32), "Mask": ([-1, 4, 9, 9], U8)}
    assert op.attr("fix_seed") is True and op.attr("seed") == 7
    assert op.attr_type("seed") == pb.AttrType.INT and op.attr_type("fix_seed") == pb.AttrType.BOOLEAN
    assert op.attr("dropout_prob") == pytest.approx(0.3)
    assert op.attr("dropout_implementation") == "downgrade_in_infer" and op.attr("is_test") is False
    p, b = fresh()
    x = b.create_var("x", [2, 3], F32)
    with pytest.raises(AttrError) as e:
        b.append_op("dropout", {"X": x}, {"Out": b.create_var("o")}, {"dropout_prob": 1.5})  # @do-prob
    check_error(e, AttrError, "dropout", "@do-prob", "dropout_prob", "1.5")


def test_lookup_table_v2():
    res, op = build("lookup_table_v2", {"W": ([100, 8], F32), "Ids": ([-1, 5], I64)}, ["Out"],
                    {"padding_idx": 3})
    assert res["Out"] == ([-1, 5, 8], F32)  # Paddle: [-1, 5, 8]
    assert op.attr_type("padding_idx") == pb.AttrType.LONG and op.attr("padding_idx") == 3
    assert shape_of("lookup_table_v2", {"W": ([10, 4], F64), "Ids": ([3], I32)}, ["Out"]) == ([3, 4], F64)
    p, b = fresh()
    v = _vars(b, {"W": ([10, 4], F32), "Ids": ([3, 2], F32)})
    with pytest.raises(DTypeError) as e:
        b.append_op("lookup_table_v2", v, {"Out": b.create_var("o")})  # @emb-ids
    check_error(e, DTypeError, "lookup_table_v2", "@emb-ids", "Ids_0 [3, 2] float32")


def test_prelu_modes():
    x = ([-1, 4, 9, 9], F32)
    assert shape_of("prelu", {"X": x, "Alpha": ([1], F32)}, ["Out"]) == ([-1, 4, 9, 9], F32)
    assert shape_of("prelu", {"X": x, "Alpha": ([1, 4, 1, 1], F32)}, ["Out"], {"mode": "channel"}) == \
        ([-1, 4, 9, 9], F32)
    assert shape_of("prelu", {"X": x, "Alpha": ([1, 4, 9, 9], F32)}, ["Out"], {"mode": "element"}) == \
        ([-1, 4, 9, 9], F32)
    p, b = fresh()
    v = _vars(b, {"X": x, "Alpha": ([1, 3, 1, 1], F32)})
    with pytest.raises(ShapeError) as e:
        b.append_op("prelu", v, {"Out": b.create_var("o")}, {"mode": "channel"})  # @prelu
    check_error(e, ShapeError, "prelu", "@prelu", "4 element(s)", "Alpha_0 [1, 3, 1, 1] float32")


def test_interp_v2():
    # Paddle: scale [1.5, 2.0] on [2, 4, -1, 10] -> [2, 4, -1, 20]
    assert shape_of("bilinear_interp_v2", {"X": ([2, 4, -1, 10], F32)}, ["Out"],
                    {"scale": [1.5, 2.0]}) == ([2, 4, -1, 20], F32)
    assert shape_of("nearest_interp_v2", {"X": ([-1, 4, 9, 9], F32)}, ["Out"],
                    {"out_h": 3, "out_w": 5, "interp_method": "nearest"}) == ([-1, 4, 3, 5], F32)
    assert shape_of("nearest_interp_v2", {"X": ([1, 7, 7, 4], F32)}, ["Out"],
                    {"out_h": -1, "out_w": -1, "scale": [2.0, 2.0], "data_layout": "NHWC"}) == \
        ([1, 14, 14, 4], F32)
    assert shape_of("bilinear_interp_v2", {"X": ([1, 4, 9, 9], F32), "OutSize": ([2], I32)}, ["Out"]) == \
        ([1, 4, -1, -1], F32)
    p, b = fresh()
    x = b.create_var("x", [1, 4, 9, 9], F32)
    with pytest.raises(AttrError) as e:
        b.append_op("bilinear_interp_v2", {"X": x}, {"Out": b.create_var("o")})  # @interp
    check_error(e, AttrError, "bilinear_interp_v2", "@interp", "out_h=0", "OutSize")


def test_pixel_shuffle():
    assert shape_of("pixel_shuffle", {"X": ([-1, 8, 5, 6], F32)}, ["Out"], {"upscale_factor": 2}) == \
        ([-1, 2, 10, 12], F32)
    assert shape_of("pixel_shuffle", {"X": ([1, 5, 6, 9], F32)}, ["Out"],
                    {"upscale_factor": 3, "data_format": "NHWC"}) == ([1, 15, 18, 1], F32)
    p, b = fresh()
    x = b.create_var("x", [1, 6, 4, 4], F32)
    with pytest.raises(ShapeError) as e:
        b.append_op("pixel_shuffle", {"X": x}, {"Out": b.create_var("o")}, {"upscale_factor": 2})  # @ps
    check_error(e, ShapeError, "pixel_shuffle", "@ps", "channels (6)", "x [1, 6, 4, 4] float32")


# -- losses ---------------------------------------------------------------------------------------------
def test_softmax_with_cross_entropy():
    res, op = build("softmax_with_cross_entropy", {"Logits": ([-1, 10], F32), "Label": ([-1, 1], I64)},
                    ["Softmax", "Loss"])
    assert res == {"Softmax": ([-1, 10], F32), "Loss": ([-1, 1], F32)}
    assert op.attr("numeric_stable_mode") is True and op.attr("ignore_index") == -100
    assert op.attr("use_softmax") is True and op.attr("axis") == -1 and op.attr("soft_label") is False
    # Paddle: axis 1 of [2, 3, 4, 5] -> Loss [2, 1, 4, 5]
    res, _ = build("softmax_with_cross_entropy",
                   {"Logits": ([2, 3, 4, 5], F32), "Label": ([2, 1, 4, 5], I64)}, ["Softmax", "Loss"],
                   {"axis": 1})
    assert res == {"Softmax": ([2, 3, 4, 5], F32), "Loss": ([2, 1, 4, 5], F32)}
    res, _ = build("softmax_with_cross_entropy", {"Logits": ([4, 10], F64), "Label": ([4, 10], F64)},
                   ["Softmax", "Loss"], {"soft_label": True})
    assert res["Loss"] == ([4, 1], F64)


def test_softmax_with_cross_entropy_errors():
    p, b = fresh()
    v = _vars(b, {"Logits": ([8, 10], F32), "Label": ([8, 1], F32)})
    with pytest.raises(DTypeError) as e:
        outs = {"Softmax": b.create_var("s"), "Loss": b.create_var("l")}
        b.append_op("softmax_with_cross_entropy", v, outs)  # @swce-dt
    check_error(e, DTypeError, "softmax_with_cross_entropy", "@swce-dt", "Label_0 [8, 1] float32")
    lab = b.create_var("lab", [8, 3], I64)
    with pytest.raises(ShapeError) as e:
        b.append_op("softmax_with_cross_entropy", {"Logits": v["Logits"], "Label": lab},  # @swce-shape
                    {"Softmax": b.create_var("s2"), "Loss": b.create_var("l2")})
    check_error(e, ShapeError, "softmax_with_cross_entropy", "@swce-shape", "Logits_0 [8, 10] float32",
                "lab [8, 3] int64")
    lab7 = b.create_var("lab7", [7, 1], I64)
    with pytest.raises(ShapeError) as e:
        b.append_op("softmax_with_cross_entropy", {"Logits": v["Logits"], "Label": lab7},  # @swce-batch
                    {"Softmax": b.create_var("s3"), "Loss": b.create_var("l3")})
    check_error(e, ShapeError, "softmax_with_cross_entropy", "@swce-batch", "[7, 1]")


def test_cross_entropy_ops():
    # Paddle: Label [-1, 1] -> Y [-1, 1]; Label [-1] -> Y [-1]
    assert shape_of("cross_entropy", {"X": ([-1, 10], F32), "Label": ([-1, 1], I64)}, ["Y"]) == ([-1, 1], F32)
    assert shape_of("cross_entropy", {"X": ([-1, 10], F32), "Label": ([-1], I64)}, ["Y"]) == ([-1], F32)
    assert shape_of("cross_entropy", {"X": ([4, 10], F32), "Label": ([4, 10], F32)}, ["Y"],
                    {"soft_label": True}) == ([4, 1], F32)
    # Paddle: XShape is X's dims followed by 0
    res, _ = build("cross_entropy2", {"X": ([-1, 10], F32), "Label": ([-1, 1], I64)}, ["Y", "MatchX", "XShape"])
    assert res == {"Y": ([-1, 1], F32), "MatchX": ([-1, 1], F32), "XShape": ([-1, 10, 0], F32)}


def test_elementwise_losses():
    x = ([-1, 5], F32)
    assert shape_of("sigmoid_cross_entropy_with_logits", {"X": x, "Label": x}, ["Out"]) == ([-1, 5], F32)
    assert shape_of("sigmoid_cross_entropy_with_logits", {"X": x, "Label": x, "pos_weight": x}, ["Out"],
                    {"normalize": True}) == ([-1, 5], F32)
    assert shape_of("bce_loss", {"X": ([3, -1], F32), "Label": ([-1, 4], F32)}, ["Out"]) == ([3, 4], F32)
    res, _ = build("huber_loss", {"X": ([-1, 1], F32), "Y": ([-1, 1], F32)}, ["Out", "Residual"], {"delta": 1.0})
    assert res == {"Out": ([-1, 1], F32), "Residual": ([-1, 1], F32)}
    assert shape_of("kldiv_loss", {"X": ([2, 3], F32), "Target": ([2, 3], F32)}, ["Loss"]) == ([], F32)
    assert shape_of("kldiv_loss", {"X": ([2, 3], F32), "Target": ([2, 3], F32)}, ["Loss"],
                    {"reduction": "none"}) == ([2, 3], F32)
    assert shape_of("label_smooth", {"X": ([-1, 10], F32)}, ["Out"], {"epsilon": 0.1}) == ([-1, 10], F32)
    assert shape_of("label_smooth", {"X": ([-1, 10], F32), "PriorDist": ([1, 10], F32)}, ["Out"]) == \
        ([-1, 10], F32)
    p, b = fresh()
    v = _vars(b, {"X": ([4, 5], F32), "Label": ([4, 6], F32)})
    with pytest.raises(ShapeError) as e:
        b.append_op("bce_loss", v, {"Out": b.create_var("o")})  # @bce
    check_error(e, ShapeError, "bce_loss", "@bce", "X_0 [4, 5] float32", "Label_0 [4, 6] float32")
    p, b = fresh()
    v = _vars(b, {"X": ([4, 5], F32), "Y": ([4, 5], F32)})
    with pytest.raises(AttrError) as e:
        b.append_op("huber_loss", v, {"Out": b.create_var("o2")})  # @huber
    check_error(e, AttrError, "huber_loss", "@huber", "missing required attribute 'delta'")


def test_accuracy():
    res, op = build("accuracy", {"Out": ([-1, 2], F32), "Indices": ([-1, 2], I64), "Label": ([-1, 1], I64)},
                    ["Accuracy", "Correct", "Total"])
    assert res == {"Accuracy": ([], F32), "Correct": ([], I32), "Total": ([], I32)}
    assert registry.get("accuracy").grad is registry.NOT_DIFFERENTIABLE
    p, b = fresh()
    v = _vars(b, {"Out": ([8, 2], F32), "Indices": ([8, 2], I64), "Label": ([8, 3], I64)})
    with pytest.raises(ShapeError) as e:
        b.append_op("accuracy", v, {"Accuracy": b.create_var("a"), "Correct": b.create_var("c"),  # @acc
                                    "Total": b.create_var("t")})
    check_error(e, ShapeError, "accuracy", "@acc", "Label_0 [8, 3] int64")


# -- random ---------------------------------------------------------------------------------------------
def test_random_ops_shapes_dtypes_and_attr_types():
    res, op = build("uniform_random", {}, ["Out"], {"shape": [3, 4], "min": -0.5, "max": 0.5, "seed": 7})
    assert res["Out"] == ([3, 4], F32)
    assert op.attr_type("shape") == pb.AttrType.LONGS and op.attr_type("dtype") == pb.AttrType.INT
    assert op.attr("seed") == 7 and op.attr("diag_num") == 0
    assert shape_of("uniform_random", {}, ["Out"], {"shape": [2], "dtype": pb.VarType.FP64}) == ([2], F64)
    assert shape_of("uniform_random", {"ShapeTensorList": [([1], I64), ([1], I64)]}, ["Out"]) == ([-1, -1], F32)
    assert shape_of("gaussian_random", {"ShapeTensor": ([3], I32)}, ["Out"]) == ([-1, -1, -1], F32)
    res, op = build("gaussian_random", {}, ["Out"], {"shape": [6, 3, 3, 3], "std": 0.27})
    assert res["Out"] == ([6, 3, 3, 3], F32) and op.attr_type("shape") == pb.AttrType.LONGS
    res, op = build("truncated_gaussian_random", {}, ["Out"], {"shape": [5, 2]})
    assert res["Out"] == ([5, 2], F32) and op.attr_type("shape") == pb.AttrType.INTS
    assert op.attr("a") == -2.0 and op.attr("b") == 2.0
    res, op = build("randint", {}, ["Out"], {"low": 0, "high": 5, "shape": [3, 4]})
    assert res["Out"] == ([3, 4], I64)  # Paddle: default dtype int64
    assert shape_of("randint", {}, ["Out"], {"low": -3, "high": 3, "shape": [2], "dtype": pb.VarType.INT32}) \
        == ([2], I32)
    for t in ("uniform_random", "gaussian_random", "truncated_gaussian_random", "randint"):
        assert registry.get(t).grad is registry.NOT_DIFFERENTIABLE


def test_random_op_errors():
    p, b = fresh()
    with pytest.raises(AttrError) as e:
        b.append_op("uniform_random", outputs={"Out": b.create_var("o1")},  # @ur-minmax
                    attrs={"shape": [2], "min": 1.0, "max": 1.0})
    check_error(e, AttrError, "uniform_random", "@ur-minmax", "min (1.0)", "max (1.0)")
    with pytest.raises(AttrError) as e:
        b.append_op("randint", outputs={"Out": b.create_var("o2")},  # @ri-dtype
                    attrs={"low": 0, "high": 4, "shape": [2], "dtype": pb.VarType.FP32})
    check_error(e, AttrError, "randint", "@ri-dtype", "int32 or int64", "float32")
    with pytest.raises(AttrError) as e:
        b.append_op("randint", outputs={"Out": b.create_var("o3")}, attrs={"shape": [2], "high": 3})  # @ri-low
    check_error(e, AttrError, "randint", "@ri-low", "missing required attribute 'low'")
    with pytest.raises(AttrError) as e:
        b.append_op("gaussian_random", outputs={"Out": b.create_var("o4")}, attrs={"shape": [2, -1]})  # @gr-neg
    check_error(e, AttrError, "gaussian_random", "@gr-neg", "[2, -1]")
    with pytest.raises(AttrError) as e:
        b.append_op("gaussian_random", outputs={"Out": b.create_var("o5")},  # @gr-dtype
                    attrs={"shape": [2], "dtype": pb.VarType.INT64})
    check_error(e, AttrError, "gaussian_random", "@gr-dtype", "floating-point", "int64")


# -- optimizers ---------------------------------------------------------------------------------------
P = ([6, 4, 3, 3], F32)
LR = ([], F32)
POW = ([1], F32)


def _opt(op_type, inputs, pairs, attrs=None):
    res, op = build(op_type, inputs, [], attrs, inplace=dict(pairs))
    for out_slot, in_slot in pairs:
        assert op.output(out_slot) == op.input(in_slot)
    return res, op


def test_sgd_and_momentum_update_in_place():
    res, op = _opt("sgd", {"Param": P, "Grad": P, "LearningRate": LR}, [("ParamOut", "Param")])
    assert res["ParamOut"] == ([6, 4, 3, 3], F32) and op.attr("multi_precision") is False
    res, op = _opt("momentum", {"Param": P, "Grad": P, "Velocity": P, "LearningRate": ([1], F32)},
                   [("ParamOut", "Param"), ("VelocityOut", "Velocity")], {"mu": 0.9, "use_nesterov": True})
    assert res["VelocityOut"] == ([6, 4, 3, 3], F32)
    assert op.attr("regularization_method") == "" and op.attr("rescale_grad") == 1.0


def test_adam_family():
    ins = {"Param": P, "Grad": P, "LearningRate": LR, "Moment1": P, "Moment2": P, "Beta1Pow": POW,
           "Beta2Pow": POW}
    pairs = [("ParamOut", "Param"), ("Moment1Out", "Moment1"), ("Moment2Out", "Moment2"),
             ("Beta1PowOut", "Beta1Pow"), ("Beta2PowOut", "Beta2Pow")]
    res, op = _opt("adam", ins, pairs)
    assert res["Beta1PowOut"] == ([1], F32) and res["Moment2Out"] == ([6, 4, 3, 3], F32)
    assert op.attr_type("min_row_size_to_use_multithread") == pb.AttrType.LONG
    assert op.attr("beta1") == pytest.approx(0.9) and op.attr("epsilon") == pytest.approx(1e-8)
    res, op = _opt("adamw", ins, pairs, {"coeff": 0.05, "with_decay": True})
    assert res["ParamOut"] == ([6, 4, 3, 3], F32) and op.attr("lr_ratio") == 1.0
    res, op = _opt("lamb", ins, pairs, {"weight_decay": 0.01})
    assert res["Moment1Out"] == ([6, 4, 3, 3], F32)


def test_rmsprop_and_adagrad():
    res, _ = build("rmsprop", {"Param": P, "Grad": P, "LearningRate": LR, "MeanSquare": P, "Moment": P},
                   ["MeanGradOut"], inplace={"ParamOut": "Param", "MomentOut": "Moment",
                                             "MeanSquareOut": "MeanSquare"})
    assert res["MeanGradOut"] == ([6, 4, 3, 3], F32) and res["MeanSquareOut"] == ([6, 4, 3, 3], F32)
    res, _ = _opt("adagrad", {"Param": ([10], F64), "Grad": ([10], F64), "Moment": ([10], F64),
                              "LearningRate": ([1], F64)}, [("ParamOut", "Param"), ("MomentOut", "Moment")])
    assert res["MomentOut"] == ([10], F64)
    for t in ("sgd", "momentum", "adam", "adamw", "lamb", "rmsprop", "adagrad"):
        assert registry.get(t).grad is registry.NOT_DIFFERENTIABLE


def test_optimizer_errors():
    p, b = fresh()
    v = _vars(b, {"Param": ([4, 3], F32), "Grad": ([3, 4], F32), "LearningRate": ([], F32)})
    with pytest.raises(ShapeError) as e:
        b.append_op("sgd", v, {"ParamOut": v["Param"]})  # @sgd-grad
    check_error(e, ShapeError, "sgd", "@sgd-grad", "Param_0 [4, 3] float32", "Grad_0 [3, 4] float32")
    lr2 = b.create_var("lr2", [2], F32)
    with pytest.raises(ShapeError) as e:
        b.append_op("sgd", {"Param": v["Param"], "Grad": v["Param"], "LearningRate": lr2},  # @sgd-lr
                    {"ParamOut": v["Param"]})
    check_error(e, ShapeError, "sgd", "@sgd-lr", "one element", "lr2 [2] float32")
    vel = b.create_var("vel", [4, 3], F32)
    with pytest.raises(AttrError) as e:
        b.append_op("momentum", {"Param": v["Param"], "Grad": v["Param"], "Velocity": vel,  # @mom-mu
                                 "LearningRate": v["LearningRate"]},
                    {"ParamOut": v["Param"], "VelocityOut": vel})
    check_error(e, AttrError, "momentum", "@mom-mu", "missing required attribute 'mu'")
    with pytest.raises(SlotError) as e:
        b.append_op("sgd", {"Param": v["Param"], "Grad": v["Param"]}, {"ParamOut": v["Param"]})  # @sgd-slot
    check_error(e, SlotError, "sgd", "@sgd-slot", "'LearningRate'")


# -- registry facts ----------------------------------------------------------------------------------
def test_differentiable_ops_have_gradient_rules():
    for t in ("conv2d", "depthwise_conv2d", "conv2d_transpose", "pool2d", "batch_norm", "layer_norm",
              "dropout", "lookup_table_v2", "softmax_with_cross_entropy", "cross_entropy2", "prelu"):
        opdef = registry.get(t)
        assert isinstance(opdef.grad, registry.GradRule) and opdef.doc and "\n" not in opdef.doc


def test_dropout_mask_and_batch_norm_slots_flags():
    mask = registry.get("dropout").output_slots["Mask"]
    assert mask.intermediate and mask.extra and not mask.dispensable
    bn = registry.get("batch_norm")
    assert bn.output_slots["SavedMean"].intermediate
    assert bn.output_slots["ReserveSpace"].extra and bn.output_slots["ReserveSpace"].dispensable
    assert registry.get("conv2d").attr_spec("is_test") is not None  # a runtime attr files carry
