"""Random-number ops (parameter initializers and sampling). Not differentiable.

The output shape comes from the `shape` attribute, or at run time from the optional
ShapeTensor (a 1-d int tensor) / ShapeTensorList (1-element int tensors) inputs, in which
case the dims are -1 here. `dtype` is a VarType number (5 = float32), `seed` 0 means "draw
a fresh seed at run time".
"""
from __future__ import annotations

from keel.program import dtypes
from keel.program.errors import AttrError
from keel.program.ops.registry import FLOAT, INT, INTS, LONGS, NOT_DIFFERENTIABLE, define, many, opt
from keel.proto import pb

_T = pb.VarType


def _attr_fail(ctx, message):
    raise AttrError(message, op_type=ctx.op_type, callsite=ctx.callsite)


def _out_shape(ctx) -> list[int]:
    shape = [int(d) for d in ctx.attr("shape")]
    tensors = ctx.inputs("ShapeTensorList") if ctx.has_input("ShapeTensorList") else []
    if tensors:
        return [-1] * len(tensors)
    st = ctx.input("ShapeTensor") if ctx.has_input("ShapeTensor") else None
    if st is not None:
        if st.dtype not in (_T.INT32, _T.INT64):
            ctx.dtype_fail(f"ShapeTensor must be int32 or int64, got {st}")
        if st.ndim == 1 and st.shape[0] >= 0:
            return [-1] * st.shape[0]
        if shape:
            return [-1] * len(shape)
        ctx.fail(f"cannot tell the output rank from ShapeTensor {st}")
    if any(d < 0 for d in shape):
        _attr_fail(ctx, f"shape must not have negative dims, got {shape}")
    return shape


def _dtype(ctx, kinds, what):
    code = ctx.attr("dtype")
    if code not in kinds:
        _attr_fail(ctx, f"dtype must be {what}, got {dtypes.name(code)} ({code})")
    return code


_FLOATS = (_T.FP16, _T.BF16, _T.FP32, _T.FP64)


def _infer_uniform(ctx):
    if not ctx.attr("min") < ctx.attr("max"):
        _attr_fail(ctx, f"min ({ctx.attr('min')}) must be less than max ({ctx.attr('max')})")
    ctx.set_output("Out", _out_shape(ctx), _dtype(ctx, _FLOATS, "a floating-point type"))


define("uniform_random", inputs=[opt("ShapeTensor"), many("ShapeTensorList", optional=True)],
       outputs=["Out"],
       attrs={"shape": LONGS([]), "dtype": INT(_T.FP32), "min": FLOAT(-1.0), "max": FLOAT(1.0),
              "seed": INT(0), "diag_num": INT(0), "diag_step": INT(0), "diag_val": FLOAT(1.0)},
       infer=_infer_uniform, grad=NOT_DIFFERENTIABLE,
       doc="Samples from U(min, max); diag_num > 0 also sets diag_num diagonal elements to diag_val.")


def _infer_gaussian(ctx):
    if ctx.attr("std") < 0:
        _attr_fail(ctx, f"std must be >= 0, got {ctx.attr('std')}")
    ctx.set_output("Out", _out_shape(ctx), _dtype(ctx, _FLOATS, "a floating-point type"))


define("gaussian_random", inputs=[opt("ShapeTensor"), many("ShapeTensorList", optional=True)],
       outputs=["Out"],
       attrs={"shape": LONGS([]), "mean": FLOAT(0.0), "std": FLOAT(1.0), "seed": INT(0),
              "dtype": INT(_T.FP32)},
       infer=_infer_gaussian, grad=NOT_DIFFERENTIABLE,
       doc="Samples from N(mean, std^2).")


def _infer_truncated_gaussian(ctx):
    if ctx.attr("std") < 0:
        _attr_fail(ctx, f"std must be >= 0, got {ctx.attr('std')}")
    if not ctx.attr("a") < ctx.attr("b"):
        _attr_fail(ctx, f"a ({ctx.attr('a')}) must be less than b ({ctx.attr('b')})")
    shape = [int(d) for d in ctx.attr("shape")]
    if any(d < 0 for d in shape):
        _attr_fail(ctx, f"shape must not have negative dims, got {shape}")
    ctx.set_output("Out", shape, _dtype(ctx, _FLOATS, "a floating-point type"))


define("truncated_gaussian_random", inputs=[], outputs=["Out"],
       attrs={"shape": INTS(), "mean": FLOAT(0.0), "std": FLOAT(1.0), "seed": INT(0),
              "dtype": INT(_T.FP32), "a": FLOAT(-2.0), "b": FLOAT(2.0)},
       infer=_infer_truncated_gaussian, grad=NOT_DIFFERENTIABLE,
       doc="Samples from N(mean, std^2) restricted to [mean + a*std, mean + b*std].")


def _infer_randint(ctx):
    if not ctx.attr("low") < ctx.attr("high"):
        _attr_fail(ctx, f"low ({ctx.attr('low')}) must be less than high ({ctx.attr('high')})")
    ctx.set_output("Out", _out_shape(ctx), _dtype(ctx, (_T.INT32, _T.INT64), "int32 or int64"))


define("randint", inputs=[opt("ShapeTensor"), many("ShapeTensorList", optional=True)],
       outputs=["Out"],
       attrs={"low": INT(), "high": INT(), "shape": LONGS([]), "dtype": INT(_T.INT64),
              "seed": INT(0)},
       infer=_infer_randint, grad=NOT_DIFFERENTIABLE,
       doc="Uniform random integers in [low, high).")
