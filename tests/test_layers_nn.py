"""The layer functions of program.nn: op sequences, parameter names/shapes, startup init ops
and emitted attributes, compared with what PaddlePaddle 3.3.1's static layers build (the
expected values noted "Paddle:" were taken from programs built by PaddlePaddle itself)."""
import math
from pathlib import Path

import pytest

import keel.program as pg
from keel.program import dtypes
from keel.program.errors import AttrError, DTypeError, ShapeError
from keel.program.ops import registry
from keel.proto import pb

THIS_FILE = __file__
F32 = pb.VarType.FP32


def _line_of(marker: str) -> int:
    with open(THIS_FILE) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


class Built:
    """Programs built by `fn` inside fresh names; checks both round-trip through bytes."""

    def __init__(self, fn, random_seed=0):
        self.main, self.startup = pg.Program(), pg.Program()
        self.main.random_seed = random_seed
        with pg.unique_name.guard(), pg.program_guard(self.main, self.startup):
            self.out = fn()
        for p in (self.main, self.startup):
            assert pg.Program.parse_from_string(p.serialize_to_string()) == p
        self.ops = self.main.global_block().ops
        self.init_ops = self.startup.global_block().ops

    @property
    def types(self):
        return [op.type for op in self.ops]

    def var(self, name):
        return self.main.global_block().var(name)

    def shape(self, name):
        return list(self.var(name).shape)

    def init(self, name):
        (op,) = [op for op in self.init_ops if op.output("Out") == [name]]
        return op

    def params(self):
        return {p.name: list(p.shape) for p in self.main.all_parameters()}


def data(name, shape, dtype="float32"):
    return pg.data(name, shape, dtype)


# -- fc / linear ---------------------------------------------------------------------------------
def test_fc_op_sequence_names_and_init():
    b = Built(lambda: pg.nn.fc(data("x", [-1, 3, 8, 8]), 10, activation="relu"))
    assert b.out.name == "fc_0.tmp_2" and list(b.out.shape) == [-1, 10]
    assert b.types == ["mul", "elementwise_add", "relu"]
    mul, add, relu = b.ops
    assert mul.input("X") == ["x"] and mul.input("Y") == ["fc_0.w_0"] and mul.output("Out") == ["fc_0.tmp_0"]
    assert mul.attr("x_num_col_dims") == 1 and mul.attr("y_num_col_dims") == 1
    assert add.input("Y") == ["fc_0.b_0"] and add.output("Out") == ["fc_0.tmp_1"] and add.attr("axis") == 1
    assert relu.output("Out") == ["fc_0.tmp_2"]
    assert b.params() == {"fc_0.w_0": [192, 10], "fc_0.b_0": [10]}
    # XavierUniform: Paddle: min/max = -/+0.17234550416469574 for [192, 10]
    w_init = b.init("fc_0.w_0")
    limit = math.sqrt(6.0 / (192 + 10))
    assert w_init.type == "uniform_random"
    assert w_init.attr("max") == pytest.approx(limit) and w_init.attr("min") == pytest.approx(-limit)
    assert w_init.attr("max") == pytest.approx(0.17234550416469574)
    assert w_init.attr("shape") == [192, 10] and w_init.attr("seed") == 0 and w_init.attr("dtype") == F32
    b_init = b.init("fc_0.b_0")
    assert b_init.type == "fill_constant" and b_init.attr("value") == 0.0 and b_init.attr("shape") == [10]
    assert [op.type for op in b.init_ops] == ["uniform_random", "fill_constant"]
    w = b.var("fc_0.w_0")
    assert w.persistable and w.is_parameter and not w.stop_gradient


def test_fc_num_flatten_dims_no_bias_and_no_activation():
    b = Built(lambda: pg.nn.fc(data("x", [-1, 4, 6]), 5, num_flatten_dims=2))
    assert b.types == ["mul", "elementwise_add"] and b.out.name == "fc_0.tmp_1"
    assert b.ops[0].attr("x_num_col_dims") == 2 and b.ops[1].attr("axis") == 2
    assert b.params()["fc_0.w_0"] == [6, 5] and list(b.out.shape) == [-1, 4, 5]
    b = Built(lambda: pg.nn.fc(data("x", [-1, 4, 6]), 5, num_flatten_dims=-1, bias_attr=False))
    assert b.types == ["mul"] and b.params() == {"fc_0.w_0": [6, 5]} and list(b.out.shape) == [-1, 4, 5]


