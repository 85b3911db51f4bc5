"""Fused kernels: PaddlePaddle's `fused_elemwise_activation` (program/ops/fused.py).

The functors are PaddlePaddle's own (paddle/phi/kernels/funcs/functors.h, used by
fused_elemwise_activation_functor.h), which are not all the formulas of the separate
activation ops (kernels/activation.py):

    relu     x * (x > 0 ? 1 : 0)   the same for finite x, except a negative x gives -0.0
                                   (relu gives +0.0); NaN and -inf give NaN (relu gives 0)
    scale    x * scale             in x's precision; no bias
    tanh     2 / (1 + exp(-t)) - 1 with t = 2x clipped to [-40, 13], so |out| stays
                                   below 0.9999955 for x > 6.5 (np.tanh reaches 1.0)
    sigmoid  1 / (1 + exp(-t))     with t = x clipped to [-40, 13]
    gelu     x * 0.5 * (1 + tanh(0.79788456 x (1 + 0.044715 x^2)))   (tanh approximation)

and the binary functors are X + Y and X * Y with Paddle's `axis` broadcasting (`align`).
Each step is evaluated in the order and precision of the C++ functor, so float32 and
float64 results equal PaddlePaddle 3.3.1's CPU kernel up to the last bit of exp/tanh.
float16 (which PaddlePaddle runs on GPUs only) does the binary step in float16 and the
activation in float32, rounded back, as kernels/activation.py does.
"""
from __future__ import annotations

from keel.kernels.activation import _finish, _float_in
from keel.kernels.elementwise import align, sum_to
from keel.kernels.registry import kernel

# PaddlePaddle's functor constants (the clip bounds of TanhFunctor / SigmoidFunctor, the
# coefficients of GeluFunctor), cast to the computing dtype as static_cast<T> does.
_CLIP_LO, _CLIP_HI = -40, 13
_GELU_C1, _GELU_C2 = 0.79788456, 0.044715


def _relu(xp, x, scale, out=None):
    return xp.multiply(x, x > 0, out=out)


def _scale(xp, x, scale, out=None):
    return xp.multiply(x, scale, out=out)


def _tanh(xp, x, scale):
    t = x * 2
    xp.clip(t, _CLIP_LO, _CLIP_HI, out=t)
    xp.negative(t, out=t)
    xp.exp(t, out=t)
    t += 1
    t = xp.divide(2, t, out=t)
    t -= 1
    return t


def _sigmoid(xp, x, scale):
    t = xp.clip(x, _CLIP_LO, _CLIP_HI)
    xp.negative(t, out=t)
    xp.exp(t, out=t)
    t += 1
    return xp.divide(1, t, out=t)


def _gelu(xp, x, scale):
    # mx * 0.5 * (1 + tanh(c1 * mx * (1 + c2 * mx * mx))), left to right as in C++
    inner = x * _GELU_C2
    inner *= x
    inner += 1
    inner *= x * _GELU_C1
    xp.tanh(inner, out=inner)
    inner += 1
    half = x * 0.5
    half *= inner
    return half


UNARY = {"relu": _relu, "scale": _scale, "tanh": _tanh, "sigmoid": _sigmoid, "gelu": _gelu}
BINARY = {"elementwise_add": "add", "elementwise_mul": "multiply"}
# The pairs PaddlePaddle implements, outer functor first (as program/ops/fused.py).
SUPPORTED = frozenset({
    ("relu", "elementwise_add"), ("scale", "elementwise_add"), ("tanh", "elementwise_add"),
    ("gelu", "elementwise_add"), ("elementwise_add", "relu"), ("elementwise_add", "scale"),
    ("elementwise_mul", "scale"), ("elementwise_mul", "tanh"), ("elementwise_mul", "sigmoid"),
})


def _unary(xp, name, x, scale, in_place=False):
    """One activation functor on x, computed in float (float16 in float32) and returned in
    x's dtype. `in_place`: x is a temporary the result may overwrite (relu and scale do)."""
    if x.ndim == 0:
        return _unary(xp, name, x.reshape(1), scale).reshape(())
    xf = _float_in(xp, x)
    if in_place and xf is x and name in ("relu", "scale"):
        return UNARY[name](xp, xf, scale, out=xf)
    return _finish(xp, UNARY[name](xp, xf, scale), x.dtype)


def _specialize(xp, attrs, present, donated):
    """relu(X + Y) and scale * (X + Y) on float32/float64, as the passes fuse them: the sum
    written into X's buffer when X is donated, owns its memory and has the sum's shape, then
    the functor in place. Other dtypes, pairs and shapes take the general kernel."""
    functors, axis = tuple(attrs["functor_list"]), attrs["axis"]
    dtype = present[0]
    if (functors not in (("relu", "elementwise_add"), ("scale", "elementwise_add")) or dtype is None
            or dtype.kind != "f" or dtype.itemsize < 4 or present[1] != dtype):
        return None
    relu, scale = functors[0] == "relu", dtype.type(float(xp.float32(attrs["scale"])))
    add, multiply, greater, zero = xp.add, xp.multiply, xp.greater, dtype.type(0)

    def run(x, y):
        if x.dtype != dtype or y.dtype != dtype or x.ndim == 0:
            return fused_elemwise_activation(xp, x, y, **attrs, need=_OUT_ONLY)[0]
        xa, ya = align(x, y, axis)
        into_x = (donated and xa is x and x.base is None and ya.ndim <= x.ndim
                  and all(a >= b for a, b in zip(x.shape[::-1], ya.shape[::-1])))  # the sum has X's shape
        t = add(xa, ya, out=x if into_x else None)
        if relu:
            return multiply(t, greater(t, zero), out=t)
        return multiply(t, scale, out=t)
    return run


