"""The one program checker: every pass, the loaders and the executor's compiler use it.

It collects every problem before raising, so a user loading a file with three
unsupported op types learns about all three at once."""
from __future__ import annotations

from keel.program import attrs as attr_codec
from keel.program import dtypes, legacy, limits, verify_rules
from keel.program.errors import KeelError, UnsupportedProgramError
from keel.program.ops import registry
from keel.proto import pb

# Variables that ops may name without declaring them (PaddlePaddle's placeholder for "no var").
_PLACEHOLDERS = {"@EMPTY@"}


def program_problems(program) -> list[str]:
    """Every problem of `program`: versions, block structure, variable types, then per op:
    known type, slots, defined variables, attribute presence, types, uniqueness and value
    ranges (program/verify_rules.py, sizes against program/limits.py), and the data flow
    of the feeds and fetches."""
    problems: list[str] = legacy.version_problems(program)
    from keel.program.program import block_structure_problems
    structure = block_structure_problems([b.parent_idx for b in program.blocks])
    if structure:
        return problems + structure  # nothing below may walk a broken block tree
    problems.extend(_var_problems(program))
    unknown: dict[str, list[str]] = {}
    for block in program.blocks:
        for i, op in enumerate(block.ops):
            where = f"block {block.idx} op {i} ({op.type})"
            opdef = registry.lookup(op.type)
            problems.extend(_attr_entry_problems(op, block, program, where))
            if opdef is None:
                unknown.setdefault(op.type, []).append(f"{block.idx}:{i}")
            for kind, slots, known in (("input", op.inputs, opdef and opdef.input_slots),
                                       ("output", op.outputs, opdef and opdef.output_slots)):
                for slot, names in slots.items():
                    spec = known.get(slot) if known is not None else None
                    if spec is not None and not spec.duplicable and len(names) > 1:
                        problems.append(f"{where}: {kind} {slot!r} takes one variable, got {len(names)}: "
                                        f"{names[:4]}")
                    if known is not None and slot not in known and not (
                            kind == "input" and legacy.is_legacy_slot(op.type, slot)):
                        problems.append(f"{where}: unsupported {kind} slot {slot!r}")
                    for name in names:
                        if name not in _PLACEHOLDERS and block.find_var(name) is None:
                            problems.append(f"{where}: {kind} {slot!r} refers to undefined variable {name!r}")
            if opdef is None:
                continue
            problems.extend(f"{where}: {p}" for p in legacy.legacy_problems(op, opdef))
            for slot in opdef.inputs:
                if not slot.dispensable and not [n for n in op.input(slot.name) if n not in _PLACEHOLDERS]:
                    problems.append(f"{where}: missing required input {slot.name!r}")
            for slot in opdef.outputs:  # scratch outputs are not kept between runs
                if slot.intermediate or slot.name in _SCRATCH_OUTPUTS:
                    for name in op.output(slot.name):
                        var = block.find_var(name)
                        if var is not None and var.persistable:
                            problems.append(f"{where}: output {slot.name!r} is persistable variable {name!r}; "
                                            f"allowed: a temporary variable ({slot.name} is scratch data)")
            # the main result (the first output slot); side outputs may be stripped from files
            main = opdef.outputs[0] if opdef.outputs else None
            if main is not None and not main.dispensable and not main.intermediate and not op.output(main.name):
                problems.append(f"{where}: missing required output {main.name!r}")
            for name in op.attrs:
                spec = opdef.attr_spec(name)
                if spec is None and name in registry.RUNTIME_EXTRA_ATTRS:
                    continue
                if spec is None:
                    problems.append(f"{where}: unsupported attribute {name!r}")
                elif op.attr_type(name) != spec.type and not _compatible(spec.type, op.attr_type(name)):
                    problems.append(f"{where}: attribute {name!r} has type "
                                    f"{attr_codec.type_name(op.attr_type(name))}, expected "
                                    f"{attr_codec.type_name(spec.type)}")
            for name, spec in opdef.attrs.items():
                if spec.required and not op.has_attr(name):
                    problems.append(f"{where}: missing required attribute {name!r}")
            if not any(p.startswith(where + ": ") for p in problems):  # ranges need sound types
                problems.extend(verify_rules.op_problems(op, block, where))
    problems.extend(_feed_fetch_problems(program))
    for op_type, places in unknown.items():
        problems.insert(0, f"unknown op type {op_type!r}{registry.suggest(op_type)} at block:op "
                           f"{', '.join(places[:8])}{' ...' if len(places) > 8 else ''}")
    return problems


