"""Binary elementwise ops with PaddlePaddle's broadcasting (`axis` attribute)."""
from __future__ import annotations

from program.ops.infer import broadcast_shapes
from program.ops.registry import INT, NOT_DIFFERENTIABLE, define


def _infer_elementwise(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    dtype = ctx.same_dtype(x, y)
    ctx.set_output("Out", broadcast_shapes(ctx, x, y, ctx.attr("axis")), dtype)


for _type, _doc, _grad in [
    ("elementwise_add", "Out = X + Y", None),
    ("elementwise_sub", "Out = X - Y", None),
    ("elementwise_mul", "Out = X * Y", None),
    ("elementwise_div", "Out = X / Y", None),
    ("elementwise_pow", "Out = X ** Y", None),
    ("elementwise_max", "Out = max(X, Y)", None),
    ("elementwise_min", "Out = min(X, Y)", None),
    ("elementwise_floordiv", "Out = floor(X / Y) (integers)", NOT_DIFFERENTIABLE),
    ("elementwise_mod", "Out = X mod Y, with the sign of Y (Python semantics)", NOT_DIFFERENTIABLE),
]:
    define(_type, inputs=["X", "Y"], outputs=["Out"], attrs={"axis": INT(-1)},
           infer=_infer_elementwise, grad=_grad,
           doc=f"{_doc}. With axis=-1 shapes broadcast as in numpy; otherwise Y's dims align "
               "with X's starting at dimension `axis`.")
