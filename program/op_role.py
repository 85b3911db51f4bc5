"""PaddlePaddle's OpRole: the `op_role` attribute every op carries, a bit set saying which
phase of a training step the op belongs to. `clone(for_test=True)` drops backward,
optimize and LR-schedule ops; the loss op is marked so tools can find it."""
import contextlib

FORWARD = 0
BACKWARD = 1
OPTIMIZE = 2
LRSCHED = 16
LOSS = 256


@contextlib.contextmanager
def role_guard(program, role: int):
    """Ops appended to `program` inside the block get `op_role = role`."""
    saved = program._op_role
    program._op_role = role
    try:
        yield
    finally:
        program._op_role = saved
