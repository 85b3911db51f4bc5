"""The structure of a PIR JSON program (PaddlePaddle 3.x `paddle.jit.save` / `save_inference_model`),
decoded into plain records with every field checked. Facts from PaddlePaddle's serializer
(`paddle/fluid/pir/serialize_deserialize/`, see FORMAT.md here):

    {"base_code": {"magic": "pir", "version": 1..4, "trainable": bool},
     "program": {"regions": [{"#": "region_0", "blocks": [BLOCK]}]}}
    BLOCK = {"#": "block_0", "args": [VALUE], "ops": [OP]}      (args: negative ids)
    OP    = {"#": "<dialect>.<name>", "I": [{"%": id}], "O": [VALUE], "A": [ATTR],
             "OA": [ATTR], "regions": [REGION]}                  (id 0: no value)
    VALUE = {"%": id, "TT": TYPE};  ATTR = {"N": name, "AT": {"#": kind, "D": data}}
    PARAMETER (compressed op "p") = {"#": "p", "A": [is_distributed, is_parameter,
             need_clip, name], "O": VALUE (one object), "OA": [persistable, stop_gradient, trainable]}

Dialects are written as numbers: 0 builtin, 1 pd_op, 2 cf (3 custom_op, 4 pd_dist, 5 onednn_op).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from keel.program.errors import ParseError
from keel.proto import pb

NEWEST_VERSION = 4          # PaddlePaddle 3.3.1 writes base_code.version 4; 3.0 wrote 1
DIALECTS = {"0": "builtin", "1": "pd_op", "2": "cf", "3": "custom_op", "4": "pd_dist", "5": "onednn_op"}
PARAMETER_OP = "p"

_T = pb.VarType
DTYPES = {"t_f16": _T.FP16, "t_bf16": _T.BF16, "t_f32": _T.FP32, "t_f64": _T.FP64, "t_i8": _T.INT8,
          "t_ui8": _T.UINT8, "t_i16": _T.INT16, "t_i32": _T.INT32, "t_i64": _T.INT64, "t_bool": _T.BOOL,
          "t_c64": _T.COMPLEX64, "t_c128": _T.COMPLEX128}
# `1.a_dtype` attributes spell the data type by name
DTYPE_NAMES = {"float16": _T.FP16, "bfloat16": _T.BF16, "float32": _T.FP32, "float64": _T.FP64,
               "int8": _T.INT8, "uint8": _T.UINT8, "int16": _T.INT16, "int32": _T.INT32, "int64": _T.INT64,
               "bool": _T.BOOL, "complex64": _T.COMPLEX64, "complex128": _T.COMPLEX128}


@dataclass(frozen=True)
class TensorType:
    """A value's type: a dense tensor (`dtype` a VarType code, `dims`), a tensor array
    (`array`), a vector of values (`elements`, builtin.combine's), or nothing (`none`)."""
    kind: str                      # "dense", "array", "vector", "none"
    dtype: int = _T.FP32
    dims: tuple = ()
    elements: tuple = ()


@dataclass(frozen=True)
class DType:
    """A data-type attribute (`1.a_dtype`); `code` is None for PaddlePaddle's "undefined"."""
    code: int | None


@dataclass(frozen=True)
class Unread:
    """An attribute of a kind Keel does not decode (a place, a layout): fine unless used."""
    kind: str


@dataclass
class Op:
    name: str                      # "pd_op.conv2d", "builtin.combine", "cf.yield", "p"
    where: str                     # "op 12" / "op 3 (region 1 block 0 of op 12)": for errors
    operands: list[int]
    results: list[tuple[int, TensorType]]
    attrs: dict
    regions: list[list["Block"]] = field(default_factory=list)


@dataclass
class Block:
    args: list[tuple[int, TensorType]]
    ops: list[Op]


@dataclass
class PirProgram:
    version: int
    block: Block                   # the program's one top-level block


class _Reader:
    """Field access that turns every malformed value into a ParseError naming where it is."""

    def __init__(self, source: str):
        self.source = source

    def fail(self, where: str, message: str):
        raise ParseError(f"{self.source}: {where}: {message}")

    def get(self, obj, key, kind, where, default=None):
        if not isinstance(obj, dict):
            self.fail(where, f"expected a JSON object, got {_show(obj)}")
        if key not in obj:
            if default is not None:
                return default
            self.fail(where, f"field {key!r} is missing")
        value = obj[key]
        if not _is(value, kind):
            self.fail(where, f"field {key!r} must be {_KIND_TEXT[kind]}, got {_show(value)}")
        return value


_KIND_TEXT = {"list": "a list", "dict": "an object", "str": "a string", "int": "an integer",
              "bool": "true or false", "number": "a number", "any": "a value"}


def _is(value, kind) -> bool:
    if kind == "any":
        return True
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {"list": list, "dict": dict, "str": str, "bool": bool}[kind])


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def decode_program(doc, source: str) -> PirProgram:
    """Check and decode the whole document (see the module doc)."""
    r = _Reader(source)
    if not isinstance(doc, dict) or "base_code" not in doc or "program" not in doc:
        keys = sorted(doc)[:8] if isinstance(doc, dict) else type(doc).__name__
        raise ParseError(f"{source} is JSON but not a PaddlePaddle PIR program: expected the fields "
                         f"'base_code' and 'program', found {keys}")
    base = r.get(doc, "base_code", "dict", "base_code")
    magic = r.get(base, "magic", "str", "base_code")
    if magic != "pir":
        raise ParseError(f"{source} is JSON but not a PaddlePaddle PIR program: base_code.magic is "
                         f"{magic!r}, expected 'pir'")
    version = r.get(base, "version", "int", "base_code")
    if version > NEWEST_VERSION:
        raise ParseError(f"{source} is a PIR program of version {version}, newer than Keel reads: Keel "
                         f"reads versions 1 to {NEWEST_VERSION} (PaddlePaddle 3.0 to 3.3.1)")
    if version < 1:
        raise ParseError(f"{source}: base_code.version {version}; allowed: 1 to {NEWEST_VERSION}")
    regions = r.get(r.get(doc, "program", "dict", "program"), "regions", "list", "program")
    if len(regions) != 1:
        r.fail("program", f"expected one top-level region, found {len(regions)}")
    blocks = _region(r, regions[0], "program region 0")
    if len(blocks) != 1:
        r.fail("program region 0", f"expected one block, found {len(blocks)}")
    return PirProgram(version, blocks[0])


