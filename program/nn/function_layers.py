"""More of PaddlePaddle's `paddle.nn` layer classes: each holds its options and calls one
function of keel.nn.functional (layers.py's `function_layer`): activations, pools,
resizing and shuffling, padding, channel dropout, distances and losses; and PaddlePaddle
3's other spellings of some classes (`Conv2d`, `ModuleList`, `ReflectionPad2d`, ...)."""
from __future__ import annotations

import textwrap

from keel.program.nn import functional as F
from keel.program.nn.layer import Layer
from keel.program.nn.layers import (REQUIRED, AdaptiveMaxPool2D, Conv1D, Conv2D, Conv3D, LayerDict, LayerList, Silu,
                                    function_layer)

_SELU = {"scale": 1.0507009873554804934193349852946, "alpha": 1.6732632423543772848170429916717}

# -- activations -------------------------------------------------------------------------------
ELU = function_layer("ELU", F.elu, {"alpha": 1.0}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[-1.0, 6.0], [1.0, 15.6]])
    >>> print(paddle.nn.ELU(0.2)(x).numpy().round(4))
    [[-0.1264  6.    ]
     [ 1.     15.6   ]]
""")
CELU = function_layer("CELU", F.celu, {"alpha": 1.0}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[-1.0, 6.0], [1.0, 15.6]])
    >>> print(paddle.nn.CELU(0.2)(x).numpy().round(4))
    [[-0.1987  6.    ]
     [ 1.     15.6   ]]
""")
SELU = function_layer("SELU", F.selu, _SELU, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[0.0, 1.0], [2.0, 3.0]])
    >>> print(paddle.nn.SELU()(x).numpy().round(4))
    [[0.     1.0507]
     [2.1014 3.1521]]
""")
Softplus = function_layer("Softplus", F.softplus, {"beta": 1, "threshold": 20}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
    >>> print(paddle.nn.Softplus()(x).numpy().round(4))
    [0.513  0.5981 0.7444 0.8544]
""")
Softshrink = function_layer("Softshrink", F.softshrink, {"threshold": 0.5}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-0.9, -0.2, 0.1, 0.8])
    >>> print(paddle.nn.Softshrink()(x).numpy().round(4))
    [-0.4  0.   0.   0.3]
""")
Hardshrink = function_layer("Hardshrink", F.hardshrink, {"threshold": 0.5}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-1.0, 0.3, 2.5])
    >>> print(paddle.nn.Hardshrink()(x).numpy())
    [-1.   0.   2.5]
""")
Hardtanh = function_layer("Hardtanh", F.hardtanh, {"min": -1.0, "max": 1.0}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-1.5, 0.3, 2.5])
    >>> print(paddle.nn.Hardtanh()(x).numpy())
    [-1.   0.3  1. ]
""")
ThresholdedReLU = function_layer("ThresholdedReLU", F.thresholded_relu, {"threshold": 1.0, "value": 0.0}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([2.0, 0.0, 1.0])
    >>> print(paddle.nn.ThresholdedReLU()(x).numpy())
    [2. 0. 0.]
""")
LogSigmoid = function_layer("LogSigmoid", F.log_sigmoid, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([1.0, 2.0, 3.0, 4.0])
    >>> print(paddle.nn.LogSigmoid()(x).numpy().round(4))
    [-0.3133 -0.1269 -0.0486 -0.0181]
""")
LogSoftmax = function_layer("LogSoftmax", F.log_softmax, {"axis": -1}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])
    >>> print(paddle.nn.LogSoftmax()(x).numpy().round(4))
    [[-2.4076 -1.4076 -0.4076]
     [-1.0986 -1.0986 -1.0986]]
""")
Softmax2D = function_layer("Softmax2D", F.softmax, fixed={"axis": -3}, example="""
    >>> import keel as paddle
    >>> x = paddle.rand([1, 3, 2, 2])
    >>> y = paddle.nn.Softmax2D()(x)
    >>> y.shape
    [1, 3, 2, 2]
    >>> print(y.numpy().sum(axis=1).round(4))
    [[[1. 1.]
      [1. 1.]]]
""")
Maxout = function_layer("Maxout", F.maxout, {"groups": REQUIRED, "axis": 1}, example="""
    >>> import keel as paddle
    >>> x = paddle.rand([1, 4, 3, 3])
    >>> y = paddle.nn.Maxout(groups=2)(x)
    >>> y.shape
    [1, 2, 3, 3]
    >>> bool((y.numpy() == x.numpy().reshape(1, 2, 2, 3, 3).max(axis=2)).all())
    True
""")
GLU = function_layer("GLU", F.glu, {"axis": -1}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[1.0, 2.0, 0.0, 0.0]])
    >>> print(paddle.nn.GLU()(x).numpy())
    [[0.5 1. ]]
