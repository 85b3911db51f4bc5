"""What PaddlePaddle 3.3.1's deserializer requires of each PIR op Keel writes: how many results
it has and, in order, every attribute with its kind. PaddlePaddle checks both when it loads a
file (`VerifySig`: "Expected attributes.count("transpose_x") > 0", "attributes.at("axis")
.isa<pir::Int32Attribute>()"), so an attribute left out or written at another width makes the
file unloadable; attributes beyond these (struct_name) are allowed.

Facts from `paddle/phi/ops/yaml/ops.yaml` (argument order and types) as PaddlePaddle 3.3.1
writes them: each row was read off files 3.3.1 wrote (tests/fixtures/pir/, version 4;
signatures_3_3_1.json.gz holds the ops no model there has), the widths of older files raised
as the version patches say (FORMAT.md). An op without a row here
is written with its legacy attributes at their legacy kinds (Keel reads that back; PaddlePaddle
may not), and tests/test_pir_writer.py checks every row against the fixtures.

Kinds: bool, i32, i64, f32, f64, str; i32s, i64s, f32s, f64s, strs (a_array of those);
intarray (1.a_intarray), dtype (1.a_dtype), place (1.a_place); scalars (an a_array of Scalars,
each of the kind of the op's dtype: assign_value's values).
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Signature:
    results: int
    attrs: tuple            # ((name, kind), ...) in PaddlePaddle's order
    operands: int | None = None   # fewer operands than the reader's row takes (the rest are attributes)


def _sig(results: int, attrs: str = "", operands: int | None = None) -> Signature:
    return Signature(results, tuple(tuple(item.split(":")) for item in attrs.split()), operands)


SIGNATURES: dict[str, Signature] = {
    "pd_op.abs": _sig(1),
    "pd_op.acos": _sig(1),
    "pd_op.add": _sig(1),
    "pd_op.affine_grid": _sig(1, "align_corners:bool"),
    "pd_op.all": _sig(1, "axis:i64s keepdim:bool"),
    "pd_op.anchor_generator": _sig(2, "anchor_sizes:f32s aspect_ratios:f32s variances:f32s stride:f32s offset:f32"),
    "pd_op.any": _sig(1, "axis:i64s keepdim:bool"),
    "pd_op.arange": _sig(1, "dtype:dtype place:place"),
    "pd_op.argmax": _sig(1, "keepdims:bool flatten:bool dtype:dtype"),
    "pd_op.argmin": _sig(1, "keepdims:bool flatten:bool dtype:dtype"),
    "pd_op.argsort": _sig(2, "axis:i32 descending:bool stable:bool"),
    "pd_op.array_length": _sig(1),
    "pd_op.array_read": _sig(1),
    "pd_op.array_to_tensor": _sig(2, "axis:i32 use_stack:bool"),
    "pd_op.array_write_": _sig(1),
    "pd_op.asin": _sig(1),
    "pd_op.assign": _sig(1),
    "pd_op.assign_out_": _sig(1),
    "pd_op.assign_value": _sig(1, "shape:i32s dtype:dtype values:scalars place:place"),
    "pd_op.atan": _sig(1),
    "pd_op.batch_norm_": _sig(6, "is_test:bool momentum:f32 epsilon:f32 data_format:str use_global_stats:bool "
                   "trainable_statistics:bool"),
    "pd_op.bilinear_interp": _sig(1, "data_format:str out_d:i32 out_h:i32 out_w:i32 scale:f64s interp_method:str "
                   "align_corners:bool align_mode:i32"),
    "pd_op.bmm": _sig(1),
    "pd_op.box_coder": _sig(1, "code_type:str box_normalized:bool axis:i32 variance:f32s"),
    "pd_op.cast": _sig(1, "dtype:dtype"),
    "pd_op.ceil": _sig(1),
    "pd_op.celu": _sig(1, "alpha:f32"),
    "pd_op.channel_shuffle": _sig(1, "groups:i32 data_format:str"),
    "pd_op.clip": _sig(1),
    "pd_op.concat": _sig(1),
    "pd_op.conv2d": _sig(1, "strides:i32s paddings:i32s padding_algorithm:str dilations:i32s groups:i32 "
                   "data_format:str"),
    "pd_op.conv2d_transpose": _sig(1, "strides:i32s paddings:i32s output_padding:i32s padding_algorithm:str groups:i32 "
                   "dilations:i32s data_format:str"),
    "pd_op.conv3d": _sig(1, "strides:i32s paddings:i32s padding_algorithm:str groups:i32 dilations:i32s "
                   "data_format:str"),
    # (conv3d_transpose takes output_size as an attribute; the reader also takes it as an operand)
    "pd_op.conv3d_transpose": _sig(1, "strides:i32s paddings:i32s output_padding:i32s output_size:i32s "
                                   "padding_algorithm:str groups:i32 dilations:i32s data_format:str", operands=2),
    "pd_op.cos": _sig(1),
    "pd_op.create_array": _sig(1, "dtype:dtype"),
    "pd_op.cumsum": _sig(1, "flatten:bool exclusive:bool reverse:bool"),
    "pd_op.data": _sig(1, "name:str shape:intarray dtype:dtype place:place"),
    "pd_op.deformable_conv": _sig(1, "strides:i32s paddings:i32s dilations:i32s deformable_groups:i32 groups:i32 "
                   "im2col_step:i32"),
    "pd_op.depthwise_conv2d": _sig(1, "strides:i32s paddings:i32s padding_algorithm:str groups:i32 dilations:i32s "
                   "data_format:str"),
    "pd_op.dist": _sig(1, "p:f32"),
    "pd_op.divide": _sig(1),
    "pd_op.dropout": _sig(2, "is_test:bool mode:str seed:i32 fix_seed:bool"),
    "pd_op.einsum": _sig(3, "equation:str"),
    "pd_op.elementwise_pow": _sig(1),
    "pd_op.elu": _sig(1, "alpha:f32"),
    "pd_op.embedding": _sig(1, "padding_idx:i64 sparse:bool"),
    "pd_op.equal": _sig(1),
    "pd_op.erf": _sig(1),
    "pd_op.exp": _sig(1),
    "pd_op.expand": _sig(1),
    "pd_op.expand_as": _sig(1, "target_shape:i64s"),
    "pd_op.expm1": _sig(1),
    "pd_op.feed": _sig(1, "name:str col:i32"),
    "pd_op.fetch": _sig(1, "name:str col:i32"),
    "pd_op.flatten": _sig(1, "start_axis:i32 stop_axis:i32"),
    "pd_op.flip": _sig(1, "axis:i32s"),
    "pd_op.floor": _sig(1),
    "pd_op.floor_divide": _sig(1),
    "pd_op.full": _sig(1, "shape:intarray value:f64 dtype:dtype place:place"),
    "pd_op.full_batch_size_like": _sig(1, "shape:i32s dtype:dtype value:f32 input_dim_idx:i32 output_dim_idx:i32 "
                   "place:place"),
    "pd_op.full_int_array": _sig(1, "value:i64s dtype:dtype place:place"),
    "pd_op.full_like": _sig(1, "dtype:dtype place:place"),
    "pd_op.full_with_tensor": _sig(1, "dtype:dtype"),
    "pd_op.gather": _sig(1),
    "pd_op.gather_nd": _sig(1),
    "pd_op.gelu": _sig(1, "approximate:bool"),
    "pd_op.generate_proposals": _sig(3, "pre_nms_top_n:i32 post_nms_top_n:i32 nms_thresh:f32 min_size:f32 eta:f32 "
                   "pixel_offset:bool"),
    "pd_op.greater_equal": _sig(1),
    "pd_op.greater_than": _sig(1),
    "pd_op.grid_sample": _sig(1, "mode:str padding_mode:str align_corners:bool"),
    "pd_op.group_norm": _sig(3, "epsilon:f64 groups:i32 data_format:str"),
    "pd_op.hardsigmoid": _sig(1, "slope:f32 offset:f32"),
    "pd_op.hardswish": _sig(1),
    "pd_op.hardtanh": _sig(1, "t_min:f32 t_max:f32"),
    "pd_op.index_select": _sig(1, "axis:i32"),
    "pd_op.instance_norm": _sig(3, "epsilon:f32"),
    "pd_op.isfinite": _sig(1),
    "pd_op.isinf": _sig(1),
    "pd_op.isnan": _sig(1),
    "pd_op.label_smooth": _sig(1, "epsilon:f32"),
    "pd_op.layer_norm": _sig(3, "epsilon:f32 begin_norm_axis:i32"),
    "pd_op.leaky_relu": _sig(1, "negative_slope:f64"),
    "pd_op.less_equal": _sig(1),
    "pd_op.less_than": _sig(1),
    "pd_op.log": _sig(1),
    "pd_op.log10": _sig(1),
    "pd_op.log1p": _sig(1),
    "pd_op.log2": _sig(1),
    "pd_op.log_softmax": _sig(1, "axis:i32"),
    "pd_op.logical_and": _sig(1),
    "pd_op.logical_not": _sig(1),
    "pd_op.logical_or": _sig(1),
    "pd_op.logical_xor": _sig(1),
    "pd_op.logsigmoid": _sig(1),
    "pd_op.matmul": _sig(1, "transpose_x:bool transpose_y:bool"),
    "pd_op.matmul_with_flatten": _sig(1, "x_num_col_dims:i32 y_num_col_dims:i32"),  # (ops.yaml)
    "pd_op.max": _sig(1, "keepdim:bool"),
    "pd_op.max_pool2d_with_index": _sig(2, "kernel_size:i32s strides:i32s paddings:i32s global_pooling:bool "
                                           "adaptive:bool ceil_mode:bool"),
    "pd_op.max_pool3d_with_index": _sig(2, "kernel_size:i32s strides:i32s paddings:i32s global_pooling:bool "
                                           "adaptive:bool ceil_mode:bool"),
    "pd_op.maximum": _sig(1),
    "pd_op.maxout": _sig(1, "groups:i32 axis:i32"),
    "pd_op.mean": _sig(1, "keepdim:bool"),
    "pd_op.min": _sig(1, "keepdim:bool"),
    "pd_op.minimum": _sig(1),
    "pd_op.multiclass_nms3": _sig(3, "score_threshold:f32 nms_top_k:i32 keep_top_k:i32 nms_threshold:f32 "
                   "normalized:bool nms_eta:f32 background_label:i32"),
    "pd_op.multiply": _sig(1),
    "pd_op.nearest_interp": _sig(1, "data_format:str out_d:i32 out_h:i32 out_w:i32 scale:f64s interp_method:str "
                   "align_corners:bool align_mode:i32"),
    "pd_op.nonzero": _sig(1),
    "pd_op.not_equal": _sig(1),
    "pd_op.numel": _sig(1),
    "pd_op.one_hot": _sig(1),
    "pd_op.p_norm": _sig(1, "porder:f32 axis:i32 epsilon:f32 keepdim:bool asvector:bool"),
    "pd_op.pad": _sig(1, "paddings:i32s"),
    "pd_op.pad3d": _sig(1, "mode:str pad_value:f64 data_format:str"),
    "pd_op.pixel_shuffle": _sig(1, "upscale_factor:i32 data_format:str"),
    "pd_op.pool2d": _sig(1, "strides:i64s paddings:i64s ceil_mode:bool exclusive:bool data_format:str "
                   "pooling_type:str global_pooling:bool adaptive:bool padding_algorithm:str"),
    "pd_op.pool3d": _sig(1, "kernel_size:i64s strides:i64s paddings:i64s ceil_mode:bool exclusive:bool "
                   "data_format:str pooling_type:str global_pooling:bool adaptive:bool "
                   "padding_algorithm:str"),
    "pd_op.pow": _sig(1, "y:f32"),
    "pd_op.prelu": _sig(1, "data_format:str mode:str"),
    "pd_op.prior_box": _sig(2, "min_sizes:f32s max_sizes:f32s aspect_ratios:f32s variances:f32s flip:bool "
                   "clip:bool step_w:f32 step_h:f32 offset:f32 min_max_aspect_ratios_order:bool"),
    "pd_op.prod": _sig(1, "keepdim:bool reduce_all:bool"),
    "pd_op.put_along_axis": _sig(1, "axis:i32 reduce:str include_self:bool"),
    "pd_op.reciprocal": _sig(1),
    "pd_op.relu": _sig(1),
    "pd_op.relu6": _sig(1),
    "pd_op.remainder": _sig(1),
    "pd_op.reshape": _sig(1),
    "pd_op.rnn": _sig(4, "dropout_prob:f32 is_bidirec:bool input_size:i32 hidden_size:i32 num_layers:i32 "
                   "mode:str seed:i32 is_test:bool"),
    "pd_op.roi_align": _sig(1, "pooled_height:i32 pooled_width:i32 spatial_scale:f32 sampling_ratio:i32 "
                   "aligned:bool"),
    "pd_op.roll": _sig(1, "axis:i64s"),
    "pd_op.round": _sig(1, "decimals:i32"),
    "pd_op.rsqrt": _sig(1),
    "pd_op.scale": _sig(1, "bias:f32 bias_after_scale:bool"),
    "pd_op.scatter": _sig(1, "overwrite:bool"),
    "pd_op.scatter_nd_add": _sig(1),
    "pd_op.select_input": _sig(1),
    "pd_op.selu": _sig(1, "scale:f32 alpha:f32"),
    "pd_op.set_value_": _sig(1, "axes:i64s decrease_axes:i64s none_axes:i64s shape:i64s values:f64s"),
    "pd_op.set_value_with_tensor_": _sig(1, "axes:i64s decrease_axes:i64s none_axes:i64s"),
    "pd_op.shape": _sig(1),
    "pd_op.shape64": _sig(1),
    "pd_op.sigmoid": _sig(1),
    "pd_op.sign": _sig(1),
    "pd_op.silu": _sig(1),
    "pd_op.sin": _sig(1),
    "pd_op.slice": _sig(1, "axes:i64s infer_flags:i64s decrease_axis:i64s"),
    "pd_op.softmax": _sig(1, "axis:i32"),
    "pd_op.softplus": _sig(1, "beta:f64 threshold:f64"),
    "pd_op.softsign": _sig(1),
    "pd_op.split": _sig(1),
    "pd_op.split_with_num": _sig(1, "num:i32"),
    "pd_op.sqrt": _sig(1),
    "pd_op.square": _sig(1),
    "pd_op.squeeze": _sig(1),
    "pd_op.stack": _sig(1, "axis:i32"),
    "pd_op.stanh": _sig(1, "scale_a:f32 scale_b:f32"),
    "pd_op.strided_slice": _sig(1, "axes:i32s"),
    "pd_op.subtract": _sig(1),
    "pd_op.sum": _sig(1, "dtype:dtype keepdim:bool"),
    "pd_op.swish": _sig(1),
    "pd_op.take_along_axis": _sig(1, "axis:i32"),
    "pd_op.tanh": _sig(1),
    "pd_op.tanh_shrink": _sig(1),
    "pd_op.thresholded_relu": _sig(1, "threshold:f32 value:f32"),
    "pd_op.tile": _sig(1),
    "pd_op.topk": _sig(2, "axis:i32 largest:bool sorted:bool"),
    "pd_op.transpose": _sig(1, "perm:i32s"),
    "pd_op.tril": _sig(1, "diagonal:i32"),
    "pd_op.triu": _sig(1, "diagonal:i32"),
    "pd_op.unfold": _sig(1, "kernel_sizes:i32s strides:i32s paddings:i32s dilations:i32s"),
    "pd_op.unpool": _sig(1, "ksize:i32s strides:i32s padding:i32s data_format:str"),
    "pd_op.unsqueeze": _sig(1),
    "pd_op.unstack": _sig(1, "axis:i32 num:i32"),
    "pd_op.where": _sig(1),
    "pd_op.yolo_box": _sig(2, "anchors:i32s class_num:i32 conf_thresh:f32 downsample_ratio:i32 clip_bbox:bool "
                   "scale_x_y:f32 iou_aware:bool iou_aware_factor:f32"),
}
