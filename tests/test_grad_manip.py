"""Gradient checks of the ops in program/ops/manip.py and of acos, asin, atan, brelu, stanh:
finite differences (tests/gradcheck.py), the gradient ops' slots against PaddlePaddle's
(tests/fixtures/paddle_grad_signatures.json), and the conventions finite differences cannot
see (which of tied maxima gets the gradient, the last write of put_along_axis)."""
import json
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope
from gradcheck import Case, away_from, rand, run_case

I64 = np.int64


def idx(*values, dtype=I64):
    return np.array(values, dtype=dtype)


def distinct(*shape, seed=0):
    """Values spaced at least 0.1 apart (no ties for sorts and maxima)."""
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(np.arange(n) * 0.1 - n * 0.05).reshape(shape)


_PUT = {"Input": distinct(3, 4, seed=1) + 2.0, "Index": np.array([[0, 0], [1, -3], [2, 3]], I64),
        "Value": distinct(3, 2, seed=2) + 1.0}

CASES = [
    # -- masks, sorts, reorderings --
    Case("tril_triu", {"X": rand(4, 5)}, {"diagonal": 1, "lower": True}, id="tril diagonal=1"),
    Case("tril_triu", {"X": rand(2, 3, 4)}, {"diagonal": -1, "lower": False}, id="triu batched"),
    Case("argsort", {"X": distinct(3, 5)}, {"axis": -1, "descending": False}, outputs={"Indices": 1},
         id="argsort"),
    Case("argsort", {"X": distinct(4, 3)}, {"axis": 0, "descending": True}, id="argsort descending axis=0"),
    Case("flip", {"X": rand(2, 3, 4)}, {"axis": [0, -1]}, id="flip"),
    Case("roll", {"X": rand(3, 4)}, {"shifts": [1, -2], "axis": [0, 1]}, id="roll"),
    Case("roll", {"X": rand(3, 4)}, {"shifts": [5], "axis": []}, id="roll flat"),
    Case("roll", {"X": rand(3, 4), "ShiftsTensor": idx(2)}, {"shifts": [0], "axis": [1]}, id="roll ShiftsTensor"),
    Case("shuffle_channel", {"X": rand(2, 6, 2, 2)}, {"group": 3}, id="shuffle_channel"),
    Case("unfold", {"X": rand(1, 2, 5, 6)}, {"kernel_sizes": [2, 3], "strides": [1, 2],
                                             "paddings": [1, 0, 0, 2], "dilations": [1, 1]}, id="unfold"),
    Case("unfold", {"X": rand(2, 1, 5, 5)}, {"kernel_sizes": [3, 2], "strides": [2, 1],
                                             "paddings": [1, 1, 1, 1], "dilations": [2, 2]},
         id="unfold dilated overlapping"),
    Case("fold", {"X": rand(1, 12, 12)}, {"output_sizes": [5, 6], "kernel_sizes": [2, 3], "strides": [1, 2],
                                         "paddings": [1, 0, 1, 0], "dilations": [1, 1]}, id="fold"),
    Case("fold", {"X": rand(2, 6, 10)}, {"output_sizes": [5, 5], "kernel_sizes": [3, 2], "strides": [2, 1],
                                        "paddings": [1, 1, 1, 1], "dilations": [2, 2]}, id="fold dilated overlapping"),
    # -- index-taking (negative indices counted from the end) --
    Case("index_select", {"X": rand(5, 3), "Index": idx(4, -1, 0, -1)}, {"dim": 0}, id="index_select"),
    Case("index_select", {"X": rand(2, 4, 3), "Index": idx(3, -2, 3, dtype=np.int32)}, {"dim": 1},
         id="index_select dim=1 negative"),
    Case("take_along_axis", {"Input": rand(3, 4), "Index": np.array([[0, 3], [-1, 1], [2, 2]], I64)},
         {"Axis": 1}, id="take_along_axis"),
    Case("take_along_axis", {"Input": rand(3, 4, 2), "Index": np.array([[[1], [0]], [[3], [-4]]], I64)},
         {"Axis": 1}, id="take_along_axis smaller index"),
    Case("put_along_axis", dict(_PUT), {"Axis": 1, "Reduce": "assign"}, id="put_along_axis assign"),
    Case("put_along_axis", dict(_PUT), {"Axis": 1, "Reduce": "add"}, id="put_along_axis add"),
    Case("put_along_axis", dict(_PUT), {"Axis": 1, "Reduce": "add", "Include_self": False},
         id="put_along_axis add without self"),
    Case("put_along_axis", dict(_PUT), {"Axis": 1, "Reduce": "mul"}, id="put_along_axis mul"),
    Case("put_along_axis", dict(_PUT), {"Axis": 1, "Reduce": "mean"}, id="put_along_axis mean"),
    Case("put_along_axis", dict(_PUT), {"Axis": 1, "Reduce": "mean", "Include_self": False},
         id="put_along_axis mean without self"),
    Case("put_along_axis", dict(_PUT), {"Axis": 1, "Reduce": "amax"}, id="put_along_axis amax"),
    Case("put_along_axis", dict(_PUT), {"Axis": 1, "Reduce": "amin", "Include_self": False},
         id="put_along_axis amin without self"),
    Case("scatter_nd_add", {"X": rand(4, 3), "Index": np.array([[1], [-1], [1]], I64), "Updates": rand(3, 3, seed=1)},
         id="scatter_nd_add repeated"),
    Case("scatter_nd_add", {"X": rand(3, 4, 2), "Index": np.array([[0, 1], [2, -1]], I64),
                            "Updates": rand(2, 2, seed=1)}, id="scatter_nd_add depth 2"),
    # -- einsum --
    Case("einsum", {"Operands": [rand(2, 3), rand(3, 4, seed=1)]}, {"equation": "ij,jk->ik"},
         outputs={"InnerCache": 2, "XShape": 2}, id="einsum matmul"),
    Case("einsum", {"Operands": [rand(2, 2, 3), rand(2, 3, 4, seed=1)]}, {"equation": "bij,bjk->bki"},
         outputs={"InnerCache": 2, "XShape": 2}, id="einsum batched transposed out"),
    Case("einsum", {"Operands": [rand(2, 3, 4), rand(2, 4, seed=1)]}, {"equation": "ijk,ik->j"},
         outputs={"InnerCache": 2, "XShape": 2}, id="einsum contraction"),
    Case("einsum", {"Operands": [rand(3, 2), rand(4, seed=1)]}, {"equation": "ij,k->k"},
         outputs={"InnerCache": 2, "XShape": 2}, id="einsum label of one operand summed"),
    Case("einsum", {"Operands": [rand(3, 3)]}, {"equation": "ii->i"},
         outputs={"InnerCache": 1, "XShape": 1}, id="einsum diagonal"),
    Case("einsum", {"Operands": [rand(2, 3, 4)]}, {"equation": "ijk->"},
         outputs={"InnerCache": 1, "XShape": 1}, id="einsum sum"),
    Case("einsum", {"Operands": [rand(2, 1, 2, 3), rand(3, 3, 4, seed=1)]}, {"equation": "...ij,...jk->...ik"},
         outputs={"InnerCache": 2, "XShape": 2}, id="einsum ellipsis broadcast"),
    # -- math --
    Case("acos", {"X": rand(3, 4, low=-0.9, high=0.9)}, id="acos"),
    Case("asin", {"X": rand(3, 4, low=-0.9, high=0.9)}, id="asin"),
    Case("atan", {"X": rand(3, 4, low=-3, high=3)}, id="atan"),
    Case("brelu", {"X": away_from(rand(3, 4, low=-2, high=3), [-1.0, 2.0])}, {"t_min": -1.0, "t_max": 2.0},
         id="brelu"),
    Case("stanh", {"X": rand(3, 4, low=-2, high=2)}, {"scale_a": 0.67, "scale_b": 1.7159}, id="stanh"),
    Case("dist", {"X": rand(2, 3), "Y": rand(2, 3, seed=1)}, {"p": 2.0}, id="dist p=2"),
    Case("dist", {"X": rand(2, 3), "Y": rand(3, seed=1)}, {"p": 3.0}, id="dist p=3 broadcast"),
    Case("dist", {"X": rand(2, 1, 3), "Y": rand(4, 1, seed=1)}, {"p": 1.5}, id="dist p=1.5 both broadcast"),
    Case("dist", {"X": distinct(2, 3), "Y": np.zeros((2, 3))}, {"p": float("inf")}, id="dist p=inf"),
    Case("dist", {"X": distinct(2, 3) + 0.03, "Y": np.zeros((2, 3))}, {"p": float("-inf")}, id="dist p=-inf"),
    Case("maxout", {"X": distinct(2, 6, 2, 3)}, {"groups": 2, "axis": 1}, id="maxout NCHW"),
    Case("maxout", {"X": distinct(2, 2, 3, 6)}, {"groups": 3, "axis": -1}, id="maxout NHWC"),
    Case("norm", {"X": rand(2, 3, 4)}, {"axis": 1, "epsilon": 1e-10}, outputs={"Norm": 1}, id="norm axis=1"),
    Case("norm", {"X": rand(3, 5)}, {"axis": -1, "epsilon": 0.5}, outputs={"Norm": 1}, id="norm eps"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


# -- conventions finite differences cannot see --------------------------------------------------

def _grads(op_type, inputs, attrs, outputs, wrt, weights=None):
    main, startup = pg.Program(), pg.Program()
    feed = {}
    with pg.program_guard(main, startup), pg.unique_name.guard():
        block = main.global_block()
        ins, wanted = {}, []
        for slot, arr in inputs.items():
            var = block.create_var(slot.lower(), arr.shape, str(arr.dtype), need_check_feed=True,
                                   stop_gradient=slot not in wrt)
            feed[var.name] = arr
            ins[slot] = [var.name]
            if slot in wrt:
                wanted.append(var)
        outs = {s: [block.create_var(f"{s.lower()}_out").name] for s in outputs}
        block.append_op(op_type, ins, outs, attrs)
        target = block.var(outs[outputs[0]][0])
        grads = pg.gradients([target], wanted)
    return Executor(CPUPlace()).run(main, feed=feed, fetch_list=grads, scope=Scope())


def test_maxout_grad_goes_to_the_first_tied_maximum():
    x = np.array([1.0, 3.0, 3.0, 2.0, 5.0, 5.0]).reshape(1, 6, 1, 1)
    (dx,) = _grads("maxout", {"X": x}, {"groups": 2, "axis": 1}, ["Out"], {"X"})
    np.testing.assert_array_equal(dx.reshape(-1), [0, 1, 1, 0, 1, 0])


def test_put_along_axis_assign_value_grad_goes_to_the_last_write():
    x = np.zeros((1, 3))
    index = np.array([[1, 1, 2]], I64)
    value = np.array([[1.0, 2.0, 3.0]])
    dx, dv = _grads("put_along_axis", {"Input": x, "Index": index, "Value": value},
                    {"Axis": 1, "Reduce": "assign"}, ["Result"], {"Input", "Value"})
    np.testing.assert_array_equal(dx, [[1, 0, 0]])
    np.testing.assert_array_equal(dv, [[0, 1, 1]])


def test_einsum_grad_reads_xshape_not_operands():
    """PaddlePaddle's einsum_grad reads the operands through XShape (slot x_shape) and
    InnerCache; Operands is not one of its inputs."""
    a, b = rand(2, 3), rand(3, 4, seed=1)
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        block = main.global_block()
        va = block.create_var("a", a.shape, "float64", need_check_feed=True, stop_gradient=False)
        vb = block.create_var("b", b.shape, "float64", need_check_feed=True, stop_gradient=True)
        outs = {"Out": ["out"], "InnerCache": ["c0", "c1"], "XShape": ["s0", "s1"]}
        for n in ["out", "c0", "c1", "s0", "s1"]:
            block.create_var(n)
        block.append_op("einsum", {"Operands": ["a", "b"]}, outs, {"equation": "ij,jk->ik"})
        (ga,) = pg.gradients([block.var("out")], [va])
    grad_op = block.ops[-1]
    assert grad_op.type == "einsum_grad"
    assert grad_op.input("x_shape") == ["s0", "s1"] and grad_op.input("InnerCache") == ["c0", "c1"]
    assert grad_op.output("Operands@GRAD") == ["a@GRAD", "@EMPTY@"]
    (got,) = Executor(CPUPlace()).run(main, feed={"a": a, "b": b}, fetch_list=[ga], scope=Scope())
    np.testing.assert_allclose(got, np.ones((2, 4)) @ b.T, rtol=1e-12)


# -- gradient ops as PaddlePaddle emits them ------------------------------------------------------

_SIGNATURES = json.loads((Path(__file__).parent / "fixtures" / "paddle_grad_signatures.json").read_text())
_FIRST = {}
for _c in CASES:
    _FIRST.setdefault(_c.op_type, _c)


def _roles(fwd, names):
    where = {}
    for kind, slots in (("in", fwd.inputs), ("out", fwd.outputs)):
        for slot, args in slots.items():
            for i, a in enumerate(args):
                tag = f"{slot}[{i}]" if len(args) > 1 else slot
                where[a] = f"{kind}:{tag}"
                where[a + "@GRAD"] = f"grad:{kind}:{tag}"
    if not names:
        return "empty"
    roles = [where.get(n, f"other:{n}") for n in names]
    return roles[0] if len(roles) == 1 else roles


@pytest.mark.parametrize("op_type", sorted(_FIRST))
def test_grad_ops_match_paddle(op_type):
    """The gradient op's type, slots (what each reads and writes) and added or dropped
    attributes are what PaddlePaddle 3.3.1's backward emits for the op."""
    from keel.program.ops import registry
    ref = _SIGNATURES[op_type]["grad_ops"][-1]
    case = _FIRST[op_type]
    opdef = registry.get(op_type)
    wanted_slots = set(opdef.grad.differentiable_inputs())
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        block = main.global_block()
        ins, wanted = {}, []
        for slot, value in case.inputs.items():
            ins[slot] = []
            for i, arr in enumerate(value if isinstance(value, list) else [value]):
                float_in = slot in wanted_slots and np.asarray(arr).dtype.kind == "f"
                var = block.create_var(f"{slot.lower()}{i}", np.shape(arr), str(np.asarray(arr).dtype),
                                       stop_gradient=not float_in)
                ins[slot].append(var.name)
                if float_in:
                    wanted.append(var)
        outs = {s.name: [block.create_var(f"{s.name.lower()}_out{i}").name
                         for i in range(case.outputs.get(s.name, 1))] for s in opdef.outputs}
        fwd = block.append_op(op_type, ins, outs, case.attrs)
        targets = [block.var(n) for s in opdef.grad.output_grads_read() for n in outs[s]]
        pg.gradients(targets[:1], wanted)
    op = block.ops[-1]
    fwd = block.ops[0]
    assert op.type == ref["type"]
    assert {s: _roles(fwd, op.input(s)) for s in op.inputs} == ref["inputs"]
    assert {s: _roles(fwd, op.output(s)) for s in op.outputs} == ref["outputs"]
    assert sorted(set(op.attrs) - set(fwd.attrs) - {"op_role_var"}) == sorted(ref["attrs"])
    assert sorted(set(fwd.attrs) - set(op.attrs) - {"op_callstack", "op_namescope"}) == sorted(ref["missing_attrs"])
