"""`break` and `continue` in a while loop, rewritten as flags so that a tensor can decide
them (PaddlePaddle's BreakContinueTransformer does the same):

    while i < n:                          _keel_break_1 = False
        if x[i] > 3:                      while i < n and not _keel_break_1:
            break              ->             _keel_continue_1 = False
        if x[i] < 0:                          if x[i] > 3:
            i = i + 2                             _keel_break_1 = True
            continue                          if not (_keel_break_1 or _keel_continue_1):
        i = i + 1                                 if x[i] < 0:
                                                      i = i + 2
                                                      _keel_continue_1 = True
                                                  if not (_keel_break_1 or _keel_continue_1):
                                                      i = i + 1

The statements after one that may exit run under an `if` on the flags; the loop condition
also asks for the break flag. The rewrite keeps Python's meaning, so it is applied to every
while loop whose exits sit in its body or in `if` statements there (not inside a nested
loop, `with` or `try`, which keep theirs, nor with a `while ... else`); the if/while
conversion then sees only ifs and flags.
"""
from __future__ import annotations

import ast

from keel.program.dy2static.transform import _SCOPES, _located


def lower_loop_exits(function: ast.FunctionDef) -> bool:
    """Rewrite the break/continue statements of `function`'s while loops (see the module
    docstring); returns whether it changed anything."""
    lowering = _Lowering()
    function.body = lowering.statements(function.body)
    return lowering.count > 0


class _Lowering:
    def __init__(self):
        self.count = 0

    def statements(self, stmts) -> list:
        """`stmts` with each while loop in them (and in their nested blocks) lowered."""
        out = []
        for stmt in stmts:
            if isinstance(stmt, _SCOPES):
                out.append(stmt)
                continue
            for field in ("body", "orelse", "finalbody"):
                if isinstance(getattr(stmt, field, None), list):
                    setattr(stmt, field, self.statements(getattr(stmt, field)))
            if isinstance(stmt, ast.Try):
                for handler in stmt.handlers:
                    handler.body = self.statements(handler.body)
            out.extend(self._loop(stmt) if isinstance(stmt, ast.While) else [stmt])
        return out

    def _loop(self, loop: ast.While) -> list:
        kinds = _exits(loop.body)
        if not kinds or "other" in kinds or loop.orelse:
            return [loop]
        self.count += 1
        brk = f"_keel_break_{self.count}" if "break" in kinds else None
        cont = f"_keel_continue_{self.count}" if "continue" in kinds else None
        flags = [f for f in (brk, cont) if f]
        body = _guarded(loop.body, brk, cont, flags)
        if cont:
            body = [_set(cont, False, loop)] + body
        loop.body = body
        before = []
        if brk:
            loop.test = _located(ast.BoolOp(op=ast.And(), values=[loop.test, _not([brk])]), loop.test)
            before.append(_set(brk, False, loop))
        return before + [loop]


def _exits(stmts) -> set[str]:
    """The kinds of exits in `stmts` outside nested loops and scopes: "break", "continue",
    and "other" for one inside a `with`/`try` (which the rewrite leaves alone)."""
    found: set[str] = set()

    def visit(n, sheltered):
        if isinstance(n, (*_SCOPES, ast.For, ast.AsyncFor, ast.While)):
            return
        if isinstance(n, (ast.Break, ast.Continue)):
            found.add("other" if sheltered else type(n).__name__.lower())
            return
        inner = sheltered or isinstance(n, (ast.With, ast.AsyncWith, ast.Try))
        for child in ast.iter_child_nodes(n):
            visit(child, inner)
    for stmt in stmts:
        visit(stmt, False)
    return found


def _guarded(stmts, brk, cont, flags) -> list:
    """`stmts` with break/continue set as flags and what follows an exit put under
    `if not (flags):`."""
    out = []
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.Break):
            return out + [_set(brk, True, stmt)]
        if isinstance(stmt, ast.Continue):
            return out + [_set(cont, True, stmt)]
        if isinstance(stmt, ast.If) and _exits([stmt]):
            stmt.body = _guarded(stmt.body, brk, cont, flags)
            stmt.orelse = _guarded(stmt.orelse, brk, cont, flags)
            out.append(stmt)
            rest = _guarded(stmts[i + 1:], brk, cont, flags)
            if rest:
                out.append(_located(ast.If(test=_not(flags), body=rest, orelse=[]), stmts[i + 1]))
            return out
        out.append(stmt)
    return out


def _set(name: str, value: bool, at) -> ast.Assign:
    return _located(ast.Assign(targets=[ast.Name(id=name, ctx=ast.Store())], value=ast.Constant(value)), at)


def _not(flags) -> ast.UnaryOp:
    names = [ast.Name(id=f, ctx=ast.Load()) for f in flags]
    operand = names[0] if len(names) == 1 else ast.BoolOp(op=ast.Or(), values=names)
    return ast.UnaryOp(op=ast.Not(), operand=operand)