def _region(r: _Reader, region, where) -> list[Block]:
    return [_block(r, b, f"{where} block {i}") for i, b in enumerate(r.get(region, "blocks", "list", where))]


def _block(r: _Reader, block, where) -> Block:
    # (a block argument's id is under "#", an op result's under "%")
    args = [_value(r, a, f"{where} argument {i}", key="#")
            for i, a in enumerate(r.get(block, "args", "list", where))]
    for value_id, _ in args:
        if value_id >= 0:
            r.fail(where, f"a block argument's id must be negative, got {value_id}")
    ops = []
    for i, op in enumerate(r.get(block, "ops", "list", where)):
        at = f"op {i}" if where.startswith("program") else f"{where} op {i}"
        ops.append(_op(r, op, at))
    return Block(args, ops)


def _op(r: _Reader, op, where) -> Op:
    name = r.get(op, "#", "str", where)
    if name == PARAMETER_OP:
        return _parameter(r, op, where)
    dialect, _, short = name.partition(".")
    if dialect not in DIALECTS or not short:
        r.fail(where, f"op name {name!r} is not <dialect number>.<op name> (dialects: "
                      + ", ".join(f"{k} {v}" for k, v in DIALECTS.items()) + ")")
    full = f"{DIALECTS[dialect]}.{short}"
    where = f"{where} ({full})"
    operands = []
    for i, operand in enumerate(r.get(op, "I", "list", where)):
        operands.append(r.get(operand, "%", "int", f"{where} input {i}"))
    results = [_value(r, v, f"{where} output {i}") for i, v in enumerate(r.get(op, "O", "list", where))]
    attrs = {}
    for i, a in enumerate(r.get(op, "A", "list", where, default=[])):
        attr_name = r.get(a, "N", "str", f"{where} attribute {i}")
        attrs[attr_name] = _attr(r, r.get(a, "AT", "dict", f"{where} attribute {attr_name!r}"),
                                 f"{where} attribute {attr_name!r}")
    regions = [_region(r, reg, f"{where} region {i}") for i, reg in enumerate(r.get(op, "regions", "list", where,
                                                                                      default=[]))]
    return Op(full, where, operands, results, attrs, regions)


