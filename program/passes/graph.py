"""Use-def structure of one block, and the small edits every pass is made of.

A pass looks at the ops of the global block through a `Graph`: who writes each variable
(`producers`), who reads it (`consumers`), which names are the model's interface (the
`feed` ops' outputs and the `fetch` ops' inputs) and which are constants (parameters with
a value in `params` that no op writes).

A program with control flow: a conditional_block / while op of the global block reads and
writes what its sub-blocks read and write outside themselves (`control_io`, through nested
blocks). Every such name is *pinned*: counted among `fetches`, so passes treat it as a
fetch target, live, never renamed, removed, folded, fused away or converted, since the
sub-blocks refer to it by name. The sub-blocks themselves are left as they are. The maps are rebuilt on demand after an edit
(`graph.refresh()`), so a pass never reasons on stale structure.

Patterns are matched on this structure, never on variable names: `Graph.chain(op,
"Out", "elementwise_add", "X")` is "the one op that reads op's Out in its X slot, when
that is the only reader and the value is not a fetch target".
"""
from __future__ import annotations

from typing import Iterable

import numpy as np

from keel.program import dtypes, limits
from keel.program.errors import ProgramError
from keel.program.ops.control_flow import CONTROL_FLOW_OPS, control_io
from keel.proto import pb

FEED, FETCH = "feed", "fetch"


class PassError(ProgramError):
    """A pass left the program or its parameters inconsistent (a bug in the pass)."""


def written_names(op) -> list[str]:
    """The variables `op` really writes. An output that names one of the op's own inputs is an
    in-place update; for an inference `batch_norm` (running statistics used, not updated)
    MeanOut/VarianceOut alias Mean/Variance and leave them unchanged, so they are not writes."""
    outs = op.output_arg_names
    if op.type == "batch_norm" and uses_global_stats(op):
        aliased = set(op.input("Mean")) | set(op.input("Variance"))
        outs = [n for n in outs if n not in aliased]
    return outs


def op_io(op) -> tuple[list[str], list[str]]:
    """(reads, writes) of an op of the global block; a control-flow op's include its
    sub-blocks' reads and writes outside themselves."""
    if op.type in CONTROL_FLOW_OPS:
        return control_io(op.block.program, op)
    return op.input_arg_names, written_names(op)


def uses_global_stats(op) -> bool:
    """batch_norm normalizes with its running statistics (the kernel's rule)."""
    return bool((op.attr("is_test", False) and not op.attr("trainable_statistics", False))
                or op.attr("use_global_stats", False))


class Graph:
    """Producer/consumer maps of the global block of `program`, with `params` as constants."""

    def __init__(self, program, params: dict):
        self.program = program
        self.block = program.global_block()
        self.params = params
        self.refresh()

    def refresh(self) -> None:
        self.producers: dict[str, list] = {}
        self.consumers: dict[str, list] = {}
        self.feeds: list[str] = []
        self.fetches: list[str] = []
        pinned: dict[str, None] = {}
        for op in self.block.ops:
            if op.type == FEED:
                self.feeds.extend(op.output("Out"))
            elif op.type == FETCH:
                self.fetches.extend(op.input("X"))
            reads, writes = op_io(op)
            if op.type in CONTROL_FLOW_OPS:
                pinned.update(dict.fromkeys(reads + writes))
            for name in writes:
                self.producers.setdefault(name, []).append(op)
            for name in dict.fromkeys(reads):
                self.consumers.setdefault(name, []).append(op)
        self.fetches.extend(n for n in pinned if n not in self.fetches)  # see the module's docstring

    # -- questions ------------------------------------------------------------------------
    @property
    def ops(self) -> list:
        return self.block.ops

    def var(self, name: str):
        return self.block.var(name)

    def is_interface(self, name: str) -> bool:
        """A feed or fetch target (or a name a sub-block uses): its name must stay."""
        return name in self.feeds or name in self.fetches

    def is_const(self, name: str) -> bool:
        """A parameter (a value in `params`) that no op of the program writes."""
        return name in self.params and not self.producers.get(name)

    def const(self, name: str) -> np.ndarray:
        return np.asarray(self.params[name])

    def readers(self, name: str) -> list:
        """Ops that read `name` (fetch ops included)."""
        return list(self.consumers.get(name, ()))

    def producer(self, name: str):
        """The one op writing `name`, or None (a feed target written by a feed op counts)."""
        ops = self.producers.get(name, ())
        return ops[0] if len(ops) == 1 else None

    def sole_reader(self, name: str):
        """The one op reading `name` when exactly one reads it and it is not fetched."""
        ops = self.consumers.get(name, ())
        if len(ops) != 1 or name in self.fetches or ops[0].type == FETCH:
            return None
        return ops[0]

    def chain(self, op, out_slot: str, next_type: str | Iterable[str], in_slot: str):
        """The op of type `next_type` that is the sole reader of `op`'s `out_slot`, reading
        it in `in_slot`; None when there is no such op (or the value is also used elsewhere)."""
        outs = op.output(out_slot)
        if len(outs) != 1:
            return None
        nxt = self.sole_reader(outs[0])
        types = {next_type} if isinstance(next_type, str) else set(next_type)
        if nxt is None or nxt.type not in types or nxt.input(in_slot) != outs:
            return None
        if nxt.input_arg_names.count(outs[0]) != 1:  # read in another slot too: add(y, y)
            return None
        return nxt

    def rank(self, name: str) -> int | None:
        shape = self.var(name).shape
        return None if shape is None else len(shape)

    # -- edits ----------------------------------------------------------------------------
    def fresh_name(self, base: str) -> str:
        """`base`, or `base_1`, `base_2`, ... whichever is not a variable yet."""
        name, i = base, 0
        while self.block.find_var(name) is not None:
            i += 1
            name = f"{base}_{i}"
        return name

    def add_param(self, base: str, value: np.ndarray) -> str:
        """A new persistable variable holding `value` (added to `params`); returns its name."""
        value = np.ascontiguousarray(value)
        name = self.fresh_name(base)
        self.block.create_var(name, list(value.shape), dtypes.to_code(value.dtype), persistable=True)
        self.params[name] = value
        return name

    def make_const(self, name: str, value: np.ndarray) -> None:
        """Turn the existing variable `name` into a parameter holding `value`."""
        value = np.ascontiguousarray(value)
        var = self.var(name)
        var.persistable = True
        var.shape = list(value.shape)
        var.dtype = dtypes.to_code(value.dtype)
        self.params[name] = value

    def insert_op(self, index: int, type: str, inputs: dict, outputs: dict, attrs: dict | None = None,
                  *, like=None):
        """Insert an op (shapes inferred); it keeps the op_callstack of `like`, the op it
        replaces, so run-time errors still name the user's line."""
        op = self.block.insert_op(index, type, inputs, outputs, attrs or {})
        if like is not None:
            op.set_attr("op_callstack", like.callstack)
            for name in ("op_namescope", "op_role", "op_device"):
                if like.has_attr(name):
                    op.set_attr(name, like.attr(name))
        return op

    def remove_ops(self, ops: Iterable) -> None:
        doomed = {id(op) for op in ops}
        for op in [op for op in self.block.ops if id(op) in doomed]:
            self.block.remove_op(op)

    def replace_uses(self, old: str, new: str) -> None:
        """Make every reader of `old` (fetch ops excluded) read `new` instead."""
        for op in self.readers(old):
            if op.type != FETCH:
                op.rename_input(old, new)

    def index(self, op) -> int:
        return self.block.ops.index(op)


