"""`Layer`: a model written once as a class, used for training and for inference.

    class MLP(pg.nn.Layer):
        def __init__(self):
            super().__init__()
            self.fc1 = pg.nn.Linear(64, 128)
            self.fc2 = pg.nn.Linear(128, 10)

        def forward(self, x):
            return self.fc2(pg.relu(self.fc1(x)))

    model = MLP()
    with pg.program_guard(main, startup):
        logits = model(pg.data("x", [-1, 64]))   # appends the ops to `main`

    model(keel.to_tensor(xb))                    # runs the ops at once (eager mode)

A layer owns its parameters as `LayerParameter`s: Tensors (their values are made by their
initializers the first time eager code reads them) that also say how to make the
parameter in any program. Called on Tensors, a layer runs eagerly on those values. Called
inside `program_guard`, it appends its ops: the first time a program uses a parameter, it
becomes a Parameter variable of that program, with its initializer in that program's
startup program, and the global scope is given the parameter's eager value if it has one
(so no startup run is needed). The values of a program's run live in the executor's scope
(`state_dict(scope)`/`set_state_dict(..., scope)` read and write them there). Names follow
PaddlePaddle's: a `Linear` is `linear_0`, its parameters `linear_0.w_0` and `linear_0.b_0`.
"""
from __future__ import annotations

import contextlib
import re
from collections import OrderedDict

import numpy as np

from keel.program import dtypes, dygraph, initializer as init, unique_name
from keel.program.layers.helper import LayerHelper
from keel.program.param_attr import ParamAttr
from keel.program.tensor import Tensor

__all__ = ["Layer", "LayerParameter"]


def _snake(name: str) -> str:
    """PaddlePaddle's layer-name rule: Linear -> linear, BatchNorm2D -> batch_norm2d."""
    s = re.sub("(.)([A-Z][a-z]+)", r"\1_\2", name)
    return re.sub("([a-z])([A-Z])", r"\1_\2", s).lower()


class LayerParameter(Tensor):
    """A parameter a Layer owns (PaddlePaddle's dygraph Parameter): a Tensor whose value its
    initializer makes the first time it is read, and what it is called and how it is made
    in any program. `variable()` is the Parameter of the current main program (made there,
    with its initializer in the startup program, on first use)."""

    is_parameter = True
    _in_program = False  # a static program has made a Parameter of it (LayerHelper.create_parameter)

    def __init__(self, name: str, shape, dtype, attr: ParamAttr, default_initializer):
        super().__init__(None, dtype, name=name, stop_gradient=not attr.trainable, persistable=True)
        self._declared_shape = [int(d) for d in shape]
        self.attr = ParamAttr(name=name, initializer=attr.initializer or default_initializer,
                              learning_rate=attr.learning_rate, regularizer=attr.regularizer,
                              trainable=attr.trainable, need_clip=attr.need_clip)
        # layer functions given this attr (Linear's forward calls F.linear with it) get this
        # parameter itself in eager mode (LayerHelper.create_parameter)
        self.attr.owner = self
        dygraph.parameters_by_name[name] = self

    @property
    def trainable(self) -> bool:
        return self.attr.trainable

    @trainable.setter
    def trainable(self, value: bool) -> None:
        self.attr.trainable = bool(value)
        self._stop_gradient = not value

    # what optimizers read of a parameter (program.Parameter's attributes)
    optimize_attr = property(lambda self: {"learning_rate": self.attr.learning_rate})
    regularizer = property(lambda self: self.attr.regularizer)
    need_clip = property(lambda self: self.attr.need_clip)

    @property
    def shape(self) -> list[int]:
        return list(self._declared_shape)

    @property
    def value(self):
        if self._value is None:
            self._initialize()
        return self._value

    def current_value(self, global_scope):
        """The value that is this parameter's now: its own (eager training, set_state_dict, a
        Model's fit); else, for a parameter only static programs have used, the global scope's
        (where the startup program and training put it); else its initializer's."""
        if self._value is None and self._in_program and global_scope is not None \
                and global_scope.find_var(self.name) is not None:
            return global_scope.get(self.name)
        return self.value

    def _initialize(self) -> None:
        """Run the initializer eagerly (in this process's eager stream, under keel.seed)."""
        engine = dygraph.engine()
        with engine.set_grad_enabled(False):
            self.attr.initializer(self, engine.block)
        if self._value is None or list(self._value.shape) != self._declared_shape:
            raise RuntimeError(f"parameter {self.name}: its initializer made no value of shape {self._declared_shape}")

    def variable(self):
        """The Parameter of the current main program (or, in eager mode, this tensor)."""
        return LayerHelper("parameter", self.name).create_parameter(self.attr, self._declared_shape, self._dtype)

    def in_mode(self):
        """What a layer's code reads for this parameter: itself when eager, else its Parameter
        of the current program."""
        return self if dygraph.in_dynamic_mode() else self.variable()

    def __repr__(self):
        return f"<LayerParameter {self.name}: {dtypes.name(self._dtype)}{self._declared_shape}>"


