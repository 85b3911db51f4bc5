"""Activation and unary math kernels, with PaddlePaddle's formulas (paddle/phi/kernels/funcs/
activation_functor.h).

Dtypes: every kernel returns X's dtype (as the ops' shape/dtype rule says). float16 is
computed in float32 (Paddle's "MPType"); float32 and float64 in their own precision (numpy
keeps float32 when a float32 array meets a Python float). Integer inputs of float formulas
(exp, sigmoid, ...) are computed in float64 and converted back by truncation, as Paddle's
C++ kernels instantiated for integers do; relu, relu6, abs, square, sign, floor, ceil and
round work on integers directly.
"""
from __future__ import annotations

import math

from kernels.registry import kernel

# -- dtype plumbing --------------------------------------------------------------------------


def _float_in(xp, x):
    """The array a float op computes on: float16 -> float32, integer/bool -> float64."""
    if x.dtype.kind != "f":
        return x.astype(xp.float64)
    if x.dtype.itemsize < 4:
        return x.astype(xp.float32)
    return x


def _finish(xp, y, dtype):
    y = xp.asarray(y)
    return y if y.dtype == dtype else y.astype(dtype)


def _float_unary(op_type, compute, attrs=()):
    """Register `compute(xp, x, **attrs)` as a kernel computed in floating point and returned
    in x's dtype (for an integer x, truncated toward zero as C++'s conversion does)."""
    @kernel(op_type, inputs=["X"], outputs=["Out"], attrs=list(attrs))
    def run(xp, x, **kw):
        return _finish(xp, compute(xp, _float_in(xp, x), **kw), x.dtype)
    run.__name__ = op_type
    return run


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


def erf(xp, x):
    """erf(x) for a float32 or float64 array, in that precision."""
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
    """1 / (1 + exp(-x)) without overflow: exp(-|x|) only."""
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e))


def _softplus(xp, x):
    """log(1 + exp(x)) without overflow."""
    return xp.maximum(x, 0) + xp.log1p(xp.exp(-xp.abs(x)))


# -- relu family (integer dtypes kept) --------------------------------------------------------


@kernel("relu", inputs=["X"], outputs=["Out"])
def relu(xp, x):
    # Paddle: x > 0 ? x : 0, so NaN -> 0 and -0.0 -> +0.0.
    return xp.where(x > 0, x, _zero(xp, x))


@kernel("relu6", inputs=["X"], outputs=["Out"], attrs=["threshold"])
def relu6(xp, x, *, threshold=6.0):
    return xp.asarray(xp.minimum(xp.maximum(x, _zero(xp, x)), _const(xp, threshold, x)))


def _leaky_relu(xp, x, *, alpha):
    # Paddle: alpha < 1 ? max(x, alpha*x) : min(x, alpha*x).
    ax = x * alpha
    return xp.maximum(x, ax) if alpha < 1 else xp.minimum(x, ax)


_float_unary("leaky_relu", _leaky_relu, ["alpha"])


def _thresholded_relu(xp, x, *, threshold, value=0.0):
    return xp.where(x > threshold, x, _const(xp, value, x))


_float_unary("thresholded_relu", _thresholded_relu, ["threshold", "value"])

# -- gelu / sigmoid family ------------------------------------------------------------------------


def _gelu(xp, x, *, approximate):
    if approximate:
        inner = math.sqrt(2 / math.pi) * (x + 0.044715 * (x * x * x))
        return x * 0.5 * (1 + xp.tanh(inner))
    return x * 0.5 * (1 + erf(xp, x * math.sqrt(0.5)))


_float_unary("gelu", _gelu, ["approximate"])
_float_unary("erf", erf)
_float_unary("tanh", lambda xp, x: xp.tanh(x))
_float_unary("sigmoid", _sigmoid)
_float_unary("silu", lambda xp, x: x * _sigmoid(xp, x))
_float_unary("swish", lambda xp, x, *, beta=1.0: x * _sigmoid(xp, x * beta), ["beta"])
_float_unary("logsigmoid", lambda xp, x: xp.minimum(x, 0) - xp.log1p(xp.exp(-xp.abs(x))))
_float_unary("tanh_shrink", lambda xp, x: x - xp.tanh(x))
_float_unary("softsign", lambda xp, x: x / (1 + xp.abs(x)))


def _hard_sigmoid(xp, x, *, slope, offset):
    return xp.minimum(xp.maximum(x * slope + offset, 0), 1)


def _hard_swish(xp, x, *, threshold, scale, offset):
    # Paddle: min(max(x + offset, 0), threshold) * x / scale
    return xp.minimum(xp.maximum(x + offset, 0), threshold) * x / scale


_float_unary("hard_sigmoid", _hard_sigmoid, ["slope", "offset"])
_float_unary("hard_swish", _hard_swish, ["threshold", "scale", "offset"])


def _mish(xp, x, *, threshold):
    # Paddle: sp = x > threshold ? x : log(1 + exp(x)); out = x * tanh(sp)
    sp = xp.where(x > threshold, x, _softplus(xp, x))
    return x * xp.tanh(sp)


def _softplus_op(xp, x, *, beta, threshold):
    # Paddle: beta*x > threshold ? x : log(1 + exp(beta*x)) / beta
    xb = x * beta
    return xp.where(xb > threshold, x, _softplus(xp, xb) / beta)


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
    _float_unary(_op, lambda xp, x, _fn=_fn: getattr(xp, _fn)(x))
_float_unary("rsqrt", lambda xp, x: 1 / xp.sqrt(x))
_float_unary("reciprocal", lambda xp, x: 1 / x)


@kernel("abs", inputs=["X"], outputs=["Out"])
def abs_(xp, x):
    return xp.asarray(xp.abs(x))


@kernel("square", inputs=["X"], outputs=["Out"])
def square(xp, x):
    return xp.asarray(xp.multiply(x, x))


@kernel("sign", inputs=["X"], outputs=["Out"])
def sign(xp, x):
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


@kernel("round", inputs=["X"], outputs=["Out"], attrs=["decimals"])
def round_(xp, x, *, decimals=0):
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
    e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
    e /= xp.sum(e, axis=axis, keepdims=True)
    return e


def _log_softmax(xp, x, *, axis):
    if x.ndim == 0:
        return xp.zeros_like(x)
    if x.size == 0:
        return x.copy()
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    shifted -= xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))
    return shifted


_float_unary("softmax", _softmax, ["axis"])
_float_unary("log_softmax", _log_softmax, ["axis"])
