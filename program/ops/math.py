"""Math ops: scaling and casting, reductions, matrix products, comparisons and logic,
cumulative sums, arg-max/top-k, selection and norms."""
from __future__ import annotations

from keel.program import dtypes
from keel.program.ops.infer import (broadcast_shapes, dims_match, merge_dim, normalize_axis, numel,
                                    is_complex, promote_complex, real_of)
from keel.program.ops.registry import (BOOL, FLOAT, INT, LONG, LONGS, INTS, NOT_DIFFERENTIABLE, STRING,
                                  GradOp, define, grad_maker, grad_op, many, opt)
from keel.proto import pb

_T = pb.VarType


def _same_as_x(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


def _check_dtype_code(ctx, code: int, what: str) -> int:
    try:
        return dtypes.to_code(int(code))
    except TypeError:
        ctx.dtype_fail(f"{what} {code} is not a known dtype number")


# -- scale, clip, cast, pow, sum, mean -------------------------------------------------
def _scale_grad(op, g):
    """scale's gradient is a `scale` of Out@GRAD by the same factor (the same ScaleTensor
    when one is given) with no bias: d(s * X + b)/dX = d(s * (X + b))/dX = s."""
    inputs = {"X": g.out("Out"), "ScaleTensor": op.input("ScaleTensor"), "BiasTensor": []}
    return [GradOp("scale", inputs=inputs, outputs={"Out": [dx]},
                   attrs={"scale": op.attr("scale", 1.0), "bias": 0.0, "bias_after_scale": True})
            for dx in g.inp("X") if dx]


define("scale", inputs=["X", opt("ScaleTensor"), opt("BiasTensor")], outputs=["Out"],
       attrs={"scale": FLOAT(1.0), "bias": FLOAT(0.0), "bias_after_scale": BOOL(True)},
       infer=_same_as_x, grad=grad_maker(_scale_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
       doc="Out = scale * X + bias (or scale * (X + bias) when not bias_after_scale); "
           "ScaleTensor, when given, replaces `scale`")

define("clip", inputs=["X", opt("Min"), opt("Max")], outputs=["Out"],
       attrs={"min": FLOAT(), "max": FLOAT()},
       infer=_same_as_x, grad=grad_op(["X", "Min", "Max", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = min(max(X, min), max); the Min/Max tensors, when given, replace the attributes")


def _infer_cast(ctx):
    x = ctx.input("X")
    # in_dtype is informative only: PaddlePaddle's kernel converts from X's actual dtype.
    out_dtype = _check_dtype_code(ctx, ctx.attr("out_dtype"), "out_dtype")
    ctx.set_output("Out", x.shape, out_dtype)


def _cast_grad(op, g):
    """cast's gradient casts Out@GRAD back (PaddlePaddle swaps in_dtype and out_dtype; the
    dtype cast back to is X's, which in_dtype records)."""
    x = op.block.find_var(op.input("X")[0])
    in_dtype = x.dtype if x is not None else op.attr("in_dtype")
    return [GradOp("cast", inputs={"X": g.out("Out")}, outputs={"Out": [dx]},
                   attrs={"in_dtype": op.attr("out_dtype"), "out_dtype": in_dtype})
            for dx in g.inp("X") if dx]


define("cast", inputs=["X"], outputs=["Out"], attrs={"in_dtype": INT(), "out_dtype": INT()},
       infer=_infer_cast, grad=grad_maker(_cast_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
       doc="Out = X converted to out_dtype (a VarType number; in_dtype records X's dtype)")

define("pow", inputs=["X", opt("FactorTensor")], outputs=["Out"], attrs={"factor": FLOAT(1.0)},
       infer=_same_as_x, grad=grad_op(["X", "FactorTensor", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = X ** factor (FactorTensor, when given, replaces `factor`)")


def _infer_sum(ctx):
    xs = ctx.inputs("X")
    if not xs:
        ctx.fail("needs at least one input in X")
    dtype = ctx.same_dtype(*xs)
    shape = list(xs[0].shape)
    for x in xs[1:]:
        if len(x.shape) != len(shape) or not all(dims_match(a, b) for a, b in zip(shape, x.shape)):
            ctx.fail(f"all inputs must have the same shape, got {xs[0]} and {x}")
        shape = [merge_dim(a, b) for a, b in zip(shape, x.shape)]
    ctx.set_output("Out", shape, dtype)


def _sum_grad(op, g):
    """sum's gradient: one `scale` (by 1) of Out@GRAD per input whose gradient is wanted."""
    return [GradOp("scale", inputs={"X": g.out("Out")}, outputs={"Out": [dx]}, attrs={"scale": 1.0})
            for dx in g.inp("X") if dx]


define("sum", inputs=[many("X")], outputs=["Out"], infer=_infer_sum,
       grad=grad_maker(_sum_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]),
       doc="Out = X[0] + X[1] + ... (inputs of one shape and dtype)")


def _infer_mean(ctx):
    """A 0-d result of X's dtype (mean, l1_norm)."""
    x = ctx.input("X")
    ctx.set_output("Out", [], x.dtype)


define("mean", inputs=["X"], outputs=["Out"], infer=_infer_mean,
       grad=grad_op(["X", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = the mean of all elements of X, a 0-d tensor")


# -- reductions --------------------------------------------------------------------------
def _reduced_shape(ctx, x, dims, keep_dim, reduce_all):
    """Shape after reducing `dims` of x (all of them when reduce_all or dims is empty)."""
    axes = set()
    for d in dims:
        a = normalize_axis(ctx, d, x.ndim, "dim")
        if a in axes:
            ctx.fail(f"dim {list(dims)} names dimension {a} twice (input {x})")
        axes.add(a)
    if reduce_all or not dims or len(axes) == x.ndim:
        axes = set(range(x.ndim))
    if keep_dim:
        return [1 if i in axes else d for i, d in enumerate(x.shape)]
    return [d for i, d in enumerate(x.shape) if i not in axes]


def _make_reduce_infer(kind):
    def infer(ctx):
        x = ctx.input("X")
        if ctx.has_input("AxisTensor") or ctx.has_input("AxisTensorList"):
            # The axes are known only at run time, so only keep_dim gives a known rank.
            if not ctx.attr("keep_dim"):
                ctx.fail(f"the reduced axes come from a tensor, so keep_dim must be true "
                         f"for the output rank to be known (input {x})")
            shape = [-1] * x.ndim
        else:
            shape = _reduced_shape(ctx, x, ctx.attr("dim"), ctx.attr("keep_dim"), ctx.attr("reduce_all"))
        out_dtype = ctx.attr("out_dtype")
        if kind == "logical":
            dtype = _T.BOOL
        elif out_dtype != -1:
            dtype = _check_dtype_code(ctx, out_dtype, "out_dtype")
        elif kind == "sum" and x.dtype in (_T.BOOL, _T.INT32):
            dtype = _T.INT64  # PaddlePaddle sums bool/int32 into int64
        else:
            dtype = x.dtype
        ctx.set_output("Out", shape, dtype)
    return infer


def _reduce_attrs(dim_type):
    return {"dim": dim_type([0]), "keep_dim": BOOL(False), "reduce_all": BOOL(False),
            "in_dtype": INT(-1), "out_dtype": INT(-1)}


_REDUCE_GRAD = grad_op(["X", "Out@GRAD"], ["X@GRAD"])
_REDUCE_GRAD_WITH_OUT = grad_op(["X", "Out", "Out@GRAD"], ["X@GRAD"])
for _type, _kind, _what, _grad in [
    ("reduce_sum", "sum", "sum", _REDUCE_GRAD),
    ("reduce_mean", "other", "mean", _REDUCE_GRAD),
    ("reduce_max", "other", "maximum", _REDUCE_GRAD_WITH_OUT),
    ("reduce_min", "other", "minimum", _REDUCE_GRAD_WITH_OUT),
    ("reduce_prod", "other", "product", _REDUCE_GRAD_WITH_OUT),
]:
    define(_type, inputs=["X"], outputs=["Out"], attrs=_reduce_attrs(INTS),
           infer=_make_reduce_infer(_kind), grad=_grad,
           doc=f"Out = the {_what} of X over dimensions `dim` (all of them when reduce_all "
               "or dim is empty); keep_dim keeps reduced dims as 1; out_dtype (-1: X's, "
               "int64 for a bool/int32 sum) sets the result type")

def _infer_frobenius_norm(ctx):
    x = ctx.input("X")
    if not is_complex(x.dtype):
        ctx.require_float(x)
    shape = _reduced_shape(ctx, x, ctx.attr("dim"), ctx.attr("keep_dim"), ctx.attr("reduce_all"))
    ctx.set_output("Out", shape, real_of(x.dtype) if is_complex(x.dtype) else x.dtype)


define("frobenius_norm", inputs=["X"], outputs=["Out"], attrs=_reduce_attrs(INTS),
       infer=_infer_frobenius_norm, grad=_REDUCE_GRAD_WITH_OUT,
       doc="Out = sqrt(sum(|X|^2)) over dimensions `dim` (all when reduce_all or dim is empty); "
           "real (float32 for complex64) for a complex X")

for _type, _what in [("reduce_all", "logical AND"), ("reduce_any", "logical OR")]:
    define(_type, inputs=["X", opt("AxisTensor"), many("AxisTensorList", optional=True)],
           outputs=["Out"], attrs=_reduce_attrs(LONGS),
           infer=_make_reduce_infer("logical"), grad=NOT_DIFFERENTIABLE,
           doc=f"Out (bool) = the {_what} of X over dimensions `dim` (all when reduce_all)")


# -- matrix products ---------------------------------------------------------------------
def _batch_broadcast(ctx, xb, yb, x, y):
    n = max(len(xb), len(yb))
    xb = [1] * (n - len(xb)) + list(xb)
    yb = [1] * (n - len(yb)) + list(yb)
    out = []
    for a, b in zip(xb, yb):
        if a == 1:
            out.append(b)
        elif b == 1:
            out.append(a)
        elif a < 0 or b < 0:
            out.append(a if a >= 0 else b)
        elif a != b:
            ctx.fail(f"batch dimensions cannot be broadcast: {x} and {y}")
        else:
            out.append(a)
    return out


def _infer_matmul_v2(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    dtype = promote_complex(x.dtype, y.dtype) or ctx.same_dtype(x, y)  # real with complex: complex
    if x.ndim == 0 or y.ndim == 0:
        ctx.fail(f"inputs must have at least 1 dimension, got {x} and {y}")
    xs, ys = list(x.shape), list(y.shape)
    x_vec, y_vec = x.ndim == 1, y.ndim == 1
    if x_vec:
        xs = [1] + xs
    elif ctx.attr("trans_x"):
        xs[-2], xs[-1] = xs[-1], xs[-2]
    if y_vec:
        ys = ys + [1]
    elif ctx.attr("trans_y"):
        ys[-2], ys[-1] = ys[-1], ys[-2]
    if not dims_match(xs[-1], ys[-2]):
        ctx.fail(f"the contracted dimensions differ: X{' (transposed)' if ctx.attr('trans_x') else ''} "
                 f"has {xs[-1]} columns, Y{' (transposed)' if ctx.attr('trans_y') else ''} has "
                 f"{ys[-2]} rows; inputs {x} and {y}")
    out = _batch_broadcast(ctx, xs[:-2], ys[:-2], x, y)
    if not x_vec:
        out.append(xs[-2])
    if not y_vec:
        out.append(ys[-1])
    ctx.set_output("Out", out, dtype)


_MATMUL_GRAD = grad_op(["X", "Y", "Out@GRAD"], ["X@GRAD", "Y@GRAD"])
define("matmul_v2", inputs=["X", "Y"], outputs=["Out"],
       attrs={"trans_x": BOOL(False), "trans_y": BOOL(False)},
       infer=_infer_matmul_v2, grad=_MATMUL_GRAD,
       doc="Out = X @ Y with numpy's matmul rules (1-D operands, broadcast batch dims); "
           "trans_x/trans_y transpose the last two dims first")


def _infer_matmul(ctx):
    """Legacy matmul: like matmul_v2 but batch dims must be equal (or absent on one side)."""
    x, y = ctx.input("X"), ctx.input("Y")
    dtype = ctx.same_dtype(x, y)
    if x.ndim == 0 or y.ndim == 0:
        ctx.fail(f"inputs must have at least 1 dimension, got {x} and {y}")
    xs, ys = list(x.shape), list(y.shape)
    x_vec, y_vec = x.ndim == 1, y.ndim == 1
    if x_vec:
        xs = [xs[0], 1] if ctx.attr("transpose_X") else [1, xs[0]]
    if y_vec:
        ys = [1, ys[0]] if ctx.attr("transpose_Y") else [ys[0], 1]
    if ctx.attr("transpose_X"):
        xs[-2], xs[-1] = xs[-1], xs[-2]
    if ctx.attr("transpose_Y"):
        ys[-2], ys[-1] = ys[-1], ys[-2]
    if not dims_match(xs[-1], ys[-2]):
        ctx.fail(f"the contracted dimensions differ ({xs[-1]} vs {ys[-2]}): {x} and {y}")
    xb, yb = xs[:-2], ys[:-2]
    if xb and yb:
        if len(xb) != len(yb) or not all(dims_match(a, b) for a, b in zip(xb, yb)):
            ctx.fail(f"batch dimensions must be equal (legacy matmul does not broadcast): {x} and {y}")
        batch = [merge_dim(a, b) for a, b in zip(xb, yb)]
    else:
        batch = xb or yb
    out = list(batch)
    if not x_vec:
        out.append(xs[-2])
    if not y_vec:
        out.append(ys[-1])
    ctx.set_output("Out", out, dtype)


define("matmul", inputs=["X", "Y"], outputs=["Out"],
       attrs={"transpose_X": BOOL(False), "transpose_Y": BOOL(False), "alpha": FLOAT(1.0),
              "head_number": INT(1)},
       infer=_infer_matmul, grad=_MATMUL_GRAD,
       doc="Legacy Out = alpha * X @ Y (transpose_X/transpose_Y first); batch dims must be "
           "equal or present on one side only")


def _flatten_to_2d(shape, k):
    return [numel(shape[:k]), numel(shape[k:])]


def _infer_mul(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    dtype = ctx.same_dtype(x, y)
    xk, yk = ctx.attr("x_num_col_dims"), ctx.attr("y_num_col_dims")
    if not 1 <= xk < x.ndim:
        ctx.fail(f"x_num_col_dims {xk} must be in [1, {x.ndim - 1}] for {x}")
    if not 1 <= yk < y.ndim:
        ctx.fail(f"y_num_col_dims {yk} must be in [1, {y.ndim - 1}] for {y}")
    x2, y2 = _flatten_to_2d(x.shape, xk), _flatten_to_2d(y.shape, yk)
    if not dims_match(x2[1], y2[0]):
        ctx.fail(f"X flattened to {x2} (x_num_col_dims={xk}) and Y flattened to {y2} "
                 f"(y_num_col_dims={yk}) cannot be multiplied: {x} and {y}")
    ctx.set_output("Out", list(x.shape[:xk]) + list(y.shape[yk:]), dtype)


define("mul", inputs=["X", "Y"], outputs=["Out"],
       attrs={"x_num_col_dims": INT(1), "y_num_col_dims": INT(1)},
       infer=_infer_mul, grad=_MATMUL_GRAD,
       doc="Out = X2 @ Y2 with X flattened to 2-D at x_num_col_dims and Y at y_num_col_dims; "
           "Out's shape is X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:]")


def _infer_bmm(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    dtype = ctx.same_dtype(x, y)
    if x.ndim != 3 or y.ndim != 3:
        ctx.fail(f"both inputs must be 3-D, got {x} and {y}")
    if not dims_match(x.shape[0], y.shape[0]):
        ctx.fail(f"batch sizes differ: {x} and {y}")
    if not dims_match(x.shape[2], y.shape[1]):
        ctx.fail(f"the contracted dimensions differ ({x.shape[2]} vs {y.shape[1]}): {x} and {y}")
    ctx.set_output("Out", [merge_dim(x.shape[0], y.shape[0]), x.shape[1], y.shape[2]], dtype)


define("bmm", inputs=["X", "Y"], outputs=["Out"], infer=_infer_bmm, grad=_MATMUL_GRAD,
       doc="Out[b] = X[b] @ Y[b] for 3-D X [B, M, K] and Y [B, K, N]")


def _infer_fc(ctx):
    x, w, b = ctx.input("Input"), ctx.input("W"), ctx.input("Bias")
    dtype = ctx.same_dtype(x, w)
    k = ctx.attr("in_num_col_dims")
    if w.ndim != 2:
        ctx.fail(f"W must be 2-D, got {w}")
    if not 1 <= k < x.ndim:
        ctx.fail(f"in_num_col_dims {k} must be in [1, {x.ndim - 1}] for {x}")
    pad = 4 if ctx.attr("padding_weights") else 0
    rows = w.shape[0] - pad if w.shape[0] >= 0 else -1
    cols = w.shape[1] - pad if w.shape[1] >= 0 else -1
    if not dims_match(numel(x.shape[k:]), rows):
        ctx.fail(f"Input flattened at in_num_col_dims={k} has {numel(x.shape[k:])} columns but "
                 f"W has {rows} rows: {x} and {w}")
    if b is not None and b.shape and not dims_match(numel(b.shape), cols):
        ctx.fail(f"Bias must have {cols} elements, got {b}")
    ctx.set_output("Out", list(x.shape[:k]) + [cols], dtype)


define("fc", inputs=["Input", "W", opt("Bias")], outputs=["Out"],
       attrs={"in_num_col_dims": INT(1), "activation_type": STRING(""), "padding_weights": BOOL(False)},
       infer=_infer_fc, grad=NOT_DIFFERENTIABLE,  # PaddlePaddle's fc has no gradient op
       doc="Fused inference fully-connected layer: Out = act(Input2 @ W + Bias), Input "
           "flattened to 2-D at in_num_col_dims; activation_type '' or 'relu'")


# -- comparisons and logic ------------------------------------------------------------------
def _infer_compare(ctx):
    # PaddlePaddle 3.x ignores the legacy `axis` of comparisons: always numpy broadcasting.
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.same_dtype(x, y)
    ctx.set_output("Out", broadcast_shapes(ctx, x, y), _T.BOOL)


for _type, _sym in [("equal", "=="), ("not_equal", "!="), ("less_than", "<"),
                    ("less_equal", "<="), ("greater_than", ">"), ("greater_equal", ">=")]:
    define(_type, inputs=["X", "Y"], outputs=["Out"],
           attrs={"axis": INT(-1), "force_cpu": BOOL(False)},
           infer=_infer_compare, grad=NOT_DIFFERENTIABLE,
           doc=f"Out (bool) = X {_sym} Y with numpy broadcasting (`axis` is ignored, as in "
               "PaddlePaddle 3.x)")


def _infer_logical_binary(ctx):
    x, y = ctx.input("X"), ctx.input("Y")
    ctx.set_output("Out", broadcast_shapes(ctx, x, y), _T.BOOL)


def _infer_logical_not(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, _T.BOOL)


for _type, _what in [("logical_and", "X and Y"), ("logical_or", "X or Y"),
                     ("logical_xor", "X xor Y")]:
    define(_type, inputs=["X", "Y"], outputs=["Out"], infer=_infer_logical_binary,
           grad=NOT_DIFFERENTIABLE,
           doc=f"Out (bool) = {_what}, nonzero values counting as true; numpy broadcasting")
define("logical_not", inputs=["X"], outputs=["Out"], infer=_infer_logical_not,
       grad=NOT_DIFFERENTIABLE, doc="Out (bool) = not X, nonzero values counting as true")


# -- cumsum, arg_max/arg_min, top_k ------------------------------------------------------------
def _infer_cumsum(ctx):
    x = ctx.input("X")
    if ctx.attr("flatten"):
        ctx.set_output("Out", [numel(x.shape)], x.dtype)
        return
    if x.ndim > 0:
        normalize_axis(ctx, ctx.attr("axis"), x.ndim)
    ctx.set_output("Out", x.shape, x.dtype)


define("cumsum", inputs=["X"], outputs=["Out"],
       attrs={"axis": INT(-1), "flatten": BOOL(False), "exclusive": BOOL(False), "reverse": BOOL(False)},
       infer=_infer_cumsum, grad=grad_op(["X", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = cumulative sum of X along `axis` (of X flattened to 1-D when `flatten`); "
           "`exclusive` leaves out the current element, `reverse` sums from the end")


def _infer_arg(ctx):
    x = ctx.input("X")
    dtype = ctx.attr("dtype")
    if dtype not in (_T.INT32, _T.INT64):
        ctx.dtype_fail(f"dtype must be int32 ({_T.INT32}) or int64 ({_T.INT64}), got {dtype}")
    keep = ctx.attr("keepdims")
    if ctx.attr("flatten"):
        shape = [1] * x.ndim if keep else []
    elif x.ndim == 0:
        shape = []
    else:
        axis = normalize_axis(ctx, ctx.attr("axis"), x.ndim)
        shape = list(x.shape)
        if keep:
            shape[axis] = 1
        else:
            del shape[axis]
    ctx.set_output("Out", shape, dtype)


for _type, _what in [("arg_max", "largest"), ("arg_min", "smallest")]:
    define(_type, inputs=["X"], outputs=["Out"],
           attrs={"axis": LONG(), "keepdims": BOOL(False), "flatten": BOOL(False), "dtype": INT(_T.INT64)},
           infer=_infer_arg, grad=NOT_DIFFERENTIABLE,
           doc=f"Out = index of the {_what} element of X along `axis` (over all elements when "
               "`flatten`), of type `dtype` (int32 or int64)")


def _infer_top_k(ctx):
    x = ctx.input("X")
    k = ctx.attr("k")
    shape = list(x.shape)
    if x.ndim > 0:
        axis = normalize_axis(ctx, ctx.attr("axis"), x.ndim)
        if ctx.has_input("K"):
            shape[axis] = -1
        else:
            if k < 1 or (shape[axis] >= 0 and k > shape[axis]):
                ctx.fail(f"k={k} must be in [1, {shape[axis]}] for axis {axis} of {x}")
            shape[axis] = k
    ctx.set_output("Out", shape, x.dtype)
    ctx.set_output("Indices", shape, _T.INT64)


define("top_k_v2", inputs=["X", opt("K")], outputs=["Out", "Indices"],
       attrs={"k": INT(1), "axis": INT(-1), "largest": BOOL(True), "sorted": BOOL(True)},
       infer=_infer_top_k, grad=grad_op(["X", "K", "Indices", "Out@GRAD"], ["X@GRAD"]),
       doc="Out, Indices (int64) = the k largest (smallest unless `largest`) elements of X "
           "along `axis` and their positions; the K tensor, when given, replaces `k`")


# -- where, norms, checks, increment ----------------------------------------------------------
def _infer_where(ctx):
    cond, x, y = ctx.input("Condition"), ctx.input("X"), ctx.input("Y")
    if cond.dtype != _T.BOOL:
        ctx.dtype_fail(f"Condition must be bool, got {cond}")
    dtype = ctx.same_dtype(x, y)
    for a, b in ((cond, x), (x, y)):
        if a.ndim != b.ndim or not all(dims_match(p, q) for p, q in zip(a.shape, b.shape)):
            ctx.fail(f"Condition, X and Y must have the same shape, got {a} and {b}")
    shape = [merge_dim(merge_dim(c, p), q) for c, p, q in zip(cond.shape, x.shape, y.shape)]
    ctx.set_output("Out", shape, dtype)


define("where", inputs=["Condition", "X", "Y"], outputs=["Out"], infer=_infer_where,
       grad=grad_op(["Condition", "X", "Y", "Out@GRAD"], ["X@GRAD", "Y@GRAD"]),
       doc="Out = X where Condition else Y (all three of one shape)")


def _infer_p_norm(ctx):
    x = ctx.input("X")
    keep = ctx.attr("keepdim")
    if ctx.attr("asvector"):
        shape = [1] * x.ndim if keep else []
    elif x.ndim == 0:
        shape = []
    else:
        axis = normalize_axis(ctx, ctx.attr("axis"), x.ndim)
        shape = [1 if i == axis else d for i, d in enumerate(x.shape)] if keep else \
            [d for i, d in enumerate(x.shape) if i != axis]
    ctx.set_output("Out", shape, x.dtype)


define("p_norm", inputs=["X"], outputs=["Out"],
       attrs={"porder": FLOAT(2.0), "axis": INT(-1), "epsilon": FLOAT(1e-12),
              "keepdim": BOOL(False), "asvector": BOOL(False)},
       infer=_infer_p_norm, grad=grad_op(["X", "Out", "Out@GRAD"], ["X@GRAD"]),
       doc="Out = (sum |X|^porder)^(1/porder) along `axis` (over all elements when `asvector`)")


def _infer_bool_like(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, _T.BOOL)


for _type, _what in [("isfinite_v2", "finite"), ("isinf_v2", "+-inf"), ("isnan_v2", "NaN")]:
    define(_type, inputs=["X"], outputs=["Out"], infer=_infer_bool_like, grad=NOT_DIFFERENTIABLE,
           doc=f"Out (bool, X's shape) = whether each element of X is {_what}")


def _infer_increment(ctx):
    x = ctx.input("X")
    if numel(x.shape) not in (1, -1):
        ctx.fail(f"X must have exactly one element, got {x}")
    ctx.set_output("Out", x.shape, x.dtype)


# PaddlePaddle's increment "gradient" writes increment(Out, step=-step) back into X (it
# undoes a loop counter's step); a counter carries no gradient, so Keel has none.
define("increment", inputs=["X"], outputs=["Out"], attrs={"step": FLOAT(1.0)},
       infer=_infer_increment, grad=NOT_DIFFERENTIABLE,
       doc="Out = X + step for a one-element X (loop counters)")


def _infer_squared_l2_norm(ctx):
    x = ctx.input("X")
    ctx.set_output("Out", [1], x.dtype)


define("squared_l2_norm", inputs=["X"], outputs=["Out"], infer=_infer_squared_l2_norm,
       grad=grad_op(["X", "Out@GRAD"], ["X@GRAD"]),
       doc="Out ([1]) = sum of the squares of all elements of X")


define("l1_norm", inputs=["X"], outputs=["Out"], infer=_infer_mean,  # a 0-d total, like mean
       grad=grad_op(["X", "Out@GRAD"], ["X@GRAD"]),
       doc="Out (0-d) = sum of the absolute values of all elements of X")