def sweep_unused(program, params: dict) -> int:
    """Drop variables no op names (feed/fetch lists and feed targets kept) and parameters
    with no variable. Returns how many variables were dropped."""
    block = program.global_block()
    used = {n for op in block.ops for names in op_io(op) for n in names}
    used.update(n for op in block.ops for n in op.input_arg_names + op.output_arg_names)
    dropped = 0
    for name, var in list(block.vars.items()):
        if name in used or var.type in (pb.VarType.FEED_MINIBATCH, pb.VarType.FETCH_LIST):
            continue
        block.remove_var(name)
        dropped += 1
    for name in [n for n in params if n not in block.vars]:
        del params[name]
    return dropped


def check_params(program, params: dict, where: str) -> None:
    """Every persistable tensor of the program has a value of its declared dtype and shape."""
    problems = []
    for var in program.global_block().vars.values():
        if not var.persistable or var.type != pb.VarType.DENSE_TENSOR:
            continue
        value = params.get(var.name)
        if value is None:
            problems.append(f"{var.name}: no value")
            continue
        value = np.asarray(value)
        if var.dtype != pb.VarType.BF16 and dtypes.to_numpy(var.dtype) != value.dtype:
            problems.append(f"{var.name}: declared {dtypes.name(var.dtype)}, value is {value.dtype}")
        if tuple(var.shape or ()) != tuple(value.shape):
            problems.append(f"{var.name}: declared shape {list(var.shape or ())}, value {list(value.shape)}")
    if problems:
        raise PassError(f"after pass {where}: parameters disagree with the program: " + "; ".join(problems[:8]))


def bias_vector(graph, add, rank: int, axis: int, channels: int) -> np.ndarray | None:
    """When `add` is `elementwise_add(X, Y)` with a constant Y that only varies along
    dimension `axis` of X (rank `rank`), with `channels` entries there (or one, broadcast),
    return Y as a vector of `channels` values; else None. Follows PaddlePaddle's
    broadcasting: Y's dims align with X's starting at the `axis` attribute (trailing
    alignment when it is -1)."""
    ys = add.input("Y")
    if add.type != "elementwise_add" or len(ys) != 1 or not graph.is_const(ys[0]):
        return None
    if not 0 <= axis < rank <= limits.MAX_RANK:  # no list as long as a damaged attribute says
        return None
    y = graph.const(ys[0])
    shape = list(y.shape)
    while len(shape) > 1 and shape[-1] == 1 and add.attr("axis", -1) != -1:
        shape.pop()  # PaddlePaddle trims Y's trailing 1s when an explicit axis is given
    start = add.attr("axis", -1)
    start = rank - len(shape) if start == -1 else start
    if start < 0 or start + len(shape) > rank:
        return None
    padded = [1] * start + shape + [1] * (rank - start - len(shape))
    if any(d != 1 for i, d in enumerate(padded) if i != axis) or padded[axis] not in (1, channels):
        return None
    return np.broadcast_to(y.reshape(-1), (channels,)).copy()
