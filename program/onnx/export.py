"""A Keel program (its global block, with the parameters' values) as an ONNX ModelProto.

The feeds become the graph's inputs and the fetches its outputs, in `col` order and under
their own names; each op becomes the ONNX nodes its converter (registry.py) appends; the
parameters an op reads become initializers. Everything is built with the `onnx` package's
helpers and checked with `onnx.checker` (full check: types and shapes inferred through the
whole graph) before it is returned.
"""
from __future__ import annotations

import numpy as np

from keel.program import dtypes
from keel.program.onnx.graph import GraphBuilder, op_error
from keel.program.onnx.registry import OnnxExportError, load_converters

FEED, FETCH = "feed", "fetch"
MIN_OPSET = 13  # Squeeze/Unsqueeze/Split/ReduceSum take their axes as inputs from 13 on
DEFAULT_OPSET = 17


def io_names(program) -> tuple[list[str], list[str]]:
    """(feed names, fetch names) of an inference program, in `col` order."""
    ops = program.global_block().ops
    feeds = sorted((op for op in ops if op.type == FEED), key=lambda op: op.attr("col"))
    fetches = sorted((op for op in ops if op.type == FETCH), key=lambda op: op.attr("col"))
    return [op.output("Out")[0] for op in feeds], [op.input("X")[0] for op in fetches]


def untranslatable_ops(program) -> list:
    """The ops of `program` (any block) that no converter handles, in program order."""
    converters = load_converters()
    return [op for block in program.blocks for op in block.ops
            if op.type not in converters and op.type not in (FEED, FETCH)]


def program_to_onnx(program, params, feed_names=None, fetch_names=None, *, opset_version: int = DEFAULT_OPSET,
                    dynamic_batch: bool = False, graph_name: str = "keel", check: bool = True,
                    intermediates: bool = False):
    """The ONNX model computing `fetch_names` from `feed_names` (default: the program's
    feed and fetch ops). `params`: name -> numpy array for the persistable variables the
    ops read. `dynamic_batch`: every input's first dimension is symbolic ("batch"), where
    the program fixed it. `intermediates`: also output, after the fetches, every other
    variable the global block's ops compute whose value the graph holds under the variable's
    own name (written once, by a node: what a per-op inspection such as the Predictor's
    hooks reads). Raises OnnxExportError naming the first op that cannot be written
    (and listing every such op type) before building anything."""
    import onnx
    from onnx import helper

    max_opset = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset_version <= max_opset:
        raise OnnxExportError(f"opset_version {opset_version} is not one Keel writes: choose {MIN_OPSET} to "
                              f"{max_opset} (the installed onnx {onnx.__version__} knows up to {max_opset})")
    if feed_names is None or fetch_names is None:
        feeds, fetches = io_names(program)
        feed_names = feeds if feed_names is None else list(feed_names)
        fetch_names = fetches if fetch_names is None else list(fetch_names)
    if not fetch_names:
        raise OnnxExportError("the program fetches nothing: pass fetch_names (or export an inference program, "
                              "which has fetch ops)")
    _refuse_untranslatable(program)

    block = program.global_block()
    g = GraphBuilder(block, params, opset_version)
    g.fetches.update(fetch_names)
    inputs = []
    for name in feed_names:
        var = block.var(name)
        g.bind(name, name)
        inputs.append(_value_info(helper, name, var, dynamic_batch, symbolic=True))
    convert_ops(g, block.ops)
    _name_outputs(g, fetch_names, set(feed_names))
    if intermediates:
        fetch_names = fetch_names + _held_intermediates(g, block, set(fetch_names) | set(feed_names))
    outputs = [_value_info(helper, name, block.var(name), dynamic_batch, symbolic=False) for name in fetch_names]

    read = _names_read(g.nodes) | set(fetch_names)
    initializers = [tensor for name, tensor in g.initializers.items() if name in read]
    graph = helper.make_graph(g.nodes, graph_name, inputs, outputs, initializer=initializers)
    model = helper.make_model(graph, producer_name="keel", producer_version=_keel_version(),
                              opset_imports=[helper.make_opsetid("", opset_version)],
                              ir_version=helper.find_min_ir_version_for([helper.make_opsetid("", opset_version)]))
    _infer_unknown_output_shapes(onnx, model)
    if check:
        onnx.checker.check_model(model, full_check=True)
    return model


