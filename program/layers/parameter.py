"""Creating a parameter directly, for ops written by hand (paddle.static.create_parameter)."""
from __future__ import annotations

import numbers

import numpy as np

from keel.program import dtypes, dygraph
from keel.program import initializer as init
from keel.program.layers.helper import LayerHelper
from keel.program.param_attr import ParamAttr


def create_parameter(shape, dtype, name=None, attr=None, is_bias=False, default_initializer=None):
    """A trainable Parameter of `shape` and `dtype` in the main program's global block, its
    initializer op in the startup program, as `paddle.static.create_parameter`:

        w = pg.create_parameter([64, 10], "float32")              # create_parameter_0.w_0, Xavier
        b = pg.create_parameter([10], "float32", is_bias=True)    # create_parameter_1.b_0, zeros
        y = pg.matmul(x, w) + b

    In eager mode it returns a parameter Tensor holding its initializer's value (drawn now,
    under keel.seed), which optimizers take as a Layer's parameters.

    `name` names the parameter (when `attr` is None). `attr`, a ParamAttr, gives its name,
    initializer, trainable flag, regularizer and learning-rate scale; its initializer wins
    over `default_initializer`. Without either, floating parameters get Xavier (uniform)
    and biases (`is_bias=True`) Constant(0.0), as PaddlePaddle's LayerHelper does; other
    dtypes need an initializer. Unnamed parameters are `create_parameter_N.w_0` (`.b_0`
    for biases), unique in the process (see program.unique_name).

    Examples:
        >>> import keel as paddle
        >>> main, startup = paddle.static.Program(), paddle.static.Program()
        >>> with paddle.static.program_guard(main, startup):
        ...     w = paddle.create_parameter(shape=[3, 2], dtype="float32")    # Xavier-initialized
        ...     b = paddle.create_parameter([2], "float32", is_bias=True)     # zeros
        ...     y = paddle.matmul(paddle.static.data("x", [-1, 3]), w) + b
        >>> w.name, w.trainable
        ('create_parameter_0.w_0', True)
        >>> exe = paddle.static.Executor()
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": paddle.ones([4, 3]).numpy()}, fetch_list=[y])[0].shape
        (4, 2)
    """
    if not isinstance(shape, (list, tuple, np.ndarray)):
        raise TypeError(f"create_parameter: shape must be a list or tuple of ints, got {shape!r}")
    for d in shape:
        if not isinstance(d, (numbers.Integral, np.integer)) or isinstance(d, (bool, np.bool_)):
            raise TypeError(f"create_parameter: shape must be a list or tuple of ints, got {list(shape)!r}")
    code = dtypes.to_code(dtype)
    if attr is not None and not isinstance(attr, ParamAttr):
        raise TypeError(f"create_parameter: attr must be a ParamAttr or None, got {attr!r}")
    if default_initializer is not None and not isinstance(default_initializer, init.Initializer):
        raise TypeError(f"create_parameter: default_initializer must be an initializer from "
                        f"program.initializer, got {default_initializer!r}")
    helper = LayerHelper("create_parameter", name)
    if attr is None:
        attr = ParamAttr(name=name)
    if default_initializer is None and attr.initializer is None:
        if not dtypes.is_floating(code):
            raise TypeError(f"create_parameter: no default initializer for a parameter of dtype "
                            f"{dtypes.name(code)}; pass default_initializer (e.g. pg.initializer.Constant(0))")
        default_initializer = init.Constant(0.0) if is_bias else init.XavierUniform()
    suffix = "b" if is_bias else "w"
    if dygraph.in_dynamic_mode():
        return _eager_parameter(helper.parameter_name(attr, suffix), [int(d) for d in shape], code, attr,
                                default_initializer)
    return helper.create_parameter(attr, [int(d) for d in shape], code, default_initializer, suffix=suffix)


def _eager_parameter(name, shape, code, attr, default_initializer):
    """In eager mode: a parameter Tensor (a Layer's kind, which optimizers take) holding its
    initializer's value, made now in the eager random stream (keel.seed), as PaddlePaddle's
    dygraph create_parameter makes it."""
    from keel.program.nn.layer import LayerParameter
    param = LayerParameter(name, shape, code, attr, default_initializer)
    param._initialize()
    return param
