"""GraphBuilder: what a converter sees while one Keel block becomes one ONNX graph.

Keel variable names become ONNX value names unchanged (so Netron shows the program's names),
except where ONNX's single-assignment rule forbids it: an op that writes a variable already
written (in-place batch_norm statistics, `assign` into an existing variable, loop-carried
values) gets a fresh name, and later readers of the variable read the newest one.

A converter reads its inputs with `x(op, slot)` (the ONNX name of the value an input slot
holds now), appends nodes with `node(...)`, and binds the op's outputs with
`node(..., outputs=g.y(op, "Out"))`. Parameters become initializers the first time an op
reads them; constants made by converters (`const`) too.
"""
from __future__ import annotations

import itertools

import numpy as np

from keel.program import callsite, dtypes
from keel.program.onnx.registry import OnnxExportError


class GraphBuilder:
    def __init__(self, block, params, opset: int, parent: "GraphBuilder | None" = None):
        import onnx  # the optional dependency: imported only when a graph is built
        self.onnx = onnx
        self.block = block
        self.params = params  # name -> numpy array (the parameters' values)
        self.opset = opset
        self.parent = parent
        self.nodes = []
        self.initializers = {} if parent is None else parent.initializers  # one set, at the top graph
        self._current = {}  # Keel variable name -> the ONNX name holding its newest value
        self._taken = set() if parent is None else parent._taken  # every ONNX name in use, nested graphs too
        self._counter = itertools.count() if parent is None else parent._counter
        # ONNX name -> numpy value, for values known while exporting (fill_constant's, the
        # parameters'): what a converter needing an attribute-like constant (an axis, a
        # shape ONNX takes as an attribute) may read from a tensor input
        self.known = {} if parent is None else parent.known
        # the Keel names the model outputs (export.py fills it): values a converter must keep
        # even where no op reads them (a loop's results)
        self.fetches = set() if parent is None else parent.fetches
        self.op = None  # the op being converted (for error messages)

    # -- names ---------------------------------------------------------------------------
    def fresh(self, hint: str) -> str:
        """An ONNX name nobody uses yet, read as `hint`."""
        while True:
            name = f"{hint}__{next(self._counter)}"
            if name not in self._taken and not self._keel_name(name):
                self._taken.add(name)
                return name

    def _keel_name(self, name: str) -> bool:
        return any(name in block.vars for block in self.block.program.blocks)

    def bind(self, keel_name: str, onnx_name: str | None = None) -> str:
        """Make `keel_name` read from `onnx_name` from now on (default: a name for a new
        value of it: the variable's own name the first time, a fresh one after)."""
        if onnx_name is None:
            onnx_name = keel_name if keel_name not in self._taken else self.fresh(keel_name)
        self._taken.add(onnx_name)  # (a graph input bound by name too: no later value may take it)
        self._current[keel_name] = onnx_name
        return onnx_name

    def value(self, keel_name: str) -> str:
        """The ONNX name holding `keel_name`'s value now: written by an earlier op (in this
        graph or an enclosing one), a graph input, or a parameter (added as an initializer)."""
        graph = self
        while graph is not None:
            if keel_name in graph._current:
                return graph._current[keel_name]
            graph = graph.parent
        if keel_name in self.params:
            return self._initializer(keel_name)
        raise self.error(f"reads variable {keel_name!r}, which no earlier op writes, no input feeds and no "
                         f"parameter holds")

    def _initializer(self, name: str) -> str:
        top = self
        while top.parent is not None:
            top = top.parent
        if name not in top.initializers:
            top.initializers[name] = self.onnx.numpy_helper.from_array(np.asarray(self.params[name], order="C"), name)
            top.known[name] = np.asarray(self.params[name])
            top._taken.add(name)
            top._current[name] = name
        return name

    # -- reading an op ---------------------------------------------------------------------
    def x(self, op, slot: str, index: int = 0) -> str | None:
        """The ONNX name of input `slot`'s `index`-th variable now; None where the slot is empty."""
        names = op.input(slot)
        return self.value(names[index]) if index < len(names) else None

    def xs(self, op, slot: str) -> list[str]:
        return [self.value(n) for n in op.input(slot)]

    def y(self, op, slot: str, index: int = 0) -> str | None:
        """A new ONNX name for output `slot`'s `index`-th variable, bound to it (later readers
        read it); None where the slot is empty (an optional output the program does not use)."""
        names = op.output(slot)
        return self.bind(names[index]) if index < len(names) else None

    def ys(self, op, slot: str) -> list[str]:
        return [self.bind(n) for n in op.output(slot)]

    def var(self, keel_name: str):
        """The Keel Variable (of this block or an enclosing one)."""
        return self.block.var(keel_name)

    def shape(self, op, slot: str, index: int = 0, output: bool = False) -> tuple[int, ...]:
        """The Keel (static) shape of a slot's variable: -1 where unknown until run time."""
        names = op.output(slot) if output else op.input(slot)
        return tuple(self.var(names[index]).shape)

    def dtype(self, op, slot: str, index: int = 0, output: bool = False) -> np.dtype:
        names = op.output(slot) if output else op.input(slot)
        return dtypes.to_numpy(self.var(names[index]).dtype)

    def param(self, op, slot: str, index: int = 0):
        """The value of input `slot` when it is a parameter (a constant of the file), else None."""
        names = op.input(slot)
        return self.params.get(names[index]) if index < len(names) else None

    def constant(self, op, slot: str, index: int = 0):
        """The value input `slot` holds whatever the feeds are (a parameter, or the result of
        a constant op such as fill_constant), else None: for the ONNX attributes that a
        Keel op may take from a tensor (an axis, a count)."""
        value = self.x(op, slot, index)
        return None if value is None else self.known.get(value)

    def has(self, op, slot: str) -> bool:
        """Whether input `slot` holds at least one variable."""
        return bool(op.input(slot))

    def rank(self, op, slot: str, index: int = 0, output: bool = False) -> int:
        return len(self.shape(op, slot, index, output))

    # -- writing ---------------------------------------------------------------------------
    def node(self, op_type: str, inputs, outputs=1, *, domain: str = "", **attrs):
        """Append one ONNX node. `inputs`: ONNX names ('' for an omitted optional input);
        `outputs`: a name, a list of names, or how many fresh ones to make. Attributes
        whose value is None are left out. Returns the output name, or the list of them."""
        if isinstance(outputs, int):
            outputs = [self.fresh(op_type.lower()) for _ in range(outputs)]
        elif isinstance(outputs, str):
            outputs = [outputs]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), list(outputs),
                                                     name=self.fresh(op_type), domain=domain, **attrs))
        return outputs[0] if len(outputs) == 1 else outputs

    def const(self, value, dtype=None, hint: str = "const") -> str:
        """An initializer holding `value` (a number, a list or an array)."""
        array = np.asarray(value, dtype=dtype)
        name = self.fresh(hint)
        top = self
        while top.parent is not None:
            top = top.parent
        # (np.asarray keeps a 0-d value 0-d, where np.ascontiguousarray would make it [1])
        top.initializers[name] = self.onnx.numpy_helper.from_array(np.asarray(array, order="C"), name)
        self.known[name] = array
        return name

    def scalar(self, value, dtype, hint: str = "scalar") -> str:
        """A 0-d initializer of numpy `dtype` (to combine with a tensor of that type)."""
        return self.const(np.asarray(value, dtype=dtype), hint=hint)

    def ints(self, values, hint: str = "ints") -> str:
        """A 1-D int64 initializer (shapes, axes, starts/ends: what ONNX takes as inputs)."""
        return self.const(np.asarray(list(values), dtype=np.int64).reshape(-1), hint=hint)

    def onnx_type(self, dtype) -> int:
        """The ONNX TensorProto element type of numpy `dtype`."""
        return self.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(dtype))

    def cast(self, value: str, dtype, outputs=1) -> str:
        """`value` converted to numpy `dtype`."""
        return self.node("Cast", [value], outputs, to=self.onnx_type(dtype))

    def int64s(self, value: str, dtype) -> str:
        """An integer tensor (of numpy `dtype`) as int64, the type ONNX's shape, index and
        axis inputs take (a no-op when it is int64 already)."""
        return value if np.dtype(dtype) == np.int64 else self.cast(value, np.int64)

    def shape_of(self, value: str, start: int | None = None, end: int | None = None) -> str:
        """The int64 run-time shape of `value` (dims start..end)."""
        attrs = {}
        if start is not None:
            attrs["start"] = start
        if end is not None:
            attrs["end"] = end
        return self.node("Shape", [value], **attrs)

    # -- common shapes of nodes ----------------------------------------------------------------
    def unsqueeze(self, value: str, axes, outputs=1) -> str:
        return self.node("Unsqueeze", [value, self.ints(axes, "axes")], outputs)

    def squeeze(self, value: str, axes, outputs=1) -> str:
        return self.node("Squeeze", [value, self.ints(axes, "axes")], outputs)

    def identity(self, value: str, outputs) -> str:
        return self.node("Identity", [value], outputs)

    def reduce(self, op_type: str, value: str, axes, keepdims: bool, outputs=1) -> str:
        """`Reduce<op_type>` over `axes` (None: all): the axes are an input from opset 18 on
        (13 for ReduceSum), an attribute before."""
        keep = int(bool(keepdims))
        if axes is None:
            return self.node(op_type, [value], outputs, keepdims=keep)
        if op_type == "ReduceSum" or self.opset >= 18:
            return self.node(op_type, [value, self.ints(axes, "axes")], outputs, keepdims=keep)
        return self.node(op_type, [value], outputs, axes=list(axes), keepdims=keep)

    # -- errors ----------------------------------------------------------------------------
    def error(self, reason: str, op=None) -> OnnxExportError:
        """An error naming the op (by default the one being converted) and its line."""
        return op_error(op if op is not None else self.op, reason)


def op_error(op, reason: str) -> OnnxExportError:
    """OnnxExportError for `op` (None: the program as a whole): its type, its place in the
    program and the line of the user's script that created it, where the file records one."""
    if op is None:
        return OnnxExportError(reason)
    where = callsite.describe(op.attr("op_callstack") or [])
    index = op.block.ops.index(op) if op in op.block.ops else "?"
    return OnnxExportError(f"op #{index} of block {op.block.idx}: {reason}", op_type=op.type, callsite=where)
