"""`keel.static.nn` (PaddlePaddle's `paddle.static.nn`): the static-graph builder layers,
which make their own parameters (`fc`, `conv2d`, `batch_norm`, `embedding`, ...), the
fluid-era losses under their old meanings (`cross_entropy` over *probabilities*,
`softmax_with_cross_entropy`), and the control flow (`cond`, `case`, `switch_case`,
`while_loop`). One definition each: the builders live in program/nn (Keel's own static
API, `keel.program.nn.fc`), the control flow in program/control_flow.py.

PaddlePaddle 3.x's `paddle.nn` has none of these functions; its `paddle.nn.functional`
(`keel.nn.functional`) holds the functions over given tensors, `cross_entropy` of logits
among them."""
from keel.program.control_flow import (array_length, array_read, array_write, case, cond,  # noqa: F401
                                       create_array, switch_case, while_loop)
from keel.program.nn import (accuracy, batch_norm, conv2d, conv2d_transpose, conv3d, conv3d_transpose,  # noqa: F401
                             cross_entropy, ctc_greedy_decoder, deform_conv2d, dropout, embedding, fc, group_norm,
                             instance_norm, layer_norm, pool2d, pool3d, prelu, sigmoid_cross_entropy_with_logits,
                             softmax_with_cross_entropy)

__all__ = ["fc", "conv2d", "conv2d_transpose", "conv3d", "conv3d_transpose", "deform_conv2d", "batch_norm",
           "layer_norm", "group_norm", "instance_norm", "embedding", "prelu", "pool2d", "pool3d", "dropout",
           "cross_entropy", "softmax_with_cross_entropy", "sigmoid_cross_entropy_with_logits", "accuracy",
           "ctc_greedy_decoder", "cond", "case", "switch_case", "while_loop", "create_array", "array_write",
           "array_read", "array_length"]
