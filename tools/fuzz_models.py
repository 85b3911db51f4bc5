#!/usr/bin/env python3
"""Fuzz Keel's loaders with mutated model, parameter and checkpoint files.

Model and checkpoint files are untrusted input (SECURITY.md). This tool takes real files
(the PaddlePaddle fixtures under tests/fixtures/paddle, and models and a checkpoint Keel
builds and saves), mutates them, and loads and runs each mutant in a worker process under a
time and memory limit (resource.setrlimit), then classifies what happened:

  ran      loaded and ran (or loaded and was refused to run with a clean error at run time)
  clean    refused with a Keel error (a KeelError subclass) naming what is wrong
  wrapped  an ExecutionError whose cause is a raw Python error: a kernel failed on a value
           the loader let through (counted, reported, not a failure of this tool)
  raw      any other exception escaped: a bug
  hang     the case ran past --timeout seconds: a bug
  oom      MemoryError, or the worker died by the memory limit: a bug
  crash    the worker died by a signal or exited without a result: a bug

PIR JSON programs (tests/fixtures/pir, `--corpus pir` for them alone) are mutated on the parsed
document: operand ids, value types (dims, dtypes, kinds), attribute kinds, names and data, op
names, op order, deletion, duplication and moves between blocks, the header, deeply nested
values. Mutations are structure-aware (on the parsed ProgramDesc: var dims, dtypes and types, op
attributes: values, types, duplicates and removals, op order and types, slot arguments,
block parents and sub-block indices, variable names, versions; on parameter records: dims,
dtype, data length; on a checkpoint's manifest: every JSON field, names, shapes, dtypes, the
random state) and byte-level (flips, truncations, insertions, copies). A case is a function
of (--seed, case index) only, so `--reproduce N` replays case N in this process with its
traceback and `--save-dir` writes its files.

    python tools/fuzz_models.py --cases 200 --seed 1 --jobs 2          # about a minute
    python tools/fuzz_models.py --cases 20000 --seed 2026 --jobs 2      # a campaign
    python tools/fuzz_models.py --seed 2026 --reproduce 1234 --save-dir case1234

Workers run with KEEL_MAX_TENSOR_BYTES=256 MiB unless the environment sets it (Keel's
load-time limit on a tensor an attribute sizes; SECURITY.md) and --memory-mb of address
space, and run programs with a bound of LOOP_LIMIT iterations per while loop (a mutated loop
condition may never turn false: a server taking untrusted files sets
`Config.set_max_loop_iterations` the same way). Exit status 1 when any case ends raw, hang,
oom or crash.
"""
from __future__ import annotations

import argparse
import copy
import gzip
import io
import json
import os
import random
import resource
import signal
import struct
import sys
import tempfile
import time
import traceback
import zipfile
from collections import Counter
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one BLAS thread per worker, before numpy
os.environ.setdefault("OMP_NUM_THREADS", "1")
# Keel's per-tensor limit (program/limits.py) well under the worker's memory limit, so a
# permitted tensor and its neighbours fit: an out-of-memory is then a real finding.
os.environ.setdefault("KEEL_MAX_TENSOR_BYTES", str(256 << 20))

ROOT = Path(__file__).resolve().parent.parent

FIXTURES = ROOT / "tests" / "fixtures" / "paddle"
BAD = ("raw", "hang", "oom", "crash")
LOOP_LIMIT = 10_000  # the corpus's loops run at most a few dozen iterations
OUTCOMES = ("ran", "clean", "wrapped") + BAD

# Values that find edge cases: zero, negatives, -1 (unknown), the int32 edges, huge sizes.
INTERESTING_INTS = [0, 1, -1, 2, -2, 3, 7, 64, 255, 256, 1 << 16, 1 << 20, 1 << 26, 2**31 - 1,
                    -(2**31), 2**31, 2**40, 2**62, -(2**62)]
INTERESTING_FLOATS = [0.0, -0.0, 1.0, -1.0, 1e-45, 1e38, -1e38, float("inf"), float("-inf"),
                      float("nan"), 0.5, 2.0]


# ------------------------------------------------------------------------------- corpus
def _keel_models(tmp: Path) -> list[dict]:
    """Inference models and a checkpoint built and saved by Keel itself."""
    import numpy as np

    import keel.program as pg
    from keel.executor import Executor, Scope, save_checkpoint

    seeds = []
    for name, build in (("keel_mlp", _build_mlp), ("keel_cnn", _build_cnn)):
        with pg.unique_name.guard():
            main, startup, feeds, fetches, inputs = build(pg)
        exe, scope = Executor(), Scope()
        exe.run(startup, scope=scope)
        prefix = tmp / name
        pg.io.save_inference_model(str(prefix), feeds, fetches, exe, program=main, scope=scope)
        params = prefix.with_suffix(".pdiparams")
        seeds.append({"kind": "inference", "name": name,
                      "model": prefix.with_suffix(".pdmodel").read_bytes(),
                      "params": params.read_bytes() if params.exists() else None, "inputs": inputs})
    with pg.unique_name.guard():
        main, startup = pg.Program(), pg.Program()
        with pg.program_guard(main, startup):
            x = pg.data("x", [-1, 6])
            label = pg.data("label", [-1, 1], "int64")
            logits = pg.nn.fc(pg.nn.fc(x, 5, activation="relu"), 3)
            loss = pg.mean(pg.nn.softmax_with_cross_entropy(logits, label))
            pg.optimizer.Adam(0.01).minimize(loss)
    exe, scope = Executor(seed=3), Scope()
    exe.run(startup, scope=scope)
    exe.run(main, feed={"x": np.ones((2, 6), np.float32), "label": np.zeros((2, 1), np.int64)},
            fetch_list=[loss], scope=scope)
    path = tmp / "ckpt.keel"
    save_checkpoint(path, main, exe, scope, extra={"epoch": 1})
    seeds.append({"kind": "checkpoint", "name": "keel_checkpoint", "data": path.read_bytes(),
                  "program": main.serialize_to_string()})
    return seeds


