"""`program.jit.save` / `program.jit.load`: a Layer's inference program and parameters as PaddlePaddle's
`paddle.jit.save` writes them (`path.pdmodel` + `path.pdiparams`), for Paddle Inference and
Keel's Predictor alike.

    model = MyNet()            # a program.nn.Layer, trained in some program
    pg.jit.save(model, "out/net", input_spec=[pg.static.InputSpec([None, 784], "float32", "x")])

The input specs are required (given, or from `to_static(input_spec=...)`): the layer's
forward, converted by dy2static (its Python if/while on tensors become cond/while_loop), is
called once, in eval mode, on `data` variables made from them, in a fresh program; the result is pruned and written by
`save_inference_model` (crash-safe, PaddlePaddle's layout) with the layer's own parameter
values (those eager training or `set_state_dict` gave it; the global scope's for one trained
only in a static program). A spec without a name takes the name of the matching `forward`
argument, as PaddlePaddle's does.

`to_static` converts a Layer or function: its calls on Tensors run a program traced from
its Python code (see StaticFunction).
"""
from __future__ import annotations

import functools
import inspect

import numpy as np

from keel.program import default, dygraph, unique_name
from keel.program.errors import OpError
from keel.program.io.inference_model import (inference_model_values, load_inference_model, program_suffix,
                                             save_inference_model)
from keel.program.io.program_file import persistable_specs
from keel.program.layers.data import data
from keel.program.nn.layer import Layer, LayerParameter
from keel.program.ops.control_flow import CONTROL_FLOW_OPS
from keel.program.param_attr import ParamAttr
from keel.program.program import Program
from keel.program.static import InputSpec
from keel.program.tensor import Tensor
from keel.program.variable import Variable

__all__ = ["save", "load", "to_static", "not_to_static", "TranslatedLayer", "StaticFunction"]

from keel.program.jit_marks import not_to_static  # noqa: E402  (paddle.jit.not_to_static)


def save(layer, path, input_spec=None, scope=None, format: str = "legacy") -> Program:
    """Write `path.pdmodel` (`format="pir"`: `path.json`, PaddlePaddle 3.x's PIR program) and
    `path.pdiparams` for `layer` called on `input_spec`; the
    parameter values come from `scope`, or by default from the layer itself (falling back
    to the executor's global scope for a parameter that holds no value of its own). Returns
    the inference program written. The layer's train/eval modes are restored afterwards.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> net = paddle.nn.Linear(4, 2)
        >>> _ = paddle.jit.save(net, "out/linear", input_spec=[InputSpec([None, 4], "float32", "x")])
        >>> paddle.jit.load("out/linear")(np.ones((3, 4), "float32")).shape
        (3, 2)
    """
    program_suffix(format)  # (an unknown format is refused before the layer is traced)
    main, feeds, outputs = _trace(layer, input_spec, "jit.save")
    return save_inference_model(path, feeds, outputs, program=main, format=format, scope=_values(layer, scope))


def trace_inference(layer, input_spec=None, scope=None, where: str = "jit.save") -> tuple[Program, dict]:
    """What `save` writes, in memory: the inference program of `layer` called on
    `input_spec` (traced as `save` traces it) and its parameters' values (name -> numpy
    array; from `scope`, or the layer's own). `where` names the caller in errors."""
    main, feeds, outputs = _trace(layer, input_spec, where)
    return inference_model_values(main, feeds, outputs, _values(layer, scope))


