"""The executor's generated block functions (executor/plan.py `generate`): text from a
program file never becomes code, the source is printable, and its variants (NaN check,
profiling, keep_intermediates, the thread pool) run the same ops."""
from __future__ import annotations

import ast
import builtins
import inspect
import io
import re
import tokenize
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import ExecutionError, Executor, NonFiniteError, Scope
from keel.kernels.registry import all_kernels

ROOT = Path(__file__).resolve().parent.parent

# keywords of a bound kernel's call are its own parameter names (kernel code, not file text)
KERNEL_PARAMETERS = {name for kdef in all_kernels().values() for name in inspect.signature(kdef.fn).parameters}
HOSTILE = ["x'", 'y"', "a\nb", "c\\", "d\\n", "__import__('builtins').setattr(__import__('builtins'), 'PWNED', 1)",
           "e\x00f", "ünï∂ćødé", "g\u2028h\r", "')\n    __import__('os')._exit(3)\n#", "v0", "k0", "del", "@EMPTY", " "]


def _hostile_program(names, attr_text):
    """out = ((a + b) * 2 - a) fed a, b; plus a persistable counter += a. Every variable
    is named from `names`, every op carries `attr_text` in its string attributes."""
    p = pg.Program()
    b = p.global_block()
    a, bb, s, m, out, cnt = names[:6]
    b.create_var(a, [-1, 3], "float32", need_check_feed=True)
    b.create_var(bb, [-1, -1], "float32", need_check_feed=True)
    for n in (s, m, out):
        b.create_var(n, [-1, 3], "float32")
    b.create_var(cnt, [2, 3], "float32", persistable=True)
    stack = [f'  File "{attr_text}.py", line 7, in <module>', f"    {attr_text}"]
    ops = [b.append_op("elementwise_add", {"X": a, "Y": bb}, {"Out": s}),
           b.append_op("scale", {"X": s}, {"Out": m}, {"scale": 2.0}),
           b.append_op("elementwise_sub", {"X": m, "Y": a}, {"Out": out}),
           b.append_op("elementwise_max", {"X": cnt, "Y": a}, {"Out": cnt})]
    for op in ops:
        op.set_attr("op_callstack", stack)
        op.set_attr("op_namescope", attr_text)
        op.set_attr("op_device", attr_text)
    return p


def _tokens(source):
    return [t for t in tokenize.generate_tokens(io.StringIO(source).readline)
            if t.type not in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER)]


@pytest.mark.parametrize("shift", range(0, len(HOSTILE), 6))
def test_hostile_names_and_attributes_run_correctly_and_inject_nothing(shift, monkeypatch):
    monkeypatch.setattr("keel.executor.plan.THREAD_MIN_ELEMENTS", 0)  # submit even these small ops
    names = (HOSTILE[shift:] + HOSTILE[:shift])[:6]
    attr_text = "".join(HOSTILE)
    p = _hostile_program(names, attr_text)
    a, b, s, m, out, cnt = names
    rng = np.random.default_rng(0)
    av, bv = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((2, 3)).astype(np.float32)
    for exe in (Executor(), Executor(check_nan_inf=True), Executor(profile=True), Executor(num_threads=2),
                Executor(keep_intermediates=True)):
        scope = Scope()
        scope.set(cnt, np.zeros((2, 3), np.float32))
        got, = exe.run(p, feed={a: av, b: bv}, fetch_list=[out], scope=scope)
        np.testing.assert_allclose(got, (av + bv) * 2 - av, rtol=1e-6)
        np.testing.assert_array_equal(scope.get(cnt), np.maximum(av, 0))
        assert not hasattr(builtins, "PWNED")
        source = exe.plan_source(p, [a, b], [out])
        # only generated identifiers, keywords, integers and operators outside comments
        for tok in _tokens(source):
            assert tok.type in (tokenize.NAME, tokenize.NUMBER, tokenize.OP), tok
            if tok.type == tokenize.NAME:
                assert re.fullmatch(r"[vkf]\d+|block_0|del|return|try|except|ValueError|None|out|_|check|T|now"
                                    r"|submit|result|append|base|is|if|else|def", tok.string) \
                    or tok.string in KERNEL_PARAMETERS, tok
        # the file's text appears in the display-only comments, escaped: one line each
        assert len(source.splitlines()) == source.count("\n")
        assert repr(p.global_block().ops[0].callsite) in source
        assert (out if out.isprintable() else repr(out)) in source
    # a failing kernel names the op and the (hostile) variables as data, not code
    with pytest.raises(ExecutionError, match=r"elementwise_add \(op 0\) failed") as info:
        Executor().run(p, feed={a: av, b: np.ones((2, 2), np.float32)}, fetch_list=[out], scope=scope)
    assert f"{a}[2, 3], {b}[2, 2]" in str(info.value) and p.global_block().ops[0].callsite in str(info.value)


def test_no_module_but_plan_turns_text_into_code():
    """exec, eval and compile (the builtins) appear in executor/plan.py, which says why, and
    compile alone in program/dy2static, which compiles the syntax tree of the user's own
    function (rewritten), no text."""
    users = {}
    for path in ROOT.rglob("*.py"):
        if any(part in ("tests", ".git", "build") or part.startswith(".") for part in path.relative_to(ROOT).parts):
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            func = node.func if isinstance(node, ast.Call) else None
            name = func.id if isinstance(func, ast.Name) else func.attr if (
                isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                and func.value.id == "builtins") else None
            if name in ("exec", "eval", "compile", "__import__"):
                users.setdefault(str(path.relative_to(ROOT)), []).append(name)
    assert users == {"executor/plan.py": ["exec", "compile"], "program/dy2static/__init__.py": ["compile"]}
    assert "The one place Keel turns text it wrote into code" in (ROOT / "executor" / "plan.py").read_text()
    dy2static = (ROOT / "program" / "dy2static" / "__init__.py").read_text()
    assert "compile(tree, " in dy2static and "the rewritten tree compiled with `compile()`" in dy2static


