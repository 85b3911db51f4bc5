"""Activation and unary math kernels, with PaddlePaddle's formulas (paddle/phi/kernels/funcs/
activation_functor.h).

Dtypes: every kernel returns X's dtype (as the ops' shape/dtype rule says). float16 is
computed in float32 (Paddle's "MPType"); float32 and float64 in their own precision (numpy
keeps float32 when a float32 array meets a Python float). Integer inputs of float formulas
(exp, sigmoid, ...) are computed in float64 and converted back by truncation, as Paddle's
C++ kernels instantiated for integers do; relu, relu6, abs, square, sign, floor, ceil and
round work on integers directly. complex64/128 inputs are computed in complex, for the ops
whose PaddlePaddle CPU kernels register complex (program/ops/activation.py COMPLEX_UNARY; the
op definitions refuse complex for the rest when the program is built); abs of a complex X is
its real modulus.

Complex gradients follow PaddlePaddle's convention: X@GRAD = Out@GRAD * conj(f'(X)) (the
gradient of a real loss L is dL/dRe + i dL/dIm). f' of every complex op here has real
coefficients, so conj(f'(x)) = f'(conj(x)): the gradient kernels evaluate their real formula
at conj(x) (or conj(Out)). Where a formula compares (hard_swish's clip, softplus's
threshold, logsigmoid's branch), PaddlePaddle orders complex numbers by their real parts
(phi::dtype::complex's operator<): `_ordered` gives what is compared.
"""
from __future__ import annotations

import math

import numpy as np

from keel.kernels.blocked import elementwise, in_blocks, row_blocks
from keel.kernels.constants import filled
from keel.kernels.registry import UfuncCall, kernel
from keel.kernels.sums import last_axis_dots, last_axis_sums

# -- dtype plumbing --------------------------------------------------------------------------


def _float_in(xp, x):
    """The array a float op computes on: float16 -> float32, integer/bool -> float64, complex
    as it is."""
    if x.dtype.kind == "c":
        return x
    if x.dtype.kind != "f":
        return x.astype(xp.float64)
    if x.dtype.itemsize < 4:
        return x.astype(xp.float32)
    return x


def _conj_float_in(xp, x):
    """What a gradient formula is evaluated at: _float_in(x), conjugated when complex (see the
    module docstring: X@GRAD = Out@GRAD * conj(f'(X)) = Out@GRAD * f'(conj(X)))."""
    x = _float_in(xp, x)
    return xp.conj(x) if x.dtype.kind == "c" else x


def _ordered(x):
    """What PaddlePaddle compares of x: x, or a complex x's real part."""
    return x.real if x.dtype.kind == "c" else x


def _finish(xp, y, dtype):
    y = xp.asarray(y)
    return y if y.dtype == dtype else y.astype(dtype)


def _float_unary(op_type, compute, attrs=(), ufunc=None, per_element=True):
    """Register `compute(xp, x, **attrs)` as a kernel computed in floating point and returned
    in x's dtype (for an integer x, truncated toward zero as C++'s conversion does).
    `ufunc`: the name of the array module's ufunc that `compute` is, for float32/64 X; the
    executor then calls it directly, into a donated X's buffer. `per_element=False` for a
    formula that mixes elements (softmax), which must not be evaluated in blocks."""
    def specialize(xp, attrs, present, donated):
        if present[0] is not None and present[0].kind == "f" and present[0].itemsize >= 4:
            return UfuncCall(getattr(xp, ufunc), into_input=donated)
        return None

    def run(xp, x, **kw):
        return _finish(xp, compute(xp, _float_in(xp, x), **kw), x.dtype)
    run.__name__ = op_type
    if per_element:
        run = elementwise(run)
    return kernel(op_type, inputs=["X"], outputs=["Out"], attrs=list(attrs),
                  specialize=specialize if ufunc else None)(run)


# op type -> formula(xp, x, out, **attrs) of the activations registered by _in_place_unary:
# fused kernels (kernels/fused_conv.py) apply them in place to the part of their output
# they have just written, so they give the separate op's numbers bit for bit.
IN_PLACE_FORMULAS: dict = {}


def _in_place_unary(op_type, formula, attrs=(), any_dtype=False):
    """Register `formula(xp, x, out, **attrs)`, an elementwise formula which writes the op's
    result into `out` (x itself allowed) in a few in-place passes: the kernel allocates one
    array, none when the executor donates X's buffer (`specialize`), and evaluates in
    cache-sized blocks (kernels/blocked.py `in_blocks`). float16 is computed in float32 and
    integers in float64 (truncated back), unless `any_dtype`: a formula exact in every dtype
    (relu, relu6)."""
    def run(xp, x, **kw):
        xc = x if any_dtype else _float_in(xp, x)
        out = xp.empty_like(xc) if xc is x else xc      # a converted copy is ours to overwrite
        return _finish(xp, in_blocks(xp, formula, xc, out, **kw), x.dtype)

    def specialize(xp, attrs, present, donated):
        dtype = present[0] if present else None
        if not donated or dtype is None or dtype.kind != "f" or dtype.itemsize < 4:
            return None

        def into_input(x):
            if x.base is not None or x.dtype != dtype:  # a view may share its buffer with a live value
                return run(xp, x, **attrs)
            return in_blocks(xp, formula, x, x, **attrs)
        return into_input
    run.__name__ = op_type
    run.per_element = True  # for tests to find the kernels evaluated in blocks
    IN_PLACE_FORMULAS[op_type] = formula
    return kernel(op_type, inputs=["X"], outputs=["Out"], attrs=list(attrs), specialize=specialize)(run)


