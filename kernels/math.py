"""Math kernels: scale/clip/cast/pow, sums and reductions, matrix products, comparisons and
logic, cumsum, arg_max/top_k, norms. Semantics follow PaddlePaddle's legacy ops (phi kernels
and infer-meta rules of PaddlePaddle 3.x), including their output shapes (0-d results
where Paddle gives 0-d, [1] where it gives [1]).
"""
from __future__ import annotations

import math
import weakref

import numpy as np

from keel.kernels.bf16_bits import from_bf16_bits, to_bf16_bits
from keel.kernels.constants import filled
from keel.kernels.control_flow import sum_arrays
from keel.kernels.elementwise import align, as_grad_of, sum_to
from keel.kernels.registry import UfuncCall, kernel
from keel.kernels.tensor import BF16

# VarType numbers (framework.proto) -> dtype names. Kept here: kernels never import `program`.
_VARTYPE_DTYPES = {
    0: "bool", 1: "int16", 2: "int32", 3: "int64", 4: "float16", 5: "float32", 6: "float64",
    20: "uint8", 21: "int8", 23: "complex64", 24: "complex128",
    36: "uint16", 37: "uint32", 38: "uint64",
}


def vartype_dtype(code: int) -> str:
    try:
        return _VARTYPE_DTYPES[int(code)]
    except KeyError:
        raise NotImplementedError(f"dtype with VarType number {code} is not supported") from None


def _acc_dtype(xp, x):
    """Dtype to accumulate in: float16 sums in float32 (Paddle's MPType)."""
    return xp.float32 if x.dtype == xp.float16 else x.dtype


def _scalar_of(t):
    """The Python value of a 1-element tensor (ScaleTensor, Min, K, ...)."""
    return t.reshape(-1)[0].item()


def _normalize_axis(axis: int, ndim: int) -> int:
    n = max(ndim, 1)
    if not -n <= axis < n:
        raise ValueError(f"axis {axis} is out of range for a {ndim}-d input")
    return axis % n


# -- scale / clip / cast / pow / increment ---------------------------------------------------


def _specialize_scale(xp, attrs, present, donated):
    """The common `y = x * s + b` with attribute values: one ufunc call, into X's buffer
    when it is donated (float X; other dtypes take the general kernel)."""
    if tuple(p is not None for p in present) != (True, False, False) or not attrs.get("bias_after_scale", True):
        return None
    s, b = float(attrs.get("scale", 1.0)), float(attrs.get("bias", 0.0))
    add, multiply = xp.add, xp.multiply

    def general(x):
        return scale(xp, x, None, None, scale=s, bias=b, bias_after_scale=True)

    # One closure per case, so the per-call work is a dtype test and one ufunc call.
    if b == 0 or s == 1:
        ufunc, operand = (multiply, s) if b == 0 else (add, b)
        if present[0] is not None and present[0].kind == "f":
            # declared float: the executor makes the call itself (into X's buffer when
            # donated; numpy refuses a bad cast should the value not be float after all)
            return UfuncCall(ufunc, operand, into_input=donated)
        if donated:
            def run(x):
                if x.dtype.kind == "f" and x.ndim and x.base is None:
                    return ufunc(x, operand, out=x)
                return general(x)
        else:
            def run(x):
                if x.dtype.kind == "f" and x.ndim:
                    return ufunc(x, operand)
                return general(x)
        return run

    def run(x):
        if x.dtype.kind != "f" or not x.ndim:
            return general(x)
        out = multiply(x, s, out=x if donated and x.base is None else None)
        out += b
        return out
    return run


@kernel("scale", inputs=["X", "ScaleTensor", "BiasTensor"], outputs=["Out"],
        attrs=["scale", "bias", "bias_after_scale"], specialize=_specialize_scale)
def scale(xp, x, scale_tensor, bias_tensor, *, scale=1.0, bias=0.0, bias_after_scale=True):
    # Paddle casts scale and bias to x's dtype first (static_cast<T>: 2.5 -> 2 for ints).
    if scale_tensor is not None:
        scale = _scalar_of(scale_tensor)
    if bias_tensor is not None:
        bias = _scalar_of(bias_tensor)
    if x.dtype.kind == "f" and x.ndim:  # (a 0-d operand would give a numpy scalar back)
        # Python-number operands are rounded to x's dtype (numpy's weak scalars), which is
        # Paddle's cast; one ufunc call in the common cases (the executor's per-op floor).
        if bias_after_scale:
            if bias == 0:
                return xp.multiply(x, scale)
            if scale == 1:
                return xp.add(x, bias)
            out = xp.multiply(x, scale)
            out += bias
            return out
        out = xp.add(x, bias)
        out *= scale
        return out
    s = xp.asarray(scale).astype(x.dtype)
    b = xp.asarray(bias).astype(x.dtype)
    if bias_after_scale:
        out = xp.asarray(x * s)
        out += b
    else:
        out = xp.asarray(x + b)
        out *= s
    return out


def _bound(xp, tensor, value, dtype):
    """A clip bound: the Min/Max tensor when given, else the attribute; cast to x's dtype."""
    return (tensor.reshape(()) if tensor is not None else xp.asarray(value)).astype(dtype)


@kernel("clip", inputs=["X", "Min", "Max"], outputs=["Out"], attrs=["min", "max"])
def clip(xp, x, min_tensor, max_tensor, *, min, max):
    lo, hi = _bound(xp, min_tensor, min, x.dtype), _bound(xp, max_tensor, max, x.dtype)
    # Paddle: x < min ? min : (x > max ? max : x)  (NaN passes through)
    return xp.where(x < lo, lo, xp.where(x > hi, hi, x))


@kernel("cast", inputs=["X"], outputs=["Out"], attrs=["in_dtype", "out_dtype"])
def cast(xp, x, *, in_dtype, out_dtype):
    """X converted to out_dtype from its own dtype (PaddlePaddle's kernel reads X's dtype,
    not in_dtype), except for bfloat16, whose values travel as uint16 bit patterns: a
    uint16 X declared BF16 by in_dtype is read as bfloat16 (exactly, to float32), and a
    BF16 out_dtype gives bits rounded to nearest even. Other values reach bfloat16
    through float32, as PaddlePaddle's bfloat16(static_cast<float>(v)) (a float64 is
    rounded twice)."""
    bf16_in = int(in_dtype) == BF16 and x.dtype == np.uint16
    if int(out_dtype) == BF16:
        return x.copy() if bf16_in else to_bf16_bits(xp, x)
    if bf16_in:
        x = from_bf16_bits(xp, x)
    return x.astype(vartype_dtype(out_dtype))


