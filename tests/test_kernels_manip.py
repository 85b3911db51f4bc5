"""Kernels of program/ops/manip.py (and acos, asin, atan, brelu, stanh, and the loss-scaling
ops of program/ops/amp.py) against
independent references written from each op's definition (explicit loops on small
inputs), and against PaddlePaddle 3.3.1's own outputs and gradients
(tests/fixtures/manip/cases.npz, made by tests/fixtures/manip/generate.py)."""
import itertools
import json
import math
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope
from keel.executor.kernel_call import call_kernel
from keel.kernels import registry as kernel_registry
from keel.kernels.tensor import IndexRangeError
from keel.program.ops import registry as op_registry

FIXTURE = Path(__file__).parent / "fixtures" / "manip" / "cases.npz"
with np.load(FIXTURE, allow_pickle=False) as _npz:
    ORACLE = {name: _npz[name] for name in _npz.files}
CASES = json.loads(str(ORACLE["__cases__"]))

MANIP_OPS = ["tril_triu", "argsort", "flip", "index_select", "roll", "take_along_axis",
             "put_along_axis", "einsum", "dist", "maxout", "norm", "scatter_nd_add",
             "shuffle_channel", "size", "share_data", "unfold", "acos", "asin", "atan", "brelu",
             "stanh", "check_finite_and_unscale", "update_loss_scaling"]


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
    for key in ORACLE:
        parts = key.split("|")
        if parts[0] == cid and parts[1] == "in":
            ins.setdefault(parts[2], {})[int(parts[3])] = ORACLE[key]
    op = op_registry.get(CASES[cid]["op"])
    return {slot: ([v[i] for i in sorted(v)] if op.input_slots[slot].duplicable else v[0])
            for slot, v in ins.items()}


def _assert_close(got, want, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape}, PaddlePaddle {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype}, PaddlePaddle {want.dtype}"
    if want.dtype.kind == "f":
        tol = 2e-6 if want.dtype == np.float32 else 1e-11
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.filterwarnings("ignore:invalid value:RuntimeWarning", "ignore:overflow:RuntimeWarning")
@pytest.mark.parametrize("cid", sorted(CASES))
def test_forward_matches_paddle(cid):
    c = CASES[cid]
    got = run(c["op"], _inputs(cid), c["attrs"])
    op = op_registry.get(c["op"])
    for slot in c["check"]:
        for i in range(c["outputs"][slot]):
            value = got[slot][i] if op.output_slots[slot].duplicable else got[slot]
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


# -- independent references: loops written from each op's definition ------------------------------

@pytest.mark.parametrize("lower, diagonal", [(True, 0), (True, 2), (False, -1), (False, 1)])
def test_tril_triu_loop(lower, diagonal):
    x = rnd(2, 3, 4)
    got = out("tril_triu", {"X": x}, {"lower": lower, "diagonal": diagonal})
    want = np.zeros_like(x)
    for b, i, j in itertools.product(range(2), range(3), range(4)):
        if (j - i <= diagonal) if lower else (j - i >= diagonal):
            want[b, i, j] = x[b, i, j]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("descending", [False, True])
def test_argsort_is_a_stable_sort(descending):
    x = np.array([[2, 1, 2, 0, 1, 2], [5, 5, 5, 4, 6, 4]], np.float32)
    res = run("argsort", {"X": x}, {"axis": 1, "descending": descending})
    for r in range(2):
        keyed = sorted(range(6), key=lambda j: (-x[r, j] if descending else x[r, j], j))
        assert res["Indices"][r].tolist() == keyed
        assert res["Out"][r].tolist() == [x[r, j] for j in keyed]
    assert res["Indices"].dtype == np.int64


def test_argsort_0d_and_axis0():
    r = run("argsort", {"X": np.array(3.5)})
    assert r["Out"] == 3.5 and r["Indices"] == 0 and r["Indices"].dtype == np.int64
    x = rnd(5, 2, seed=3)
    r = run("argsort", {"X": x}, {"axis": 0})
    for c in range(2):
        assert r["Indices"][:, c].tolist() == sorted(range(5), key=lambda i: x[i, c])


