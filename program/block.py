"""Blocks: an ordered list of ops and the variables they use. Block 0 is the program's
global block; control-flow ops own sub-blocks whose parent is the enclosing block."""
from __future__ import annotations

from typing import TYPE_CHECKING, Sequence

from keel.program import attrs as attr_codec
from keel.program import callsite, dtypes
from keel.program.errors import AttrError, DuplicateNameError, OpError, SlotError, UndefinedVariableError
from keel.program.operator import Operator

EMPTY_VAR = "@EMPTY@"
from keel.program.ops import registry
from keel.program.ops.infer import InferContext, VarInfo
from keel.program.variable import Parameter, Variable
from keel.proto import pb

if TYPE_CHECKING:
    from keel.program.program import Program


def _names(value) -> list[str]:
    """A slot's arguments given as a Variable, a name, or a list of either."""
    if value is None:
        return []
    if isinstance(value, (Variable, str)):
        value = [value]
    return [v.name if isinstance(v, Variable) else v for v in value]


def _refuse_eager_tensors(op_type, inputs, where) -> None:
    """An eager Tensor given to an op of a program (it is a value, not a variable of the program)."""
    for slot, value in (inputs or {}).items():
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if getattr(item, "eager", False):
                raise OpError(f"input {slot!r} is the eager Tensor {item.name}, used in a static program: "
                                   "a program reads its own variables (pg.data fed at run time, or a constant "
                                   "made with pg.assign(array)); or call the op outside program_guard to run "
                                   "it eagerly", op_type=op_type, callsite=where)


