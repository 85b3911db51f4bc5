"""Constant folding."""
from __future__ import annotations

import numpy as np

from program import dtypes
from program.passes.graph import FEED, FETCH, PassError, written_names
from proto import pb

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
    every call)."""
    evaluate = options.evaluate
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
        try:
            produced = evaluate(op.type, _gather_inputs(op, value), op.attrs)
        except Exception as e:  # the same kernel would fail at run time: say where
            raise PassError(f"constant folding: {op.type} failed on constant inputs {ins}: {e}"
                            + (f"\n  op created at {op.callsite}" if op.callsite else "")) from e
        values = _results(op, produced, graph)
        if any(n not in values and graph.readers(n) for n in outs):
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
    return {"ops_folded": folded, "generators_removed": len(unread)}