@kernel("pow", inputs=["X", "FactorTensor"], outputs=["Out"], attrs=["factor"])
def pow_(xp, x, factor_tensor, *, factor=1.0):
    if factor_tensor is not None:
        factor = _scalar_of(factor_tensor)
    if x.dtype == xp.float16:
        y = xp.power(x.astype(xp.float32), xp.asarray(factor, dtype=xp.float32))
        return xp.asarray(y).astype(x.dtype)
    if x.dtype.kind in "iu":
        # PaddlePaddle: the factor cast to x's type, the power taken in double and truncated
        # back (a negative factor gives 0 for |x| > 1, where numpy's integer power refuses)
        f = float(xp.asarray(factor).astype(x.dtype))
        with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
            return xp.asarray(xp.power(x.astype(xp.float64), f)).astype(x.dtype)
    return xp.asarray(xp.power(x, xp.asarray(factor).astype(x.dtype)))


@kernel("increment", inputs=["X"], outputs=["Out"], attrs=["step"])
def increment(xp, x, *, step=1.0):
    return xp.asarray(x + xp.asarray(step).astype(x.dtype))


# -- sum / mean ---------------------------------------------------------------------------------


@kernel("sum", inputs=["X"], outputs=["Out"])
def sum_(xp, xs):
    xs = [x for x in xs if x is not None]
    if isinstance(xs[0], list):  # tensor arrays (gradients of one array): entrywise
        return sum_arrays(lambda entries: sum_(xp, entries), xs)
    acc = _acc_dtype(xp, xs[0])
    out = xs[0].astype(acc)  # always a fresh array
    for x in xs[1:]:
        out += x
    return out if out.dtype == xs[0].dtype else out.astype(xs[0].dtype)


@kernel("mean", inputs=["X"], outputs=["Out"])
def mean(xp, x):
    """Mean of all elements, as a 0-d array (integers: PaddlePaddle's truncating division)."""
    if x.dtype.kind in "fc":
        return xp.asarray(xp.mean(x, dtype=_acc_dtype(xp, x))).astype(x.dtype)
    return _int_mean(xp, x, None, False)


# -- reductions ---------------------------------------------------------------------------------


def _reduce_axes(x, dim, reduce_all):
    """Paddle's axis rule: reduce_all, an empty `dim`, or a `dim` naming every axis -> all
    axes (None); negative dims count from the end; a 0-d input reduces to itself."""
    if x.ndim == 0:
        return None
    dims = [int(d) for d in dim]
    axes = tuple(sorted({_normalize_axis(d, x.ndim) for d in dims}))
    if reduce_all or not dims or len(axes) == x.ndim:
        return None
    return axes


def _axes_from_tensors(dim, axis_tensor, axis_tensor_list):
    """reduce_all/reduce_any may take their axes from tensors (AxisTensor, AxisTensorList)."""
    if axis_tensor is not None:
        return [int(v) for v in axis_tensor.reshape(-1).tolist()]
    if axis_tensor_list:
        return [int(_scalar_of(t)) for t in axis_tensor_list]
    return dim


def _int_mean(xp, x, axes, keep_dim):
    """Mean of integers as Paddle's Eigen reducer computes it: sum, then C++ division."""
    total = xp.sum(x, axis=axes, keepdims=keep_dim, dtype=xp.int64)
    count = x.size if axes is None else math.prod(x.shape[i] for i in axes)
    q = xp.abs(total) // max(count, 1)
    return xp.asarray(xp.where(total < 0, -q, q)).astype(x.dtype)


def _reducer(op_type, compute):
    @kernel(op_type, inputs=["X"], outputs=["Out"], attrs=["dim", "keep_dim", "reduce_all", "out_dtype"])
    def run(xp, x, *, dim=(0,), keep_dim=False, reduce_all=False, out_dtype=-1):
        axes = _reduce_axes(x, dim, reduce_all)
        if x.ndim == 0:
            out = x.copy()
        else:
            out = xp.asarray(compute(xp, x, axes, keep_dim))
        if out_dtype is not None and out_dtype != -1:
            out = out.astype(vartype_dtype(out_dtype))
        return out
    run.__name__ = op_type
    return run


@kernel("reduce_sum", inputs=["X"], outputs=["Out"], attrs=["dim", "keep_dim", "reduce_all", "out_dtype"])
def reduce_sum(xp, x, *, dim=(0,), keep_dim=False, reduce_all=False, out_dtype=-1):
    # Paddle: with out_dtype set, x is summed in that dtype; otherwise bool and int32 sum
    # to int64 (SumRawInferMeta) and every other dtype keeps its own.
    if out_dtype is not None and out_dtype != -1:
        dtype = xp.dtype(vartype_dtype(out_dtype))
    elif x.dtype == xp.bool_ or x.dtype == xp.int32:
        dtype = xp.dtype(xp.int64)
    else:
        dtype = x.dtype
    axes = _reduce_axes(x, dim, reduce_all)
    if x.ndim == 0:
        return x.astype(dtype)
    acc = xp.float32 if dtype == xp.float16 else dtype
    out = xp.asarray(xp.sum(x, axis=axes, keepdims=keep_dim, dtype=acc))
    return out if out.dtype == dtype else out.astype(dtype)


def _mean_compute(xp, x, axes, keep_dim):
    if x.dtype.kind not in "fc":
        return _int_mean(xp, x, axes, keep_dim)
    return xp.mean(x, axis=axes, keepdims=keep_dim, dtype=_acc_dtype(xp, x)).astype(x.dtype)


_reducer("reduce_mean", _mean_compute)
_reducer("reduce_max", lambda xp, x, axes, keep: xp.max(x, axis=axes, keepdims=keep))
_reducer("reduce_min", lambda xp, x, axes, keep: xp.min(x, axis=axes, keepdims=keep))
_reducer("reduce_prod", lambda xp, x, axes, keep: xp.prod(x, axis=axes, keepdims=keep,
                                                           dtype=_acc_dtype(xp, x)).astype(x.dtype))