def _scratch(xp, x, out):
    """Where a formula that reads x again at its end keeps its partial result: out, unless
    out is x itself."""
    return xp.empty_like(x) if out is x else out


def _zero(xp, x):
    return xp.zeros((), dtype=x.dtype)


def _const(xp, value, x):
    """A scalar attribute as a 0-d array of x's dtype (Paddle's static_cast<T>(attr))."""
    return xp.asarray(value, dtype=x.dtype)


# -- erf ---------------------------------------------------------------------------------------
# A vectorized erf from the rational approximations of fdlibm's s_erf.c (Sun Microsystems,
# 1993), which are accurate to < 1 ulp in float64. It is evaluated in x's own precision:
# about 1e-16 relative error in float64, about 1e-7 in float32. Every branch is evaluated
# on the whole array and the right one picked with `where`; arguments are clamped so the
# lanes a branch does not serve stay finite (no overflow or inf/inf warnings).

_ERX = 8.45062911510467529297e-01
_PP = (1.28379167095512558561e-01, -3.25042107247001499370e-01, -2.84817495755985104766e-02,
       -5.77027029648944159157e-03, -2.37630166566501626084e-05)
_QQ = (1.0, 3.97917223959155352819e-01, 6.50222499887672944485e-02, 5.08130628187576562776e-03,
       1.32494738004321644526e-04, -3.96022827877536812320e-06)
_PA = (-2.36211856075265944077e-03, 4.14856118683748331666e-01, -3.72207876035701323847e-01,
       3.18346619901161753674e-01, -1.10894694282396677476e-01, 3.54783043256182359371e-02,
       -2.16637559486879084300e-03)
_QA = (1.0, 1.06420880400844228286e-01, 5.40397917702171048937e-01, 7.18286544141962662868e-02,
       1.26171219808761642112e-01, 1.36370839120290507362e-02, 1.19844998467991074170e-02)
_RA = (-9.86494403484714822705e-03, -6.93858572707181764372e-01, -1.05586262253232909814e+01,
       -6.23753324503260060396e+01, -1.62396669462573470355e+02, -1.84605092906711035994e+02,
       -8.12874355063065934246e+01, -9.81432934416914548592e+00)
_SA = (1.0, 1.96512716674392571292e+01, 1.37657754143519042600e+02, 4.34565877475229228821e+02,
       6.45387271733267880336e+02, 4.29008140027567833386e+02, 1.08635005541779435134e+02,
       6.57024977031928170135e+00, -6.04244152148580987438e-02)
_RB = (-9.86494292470009928597e-03, -7.99283237680523006574e-01, -1.77579549177547519889e+01,
       -1.60636384855821916062e+02, -6.37566443368389627722e+02, -1.02509513161107724954e+03,
       -4.83519191608651397019e+02)
_SB = (1.0, 3.03380607434824582924e+01, 3.25792512996573918826e+02, 1.53672958608443695994e+03,
       3.19985821950859553908e+03, 2.55305040643316442583e+03, 4.74528541206955367215e+02,
       -2.24409524465858183362e+01)


def _poly(s, coefs):
    """coefs[0] + s*coefs[1] + ... by Horner's rule (in s's dtype)."""
    acc = coefs[-1] * s
    for c in coefs[-2:0:-1]:
        acc += c
        acc *= s
    acc += coefs[0]
    return acc


# float32: Eigen's single-precision erf (x * P(x^2) / Q(x^2) on x clamped to [-4, 4], max
# abs error 4.2e-7), which PaddlePaddle's CPU kernels evaluate through Eigen; one branch,
# in place, 5x faster than the fdlibm branches below (gelu and its gradient use it).
_EIGEN_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06, -5.69250639462346e-05,
            -7.34990630326855e-04, -2.95459980854025e-03, -1.60960333262415e-02)
_EIGEN_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03, -7.37332916720468e-03,
            -1.42647390514189e-02)


def _erf_float32(xp, x):
    c = xp.clip(x, xp.float32(-4), xp.float32(4))
    z = c * c
    # Horner's rule, its first step (P0 * z) in one pass rather than filling P0 first
    p = z * xp.float32(_EIGEN_P[0])
    p += xp.float32(_EIGEN_P[1])
    for coef in _EIGEN_P[2:]:
        p *= z
        p += xp.float32(coef)
    q = z * xp.float32(_EIGEN_Q[0])
    q += xp.float32(_EIGEN_Q[1])
    for coef in _EIGEN_Q[2:]:
        q *= z
        q += xp.float32(coef)
    p *= c
    p /= q
    return p


def erf(xp, x):
    """erf(x) for a float32 or float64 array, in that precision."""
    if x.dtype == xp.float32 and x.ndim:
        return _erf_float32(xp, x)
    ax = xp.abs(x)
    c = xp.clip(x, -1.25, 1.25)
    # |x| < 0.84375: erf = x + x * P(x^2) / Q(x^2)
    z = c * c
    small = c + c * (_poly(z, _PP) / _poly(z, _QQ))
    # 0.84375 <= |x| < 1.25: erf = sign * (erx + P(s) / Q(s)), s = |x| - 1
    s = xp.abs(c) - 1
    mid = _ERX + _poly(s, _PA) / _poly(s, _QA)
    # 1.25 <= |x| < 6: erf = sign * (1 - exp(-x^2 - 0.5625 + R/S) / |x|), R/S rational in 1/x^2.
    # (fdlibm splits x^2 to keep it exact; in float64 the rounding of t*t costs < 1e-14.)
    t = xp.clip(ax, 1.25, 6.0)
    s = 1 / (t * t)
    ratio = xp.where(t < 1 / 0.35, _poly(s, _RA) / _poly(s, _SA), _poly(s, _RB) / _poly(s, _SB))
    large = 1 - xp.exp(ratio - t * t - 0.5625) / t
    magnitude = xp.where(ax < 1.25, mid, xp.where(ax >= 6.0, 1, large))  # NaN stays NaN
    return xp.where(ax < 0.84375, small, xp.copysign(magnitude, x))