def _build_mlp(pg):
    import numpy as np
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 1
    with pg.program_guard(main, startup):
        x = pg.data("x", [-1, 8])
        h = pg.nn.fc(x, 16, activation="relu")
        out = pg.nn.softmax(pg.nn.fc(h, 4))
    return main, startup, [x], [out], {"x": np.linspace(-1, 1, 16, dtype=np.float32).reshape(2, 8)}


def _build_cnn(pg):
    import numpy as np
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = 2
    with pg.program_guard(main, startup):
        x = pg.data("img", [-1, 2, 8, 8])
        h = pg.nn.conv2d(x, 4, 3, padding=1)
        h = pg.nn.batch_norm(h, act="relu", is_test=True)
        h = pg.nn.pool2d(h, 2, "max", 2)
        out = pg.nn.fc(pg.flatten(h, 1), 3)
    main = main.clone(for_test=True)
    return main, startup, [x], [out], {"img": np.linspace(-1, 1, 256, dtype=np.float32).reshape(2, 2, 8, 8)}


PIR_FIXTURES = ROOT / "tests" / "fixtures" / "pir"
# The PIR programs fuzzed: PaddlePaddle 3.3.1's own exports (if/while included) and legacy
# models translated by PaddlePaddle at versions 1-4 (a transformer, a CNN with batch norm).
PIR_SEEDS = ("mlp", "cnn_bn", "ops_mix", "control_flow", "paddle_lenet", "paddle_mlp_fc",
             "paddle_resblock_cnn", "paddle_transformer_encoder")


def load_pir_corpus() -> list[dict]:
    import numpy as np
    seeds = []
    for stem in PIR_SEEDS:
        plain, packed = PIR_FIXTURES / f"{stem}.json", PIR_FIXTURES / f"{stem}.json.gz"
        data = plain.read_bytes() if plain.exists() else gzip.decompress(packed.read_bytes())
        npz = np.load(PIR_FIXTURES / f"{stem}.io.npz", allow_pickle=False)
        params = ROOT / "tests" / "fixtures" / str(npz["params"])
        seeds.append({"kind": "inference", "format": "pir", "name": f"pir/{stem}", "model": data,
                      "params": params.read_bytes() if params.is_file() else None,
                      "inputs": {k[3:]: npz[k] for k in npz.files if k.startswith("in:")}})
    return seeds


def load_corpus(tmp: Path, which: str = "legacy") -> list[dict]:
    import numpy as np

    if which == "pir":
        return load_pir_corpus()
    seeds = []
    for model in sorted(FIXTURES.glob("*.pdmodel*")):
        stem = model.name.split(".pdmodel")[0]
        data = model.read_bytes()
        if model.suffix == ".gz":
            data = gzip.decompress(data)
        if stem.endswith(".train_startup"):
            continue
        if stem.endswith(".train"):
            base = stem[: -len(".train")]
            traj = np.load(FIXTURES / f"{stem}.trajectory.npz", allow_pickle=False)
            feeds = {str(n): traj[f"batch0:{n}"] for n in traj["feed_names"]}
            seeds.append({"kind": "training", "name": stem, "model": data,
                          "startup": (FIXTURES / f"{base}.train_startup.pdmodel").read_bytes(),
                          "inputs": feeds, "loss": str(traj["loss_name"])})
            continue
        params = FIXTURES / f"{stem}.pdiparams"
        io_file = FIXTURES / f"{stem}.io.npz"
        if not io_file.exists() or (not params.exists() and stem == "resnet18"):
            continue  # resnet18's parameters live outside the repository
        npz = np.load(io_file, allow_pickle=False)
        inputs = {k[3:]: npz[k] for k in npz.files if k.startswith("in:")}
        seeds.append({"kind": "inference", "name": stem, "model": data,
                      "params": params.read_bytes() if params.exists() else None, "inputs": inputs})
    seeds.extend(_keel_models(tmp))
    if which == "all":
        seeds.extend(load_pir_corpus())
    return seeds


# ------------------------------------------------------------------------------ mutators
def _pick(rng, seq):
    return seq[rng.randrange(len(seq))] if seq else None


def _all_ops(desc):
    return [(b, op) for b in desc.blocks for op in b.ops]


def _all_vars(desc):
    return [(b, v) for b in desc.blocks for v in b.vars]


def _tensor(var):
    t = var.type
    if t.HasField("dense_tensor"):
        return t.dense_tensor.tensor
    if t.HasField("tensor_array"):
        return t.tensor_array.tensor
    if t.HasField("selected_rows"):
        return t.selected_rows
    return None


def _random_var(rng, desc):
    """One variable of any block, or None in a program without variables."""
    return (_pick(rng, _all_vars(desc)) or (None, None))[1]


def _random_tensor(rng, desc):
    """The tensor description of a random variable, or None when it has none."""
    var = _random_var(rng, desc)
    return var and _tensor(var)


