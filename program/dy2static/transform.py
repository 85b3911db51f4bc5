"""The AST rewrite of dy2static: a function's `if` and `while` statements become calls that
decide when they run (program/dy2static/runtime.py), as PaddlePaddle's IfElseTransformer
and LoopTransformer write them:

    if x.mean() > 0:                     def _keel_true_1(y):
        y = x * 2                            y = x * 2
    else:                          ->        return (y,)
        y = x - 1                        def _keel_false_1(y):
                                             y = x - 1
                                             return (y,)
                                         (y,) = _keel_jst.convert_ifelse(x.mean() > 0, _keel_true_1,
                                             _keel_false_1, _keel_jst.values(locals(), ('y',)), ('y',), 'f.py:3')

A branch function takes every name its branch assigns (so it can read their values from
before the if) and returns those still read after the if (elsewhere in the function, or
by an enclosing loop's next step). A loop's condition and body are functions of the loop
variables: the names the body assigns that the condition, a later step of the body or the
code after the loop reads. `for i in range(...)` becomes a function of `i` and the loop
variables, looped in Python over Python bounds and by while_loop over tensor ones;
`for x in xs` (or `enumerate(xs)`) a function of the item and the loop variables, looped
in Python over anything but a program Variable, whose leading dimension a while_loop walks.
`and`/`or`/`not` in a converted condition become calls too, since Python's would ask a
tensor for its truth, and so does `a if cond else b`. A call `f(...)` becomes
`convert_call(f)(...)`, so the user's functions and Layers it calls are converted in turn.

An `if` holding a `return` (outside loops) is first rewritten so that it assigns the
result and one `return` follows it (`single_return`: the code after such an if moves into
its branches that do not return). An `if`/`while` still holding `return`, `break`,
`continue`, `yield`, `global` or `nonlocal` (a `for` holding any of them, or a loop with
an `else:`) stays Python: its condition (a for loop's iterable, or range's bounds) goes
through `python_condition`, which lets a Python value through and stops on a tensor with
the line and what to write instead.
"""
from __future__ import annotations

import ast
from collections import Counter

JST = "_keel_jst"           # the runtime module, a free variable of the converted function
# builtins that read the calling frame (or the class cell): called as they are
_FRAME_BUILTINS = frozenset({"super", "locals", "globals", "vars", "dir", "eval", "exec"})
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


# -- what a piece of code reads and writes ---------------------------------------------------
def loads(node) -> Counter:
    """How often each name is read in `node` (nested functions included: they read it too;
    an augmented assignment reads its target)."""
    found = Counter()
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
            found[n.id] += 1
        elif isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name):
            found[n.target.id] += 1
    return found


def stores(nodes) -> list[str]:
    """The names the statements bind in their own scope, in first-binding order (not inside
    nested functions, classes or comprehensions, which have scopes of their own)."""
    found: dict[str, None] = {}

    def visit(n):
        if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del)):
            found[n.id] = None
        elif isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found[n.name] = None
            return
        elif isinstance(n, (ast.Lambda, *_COMPREHENSIONS)):
            return
        elif isinstance(n, ast.alias):
            found[(n.asname or n.name).split(".")[0]] = None
        elif isinstance(n, ast.ExceptHandler) and n.name:
            found[n.name] = None
        for child in ast.iter_child_nodes(n):
            visit(child)
    for node in nodes:
        visit(node)
    return list(found)


def read_before_written(body) -> set[str]:
    """Names a statement list may read before it surely binds them: a loop body reads these
    from the step before. Only plain assignments at the top level count as sure bindings."""
    written: set[str] = set()
    carried: set[str] = set()
    for stmt in body:
        carried |= set(loads(stmt)) - written
        if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            written |= set(stores([stmt]))
    return carried


def _escapes(body) -> str | None:
    """The first statement in `body` that leaves or rebinds outside a converted function:
    return/yield/global/nonlocal anywhere in its scope, break/continue outside an inner loop."""
    def visit(n, loop):
        if isinstance(n, _SCOPES):
            return None
        if isinstance(n, ast.Return):
            return "return"
        if isinstance(n, (ast.Yield, ast.YieldFrom, ast.Await)):
            return "yield"
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            return type(n).__name__.lower()
        if isinstance(n, (ast.Break, ast.Continue)) and not loop:
            return type(n).__name__.lower()
        inner = loop or isinstance(n, (ast.For, ast.AsyncFor, ast.While))
        for child in ast.iter_child_nodes(n):
            found = visit(child, inner)
            if found:
                return found
        return None
    for stmt in body:
        found = visit(stmt, False)
        if found:
            return found
    return None