# -- stable building blocks --------------------------------------------------------------------


def _sigmoid(xp, x):
    """1 / (1 + exp(-x)) without overflow: exp(-|x|) only (complex x: the formula itself)."""
    if x.dtype.kind == "c":
        return 1 / (1 + xp.exp(-x))
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(xp, x):
    """log(1 + exp(x)) without overflow."""
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


# -- relu family (integer dtypes kept) --------------------------------------------------------


def _relu(xp, x, out):
    # Paddle: x > 0 ? x : 0, so NaN -> 0 and -0.0 -> +0.0. fmax drops NaN, adding +0.0 turns
    # -0.0 into +0.0. Against an array of zeros: numpy's fmax, maximum and minimum with a
    # broadcast scalar measured 3x slower than with an array (no vector loop), 7x slower than
    # an add; a shared read-only one (kernels/constants.py) instead of filling one per call:
    # [1, 24, 12, 96] 1.2x, [64, 16, 28, 28] 1.2-1.45x, [128, 1024] 1.3-1.6x with the zeros in
    # cache (the relu op runs in blocks of 512 KiB, so they stay there); with every cache
    # flushed before each call 0.5-0.75x, the zeros being one more operand to fetch.
    xp.fmax(filled(xp, 0, x), x, out=out)
    if out.dtype.kind == "f":
        out += 0


def _relu6(xp, x, out, *, threshold=6.0):
    # Paddle: min(max(x, 0), threshold); clip is one pass (max + min with scalars: 6x slower)
    x.clip(_zero(xp, x), _const(xp, threshold, x), out=out)


relu = _in_place_unary("relu", _relu, any_dtype=True)
relu6 = _in_place_unary("relu6", _relu6, ["threshold"], any_dtype=True)


def _leaky_relu(xp, x, *, alpha):
    # Paddle: alpha < 1 ? max(x, alpha*x) : min(x, alpha*x).
    ax = x * alpha
    return xp.maximum(x, ax) if alpha < 1 else xp.minimum(x, ax)


_float_unary("leaky_relu", _leaky_relu, ["alpha"])


def _thresholded_relu(xp, x, *, threshold, value=0.0):
    return xp.where(x > threshold, x, _const(xp, value, x))


_float_unary("thresholded_relu", _thresholded_relu, ["threshold", "value"])

# -- gelu / sigmoid family ------------------------------------------------------------------------


_SQRT_HALF = math.sqrt(0.5)
_GELU_PDF = 1 / math.sqrt(2 * math.pi)   # the normal pdf at 0
_GELU_K = math.sqrt(2 / math.pi)          # tanh approximation: tanh(K * (x + 0.044715 x^3))
_GELU_K3 = _GELU_K * 0.044715 * 3


def _gelu(xp, x, out, *, approximate):
    # Paddle: 0.5 x (1 + tanh(K (x + 0.044715 x^3))), or 0.5 x (1 + erf(x / sqrt 2)); the
    # tanh form as in-place passes over one array (x + 0.044715 x^3 as x (1 + 0.044715 x^2),
    # as gelu_grad has it), without the fresh array per operation.
    if approximate:
        t = xp.multiply(x, x, out=_scratch(xp, x, out))
        t *= 0.044715
        t += 1
        t *= x
        t *= _GELU_K
        xp.tanh(t, out=t)
    else:
        t = erf(xp, x * _SQRT_HALF)
    t += 1
    xp.multiply(t, x, out=out)
    out *= 0.5


_in_place_unary("gelu", _gelu, ["approximate"])
_float_unary("erf", erf)
_float_unary("tanh", lambda xp, x: xp.tanh(x), ufunc="tanh")


def _sigmoid_into(xp, x, out):
    # Paddle: 1 / (1 + exp(-x)); exp overflows to inf for x < -88 (float32), giving 0 as there
    xp.negative(x, out=out)
    with np.errstate(over="ignore"):
        xp.exp(out, out=out)
    out += 1
    xp.divide(1, out, out=out)


def _swish_into(xp, x, out, *, beta=1.0):
    # Paddle: x / (1 + exp(-beta * x)) (silu: beta 1)
    t = xp.multiply(x, -beta, out=_scratch(xp, x, out))
    with np.errstate(over="ignore"):
        xp.exp(t, out=t)
    t += 1
    xp.divide(x, t, out=out)


_in_place_unary("sigmoid", _sigmoid_into)
_in_place_unary("silu", _swish_into)
_in_place_unary("swish", _swish_into, ["beta"])
def _logsigmoid(xp, x):
    if x.dtype.kind == "c":
        # PaddlePaddle's -t - log(exp(-t) + exp(-x - t)), t = max(-x, 0) (by real parts):
        # -log(1 + exp(-x)) where Re(x) > 0, else x - log(1 + exp(x)); the principal log
        return xp.where(x.real > 0, -xp.log1p(xp.exp(-x)), x - xp.log1p(xp.exp(x)))
    return xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x)))


_float_unary("logsigmoid", _logsigmoid)
_float_unary("tanh_shrink", lambda xp, x: x - xp.tanh(x))
_float_unary("softsign", lambda xp, x: x / (1 + xp.abs(x)))