def test_fc_list_of_inputs_sums_the_products():
    def net():
        return pg.nn.fc([data("a", [-1, 3]), data("b", [-1, 2, 2])], 7, activation="tanh")
    b = Built(net)
    assert b.types == ["mul", "mul", "sum", "elementwise_add", "tanh"]
    assert b.params() == {"fc_0.w_0": [3, 7], "fc_0.w_1": [4, 7], "fc_0.b_0": [7]}
    assert b.ops[2].input("X") == ["fc_0.tmp_0", "fc_0.tmp_1"] and b.ops[2].output("Out") == ["fc_0.tmp_2"]
    assert b.out.name == "fc_0.tmp_4" and list(b.out.shape) == [-1, 7]


def test_fc_param_attr_name_shares_weights_and_custom_initializer():
    def net():
        x = data("x", [-1, 4])
        attr = pg.ParamAttr(name="shared_w", initializer=pg.initializer.Constant(0.5))
        y1 = pg.nn.fc(x, 4, weight_attr=attr)
        y2 = pg.nn.fc(y1, 4, weight_attr=attr, name="second")
        return y2
    b = Built(net)
    assert b.params() == {"shared_w": [4, 4], "fc_0.b_0": [4], "second.b_0": [4]}
    assert b.ops[0].input("Y") == b.ops[2].input("Y") == ["shared_w"]
    assert b.init("shared_w").type == "fill_constant" and b.init("shared_w").attr("value") == 0.5
    assert b.out.name == "second.tmp_1"


def test_linear_matches_paddle_nn_linear():
    b = Built(lambda: pg.nn.linear(data("x", [-1, 324]), 10))
    assert b.types == ["matmul_v2", "elementwise_add"]
    mm, add = b.ops
    assert mm.input("Y") == ["linear_0.w_0"] and mm.output("Out") == ["linear_0.tmp_0"]
    assert mm.attr("trans_x") is False and mm.attr("trans_y") is False
    assert add.attr("axis") == -1 and add.output("Out") == ["linear_0.tmp_1"]
    assert b.params() == {"linear_0.w_0": [324, 10], "linear_0.b_0": [10]}
    # Paddle: uniform_random +-0.13403011858463287 for [324, 10]
    assert b.init("linear_0.w_0").attr("max") == pytest.approx(0.13403011858463287)
    assert list(b.out.shape) == [-1, 10]


# -- conv2d -------------------------------------------------------------------------------------
def test_conv2d_names_init_and_bias():
    b = Built(lambda: pg.nn.conv2d(data("x", [-1, 3, 8, 8]), 6, 3, padding="SAME", act="relu"))
    assert b.types == ["conv2d", "elementwise_add", "relu"]
    conv, add, _ = b.ops
    assert conv.input("Filter") == ["conv2d_0.w_0"] and conv.output("Output") == ["conv2d_0.tmp_0"]
    assert conv.attr("padding_algorithm") == "SAME" and conv.attr("paddings") == [0, 0]
    assert conv.attr("strides") == [1, 1] and conv.attr("dilations") == [1, 1] and conv.attr("groups") == 1
    assert add.input("Y") == ["conv2d_0.b_0"] and add.attr("axis") == 1
    assert b.out.name == "conv2d_0.tmp_2" and list(b.out.shape) == [-1, 6, 8, 8]
    assert b.params() == {"conv2d_0.w_0": [6, 3, 3, 3], "conv2d_0.b_0": [6]}
    g = b.init("conv2d_0.w_0")
    # Paddle: gaussian_random std 0.27216553688049316 = sqrt(2 / (3*3*3))
    assert g.type == "gaussian_random" and g.attr("mean") == 0.0
    assert g.attr("std") == pytest.approx(math.sqrt(2 / 27)) and g.attr("shape") == [6, 3, 3, 3]


@pytest.mark.parametrize("padding, paddings, algo, out_hw", [
    (1, [1, 1], "EXPLICIT", [16, 16]),
    ((1, 2), [1, 2], "EXPLICIT", [16, 18]),
    ([1, 1, 2, 2], [1, 2], "EXPLICIT", [16, 18]),          # symmetric: collapsed to 2 values
    ([1, 0, 2, 1], [1, 0, 2, 1], "EXPLICIT", [8, 9]),       # [top, bottom, left, right]
    ([[0, 0], [0, 0], [1, 0], [2, 1]], [1, 0, 2, 1], "EXPLICIT", [8, 9]),
    ("VALID", [0, 0], "VALID", [7, 7]),
    ("same", [0, 0], "SAME", [8, 8]),
])
def test_conv2d_padding_spellings(padding, paddings, algo, out_hw):
    stride = 1 if out_hw[0] == 16 else 2
    b = Built(lambda: pg.nn.conv2d(data("x", [2, 3, 16, 16]), 4, 3, stride=stride, padding=padding))
    conv = b.ops[0]
    assert conv.attr("paddings") == paddings and conv.attr("padding_algorithm") == algo
    assert b.shape("conv2d_0.tmp_0") == [2, 4, *out_hw]


