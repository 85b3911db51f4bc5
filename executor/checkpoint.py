"""Training checkpoints: every persistable variable of a program, plus the executor's
random stream and the LR schedules' positions, in one file written atomically.

    save_checkpoint("ckpt/last.keel", main, exe, extra={"epoch": 3})
    ...
    extra = load_checkpoint("ckpt/last.keel", main, exe)   # the same trajectory continues

The file is a zip archive holding `manifest.json` (names, dtypes, shapes, each optimizer
accumulator's parameter, the random state, schedules, `extra`) and `tensors.bin` (one
tensor record per variable, in PaddlePaddle's parameter-file record format). It is written to a temporary file and
renamed over the old one, so a crash mid-save leaves the previous checkpoint intact.
Loading reads only data: no pickle, no code runs.

Data-parallel training writes one file for all ranks (rank 0 writes; a sharded program's
ranks first send rank 0 their shares of the optimizer state), holding what one process
training alone would hold, so it resumes on any number of ranks: a sharded program loads
the accumulators of the parameters its rank owns and passes over the others'.

Version 2 stores the executor's random stream as Keel's (seed, counter) state
(executor/random_state.py), the same on CPU and GPU. Version 1 files hold numpy's PCG64
state instead; they still load on a CPU executor and continue that stream exactly.
"""
from __future__ import annotations

import copy
import io
import json
import os
import re
import zipfile

import numpy as np

from keel.executor.scope import global_scope
from keel.program import dtypes
from keel.program.errors import KeelError
from keel.program.io.atomic import atomic_open
from keel.program.io.tensor_file import TensorFileError, read_tensor, write_tensor
from keel.program.sharding import optimizer_state

FORMAT = "keel-checkpoint"
VERSION = 2  # 2: the random state is (seed, counter); 1: numpy's bit-generator state


class CheckpointError(KeelError):
    """A checkpoint file that is missing, damaged or does not fit the program."""


def _persistables(program) -> list:
    names = {}
    for block in program.blocks:
        for var in block.vars.values():
            if var.persistable and var.dtype is not None and var.name not in ("feed", "fetch"):
                names.setdefault(var.name, var)
    return [names[n] for n in sorted(names)]


def save_checkpoint(path, program, executor=None, scope=None, extra: dict | None = None) -> None:
    """Write every persistable variable of `program` held in `scope` (default: the global
    scope), the random state of `executor` and the program's LR schedules to `path`.
    `extra` (JSON-serializable: epoch, step, ...) comes back from load_checkpoint.

    A program whose optimizer state is sharded over ranks (`program.sharding`, fleet's
    ZeRO-1) makes this a collective: call it on every rank; rank 0 gathers the ranks'
    shares and writes one file holding the whole state, as one process would have, which
    resumes on any number of ranks, sharded or not."""
    scope = scope if scope is not None else global_scope()
    arrays = {var.name: _host(scope.get(var.name)) for var in _persistables(program)
              if scope.find_var(var.name) is not None}
    state = optimizer_state(program)
    shards = program.sharding
    if shards is not None and shards.nranks > 1:
        _save_sharded(path, program, executor, extra, arrays, state, shards)
    else:
        _write(path, program, executor, extra, arrays, state)


def _host(value) -> np.ndarray:
    return value.get() if hasattr(value, "get") and not isinstance(value, np.ndarray) else np.asarray(value)


def _write(path, program, executor, extra, arrays: dict, state: dict) -> None:
    tensors = io.BytesIO()
    entries = []
    for name in sorted(arrays):
        array = arrays[name]
        write_tensor(tensors, array, name=name)
        entries.append({"name": name, "dtype": str(array.dtype), "shape": list(array.shape)})
    rng = getattr(executor, "rng", None)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "variables": entries,
        # each optimizer accumulator's parameter: a sharded program loads its own share
        "optimizer_state": {name: param for name, param in sorted(state.items()) if name in arrays},
        "random_state": rng.get_state() if rng is not None else None,
        "lr_schedules": {name: s.state_dict() for name, s in program.lr_schedules.items()
                         if hasattr(s, "state_dict")},
        "extra": extra or {},
    }
    try:
        manifest_bytes = json.dumps(manifest, indent=1).encode()
    except (TypeError, ValueError):
        raise _not_json(path, manifest) from None
    directory = os.path.dirname(os.fspath(path))
    if directory:
        os.makedirs(directory, exist_ok=True)
    with atomic_open(path) as f:
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as zf:
            zf.writestr("manifest.json", manifest_bytes)
            zf.writestr("tensors.bin", tensors.getvalue())


