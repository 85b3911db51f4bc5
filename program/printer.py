"""`print(program)`: a stable, diff-friendly listing of blocks, variables and ops.

One line per variable (`name : float32[-1, 64]  (flags)`) and per op
(`{Out=[...]} = type(inputs={X=[...]}, attr=value, ...)`); an op line longer than
`WIDTH` characters continues on lines indented under it, broken between slots and
attributes (and between the items of a list that alone is too long)."""
from __future__ import annotations

from keel.program import dtypes
from keel.program.ops.registry import COMMON_ATTRS

# Bookkeeping attributes left out of the listing when they hold their default value.
_QUIET = {"op_callstack", "op_namescope", "op_device", "with_quant_attr", "op_role_var", "op_role"}

# Attributes holding a VarType number (cast's in_dtype/out_dtype, fill_constant's dtype,
# the reductions', the random ops'): shown by name. -1 ("as the input") stays a number.
_DTYPE_ATTRS = {"dtype", "in_dtype", "out_dtype"}

WIDTH = 100     # longest op line before it is continued
_INDENT = 4     # continuation lines start this much deeper than the op's text


def _fmt_attr(name: str, v) -> str:
    if name in _DTYPE_ATTRS and isinstance(v, int) and not isinstance(v, bool) and v >= 0:
        return dtypes.name(v)
    return _fmt_value(v)


def _fmt_value(v) -> str:
    if isinstance(v, float):
        return repr(float(f"{v:.7g}"))
    if isinstance(v, str):
        return repr(v)
    if isinstance(v, list):
        return "[" + ", ".join(_fmt_value(x) for x in v) + "]"
    return repr(v)


def format_var(var) -> str:
    flags = []
    if var.is_parameter:
        flags.append("parameter")
    elif var.persistable:
        flags.append("persistable")
    if var.stop_gradient and not var.is_parameter:
        flags.append("stop_gradient")
    if var.need_check_feed:
        flags.append("feed")
    if var.lod_level:
        flags.append(f"lod_level={var.lod_level}")
    return f"{var.name} : {var.type_string()}" + (f"  ({', '.join(flags)})" if flags else "")


def _pieces(op) -> list[str]:
    """The op's text cut where a line may break: after each slot's or attribute's comma,
    and after `inputs={`. Joined by single spaces (none after `{`) they read
    `{Out=[...]} = type(inputs={X=[...]}, attr=value)`."""
    outs = [f"{k}=[{', '.join(v)}]" for k, v in op.outputs.items()]
    ins = [f"{k}=[{', '.join(v)}]" for k, v in op.inputs.items()]
    attrs = []
    for name, value in sorted(op.attrs.items()):
        if name in _QUIET and (name == "op_callstack" or value == COMMON_ATTRS[name].default or name == "op_namescope"):
            continue
        attrs.append(f"{name}={_fmt_attr(name, value)}")
    tail = "," if attrs else ")"
    pieces = [o + "," for o in outs[:-1]] + [(outs[-1] if outs else "") + f"}} = {op.type}(inputs={{"]
    pieces[0] = "{" + pieces[0]
    if ins:
        pieces += [i + "," for i in ins[:-1]] + [ins[-1] + "}" + tail]
    else:
        pieces[-1] += "}" + tail
    pieces += [a + "," for a in attrs[:-1]] + [a + ")" for a in attrs[-1:]]
    return pieces


def _fill(pieces: list[str], first: int, rest: int, width: int) -> list[str]:
    """Greedy line filling: `first` columns precede the first line, `rest` the others. A
    piece too long for a line of its own is cut after its list commas."""
    lines, line, used = [], "", first
    for piece in pieces:
        for part in [piece] if len(piece) <= width - rest else _split_list(piece):
            glue = "" if line.endswith("{") else " "
            if not line:
                line, used = part, used + len(part)
            elif used + len(glue) + len(part) > width:
                lines.append(line)
                line, used = part, rest + len(part)
            else:
                line, used = line + glue + part, used + len(glue) + len(part)
    lines.append(line)
    return lines


def _split_list(piece: str) -> list[str]:
    """`X=[a, b, c],` -> `X=[a,`, `b,`, `c],` (breaks only after `, `)."""
    parts = piece.split(", ")
    return [p + "," for p in parts[:-1]] + [parts[-1]]


def format_op(op, prefix: int = 0, width: int = WIDTH) -> str:
    """One op; lines after the first (when it would pass `width` columns, counting the
    `prefix` columns printed before it) are indented `prefix + 4`."""
    lines = _fill(_pieces(op), prefix, prefix + _INDENT, width)
    return ("\n" + " " * (prefix + _INDENT)).join(lines)


def format_program(program) -> str:
    lines = []
    for block in program.blocks:
        lines.append(f"block {block.idx} (parent {block.parent_idx}):")
        lines.append(f"  vars ({len(block.vars)}):")
        lines.extend(f"    {format_var(v)}" for v in block.vars.values())
        lines.append(f"  ops ({len(block.ops)}):")
        width = len(str(max(len(block.ops) - 1, 0)))
        lines.extend(f"    {i:>{width}}: {format_op(op, prefix=6 + width)}" for i, op in enumerate(block.ops))
    return "\n".join(lines)