def _hard_sigmoid(xp, x, out, *, slope, offset):
    # Paddle: min(max(x * slope + offset, 0), 1)
    xp.multiply(x, slope, out=out)
    out += offset
    out.clip(0, 1, out=out)   # (the method: np.clip's wrapper costs more on SE-block maps)


def _hard_swish(xp, x, out, *, threshold, scale, offset):
    # Paddle: x * min(max(x + offset, 0), threshold) / scale: 4 passes, one array written.
    # Times the reciprocal of scale (within 2 ulp of dividing): float32 [1, 120, 3, 160],
    # [1, 200, 2, 96], [1, 16, 24, 160] 1.16-1.21x, [1, 288, 2, 160] 1.05x (CPU time, one
    # thread, medians of alternating blocks): a divide pass costs 2x a multiply's.
    t = xp.add(x, offset, out=_scratch(xp, x, out))
    if t.dtype.kind == "c":  # clipped by its real part (see the module docstring)
        t[t.real < 0] = 0
        t[t.real > threshold] = threshold
    else:
        t.clip(0, threshold, out=t)
    t *= 1 / scale
    xp.multiply(x, t, out=out)


_in_place_unary("hard_sigmoid", _hard_sigmoid, ["slope", "offset"])
_in_place_unary("hard_swish", _hard_swish, ["threshold", "scale", "offset"])


def _mish(xp, x, *, threshold):
    # Paddle: sp = x > threshold ? x : log(1 + exp(x)); out = x * tanh(sp)
    sp = xp.where(x > threshold, x, _softplus(xp, x))
    return x * xp.tanh(sp)


def _softplus_op(xp, x, *, beta, threshold):
    # Paddle: beta*x > threshold ? x : log(1 + exp(beta*x)) / beta (complex: the principal
    # log, the real part compared)
    xb = x * beta
    soft = xp.log1p(xp.exp(xb)) if x.dtype.kind == "c" else _softplus(xp, xb)
    return xp.where(_ordered(xb) > threshold, x, soft / beta)


_float_unary("mish", _mish, ["threshold"])
_float_unary("softplus", _softplus_op, ["beta", "threshold"])

# -- exponential-linear family ------------------------------------------------------------------


def _elu(xp, x, *, alpha):
    # Paddle: x < 0 ? alpha * (exp(x) - 1) : x
    return xp.where(x < 0, alpha * xp.expm1(xp.minimum(x, 0)), x)


def _selu(xp, x, *, scale, alpha):
    # Paddle: x > 0 ? scale * x : scale * alpha * (exp(x) - 1)
    return xp.where(x > 0, x * scale, (scale * alpha) * xp.expm1(xp.minimum(x, 0)))


def _celu(xp, x, *, alpha):
    # Paddle: x < 0 ? alpha * (exp(x / alpha) - 1) : x
    return xp.where(x < 0, alpha * xp.expm1(xp.minimum(x, 0) / alpha), x)


_float_unary("elu", _elu, ["alpha"])
_float_unary("selu", _selu, ["scale", "alpha"])
_float_unary("celu", _celu, ["alpha"])

# -- plain unary math --------------------------------------------------------------------------

for _op, _fn in [("exp", "exp"), ("expm1", "expm1"), ("log", "log"), ("log2", "log2"),
                 ("log10", "log10"), ("log1p", "log1p"), ("sqrt", "sqrt"), ("sin", "sin"),
                 ("cos", "cos")]:
    _float_unary(_op, lambda xp, x, _fn=_fn: getattr(xp, _fn)(x), ufunc=_fn)
_float_unary("rsqrt", lambda xp, x: 1 / xp.sqrt(x))
def _f32(value):
    """A FLOAT attribute as PaddlePaddle holds it: a float32 (0.67 -> 0.67000001668...)."""
    return float(np.float32(value))


for _op, _fn in [("acos", "arccos"), ("asin", "arcsin"), ("atan", "arctan"), ("tan", "tan"),
                 ("sinh", "sinh"), ("cosh", "cosh"), ("asinh", "arcsinh"), ("acosh", "arccosh"),
                 ("atanh", "arctanh")]:
    _float_unary(_op, lambda xp, x, _fn=_fn: getattr(xp, _fn)(x), ufunc=_fn)


def _brelu(xp, x, *, t_min=0.0, t_max=24.0):
    # Paddle: min(max(x, t_min), t_max), the bounds cast to x's type
    return xp.minimum(xp.maximum(x, _const(xp, _f32(t_min), x)), _const(xp, _f32(t_max), x))


def _stanh(xp, x, *, scale_a=0.67, scale_b=1.7159):
    # Paddle: scale_b * tanh(scale_a * x), the scales cast to x's type
    return _const(xp, _f32(scale_b), x) * xp.tanh(x * _const(xp, _f32(scale_a), x))


def _hard_shrink(xp, x, *, threshold=0.5):
    # Paddle: x where x > threshold or x < -threshold, else 0 (the bound cast to x's type)
    t = _const(xp, _f32(threshold), x)
    return xp.where((x > t) | (x < -t), x, _zero(xp, x))


def _softshrink(xp, x, *, lambda_=0.5):
    # Paddle: x - lambda where x > lambda, x + lambda where x < -lambda, else 0
    lam = _const(xp, _f32(lambda_), x)
    return xp.where(x > lam, x - lam, xp.where(x < -lam, x + lam, _zero(xp, x)))


_float_unary("hard_shrink", _hard_shrink, ["threshold"])
_float_unary("softshrink", _softshrink, ["lambda"])
_float_unary("brelu", _brelu, ["t_min", "t_max"])
_float_unary("stanh", _stanh, ["scale_a", "scale_b"])
_float_unary("reciprocal", lambda xp, x: 1 / x)