def _save_sharded(path, program, executor, extra, arrays: dict, state: dict, shards) -> None:
    """Every rank sends rank 0 its share of the optimizer state (over ring 0's MPI
    communicator: buffers of tensor records, no pickle); rank 0 writes the whole, then
    tells every rank whether it could, so all return or all raise."""
    from keel.kernels import communicators
    what = (f"save_checkpoint({os.fspath(path)!r}): the optimizer state is sharded over {shards.nranks} ranks, "
            f"so every rank must call save_checkpoint")
    comm = communicators.lookup(0, np, what)
    if comm.size != shards.nranks or comm.rank != shards.rank:
        raise CheckpointError(f"{what}; this program was sharded as rank {shards.rank} of {shards.nranks}, "
                              f"but this process is rank {comm.rank} of {comm.size}")
    mine = {name: param for name, param in state.items() if name in arrays}
    parts = comm.gather_bytes(b"" if comm.rank == 0 else _pack_share(arrays, mine), 0, what)
    failure = b""
    if comm.rank == 0:
        try:
            for rank, part in enumerate(parts[1:], start=1):
                for name, param, array in _unpack_share(part, rank):
                    arrays[name], state[name] = array, param
            _write(path, program, executor, extra, arrays, state)
        except Exception as e:  # every rank learns of it below; rank 0 raises it itself
            failure = f"{type(e).__name__}: {e}".encode()
            comm.bcast_bytes(failure, 0, what)
            raise
    failure = comm.bcast_bytes(failure, 0, what)
    if failure:
        raise CheckpointError(f"save_checkpoint({os.fspath(path)!r}): rank 0 could not write the checkpoint: "
                              f"{failure.decode(errors='replace')}")


def _pack_share(arrays: dict, state: dict) -> bytes:
    """This rank's optimizer state: a JSON list of [name, parameter], then its tensor records."""
    names = sorted(state)
    header = json.dumps([[name, state[name]] for name in names]).encode()
    out = io.BytesIO()
    out.write(len(header).to_bytes(8, "little"))
    out.write(header)
    for name in names:
        write_tensor(out, arrays[name], name=name)
    return out.getvalue()


def _unpack_share(data: bytes, rank: int) -> list:
    source = f"<rank {rank}'s share of the optimizer state>"
    try:
        size = int.from_bytes(data[:8], "little")
        listed = json.loads(data[8:8 + size])
        stream = io.BytesIO(data[8 + size:])
        return [(name, param, read_tensor(stream, source=source, name=name)[0]) for name, param in listed]
    except (ValueError, TypeError, TensorFileError) as e:
        raise CheckpointError(f"{source} is damaged: {e}") from None


_FIELDS = {"extra": "`extra`", "random_state": "the executor's random state (executor.rng.get_state())",
           "lr_schedules": "an LR schedule's state_dict()"}


def _not_json(path, manifest) -> CheckpointError:
    """The error for a manifest json cannot write, naming the field at fault."""
    for key, what in _FIELDS.items():
        try:
            json.dumps(manifest[key])
        except (TypeError, ValueError) as e:
            return CheckpointError(f"save_checkpoint({os.fspath(path)!r}): {what} must be JSON data: {e}")
    return CheckpointError(f"save_checkpoint({os.fspath(path)!r}): the manifest is not JSON data")


