"""More of PaddlePaddle's `paddle.nn` layer classes: each holds its options and calls one
function of keel.nn.functional (layers.py's `function_layer`): activations, pools,
resizing and shuffling, padding, channel dropout, distances and losses; and PaddlePaddle
3's other spellings of some classes (`Conv2d`, `ModuleList`, `ReflectionPad2d`, ...)."""
from __future__ import annotations

from keel.program.nn import functional as F
from keel.program.nn.layer import Layer
from keel.program.nn.layers import (REQUIRED, AdaptiveMaxPool2D, Conv1D, Conv2D, Conv3D, LayerDict, LayerList, Silu,
                                    function_layer)

_SELU = {"scale": 1.0507009873554804934193349852946, "alpha": 1.6732632423543772848170429916717}

# -- activations -------------------------------------------------------------------------------
ELU = function_layer("ELU", F.elu, {"alpha": 1.0})
CELU = function_layer("CELU", F.celu, {"alpha": 1.0})
SELU = function_layer("SELU", F.selu, _SELU)
Softplus = function_layer("Softplus", F.softplus, {"beta": 1, "threshold": 20})
Softshrink = function_layer("Softshrink", F.softshrink, {"threshold": 0.5})
Hardshrink = function_layer("Hardshrink", F.hardshrink, {"threshold": 0.5})
Hardtanh = function_layer("Hardtanh", F.hardtanh, {"min": -1.0, "max": 1.0})
ThresholdedReLU = function_layer("ThresholdedReLU", F.thresholded_relu, {"threshold": 1.0, "value": 0.0})
LogSigmoid = function_layer("LogSigmoid", F.log_sigmoid)
LogSoftmax = function_layer("LogSoftmax", F.log_softmax, {"axis": -1})
Softmax2D = function_layer("Softmax2D", F.softmax, fixed={"axis": -3})
Maxout = function_layer("Maxout", F.maxout, {"groups": REQUIRED, "axis": 1})
GLU = function_layer("GLU", F.glu, {"axis": -1})
Mish = function_layer("Mish", F.mish)
Swish = function_layer("Swish", F.swish)
Softsign = function_layer("Softsign", F.softsign)
Tanhshrink = function_layer("Tanhshrink", F.tanhshrink)
SiLU = Silu

# -- pools ----------------------------------------------------------------------------------------
_WINDOW = {"kernel_size": REQUIRED, "stride": None, "padding": 0}
MaxPool1D = function_layer("MaxPool1D", F.max_pool1d, {**_WINDOW, "return_mask": False, "ceil_mode": False})
MaxPool3D = function_layer("MaxPool3D", F.max_pool3d, {**_WINDOW, "return_mask": False, "ceil_mode": False,
                                                       "data_format": "NCDHW"})
AvgPool1D = function_layer("AvgPool1D", F.avg_pool1d, {**_WINDOW, "exclusive": True, "ceil_mode": False})
AvgPool3D = function_layer("AvgPool3D", F.avg_pool3d, {**_WINDOW, "ceil_mode": False, "exclusive": True,
                                                       "divisor_override": None, "data_format": "NCDHW"})
AdaptiveAvgPool1D = function_layer("AdaptiveAvgPool1D", F.adaptive_avg_pool1d, {"output_size": REQUIRED})
AdaptiveAvgPool3D = function_layer("AdaptiveAvgPool3D", F.adaptive_avg_pool3d,
                                   {"output_size": REQUIRED, "data_format": "NCDHW"})
AdaptiveMaxPool1D = function_layer("AdaptiveMaxPool1D", F.adaptive_max_pool1d,
                                   {"output_size": REQUIRED, "return_mask": False})
AdaptiveMaxPool3D = function_layer("AdaptiveMaxPool3D", F.adaptive_max_pool3d,
                                   {"output_size": REQUIRED, "return_mask": False})
MaxUnPool2D = function_layer("MaxUnPool2D", F.max_unpool2d, {**_WINDOW, "data_format": "NCHW", "output_size": None})

