"""Unary activation and elementwise math ops: one input X, one output Out of the same
shape and dtype (softmax/log_softmax also check their `axis`)."""
from __future__ import annotations

from keel.program.ops.infer import is_complex, normalize_axis, real_of
from keel.program.ops.registry import BOOL, FLOAT, INT, STRING, GradOp, define, grad_maker, grad_op


def infer_same_as_x(ctx):
    """Out has X's shape and dtype (the rule every op in this module shares)."""
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


# The ops computed in complex for complex64/128 X: those PaddlePaddle 3.3.1's CPU kernels
# register complex for (tests/fixtures/paddle_cpu_dtypes.json) whose complex formula Keel
# implements. The rest refuse a complex X when the program is built (a real kernel would
# drop the imaginary part).
COMPLEX_UNARY = frozenset({
    "sigmoid", "silu", "tanh", "softsign", "stanh", "exp", "expm1", "log", "log2", "log10",
    "log1p", "sqrt", "abs", "square", "reciprocal", "sin", "cos", "tan", "acos", "asin", "atan",
    "sinh", "cosh", "asinh", "acosh", "atanh", "hard_swish", "softplus", "logsigmoid", "round",
    "sign"})


def _infer_real_unary(ctx):
    x = ctx.input("X")
    ctx.refuse_complex(x, "its PaddlePaddle CPU kernel is real-only or Keel computes it in real numbers")
    ctx.set_output("Out", x.shape, x.dtype)


def _infer_abs(ctx):
    """abs of a complex X is its real modulus (float32 for complex64)."""
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, real_of(x.dtype) if is_complex(x.dtype) else x.dtype)


def _infer_softmax(ctx):
    x = ctx.input("X")
    ctx.require_float(x)
    if x.ndim > 0:
        normalize_axis(ctx, ctx.attr("axis"), x.ndim)
    ctx.set_output("Out", x.shape, x.dtype)


# Gradient rules, as PaddlePaddle's GradOpMakers write them (checked against PaddlePaddle
# 3.3.1): some gradient ops read the forward input X, some only the output Out (relu,
# tanh, sigmoid, exp, sqrt, ...), a few both (silu, elu); floor/ceil/round read only
# Out@GRAD (their gradient is zero), and sign's gradient is a `scale` op by 0.
_FROM_X = grad_op(["X", "Out@GRAD"], ["X@GRAD"])
_FROM_OUT = grad_op(["Out", "Out@GRAD"], ["X@GRAD"], like={"X@GRAD": "Out"})
_FROM_X_OUT = grad_op(["X", "Out", "Out@GRAD"], ["X@GRAD"])
_ZERO = grad_op(["Out@GRAD"], ["X@GRAD"], like={"X@GRAD": "Out@GRAD"})


def _sign_grad(op, g):
    """sign's gradient: PaddlePaddle writes `scale(Out@GRAD, scale=0)`."""
    return [GradOp("scale", inputs={"X": g.out("Out")}, outputs={"Out": [dx]},
                   attrs={"scale": 0.0, "bias": 0.0, "bias_after_scale": True})
            for dx in g.inp("X") if dx]


def _unary(type, doc, attrs=None, extra_attrs=None, *, grad):
    infer = _infer_abs if type == "abs" else infer_same_as_x if type in COMPLEX_UNARY else _infer_real_unary
    define(type, inputs=["X"], outputs=["Out"], attrs=attrs, extra_attrs=extra_attrs,
           infer=infer, grad=grad, doc=doc)


# -- activations ---------------------------------------------------------------------
_unary("relu", "Out = max(X, 0)", grad=_FROM_OUT)
# PaddlePaddle 3.x lists relu6's threshold and swish's beta as runtime-extra attributes
# (its own layers still write them); kernels read them with these defaults when absent.
_unary("relu6", "Out = min(max(X, 0), threshold)", extra_attrs={"threshold": FLOAT(6.0)},
       grad=_FROM_OUT)
_unary("leaky_relu", "Out = X if X >= 0 else alpha * X", {"alpha": FLOAT(0.02)}, grad=_FROM_X)
_unary("gelu", "Out = X * Phi(X) (Gaussian CDF); the tanh approximation when `approximate`",
       {"approximate": BOOL(False)}, grad=_FROM_X)
_unary("tanh", "Out = tanh(X)", grad=_FROM_OUT)
_unary("sigmoid", "Out = 1 / (1 + exp(-X))", grad=_FROM_OUT)
_unary("hard_swish", "Out = X * min(max(X + offset, 0), threshold) / scale",
       {"threshold": FLOAT(6.0), "scale": FLOAT(6.0), "offset": FLOAT(3.0)}, grad=_FROM_X)
_unary("hard_sigmoid", "Out = min(max(slope * X + offset, 0), 1)",
       {"slope": FLOAT(0.2), "offset": FLOAT(0.5)}, grad=_FROM_OUT)
_unary("swish", "Out = X * sigmoid(beta * X)", extra_attrs={"beta": FLOAT(1.0)}, grad=_FROM_X)
_unary("silu", "Out = X * sigmoid(X)", grad=_FROM_X_OUT)
_unary("mish", "Out = X * tanh(softplus(X)); softplus(X) = X where X > threshold",
       {"threshold": FLOAT(20.0)}, grad=_FROM_X)