# Outputs holding a kernel's scratch data, besides the intermediate (`side`) slots: no
# kernel keeps them, so a persistable variable there would be saved and fetched unset.
_SCRATCH_OUTPUTS = {"ReserveSpace"}

# Var kinds whose values are tensors; ops other than feed/fetch take and make only these.
_TENSOR_TYPES = {pb.VarType.DENSE_TENSOR, pb.VarType.DENSE_TENSOR_ARRAY, pb.VarType.SELECTED_ROWS}
_FEED, _FETCH = "feed", "fetch"


def _var_problems(program) -> list[str]:
    """Each tensor variable has a tensor description with a data type Keel has and dims
    that are sizes or -1; each variable an op uses has the kind the op needs."""
    problems = []
    for block in program.blocks:
        for var in block.vars.values():
            where = f"block {block.idx} variable {var.name!r}"
            if var.type not in _TENSOR_TYPES:
                continue
            if var.shape is None:
                problems.append(f"{where}: a {pb.VarType.Type.Name(var.type)} without a tensor description "
                                f"(data type and dims)")
                continue
            if var.dtype not in dtypes.codes():
                problems.append(f"{where}: data type {dtypes.name(var.dtype)} ({var.dtype}) is not one Keel "
                                f"has; allowed: {', '.join(dtypes.name(c) for c in dtypes.codes())}")
            if len(var.shape) > limits.MAX_RANK:
                problems.append(f"{where}: {len(var.shape)} dims; allowed: at most {limits.MAX_RANK}")
        for i, op in enumerate(block.ops):
            where = f"block {block.idx} op {i} ({op.type})"
            for kind, slots in (("input", op.inputs), ("output", op.outputs)):
                for slot, names in slots.items():
                    for name in names:
                        var = block.find_var(name) if name not in _PLACEHOLDERS else None
                        if var is None:
                            continue
                        wanted = _wanted_types(op.type, kind, slot)
                        if var.type not in wanted:
                            what = ", ".join(pb.VarType.Type.Name(t) for t in sorted(wanted))
                            problems.append(f"{where}: {kind} {slot!r} is variable {name!r} of kind "
                                            f"{pb.VarType.Type.Name(var.type)}; allowed: {what}")
    return problems


_ARRAY, _SCOPES = pb.VarType.DENSE_TENSOR_ARRAY, pb.VarType.STEP_SCOPES
_DENSE_OR_ARRAY = {pb.VarType.DENSE_TENSOR, _ARRAY}
# Arguments of other kinds than a dense tensor (control flow): (op, input/output, slot) -> kinds
_OTHER_KINDS = {
    (_FEED, "input", "X"): {pb.VarType.FEED_MINIBATCH},
    (_FETCH, "output", "Out"): {pb.VarType.FETCH_LIST},
    ("conditional_block", "input", "Input"): _DENSE_OR_ARRAY,
    ("conditional_block", "output", "Out"): _DENSE_OR_ARRAY,
    ("conditional_block", "output", "Scope"): {_SCOPES},
    ("conditional_block_grad", "input", "Input"): _DENSE_OR_ARRAY,
    ("conditional_block_grad", "input", "Out"): _DENSE_OR_ARRAY,
    ("conditional_block_grad", "input", "Out@GRAD"): _DENSE_OR_ARRAY,
    ("conditional_block_grad", "input", "Scope"): {_SCOPES},
    ("conditional_block_grad", "output", "Input@GRAD"): _DENSE_OR_ARRAY,
    ("while", "input", "X"): _DENSE_OR_ARRAY,
    ("while_grad", "input", "X"): _DENSE_OR_ARRAY,
    ("while_grad", "input", "Out"): _DENSE_OR_ARRAY,
    ("while_grad", "input", "Out@GRAD"): _DENSE_OR_ARRAY,
    ("while_grad", "input", "StepScopes"): {_SCOPES},
    ("while_grad", "output", "X@GRAD"): _DENSE_OR_ARRAY,
    ("while", "output", "Out"): _DENSE_OR_ARRAY,
    ("while", "output", "StepScopes"): {_SCOPES},
    ("select_input", "input", "X"): _DENSE_OR_ARRAY,
    ("select_input", "output", "Out"): _DENSE_OR_ARRAY,
    ("select_output", "input", "X"): _DENSE_OR_ARRAY,
    ("select_output", "output", "Out"): _DENSE_OR_ARRAY,
    ("assign", "input", "X"): _DENSE_OR_ARRAY,
    ("assign", "output", "Out"): _DENSE_OR_ARRAY,
    ("write_to_array", "output", "Out"): {_ARRAY},
    ("read_from_array", "input", "X"): {_ARRAY},
    ("lod_array_length", "input", "X"): {_ARRAY},
    ("tensor_array_to_tensor", "input", "X"): {_ARRAY},
    ("tensor_array_to_tensor_grad", "input", "X"): {_ARRAY},
    ("tensor_array_to_tensor_grad", "output", "X@GRAD"): {_ARRAY},
}


