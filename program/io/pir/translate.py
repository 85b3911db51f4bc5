"""A decoded PIR program (schema.py) -> a Keel Program of legacy ops, through op_table.py's rows.

PIR values are SSA: each op result is a new value, identified by its number. Each becomes a
variable (parameters and data keep their names; others get `<legacy op>_<n>.tmp_<k>`). Three
kinds of values need no variable until something reads them as a tensor: constants from
`full` / `full_int_array` / `assign_value_` (folded into the attribute of the op reading them
where the row says so), vectors from `builtin.combine` (a duplicable slot's list), and the
elements of a vector result (`builtin.split` / `builtin.slice`).

Control flow: `pd_op.if` becomes two conditional_blocks (on the condition and on its negation),
each copying its `cf.yield`ed values into variables of the enclosing block, and one select_input
per result; `pd_op.while` becomes a while whose loop variables are variables of the enclosing
block, assigned before the loop and at the end of each iteration (`cf.yield`: the new condition
first, then the new loop variables).
"""
from __future__ import annotations

from dataclasses import dataclass

from keel.program import attrs as attr_codec
from keel.program.errors import KeelError, ParseError
from keel.program.io.pir import schema
from keel.program.io.pir.op_table import IGNORED_ATTRS, ROWS, Fold
from keel.program.ops import registry
from keel.program.ops.control_flow import block_io
from keel.program.program import Program
from keel.proto import pb

_A = pb.AttrType
_T = pb.VarType
FEED, FETCH = "feed", "fetch"
MAX_FOLDED = 1 << 16   # values of a `full` folded into a list attribute (a shape, paddings: a handful)


@dataclass
class Const:
    """A constant value from `full` (scalar `value` filling `shape`) or `full_int_array` /
    `assign_value_` (`values`, a flat list, of `shape`)."""
    dtype: int
    shape: list
    value: float | None = None
    values: list | None = None

    def as_list(self) -> list:
        if self.values is not None:
            return list(self.values)
        count = 1
        for d in self.shape:
            count *= max(int(d), 0)
        if count > MAX_FOLDED:
            raise ValueError(f"a constant of shape {list(self.shape)} ({count:,} values) as an attribute; "
                             f"allowed: at most {MAX_FOLDED:,} values")
        return [self.value] * count

    def as_scalar(self):
        items = self.as_list()
        if len(items) != 1:
            raise ValueError(f"expected one number, got {len(items)}")
        return items[0]