def test_flip_and_roll_loops():
    x = rnd(3, 4)
    got = out("flip", {"X": x}, {"axis": [0, 1]})
    assert all(got[i, j] == x[2 - i, 3 - j] for i in range(3) for j in range(4))
    got = out("roll", {"X": x}, {"shifts": [1, -1], "axis": [0, 1]})
    assert all(got[(i + 1) % 3, (j - 1) % 4] == x[i, j] for i in range(3) for j in range(4))
    flat = out("roll", {"X": x}, {"shifts": [-5], "axis": []}).reshape(-1)
    assert all(flat[(k - 5) % 12] == x.reshape(-1)[k] for k in range(12))
    # the ShiftsTensor replaces the attribute
    got = out("roll", {"X": x, "ShiftsTensor": np.array([2], np.int64)}, {"shifts": [1], "axis": [1]})
    assert all(got[i, (j + 2) % 4] == x[i, j] for i in range(3) for j in range(4))


def test_index_select_and_take_along_axis_loops():
    x = rnd(3, 5)
    index = np.array([4, -1, 0, -5], np.int64)
    got = out("index_select", {"X": x, "Index": index}, {"dim": 1})
    for i, j in itertools.product(range(3), range(4)):
        assert got[i, j] == x[i, index[j] % 5]
    tidx = np.array([[0, -1], [3, 3]], np.int64)   # fewer rows than the input: its leading rows
    got = out("take_along_axis", {"Input": x, "Index": tidx}, {"Axis": 1}, slot="Result")
    for i, j in itertools.product(range(2), range(2)):
        assert got[i, j] == x[i, tidx[i, j] % 5]


@pytest.mark.parametrize("reduce", ["assign", "add", "mul", "mean", "amin", "amax"])
@pytest.mark.parametrize("include_self", [True, False])
def test_put_along_axis_loop(reduce, include_self):
    x = rnd(3, 4, seed=1)
    index = np.array([[0, 0, 2], [1, -3, 3], [2, 3, -1]], np.int64)
    value = rnd(3, 3, seed=2)
    got = out("put_along_axis", {"Input": x, "Index": index, "Value": value},
              {"Axis": 1, "Reduce": reduce, "Include_self": include_self}, slot="Result")
    written = {}
    for i, j in itertools.product(range(3), range(3)):
        written.setdefault((i, index[i, j] % 4), []).append(value[i, j])
    want = x.copy()
    for (i, k), vals in written.items():
        pool = ([x[i, k]] if include_self else []) + vals
        want[i, k] = {"assign": lambda: vals[-1], "add": lambda: sum(pool), "mul": lambda: math.prod(pool),
                      "mean": lambda: sum(pool) / len(pool), "amin": lambda: min(pool),
                      "amax": lambda: max(pool)}[reduce]()
    np.testing.assert_allclose(got, want, rtol=1e-14)


def test_scatter_nd_add_loop():
    x = rnd(3, 4, 2)
    index = np.array([[0, 1], [2, -1], [0, 1]], np.int64)
    updates = rnd(3, 2, seed=5)
    got = out("scatter_nd_add", {"X": x, "Index": index, "Updates": updates})
    want = x.copy()
    for n in range(3):
        want[index[n, 0] % 3, index[n, 1] % 4] += updates[n]
    np.testing.assert_allclose(got, want, rtol=1e-14)


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bki", [(2, 2, 3), (2, 3, 4)]), ("ii->i", [(3, 3)]),
    ("ijk->", [(2, 3, 4)]), ("i,j->ji", [(3,), (2,)]), ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 4)]),
])
def test_einsum_loop(equation, shapes):
    ops = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
    res = run("einsum", {"Operands": ops}, {"equation": equation})
    lhs, rhs = equation.split("->")
    terms = lhs.split(",")
    if "..." in equation:  # the broadcast dims written out as B, C (right-aligned)
        nb = max(len(s) - (len(t) - 3) for t, s in zip(terms, shapes))
        terms = [t.replace("...", "BC"[nb - (len(s) - (len(t) - 3)):]) for t, s in zip(terms, shapes)]
        rhs = rhs.replace("...", "BC"[:nb])
    size = {}
    for t, o in zip(terms, ops):
        for c, d in zip(t, o.shape):
            size[c] = max(size.get(c, 1), d)
    labels = sorted(size)
    want = np.zeros([size[c] for c in rhs])
    for vals in itertools.product(*[range(size[c]) for c in labels]):
        at = dict(zip(labels, vals))
        term = 1.0
        for t, o in zip(terms, ops):
            term *= o[tuple(at[c] if o.shape[k] > 1 else 0 for k, c in enumerate(t))]
        want[tuple(at[c] for c in rhs)] += term
    np.testing.assert_allclose(res["Out"], want, rtol=1e-12)
    assert [x.shape for x in res["XShape"]] == [o.shape for o in ops]  # the operands, for the gradient