""")
Mish = function_layer("Mish", F.mish, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-5.0, 0.0, 5.0])
    >>> print(paddle.nn.Mish()(x).numpy().round(4))
    [-0.0336  0.      4.9996]
""")
Swish = function_layer("Swish", F.swish, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-2.0, 0.0, 1.0])
    >>> print(paddle.nn.Swish()(x).numpy().round(4))
    [-0.2384  0.      0.7311]
""")
Softsign = function_layer("Softsign", F.softsign, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
    >>> print(paddle.nn.Softsign()(x).numpy().round(4))
    [-0.2857 -0.1667  0.0909  0.2308]
""")
Tanhshrink = function_layer("Tanhshrink", F.tanhshrink, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([-0.4, -0.2, 0.1, 0.3])
    >>> print(paddle.nn.Tanhshrink()(x).numpy().round(4))
    [-0.0201 -0.0026  0.0003  0.0087]
""")
SiLU = Silu

# -- pools ----------------------------------------------------------------------------------------
_WINDOW = {"kernel_size": REQUIRED, "stride": None, "padding": 0}
MaxPool1D = function_layer("MaxPool1D", F.max_pool1d, {**_WINDOW, "return_mask": False, "ceil_mode": False}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[1.0, 3.0, 2.0, 5.0, 4.0, 0.0]]])
    >>> print(paddle.nn.MaxPool1D(kernel_size=2, stride=2)(x).numpy())
    [[[3. 5. 4.]]]
    >>> paddle.nn.MaxPool1D(kernel_size=2, stride=2)(paddle.rand([1, 3, 32])).shape
    [1, 3, 16]
""")
MaxPool3D = function_layer("MaxPool3D", F.max_pool3d, {**_WINDOW, "return_mask": False, "ceil_mode": False,
                                                       "data_format": "NCDHW"}, example="""
    >>> import keel as paddle
    >>> x = paddle.rand([1, 2, 3, 32, 32])
    >>> paddle.nn.MaxPool3D(kernel_size=2, stride=2, padding=0)(x).shape
    [1, 2, 1, 16, 16]
""")
AvgPool1D = function_layer("AvgPool1D", F.avg_pool1d, {**_WINDOW, "exclusive": True, "ceil_mode": False}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[1.0, 3.0, 2.0, 5.0, 4.0, 0.0]]])
    >>> print(paddle.nn.AvgPool1D(kernel_size=2, stride=2)(x).numpy())
    [[[2.  3.5 2. ]]]
""")
AvgPool3D = function_layer("AvgPool3D", F.avg_pool3d, {**_WINDOW, "ceil_mode": False, "exclusive": True,
                                                       "divisor_override": None, "data_format": "NCDHW"}, example="""
    >>> import keel as paddle
    >>> x = paddle.rand([1, 2, 3, 32, 32])
    >>> paddle.nn.AvgPool3D(kernel_size=2, stride=2, padding=0)(x).shape
    [1, 2, 1, 16, 16]
""")
AdaptiveAvgPool1D = function_layer("AdaptiveAvgPool1D", F.adaptive_avg_pool1d, {"output_size": REQUIRED}, example="""
    >>> import keel as paddle
    >>> x = paddle.reshape(paddle.arange(8, dtype="float32"), [1, 1, 8])
    >>> print(paddle.nn.AdaptiveAvgPool1D(output_size=4)(x).numpy())
    [[[0.5 2.5 4.5 6.5]]]