# -- early returns ---------------------------------------------------------------------------
RETURN = "_keel_return"


def _returns_in(stmts) -> bool:
    """Whether a return sits in `stmts` outside loops and nested scopes (one a rewrite of
    the if statements around it can move to the end)."""
    def visit(n):
        if isinstance(n, ast.Return):
            return True
        if isinstance(n, (*_SCOPES, ast.For, ast.AsyncFor, ast.While, ast.Try, ast.With)):
            return False
        return any(visit(c) for c in ast.iter_child_nodes(n))
    return any(visit(s) for s in stmts)


def _ends_in_return(stmts) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)


def _lift(stmts) -> list:
    """`stmts` with the code after an `if` that returns on some path moved into its
    branches that do not return, so every path ends in a return or falls off the end."""
    for i, stmt in enumerate(stmts):
        if isinstance(stmt, ast.If) and _returns_in([stmt]):
            rest = stmts[i + 1:]
            stmt.body = _lift(stmt.body if _ends_in_return(stmt.body) else stmt.body + _copies(rest))
            stmt.orelse = _lift(stmt.orelse if _ends_in_return(stmt.orelse) else stmt.orelse + _copies(rest))
            return stmts[:i + 1]
    return stmts


def _copies(stmts) -> list:
    import copy
    return [copy.deepcopy(s) for s in stmts]


def _to_assignments(stmts, at) -> list:
    """A lifted statement list with each final `return v` written `_keel_return = v` (and a
    path that falls off the end, `_keel_return = None`)."""
    if stmts and isinstance(stmts[-1], ast.Return):
        value = stmts[-1].value or ast.Constant(None)
        return stmts[:-1] + [_located(ast.Assign(targets=[ast.Name(id=RETURN, ctx=ast.Store())], value=value),
                                      stmts[-1])]
    if stmts and isinstance(stmts[-1], ast.If) and _returns_in([stmts[-1]]):
        last = stmts[-1]
        last.body = _to_assignments(last.body, last)
        last.orelse = _to_assignments(last.orelse, last)
        return stmts
    return stmts + [_located(ast.Assign(targets=[ast.Name(id=RETURN, ctx=ast.Store())], value=ast.Constant(None)),
                             at)]


def single_return(function: ast.FunctionDef) -> bool:
    """Rewrite `function` so that an `if` holding returns (outside loops) becomes one
    assigning the result, followed by one `return`: then a tensor can decide the if.
    Returns whether it changed anything."""
    body = function.body
    if not any(isinstance(s, ast.If) and _returns_in([s]) for s in body):
        return False
    lifted = _lift(body)
    function.body = _to_assignments(lifted, lifted[-1]) + [
        _located(ast.Return(value=ast.Name(id=RETURN, ctx=ast.Load())), lifted[-1])]
    return True