class _Translator:
    def __init__(self, source: str):
        self.source = source
        self.program = Program()
        self.env: dict[int, object] = {}      # value id -> variable name | Const | list (a vector)
        self.unmapped: dict[int, str] = {}    # value id -> why it has no variable
        self.materialized: dict[tuple[int, int], str] = {}
        self.counters: dict[str, int] = {}
        self.feeds: list[str] = []
        self.fetches: list[tuple[int, str]] = []
        self.fetch_names: dict[int, str] = {}  # value id -> the name its fetch op gives it

    # -- errors and names --------------------------------------------------------------------------
    def fail(self, op, message: str):
        raise ParseError(f"{self.source}: {op.where}: {message}")

    def fresh(self, block, stem: str) -> str:
        while True:
            n = self.counters.get(stem, 0)
            self.counters[stem] = n + 1
            name = f"{stem}_{n}.tmp_0"
            if self.program.global_block().find_var(name) is None and block.find_var(name) is None:
                return name

    def op_names(self, block, stem: str):
        """`<stem>_<n>.tmp_0`, `.tmp_1`, ...: one op's output names, as PaddlePaddle names them."""
        base = self.fresh(block, stem)[:-len(".tmp_0")]
        k = 0
        while True:
            name = f"{base}.tmp_{k}"
            if self.program.global_block().find_var(name) is None and block.find_var(name) is None:
                yield name
            k += 1

    def new_var(self, block, stem, vtype: schema.TensorType, name=None, value_id=None, names=None,
                **kwargs) -> str:
        # a fetched value takes the fetch op's name (`fetch_name_0`): the Predictor's output
        # names are then Paddle Inference's
        wanted = self.fetch_names.get(value_id)
        if name is None and wanted and self.program.global_block().find_var(wanted) is None:
            name = wanted
        name = name or (next(names) if names is not None else self.fresh(block, stem))
        kind = _T.DENSE_TENSOR_ARRAY if vtype.kind == "array" else _T.DENSE_TENSOR
        block.create_var(name, list(vtype.dims), vtype.dtype, type=kind, **kwargs)
        return name

    # -- values ----------------------------------------------------------------------------------
    def lookup(self, op, value_id: int):
        if value_id in self.env:
            return self.env[value_id]
        if value_id in self.unmapped:
            self.fail(op, f"reads value %{value_id}, {self.unmapped[value_id]}")
        self.fail(op, f"reads value %{value_id}, which no earlier op or enclosing block defines")

    def define(self, op, value_id: int, entry) -> None:
        if value_id == 0:
            return
        if value_id in self.env or value_id in self.unmapped:
            self.fail(op, f"defines value %{value_id} a second time")
        self.env[value_id] = entry

    def tensor(self, block, op, entry, value_id=None) -> str:
        """The variable holding `entry`: a constant gets one (fill_constant / assign_value) in
        `block` the first time a tensor of it is needed there."""
        if isinstance(entry, str):
            return entry
        if isinstance(entry, Const):
            key = (id(entry), block.idx)
            if key not in self.materialized:
                self.materialized[key] = self._constant_op(block, entry)
            return self.materialized[key]
        self.fail(op, f"reads a vector of {len(entry)} values where one tensor is expected")

    def _constant_op(self, block, const: Const) -> str:
        name = self.fresh(block, "constant")
        block.create_var(name, list(const.shape), const.dtype)
        if const.values is None:
            block.append_op("fill_constant", {}, {"Out": [name]},
                            {"shape": [int(d) for d in const.shape], "dtype": const.dtype,
                             "value": float(const.value)})
        else:
            block.append_op("assign_value", {}, {"Out": [name]},
                            {"shape": [int(d) for d in const.shape], "dtype": const.dtype,
                             "values": [_number(v, const.dtype) for v in const.values]})
        return name

    # -- blocks ----------------------------------------------------------------------------------
    def run(self, pir: schema.PirProgram) -> Program:
        block = self.program.global_block()
        for op in pir.block.ops:
            if op.name == "pd_op.fetch" and len(op.operands) == 1 and isinstance(op.attrs.get("name"), str):
                self.fetch_names.setdefault(op.operands[0], op.attrs["name"])
        self.translate_block(block, pir.block)
        block.create_var(FEED, type=_T.FEED_MINIBATCH, persistable=True)
        block.create_var(FETCH, type=_T.FETCH_LIST, persistable=True)
        for col, name in enumerate(self.feeds):
            block.prepend_op(FEED, {"X": [FEED]}, {"Out": [name]}, {"col": col})
        for col, name in sorted(self.fetches):
            block.append_op(FETCH, {"X": [name]}, {"Out": [FETCH]}, {"col": col})
        return self.program

    def translate_block(self, block, pir_block: schema.Block, on_yield=None) -> None:
        for op in pir_block.ops:
            first = len(block.ops)
            try:
                self.translate_op(block, op, on_yield)
            except ParseError:
                raise
            except KeelError as e:
                self.fail(op, f"cannot be written as legacy ops: {e}")
            # the legacy ops' op_callstack names the PIR op they come from, so a load-time or
            # run-time error points into the file (not at this module)
            for legacy_op in block.ops[first:]:
                legacy_op.set_attr("op_callstack", [f'  File "{self.source}", {op.where}'])

    def translate_op(self, block, op, on_yield) -> None:
        handler = _SPECIAL.get(op.name)
        if handler is not None:
            handler(self, block, op, on_yield)
        elif op.name in ROWS:
            self.by_row(block, op)
        else:
            short = op.name.partition(".")[2]
            self.fail(op, f"op {op.name!r} has no legacy counterpart Keel runs"
                      + (registry.suggest(short.rstrip("_")) or " (no Keel op has a similar name)"))

    # -- the table's rows ------------------------------------------------------------------------
    def by_row(self, block, op) -> None:
        row = ROWS[op.name]
        opdef = registry.lookup(row.legacy)
        if len(op.operands) > len(row.inputs):
            self.fail(op, f"has {len(op.operands)} operands; Keel knows {len(row.inputs)} for it")
        if len(op.results) > len(row.outputs):
            self.fail(op, f"has {len(op.results)} results; Keel knows {len(row.outputs)} for it")
        ins, attrs = {}, {}
        for i, (spec, value_id) in enumerate(zip(row.inputs, op.operands)):
            if value_id == 0 or spec is None:
                continue
            entry = self.lookup(op, value_id)
            if isinstance(spec, Fold):
                self._fold(block, op, i, spec, entry, ins, attrs)
            elif isinstance(entry, list):
                ins[spec] = [self.tensor(block, op, e) for e in entry]
            else:
                ins[spec] = [self.tensor(block, op, entry)]
        legacy = next((alt for slot, alt in row.when_absent.items() if slot not in ins), row.legacy)
        if legacy != row.legacy:
            opdef = registry.lookup(legacy)
        for name, wanted in row.requires.items():
            if name in op.attrs and op.attrs[name] != wanted:
                self.fail(op, f"attribute {name!r} = {op.attrs[name]!r}: the legacy op {legacy} "
                              f"computes only {name} = {wanted!r}")
        for name, value in op.attrs.items():
            if name in IGNORED_ATTRS:
                continue
            legacy_name = row.attrs.get(name, name)
            if legacy_name is None:
                continue
            spec = opdef.attr_spec(legacy_name)
            if spec is None:
                self.fail(op, f"attribute {name!r} has no counterpart in the legacy op {legacy} "
                              f"(its attributes: {', '.join(opdef.attrs) or 'none'})")
            attrs[legacy_name] = self._attr_value(op, name, value, spec.type)
        for name, value in row.fixed.items():
            attrs.setdefault(name, value)
        for rule in row.derive:
            _DERIVE[rule](self, block, op, ins, attrs)
        outs = {}
        out_names = self.op_names(block, legacy)
        for slot, (value_id, vtype) in zip(row.outputs, op.results):
            if slot is None or opdef.output_slots.get(slot) is None:
                self.unmapped[value_id] = f"a result of {op.where} that the legacy op {legacy} does not have"
                continue
            if slot in row.inplace and row.inplace[slot] in ins:
                name = ins[row.inplace[slot]][0]
            elif vtype.kind == "vector":
                names = [self.new_var(block, legacy, t, names=out_names) for t in vtype.elements]
                self.define(op, value_id, names)
                outs[slot] = names
                continue
            elif vtype.kind == "none":
                continue
            else:
                name = self.new_var(block, legacy, vtype, value_id=value_id, names=out_names)
            self.define(op, value_id, name)
            outs[slot] = [name]
        for slot in opdef.output_slots.values():
            # an output the legacy op requires that PIR dropped (flatten's XShape): a scratch variable
            if slot.name not in outs and not slot.dispensable and not slot.intermediate:
                outs[slot.name] = [self.new_var(block, legacy, schema.TensorType("dense", _T.FP32, ()),
                                                names=out_names)]
        block.append_op(legacy, ins, outs, attrs)

    def _fold(self, block, op, index, spec: Fold, entry, ins, attrs) -> None:
        constants = entry if isinstance(entry, list) else [entry]
        if spec.attr and all(isinstance(c, Const) for c in constants):
            try:
                if isinstance(entry, list):
                    value = [c.as_scalar() for c in constants]
                else:
                    value = entry.as_scalar() if spec.scalar else entry.as_list()
            except ValueError as e:
                self.fail(op, f"operand {index} ({spec.attr}): {e}")
            attr_spec = registry.lookup(ROWS[op.name].legacy).attr_spec(spec.attr)
            attrs[spec.attr] = self._attr_value(op, f"operand {index} ({spec.attr})", value, attr_spec.type)
        elif isinstance(entry, list) and spec.tensors:
            ins[spec.tensors] = [self.tensor(block, op, e) for e in entry]
            if spec.unknown is not None:
                try:
                    value = [c.as_scalar() if isinstance(c, Const) else spec.unknown for c in constants]
                except ValueError as e:
                    self.fail(op, f"operand {index} ({spec.attr}): {e}")
                attr_spec = registry.lookup(ROWS[op.name].legacy).attr_spec(spec.attr)
                attrs[spec.attr] = self._attr_value(op, f"operand {index} ({spec.attr})", value, attr_spec.type)
        elif not isinstance(entry, list) and spec.tensor:
            ins[spec.tensor] = [self.tensor(block, op, entry)]
        else:
            self.fail(op, f"operand {index} is computed at run time, but the legacy op "
                          f"{ROWS[op.name].legacy} takes {spec.attr!r} only as a constant attribute")

    def _attr_value(self, op, name, value, attr_type):
        if isinstance(value, schema.Unread):
            self.fail(op, f"attribute {name!r} is of kind {value.kind}, which Keel does not read")
        if isinstance(value, schema.DType):
            value = -1 if value.code is None else value.code
        try:
            return attr_codec.check(attr_type, _widen(value, attr_type))
        except TypeError as e:
            self.fail(op, f"attribute {name!r}: {e}")