""")
AdaptiveAvgPool3D = function_layer("AdaptiveAvgPool3D", F.adaptive_avg_pool3d,
                                   {"output_size": REQUIRED, "data_format": "NCDHW"}, example="""
    >>> import keel as paddle
    >>> x = paddle.rand([2, 3, 8, 32, 32])
    >>> paddle.nn.AdaptiveAvgPool3D(output_size=3)(x).shape
    [2, 3, 3, 3, 3]
""")
AdaptiveMaxPool1D = function_layer("AdaptiveMaxPool1D", F.adaptive_max_pool1d,
                                   {"output_size": REQUIRED, "return_mask": False}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[1.0, 3.0, 2.0, 5.0, 4.0, 0.0, 7.0, 6.0]]])
    >>> print(paddle.nn.AdaptiveMaxPool1D(output_size=4)(x).numpy())
    [[[3. 5. 4. 7.]]]
""")
AdaptiveMaxPool3D = function_layer("AdaptiveMaxPool3D", F.adaptive_max_pool3d,
                                   {"output_size": REQUIRED, "return_mask": False}, example="""
    >>> import keel as paddle
    >>> x = paddle.rand([2, 3, 8, 32, 32])
    >>> paddle.nn.AdaptiveMaxPool3D(output_size=4)(x).shape
    [2, 3, 4, 4, 4]
""")
MaxUnPool2D = function_layer("MaxUnPool2D", F.max_unpool2d, {**_WINDOW, "data_format": "NCHW", "output_size": None},
                             example="""
    >>> import keel as paddle
    >>> x = paddle.reshape(paddle.arange(16, dtype="float32"), [1, 1, 4, 4])
    >>> pooled, indices = paddle.nn.functional.max_pool2d(x, kernel_size=2, stride=2, return_mask=True)
    >>> print(paddle.nn.MaxUnPool2D(kernel_size=2, stride=2)(pooled, indices).numpy())
    [[[[ 0.  0.  0.  0.]
       [ 0.  5.  0.  7.]
       [ 0.  0.  0.  0.]
       [ 0. 13.  0. 15.]]]]
""")