def _bool_reducer(op_type, compute):
    @kernel(op_type, inputs=["X", "AxisTensor", "AxisTensorList"], outputs=["Out"],
            attrs=["dim", "keep_dim", "reduce_all"])
    def run(xp, x, axis_tensor, axis_tensor_list, *, dim=(0,), keep_dim=False, reduce_all=False):
        dim = _axes_from_tensors(dim, axis_tensor, axis_tensor_list)
        axes = _reduce_axes(x, dim, reduce_all)
        if x.ndim == 0:
            return x.astype(xp.bool_)
        return xp.asarray(compute(x, axis=axes, keepdims=keep_dim))
    run.__name__ = op_type
    return run


_bool_reducer("reduce_all", lambda x, axis, keepdims: x.all(axis=axis, keepdims=keepdims))
_bool_reducer("reduce_any", lambda x, axis, keepdims: x.any(axis=axis, keepdims=keepdims))


@kernel("squared_l2_norm", inputs=["X"], outputs=["Out"])
def squared_l2_norm(xp, x):
    """sum(x^2), shape [1] (not 0-d: SquaredL2NormInferMeta)."""
    xc = x.astype(_acc_dtype(xp, x))
    return xp.sum(xc * xc).reshape(1).astype(x.dtype)


@kernel("l1_norm", inputs=["X"], outputs=["Out"])
def l1_norm(xp, x):
    """sum(|x|), 0-d."""
    return xp.asarray(xp.sum(xp.abs(x), dtype=_acc_dtype(xp, x))).astype(x.dtype)


@kernel("p_norm", inputs=["X"], outputs=["Out"], attrs=["porder", "axis", "epsilon", "keepdim", "asvector"])
def p_norm(xp, x, *, porder=2.0, axis=-1, epsilon=1e-12, keepdim=False, asvector=False):
    # Paddle's forward ignores epsilon: porder 0 counts nonzeros, +-inf is max/min |x|,
    # otherwise (sum |x|^p)^(1/p). An empty input gives zeros.
    xc = x.astype(_acc_dtype(xp, x))
    if asvector or xc.ndim == 0:
        axes = None
        shape = (1,) * x.ndim if keepdim else ()
    else:
        a = _normalize_axis(axis, x.ndim)
        axes = (a,)
        shape = x.shape[:a] + ((1,) if keepdim else ()) + x.shape[a + 1:]
    if x.size == 0:
        return xp.zeros(shape, dtype=x.dtype)
    ax = xp.abs(xc)
    if porder == 0:
        out = xp.sum(ax != 0, axis=axes).astype(xc.dtype)
    elif porder == float("inf"):
        out = xp.max(ax, axis=axes)
    elif porder == float("-inf"):
        out = xp.min(ax, axis=axes)
    else:
        p = xp.asarray(porder).astype(xc.dtype)
        out = xp.power(xp.sum(xp.power(ax, p), axis=axes), 1 / p)
    return xp.asarray(out).reshape(shape).astype(x.dtype)


# -- matrix products ----------------------------------------------------------------------------


def _swap_last(a):
    return a.swapaxes(-1, -2)


# How numpy's BLAS (OpenBLAS) multiplies a few rows a [M, K] by a large matrix b [K, N] fast,
# measured on 2 cores for K x N from 256x1024 to 4096x1024 (benchmarks/bench_inference.py
# shows the effect on whole models). OpenBLAS's GEMM copies ("packs") all of b on every
# call, which for a few rows costs more than the arithmetic: M = 2 took 3-4x as long as a
# matrix-vector product, longer than M = 8.
_BIG_B = 1 << 18        # elements of b from which the rules below pay (1 MiB of float32)
_ROWS_AS_VECTORS = 6    # 2-6 rows: one matrix-vector product per row (no packing): 0.3-0.9x
_FEW_ROWS = 32          # 7-32 rows by a column-major b: the transposed product, 0.6-1.0x


# Row-major copies of read-only column-major weights, for products of many rows: id(weight)
# -> (weak reference to the weight, its copy); an entry goes when its weight does.
_ROW_MAJOR: dict[int, tuple] = {}


def _row_major(xp, b):
    """b as a row-major array: for a read-only column-major matrix that owns its memory
    (a weight column_major_weights moved) a copy made on first use and kept while b lives;
    OpenBLAS's GEMM of more than _FEW_ROWS rows is 3-5% slower on the column-major layout.
    Read-only is what makes the copy safe to keep: b cannot change under it."""
    if not (b.flags.f_contiguous and not b.flags.c_contiguous and b.base is None and not b.flags.writeable):
        return b
    key = id(b)
    hit = _ROW_MAJOR.get(key)
    if hit is not None and hit[0]() is b:
        return hit[1]
    copy = xp.ascontiguousarray(b)
    _ROW_MAJOR[key] = (weakref.ref(b, lambda _, key=key: _ROW_MAJOR.pop(key, None)), copy)
    return copy


def _gemm(xp, a, b, bias=None):
    """a @ b (+ bias, broadcast over the rows) for 2-D a and b, as a new row-major array.

    For a few rows and a large b (CPU only, see _BIG_B): 2-6 rows are a stack of matrix-
    vector products, and 7-32 rows by a column-major b (program/passes/weight_layout.py
    stores large weights so, for batch-1 speed) are computed as (b.T @ a.T).T, the bias
    added while the transposed result is copied into the row-major output; more rows by a
    read-only column-major b multiply its kept row-major copy (_row_major). The values are
    the same product; only the summation order inside BLAS may differ, as between any two
    BLAS calls."""
    m = a.shape[0]
    if xp is np and 2 <= m <= _FEW_ROWS and b.size >= _BIG_B:
        if m <= _ROWS_AS_VECTORS:
            out = xp.matmul(a[:, None, :], b)[:, 0, :]
        elif b.flags.f_contiguous and not b.flags.c_contiguous:
            t = xp.matmul(b.T, a.T)
            out = xp.empty(t.shape[::-1], dtype=t.dtype)
            if bias is None:
                out[...] = t.T
            else:
                xp.add(t.T, bias, out=out)
            return out
        else:
            out = xp.matmul(a, b)
    else:
        if xp is np and m > _FEW_ROWS and b.size >= _BIG_B:
            b = _row_major(xp, b)
        out = xp.asarray(xp.matmul(a, b))
    if bias is not None:
        out += bias
    return out