def _widen(value, attr_type):
    """PaddlePaddle 3.x writes some attributes at another width or kind than the legacy op
    declares (pool2d strides i64 for INTS, scale factors f64 for FLOATS): same meaning."""
    ints = (_A.INT, _A.LONG)
    if attr_type in ints and isinstance(value, float) and value.is_integer():
        return int(value)
    if attr_type in (_A.FLOAT, _A.FLOAT64) and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if attr_type in (_A.FLOATS, _A.FLOAT64S) and isinstance(value, list):
        return [float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value]
    if attr_type in (_A.INTS, _A.LONGS) and isinstance(value, list):
        return [int(v) if isinstance(v, float) and v.is_integer() else v for v in value]
    return value


def _number(value, dtype):
    return bool(value) if dtype == _T.BOOL else (int(value) if dtype in (_T.INT32, _T.INT64, _T.INT8, _T.UINT8,
                                                                          _T.INT16) else float(value))


# -- derived attributes ------------------------------------------------------------------------------
def _in_dtype(tr, block, op, ins, attrs):
    attrs["in_dtype"] = block.var(ins["X"][0]).dtype


def _reduce_all(tr, block, op, ins, attrs):
    dims = attrs.get("dim")
    rank = len(block.var(ins["X"][0]).shape or ())
    attrs["reduce_all"] = not dims or len(set(d % rank for d in dims)) == rank if rank else True
    attrs.setdefault("dim", [])
    if attrs.get("out_dtype", -1) is None:
        attrs["out_dtype"] = -1