class Layer:
    """Base class of models and layers (paddle.nn.Layer): assign sublayers and parameters
    (`create_parameter`) as attributes in `__init__`, build the ops in `forward`.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel import nn
        >>> class MLP(nn.Layer):
        ...     def __init__(self):
        ...         super().__init__()
        ...         self.hidden, self.out = nn.Linear(4, 8), nn.Linear(8, 2)
        ...     def forward(self, x):
        ...         return self.out(paddle.relu(self.hidden(x)))
        >>> net = MLP()
        >>> main, startup = paddle.Program(), paddle.Program()
        >>> with paddle.program_guard(main, startup):
        ...     y = net(paddle.static.data("x", [-1, 4]))
        >>> exe = paddle.Executor()
        >>> _ = exe.run(startup)
        >>> exe.run(main, feed={"x": np.ones((3, 4), "float32")}, fetch_list=[y])[0].shape
        (3, 2)
        >>> len(net.parameters())
        4
    """

    def __init__(self, name_scope: str | None = None, dtype="float32"):
        object.__setattr__(self, "_parameters", OrderedDict())
        object.__setattr__(self, "_sub_layers", OrderedDict())
        self.training = True
        self._dtype = dtype
        self._full_name = unique_name.generate(name_scope or _snake(type(self).__name__))
        self._forward_pre_hooks: OrderedDict = OrderedDict()
        self._forward_post_hooks: OrderedDict = OrderedDict()
        self._hook_id = 0

    # -- building -------------------------------------------------------------------------
    def forward(self, *inputs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} does not define forward()")

    def __call__(self, *inputs, **kwargs):
        for hook in list(self._forward_pre_hooks.values()):
            changed = hook(self, inputs)
            if changed is not None:
                inputs = changed if isinstance(changed, tuple) else (changed,)
        outputs = self.forward(*inputs, **kwargs)
        for hook in list(self._forward_post_hooks.values()):
            changed = hook(self, inputs, outputs)
            if changed is not None:
                outputs = changed
        return outputs

    def register_forward_pre_hook(self, hook):
        """`hook(layer, inputs)` runs before forward; a non-None result replaces the inputs.
        Returns a handle whose `remove()` takes the hook away."""
        return self._add_hook(self._forward_pre_hooks, hook)

    def register_forward_post_hook(self, hook):
        """`hook(layer, inputs, outputs)` runs after forward; a non-None result replaces the outputs."""
        return self._add_hook(self._forward_post_hooks, hook)

    def _add_hook(self, hooks, hook):
        self._hook_id += 1
        key = self._hook_id
        hooks[key] = hook
        return _HookHandle(hooks, key)

    def create_parameter(self, shape, attr=None, dtype=None, is_bias=False, default_initializer=None):
        """A parameter `<layer>.w_N` (or `.b_N` with is_bias) of `shape`: XavierUniform by
        default, Constant(0) for a bias, as PaddlePaddle's. `attr=False`: no parameter (None)."""
        attr = ParamAttr.of(attr)
        if attr is None:
            return None
        name = attr.name or unique_name.generate(f"{self._full_name}.{'b' if is_bias else 'w'}")
        default = default_initializer or (init.Constant(0.0) if is_bias else init.XavierUniform())
        return LayerParameter(name, shape, dtype or self._dtype, attr, default)

    def full_name(self) -> str:
        return self._full_name

    # -- attributes: parameters and sublayers ----------------------------------------------
    def __setattr__(self, name, value):
        params, subs = self.__dict__.get("_parameters"), self.__dict__.get("_sub_layers")
        for table in (params, subs):
            if table is not None:
                table.pop(name, None)
        if isinstance(value, LayerParameter):
            params[name] = value
        elif isinstance(value, Layer):
            if subs is None:
                raise RuntimeError(f"{type(self).__name__}: call super().__init__() before assigning sublayers")
            subs[name] = value
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):  # only for names normal lookup does not find
        params = self.__dict__.get("_parameters", {})
        if name in params:
            return params[name].in_mode()
        subs = self.__dict__.get("_sub_layers", {})
        if name in subs:
            return subs[name]
        raise AttributeError(f"{type(self).__name__} has no attribute {name!r}")

    def __delattr__(self, name):
        for table in (self._parameters, self._sub_layers):
            if name in table:
                del table[name]
                return
        object.__delattr__(self, name)

    def add_sublayer(self, name: str, sublayer: "Layer") -> "Layer":
        setattr(self, str(name), sublayer)
        return sublayer

    def add_parameter(self, name: str, parameter: LayerParameter) -> LayerParameter:
        setattr(self, str(name), parameter)
        return parameter

    # -- walking the tree -------------------------------------------------------------------
    def named_sublayers(self, prefix: str = "", include_self: bool = False, layers_set=None):
        layers_set = set() if layers_set is None else layers_set
        if include_self and id(self) not in layers_set:
            layers_set.add(id(self))
            yield prefix, self
        for key, layer in self._sub_layers.items():
            if id(layer) in layers_set:
                continue
            path = f"{prefix}.{key}" if prefix else key
            layers_set.add(id(layer))
            yield path, layer
            yield from layer.named_sublayers(path, False, layers_set)

    def sublayers(self, include_self: bool = False) -> list["Layer"]:
        return [layer for _, layer in self.named_sublayers(include_self=include_self)]

    def named_children(self):
        seen = set()
        for key, layer in self._sub_layers.items():
            if id(layer) not in seen:
                seen.add(id(layer))
                yield key, layer

    def children(self):
        return [layer for _, layer in self.named_children()]

    def named_parameters(self, prefix: str = "", include_sublayers: bool = True):
        """(structured name, LayerParameter): `fc1.weight`, ...; a parameter shared by two
        layers is listed once."""
        seen = set()
        layers = self.named_sublayers(prefix, include_self=True) if include_sublayers else [(prefix, self)]
        for path, layer in layers:
            for key, param in layer._parameters.items():
                if param.name in seen:
                    continue
                seen.add(param.name)
                yield (f"{path}.{key}" if path else key), param

    def parameters(self, include_sublayers: bool = True) -> list[LayerParameter]:
        """The parameters, for an optimizer's `parameters=` (they are taken by name)."""
        return [p for _, p in self.named_parameters(include_sublayers=include_sublayers)]

    def to(self, device=None, dtype=None, blocking=None):
        """Move the parameters (and their gradients) to `device` ("cpu", "gpu", "gpu:N" or a
        place) and/or cast the floating ones to `dtype`, in place (the same parameter objects, so an optimizer
        made before keeps them), as PaddlePaddle's Layer.to; returns the layer. `blocking`
        is accepted for compatibility (copies here complete before it returns)."""
        engine = dygraph.engine()
        for param in self.parameters():
            value = param.value
            if device is not None:
                value = engine.to_place(value, device)
            if dtype is not None and dtypes.is_floating(param.dtype):
                value = value.astype(dtypes.to_numpy(dtypes.to_code(dtype)))
                param._dtype = dtypes.to_code(dtype)
            if value is not param._value:
                param._value = value
                param._version += 1
            if param.grad is not None and device is not None:  # its gradient goes along (as in PaddlePaddle)
                param.grad._value = engine.to_place(param.grad.value, device)
        return self

    # -- modes -------------------------------------------------------------------------------
    def train(self):
        """Training mode (the default): dropout drops, batch_norm uses batch statistics."""
        for layer in self.sublayers(include_self=True):
            layer.training = True
        return self

    def eval(self):
        """Evaluation mode: programs built now have `is_test` set (dropout off, batch_norm on
        running statistics)."""
        for layer in self.sublayers(include_self=True):
            layer.training = False
        return self

    @contextlib.contextmanager
    def mode(self, training: bool):
        """Build in training (True) or evaluation mode inside the block, then put every
        sublayer back in the mode it had (jit.save and hapi.Model build eval programs of a
        layer being trained)."""
        saved = [(layer, layer.training) for layer in self.sublayers(include_self=True)]
        for layer, _ in saved:
            layer.training = bool(training)
        try:
            yield self
        finally:
            for layer, was in saved:
                layer.training = was

    # -- values (in a scope) -----------------------------------------------------------------
    def state_dict(self, scope=None, structured_name_prefix: str = "") -> "OrderedDict[str, np.ndarray]":
        """Structured name -> a host copy of each parameter's value: from `scope` when given;
        else the parameter's current value (LayerParameter.current_value: its own, or the
        global scope's for one only static programs used, or its initializer's)."""
        out = OrderedDict()
        for key, param in self.named_parameters(structured_name_prefix):
            if scope is None:
                value = param.current_value(_global_scope_or_none())
            elif scope.find_var(param.name) is not None:
                value = scope.get(param.name)
            else:
                raise KeyError(f"state_dict: parameter {param.name} ({key}) has no value in the scope: "
                               f"run the startup program first")
            out[key] = np.array(value.get() if hasattr(value, "get") and not isinstance(value, np.ndarray)
                                else value)
        return out

    def set_state_dict(self, state_dict, scope=None, use_structured_name: bool = True):
        """Write `state_dict`'s values into the parameters (and into `scope`, default the
        global scope, where a program's run has given them a value there). Keys are
        structured names (or parameter names with use_structured_name=False). Every problem
        (a missing or unexpected key, a shape or dtype that does not fit) is reported at once
        and nothing is written then. Returns (missing keys, unexpected keys): both empty."""
        given = scope
        scope = _scope(scope)
        params = OrderedDict((k if use_structured_name else p.name, p) for k, p in self.named_parameters())
        problems = [f"{k}: missing from the state dict" for k in params if k not in state_dict]
        problems += [f"{k}: not a parameter of {type(self).__name__}" for k in state_dict if k not in params]
        values = {}
        for key, param in params.items():
            if key not in state_dict:
                continue
            value = state_dict[key]
            value = np.asarray(value.numpy() if isinstance(value, Tensor) else value)
            want = dtypes.to_numpy(param.dtype)
            if list(value.shape) != param.shape:
                problems.append(f"{key}: shape {list(value.shape)}, {param.name} is {param.shape}")
            elif value.dtype != want and not np.can_cast(value.dtype, want, "safe"):
                problems.append(f"{key}: dtype {value.dtype}, {param.name} is {want}")
            else:
                values[param] = value.astype(want, copy=True)
        if problems:
            raise ValueError(f"set_state_dict: {len(problems)} problem(s):\n  - " + "\n  - ".join(problems))
        for param, value in values.items():
            if given is not None or (param._in_program and scope.find_var(param.name) is not None):
                scope.set(param.name, value)
            if given is None:
                param.set_value(value)
        return [], []

    load_dict = set_state_dict

    def extra_repr(self) -> str:
        return ""

    def __repr__(self):
        lines = [f"{type(self).__name__}({self.extra_repr()}"]
        for key, layer in self._sub_layers.items():
            body = repr(layer).replace("\n", "\n  ")
            lines.append(f"  ({key}): {body}")
        return "\n".join(lines) + ("\n)" if len(lines) > 1 else ")")


class _HookHandle:
    def __init__(self, hooks, key):
        self._hooks, self._key = hooks, key

    def remove(self):
        self._hooks.pop(self._key, None)


def _scope(scope):
    if scope is not None:
        return scope
    from keel.program import default
    return default.global_scope()


def _global_scope_or_none():
    from keel.program import default
    try:
        return default.global_scope()
    except RuntimeError:  # no executor package imported
        return None