_unary("elu", "Out = X if X > 0 else alpha * (exp(X) - 1)", {"alpha": FLOAT(1.0)}, grad=_FROM_X_OUT)
_unary("selu", "Out = scale * (X if X > 0 else alpha * (exp(X) - 1))",
       {"scale": FLOAT(1.0507009873554805), "alpha": FLOAT(1.6732632423543772)}, grad=_FROM_OUT)
_unary("celu", "Out = max(0, X) + min(0, alpha * (exp(X / alpha) - 1))", {"alpha": FLOAT(1.0)},
       grad=_FROM_X)
_unary("softplus", "Out = log(1 + exp(beta * X)) / beta; X where beta * X > threshold",
       {"beta": FLOAT(1.0), "threshold": FLOAT(20.0)}, grad=_FROM_X)
_unary("softsign", "Out = X / (1 + |X|)", grad=_FROM_X)
_unary("logsigmoid", "Out = log(sigmoid(X))", grad=_FROM_X)
_unary("tanh_shrink", "Out = X - tanh(X)", grad=_FROM_X)
_unary("thresholded_relu", "Out = X if X > threshold else value",
       {"threshold": FLOAT(1.0), "value": FLOAT(0.0)}, grad=_FROM_X)

# -- elementwise math ------------------------------------------------------------------
_unary("exp", "Out = e ** X", grad=_FROM_OUT)
_unary("expm1", "Out = e ** X - 1", grad=_FROM_OUT)
_unary("log", "Out = ln(X)", grad=_FROM_X)
_unary("log2", "Out = log2(X)", grad=_FROM_X)
_unary("log10", "Out = log10(X)", grad=_FROM_X)
_unary("log1p", "Out = ln(1 + X)", grad=_FROM_X)
_unary("sqrt", "Out = sqrt(X)", grad=_FROM_OUT)
_unary("rsqrt", "Out = 1 / sqrt(X)", grad=_FROM_OUT)
_unary("abs", "Out = |X|", grad=_FROM_X)
_unary("square", "Out = X * X", grad=_FROM_X)
_unary("reciprocal", "Out = 1 / X", grad=_FROM_OUT)
# floor/ceil/round/sign have PaddlePaddle gradient ops (all zeros), so they count as
# differentiable here too.
_unary("floor", "Out = floor(X) (gradient zero)", grad=_ZERO)
_unary("ceil", "Out = ceil(X) (gradient zero)", grad=_ZERO)
_unary("round", "Out = X rounded half away from zero to `decimals` decimals (gradient zero)",
       {"decimals": INT(0)}, grad=_ZERO)
_unary("sign", "Out = -1, 0 or 1 by the sign of X (gradient zero)",
       grad=grad_maker(_sign_grad, inputs=["Out@GRAD"], outputs=["X@GRAD"]))
_unary("sin", "Out = sin(X)", grad=_FROM_X)
_unary("cos", "Out = cos(X)", grad=_FROM_X)
_unary("erf", "Out = erf(X), the Gauss error function", grad=_FROM_X)
_unary("acos", "Out = arccos(X)", grad=_FROM_X)
_unary("asin", "Out = arcsin(X)", grad=_FROM_X)
_unary("atan", "Out = arctan(X)", grad=_FROM_X)
_unary("tan", "Out = tan(X)", grad=_FROM_X)
_unary("sinh", "Out = sinh(X)", grad=_FROM_X)
_unary("cosh", "Out = cosh(X)", grad=_FROM_X)
_unary("asinh", "Out = arcsinh(X)", grad=_FROM_X)
_unary("acosh", "Out = arccosh(X)", grad=_FROM_X)
_unary("atanh", "Out = arctanh(X)", grad=_FROM_X)
_unary("hard_shrink", "Out = X where |X| > threshold, else 0", {"threshold": FLOAT(0.5)}, grad=_FROM_X)
_unary("softshrink", "Out = X - lambda where X > lambda, X + lambda where X < -lambda, else 0",
       {"lambda": FLOAT(0.5)}, grad=_FROM_X)
_unary("brelu", "Out = min(max(X, t_min), t_max)", {"t_min": FLOAT(0.0), "t_max": FLOAT(24.0)},
       grad=_FROM_X)
_unary("stanh", "Out = scale_b * tanh(scale_a * X)",
       {"scale_a": FLOAT(0.67), "scale_b": FLOAT(1.7159)}, grad=_FROM_X)

define("softmax", inputs=["X"], outputs=["Out"], attrs={"axis": INT(-1)},
       extra_attrs={"data_format": STRING("AnyLayout"), "is_test": BOOL(False)},
       infer=_infer_softmax, grad=_FROM_OUT,
       doc="Out = exp(X) / sum(exp(X)) along `axis`")
define("log_softmax", inputs=["X"], outputs=["Out"], attrs={"axis": INT(-1)},
       infer=_infer_softmax, grad=_FROM_OUT,
       doc="Out = X - log(sum(exp(X))) along `axis`")
