"""Op definitions. Importing this package registers every op, one module per family."""
from keel.program.ops import registry  # noqa: F401
from keel.program.ops import (activation, elementwise, loss, math, nn, optimizer,  # noqa: F401
                         random, tensor)
from keel.program.ops import detection  # noqa: F401
from keel.program.ops import fused  # noqa: F401
from keel.program.ops import fused_conv  # noqa: F401
from keel.program.ops import manip  # noqa: F401
from keel.program.ops import amp  # noqa: F401
from keel.program.ops import rnn  # noqa: F401
from keel.program.ops import vision  # noqa: F401
from keel.program.ops import collective  # noqa: F401
from keel.program.ops import control_flow  # noqa: F401
from keel.program.ops import set_value  # noqa: F401
from keel.program.ops import linalg  # noqa: F401
from keel.program.ops import stat  # noqa: F401
