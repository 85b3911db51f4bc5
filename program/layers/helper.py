"""LayerHelper: what every layer function uses to name things, create parameters (with
their init ops in the startup program) and append ops to the current block."""
from __future__ import annotations

from keel.program import default, dygraph, unique_name
from keel.program.param_attr import ParamAttr


class LayerHelper:
    def __init__(self, layer_type: str, name: str | None = None):
        self.layer_type = layer_type
        self.name = name or unique_name.generate(layer_type)

    @property
    def main_program(self):
        return default.default_main_program()

    @property
    def startup_program(self):
        return default.default_startup_program()

    @property
    def block(self):
        """The current block of the main program, or in dynamic mode the eager engine's
        block, which runs each op as it is appended (program/dygraph.py)."""
        return dygraph.current_block()

    def create_parameter(self, attr, shape, dtype="float32", default_initializer=None, suffix="w"):
        """Create `<layer>.<suffix>_N` (e.g. fc_0.w_0) in the main program and its init op in the
        startup program. Returns None when `attr` is False (the layer has no such parameter)."""
        attr = ParamAttr.of(attr)
        if attr is None:
            return None
        # the Layer's parameter this attr describes, or names (program/nn/layer.py)
        owner = attr.owner
        if owner is None and attr.name:
            owner = dygraph.parameters_by_name.get(attr.name)
        if dygraph.in_dynamic_mode():
            if owner is None:
                return self.block.create_parameter(name=attr.name or self.name)  # refuses, saying why
            return owner
        from keel.program import initializer as init

        name = self.parameter_name(attr, suffix)
        main_block = self.main_program.global_block()
        existing = main_block.vars.get(name)
        if existing is not None and existing.is_parameter:  # a shared parameter
            if tuple(existing.shape) != tuple(shape):
                raise ValueError(f"parameter {name!r} is shared with shape {list(existing.shape)}, "
                                 f"but {self.name} needs {list(shape)}")
            return existing
        initializer = attr.initializer or default_initializer or init.XavierUniform()
        param = main_block.create_parameter(name, shape, dtype, trainable=attr.trainable,
                                            initializer=initializer, regularizer=attr.regularizer,
                                            learning_rate=attr.learning_rate, need_clip=attr.need_clip)
        startup_block = self.startup_program.global_block()
        if not startup_block.has_var(name):
            svar = startup_block.create_var(name, shape, dtype, persistable=True)
            initializer(svar, startup_block)
        if owner is not None:
            owner._in_program = True
            if owner._value is not None:  # the program starts from the layer's own value
                _set_in_global_scope(name, owner._value)
        return param

    def parameter_name(self, attr: ParamAttr, suffix: str = "w") -> str:
        """The attr's name, else `<layer>.<suffix>_N` (fc_0.w_0), unique in the process."""
        return attr.name or unique_name.generate(f"{self.name}.{suffix}")

    def create_tmp(self, dtype="float32", shape=(), stop_gradient: bool = False):
        """A fresh intermediate variable `<layer>.tmp_N`; its shape is set by shape inference."""
        return self.block.create_var(unique_name.generate(f"{self.name}.tmp"), shape, dtype,
                                     stop_gradient=stop_gradient)

    def append_op(self, type, inputs=None, outputs=None, attrs=None):
        return self.block.append_op(type, inputs, outputs, attrs)

    def unary(self, op_type, x, attrs=None, out_dtype=None, in_slot="X", out_slot="Out"):
        """Append `op_type(X=x) -> Out` and return Out (the common one-input, one-output case)."""
        out = self.create_tmp(out_dtype if out_dtype is not None else x.dtype)
        self.append_op(op_type, {in_slot: x}, {out_slot: out}, attrs)
        return out

    def append_activation(self, x, act: str | None):
        """Apply activation op `act` (e.g. "relu"), naming its output after this layer
        (fc_0.tmp_2), as PaddlePaddle does."""
        if not act:
            return x
        return self.unary(act, x)


def _set_in_global_scope(name, value) -> None:
    """Put a layer's value of parameter `name` in the global scope, where programs read it."""
    try:
        scope = default.global_scope()
    except RuntimeError:  # no executor package: nothing runs programs here
        return
    scope.set(name, value)
