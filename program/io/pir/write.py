"""A Keel Program of legacy ops -> a PaddlePaddle 3.3.1 PIR JSON program (serializer version 4):
the reader's direction reversed, through the same rows (op_table.py, read backwards: a legacy
op's slots become the PIR op's operands in the row's order, its attributes take the PIR names).

PIR values are SSA: each op result is a new value. The writer keeps, per block being written,
which value each variable name holds now (an op writing a variable again, as a loop's
increment does, rebinds the name). What PaddlePaddle 3.x takes as operands where legacy ops had
attributes (`Fold`: reshape's shape, scale's factor) is written as a `full_int_array` / `full`
constant, or the legacy tensor slot's value when the op had one; a duplicable slot's list is a
`builtin.combine`, a duplicable output a vector result taken apart by `builtin.split`.
PaddlePaddle checks each op's attributes by name and kind when it loads a file: signatures.py
says what each op needs. The ops that are not one row each are write_special.py's.
"""
from __future__ import annotations

import itertools
import json

import numpy as np

from keel.program.errors import OpError
from keel.program.io.pir import schema
from keel.program.io.pir.op_table import ROWS, Fold
from keel.program.io.pir.signatures import SIGNATURES
from keel.program.program import Program
from keel.proto import pb

_A = pb.AttrType
_T = pb.VarType
WRITTEN_VERSION = schema.NEWEST_VERSION     # PaddlePaddle 3.3.1's serializer version
_DIALECT_NUMBER = {name: number for number, name in schema.DIALECTS.items()}
_DTYPE_TAG = {code: tag for tag, code in schema.DTYPES.items()}
_DTYPE_NAME = {code: name for name, code in schema.DTYPE_NAMES.items()}
UNDEFINED_DTYPE = "Undefined(ALL_DTYPE)"
CPU_PLACE = [1, 0, ""]          # (what PaddlePaddle writes on constants)
ANY_PLACE = [0, 0, ""]          # (on data ops)
EMPTY = "@EMPTY@"

_SCALAR_KINDS = {"bool": "0.a_bool", "i32": "0.a_i32", "i64": "0.a_i64", "f32": "0.a_f32", "f64": "0.a_f64",
                 "str": "0.a_str"}
# an attribute of an op signatures.py has no row for: its legacy type decides its kind
_KIND_OF_LEGACY = {_A.INT: "i32", _A.LONG: "i64", _A.FLOAT: "f32", _A.FLOAT64: "f64", _A.BOOLEAN: "bool",
                   _A.STRING: "str", _A.INTS: "i32s", _A.LONGS: "i64s", _A.FLOATS: "f32s", _A.FLOAT64S: "f64s",
                   _A.STRINGS: "strs", _A.BOOLEANS: "bools"}
# the dtype of the `full` a Scalar operand is written as, by the legacy attribute's type
_SCALAR_DTYPE = {_A.INT: _T.INT32, _A.LONG: _T.INT64, _A.FLOAT: _T.FP32, _A.FLOAT64: _T.FP64,
                 _A.BOOLEAN: _T.BOOL, _A.SCALAR: _T.FP32}
# PIR attributes whose legacy op has no counterpart (the row maps them to None, or the legacy op
# lacks them): PaddlePaddle's default
_PIR_DEFAULTS = {("pd_op.embedding", "sparse"): False, ("pd_op.channel_shuffle", "data_format"): "NCHW",
                 ("pd_op.argsort", "stable"): False, ("pd_op.round", "decimals"): 0,
                 ("pd_op.thresholded_relu", "value"): 0.0}


# -- JSON pieces ---------------------------------------------------------------------------------
def dense_type(dtype: int, dims) -> dict:
    return {"#": "0.t_dtensor", "D": [{"#": f"0.{_DTYPE_TAG[dtype]}"}, [int(d) for d in dims], "NCHW", [], 0]}


ARRAY_TYPE = "1.t_dense_tensor_array"


def array_type(dtype: int, dims) -> dict:
    return {"#": ARRAY_TYPE, "D": [{"#": f"0.{_DTYPE_TAG[dtype]}"}, [int(d) for d in dims], "NCHW"]}


def vector_type(types) -> dict:
    return {"#": "0.t_vec", "D": list(types)}


NULL_TYPE = {"#": "NULL"}


