"""`paddle.vision`: the detection ops' builders of keel.program.vision (`yolo_box`,
`multiclass_nms`, `roi_align`, ...; PaddlePaddle's `paddle.vision.ops`, the same objects) and
`transforms`."""
from keel.program.vision import *  # noqa: F401,F403
from keel.program.vision import __all__ as _ops
from keel.vision import ops, transforms

__all__ = [*_ops, "ops", "transforms"]
