"""Tensor ops: feed/fetch, reshaping and reordering, joining and splitting, slicing,
indexing, broadcasting, and creating tensors from constants."""
from __future__ import annotations

from keel.program import dtypes
from keel.program.ops.infer import dims_match, merge_dim, normalize_axis, numel
from keel.program.ops.registry import (BOOL, FLOAT, INT, INTS, LONGS, NOT_DIFFERENTIABLE, SCALARS, STRING,
                                  GradOp, Slot, define, grad_maker, grad_op, many, opt, side)
from keel.proto import pb

_T = pb.VarType
# PaddlePaddle's "to the end" value for slice ends (INT_MAX); any value past the dim clamps.
INT_MAX = 2**31 - 1


# XShape of transpose2/squeeze2/unsqueeze2: kept for the gradient, stripped from inference files.
_XSHAPE_EXTRA = Slot("XShape", intermediate=True, extra=True)


def _nothing(ctx):
    """feed/fetch: the output keeps the shape it was declared with."""


def _set_xshape(ctx, x):
    """XShape, the gradient's record of X's shape: [0] + X.shape."""
    ctx.set_output("XShape", [0] + list(x.shape), x.dtype)


def _dtype_attr(ctx, name="dtype") -> int:
    code = ctx.attr(name)
    try:
        return dtypes.to_code(int(code))
    except TypeError:
        ctx.dtype_fail(f"{name} {code} is not a known dtype number")


def _require_index(ctx, info, what):
    if info.dtype not in (_T.INT32, _T.INT64):
        ctx.dtype_fail(f"{what} must be int32 or int64, got {info}")


def _one_element_input(ctx, info, what):
    if numel(info.shape) not in (1, -1):
        ctx.fail(f"{what} must hold exactly one value, got {info}")


def _shape_from_tensors(ctx, attr_shape, list_slot=None, tensor_slot=None):
    """The shape given by an `XxxTensorList` (one 1-element tensor per dim) or an `XxxTensor`
    (a 1-D tensor), or None when neither is given. Dims are -1 (known at run time) except
    where the attribute holds the same dim as a positive constant."""
    if list_slot and ctx.has_input(list_slot):
        n = len(ctx.inputs(list_slot))
        if len(attr_shape) == n:
            return [d if d > 0 else -1 for d in attr_shape]
        return [-1] * n
    if tensor_slot and ctx.has_input(tensor_slot):
        t = ctx.input(tensor_slot)
        if t.ndim > 1:
            ctx.fail(f"{tensor_slot} must be a 1-D tensor, got {t}")
        n = numel(t.shape)
        if n < 0:
            if attr_shape:
                return [d if d > 0 else -1 for d in attr_shape]
            ctx.fail(f"{tensor_slot} has an unknown length, so the output rank is unknown: {t}")
        return [-1] * n
    return None


# -- gradient shape rules ------------------------------------------------------------------
def _infer_grad_from_xshape(ctx):
    """reshape2/transpose2/flatten/squeeze2/unsqueeze2 gradients read XShape, not X:
    X@GRAD has XShape's shape without its leading 0."""
    xshape, dout = ctx.input("XShape"), ctx.input("Out@GRAD")
    ctx.set_output("X@GRAD", list(xshape.shape[1:]), dout.dtype)


def _xshape_grad(*extra_inputs):
    """The gradient of an op that records X's shape in XShape: `<op>_grad(XShape, Out@GRAD)`."""
    return grad_op(["XShape", "Out@GRAD", *extra_inputs], ["X@GRAD"], infer=_infer_grad_from_xshape)


# -- feed / fetch --------------------------------------------------------------------------
define("feed", inputs=["X"], outputs=["Out"], attrs={"col": INT()}, infer=_nothing,
       grad=NOT_DIFFERENTIABLE,
       doc="Out = column `col` of the feed list X (the FEED_MINIBATCH var); Out keeps its declared shape")
define("fetch", inputs=["X"], outputs=["Out"], attrs={"col": INT()}, infer=_nothing,
       grad=NOT_DIFFERENTIABLE,
       doc="Store X as column `col` of the fetch list Out (the FETCH_LIST var)")


# -- reshape2, transpose2, flatten, squeeze2, unsqueeze2 ---------------------------------------
def reshape_output_shape(ctx, x, shape) -> list[int]:
    """PaddlePaddle's reshape rule: 0 copies X's dim at that index, one -1 is inferred from
    the element count. An inferred dim is -1 only when the unknown dims of X do not cancel
    out (e.g. X [-1, 3, 4] with shape [0, -1] gives [-1, 12])."""
    out = list(shape)
    unknown = [i for i, d in enumerate(out) if d == -1]
    if len(unknown) > 1:
        ctx.fail(f"shape {list(shape)} has more than one -1, for input {x}")
    copied = set()
    for i, d in enumerate(out):
        if d == 0:
            if i >= x.ndim:
                ctx.fail(f"shape {list(shape)} has 0 (copy the input dim) at index {i}, "
                         f"but the input has only {x.ndim} dims: {x}")
            out[i] = x.shape[i]
            copied.add(i)
        elif d < -1:
            ctx.fail(f"shape {list(shape)} has an invalid dim {d} (only -1 and 0 are special), for input {x}")
    total_in = numel(x.shape)
    if unknown:
        u = unknown[0]
        others = numel([d for i, d in enumerate(out) if i != u])
        if total_in >= 0 and others >= 0:
            if others == 0 or total_in % others:
                ctx.fail(f"cannot reshape {x} ({total_in} elements) to {list(shape)}: the -1 "
                         f"cannot be inferred from the other dims ({others} elements)")
            out[u] = total_in // others
        else:
            out[u] = _cancel_unknown(ctx, x, shape, out, copied, u)
    elif total_in >= 0 and numel(out) >= 0 and total_in != numel(out):
        ctx.fail(f"cannot reshape {x} ({total_in} elements) to {list(shape)} "
                 f"({numel(out)} elements)")
    return out


