"""PaddlePaddle 3.x PIR programs (`.json`, as `paddle.jit.save` and `save_inference_model` write
them by default since 3.0) read into Keel's Program of legacy ops, so every pass, the executor
and the Predictor run them unchanged, and Keel's programs written as PIR. `json_file` bounds the
untrusted text, `schema` checks and decodes its structure, `op_table` holds the PIR -> legacy op
mapping as data, `translate` applies it; `write` applies it backwards, with `signatures` (what
PaddlePaddle's deserializer requires of each op) and `write_special` (the ops that are not one
row each)."""
from __future__ import annotations

from keel.program.io.pir.json_file import load_json
from keel.program.io.pir.schema import NEWEST_VERSION, decode_program
from keel.program.io.pir.translate import translate
from keel.program.io.pir.write import write_pir_program

__all__ = ["is_pir_json", "parse_pir_program", "write_pir_program", "NEWEST_VERSION"]


def is_pir_json(data: bytes) -> bool:
    """Whether program bytes are JSON text (a PIR program, or JSON that is not one) rather than a
    protobuf ProgramDesc: a ProgramDesc starts with field 1's tag (0x0a), JSON with `{`."""
    return data[:64].lstrip(b" \t\r\n\xef\xbb\xbf").startswith(b"{")


def parse_pir_program(data: bytes, *, verify: bool = True, source: str = "program"):
    """The Program a PIR JSON file describes. Raises ParseError naming the op and field for a
    malformed file, a newer version, or an op Keel has no legacy counterpart for."""
    pir = decode_program(load_json(bytes(data), source), source)
    program = translate(pir, source)
    program.pir_version = pir.version
    if verify:
        from keel.program.verify import check_loaded
        check_loaded(program, source)
    return program