def _matmul(xp, a, b):
    """a @ b; float16 is multiplied in float32 (as cuBLAS accumulates) and rounded back."""
    if a.dtype == xp.float16 and b.dtype == xp.float16:
        return xp.asarray(_matmul(xp, a.astype(xp.float32), b.astype(xp.float32))).astype(xp.float16)
    if a.ndim > 2 and b.ndim == 2 and a.size and a.flags.c_contiguous:
        # a stack of matrices times one matrix is one GEMM over all the rows (numpy would
        # loop over the stack: 10-20% slower for a [8, 128, 256] x [256, 1024] product)
        return _gemm(xp, a.reshape(-1, a.shape[-1]), b).reshape(a.shape[:-1] + b.shape[-1:])
    if a.ndim == 2 and b.ndim == 2:
        return _gemm(xp, a, b)
    return xp.asarray(xp.matmul(a, b))


@kernel("matmul_v2", inputs=["X", "Y"], outputs=["Out"], attrs=["trans_x", "trans_y"])
def matmul_v2(xp, x, y, *, trans_x=False, trans_y=False):
    # numpy semantics (batch dims broadcast); a transpose flag on a 1-D operand is ignored.
    if trans_x and x.ndim >= 2:
        x = _swap_last(x)
    if trans_y and y.ndim >= 2:
        y = _swap_last(y)
    return _matmul(xp, x, y)


@kernel("matmul", inputs=["X", "Y"], outputs=["Out"], attrs=["transpose_X", "transpose_Y", "alpha", "head_number"])
def matmul(xp, x, y, *, transpose_X=False, transpose_Y=False, alpha=1.0, head_number=1):
    """PaddlePaddle's legacy matmul. A 1-D X is the row [1, K] (so [K, 1] when transposed),
    a 1-D Y the column [K, 1] ([1, K] when transposed). Operands of rank > 2 are stacks of
    matrices over all leading dims (only their product must agree); a 2-D operand is used
    for every matrix of the stack. Out takes the leading dims of X (else Y), then vector
    dims that came out as 1 are dropped, and an all-dropped result (vector times vector) is
    0-D, as PaddlePaddle 3.3.1 gives it."""
    if head_number != 1:
        raise NotImplementedError("matmul with head_number > 1 (multi-head MKL path) is not supported")
    if x.ndim == 1 and y.ndim == 1:
        # two vectors: their dot product whatever the transpose flags (PaddlePaddle 3.3.1's
        # kernel, and the 0-D shape its rule gives)
        transpose_X = transpose_Y = False
    xm = x.reshape(1, -1) if x.ndim == 1 else x
    ym = y.reshape(-1, 1) if y.ndim == 1 else y
    if xm.ndim > 2:
        xm = xm.reshape((-1,) + xm.shape[-2:])
    if ym.ndim > 2:
        ym = ym.reshape((-1,) + ym.shape[-2:])
    if transpose_X:
        xm = _swap_last(xm)
    if transpose_Y:
        ym = _swap_last(ym)
    if xm.ndim == 3 and ym.ndim == 3 and xm.shape[0] != ym.shape[0]:
        raise ValueError(f"matmul: batch sizes differ: {x.shape} and {y.shape}")
    out = _matmul(xp, xm, ym)
    if alpha != 1:
        out *= xp.asarray(alpha).astype(out.dtype)
    m, n = out.shape[-2:]
    if x.ndim > 2:
        dims = list(x.shape[:-2]) + [m, n]
    elif y.ndim > 2:
        dims = list(y.shape[:-2]) + [m, n]
    else:
        dims = [m, n]
    if x.ndim == 1 and dims[-2] == 1:
        dims[-2], dims[-1] = dims[-1], dims[-2]
        dims.pop()
    if y.ndim == 1 and dims[-1] == 1:
        dims.pop()
    return out.reshape(dims)


@kernel("bmm", inputs=["X", "Y"], outputs=["Out"])
def bmm(xp, x, y):
    return _matmul(xp, x, y)


def _flatten_2d(a, num_col_dims):
    return a.reshape(math.prod(a.shape[:num_col_dims]), math.prod(a.shape[num_col_dims:]))


@kernel("mul", inputs=["X", "Y"], outputs=["Out"], attrs=["x_num_col_dims", "y_num_col_dims"])
def mul(xp, x, y, *, x_num_col_dims=1, y_num_col_dims=1):
    """X flattened to 2-D at x_num_col_dims times Y flattened at y_num_col_dims; the result
    has shape X.shape[:x_num_col_dims] + Y.shape[y_num_col_dims:]."""
    out = _matmul(xp, _flatten_2d(x, x_num_col_dims), _flatten_2d(y, y_num_col_dims))
    return out.reshape(x.shape[:x_num_col_dims] + y.shape[y_num_col_dims:])


def _specialize_fc(xp, attrs, present, donated):
    """float32/float64 fc with a bias and unpadded W: Input flattened at in_num_col_dims
    (a view when contiguous; a non-contiguous stack of in_num_col_dims + 1 dims is
    multiplied as it is), one GEMM over all rows, then bias and ReLU in place. Other
    inputs take the general kernel."""
    dtype = present[0]
    if (attrs["padding_weights"] or dtype is None or dtype.kind != "f" or dtype.itemsize < 4
            or present[1] != dtype or present[2] is None):
        return None
    k, relu = attrs["in_num_col_dims"], attrs["activation_type"] == "relu"
    zero = xp.zeros((), dtype=dtype)

    def run(inp, w, bias):
        if (inp.ndim <= k or inp.dtype != dtype or w.ndim != 2 or bias.ndim not in (1, 2)
                or bias.size != bias.shape[-1]):
            return fc(xp, inp, w, bias, **attrs)
        if inp.ndim == k + 1 and inp.ndim > 2 and not inp.flags.c_contiguous:
            out = _matmul(xp, inp, w)
            out += bias.reshape(-1)
        else:
            out = _gemm(xp, _flatten_2d(inp, k), w, bias.reshape(-1))
        if relu:  # out > 0 ? out : 0 (NaN -> 0, -0 -> +0); zeros as an array: kernels/constants.py
            xp.fmax(filled(xp, 0, out), out, out=out)
            out += zero
        return out.reshape(inp.shape[:k] + w.shape[1:])
    return run