def test_dist_loop():
    x, y = rnd(2, 3), rnd(3, seed=4)
    d = [abs(x[i, j] - y[j]) for i in range(2) for j in range(3)]
    for p, want in [(2.0, math.sqrt(sum(v * v for v in d))), (1.0, sum(d)), (0.0, float(sum(v != 0 for v in d))),
                    (math.inf, max(d)), (-math.inf, min(d)), (3.0, sum(v ** 3 for v in d) ** (1 / 3))]:
        got = out("dist", {"X": x, "Y": y}, {"p": p})
        assert got.shape == () and got.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-7)


def test_maxout_norm_shuffle_loops():
    x = rnd(2, 6, 2, 3)
    got = out("maxout", {"X": x}, {"groups": 3, "axis": 1})
    for n, c, h, w in itertools.product(range(2), range(2), range(2), range(3)):
        assert got[n, c, h, w] == max(x[n, c * 3 + k, h, w] for k in range(3))
    nhwc = np.transpose(x, (0, 2, 3, 1)).copy()
    np.testing.assert_array_equal(out("maxout", {"X": nhwc}, {"groups": 3, "axis": -1}),
                                  np.transpose(got, (0, 2, 3, 1)))
    res = run("norm", {"X": x}, {"axis": 1, "epsilon": 1e-10})
    for n, h, w in itertools.product(range(2), range(2), range(3)):
        nrm = math.sqrt(sum(x[n, c, h, w] ** 2 for c in range(6)) + 1e-10)
        assert res["Norm"][n, 0, h, w] == pytest.approx(nrm, rel=1e-14)
        np.testing.assert_allclose(res["Out"][n, :, h, w], x[n, :, h, w] / nrm, rtol=1e-14)
    got = out("shuffle_channel", {"X": x}, {"group": 2})
    for c in range(6):  # channel c = g * 3 + k moves to k * 2 + g
        g, k = divmod(c, 3)
        np.testing.assert_array_equal(got[:, k * 2 + g], x[:, c])


@pytest.mark.parametrize("k, s, p, d", [([2, 2], [1, 1], [0, 0, 0, 0], [1, 1]),
                                        ([2, 3], [1, 2], [1, 0, 0, 2], [1, 1]),
                                        ([3, 2], [2, 1], [1, 2, 1, 0], [2, 1])])
def test_unfold_loop(k, s, p, d):
    x = rnd(2, 2, 5, 6)
    y = out("unfold", {"X": x}, {"kernel_sizes": k, "strides": s, "paddings": p, "dilations": d}, slot="Y")
    oh = (5 + p[0] + p[2] - (d[0] * (k[0] - 1) + 1)) // s[0] + 1
    ow = (6 + p[1] + p[3] - (d[1] * (k[1] - 1) + 1)) // s[1] + 1
    assert y.shape == (2, 2 * k[0] * k[1], oh * ow)
    for n, c, i, j, r, q in itertools.product(range(2), range(2), range(k[0]), range(k[1]), range(oh), range(ow)):
        row, col = r * s[0] + i * d[0] - p[0], q * s[1] + j * d[1] - p[1]
        want = x[n, c, row, col] if 0 <= row < 5 and 0 <= col < 6 else 0.0
        assert y[n, (c * k[0] + i) * k[1] + j, r * ow + q] == want


@pytest.mark.parametrize("k, s, p, d", [([2, 2], [1, 1], [0, 0, 0, 0], [1, 1]),
                                        ([2, 3], [1, 2], [1, 0, 0, 2], [1, 1]),
                                        ([3, 2], [2, 1], [1, 2, 1, 0], [2, 1])])
def test_fold_loop_and_adjoint_of_unfold(k, s, p, d):
    attrs = {"kernel_sizes": k, "strides": s, "paddings": p, "dilations": d}
    oh = (5 + p[0] + p[2] - (d[0] * (k[0] - 1) + 1)) // s[0] + 1
    ow = (6 + p[1] + p[3] - (d[1] * (k[1] - 1) + 1)) // s[1] + 1
    cols = rnd(2, 2 * k[0] * k[1], oh * ow)
    y = out("fold", {"X": cols}, {"output_sizes": [5, 6], **attrs}, slot="Y")
    want = np.zeros((2, 2, 5, 6))
    for n, c, i, j, r, q in itertools.product(range(2), range(2), range(k[0]), range(k[1]), range(oh), range(ow)):
        row, col = r * s[0] + i * d[0] - p[0], q * s[1] + j * d[1] - p[1]
        if 0 <= row < 5 and 0 <= col < 6:
            want[n, c, row, col] += cols[n, (c * k[0] + i) * k[1] + j, r * ow + q]
    np.testing.assert_allclose(y, want, rtol=1e-14, atol=1e-15)
    image = rnd(2, 2, 5, 6)   # <unfold(x), cols> == <x, fold(cols)>
    unfolded = out("unfold", {"X": image}, attrs, slot="Y")
    assert float((unfolded * cols).sum()) == pytest.approx(float((image * y).sum()), rel=1e-12)


