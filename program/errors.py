"""The exceptions a user of Keel can meet while building, loading or checking a program.

Every message names what is at fault (op type, slot, variable, shapes/dtypes, file) and,
for errors about an op, the line of the user's script that created it.
"""
from __future__ import annotations


class KeelError(Exception):
    """Base of every error Keel raises on purpose."""


class ProgramError(KeelError):
    """A program is malformed: undefined or duplicate variables, bad structure."""


class UndefinedVariableError(ProgramError, KeyError):
    """An op or a lookup names a variable that no block in scope defines."""

    def __str__(self):  # KeyError would quote the message; we want it readable
        return self.args[0] if self.args else ""


class DuplicateNameError(ProgramError):
    """A variable name is already taken in the block."""


class OpError(ProgramError):
    """An op cannot be built or checked. Carries the op type and the user's source line."""

    def __init__(self, message: str, *, op_type: str | None = None, callsite: str | None = None):
        self.op_type = op_type
        self.callsite = callsite
        self.reason = message
        text = f"{op_type}: {message}" if op_type else message
        if callsite:
            text += f"\n  op created at {callsite}"
        super().__init__(text)


class UnknownOpError(OpError):
    """No definition is registered for an op type."""


class AttrError(OpError):
    """A missing required attribute, an unknown one, or a value of the wrong type."""


class SlotError(OpError):
    """A missing required input/output, an unknown slot, or too many arguments in a slot."""


class ShapeError(OpError):
    """Input shapes the op cannot accept."""


class DTypeError(OpError):
    """Input dtypes the op cannot accept."""


class ParseError(ProgramError):
    """Bytes that are not a valid program file."""


class UnsupportedProgramError(ProgramError):
    """A parsed program uses ops, slots or attributes Keel does not support. Lists them all."""

    def __init__(self, problems: list[str], source: str = "program"):
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(f"{source} cannot be run by Keel ({len(self.problems)} problem(s)):\n{lines}")