def _trace(layer, input_spec, where: str):
    """(program, feed variables, output variables): the layer's forward, converted by
    dy2static, called once in eval mode on `data` variables made from the specs."""
    if not input_spec:
        input_spec = getattr(getattr(layer, "forward", None), "input_spec", None)  # to_static(input_spec=...)
    if not input_spec:
        raise ValueError(f"{where} needs input_spec=[InputSpec(shape, dtype, name), ...] (or a layer "
                         "converted with to_static(input_spec=...)): Keel builds the program by calling "
                         "the layer on them")
    specs = [s if isinstance(s, InputSpec) else InputSpec(s.shape, s.dtype, s.name) for s in input_spec]
    names = _argument_names(layer, len(specs))
    from keel.program.dy2static import converted_forward  # the AST transformer: loaded by the first save
    main, startup = Program(), Program()
    with layer.mode(training=False), default.program_guard(main, startup), converted_forward(layer):
        feeds = [data(spec.name or names[i], spec.shape, spec.dtype) for i, spec in enumerate(specs)]
        outputs = flatten_outputs(layer(*feeds))
    if not outputs:
        raise ValueError(f"{where}: {type(layer).__name__}.forward returned no variables")
    return main, feeds, outputs


def _values(layer, scope):
    return scope if scope is not None else _LayerValues(layer, default.global_scope())


class _LayerValues:
    """A scope (what save_inference_model reads: find_var, get) holding the layer's
    parameters' current values (LayerParameter.current_value), over `fallback` (the global
    scope) for every other name."""

    def __init__(self, layer, fallback):
        self._own = {p.name: p.current_value(fallback) for p in layer.parameters()}
        self._fallback = fallback

    def find_var(self, name):
        return True if name in self._own else self._fallback.find_var(name)

    def get(self, name):
        return self._own[name] if name in self._own else self._fallback.get(name)