def attr_json(kind: str, value) -> dict:
    """One attribute's `AT` object of `kind` (signatures.py's names)."""
    if kind in _SCALAR_KINDS:
        return {"#": _SCALAR_KINDS[kind], "D": _plain(kind, value)}
    if kind == "intarray":
        return {"#": "1.a_intarray", "D": [int(v) for v in value]}
    if kind == "dtype":
        return {"#": "1.a_dtype", "D": UNDEFINED_DTYPE if value is None or value == -1 else _DTYPE_NAME[value]}
    if kind == "place":
        return {"#": "1.a_place", "D": list(value)}
    if kind.endswith("s") and kind[:-1] in _SCALAR_KINDS:
        return {"#": "0.a_array", "D": [attr_json(kind[:-1], v) for v in value]}
    raise ValueError(f"attribute kind {kind!r}")


def _plain(kind, value):
    if kind == "bool":
        return bool(value)
    if kind in ("i32", "i64"):
        return int(value)
    if kind == "f32":  # (the float32's exact value, as PaddlePaddle prints it)
        return float(np.float32(value))
    if kind == "f64":
        return float(value)
    return str(value)


def _named(attrs) -> list[dict]:
    return [{"AT": attr_json(kind, value), "N": name} for name, kind, value in attrs]


# -- which PIR op a legacy op becomes -------------------------------------------------------------
def _legacy_to_pir() -> dict[str, list[str]]:
    table: dict[str, list[str]] = {}
    for pir_name, row in ROWS.items():
        if pir_name.endswith("_") and pir_name[:-1] in ROWS:
            continue  # (an in-place alias of the same row)
        for legacy in (row.legacy, *row.when_absent.values()):
            table.setdefault(legacy, []).append(pir_name)
    return table


LEGACY_TO_PIR = _legacy_to_pir()
# legacy ops more than one PIR op reads back as: which one writes each
_CHOOSE = {
    "split": lambda op: "pd_op.split_with_num" if op.attr("num", 0) and not op.input("SectionsTensorList")
    else "pd_op.split",
    "tril_triu": lambda op: "pd_op.tril" if op.attr("lower", True) else "pd_op.triu",
    "shuffle_channel": lambda op: "pd_op.channel_shuffle",
    "set_value": lambda op: "pd_op.set_value_with_tensor" if op.input("ValueTensor") else "pd_op.set_value",
}


def pir_op_for(op) -> str | None:
    """The PIR op a legacy op is written as (its in-place form where PaddlePaddle writes that:
    batch_norm_), or None when no row reads it back."""
    names = LEGACY_TO_PIR.get(op.type)
    if not names:
        return None
    name = _CHOOSE[op.type](op) if len(names) > 1 else names[0]
    if name not in SIGNATURES and f"{name}_" in SIGNATURES:
        name = f"{name}_"
    return name


