"""The IR: programs, blocks, variables, operators, the revision counter, clone, and the
build-time errors that name the op, the slot, the shapes and the user's own line."""
import pytest

import keel.program as pg
from keel.proto import pb

THIS_FILE = __file__


def _line_of(marker: str) -> int:
    with open(THIS_FILE) as f:
        return next(i for i, line in enumerate(f, 1) if marker in line and "_line_of" not in line)


def _prog():
    p = pg.Program()
    b = p.global_block()
    x = b.create_var("x", [-1, 4, 5], "float32")
    y = b.create_var("y", [4], "float32")
    return p, b, x, y


def test_append_op_infers_shapes_and_fills_default_attrs():
    p, b, x, y = _prog()
    out = b.create_var("out")
    op = b.append_op("elementwise_add", {"X": x, "Y": y}, {"Out": out}, {"axis": 1})
    assert out.shape == (-1, 4, 5) and out.dtype == pb.VarType.FP32
    assert op.attr("axis") == 1 and op.attr("op_role") == 0 and op.attr("op_namescope") == "/"
    assert op.inputs == {"X": ["x"], "Y": ["y"]} and op.outputs == {"Out": ["out"]}
    assert op.callsite.startswith(f"{THIS_FILE}:")
    assert "elementwise_add(inputs={X=[x], Y=[y]}, axis=1)" in str(p)


def test_block_editing_and_revision_counter():
    p, b, x, y = _prog()
    r0 = p.revision
    o1, o2 = b.create_var("o1"), b.create_var("o2")
    a = b.append_op("elementwise_mul", {"X": x, "Y": x}, {"Out": o1})
    first = b.prepend_op("elementwise_sub", {"X": x, "Y": x}, {"Out": o2})
    assert [op.type for op in b.ops] == ["elementwise_sub", "elementwise_mul"]
    assert p.revision > r0
    r1 = p.revision
    a.set_attr("axis", 0)
    assert p.revision > r1 and a.attr("axis") == 0
    r2 = p.revision
    b.remove_op(first)
    assert [op.type for op in b.ops] == ["elementwise_mul"] and p.revision > r2
    r3 = p.revision
    b.rename_var("o1", "renamed")
    assert a.output("Out") == ["renamed"] and p.revision > r3
    x.stop_gradient = True
    assert p.revision > r3 + 1


def test_sub_blocks_see_parent_vars():
    p, b, x, y = _prog()
    sub = p.create_block()
    assert sub.parent is b and sub.var("x") is x and p.current_block() is sub
    p.rollback()
    assert p.current_block() is b


def test_every_user_program_round_trips():
    p, b, x, y = _prog()
    o = b.create_var("o")
    b.append_op("elementwise_add", {"X": x, "Y": y}, {"Out": o}, {"axis": 1})
    b.create_parameter("w", [4, 5], "float64")
    sub = p.create_block()
    sub.create_var("inner", [2], "int64")
    again = pg.Program.parse_from_string(p.serialize_to_string())
    assert again == p
    assert isinstance(again.global_block().var("w"), pg.Parameter)
    assert str(again) == str(p)


def test_clone_is_deep_and_for_test_sets_is_test_and_drops_backward():
    p, b, x, y = _prog()
    o = b.create_var("o")
    b.append_op("elementwise_add", {"X": x, "Y": y}, {"Out": o}, {"axis": 1})
    p._op_role = 1  # what backward does while appending gradient ops
    b.append_op("elementwise_mul", {"X": o, "Y": o}, {"Out": b.create_var("g")})
    p._op_role = 0
    c = p.clone()
    assert c == p and c is not p
    c.global_block().ops[0].set_attr("axis", -1)
    assert b.ops[0].attr("axis") == 1
    t = p.clone(for_test=True)
    assert [op.type for op in t.global_block().ops] == ["elementwise_add"]


# -- build-time errors: each names the op, the culprit and this file's line ------------------
def _expect(exc, *fragments, marker):
    def check(e):
        text = str(e.value)
        for fragment in fragments:
            assert fragment in text, f"{fragment!r} not in {text!r}"
        assert f"{THIS_FILE}:{_line_of(marker)}" in text
    return check


def test_unknown_op_type_suggests_names():
    p, b, x, y = _prog()
    with pytest.raises(pg.UnknownOpError) as e:
        b.append_op("elementwise_addd", {"X": x}, {})  # MARK-unknown
    _expect(pg.UnknownOpError, "elementwise_addd", "elementwise_add", marker="MARK-unknown")(e)