def m_dims(rng, desc, pb):
    t = _random_tensor(rng, desc)
    if t is None:
        return False
    dims = list(t.dims)
    choice = rng.random()
    if dims and choice < 0.6:
        dims[rng.randrange(len(dims))] = _pick(rng, INTERESTING_INTS)
    elif choice < 0.8:
        dims.insert(rng.randrange(len(dims) + 1), _pick(rng, [1, -1, 2, 0]))
    elif dims:
        dims.pop(rng.randrange(len(dims)))
    del t.dims[:]
    t.dims.extend(max(min(d, 2**63 - 1), -(2**63)) for d in dims)
    return True


def m_dtype(rng, desc, pb):
    t = _random_tensor(rng, desc)
    if t is None:
        return False
    t.data_type = _pick(rng, [0, 1, 2, 3, 4, 5, 6, 7, 9, 10, 15, 20, 21, 22, 23, 24, 25, 26, 30, 99])
    return True


def m_vartype(rng, desc, pb):
    var = _random_var(rng, desc)
    if var is None:
        return False
    var.type.type = _pick(rng, [pb.VarType.FEED_MINIBATCH, pb.VarType.FETCH_LIST, pb.VarType.STEP_SCOPES,
                                pb.VarType.DENSE_TENSOR_ARRAY, pb.VarType.SELECTED_ROWS, pb.VarType.READER,
                                pb.VarType.RAW, pb.VarType.DENSE_TENSOR, 1, 99])
    if rng.random() < 0.3:
        var.type.ClearField("dense_tensor")
    return True


def m_varflags(rng, desc, pb):
    var = _random_var(rng, desc)
    if var is None:
        return False
    field = _pick(rng, ["persistable", "is_parameter", "stop_gradient", "need_check_feed"])
    setattr(var, field, not getattr(var, field))
    return True


def _set_attr_value(rng, attr, pb):
    A = pb.AttrType
    if attr.type in (A.INT, A.LONG, A.BLOCK):
        v = _pick(rng, INTERESTING_INTS)
        if attr.type == A.INT or attr.type == A.BLOCK:
            v = max(-(2**31), min(2**31 - 1, v))
            if attr.type == A.BLOCK:
                attr.block_idx = v
            else:
                attr.i = v
        else:
            attr.l = v
    elif attr.type in (A.INTS, A.LONGS, A.BLOCKS):
        field = {A.INTS: attr.ints, A.LONGS: attr.longs, A.BLOCKS: attr.blocks_idx}[attr.type]
        values = list(field)
        r = rng.random()
        if values and r < 0.6:
            values[rng.randrange(len(values))] = _pick(rng, INTERESTING_INTS)
        elif r < 0.8:
            values.append(_pick(rng, INTERESTING_INTS))
        elif values:
            values.pop(rng.randrange(len(values)))
        lim = 2**31 - 1 if attr.type != A.LONGS else 2**63 - 1
        del field[:]
        field.extend(max(-lim - 1, min(lim, v)) for v in values)
    elif attr.type in (A.FLOAT, A.FLOAT64):
        v = _pick(rng, INTERESTING_FLOATS)
        if attr.type == A.FLOAT:
            attr.f = v
        else:
            attr.float64 = v
    elif attr.type in (A.FLOATS, A.FLOAT64S):
        field = attr.floats if attr.type == A.FLOATS else attr.float64s
        values = list(field)
        if values and rng.random() < 0.7:
            values[rng.randrange(len(values))] = _pick(rng, INTERESTING_FLOATS)
        else:
            values.append(_pick(rng, INTERESTING_FLOATS))
        del field[:]
        field.extend(values)
    elif attr.type == A.BOOLEAN:
        attr.b = not attr.b
    elif attr.type == A.STRING:
        attr.s = _pick(rng, ["", "NHWC", "NCHW", "SAME", "VALID", "EXPLICIT", "max", "avg", "relu",
                             "bogus", "x" * 300, "\u00e9"])
    elif attr.type == A.STRINGS:
        attr.strings.append(_pick(rng, ["", "a", "x" * 100]))
    else:
        return False
    return True


def m_attr_value(rng, desc, pb):
    ops = [(b, op) for b, op in _all_ops(desc) if len(op.attrs)]
    _, op = _pick(rng, ops) or (None, None)
    if op is None:
        return False
    skip = {"op_callstack", "op_namescope", "op_role_var", "op_device", "with_quant_attr"}
    attrs = [a for a in op.attrs if a.name not in skip] or list(op.attrs)
    return _set_attr_value(rng, _pick(rng, attrs), pb)


def m_attr_struct(rng, desc, pb):
    ops = [(b, op) for b, op in _all_ops(desc) if len(op.attrs)]
    _, op = _pick(rng, ops) or (None, None)
    if op is None:
        return False
    i = rng.randrange(len(op.attrs))
    r = rng.random()
    if r < 0.35:  # drop it
        del op.attrs[i]
    elif r < 0.65:  # duplicate it, maybe with another value
        dup = op.attrs.add()
        dup.CopyFrom(op.attrs[i])
        _set_attr_value(rng, dup, pb)
    elif r < 0.85:  # change its declared type
        op.attrs[i].type = _pick(rng, list(pb.AttrType.values()) + [99])
    else:  # rename it
        op.attrs[i].name = _pick(rng, ["axis", "groups", "strides", "dilations", "ksize", "shape",
                                       "x_num_col_dims", "sub_block", "", "value", "dtype"])
    return True


def m_op_order(rng, desc, pb):
    block = _pick(rng, [b for b in desc.blocks if len(b.ops) > 1])
    if block is None:
        return False
    ops = list(block.ops)
    i, j = rng.randrange(len(ops)), rng.randrange(len(ops))
    r = rng.random()
    if r < 0.5:
        ops[i], ops[j] = ops[j], ops[i]
    elif r < 0.8:
        ops.pop(i)
    else:
        ops.insert(j, copy.deepcopy(ops[i]))
    del block.ops[:]
    block.ops.extend(ops)
    return True