# -- the rewrite -------------------------------------------------------------------------------
class ControlFlowTransformer(ast.NodeTransformer):
    """Rewrites the `if`/`while` statements of one function (see the module docstring).
    `converted` counts the statements rewritten, `guarded` those left to Python, `calls`
    the calls routed through convert_call."""

    def __init__(self, function: ast.FunctionDef, filename: str):
        self._all_loads = loads(function)
        self._filename = filename
        self.converted = 0
        self.guarded = 0
        self.calls = 0
        self._items = 0   # names for the items of converted for loops

    def _where(self, node) -> str:
        return f"{self._filename}:{node.lineno}"

    def _read_outside(self, node) -> set[str]:
        inside = loads(node)
        return {n for n, k in self._all_loads.items() if k > inside.get(n, 0)}

    def visit_Call(self, node: ast.Call):
        """`f(...)` -> `convert_call(f)(...)`: a function or Layer of the user's called here
        is converted too (its own if/while), as PaddlePaddle's CallTransformer does."""
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id in _FRAME_BUILTINS:
            return node
        self.calls += 1
        node.func = ast.copy_location(_jst_call("convert_call", [node.func]), node.func)
        return node

    # nested functions and classes are converted when called, not here
    def visit_FunctionDef(self, node):
        return node

    visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = visit_FunctionDef

    def visit_If(self, node: ast.If):
        escape = _escapes(node.body + node.orelse)
        assigned = stores(node.body + node.orelse)
        live = [n for n in assigned if n in self._read_outside(node)]
        self.generic_visit(node)
        if escape:
            return self._guard(node, "if", escape)
        k = self._converting()
        true_fn = self._function(f"_keel_true_{k}", assigned, node.body, _tuple(live), node)
        false_fn = self._function(f"_keel_false_{k}", assigned, node.orelse or [ast.Pass()], _tuple(live), node)
        call = _jst_call("convert_ifelse", [_conditions(node.test), _name(true_fn.name), _name(false_fn.name),
                                            _values(assigned), _strings(live),
                                            ast.Constant(self._where(node))])
        return [true_fn, false_fn, _assign(live, call, node)]

    def visit_While(self, node: ast.While):
        escape = _escapes(node.body) or ("while ... else" if node.orelse else None)
        assigned = stores(node.body)
        wanted = read_before_written(node.body) | set(loads(node.test)) | self._read_outside(node)
        loop_vars = [n for n in assigned if n in wanted]
        self.generic_visit(node)
        if escape:
            return self._guard(node, "while", escape)
        k = self._converting()
        cond_fn = self._function(f"_keel_cond_{k}", loop_vars, [], _conditions(node.test), node)
        body_fn = self._function(f"_keel_body_{k}", loop_vars, node.body, _tuple(loop_vars), node)
        call = _jst_call("convert_while", [_name(cond_fn.name), _name(body_fn.name), _values(loop_vars),
                                           _strings(loop_vars), ast.Constant(self._where(node))])
        return [cond_fn, body_fn, _assign(loop_vars, call, node)]

    def visit_IfExp(self, node: ast.IfExp):
        """`a if cond else b`: convert_ifelse over two branches of one value each."""
        self.generic_visit(node)
        self.converted += 1
        branches = [_lazy(ast.Tuple(elts=[value], ctx=ast.Load())) for value in (node.body, node.orelse)]
        call = _jst_call("convert_ifelse", [_conditions(node.test), *branches, ast.Tuple(elts=[], ctx=ast.Load()),
                                            _strings(["(the if-expression)"]), ast.Constant(self._where(node))])
        return _located(ast.Subscript(value=call, slice=ast.Constant(0), ctx=ast.Load()), node)

    def visit_For(self, node: ast.For):
        """`for i in range(...)`: a loop whose bounds may be tensors (convert_for_range).
        `for x in xs` and `for i, x in enumerate(xs)`: over a tensor, a loop over its leading
        dimension (convert_for_iter, as PaddlePaddle's ForNodeVisitor writes it); over
        anything else, Python's loop. A for loop holding break/return/... (or an else:)
        stays Python: a tensor in its header stops with the line and what to write."""
        escape = _escapes(node.body) or ("for ... else" if node.orelse else None)
        is_range = (isinstance(node.target, ast.Name) and _called(node.iter, "range")
                    and 1 <= len(node.iter.args) <= 3)
        enumerated = not is_range and _called(node.iter, "enumerate") and len(node.iter.args) == 1
        self._items += 1
        item = f"_keel_item_{self._items}"
        header = [] if is_range else [_located(ast.Assign(targets=[node.target], value=_name(item)), node)]
        wanted = read_before_written(header + node.body) | self._read_outside(node)
        target = node.target.id if is_range else None
        assigned = [n for n in stores(header + node.body) if n in wanted and n != target]
        loop_vars = [target, *assigned] if is_range else assigned
        self.generic_visit(node)
        if escape:
            return self._guard_for(node, is_range, escape)
        where = ast.Constant(self._where(node))
        if is_range:
            body_fn = self._function(f"_keel_for_{self._converting()}", loop_vars, node.body, _tuple(loop_vars), node)
            bounds = ast.Tuple(elts=list(node.iter.args), ctx=ast.Load())
            call = _jst_call("convert_for_range", [bounds, _name(body_fn.name), _values(loop_vars),
                                                   _strings(loop_vars), where])
            return [body_fn, _assign(loop_vars, call, node)]
        body_fn = self._function(f"_keel_for_{self._converting()}", [item, *loop_vars], header + node.body,
                                 _tuple(loop_vars), node)
        iterable = node.iter.args[0] if enumerated else node.iter
        call = _jst_call("convert_for_iter", [iterable, ast.Constant(enumerated), _name(body_fn.name),
                                              _values(loop_vars), _strings(loop_vars), where])
        return [body_fn, _assign(loop_vars, call, node)]

    def _guard_for(self, node: ast.For, is_range: bool, escape: str):
        """A for loop left to Python: its iterable (range's bounds) must not be a tensor."""
        self.guarded += 1

        def guard(expr):
            return ast.copy_location(_jst_call("python_condition", [expr, ast.Constant("for"), ast.Constant(escape),
                                                                    ast.Constant(self._where(node))]), expr)
        if is_range:
            node.iter.args = [guard(a) for a in node.iter.args]
        else:
            node.iter = guard(node.iter)
        return node

    def _converting(self) -> int:
        """A number for the functions of the statement being converted."""
        self.converted += 1
        return self.converted

    def _guard(self, node, kind: str, escape: str):
        """Leave the statement to Python; a tensor condition stops with what to write."""
        self.guarded += 1
        node.test = ast.copy_location(
            _jst_call("python_condition", [node.test, ast.Constant(kind), ast.Constant(escape),
                                           ast.Constant(self._where(node))]), node.test)
        return node

    @staticmethod
    def _function(name, params, body, result, at) -> ast.FunctionDef:
        args = ast.arguments(posonlyargs=[], args=[ast.arg(arg=p) for p in params], vararg=None, kwonlyargs=[],
                             kw_defaults=[], kwarg=None, defaults=[])
        fn = ast.FunctionDef(name=name, args=args, body=list(body) + [ast.Return(value=result)],
                             decorator_list=[], returns=None, type_comment=None)
        return _located(fn, at)