# -- resizing, shuffling, unfolding, distances ------------------------------------------------------
Upsample = function_layer("Upsample", F.interpolate, {
    "size": None, "scale_factor": None, "mode": "nearest", "align_corners": False, "align_mode": 0,
    "data_format": None, "recompute_scale_factor": None})
UpsamplingBilinear2D = function_layer("UpsamplingBilinear2D", F.interpolate,
                                      {"size": None, "scale_factor": None, "data_format": "NCHW"},
                                      fixed={"mode": "bilinear", "align_corners": True})
UpsamplingNearest2D = function_layer("UpsamplingNearest2D", F.interpolate,
                                     {"size": None, "scale_factor": None, "data_format": "NCHW"},
                                     fixed={"mode": "nearest"})
PixelShuffle = function_layer("PixelShuffle", F.pixel_shuffle, {"upscale_factor": REQUIRED, "data_format": "NCHW"})
PixelUnshuffle = function_layer("PixelUnshuffle", F.pixel_unshuffle,
                                {"downscale_factor": REQUIRED, "data_format": "NCHW"})
ChannelShuffle = function_layer("ChannelShuffle", F.channel_shuffle, {"groups": REQUIRED, "data_format": "NCHW"})
Unfold = function_layer("Unfold", F.unfold, {"kernel_sizes": REQUIRED, "dilations": 1, "paddings": 0, "strides": 1})
CosineSimilarity = function_layer("CosineSimilarity", F.cosine_similarity, {"axis": 1, "eps": 1e-8})
PairwiseDistance = function_layer("PairwiseDistance", F.pairwise_distance,
                                  {"p": 2.0, "epsilon": 1e-6, "keepdim": False})
Dropout2D = function_layer("Dropout2D", F.dropout2d, {"p": 0.5, "data_format": "NCHW"}, pass_training=True)
Dropout3D = function_layer("Dropout3D", F.dropout3d, {"p": 0.5, "data_format": "NCDHW"}, pass_training=True)

# -- losses ------------------------------------------------------------------------------------------
_R = {"reduction": "mean"}
HingeEmbeddingLoss = function_layer("HingeEmbeddingLoss", F.hinge_embedding_loss, {"margin": 1.0, **_R})
SoftMarginLoss = function_layer("SoftMarginLoss", F.soft_margin_loss, _R)
CosineEmbeddingLoss = function_layer("CosineEmbeddingLoss", F.cosine_embedding_loss, {"margin": 0, **_R})
TripletMarginLoss = function_layer("TripletMarginLoss", F.triplet_margin_loss,
                                   {"margin": 1.0, "p": 2.0, "epsilon": 1e-6, "swap": False, **_R})
MultiLabelSoftMarginLoss = function_layer("MultiLabelSoftMarginLoss", F.multi_label_soft_margin_loss,
                                          {"weight": None, **_R})
PoissonNLLLoss = function_layer("PoissonNLLLoss", F.poisson_nll_loss,
                                {"log_input": True, "full": False, "epsilon": 1e-8, **_R})
GaussianNLLLoss = function_layer("GaussianNLLLoss", F.gaussian_nll_loss, {"full": False, "epsilon": 1e-6, **_R})


class CTCLoss(Layer):
    """F.ctc_loss with its blank, reduction and zero_infinity; norm_by_times per call."""

    def __init__(self, blank=0, reduction="mean", zero_infinity=False):
        super().__init__()
        self._options = dict(blank=blank, reduction=reduction, zero_infinity=zero_infinity)

    def forward(self, log_probs, labels, input_lengths, label_lengths, norm_by_times=False):
        return F.ctc_loss(log_probs, labels, input_lengths, label_lengths, norm_by_times=norm_by_times,
                          **self._options)


