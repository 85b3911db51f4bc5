"""The wire format: our framework.proto reads PaddlePaddle's files with nothing lost,
and the committed generated module matches the .proto."""
from pathlib import Path

import pytest

import keel.program as pg
from keel.proto import generate, pb

FIXTURES = sorted((Path(__file__).parent / "fixtures" / "paddle").glob("*.pdmodel"))


def test_generated_module_matches_proto():
    pytest.importorskip("grpc_tools", reason="grpcio-tools (in the test extra) regenerates the module")
    assert generate.MODULE.read_text() == generate.generate(), "run `python -m keel.proto.generate`"


def test_there_are_paddle_fixtures():
    assert len(FIXTURES) >= 10


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_paddle_file_reserializes_byte_identical(path):
    blob = path.read_bytes()
    desc = pb.ProgramDesc.FromString(blob)
    assert desc.version.version == 3003001
    assert desc.SerializeToString() == blob
    # Every byte maps onto a field we declare: dropping unknown fields changes nothing.
    desc.DiscardUnknownFields()
    assert desc.SerializeToString() == blob


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.name)
def test_paddle_file_round_trips_through_the_ir(path):
    blob = path.read_bytes()
    program = pg.Program.parse_from_string(blob, verify=False, source=path.name)
    assert program.to_desc() == pb.ProgramDesc.FromString(blob)
    assert program.serialize_to_string() == blob
    again = pg.Program.parse_from_string(program.serialize_to_string(), verify=False)
    assert again == program


def test_ir_views_of_a_paddle_file():
    program = pg.Program.parse_from_string((FIXTURES[0].parent / "mlp_fc.pdmodel").read_bytes(), verify=False)
    block = program.global_block()
    feed = block.ops[0]
    assert feed.type == "feed" and feed.attr("col") == 0 and feed.input("X") == ["feed"]
    assert block.ops[-1].type == "fetch"
    x = block.var(feed.output("Out")[0])
    assert x.shape == (-1, 16) and x.dtype_name == "float32" and x.need_check_feed
    assert block.var("feed").type == pb.VarType.FEED_MINIBATCH and block.var("feed").shape is None
    mul = next(op for op in block.ops if op.type == "mul")
    assert mul.attr("x_num_col_dims") == 1 and mul.attr_type("x_num_col_dims") == pb.INT