@kernel("abs", inputs=["X"], outputs=["Out"])
def abs_(xp, x):
    return xp.asarray(xp.abs(x))


@kernel("square", inputs=["X"], outputs=["Out"])
def square(xp, x):
    return xp.asarray(xp.multiply(x, x))


@kernel("sign", inputs=["X"], outputs=["Out"])
def sign(xp, x):
    if x.dtype.kind == "c":  # PaddlePaddle's x / |x| (0 at 0), what numpy >= 2 gives too
        a = xp.abs(x)
        return xp.divide(x, a, out=xp.zeros_like(x), where=a != 0)
    return xp.asarray(xp.sign(x))


@kernel("floor", inputs=["X"], outputs=["Out"])
def floor(xp, x):
    return xp.asarray(xp.floor(x)) if x.dtype.kind == "f" else x.copy()


@kernel("ceil", inputs=["X"], outputs=["Out"])
def ceil(xp, x):
    return xp.asarray(xp.ceil(x)) if x.dtype.kind == "f" else x.copy()


def _round_half_away(xp, x):
    """std::round: halfway cases away from zero (numpy's round goes to even). The fraction
    a - floor(a) is exact, so 0.49999999999999994 is not pushed up to 1."""
    a = xp.abs(x)
    r = xp.floor(a)
    r += (a - r) >= 0.5
    return xp.copysign(r, x)


def _round_int(xp, x, decimals):
    """Integers: unchanged, or with decimals < 0 rounded (halves away from zero) to a
    multiple of 10**-decimals, in integer arithmetic."""
    if decimals >= 0 or x.dtype.kind not in "iu":
        return x.copy()
    ten = 10 ** -decimals
    a = xp.abs(x)
    q = a // ten
    q += (a - q * ten) * 2 >= ten
    q *= ten
    return xp.where(x < 0, -q, q).astype(x.dtype)


def _round_complex(xp, x, decimals):
    """PaddlePaddle rounds a complex number's parts halfway cases to even (std::rint, unlike
    its real kernel's std::round: round(-0.5 - 2.5j) = -0 - 2j), each part scaled by
    10**decimals as the real kernel scales (a complex division would not be exact)."""
    if decimals == 0:
        return xp.rint(x)
    ten = 10.0 ** abs(decimals)
    out = xp.empty_like(x)
    for part, value in (("real", x.real), ("imag", x.imag)):
        setattr(out, part, xp.rint(value * ten) / ten if decimals > 0 else xp.rint(value / ten) * ten)
    return out


@kernel("round", inputs=["X"], outputs=["Out"], attrs=["decimals"])
def round_(xp, x, *, decimals=0):
    if x.dtype.kind == "c":
        return _round_complex(xp, x, decimals)
    if x.dtype.kind != "f":
        return _round_int(xp, x, decimals)
    xc = _float_in(xp, x)
    if decimals == 0:
        y = _round_half_away(xp, xc)
    elif decimals > 0:
        ten = _const(xp, 10.0 ** decimals, xc)
        y = _round_half_away(xp, xc * ten) / ten
    else:
        ten = _const(xp, 10.0 ** -decimals, xc)
        y = _round_half_away(xp, xc / ten) * ten
    return _finish(xp, y, x.dtype)


# -- softmax -----------------------------------------------------------------------------------


def _softmax(xp, x, *, axis):
    if x.ndim == 0:
        return xp.ones_like(x)
    if x.size == 0:
        return x.copy()
    # array methods, not xp.max: numpy's function wrappers cost more than a small row's
    # arithmetic. Along the last axis the sums are einsum's (kernels/sums.py: 3x numpy's sum
    # on [1, 80, 6625]). Measured and left out: times the inverse of the sum (PaddlePaddle's)
    # instead of dividing, and writing into a donated X: within 1.07x, slower on small rows.
    e = x - x.max(axis=axis, keepdims=True)
    xp.exp(e, out=e)
    last = axis in (-1, x.ndim - 1)
    e /= last_axis_sums(xp, e, keepdims=True) if last else e.sum(axis=axis, keepdims=True)
    return e


def _log_softmax(xp, x, *, axis):
    if x.ndim == 0:
        return xp.zeros_like(x)
    if x.size == 0:
        return x.copy()
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    shifted -= xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))
    return shifted


_float_unary("softmax", _softmax, ["axis"], per_element=False)
_float_unary("log_softmax", _log_softmax, ["axis"], per_element=False)


# == gradients =====================================================================================
# PaddlePaddle's gradient functors (paddle/phi/kernels/funcs/activation_functor.h), reading
# what its gradient ops read: X, Out or both, and Out@GRAD. Each returns X@GRAD in the
# forward dtype; float16 is computed in float32 as above. Where a gradient has a kink the
# side Paddle picks is kept (relu_grad: Out > 0; leaky_relu_grad: X >= 0 gives 1; relu6 and
# hard_sigmoid pass the gradient only strictly inside their linear range). Checked against
# PaddlePaddle 3.3.1's kernels at the kinks.


def _grad_kernel(op_type, reads, compute, attrs=()):
    """Register `<op>_grad` reading `reads` ("X" or "Out") and Out@GRAD: `compute(xp, a,
    dout, **attrs)` on float arrays, the result returned in a's dtype."""
    @kernel(op_type + "_grad", inputs=[reads, "Out@GRAD"], outputs=["X@GRAD"], attrs=list(attrs))
    @elementwise
    def run(xp, a, dout, **kw):
        return _finish(xp, compute(xp, _conj_float_in(xp, a), dout, **kw), a.dtype)
    run.__name__ = op_type + "_grad"
    return run


# -- relu family ---------------------------------------------------------------------------------


