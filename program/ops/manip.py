"""Tensor-manipulation and small math ops that PaddlePaddle's model suites use (PaddleClas,
PaddleNLP, PaddleSeg, PaddleDetection): triangular masks, sorting, flips and rolls, index
selection along an axis, einsum, distances and norms, maxout, channel shuffles, im2col
(`unfold`), scatter_nd_add, size and share_data. Slots, attributes and gradient ops are
PaddlePaddle 3.3.1's legacy ones (tests/fixtures/paddle_op_signatures.json and
paddle_grad_signatures.json)."""
from __future__ import annotations

from keel.program.ops.infer import broadcast_shapes, dims_match, merge_dim, normalize_axis
from keel.program.ops.registry import (BOOL, FLOAT, INT, INTS, LONGS, NOT_DIFFERENTIABLE, STRING,
                                  GradOp, Slot, define, grad_maker, grad_op, many, opt)
from keel.proto import pb

_T = pb.VarType
_EMPTY = "@EMPTY@"


def _require_index(ctx, info, what):
    if info.dtype not in (_T.INT32, _T.INT64):
        ctx.dtype_fail(f"{what} must be int32 or int64, got {info}")


def _same_as_x(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


# -- tril_triu -----------------------------------------------------------------------------
def _infer_tril_triu(ctx):
    x = ctx.input("X")
    if x.ndim < 2:
        ctx.fail(f"needs a tensor of at least 2 dims, got {x}")
    ctx.set_output("Out", x.shape, x.dtype)


define("tril_triu", inputs=["X"], outputs=["Out"],
       attrs={"diagonal": INT(0), "lower": BOOL(False)}, infer=_infer_tril_triu,
       grad=grad_op(["Out@GRAD"], ["X@GRAD"], like={"X@GRAD": "Out@GRAD"}),
       doc="Out = X with the elements above (lower: tril) or below (triu) the `diagonal`-th "
           "diagonal of the last two dims set to zero")


# -- argsort -------------------------------------------------------------------------------
def _infer_argsort(ctx):
    x = ctx.input("X")
    if x.ndim:
        normalize_axis(ctx, ctx.attr("axis"), x.ndim)
    ctx.set_output("Out", x.shape, x.dtype)
    ctx.set_output("Indices", x.shape, _T.INT64)


define("argsort", inputs=["X"], outputs=["Out", "Indices"],
       attrs={"axis": INT(-1), "descending": BOOL(False), "stable": BOOL(False)},
       infer=_infer_argsort,
       grad=grad_op(["X", "Indices", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = X sorted along `axis` (NaN last ascending, first descending); Indices (int64) "
           "= their positions in X; equal elements keep their order")


# -- flip ------------------------------------------------------------------------------------
def _infer_flip(ctx):
    x = ctx.input("X")
    seen = set()
    for a in ctx.attr("axis"):
        a = normalize_axis(ctx, a, x.ndim)
        if a in seen:
            ctx.fail(f"axis {list(ctx.attr('axis'))} names dim {a} twice")
        seen.add(a)
    ctx.set_output("Out", x.shape, x.dtype)


def _flip_grad(op, g):
    """flip's gradient is a flip of Out@GRAD along the same axes (PaddlePaddle's maker)."""
    return [GradOp("flip", {"X": g.out("Out")}, {"Out": [dx]}, {"axis": list(op.attr("axis"))})
            for dx in g.inp("X") if dx]


define("flip", inputs=["X"], outputs=["Out"], attrs={"axis": INTS()}, infer=_infer_flip,
       grad=grad_maker(_flip_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
       doc="Out = X reversed along each axis in `axis`")


# -- index_select ----------------------------------------------------------------------------
def _infer_index_select(ctx):
    x, index = ctx.input("X"), ctx.input("Index")
    if x.ndim == 0:
        ctx.fail(f"X must have at least 1 dim to select along, got {x}")
    _require_index(ctx, index, "Index")
    if index.ndim > 1 and not (index.ndim == 2 and index.shape[1] in (1, -1)):
        ctx.fail(f"Index must be 1-D (or [N, 1]), got {index}")
    dim = normalize_axis(ctx, ctx.attr("dim"), x.ndim, "dim")
    shape = list(x.shape)
    if x.ndim:
        shape[dim] = index.shape[0] if index.ndim else 1
    ctx.set_output("Out", shape, x.dtype)


define("index_select", inputs=["X", "Index"], outputs=["Out"], attrs={"dim": INT(0)},
       infer=_infer_index_select, grad=grad_op(["X", "Index", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = X's slices along `dim` at the positions in Index, each in [-n, n)")


# -- roll --------------------------------------------------------------------------------------
def _infer_roll(ctx):
    x = ctx.input("X")
    shifts, axis = list(ctx.attr("shifts")), list(ctx.attr("axis"))
    if not ctx.has_input("ShiftsTensor"):
        if axis and len(shifts) != len(axis):
            ctx.fail(f"shifts {shifts} and axis {axis} must have the same length")
        if not axis and len(shifts) != 1:
            ctx.fail(f"without axis, shifts must hold one value, got {shifts}")
    for a in axis:
        normalize_axis(ctx, a, x.ndim)
    ctx.set_output("Out", x.shape, x.dtype)


define("roll", inputs=["X", opt("ShiftsTensor")], outputs=["Out"],
       attrs={"shifts": LONGS([]), "axis": LONGS([])}, infer=_infer_roll,
       grad=grad_op(["X", "ShiftsTensor", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = X rolled by `shifts` (the ShiftsTensor when given) along `axis`; without "
           "axis, X is rolled as a flat array and reshaped back")


# -- take_along_axis / put_along_axis --------------------------------------------------------
def _check_along(ctx, x, index, what):
    _require_index(ctx, index, "Index")
    if index.ndim != x.ndim:
        ctx.fail(f"Index must have the rank of {what}: {index} and {x}")
    axis = normalize_axis(ctx, ctx.attr("Axis"), x.ndim, "Axis")
    for d, (i, n) in enumerate(zip(index.shape, x.shape)):
        if d != axis and i >= 0 and n >= 0 and i > n:
            ctx.fail(f"Index dim {d} ({i}) exceeds {what}'s ({n}): {index} and {x}")
    return axis


def _infer_take_along_axis(ctx):
    x, index = ctx.input("Input"), ctx.input("Index")
    _check_along(ctx, x, index, "Input")
    ctx.set_output("Result", index.shape, x.dtype)


define("take_along_axis", inputs=["Input", "Index"], outputs=["Result"], attrs={"Axis": INT()},
       infer=_infer_take_along_axis,
       grad=grad_op(["Input", "Index", "Result@GRAD"], ["Input@GRAD"]),
       doc="Result[.., i, ..] = Input[.., Index[.., i, ..], ..] along `Axis`; Result has "
           "Index's shape (its other dims at most Input's), each index in [-n, n)")

PUT_ALONG_AXIS_REDUCES = ("assign", "add", "mul", "multiply", "mean", "amin", "amax")


def _infer_put_along_axis(ctx):
    x, index, value = ctx.input("Input"), ctx.input("Index"), ctx.input("Value")
    _check_along(ctx, x, index, "Input")
    if ctx.attr("Reduce") not in PUT_ALONG_AXIS_REDUCES:
        ctx.fail(f"Reduce {ctx.attr('Reduce')!r} is not one of {', '.join(PUT_ALONG_AXIS_REDUCES)}")
    dtype = ctx.same_dtype(x, value)
    ctx.set_output("Result", x.shape, dtype)


define("put_along_axis", inputs=["Input", "Index", "Value"], outputs=["Result"],
       attrs={"Axis": INT(), "Reduce": STRING("assign"), "Include_self": BOOL(True)},
       infer=_infer_put_along_axis,
       grad=grad_op(["Input", "Index", "Value", "Result", "Result@GRAD"],
                    ["Input@GRAD", "Value@GRAD"]),
       doc="Result = Input with Value (read at Index's positions) written along `Axis` at "
           "Index: assigned, or reduced with what is there (add, mul/multiply, mean, amin, "
           "amax; without Include_self, Input's values at written positions are left out)")


# -- einsum --------------------------------------------------------------------------------------
def parse_einsum(equation: str, ranks: list[int]):
    """(input label strings, output label string) of an explicit equation (PaddlePaddle's
    op requires `->`), each `...` expanded to upper-case labels right-aligned across the
    operands (their broadcast dims). Raises ValueError naming what is wrong."""
    eq = equation.replace(" ", "")
    if "->" not in eq:
        raise ValueError(f"equation {equation!r} must have '->' (the output labels)")
    lhs, rhs = eq.split("->", 1)
    terms = lhs.split(",")
    if len(terms) != len(ranks):
        raise ValueError(f"equation {equation!r} has {len(terms)} operands, {len(ranks)} given")
    if not 1 <= len(ranks) <= 2:
        raise ValueError(f"einsum takes 1 or 2 operands, got {len(ranks)}")
    ell = 0
    for t, r in zip(terms, ranks):
        if t.count("...") > 1:
            raise ValueError(f"equation {equation!r}: '...' more than once in {t!r}")
        if "..." in t:
            ell = max(ell, r - (len(t) - 3))
    broadcast = "".join(chr(ord("Z") - i) for i in range(ell))[::-1]
    out = []
    for t, r in zip(terms, ranks):
        if "..." in t:
            n = r - (len(t) - 3)
            if n < 0:
                raise ValueError(f"equation {equation!r}: {t!r} has more labels than the operand's {r} dims")
            t = t.replace("...", broadcast[ell - n:])
        elif len(t) != r:
            raise ValueError(f"equation {equation!r}: {t!r} labels {len(t)} dims, the operand has {r}")
        if not all(c.isalpha() and c.islower() or c in broadcast for c in t):
            raise ValueError(f"equation {equation!r}: labels must be 'a'-'z'")
        out.append(t)
    rhs = rhs.replace("...", broadcast)
    labels = set("".join(out))
    for c in rhs:
        if c not in labels:
            raise ValueError(f"equation {equation!r}: output label {c!r} is in no operand")
    if len(set(rhs)) != len(rhs):
        raise ValueError(f"equation {equation!r}: an output label appears twice")
    return out, rhs


def _infer_einsum(ctx):
    ops = ctx.inputs("Operands")
    try:
        terms, rhs = parse_einsum(ctx.attr("equation"), [o.ndim for o in ops])
    except ValueError as e:
        ctx.fail(str(e))
    size = {}
    for t, o in zip(terms, ops):
        for c, d in zip(t, o.shape):
            have = size.setdefault(c, d)
            if c.isupper() and 1 in (have, d):  # '...' dims broadcast
                size[c] = d if have == 1 else have
            elif not dims_match(have, d):
                ctx.fail(f"label {c!r} has sizes {have} and {d}: {', '.join(map(str, ops))}")
            else:
                size[c] = merge_dim(have, d)
    dtype = ctx.same_dtype(*ops)
    ctx.set_output("Out", [size[c] for c in rhs], dtype)
    for i, o in enumerate(ops):
        if i < ctx.num_outputs("XShape"):
            ctx.set_output("XShape", o.shape, o.dtype, i)
        if i < ctx.num_outputs("InnerCache"):
            ctx.set_output("InnerCache", [0], o.dtype, i)


def _einsum_grad(op, g):
    """PaddlePaddle's einsum_grad reads the operands through the forward op's XShape outputs
    (slot `x_shape`) and InnerCache, never Operands itself."""
    wanted = g.inp("Operands")
    if not any(wanted):
        return []
    ins = {"x_shape": op.output("XShape"), "InnerCache": op.output("InnerCache"),
           "Out@GRAD": g.out("Out")}
    return [GradOp("einsum_grad", ins, {"Operands@GRAD": [n or _EMPTY for n in wanted]},
                   {"equation": op.attr("equation")})]


define("einsum", inputs=[many("Operands")],
       outputs=["Out", Slot("InnerCache", duplicable=True, intermediate=True, extra=True),
                Slot("XShape", duplicable=True, intermediate=True, extra=True)],
       attrs={"equation": STRING()}, infer=_infer_einsum,
       grad=grad_maker(_einsum_grad, inputs=["Out@GRAD"], outputs=["Operands@GRAD"]),
       doc="Out = the Einstein summation `equation` ('ij,jk->ik'; explicit '->', '...' "
           "broadcast) of one or two Operands. XShape[i] keeps operand i for the gradient "
           "(PaddlePaddle's shape, Keel's data); InnerCache[i] is empty in Keel")


def _infer_einsum_grad(ctx):
    for i, x in enumerate(ctx.inputs("x_shape")):
        names = ctx.output_names("Operands@GRAD")
        if i < len(names) and names[i] and names[i] != _EMPTY:
            ctx.set_var(names[i], x.shape, x.dtype)


define("einsum_grad", inputs=[many("x_shape"), many("InnerCache", optional=True), "Out@GRAD"],
       outputs=[Slot("Operands@GRAD", duplicable=True, dispensable=True)],
       attrs={"equation": STRING()}, infer=_infer_einsum_grad, grad=NOT_DIFFERENTIABLE,
       doc="The gradient of einsum: each operand's is the summation of Out@GRAD with the "
           "other operand over the labels it lacks", grad_of="einsum")


# -- dist ----------------------------------------------------------------------------------------
def _infer_dist(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    broadcast_shapes(ctx, x, y)
    ctx.set_output("Out", [], ctx.same_dtype(x, y))


define("dist", inputs=["X", "Y"], outputs=["Out"], attrs={"p": FLOAT(2.0)}, infer=_infer_dist,
       grad=grad_op(["X", "Y", "Out", "Out@GRAD"], ["X@GRAD", "Y@GRAD"]),
       doc="Out (0-d) = the p-norm of X - Y (broadcast): p = 0 counts the non-zeros, "
           "inf/-inf take the largest/smallest magnitude")


# -- maxout ----------------------------------------------------------------------------------------
def _maxout_axis(ctx, x):
    if x.ndim != 4:
        ctx.fail(f"needs a 4-D input, got {x}")
    axis = ctx.attr("axis")
    if axis not in (1, -1, 3):
        ctx.fail(f"axis must be 1 (NCHW) or -1/3 (NHWC), got {axis}")
    return 1 if axis == 1 else 3


def _infer_maxout(ctx):
    x = ctx.input("X")
    axis = _maxout_axis(ctx, x)
    groups = ctx.attr("groups")
    if groups <= 0:
        ctx.fail(f"groups must be positive, got {groups}")
    c = x.shape[axis]
    if c >= 0 and c % groups:
        ctx.fail(f"the {c} channels of {x} do not divide into groups of {groups}")
    shape = list(x.shape)
    shape[axis] = c // groups if c >= 0 else -1
    ctx.set_output("Out", shape, x.dtype)


define("maxout", inputs=["X"], outputs=["Out"], attrs={"groups": INT(), "axis": INT(1)},
       infer=_infer_maxout, grad=grad_op(["X", "Out", "Out@GRAD"], ["X@GRAD"]),
       doc="Out channel c = the largest of X's channels c*groups .. c*groups + groups-1")


# -- norm ------------------------------------------------------------------------------------------
def _infer_norm(ctx):
    x = ctx.input("X")
    ctx.require_float(x)
    axis = normalize_axis(ctx, ctx.attr("axis"), x.ndim)
    ctx.set_output("Out", x.shape, x.dtype)
    if ctx.has_output("Norm"):
        shape = list(x.shape)
        shape[axis] = 1
        ctx.set_output("Norm", shape, x.dtype)


define("norm", inputs=["X"], outputs=["Out", Slot("Norm", intermediate=True, extra=True)],
       attrs={"axis": INT(), "epsilon": FLOAT(1e-10), "is_test": BOOL(False)},
       infer=_infer_norm, grad=grad_op(["X", "Norm", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = X / Norm, Norm = sqrt(sum(X^2 along `axis`) + epsilon) (kept as a dim of 1)")


# -- scatter_nd_add ----------------------------------------------------------------------------------
def _infer_scatter_nd_add(ctx):
    x, index, updates = ctx.input("X"), ctx.input("Index"), ctx.input("Updates")
    _require_index(ctx, index, "Index")
    dtype = ctx.same_dtype(x, updates)
    if index.ndim == 0:
        ctx.fail(f"Index must have at least 1 dim, got {index}")
    depth = index.shape[-1]
    if depth > x.ndim:
        ctx.fail(f"the last dim of Index ({depth}) exceeds the rank of X: {index} and {x}")
    if depth >= 0:
        want = list(index.shape[:-1]) + list(x.shape[depth:])
        if len(want) != updates.ndim or not all(dims_match(a, b) for a, b in zip(want, updates.shape)):
            ctx.fail(f"Updates must have shape Index.shape[:-1] + X.shape[{depth}:] = {want}, got {updates}")
    ctx.set_output("Out", x.shape, dtype)


define("scatter_nd_add", inputs=["X", "Index", "Updates"], outputs=["Out"],
       infer=_infer_scatter_nd_add,
       grad=grad_op(["Index", "Updates", "Out@GRAD"], ["X@GRAD", "Updates@GRAD"],
                    like={"X@GRAD": "Out@GRAD"}),
       doc="Out = X with Updates[i...] added at X[Index[i..., :]] (repeats accumulate; "
           "component j in [-X.shape[j], X.shape[j]))")


# -- shuffle_channel ----------------------------------------------------------------------------------
def _infer_shuffle_channel(ctx):
    x = ctx.input("X")
    if x.ndim != 4:
        ctx.fail(f"needs a 4-D NCHW input, got {x}")
    group = ctx.attr("group")
    if group <= 0 or (x.shape[1] >= 0 and x.shape[1] % group):
        ctx.fail(f"the {x.shape[1]} channels of {x} do not divide into {group} groups")
    ctx.set_output("Out", x.shape, x.dtype)


define("shuffle_channel", inputs=["X"], outputs=["Out"], attrs={"group": INT(1)},
       extra_attrs={"use_mkldnn": BOOL(False), "use_onednn": BOOL(False)},
       infer=_infer_shuffle_channel,
       grad=grad_op(["Out@GRAD"], ["X@GRAD"], like={"X@GRAD": "Out@GRAD"}),
       doc="Out = X's channels [group, C/group] transposed to [C/group, group] (ShuffleNet)")


# -- size, share_data ---------------------------------------------------------------------------------
def _infer_size(ctx):
    ctx.set_output("Out", [], _T.INT64)


define("size", inputs=["Input"], outputs=["Out"], infer=_infer_size, grad=NOT_DIFFERENTIABLE,
       doc="Out (0-d int64) = the number of elements of Input")

define("share_data", inputs=["X"], outputs=["Out"], infer=_same_as_x, grad=NOT_DIFFERENTIABLE,
       doc="Out = X (PaddlePaddle shares the buffer; Keel's kernels copy)")


# -- unfold (im2col) ---------------------------------------------------------------------------------
def unfold_output_size(size, kernel, stride, pad_before, pad_after, dilation) -> int:
    """Sliding positions along one spatial dim (-1 when the dim is unknown)."""
    if size < 0:
        return -1
    return (size + pad_before + pad_after - (dilation * (kernel - 1) + 1)) // stride + 1


def _infer_unfold(ctx):
    x = ctx.input("X")
    if x.ndim != 4:
        ctx.fail(f"needs a 4-D NCHW input, got {x}")
    k, s, p, d = (list(ctx.attr(n)) for n in ("kernel_sizes", "strides", "paddings", "dilations"))
    if len(k) != 2 or len(s) != 2 or len(d) != 2 or len(p) != 4:
        ctx.fail(f"kernel_sizes, strides, dilations need 2 values and paddings 4 "
                 f"[top, left, bottom, right]: {k}, {s}, {d}, {p}")
    if min(k + s + d) <= 0 or min(p) < 0:
        ctx.fail(f"kernel_sizes, strides and dilations must be positive, paddings >= 0: {k}, {s}, {d}, {p}")
    h = unfold_output_size(x.shape[2], k[0], s[0], p[0], p[2], d[0])
    w = unfold_output_size(x.shape[3], k[1], s[1], p[1], p[3], d[1])
    if (h != -1 and h <= 0) or (w != -1 and w <= 0):
        ctx.fail(f"the sliding blocks do not fit {x}: {h} x {w} positions")
    c = x.shape[1] * k[0] * k[1] if x.shape[1] >= 0 else -1
    ctx.set_output("Y", [x.shape[0], c, h * w if h >= 0 and w >= 0 else -1], x.dtype)


def _infer_fold(ctx):
    x = ctx.input("X")
    if len(x.shape) != 3:
        ctx.fail(f"X must be [N, C*kh*kw, L], got {x}")
    k, s, p, d = (list(ctx.attr(a)) for a in ("kernel_sizes", "strides", "paddings", "dilations"))
    out = list(ctx.attr("output_sizes"))
    if len(k) != 2 or len(s) != 2 or len(d) != 2 or len(p) != 4 or len(out) != 2:
        ctx.fail(f"need 2 output_sizes, kernel_sizes, strides, dilations and 4 paddings: "
                 f"{out}, {k}, {s}, {d}, {p}")
    if min(out + k + s + d) <= 0 or min(p) < 0:
        ctx.fail(f"output_sizes, kernel_sizes, strides and dilations must be positive, paddings >= 0: "
                 f"{out}, {k}, {s}, {d}, {p}")
    if p[0] != p[2] or p[1] != p[3]:  # PaddlePaddle's shape rule counts 2 * paddings[0], 2 * paddings[1]
        ctx.fail(f"paddings {p} must be symmetric ([top, left, bottom, right] with top == bottom and "
                 "left == right), as PaddlePaddle's fold requires")
    h = unfold_output_size(out[0], k[0], s[0], p[0], p[0], d[0])
    w = unfold_output_size(out[1], k[1], s[1], p[1], p[1], d[1])
    if h <= 0 or w <= 0:
        ctx.fail(f"the sliding blocks do not fit the {out[0]}x{out[1]} output: {h} x {w} positions")
    c = x.shape[1]
    if c >= 0 and c % (k[0] * k[1]):
        ctx.fail(f"X's dim 1 ({c}) is not a multiple of kernel_sizes' product {k[0] * k[1]}")
    if x.shape[2] >= 0 and x.shape[2] != h * w:
        ctx.fail(f"X has {x.shape[2]} blocks; output_sizes {out} with these kernel_sizes, strides, paddings "
                 f"and dilations make {h * w}")
    ctx.set_output("Y", [x.shape[0], c // (k[0] * k[1]) if c >= 0 else -1, out[0], out[1]], x.dtype)


define("fold", inputs=["X"], outputs=["Y"],
       attrs={"output_sizes": INTS(), "kernel_sizes": INTS(), "strides": INTS(), "paddings": INTS(),
              "dilations": INTS()},
       infer=_infer_fold, grad=grad_op(["X", "Y@GRAD"], ["X@GRAD"]),
       doc="col2im, the adjoint of unfold: Y[n, c] sums every block entry X[n, c*kh*kw + i*kw + j, l] "
           "at the position it covers, the image zero-padded by paddings [top, left, bottom, right] "
           "(symmetric, as PaddlePaddle's fold requires)")

define("unfold", inputs=["X"], outputs=["Y"],
       attrs={"kernel_sizes": INTS(), "strides": INTS(), "paddings": INTS(), "dilations": INTS()},
       infer=_infer_unfold, grad=grad_op(["X", "Y@GRAD"], ["X@GRAD"]),
       doc="Y[n, c*kh*kw + i*kw + j, l] = X (zero-padded [top, left, bottom, right]) at block "
           "l's row i, column j (im2col)")

