"""`program.jit.save` / `program.jit.load`: a Layer's inference program and parameters as PaddlePaddle's
`paddle.jit.save` writes them (`path.pdmodel` + `path.pdiparams`), for Paddle Inference and
Keel's Predictor alike.

    model = MyNet()            # a program.nn.Layer, trained in some program
    pg.jit.save(model, "out/net", input_spec=[pg.static.InputSpec([None, 784], "float32", "x")])

Keel has no eager mode to trace, so the input specs are required: the layer is called once,
in eval mode, on `data` variables made from them, in a fresh program; the result is pruned
and written by `save_inference_model` (crash-safe, PaddlePaddle's layout). A spec without a
name takes the name of the matching `forward` argument, as PaddlePaddle's does.
"""
from __future__ import annotations

import inspect

from keel.program import default, unique_name
from keel.program.io.inference_model import load_inference_model, save_inference_model
from keel.program.io.program_file import persistable_specs
from keel.program.layers.data import data
from keel.program.nn.layer import Layer
from keel.program.program import Program
from keel.program.static import InputSpec
from keel.program.variable import Variable

__all__ = ["save", "load", "TranslatedLayer"]


def save(layer, path, input_spec=None, scope=None) -> Program:
    """Write `path.pdmodel` and `path.pdiparams` for `layer` called on `input_spec`; the
    parameter values come from `scope` (default: the executor's global scope). Returns the
    inference program written. The layer's train/eval modes are restored afterwards.

    Examples:
        >>> import numpy as np
        >>> import keel as paddle
        >>> from keel.static import InputSpec
        >>> net = paddle.nn.Linear(4, 2)
        >>> main, startup = paddle.Program(), paddle.Program()
        >>> with paddle.program_guard(main, startup):
        ...     y = net(paddle.static.data("x", [-1, 4]))
        >>> _ = paddle.Executor().run(startup)
        >>> _ = paddle.jit.save(net, "out/linear", input_spec=[InputSpec([None, 4], "float32", "x")])
        >>> paddle.jit.load("out/linear")(np.ones((3, 4), "float32")).shape
        (3, 2)
    """
    if not input_spec:
        raise ValueError("jit.save needs input_spec=[InputSpec(shape, dtype, name), ...]: Keel builds "
                         "the program by calling the layer on them (there is no eager run to trace)")
    specs = [s if isinstance(s, InputSpec) else InputSpec(s.shape, s.dtype, s.name) for s in input_spec]
    names = _argument_names(layer, len(specs))
    main, startup = Program(), Program()
    with layer.mode(training=False), default.program_guard(main, startup):
        feeds = [data(spec.name or names[i], spec.shape, spec.dtype) for i, spec in enumerate(specs)]
        outputs = flatten_outputs(layer(*feeds))
    if not outputs:
        raise ValueError(f"jit.save: {type(layer).__name__}.forward returned no variables")
    return save_inference_model(path, feeds, outputs, program=main,
                                scope=scope if scope is not None else default.global_scope())


def _argument_names(layer, count: int) -> list[str]:
    params = [p for p in inspect.signature(layer.forward).parameters.values()
              if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    names = [p.name for p in params[:count]]
    return names + [f"input_{i}" for i in range(len(names), count)]


def flatten_outputs(result) -> list[Variable]:
    """A forward's result (a Variable, or lists, tuples and dicts of them) as a flat list."""
    if isinstance(result, Variable):
        return [result]
    if isinstance(result, dict):
        result = list(result.values())
    out = []
    for item in result or ():
        out.extend(flatten_outputs(item))
    return out


class TranslatedLayer(Layer):
    """A model loaded by `jit.load`. Called on arrays it runs the saved program (parameters
    in the scope `load` put them in) and returns the outputs (one array, or a list). Called
    on Variables inside `program_guard` it appends the saved ops to the current program,
    its intermediates renamed, its parameters by their own names (their values already in
    the scope: the startup program gets no initializer for them), e.g. to fine-tune it or
    to build a larger model around it."""

    def __init__(self, program: Program, feed_names, fetch_names, scope):
        super().__init__("translated_layer")
        self._program, self._feed_names, self._fetch_names = program, list(feed_names), list(fetch_names)
        self._scope = scope
        self._specs = persistable_specs(program)

    def parameters(self, include_sublayers: bool = True):
        return [_SavedParameter(name, shape, dtype) for name, dtype, shape in self._specs]

    def forward(self, *inputs):
        if len(inputs) != len(self._feed_names):
            raise TypeError(f"this model takes {len(self._feed_names)} input(s) {self._feed_names}, got {len(inputs)}")
        if all(isinstance(x, Variable) for x in inputs):
            outputs = self._append(inputs)
        elif any(isinstance(x, Variable) for x in inputs):
            raise TypeError("call a loaded model on arrays (to run it) or on Variables (to build), not a mix")
        else:
            outputs = default.run_program(self._program, dict(zip(self._feed_names, inputs)),
                                          self._fetch_names, self._scope)
        return outputs[0] if len(outputs) == 1 else outputs

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


class _SavedParameter:
    """What an optimizer's `parameters=` needs of a loaded parameter: its name."""

    def __init__(self, name, shape, dtype):
        self.name, self.shape, self.dtype, self.trainable = name, list(shape), dtype, True

    def __repr__(self):
        return f"<saved parameter {self.name} {self.shape}>"


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