def _wanted_types(op_type: str, kind: str, slot: str) -> set:
    """The var kinds an op argument may have: the feed list for a feed op's input, the fetch
    list for a fetch op's output, tensor arrays and step scopes where control flow takes
    them, else a dense tensor (the only kind the other kernels take and make, and the only
    kind a parameter file holds)."""
    return _OTHER_KINDS.get((op_type, kind, slot), {pb.VarType.DENSE_TENSOR})


def _attr_entry_problems(op, block, program, where) -> list[str]:
    """Each attribute given once, or repeated with one type and value (PaddlePaddle 3.3.1
    writes reshape2's `use_quantizer` and `mkldnn_data_type` twice): two different values
    are ambiguous (which did the writer mean?) and refused. Each block index an attribute
    holds names a sub-block of this block."""
    problems = []
    seen: dict[str, object] = {}
    reported = set()
    for a in op.desc.attrs:
        if a.name in seen and seen[a.name] != a and a.name not in reported:
            values = [attr_codec.decode(b) for b in op.desc.attrs if b.name == a.name]
            problems.append(f"{where}: attribute {a.name!r} is given {len(values)} times with different "
                            f"values ({', '.join(verify_rules._show(v) for v in values)}); allowed: "
                            f"once, or repeated with the same value")
            reported.add(a.name)
        seen.setdefault(a.name, a)
        indices = [a.block_idx] if a.type == attr_codec.A.BLOCK else (
            list(a.blocks_idx) if a.type == attr_codec.A.BLOCKS else [])
        for idx in indices:
            if not 0 < idx < len(program.blocks) or _is_ancestor(program, idx, block.idx):
                problems.append(f"{where}: attribute {a.name!r} = {idx} names no sub-block of block "
                                f"{block.idx}; allowed: a block index in [1, {len(program.blocks) - 1}] "
                                f"other than this block and its parents")
    return problems


def _is_ancestor(program, idx: int, of: int) -> bool:
    at = of
    for _ in range(len(program.blocks)):
        if at == idx:
            return True
        if at < 0:
            return False
        at = program.blocks[at].parent_idx
    return False


