"""A decoded PIR program (schema.py) -> a Keel Program of legacy ops, through op_table.py's rows.

PIR values are SSA: each op result is a new value, identified by its number. Each becomes a
variable (parameters and data keep their names; others get `<legacy op>_<n>.tmp_<k>`). Three
kinds of values need no variable until something reads them as a tensor: constants from
`full` / `full_int_array` / `assign_value_` (folded into the attribute of the op reading them
where the row says so), vectors from `builtin.combine` (a duplicable slot's list), and the
elements of a vector result (`builtin.split` / `builtin.slice`).

The ops that are not one legacy op each are special_ops.py's and control_flow.py's.
"""
from __future__ import annotations

from keel.program import attrs as attr_codec
from keel.program.errors import KeelError, ParseError
from keel.program.io.pir import control_flow, schema, special_ops
from keel.program.io.pir.op_table import IGNORED_ATTRS, ROWS, Fold
from keel.program.io.pir.special_ops import Const, number_value
from keel.program.ops import registry
from keel.program.program import Program
from keel.proto import pb

_A = pb.AttrType
_T = pb.VarType
FEED, FETCH = "feed", "fetch"
_SPECIAL = {**special_ops.HANDLERS, **control_flow.HANDLERS}


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
                             "values": [number_value(v, const.dtype) for v in const.values]})
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
        missing = [slot.name for slot in opdef.inputs if not slot.dispensable and not ins.get(slot.name)]
        if missing:  # (an operand written as %0, "no value", where the legacy op needs one)
            self.fail(op, f"the legacy op {legacy} needs input {', '.join(missing)}, which the op's operands "
                          f"leave out")
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


def _value_dtype(tr, block, op, ins, attrs):
    """set_value's `dtype` (of its `values`): PIR's values are the input's dtype."""
    attrs["dtype"] = block.var(ins["Input"][0]).dtype


_DERIVE = {"in_dtype": _in_dtype, "reduce_all": _reduce_all, "value_dtype": _value_dtype}


def translate(pir: schema.PirProgram, source: str) -> Program:
    return _Translator(source).run(pir)