def _cancel_unknown(ctx, x, shape, out, copied, u) -> int:
    """The -1 of a reshape whose input has unknown dims: exact when every unknown input dim
    is copied by a 0 (they cancel out), -1 otherwise."""
    rest_in = numel([d for i, d in enumerate(x.shape) if i not in copied])
    rest_out = numel([d for i, d in enumerate(out) if i not in copied and i != u])
    if rest_in < 0 or rest_out <= 0:
        return -1
    if rest_in % rest_out:
        ctx.fail(f"cannot reshape {x} to {list(shape)}: {rest_in} elements are not "
                 f"divisible by {rest_out}")
    return rest_in // rest_out


def _infer_reshape2(ctx):
    x = ctx.input("X")
    attr_shape = ctx.attr("shape")
    if ctx.has_input("ShapeTensor"):
        out = _shape_from_tensors(ctx, attr_shape, list_slot="ShapeTensor")
    elif ctx.has_input("Shape") and not attr_shape:
        out = _shape_from_tensors(ctx, [], tensor_slot="Shape")
    else:
        out = reshape_output_shape(ctx, x, attr_shape)
    ctx.set_output("Out", out, x.dtype)
    _set_xshape(ctx, x)


define("reshape2", inputs=["X", opt("Shape"), many("ShapeTensor", optional=True)],
       outputs=["Out", side("XShape")],
       attrs={"shape": INTS([]), "use_quantizer": BOOL(False)},
       infer=_infer_reshape2, grad=_xshape_grad(),
       doc="Out = X with shape `shape` (0: copy X's dim, -1: inferred); the Shape tensor or "
           "the ShapeTensor list, when given, replace the attribute")


def _infer_transpose2(ctx):
    x = ctx.input("X")
    axis = list(ctx.attr("axis"))
    norm = [a + x.ndim if a < 0 else a for a in axis]
    if sorted(norm) != list(range(x.ndim)):
        ctx.fail(f"axis {axis} is not a permutation of the {x.ndim} dims of {x}")
    ctx.set_output("Out", [x.shape[a] for a in norm], x.dtype)
    _set_xshape(ctx, x)


define("transpose2", inputs=["X"], outputs=["Out", _XSHAPE_EXTRA],
       attrs={"axis": INTS()}, extra_attrs={"data_format": STRING("AnyLayout")},
       infer=_infer_transpose2, grad=_xshape_grad(),
       doc="Out = X with its dims permuted: Out.shape[i] = X.shape[axis[i]]")


def _infer_flatten(ctx):
    x = ctx.input("X")
    if x.ndim == 0:
        ctx.set_output("Out", [1], x.dtype)
        _set_xshape(ctx, x)
        return
    start = normalize_axis(ctx, ctx.attr("start_axis"), x.ndim, "start_axis")
    stop = normalize_axis(ctx, ctx.attr("stop_axis"), x.ndim, "stop_axis")
    if start > stop:
        ctx.fail(f"start_axis {ctx.attr('start_axis')} comes after stop_axis "
                 f"{ctx.attr('stop_axis')} for {x}")
    out = list(x.shape[:start]) + [numel(x.shape[start:stop + 1])] + list(x.shape[stop + 1:])
    ctx.set_output("Out", out, x.dtype)
    _set_xshape(ctx, x)


define("flatten_contiguous_range", inputs=["X"], outputs=["Out", Slot("XShape", extra=True)],
       attrs={"start_axis": INT(), "stop_axis": INT()},
       infer=_infer_flatten, grad=_xshape_grad(),
       doc="Out = X with dims start_axis..stop_axis (inclusive) merged into one")


def _infer_squeeze2(ctx):
    x = ctx.input("X")
    axes = ctx.attr("axes")
    if not axes:
        out = [d for d in x.shape if d != 1]
    else:
        drop = set()
        for a in axes:
            if not -x.ndim <= a < max(x.ndim, 1):
                ctx.fail(f"axis {a} in axes {list(axes)} is out of range for {x}")
            a %= max(x.ndim, 1)
            # A named dim is squeezed when it is 1; an unknown (-1) one is assumed to be 1, as
            # PaddlePaddle does. A named dim of another size is kept.
            if x.ndim and x.shape[a] in (1, -1):
                drop.add(a)
        out = [d for i, d in enumerate(x.shape) if i not in drop]
    ctx.set_output("Out", out, x.dtype)
    _set_xshape(ctx, x)


define("squeeze2", inputs=["X"], outputs=["Out", _XSHAPE_EXTRA],
       attrs={"axes": INTS([])}, infer=_infer_squeeze2, grad=_xshape_grad(),
       doc="Out = X without the size-1 dims listed in `axes` (all size-1 dims when empty); "
           "listed dims of another size are kept")


