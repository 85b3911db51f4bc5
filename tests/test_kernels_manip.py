"""Kernels of program/ops/manip.py (and acos, asin, atan, brelu, stanh) against
independent references written from each op's definition (explicit loops on small
inputs), and against PaddlePaddle 3.3.1's own outputs and gradients
(tests/fixtures/manip/cases.npz, made by tests/fixtures/manip/generate.py)."""
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

import program as pg
from executor import CPUPlace, Executor, Scope
from executor.kernel_call import call_kernel
from kernels import registry as kernel_registry
from kernels.tensor import IndexRangeError
from program.ops import registry as op_registry

FIXTURE = Path(__file__).parent / "fixtures" / "manip" / "cases.npz"
ORACLE = np.load(FIXTURE, allow_pickle=False)
CASES = json.loads(str(ORACLE["__cases__"]))

MANIP_OPS = ["tril_triu", "argsort", "flip", "index_select", "roll", "take_along_axis",
             "put_along_axis", "einsum", "dist", "maxout", "norm", "scatter_nd_add",
             "shuffle_channel", "size", "share_data", "unfold", "acos", "asin", "atan", "brelu",
             "stanh"]


def run(op, inputs, attrs=None):
    return call_kernel(op, inputs, attrs or {})


def out(op, inputs, attrs=None, slot="Out"):
    return run(op, inputs, attrs)[slot]


def rnd(*shape, seed=0, low=-1.0, high=1.0, dtype=np.float64):
    return np.random.default_rng(seed).uniform(low, high, shape).astype(dtype)


# -- slots ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op_type", MANIP_OPS)
def test_kernel_slots_match_the_op(op_type):
    opdef, kdef = op_registry.get(op_type), kernel_registry.get(op_type)
    assert kdef is not None
    assert {s.name for s in opdef.inputs} == set(kdef.inputs)
    assert {s.name for s in opdef.outputs} == set(kdef.outputs)
    for name in kdef.attrs:
        assert opdef.attr_spec(name) is not None
    rule = opdef.grad
    if isinstance(rule, op_registry.GradRule) and rule.maker is None:
        gdef, gk = op_registry.get(op_type + "_grad"), kernel_registry.get(op_type + "_grad")
        assert gk is not None and set(gk.inputs) == {s.name for s in gdef.inputs}
        assert set(gk.outputs) == {s.name for s in gdef.outputs}


# -- PaddlePaddle's outputs --------------------------------------------------------------------

def _inputs(cid):
    ins = {}
    for key in ORACLE.files:
        parts = key.split("|")
        if parts[0] == cid and parts[1] == "in":
            ins.setdefault(parts[2], {})[int(parts[3])] = ORACLE[key]
    return {slot: ([v[i] for i in sorted(v)] if slot == "Operands" else v[0]) for slot, v in ins.items()}


def _assert_close(got, want, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape}, PaddlePaddle {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, PaddlePaddle {want.dtype}"
    if want.dtype.kind == "f":
        tol = 2e-6 if want.dtype == np.float32 else 1e-11
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("cid", sorted(CASES))
def test_forward_matches_paddle(cid):
    c = CASES[cid]
    got = run(c["op"], _inputs(cid), c["attrs"])
    for slot in c["check"]:
        for i in range(c["outputs"][slot]):
            value = got[slot][i] if c["outputs"][slot] > 1 else got[slot]
            _assert_close(np.asarray(value), ORACLE[f"{cid}|out|{slot}|{i}"], f"{cid}: {slot}")


GRAD_CASES = sorted(cid for cid, c in CASES.items() if c["grad"])


def keel_gradients(op_type, inputs, attrs, outputs, loss_slots, weights, wrt_slots, place=None):
    """loss = sum_k sum(Out_k * W_k) through Keel's builder, backward pass and executor;
    returns {(slot, i): gradient}."""
    main, startup = pg.Program(), pg.Program()
    feed, wrt = {}, []
    with pg.program_guard(main, startup), pg.unique_name.guard():
        block = main.global_block()
        ins = {}
        for slot, value in inputs.items():
            ins[slot] = []
            for i, arr in enumerate(value if isinstance(value, list) else [value]):
                var = block.create_var(f"in_{slot}_{i}", arr.shape, str(arr.dtype), need_check_feed=True,
                                       stop_gradient=slot not in wrt_slots)
                feed[var.name] = arr
                ins[slot].append(var.name)
                if slot in wrt_slots:
                    wrt.append(((slot, i), var))
        outs = {s: [block.create_var(f"out_{s}_{i}").name for i in range(n)] for s, n in outputs.items()}
        block.append_op(op_type, ins, outs, attrs)
        loss = None
        for slot in loss_slots:
            var = block.var(outs[slot][0])
            w = block.create_var(f"w_{slot}", weights[slot].shape, str(weights[slot].dtype),
                                 need_check_feed=True, stop_gradient=True)
            feed[w.name] = weights[slot]
            term = pg.reduce_sum(var * w)
            loss = term if loss is None else loss + term
        grads = pg.gradients([loss], [v for _, v in wrt])
    got = Executor(place or CPUPlace()).run(main, feed=feed, fetch_list=grads, scope=Scope())
    return {key: g for (key, _), g in zip(wrt, got)}


@pytest.mark.parametrize("cid", GRAD_CASES)
def test_gradient_matches_paddle(cid):
    c = CASES[cid]
    weights = {s: ORACLE[f"{cid}|w|{s}"] for s in c["loss"]}
    got = keel_gradients(c["op"], _inputs(cid), c["attrs"], c["outputs"], c["loss"], weights, c["grad"])
    for (slot, i), g in got.items():
        _assert_close(np.asarray(g), ORACLE[f"{cid}|grad|{slot}|{i}"], f"{cid}: d loss / d {slot}[{i}]")


def test_oracle_covers_every_op():
    assert {c["op"] for c in CASES.values()} == set(MANIP_OPS)