@kernel("fc", inputs=["Input", "W", "Bias"], outputs=["Out"],
        attrs=["in_num_col_dims", "activation_type", "padding_weights"], specialize=_specialize_fc)
def fc(xp, inp, w, bias, *, in_num_col_dims=1, activation_type="", padding_weights=False):
    """PaddlePaddle's fused fully-connected op: flatten(Input) @ W + Bias, then ReLU when
    activation_type is "relu" (any other value is ignored, as in Paddle's FCFunctor). With
    padding_weights W carries 4 extra rows and columns that are not used."""
    if padding_weights:
        w = w[:-4, :-4]
    out = _matmul(xp, _flatten_2d(inp, in_num_col_dims), w)
    if bias is not None:
        out += bias.reshape(-1)
    if activation_type == "relu":  # out > 0 ? out : 0 (NaN -> 0, -0 -> +0), in place
        xp.fmax(filled(xp, 0, out), out, out=out)
        out += 0
    return out.reshape(inp.shape[:in_num_col_dims] + (w.shape[1],))


# -- comparisons and logic ------------------------------------------------------------------------


def _equal(xp, x, y):
    """Paddle's EqualFunctor: float32/float64 compare with an absolute tolerance,
    |x - y| < 1e-8 (the difference taken in the input dtype, compared in double);
    infinities compare exactly, NaN is never equal. Other dtypes compare exactly."""
    if x.dtype != y.dtype or x.dtype.kind != "f" or x.dtype.itemsize < 4:
        return x == y
    thr = xp.asarray(1e-8, dtype=x.dtype)
    zero = xp.zeros((), dtype=x.dtype)
    # Infinities only compare exactly (x == y below); zeroing them avoids inf - inf.
    diff = xp.abs(xp.where(xp.isinf(x), zero, x) - xp.where(xp.isinf(y), zero, y))
    # float32(1e-8) lies just below 1e-8, so "double(diff) < 1e-8" is "diff <= thr" there.
    close = diff <= thr if x.dtype.itemsize == 4 else diff < thr
    return (x == y) | (close & ~(xp.isinf(x) | xp.isinf(y)))


def _comparison(op_type, compute):
    @kernel(op_type, inputs=["X", "Y"], outputs=["Out"], attrs=["axis"])
    def run(xp, x, y, *, axis=-1):
        x, y = align(x, y, axis)
        return xp.asarray(compute(xp, x, y))
    run.__name__ = op_type
    return run


_comparison("equal", _equal)
_comparison("not_equal", lambda xp, x, y: ~_equal(xp, x, y))
_comparison("less_than", lambda xp, x, y: x < y)
_comparison("less_equal", lambda xp, x, y: x <= y)
_comparison("greater_than", lambda xp, x, y: x > y)
_comparison("greater_equal", lambda xp, x, y: x >= y)


def _logical(op_type, compute):
    @kernel(op_type, inputs=["X", "Y"], outputs=["Out"])
    def run(xp, x, y):
        return xp.asarray(compute(xp, x, y))
    run.__name__ = op_type
    return run


_logical("logical_and", lambda xp, x, y: xp.logical_and(x, y))
_logical("logical_or", lambda xp, x, y: xp.logical_or(x, y))
_logical("logical_xor", lambda xp, x, y: xp.logical_xor(x, y))


def _bool_unary(op_type, ufunc_name):
    """A bool-valued elementwise test of X (logical_not, isfinite, isinf, isnan)."""
    @kernel(op_type, inputs=["X"], outputs=["Out"])
    def run(xp, x):
        return xp.asarray(getattr(xp, ufunc_name)(x))
    run.__name__ = op_type
    return run


for _type, _ufunc in [("logical_not", "logical_not"), ("isfinite_v2", "isfinite"),
                      ("isinf_v2", "isinf"), ("isnan_v2", "isnan")]:
    _bool_unary(_type, _ufunc)


@kernel("where", inputs=["Condition", "X", "Y"], outputs=["Out"])
def where(xp, cond, x, y):
    return xp.asarray(xp.where(cond.astype(xp.bool_, copy=False), x, y))


# -- scans and selection -------------------------------------------------------------------------


@kernel("cumsum", inputs=["X"], outputs=["Out"], attrs=["axis", "flatten", "exclusive", "reverse"])
def cumsum(xp, x, *, axis=-1, flatten=False, exclusive=False, reverse=False):
    """Running sum along `axis` (of the flattened x with flatten=True). exclusive: element i
    holds the sum of the elements before it (0 first); reverse: sums run from the end."""
    shape = (x.size,) if flatten else x.shape
    if flatten or x.ndim == 0:
        xv, a = x.reshape(-1), 0
    else:
        xv, a = x, _normalize_axis(axis, x.ndim)
    acc = _acc_dtype(xp, x)
    if reverse:
        xv = xp.flip(xv, axis=a)
    out = xp.cumsum(xv, axis=a, dtype=acc)
    if exclusive and out.shape[a] > 0:
        head = [slice(None)] * out.ndim
        head[a] = slice(0, 1)
        body = [slice(None)] * out.ndim
        body[a] = slice(0, -1)
        out = xp.concatenate([xp.zeros_like(out[tuple(head)]), out[tuple(body)]], axis=a)
    if reverse:
        out = xp.flip(out, axis=a)
    out = out.reshape(shape)
    return out if out.dtype == x.dtype else out.astype(x.dtype)


def _arg_reduce(op_type, compute):
    @kernel(op_type, inputs=["X"], outputs=["Out"], attrs=["axis", "keepdims", "flatten", "dtype"])
    def run(xp, x, *, axis, keepdims=False, flatten=False, dtype=3):
        out_dtype = xp.int32 if dtype == 2 else xp.int64
        if x.size == 0:
            raise ValueError(f"{op_type}: X {tuple(x.shape)} has no elements")
        if flatten or x.ndim == 0:
            idx = xp.asarray(compute(x.reshape(-1), axis=0))
            return idx.reshape((1,) * x.ndim if keepdims else ()).astype(out_dtype)
        a = _normalize_axis(int(axis), x.ndim)
        if x.shape[a] == 0:
            raise ValueError(f"{op_type}: X {tuple(x.shape)} has no elements along axis {axis}")
        idx = compute(x, axis=a)
        if keepdims:
            idx = xp.expand_dims(idx, a)
        return xp.asarray(idx).astype(out_dtype)
    run.__name__ = op_type
    return run