# -- padding --------------------------------------------------------------------------------------------
class _Pad(Layer):
    """F.pad of the spatial dims of an (nd + 2)-d input; an int `padding` pads every side."""
    _nd, _mode = 2, None

    def __init__(self, padding, mode="constant", value=0.0, data_format=None, name=None):
        super().__init__(name)
        self._padding = [int(padding)] * (2 * self._nd) if isinstance(padding, int) else list(padding)
        self._mode = self._mode or mode
        self._value = float(value)
        self._data_format = data_format or {1: "NCL", 2: "NCHW", 3: "NCDHW"}[self._nd]

    def forward(self, x):
        return F.pad(x, self._padding, self._mode, self._value, self._data_format)


def _pad_layer(cls_name, nd, mode=None, with_value=False):
    """Pad1D-3D take (padding, mode, value, data_format); ZeroPad/ReflectionPad/... fix the
    mode and take (padding, data_format), ConstantPad (padding, value, data_format)."""
    if mode is None:
        def __init__(self, padding, mode="constant", value=0.0, data_format=None, name=None):
            _Pad.__init__(self, padding, mode, value, data_format, name)
    elif with_value:
        def __init__(self, padding, value, data_format=None, name=None):
            _Pad.__init__(self, padding, mode, value, data_format, name)
    else:
        def __init__(self, padding, data_format=None, name=None):
            _Pad.__init__(self, padding, mode, 0.0, data_format, name)
    return type(cls_name, (_Pad,), {"_nd": nd, "_mode": mode, "__init__": __init__,
                                    "__doc__": f"paddle.nn.{cls_name}: F.pad in mode {mode or 'given'!r}."})


_PADS = {}
for _nd in (1, 2, 3):
    _PADS[f"Pad{_nd}D"] = _pad_layer(f"Pad{_nd}D", _nd)
    _PADS[f"ZeroPad{_nd}D"] = _pad_layer(f"ZeroPad{_nd}D", _nd, "constant")
    _PADS[f"ConstantPad{_nd}D"] = _pad_layer(f"ConstantPad{_nd}D", _nd, "constant", with_value=True)
    for _mode, _title in (("reflect", "Reflection"), ("replicate", "Replication"), ("circular", "Circular")):
        _PADS[f"{_title}Pad{_nd}D"] = _pad_layer(f"{_title}Pad{_nd}D", _nd, _mode)
globals().update(_PADS)

# -- PaddlePaddle 3's other spellings (the same classes there too) ------------------------------------------
_ALIASES = {"Conv1d": Conv1D, "Conv2d": Conv2D, "Conv3d": Conv3D, "Module": Layer, "ModuleList": LayerList,
            "ModuleDict": LayerDict, "AdaptiveMaxPool1d": AdaptiveMaxPool1D, "AdaptiveMaxPool2d": AdaptiveMaxPool2D,
            "AdaptiveMaxPool3d": AdaptiveMaxPool3D,
            **{name[:-1] + "d": cls for name, cls in _PADS.items() if not name.startswith(("Pad", "Zero"))}}
globals().update(_ALIASES)

__all__ = ["ELU", "CELU", "SELU", "Softplus", "Softshrink", "Hardshrink", "Hardtanh", "ThresholdedReLU", "LogSigmoid",
           "LogSoftmax", "Softmax2D", "Maxout", "GLU", "Mish", "Swish", "Softsign", "Tanhshrink", "SiLU", "MaxPool1D",
           "MaxPool3D", "AvgPool1D", "AvgPool3D", "AdaptiveAvgPool1D", "AdaptiveAvgPool3D", "AdaptiveMaxPool1D",
           "AdaptiveMaxPool3D", "MaxUnPool2D", "Upsample", "UpsamplingBilinear2D", "UpsamplingNearest2D",
           "PixelShuffle", "PixelUnshuffle", "ChannelShuffle", "Unfold", "CosineSimilarity", "PairwiseDistance",
           "Dropout2D", "Dropout3D", "HingeEmbeddingLoss", "SoftMarginLoss", "CosineEmbeddingLoss",
           "TripletMarginLoss", "MultiLabelSoftMarginLoss", "PoissonNLLLoss", "GaussianNLLLoss", "CTCLoss",
           *_PADS, *_ALIASES]
