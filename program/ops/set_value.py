"""`set_value`: Out = Input with the region `Input[index]` replaced by a value, the op behind
`x[index] = value` (Variable.__setitem__, Tensor.__setitem__), in PaddlePaddle 3.3.1's
legacy slots and attributes (op version 4: the value as ValueTensor or as the SCALARS
attribute `values` with `shape` and `dtype`).

The region: along each of `axes`, starts/ends/steps (or the 1-element tensors of
StartsTensorList/EndsTensorList/StepsTensorList), bounds as Python slices except that an end
of -1 with a negative step reaches element 0. The value broadcasts to the region with the
`decrease_axes` (an int index) dropped and 1s inserted at `none_axes` (a None index).
Kernels: kernels/set_value.py.
"""
from __future__ import annotations

from keel.program.ops.infer import normalize_axis
from keel.program.ops.registry import INT, LONGS, SCALARS, define, grad_op, many, opt
from keel.proto import pb

_LISTS = ["StartsTensorList", "EndsTensorList", "StepsTensorList"]


def _region_shape(ctx, x) -> list[int] | None:
    """The region's dims (-1 where unknown), or None when the bounds come from tensors."""
    if any(ctx.has_input(s) for s in _LISTS):
        return None
    axes, starts, ends = list(ctx.attr("axes")), list(ctx.attr("starts")), list(ctx.attr("ends"))
    steps = list(ctx.attr("steps")) or [1] * len(axes)
    if not len(starts) == len(ends) == len(steps) == len(axes):
        ctx.fail(f"axes {axes}, starts {starts}, ends {ends} and steps {steps} must have one entry each")
    region = list(x.shape)
    for a, start, end, step in zip(axes, starts, ends, steps):
        axis = normalize_axis(ctx, a, x.ndim, "axis")
        if step == 0:
            ctx.fail(f"steps {steps} has a 0 step (axis {a})")
        if region[axis] >= 0:
            bounds = slice(start, None if step < 0 and end == -1 else end, step)
            region[axis] = len(range(*bounds.indices(region[axis])))
    return region


def _infer_set_value(ctx):
    x, value = ctx.input("Input"), ctx.input("ValueTensor")
    if x.ndim == 0 and ctx.attr("axes"):
        ctx.fail(f"Input {x} is 0-D: it has no axis {list(ctx.attr('axes'))} to index (assign replaces its value)")
    if value is not None and value.dtype != x.dtype:
        ctx.dtype_fail(f"ValueTensor {value} must have Input's dtype ({x})")
    region = _region_shape(ctx, x)
    if region is not None:
        drop = {normalize_axis(ctx, a, x.ndim, "decrease_axes") for a in ctx.attr("decrease_axes")}
        target = [d for i, d in enumerate(region) if i not in drop]
        for a in sorted(ctx.attr("none_axes")):
            target.insert(min(int(a), len(target)), 1)
        shape = list(value.shape) if value is not None else [int(d) for d in ctx.attr("shape")]
        lead = len(target) - len(shape)
        if lead < 0 or any(v not in (1, t) and v >= 0 and t >= 0 for v, t in zip(shape, target[lead:])):
            ctx.fail(f"a value of shape {shape} cannot be assigned to Input[index] of shape {target} "
                     f"(Input {x}): it must broadcast to it")
    ctx.set_output("Out", x.shape, x.dtype)


define("set_value",
       inputs=["Input", opt("ValueTensor"), *(many(s, optional=True) for s in _LISTS)], outputs=["Out"],
       attrs={"axes": LONGS(), "starts": LONGS([]), "ends": LONGS([]), "steps": LONGS([]),
              "decrease_axes": LONGS([]), "none_axes": LONGS([]), "shape": LONGS([]),
              "dtype": INT(pb.VarType.FP32), "values": SCALARS([])},
       infer=_infer_set_value,
       grad=grad_op(["Out@GRAD", "ValueTensor", *_LISTS], ["Input@GRAD", "ValueTensor@GRAD"],
                    like={"Input@GRAD": "Out@GRAD"}),
       doc="Out = Input with Input[index] = ValueTensor (or `values` in `shape`), broadcast to "
           "the region; the gradient is Out@GRAD with the region zeroed for Input and the "
           "region, summed to the value's shape, for ValueTensor")