# -- the writer ----------------------------------------------------------------------------------
class Writer:
    def __init__(self, program: Program, source: str):
        self.program = program
        self.source = source
        self._ids = itertools.count(1)
        self._arg_ids = itertools.count(-1, -1)
        self._regions = itertools.count(1)
        self.scopes: list[dict[str, int]] = [{}]   # variable name -> the value it holds now, per block
        self.types: dict[int, dict] = {}
        self.top_ops: list[dict] = []

    # -- values ----------------------------------------------------------------------------------
    def fail(self, op, message: str):
        raise OpError(f"cannot be written as a PIR program ({self.source}): {message}", op_type=op.type,
                      callsite=op.callsite)

    def find(self, name: str) -> int | None:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        return None

    def value(self, op, name: str) -> int:
        found = self.find(name)
        if found is not None:
            return found
        var = op.block.var(name)
        if var.type == _T.DENSE_TENSOR_ARRAY:
            return self.array(name, var)
        self.fail(op, f"reads variable {name!r} before any op writes it")

    def array(self, name: str, var) -> int:
        """A tensor array's value; one no op has created yet is created in block 0, where every
        use can see it (a legacy array is a variable, updated in place: array_write_)."""
        found = self.find(name)
        if found is not None:
            return found
        value_id = self.emit(self.top_ops, "pd_op.create_array", [], [array_type(var.dtype, var.shape or ())],
                             [("dtype", "dtype", var.dtype)])[0]
        self.scopes[0][name] = value_id
        return value_id

    def bind(self, name: str, value_id: int) -> None:
        self.scopes[-1][name] = value_id

    def var_type(self, block, name: str) -> dict:
        var = block.var(name)
        dims = list(var.shape or ())
        if var.type == _T.DENSE_TENSOR_ARRAY:
            return array_type(var.dtype, dims)
        return dense_type(var.dtype, dims)

    def emit(self, ops: list, name: str, operands, result_types, attrs=(), regions=None,
             persistable=False) -> list[int]:
        """Append one op (`name`: "pd_op.relu", "builtin.combine") and return its results' ids.
        `persistable`: its results are marked so (a fetch's, as PaddlePaddle marks them)."""
        dialect, _, short = name.partition(".")
        ids = [next(self._ids) for _ in result_types]
        for value_id, t in zip(ids, result_types):
            self.types[value_id] = t
        flags = [("persistable", [True] * len(ids))] if persistable else []
        flags += [("stop_gradient", [True] * len(ids))] if ids else []
        op = {"#": f"{_DIALECT_NUMBER[dialect]}.{short}", "A": _named(attrs), "I": [{"%": v} for v in operands],
              "O": [{"%": v, "TT": t} for v, t in zip(ids, result_types)],
              "OA": [{"AT": attr_json("bools", values), "N": flag} for flag, values in flags]}
        if regions is not None:
            op["regions"] = regions
        ops.append(op)
        return ids

    def parameter(self, ops: list, name: str, type_json: dict, persistable: bool = True) -> int:
        """A `p` op (a compressed builtin.parameter): `A` [is_distributed, is_parameter,
        need_clip, name], `OA` [persistable, stop_gradient, trainable]; one not persistable
        has no .pdiparams record."""
        value_id = next(self._ids)
        self.types[value_id] = type_json
        ops.append({"#": "p", "A": [0, 1, 1, name], "DA": [], "O": {"%": value_id, "TT": type_json},
                    "OA": [1, 0, 1] if persistable else [0, 1, 0], "QA": []})
        return value_id

    def region(self, blocks: list[tuple[list, list]]) -> dict:
        """A region of blocks, each (args [(id, type)], ops)."""
        number = next(self._regions)
        return {"#": f"region_{number}",
                "blocks": [{"#": f"block_{number}_{i}", "args": [{"#": a, "TT": t} for a, t in args], "ops": ops}
                           for i, (args, ops) in enumerate(blocks)]}

    def new_arg(self, type_json) -> int:
        arg = next(self._arg_ids)
        self.types[arg] = type_json
        return arg

    def combine(self, ops, values: list[int]) -> int:
        return self.emit(ops, "builtin.combine", values, [vector_type(self.types[v] for v in values)])[0]

    def full(self, ops, dtype: int, shape, value, type_dims=None) -> int:
        return self.emit(ops, "pd_op.full", [], [dense_type(dtype, shape if type_dims is None else type_dims)],
                         [("shape", "intarray", shape), ("value", "f64", value), ("dtype", "dtype", dtype),
                          ("place", "place", CPU_PLACE)])[0]

    def full_int_array(self, ops, values) -> int:
        return self.emit(ops, "pd_op.full_int_array", [], [dense_type(_T.INT64, [len(values)])],
                         [("value", "i64s", values), ("dtype", "dtype", _T.INT64), ("place", "place", CPU_PLACE)])[0]

    # -- blocks ----------------------------------------------------------------------------------
    def write(self) -> dict:
        from keel.program.io.pir import write_special  # (it builds on this module)
        block = self.program.global_block()
        write_special.parameters(self, self.top_ops, block)
        write_special.feeds(self, self.top_ops, block)
        self.write_block(self.top_ops, block)
        return {"base_code": {"magic": "pir", "trainable": True, "version": WRITTEN_VERSION},
                "program": {"regions": [{"#": "region_0", "blocks": [{"#": "block_0", "args": [],
                                                                       "ops": self.top_ops}]}]}}

    def write_block(self, ops: list, block) -> None:
        from keel.program.io.pir.write_special import HANDLERS  # (it builds on this module)
        for op in block.ops:
            handler = HANDLERS.get(op.type)
            if handler is not None:
                handler(self, ops, block, op)
                continue
            pir_name = pir_op_for(op)
            if pir_name is None:
                self.fail(op, "no PIR op Keel writes corresponds to it (Keel writes the ops its PIR reader "
                              "reads back: program/io/pir/op_table.py)")
            self.by_row(ops, block, op, pir_name)

    # -- the table's rows, backwards --------------------------------------------------------------
    def by_row(self, ops, block, op, pir_name: str, operands_given: dict | None = None) -> None:
        """`op` as the PIR op `pir_name` through its row. `operands_given`: the value for a row
        input (a slot name, a Fold, or None for the operand the legacy op has no slot for)
        that the caller wrote itself."""
        row = ROWS[pir_name]
        signature = SIGNATURES.get(pir_name)
        operands = self._operands(ops, block, op, row, signature, operands_given or {})
        attrs = (self._signature_attrs(op, block, pir_name, row, signature) if signature is not None
                 else self._legacy_attrs(op, row))
        count = signature.results if signature is not None else len(row.outputs)
        types, bindings = [], []
        for position, slot in enumerate(row.outputs[:count]):
            names = [n for n in op.output(slot) if n != EMPTY] if slot else []
            out_slot = op.opdef.output_slots.get(slot) if slot else None
            if out_slot is not None and out_slot.duplicable:
                types.append(vector_type(self.var_type(block, n) for n in names))
                bindings.append((position, names, True))
            elif names:
                types.append(self.var_type(block, names[0]))
                bindings.append((position, names[:1], False))
            else:
                types.append(NULL_TYPE)  # (an optional result left out, as PaddlePaddle's translator writes it)
        results = self.emit(ops, pir_name, operands, types, attrs)
        for position, names, is_vector in bindings:
            if is_vector:
                parts = self.emit(ops, "builtin.split", [results[position]], types[position]["D"])
                for name, part in zip(names, parts):
                    self.bind(name, part)
            else:
                self.bind(names[0], results[position])

    def _operands(self, ops, block, op, row, signature, given: dict) -> list[int]:
        operands = []
        for spec in row.inputs[:signature.operands if signature is not None else None]:
            if spec in given:
                operands.append(given[spec])
            elif spec is None:
                operands.append(0)
            elif isinstance(spec, Fold):
                operands.append(self._fold_operand(ops, block, op, row, spec))
            else:
                names = [n for n in op.input(spec) if n != EMPTY]
                slot = op.opdef.input_slots.get(spec)
                if slot is not None and slot.duplicable:
                    operands.append(self.combine(ops, [self.value(op, n) for n in names]))
                else:
                    operands.append(self.value(op, names[0]) if names else 0)
        return operands

    def _legacy_value(self, op, row, name):
        """A legacy attribute's value (its default when the op does not carry it); the axes of
        a reduction over everything are [] in PIR (reduce_all)."""
        if name == "dim" and "reduce_all" in row.derive and op.attr("reduce_all", False):
            return []
        if op.has_attr(name):
            return op.attr(name)
        spec = op.opdef.attr_spec(name)
        if spec is None or spec.required:
            return None
        return spec.default

    def _fold_operand(self, ops, block, op, row, spec: Fold) -> int:
        tensors = [n for n in op.input(spec.tensors) if n != EMPTY] if spec.tensors else []
        if tensors:
            return self.combine(ops, [self.value(op, n) for n in tensors])
        tensor = [n for n in op.input(spec.tensor) if n != EMPTY] if spec.tensor else []
        if tensor:
            return self.value(op, tensor[0])
        if spec.attr is None:
            return 0
        value = self._legacy_value(op, row, spec.attr)
        if value is None:
            self.fail(op, f"attribute {spec.attr!r} is missing")
        if not spec.scalar:
            return self.full_int_array(ops, [int(v) for v in value])
        attr_type = op.opdef.attr_spec(spec.attr).type
        return self.full(ops, _SCALAR_DTYPE.get(attr_type, _T.FP32), [1], value)

    def _signature_attrs(self, op, block, pir_name, row, signature) -> list:
        renamed = {pir: legacy for pir, legacy in row.attrs.items()}
        attrs = []
        for name, kind in signature.attrs:
            legacy = renamed.get(name, name)
            value = self._legacy_value(op, row, legacy) if legacy is not None else None
            if value is None and (pir_name, name) in _PIR_DEFAULTS:
                value = _PIR_DEFAULTS[pir_name, name]
            elif value is None and kind == "dtype":  # (arange: the result's data type)
                value = block.var(op.output_arg_names[0]).dtype
            elif value is None and kind == "place":
                value = CPU_PLACE
            if value is None:
                self.fail(op, f"the PIR op {pir_name} needs attribute {name!r}, which the legacy op has no "
                              f"value for")
            if name in ("data_format", "data_layout") and value == "AnyLayout":
                value = "NCHW"
            attrs.append((name, kind, value))
        return attrs

    def _legacy_attrs(self, op, row) -> list:
        """An op signatures.py has no row for: its legacy attributes (not the extra ones, not
        those written as operands), renamed, at their legacy kinds."""
        folded = {spec.attr for spec in row.inputs if isinstance(spec, Fold)}
        pir_name = {legacy: pir for pir, legacy in row.attrs.items() if legacy}
        attrs = []
        for name, spec in op.opdef.attrs.items():
            if name in folded or name in row.fixed or spec.type not in _KIND_OF_LEGACY:
                continue
            value = self._legacy_value(op, row, name)
            if value is not None:
                attrs.append((pir_name.get(name, name), _KIND_OF_LEGACY[spec.type], value))
        return attrs


def write_pir_program(program: Program, source: str = "program") -> bytes:
    """The PIR JSON text (version 4) of an inference program: feed and fetch ops, block 0's
    persistable variables as parameters. Raises OpError naming an op no PIR op expresses."""
    return json.dumps(Writer(program, source).write(), separators=(",", ":")).encode("utf-8")