def unsqueeze_output_shape(ctx, x, axes) -> list[int]:
    """Insert size-1 dims one axis at a time; a negative axis counts from the end of the
    shape built so far (PaddlePaddle's order of insertion)."""
    out = list(x.shape)
    for a in axes:
        rank = len(out)
        pos = a + rank + 1 if a < 0 else a
        if not 0 <= pos <= rank:
            ctx.fail(f"axis {a} in axes {list(axes)} is out of range: a dim can be inserted at "
                     f"[{-rank - 1}, {rank}] of a {rank}-d shape (input {x})")
        out.insert(pos, 1)
    return out


def _infer_unsqueeze2(ctx):
    x = ctx.input("X")
    if ctx.has_input("AxesTensorList"):
        out = [-1] * (x.ndim + len(ctx.inputs("AxesTensorList")))
    elif ctx.has_input("AxesTensor"):
        t = ctx.input("AxesTensor")
        if numel(t.shape) < 0:
            ctx.fail(f"AxesTensor has an unknown length, so the output rank is unknown: {t}")
        out = [-1] * (x.ndim + numel(t.shape))
    else:
        out = unsqueeze_output_shape(ctx, x, ctx.attr("axes"))
    ctx.set_output("Out", out, x.dtype)
    _set_xshape(ctx, x)


define("unsqueeze2", inputs=["X", opt("AxesTensor"), many("AxesTensorList", optional=True)],
       outputs=["Out", _XSHAPE_EXTRA],
       attrs={"axes": INTS([])}, infer=_infer_unsqueeze2,
       grad=_xshape_grad("AxesTensor", "AxesTensorList"),
       doc="Out = X with size-1 dims inserted at `axes`, in order")


# -- concat, split, stack, unstack ---------------------------------------------------------
def _infer_concat(ctx):
    xs = ctx.inputs("X")
    if not xs:
        ctx.fail("needs at least one input in X")
    dtype = ctx.same_dtype(*xs)
    first = xs[0]
    for x in xs[1:]:
        if x.ndim != first.ndim:
            ctx.fail(f"all inputs must have the same rank, got {first} and {x}")
    if ctx.has_input("AxisTensor"):
        ctx.set_output("Out", [-1] * first.ndim, dtype)
        return
    if first.ndim == 0:
        ctx.fail(f"cannot concatenate 0-d tensors: {first}")
    axis = normalize_axis(ctx, ctx.attr("axis"), first.ndim)
    out = list(first.shape)
    for x in xs[1:]:
        for i, (a, b) in enumerate(zip(out, x.shape)):
            if i == axis:
                out[i] = a + b if a >= 0 and b >= 0 else -1
            elif not dims_match(a, b):
                ctx.fail(f"inputs differ in dim {i} (concatenating along axis {axis}): {first} and {x}")
            else:
                out[i] = merge_dim(a, b)
    ctx.set_output("Out", out, dtype)


