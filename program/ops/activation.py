"""Unary activation and elementwise math ops: one input X, one output Out of the same
shape and dtype (softmax/log_softmax also check their `axis`)."""
from __future__ import annotations

from program.ops.infer import normalize_axis
from program.ops.registry import BOOL, FLOAT, INT, STRING, define


def infer_same_as_x(ctx):
    """Out has X's shape and dtype (the rule every op in this module shares)."""
    x = ctx.input("X")
    ctx.set_output("Out", x.shape, x.dtype)


def _infer_softmax(ctx):
    x = ctx.input("X")
    ctx.require_float(x)
    if x.ndim > 0:
        normalize_axis(ctx, ctx.attr("axis"), x.ndim)
    ctx.set_output("Out", x.shape, x.dtype)


def _unary(type, doc, attrs=None, extra_attrs=None):
    define(type, inputs=["X"], outputs=["Out"], attrs=attrs, extra_attrs=extra_attrs,
           infer=infer_same_as_x, grad=None, doc=doc)


# -- activations ---------------------------------------------------------------------
_unary("relu", "Out = max(X, 0)")
# PaddlePaddle 3.x lists relu6's threshold and swish's beta as runtime-extra attributes
# (its own layers still write them); kernels read them with these defaults when absent.
_unary("relu6", "Out = min(max(X, 0), threshold)", extra_attrs={"threshold": FLOAT(6.0)})
_unary("leaky_relu", "Out = X if X >= 0 else alpha * X", {"alpha": FLOAT(0.02)})
_unary("gelu", "Out = X * Phi(X) (Gaussian CDF); the tanh approximation when `approximate`",
       {"approximate": BOOL(False)})
_unary("tanh", "Out = tanh(X)")
_unary("sigmoid", "Out = 1 / (1 + exp(-X))")
_unary("hard_swish", "Out = X * min(max(X + offset, 0), threshold) / scale",
       {"threshold": FLOAT(6.0), "scale": FLOAT(6.0), "offset": FLOAT(3.0)})
_unary("hard_sigmoid", "Out = min(max(slope * X + offset, 0), 1)",
       {"slope": FLOAT(0.2), "offset": FLOAT(0.5)})
_unary("swish", "Out = X * sigmoid(beta * X)", extra_attrs={"beta": FLOAT(1.0)})
_unary("silu", "Out = X * sigmoid(X)")
_unary("mish", "Out = X * tanh(softplus(X)); softplus(X) = X where X > threshold",
       {"threshold": FLOAT(20.0)})
_unary("elu", "Out = X if X > 0 else alpha * (exp(X) - 1)", {"alpha": FLOAT(1.0)})
_unary("selu", "Out = scale * (X if X > 0 else alpha * (exp(X) - 1))",
       {"scale": FLOAT(1.0507009873554805), "alpha": FLOAT(1.6732632423543772)})
_unary("celu", "Out = max(0, X) + min(0, alpha * (exp(X / alpha) - 1))", {"alpha": FLOAT(1.0)})
_unary("softplus", "Out = log(1 + exp(beta * X)) / beta; X where beta * X > threshold",
       {"beta": FLOAT(1.0), "threshold": FLOAT(20.0)})
_unary("softsign", "Out = X / (1 + |X|)")
_unary("logsigmoid", "Out = log(sigmoid(X))")
_unary("tanh_shrink", "Out = X - tanh(X)")
_unary("thresholded_relu", "Out = X if X > threshold else value",
       {"threshold": FLOAT(1.0), "value": FLOAT(0.0)})

# -- elementwise math ------------------------------------------------------------------
_unary("exp", "Out = e ** X")
_unary("expm1", "Out = e ** X - 1")
_unary("log", "Out = ln(X)")
_unary("log2", "Out = log2(X)")
_unary("log10", "Out = log10(X)")
_unary("log1p", "Out = ln(1 + X)")
_unary("sqrt", "Out = sqrt(X)")
_unary("rsqrt", "Out = 1 / sqrt(X)")
_unary("abs", "Out = |X|")
_unary("square", "Out = X * X")
_unary("reciprocal", "Out = 1 / X")
# floor/ceil/round/sign have PaddlePaddle gradient ops (all zeros), so they count as
# differentiable here too.
_unary("floor", "Out = floor(X) (gradient zero)")
_unary("ceil", "Out = ceil(X) (gradient zero)")
_unary("round", "Out = X rounded half away from zero to `decimals` decimals (gradient zero)",
       {"decimals": INT(0)})
_unary("sign", "Out = -1, 0 or 1 by the sign of X (gradient zero)")
_unary("sin", "Out = sin(X)")
_unary("cos", "Out = cos(X)")
_unary("erf", "Out = erf(X), the Gauss error function")

define("softmax", inputs=["X"], outputs=["Out"], attrs={"axis": INT(-1)},
       extra_attrs={"data_format": STRING("AnyLayout"), "is_test": BOOL(False)},
       infer=_infer_softmax, grad=None,
       doc="Out = exp(X) / sum(exp(X)) along `axis`")
define("log_softmax", inputs=["X"], outputs=["Out"], attrs={"axis": INT(-1)},
       infer=_infer_softmax, grad=None,
       doc="Out = X - log(sum(exp(X))) along `axis`")
