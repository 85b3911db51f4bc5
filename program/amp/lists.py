"""The op lists of PaddlePaddle 3.3.1's static AMP (python/paddle/amp/amp_lists.py and
python/paddle/static/amp/fp16_lists.py): white ops compute in float16/bfloat16, black ops
in float32, gray ops follow their inputs; any other op computes in float32 under O1."""
from __future__ import annotations

import copy

from keel.program.ops import registry

WHITE_LIST = {"conv2d", "einsum", "matmul", "matmul_v2", "linear_v2", "max_pool2d_with_index", "mul",
              "fused_gemm_epilogue", "fused_rotary_position_embedding", "flash_attn"}
ONLY_FP16_WHITE_LIST = {"fake_quantize_dequantize_abs_max", "fake_quantize_dequantize_moving_average_abs_max",
                        "fused_attention", "fused_feedforward"}
FP16_WHITE_LIST = WHITE_LIST | ONLY_FP16_WHITE_LIST
FP16_BLACK_LIST = {
    "tan", "acos", "asin", "sinh", "cosh", "atanh", "tanh_shrink", "erfinv", "exp", "expm1", "log", "log10",
    "log2", "reciprocal", "rsqrt", "pow", "square", "reduce_sum", "mean", "reduce_mean", "reduce_prod",
    "cumprod", "cumsum", "dist", "pnorm", "frobenius_norm", "renorm", "group_norm", "layer_norm", "softmax",
    "softmin", "softplus", "log_softmax", "softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits",
    "c_softmax_with_cross_entropy", "c_softmax_with_multi_label_cross_entropy", "cross_entropy",
    "cross_entropy2", "nll_loss", "huber_loss", "triplet_margin_loss", "log_loss", "hsigmoid_loss",
    "margin_cross_entropy"}
EXTRA_BLACK_LIST = {"linear_interp_v2", "nearest_interp_v2", "bilinear_interp_v2", "bicubic_interp_v2",
                    "trilinear_interp_v2", "lookup_table", "lookup_table_v2", "scatter"}
GRAY_LIST = {
    "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div", "elementwise_max",
    "elementwise_min", "elementwise_pow", "elementwise_mod", "elementwise_floordiv", "batch_norm", "layer_norm",
    "tanh", "sigmoid", "top_k", "pool2d", "pool3d", "dropout", "relu", "relu6", "leaky_relu", "soft_relu",
    "flatten2", "stack", "unstack", "uniform_random", "uniform_random_batch_size_like", "gaussian_random",
    "slice", "rank", "scale", "transpose2", "reshape2", "gather", "fill_constant",
    "get_tensor_from_selected_rows", "sign", "cast", "fused_bn_add_activation", "c_identity", "c_concat",
    "all_reduce", "concat", "split", "fused_feedforward", "fused_attention", "fused_multi_transformer"}


def check_amp_dtype(dtype) -> str:
    name = dtype.lower() if isinstance(dtype, str) else dtype
    if name not in ("float16", "bfloat16"):
        raise ValueError(f"If enable AMP, dtype should be 'float16' or 'bfloat16', got {dtype!r}")
    return name


class AutoMixedPrecisionLists:
    """The white, black and gray op lists, updated with the user's: an op in
    `custom_white_list` moves to the white list, one in `custom_black_list` to the black (and
    unsupported) list; `custom_black_varnames` keeps ops reading or writing those variables in
    float32. PaddlePaddle asks its device which ops lack a low-precision kernel for
    `unsupported_list`; Keel's kernels take every float type, so it starts empty."""

    def __init__(self, custom_white_list=None, custom_black_list=None, custom_black_varnames=None,
                 dtype="float16"):
        self.amp_dtype = check_amp_dtype(dtype)
        self._custom_white_list = custom_white_list
        self._custom_black_list = custom_black_list
        self.white_list = copy.copy(FP16_WHITE_LIST if self.amp_dtype == "float16" else WHITE_LIST)
        if self.amp_dtype == "float16":
            self.white_list |= {"resnet_unit", "fused_bn_add_activation"}
        self.black_list = FP16_BLACK_LIST | EXTRA_BLACK_LIST
        self.gray_list = copy.copy(GRAY_LIST)
        self.unsupported_list: set[str] = set()
        self.all_list = set(registry.all_ops())  # every op Keel defines (for level "OD")
        self.black_varnames = copy.copy(custom_black_varnames)
        self._update_list()

    def _update_list(self) -> None:
        white, black = self._custom_white_list or (), self._custom_black_list or ()
        overlap = sorted(set(white) & set(black))
        if overlap:
            raise ValueError(f"The given custom_white_list overlaps custom_black_list with < {overlap[0]} >!")
        for op_type in white:
            _move(op_type, self.black_list, self.gray_list, self.white_list)
        for op_type in black:
            _move(op_type, self.white_list, self.gray_list, self.black_list)
            self.unsupported_list.add(op_type)


def _move(op_type, first, second, to) -> None:
    """Take `op_type` out of `first`, or else out of `second` (as PaddlePaddle does: an op in
    both the black and the gray list, layer_norm, stays gray when made white), into `to`."""
    if op_type in first:
        first.remove(op_type)
    elif op_type in second:
        second.remove(op_type)
    to.add(op_type)


CustomOpLists = AutoMixedPrecisionLists
