"""print(program): dtypes by name, op lines wrapped at WIDTH with indented continuations."""
import re
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.program.io import load_program
from keel.program.printer import WIDTH, format_op

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "paddle"
OP_LINE = re.compile(r"^    ( *)(\d+): ")


def _adam_program():
    main, startup = pg.Program(), pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x = pg.data("x", [-1, 64])
        label = pg.data("label", [-1, 1], "int64")
        h = pg.nn.fc(x, 128, activation="relu")
        h64 = pg.cast(h, "float64")
        logits = pg.nn.fc(pg.cast(h64, "float32"), 10)
        loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
        block = main.global_block()
        block.append_op("fill_any_like", {"X": h}, {"Out": block.create_var("zeros")}, {"dtype": -1})
        pg.optimizer.Adam(learning_rate=1e-3).minimize(loss)
    return main, startup


def _ops_text(text):
    """{op index: the op's text with its continuation lines joined back} of a listing."""
    ops, current = {}, None
    for line in text.splitlines():
        m = OP_LINE.match(line)
        if m:
            current = int(m.group(2))
            ops[current] = line[m.end():]
        elif current is not None and line.startswith(" " * 12) and not line.lstrip().startswith("block"):
            glue = "" if ops[current].endswith("{") else " "
            ops[current] += glue + line.strip()
        else:
            current = None
    return ops


def test_dtypes_are_shown_by_name_in_vars_and_dtype_attributes():
    main, startup = _adam_program()
    text = str(main)
    assert "    x : float32[-1, 64]  (stop_gradient, feed)" in text.splitlines()
    assert "    label : int64[-1, 1]  (stop_gradient, feed)" in text.splitlines()
    assert "cast_0.tmp_0 : float64[-1, 128]" in text
    ops = _ops_text(text)
    casts = [t for t in ops.values() if " = cast(" in t]
    assert casts[0].endswith("in_dtype=float32, out_dtype=float64)")
    assert casts[1].endswith("in_dtype=float64, out_dtype=float32)")
    # fill_any_like's dtype -1 means "as X": a number, not a dtype
    assert any(" = fill_any_like(" in t and "dtype=-1," in t for t in ops.values())
    # fill_constant seeding loss@GRAD, and the startup program's initializers
    assert any(" = fill_constant(" in t and "dtype=float32," in t for t in ops.values())
    startup_ops = _ops_text(str(startup))
    assert any(" = uniform_random(" in t and "dtype=float32," in t for t in startup_ops.values())
    assert not re.search(r"\b(dtype|in_dtype|out_dtype)=\d", text + str(startup))


def test_no_line_passes_the_width_and_continuations_are_indented():
    main, _ = _adam_program()
    text = str(main)
    lines = text.splitlines()
    assert max(map(len, lines)) <= WIDTH
    adam = next(i for i, line in enumerate(lines) if OP_LINE.match(line) and "{ParamOut=" in line)
    m = OP_LINE.match(lines[adam])
    indent = m.end() + 4                                        # 4 deeper than the op's text
    following = lines[adam + 1:adam + 4]
    assert any(" = adam(inputs={" in line for line in lines[adam:adam + 4])
    assert all(line.startswith(" " * indent) and line[indent] != " " for line in following)
    # joined back, every op reads exactly as it does unwrapped
    ops = _ops_text(text)
    block = main.global_block()
    assert len(ops) == len(block.ops)
    for i, op in enumerate(block.ops):
        assert ops[i] == format_op(op, width=10 ** 6), i
        assert "\n" not in format_op(op, width=10 ** 6)


def test_short_ops_stay_on_one_line():
    main, _ = _adam_program()
    lines = str(main).splitlines()
    assert "     2: {Out=[fc_0.tmp_2]} = relu(inputs={X=[fc_0.tmp_1]})" in lines


def test_a_list_longer_than_a_line_is_broken_between_its_items():
    main, startup = pg.Program(), pg.Program()
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        pg.create_parameter([60], "float32", default_initializer=pg.initializer.Assign(np.arange(60) / 7))
    op = startup.global_block().ops[0]
    text = format_op(op, prefix=7)
    lines = text.splitlines()
    assert len(lines) > 3 and max(7 + len(lines[0]), *map(len, lines[1:])) <= WIDTH
    assert all(line.startswith(" " * 11) for line in lines[1:])
    values = re.search(r"values=\[(.*?)\]", " ".join(line.strip() for line in lines)).group(1)
    np.testing.assert_allclose([float(v) for v in values.split(", ")], np.arange(60) / 7, rtol=1e-6)


@pytest.mark.parametrize("name", ["convbn_adam.train", "ops_zoo", "transformer_encoder"])
def test_paddle_programs_fit_the_width(name):
    text = str(load_program(FIXTURES / f"{name}.pdmodel", verify=False))
    assert max(map(len, text.splitlines())) <= WIDTH
    assert not re.search(r"\b(dtype|in_dtype|out_dtype)=\d", text)