def _infer_unknown_output_shapes(onnx, model) -> None:
    """Outputs declared without a shape (see _value_info) get the shape ONNX's inference
    finds for their values (a graph output needs one)."""
    outputs = model.graph.output
    if all(out.type.tensor_type.HasField("shape") for out in outputs):
        return
    inferred = onnx.shape_inference.infer_shapes(model).graph.output
    for out, typed in zip(outputs, inferred):
        if not out.type.tensor_type.HasField("shape"):
            out.CopyFrom(typed)


def convert_ops(g: GraphBuilder, ops) -> None:
    """Append every op of `ops` (feed and fetch ops aside) to `g`, in order."""
    converters = load_converters()
    for op in ops:
        if op.type in (FEED, FETCH):
            continue
        g.op = op
        converters[op.type](g, op)
    g.op = None


def _held_intermediates(g: GraphBuilder, block, exclude) -> list[str]:
    """The global block's op outputs (in op order, not in `exclude`, not persistable) whose
    newest value a node wrote under the variable's own name."""
    written = {out for node in g.nodes for out in node.output}
    names = dict.fromkeys(name for op in block.ops if op.type not in (FEED, FETCH) for name in op.output_arg_names)
    return [name for name in names if name not in exclude and g._current.get(name) == name and name in written
            and not block.var(name).persistable]


def _refuse_untranslatable(program) -> None:
    missing = untranslatable_ops(program)
    if missing:
        types = sorted({op.type for op in missing})
        raise op_error(missing[0], f"Keel has no ONNX translation for this op; the program's untranslatable "
                                    f"op types: {', '.join(types)}")


def _value_info(helper, name, var, dynamic_batch: bool, symbolic: bool):
    """A graph input or output: the variable's element type and shape (-1 dims: named
    `<name>_d<i>` for an input, unknown for an output; the first one `batch` when
    `dynamic_batch`)."""
    shape = []
    for i, dim in enumerate(var.shape or ()):
        if i == 0 and dynamic_batch:
            shape.append("batch")
        elif dim < 0:
            shape.append(f"{name}_d{i}" if symbolic else None)
        else:
            shape.append(int(dim))
    elem = helper.np_dtype_to_tensor_dtype(dtypes.to_numpy(var.dtype))
    # an output declared with no dims may be one whose shape PaddlePaddle did not know when it
    # wrote the file (a cond's select_input result): declared of unknown shape, not 0-d
    unknown = var.shape is None or (not symbolic and len(var.shape) == 0)
    return helper.make_tensor_value_info(name, elem, None if unknown else shape)


def _name_outputs(g: GraphBuilder, fetch_names, feed_names) -> None:
    """Make each output's final value carry the fetch variable's own name. A fetched feed is
    its own output; a fetched parameter is copied out of its (renamed) initializer; any
    other value is renamed, after an earlier value of the variable that held the name gets
    a fresh one."""
    for name in fetch_names:
        final = g.value(name)
        if final == name and name not in g.initializers:
            continue
        if name in feed_names:
            raise OnnxExportError(f"variable {name!r} is both fed and fetched, and the program writes it in "
                                  f"between: an ONNX graph's input and output cannot share a name")
        if final in g.initializers:
            moved = g.fresh(final)
            tensor = g.initializers.pop(final)
            tensor.name = moved
            g.initializers[moved] = tensor
            _rename(g.nodes, final, moved)
            g.node("Identity", [moved], [name])
        else:
            if name in g._taken and name not in feed_names:
                _rename(g.nodes, name, g.fresh(name))
            _rename(g.nodes, final, name)
        g._current[name] = name


def _names_read(nodes) -> set[str]:
    """The value names that `nodes` (and the graphs nested in them) read: the initializers
    no node reads (a constant op's result only a converter looked at) are left out."""
    names = set()
    for node in nodes:
        names.update(node.input)
        for attr in node.attribute:
            if attr.HasField("g"):
                names |= _names_read(attr.g.node) | {o.name for o in attr.g.output}
            for sub in attr.graphs:
                names |= _names_read(sub.node) | {o.name for o in sub.output}
    return names


def _rename(nodes, old: str, new: str) -> None:
    """Replace the value name `old` by `new` in `nodes` and the graphs nested in them."""
    for node in nodes:
        for i, v in enumerate(node.input):
            if v == old:
                node.input[i] = new
        for i, v in enumerate(node.output):
            if v == old:
                node.output[i] = new
        for attr in node.attribute:
            if attr.HasField("g"):
                _rename(attr.g.node, old, new)
            for sub in attr.graphs:
                _rename(sub.node, old, new)


def _keel_version() -> str:
    try:
        from importlib.metadata import version
        return version("keel")
    except Exception:  # noqa: BLE001  (not installed: running from a checkout)
        return "0"
