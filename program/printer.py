"""`print(program)`: a stable, diff-friendly listing of blocks, variables and ops."""
from __future__ import annotations

from program.ops.registry import COMMON_ATTRS

# Bookkeeping attributes left out of the listing when they hold their default value.
_QUIET = {"op_callstack", "op_namescope", "op_device", "with_quant_attr", "op_role_var", "op_role"}


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


def format_op(op) -> str:
    outs = ", ".join(f"{k}=[{', '.join(v)}]" for k, v in op.outputs.items())
    ins = ", ".join(f"{k}=[{', '.join(v)}]" for k, v in op.inputs.items())
    attrs = []
    for name, value in sorted(op.attrs.items()):
        if name in _QUIET and (name == "op_callstack" or value == COMMON_ATTRS[name].default or name == "op_namescope"):
            continue
        attrs.append(f"{name}={_fmt_value(value)}")
    tail = (", " + ", ".join(attrs)) if attrs else ""
    return f"{{{outs}}} = {op.type}(inputs={{{ins}}}{tail})"


def format_program(program) -> str:
    lines = []
    for block in program.blocks:
        lines.append(f"block {block.idx} (parent {block.parent_idx}):")
        lines.append(f"  vars ({len(block.vars)}):")
        lines.extend(f"    {format_var(v)}" for v in block.vars.values())
        lines.append(f"  ops ({len(block.ops)}):")
        width = len(str(max(len(block.ops) - 1, 0)))
        lines.extend(f"    {i:>{width}}: {format_op(op)}" for i, op in enumerate(block.ops))
    return "\n".join(lines)
