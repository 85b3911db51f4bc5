"""Feeds with a LoD: PaddlePaddle's per-sequence split of a tensor's first dim.

A few legacy ops read the split of a batch from their input's LoD when their lengths input
is absent: roi_align and roi_pool (RoIs per image: ROIs -> RoisNum),
distribute_fpn_proposals (FpnRois -> RoisNum, and it writes each level's split as its
outputs' LoD), warpctc (sequences packed one after another: Logits -> LogitsLength, Label ->
LabelLength); box_coder takes one (a LoD changes none of its values). Keel carries a LoD as
those lengths, one mechanism for all of them:

- a feed may be a `LoDTensor` (an array and a level-1 LoD; PaddlePaddle's
  `create_lod_tensor`, `LoDTensor.set_lod`, the Predictor's `Tensor.set_lod`); `split_feed`
  feeds its array under its name and its sequence lengths (int64) under `lengths_name(name)`;
- when the plan is compiled, `bindings` wires those lengths into each op's empty lengths
  slot where the op's definition declares the pair (OpDef.lod_lengths),
  so the kernels get exactly the lengths input PaddlePaddle's RoisNum / LogitsLength form
  passes: the results are the same.

Only level-1 LoDs are taken (those ops read one level); a deeper one is refused by name.
"""
from __future__ import annotations

import numpy as np

from keel.executor.errors import FeedError
from keel.program.ops import registry as op_registry

LENGTHS_SUFFIX = "@LOD"  # a variable's LoD, as its sequence lengths: `rois@LOD`


def lengths_name(name: str) -> str:
    return name + LENGTHS_SUFFIX


class LoDTensor:
    """An array with a level-1 LoD, to feed (`exe.run(feed={"rois": t})`).

        t = LoDTensor(); t.set(rois, CPUPlace()); t.set_recursive_sequence_lengths([[2, 3]])
        t = create_lod_tensor(rois, [[2, 3]])        # the same: rows 0-1, then rows 2-4

    `lod()` is the offsets form ([[0, 2, 5]]), `recursive_sequence_lengths()` the lengths
    form ([[2, 3]]), as in PaddlePaddle."""

    def __init__(self, array=None, lod=None):
        self._array = None if array is None else _array(array)
        self._offsets = None
        if lod is not None:
            self.set_lod(lod)

    def set(self, array, place=None) -> None:
        """The data (`place` is accepted for PaddlePaddle's signature; the executor puts
        feeds on its own place)."""
        self._array = _array(array)

    def set_lod(self, lod) -> None:
        """The LoD as offsets, one list per level: [[0, 2, 5]] (two sequences, of 2 and 3 rows)."""
        levels = [list(level) for level in lod]
        if len(levels) > 1:
            raise FeedError(f"a LoD of {len(levels)} levels was given ({levels}); Keel feeds level-1 LoDs, "
                            "the one level roi_align, roi_pool, distribute_fpn_proposals, warpctc and "
                            "box_coder read")
        if levels:
            offsets = [int(v) for v in levels[0]]
            if not offsets or offsets[0] != 0 or any(b < a for a, b in zip(offsets, offsets[1:])):
                raise FeedError(f"LoD offsets must start at 0 and not decrease, got {offsets}")
            self._offsets = offsets
        else:
            self._offsets = None

    def set_recursive_sequence_lengths(self, lengths) -> None:
        """The LoD as sequence lengths, one list per level: [[2, 3]]."""
        levels = [list(level) for level in lengths]
        if any(int(v) < 0 for level in levels for v in level):
            raise FeedError(f"sequence lengths must be >= 0, got {levels}")
        self.set_lod([np.concatenate([[0], np.cumsum(np.asarray(level, np.int64))]).tolist()
                      for level in levels])

    def lod(self) -> list:
        return [] if self._offsets is None else [list(self._offsets)]

    def recursive_sequence_lengths(self) -> list:
        return [] if self._offsets is None else [np.diff(self._offsets).tolist()]

    def shape(self) -> list:
        return [] if self._array is None else list(self._array.shape)

    def __array__(self, dtype=None, copy=None):
        return self._array if dtype is None else self._array.astype(dtype)

    def __repr__(self):
        return f"LoDTensor(shape={self.shape()}, lod={self.lod()})"


def _array(value):
    """A numpy or cupy array as it is; anything else as a numpy array."""
    return value if hasattr(value, "shape") and hasattr(value, "dtype") else np.asarray(value)


def create_lod_tensor(data, recursive_seq_lens, place=None) -> LoDTensor:
    """PaddlePaddle's `create_lod_tensor`: `data` (an array) split into sequences of the
    given lengths ([[2, 3]]: rows 0-1 and 2-4)."""
    tensor = LoDTensor(np.asarray(data))
    tensor.set_recursive_sequence_lengths(recursive_seq_lens)
    return tensor


def split_feed(feed: dict) -> dict:
    """`feed` with each LoDTensor replaced by its array, and its LoD (when it has one) fed
    beside it as int64 sequence lengths under `lengths_name(name)`."""
    if not any(isinstance(v, LoDTensor) for v in feed.values()):
        return feed
    out = {}
    for name, value in feed.items():
        if not isinstance(value, LoDTensor):
            out[name] = value
            continue
        if value._array is None:
            raise FeedError(f"feed {name!r}: the LoDTensor holds no data; call set(array) first")
        out[name] = value._array
        if value._offsets is not None:
            rows = value._array.shape[0] if value._array.ndim else None
            if rows != value._offsets[-1]:
                raise FeedError(f"feed {name!r}: its LoD {value.lod()} covers {value._offsets[-1]} rows, "
                                f"the array has shape {list(value._array.shape)}")
            out[lengths_name(name)] = np.diff(np.asarray(value._offsets, np.int64))
    return out


def is_lengths_feed(name: str, feed_names) -> bool:
    """Whether feed `name` is the LoD of another feed (split_feed's lengths)."""
    return name.endswith(LENGTHS_SUFFIX) and name[:-len(LENGTHS_SUFFIX)] in feed_names


LENGTHS_SPEC = (np.dtype(np.int64), (-1,), "int64[-1] (sequence lengths of a LoD)")


def bindings(ops, feed_names) -> dict[int, dict[str, list[str]]]:
    """{op position: {slot: [variable names]}}: the lengths each op reads from a LoD (its
    lengths input empty, its data input with a LoD) or writes as one (its lengths output
    empty, and it read a LoD). A variable has a LoD when it is fed with one or written as one."""
    lod_of = {name[:-len(LENGTHS_SUFFIX)]: name for name in feed_names if is_lengths_feed(name, feed_names)}
    found: dict[int, dict[str, list[str]]] = {}
    if not lod_of:
        return found
    for pos, op in enumerate(ops):
        opdef = op_registry.lookup(op.type)
        if opdef is None or not opdef.lod_lengths:
            continue
        bound = {}
        for data, lengths in opdef.lod_lengths.items():
            names = op.input(data) if data in opdef.input_slots else []
            if names and names[0] in lod_of and not op.input(lengths):
                bound[lengths] = [lod_of[names[0]]]
        if bound:
            for data, lengths in opdef.lod_lengths.items():
                if data in opdef.output_slots and op.output(data) and not op.output(lengths):
                    bound[lengths] = [lengths_name(n) for n in op.output(data)]
                    lod_of.update(zip(op.output(data), bound[lengths]))
            found[pos] = bound
    return found