_DERIVE = {"in_dtype": _in_dtype, "reduce_all": _reduce_all}


# -- ops that are not one legacy op -------------------------------------------------------------------
def _parameter(tr, block, op, on_yield):
    value_id, vtype = op.results[0]
    name = op.attrs["name"]
    if block.find_var(name) is not None:
        tr.fail(op, f"parameter {name!r} is defined twice")
    if vtype.kind != "dense":
        tr.fail(op, f"parameter {name!r} must be a dense tensor")
    # a `p` not persistable (the rnn's dropout-state placeholder) has no record in .pdiparams
    tr.new_var(block, name, vtype, name=name, persistable=op.attrs["persistable"])
    tr.define(op, value_id, name)


def _builtin_parameter(tr, block, op, on_yield):
    name = op.attrs.get("parameter_name")
    if not isinstance(name, str):
        tr.fail(op, "attribute 'parameter_name' is missing")
    value_id, vtype = op.results[0]
    tr.new_var(block, name, vtype, name=name, persistable=True)
    tr.define(op, value_id, name)


def _data(tr, block, op, on_yield):
    name = op.attrs.get("name")
    if not isinstance(name, str) or not name:
        tr.fail(op, "attribute 'name' (the input's name) is missing")
    if block.find_var(name) is not None:
        tr.fail(op, f"input {name!r} is defined twice")
    tr.new_var(block, name, _one_result(tr, op)[1], name=name, need_check_feed=True)
    tr.define(op, op.results[0][0], name)
    tr.feeds.append(name)


def _fetch(tr, block, op, on_yield):
    if len(op.operands) != 1:
        tr.fail(op, f"takes one operand, got {len(op.operands)}")
    col = op.attrs.get("col", len(tr.fetches))
    if not isinstance(col, int) or col < 0 or any(c == col for c, _ in tr.fetches):
        tr.fail(op, f"attribute 'col' = {col!r}; allowed: a column >= 0 no other fetch uses")
    tr.fetches.append((col, tr.tensor(block, op, tr.lookup(op, op.operands[0]))))
    for value_id, _ in op.results:
        tr.unmapped[value_id] = "a fetch op's result, which holds nothing"