@kernel("relu_grad", inputs=["Out", "Out@GRAD"], outputs=["X@GRAD"])
def relu_grad(xp, out, dout):
    # Paddle: dout * (out > 0). multiply keeps dout's dtype (a NaN dout stays NaN).
    return xp.multiply(dout, out > 0)


@kernel("relu6_grad", inputs=["Out", "Out@GRAD"], outputs=["X@GRAD"], attrs=["threshold"])
def relu6_grad(xp, out, dout, *, threshold=6.0):
    # Paddle: dout * ((out > 0) & (out < threshold))
    mask = out > 0
    mask &= out < _const(xp, threshold, out)
    return xp.multiply(dout, mask)


def _leaky_relu_grad(xp, x, dout, *, alpha):
    # Paddle: dout * (x >= 0 ? 1 : alpha)
    return xp.where(x >= 0, dout, dout * alpha)


def _thresholded_relu_grad(xp, x, dout, *, threshold):
    return xp.multiply(dout, x > threshold)


_grad_kernel("leaky_relu", "X", _leaky_relu_grad, ["alpha"])
_grad_kernel("thresholded_relu", "X", _thresholded_relu_grad, ["threshold"])

# -- gelu / sigmoid family -------------------------------------------------------------------------


@kernel("gelu_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"], attrs=["approximate"])
@elementwise
def gelu_grad(xp, x, dout, *, approximate=False):
    xc = _float_in(xp, x)
    x2 = xc * xc
    if approximate:
        # Paddle: 0.5 * dout * (1 + t + (x - x t^2) * (K + K3 x^2)), t = tanh(K (x + 0.044715 x^3))
        t = x2 * 0.044715
        t += 1
        t *= xc
        t *= _GELU_K
        xp.tanh(t, out=t)
        x2 *= _GELU_K3
        x2 += _GELU_K                   # K + K3 x^2
        s = t * t
        xp.subtract(1, s, out=s)
        s *= xc                         # x - x t^2
        s *= x2
        s += t
        s += 1
        s *= 0.5
    else:
        # Paddle: dout * (Phi(x) + x * pdf(x)), Phi(x) = 0.5 * (1 + erf(x / sqrt 2))
        x2 *= -0.5
        xp.exp(x2, out=x2)
        x2 *= xc
        x2 *= _GELU_PDF                 # x * pdf(x)
        s = erf(xp, xc * _SQRT_HALF)
        s += 1
        s *= 0.5
        s += x2
    s *= dout
    return _finish(xp, s, x.dtype)


@kernel("tanh_grad", inputs=["Out", "Out@GRAD"], outputs=["X@GRAD"])
@elementwise
def tanh_grad(xp, out, dout):
    # Paddle: dout * (1 - out^2)
    o = _conj_float_in(xp, out)
    g = xp.multiply(o, o)
    xp.subtract(1, g, out=g)
    g *= dout
    return _finish(xp, g, out.dtype)


@kernel("sigmoid_grad", inputs=["Out", "Out@GRAD"], outputs=["X@GRAD"])
@elementwise
def sigmoid_grad(xp, out, dout):
    # Paddle: dout * out * (1 - out)
    o = _conj_float_in(xp, out)
    g = xp.subtract(1, o)
    g *= o
    g *= dout
    return _finish(xp, g, out.dtype)


@kernel("silu_grad", inputs=["X", "Out", "Out@GRAD"], outputs=["X@GRAD"])
@elementwise
def silu_grad(xp, x, out, dout):
    # d(x s)/dx = s + x s (1 - s) = s + out (1 - s), s = sigmoid(x)
    s = _sigmoid(xp, _conj_float_in(xp, x))
    g = xp.subtract(1, s)
    g *= _conj_float_in(xp, out)
    g += s
    g *= dout
    return _finish(xp, g, x.dtype)


def _swish_grad(xp, x, dout, *, beta=1.0):
    # d(x s(bx))/dx = s + b x s (1 - s)
    s = _sigmoid(xp, x * beta)
    g = xp.subtract(1, s)
    g *= s
    g *= x * beta
    g += s
    g *= dout
    return g


def _logsigmoid_grad(xp, x, dout):
    return dout * _sigmoid(xp, -x)


def _tanh_shrink_grad(xp, x, dout):
    t = xp.tanh(x)
    t *= t
    t *= dout
    return t


def _softsign_grad(xp, x, dout):
    # dout / (1 + |x|)^2
    d = xp.abs(x)
    d += 1
    d *= d
    if x.dtype.kind == "c":
        # PaddlePaddle 3.3.1's complex formula (read off its outputs; neither the conjugate
        # convention nor the Wirtinger gradient of the non-holomorphic |x|): the derivative
        # along the real axis, dout * (1 + |x| - Re(x) x / |x|) / (1 + |x|)^2, at x itself
        # (the kernel passes conj(x)).
        a = xp.abs(x)
        ratio = xp.divide(x.real, a, out=xp.zeros_like(a), where=a != 0)
        return dout * ((1 + a) - xp.conj(x) * ratio) / d
    return xp.divide(dout, d, out=d)


def _hard_sigmoid_grad(xp, out, dout, *, slope):
    # Paddle (from Out): dout * slope where 0 < out < 1
    mask = out > 0
    mask &= out < 1
    return xp.multiply(dout, mask) * slope


def _hard_swish_grad(xp, x, dout, *, threshold, scale, offset):
    # Paddle: x + offset <= 0 -> 0; 0 < x + offset < threshold -> dout * (2x + offset) / scale;
    # x + offset >= threshold -> dout * threshold / scale. (PaddlePaddle 3.x's kernels use
    # the default 6, 6, 3 whatever the attributes, forward and backward alike, so its
    # saturated slope is always 1; ours is the derivative of our forward, which honours them.)
    xo = x + offset
    inner = (x + xo) / scale
    inner *= _ordered(xo) > 0
    return dout * xp.where(_ordered(xo) < threshold, inner, threshold / scale)


