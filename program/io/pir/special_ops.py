"""The PIR ops that are not one legacy op each: parameters, data/feed and fetch, constants
(`full`, `full_int_array`, `assign_value_`: values until something reads them as tensors),
builtin vectors (`combine`, `split`, `slice`), `shape64`, `assign_out_` and tensor arrays.
Each handler is `(translator, block, op, on_yield)`; translate.py dispatches to them."""
from __future__ import annotations

from dataclasses import dataclass

from keel.program.io.pir import schema
from keel.proto import pb

_T = pb.VarType
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


def number_value(value, dtype):
    return bool(value) if dtype == _T.BOOL else (int(value) if dtype in (_T.INT32, _T.INT64, _T.INT8, _T.UINT8,
                                                                          _T.INT16) else float(value))


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
    tr.new_var(block, name, one_result(tr, op)[1], name=name, need_check_feed=True)
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
    value_id, vtype = one_result(tr, op)
    shape, value, dtype = op.attrs.get("shape"), op.attrs.get("value"), op.attrs.get("dtype")
    if not isinstance(shape, list) or not isinstance(dtype, schema.DType) or dtype.code is None:
        tr.fail(op, "attributes 'shape' and 'dtype' are required")
    if not all(isinstance(d, int) and not isinstance(d, bool) for d in shape):
        tr.fail(op, f"attribute 'shape' must hold integers, got {shape!r}")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        tr.fail(op, f"attribute 'value' must be a number, got {value!r}")
    tr.define(op, value_id, Const(dtype.code, shape, value=value))


def _full_int_array(tr, block, op, on_yield):
    value_id, _ = one_result(tr, op)
    values, dtype = op.attrs.get("value"), op.attrs.get("dtype")
    if not isinstance(values, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        tr.fail(op, f"attribute 'value' must be a list of integers, got {values!r}")
    code = dtype.code if isinstance(dtype, schema.DType) and dtype.code is not None else _T.INT64
    tr.define(op, value_id, Const(code, [len(values)], values=list(values)))


def _assign_value(tr, block, op, on_yield):
    value_id, _ = one_result(tr, op)
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
    tr.define(op, one_result(tr, op)[0], [tr.lookup(op, v) for v in op.operands])


def _split(tr, block, op, on_yield):
    vector = vector_operand(tr, op)
    if len(vector) != len(op.results):
        tr.fail(op, f"splits a vector of {len(vector)} values into {len(op.results)} results")
    for (value_id, _), entry in zip(op.results, vector):
        tr.define(op, value_id, entry)


def _slice(tr, block, op, on_yield):
    vector = vector_operand(tr, op)
    index = op.attrs.get("index")
    if not isinstance(index, int) or not 0 <= index < len(vector):
        tr.fail(op, f"attribute 'index' = {index!r}; allowed: 0..{len(vector) - 1}")
    tr.define(op, one_result(tr, op)[0], vector[index])


def _shape64(tr, block, op, on_yield):
    value_id, vtype = one_result(tr, op)
    source = tr.tensor(block, op, tr.lookup(op, op.operands[0]))
    int32 = tr.new_var(block, "shape", schema.TensorType("dense", _T.INT32, vtype.dims))
    block.append_op("shape", {"Input": [source]}, {"Out": [int32]})
    out = tr.new_var(block, "cast", vtype)
    block.append_op("cast", {"X": [int32]}, {"Out": [out]}, {"in_dtype": _T.INT32, "out_dtype": vtype.dtype})
    tr.define(op, value_id, out)


def _create_array(tr, block, op, on_yield):
    value_id, vtype = one_result(tr, op)
    tr.define(op, value_id, tr.new_var(block, "array", vtype))


def _array_write(tr, block, op, on_yield):
    if len(op.operands) != 3:
        tr.fail(op, f"takes (array, x, i), got {len(op.operands)} operands")
    array, x, i = (tr.tensor(block, op, tr.lookup(op, v)) for v in op.operands)
    block.append_op("write_to_array", {"X": [x], "I": [i]}, {"Out": [array]})
    tr.define(op, one_result(tr, op)[0], array)


def _array_read(tr, block, op, on_yield):
    if len(op.operands) != 2:
        tr.fail(op, f"takes (array, i), got {len(op.operands)} operands")
    array, i = (tr.tensor(block, op, tr.lookup(op, v)) for v in op.operands)
    value_id, vtype = one_result(tr, op)
    out = tr.new_var(block, "read_from_array", vtype)
    block.append_op("read_from_array", {"X": [array], "I": [i]}, {"Out": [out]})
    tr.define(op, value_id, out)


def _array_length(tr, block, op, on_yield):
    array = tr.tensor(block, op, tr.lookup(op, op.operands[0]))
    value_id, vtype = one_result(tr, op)
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
    tr.define(op, one_result(tr, op)[0], target)


def one_result(tr, op):
    if len(op.results) != 1:
        tr.fail(op, f"has {len(op.results)} results; expected one")
    return op.results[0]


def vector_operand(tr, op):
    if len(op.operands) != 1:
        tr.fail(op, f"takes one vector operand, got {len(op.operands)}")
    vector = tr.lookup(op, op.operands[0])
    if not isinstance(vector, list):
        tr.fail(op, f"operand %{op.operands[0]} is not a vector (builtin.combine's or a vector result)")
    return vector


HANDLERS = {
    schema.PARAMETER_OP: _parameter, "builtin.parameter": _builtin_parameter,
    "pd_op.data": _data, "pd_op.feed": _data, "pd_op.fetch": _fetch,
    "pd_op.full": _full, "pd_op.full_int_array": _full_int_array,
    "pd_op.assign_value_": _assign_value, "pd_op.assign_value": _assign_value,
    "builtin.combine": _combine, "builtin.split": _split, "builtin.slice": _slice,
    "pd_op.shape64": _shape64, "pd_op.assign_out_": _assign_out,
    "pd_op.create_array": _create_array, "pd_op.array_write_": _array_write, "pd_op.array_read": _array_read,
    "pd_op.array_length": _array_length, "pd_op.array_to_tensor": _array_to_tensor,
}