def test_missing_required_input():
    p, b, x, y = _prog()
    with pytest.raises(pg.SlotError) as e:
        b.append_op("elementwise_add", {"X": x}, {"Out": b.create_var("o")})  # MARK-missing
    _expect(pg.SlotError, "elementwise_add", "'Y'", marker="MARK-missing")(e)


def test_unknown_slot():
    p, b, x, y = _prog()
    with pytest.raises(pg.SlotError) as e:
        b.append_op("elementwise_add", {"X": x, "Y": y, "Z": x}, {"Out": b.create_var("o")})  # MARK-slot
    _expect(pg.SlotError, "elementwise_add", "'Z'", marker="MARK-slot")(e)


def test_wrong_attribute_type():
    p, b, x, y = _prog()
    with pytest.raises(pg.AttrError) as e:
        b.append_op("elementwise_add", {"X": x, "Y": y}, {"Out": b.create_var("o")}, {"axis": "one"})  # MARK-attr
    _expect(pg.AttrError, "elementwise_add", "axis", "'one'", marker="MARK-attr")(e)


def test_unknown_attribute():
    p, b, x, y = _prog()
    with pytest.raises(pg.AttrError) as e:
        b.append_op("elementwise_add", {"X": x, "Y": y}, {"Out": b.create_var("o")}, {"axiz": 1})  # MARK-attr2
    _expect(pg.AttrError, "elementwise_add", "axiz", marker="MARK-attr2")(e)


def test_incompatible_shapes():
    p, b, x, y = _prog()
    z = b.create_var("z", [3])
    with pytest.raises(pg.ShapeError) as e:
        b.append_op("elementwise_add", {"X": x, "Y": z}, {"Out": b.create_var("o")})  # MARK-shape
    _expect(pg.ShapeError, "elementwise_add", "[-1, 4, 5]", "[3]", marker="MARK-shape")(e)


def test_dtype_mismatch():
    p, b, x, y = _prog()
    i = b.create_var("i", [4], "int64")
    with pytest.raises(pg.DTypeError) as e:
        b.append_op("elementwise_add", {"X": x, "Y": i}, {"Out": b.create_var("o")})  # MARK-dtype
    _expect(pg.DTypeError, "elementwise_add", "float32", "int64", marker="MARK-dtype")(e)


def test_undefined_variable():
    p, b, x, y = _prog()
    with pytest.raises(pg.UndefinedVariableError) as e:
        b.append_op("elementwise_add", {"X": x, "Y": "yy"}, {"Out": b.create_var("o")})  # MARK-undef
    _expect(pg.UndefinedVariableError, "elementwise_add", "'yy'", "did you mean y", marker="MARK-undef")(e)


def test_duplicate_name():
    p, b, x, y = _prog()
    with pytest.raises(pg.DuplicateNameError, match="'x' already exists"):
        b.create_var("x", [1])
    with pg.program_guard(p, pg.Program()):
        with pytest.raises(pg.DuplicateNameError, match="'y' already exists"):
            pg.data("y", [-1, 2])


# -- parse-time errors ----------------------------------------------------------------------
def test_garbage_bytes_are_a_parse_error():
    with pytest.raises(pg.ParseError, match="not a valid program file"):
        pg.Program.parse_from_string(b"\xff\xff\xff\xff")
    with pytest.raises(pg.ParseError, match="expected bytes"):
        pg.Program.parse_from_string("a string")


def test_missing_required_fields_are_a_parse_error():
    desc = pb.ProgramDesc()
    desc.blocks.add(idx=0)  # parent_idx is required
    with pytest.raises(pg.ParseError, match="parent_idx"):
        pg.Program.parse_from_string(desc.SerializePartialToString())


def test_parse_lists_all_unsupported_ops_and_undefined_vars_at_once():
    p, b, x, y = _prog()
    o = b.create_var("o")
    b.append_op("elementwise_add", {"X": x, "Y": y}, {"Out": o}, {"axis": 1})
    desc = p.to_desc()
    block = desc.blocks[0]
    for t in ("fancy_op", "other_op", "elementwise_addd"):
        op = block.ops.add(type=t)
        op.inputs.add(parameter="X", arguments=["x"])
    block.ops[0].inputs[0].arguments[0] = "ghost"
    with pytest.raises(pg.UnsupportedProgramError) as e:
        pg.Program.parse_from_string(desc.SerializeToString())
    text = str(e.value)
    for fragment in ("'fancy_op'", "'other_op'", "'elementwise_addd'", "did you mean elementwise_add",
                     "undefined variable 'ghost'", "0:1", "0:3"):
        assert fragment in text
    assert len(e.value.problems) == 4
