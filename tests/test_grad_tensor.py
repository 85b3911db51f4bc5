"""Gradient checks: tensor manipulation ops (reshape family, joins and splits, slicing,
gathers and scatters, broadcasting, padding, assign), plus direct checks of the
conventions finite differences cannot see (accumulation of repeated indices, rows
overwritten by scatter, tensor-valued attributes) and of the gradient ops' slots against
PaddlePaddle's (tests/fixtures/paddle_grad_signatures.json)."""
import json
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope
from keel.executor.kernel_call import call_kernel
from gradcheck import Case, rand, run_case

I64 = np.int64
INT_MAX, INT_MIN = 2**31 - 1, -2**31


def idx(*values, dtype=I64):
    return np.array(values, dtype=dtype)


CASES = [
    # -- reshape family (gradients read XShape) --
    Case("reshape2", {"X": rand(2, 3, 4)}, {"shape": [3, -1]}, id="reshape2 -1"),
    Case("reshape2", {"X": rand(2, 3, 4)}, {"shape": [0, -1, 2]}, id="reshape2 0 copies dim"),
    Case("transpose2", {"X": rand(2, 3, 4)}, {"axis": [2, 0, 1]}, id="transpose2"),
    Case("transpose2", {"X": rand(2, 3, 4, 5)}, {"axis": [0, -1, 1, 2]}, id="transpose2 negative axis"),
    Case("flatten_contiguous_range", {"X": rand(2, 3, 4)}, {"start_axis": 1, "stop_axis": 2},
         id="flatten 1..2"),
    Case("flatten_contiguous_range", {"X": rand(2, 3, 4)}, {"start_axis": 0, "stop_axis": -1},
         id="flatten all"),
    Case("squeeze2", {"X": rand(2, 1, 3, 1)}, {"axes": [1]}, id="squeeze2 axes"),
    Case("squeeze2", {"X": rand(2, 1, 3, 1)}, {"axes": []}, id="squeeze2 all"),
    Case("squeeze2", {"X": rand(2, 1, 3)}, {"axes": [0, -2]}, id="squeeze2 keeps non-1 dim"),
    Case("unsqueeze2", {"X": rand(2, 3)}, {"axes": [0, -1]}, id="unsqueeze2"),
    Case("unsqueeze2", {"X": rand(2, 3)}, {"axes": [1]}, id="unsqueeze2 middle"),
    # -- joining and splitting --
    Case("concat", {"X": [rand(1, 3), rand(2, 3, seed=1)]}, {"axis": 0}, id="concat axis=0"),
    Case("concat", {"X": [rand(2, 3), rand(2, 1, seed=1), rand(2, 4, seed=2)]}, {"axis": -1},
         id="concat axis=-1"),
    Case("split", {"X": rand(2, 6)}, {"num": 3, "axis": 1}, outputs={"Out": 3}, id="split num"),
    Case("split", {"X": rand(6, 2)}, {"sections": [1, -1, 2], "axis": -2}, outputs={"Out": 3},
         id="split sections"),
    Case("stack", {"X": [rand(2, 3), rand(2, 3, seed=1)]}, {"axis": -1}, id="stack axis=-1"),
    Case("stack", {"X": [rand(2, 3), rand(2, 3, seed=1), rand(2, 3, seed=2)]}, {"axis": 1},
         id="stack axis=1"),
    Case("unstack", {"X": rand(2, 3, 4)}, {"axis": 1, "num": 3}, outputs={"Y": 3}, id="unstack axis=1"),
    Case("unstack", {"X": rand(2, 3)}, {"axis": -1, "num": 3}, outputs={"Y": 3}, id="unstack axis=-1"),
    # -- slicing --
    Case("slice", {"Input": rand(4, 5)}, {"axes": [0, 1], "starts": [1, -3], "ends": [100, 4]},
         id="slice negative start, end past the dim"),
    Case("slice", {"Input": rand(4, 5, 2)}, {"axes": [1], "starts": [-1], "ends": [INT_MAX],
                                              "decrease_axis": [1]}, id="slice decrease_axis"),
    Case("slice", {"Input": rand(4, 5)}, {"axes": [-1], "starts": [0], "ends": [-2]}, id="slice negative end"),
    Case("strided_slice", {"Input": rand(4, 5)},
         {"axes": [0, 1], "starts": [0, 4], "ends": [4, 0], "strides": [2, -2]}, id="strided_slice negative stride"),
    Case("strided_slice", {"Input": rand(5, 3)},
         {"axes": [0, 1], "starts": [1, 1], "ends": [5, 2], "strides": [3, 1], "decrease_axis": [1]},
         id="strided_slice decrease_axis"),
    Case("strided_slice", {"Input": rand(3, 6)}, {"axes": [1], "starts": [-1], "ends": [-6], "strides": [-1]},
         id="strided_slice negative start and end"),
    Case("strided_slice", {"Input": rand(5, 3)},  # x[::-2, 1] as PaddlePaddle writes it
         {"axes": [0, 1], "starts": [INT_MAX, 1], "ends": [INT_MIN, 2], "strides": [-2, 1],
          "decrease_axis": [1]}, id="strided_slice reversed to index 0"),
    # -- gathers and scatters (repeated indices accumulate) --
    Case("gather", {"X": rand(4, 3), "Index": idx(0, 2, 2, 1, 2)}, id="gather repeated"),
    Case("gather", {"X": rand(2, 4, 3), "Index": idx(3, 0, 3)}, {"axis": 1}, id="gather axis=1"),
    Case("gather", {"X": rand(2, 3, 4), "Index": idx(1, 1, dtype=np.int32)}, {"axis": -1},
         id="gather axis=-1 int32"),
    Case("gather", {"X": rand(4, 3), "Index": np.array([[1], [3], [1]], I64)}, id="gather [N, 1] index"),
    Case("gather", {"X": rand(4, 3), "Index": np.array(2, I64)}, id="gather 0-d index"),
    Case("gather_nd", {"X": rand(3, 4, 2), "Index": np.array([[0, 1], [2, 3], [0, 1]], I64)},
         id="gather_nd depth 2 repeated"),
    Case("gather_nd", {"X": rand(3, 4), "Index": np.array([[[2], [0]], [[2], [2]]], I64)},
         id="gather_nd depth 1"),
    Case("gather_nd", {"X": rand(3, 4), "Index": np.array([[0, 3], [2, 1]], I64)}, id="gather_nd full depth"),
    Case("scatter", {"X": rand(5, 3), "Ids": idx(3, 0), "Updates": rand(2, 3, seed=1)},
         {"overwrite": True}, id="scatter overwrite"),
    Case("scatter", {"X": rand(5, 3), "Ids": idx(1, 4, 1), "Updates": rand(3, 3, seed=1)},
         {"overwrite": False}, id="scatter accumulate repeated"),
    # -- broadcasting --
    Case("expand_v2", {"X": rand(3, 1)}, {"shape": [2, -1, 4]}, id="expand_v2 new dim and -1"),
    Case("expand_v2", {"X": rand(1, 4)}, {"shape": [3, 4]}, id="expand_v2"),
    Case("expand_as_v2", {"X": rand(3, 1), "Y": rand(2, 3, 5, seed=1)}, id="expand_as_v2 Y"),
    Case("expand_as_v2", {"X": rand(1, 4)}, {"target_shape": [2, 3, 4]}, id="expand_as_v2 target_shape"),
    Case("tile", {"X": rand(2, 3)}, {"repeat_times": [2, 1, 3]}, id="tile more reps than dims"),
    Case("tile", {"X": rand(2, 1, 3)}, {"repeat_times": [2, 2]}, id="tile fewer reps than dims"),
    # -- padding --
    Case("pad", {"X": rand(2, 3)}, {"paddings": [1, 0, 2, 1], "pad_value": 0.5}, id="pad"),
    *[Case("pad3d", {"X": rand(1, 2, 2, 3, 4) if fmt == "NCDHW" else rand(1, 2, 3, 4, 2)},
           {"paddings": [2, 1, 1, 2, 1, 0], "mode": mode, "value": 0.25, "data_format": fmt},
           id=f"pad3d {mode} {fmt}")
      for mode in ("constant", "reflect", "replicate", "circular") for fmt in ("NCDHW", "NDHWC")],
    Case("pad3d", {"X": rand(1, 1, 2, 2, 3)}, {"paddings": [3, 4, 0, 0, 2, 2], "mode": "circular"},
         id="pad3d circular wider than the dim"),
    Case("assign", {"X": rand(2, 3)}, id="assign"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


# -- direct kernel checks ------------------------------------------------------------------

def grad(op, inputs, attrs=None):
    return call_kernel(op, inputs, attrs or {})


def test_gather_grad_accumulates_repeated_indices_exactly():
    x = np.zeros((4, 2), np.float32)
    dout = np.arange(10, dtype=np.float32).reshape(5, 2)
    dx = grad("gather_grad", {"X": x, "Index": idx(3, 0, 3, 3, 1), "Out@GRAD": dout})["X@GRAD"]
    assert dx.dtype == np.float32
    np.testing.assert_array_equal(dx, [[2, 3], [8, 9], [0, 0], [0 + 4 + 6, 1 + 5 + 7]])


def test_gather_grad_axis_tensor_overrides_attr():
    x = np.zeros((2, 3), np.float64)
    dout = np.ones((2, 2))
    dx = grad("gather_grad", {"X": x, "Index": idx(2, 2), "Axis": np.array([1], np.int32),
                              "Out@GRAD": dout}, {"axis": 0})["X@GRAD"]
    np.testing.assert_array_equal(dx, [[0, 0, 2], [0, 0, 2]])


def test_gather_nd_grad_accumulates():
    x = np.zeros((2, 3))
    dout = np.array([1.0, 2.0, 4.0])
    dx = grad("gather_nd_grad", {"X": x, "Index": np.array([[1, 2], [0, 0], [1, 2]]), "Out@GRAD": dout})
    np.testing.assert_array_equal(dx["X@GRAD"], [[2, 0, 0], [0, 0, 5]])


def test_scatter_grad_paddle_convention():
    """Values from PaddlePaddle 3.3.1 (scatter X [4, 3], Ids [1, 1, 3], upstream gradient
    arange(12) + 1): X@GRAD is zero on every row Ids names, and with overwrite=True each
    repeated id's update still gets its row's gradient."""
    dout = np.arange(12, dtype=np.float32).reshape(4, 3) + 1
    for overwrite in (True, False):
        res = grad("scatter_grad", {"Ids": idx(1, 1, 3), "Updates": np.ones((3, 3), np.float32),
                                    "Out@GRAD": dout}, {"overwrite": overwrite})
        np.testing.assert_array_equal(res["X@GRAD"], [[1, 2, 3], [0, 0, 0], [7, 8, 9], [0, 0, 0]])
        np.testing.assert_array_equal(res["Updates@GRAD"], [[4, 5, 6], [4, 5, 6], [10, 11, 12]])
        assert res["X@GRAD"].dtype == np.float32 and res["Updates@GRAD"].dtype == np.float32


def test_slice_grads_read_tensor_attributes():
    x = np.zeros((4, 5))
    dout = np.ones((2, 2))
    dx = grad("slice_grad", {"Input": x, "StartsTensor": np.array([1, 2], np.int32),
                             "EndsTensorList": [np.array([3]), np.array([4])], "Out@GRAD": dout},
              {"axes": [0, 1], "starts": [0, 0], "ends": [1, 1]})["Input@GRAD"]
    want = np.zeros((4, 5))
    want[1:3, 2:4] = 1
    np.testing.assert_array_equal(dx, want)
    dx = grad("strided_slice_grad", {"Input": np.zeros(10), "StartsTensor": np.array([7]),
                                     "EndsTensorList": [np.array([0])], "StridesTensor": np.array([-3]),
                                     "Out@GRAD": np.array([1.0, 2.0, 3.0])},
              {"axes": [0], "starts": [0], "ends": [1], "strides": [1]})["Input@GRAD"]
    np.testing.assert_array_equal(dx, [0, 3, 0, 0, 2, 0, 0, 1, 0, 0])


def test_concat_grad_axis_tensor_and_split_back():
    xs = [np.zeros((2, 1)), np.zeros((2, 3))]
    dout = np.arange(8.0).reshape(2, 4)
    res = grad("concat_grad", {"X": xs, "AxisTensor": np.array([1]), "Out@GRAD": dout}, {"axis": 0})
    a, b = res["X@GRAD"]
    np.testing.assert_array_equal(a, dout[:, :1])
    np.testing.assert_array_equal(b, dout[:, 1:])
    assert not np.shares_memory(b, dout)


def test_pad3d_grad_reflect_adds_mirrored_positions():
    x = np.zeros((1, 1, 1, 1, 4))
    dout = np.arange(1.0, 8.0).reshape(1, 1, 1, 1, 7)  # W padded [2, 1]: x2 x1 | x0 x1 x2 x3 | x2
    dx = grad("pad3d_grad", {"X": x, "Out@GRAD": dout},
              {"paddings": [2, 1, 0, 0, 0, 0], "mode": "reflect"})["X@GRAD"]
    np.testing.assert_array_equal(dx.reshape(-1), [3, 4 + 2, 5 + 1 + 7, 6])


def test_xshape_is_a_zero_size_shape_record():
    res = call_kernel("reshape2", {"X": np.ones((2, 3, 4), np.float32)}, {"shape": [4, 6]})
    assert res["XShape"].shape == (0, 2, 3, 4) and res["XShape"].dtype == np.float32
    dx = grad("reshape2_grad", {"XShape": res["XShape"], "Out@GRAD": np.ones((4, 6), np.float32)})
    assert dx["X@GRAD"].shape == (2, 3, 4)


# -- programs: the gradient ops appended, as PaddlePaddle appends them -----------------------
# (the first case of each op is compared with PaddlePaddle's record, which joins two inputs)

def _program(op_type, inputs, outputs, attrs, wrt):
    """One forward op on fed variables; returns (main, feed, forward output names, grads)."""
    main, startup = pg.Program(), pg.Program()
    feed = {}
    with pg.program_guard(main, startup), pg.unique_name.guard():
        block = main.global_block()
        ins, wanted = {}, []
        for slot, value in inputs.items():
            names = []
            for i, arr in enumerate(value if isinstance(value, list) else [value]):
                arr = np.asarray(arr)
                name = f"{slot.lower()}{i}"
                var = block.create_var(name, arr.shape, str(arr.dtype), need_check_feed=True,
                                       stop_gradient=slot not in wrt)
                feed[name] = arr
                names.append(name)
                if slot in wrt:
                    wanted.append(var)
            ins[slot] = names
        outs = {slot: [block.create_var(f"{slot.lower()}_out{i}", dtype="float64").name for i in range(n)]
                for slot, n in outputs.items()}
        block.append_op(op_type, ins, outs, attrs)
    return main, startup, feed, ins, outs, wanted


def test_split_gradient_with_unused_outputs_is_a_concat():
    x = rand(6, 2)
    main, startup, feed, ins, outs, wanted = _program("split", {"X": x}, {"Out": 3},
                                                     {"num": 3, "axis": 0}, {"X"})
    with pg.program_guard(main, startup):
        block = main.global_block()
        used = block.var(outs["Out"][1])
        (dx,) = pg.gradients([used], wanted)
    grad_ops = [op for op in block.ops[1:]]
    types = [op.type for op in grad_ops]
    # the unused outputs' gradients are zero-filled (fill_any_like, as PaddlePaddle writes)
    assert sum(t in ("fill_any_like", "fill_zeros_like") for t in types) == 2 and types[-1] == "concat"
    concat = grad_ops[-1]
    assert concat.input("X") == [n + "@GRAD" for n in outs["Out"]]
    assert concat.output("Out") == [dx.name]
    assert concat.attr("axis") == 0 and concat.attr("num") == 3
    (got,) = Executor(CPUPlace()).run(main, feed=feed, fetch_list=[dx], scope=Scope())
    want = np.zeros((6, 2))
    want[2:4] = 1
    np.testing.assert_array_equal(got, want)


def test_concat_gradient_for_one_input_only():
    main, startup, feed, ins, outs, wanted = _program(
        "concat", {"X": [rand(2, 3), rand(2, 2, seed=1)]}, {"Out": 1}, {"axis": 1}, {"X"})
    block = main.global_block()
    block.var("x1").stop_gradient = True
    with pg.program_guard(main, startup):
        (dx,) = pg.gradients([block.var(outs["Out"][0])], [block.var("x0")])
    op = block.ops[-1]
    assert op.type == "concat_grad" and op.output("X@GRAD") == ["x0@GRAD", "@EMPTY@"]
    (got,) = Executor(CPUPlace()).run(main, feed=feed, fetch_list=[dx], scope=Scope())
    np.testing.assert_array_equal(got, np.ones((2, 3)))


_SIGNATURES = Path(__file__).parent / "fixtures" / "paddle_grad_signatures.json"
_FIRST_CASE = {}
for _case in CASES:
    _FIRST_CASE.setdefault(_case.op_type, _case)


def _roles(op, fwd, names):
    """Describe a grad op's slot arguments as paddle_grad_signatures.json does."""
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


@pytest.mark.skipif(not _SIGNATURES.exists(), reason="no paddle_grad_signatures.json")
@pytest.mark.parametrize("op_type", sorted(_FIRST_CASE))
def test_grad_ops_match_paddle(op_type):
    """The grad op's type and slots (with what each reads and writes) are PaddlePaddle's."""
    ref = json.loads(_SIGNATURES.read_text()).get(op_type)
    if not ref or "grad_ops" not in ref:
        pytest.skip(f"no PaddlePaddle record for {op_type}")
    ref_op = ref.get("variants", {}).get("all_outputs_used", ref)["grad_ops"][-1]
    case = _FIRST_CASE[op_type]
    from keel.program.ops import registry
    rule = registry.get(op_type).grad
    wrt = set(rule.differentiable_inputs()) & {s for s, v in case.inputs.items()
                                               if np.asarray(v if not isinstance(v, list) else v[0]).dtype.kind == "f"}
    outputs = {s.name: case.outputs.get(s.name, 1) for s in registry.get(op_type).outputs}
    main, startup, feed, ins, outs, wanted = _program(op_type, case.inputs, outputs, case.attrs, wrt)
    block = main.global_block()
    fwd = block.ops[0]
    targets = [block.var(n) for s in rule.output_grads_read() for n in outs[s]]
    with pg.program_guard(main, startup):
        pg.gradients(targets, wanted)
    op = block.ops[-1]
    assert op.type == ref_op["type"]
    got_in = {s: _roles(op, fwd, op.input(s)) for s in op.inputs}
    got_out = {s: _roles(op, fwd, op.output(s)) for s in op.outputs}
    assert got_in == ref_op["inputs"]
    assert got_out == ref_op["outputs"]
    extra = sorted(set(op.attrs) - set(fwd.attrs) - {"op_role_var"})
    assert extra == sorted(ref_op["attrs"]), "attributes the grad op adds"
    missing = sorted(set(fwd.attrs) - set(op.attrs) - {"op_callstack", "op_namescope"})
    assert missing == sorted(ref_op["missing_attrs"]), "forward attributes the grad op drops"
