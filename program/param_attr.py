"""ParamAttr: how a layer should create one of its parameters."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ParamAttr:
    """`name`: fixed parameter name (two layers given the same name share the parameter).
    `initializer`: an initializer from program.initializer. `learning_rate`: a multiplier
    on the optimizer's rate. `regularizer`: a per-parameter regularizer (overrides the
    optimizer's). `trainable=False` freezes the parameter. `need_clip=False` exempts it
    from gradient clipping.

    Examples:
        >>> import keel as paddle
        >>> weight_attr = paddle.ParamAttr(name="weight", learning_rate=0.5,
        ...                                regularizer=paddle.regularizer.L2Decay(1.0),
        ...                                initializer=paddle.nn.initializer.Constant(0.5))
        >>> linear = paddle.nn.Linear(3, 4, weight_attr=weight_attr, bias_attr=paddle.ParamAttr(trainable=False))
        >>> linear.weight.name, float(linear.weight.numpy()[0, 0])
        ('weight', 0.5)
        >>> linear.bias.stop_gradient                 # not trained
        True
        >>> no_bias = paddle.nn.Linear(3, 4, bias_attr=False)
        >>> no_bias.bias is None
        True
    """
    name: str | None = None
    initializer: Any = None
    learning_rate: float = 1.0
    regularizer: Any = None
    trainable: bool = True
    need_clip: bool = True
    # the Layer parameter this attr describes (set by Layer.create_parameter): what layer
    # functions given the attr use in eager mode, and the value a program starts from
    owner: Any = field(default=None, repr=False, compare=False)

    @staticmethod
    def of(arg) -> "ParamAttr | None":
        """Normalize a layer's `param_attr`/`bias_attr` argument: None -> defaults,
        False -> no parameter at all, a string -> the name, an initializer -> that."""
        if arg is False:
            return None
        if arg is None or arg is True:
            return ParamAttr()
        if isinstance(arg, ParamAttr):
            return arg
        if isinstance(arg, str):
            return ParamAttr(name=arg)
        from keel.program.initializer import Initializer
        if isinstance(arg, Initializer):
            return ParamAttr(initializer=arg)
        raise TypeError(f"expected a ParamAttr, a name, an initializer, None or False; got {arg!r}")