def _feed_fetch_problems(program) -> list[str]:
    """In block 0: feed and fetch ops' columns are distinct and >= 0, and every fetched
    variable is computed by an op before its fetch, fed, or persistable. In a program that
    has feed ops (an inference program: nothing else is fed), every variable an op reads is
    as well."""
    block = program.global_block()
    problems = []
    written: set[str] = set()
    has_feeds = any(op.type == _FEED for op in block.ops)
    cols: dict[str, dict[int, int]] = {_FEED: {}, _FETCH: {}}
    for i, op in enumerate(block.ops):
        where = f"block 0 op {i} ({op.type})"
        if op.type in cols:
            col = op.attr("col")
            if isinstance(col, int):
                if col < 0:
                    problems.append(f"{where}: attribute 'col' = {col}; allowed: >= 0")
                elif col in cols[op.type]:
                    problems.append(f"{where}: attribute 'col' = {col} is also op {cols[op.type][col]}'s; "
                                    f"allowed: one {op.type} op per column")
                else:
                    cols[op.type][col] = i
            slot = "Out" if op.type == _FEED else "X"
            if len(op.input(slot) if op.type == _FETCH else op.output(slot)) != 1:
                problems.append(f"{where}: {'output' if op.type == _FEED else 'input'} {slot!r} must name "
                                f"exactly one variable")
        if op.type != _FEED and (has_feeds or op.type == _FETCH):
            for slot, names in op.inputs.items():
                for name in names:
                    var = block.find_var(name)
                    if var is None or name in written or var.persistable or name in _PLACEHOLDERS:
                        continue
                    if var.type == pb.VarType.DENSE_TENSOR_ARRAY:
                        continue  # a tensor array starts empty
                    if not has_feeds and var.need_check_feed:
                        continue  # a data variable, fed through Executor.run(feed=...)
                    if op.type == _FETCH:
                        problems.append(f"{where}: fetches {name!r}, which no op before it computes and "
                                        f"which is neither fed nor persistable")
                    else:
                        problems.append(f"{where}: input {slot!r} reads {name!r}, which no op before it "
                                        f"computes and which is neither fed nor persistable")
        written.update(n for names in op.outputs.values() for n in names)
    return problems


# Integer attrs written with a wider/narrower integer type, and float attrs written as
# float64, are read back the same way by PaddlePaddle; accept them.
_EQUIVALENT = [{attr_codec.A.INT, attr_codec.A.LONG}, {attr_codec.A.INTS, attr_codec.A.LONGS},
               {attr_codec.A.FLOAT, attr_codec.A.FLOAT64}, {attr_codec.A.FLOATS, attr_codec.A.FLOAT64S}]


def _compatible(expected: int, found: int | None) -> bool:
    return any(expected in group and found in group for group in _EQUIVALENT)


def shape_problems(program, values: dict | None = None) -> list[str]:
    """Each op of block 0, in order, through its own shape rule, starting from the declared
    shapes of the feeds and the real shapes of the parameters (`values`: name -> array, as
    loaded): what a kernel would refuse at run time on shapes alone (a weight that does not
    fit its input, a reshape to another size, a concat of mismatched parts) is named at load
    instead. Works on a copy; the program is not changed."""
    from keel.program.ops.infer import InferContext, VarInfo
    from keel.program.program import Program

    copy = Program.from_desc(program.to_desc(), verify=False)
    block = copy.global_block()
    for name, value in (values or {}).items():
        var = block.vars.get(name)
        if var is not None and var.shape is not None and hasattr(value, "shape"):
            var.shape = tuple(value.shape)

    def lookup(name):
        v = block.var(name)
        return VarInfo(name, tuple(v.shape or ()), v.dtype)

    def set_var(name, shape, dtype):
        v = block.var(name)
        v.shape, v.dtype = shape, dtype

    problems = []
    for i, op in enumerate(block.ops):
        opdef = registry.lookup(op.type)
        if opdef is None or opdef.infer is None or op.type in (_FEED, _FETCH):
            continue
        inputs = {slot: [n for n in names if n not in _PLACEHOLDERS] for slot, names in op.inputs.items()}
        try:
            attrs = {**opdef.default_attrs(), **op.attrs}  # a file may rely on the defaults
            opdef.infer(InferContext(op.type, inputs, op.outputs, attrs, lookup, set_var, None))
        except KeelError as e:
            problems.append(f"block 0 op {i} ({op.type}): {getattr(e, 'reason', e)}")
        except Exception as e:  # noqa: BLE001 - a shape rule meeting shapes no builder makes
            problems.append(f"block 0 op {i} ({op.type}): its inputs' shapes cannot be used "
                            f"({type(e).__name__}: {e})")
    return problems


def verify_program(program, source: str = "program") -> None:
    problems = program_problems(program)
    if problems:
        raise UnsupportedProgramError(problems, source)




def check_loaded(program, source: str) -> None:
    """What every loader runs on a program read from a file: the verifier, then every op's
    shape rule on the declared shapes, so what a kernel would refuse on shapes alone is named
    now (load_inference_model checks again with the parameters' real shapes)."""
    verify_program(program, source=source)
    problems = shape_problems(program)
    if problems:
        from keel.program.errors import UnsupportedProgramError
        raise UnsupportedProgramError(problems, source)