# -- resizing, shuffling, unfolding, distances ------------------------------------------------------
Upsample = function_layer("Upsample", F.interpolate, {
    "size": None, "scale_factor": None, "mode": "nearest", "align_corners": False, "align_mode": 0,
    "data_format": None, "recompute_scale_factor": None}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    >>> print(paddle.nn.Upsample(scale_factor=2, mode="nearest")(x).numpy())
    [[[[1. 1. 2. 2.]
       [1. 1. 2. 2.]
       [3. 3. 4. 4.]
       [3. 3. 4. 4.]]]]
    >>> paddle.nn.Upsample(size=[12, 12])(paddle.rand([2, 3, 6, 10])).shape
    [2, 3, 12, 12]
""")
UpsamplingBilinear2D = function_layer("UpsamplingBilinear2D", F.interpolate,
                                      {"size": None, "scale_factor": None, "data_format": "NCHW"},
                                      fixed={"mode": "bilinear", "align_corners": True}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    >>> print(paddle.nn.UpsamplingBilinear2D(size=[3, 3])(x).numpy())
    [[[[1.  1.5 2. ]
       [2.  2.5 3. ]
       [3.  3.5 4. ]]]]
""")
UpsamplingNearest2D = function_layer("UpsamplingNearest2D", F.interpolate,
                                     {"size": None, "scale_factor": None, "data_format": "NCHW"},
                                     fixed={"mode": "nearest"}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    >>> print(paddle.nn.UpsamplingNearest2D(scale_factor=2)(x).numpy())
    [[[[1. 1. 2. 2.]
       [1. 1. 2. 2.]
       [3. 3. 4. 4.]
       [3. 3. 4. 4.]]]]
""")
PixelShuffle = function_layer("PixelShuffle", F.pixel_shuffle, {"upscale_factor": REQUIRED, "data_format": "NCHW"},
                              example="""
    >>> import keel as paddle
    >>> x = paddle.rand([2, 9, 4, 4])
    >>> paddle.nn.PixelShuffle(3)(x).shape
    [2, 1, 12, 12]
""")
PixelUnshuffle = function_layer("PixelUnshuffle", F.pixel_unshuffle,
                                {"downscale_factor": REQUIRED, "data_format": "NCHW"}, example="""
    >>> import keel as paddle
    >>> x = paddle.rand([2, 1, 12, 12])
    >>> paddle.nn.PixelUnshuffle(3)(x).shape
    [2, 9, 4, 4]
""")
ChannelShuffle = function_layer("ChannelShuffle", F.channel_shuffle, {"groups": REQUIRED, "data_format": "NCHW"},
                                example="""
    >>> import keel as paddle
    >>> x = paddle.reshape(paddle.arange(6, dtype="float32"), [1, 6, 1, 1])
    >>> print(paddle.nn.ChannelShuffle(3)(x).numpy().flatten())
    [0. 2. 4. 1. 3. 5.]
""")
Unfold = function_layer("Unfold", F.unfold, {"kernel_sizes": REQUIRED, "dilations": 1, "paddings": 0, "strides": 1},
                        example="""
    >>> import keel as paddle
    >>> x = paddle.rand([2, 3, 4, 4])
    >>> paddle.nn.Unfold(kernel_sizes=[2, 2])(x).shape
    [2, 12, 9]
""")
CosineSimilarity = function_layer("CosineSimilarity", F.cosine_similarity, {"axis": 1, "eps": 1e-8}, example="""
    >>> import keel as paddle
    >>> x1 = paddle.to_tensor([[1.0, 0.0], [1.0, 1.0]])
    >>> x2 = paddle.to_tensor([[0.0, 1.0], [2.0, 2.0]])
    >>> print(paddle.nn.CosineSimilarity(axis=1)(x1, x2).numpy().round(4))
    [0. 1.]
""")
PairwiseDistance = function_layer("PairwiseDistance", F.pairwise_distance,
                                  {"p": 2.0, "epsilon": 1e-6, "keepdim": False}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[1.0, 3.0], [3.0, 5.0]])
    >>> y = paddle.to_tensor([[5.0, 6.0], [7.0, 8.0]])
    >>> print(paddle.nn.PairwiseDistance()(x, y).numpy().round(4))
    [5. 5.]
""")
Dropout2D = function_layer("Dropout2D", F.dropout2d, {"p": 0.5, "data_format": "NCHW"}, pass_training=True, example="""
    >>> import keel as paddle
    >>> x = paddle.rand([2, 4, 3, 3])
    >>> dropout = paddle.nn.Dropout2D(p=0.5)
    >>> dropout(x).shape
    [2, 4, 3, 3]
    >>> dropout.eval()
    Dropout2D()
    >>> bool((dropout(x).numpy() == x.numpy()).all())
    True
""")
Dropout3D = function_layer("Dropout3D", F.dropout3d, {"p": 0.5, "data_format": "NCDHW"}, pass_training=True, example="""
    >>> import keel as paddle
    >>> x = paddle.rand([2, 4, 2, 3, 3])
    >>> dropout = paddle.nn.Dropout3D(p=0.5)
    >>> dropout(x).shape
    [2, 4, 2, 3, 3]
    >>> dropout.eval()
    Dropout3D()
    >>> bool((dropout(x).numpy() == x.numpy()).all())
    True
""")

# -- losses ------------------------------------------------------------------------------------------
_R = {"reduction": "mean"}
HingeEmbeddingLoss = function_layer("HingeEmbeddingLoss", F.hinge_embedding_loss, {"margin": 1.0, **_R}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[1.0, -2.0, 3.0], [0.0, -1.0, 2.0]])
    >>> label = paddle.to_tensor([[-1.0, 1.0, -1.0], [1.0, 1.0, 1.0]])
    >>> print(paddle.nn.HingeEmbeddingLoss(margin=1.0, reduction="none")(x, label).numpy())
    [[ 0. -2.  0.]
     [ 0. -1.  2.]]
    >>> round(float(paddle.nn.HingeEmbeddingLoss(margin=1.0)(x, label)), 4)
    -0.1667