def _argument_names(layer, count: int) -> list[str]:
    params = [p for p in inspect.signature(layer.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in params[:count]]
    return names + [f"input_{i}" for i in range(len(names), count)]


def flatten_outputs(result) -> list[Variable]:
    """A forward's result (a Variable, or lists, tuples and dicts of them) as a flat list;
    other items (numbers, strings, None) are left out."""
    if isinstance(result, Variable):
        return [result]
    if isinstance(result, dict):
        result = list(result.values())
    if not isinstance(result, (list, tuple)):
        return []
    out = []
    for item in result:
        out.extend(flatten_outputs(item))
    return out


class TranslatedLayer(Layer):
    """A model loaded by `jit.load`. Called on arrays it runs the saved program (parameters
    in the scope `load` put them in) and returns the outputs (one array, or a list). Called
    on Tensors it runs the saved ops eagerly on its parameters, which are Tensors holding
    the loaded values (so it can be fine-tuned with backward() and an optimizer's step()).
    Called on Variables inside `program_guard` it appends the saved ops to the current
    program, its intermediates renamed, its parameters by their own names (their values
    already in the scope: the startup program gets no initializer for them), e.g. to
    fine-tune it or to build a larger model around it.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> net = paddle.nn.Linear(4, 2)
        >>> _ = paddle.jit.save(net, "out/linear", input_spec=[InputSpec([None, 4], "float32", "x")])
        >>> loaded = paddle.jit.load("out/linear")       # a TranslatedLayer
        >>> type(loaded).__name__, loaded(paddle.ones([3, 4])).shape
        ('TranslatedLayer', [3, 2])
        >>> np.allclose(loaded(paddle.ones([3, 4])).numpy(), net(paddle.ones([3, 4])).numpy())
        True
    """

    def __init__(self, program: Program, feed_names, fetch_names, scope):
        super().__init__("translated_layer")
        self._program, self._feed_names, self._fetch_names = program, list(feed_names), list(fetch_names)
        self._scope = scope
        self._specs = persistable_specs(program)
        for name, dtype, shape in self._specs:   # the loaded values, as the layer's parameters
            param = LayerParameter(name, shape, dtype, ParamAttr(name=name), None)
            if scope.find_var(name) is not None:
                param._value = scope.get(name)
            self._parameters[name] = param

    def forward(self, *inputs):
        if len(inputs) != len(self._feed_names):
            raise TypeError(f"this model takes {len(self._feed_names)} input(s) {self._feed_names}, got {len(inputs)}")
        if all(isinstance(x, Tensor) for x in inputs):
            outputs = self._run_eagerly(inputs)
        elif all(isinstance(x, Variable) for x in inputs):
            outputs = self._append(inputs)
        elif any(isinstance(x, Variable) for x in inputs):
            raise TypeError("call a loaded model on arrays (to run it) or on Variables (to build), not a mix")
        else:
            outputs = default.run_program(self._program, dict(zip(self._feed_names, inputs)),
                                          self._fetch_names, self._scope)
        return outputs[0] if len(outputs) == 1 else outputs

    def _run_eagerly(self, inputs) -> list[Tensor]:
        """The saved ops run one by one on Tensors (the eager engine records them for backward)."""
        env = dict(zip(self._feed_names, inputs))
        env.update(self._parameters)
        return run_ops_eagerly(self._program.global_block(), env, self._fetch_names, "a loaded program")

    def _append(self, inputs) -> list[Variable]:
        source = self._program.global_block()
        block = default.default_main_program().current_block()
        names = dict(zip(self._feed_names, (x.name for x in inputs)))
        for name, dtype, shape in self._specs:
            if not block.has_var(name):
                block.program.global_block().create_parameter(name, shape, dtype)
            names[name] = name
        prefix = unique_name.generate(self._full_name)
        for op in source.ops:
            if op.type in ("feed", "fetch"):
                continue
            for name in op.output_arg_names:
                if name not in names:
                    var = source.var(name)
                    names[name] = f"{prefix}.{name}"
                    block.create_var(names[name], list(var.shape or ()), var.dtype)
            outputs = {s: [names[n] for n in op.output(s)] for s in op.outputs}
            for slot in op.opdef.outputs:  # outputs an inference file strips (dropout's Mask):
                if not outputs.get(slot.name) and not slot.dispensable:  # the gradient may need them
                    outputs[slot.name] = [block.create_var(unique_name.generate(f"{prefix}.{slot.name}")).name]
            block.append_op(op.type, {s: [names[n] for n in op.input(s)] for s in op.inputs}, outputs,
                            dict(op.attrs))
        return [block.var(names[n]) for n in self._fetch_names]


def run_ops_eagerly(block, env: dict, fetch_names, where: str):
    """Run a block's ops one by one on Tensors through the eager engine (recorded for
    backward): `env` maps the block's input and parameter names to Tensors; returns the
    Tensors of `fetch_names`. For jit.load's layer and to_static's traced programs.

    Control flow runs as Python around the ops: a conditional_block's sub-block when its
    condition holds, a while's sub-block while its condition does, select_input handing on
    the taken branch's tensor; so backward differentiates the steps that ran (each write
    of a variable is a new Tensor, as each step's value is its own). Gradient programs'
    control-flow ops are refused."""
    _run_block(block, env, where)
    return [env[n] for n in fetch_names]


def _run_block(block, env: dict, where: str) -> None:
    eager_block = dygraph.current_block()
    program = block.program
    for op in block.ops:
        if op.type in ("feed", "fetch"):
            continue
        missing = [n for n in op.input_arg_names if n not in env and n != "@EMPTY@"]
        if op.type == "conditional_block":
            if _holds(op, env):
                _run_block(program.block(op.attr("sub_block")), env, where)
            continue
        if op.type == "while":
            while _truth(env[op.input("Condition")[0]]):
                _run_block(program.block(op.attr("sub_block")), env, where)
            continue
        if op.type == "select_input":
            taken = int(np.asarray(env[op.input("Mask")[0]].numpy()).reshape(-1)[0])
            env[op.output("Out")[0]] = env[op.input("X")[taken]]
            continue
        if op.type in CONTROL_FLOW_OPS:
            raise OpError(f"{where} holds a gradient program's control flow, which runs as a program, not op by "
                          "op: call it on numpy arrays, or inside program_guard on Variables", op_type=op.type,
                          callsite=op.callsite)
        if missing:
            raise OpError(f"{where}: the op reads {missing}, which no input, parameter or earlier op gives",
                          op_type=op.type, callsite=op.callsite)
        inputs = {s: [env[n] for n in op.input(s)] for s in op.inputs}
        for name in op.output_arg_names:   # a fresh Tensor per write, but a parameter's own (in place)
            if name not in env or not env[name].persistable:
                var = block.find_var(name)
                env[name] = eager_block.create_var(name, dtype=var.dtype if var is not None else None)
        outputs = {s: [env[n] for n in op.output(s)] for s in op.outputs}
        for slot in op.opdef.outputs:  # outputs an inference file strips (dropout's Mask)
            if not outputs.get(slot.name) and not slot.dispensable:
                outputs[slot.name] = [eager_block.create_var(slot.name)]
        eager_block.append_op(op.type, inputs, outputs,
                              {k: v for k, v in op.attrs.items() if k not in _RECORDED_ATTRS})


def _holds(op, env) -> bool:
    """A conditional_block's condition: its one element (is_scalar_condition), else every
    Cond tensor being non-empty (PaddlePaddle's rule)."""
    conds = [env[n] for n in op.input("Cond")]
    if op.attr("is_scalar_condition"):
        return _truth(conds[0])
    return all(c.size > 0 for c in conds)


def _truth(tensor) -> bool:
    return bool(np.asarray(tensor.numpy()).reshape(-1)[0])


# attributes a file records about where an op came from, which running it does not read
_RECORDED_ATTRS = frozenset({"op_callstack", "op_namescope", "op_role", "op_role_var", "op_device",
                             "with_quant_attr"})


def load(path, scope=None) -> TranslatedLayer:
    """Read `path.pdmodel` + `path.pdiparams` (jit.save's, save_inference_model's or
    PaddlePaddle's) and return a TranslatedLayer; the parameters go into `scope` (default:
    the executor's global scope).

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> net = paddle.nn.Linear(4, 2)
        >>> with paddle.program_guard(paddle.Program(), startup := paddle.Program()):
        ...     y = net(paddle.static.data("x", [-1, 4]))
        >>> _ = paddle.Executor().run(startup)
        >>> _ = paddle.jit.save(net, "out/linear", input_spec=[InputSpec([None, 4], "float32", "x")])
        >>> loaded = paddle.jit.load("out/linear")
        >>> state = net.state_dict(paddle.global_scope())   # the values, by attribute name
        >>> expected = np.ones((3, 4)) @ state["weight"] + state["bias"]
        >>> np.allclose(loaded(np.ones((3, 4), "float32")), expected)
        True
    """
    scope = scope if scope is not None else default.global_scope()
    program, feeds, fetches = load_inference_model(path, scope=scope)
    return TranslatedLayer(program, feeds, [v.name for v in fetches], scope)


class StaticFunction:
    """What `to_static` makes of a function or a Layer's forward: called on Tensors, it runs
    the static program traced from the Python code for these input shapes and dtypes (and
    the layer's train/eval mode), traced once and cached, retraced for a new signature; the
    program's ops run through the eager engine, so gradients flow to the layer's parameters
    as in eager mode. Called while a program is being built (inside program_guard, jit.save)
    it appends the function's ops there.

    The function is traced as dy2static converts it (program/dy2static): a Python if/while
    whose condition is a tensor becomes cond/while_loop in the program, so each call takes
    the branch and the number of steps its inputs' values ask for; one on Python values
    stays Python. A construct that cannot be converted (a return or break under a
    tensor-decided if/while) stops the trace with the line and what to write instead."""

    def __init__(self, function, input_spec=None, layer=None):
        self._function, self._layer = function, layer
        self._converted = None
        self.input_spec = list(input_spec) if input_spec is not None else None
        self._programs: dict = {}
        functools.update_wrapper(self, function)

    def __get__(self, instance, owner):  # a decorated forward, bound to its layer
        if instance is None:
            return self
        bound = instance.__dict__.get(f"_static_{self._function.__name__}")
        if bound is None:
            bound = StaticFunction(self._function.__get__(instance, owner), self.input_spec, instance)
            instance.__dict__[f"_static_{self._function.__name__}"] = bound
        return bound

    @property
    def converted(self):
        """The function with its Python if/while on tensors converted (dy2static)."""
        if self._converted is None:
            from keel.program.dy2static import convert_function  # loaded by the first conversion
            self._converted = convert_function(self._function)
        return self._converted

    def __call__(self, *args, **kwargs):
        if not dygraph.in_dynamic_mode():   # building a program (jit.save, program_guard)
            return self.converted(*args, **kwargs)
        if kwargs or not args or not all(isinstance(a, Tensor) for a in args):
            return self._function(*args, **kwargs)
        training = getattr(self._layer, "training", None)
        key = (tuple((tuple(a.shape), a.dtype) for a in args), training)
        traced = self._programs.get(key)
        if traced is None:
            traced = self._programs[key] = self._trace(args)
        program, feed_names, fetch_names, structure = traced
        env = dict(zip(feed_names, args))
        own = {p.name: p for p in self._layer.parameters()} if isinstance(self._layer, Layer) else {}
        for name in _parameter_names(program):
            param = own[name] if name in own else dygraph.parameters_by_name.get(name)
            if param is None:
                raise RuntimeError(f"to_static: the traced program reads persistable {name!r}, which is no "
                                   "layer's parameter (create parameters with Layer.create_parameter)")
            env[name] = param
        outputs = run_ops_eagerly(program.global_block(), env, fetch_names,
                                  f"to_static({getattr(self._function, '__qualname__', 'function')})")
        return _pack(structure, iter(outputs))

    def _trace(self, args):
        main, startup = Program(), Program()
        with default.program_guard(main, startup):
            feeds = [data(f"input_{i}", list(a.shape), a.dtype) for i, a in enumerate(args)]
            result = self.converted(*feeds)
        outputs = flatten_outputs(result)
        if not outputs:
            raise ValueError("to_static: the function returned no tensors")
        return main, [f.name for f in feeds], [v.name for v in outputs], _structure(result)

    @property
    def concrete_programs(self) -> list[Program]:
        """The programs traced so far (one per input signature)."""
        return [traced[0] for traced in self._programs.values()]


def to_static(function=None, input_spec=None, build_strategy=None, backend=None, full_graph=False, **kwargs):
    """paddle.jit.to_static: a Layer, a Layer's forward or a function whose calls run as a
    static program traced from it (see StaticFunction); `input_spec` is what jit.save uses
    when it is given none. Works as `to_static(layer)`, `@to_static` and
    `@to_static(input_spec=[...])`.

    Examples:
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> @paddle.jit.to_static
        ... def affine(x, y):
        ...     return x * 2 + y
        >>> print(affine(paddle.to_tensor([1.0, 2.0]), paddle.to_tensor([0.5, 0.5])).numpy())
        [2.5 4.5]
        >>> net = paddle.jit.to_static(paddle.nn.Linear(4, 2), input_spec=[InputSpec([None, 4], "float32")])
        >>> net(paddle.ones([3, 4])).shape
        [3, 2]
    """
    def convert(target):
        if isinstance(target, Layer):
            target.forward = StaticFunction(target.forward, input_spec, target)
            return target
        if isinstance(target, StaticFunction):
            return target
        if callable(target):
            return StaticFunction(target, input_spec)
        raise TypeError(f"to_static expects a Layer or a function, got {type(target).__name__}")
    return convert if function is None else convert(function)


def _parameter_names(program) -> list[str]:
    return [v.name for v in program.global_block().vars.values() if v.persistable and v.name not in ("feed", "fetch")]


def _structure(result):
    """The nesting of a function's result, with None where a tensor goes."""
    if isinstance(result, Variable):
        return None
    if isinstance(result, dict):
        return {k: _structure(v) for k, v in result.items()}
    if isinstance(result, (list, tuple)):
        return type(result)(_structure(v) for v in result)
    return _Constant(result)


def _pack(structure, tensors):
    if structure is None:
        return next(tensors)
    if isinstance(structure, dict):
        return {k: _pack(v, tensors) for k, v in structure.items()}
    if isinstance(structure, _Constant):
        return structure.value
    return type(structure)(_pack(v, tensors) for v in structure)


class _Constant:
    """A non-tensor item of a traced function's result, returned as it was."""

    def __init__(self, value):
        self.value = value
