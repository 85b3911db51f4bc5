"""Keel's program file format: the protobuf messages of a `.pdmodel` file.

`framework_pb2` is generated from `framework.proto` (see `proto/generate.py`).
"""
from keel.proto import framework_pb2 as pb

__all__ = ["pb"]