""")
SoftMarginLoss = function_layer("SoftMarginLoss", F.soft_margin_loss, _R, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[0.5, 0.6, 0.7], [0.3, 0.5, 0.2]])
    >>> label = paddle.to_tensor([[1.0, -1.0, 1.0], [-1.0, 1.0, 1.0]])
    >>> round(float(paddle.nn.SoftMarginLoss()(x, label)), 4)
    0.6402
""")
CosineEmbeddingLoss = function_layer("CosineEmbeddingLoss", F.cosine_embedding_loss, {"margin": 0, **_R}, example="""
    >>> import keel as paddle
    >>> x1 = paddle.to_tensor([[1.6, 1.2, -0.5], [3.2, 2.6, -5.8]])
    >>> x2 = paddle.to_tensor([[0.5, 0.5, -1.8], [2.3, -1.4, 1.1]])
    >>> label = paddle.to_tensor([1, -1])
    >>> print(paddle.nn.CosineEmbeddingLoss(margin=0.5, reduction="none")(x1, x2, label).numpy().round(4))
    [0.4231 0.    ]
    >>> round(float(paddle.nn.CosineEmbeddingLoss(margin=0.5)(x1, x2, label)), 4)
    0.2116
""")
TripletMarginLoss = function_layer("TripletMarginLoss", F.triplet_margin_loss,
                                   {"margin": 1.0, "p": 2.0, "epsilon": 1e-6, "swap": False, **_R}, example="""
    >>> import keel as paddle
    >>> anchor = paddle.to_tensor([[1.0, -2.0, 3.0], [0.0, -1.0, 2.0], [1.0, 0.0, 1.0]])
    >>> positive = paddle.to_tensor([[5.0, 1.0, 2.0], [3.0, 2.0, 1.0], [3.0, -1.0, 1.0]])
    >>> negative = paddle.to_tensor([[2.0, 1.0, -3.0], [1.0, 1.0, -1.0], [4.0, -2.0, 1.0]])
    >>> print(paddle.nn.TripletMarginLoss(reduction="none")(anchor, positive, negative).numpy().round(4))
    [0.     1.6172 0.    ]
    >>> round(float(paddle.nn.TripletMarginLoss(margin=1.0, swap=True)(anchor, positive, negative)), 4)
    1.4829
""")
MultiLabelSoftMarginLoss = function_layer("MultiLabelSoftMarginLoss", F.multi_label_soft_margin_loss,
                                          {"weight": None, **_R}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[1.0, -2.0, 3.0], [0.0, -1.0, 2.0], [1.0, 0.0, 1.0]])
    >>> label = paddle.to_tensor([[-1.0, 1.0, -1.0], [1.0, 1.0, 1.0], [1.0, -1.0, 1.0]])
    >>> print(paddle.nn.MultiLabelSoftMarginLoss(reduction="none")(x, label).numpy().round(4))
    [3.4963 0.7111 0.4399]
    >>> round(float(paddle.nn.MultiLabelSoftMarginLoss()(x, label)), 4)
    1.5491
""")
PoissonNLLLoss = function_layer("PoissonNLLLoss", F.poisson_nll_loss,
                                {"log_input": True, "full": False, "epsilon": 1e-8, **_R}, example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[0.0, 1.0], [2.0, 0.5]])
    >>> label = paddle.to_tensor([[1.0, 2.0], [3.0, 0.0]])
    >>> print(paddle.nn.PoissonNLLLoss(reduction="none")(x, label).numpy().round(4))
    [[1.     0.7183]
     [1.3891 1.6487]]
    >>> round(float(paddle.nn.PoissonNLLLoss()(x, label)), 4)
    1.189
""")
GaussianNLLLoss = function_layer("GaussianNLLLoss", F.gaussian_nll_loss, {"full": False, "epsilon": 1e-6, **_R},
                                 example="""
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> label = paddle.to_tensor([[1.5, 2.0], [2.0, 4.5]])
    >>> variance = paddle.to_tensor([[1.0, 0.5], [2.0, 1.0]])
    >>> print(paddle.nn.GaussianNLLLoss(reduction="none")(x, label, variance).numpy().round(4))
    [[ 0.125  -0.3466]
     [ 0.5966  0.125 ]]
    >>> round(float(paddle.nn.GaussianNLLLoss()(x, label, variance)), 4)
    0.125
""")