def test_conv2d_nhwc_dilation_and_no_bias():
    b = Built(lambda: pg.nn.conv2d(data("x", [-1, 16, 16, 3]), 8, (3, 5), stride=2, padding=(1, 2),
                                   dilation=1, data_format="NHWC"))
    conv, add = b.ops
    assert conv.attr("data_format") == "NHWC" and add.attr("axis") == 3
    assert b.params()["conv2d_0.w_0"] == [8, 3, 3, 5] and list(b.out.shape) == [-1, 8, 8, 8]
    b = Built(lambda: pg.nn.conv2d(data("x", [1, 2, 9, 9]), 4, 3, dilation=2, bias_attr=False))
    assert b.types == ["conv2d"] and b.ops[0].attr("dilations") == [2, 2] and list(b.out.shape) == [1, 4, 5, 5]


def test_conv2d_depthwise_and_grouped():
    b = Built(lambda: pg.nn.conv2d(data("x", [-1, 8, 16, 16]), 16, 3, stride=2, padding=1, groups=8))
    assert b.types == ["depthwise_conv2d", "elementwise_add"]
    assert b.ops[0].attr("groups") == 8
    assert b.params() == {"conv2d_0.w_0": [16, 1, 3, 3], "conv2d_0.b_0": [16]}
    # default init uses fan_in = kh * kw * in_channels (PaddlePaddle's rule, not divided by groups)
    assert b.init("conv2d_0.w_0").attr("std") == pytest.approx(math.sqrt(2 / 72))
    assert list(b.out.shape) == [-1, 16, 8, 8]
    b = Built(lambda: pg.nn.conv2d(data("x", [-1, 8, 16, 16]), 4, 3, groups=2))
    assert b.types[0] == "conv2d" and b.params()["conv2d_0.w_0"] == [4, 4, 3, 3]
    # one input channel and groups=1: a plain conv2d (as PaddlePaddle)
    b = Built(lambda: pg.nn.conv2d(data("x", [-1, 1, 16, 16]), 4, 3, groups=1))
    assert b.types[0] == "conv2d"


def test_conv2d_build_errors_name_the_user_line():
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = data("x", [2, 6, 8, 8])
        with pytest.raises(ShapeError) as e:
            pg.nn.conv2d(x, 8, 3, groups=4)  # @layer-groups
        msg = str(e.value)
        assert msg.startswith("conv2d: ") and "input channels (6)" in msg and "groups (4)" in msg
        assert "x float32[2, 6, 8, 8]" in msg
        assert f"op created at {THIS_FILE}:{_line_of('@layer-groups')}" in msg
        with pytest.raises(ShapeError) as e:
            pg.nn.conv2d(data("x3", [2, 6, 8]), 8, 3)  # @layer-3d
        assert "4-d" in str(e.value) and "x3 float32[2, 6, 8]" in str(e.value)
        assert f"op created at {THIS_FILE}:{_line_of('@layer-3d')}" in str(e.value)
        with pytest.raises(AttrError) as e:
            pg.nn.conv2d(x, 8, 3, padding="FULL")
        assert "'FULL'" in str(e.value)
        with pytest.raises(DTypeError):
            pg.nn.conv2d(data("xi", [2, 6, 8, 8], "int32"), 8, 3)
        # an op-level error (the kernel does not fit) is raised by conv2d's shape rule
        with pytest.raises(ShapeError) as e:
            pg.nn.conv2d(data("small", [2, 6, 2, 2]), 8, 5)  # @layer-small
        assert str(e.value).startswith("conv2d: ") and "small [2, 6, 2, 2] float32" in str(e.value)
        assert f"op created at {THIS_FILE}:{_line_of('@layer-small')}" in str(e.value)
    assert [op.type for op in main.global_block().ops] == []