def m_op_type(rng, desc, pb):
    from keel.program.ops import registry
    _, op = _pick(rng, _all_ops(desc)) or (None, None)
    if op is None:
        return False
    names = sorted(registry.all_ops())
    op.type = _pick(rng, names) if rng.random() < 0.9 else _pick(rng, ["conv3d", "", "while", "feed"])
    return True


def m_slots(rng, desc, pb):
    block, op = _pick(rng, _all_ops(desc)) or (None, None)
    if op is None:
        return False
    slots = op.inputs if rng.random() < 0.6 else op.outputs
    if not len(slots):
        return False
    i = rng.randrange(len(slots))
    names = [v.name for v in block.vars] or ["x"]
    r = rng.random()
    if r < 0.3:
        del slots[i]
    elif r < 0.6:
        slots[i].arguments.append(_pick(rng, names))
    elif r < 0.8 and len(slots[i].arguments):
        slots[i].arguments[rng.randrange(len(slots[i].arguments))] = _pick(rng, names + ["@EMPTY@", "nope"])
    else:
        slots[i].parameter = _pick(rng, ["X", "Y", "Out", "Input", "Filter", "Bias", "Scale", "bogus"])
    return True


def m_names(rng, desc, pb):
    block = _pick(rng, list(desc.blocks))
    if block is None or not len(block.vars):
        return False
    var = _pick(rng, list(block.vars))
    other = _pick(rng, list(block.vars))
    r = rng.random()
    if r < 0.4:
        var.name = other.name  # a duplicate name
    elif r < 0.7:
        var.name = _pick(rng, ["", "feed", "fetch", var.name + "_x", "a" * 1000, "x'); import os; ('"])
    else:
        block.vars.remove(var)  # an undefined variable
    return True


def m_blocks(rng, desc, pb):
    r = rng.random()
    n = len(desc.blocks)
    if r < 0.4:
        b = _pick(rng, list(desc.blocks))
        b.parent_idx = _pick(rng, [-1, 0, b.idx, n, n - 1, -2, 1, 2**31 - 1])
    elif r < 0.7:  # a new sub-block, possibly in a cycle
        nb = desc.blocks.add()
        nb.idx = n
        nb.parent_idx = _pick(rng, [0, n, n + 1, -1])
        if rng.random() < 0.5:
            desc.blocks[0].parent_idx = n
        if rng.random() < 0.5 and len(desc.blocks[0].ops):
            op = _pick(rng, list(desc.blocks[0].ops))
            a = op.attrs.add()
            a.name, a.type, a.block_idx = "sub_block", pb.AttrType.BLOCK, _pick(rng, [n, n + 5, -1, 0])
    elif r < 0.85:
        b = _pick(rng, list(desc.blocks))
        b.idx = _pick(rng, [b.idx + 1, -1, 0])
    else:
        b = _pick(rng, list(desc.blocks))
        b.forward_block_idx = _pick(rng, [0, 1, n, -5])
    return True


def m_versions(rng, desc, pb):
    r = rng.random()
    if r < 0.4:
        desc.version.version = _pick(rng, [0, 1, 2000000, 3003001, 3999999, 4000000, 2**62, -1])
    elif len(desc.op_version_map.pair):
        pair = _pick(rng, list(desc.op_version_map.pair))
        pair.op_version.version = _pick(rng, [0, 1, 2, 5, 100, -1, 2**31 - 1])
    else:
        return False
    return True


STRUCT_MUTATORS = [m_dims, m_dtype, m_vartype, m_varflags, m_attr_value, m_attr_value, m_attr_value,
                   m_attr_struct, m_op_order, m_op_type, m_slots, m_names, m_blocks, m_versions]


def mutate_bytes(rng, data: bytes) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4, 16])):
        if not b:
            break
        r = rng.random()
        i = rng.randrange(len(b))
        if r < 0.45:
            b[i] ^= 1 << rng.randrange(8)
        elif r < 0.6:
            b[i] = _pick(rng, [0, 0xFF, 0x7F, 0x80, 0x01])
        elif r < 0.7:
            del b[i:]
        elif r < 0.8:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 9)))
        elif r < 0.9:
            j = rng.randrange(len(b))
            n = rng.randrange(1, 33)
            b[i:i + n] = b[j:j + n]
        else:
            del b[i:i + rng.randrange(1, 33)]
    return bytes(b)


def mutate_program(rng, data: bytes) -> bytes:
    from keel.proto import pb
    if rng.random() < 0.15:
        return mutate_bytes(rng, data)
    desc = pb.ProgramDesc()
    desc.ParseFromString(data)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        for _attempt in range(5):
            try:
                if _pick(rng, STRUCT_MUTATORS)(rng, desc, pb):
                    break
            except ValueError:  # a value the message's closed enums refuse: try another
                continue
    return desc.SerializeToString()


