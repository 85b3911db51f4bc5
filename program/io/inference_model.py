"""Inference models: `<prefix>.pdmodel` + `<prefix>.pdiparams`, as PaddlePaddle writes them.

    pg.io.save_inference_model("out/digits", [image], [probs], exe, program=main)
    program, feed_names, fetch_targets = pg.io.load_inference_model("out/digits", exe)

Saving takes the evaluation form of the program (`clone(for_test=True)`: no backward or
optimizer ops, `is_test` on), keeps only the ops the fetch targets need from the feeds,
and lays the file out the way PaddlePaddle's saved inference programs are (as
PaddlePaddle 3.3.1 writes them): `feed` ops first (prepended one by one, so
the highest `col` comes first), `fetch` ops last, variables sorted by name followed by
the `feed`/`fetch` lists, slots and attributes sorted, runtime-only attributes and the
outputs PaddlePaddle strips (dropout's Mask, XShape of transpose2/squeeze2/...) removed,
and the parameters the pruned program reads in one combined file in byte-wise name
order, none at all when it reads none. The two files are replaced as one (`atomic.FileSet`):
a save killed at any moment leaves the old pair or the new one, never a mix.

`format="pir"` writes the program as PaddlePaddle 3.x's PIR JSON (`<prefix>.json`,
program/io/pir/write.py) instead; the parameter file is the same. Either save removes the
other format's program file beside it in the same set (a loader would prefer a stale `.json`).

The executor and scope are taken by duck typing (`scope.get/set`), so this module does
not depend on the executor package.
"""
from __future__ import annotations

import os

from keel.program import attrs as attr_codec
from keel.program.errors import OpError, ProgramError, UnsupportedProgramError
from keel.program.io.program_file import (PARAMS_SUFFIX, load_params, load_program, model_file_set, model_files,
                                          persistable_specs, save_params)
from keel.program.io.atomic import FileSet, atomic_write, complete_interrupted
from keel.program.ops import registry
from keel.program.ops.control_flow import CONTROL_FLOW_OPS, control_io
from keel.program.program import Program
from keel.program.variable import Variable
from keel.proto import pb

FEED, FETCH = "feed", "fetch"
PROGRAM_FORMATS = {"legacy": ".pdmodel", "pir": ".json"}
_KEPT_COMMON = {"op_role": 0, "op_role_var": [], "op_device": "", "op_namescope": "/"}


def _names(items, what) -> list[str]:
    names = []
    for item in items if isinstance(items, (list, tuple)) else [items]:
        name = item.name if isinstance(item, Variable) else item
        if not isinstance(name, str):
            raise TypeError(f"save_inference_model: {what} must be Variables or names, got {item!r}")
        names.append(name)
    return names


