"""The one program checker: every pass, the loaders and the executor's compiler use it.

It collects every problem before raising, so a user loading a file with three
unsupported op types learns about all three at once."""
from __future__ import annotations

from program import attrs as attr_codec
from program import legacy
from program.errors import UnsupportedProgramError
from program.ops import registry

# Variables that ops may name without declaring them (PaddlePaddle's placeholder for "no var").
_PLACEHOLDERS = {"@EMPTY@"}


def program_problems(program) -> list[str]:
    problems: list[str] = legacy.version_problems(program)
    unknown: dict[str, list[str]] = {}
    for block in program.blocks:
        for i, op in enumerate(block.ops):
            where = f"block {block.idx} op {i} ({op.type})"
            opdef = registry.lookup(op.type)
            if opdef is None:
                unknown.setdefault(op.type, []).append(f"{block.idx}:{i}")
            for kind, slots, known in (("input", op.inputs, opdef and opdef.input_slots),
                                       ("output", op.outputs, opdef and opdef.output_slots)):
                for slot, names in slots.items():
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
                if not slot.dispensable and not op.input(slot.name):
                    problems.append(f"{where}: missing required input {slot.name!r}")
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
    for op_type, places in unknown.items():
        problems.insert(0, f"unknown op type {op_type!r}{registry.suggest(op_type)} at block:op "
                           f"{', '.join(places[:8])}{' ...' if len(places) > 8 else ''}")
    return problems


# Integer attrs written with a wider/narrower integer type, and float attrs written as
# float64, are read back the same way by PaddlePaddle; accept them.
_EQUIVALENT = [{attr_codec.A.INT, attr_codec.A.LONG}, {attr_codec.A.INTS, attr_codec.A.LONGS},
               {attr_codec.A.FLOAT, attr_codec.A.FLOAT64}, {attr_codec.A.FLOATS, attr_codec.A.FLOAT64S}]


def _compatible(expected: int, found: int | None) -> bool:
    return any(expected in group and found in group for group in _EQUIVALENT)


def verify_program(program, source: str = "program") -> None:
    problems = program_problems(program)
    if problems:
        raise UnsupportedProgramError(problems, source)