_arg_reduce("arg_max", lambda x, axis: x.argmax(axis=axis))
_arg_reduce("arg_min", lambda x, axis: x.argmin(axis=axis))


@kernel("top_k_v2", inputs=["X", "K"], outputs=["Out", "Indices"], attrs=["k", "axis", "largest", "sorted"])
def top_k_v2(xp, x, k_tensor, *, k=1, axis=-1, largest=True, sorted=True):
    """The k largest (smallest) entries along `axis`, sorted, with int64 indices. Equal values
    keep index order (lower index first); NaN counts as the largest value."""
    if k_tensor is not None:
        k = int(_scalar_of(k_tensor))
    if x.ndim == 0:
        return x.copy(), xp.zeros((), dtype=xp.int64)
    a = _normalize_axis(axis, x.ndim)
    n = x.shape[a]
    if not 0 <= k <= n:
        raise ValueError(f"top_k_v2: k={k} is out of range for axis {a} of size {n}")
    if largest:
        # A stable ascending sort of the reversed axis, read backwards: descending values,
        # and among equal values the lower original index first.
        order = xp.flip(xp.argsort(xp.flip(x, axis=a), axis=a, kind="stable"), axis=a)
        order = (n - 1) - order
    else:
        order = xp.argsort(x, axis=a, kind="stable")
    index = [slice(None)] * x.ndim
    index[a] = slice(0, k)
    indices = order[tuple(index)].astype(xp.int64)
    return xp.take_along_axis(x, indices, axis=a), indices


# -- gradients of the reductions ------------------------------------------------------------
def _expand_reduced(xp, g, x, dim, keep_dim, reduce_all):
    """Reshape the reduced gradient `g` so it broadcasts against `x` (the reduced axes
    put back as size-1 dims)."""
    axes = _reduce_axes(x, dim, reduce_all)
    if axes is None:
        return g.reshape((1,) * x.ndim)
    if keep_dim:
        return g
    shape = list(x.shape)
    for a in axes:
        shape[a] = 1
    return g.reshape(shape)


def _reduced_count(x, dim, reduce_all):
    axes = _reduce_axes(x, dim, reduce_all)
    return x.size if axes is None else math.prod(x.shape[a] for a in axes)


_REDUCE_ATTRS = ["dim", "keep_dim", "reduce_all"]


@kernel("frobenius_norm", inputs=["X"], outputs=["Out"], attrs=_REDUCE_ATTRS)
def frobenius_norm(xp, x, *, dim=(0,), keep_dim=False, reduce_all=False):
    """sqrt(sum(|x|^2)) over the reduced axes (float16 accumulated in float32; a complex x
    gives its real norm)."""
    cdt = xp.float32 if x.dtype == xp.float16 else x.dtype
    xc = x.astype(cdt, copy=False)
    dtype = xc.real.dtype if x.dtype.kind == "c" else x.dtype
    if x.ndim == 0:
        return xp.abs(xc).astype(dtype)
    axes = _reduce_axes(x, dim, reduce_all)
    squares = xc.real * xc.real + xc.imag * xc.imag if x.dtype.kind == "c" else xc * xc
    out = xp.sqrt(xp.sum(squares, axis=axes, keepdims=keep_dim))
    return xp.asarray(out).astype(dtype, copy=False)


@kernel("frobenius_norm_grad", inputs=["X", "Out", "Out@GRAD"], outputs=["X@GRAD"], attrs=_REDUCE_ATTRS)
def frobenius_norm_grad(xp, x, out, dout, *, dim=(0,), keep_dim=False, reduce_all=False):
    """dout * x / out, as PaddlePaddle's (a zero norm gives NaN there, as in PaddlePaddle;
    for a complex x, dL/dRe + i dL/dIm of the real norm)."""
    o = _expand_reduced(xp, out, x, dim, keep_dim, reduce_all)
    g = _expand_reduced(xp, dout, x, dim, keep_dim, reduce_all)
    with np.errstate(divide="ignore", invalid="ignore"):
        return xp.asarray(g * (x / o)).astype(x.dtype, copy=False)


@kernel("reduce_sum_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"], attrs=_REDUCE_ATTRS)
def reduce_sum_grad(xp, x, dout, *, dim=(0,), keep_dim=False, reduce_all=False):
    g = _expand_reduced(xp, dout, x, dim, keep_dim, reduce_all)
    return xp.broadcast_to(g, x.shape).astype(x.dtype)


@kernel("reduce_mean_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"], attrs=_REDUCE_ATTRS)
def reduce_mean_grad(xp, x, dout, *, dim=(0,), keep_dim=False, reduce_all=False):
    g = _expand_reduced(xp, dout, x, dim, keep_dim, reduce_all)
    out = xp.empty(x.shape, dtype=x.dtype)
    xp.divide(g, max(_reduced_count(x, dim, reduce_all), 1), out=out, casting="unsafe")
    return out


@kernel("mean_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"])
def mean_grad(xp, x, dout):
    return xp.full(x.shape, dout.reshape(()) / max(x.size, 1), dtype=x.dtype)


def _extreme_grad(op_type):
    # PaddlePaddle routes the gradient to every element equal to the extreme (ties share it in
    # full, not split), and so do we.
    @kernel(op_type, inputs=["X", "Out", "Out@GRAD"], outputs=["X@GRAD"], attrs=_REDUCE_ATTRS)
    def run(xp, x, out, dout, *, dim=(0,), keep_dim=False, reduce_all=False):
        o = _expand_reduced(xp, out, x, dim, keep_dim, reduce_all)
        g = _expand_reduced(xp, dout, x, dim, keep_dim, reduce_all)
        return (g * (x == o)).astype(x.dtype)
    run.__name__ = op_type
    return run


_extreme_grad("reduce_max_grad")
_extreme_grad("reduce_min_grad")