def mutate_params(rng, data: bytes) -> bytes:
    """Byte mutations, or a change to one record's TensorDesc (dims, dtype) or length fields."""
    from keel.proto import pb
    if rng.random() < 0.4:
        return mutate_bytes(rng, data)
    records, pos = [], 0
    try:  # version u32, lod level u64 (+ levels), tensor version u32, desc size i32, desc, data
        while pos < len(data):
            start = pos
            pos += 4
            (lod_level,) = struct.unpack_from("<Q", data, pos)
            pos += 8
            for _ in range(lod_level):
                (size,) = struct.unpack_from("<Q", data, pos)
                pos += 8 + size
            pos += 4
            (dsize,) = struct.unpack_from("<i", data, pos)
            pos += 4
            tdesc = pb.VarType.TensorDesc()
            tdesc.ParseFromString(data[pos:pos + dsize])
            header_end = pos
            pos += dsize
            n = 1
            for d in tdesc.dims:
                n *= d
            from keel.program import dtypes
            nbytes = n * dtypes.to_numpy(tdesc.data_type).itemsize
            records.append((start, header_end, tdesc, pos, pos + nbytes))
            pos += nbytes
    except Exception:
        return mutate_bytes(rng, data)
    if not records:
        return mutate_bytes(rng, data)
    start, header_end, tdesc, dstart, dend = _pick(rng, records)
    r = rng.random()
    if r < 0.4 and len(tdesc.dims):
        tdesc.dims[rng.randrange(len(tdesc.dims))] = _pick(rng, INTERESTING_INTS)
    elif r < 0.6:
        tdesc.data_type = _pick(rng, [0, 1, 2, 3, 4, 5, 6, 7, 20, 21, 22, 23])
    elif r < 0.8:
        return data[:dstart] + data[dstart + rng.randrange(max(dend - dstart, 1)):]
    else:
        return data[:start] + struct.pack("<I", _pick(rng, [1, 2**32 - 1])) + data[start + 4:]
    body = tdesc.SerializeToString()
    return data[:header_end - 4] + struct.pack("<i", len(body)) + body + data[dstart:]


def _mutate_json(rng, value, depth=0):
    """One random change somewhere inside a JSON value."""
    choices = [None, 0, -1, 2**40, 1.5, "", "x", [], {}, True, [1, 2], {"a": 1}, float("nan")]
    if isinstance(value, dict) and value and depth < 6 and rng.random() < 0.8:
        key = _pick(rng, sorted(value, key=str))
        r = rng.random()
        if r < 0.15:
            del value[key]
        elif r < 0.3:
            value[key] = _pick(rng, choices)
        else:
            value[key] = _mutate_json(rng, value[key], depth + 1)
        return value
    if isinstance(value, list) and value and depth < 6 and rng.random() < 0.8:
        i = rng.randrange(len(value))
        r = rng.random()
        if r < 0.2:
            value.pop(i)
        elif r < 0.3:
            value.append(copy.deepcopy(value[i]))
        else:
            value[i] = _mutate_json(rng, value[i], depth + 1)
        return value
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return _pick(rng, INTERESTING_INTS + [value + 1, -value])
    if isinstance(value, str):
        return _pick(rng, ["", value + "x", "float64", "int8", "bfloat16", "object", "O", "<U4", value[::-1]])
    return _pick(rng, choices)


# -- PIR JSON programs (program/io/pir/): mutations on the parsed document ---------------------
PIR_TYPE_TAGS = ["0.t_f32", "0.t_f64", "0.t_i64", "0.t_i32", "0.t_bool", "0.t_f16", "0.t_bf16", "0.t_ui8",
                 "0.t_c64", "0.t_dtensor", "0.t_vec", "1.t_dtensor_array", "0.t_str", "", "9.t_f32"]
PIR_ATTR_KINDS = ["0.a_bool", "0.a_i32", "0.a_i64", "0.a_f32", "0.a_f64", "0.a_str", "0.a_array",
                  "1.a_intarray", "1.a_dtype", "1.a_place", "1.a_scalar", "0.a_type", "x"]


def _pir_blocks(doc):
    """Every block object of a PIR document (top level and inside ops' regions), no recursion."""
    found, todo = [], [doc.get("program", {}).get("regions", [])]
    while todo:
        regions = todo.pop()
        for region in regions if isinstance(regions, list) else []:
            for block in region.get("blocks", []) if isinstance(region, dict) else []:
                if isinstance(block, dict):
                    found.append(block)
                    for op in block.get("ops", []) if isinstance(block.get("ops"), list) else []:
                        if isinstance(op, dict) and isinstance(op.get("regions"), list):
                            todo.append(op["regions"])
    return found


def _pir_ops(doc):
    return [op for block in _pir_blocks(doc) for op in block.get("ops", []) if isinstance(op, dict)]


def _pir_values(doc):
    """Every value object (op results and block arguments)."""
    values = []
    for block in _pir_blocks(doc):
        values += [a for a in block.get("args", []) if isinstance(a, dict)]
    for op in _pir_ops(doc):
        out = op.get("O")
        values += [v for v in (out if isinstance(out, list) else [out]) if isinstance(v, dict)]
    return values


def pm_operand(rng, doc):
    ops = [op for op in _pir_ops(doc) if isinstance(op.get("I"), list) and op["I"]]
    ids = [v.get("%", v.get("#")) for v in _pir_values(doc)]
    op = _pick(rng, ops)
    if op:
        _pick(rng, op["I"])["%"] = _pick(rng, ids + [0, -1, -99, 2**31, 10**6])
        return True


def pm_type(rng, doc):
    value = _pick(rng, _pir_values(doc))
    tt = value.get("TT") if value else None
    if not isinstance(tt, dict):
        return False
    data = tt.get("D")
    r = rng.random()
    if r < 0.4 and isinstance(data, list) and len(data) > 1 and isinstance(data[1], list):
        dims = data[1]
        if dims and rng.random() < 0.7:
            dims[rng.randrange(len(dims))] = _pick(rng, INTERESTING_INTS)
        else:
            data[1] = [_pick(rng, INTERESTING_INTS) for _ in range(rng.choice([0, 1, 3, 9, 70]))]
    elif r < 0.7 and isinstance(data, list) and data and isinstance(data[0], dict):
        data[0]["#"] = _pick(rng, PIR_TYPE_TAGS)
    else:
        tt["#"] = _pick(rng, PIR_TYPE_TAGS + ["NULL"])
    return True


