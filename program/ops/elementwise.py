"""Binary elementwise ops with PaddlePaddle's broadcasting (`axis` attribute)."""
from __future__ import annotations

from keel.program.ops.infer import broadcast_shapes, is_complex, promote_complex
from keel.program.ops.registry import INT, NOT_DIFFERENTIABLE, define, grad_op
from keel.proto import pb


# Ops whose bool instantiation divides by a bool (false: undefined in PaddlePaddle's C++
# kernels, which fail or give garbage): refused when built.
_NO_BOOL = {"elementwise_div", "elementwise_floordiv", "elementwise_mod", "elementwise_pow"}


# Ops on the order of real numbers: refused for complex when built.
_REAL_ONLY = {"elementwise_floordiv", "elementwise_mod", "elementwise_max", "elementwise_min"}


def _infer_elementwise(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    # a real and a complex operand: PaddlePaddle promotes both to complex
    dtype = promote_complex(x.dtype, y.dtype) or ctx.same_dtype(x, y)
    if ctx.op_type in _NO_BOOL and dtype == pb.VarType.BOOL:
        ctx.dtype_fail(f"does not take bool inputs (division by false is undefined), got {x} and {y}")
    if ctx.op_type in _REAL_ONLY and is_complex(dtype):
        ctx.dtype_fail(f"does not take complex inputs (complex numbers have no order), got {x} and {y}")
    ctx.set_output("Out", broadcast_shapes(ctx, x, y, ctx.attr("axis")), dtype)


# PaddlePaddle's gradient ops read X, Y and Out@GRAD (div also reads Out).
_GRAD = grad_op(["X", "Y", "Out@GRAD"], ["X@GRAD", "Y@GRAD"])

for _type, _doc, _grad in [
    ("elementwise_add", "Out = X + Y", _GRAD),
    ("elementwise_sub", "Out = X - Y", _GRAD),
    ("elementwise_mul", "Out = X * Y", _GRAD),
    ("elementwise_div", "Out = X / Y", grad_op(["X", "Y", "Out", "Out@GRAD"], ["X@GRAD", "Y@GRAD"])),
    ("elementwise_pow", "Out = X ** Y", _GRAD),
    ("elementwise_max", "Out = max(X, Y)", _GRAD),
    ("elementwise_min", "Out = min(X, Y)", _GRAD),
    ("elementwise_floordiv", "Out = floor(X / Y) (integers)", NOT_DIFFERENTIABLE),
    ("elementwise_mod", "Out = X mod Y, with the sign of Y (Python semantics)", NOT_DIFFERENTIABLE),
]:
    define(_type, inputs=["X", "Y"], outputs=["Out"], attrs={"axis": INT(-1)},
           infer=_infer_elementwise, grad=_grad,
           doc=f"{_doc}. With axis=-1 shapes broadcast as in numpy; otherwise Y's dims align "
               "with X's starting at dimension `axis`.")