def _full(tr, block, op, on_yield):
    value_id, vtype = _one_result(tr, op)
    shape, value, dtype = op.attrs.get("shape"), op.attrs.get("value"), op.attrs.get("dtype")
    if not isinstance(shape, list) or not isinstance(dtype, schema.DType) or dtype.code is None:
        tr.fail(op, "attributes 'shape' and 'dtype' are required")
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        tr.fail(op, f"attribute 'shape' must hold integers, got {shape!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        tr.fail(op, f"attribute 'value' must be a number, got {value!r}")
    tr.define(op, value_id, Const(dtype.code, shape, value=value))


def _full_int_array(tr, block, op, on_yield):
    value_id, _ = _one_result(tr, op)
    values, dtype = op.attrs.get("value"), op.attrs.get("dtype")
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        tr.fail(op, f"attribute 'value' must be a list of integers, got {values!r}")
    code = dtype.code if isinstance(dtype, schema.DType) and dtype.code is not None else _T.INT64
    tr.define(op, value_id, Const(code, [len(values)], values=list(values)))


def _assign_value(tr, block, op, on_yield):
    value_id, _ = _one_result(tr, op)
    shape, values, dtype = op.attrs.get("shape"), op.attrs.get("values"), op.attrs.get("dtype")
    if not isinstance(shape, list) or not isinstance(values, list) or not isinstance(dtype, schema.DType) \
            or dtype.code is None:
        tr.fail(op, "attributes 'shape', 'values' and 'dtype' are required")
    if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        tr.fail(op, f"attribute 'shape' must hold sizes >= 0, got {shape!r}")
    count = 1
    for d in shape:
        count *= d
    if any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values) or len(values) != count:
        tr.fail(op, f"attribute 'values' must hold {count} numbers for shape {shape}")
    tr.define(op, value_id, Const(dtype.code, shape, values=list(values)))


def _combine(tr, block, op, on_yield):
    tr.define(op, _one_result(tr, op)[0], [tr.lookup(op, v) for v in op.operands])


def _split(tr, block, op, on_yield):
    vector = _vector_operand(tr, op)
    if len(vector) != len(op.results):
        tr.fail(op, f"splits a vector of {len(vector)} values into {len(op.results)} results")
    for (value_id, _), entry in zip(op.results, vector):
        tr.define(op, value_id, entry)


def _slice(tr, block, op, on_yield):
    vector = _vector_operand(tr, op)
    index = op.attrs.get("index")
    if not isinstance(index, int) or not 0 <= index < len(vector):
        tr.fail(op, f"attribute 'index' = {index!r}; allowed: 0..{len(vector) - 1}")
    tr.define(op, _one_result(tr, op)[0], vector[index])


def _shape64(tr, block, op, on_yield):
    value_id, vtype = _one_result(tr, op)
    source = tr.tensor(block, op, tr.lookup(op, op.operands[0]))
    int32 = tr.new_var(block, "shape", schema.TensorType("dense", _T.INT32, vtype.dims))
    block.append_op("shape", {"Input": [source]}, {"Out": [int32]})
    out = tr.new_var(block, "cast", vtype)
    block.append_op("cast", {"X": [int32]}, {"Out": [out]}, {"in_dtype": _T.INT32, "out_dtype": vtype.dtype})
    tr.define(op, value_id, out)


def _create_array(tr, block, op, on_yield):
    value_id, vtype = _one_result(tr, op)
    tr.define(op, value_id, tr.new_var(block, "array", vtype))


def _array_write(tr, block, op, on_yield):
    if len(op.operands) != 3:
        tr.fail(op, f"takes (array, x, i), got {len(op.operands)} operands")
    array, x, i = (tr.tensor(block, op, tr.lookup(op, v)) for v in op.operands)
    block.append_op("write_to_array", {"X": [x], "I": [i]}, {"Out": [array]})
    tr.define(op, _one_result(tr, op)[0], array)


def _array_read(tr, block, op, on_yield):
    if len(op.operands) != 2:
        tr.fail(op, f"takes (array, i), got {len(op.operands)} operands")
    array, i = (tr.tensor(block, op, tr.lookup(op, v)) for v in op.operands)
    value_id, vtype = _one_result(tr, op)
    out = tr.new_var(block, "read_from_array", vtype)
    block.append_op("read_from_array", {"X": [array], "I": [i]}, {"Out": [out]})
    tr.define(op, value_id, out)


def _array_length(tr, block, op, on_yield):
    array = tr.tensor(block, op, tr.lookup(op, op.operands[0]))
    value_id, vtype = _one_result(tr, op)
    out = tr.new_var(block, "lod_array_length", vtype)
    block.append_op("lod_array_length", {"X": [array]}, {"Out": [out]})
    tr.define(op, value_id, out)