def _mish_grad(xp, x, dout, *, threshold):
    # Paddle: sp = x > threshold ? x : softplus(x); t = tanh(sp);
    # dx = dout * (t + x * (1 - t^2) * (1 - exp(-sp)))
    sp = xp.where(x > threshold, x, _softplus(xp, x))
    t = xp.tanh(sp)
    g = xp.expm1(-sp)            # -(1 - exp(-sp))
    g *= t * t - 1               # (1 - t^2)(1 - exp(-sp))
    g *= x
    g += t
    g *= dout
    return g


def _softplus_grad(xp, x, dout, *, beta, threshold):
    # Paddle: beta x > threshold ? dout : dout * sigmoid(beta x)
    xb = x * beta
    return xp.where(_ordered(xb) > threshold, dout, dout * _sigmoid(xp, xb))


_grad_kernel("swish", "X", _swish_grad, ["beta"])
_grad_kernel("logsigmoid", "X", _logsigmoid_grad)
_grad_kernel("tanh_shrink", "X", _tanh_shrink_grad)
_grad_kernel("softsign", "X", _softsign_grad)
_grad_kernel("hard_sigmoid", "Out", _hard_sigmoid_grad, ["slope"])
_grad_kernel("hard_swish", "X", _hard_swish_grad, ["threshold", "scale", "offset"])
_grad_kernel("mish", "X", _mish_grad, ["threshold"])
_grad_kernel("softplus", "X", _softplus_grad, ["beta", "threshold"])

# -- exponential-linear family ----------------------------------------------------------------------


@kernel("elu_grad", inputs=["X", "Out", "Out@GRAD"], outputs=["X@GRAD"], attrs=["alpha"])
def elu_grad(xp, x, out, dout, *, alpha=1.0):
    # Paddle: alpha > 0: out > 0 ? dout : dout * (out + alpha);
    #         otherwise: x > 0 ? dout : dout * alpha * exp(x)
    xc, oc = _float_in(xp, x), _float_in(xp, out)
    if alpha > 0:
        g = xp.where(oc > 0, dout, dout * (oc + alpha))
    else:
        g = xp.where(xc > 0, dout, dout * (alpha * xp.exp(xp.minimum(xc, 0))))
    return _finish(xp, g, x.dtype)


def _selu_grad(xp, out, dout, *, scale, alpha):
    # Paddle (from Out): out > 0 ? dout * scale : dout * (out + scale * alpha), with
    # scale * alpha multiplied in float32 (its attributes' type)
    la = float(xp.float32(scale) * xp.float32(alpha))
    return xp.where(out > 0, dout * scale, dout * (out + la))


def _celu_grad(xp, x, dout, *, alpha):
    # Paddle: x > 0 ? dout : dout * exp(x / alpha)
    return xp.where(x > 0, dout, dout * xp.exp(xp.minimum(x, 0) / alpha))


_grad_kernel("selu", "Out", _selu_grad, ["scale", "alpha"])
_grad_kernel("celu", "X", _celu_grad, ["alpha"])

# -- plain unary math ------------------------------------------------------------------------------

_grad_kernel("exp", "Out", lambda xp, out, dout: out * dout)
_grad_kernel("expm1", "Out", lambda xp, out, dout: (out + 1) * dout)
_grad_kernel("log", "X", lambda xp, x, dout: dout / x)
_grad_kernel("log2", "X", lambda xp, x, dout: dout / (x * math.log(2)))
_grad_kernel("log10", "X", lambda xp, x, dout: dout / (x * math.log(10)))
_grad_kernel("log1p", "X", lambda xp, x, dout: dout / (x + 1))
_grad_kernel("sqrt", "Out", lambda xp, out, dout: dout * 0.5 / out)


def _rsqrt_grad(xp, out, dout):
    # Paddle: -0.5 * dout * out^3
    g = out * out
    g *= out
    g *= dout
    g *= -0.5
    return g


def _reciprocal_grad(xp, out, dout):
    # Paddle: -dout * out^2
    g = out * out
    g *= dout
    return xp.negative(g, out=g)


_grad_kernel("rsqrt", "Out", _rsqrt_grad)
_grad_kernel("reciprocal", "Out", _reciprocal_grad)
@kernel("abs_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"])
@elementwise
def abs_grad(xp, x, dout):
    """dout * sign(x), 0 at x == 0; for a complex x (Out real) dout * x / |x|: PaddlePaddle's,
    the gradient dL/dRe + i dL/dIm, with no conjugate."""
    if x.dtype.kind == "c":
        a = xp.abs(x)
        unit = xp.divide(x, a, out=xp.zeros_like(x), where=a != 0)
        return _finish(xp, dout * unit, x.dtype)
    return _finish(xp, dout * xp.sign(_float_in(xp, x)), x.dtype)
_grad_kernel("square", "X", lambda xp, x, dout: dout * (x * 2))
_grad_kernel("sin", "X", lambda xp, x, dout: dout * xp.cos(x))
_grad_kernel("cos", "X", lambda xp, x, dout: -(dout * xp.sin(x)))
_grad_kernel("erf", "X", lambda xp, x, dout: dout * (2 / math.sqrt(math.pi)) * xp.exp(-(x * x)))


def _acos_grad(xp, x, dout):
    # Paddle: -dout / sqrt(1 - x^2)
    return -(dout / xp.sqrt(1 - x * x))