class CTCLoss(Layer):
    """F.ctc_loss with its blank, reduction and zero_infinity; norm_by_times per call.

    Examples:
        >>> import keel as paddle
        >>> import numpy as np
        >>> log_probs = paddle.to_tensor(np.log(np.full([2, 1, 3], 1 / 3, dtype="float32")))
        >>> labels = paddle.to_tensor([[1]], dtype="int32")
        >>> input_lengths = paddle.to_tensor([2], dtype="int64")
        >>> label_lengths = paddle.to_tensor([1], dtype="int64")
        >>> loss = paddle.nn.CTCLoss(blank=0, reduction="none")(log_probs, labels, input_lengths, label_lengths)
        >>> print(loss.numpy().round(4))
        [1.0986]
        >>> round(-float(np.log(3 / 9)), 4)             # 3 of the 9 paths of length 2 spell [1]
        1.0986
    """

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


def _pad_layer(cls_name, nd, mode=None, with_value=False, example=None):
    """Pad1D-3D take (padding, mode, value, data_format); ZeroPad/ReflectionPad/... fix the
    mode and take (padding, data_format), ConstantPad (padding, value, data_format);
    `example`, doctest lines, becomes the docstring's Examples section."""
    doc = f"paddle.nn.{cls_name}: F.pad in mode {mode or 'given'!r}."
    if example:
        doc += "\n\n    Examples:\n" + textwrap.indent(textwrap.dedent(example).strip("\n"), " " * 8) + "\n    "
    if mode is None:
        def __init__(self, padding, mode="constant", value=0.0, data_format=None, name=None):
            _Pad.__init__(self, padding, mode, value, data_format, name)
    elif with_value:
        def __init__(self, padding, value, data_format=None, name=None):
            _Pad.__init__(self, padding, mode, value, data_format, name)
    else:
        def __init__(self, padding, data_format=None, name=None):
            _Pad.__init__(self, padding, mode, 0.0, data_format, name)
    return type(cls_name, (_Pad,), {"_nd": nd, "_mode": mode, "__init__": __init__, "__doc__": doc})


