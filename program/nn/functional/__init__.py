"""`keel.nn.functional` (import as F): PaddlePaddle 3.x's `paddle.nn.functional`. Each
function takes its weights as tensors and appends ops, so one definition serves both
modes: inside `program_guard` (or after `enable_static()`) it builds into the program;
on eager Tensors the ops run at once.

    import keel.nn.functional as F
    y = F.conv2d(x, weight, bias, stride=2, padding=1)
    loss = F.cross_entropy(logits, label, label_smoothing=0.1)

The layer classes (`nn.Linear`, `nn.Conv2D`, `nn.CrossEntropyLoss`, ...) and the static
builders (`keel.static.nn.fc`, `conv2d`, `batch_norm`, ...) call these. Functions left out
(no op to build them exactly) are listed in docs/compatibility.md.
"""
from keel.program.nn.functional.activation import *  # noqa: F401,F403
from keel.program.nn.functional.attention import *  # noqa: F401,F403
from keel.program.nn.functional.common import *  # noqa: F401,F403
from keel.program.nn.functional.conv import *  # noqa: F401,F403
from keel.program.nn.functional.distance import *  # noqa: F401,F403
from keel.program.nn.functional.loss import *  # noqa: F401,F403
from keel.program.nn.functional.norm import *  # noqa: F401,F403
from keel.program.nn.functional.pooling import *  # noqa: F401,F403
from keel.program.nn.functional import activation, attention, common, conv, distance, loss, norm, pooling

__all__ = [*activation.__all__, *attention.__all__, *common.__all__, *conv.__all__, *distance.__all__, *loss.__all__,
           *norm.__all__, *pooling.__all__]
