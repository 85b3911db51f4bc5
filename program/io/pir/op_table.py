"""PIR op -> legacy op: one row per PaddlePaddle 3.x `pd_op` Keel runs.

The facts are PaddlePaddle's own (`paddle/phi/ops/yaml/op_compat.yaml` for the legacy names of
ops, slots and attributes; `ops.yaml` for the order of a PIR op's operands, attributes and
results), checked against the ops PaddlePaddle 3.3.1 writes (tests/fixtures/pir/). A row says,
position by position, where each PIR operand and result goes in the legacy op:

* a slot name: the value is that slot's variable (a vector from builtin.combine fills a
  duplicable slot);
* `Fold(attr, tensor=, tensors=)`: an IntArray or Scalar operand. PaddlePaddle 3.x writes what
  were legacy attributes (reshape's shape, pool2d's ksize, scale's scale) as operands fed by
  `full_int_array` / `full`; a constant one goes back into the attribute, a computed one into
  the legacy tensor slot (`tensor`), or, built by builtin.combine, the tensor-list slot (`tensors`);
* None: an operand or result the legacy op has no slot for (it must then be absent or unused).

`attrs` renames PIR attributes (None drops one that carries no meaning for inference);
`fixed` sets legacy attributes the PIR op does not have; `inplace` names the outputs that
update an input in place (batch_norm's running statistics), written to that input's variable;
`derive` names rules in translate.py (an attribute computed from the operands, as cast's
in_dtype from its input); `requires` names PIR attributes whose other values the legacy op
cannot express (channel_shuffle in NHWC): such a file is refused, naming the value;
`when_absent` names the legacy op written when an optional operand is left out
(deformable_conv without its mask is deformable_conv_v1).
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Fold:
    attr: str | None               # the legacy attribute a constant operand becomes (None: none)
    tensor: str | None = None      # the legacy slot for a computed operand
    tensors: str | None = None     # the legacy slot for a builtin.combine of scalars
    scalar: bool = False           # a Scalar (one number), not an IntArray (a list)
    unknown: int | None = None     # the attribute's entry for an element given by a tensor (expand_v2: -2)


@dataclass(frozen=True)
class Row:
    legacy: str
    inputs: tuple
    outputs: tuple = ("Out",)
    attrs: dict = field(default_factory=dict)
    fixed: dict = field(default_factory=dict)
    inplace: dict = field(default_factory=dict)
    derive: tuple = ()
    requires: dict = field(default_factory=dict)   # PIR attributes the legacy op has only at this value
    when_absent: dict = field(default_factory=dict)  # legacy slot -> the legacy op to write without it


# Attributes PaddlePaddle 3.x writes on many ops that carry no meaning for running them.
IGNORED_ATTRS = frozenset({"struct_name", "op_callstack", "op_namescope", "stop_gradient", "persistable",
                           "place", "is_persistable", "op_dist_attr"})


def _unary(legacy, attrs=None, fixed=None):
    return Row(legacy, ("X",), ("Out",), attrs or {}, fixed or {})


def _binary(legacy, fixed=None):
    return Row(legacy, ("X", "Y"), ("Out",), {}, {"axis": -1, **(fixed or {})})


_AXIS = Fold("axis", tensor="AxisTensor", scalar=True)
_INTERP = Row("", ("X", "OutSize", "SizeTensor", "Scale"), ("Out",), {"data_format": "data_layout"})
_REDUCE = dict(attrs={"keepdim": "keep_dim", "dtype": "out_dtype"}, derive=("reduce_all",))


def _reduce(legacy):
    return Row(legacy, ("X", Fold("dim")), ("Out",), **_REDUCE)


def _interp(legacy):
    return Row(legacy, _INTERP.inputs, _INTERP.outputs, dict(_INTERP.attrs))


ROWS: dict[str, Row] = {
    # -- elementwise, comparison, logic
    **{f"pd_op.{pir}": _binary(legacy) for pir, legacy in {
        "add": "elementwise_add", "subtract": "elementwise_sub", "multiply": "elementwise_mul",
        "divide": "elementwise_div", "maximum": "elementwise_max", "minimum": "elementwise_min",
        "elementwise_pow": "elementwise_pow", "remainder": "elementwise_mod",
        "floor_divide": "elementwise_floordiv", "greater_than": "greater_than", "less_than": "less_than",
        "greater_equal": "greater_equal", "less_equal": "less_equal", "equal": "equal",
        "not_equal": "not_equal"}.items()},
    **{f"pd_op.{name}": Row(name, ("X", "Y")) for name in ("logical_and", "logical_or", "logical_xor")},
    **{f"pd_op.{name}": _unary(name) for name in (
        "relu", "sigmoid", "tanh", "exp", "log", "sqrt", "rsqrt", "abs", "floor", "ceil", "sin", "cos",
        "square", "reciprocal", "silu", "erf", "logical_not", "sign", "softsign", "log1p", "tanh_shrink",
        "logsigmoid", "relu6", "assign", "round")},
    "pd_op.mish": _unary("mish", {"lambda": "threshold"}),
    **{f"pd_op.{name}": _unary(name) for name in ("acos", "asin", "atan", "expm1", "log2", "log10", "stanh",
                                                  "sinh", "cosh", "tan", "asinh", "acosh", "atanh")},
    "pd_op.hardshrink": _unary("hard_shrink"),
    "pd_op.softshrink": _unary("softshrink", {"threshold": "lambda"}),
    "pd_op.add_n": Row("sum", ("X",)),
    **{f"pd_op.{name}": _unary(f"{name}_v2") for name in ("isfinite", "isinf", "isnan")},
    "pd_op.hardswish": _unary("hard_swish"),
    "pd_op.hardsigmoid": _unary("hard_sigmoid"),
    "pd_op.leaky_relu": _unary("leaky_relu", {"negative_slope": "alpha"}),
    "pd_op.elu": _unary("elu"),
    "pd_op.celu": _unary("celu"),
    "pd_op.selu": _unary("selu"),
    "pd_op.gelu": _unary("gelu"),
    "pd_op.swish": _unary("swish"),
    "pd_op.softplus": _unary("softplus"),
    "pd_op.hardtanh": _unary("brelu", {"t_min": "t_min", "t_max": "t_max"}),
    "pd_op.thresholded_relu": _unary("thresholded_relu"),
    "pd_op.pow": _unary("pow", {"y": "factor"}),
    "pd_op.scale": Row("scale", ("X", Fold("scale", tensor="ScaleTensor", scalar=True))),
    "pd_op.clip": Row("clip", ("X", Fold("min", tensor="Min", scalar=True), Fold("max", tensor="Max", scalar=True))),
    "pd_op.where": Row("where", ("Condition", "X", "Y")),
    "pd_op.cast": Row("cast", ("X",), ("Out",), {"dtype": "out_dtype"}, derive=("in_dtype",)),
    "pd_op.full_like": Row("fill_any_like", ("X", Fold("value", scalar=True))),
    "pd_op.softmax": _unary("softmax"),
    "pd_op.log_softmax": _unary("log_softmax"),
    "pd_op.cumsum": Row("cumsum", ("X", Fold("axis", scalar=True))),
    # -- linear algebra, convolution, normalization, pooling
    "pd_op.matmul": Row("matmul_v2", ("X", "Y"), ("Out",), {"transpose_x": "trans_x", "transpose_y": "trans_y"}),
    "pd_op.bmm": Row("bmm", ("X", "Y")),
    "pd_op.conv2d": Row("conv2d", ("Input", "Filter"), ("Output",)),
    "pd_op.depthwise_conv2d": Row("depthwise_conv2d", ("Input", "Filter"), ("Output",)),
    "pd_op.conv2d_transpose": Row("conv2d_transpose", ("Input", "Filter", Fold("output_size")), ("Output",)),
    "pd_op.conv3d": Row("conv3d", ("Input", "Filter"), ("Output",)),
    "pd_op.batch_norm": Row("batch_norm", ("X", "Mean", "Variance", "Scale", "Bias"),
                            ("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"),
                            {"data_format": "data_layout"},
                            inplace={"MeanOut": "Mean", "VarianceOut": "Variance"}),
    "pd_op.instance_norm": Row("instance_norm", ("X", "Scale", "Bias"), ("Y", "SavedMean", "SavedVariance")),
    "pd_op.layer_norm": Row("layer_norm", ("X", "Scale", "Bias"), ("Y", "Mean", "Variance")),
    "pd_op.group_norm": Row("group_norm", ("X", "Scale", "Bias"), ("Y", "Mean", "Variance"),
                            {"data_format": "data_layout"}),
    "pd_op.pool2d": Row("pool2d", ("X", Fold("ksize"))),
    "pd_op.pool3d": Row("pool3d", ("X",), ("Out",), {"kernel_size": "ksize"}),
    "pd_op.prelu": Row("prelu", ("X", "Alpha")),
    "pd_op.dropout": Row("dropout", ("X", "Seed", Fold("dropout_prob", scalar=True)), ("Out", "Mask"),
                         {"p": "dropout_prob", "mode": "dropout_implementation"}),
    "pd_op.embedding": Row("lookup_table_v2", ("Ids", "W"), ("Out",), {"sparse": None}),  # (a training hint)
    "pd_op.affine_channel": Row("affine_channel", ("X", "Scale", "Bias"), ("Out",), {"data_format": "data_layout"}),
    # -- shape manipulation
    "pd_op.reshape": Row("reshape2", ("X", Fold("shape", tensor="Shape", tensors="ShapeTensor")), ("Out", "XShape")),
    "pd_op.transpose": Row("transpose2", ("X",), ("Out", "XShape"), {"perm": "axis"}),
    "pd_op.flatten": Row("flatten_contiguous_range", ("X",), ("Out", "XShape")),
    "pd_op.squeeze": Row("squeeze2", ("X", Fold("axes")), ("Out", "XShape")),
    "pd_op.unsqueeze": Row("unsqueeze2", ("X", Fold("axes", tensor="AxesTensor", tensors="AxesTensorList")),
                           ("Out", "XShape")),
    "pd_op.concat": Row("concat", ("X", _AXIS)),
    "pd_op.split": Row("split", ("X", Fold("sections", tensors="SectionsTensorList"), _AXIS)),
    "pd_op.split_with_num": Row("split", ("X", _AXIS)),
    "pd_op.stack": Row("stack", ("X",), ("Y",)),
    "pd_op.slice": Row("slice", ("Input", Fold("starts", tensor="StartsTensor", tensors="StartsTensorList"),
                                 Fold("ends", tensor="EndsTensor", tensors="EndsTensorList"))),
    "pd_op.strided_slice": Row("strided_slice", ("Input", Fold("starts", tensor="StartsTensor",
                                                               tensors="StartsTensorList"),
                                                 Fold("ends", tensor="EndsTensor", tensors="EndsTensorList"),
                                                 Fold("strides", tensor="StridesTensor",
                                                      tensors="StridesTensorList"))),
    # x[index] = value (set_value_ writes x in place; its value is the `values` attribute, or a tensor)
    **{name: Row("set_value", ("Input", *(("ValueTensor",) if "tensor" in name else ()),
                               Fold("starts", tensors="StartsTensorList"), Fold("ends", tensors="EndsTensorList"),
                               Fold("steps", tensors="StepsTensorList")),
                 inplace={"Out": "Input"} if name.endswith("_") else {}, derive=("value_dtype",))
       for name in ("pd_op.set_value", "pd_op.set_value_", "pd_op.set_value_with_tensor",
                    "pd_op.set_value_with_tensor_")},
    "pd_op.tile": Row("tile", ("X", Fold("repeat_times", tensor="RepeatTimes", tensors="repeat_times_tensor"))),
    "pd_op.expand": Row("expand_v2", ("X", Fold("shape", tensor="Shape", tensors="expand_shapes_tensor",
                                                unknown=-2))),
    "pd_op.full_with_tensor": Row("fill_constant", ("ValueTensor", Fold("shape", tensor="ShapeTensor",
                                                                         tensors="ShapeTensorList"))),
    # -- detection
    "pd_op.prior_box": Row("prior_box", ("Input", "Image"), ("Boxes", "Variances")),
    "pd_op.density_prior_box": Row("density_prior_box", ("Input", "Image"), ("Boxes", "Variances")),
    "pd_op.anchor_generator": Row("anchor_generator", ("Input",), ("Anchors", "Variances")),
    "pd_op.yolo_box": Row("yolo_box", ("X", "ImgSize"), ("Boxes", "Scores")),
    "pd_op.box_coder": Row("box_coder", ("PriorBox", "PriorBoxVar", "TargetBox"), ("OutputBox",)),
    "pd_op.multiclass_nms3": Row("multiclass_nms3", ("BBoxes", "Scores", "RoisNum"), ("Out", "Index", "NmsRoisNum")),
    "pd_op.generate_proposals": Row("generate_proposals_v2", ("Scores", "BboxDeltas", "ImShape", "Anchors",
                                                              "Variances"), ("RpnRois", "RpnRoiProbs", "RpnRoisNum"),
                                     {"pre_nms_top_n": "pre_nms_topN", "post_nms_top_n": "post_nms_topN"}),
    "pd_op.roi_align": Row("roi_align", ("X", "ROIs", "RoisNum")),
    "pd_op.affine_grid": Row("affine_grid", ("Theta", Fold("output_shape", tensor="OutputShape")), ("Output",)),
    "pd_op.expand_as": Row("expand_as_v2", ("X", "Y")),
    "pd_op.gather": Row("gather", ("X", "Index", Fold("axis", tensor="Axis", scalar=True))),
    "pd_op.gather_nd": Row("gather_nd", ("X", "Index")),
    "pd_op.index_select": Row("index_select", ("X", "Index"), ("Out",), {"axis": "dim"}),
    "pd_op.pad3d": Row("pad3d", ("X", Fold("paddings", tensor="Paddings")), ("Out",), {"pad_value": "value"}),
    "pd_op.pad": Row("pad", ("X", Fold("pad_value", scalar=True))),
    "pd_op.shape": Row("shape", ("Input",)),
    "pd_op.one_hot": Row("one_hot_v2", ("X", Fold("depth", tensor="depth_tensor", scalar=True))),
    "pd_op.topk": Row("top_k_v2", ("X", Fold("k", tensor="K", scalar=True)), ("Out", "Indices")),
    "pd_op.argmax": Row("arg_max", ("X", Fold("axis", scalar=True))),
    "pd_op.argmin": Row("arg_min", ("X", Fold("axis", scalar=True))),
    "pd_op.argsort": Row("argsort", ("X",), ("Out", "Indices")),
    "pd_op.arange": Row("range", ("Start", "End", "Step"), ("Out",), {"dtype": None}),  # (the operands' dtype)
    "pd_op.grid_sample": Row("grid_sampler", ("X", "Grid"), ("Output",)),
    "pd_op.tril": Row("tril_triu", ("X",), ("Out",), fixed={"lower": True}),
    "pd_op.triu": Row("tril_triu", ("X",), ("Out",), fixed={"lower": False}),
    "pd_op.flip": _unary("flip"),
    "pd_op.roll": Row("roll", ("X", Fold("shifts", tensor="ShiftsTensor"))),
    "pd_op.pixel_shuffle": _unary("pixel_shuffle"),
    "pd_op.shuffle_channel": _unary("shuffle_channel"),
    "pd_op.channel_shuffle": Row("shuffle_channel", ("X",), ("Out",), {"groups": "group", "data_format": None},
                                 requires={"data_format": "NCHW"}),
    "pd_op.unstack": Row("unstack", ("X",), ("Y",)),
    "pd_op.unfold": Row("unfold", ("X",), ("Y",)),
    "pd_op.maxout": _unary("maxout"),
    "pd_op.lrn": Row("lrn", ("X",), ("Out", "MidOut")),
    "pd_op.einsum": Row("einsum", ("Operands",), ("Out", "InnerCache", "XShape")),
    "pd_op.label_smooth": Row("label_smooth", ("X", "PriorDist")),
    "pd_op.linspace": Row("linspace", ("Start", "Stop", "Num")),
    "pd_op.take_along_axis": Row("take_along_axis", ("Input", "Index"), ("Result",), {"axis": "Axis"}),
    "pd_op.put_along_axis": Row("put_along_axis", ("Input", "Index", "Value"), ("Result",),
                                {"axis": "Axis", "reduce": "Reduce", "include_self": "Include_self"}),
    "pd_op.scatter": Row("scatter", ("X", "Ids", "Updates")),
    "pd_op.scatter_nd_add": Row("scatter_nd_add", ("X", "Index", "Updates")),
    "pd_op.nonzero": Row("where_index", ("Condition",)),
    "pd_op.numel": Row("size", ("Input",)),
    "pd_op.increment": Row("increment", ("X",), ("Out",), {"value": "step"}),
    "pd_op.dist": Row("dist", ("X", "Y")),
    "pd_op.norm": Row("norm", ("X",), ("Out", "Norm")),
    "pd_op.clip_by_norm": _unary("clip_by_norm"),
    "pd_op.squared_l2_norm": _unary("squared_l2_norm"),
    "pd_op.max_pool2d_with_index": Row("max_pool2d_with_index", ("X",), ("Out", "Mask"), {"kernel_size": "ksize"}),
    "pd_op.max_pool3d_with_index": Row("max_pool3d_with_index", ("X",), ("Out", "Mask"), {"kernel_size": "ksize"}),
    "pd_op.unpool": Row("unpool", ("X", "Indices", Fold("output_size")), ("Out",), {"padding": "paddings"},
                        fixed={"unpooling_type": "max"}),
    "pd_op.unpool3d": Row("unpool3d", ("X", "Indices"), ("Out",), {"padding": "paddings"}),
    "pd_op.full_batch_size_like": Row("fill_constant_batch_size_like", ("Input",)),
    "pd_op.fc": Row("fc", ("Input", "W", "Bias")),
    "pd_op.matmul_with_flatten": Row("mul", ("X", "Y")),
    "pd_op.cross_entropy_with_softmax": Row("softmax_with_cross_entropy", ("Logits", "Label"), ("Softmax", "Loss")),
    "pd_op.sync_batch_norm": Row("sync_batch_norm", ("X", "Mean", "Variance", "Scale", "Bias"),
                                 ("Y", "MeanOut", "VarianceOut", "SavedMean", "SavedVariance", "ReserveSpace"),
                                 {"data_format": "data_layout"}, inplace={"MeanOut": "Mean", "VarianceOut": "Variance"}),
    "pd_op.conv3d_transpose": Row("conv3d_transpose", ("Input", "Filter", Fold("output_size")), ("Output",)),
    "pd_op.deformable_conv": Row("deformable_conv", ("Input", "Offset", "Filter", "Mask"), ("Output",),
                                 when_absent={"Mask": "deformable_conv_v1"}),
    "pd_op.roi_pool": Row("roi_pool", ("X", "ROIs", "RoisNum"), ("Out", "Argmax")),
    "pd_op.matrix_nms": Row("matrix_nms", ("BBoxes", "Scores"), ("Out", "Index", "RoisNum")),
    "pd_op.distribute_fpn_proposals": Row("distribute_fpn_proposals", ("FpnRois", "RoisNum"),
                                          ("MultiFpnRois", "MultiLevelRoIsNum", "RestoreIndex")),
    "pd_op.ctc_align": Row("ctc_align", ("Input", "InputLength"), ("Output", "OutputLength")),
    # -- reductions
    "pd_op.mean": _reduce("reduce_mean"),
    "pd_op.sum": _reduce("reduce_sum"),
    "pd_op.max": _reduce("reduce_max"),
    "pd_op.min": _reduce("reduce_min"),
    "pd_op.prod": Row("reduce_prod", ("X", Fold("dim")), ("Out",), {"keepdim": "keep_dim"},
                      derive=("reduce_all",)),
    "pd_op.all": Row("reduce_all", ("X",), ("Out",), {"axis": "dim", "keepdim": "keep_dim"}, derive=("reduce_all",)),
    "pd_op.any": Row("reduce_any", ("X",), ("Out",), {"axis": "dim", "keepdim": "keep_dim"}, derive=("reduce_all",)),
    "pd_op.p_norm": _unary("p_norm"),
    # -- interpolation
    **{f"pd_op.{m}_interp": _interp(f"{m}_interp_v2") for m in ("nearest", "bilinear", "linear", "trilinear")},
    # losses
    "pd_op.bce_loss": Row("bce_loss", ("X", "Label")),
    "pd_op.sigmoid_cross_entropy_with_logits": Row("sigmoid_cross_entropy_with_logits", ("X", "Label", "pos_weight")),
    "pd_op.kldiv_loss": Row("kldiv_loss", ("X", "Target"), ("Loss",)),
    "pd_op.huber_loss": Row("huber_loss", ("X", "Y"), ("Out", "Residual")),
    # linear algebra, col2im
    "pd_op.det": Row("determinant", ("Input",)),
    "pd_op.inverse": Row("inverse", ("Input",), ("Output",)),
    "pd_op.solve": Row("solve", ("X", "Y")),
    "pd_op.cholesky": _unary("cholesky"),
    "pd_op.fold": Row("fold", ("X",), ("Y",)),
    "pd_op.mean_all": _unary("mean"),
    "pd_op.svd": Row("svd", ("X",), ("U", "S", "VH")),
    "pd_op.qr": Row("qr", ("X",), ("Q", "R")),
    "pd_op.eigh": Row("eigh", ("X",), ("Eigenvalues", "Eigenvectors")),
    "pd_op.frobenius_norm": Row("frobenius_norm", ("X", Fold("dim"))),
    "pd_op.histogram": Row("histogram", ("X", "Weight")),
    **{f"pd_op.{name}": Row(name, ("X", "Y")) for name in ("bitwise_and", "bitwise_or", "bitwise_xor")},
    "pd_op.bitwise_not": _unary("bitwise_not"),
    # -- recurrent
    "pd_op.rnn": Row("rnn", ("Input", "PreState", "WeightList", "SequenceLength", None),
                     ("Out", "DropoutState", "State", "Reserve"), {"dropout_prob": "dropout_prob"}),
}
# In-place forms (`relu_`, `batch_norm_`, ...): the same legacy op (PaddlePaddle 3.x writes
# `name_` for the in-place variant of `name` with the same operands and results).
ROWS.update({f"{name}_": row for name, row in list(ROWS.items())
             if name.startswith("pd_op.") and f"{name}_" not in ROWS})