def _called(expr, builtin: str) -> bool:
    """`expr` is a call `builtin(...)` with positional arguments only (range, enumerate)."""
    return (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id == builtin
            and not expr.keywords and not any(isinstance(a, ast.Starred) for a in expr.args))


def _located(node, at):
    for n in ast.walk(node):
        if "lineno" in n._attributes and not hasattr(n, "lineno"):
            ast.copy_location(n, at)
    return ast.fix_missing_locations(node)


def _name(name: str) -> ast.Name:
    return ast.Name(id=name, ctx=ast.Load())


def _tuple(names) -> ast.Tuple:
    return ast.Tuple(elts=[_name(n) for n in names], ctx=ast.Load())


def _strings(names) -> ast.Tuple:
    return ast.Tuple(elts=[ast.Constant(n) for n in names], ctx=ast.Load())


def _jst_call(function: str, args) -> ast.Call:
    return ast.Call(func=ast.Attribute(value=_name(JST), attr=function, ctx=ast.Load()), args=list(args),
                    keywords=[])


def _values(names) -> ast.Call:
    """The current values of `names` (UNDEFINED for one not bound yet)."""
    return _jst_call("values", [ast.Call(func=_name("locals"), args=[], keywords=[]), _strings(names)])


def _assign(names, call, at):
    if not names:
        return _located(ast.Expr(value=call), at)
    target = ast.Tuple(elts=[ast.Name(id=n, ctx=ast.Store()) for n in names], ctx=ast.Store())
    return _located(ast.Assign(targets=[target], value=call), at)


def _conditions(test):
    """`test` with and/or/not turned into calls that build logical ops on tensors and
    short-circuit like Python on Python values."""
    class Logic(ast.NodeTransformer):
        def visit_BoolOp(self, node):
            self.generic_visit(node)
            function = "convert_logical_and" if isinstance(node.op, ast.And) else "convert_logical_or"
            result = node.values[0]
            for value in node.values[1:]:
                result = _jst_call(function, [_lazy(result), _lazy(value)])
            return ast.copy_location(result, node)

        def visit_UnaryOp(self, node):
            self.generic_visit(node)
            if isinstance(node.op, ast.Not):
                return ast.copy_location(_jst_call("convert_logical_not", [node.operand]), node)
            return node

        def visit_Lambda(self, node):
            return node
    return Logic().visit(test)


def _lazy(expr) -> ast.Lambda:
    args = ast.arguments(posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None,
                         defaults=[])
    return ast.Lambda(args=args, body=expr)