def pm_attr(rng, doc):
    ops = [op for op in _pir_ops(doc) if isinstance(op.get("A"), list) and op["A"]]
    op = _pick(rng, ops)
    if not op:
        return False
    attr = _pick(rng, op["A"])
    if op.get("#") == "p" or not isinstance(attr, dict):
        op["A"][rng.randrange(len(op["A"]))] = _pick(rng, [0, 1, -1, "", "w", None, [1], 2**40])
        return True
    at = attr.get("AT")
    r = rng.random()
    if r < 0.3 and isinstance(at, dict):
        at["#"] = _pick(rng, PIR_ATTR_KINDS)
    elif r < 0.4:
        attr["N"] = _pick(rng, ["", "axis", "shape", "dtype", attr.get("N", "") + "x"])
    elif isinstance(at, dict):
        at["D"] = _mutate_json(rng, at.get("D"))
    return True


def pm_op_name(rng, doc):
    ops = _pir_ops(doc)
    op = _pick(rng, ops)
    if not op:
        return False
    names = [o.get("#") for o in ops if isinstance(o.get("#"), str)]
    op["#"] = _pick(rng, names + ["1.relu7", "p", "2.yield", "0.combine", "0.split", "1.if", "1.while", "1.",
                                  "1.data", "1.fetch", "1.full", "x"])
    return True


def pm_structure(rng, doc):
    block = _pick(rng, _pir_blocks(doc))
    ops = block.get("ops") if block else None
    if not isinstance(ops, list) or not ops:
        return False
    r = rng.random()
    i = rng.randrange(len(ops))
    if r < 0.3:
        ops.pop(i)
    elif r < 0.55:
        ops.insert(rng.randrange(len(ops) + 1), copy.deepcopy(ops[i]))
    elif r < 0.8:
        j = rng.randrange(len(ops))
        ops[i], ops[j] = ops[j], ops[i]
    else:  # an op moved into another block (a region of an if/while, or out of one)
        other = _pick(rng, _pir_blocks(doc))
        if isinstance(other.get("ops"), list):
            other["ops"].insert(0, ops.pop(i))
    return True


def pm_header(rng, doc):
    base = doc.get("base_code")
    if isinstance(base, dict):
        key = _pick(rng, ["version", "magic", "trainable"])
        base[key] = _pick(rng, [0, 1, 2, 3, 4, 5, 99, -1, "pir", "PIR", "", None, True])
    return True


def pm_nesting(rng, doc):
    """A value replaced by a deeply nested list (the parser's recursion must stay bounded)."""
    op = _pick(rng, _pir_ops(doc))
    if not op:
        return False
    depth = _pick(rng, [30, 150, 199, 250, 3000])
    nested = 0
    for _ in range(depth):
        nested = [nested]
    op[_pick(rng, sorted(op))] = nested
    return True


def pm_json(rng, doc):
    _mutate_json(rng, doc)
    return True


PIR_MUTATORS = [pm_operand, pm_type, pm_attr, pm_attr, pm_op_name, pm_structure, pm_header, pm_nesting,
                pm_json, pm_json]


def mutate_pir(rng, data: bytes) -> bytes:
    if rng.random() < 0.15:
        return mutate_bytes(rng, data)
    doc = json.loads(data)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        for _attempt in range(5):
            if _pick(rng, PIR_MUTATORS)(rng, doc):
                break
    return json.dumps(doc).encode()


def mutate_checkpoint(rng, data: bytes) -> bytes:
    if rng.random() < 0.25:
        return mutate_bytes(rng, data)
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        manifest = json.loads(zf.read("manifest.json"))
        tensors = zf.read("tensors.bin")
    if rng.random() < 0.7:
        for _ in range(rng.choice([1, 1, 2, 3])):
            manifest = _mutate_json(rng, manifest)
    else:
        tensors = mutate_params(rng, tensors)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("manifest.json", json.dumps(manifest))
        zf.writestr("tensors.bin", tensors)
    return out.getvalue()


# ----------------------------------------------------------------------------- one case
def make_case(seed: int, index: int, corpus: list[dict]) -> dict:
    rng = random.Random(seed * 1_000_003 + index)
    base = corpus[rng.randrange(len(corpus))]
    try:
        return _make_case(rng, base, index)
    except Exception:  # noqa: BLE001 - a mutator that cannot apply: fall back to bytes
        rng = random.Random(seed * 1_000_003 + index)
        case = {"seed": base, "index": index, "ir_optim": True}
        if base["kind"] == "checkpoint":
            case["data"] = mutate_bytes(rng, base["data"])
        else:
            case["model"], case["params"] = mutate_bytes(rng, base["model"]), base.get("params")
        return case


def _make_case(rng, base, index) -> dict:
    case = {"seed": base, "index": index}
    if base["kind"] == "checkpoint":
        case["data"] = mutate_checkpoint(rng, base["data"])
        return case
    case["ir_optim"] = rng.random() < 0.7
    if base.get("params") is not None and rng.random() < 0.25:
        case["model"], case["params"] = base["model"], mutate_params(rng, base["params"])
    elif base.get("format") == "pir":
        case["model"], case["params"] = mutate_pir(rng, base["model"]), base.get("params")
    else:
        case["model"], case["params"] = mutate_program(rng, base["model"]), base.get("params")
    return case


