"""Constant folding."""
from __future__ import annotations

import math

import numpy as np

from keel.program import dtypes
from keel.program.errors import KeelError
from keel.program.ops.infer import InferContext, VarInfo
from keel.program.passes.graph import FEED, FETCH, PassError, written_names
from keel.proto import pb

# Ops never folded: the interface, and ops whose result is random (run-to-run values).
NOT_FOLDABLE = frozenset({FEED, FETCH, "uniform_random", "gaussian_random",
                          "truncated_gaussian_random", "randint", "dropout"})
_EMPTY = "@EMPTY@"


def _gather_inputs(op, values) -> dict:
    inputs = {}
    for slot in op.opdef.inputs:
        names = [n for n in op.input(slot.name) if n != _EMPTY]
        if slot.duplicable:
            inputs[slot.name] = [values(n) for n in names] if names else None
        elif names:
            inputs[slot.name] = values(names[0])
    return inputs


def _results(op, outputs: dict, graph) -> dict:
    """Output variable name -> array (in the variable's declared dtype) for the outputs
    the kernel produced."""
    values = {}
    for slot, names in op.outputs.items():
        got = outputs.get(slot)
        got = list(got) if isinstance(got, (list, tuple)) else [got] * len(names)
        for name, value in zip(names, got):
            if value is None:
                continue
            value = np.asarray(value)
            declared = graph.var(name).dtype
            if declared is not None and declared != pb.VarType.BF16 and declared != dtypes.to_code(value.dtype):
                value = value.astype(dtypes.to_numpy(declared))
            values[name] = value
    return values


def _range_length(op, value) -> int:
    start, end, step = (float(np.asarray(value(op.input(s)[0])).reshape(-1)[0]) for s in ("Start", "End", "Step"))
    return max(0, math.ceil((end - start) / step)) if step else -1


# Ops whose output size depends on their (constant) input values: the size, from the values.
_SIZE_FROM_VALUES = {"range": lambda op, value: {op.output("Out")[0]: (_range_length(op, value),)}}


def _output_bytes(op, value) -> int | None:
    """The bytes `op` would produce from its constant inputs, from the op's own shape rule
    run on the constants' real shapes (not on what the file declares), before anything is
    allocated. None when the rule refuses the op or a size depends on values."""
    def lookup(name):
        if name in op.input_arg_names:
            v = np.asarray(value(name))
            return VarInfo(name, tuple(v.shape), dtypes.to_code(v.dtype))
        var = op.block.find_var(name)
        return VarInfo(name, tuple(var.shape or ()) if var is not None else (), var.dtype if var else 0)

    shapes = {}
    ins = {slot: [n for n in names if n != _EMPTY] for slot, names in op.inputs.items()}
    try:
        op.opdef.infer(InferContext(op.type, ins, op.outputs, op.attrs, lookup,
                                    lambda name, shape, dtype: shapes.__setitem__(name, (shape, dtype))))
        if op.type in _SIZE_FROM_VALUES:
            for name, shape in _SIZE_FROM_VALUES[op.type](op, value).items():
                shapes[name] = (shape, shapes[name][1])
    except (KeelError, ValueError, TypeError, KeyError, IndexError, OverflowError, AttributeError):
        return None
    total = 0
    for name in written_names(op):
        if name not in shapes:
            return None
        shape, dtype = shapes[name]
        if any(int(d) < 0 for d in shape):
            return None
        itemsize = 2 if dtype == pb.VarType.BF16 else dtypes.to_numpy(dtype).itemsize
        total += math.prod(int(d) for d in shape) * itemsize
    return total


def _non_finite(arrays) -> bool:
    return any(a.dtype.kind in "fc" and not np.isfinite(a).all() for a in arrays)


def fold_constants(graph, options) -> dict:
    """Matches: an op (not random, not feed/fetch) whose every input is a constant (a
    parameter no op writes, or an earlier folded result) and none of whose outputs is a
    feed or fetch target. The op is run once with `options.evaluate` (the op's own kernel)
    and removed; each output becomes a parameter of the same name holding the result (cast
    to the variable's declared dtype). Ops without inputs (fill_constant, assign_value)
    are constants too, but are folded only into the ops that read them: alone they are
    already as small as they get, and turning them into parameters would only move bytes
    from the program to the parameter file. Once nothing reads them they are removed.
    A `cast` of a bfloat16 parameter (convert_weights_to_bf16's) folds into a float32
    parameter holding the same values, so the loaded model runs no cast.

    Safe because a deterministic op of constant inputs gives the same value on every run.
    An output the kernel does not produce (an unused XShape) is left without a value only
    when nothing reads it; otherwise the op stays. Results larger than
    `options.fold_max_bytes` with more elements than the constants they replace are not
    folded (an `expand` of a small constant would bloat the parameter file); a result of
    no more elements folds at any size (a cast that widens a weight runs once, not on
    every call).

    Bounded: an op is evaluated only when its shape rule, run on the constants' real shapes,
    gives every output's size and they add up to at most `options.fold_limit_bytes`; an
    op over the limit or of value-dependent size stays in the program (a hostile
    `fill_constant` of [20000, 20000] is not allocated at load). A result holding NaN or
    Inf (0 * inf, log 0, sqrt(-1)) is not folded either: the op stays and computes it at
    run time, where the NaN check can name it, rather than a constant in the file."""
    evaluate = options.evaluate
    too_large = non_finite = 0
    generated: dict[str, np.ndarray] = {}  # outputs of input-free ops, not (yet) parameters
    generators = []
    folded = 0

    def value(name):
        return generated[name] if name in generated else graph.params[name]

    for op in list(graph.ops):
        if op.type in NOT_FOLDABLE or op.opdef is None:
            continue
        ins = [n for n in op.input_arg_names if n != _EMPTY]
        outs = written_names(op)
        if (not outs or not all(n in generated or graph.is_const(n) for n in ins)
                or any(graph.is_interface(n) for n in outs)):
            continue
        size = _output_bytes(op, value) if op.opdef.infer is not None else None
        if size is None or size > options.fold_limit_bytes:
            too_large += 1
            continue
        try:
            produced = evaluate(op.type, _gather_inputs(op, value), op.attrs)
        except Exception as e:  # the same kernel would fail at run time: say where
            raise PassError(f"constant folding: {op.type} failed on constant inputs {ins}: {e}"
                            + (f"\n  op created at {op.callsite}" if op.callsite else "")) from e
        values = _results(op, produced, graph)
        if any(n not in values and graph.readers(n) for n in outs):
            continue
        if _non_finite(values.values()):
            non_finite += 1
            continue
        if not ins:
            generated.update(values)
            generators.append(op)
            continue
        grows = sum(v.size for v in values.values()) > sum(np.asarray(value(n)).size for n in ins)
        if grows and sum(v.nbytes for v in values.values()) > options.fold_max_bytes:
            continue
        graph.remove_ops([op])
        for name, v in values.items():
            graph.make_const(name, v)
        for name in outs:  # outputs without a value: unread, dropped with their variable
            if name not in values:
                graph.block.remove_var(name)
        folded += 1
        graph.refresh()
    unread = [op for op in generators if not any(graph.readers(n) for n in op.output_arg_names)]
    graph.remove_ops(unread)
    return {"ops_folded": folded, "generators_removed": len(unread),
            "not_folded_size": too_large, "not_folded_non_finite": non_finite}
