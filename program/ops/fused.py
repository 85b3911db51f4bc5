"""Fused inference ops: one elementwise op and one activation in one op
(PaddlePaddle's `fused_elemwise_activation`).

`functor_list` names two functors, the outer one first (checked against PaddlePaddle
3.3.1's CPU kernel, paddle/phi/kernels/funcs/fused_elemwise_activation_functor.h):

    [unary, binary]  Out = unary(binary(X, Y))   IntermediateOut = binary(X, Y)  (Out's shape)
    [binary, unary]  Out = binary(X, unary(Y))   IntermediateOut = unary(Y)      (Y's shape)

and PaddlePaddle implements exactly nine pairs (FUSED_FUNCTOR_LISTS); any other pair is
refused when the op is built, as PaddlePaddle's kernel refuses it when run.
"""
from __future__ import annotations

from keel.program.errors import AttrError
from keel.program.ops.infer import broadcast_shapes, dims_match, numel
from keel.program.ops.registry import BOOL, FLOAT, INT, STRINGS, define, grad_op, side

# The pairs PaddlePaddle's RunFunctors implements, outer functor first.
FUSED_FUNCTOR_LISTS = (
    ("relu", "elementwise_add"),      # relu(X + Y)
    ("scale", "elementwise_add"),     # scale * (X + Y)
    ("tanh", "elementwise_add"),      # tanh(X + Y)
    ("gelu", "elementwise_add"),      # gelu(X + Y), tanh approximation
    ("elementwise_add", "relu"),      # X + relu(Y)
    ("elementwise_add", "scale"),     # X + scale * Y
    ("elementwise_mul", "scale"),     # X * (scale * Y)
    ("elementwise_mul", "tanh"),      # X * tanh(Y)
    ("elementwise_mul", "sigmoid"),   # X * sigmoid(Y)
)
BINARY_FUNCTORS = ("elementwise_add", "elementwise_mul")


def is_unary_compound(functor_list) -> bool:
    """[unary, binary]: Out = unary(binary(X, Y)) (PaddlePaddle's IsUnaryCompound)."""
    return functor_list[1] in BINARY_FUNCTORS


def _check_functor_list(ctx) -> tuple[str, str]:
    functors = tuple(ctx.attr("functor_list"))
    if functors not in FUSED_FUNCTOR_LISTS:
        supported = ", ".join(f"[{a}, {b}]" for a, b in FUSED_FUNCTOR_LISTS)
        raise AttrError(f"functor_list {list(functors)} is not a supported combination; "
                        f"PaddlePaddle implements {supported} (the outer functor first: "
                        "[relu, elementwise_add] is relu(X + Y), [elementwise_add, relu] is "
                        "X + relu(Y))", op_type=ctx.op_type, callsite=ctx.callsite)
    return functors


def _trim_trailing_ones(shape) -> list[int]:
    shape = list(shape)
    while shape and shape[-1] == 1:
        shape.pop()
    return shape


def _fits(big, small, axis: int) -> bool:
    """PaddlePaddle's fused broadcast: `small`, its trailing 1s dropped, equals the run of
    `big`'s dims starting at `axis` (-1: at len(big) - len(small), before trimming)."""
    if len(small) > len(big) or (len(small) == len(big) and axis > 0):
        return False  # equal ranks align at 0 (Keel's elementwise rule ignores axis there)
    start = len(big) - len(small) if axis == -1 else axis
    small = _trim_trailing_ones(small)
    if not 0 <= start <= len(big) - len(small):
        return False
    return all(dims_match(b, s) for b, s in zip(big[start:], small))


def broadcast_supported(x_shape, y_shape, axis: int) -> bool:
    """Whether PaddlePaddle's fused kernel broadcasts X and Y correctly: equal shapes, or
    one operand whose shape (trailing 1s dropped) is a contiguous run of the other's dims
    at `axis` (-1: right-aligned). Numpy's general broadcasting ((2, 3, 4) with (1, 3, 4)
    or (2, 1, 4)) makes that kernel read and write out of step and return wrong numbers.
    Unknown dims (-1) match anything."""
    xs, ys = list(x_shape), list(y_shape)
    if axis < -1:
        return False
    if len(xs) == len(ys) and all(dims_match(a, b) for a, b in zip(xs, ys)):
        return True
    if _fits(xs, ys, axis):
        return True  # Y broadcast over X (PaddlePaddle takes X as the bigger when numels tie)
    nx, ny = numel(xs), numel(ys)
    return _fits(ys, xs, axis) and not (nx >= 0 and ny >= 0 and nx >= ny)  # X over Y


def _check_broadcast(ctx, x, y, axis: int) -> None:
    if axis < -1:
        ctx.fail(f"axis must be -1 or a dimension index, got {axis}")
    if not broadcast_supported(x.shape, y.shape, axis):
        ctx.fail(f"X {list(x.shape)} and Y {list(y.shape)} (axis {axis}) are not shapes "
                 "PaddlePaddle's fused kernel broadcasts: one operand's shape, trailing 1s "
                 "dropped, must equal a run of the other's dims starting at `axis` (the end "
                 "when axis is -1); use the separate elementwise op and activation for "
                 "general broadcasting")


def _infer_fused_elemwise_activation(ctx):
    functors = _check_functor_list(ctx)
    x, y = ctx.input("X"), ctx.input("Y")
    dtype = ctx.same_dtype(x, y)
    ctx.require_float(x)
    axis = ctx.attr("axis")
    _check_broadcast(ctx, x, y, axis)
    out = broadcast_shapes(ctx, x, y, axis)
    ctx.set_output("Out", out, dtype)
    ctx.set_output("IntermediateOut", out if is_unary_compound(functors) else y.shape, dtype)


define("fused_elemwise_activation", inputs=["X", "Y"], outputs=["Out", side("IntermediateOut")],
       attrs={"functor_list": STRINGS(), "axis": INT(-1), "scale": FLOAT(0.0),
              "save_intermediate_out": BOOL(False)},
       infer=_infer_fused_elemwise_activation,
       # PaddlePaddle's gradient op reads every forward slot (IntermediateOut included)
       grad=grad_op(["X", "Y", "Out", "IntermediateOut", "Out@GRAD"], ["X@GRAD", "Y@GRAD"]),
       doc="An elementwise op and an activation in one: functor_list [unary, binary] gives "
           "Out = unary(binary(X, Y)), [binary, unary] gives Out = binary(X, unary(Y)); the "
           "nine pairs are relu/scale/tanh/gelu of elementwise_add, elementwise_add of "
           "relu/scale, elementwise_mul of scale/tanh/sigmoid. PaddlePaddle's functors: "
           "relu is X * (X > 0), scale multiplies by `scale` (no bias), tanh and sigmoid clip "
           "their argument (2X to [-40, 13], X to [-40, 13]), gelu is the tanh approximation. "
           "IntermediateOut (written when bound) is the inner result. Y broadcasts over X (or "
           "X over Y) only as a contiguous run of dims at `axis`.")