@kernel("reduce_prod_grad", inputs=["X", "Out", "Out@GRAD"], outputs=["X@GRAD"], attrs=_REDUCE_ATTRS)
def reduce_prod_grad(xp, x, out, dout, *, dim=(0,), keep_dim=False, reduce_all=False):
    # d prod / d x_i = prod / x_i, computed without dividing (zeros in x are fine): the
    # product of everything before i times everything after i along the reduced axes.
    axes = _reduce_axes(x, dim, reduce_all)
    axes = tuple(range(x.ndim)) if axes is None else axes
    g = _expand_reduced(xp, dout, x, dim, keep_dim, reduce_all)
    x = xp.conj(x) if x.dtype.kind == "c" else x      # PaddlePaddle's dout * conj(d prod / d x)
    moved = xp.moveaxis(x, axes, tuple(range(len(axes))))
    flat = moved.reshape((-1,) + moved.shape[len(axes):])
    ones = xp.ones((1,) + flat.shape[1:], dtype=x.dtype)
    before = xp.concatenate([ones, xp.cumprod(flat, axis=0)[:-1]], axis=0)
    after = xp.flip(xp.concatenate([ones, xp.cumprod(xp.flip(flat, 0), axis=0)[:-1]], axis=0), 0)
    others = (before * after).reshape(moved.shape)
    others = xp.moveaxis(others, tuple(range(len(axes))), axes)
    return (g * others).astype(x.dtype)


# -- gradients of scale-like, selection and norm ops --------------------------------------------
# (scale, sum, cast and sign have no kernels of their own here: PaddlePaddle differentiates
# them with `scale` / `cast` ops.)


@kernel("clip_grad", inputs=["X", "Min", "Max", "Out@GRAD"], outputs=["X@GRAD"], attrs=["min", "max"])
def clip_grad(xp, x, min_tensor, max_tensor, dout, *, min, max):
    # Paddle: min <= x <= max ? dout : 0 (x on a bound keeps its gradient)
    lo, hi = _bound(xp, min_tensor, min, x.dtype), _bound(xp, max_tensor, max, x.dtype)
    mask = x >= lo
    mask &= x <= hi
    return xp.multiply(dout, mask)


@kernel("pow_grad", inputs=["X", "FactorTensor", "Out@GRAD"], outputs=["X@GRAD"], attrs=["factor"])
def pow_grad(xp, x, factor_tensor, dout, *, factor=1.0):
    # Paddle: dout * factor * x^(factor - 1)
    if factor_tensor is not None:
        factor = _scalar_of(factor_tensor)
    xc = x.astype(xp.float32) if x.dtype == xp.float16 else x
    xc = xp.conj(xc) if xc.dtype.kind == "c" else xc   # PaddlePaddle's dout * conj(f'(x))
    f = xp.asarray(factor).astype(xc.dtype)
    g = xp.power(xc, f - 1)
    g *= f
    g *= dout
    return g.astype(x.dtype, copy=False)


@kernel("cumsum_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["axis", "flatten", "exclusive", "reverse"])
def cumsum_grad(xp, x, dout, *, axis=-1, flatten=False, exclusive=False, reverse=False):
    # The transpose of a running sum is the running sum the other way (Paddle: cumsum of
    # Out@GRAD with `reverse` flipped), reshaped to X.
    g = cumsum(xp, dout, axis=axis, flatten=flatten, exclusive=exclusive, reverse=not reverse)
    return g.reshape(x.shape)


@kernel("where_grad", inputs=["Condition", "X", "Y", "Out@GRAD"], outputs=["X@GRAD", "Y@GRAD"])
def where_grad(xp, cond, x, y, dout, *, need=frozenset({"X@GRAD", "Y@GRAD"})):
    c = cond.astype(xp.bool_, copy=False)
    zero = xp.zeros((), dtype=dout.dtype)
    dx = xp.where(c, dout, zero) if "X@GRAD" in need else None
    dy = xp.where(c, zero, dout) if "Y@GRAD" in need else None
    return dx, dy


@kernel("top_k_v2_grad", inputs=["X", "K", "Indices", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["axis"])
def top_k_v2_grad(xp, x, k_tensor, indices, dout, *, axis=-1):
    # Each selected element gets its Out@GRAD back; the others get zero.
    dx = xp.zeros(x.shape, dtype=dout.dtype)
    if x.ndim == 0:
        dx[...] = dout
        return dx
    xp.put_along_axis(dx, indices.astype(xp.int64, copy=False), dout, axis=_normalize_axis(axis, x.ndim))
    return dx


@kernel("squared_l2_norm_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"])
def squared_l2_norm_grad(xp, x, dout):
    # d sum(x^2) = 2 x dout (dout has shape [1])
    return xp.multiply(x, (dout.reshape(()) * 2).astype(x.dtype))


@kernel("l1_norm_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"])
def l1_norm_grad(xp, x, dout):
    # d sum|x| = sign(x) dout (0 at x == 0)
    g = xp.sign(x)
    g *= dout.reshape(()).astype(x.dtype)
    return g


@kernel("p_norm_grad", inputs=["X", "Out", "Out@GRAD"], outputs=["X@GRAD"],
        attrs=["porder", "axis", "epsilon", "keepdim", "asvector"])
def p_norm_grad(xp, x, out, dout, *, porder=2.0, axis=-1, epsilon=1e-12, keepdim=False, asvector=False):
    """PaddlePaddle's PNormGradKernel: porder 0 -> zeros; +-inf -> dout * sign(x) where
    |x| equals the norm (ties each get it in full); otherwise
    dout * sign(x) |x|^(p-1) / (norm^(p-1) + epsilon)."""
    xc = x.astype(_acc_dtype(xp, x))
    if asvector or x.ndim == 0:
        bshape = (1,) * x.ndim
    else:
        a = _normalize_axis(axis, x.ndim)
        bshape = x.shape[:a] + (1,) + x.shape[a + 1:]
    norm = out.astype(xc.dtype).reshape(bshape)
    dy = dout.astype(xc.dtype).reshape(bshape)
    if porder == 0:
        return xp.zeros(x.shape, dtype=x.dtype)
    if porder in (float("inf"), float("-inf")):
        g = xp.sign(xc)
        g *= xp.abs(xc) == norm
    else:
        p = xp.asarray(porder - 1).astype(xc.dtype)
        g = xp.power(xp.abs(xc), p)
        g *= xp.sign(xc)
        g /= xp.power(norm, p) + xp.asarray(epsilon).astype(xc.dtype)
    g *= dy
    return g.astype(x.dtype, copy=False)


# -- gradients of the matrix products -------------------------------------------------------------