class Block:
    def __init__(self, program: "Program", header: pb.BlockDesc):
        self.program = program
        # The BlockDesc without vars and ops: idx, parent_idx, forward_block_idx (and any
        # unknown fields), kept verbatim so that parsing then serializing loses nothing.
        self.header = header
        self.vars: dict[str, Variable] = {}
        self.ops: list[Operator] = []

    @property
    def idx(self) -> int:
        return self.header.idx

    @property
    def parent_idx(self) -> int:
        return self.header.parent_idx

    @property
    def parent(self) -> "Block | None":
        return self.program.blocks[self.parent_idx] if self.parent_idx >= 0 else None

    def _mutated(self) -> None:
        self.program._revision += 1

    # -- variables --------------------------------------------------------------------
    def var(self, name: str) -> Variable:
        """The variable `name` of this block or an enclosing one."""
        v = self.find_var(name)
        if v is None:
            raise UndefinedVariableError(f"variable {name!r} is not defined in block {self.idx}"
                                         f"{self._suggest_var(name)}")
        return v

    def find_var(self, name: str) -> Variable | None:
        block = self
        # At most one visit per block: the loaders refuse parent cycles, and this bound
        # keeps a program assembled by hand from looping forever on one.
        for _ in range(len(self.program.blocks)):
            if block is None:
                return None
            v = block.vars.get(name)
            if v is not None:
                return v
            block = block.parent
        return None

    def has_var(self, name: str) -> bool:
        return name in self.vars

    def _suggest_var(self, name: str) -> str:
        import difflib
        close = difflib.get_close_matches(name, self.vars.keys(), n=3)
        return f" (did you mean {', '.join(close)}?)" if close else ""

    def create_var(self, name: str | None = None, shape: Sequence[int] | None = None, dtype="float32",
                   *, persistable: bool = False, stop_gradient: bool = False, lod_level: int = 0,
                   type: int = pb.VarType.DENSE_TENSOR, need_check_feed: bool = False,
                   exist_ok: bool = False) -> Variable:
        """Add a variable. `name=None` generates a fresh temporary name. A taken name raises
        DuplicateNameError unless `exist_ok`, which returns the existing variable."""
        return self._add_var(Variable, name, shape, dtype, persistable, stop_gradient, lod_level,
                             type, need_check_feed, exist_ok)

    def create_parameter(self, name: str, shape: Sequence[int], dtype="float32", *, trainable=True,
                         initializer=None, regularizer=None, learning_rate=1.0,
                         need_clip=True) -> Parameter:
        """Add a persistable trainable variable. The initializer is applied by the layer that
        creates the parameter (it appends an op to the startup program)."""
        if any(int(d) < 0 for d in shape):
            raise ValueError(f"parameter {name!r} needs a fully known shape, got {list(shape)}")
        p = self._add_var(Parameter, name, shape, dtype, True, not trainable, 0,
                          pb.VarType.DENSE_TENSOR, False, False)
        p.desc.is_parameter = True
        p.trainable, p.initializer, p.regularizer = trainable, initializer, regularizer
        p.optimize_attr = {"learning_rate": learning_rate}
        p.need_clip = need_clip
        return p

    def _add_var(self, cls, name, shape, dtype, persistable, stop_gradient, lod_level, type,
                 need_check_feed, exist_ok):
        if name is None:
            from keel.program import unique_name
            name = unique_name.generate("_generated_var")
        if name in self.vars:
            if exist_ok:
                return self.vars[name]
            raise DuplicateNameError(f"a variable named {name!r} already exists in block {self.idx}: "
                                     f"{self.vars[name]!r}")
        desc = pb.VarDesc(name=name)
        desc.type.type = type
        if type == pb.VarType.DENSE_TENSOR or type == pb.VarType.DENSE_TENSOR_ARRAY:
            holder = desc.type.dense_tensor if type == pb.VarType.DENSE_TENSOR else desc.type.tensor_array
            holder.tensor.data_type = dtypes.to_code(dtype)
            holder.tensor.dims.extend(int(d) for d in (shape or ()))
            holder.legacy_lod_level = lod_level
        desc.persistable = persistable
        if need_check_feed:
            desc.need_check_feed = True
        desc.is_parameter = False
        desc.stop_gradient = stop_gradient
        var = cls(self, desc)
        self.vars[name] = var
        self._mutated()
        return var

    def _adopt_var(self, desc: pb.VarDesc) -> Variable:
        """Wrap a parsed VarDesc (kept as is)."""
        cls = Parameter if desc.is_parameter else Variable
        var = cls(self, desc)
        if desc.name in self.vars:
            raise DuplicateNameError(f"block {self.idx} defines variable {desc.name!r} twice")
        self.vars[desc.name] = var
        return var

    def remove_var(self, name: str) -> None:
        if self.vars.pop(name, None) is not None:
            self._mutated()

    def rename_var(self, old: str, new: str) -> Variable:
        """Rename a variable and every reference to it in this block's ops."""
        var = self.var(old)
        if new in self.vars:
            raise DuplicateNameError(f"cannot rename {old!r} to {new!r}: the name is taken in block {self.idx}")
        var.desc.name = new
        self.vars = {(new if k == old else k): v for k, v in self.vars.items()}
        for op in self.ops:
            op.rename_input(old, new)
            op.rename_output(old, new)
        self._mutated()
        return var

    def all_parameters(self) -> list[Parameter]:
        return [v for v in self.vars.values() if isinstance(v, Parameter)]

    # -- ops ----------------------------------------------------------------------------
    def append_op(self, type: str, inputs=None, outputs=None, attrs=None, *, infer_shape=True,
                  all_input_slots=True) -> Operator:
        """Append an op. Slots and attributes are checked against the op's definition,
        defaults are filled in, and output shapes/dtypes are inferred. Input slots not given
        are written as empty lists, as PaddlePaddle's builder does (`all_input_slots=False`
        writes only the given ones, as its C++ gradient-op makers do)."""
        return self.insert_op(len(self.ops), type, inputs, outputs, attrs, infer_shape=infer_shape,
                              all_input_slots=all_input_slots)

    def prepend_op(self, type: str, inputs=None, outputs=None, attrs=None, *, infer_shape=True) -> Operator:
        return self.insert_op(0, type, inputs, outputs, attrs, infer_shape=infer_shape)

    def insert_op(self, index: int, type: str, inputs=None, outputs=None, attrs=None, *,
                  infer_shape=True, all_input_slots=True) -> Operator:
        stack = callsite.user_frame_lines()
        where = callsite.describe(stack)
        opdef = registry.lookup(type)
        if opdef is None:
            raise registry.UnknownOpError(f"unknown op type{registry.suggest(type)}", op_type=type,
                                          callsite=where)
        _refuse_eager_tensors(type, inputs, where)
        ins = {k: _names(v) for k, v in (inputs or {}).items()}
        outs = {k: _names(v) for k, v in (outputs or {}).items()}
        self._check_slots(opdef, ins, "input", opdef.input_slots, where)
        self._check_slots(opdef, outs, "output", opdef.output_slots, where)
        if all_input_slots:
            # PaddlePaddle's Python builder lists every input slot of an op, empty ones as []
            # (its inference passes match ops by their full slot list); outputs only as given.
            ins = {slot.name: ins.get(slot.name, []) for slot in opdef.inputs}
        values = self._check_attrs(opdef, dict(attrs or {}), where)
        values["op_callstack"] = stack
        values.setdefault("op_namescope", self.program._namescope())
        values.setdefault("op_role", self.program._op_role)
        values.setdefault("op_role_var", [])
        values.setdefault("op_device", "")
        values.setdefault("with_quant_attr", False)

        desc = pb.OpDesc(type=type)
        for slots, given in ((desc.inputs, ins), (desc.outputs, outs)):
            for name, args in given.items():
                v = slots.add()
                v.parameter, v.arguments[:] = name, args
        for name, value in values.items():
            spec = opdef.attr_spec(name)
            attr_codec.encode(desc.attrs.add(), name, spec.type, value)
        op = Operator(self, desc)
        if infer_shape and opdef.infer is not None:
            self._infer(op, opdef, ins, outs, values, where)
        self.ops.insert(index, op)
        self._mutated()
        return op

    def _check_slots(self, opdef, given: dict, kind: str, slots: dict, where) -> None:
        for name, args in given.items():
            slot = slots.get(name)
            if slot is None:
                raise SlotError(f"has no {kind} slot {name!r} (its {kind}s: {', '.join(slots) or 'none'})",
                                op_type=opdef.type, callsite=where)
            if len(args) > 1 and not slot.duplicable:
                raise SlotError(f"{kind} {name!r} takes one variable, got {len(args)}: {args}",
                                op_type=opdef.type, callsite=where)
            for arg in args:
                if arg == EMPTY_VAR:  # PaddlePaddle's "no variable" entry of a duplicable slot
                    continue
                if self.find_var(arg) is None:
                    raise UndefinedVariableError(
                        f"{opdef.type}: {kind} {name!r} refers to variable {arg!r}, which is not "
                        f"defined in block {self.idx}{self._suggest_var(arg)}"
                        + (f"\n  op created at {where}" if where else ""))
        for slot in slots.values():
            if not slot.dispensable and not given.get(slot.name) and not (kind == "output" and slot.intermediate):
                raise SlotError(f"missing required {kind} {slot.name!r}", op_type=opdef.type, callsite=where)

    @staticmethod
    def _check_attrs(opdef, given: dict, where) -> dict:
        values = {}
        for name, value in given.items():
            spec = opdef.attr_spec(name)
            if spec is None:
                known = ", ".join(opdef.attrs) or "none"
                raise AttrError(f"unknown attribute {name!r} (its attributes: {known})",
                                op_type=opdef.type, callsite=where)
            try:
                values[name] = attr_codec.check(spec.type, value)
            except TypeError as e:
                raise AttrError(f"attribute {name!r}: {e}", op_type=opdef.type, callsite=where) from None
        for name, spec in opdef.attrs.items():
            if name not in values:
                if spec.required:
                    raise AttrError(f"missing required attribute {name!r}", op_type=opdef.type, callsite=where)
                values[name] = spec.default
        # Emit the op's own attributes in definition order, then the rest.
        return {**{n: values[n] for n in opdef.attrs}, **values}

    def _infer(self, op, opdef, ins, outs, values, where) -> None:
        def lookup(name):
            v = self.var(name)
            return VarInfo(name, tuple(v.shape or ()), v.dtype)

        def set_var(name, shape, dtype):
            v = self.var(name)
            v.shape = shape
            v.dtype = dtype

        opdef.infer(InferContext(opdef.type, ins, outs, values, lookup, set_var, where))

    def _adopt_op(self, desc: pb.OpDesc) -> Operator:
        op = Operator(self, desc)
        self.ops.append(op)
        return op

    def remove_op(self, op: "Operator | int") -> Operator:
        index = op if isinstance(op, int) else self.ops.index(op)
        removed = self.ops.pop(index)
        self._mutated()
        return removed

    # -- serialization --------------------------------------------------------------
    def to_desc(self) -> pb.BlockDesc:
        desc = pb.BlockDesc()
        desc.CopyFrom(self.header)
        desc.vars.extend(v.desc for v in self.vars.values())
        desc.ops.extend(op.desc for op in self.ops)
        return desc

    def __repr__(self):
        return f"<Block {self.idx} (parent {self.parent_idx}): {len(self.vars)} vars, {len(self.ops)} ops>"
