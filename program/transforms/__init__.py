"""paddle.vision.transforms on numpy images: the transform classes and their functions
(`functional`), with numpy alone (no OpenCV or PIL); see functional.py for how each
matches PaddlePaddle's cv2 backend."""
from keel.program.transforms import functional  # noqa: F401
from keel.program.transforms.functional import *  # noqa: F401,F403
from keel.program.transforms.functional import __all__ as _functions
from keel.program.transforms.transforms import *  # noqa: F401,F403
from keel.program.transforms.transforms import __all__ as _classes

__all__ = [*_classes, *_functions, "functional"]