def _inputs_for(predictor, given):
    """The seed's inputs where names, dtypes and shapes still fit, else small made-up ones."""
    import numpy as np
    rng = np.random.default_rng(0)
    arrays = []
    for name in predictor.get_input_names():
        handle = predictor.get_input_handle(name)
        shape = [2 if d < 0 else d for d in handle.shape()]
        value = given.get(name)
        if value is not None and list(value.shape) == shape or (
                value is not None and len(value.shape) == len(shape)
                and all(a == b or b < 0 for a, b in zip(value.shape, handle.shape()))):
            arrays.append(value.astype(handle.dtype, copy=False))
            continue
        if int(np.prod(shape, dtype=np.float64)) > 1 << 20 or any(d > 1 << 16 for d in shape):
            return None  # a declared input this large would be the caller's choice, not the file's
        dtype = handle.dtype
        if dtype.kind == "f":
            arrays.append(rng.standard_normal(shape).astype(dtype))
        elif dtype.kind == "b":
            arrays.append(np.zeros(shape, dtype))
        else:
            arrays.append(np.zeros(shape, dtype))
    return arrays


def run_case(case: dict, workdir: Path) -> str:
    """Load (and run) one mutant. Returns 'ran'; exceptions propagate to classify()."""
    base = case["seed"]
    if base["kind"] == "checkpoint":
        import keel.program as pg
        from keel.executor import Executor, Scope, load_checkpoint
        path = workdir / "ckpt.keel"
        path.write_bytes(case["data"])
        prog = pg.Program.parse_from_string(base["program"])
        load_checkpoint(path, prog, Executor(), Scope(), strict=case["index"] % 2 == 0)
        return "ran"
    if base["kind"] == "training":
        import keel.program as pg
        from keel.executor import Executor, Scope
        main = pg.Program.parse_from_string(case["model"], source="mutated training program")
        startup = pg.Program.parse_from_string(base["startup"])
        exe, scope = Executor(seed=1, max_loop_iterations=LOOP_LIMIT), Scope()
        exe.run(startup, scope=scope)
        block = main.global_block()
        feed = {k: v for k, v in base["inputs"].items() if block.find_var(k) is not None}
        fetch = [base["loss"]] if block.find_var(base["loss"]) is not None else []
        exe.run(main, feed=feed, fetch_list=fetch, scope=scope)
        return "ran"
    from keel.executor.inference import Config, create_predictor
    model = workdir / ("m.json" if base.get("format") == "pir" else "m.pdmodel")
    model.write_bytes(case["model"])
    params = None
    if case["params"] is not None:
        params = workdir / "m.pdiparams"
        params.write_bytes(case["params"])
    config = Config(str(model), str(params) if params else None)
    config.switch_ir_optim(case["ir_optim"])
    config.set_max_loop_iterations(LOOP_LIMIT)
    predictor = create_predictor(config)
    arrays = _inputs_for(predictor, base["inputs"])
    if arrays is not None:
        predictor.run(arrays)
    return "ran"


def classify(exc: BaseException) -> str:
    from keel.executor.errors import ExecutionError
    from keel.program.errors import KeelError
    if isinstance(exc, MemoryError):
        return "oom"
    if isinstance(exc, ExecutionError):
        cause = exc.__cause__ or exc.__context__
        if cause is not None and not isinstance(cause, KeelError):
            return "wrapped"
        return "clean"
    if isinstance(exc, KeelError):
        return "clean"
    return "raw"