def test_size_and_share_data():
    got = out("size", {"Input": np.zeros((2, 3, 4), np.float32)})
    assert got.shape == () and got.dtype == np.int64 and int(got) == 24
    x = rnd(2, 3)
    y = out("share_data", {"X": x})
    np.testing.assert_array_equal(y, x)
    assert not np.shares_memory(x, y)


def test_unary_math_formulas():
    x = np.linspace(-0.9, 0.9, 7)
    np.testing.assert_allclose(out("acos", {"X": x}), [math.acos(v) for v in x], rtol=1e-15)
    np.testing.assert_allclose(out("asin", {"X": x}), [math.asin(v) for v in x], rtol=1e-15)
    np.testing.assert_allclose(out("atan", {"X": x * 10}), [math.atan(v * 10) for v in x], rtol=1e-15)
    w = np.array([-3.0, -1.0, 0.5, 2.0, 4.0])
    np.testing.assert_array_equal(out("brelu", {"X": w}, {"t_min": -1.0, "t_max": 2.0}), [-1, -1, 0.5, 2, 2])
    a, b = float(np.float32(0.67)), float(np.float32(1.7159))
    np.testing.assert_allclose(out("stanh", {"X": w}, {"scale_a": 0.67, "scale_b": 1.7159}),
                               [b * math.tanh(a * v) for v in w], rtol=1e-15)
    assert out("acos", {"X": x.astype(np.float32)}).dtype == np.float32


# -- index bounds: [-n, n), one clear error --------------------------------------------------------

@pytest.mark.parametrize("op, inputs, attrs, fragment", [
    ("index_select", {"X": np.zeros((3, 4)), "Index": np.array([0, 4])}, {"dim": 1},
     "index_select: Index[1] = 4 is out of range: valid values are [-4, 4)"),
    ("index_select", {"X": np.zeros((3, 4)), "Index": np.array([-4, -5])}, {"dim": 1},
     "index_select: Index[1] = -5 is out of range: valid values are [-4, 4)"),
    ("take_along_axis", {"Input": np.zeros((2, 3)), "Index": np.array([[0], [3]])}, {"Axis": 1},
     "take_along_axis: Index[1, 0] = 3 is out of range: valid values are [-3, 3)"),
    ("put_along_axis", {"Input": np.zeros((2, 3)), "Index": np.array([[-4], [0]]), "Value": np.ones((2, 1))},
     {"Axis": 1}, "put_along_axis: Index[0, 0] = -4 is out of range: valid values are [-3, 3)"),
    ("scatter_nd_add", {"X": np.zeros((2, 3)), "Index": np.array([[1, 3]]), "Updates": np.ones(1)}, {},
     "scatter_nd_add: Index[0, 1] = 3 is out of range: valid values are [-3, 3)"),
    ("scatter_nd_add", {"X": np.zeros((2, 3)), "Index": np.array([[-3]]), "Updates": np.ones((1, 3))}, {},
     "scatter_nd_add: Index[0, 0] = -3 is out of range: valid values are [-2, 2)"),
])
def test_index_out_of_range_is_an_error(op, inputs, attrs, fragment):
    with pytest.raises(IndexRangeError) as info:
        run(op, inputs, attrs)
    assert fragment in str(info.value)


def test_gradient_kernels_check_indices_too():
    dout = np.ones((2, 2))
    with pytest.raises(IndexRangeError, match=r"index_select_grad: Index\[0\] = 5"):
        run("index_select_grad", {"X": np.zeros((4, 2)), "Index": np.array([5, 0]), "Out@GRAD": dout})
    with pytest.raises(IndexRangeError, match=r"take_along_axis_grad: Index\[1, 1\] = -3"):
        run("take_along_axis_grad", {"Input": np.zeros((2, 2)), "Index": np.array([[0, 1], [1, -3]]),
                                     "Result@GRAD": dout}, {"Axis": 1})
    with pytest.raises(IndexRangeError, match=r"scatter_nd_add_grad: Index\[1, 0\] = 2"):
        run("scatter_nd_add_grad", {"Index": np.array([[0], [2]]), "Updates": dout, "Out@GRAD": dout})