def _brelu_grad(xp, x, dout, *, t_min=0.0, t_max=24.0):
    # Paddle: dout where t_min < x < t_max, else 0
    mask = x > _const(xp, _f32(t_min), x)
    mask &= x < _const(xp, _f32(t_max), x)
    return xp.multiply(dout, mask)


def _stanh_grad(xp, x, dout, *, scale_a=0.67, scale_b=1.7159):
    # Paddle: dout * scale_a * scale_b * (1 - tanh(scale_a * x)^2)
    a, b = _const(xp, _f32(scale_a), x), _const(xp, _f32(scale_b), x)
    t = xp.tanh(x * a)
    t *= t
    return dout * a * b * (1 - t)


_grad_kernel("acos", "X", _acos_grad)
_grad_kernel("asin", "X", lambda xp, x, dout: dout / xp.sqrt(1 - x * x))
_grad_kernel("atan", "X", lambda xp, x, dout: dout / (1 + x * x))
_grad_kernel("brelu", "X", _brelu_grad, ["t_min", "t_max"])
_grad_kernel("tan", "X", lambda xp, x, dout: dout / xp.square(xp.cos(x)))
_grad_kernel("sinh", "X", lambda xp, x, dout: dout * xp.cosh(x))
_grad_kernel("cosh", "X", lambda xp, x, dout: dout * xp.sinh(x))
_grad_kernel("asinh", "X", lambda xp, x, dout: dout / xp.sqrt(x * x + 1))
_grad_kernel("acosh", "X", lambda xp, x, dout: dout / xp.sqrt(x * x - 1))
_grad_kernel("atanh", "X", lambda xp, x, dout: dout / (1 - x * x))


def _shrink_grad(xp, x, dout, *, threshold=0.5):
    # hard_shrink and softshrink (Paddle): dout where |x| > threshold (or lambda), else 0
    t = _const(xp, _f32(threshold), x)
    return xp.multiply(dout, (x > t) | (x < -t))


_grad_kernel("hard_shrink", "X", _shrink_grad, ["threshold"])


@kernel("softshrink_grad", inputs=["X", "Out@GRAD"], outputs=["X@GRAD"], attrs=["lambda"])
@elementwise
def softshrink_grad(xp, x, dout, *, lambda_=0.5):
    return _finish(xp, _shrink_grad(xp, _float_in(xp, x), dout, threshold=lambda_), x.dtype)
_grad_kernel("stanh", "X", _stanh_grad, ["scale_a", "scale_b"])


def _zero_grad(op_type):
    """floor/ceil/round: PaddlePaddle's gradient op reads only Out@GRAD and writes zeros."""
    @kernel(op_type + "_grad", inputs=["Out@GRAD"], outputs=["X@GRAD"])
    def run(xp, dout):
        return xp.zeros_like(dout)
    run.__name__ = op_type + "_grad"
    return run


for _op in ("floor", "ceil", "round"):
    _zero_grad(_op)

# -- softmax ---------------------------------------------------------------------------------------


@kernel("softmax_grad", inputs=["Out", "Out@GRAD"], outputs=["X@GRAD"], attrs=["axis"])
def softmax_grad(xp, out, dout, *, axis=-1):
    # dx = out * (dout - sum(dout * out, axis))
    if out.ndim == 0 or out.size == 0:
        return xp.zeros_like(out)
    o = _float_in(xp, out)
    if (axis in (-1, out.ndim - 1) and out.size >= _SOFTMAX_GRAD_ROWS_MIN
            and o.flags.c_contiguous and dout.flags.c_contiguous):
        return _finish(xp, _softmax_grad_rows(xp, o, dout), out.dtype)
    g = xp.multiply(dout, o)
    s = xp.sum(g, axis=axis, keepdims=True)
    xp.subtract(dout, s, out=g)
    g *= o
    return _finish(xp, g, out.dtype)


# From this size the row form is faster (one thread: [1, 4, 64, 64] 0.85x of the general
# form); below it its extra calls cost more ([1, 4, 16, 64] 1.15x, [1, 4, 4, 64] 1.4x).
_SOFTMAX_GRAD_ROWS_MIN = 8192


def _softmax_grad_rows(xp, o, dout):
    """softmax_grad over the last axis by cache-sized blocks of rows (kernels/blocked.py
    `row_blocks`): each row's sum(dout * out) in one read of both (kernels/sums.py), then
    two passes over the block while it is in cache."""
    cdt = xp.result_type(o.dtype, dout.dtype)
    width = o.shape[-1]
    o2 = o.reshape(-1, width).astype(cdt, copy=False)
    d2 = dout.reshape(-1, width).astype(cdt, copy=False)
    g = xp.empty(o2.shape, cdt)
    for lo, hi in row_blocks(xp, o2.shape[0], width * g.itemsize):
        gb, ob, db = g[lo:hi], o2[lo:hi], d2[lo:hi]
        xp.subtract(db, last_axis_dots(xp, db, ob)[:, None], out=gb)
        gb *= ob
    return g.reshape(o.shape)


@kernel("log_softmax_grad", inputs=["Out", "Out@GRAD"], outputs=["X@GRAD"], attrs=["axis"])
def log_softmax_grad(xp, out, dout, *, axis=-1):
    # dx = dout - exp(out) * sum(dout, axis)
    if out.ndim == 0 or out.size == 0:
        return xp.zeros_like(out)
    g = xp.exp(_float_in(xp, out))
    g *= xp.sum(dout, axis=axis, keepdims=True, dtype=g.dtype)
    xp.subtract(dout, g, out=g)
    return _finish(xp, g, out.dtype)