def _array_to_tensor(tr, block, op, on_yield):
    array = tr.tensor(block, op, tr.lookup(op, op.operands[0]))
    outs = {}
    for slot, (value_id, vtype) in zip(("Out", "OutIndex"), op.results):
        outs[slot] = [tr.new_var(block, "tensor_array_to_tensor", vtype)]
        tr.define(op, value_id, outs[slot][0])
    block.append_op("tensor_array_to_tensor", {"X": [array]}, outs,
                    {"axis": int(op.attrs.get("axis", 0)), "use_stack": bool(op.attrs.get("use_stack", False))})


def _assign_out(tr, block, op, on_yield):
    """`assign_out_(x, output)`: x copied into output's variable, in place (dy2static's loop updates)."""
    if len(op.operands) != 2:
        tr.fail(op, f"takes (x, output), got {len(op.operands)} operands")
    source = tr.tensor(block, op, tr.lookup(op, op.operands[0]))
    target = tr.lookup(op, op.operands[1])
    if not isinstance(target, str):
        tr.fail(op, "its output operand must be a variable, not a constant or a vector")
    block.append_op("assign", {"X": [source]}, {"Out": [target]})
    tr.define(op, _one_result(tr, op)[0], target)


def _select_input(tr, block, op, on_yield):
    """`select_input(mask, x0, x1, ...)`: the legacy op with the candidates in X."""
    if len(op.operands) < 2:
        tr.fail(op, f"takes a mask and candidates, got {len(op.operands)} operands")
    mask, *candidates = (tr.tensor(block, op, tr.lookup(op, v)) for v in op.operands)
    value_id, vtype = _one_result(tr, op)
    out = tr.new_var(block, "select_input", vtype, value_id=value_id)
    block.append_op("select_input", {"X": candidates, "Mask": [mask]}, {"Out": [out]})
    tr.define(op, value_id, out)


def _yield(tr, block, op, on_yield):
    if on_yield is None:
        tr.fail(op, "cf.yield outside an if or while body")
    on_yield(op, [tr.lookup(op, v) for v in op.operands])


def _sub_block(tr, parent):
    block = tr.program.create_block(parent.idx)
    tr.program.rollback()
    return block


def _control_op(tr, parent, op_type, cond_slot, cond, sub, attrs):
    reads, writes = block_io(tr.program, sub.idx)
    # (the legacy op lists at least one input: a block that reads nothing from outside lists the
    # condition, which it does not use)
    reads = reads or [cond]
    scope = tr.fresh(parent, f"_{op_type}_scope")
    parent.create_var(scope, type=_T.STEP_SCOPES)
    in_slot = "X" if op_type == "while" else "Input"
    parent.append_op(op_type, {cond_slot: [cond], in_slot: reads},
                     {"Out": writes, "StepScopes" if op_type == "while" else "Scope": [scope]},
                     {"sub_block": sub.idx, **attrs})


def _if(tr, parent, op, on_yield):
    if len(op.regions) != 2 or any(len(r) != 1 for r in op.regions) or len(op.operands) != 1:
        tr.fail(op, "pd_op.if takes a condition and two regions of one block each")
    cond = tr.tensor(parent, op, tr.lookup(op, op.operands[0]))
    negated = tr.new_var(parent, "logical_not", schema.TensorType("dense", _T.BOOL, ()))
    parent.append_op("logical_not", {"X": [cond]}, {"Out": [negated]})
    branch_outputs = []
    for region, condition in zip(op.regions, (cond, negated)):
        sub = _sub_block(tr, parent)
        outer = [tr.new_var(parent, "cond", vtype) for _, vtype in op.results]

        def copy_out(yield_op, entries, sub=sub, outer=outer):
            if len(entries) != len(outer):
                tr.fail(yield_op, f"yields {len(entries)} values for the {len(outer)} results of the if")
            for entry, name in zip(entries, outer):
                sub.append_op("assign", {"X": [tr.tensor(sub, yield_op, entry)]}, {"Out": [name]})
        tr.translate_block(sub, region[0], copy_out)
        _control_op(tr, parent, "conditional_block", "Cond", condition, sub, {"is_scalar_condition": True})
        branch_outputs.append(outer)
    if op.results:
        mask = tr.new_var(parent, "cast", schema.TensorType("dense", _T.INT32, ()))
        parent.append_op("cast", {"X": [cond]}, {"Out": [mask]}, {"in_dtype": _T.BOOL, "out_dtype": _T.INT32})
        for (value_id, vtype), t, f in zip(op.results, *branch_outputs):
            out = tr.new_var(parent, "select_input", vtype, value_id=value_id)
            parent.append_op("select_input", {"X": [f, t], "Mask": [mask]}, {"Out": [out]})
            tr.define(op, value_id, out)