def _mlp(n_hidden=2):
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 3
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x = pg.data("x", [-1, 8])
        h = x
        for _ in range(n_hidden):
            h = pg.nn.fc(h, 16, activation="relu")
        y = pg.nn.softmax(pg.nn.fc(h, 4))
    return main, startup, y


def test_plan_source_shows_one_line_per_op_with_its_index_type_and_line():
    main, startup, y = _mlp()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    source = exe.plan_source(main, ["x"], [y])
    assert source.startswith("def block_0(")
    for i in range(len(main.global_block().ops)):
        op = main.global_block().ops[i]
        assert re.search(rf"  # op {i} {op.type}: {', '.join(op.output_arg_names)} <- "
                         rf"{', '.join(op.input_arg_names)}; [^\n]*test_codegen.py:\d+", source)
    assert "return (" in source
    # what runs is that function: the same values as the ops one by one
    xv = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)
    got, = exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scope)
    np.testing.assert_allclose(got.sum(1), 1, rtol=1e-5)


def test_profile_records_each_ops_time():
    main, startup, y = _mlp()
    exe, scope = Executor(profile=True), Scope()
    exe.run(startup, scope=scope)
    assert [t for _, _, t in exe.last_profile] and all(t >= 0 for _, _, t in exe.last_profile)
    xv = np.ones((3, 8), np.float32)
    exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scope)
    ops = main.global_block().ops
    assert [(i, t) for i, t, _ in exe.last_profile] == [(i, op.type) for i, op in enumerate(ops)]
    assert all(isinstance(s, float) and s >= 0 for _, _, s in exe.last_profile)
    plain, = Executor().run(main, feed={"x": xv}, fetch_list=[y], scope=scope)
    profiled, = exe.run(main, feed={"x": xv}, fetch_list=[y], scope=scope)
    np.testing.assert_array_equal(plain, profiled)
    assert Executor().last_profile is None


def test_nan_check_names_the_op_and_variable_after_a_donated_write():
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 3], "float32", need_check_feed=True)
    for n in ("s", "r"):
        b.create_var(n, [-1, 3], "float32")
    b.append_op("scale", {"X": "x"}, {"Out": "s"}, {"scale": -1.0})
    b.append_op("sqrt", {"X": "s"}, {"Out": "r"})   # writes into s's buffer
    with np.errstate(invalid="ignore"):
        r, = Executor().run(p, feed={"x": np.ones((1, 3), np.float32)}, fetch_list=["r"], scope=Scope())
        assert np.isnan(r).all()
        with pytest.raises(NonFiniteError, match=r"sqrt \(op 1\) produced a non-finite value in 'r' \(shape \[1, 3\]\)"):
            Executor(check_nan_inf=True).run(p, feed={"x": np.ones((1, 3), np.float32)}, fetch_list=["r"],
                                             scope=Scope())


def test_a_kernel_error_through_the_pool_names_its_op(monkeypatch):
    monkeypatch.setattr("keel.executor.plan.THREAD_MIN_ELEMENTS", 0)  # submit even these small ops
    p = pg.Program()
    b = p.global_block()
    b.create_var("x", [-1, 3], "float32", need_check_feed=True)
    b.create_var("y", [-1, -1], "float32", need_check_feed=True)
    for n in ("a", "c", "d"):
        b.create_var(n, [-1, 3], "float32")
    # the first of a level's ops goes to the pool (the last runs in the calling thread)
    b.append_op("elementwise_max", {"X": "x", "Y": "y"}, {"Out": "c"})   # fails: [2, 3] vs [2, 2]
    b.append_op("exp", {"X": "x"}, {"Out": "a"})
    b.append_op("elementwise_add", {"X": "a", "Y": "c"}, {"Out": "d"})
    exe = Executor(num_threads=2)
    assert "submit(" in exe.plan_source(p, ["x", "y"], ["d"])
    with pytest.raises(ExecutionError, match=r"elementwise_max \(op 0\) failed with inputs x\[2, 3\], y\[2, 2\]"):
        exe.run(p, feed={"x": np.ones((2, 3), np.float32), "y": np.ones((2, 2), np.float32)},
                fetch_list=["d"], scope=Scope())
    exe.close()


def test_a_duplicable_output_slot_nothing_reads_may_come_back_as_none():
    """einsum's kernel returns None for InnerCache and XShape when its `need` leaves them out:
    the generated line does not unpack them."""
    p = pg.Program()
    b = p.global_block()
    b.create_var("a", [2, 3], need_check_feed=True)
    b.create_var("c", [3, 4], need_check_feed=True)
    for n in ("o", "x0", "x1", "i0", "i1"):
        b.create_var(n)
    b.append_op("einsum", {"Operands": ["a", "c"]}, {"Out": ["o"], "InnerCache": ["i0", "i1"], "XShape": ["x0", "x1"]},
                {"equation": "ij,jk->ik"})
    a, c = np.ones((2, 3), np.float32), np.arange(12, dtype=np.float32).reshape(3, 4)
    exe = Executor()
    out, = exe.run(p, feed={"a": a, "c": c}, fetch_list=["o"])
    np.testing.assert_array_equal(out, a @ c)
    out, x0 = exe.run(p, feed={"a": a, "c": c}, fetch_list=["o", "x0"])
    np.testing.assert_array_equal(x0, a)