# -- loss scaling ------------------------------------------------------------------------------------

def test_check_finite_and_unscale_reference():
    xs = [np.array([2.0, -4.0], np.float32), np.array([[8.0]], np.float32)]
    res = run("check_finite_and_unscale", {"X": xs, "Scale": np.array([4.0], np.float32)})
    np.testing.assert_array_equal(res["Out"][0], [0.5, -1.0])
    np.testing.assert_array_equal(res["Out"][1], [[2.0]])
    assert res["FoundInfinite"].tolist() == [False] and res["FoundInfinite"].dtype == bool
    with np.errstate(invalid="ignore"):
        res = run("check_finite_and_unscale", {"X": [xs[0], np.array([np.nan], np.float32), xs[1]],
                                               "Scale": np.array([4.0], np.float32)})
    assert res["FoundInfinite"].tolist() == [True]
    np.testing.assert_array_equal(res["Out"][0], [0.5, -1.0])   # before the NaN: unscaled
    np.testing.assert_array_equal(res["Out"][2], [[0.0]])       # from it on: times 0


def test_update_loss_scaling_follows_a_reference_state_machine():
    attrs = {"incr_every_n_steps": 2, "decr_every_n_nan_or_inf": 2, "incr_ratio": 2.0, "decr_ratio": 0.25}
    scale, good, bad = 4.0, 0, 0
    state = (np.array([scale], np.float32), np.array([good], np.int32), np.array([bad], np.int32))
    x = np.array([1.0, 2.0], np.float32)
    for found in [False, False, False, True, True, True, False, True, True, True, True]:
        res = run("update_loss_scaling", {"X": [x], "FoundInfinite": np.array([found]), "PrevLossScaling": state[0],
                                          "InGoodSteps": state[1], "InBadSteps": state[2]}, attrs)
        if found:
            good, bad = 0, bad + 1
            if bad == 2:
                scale, bad = max(scale * 0.25, 1.0), 0
        else:
            good, bad = good + 1, 0
            if good == 2:
                scale, good = scale * 2.0, 0
        state = (res["LossScaling"], res["OutGoodSteps"], res["OutBadSteps"])
        assert (float(state[0][0]), int(state[1][0]), int(state[2][0])) == (scale, good, bad)
        np.testing.assert_array_equal(res["Out"][0], np.zeros(2) if found else x)


@pytest.mark.parametrize("op, inputs, attrs", [
    ("einsum", {"Operands": [rnd(2, 3)]}, {"equation": "ij->ji"}),
    ("einsum", {"Operands": [rnd(2, 3)]}, {"equation": "ij->ij"}),
    ("shuffle_channel", {"X": rnd(2, 3, 2, 2)}, {"group": 1}),
    ("shuffle_channel", {"X": rnd(2, 3, 2, 2)}, {"group": 3}),
    ("flip", {"X": rnd(2, 3)}, {"axis": []}),
    ("roll", {"X": rnd(2, 3)}, {"shifts": [0], "axis": [0]}),
    ("share_data", {"X": rnd(2, 3)}, {}),
])
def test_outputs_never_alias_inputs(op, inputs, attrs):
    got = run(op, inputs, attrs)["Out"]
    for value in inputs.values():
        for arr in value if isinstance(value, list) else [value]:
            assert not np.shares_memory(got, arr)


def test_update_loss_scaling_keeps_each_state_in_its_own_shape():
    # (found by the dtype sweep: a 0-d PrevLossScaling came back [1], against its shape rule)
    attrs = {"incr_every_n_steps": 1, "decr_every_n_nan_or_inf": 1, "incr_ratio": 2.0, "decr_ratio": 0.5}
    res = run("update_loss_scaling", {"X": [np.ones((2, 2), np.float32)], "FoundInfinite": np.array([False]),
                                      "PrevLossScaling": np.array(8.0, np.float32),
                                      "InGoodSteps": np.array([0], np.int32), "InBadSteps": np.array([0], np.int32)},
              attrs)
    assert res["LossScaling"].shape == () and float(res["LossScaling"]) == 16.0
    assert res["OutGoodSteps"].shape == (1,) and res["Out"][0].shape == (2, 2)