def _while(tr, parent, op, on_yield):
    if len(op.regions) != 1 or len(op.regions[0]) != 1 or not op.operands:
        tr.fail(op, "pd_op.while takes a condition, its loop variables and one region of one block")
    body = op.regions[0][0]
    inits = op.operands[1:]
    if len(body.args) != len(inits) or len(op.results) != len(inits):
        tr.fail(op, f"has {len(inits)} loop variables, {len(body.args)} block arguments and "
                    f"{len(op.results)} results; they must agree")
    cond = tr.new_var(parent, "while_cond", schema.TensorType("dense", _T.BOOL, ()))
    parent.append_op("assign", {"X": [tr.tensor(parent, op, tr.lookup(op, op.operands[0]))]}, {"Out": [cond]})
    loop_vars = []
    for value_id, (arg_id, vtype) in zip(inits, body.args):
        name = tr.new_var(parent, "loop_var", vtype)
        parent.append_op("assign", {"X": [tr.tensor(parent, op, tr.lookup(op, value_id))]}, {"Out": [name]})
        tr.define(op, arg_id, name)
        loop_vars.append(name)
    sub = _sub_block(tr, parent)

    def next_iteration(yield_op, entries):
        if len(entries) != len(loop_vars) + 1:
            tr.fail(yield_op, f"yields {len(entries)} values; the while needs the condition and "
                              f"{len(loop_vars)} loop variables")
        sources = [tr.tensor(sub, yield_op, e) for e in entries]
        # a loop variable yielded as another's new value is copied first (a swap must not
        # read a variable already overwritten)
        for k, source in enumerate(sources):
            if source in loop_vars or source == cond:
                vtype = schema.TensorType("dense", sub.var(source).dtype, tuple(sub.var(source).shape or ()))
                copy = tr.new_var(sub, "loop_copy", vtype)
                sub.append_op("assign", {"X": [source]}, {"Out": [copy]})
                sources[k] = copy
        for source, target in zip(sources, [cond] + loop_vars):
            sub.append_op("assign", {"X": [source]}, {"Out": [target]})
    tr.translate_block(sub, body, next_iteration)
    _control_op(tr, parent, "while", "Condition", cond, sub, {"is_test": True})
    for (value_id, _), name in zip(op.results, loop_vars):
        tr.define(op, value_id, name)


def _one_result(tr, op):
    if len(op.results) != 1:
        tr.fail(op, f"has {len(op.results)} results; expected one")
    return op.results[0]


def _vector_operand(tr, op):
    if len(op.operands) != 1:
        tr.fail(op, f"takes one vector operand, got {len(op.operands)}")
    vector = tr.lookup(op, op.operands[0])
    if not isinstance(vector, list):
        tr.fail(op, f"operand %{op.operands[0]} is not a vector (builtin.combine's or a vector result)")
    return vector


_SPECIAL = {
    schema.PARAMETER_OP: _parameter, "builtin.parameter": _builtin_parameter,
    "pd_op.data": _data, "pd_op.feed": _data, "pd_op.fetch": _fetch,
    "pd_op.full": _full, "pd_op.full_int_array": _full_int_array,
    "pd_op.assign_value_": _assign_value, "pd_op.assign_value": _assign_value,
    "builtin.combine": _combine, "builtin.split": _split, "builtin.slice": _slice,
    "pd_op.shape64": _shape64,
    "pd_op.create_array": _create_array, "pd_op.array_write_": _array_write, "pd_op.array_read": _array_read,
    "pd_op.array_length": _array_length, "pd_op.array_to_tensor": _array_to_tensor,
    "pd_op.assign_out_": _assign_out, "pd_op.select_input": _select_input,
    "pd_op.if": _if, "pd_op.while": _while, "cf.yield": _yield,
}


def translate(pir: schema.PirProgram, source: str) -> Program:
    return _Translator(source).run(pir)