def test_conv2d_transpose_layer():
    b = Built(lambda: pg.nn.conv2d_transpose(data("x", [-1, 4, 9, 9]), 6, filter_size=3, stride=2,
                                             padding=[1, 2, 0, 1]))
    conv, add = b.ops
    assert conv.type == "conv2d_transpose" and conv.attr("paddings") == [1, 2, 0, 1]
    assert conv.attr("output_size") == [] and conv.attr("output_padding") == []
    assert b.params() == {"conv2d_transpose_0.w_0": [4, 6, 3, 3], "conv2d_transpose_0.b_0": [6]}
    # Paddle: [-1, 6, 16, 18]; XavierUniform with fan_in 6*9, fan_out 4*9 -> +-0.25819888710975647
    assert list(b.out.shape) == [-1, 6, 16, 18] and add.attr("axis") == 1
    assert b.init("conv2d_transpose_0.w_0").attr("max") == pytest.approx(0.25819888710975647)
    b = Built(lambda: pg.nn.conv2d_transpose(data("x", [-1, 4, 9, 9]), 6, output_size=19, stride=2,
                                             groups=2))
    assert b.params()["conv2d_transpose_0.w_0"] == [4, 3, 3, 3]
    assert b.ops[0].attr("output_size") == [19, 19] and list(b.out.shape) == [-1, 6, 19, 19]


# -- pooling -------------------------------------------------------------------------------------
def test_pool2d_attrs():
    b = Built(lambda: pg.nn.pool2d(data("x", [-1, 4, 9, 9]), 3, "max", 2, ceil_mode=True))
    (op,) = b.ops
    assert op.type == "pool2d" and op.output("Out") == ["pool2d_0.tmp_0"]
    assert op.attr("pooling_type") == "max" and op.attr("ksize") == [3, 3] and op.attr("strides") == [2, 2]
    assert op.attr("paddings") == [0, 0] and op.attr("ceil_mode") is True and op.attr("exclusive") is True
    assert op.attr("global_pooling") is False and op.attr("adaptive") is False
    assert op.attr("padding_algorithm") == "EXPLICIT" and op.attr("data_format") == "NCHW"
    assert list(b.out.shape) == [-1, 4, 4, 4]  # Paddle: [-1, 4, 4, 4]


def test_pool2d_global_adaptive_and_aliases():
    b = Built(lambda: pg.nn.pool2d(data("x", [-1, 4, 9, 9]), pool_type="avg", global_pooling=True))
    assert b.ops[0].attr("global_pooling") is True and list(b.out.shape) == [-1, 4, 1, 1]
    b = Built(lambda: pg.nn.adaptive_pool2d(data("x", [-1, 4, 9, 9]), [3, 2]))
    op = b.ops[0]
    assert op.attr("adaptive") is True and op.attr("ksize") == [3, 2] and op.attr("pooling_type") == "avg"
    assert op.attr("use_cudnn") is False and list(b.out.shape) == [-1, 4, 3, 2]  # Paddle: [-1, 4, 3, 2]
    b = Built(lambda: pg.nn.avg_pool2d(data("x", [-1, 4, 9, 9]), 2, padding=1))
    assert b.ops[0].attr("strides") == [2, 2] and b.ops[0].attr("paddings") == [1, 1]
    assert list(b.out.shape) == [-1, 4, 5, 5]  # Paddle: [-1, 4, 5, 5]
    b = Built(lambda: pg.nn.max_pool2d(data("x", [-1, 4, 9, 9]), 3, 2, padding="SAME"))
    assert b.ops[0].attr("padding_algorithm") == "SAME" and list(b.out.shape) == [-1, 4, 5, 5]
    b = Built(lambda: pg.nn.adaptive_avg_pool2d(data("x", [-1, 5, 5, 4]), 1, data_format="NHWC"))
    assert list(b.out.shape) == [-1, 1, 1, 4]
    with pytest.raises(AttrError):
        Built(lambda: pg.nn.pool2d(data("x", [-1, 4, 9, 9])))
    with pytest.raises(AttrError):
        Built(lambda: pg.nn.pool2d(data("x", [-1, 4, 9, 9]), 2, "min"))


