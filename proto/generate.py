"""Regenerate proto/framework_pb2.py from proto/framework.proto.

    python -m keel.proto.generate          # rewrite proto/framework_pb2.py
    python -m keel.proto.generate --check  # exit 1 if the committed module is stale

Needs grpcio-tools (in the `dev` and `test` extras), which bundles protoc.
protoc's output is kept as is, except for its runtime-version guard: that guard
would pin users to the newest protobuf, while the generated calls themselves
work with every protobuf release since 4.21 (see pyproject.toml).
"""
from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROTO = "proto/framework.proto"
MODULE = ROOT / "proto" / "framework_pb2.py"

_GUARD = re.compile(
    r"from google\.protobuf import runtime_version as _runtime_version\n"
    r"|_runtime_version\.ValidateProtobufRuntimeVersion\(\n(?:    .*\n)*?\)\n"
)


def generate() -> str:
    """Run protoc on framework.proto; return the module text we commit."""
    from grpc_tools import protoc

    with tempfile.TemporaryDirectory() as out:
        rc = protoc.main(["protoc", f"-I{ROOT}", f"--python_out={out}", str(ROOT / PROTO)])
        if rc != 0:
            raise SystemExit(f"protoc failed on {PROTO} (exit {rc})")
        text = (Path(out) / "proto" / "framework_pb2.py").read_text()
    text = _GUARD.sub("", text)
    # protoc names the module after the .proto's path (proto/); installed, it is keel.proto's.
    text = text.replace("'proto.framework_pb2'", "'keel.proto.framework_pb2'")
    # The protoc version line changes with grpcio-tools releases; it carries no meaning for us.
    return re.sub(r"# Protobuf Python Version: .*\n", "", text)


def main(argv: list[str]) -> int:
    text = generate()
    if "--check" in argv:
        if MODULE.read_text() != text:
            print(f"{MODULE} is stale: run `python -m keel.proto.generate`", file=sys.stderr)
            return 1
        return 0
    MODULE.write_text(text)
    print(f"wrote {MODULE}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