def load_checkpoint(path, program, executor=None, scope=None, *, strict: bool = True) -> dict:
    """Restore what save_checkpoint wrote into `scope` (default: the global scope), the
    executor's random state and the program's LR schedules; return `extra`. With
    `strict`, every persistable of the program must be in the file with its dtype and
    shape, and the file must hold nothing the program lacks: all mismatches are listed."""
    source = os.fspath(path)
    scope = scope if scope is not None else global_scope()
    manifest, tensors = _read_archive(source)
    wanted = {v.name: v for v in _persistables(program)}
    problems = []
    values = {}
    stream = io.BytesIO(tensors)
    for i, entry in enumerate(manifest["variables"]):
        try:
            array, _ = read_tensor(stream, source=source, name=entry["name"], index=i)
        except TensorFileError as e:
            raise CheckpointError(f"{source}: damaged tensor data: {e}") from None
        if str(array.dtype) != entry["dtype"] or list(array.shape) != entry["shape"]:
            raise CheckpointError(f"{source}: damaged checkpoint: the manifest says {entry['name']!r} is "
                                  f"{entry['dtype']}{entry['shape']}, its tensor record holds "
                                  f"{array.dtype}{list(array.shape)}")
        var = wanted.get(entry["name"])
        if var is None and _another_ranks_share(program, manifest, entry["name"]):
            continue
        if var is None:
            problems.append(f"{entry['name']}: in the checkpoint but not a persistable variable of the program")
            continue
        declared = tuple(var.shape or ())
        if dtypes.to_numpy(var.dtype) != array.dtype:
            problems.append(f"{var.name}: checkpoint has {array.dtype}, program declares {var.dtype_name}")
        elif len(declared) != array.ndim or any(d >= 0 and d != s for d, s in zip(declared, array.shape)):
            problems.append(f"{var.name}: checkpoint has shape {list(array.shape)}, program declares {list(declared)}")
        values[entry["name"]] = array
    for name in wanted:
        if name not in values and not any(p.startswith(name + ":") for p in problems):
            problems.append(f"{name}: persistable variable of the program missing from the checkpoint")
    if strict and problems:
        in_file = [entry["name"] for entry in manifest["variables"]]
        raise CheckpointError(f"{source} does not fit the program ({len(problems)} problem(s)):\n  - "
                              + "\n  - ".join(problems)
                              + _renamed_hint([n for n in in_file if n not in wanted],
                                              [n for n in wanted if n not in set(in_file)]))
    if stream.read(1):
        raise CheckpointError(f"{source}: damaged checkpoint: tensors.bin holds more than the "
                              f"{len(manifest['variables'])} tensor(s) the manifest lists")
    schedules = {}
    for name, state in manifest.get("lr_schedules", {}).items():
        schedule = program.lr_schedules.get(name)
        if schedule is not None and hasattr(schedule, "set_state_dict"):
            trial = copy.deepcopy(schedule)  # a state that does not fit changes nothing
            try:
                trial.set_state_dict(state)
            except (KeyError, TypeError, ValueError, AttributeError, OverflowError) as e:
                raise CheckpointError(f"{source}: cannot restore LR schedule {name!r} from "
                                      f"{_kind(state)}: {type(e).__name__}: {e}") from None
            schedules[name] = (schedule, state)
    if executor is not None and manifest.get("random_state") is not None:
        try:  # before the scope changes: a state that does not fit leaves everything as it was
            executor.random_state().set_state(manifest["random_state"])
        except (ValueError, TypeError, KeyError, AttributeError, OverflowError) as e:
            raise CheckpointError(f"{source}: cannot restore the random state: {e}") from None
    to_device = getattr(executor, "to_device", np.asarray)  # onto the executor's device
    for name, array in values.items():
        if name in wanted:
            scope.set(name, to_device(array))
    for schedule, state in schedules.values():
        schedule.set_state_dict(state)
    return manifest.get("extra", {})


def _another_ranks_share(program, manifest, name: str) -> bool:
    """Whether `name` is optimizer state of a parameter whose state another rank keeps,
    in this program's sharding."""
    shards = program.sharding
    param = manifest.get("optimizer_state", {}).get(name)
    return shards is not None and param in shards.owners and not shards.owns(param)


# A unique-name counter: the `_0` of fc_0.w_0, learning_rate_0, fc_0.w_0_moment1_0.
_COUNTER = re.compile(r"_\d+(?=$|[._@])")


def _renamed_hint(only_in_file: list[str], only_in_program: list[str]) -> str:
    """When names only the checkpoint has and names only the program has differ just in
    their unique-name counters (fc_0.w_0 saved, fc_2.w_0 now), say so: the same model built
    again in one process, where the counters go on (program/unique_name.py)."""
    def natural(name):
        return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]

    waiting: dict[str, list[str]] = {}
    for name in sorted(only_in_program, key=natural):
        waiting.setdefault(_COUNTER.sub("", name), []).append(name)
    pairs = []
    for name in sorted(only_in_file, key=natural):
        candidates = waiting.get(_COUNTER.sub("", name))
        if candidates:
            pairs.append((name, candidates.pop(0)))
    if not pairs:
        return ""
    pairs.sort(key=lambda pair: (len(pair[0]), natural(pair[0])))    # parameters before accumulators
    examples = ", ".join(f"{saved} -> {now}" for saved, now in pairs[:3]) + (", ..." if len(pairs) > 3 else "")
    return (f"\nThe checkpoint and the program each have variables the other lacks, and {len(pairs)} of "
            f"them differ only in their unique-name suffixes (checkpoint -> program: {examples}):\n"
            f"this looks like the same model built again in this process, where unique names keep "
            f"counting.\nBuild the model under `with pg.unique_name.guard():` when saving and when "
            f"loading, so it gets the same names every time.")