# -- normalization ----------------------------------------------------------------------------------
def test_batch_norm_parameters_and_in_place_statistics():
    b = Built(lambda: pg.nn.batch_norm(data("x", [-1, 6, 8, 8]), act="relu"))
    assert b.types == ["batch_norm", "relu"]
    bn = b.ops[0]
    assert bn.input("Scale") == ["batch_norm_0.w_0"] and bn.input("Bias") == ["batch_norm_0.b_0"]
    assert bn.input("Mean") == bn.output("MeanOut") == ["batch_norm_0.w_1"]
    assert bn.input("Variance") == bn.output("VarianceOut") == ["batch_norm_0.w_2"]
    # Paddle: SavedMean tmp_0, SavedVariance tmp_1, ReserveSpace tmp_2, Y tmp_3
    assert bn.output("SavedMean") == ["batch_norm_0.tmp_0"]
    assert bn.output("SavedVariance") == ["batch_norm_0.tmp_1"]
    assert bn.output("ReserveSpace") == ["batch_norm_0.tmp_2"] and bn.output("Y") == ["batch_norm_0.tmp_3"]
    assert bn.attr("momentum") == pytest.approx(0.9) and bn.attr("epsilon") == pytest.approx(1e-5)
    assert bn.attr("is_test") is False and bn.attr("data_layout") == "NCHW"
    assert b.params() == {f"batch_norm_0.{s}": [6] for s in ("w_0", "b_0", "w_1", "w_2")}
    values = {n: (b.init(n).type, b.init(n).attr("value")) for n in b.params()}
    assert values == {"batch_norm_0.w_0": ("fill_constant", 1.0), "batch_norm_0.b_0": ("fill_constant", 0.0),
                      "batch_norm_0.w_1": ("fill_constant", 0.0), "batch_norm_0.w_2": ("fill_constant", 1.0)}
    for n in ("batch_norm_0.w_1", "batch_norm_0.w_2"):
        v = b.var(n)
        assert v.persistable and v.stop_gradient and v.trainable is False
    assert b.var("batch_norm_0.w_0").trainable and not b.var("batch_norm_0.w_0").stop_gradient
    assert b.var("batch_norm_0.tmp_0").stop_gradient
    assert b.out.name == "batch_norm_0.tmp_4" and list(b.out.shape) == [-1, 6, 8, 8]


def test_batch_norm_is_test_names_and_layout():
    def net():
        return pg.nn.batch_norm(data("x", [-1, 8, 8, 6]), is_test=True, momentum=0.99, epsilon=1e-3,
                                data_layout="NHWC", moving_mean_name="mm", moving_variance_name="mv")
    b = Built(net)
    bn = b.ops[0]
    assert "ReserveSpace" not in bn.outputs and bn.output("Y") == ["batch_norm_0.tmp_2"]
    assert bn.input("Mean") == bn.output("MeanOut") == ["mm"] and bn.output("VarianceOut") == ["mv"]
    assert bn.attr("is_test") is True and bn.attr("momentum") == pytest.approx(0.99)
    assert bn.attr("data_layout") == "NHWC" and b.params()["mm"] == [6]
    with pytest.raises(AttrError):
        Built(lambda: pg.nn.batch_norm(data("x", [-1, 6]), bias_attr=False))


def test_layer_norm_layer():
    b = Built(lambda: pg.nn.layer_norm(data("x", [-1, 8, 16]), begin_norm_axis=2))
    (ln,) = b.ops
    assert ln.input("Scale") == ["layer_norm_0.w_0"] and ln.input("Bias") == ["layer_norm_0.b_0"]
    assert ln.output("Mean") == ["layer_norm_0.tmp_0"] and ln.output("Variance") == ["layer_norm_0.tmp_1"]
    assert ln.output("Y") == ["layer_norm_0.tmp_2"] and ln.attr("begin_norm_axis") == 2
    assert b.params() == {"layer_norm_0.w_0": [16], "layer_norm_0.b_0": [16]}
    assert b.init("layer_norm_0.w_0").attr("value") == 1.0 and b.init("layer_norm_0.b_0").attr("value") == 0.0
    assert b.shape("layer_norm_0.tmp_0") == [-1, 8]
    b = Built(lambda: pg.nn.layer_norm(data("x", [-1, 2, 3]), scale=False, shift=False, act="gelu"))
    assert b.types == ["layer_norm", "gelu"] and b.params() == {} and b.ops[0].input("Scale") == []
    assert b.params() == {}


def test_group_norm_and_instance_norm_layers():
    b = Built(lambda: pg.nn.group_norm(data("x", [-1, 8, 4, 4]), groups=4))
    (gn,) = b.ops
    assert gn.attr("groups") == 4 and gn.input("Scale") == ["group_norm_0.w_0"]
    assert b.params() == {"group_norm_0.w_0": [8], "group_norm_0.b_0": [8]}
    assert b.shape(gn.output("Mean")[0]) == [-1, 4]
    with pytest.raises(ShapeError):
        Built(lambda: pg.nn.group_norm(data("x", [-1, 6, 4, 4]), groups=4))
    b = Built(lambda: pg.nn.instance_norm(data("x", [2, 3, 4, 4])))
    (inorm,) = b.ops
    assert b.params() == {"instance_norm_0.w_0": [3], "instance_norm_0.b_0": [3]}
    assert b.shape(inorm.output("SavedMean")[0]) == [6] and b.out.name == "instance_norm_0.tmp_2"
    b = Built(lambda: pg.nn.instance_norm(data("x", [2, 3, 4, 4]), param_attr=False, bias_attr=False))
    assert b.params() == {} and b.ops[0].input("Scale") == []


