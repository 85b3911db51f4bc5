"""`keel.nn`: PaddlePaddle 3.x's `paddle.nn`: the layer classes, `functional` (import as F),
`initializer`, `utils` and the gradient clipping classes, gathered from keel.program.

The fluid-era builder functions of `keel.program.nn` (`fc`, `conv2d`, `batch_norm`, and
`cross_entropy` over *probabilities*) are not here, as they are not in `paddle.nn`: they are
`keel.static.nn.*`. So `keel.nn.cross_entropy` does not exist and `keel.nn.functional.cross_entropy`
is PaddlePaddle 3's, over logits."""
from keel.nn import functional, initializer, utils
from keel.program.gradient_clip import ClipGradByGlobalNorm, ClipGradByNorm, ClipGradByValue
from keel.program.nn import function_layers as _function_layers, layers as _layers, transformer as _transformer
from keel.program.nn.function_layers import *  # noqa: F401,F403
from keel.program.nn.layer import Layer, LayerParameter
from keel.program.nn.layers import *  # noqa: F401,F403
from keel.program.nn.rnn_layers import GRU, LSTM, SimpleRNN
from keel.program.nn.transformer import *  # noqa: F401,F403

__all__ = ["Layer", "LayerParameter", *_layers.__all__, *_function_layers.__all__, *_transformer.__all__, "LSTM",
           "GRU", "SimpleRNN",
           "functional", "initializer", "utils", "ClipGradByValue", "ClipGradByNorm", "ClipGradByGlobalNorm"]
