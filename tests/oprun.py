"""Running one op as a program: build it from numpy inputs, run it with the Executor and
fetch its outputs; and its gradients, seeded with given output gradients (what the
op-semantics tests and the dtype sweep share)."""
from __future__ import annotations

import numpy as np

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope
from keel.program.ops import registry


def _listed(value):
    return value if isinstance(value, list) else [value]


def build(op_type, inputs, attrs=None, outputs=None, inplace=None):
    """A program with op `op_type` on fed variables holding `inputs` (slot -> array or a
    list of arrays); `outputs`: output slot -> number of variables (default 1, and none for
    an optional slot not named); `inplace`: output slot -> the input slot whose variables it
    writes (batch_norm's MeanOut: Mean). Returns (program, feed, {output slot: [variables]},
    {input slot: [variables]})."""
    opdef = registry.get(op_type)
    main = pg.Program()
    feed, ins = {}, {}
    with pg.program_guard(main, pg.Program()), pg.unique_name.guard():
        block = main.global_block()
        for slot, value in inputs.items():
            ins[slot] = []
            for i, arr in enumerate(_listed(value)):
                arr = np.array(arr)  # a copy: in-place ops (batch_norm's MeanOut) write into feeds
                var = block.create_var(f"{slot.lower()}{i}", arr.shape, str(arr.dtype),
                                       need_check_feed=True, stop_gradient=True)
                feed[var.name] = arr
                ins[slot].append(var)
        outs = {s.name: [block.create_var(f"{s.name.lower()}_out{i}")
                         for i in range((outputs or {}).get(s.name, 1))]
                for s in opdef.outputs if not s.dispensable or s.name in (outputs or {})}
        for out_slot, in_slot in (inplace or {}).items():
            outs[out_slot] = ins[in_slot]
        block.append_op(op_type, {k: [v.name for v in vs] for k, vs in ins.items()},
                        {k: [v.name for v in vs] for k, vs in outs.items()}, attrs or {})
    return main, feed, outs, ins


def run(op_type, inputs, attrs=None, outputs=None):
    """{output slot: array} of `op_type` run on `inputs` (the first variable of each slot)."""
    main, feed, outs, _ = build(op_type, inputs, attrs, outputs)
    slots = list(outs)
    fetched = Executor(CPUPlace()).run(main, feed=feed, fetch_list=[outs[s][0] for s in slots],
                                       scope=Scope())
    return dict(zip(slots, fetched))


def grads(op_type, inputs, out_grads, attrs=None, wrt=None):
    """{input slot: gradient array} of `op_type` at `inputs`, the gradients of its outputs
    seeded with `out_grads` (output slot -> array): the op's gradient ops as backward
    appends them, run by the Executor. `wrt`: the input slots to differentiate (default
    every slot)."""
    main, feed, outs, ins = build(op_type, inputs, attrs)
    wrt = list(wrt or ins)
    with pg.program_guard(main, pg.Program()), pg.unique_name.guard():
        block = main.global_block()
        targets, seeds = [], []
        for slot, g in out_grads.items():
            g = np.asarray(g)
            seed = block.create_var(f"seed_{slot.lower()}", g.shape, str(g.dtype),
                                    need_check_feed=True, stop_gradient=True)
            feed[seed.name] = g
            targets.append(outs[slot][0])
            seeds.append(seed)
        wanted = [ins[s][0] for s in wrt]
        for v in wanted:
            v.stop_gradient = False
        got = pg.gradients(targets, wanted, target_gradients=seeds)
    fetch = [g for g in got if g is not None]
    values = iter(Executor(CPUPlace()).run(main, feed=feed, fetch_list=fetch, scope=Scope()))
    return {s: (next(values) if g is not None else None) for s, g in zip(wrt, got)}


def numeric_grads(op_type, inputs, out_grads, wrt, attrs=None, delta=1e-6):
    """Central finite differences of the real loss L = sum_k Re(sum(conj(w_k) * Out_k)),
    w_k = out_grads[k], with respect to each input slot in `wrt`: dL/dRe(x) + i dL/dIm(x)
    for a complex x (PaddlePaddle's convention for complex gradients: for that loss the
    output gradients are exactly w_k), dL/dx for a real one."""
    def loss(values):
        outs = run(op_type, values, attrs)
        return sum(float(np.sum((np.conj(w) * outs[slot]).real)) for slot, w in out_grads.items())

    result = {}
    for slot in wrt:
        base = np.asarray(inputs[slot])
        steps = (1, 1j) if base.dtype.kind == "c" else (1,)
        grad = np.zeros(base.shape, dtype=base.dtype)
        for i in range(base.size):
            for step in steps:
                moved = []
                for sign in (1, -1):
                    arr = base.copy()
                    arr.flat[i] += sign * step * delta
                    moved.append(loss({**inputs, slot: arr}))
                grad.flat[i] += step * (moved[0] - moved[1]) / (2 * delta)
        result[slot] = grad
    return result


def check_grads(op_type, inputs, wrt, attrs=None, seed=0, rtol=1e-6, atol=1e-8):
    """The op's analytic gradients (its gradient ops run by the Executor) against
    numeric_grads, with random output gradients of each output's dtype."""
    rng = np.random.default_rng(seed)
    outs = run(op_type, inputs, attrs)
    out_grads = {}
    for slot, value in outs.items():
        if value.dtype.kind not in "fc":
            continue
        w = rng.uniform(0.5, 1.5, value.shape)
        if value.dtype.kind == "c":
            w = w + 1j * rng.uniform(-1, 1, value.shape)
        out_grads[slot] = w.astype(value.dtype)
    analytic = grads(op_type, inputs, out_grads, attrs, wrt)
    numeric = numeric_grads(op_type, inputs, out_grads, wrt, attrs)
    for slot in wrt:
        got = analytic[slot]
        assert got is not None, f"{op_type}: no gradient for {slot}"
        assert got.dtype == np.asarray(inputs[slot]).dtype, \
            f"{op_type}: {slot}@GRAD is {got.dtype}, {slot} is {np.asarray(inputs[slot]).dtype}"
        assert got.shape == np.shape(inputs[slot]), f"{op_type}: {slot}@GRAD shape {got.shape}"
        np.testing.assert_allclose(got, numeric[slot], rtol=rtol, atol=atol,
                                   err_msg=f"{op_type}: d loss / d {slot}")