def inference_program(program: Program, feed_names, fetch_names) -> Program:
    """The pruned, feed/fetch-wrapped inference form of `program` (see the module doc)."""
    test = program.clone(for_test=True)
    block = test.global_block()
    for name in list(feed_names) + list(fetch_names):
        if block.find_var(name) is None:
            raise ProgramError(f"save_inference_model: {name!r} is not a variable of the program"
                               f"{block._suggest_var(name)}")
    # prune: walk back from the fetch targets, stopping at the feeds: a feed's producer is
    # replaced by the feed, but an op updating a feed in place (a dy2static loop whose loop
    # variable is the fed tensor) runs after it, so it stays. A conditional_block / while
    # counts as reading and writing what its sub-block does, and as reading its own slots
    # (dy2static lists loop variables the body only writes, e.g. `undefined_var`s).
    needed, kept, feeds = set(fetch_names), [], set(feed_names)
    io = {id(op): _control_reads_writes(test, op) if op.type in CONTROL_FLOW_OPS else
          (op.input_arg_names, op.output_arg_names) for op in block.ops}
    for op in reversed(block.ops):
        if op.type in (FEED, FETCH):
            continue
        ins, outs = io[id(op)]
        if any(n in needed and (n not in feeds or n in ins) for n in outs):
            kept.append(op)
            needed.update(io[id(op)][0])
    kept.reverse()
    unfed = sorted(n for n in needed - feeds - {n for op in kept for n in io[id(op)][1]}
                   if not block.var(n).persistable and block.var(n).type != pb.VarType.DENSE_TENSOR_ARRAY)
    if unfed:
        raise ProgramError(f"save_inference_model: the fetch targets need {unfed}, which are neither "
                           f"fed ({list(feed_names)}) nor computed from the feeds")

    out = pb.BlockDesc(idx=0, parent_idx=-1)
    used = set(feed_names) | set(fetch_names)
    for op in kept:
        used.update(n for n in op.input_arg_names + op.output_arg_names + io[id(op)][0] + io[id(op)][1])
        out.ops.append(_inference_op(op))
    for name in sorted(used):
        out.vars.append(_inference_var(block.var(name), name in feeds))
    out.vars.append(pb.VarDesc(name=FEED, type=pb.VarType(type=pb.VarType.FEED_MINIBATCH), persistable=True))
    out.vars.append(pb.VarDesc(name=FETCH, type=pb.VarType(type=pb.VarType.FETCH_LIST), persistable=True))
    for col, name in enumerate(feed_names):
        out.ops.insert(0, _io_op(FEED, {"X": [FEED]}, {"Out": [name]}, col))
    for col, name in enumerate(fetch_names):
        out.ops.append(_io_op(FETCH, {"X": [name]}, {"Out": [FETCH]}, col))
    desc = pb.ProgramDesc()
    desc.CopyFrom(test.header)
    desc.blocks.append(out)
    for sub in test.blocks[1:]:  # control flow's sub-blocks, kept whole (their indices are attributes)
        copy = pb.BlockDesc(idx=sub.idx, parent_idx=sub.parent_idx)
        copy.ops.extend(_inference_op(op) for op in sub.ops)
        copy.vars.extend(_inference_var(var, False) for var in sub.vars.values())
        desc.blocks.append(copy)
    return Program.from_desc(desc, source="inference program")


def _control_reads_writes(program, op):
    reads, writes = control_io(program, op)
    return list(dict.fromkeys(reads + op.input_arg_names)), writes


def _inference_var(var, is_feed: bool) -> pb.VarDesc:
    desc = pb.VarDesc()
    desc.CopyFrom(var.desc)
    desc.ClearField("is_parameter")
    desc.ClearField("stop_gradient")
    desc.need_check_feed = is_feed
    if not is_feed:
        desc.ClearField("need_check_feed")
    return desc


# Extra attributes that carry an op's meaning where they differ from their default (the
# writer drops extra attributes, as PaddlePaddle's does): such an op is refused, not
# written as another op. fused_conv2d's are its activation's parameters, set only by the
# in-memory fusion (program/passes/fuse_conv.py PARAMETERISED).
_MEANINGFUL_EXTRA = {"fused_conv2d": ("fuse_alpha", "fuse_beta")}


def _inference_op(op) -> pb.OpDesc:
    """The op with sorted slots and attributes, no runtime-only attributes or stripped
    outputs, and the role attributes of an inference program."""
    opdef = op.opdef
    for name in _MEANINGFUL_EXTRA.get(op.type, ()):
        if op.has_attr(name) and op.attr(name) != opdef.extra_attrs[name].default:
            raise OpError(f"save_inference_model: the op writing {op.output_arg_names} has {name}="
                          f"{op.attr(name)}, an extra attribute inference files drop, so the file would hold "
                          f"another op; optimize a program for files with in_memory=False",
                          op_type=op.type, callsite=op.callsite)
    desc = pb.OpDesc(type=op.type)
    for slot in sorted(op.inputs):
        if opdef is not None and slot not in opdef.input_slots and not op.input(slot):
            continue  # an empty legacy slot (2.x conv2d's Bias, ResidualData)
        desc.inputs.add(parameter=slot, arguments=op.input(slot))
    for slot in sorted(op.outputs):
        spec = opdef.output_slots.get(slot) if opdef else None
        if spec is not None and spec.extra:
            continue
        desc.outputs.add(parameter=slot, arguments=op.output(slot))
    values = dict(op.attrs)
    values.update(_KEPT_COMMON)
    for name in ("op_callstack", "with_quant_attr"):
        values.pop(name, None)
    for name in sorted(values):
        spec = opdef.attr_spec(name) if opdef else None
        if spec is None or name in opdef.extra_attrs:
            continue  # runtime-only (use_mkldnn, ...)
        attr_codec.encode(desc.attrs.add(), name, op.attr_type(name) or spec.type, values[name])
    return desc