def _product(xp, a, b, ta, tb, target_shape):
    """op(a) @ op(b) (op: transpose of the last two dims when ta/tb) summed down to
    `target_shape`, the shape of the operand whose gradient this is. GEMMs go through
    xp.matmul on views (no transposed copies), and a batch broadcast against a plain matrix
    is folded into the matrix rows: one large GEMM instead of a batched one plus a sum."""
    target = tuple(target_shape)
    lead = a.shape[:-2]
    if len(target) == 2 and a.ndim > 2 and ta and not tb and b.shape[:-2] == lead:
        # sum_b a_b^T @ b_b = rows(a)^T @ rows(b): a weight's gradient in a batched product
        return _matmul(xp, _swap_last(a.reshape(-1, a.shape[-1])), b.reshape(-1, b.shape[-1]))
    if b.ndim == 2 and a.ndim > 2 and not ta:
        # a batched operand times a plain matrix: fold a's batch into its rows
        r = _matmul(xp, a.reshape(-1, a.shape[-1]), _swap_last(b) if tb else b)
        r = r.reshape(a.shape[:-1] + r.shape[-1:])
    else:
        r = _matmul(xp, _swap_last(a) if ta else a, _swap_last(b) if tb else b)
    return sum_to(xp, r, target) if r.shape != target else r


def _matmul_grads(xp, x, y, g, tx, ty, need):
    """Gradients of Out = op(x) @ op(y) for matrices or stacks of them (numpy broadcasting
    of batch dims), given g = Out@GRAD shaped like Out:
        Out = X Y:      dX = G Y^T,    dY = X^T G
        Out = X Y^T:    dX = G Y,      dY = G^T X
        Out = X^T Y:    dX = Y G^T,    dY = X G
        Out = X^T Y^T:  dX = Y^T G^T,  dY = G^T X^T
    Complex operands enter conjugated (PaddlePaddle's dX = G conj(Y)^T); a real operand's
    gradient from a complex product is the real part."""
    x_dtype, y_dtype = x.dtype, y.dtype
    if x.dtype.kind == "c" or y.dtype.kind == "c":
        x, y = xp.conj(x), xp.conj(y)
    dx = dy = None
    if "X@GRAD" in need:
        dx = _product(xp, y, g, ty, True, x.shape) if tx else _product(xp, g, y, False, not ty, x.shape)
    if "Y@GRAD" in need:
        dy = _product(xp, g, x, True, tx, y.shape) if ty else _product(xp, x, g, not tx, False, y.shape)
    return (None if dx is None else as_grad_of(xp, dx, x_dtype),
            None if dy is None else as_grad_of(xp, dy, y_dtype))


_BOTH = frozenset({"X@GRAD", "Y@GRAD"})


@kernel("matmul_v2_grad", inputs=["X", "Y", "Out@GRAD"], outputs=["X@GRAD", "Y@GRAD"],
        attrs=["trans_x", "trans_y"])
def matmul_v2_grad(xp, x, y, dout, *, trans_x=False, trans_y=False, need=_BOTH):
    # A 1-D X is the row [1, K] and a 1-D Y the column [K, 1] (their transpose flags are
    # ignored, as in the forward); Out@GRAD gets the dims the forward dropped back.
    g = dout
    xm, tx = (x.reshape(1, -1), False) if x.ndim == 1 else (x, trans_x)
    ym, ty = (y.reshape(-1, 1), False) if y.ndim == 1 else (y, trans_y)
    if y.ndim == 1:
        g = g[..., None]
    if x.ndim == 1:
        g = g[..., None, :]
    dx, dy = _matmul_grads(xp, xm, ym, g, tx, ty, need)
    return (None if dx is None else dx.reshape(x.shape),
            None if dy is None else dy.reshape(y.shape))


@kernel("matmul_grad", inputs=["X", "Y", "Out@GRAD"], outputs=["X@GRAD", "Y@GRAD"],
        attrs=["transpose_X", "transpose_Y", "alpha"])
def matmul_grad(xp, x, y, dout, *, transpose_X=False, transpose_Y=False, alpha=1.0, need=_BOTH):
    # The forward's matrix view (see `matmul`): 1-D X a row, 1-D Y a column, operands of
    # rank > 2 stacks [-1, M, K]; Out@GRAD reshaped to the product of those, alpha applied.
    if x.ndim == 1 and y.ndim == 1:
        transpose_X = transpose_Y = False   # a dot product, as the forward
    xm = x.reshape(1, -1) if x.ndim == 1 else x
    ym = y.reshape(-1, 1) if y.ndim == 1 else y
    if xm.ndim > 2:
        xm = xm.reshape((-1,) + xm.shape[-2:])
    if ym.ndim > 2:
        ym = ym.reshape((-1,) + ym.shape[-2:])
    m = xm.shape[-1] if transpose_X else xm.shape[-2]
    n = ym.shape[-2] if transpose_Y else ym.shape[-1]
    batch = xm.shape[:-2] or ym.shape[:-2]
    g = dout.reshape(batch + (m, n))
    dx, dy = _matmul_grads(xp, xm, ym, g, transpose_X, transpose_Y, need)
    if alpha != 1:
        for d in (dx, dy):
            if d is not None:
                d *= xp.asarray(alpha).astype(d.dtype)
    return (None if dx is None else dx.reshape(x.shape),
            None if dy is None else dy.reshape(y.shape))


@kernel("bmm_grad", inputs=["X", "Y", "Out@GRAD"], outputs=["X@GRAD", "Y@GRAD"])
def bmm_grad(xp, x, y, dout, *, need=_BOTH):
    return _matmul_grads(xp, x, y, dout, False, False, need)


@kernel("mul_grad", inputs=["X", "Y", "Out@GRAD"], outputs=["X@GRAD", "Y@GRAD"],
        attrs=["x_num_col_dims", "y_num_col_dims"])
def mul_grad(xp, x, y, dout, *, x_num_col_dims=1, y_num_col_dims=1, need=_BOTH):
    # X2 = X flattened [M, K], Y2 [K, N], G [M, N]: dX = G Y2^T, dY = X2^T G.
    y2 = _flatten_2d(y, y_num_col_dims)
    g = dout.reshape(-1, y2.shape[1])
    dx = _matmul(xp, g, _swap_last(y2)).reshape(x.shape) if "X@GRAD" in need else None
    dy = _matmul(xp, _swap_last(_flatten_2d(x, x_num_col_dims)), g).reshape(y.shape) \
        if "Y@GRAD" in need else None
    return dx, dy
