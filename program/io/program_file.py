"""Program files (`.pdmodel`) and the parameters that go with a program (`.pdiparams`)."""
from __future__ import annotations

import os
from typing import Mapping

import numpy as np

from keel.program.errors import ParseError
from keel.program.io.atomic import atomic_write
from keel.program.io.tensor_file import load_combined, save_combined
from keel.program.program import Program
from keel.proto import pb


def save_program(program: Program, path) -> None:
    """Write `program` as a ProgramDesc file (atomically)."""
    atomic_write(path, program.serialize_to_string())


def load_program(path, *, verify: bool = True) -> Program:
    """Read a program file (`.pdmodel` or PIR `.json`). Errors name the file; with `verify`,
    every unsupported op, slot or attribute is listed at once."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ParseError(f"cannot read program file {path}: {e.strerror or e}") from None
    return parse_program(data, verify=verify, source=path)


def parse_program(data: bytes, *, verify: bool = True, source: str = "program") -> Program:
    """Program bytes in either format: a PIR JSON program (PaddlePaddle 3.x's default, `.json`)
    or a ProgramDesc (`.pdmodel`), told apart by their first byte, not by the file name."""
    from keel.program.io import pir
    if pir.is_pir_json(data):
        return pir.parse_pir_program(data, verify=verify, source=source)
    return Program.parse_from_string(data, verify=verify, source=source)


PROGRAM_SUFFIXES = (".json", ".pdmodel")   # PaddlePaddle 3.x's default (PIR), then legacy
PARAMS_SUFFIX = ".pdiparams"


def model_files(path) -> tuple[str, str]:
    """(program file, parameter file) named by `path`: a program file (`.json` or `.pdmodel`:
    its `.pdiparams` next to it), a prefix (`prefix.json`, else `prefix.pdmodel`, as
    PaddlePaddle 3.x looks for them), or a directory holding one model (PaddleX's
    `inference.json` + `inference.pdiparams` + `inference.yml`; `inference` or `model` first
    when it holds several)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return _model_in_directory(path)
    for suffix in PROGRAM_SUFFIXES:
        if path.endswith(suffix):
            return path, path[:-len(suffix)] + PARAMS_SUFFIX
    for suffix in PROGRAM_SUFFIXES:
        if os.path.exists(path + suffix):
            return path + suffix, path + PARAMS_SUFFIX
    return path + ".pdmodel", path + PARAMS_SUFFIX  # (the error then names the legacy file)


def model_file_set(model_file, params_file) -> list[str]:
    """The files a save of one model replaces as a set (atomic.FileSet), and so the set a load
    completes an interrupted save of: the program, its parameters, and the program file of the
    other format beside it (a `.json` left beside a new `.pdmodel` would be loaded instead)."""
    model_file, params_file = os.fspath(model_file), os.fspath(params_file)
    for suffix in PROGRAM_SUFFIXES:
        if model_file.endswith(suffix):
            stem = model_file[:-len(suffix)]
            return [model_file, params_file] + [stem + s for s in PROGRAM_SUFFIXES if s != suffix]
    return [model_file, params_file]


def _model_in_directory(directory: str) -> tuple[str, str]:
    stems = sorted({name[:-len(suffix)] for name in os.listdir(directory) for suffix in PROGRAM_SUFFIXES
                    if name.endswith(suffix) and name != "inference.yml"})
    for preferred in ("inference", "model", "__model__"):
        if preferred in stems:
            stems = [preferred]
    if len(stems) != 1:
        raise ParseError(f"{directory}: expected one model (NAME.json or NAME.pdmodel) in the directory, "
                         f"found {len(stems)}" + (f": {', '.join(stems[:6])}" if stems else ""))
    return model_files(os.path.join(directory, stems[0]))


def persistable_specs(program: Program) -> list[tuple[str, int, tuple[int, ...]]]:
    """(name, dtype, shape) of the variables a program's parameter file holds: the
    persistable tensors of block 0 (feed/fetch lists excluded)."""
    return [(v.name, v.dtype, v.shape) for v in program.global_block().vars.values()
            if v.persistable and v.type == pb.VarType.DENSE_TENSOR]


def save_params(program: Program, values: Mapping[str, np.ndarray], path) -> None:
    """Write the values of `program`'s persistable variables as one combined file, in
    PaddlePaddle's order (byte-wise sorted names)."""
    names = [name for name, _, _ in persistable_specs(program)]
    missing = [n for n in names if n not in values]
    if missing:
        raise KeyError(f"no value for persistable variable(s) {', '.join(missing[:5])} "
                       f"of the program; cannot write {path}")
    block = program.global_block()
    bf16 = {n: pb.VarType.BF16 for n in names if block.vars[n].dtype == pb.VarType.BF16}
    save_combined(path, {n: values[n] for n in names}, dtype_codes=bf16)


def load_params(program: Program, path) -> dict[str, np.ndarray]:
    """Read a combined parameter file written for `program`; checks every record's dtype
    and shape against the program's variables."""
    return load_combined(path, persistable_specs(program))