def _io_op(type, inputs, outputs, col) -> pb.OpDesc:
    desc = pb.OpDesc(type=type)
    for slots, given in ((desc.inputs, inputs), (desc.outputs, outputs)):
        for slot, names in given.items():
            slots.add(parameter=slot, arguments=names)
    attr_codec.encode(desc.attrs.add(), "col", pb.AttrType.INT, col)
    for name, value in sorted({**_KEPT_COMMON, "with_quant_attr": False}.items()):
        spec = registry.COMMON_ATTRS[name]
        attr_codec.encode(desc.attrs.add(), name, spec.type, value)
    return desc


def save_inference_model(path_prefix, feed_vars, fetch_vars, executor=None, *, program: Program | None = None,
                         scope=None, format: str = "legacy") -> Program:
    """Write `<path_prefix>.pdmodel` (`format="pir"`: `<path_prefix>.json`, PaddlePaddle 3.x's
    PIR program) and (when the model has parameters) `<path_prefix>.pdiparams`. `scope`
    (default: the executor's global scope) holds the parameter values. Returns the inference
    program that was written.

    Examples:
        >>> import numpy as np
        >>> import keel.program as pg
        >>> from keel.executor import Executor
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 4])
        ...     y = pg.nn.fc(x, 2)
        >>> exe = Executor()
        >>> _ = exe.run(startup)
        >>> _ = pg.io.save_inference_model("out/fc", [x], [y], exe, program=main)
        >>> program, feeds, fetches = pg.io.load_inference_model("out/fc", exe)
        >>> feeds, exe.run(program, feed={"x": np.ones((3, 4), "float32")}, fetch_list=fetches)[0].shape
        (['x'], (3, 2))
    """
    if program is None:
        from keel.program.default import default_main_program
        program = default_main_program()
    suffix = program_suffix(format)
    infer, values = inference_model_values(program, feed_vars, fetch_vars, _scope(scope, executor))
    prefix = os.fspath(path_prefix)
    directory = os.path.dirname(prefix)
    if directory:
        os.makedirs(directory, exist_ok=True)
    write_model_pair(infer, prefix + suffix, prefix + PARAMS_SUFFIX, values)
    return infer


def inference_model_values(program: Program, feed_vars, fetch_vars, scope) -> tuple[Program, dict]:
    """What save_inference_model writes, in memory: the pruned inference program computing
    `fetch_vars` from `feed_vars`, and its parameters' values (numpy arrays) from `scope`."""
    feed_names, fetch_names = _names(feed_vars, "feed_vars"), _names(fetch_vars, "fetch_vars")
    infer = inference_program(program, feed_names, fetch_names)
    params = [name for name, _, _ in persistable_specs(infer)]
    missing = [n for n in params if scope.find_var(n) is None]
    if missing:
        raise ProgramError(f"save_inference_model: no value in the scope for parameter(s) {missing}; "
                           "run the startup program (or load a checkpoint) first")
    return infer, {n: _host(scope.get(n)) for n in params}


def program_suffix(format: str) -> str:
    """The program file's suffix for a `format` ("legacy": .pdmodel, "pir": .json)."""
    if format not in PROGRAM_FORMATS:
        raise ValueError(f"format={format!r}; allowed: {', '.join(map(repr, PROGRAM_FORMATS))}")
    return PROGRAM_FORMATS[format]