# -- dropout / embedding ------------------------------------------------------------------------------
def test_dropout_layer():
    b = Built(lambda: pg.nn.dropout(data("x", [-1, 16]), 0.3))
    (op,) = b.ops
    assert op.output("Out") == ["dropout_0.tmp_0"] and op.output("Mask") == ["dropout_0.tmp_1"]
    mask = b.var("dropout_0.tmp_1")
    assert mask.dtype == pb.VarType.UINT8 and list(mask.shape) == [-1, 16] and mask.stop_gradient
    assert op.attr("dropout_prob") == pytest.approx(0.3)
    assert op.attr("dropout_implementation") == "downgrade_in_infer" and op.attr("is_test") is False
    assert not op.has_attr("fix_seed") and not op.has_attr("seed")
    b = Built(lambda: pg.nn.dropout(data("x", [-1, 16]), 0.5, seed=42,
                                    dropout_implementation="upscale_in_train", is_test=True))
    (op,) = b.ops
    assert op.attr("fix_seed") is True and op.attr("seed") == 42 and op.attr("is_test") is True
    assert op.attr("dropout_implementation") == "upscale_in_train"
    b = Built(lambda: pg.nn.dropout(data("x", [-1, 16]), 0.5), random_seed=2024)
    assert b.ops[0].attr("fix_seed") is True and b.ops[0].attr("seed") == 2024


@pytest.mark.parametrize("padding_idx, expected", [(None, -1), (-1, 99), (0, 0), (-100, 0)])
def test_embedding_layer(padding_idx, expected):
    b = Built(lambda: pg.nn.embedding(data("ids", [-1, 5], "int64"), (100, 8), padding_idx=padding_idx))
    (op,) = b.ops
    assert op.type == "lookup_table_v2" and op.input("W") == ["embedding_0.w_0"]
    assert op.attr("padding_idx") == expected and op.attr_type("padding_idx") == pb.AttrType.LONG
    assert b.params() == {"embedding_0.w_0": [100, 8]} and list(b.out.shape) == [-1, 5, 8]
    # Paddle: uniform_random +-0.2357022613286972 for [100, 8]
    assert b.init("embedding_0.w_0").attr("max") == pytest.approx(0.2357022613286972)


def test_embedding_errors():
    with pytest.raises(AttrError):
        Built(lambda: pg.nn.embedding(data("ids", [-1, 5], "int64"), (10, 8), padding_idx=10))
    with pytest.raises(DTypeError):
        Built(lambda: pg.nn.embedding(data("ids", [-1, 5], "float32"), (10, 8)))


# -- losses and metrics ----------------------------------------------------------------------------------
def test_softmax_with_cross_entropy_layer():
    def net():
        logits, label = data("logits", [-1, 10]), data("label", [-1, 1], "int64")
        return pg.nn.softmax_with_cross_entropy(logits, label, return_softmax=True)
    b = Built(net)
    loss, softmax = b.out
    (op,) = b.ops
    # Paddle: Softmax tmp_0, Loss tmp_1
    assert softmax.name == "softmax_with_cross_entropy_0.tmp_0" and list(softmax.shape) == [-1, 10]
    assert loss.name == "softmax_with_cross_entropy_0.tmp_1" and list(loss.shape) == [-1, 1]
    assert op.attr("soft_label") is False and op.attr("ignore_index") == -100
    assert op.attr("numeric_stable_mode") is True and op.attr("axis") == -1


def test_cross_entropy_layer_uses_cross_entropy2_for_hard_labels():
    def net():
        prob, label = data("prob", [-1, 10]), data("label", [-1, 1], "int64")
        return pg.nn.cross_entropy(prob, label)
    b = Built(net)
    (op,) = b.ops
    assert op.type == "cross_entropy2" and op.output("Y") == ["cross_entropy2_0.tmp_0"]
    assert op.output("XShape") == ["cross_entropy2_0.tmp_1"] and op.output("MatchX") == ["cross_entropy2_0.tmp_2"]
    assert list(b.out.shape) == [-1, 1] and op.attr("ignore_index") == -100

    def soft():
        return pg.nn.cross_entropy(data("prob", [-1, 10]), data("label", [-1, 10]), soft_label=True)
    b = Built(soft)
    assert b.types == ["cross_entropy"] and b.ops[0].attr("soft_label") is True
    assert list(b.out.shape) == [-1, 1]


def test_sigmoid_cross_entropy_layer():
    b = Built(lambda: pg.nn.sigmoid_cross_entropy_with_logits(data("x", [-1, 3]), data("y", [-1, 3]),
                                                              normalize=True))
    (op,) = b.ops
    assert op.attr("normalize") is True and op.attr("ignore_index") == -100 and list(b.out.shape) == [-1, 3]