def _parameter(r: _Reader, op, where) -> Op:
    where = f"{where} (parameter)"
    attrs = r.get(op, "A", "list", where)
    if len(attrs) != 4 or not isinstance(attrs[3], str) or not all(_is(a, "int") for a in attrs[:3]):
        r.fail(where, f"field 'A' must be [is_distributed, is_parameter, need_clip, name], got {_show(attrs)}")
    flags = r.get(op, "OA", "list", where, default=[1, 0, 1])
    if len(flags) != 3 or not all(_is(a, "int") for a in flags):
        r.fail(where, f"field 'OA' must be [persistable, stop_gradient, trainable], got {_show(flags)}")
    value = _value(r, r.get(op, "O", "dict", where), f"{where} output")
    return Op(PARAMETER_OP, where, [], [value], {"name": attrs[3], "persistable": bool(flags[0]),
                                                 "trainable": bool(flags[2])})


def _value(r: _Reader, value, where, key="%") -> tuple[int, TensorType]:
    return r.get(value, key, "int", where), _type(r, r.get(value, "TT", "any", where), f"{where} type")


def _type(r: _Reader, t, where) -> TensorType:
    if t == "NULL" or t is None:
        return TensorType("none")
    kind = r.get(t, "#", "str", where)
    data = t.get("D") if isinstance(t, dict) else None
    short = kind.partition(".")[2]
    if kind == "NULL" or short == "t_null":  # an optional result left out (batch_norm's reserve space)
        return TensorType("none")
    if short in ("t_dtensor", "t_dtensor_array", "t_dense_tensor_array", "t_tensor_array", "t_selectedrows"):
        if not isinstance(data, list) or len(data) < (1 if "array" in short else 2):
            r.fail(where, f"{kind} data must be [dtype, dims, layout, lod, offset], got {_show(data)}")
        dtype = _dtype(r, data[0], where)
        if short == "t_dtensor" or short == "t_selectedrows":
            dims = data[1]
            if not isinstance(dims, list) or not all(_is(d, "int") for d in dims):
                r.fail(where, f"dims must be a list of integers, got {_show(dims)}")
            return TensorType("dense", dtype, tuple(dims))
        dims = data[1] if len(data) > 1 and isinstance(data[1], list) else []
        return TensorType("array", dtype, tuple(d for d in dims if _is(d, "int")))
    if short == "t_vec":
        if not isinstance(data, list):
            r.fail(where, f"{kind} data must be a list of types, got {_show(data)}")
        return TensorType("vector", elements=tuple(_type(r, e, f"{where} element {i}") for i, e in enumerate(data)))
    if short in DTYPES:  # a bare dtype as a type (a scalar's)
        return TensorType("dense", DTYPES[short], ())
    r.fail(where, f"type {kind!r} is not one Keel reads (dense tensors, tensor arrays, vectors)")


def _dtype(r: _Reader, t, where) -> int:
    kind = t.get("#") if isinstance(t, dict) else None
    short = kind.partition(".")[2] if isinstance(kind, str) else None
    if short not in DTYPES:
        r.fail(where, f"data type {_show(t)}; allowed: {', '.join(sorted(DTYPES))}")
    return DTYPES[short]


def _attr(r: _Reader, attr, where):
    """An attribute's value as Python data; integer and float widths are not kept (a value
    written as i32 by one release and i64 by the next means the same)."""
    kind = r.get(attr, "#", "str", where)
    data = attr.get("D")
    short = kind.partition(".")[2]
    if short == "a_bool":
        return _checked(r, data, "bool", where, kind)
    if short in ("a_i32", "a_i64", "a_index"):
        return _checked(r, data, "int", where, kind)
    if short in ("a_f32", "a_f64"):
        return float(_checked(r, data, "number", where, kind))
    if short == "a_str":
        return _checked(r, data, "str", where, kind)
    if short == "a_array":
        items = _checked(r, data, "list", where, kind)
        return [_attr(r, item, f"{where} item {i}") for i, item in enumerate(items)]
    if short == "a_intarray":
        items = _checked(r, data, "list", where, kind)
        if not all(_is(v, "int") for v in items):
            r.fail(where, f"{kind} must hold integers, got {_show(items)}")
        return list(items)
    if short == "a_dtype":
        name = _checked(r, data, "str", where, kind)
        if name.startswith("Undefined"):
            return DType(None)
        if name not in DTYPE_NAMES:
            r.fail(where, f"data type {name!r}; allowed: {', '.join(DTYPE_NAMES)}")
        return DType(DTYPE_NAMES[name])
    if short == "a_scalar":  # [type tag, value] or the bare value
        value = data[-1] if isinstance(data, list) and data else data
        return _checked(r, value, "number", where, kind) if not isinstance(value, bool) else value
    return Unread(kind)


def _checked(r: _Reader, value, kind, where, attr_kind):
    if not _is(value, kind):
        r.fail(where, f"{attr_kind} data must be {_KIND_TEXT[kind]}, got {_show(value)}")
    return value