# Each padding class's Examples section (doctest lines).
_PAD_EXAMPLES = {
    "Pad1D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[1.0, 2.0, 3.0]]])
    >>> print(paddle.nn.Pad1D(padding=[1, 2], mode="constant", value=9.0)(x).numpy())
    [[[9. 1. 2. 3. 9. 9.]]]
    >>> print(paddle.nn.Pad1D(padding=1, mode="reflect")(x).numpy())
    [[[2. 1. 2. 3. 2.]]]
""",
    "ZeroPad1D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[1.0, 2.0, 3.0]]])
    >>> print(paddle.nn.ZeroPad1D([1, 2])(x).numpy())
    [[[0. 1. 2. 3. 0. 0.]]]
""",
    "ConstantPad1D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[1.0, 2.0, 3.0]]])
    >>> print(paddle.nn.ConstantPad1D([1, 2], value=9.0)(x).numpy())
    [[[9. 1. 2. 3. 9. 9.]]]
""",
    "ReflectionPad1D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[1.0, 2.0, 3.0]]])
    >>> print(paddle.nn.ReflectionPad1D([1, 2])(x).numpy())
    [[[2. 1. 2. 3. 2. 1.]]]
""",
    "ReplicationPad1D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[1.0, 2.0, 3.0]]])
    >>> print(paddle.nn.ReplicationPad1D([1, 2])(x).numpy())
    [[[1. 1. 2. 3. 3. 3.]]]
""",
    "CircularPad1D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[1.0, 2.0, 3.0]]])
    >>> print(paddle.nn.CircularPad1D([1, 2])(x).numpy())
    [[[3. 1. 2. 3. 1. 2.]]]
""",
    "Pad2D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[1.0, 2.0], [3.0, 4.0]]]])
    >>> print(paddle.nn.Pad2D(padding=[1, 0, 1, 0], mode="replicate")(x).numpy())
    [[[[1. 1. 2.]
       [1. 1. 2.]
       [3. 3. 4.]]]]
""",
    "ZeroPad2D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]])
    >>> print(paddle.nn.ZeroPad2D([1, 1, 1, 0])(x).numpy())
    [[[[0. 0. 0. 0. 0.]
       [0. 1. 2. 3. 0.]
       [0. 4. 5. 6. 0.]]]]
""",
    "ConstantPad2D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]])
    >>> print(paddle.nn.ConstantPad2D([1, 1, 1, 0], value=9.0)(x).numpy())
    [[[[9. 9. 9. 9. 9.]
       [9. 1. 2. 3. 9.]
       [9. 4. 5. 6. 9.]]]]
""",
    "ReflectionPad2D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]])
    >>> print(paddle.nn.ReflectionPad2D([1, 1, 1, 0])(x).numpy())
    [[[[5. 4. 5. 6. 5.]
       [2. 1. 2. 3. 2.]
       [5. 4. 5. 6. 5.]]]]
""",
    "ReplicationPad2D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]])
    >>> print(paddle.nn.ReplicationPad2D([1, 1, 1, 0])(x).numpy())
    [[[[1. 1. 2. 3. 3.]
       [1. 1. 2. 3. 3.]
       [4. 4. 5. 6. 6.]]]]
""",
    "CircularPad2D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]])
    >>> print(paddle.nn.CircularPad2D([1, 1, 1, 0])(x).numpy())
    [[[[6. 4. 5. 6. 4.]
       [3. 1. 2. 3. 1.]
       [6. 4. 5. 6. 4.]]]]
""",
    "Pad3D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]]])
    >>> print(paddle.nn.Pad3D(padding=[1, 0, 0, 1, 0, 0], mode="constant")(x).numpy())
    [[[[[0. 1. 2. 3.]
        [0. 4. 5. 6.]
        [0. 0. 0. 0.]]]]]
""",
    "ZeroPad3D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]]])
    >>> print(paddle.nn.ZeroPad3D([1, 1, 0, 1, 0, 0])(x).numpy())
    [[[[[0. 1. 2. 3. 0.]
        [0. 4. 5. 6. 0.]
        [0. 0. 0. 0. 0.]]]]]
""",
    "ConstantPad3D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]]])
    >>> print(paddle.nn.ConstantPad3D([1, 1, 0, 1, 0, 0], value=9.0)(x).numpy())
    [[[[[9. 1. 2. 3. 9.]
        [9. 4. 5. 6. 9.]
        [9. 9. 9. 9. 9.]]]]]
""",
    "ReflectionPad3D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]]])
    >>> print(paddle.nn.ReflectionPad3D([1, 1, 0, 1, 0, 0])(x).numpy())
    [[[[[2. 1. 2. 3. 2.]
        [5. 4. 5. 6. 5.]
        [2. 1. 2. 3. 2.]]]]]
""",
    "ReplicationPad3D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]]])
    >>> print(paddle.nn.ReplicationPad3D([1, 1, 0, 1, 0, 0])(x).numpy())
    [[[[[1. 1. 2. 3. 3.]
        [4. 4. 5. 6. 6.]
        [4. 4. 5. 6. 6.]]]]]
""",
    "CircularPad3D": """
    >>> import keel as paddle
    >>> x = paddle.to_tensor([[[[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]]]])
    >>> print(paddle.nn.CircularPad3D([1, 1, 0, 1, 0, 0])(x).numpy())
    [[[[[3. 1. 2. 3. 1.]
        [6. 4. 5. 6. 4.]
        [3. 1. 2. 3. 1.]]]]]
""",
}
_PADS = {}
for _nd in (1, 2, 3):
    _PADS[f"Pad{_nd}D"] = _pad_layer(f"Pad{_nd}D", _nd, example=_PAD_EXAMPLES[f"Pad{_nd}D"])
    _PADS[f"ZeroPad{_nd}D"] = _pad_layer(f"ZeroPad{_nd}D", _nd, "constant",
                                         example=_PAD_EXAMPLES[f"ZeroPad{_nd}D"])
    _PADS[f"ConstantPad{_nd}D"] = _pad_layer(f"ConstantPad{_nd}D", _nd, "constant", with_value=True,
                                             example=_PAD_EXAMPLES[f"ConstantPad{_nd}D"])
    for _mode, _title in (("reflect", "Reflection"), ("replicate", "Replication"), ("circular", "Circular")):
        _PADS[f"{_title}Pad{_nd}D"] = _pad_layer(f"{_title}Pad{_nd}D", _nd, _mode,
                                                example=_PAD_EXAMPLES[f"{_title}Pad{_nd}D"])
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