def test_accuracy_layer():
    def net():
        return pg.nn.accuracy(data("prob", [-1, 10]), data("label", [-1, 1], "int64"), k=2)
    b = Built(net)
    assert b.types == ["top_k_v2", "accuracy"]
    topk, acc = b.ops
    # Paddle: top_k_v2 k=2 sorted=False -> accuracy_0.tmp_0 / tmp_1; Accuracy tmp_2, Correct tmp_3, Total tmp_4
    assert topk.attr("k") == 2 and topk.attr("sorted") is False
    assert topk.output("Out") == ["accuracy_0.tmp_0"] and topk.output("Indices") == ["accuracy_0.tmp_1"]
    assert acc.input("Out") == ["accuracy_0.tmp_0"] and acc.input("Indices") == ["accuracy_0.tmp_1"]
    assert acc.output("Correct") == ["accuracy_0.tmp_3"] and acc.output("Total") == ["accuracy_0.tmp_4"]
    assert b.out.name == "accuracy_0.tmp_2" and b.out.dtype == F32 and list(b.out.shape) == []
    assert b.var("accuracy_0.tmp_1").dtype == pb.VarType.INT64
    assert b.var("accuracy_0.tmp_3").dtype == pb.VarType.INT32


# -- misc ---------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("mode, fmt, alpha", [("all", "NCHW", [1]), ("channel", "NCHW", [1, 4, 1, 1]),
                                              ("channel", "NHWC", [1, 1, 1, 9]),
                                              ("element", "NCHW", [1, 4, 9, 9])])
def test_prelu_layer(mode, fmt, alpha):
    b = Built(lambda: pg.nn.prelu(data("x", [-1, 4, 9, 9]), mode, data_format=fmt))
    (op,) = b.ops
    assert op.attr("mode") == mode and op.attr("data_format") == fmt
    assert b.params() == {"prelu_0.w_0": alpha}
    assert b.init("prelu_0.w_0").attr("value") == 0.25 and b.out.name == "prelu_0.tmp_0"


def test_interpolate_layers():
    b = Built(lambda: pg.nn.interpolate(data("x", [-1, 4, 9, 9]), scale_factor=2))
    (op,) = b.ops
    # Paddle: nearest_interp_v2, out_d/h/w -1, scale [2.0, 2.0], align_corners False, align_mode 0
    assert op.type == "nearest_interp_v2" and op.output("Out") == ["nearest_interp_v2_0.tmp_0"]
    assert (op.attr("out_d"), op.attr("out_h"), op.attr("out_w")) == (-1, -1, -1)
    assert op.attr("scale") == [2.0, 2.0] and op.attr("interp_method") == "nearest"
    assert op.attr("align_corners") is False and op.attr("align_mode") == 0
    assert list(b.out.shape) == [-1, 4, 18, 18]
    b = Built(lambda: pg.nn.interpolate(data("x", [-1, 4, 9, 9]), size=[5, 6], mode="bilinear"))
    op = b.ops[0]
    assert op.type == "bilinear_interp_v2" and op.attr("scale") == []
    assert (op.attr("out_h"), op.attr("out_w")) == (5, 6)
    assert list(b.out.shape) == [-1, 4, 5, 6]
    b = Built(lambda: pg.nn.resize_bilinear(data("x", [-1, 4, 9, 9]), out_shape=[3, 3]))
    assert b.ops[0].attr("align_corners") is True and b.ops[0].attr("align_mode") == 1
    b = Built(lambda: pg.nn.resize_nearest(data("x", [-1, 4, 9, 9]), scale=0.5))
    assert b.ops[0].type == "nearest_interp_v2" and list(b.out.shape) == [-1, 4, 4, 4]
    with pytest.raises(AttrError):
        Built(lambda: pg.nn.interpolate(data("x", [-1, 4, 9, 9]), size=[3, 3], scale_factor=2))


def test_pixel_shuffle_layer():
    b = Built(lambda: pg.nn.pixel_shuffle(data("x", [-1, 8, 3, 3]), 2))
    assert b.ops[0].attr("upscale_factor") == 2 and list(b.out.shape) == [-1, 2, 6, 6]


def test_activations_are_reexported():
    for name in ("relu", "relu6", "gelu", "tanh", "sigmoid", "leaky_relu", "hard_swish", "swish",
                 "softmax", "log_softmax"):
        assert callable(getattr(pg.nn, name)), name
        assert name in pg.nn.__all__
    b = Built(lambda: pg.nn.relu(pg.nn.fc(data("x", [-1, 4]), 3)))
    assert b.types == ["mul", "elementwise_add", "relu"]