def _limit_memory(mem_mb: int) -> None:
    if mem_mb > 0:
        limit = mem_mb << 20
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _child(case: dict, mem_mb: int, timeout: float, fd: int) -> None:
    """In a forked worker: limit memory and CPU time, run, report one JSON line."""
    _limit_memory(mem_mb)
    cpu = int(timeout) + 2
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    workdir = Path(tempfile.mkdtemp(prefix="keelfuzz-"))
    result = {"index": case["index"], "seed_file": case["seed"]["name"]}
    try:
        result["outcome"] = run_case(case, workdir)
    except BaseException as e:  # noqa: BLE001 - classifying everything is the point
        result["outcome"] = classify(e)
        cause = e.__cause__ or e.__context__
        result["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        if result["outcome"] == "wrapped" and cause is not None:
            result["cause"] = f"{type(cause).__name__}: {str(cause)[:200]}"
        if result["outcome"] in ("raw", "oom"):
            result["where"] = "".join(traceback.format_tb(e.__traceback__)[-3:])[-1500:]
    try:
        for p in workdir.iterdir():
            p.unlink()
        workdir.rmdir()
    except OSError:
        pass
    os.write(fd, (json.dumps(result) + "\n").encode())
    os.close(fd)


def _drain(fd, buf: bytearray) -> None:
    """Append what a worker's nonblocking pipe holds now to `buf`."""
    try:
        while chunk := os.read(fd, 65536):
            buf += chunk
    except BlockingIOError:
        pass


def _reap(pid, status, result_text, case_index, seed_name):
    if result_text:
        return json.loads(result_text)
    result = {"index": case_index, "seed_file": seed_name}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        result["outcome"] = "hang" if sig in (signal.SIGXCPU, signal.SIGALRM) else (
            "oom" if sig == signal.SIGKILL else "crash")
        result["error"] = f"killed by signal {signal.Signals(sig).name}"
    else:
        result["outcome"] = "crash"
        result["error"] = f"exited with status {os.WEXITSTATUS(status)} and no result"
    return result


def campaign(args) -> dict:
    corpus_dir = Path(tempfile.mkdtemp(prefix="keelfuzz-corpus-"))
    corpus = load_corpus(corpus_dir, args.corpus)
    counts: Counter = Counter()
    findings = []
    running: dict[int, tuple] = {}
    indices = list(range(args.start, args.start + args.cases))
    if args.rerun:  # the cases of an earlier campaign's log that did not end ran or clean
        with open(args.rerun) as f:
            indices = sorted({r["index"] for r in map(json.loads, f) if r["outcome"] not in ("ran", "clean")})
        args.cases = len(indices)
    pending = iter(indices)
    next_index = next(pending, None)
    started = time.time()
    log = open(args.log, "a") if args.log else None

    def launch(index):
        case = make_case(args.seed, index, corpus)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            try:
                _child(case, args.memory_mb, args.timeout, w)
            finally:
                os._exit(0)
        os.close(w)
        os.set_blocking(r, False)
        running[pid] = (index, case["seed"]["name"], r, time.time(), bytearray())

    def finish(pid, status):
        index, name, r, _, buf = running.pop(pid)
        _drain(r, buf)
        os.close(r)
        result = _reap(pid, status, buf.decode(errors="replace").strip(), index, name)
        counts[result["outcome"]] += 1
        if log:
            log.write(json.dumps(result) + "\n")
            log.flush()
        if result["outcome"] in BAD or (args.verbose and result["outcome"] == "wrapped"):
            findings.append(result)
            if args.verbose:
                print(json.dumps(result)[:2000], flush=True)

    while next_index is not None or running:
        while next_index is not None and len(running) < args.jobs:
            launch(next_index)
            next_index = next(pending, None)
        for pid, (index, name, r, t0, buf) in list(running.items()):
            _drain(r, buf)  # so a large result never blocks the child
            if time.time() - t0 > args.timeout:
                os.kill(pid, signal.SIGALRM)
        pid, status = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.005)
            continue
        if pid in running:
            finish(pid, status)
        done = sum(counts.values())
        if args.progress and done and done % args.progress == 0:
            print(f"[{done}/{args.cases}] {dict(counts)} {time.time() - started:.0f}s", flush=True)
    elapsed = time.time() - started
    summary = {"cases": args.cases, "seed": args.seed, "start": args.start, "seconds": round(elapsed, 1),
               "outcomes": {k: counts.get(k, 0) for k in OUTCOMES}, "findings": findings[:200]}
    return summary


def reproduce(args) -> int:
    corpus_dir = Path(tempfile.mkdtemp(prefix="keelfuzz-corpus-"))
    corpus = load_corpus(corpus_dir, args.corpus)
    case = make_case(args.seed, args.reproduce, corpus)
    workdir = Path(args.save_dir or tempfile.mkdtemp(prefix="keelfuzz-case-"))
    workdir.mkdir(parents=True, exist_ok=True)
    print(f"case {args.reproduce} (seed {args.seed}): mutant of {case['seed']['name']} "
          f"({case['seed']['kind']}); files in {workdir}")
    _limit_memory(args.memory_mb)
    try:
        outcome = run_case(case, workdir)
    except BaseException as e:  # noqa: BLE001
        traceback.print_exc()
        outcome = classify(e)
    print(f"outcome: {outcome}")
    return 1 if outcome in BAD else 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog="See the module docstring (and SECURITY.md) for the outcome classes.",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=200, help="number of cases (default 200)")
    parser.add_argument("--seed", type=int, default=1, help="campaign seed; a case is a function of (seed, index)")
    parser.add_argument("--start", type=int, default=0, help="index of the first case (default 0)")
    parser.add_argument("--jobs", type=int, default=max(1, (os.cpu_count() or 2) // 2),
                        help="worker processes at a time")
    parser.add_argument("--timeout", type=float, default=20.0,
                        help="seconds one case may take before it counts as a hang (default 20)")
    parser.add_argument("--memory-mb", type=int, default=3072,
                        help="address-space limit of a worker in MiB (RLIMIT_AS; default 3072)")
    parser.add_argument("--corpus", choices=("legacy", "pir", "all"), default="legacy",
                        help="the files mutated: legacy ProgramDesc models, parameters and checkpoints (default; "
                             "case numbers as before PIR files were added), PIR JSON programs, or both")
    parser.add_argument("--log", help="append one JSON line per case to this file")
    parser.add_argument("--progress", type=int, default=0, help="print counts every N cases")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.add_argument("--verbose", action="store_true", help="print each finding as it happens")
    parser.add_argument("--rerun", metavar="LOG",
                        help="run again (same --seed) the cases of a --log file that did not end ran or clean")
    parser.add_argument("--reproduce", type=int, help="replay case N in this process, with its traceback")
    parser.add_argument("--save-dir", help="with --reproduce: where to write the case's files")
    args = parser.parse_args(argv)
    if args.reproduce is not None:
        return reproduce(args)
    summary = campaign(args)
    if args.json:
        print(json.dumps(summary, indent=1))
    else:
        print(f"{summary['cases']} cases, seed {summary['seed']}, {summary['seconds']} s: "
              + ", ".join(f"{k} {v}" for k, v in summary["outcomes"].items()))
        for f in summary["findings"][:50]:
            print(f"  case {f['index']} ({f['seed_file']}): {f['outcome']}: {f.get('error', '')[:200]}")
    return 1 if any(summary["outcomes"][k] for k in BAD) else 0


if __name__ == "__main__":
    sys.exit(main())
