"""Operators: a view over one `OpDesc` (type, slots -> variable names, typed attributes)."""
from __future__ import annotations

from typing import TYPE_CHECKING

from keel.program import attrs as attr_codec
from keel.program import callsite as callsite_mod
from keel.program.errors import AttrError
from keel.program.ops import registry
from keel.proto import pb

if TYPE_CHECKING:
    from keel.program.block import Block


class Operator:
    """One op of a block. Read `type`, `inputs`, `outputs`, `attrs`; change it only through
    the methods here so the program's revision counter (used by executor caches) moves."""

    def __init__(self, block: "Block", desc: pb.OpDesc):
        self.block = block
        self.desc = desc
        self._cache = None  # (inputs, outputs, attrs, attr_types), rebuilt after a change

    # -- reading ----------------------------------------------------------------------
    @property
    def type(self) -> str:
        return self.desc.type

    def _view(self):
        if self._cache is None:
            ins = {v.parameter: list(v.arguments) for v in self.desc.inputs}
            outs = {v.parameter: list(v.arguments) for v in self.desc.outputs}
            values, types = {}, {}
            for a in self.desc.attrs:  # repeated entries (seen in Paddle files): the last wins
                values[a.name] = attr_codec.decode(a)
                types[a.name] = a.type
            self._cache = (ins, outs, values, types)
        return self._cache

    @property
    def inputs(self) -> dict[str, list[str]]:
        """Slot name -> variable names (a copy)."""
        return {k: list(v) for k, v in self._view()[0].items()}

    @property
    def outputs(self) -> dict[str, list[str]]:
        return {k: list(v) for k, v in self._view()[1].items()}

    def input(self, slot: str) -> list[str]:
        return list(self._view()[0].get(slot, ()))

    def output(self, slot: str) -> list[str]:
        return list(self._view()[1].get(slot, ()))

    @property
    def input_arg_names(self) -> list[str]:
        return [n for names in self._view()[0].values() for n in names]

    @property
    def output_arg_names(self) -> list[str]:
        return [n for names in self._view()[1].values() for n in names]

    @property
    def attrs(self) -> dict:
        return dict(self._view()[2])

    def attr(self, name: str, default=None):
        return self._view()[2].get(name, default)

    def has_attr(self, name: str) -> bool:
        return name in self._view()[2]

    def attr_type(self, name: str) -> int | None:
        return self._view()[3].get(name)

    @property
    def opdef(self):
        """The registry definition, or None for an op type Keel does not know."""
        return registry.lookup(self.type)

    @property
    def callstack(self) -> list[str]:
        return list(self.attr("op_callstack") or [])

    @property
    def callsite(self) -> str | None:
        """'script.py:12: h = pg.nn.fc(x, 128)' for the user line that created the op."""
        return callsite_mod.describe(self.callstack)

    # -- changing ---------------------------------------------------------------------
    def _changed(self):
        self._cache = None
        self.block._mutated()

    def set_attr(self, name: str, value) -> None:
        """Set (or add) an attribute. Its type comes from the op definition, else from an
        existing entry, else from the Python value."""
        spec = self.opdef.attr_spec(name) if self.opdef else None
        t = spec.type if spec else self.attr_type(name)
        try:
            if t is None:
                t = attr_codec.guess_type(value)
            value = attr_codec.check(t, value)
        except TypeError as e:
            raise AttrError(f"attribute {name!r}: {e}", op_type=self.type, callsite=self.callsite) from None
        entries = [a for a in self.desc.attrs if a.name == name]
        if not entries:
            entries = [self.desc.attrs.add()]
        for a in entries:
            attr_codec.encode(a, name, t, value)
        self._changed()

    def remove_attr(self, name: str) -> None:
        doomed = [i for i, a in enumerate(self.desc.attrs) if a.name == name]
        for i in reversed(doomed):
            del self.desc.attrs[i]
        if doomed:
            self._changed()

    def _set_slot(self, slots, slot: str, names) -> None:
        names = [getattr(n, "name", n) for n in names]
        for v in slots:
            if v.parameter == slot:
                del v.arguments[:]
                v.arguments.extend(names)
                break
        else:
            v = slots.add()
            v.parameter = slot
            v.arguments.extend(names)
        self._changed()

    def set_input(self, slot: str, names) -> None:
        self._set_slot(self.desc.inputs, slot, names)

    def set_output(self, slot: str, names) -> None:
        self._set_slot(self.desc.outputs, slot, names)

    def _rename(self, slots, old: str, new: str) -> None:
        changed = False
        for v in slots:
            for i, n in enumerate(v.arguments):
                if n == old:
                    v.arguments[i] = new
                    changed = True
        if changed:
            self._changed()

    def rename_input(self, old: str, new: str) -> None:
        self._rename(self.desc.inputs, old, new)

    def rename_output(self, old: str, new: str) -> None:
        self._rename(self.desc.outputs, old, new)

    # -- display ----------------------------------------------------------------------
    def __repr__(self):
        from keel.program.printer import format_op
        return format_op(self)