def _read_archive(source: str) -> tuple[dict, bytes]:
    try:
        with zipfile.ZipFile(source) as zf:
            for name in ("manifest.json", "tensors.bin"):
                # save_checkpoint stores its members uncompressed: nothing is inflated, so
                # no member can unpack to more than the file holds (no zip bomb)
                info = zf.getinfo(name)
                if info.compress_type != zipfile.ZIP_STORED or info.file_size != info.compress_size:
                    raise CheckpointError(f"{source}: member {name} is compressed (method {info.compress_type}); "
                                          f"allowed: stored, as save_checkpoint writes it")
            manifest = json.loads(zf.read("manifest.json"))
            tensors = zf.read("tensors.bin")
    except FileNotFoundError:
        raise CheckpointError(f"checkpoint {source!r} does not exist") from None
    except (zipfile.BadZipFile, KeyError, ValueError, OSError, NotImplementedError, RuntimeError,
            EOFError, RecursionError) as e:  # zipfile's "unsupported", "encrypted", truncated
        raise CheckpointError(f"{source} is not a Keel checkpoint: {type(e).__name__}: {e}") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise CheckpointError(f"{source} is not a Keel checkpoint (no '{FORMAT}' manifest)")
    version = manifest.get("version", 0)
    if isinstance(version, int) and not isinstance(version, bool) and version > VERSION:
        raise CheckpointError(f"{source} was written by a newer Keel (checkpoint version "
                              f"{manifest['version']}, this one reads up to {VERSION})")
    problems = manifest_problems(manifest)
    if problems:
        raise CheckpointError(f"{source} has a damaged manifest ({len(problems)} problem(s)):\n  - "
                              + "\n  - ".join(problems))
    return manifest, tensors


_DTYPES = {str(dtypes.to_numpy(code)) for code in dtypes.codes()}


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def manifest_problems(manifest: dict) -> list[str]:
    """What in a checkpoint manifest is not what save_checkpoint writes: every field's type,
    each variable's name, dtype and shape, names unique. A file is untrusted input: nothing
    of it is used before this passes (SECURITY.md)."""
    problems = []
    version = manifest.get("version")
    if not _is_int(version) or version < 1:
        problems.append(f"'version' is {version!r}; allowed: an integer in [1, {VERSION}]")
    variables = manifest.get("variables")
    if not isinstance(variables, list):
        problems.append(f"'variables' is {_kind(variables)}; allowed: a list of {{name, dtype, shape}}")
        variables = []
    names = set()
    for i, entry in enumerate(variables):
        if not isinstance(entry, dict):
            problems.append(f"variables[{i}] is {_kind(entry)}; allowed: {{name, dtype, shape}}")
            continue
        name, dtype, shape = entry.get("name"), entry.get("dtype"), entry.get("shape")
        label = f"variables[{i}] ({name!r})" if isinstance(name, str) else f"variables[{i}]"
        if not isinstance(name, str) or not name:
            problems.append(f"{label}: 'name' is {_kind(name)}; allowed: a non-empty string")
        elif name in names:
            problems.append(f"{label}: the name is listed twice; allowed: once")
        else:
            names.add(name)
        if not isinstance(dtype, str) or dtype not in _DTYPES:
            problems.append(f"{label}: 'dtype' is {dtype!r}; allowed: one of {', '.join(sorted(_DTYPES))}")
        if not isinstance(shape, list) or not all(_is_int(d) and d >= 0 for d in shape):
            problems.append(f"{label}: 'shape' is {shape!r}; allowed: a list of sizes >= 0")
    state = manifest.get("random_state")
    if state is not None and not isinstance(state, dict):
        problems.append(f"'random_state' is {_kind(state)}; allowed: null or an object")
    schedules = manifest.get("lr_schedules", {})
    if not isinstance(schedules, dict) or not all(isinstance(v, dict) for v in schedules.values()):
        problems.append(f"'lr_schedules' is {_kind(schedules)}; allowed: an object of name -> state object")
    state = manifest.get("optimizer_state", {})
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in state.items()):
        problems.append(f"'optimizer_state' is {_kind(state)}; allowed: an object of variable name -> parameter name")
    elif not set(state) <= names:
        problems.append(f"'optimizer_state' names variable(s) the manifest does not list: "
                        f"{', '.join(sorted(set(state) - names)[:5])}")
    if not isinstance(manifest.get("extra", {}), dict):
        problems.append(f"'extra' is {_kind(manifest.get('extra'))}; allowed: an object")
    return problems


def _kind(value) -> str:
    text = repr(value)
    return f"{type(value).__name__} {text if len(text) <= 60 else text[:57] + '...'}"