def write_model_pair(program: Program, model_file: str, params_file: str, values) -> None:
    """`program` as `model_file` (PIR JSON for a .json name, else a ProgramDesc) and its
    persistable values as `params_file`, replaced as one set with the program file of the other
    format beside it (which loaders would otherwise prefer or mix in): the old files or the
    new, never a mix."""
    files_set = model_file_set(model_file, params_file)
    # the program is serialized first: an op PIR cannot express fails before any file changes
    if model_file.endswith(".json"):
        from keel.program.io.pir.write import write_pir_program  # PIR's tables load with the first PIR file
        data = write_pir_program(program, model_file)
    else:
        data = program.serialize_to_string()
    with FileSet(files_set) as files:
        if persistable_specs(program):
            save_params(program, values, files.temp(params_file))
        else:
            files.remove(params_file)  # a parameter-free model has no params file (as in Paddle)
        for other in files_set[2:]:
            files.remove(other)
        atomic_write(files.temp(model_file), data)
        files.commit()


def load_inference_model(path_prefix, executor=None, *, scope=None, model_filename=None,
                         params_filename=None):
    """Read an inference model (ours or PaddlePaddle's) and put its parameters in `scope`
    (default: the executor's global scope). Returns (program, feed_names, fetch_targets),
    feeds and fetches in `col` order.

    Examples:
        >>> import numpy as np
        >>> import keel.program as pg
        >>> from keel.executor import Executor
        >>> main, startup = pg.Program(), pg.Program()
        >>> with pg.program_guard(main, startup):
        ...     x = pg.data("x", [-1, 4])
        ...     y = pg.nn.fc(x, 2, activation="softmax")
        >>> exe = Executor()
        >>> _ = exe.run(startup)
        >>> _ = pg.io.save_inference_model("out/clf", [x], [y], exe, program=main)
        >>> program, feeds, fetches = pg.io.load_inference_model("out/clf", exe)
        >>> probs, = exe.run(program, feed={feeds[0]: np.ones((3, 4), "float32")}, fetch_list=fetches)
        >>> np.allclose(probs.sum(axis=1), 1.0)
        True
    """
    prefix = os.fspath(path_prefix)
    found_model, found_params = model_files(prefix)  # prefix.json (PIR) or prefix.pdmodel
    model_file = model_filename or found_model
    params_file = params_filename or found_params
    complete_interrupted(model_file_set(model_file, params_file))  # a save killed mid-way is finished first
    program = load_program(model_file)
    specs = persistable_specs(program)
    if specs:
        if not os.path.exists(params_file):
            raise ProgramError(f"{model_file} has {len(specs)} parameter(s) but {params_file} does not exist")
        values = load_params(program, params_file)
        _check_shapes(program, values, model_file)
        scope = _scope(scope, executor)
        to_device = getattr(executor, "to_device", None)  # onto the executor's device (its GPU, if one)
        for name, value in values.items():
            scope.set(name, to_device(value) if to_device is not None else value)
    else:
        _check_shapes(program, {}, model_file)
    block = program.global_block()
    feeds = sorted((op for op in block.ops if op.type == FEED), key=lambda op: op.attr("col"))
    fetches = sorted((op for op in block.ops if op.type == FETCH), key=lambda op: op.attr("col"))
    return (program, [op.output("Out")[0] for op in feeds],
            [block.var(op.input("X")[0]) for op in fetches])


def _check_shapes(program, values, model_file) -> None:
    """Every op's shape rule on the feeds' declared and the parameters' real shapes: a
    program that could only fail at run time on shapes is refused at load, naming each op."""
    from keel.program.verify import shape_problems
    problems = shape_problems(program, values)
    if problems:
        raise UnsupportedProgramError(problems, model_file)


def _scope(scope, executor):
    if scope is not None:
        return scope
    if executor is None or not hasattr(executor, "global_scope"):
        raise TypeError("pass scope=..., or an Executor whose global scope holds the parameters")
    return executor.global_scope()


def _host(value):
    return value.get() if hasattr(value, "get") and not hasattr(value, "__array_interface__") else value
