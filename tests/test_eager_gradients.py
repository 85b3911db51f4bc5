"""Eager gradients are the static program's, bit for bit: every gradient case of
tests/test_grad_*.py (every differentiable op, tests/test_grad_coverage.py sees to that)
runs once as a static one-op program with gradients appended (tests/gradcheck.py) and
once eagerly on Tensors, `loss.backward()` filling `.grad`; the gradients must be equal
to the last bit, because both come from the op's one gradient rule and the same kernels."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.executor.eager import ENGINE, to_tensor
from keel.program.ops import registry

from gradcheck import build_case, grad_cases

RANDOM_OPS = {"dropout"}  # their masks come from the executor's and the engine's own streams
# running statistics updated in place (as tests/test_grad_nn.py runs them)
IN_PLACE = {"batch_norm": {"MeanOut": "Mean", "VarianceOut": "Variance"}}


CASES = [dataclasses.replace(c, inplace=c.inplace or IN_PLACE.get(c.op_type, {}))
         for c in grad_cases() if c.op_type not in RANDOM_OPS]


def static_gradients(case):
    built = build_case(case)
    fetched = Executor().run(built.main, feed={k: v.copy() for k, v in built.feed.items()},
                             fetch_list=[g for g in built.grads if g is not None], scope=Scope())
    names = [v.name for v, g in zip(built.wrt_vars, built.grads) if g is not None]
    return dict(zip(names, fetched)), built


def eager_gradients(case, built):
    """The case's op and loss run eagerly on the static case's own input values and loss weights."""
    opdef = registry.get(case.op_type)
    wrt = {v.name for v in built.wrt_vars}
    tensors, ins = {}, {}
    for slot, value in case.inputs.items():
        listed = value if isinstance(value, list) else [value]
        ts = []
        for i in range(len(listed)):
            name = f"{slot.lower()}{i}"
            t = to_tensor(built.feed[name].copy(), stop_gradient=name not in wrt)
            tensors[name] = t
            ts.append(t)
        ins[slot] = ts
    outs = {}
    for slot in opdef.outputs:
        if slot.name in case.inplace:
            outs[slot.name] = ins[case.inplace[slot.name]]
            continue
        outs[slot.name] = [pg.Tensor(None, "float64") for _ in range(case.outputs.get(slot.name, 1))]
    ENGINE.run_op(case.op_type, ins, outs, dict(case.attrs))
    terms = []
    for slot in opdef.grad.output_grads_read():
        for i, t in enumerate(outs[slot]):
            name = f"w_{slot.lower()}_out{i}"
            if slot in case.inplace or name not in built.feed:
                continue
            terms.append(pg.reduce_sum(t * to_tensor(built.feed[name])))
    loss = terms[0]
    for t in terms[1:]:
        loss = loss + t
    loss.backward()
    return {name: t.grad.numpy() for name, t in tensors.items() if name in wrt and t.grad is not None}


@pytest.mark.parametrize("case", CASES, ids=str)
def test_eager_gradient_equals_the_static_programs(case):
    expected, built = static_gradients(case)
    got = eager_gradients(case, built)
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=f"{case}: d loss / d {name}")


def test_every_gradient_case_is_compared():
    assert len(CASES) > 300
    assert {c.op_type for c in CASES} >= {"matmul_v2", "conv2d", "batch_norm", "layer_norm", "softmax",
                                          "rnn", "elementwise_add", "pool2d", "softmax_with_cross_entropy"}