# split's gradient is a concat that keeps split's attributes (num, sections), as PaddlePaddle
# writes it; they are accepted here as extra attributes and ignored.
define("concat", inputs=[many("X"), opt("AxisTensor")], outputs=["Out"], attrs={"axis": INT(0)},
       extra_attrs={"num": INT(0), "sections": INTS([])},
       infer=_infer_concat, grad=grad_op(["X", "AxisTensor", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = the inputs joined along `axis` (AxisTensor, when given, replaces it)")


def _infer_split(ctx):
    x = ctx.input("X")
    n_out = ctx.num_outputs("Out")
    num, sections = ctx.attr("num"), list(ctx.attr("sections"))
    if ctx.has_input("AxisTensor"):
        for i in range(n_out):
            ctx.set_output("Out", [-1] * x.ndim, x.dtype, i)
        return
    axis = normalize_axis(ctx, ctx.attr("axis"), x.ndim)
    dim = x.shape[axis]
    if num > 0:
        if n_out != num:
            ctx.fail(f"num={num} but {n_out} outputs were given, for {x}")
        if dim >= 0 and dim % num:
            ctx.fail(f"dim {axis} of {x} ({dim}) is not divisible by num={num}")
        sizes = [dim // num if dim >= 0 else -1] * num
    elif sections:
        if n_out != len(sections):
            ctx.fail(f"sections {sections} has {len(sections)} entries but {n_out} outputs were given")
        if ctx.has_input("SectionsTensorList"):
            sizes = [s if s > 0 else -1 for s in sections]
        else:
            unknown = [i for i, s in enumerate(sections) if s == -1]
            if len(unknown) > 1 or any(s < -1 for s in sections):
                ctx.fail(f"sections {sections} may hold at most one -1 and no other negative value")
            known = sum(s for s in sections if s >= 0)
            sizes = list(sections)
            if dim >= 0:
                if unknown:
                    if known > dim:
                        ctx.fail(f"sections {sections} add up to more than dim {axis} of {x}")
                    sizes[unknown[0]] = dim - known
                elif known != dim:
                    ctx.fail(f"sections {sections} add up to {known}, but dim {axis} of {x} is {dim}")
    else:
        ctx.fail(f"needs num > 0 or non-empty sections, got num={num}, sections={sections}")
    for i, size in enumerate(sizes):
        shape = list(x.shape)
        shape[axis] = size
        ctx.set_output("Out", shape, x.dtype, i)


def _split_grad(op, g):
    """split's gradient is a `concat` of the output gradients along the same axis (the
    engine fills unused ones with zeros), carrying split's attributes, as PaddlePaddle's."""
    dx = g.inp("X")[0]
    if not dx:
        return []
    attrs = {"axis": op.attr("axis", 0), "num": op.attr("num", 0),
             "sections": list(op.attr("sections", None) or [])}
    return [GradOp("concat", {"X": g.out("Out"), "AxisTensor": op.input("AxisTensor")},
                   {"Out": [dx]}, attrs)]


define("split", inputs=["X", opt("AxisTensor"), many("SectionsTensorList", optional=True)],
       outputs=[many("Out")],
       attrs={"axis": INT(0), "num": INT(0), "sections": INTS([])},
       infer=_infer_split, grad=grad_maker(_split_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
       doc="Out[i] = consecutive pieces of X along `axis`: `num` equal pieces, or pieces of "
           "the sizes in `sections` (one -1 takes the rest)")


def _infer_stack(ctx):
    xs = ctx.inputs("X")
    if not xs:
        ctx.fail("needs at least one input in X")
    dtype = ctx.same_dtype(*xs)
    shape = list(xs[0].shape)
    for x in xs[1:]:
        if x.ndim != len(shape) or not all(dims_match(a, b) for a, b in zip(shape, x.shape)):
            ctx.fail(f"all inputs must have the same shape, got {xs[0]} and {x}")
        shape = [merge_dim(a, b) for a, b in zip(shape, x.shape)]
    axis = ctx.attr("axis")
    rank = len(shape) + 1
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range [{-rank}, {rank - 1}] for inputs {xs[0]}")
    shape.insert(axis % rank, len(xs))
    ctx.set_output("Y", shape, dtype)


define("stack", inputs=[many("X")], outputs=["Y"], attrs={"axis": INT(0)},
       infer=_infer_stack, grad=grad_op(["X", "Y@GRAD"], ["X@GRAD"]),
       doc="Y = the inputs (of one shape) stacked along a new dim at `axis`")


def _infer_unstack(ctx):
    x = ctx.input("X")
    if x.ndim == 0:
        ctx.fail(f"cannot unstack a 0-d tensor: {x}")
    axis = normalize_axis(ctx, ctx.attr("axis"), x.ndim)
    num, n_out = ctx.attr("num"), ctx.num_outputs("Y")
    if x.shape[axis] >= 0 and num != x.shape[axis]:
        ctx.fail(f"num={num} but dim {axis} of {x} is {x.shape[axis]}")
    if n_out != num:
        ctx.fail(f"num={num} but {n_out} outputs were given")
    shape = [d for i, d in enumerate(x.shape) if i != axis]
    for i in range(n_out):
        ctx.set_output("Y", shape, x.dtype, i)


def _infer_unstack_grad(ctx):
    """unstack_grad reads only Y@GRAD: X@GRAD is the Y@GRADs stacked along `axis`."""
    dys = ctx.inputs("Y@GRAD")
    shape = list(dys[0].shape)
    for dy in dys[1:]:
        shape = [merge_dim(a, b) for a, b in zip(shape, dy.shape)]
    rank = len(shape) + 1
    axis = ctx.attr("axis")
    if not -rank <= axis < rank:
        ctx.fail(f"axis {axis} is out of range for the gradients {dys[0]}")
    shape.insert(axis % rank, len(dys))
    ctx.set_output("X@GRAD", shape, dys[0].dtype)


define("unstack", inputs=["X"], outputs=[many("Y")], attrs={"axis": INT(0), "num": INT(0)},
       infer=_infer_unstack, grad=grad_op(["Y@GRAD"], ["X@GRAD"], infer=_infer_unstack_grad),
       doc="Y[i] = X[..., i, ...] along `axis` (num = X.shape[axis] outputs)")


# -- slice, strided_slice ----------------------------------------------------------------------
def _slice_len(dim, start, end, step=1) -> int:
    """Python's slice length for a known dim (indices clamp like Python's)."""
    return len(range(*slice(start, end, step).indices(dim)))


def _infer_slicing(ctx, strided: bool):
    x = ctx.input("Input")
    if x.ndim == 0:
        ctx.fail(f"cannot slice a 0-D Input {x}: it has no axis")
    axes = list(ctx.attr("axes"))
    starts, ends = list(ctx.attr("starts")), list(ctx.attr("ends"))
    strides = list(ctx.attr("strides")) if strided else [1] * len(axes)
    flags = list(ctx.attr("infer_flags"))
    from_tensor = {name: ctx.has_input(name + "Tensor") or ctx.has_input(name + "TensorList")
                   for name in ("Starts", "Ends", "Strides")}
    for name, values in (("starts", starts), ("ends", ends), ("strides", strides)):
        if not from_tensor.get(name.capitalize()) and len(values) != len(axes):
            ctx.fail(f"{name} {values} must have one entry per axis in axes {axes}")
    out = list(x.shape)
    seen = set()
    for i, a in enumerate(axes):
        axis = normalize_axis(ctx, a, x.ndim, "axis")
        if axis in seen:
            ctx.fail(f"axes {axes} names dimension {axis} twice")
        seen.add(axis)
        dim = x.shape[axis]
        unknown = (any(from_tensor.values()) or (i < len(flags) and flags[i] == -1) or dim < 0)
        if strided and not from_tensor["Strides"] and strides[i] == 0:
            ctx.fail(f"strides {strides} has a 0 step (axis {a})")
        out[axis] = -1 if unknown else _slice_len(dim, starts[i], ends[i], strides[i])
    decrease = list(ctx.attr("decrease_axis"))
    if decrease:
        drop = set()
        for d in decrease:
            axis = normalize_axis(ctx, d, x.ndim, "decrease_axis")
            if axis not in seen:
                ctx.fail(f"decrease_axis {decrease} names dim {d}, which is not in axes {axes}")
            if out[axis] not in (1, -1):
                ctx.fail(f"decrease_axis {decrease}: dim {axis} of the slice has size {out[axis]}, "
                         f"not 1 (input {x})")
            drop.add(axis)
        out = [d for i, d in enumerate(out) if i not in drop]
    ctx.set_output("Out", out, x.dtype)


_SLICE_TENSORS = [opt("StartsTensor"), opt("EndsTensor"), many("StartsTensorList", optional=True),
                  many("EndsTensorList", optional=True)]
_SLICE_ATTRS = {"axes": INTS(), "starts": INTS([]), "ends": INTS([]), "infer_flags": INTS([]),
                "decrease_axis": INTS([])}

_SLICE_TENSOR_NAMES = [s.name for s in _SLICE_TENSORS]

define("slice", inputs=["Input", *_SLICE_TENSORS], outputs=["Out"], attrs=_SLICE_ATTRS,
       infer=lambda ctx: _infer_slicing(ctx, strided=False),
       grad=grad_op(["Input", *_SLICE_TENSOR_NAMES, "Out@GRAD"], ["Input@GRAD"]),
       doc="Out = Input[starts:ends] along each of `axes`; indices count from the end when "
           "negative and clamp like Python's; decrease_axis drops those (size-1) dims")
define("strided_slice",
       inputs=["Input", *_SLICE_TENSORS, opt("StridesTensor"), many("StridesTensorList", optional=True)],
       outputs=["Out"], attrs={**_SLICE_ATTRS, "strides": INTS([])},
       infer=lambda ctx: _infer_slicing(ctx, strided=True),
       grad=grad_op(["Input", *_SLICE_TENSOR_NAMES, "StridesTensor", "StridesTensorList", "Out@GRAD"],
                    ["Input@GRAD"]),
       doc="Out = Input[starts:ends:strides] along each of `axes` (Python semantics, negative "
           "strides allowed); decrease_axis drops those (size-1) dims")


# -- gather, gather_nd, scatter ------------------------------------------------------------------
def _index_count(ctx, index, what):
    """Number of indices in a 1-D index, a [N, 1] index, or None for a 0-d index."""
    if index.ndim == 0:
        return None
    if index.ndim == 1:
        return index.shape[0]
    if index.ndim == 2 and index.shape[1] in (1, -1):
        return index.shape[0]
    ctx.fail(f"{what} must be 0-d, 1-D or [N, 1], got {index}")


def _infer_gather(ctx):
    x, index = ctx.input("X"), ctx.input("Index")
    _require_index(ctx, index, "Index")
    if x.ndim == 0:
        ctx.fail(f"cannot gather from a 0-d tensor: {x}")
    n = _index_count(ctx, index, "Index")
    if ctx.has_input("Axis"):
        shape = [-1] * (x.ndim if n is not None else x.ndim - 1)
    else:
        axis = normalize_axis(ctx, ctx.attr("axis"), x.ndim)
        shape = list(x.shape[:axis]) + ([n] if n is not None else []) + list(x.shape[axis + 1:])
    ctx.set_output("Out", shape, x.dtype)


define("gather", inputs=["X", "Index", opt("Axis")], outputs=["Out"], attrs={"axis": INT(0)},
       infer=_infer_gather, grad=grad_op(["X", "Index", "Axis", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = X indexed by the 1-D Index along `axis` (the Axis tensor, when given, replaces it)")


def _infer_gather_nd(ctx):
    x, index = ctx.input("X"), ctx.input("Index")
    _require_index(ctx, index, "Index")
    if index.ndim == 0:
        ctx.fail(f"Index must have at least 1 dim, got {index}")
    depth = index.shape[-1]
    if depth < 0:
        ctx.fail(f"the last dim of Index (the index depth) must be known, got {index}")
    if depth > x.ndim:
        ctx.fail(f"the last dim of Index ({depth}) exceeds the rank of X: {index} and {x}")
    ctx.set_output("Out", list(index.shape[:-1]) + list(x.shape[depth:]), x.dtype)


define("gather_nd", inputs=["X", "Index"], outputs=["Out"], infer=_infer_gather_nd,
       grad=grad_op(["X", "Index", "Out@GRAD"], ["X@GRAD"]),
       doc="Out[i...] = X[Index[i..., :]]: the last dim of Index indexes X's leading dims")


def _infer_scatter(ctx):
    x, ids, updates = ctx.input("X"), ctx.input("Ids"), ctx.input("Updates")
    if x.ndim == 0:
        ctx.fail(f"X must have at least 1 dim (rows to scatter into), got {x}")
    _require_index(ctx, ids, "Ids")
    dtype = ctx.same_dtype(x, updates)
    n = _index_count(ctx, ids, "Ids")
    if n is None:
        if updates.ndim != x.ndim - 1 or not all(dims_match(a, b) for a, b in zip(updates.shape, x.shape[1:])):
            ctx.fail(f"with a 0-d Ids, Updates must have shape X.shape[1:]: {updates} and {x}")
    else:
        if updates.ndim != x.ndim or not all(dims_match(a, b) for a, b in zip(updates.shape[1:], x.shape[1:])):
            ctx.fail(f"Updates must have shape [N] + X.shape[1:]: {updates} and {x}")
        if not dims_match(updates.shape[0], n):
            ctx.fail(f"Updates has {updates.shape[0]} rows but Ids has {n} indices: {updates} and {ids}")
    ctx.set_output("Out", x.shape, dtype)


define("scatter", inputs=["X", "Ids", "Updates"], outputs=["Out"], attrs={"overwrite": BOOL(True)},
       infer=_infer_scatter,
       grad=grad_op(["Ids", "Updates", "Out@GRAD"], ["X@GRAD", "Updates@GRAD"],
                    like={"X@GRAD": "Out@GRAD"}),
       doc="Out = X with rows Ids replaced by (or, unless overwrite, accumulated with) Updates")


# -- expand, tile -------------------------------------------------------------------------------
def expand_output_shape(ctx, x, target, keep_value=-1) -> list[int]:
    """Broadcast X to `target` (X right-aligned); `keep_value` in target keeps X's dim."""
    if len(target) < x.ndim:
        ctx.fail(f"the target shape {list(target)} has fewer dims than {x}")
    lead = len(target) - x.ndim
    out = []
    for i, t in enumerate(target):
        d = x.shape[i - lead] if i >= lead else None
        if t == keep_value:
            if d is None:
                ctx.fail(f"target shape {list(target)} has {keep_value} (keep the input dim) at "
                         f"index {i}, a new leading dim, for {x}")
            out.append(d)
        elif t < 0:
            out.append(-1)
        elif d is not None and d >= 0 and d != 1 and d != t:
            ctx.fail(f"cannot expand {x} to {list(target)}: dim {i - lead} is {d}, "
                     f"which is neither 1 nor {t}")
        else:
            out.append(t)
    return out


def _infer_expand_v2(ctx):
    x = ctx.input("X")
    attr = list(ctx.attr("shape"))
    if ctx.has_input("Shape") and not attr:
        out = _shape_from_tensors(ctx, [], tensor_slot="Shape")
    else:
        # dims given by expand_shapes_tensor are -2 placeholders in the attribute
        out = expand_output_shape(ctx, x, attr)
    ctx.set_output("Out", out, x.dtype)


define("expand_v2", inputs=["X", opt("Shape"), many("expand_shapes_tensor", optional=True)],
       outputs=["Out"], attrs={"shape": INTS([])}, infer=_infer_expand_v2,
       grad=grad_op(["X", "Shape", "expand_shapes_tensor", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = X broadcast to `shape` (-1 keeps X's dim; X aligned to the right)")


def _infer_expand_as_v2(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    target = list(ctx.attr("target_shape"))
    if not target:
        if y is None:
            ctx.fail("needs target_shape or the Y input")
        target = list(y.shape)
    ctx.set_output("Out", expand_output_shape(ctx, x, target, keep_value=None), x.dtype)


define("expand_as_v2", inputs=["X", opt("Y")], outputs=["Out"], attrs={"target_shape": INTS([])},
       infer=_infer_expand_as_v2, grad=grad_op(["X", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = X broadcast to target_shape (or to Y's shape)")


def _infer_tile(ctx):
    x = ctx.input("X")
    reps = list(ctx.attr("repeat_times"))
    if ctx.has_input("RepeatTimes") or ctx.has_input("repeat_times_tensor"):
        reps = _shape_from_tensors(ctx, reps, "repeat_times_tensor", "RepeatTimes")
    elif any(r <= 0 for r in reps):
        ctx.fail(f"repeat_times {reps} must be positive, for {x}")
    n = max(len(reps), x.ndim)
    reps = [1] * (n - len(reps)) + reps
    shape = [1] * (n - x.ndim) + list(x.shape)
    out = [d * r if d >= 0 and r > 0 else -1 for d, r in zip(shape, reps)]
    ctx.set_output("Out", out, x.dtype)


define("tile", inputs=["X", opt("RepeatTimes"), many("repeat_times_tensor", optional=True)],
       outputs=["Out"], attrs={"repeat_times": INTS([])}, infer=_infer_tile,
       grad=grad_op(["X", "RepeatTimes", "repeat_times_tensor", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = X repeated repeat_times[i] times along each dim (shapes aligned to the right)")


# -- range, linspace, fill ------------------------------------------------------------------------
def _infer_range(ctx):
    start, end, step = ctx.input("Start"), ctx.input("End"), ctx.input("Step")
    for info, what in ((start, "Start"), (end, "End"), (step, "Step")):
        _one_element_input(ctx, info, what)
    dtype = ctx.same_dtype(start, end, step)
    # The length depends on the values; a layer that knows them sets it after appending.
    ctx.set_output("Out", [-1], dtype)


define("range", inputs=["Start", "End", "Step"], outputs=["Out"], infer=_infer_range,
       grad=NOT_DIFFERENTIABLE,
       doc="Out = [Start, Start + Step, ...] up to (excluding) End; one-element inputs of one dtype")


def _infer_linspace(ctx):
    start, stop, num = ctx.input("Start"), ctx.input("Stop"), ctx.input("Num")
    for info, what in ((start, "Start"), (stop, "Stop"), (num, "Num")):
        _one_element_input(ctx, info, what)
    _require_index(ctx, num, "Num")
    ctx.set_output("Out", [-1], _dtype_attr(ctx))


define("linspace", inputs=["Start", "Stop", "Num"], outputs=["Out"], attrs={"dtype": INT()},
       infer=_infer_linspace, grad=NOT_DIFFERENTIABLE,
       doc="Out = Num evenly spaced values from Start to Stop (inclusive), of type `dtype`")


def _infer_fill_constant(ctx):
    attr = list(ctx.attr("shape"))
    shape = _shape_from_tensors(ctx, attr, list_slot="ShapeTensorList", tensor_slot="ShapeTensor")
    if shape is None:
        if any(d < 0 for d in attr):
            ctx.fail(f"shape {attr} has a negative dim")
        shape = attr
    if ctx.has_input("ValueTensor"):
        _one_element_input(ctx, ctx.input("ValueTensor"), "ValueTensor")
    ctx.set_output("Out", shape, _dtype_attr(ctx))


define("fill_constant",
       inputs=[opt("ValueTensor"), opt("ShapeTensor"), many("ShapeTensorList", optional=True)],
       outputs=["Out"],
       attrs={"shape": LONGS([]), "dtype": INT(_T.FP32), "value": FLOAT(0.0), "str_value": STRING(""),
              "force_cpu": BOOL(False), "place_type": INT(-1)},
       infer=_infer_fill_constant, grad=NOT_DIFFERENTIABLE,
       doc="Out = a tensor of `shape` and `dtype` filled with `value` (str_value, when not "
           "empty, holds the exact value; the Value/Shape tensors, when given, replace them)")


def _infer_fill_any_like(ctx):
    x = ctx.input("X")
    dtype = x.dtype if ctx.attr("dtype") == -1 else _dtype_attr(ctx)
    ctx.set_output("Out", x.shape, dtype)


define("fill_any_like", inputs=["X"], outputs=["Out"], attrs={"value": FLOAT(0.0), "dtype": INT(-1)},
       infer=_infer_fill_any_like, grad=NOT_DIFFERENTIABLE,
       doc="Out = a tensor of X's shape filled with `value`, of type `dtype` (-1: X's)")


def _infer_fill_batch_like(ctx):
    x = ctx.input("Input")
    shape = list(ctx.attr("shape"))
    i, o = ctx.attr("input_dim_idx"), ctx.attr("output_dim_idx")
    if not 0 <= i < x.ndim:
        ctx.fail(f"input_dim_idx {i} is out of range for {x}")
    if not 0 <= o < len(shape):
        ctx.fail(f"output_dim_idx {o} is out of range for shape {shape}")
    shape[o] = x.shape[i]
    ctx.set_output("Out", shape, _dtype_attr(ctx))


define("fill_constant_batch_size_like", inputs=["Input"], outputs=["Out"],
       attrs={"shape": INTS(), "dtype": INT(_T.FP32), "value": FLOAT(0.0), "str_value": STRING(""),
              "input_dim_idx": INT(0), "output_dim_idx": INT(0), "force_cpu": BOOL(False)},
       infer=_infer_fill_batch_like, grad=NOT_DIFFERENTIABLE,
       doc="Out = a tensor of `shape`, except Out.shape[output_dim_idx] = "
           "Input.shape[input_dim_idx], filled with `value`")


def _infer_assign(ctx):
    x = ctx.input("X")
    if x is not None:
        ctx.set_output("Out", x.shape, x.dtype)


def _assign_grad(op, g):
    """assign's gradient is an `assign` of Out@GRAD, as PaddlePaddle writes it."""
    dx = g.inp("X")
    if not dx or not dx[0]:
        return []
    return [GradOp("assign", {"X": g.out("Out")}, {"Out": [dx[0]]})]


define("assign", inputs=[opt("X")], outputs=["Out"], infer=_infer_assign,
       grad=grad_maker(_assign_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
       doc="Out = a copy of X")


def _infer_assign_value(ctx):
    shape = list(ctx.attr("shape"))
    if any(d < 0 for d in shape):
        ctx.fail(f"shape {shape} has a negative dim")
    values = ctx.attr("values")
    if values and len(values) != numel(shape):
        ctx.fail(f"shape {shape} holds {numel(shape)} elements but {len(values)} values were given")
    ctx.set_output("Out", shape, _dtype_attr(ctx))


define("assign_value", inputs=[opt("ValuesTensor")], outputs=["Out"],
       attrs={"shape": INTS(), "dtype": INT(), "values": SCALARS([])},
       infer=_infer_assign_value, grad=NOT_DIFFERENTIABLE,
       doc="Out = the constant `values` (row-major) with `shape` and `dtype`")


# -- shape, one_hot, where_index, pad ---------------------------------------------------------
def _infer_shape(ctx):
    x = ctx.input("Input")
    ctx.set_output("Out", [x.ndim], _T.INT32)


define("shape", inputs=["Input"], outputs=["Out"], infer=_infer_shape, grad=NOT_DIFFERENTIABLE,
       doc="Out (int32, [rank]) = the shape of Input at run time")


def _infer_one_hot(ctx):
    x = ctx.input("X")
    _require_index(ctx, x, "X")
    depth = -1 if ctx.has_input("depth_tensor") else ctx.attr("depth")
    if not ctx.has_input("depth_tensor") and depth < 1:
        ctx.fail(f"depth must be positive, got {depth}")
    ctx.set_output("Out", list(x.shape) + [depth], _dtype_attr(ctx))


define("one_hot_v2", inputs=["X", opt("depth_tensor")], outputs=["Out"],
       attrs={"depth": INT(-1), "dtype": INT(_T.FP32), "allow_out_of_range": BOOL(False)},
       infer=_infer_one_hot, grad=NOT_DIFFERENTIABLE,
       doc="Out = X.shape + [depth]: 1 at each index of X, 0 elsewhere (depth_tensor, when "
           "given, replaces `depth`)")


def _infer_where_index(ctx):
    cond = ctx.input("Condition")
    if cond.ndim == 0:
        ctx.fail(f"Condition must have at least 1 dim, got {cond}")
    ctx.set_output("Out", [-1, cond.ndim], _T.INT64)


define("where_index", inputs=["Condition"], outputs=["Out"], infer=_infer_where_index,
       grad=NOT_DIFFERENTIABLE,
       doc="Out (int64, [N, rank]) = the coordinates of the nonzero elements of Condition")


def _padded(d, before, after):
    return d + before + after if d >= 0 else -1


def _infer_pad(ctx):
    x = ctx.input("X")
    p = list(ctx.attr("paddings"))
    if len(p) != 2 * x.ndim:
        ctx.fail(f"paddings {p} must have 2 entries per dim ({2 * x.ndim}) for {x}")
    if any(v < 0 for v in p):
        ctx.fail(f"paddings {p} must not be negative")
    ctx.set_output("Out", [_padded(d, p[2 * i], p[2 * i + 1]) for i, d in enumerate(x.shape)], x.dtype)


def _infer_pad_grad(ctx):
    """pad_grad reads only Out@GRAD: X@GRAD is it with the paddings cut off."""
    dout, p = ctx.input("Out@GRAD"), list(ctx.attr("paddings"))
    if len(p) != 2 * dout.ndim:
        ctx.fail(f"paddings {p} must have 2 entries per dim ({2 * dout.ndim}) for {dout}")
    shape = [d - p[2 * i] - p[2 * i + 1] if d >= 0 else -1 for i, d in enumerate(dout.shape)]
    ctx.set_output("X@GRAD", shape, dout.dtype)


define("pad", inputs=["X"], outputs=["Out"], attrs={"paddings": INTS(), "pad_value": FLOAT(0.0)},
       infer=_infer_pad, grad=grad_op(["Out@GRAD"], ["X@GRAD"], infer=_infer_pad_grad),
       doc="Out = X padded with pad_value: paddings[2i] before and paddings[2i+1] after dim i")


def _infer_pad3d(ctx):
    x = ctx.input("X")
    if x.ndim != 5:
        ctx.fail(f"X must be 5-D, got {x}")
    fmt = ctx.attr("data_format")
    if fmt not in ("NCDHW", "NDHWC"):
        ctx.fail(f"data_format must be NCDHW or NDHWC, got {fmt!r}")
    mode = ctx.attr("mode")
    if mode not in ("constant", "reflect", "replicate", "circular"):
        ctx.fail(f"mode must be constant, reflect, replicate or circular, got {mode!r}")
    # paddings = [left, right, top, bottom, front, back] for W, H, D
    d_axis, h_axis, w_axis = (2, 3, 4) if fmt == "NCDHW" else (1, 2, 3)
    out = list(x.shape)
    if ctx.has_input("Paddings"):
        for a in (d_axis, h_axis, w_axis):
            out[a] = -1
    else:
        p = list(ctx.attr("paddings"))
        if len(p) != 6:
            ctx.fail(f"paddings {p} must have 6 entries [left, right, top, bottom, front, back]")
        out[w_axis] = _padded(x.shape[w_axis], p[0], p[1])
        out[h_axis] = _padded(x.shape[h_axis], p[2], p[3])
        out[d_axis] = _padded(x.shape[d_axis], p[4], p[5])
        if any(d == 0 or d < -1 for d in out):
            ctx.fail(f"paddings {p} leave an empty or negative dim for {x}")
    ctx.set_output("Out", out, x.dtype)


define("pad3d", inputs=["X", opt("Paddings")], outputs=["Out"],
       attrs={"paddings": INTS(), "mode": STRING("constant"), "value": FLOAT(0.0),
              "data_format": STRING("NCDHW")},
       infer=_infer_pad3d, grad=grad_op(["X", "Paddings", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = 5-D X padded on W, H, D by paddings [left, right, top, bottom, front, back] "
           "(mode constant with `value`, reflect, replicate or circular)")