def test_small_cnn_end_to_end():
    """A LeNet-like network: shapes flow through every layer, names follow Paddle's counters."""
    def net():
        img = data("img", [-1, 1, 28, 28])
        label = data("label", [-1, 1], "int64")
        h = pg.nn.conv2d(img, 6, 5, padding=2, act="relu")
        h = pg.nn.batch_norm(h)
        h = pg.nn.pool2d(h, 2, "max", 2)
        h = pg.nn.conv2d(h, 16, 5, act="relu")
        h = pg.nn.pool2d(h, 2, "avg", 2)
        h = pg.nn.dropout(h, 0.2)
        logits = pg.nn.fc(h, 10)
        loss = pg.nn.softmax_with_cross_entropy(logits, label)
        return loss, pg.nn.accuracy(logits, label)
    b = Built(net)
    assert b.types == ["conv2d", "elementwise_add", "relu", "batch_norm", "pool2d", "conv2d",
                       "elementwise_add", "relu", "pool2d", "dropout", "mul", "elementwise_add",
                       "softmax_with_cross_entropy", "top_k_v2", "accuracy"]
    assert b.shape("pool2d_1.tmp_0") == [-1, 16, 5, 5]
    assert b.params()["fc_0.w_0"] == [400, 10] and b.params()["conv2d_1.w_0"] == [16, 6, 5, 5]
    assert sorted(b.params()) == sorted(op.output("Out")[0] for op in b.init_ops)
    assert all(dtypes.name(p.dtype) == "float32" for p in b.main.all_parameters())


# -- against programs PaddlePaddle built -------------------------------------------------------------
FIXTURES = Path(__file__).parent / "fixtures" / "paddle"


def _ops_signature(program, skip=("feed", "fetch")):
    """(type, non-empty inputs, non-empty outputs, the op's own attributes) of the forward ops."""
    sig = []
    for op in program.global_block().ops:
        if op.type in skip or op.attr("op_role") != 0:
            continue
        own = registry.get(op.type).attrs
        sig.append((op.type, {k: v for k, v in op.inputs.items() if v},
                    {k: v for k, v in op.outputs.items() if v}, {k: op.attr(k) for k in own}))
    return sig


def _var_types(program, sig):
    block = program.global_block()
    names = {n for _, ins, outs, _ in sig for slot in (ins, outs) for ns in slot.values() for n in ns}
    return {n: (list(block.var(n).shape), block.var(n).dtype) for n in names}


def _load(name):
    # verify=False: training programs hold *_grad ops, whose definitions come later
    return pg.Program.parse_from_string((FIXTURES / f"{name}.pdmodel").read_bytes(), verify=False)


def test_fc_mlp_matches_paddle_training_program():
    """mlp_sgd.train: x[-1,16] -> fc 32 relu -> fc 10 -> softmax_with_cross_entropy (Paddle's
    static.nn.fc); our forward ops, variables and startup init ops must be the same."""
    paddle_main, paddle_startup = _load("mlp_sgd.train"), _load("mlp_sgd.train_startup")
    seed = paddle_startup.global_block().ops[0].attr("seed")

    def net():
        x, label = data("x", [-1, 16]), data("label", [-1, 1], "int64")
        h = pg.nn.fc(x, 32, activation="relu")
        return pg.nn.softmax_with_cross_entropy(pg.nn.fc(h, 10), label)
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = seed
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        net()
    ours, theirs = _ops_signature(main), _ops_signature(paddle_main)
    assert ours == theirs
    assert _var_types(main, ours) == _var_types(paddle_main, theirs)
    params = [op for op in paddle_startup.global_block().ops if op.output("Out")[0] != "learning_rate_0"]
    theirs_init = [(op.type, op.output("Out"), {k: op.attr(k) for k in registry.get(op.type).attrs})
                   for op in params]
    ours_init = [(op.type, op.output("Out"), {k: op.attr(k) for k in registry.get(op.type).attrs})
                 for op in startup.global_block().ops]
    assert ours_init == theirs_init


def test_fc_mlp_matches_paddle_inference_program():
    """mlp_fc (inference): x[-1,16] -> fc 32 relu -> fc 10 (then a separate softmax op, not
    compared)."""
    paddle_main = _load("mlp_fc")
    main = pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, pg.Program()):
        pg.nn.fc(pg.nn.fc(data("x", [-1, 16]), 32, activation="relu"), 10)
    ours, theirs = _ops_signature(main), _ops_signature(paddle_main)[:-1]
    assert paddle_main.global_block().ops[-2].type == "softmax"
    assert ours == theirs
    assert _var_types(main, ours) == _var_types(paddle_main, theirs)