_OUT_ONLY = frozenset({"Out"})


@kernel("fused_elemwise_activation", inputs=["X", "Y"], outputs=["Out", "IntermediateOut"],
        attrs=["functor_list", "axis", "scale", "save_intermediate_out"], specialize=_specialize)
def fused_elemwise_activation(xp, x, y, *, functor_list, axis=-1, scale=0.0,
                              save_intermediate_out=False,
                              need=frozenset({"Out", "IntermediateOut"})):
    """[unary, binary]: Out = unary(binary(X, Y)), IntermediateOut = binary(X, Y);
    [binary, unary]: Out = binary(X, unary(Y)), IntermediateOut = unary(Y). IntermediateOut
    is returned whenever the op binds it (PaddlePaddle fills it only with
    save_intermediate_out; the values are the same)."""
    functors = tuple(functor_list)
    if functors not in SUPPORTED:
        raise ValueError(f"fused_elemwise_activation: functor_list {list(functors)} is not one of "
                         f"{sorted(list(p) for p in SUPPORTED)}")
    # The FLOAT attribute as PaddlePaddle reads it: float32, widened for float64 data.
    scale = float(xp.float32(scale))
    if functors[1] in BINARY:  # unary(binary(X, Y))
        binary = getattr(xp, BINARY[functors[1]])
        inter = xp.asarray(binary(*align(x, y, axis)))
        out = _unary(xp, functors[0], inter, scale, in_place="IntermediateOut" not in need)
    else:                      # binary(X, unary(Y))
        binary = getattr(xp, BINARY[functors[0]])
        inter = _unary(xp, functors[1], y, scale)
        out = xp.asarray(binary(*align(x, inter, axis)))
    return out, (inter if "IntermediateOut" in need else None)


# -- the gradient ----------------------------------------------------------------------------
# PaddlePaddle's fused_elemwise_activation_grad (its functors' derivatives, written with the
# functor's own output u = f(x) where PaddlePaddle's grad functors read Out):
#     relu: x > 0;  scale: scale;  tanh: 1 - u^2;  sigmoid: u (1 - u);
#     gelu: 0.5 (1 + t) + 0.5 x (1 - t^2) c1 (1 + 3 c2 x^2),  t = tanh(c1 x (1 + c2 x^2)).

def _unary_derivative(xp, name, x, u, scale):
    """d name(x) / dx, u = name(x), in x's (float) dtype."""
    if name == "relu":
        return (x > 0).astype(x.dtype)
    if name == "scale":
        return xp.full_like(x, scale)
    if name == "tanh":
        return 1 - u * u
    if name == "sigmoid":
        return u * (1 - u)
    t = xp.tanh(x * _GELU_C1 * (1 + _GELU_C2 * x * x))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * (_GELU_C1 * (1 + 3 * _GELU_C2 * x * x))


def _binary_partials(xp, name, a, b, dout):
    """dOut/da * dout and dOut/db * dout of a + b or a * b (broadcast shapes)."""
    if name == "elementwise_add":
        return dout, dout
    return dout * b, dout * a


@kernel("fused_elemwise_activation_grad", inputs=["X", "Y", "Out", "IntermediateOut", "Out@GRAD"],
        outputs=["X@GRAD", "Y@GRAD"], attrs=["functor_list", "axis", "scale", "save_intermediate_out"])
def fused_elemwise_activation_grad(xp, x, y, out, intermediate, dout, *, functor_list, axis=-1, scale=0.0,
                                   save_intermediate_out=False):
    """[unary, binary] (Out = f(X op Y)): dI = dOut * f'(I), I = X op Y, then op's partials
    summed back to X's and Y's shapes. [binary, unary] (Out = X op f(Y)): op's partials with
    f(Y), Y's times f'(Y). The activation is recomputed from X and Y (the IntermediateOut a
    program carries is the same value)."""
    functors = tuple(functor_list)
    scale = float(xp.float32(scale))
    xf, yf, g = _float_in(xp, x), _float_in(xp, y), _float_in(xp, dout)
    if functors[1] in BINARY:
        xa, ya = align(xf, yf, axis)
        inter = getattr(xp, BINARY[functors[1]])(xa, ya)
        u = UNARY[functors[0]](xp, inter.copy(), scale)
        d_inter = g * _unary_derivative(xp, functors[0], inter, u, scale)
        dxa, dya = _binary_partials(xp, functors[1], xa, ya, d_inter)
        dx, dy = sum_to(xp, dxa, xa.shape), sum_to(xp, dya, ya.shape)
    else:
        u = UNARY[functors[1]](xp, yf.copy(), scale)
        xa, ua = align(xf, u, axis)
        dxa, dua = _binary_partials(xp, functors[0], xa, ua, g)
        dx = sum_to(xp, dxa, xa.shape)
        dy = sum_to(xp, dua, ua.shape).reshape(y.shape) * _unary_derivative(xp, functors[1], yf, u, scale)
    return (_finish(xp, xp.asarray(dx).reshape(x.shape), x.dtype),
            _finish(xp, xp.asarray(dy).reshape(y.shape), y.dtype))
