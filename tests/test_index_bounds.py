"""Index bounds of the index-taking kernels: PaddlePaddle 3.3.1's rule per op, the same
error on every array module (numpy wraps negative indices silently, cupy wraps all of
them), and valid indices, negative ones included where the op allows them, give the
reference result.

The rules (PaddlePaddle's phi kernels): gather, gather_nd, scatter and their gradients
take [-n, n) and count a negative index from the end (since PaddlePaddle 3.0); embedding
(lookup_table_v2) takes [0, rows) plus the padding id; one_hot_v2 takes [0, depth) unless
allow_out_of_range."""
import numpy as np
import pytest

import keel.program as pg
from keel.executor import ExecutionError, Executor, Scope
from keel.executor.kernel_call import call_kernel
from keel.kernels.array_module import cupy_available
from keel.kernels.tensor import IndexRangeError

_X = np.arange(15, dtype=np.float64).reshape(5, 3)
_X3 = np.arange(24, dtype=np.float64).reshape(2, 4, 3)
_ND = np.arange(24, dtype=np.float64).reshape(3, 4, 2)
_W = np.arange(40, dtype=np.float32).reshape(10, 4)
_U = np.array([[10.0, 11.0, 12.0], [20.0, 21.0, 22.0]])
_D23 = np.arange(6, dtype=np.float64).reshape(2, 3) + 1.0


def _scatter_ref(ids, overwrite):
    out = _X.copy()
    if overwrite:
        for i, row in zip(ids, _U):
            out[i] = row
    else:
        for i in ids:
            out[i] = 0
        for i, row in zip(ids, _U):
            out[i] += row
    return out


def _gather_nd_grad_ref():
    d = np.zeros((3, 4))
    d[2, 0] += 1.0  # Index [-1, 0]
    d[2, 0] += 2.0  # Index [2, -4]
    d[0, 3] += 3.0  # Index [0, -1]
    return d


def _lookup_grad_ref():
    dout = np.arange(16, dtype=np.float32).reshape(2, 2, 4)
    dw = np.zeros((10, 4), np.float32)
    for (i, j), r in np.ndenumerate(np.array([[1, 1], [3, 0]])):
        if r != 3:  # the padding row gets nothing
            dw[r] += dout[i, j]
    return dw


# (op, inputs, attrs, output slot, index slot, valid index, reference output, bad indices, range text)
CASES = [
    ("gather", {"X": _X}, {}, "Out", "Index", np.array([0, -1, 4, -5]), _X[[0, 4, 4, 0]],
     [5, -6], "[-5, 5)"),
    ("gather", {"X": _X3, "Axis": np.array([1], np.int32)}, {}, "Out", "Index", np.array([[-4], [3]]),
     _X3[:, [0, 3]], [4, -5], "[-4, 4)"),
    ("gather", {"X": _X}, {}, "Out", "Index", np.array(-1), _X[4], [5, -6], "[-5, 5)"),
    ("gather_nd", {"X": _ND}, {}, "Out", "Index", np.array([[-1, 0], [2, -4], [0, 3]]),
     np.stack([_ND[2, 0], _ND[2, 0], _ND[0, 3]]), [[0, 4], [-4, 0]], None),
    ("scatter", {"X": _X, "Updates": _U}, {"overwrite": True}, "Out", "Ids", np.array([-1, 0]),
     _scatter_ref([4, 0], True), [[5, 0], [-6, 0]], "[-5, 5)"),
    ("scatter", {"X": _X, "Updates": _U}, {"overwrite": False}, "Out", "Ids", np.array([-1, 4]),
     _scatter_ref([4, 4], False), [[0, 5], [0, -6]], "[-5, 5)"),
    ("gather_grad", {"X": _X, "Out@GRAD": np.ones((3, 3))}, {}, "X@GRAD", "Index", np.array([-1, 1, 4]),
     np.array([[0, 0, 0], [1, 1, 1], [0, 0, 0], [0, 0, 0], [2, 2, 2]], np.float64), [5, -6], "[-5, 5)"),
    ("gather_nd_grad", {"X": np.zeros((3, 4)), "Out@GRAD": np.array([1.0, 2.0, 3.0])}, {}, "X@GRAD",
     "Index", np.array([[-1, 0], [2, -4], [0, -1]]), _gather_nd_grad_ref(), [[0, 4], [3, 0]], None),
    ("scatter_grad", {"Updates": np.zeros((2, 3)), "Out@GRAD": _X}, {}, "Updates@GRAD", "Ids",
     np.array([-1, 0]), _X[[4, 0]], [[5, 0], [-6, 0]], "[-5, 5)"),
    ("lookup_table_v2", {"W": _W}, {"padding_idx": -1}, "Out", "Ids", np.array([[1, 9], [0, 3]]),
     _W[[[1, 9], [0, 3]]], [10, -1, -2], "[0, 10)"),
    ("lookup_table_v2", {"W": _W}, {"padding_idx": 3}, "Out", "Ids", np.array([[1, 3]]),
     np.stack([_W[[1]], np.zeros((1, 4), np.float32)], axis=1), [10, -1], "[0, 10)"),
    ("lookup_table_v2_grad", {"W": _W, "Out@GRAD": np.arange(16, dtype=np.float32).reshape(2, 2, 4)},
     {"padding_idx": 3}, "W@GRAD", "Ids", np.array([[1, 1], [3, 0]]), _lookup_grad_ref(), [10, -1], "[0, 10)"),
    ("one_hot_v2", {}, {"depth": 4}, "Out", "X", np.array([0, 3, 1]), np.eye(4, dtype=np.float32)[[0, 3, 1]],
     [4, -1], "[0, 4)"),
]
IDS = [f"{c[0]}-{i}" for i, c in enumerate(CASES)]


def _modules():
    mods = [pytest.param(np, id="numpy")]
    if cupy_available():
        import cupy
        mods.append(pytest.param(cupy, id="cupy", marks=pytest.mark.gpu))
    return mods


def _call(xp, op, inputs, index_slot, index, attrs):
    feeds = {**inputs, index_slot: index}
    if xp is not np:
        feeds = {k: xp.asarray(v) for k, v in feeds.items()}
    return call_kernel(op, feeds, attrs, xp=xp)


def _host(v):
    return v if isinstance(v, np.ndarray) else v.get()


def _bad_index(valid, bad):
    """`valid` with its first entry (its first row, for gather_nd's and scatter's lists)
    replaced by `bad`: the error must name that position and value."""
    index = valid.copy()
    if index.ndim == 0:
        return np.array(bad, dtype=index.dtype)
    bad = np.asarray(bad)
    if bad.ndim == 0:
        index.reshape(-1)[0] = bad
    elif index.ndim == 1:
        index[: bad.size] = bad
    else:
        index[0] = bad
    return index


@pytest.mark.parametrize("xp", _modules())
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_valid_indices_give_the_reference(xp, case):
    op, inputs, attrs, slot, index_slot, valid, want, _, _ = case
    got = _host(_call(xp, op, inputs, index_slot, valid, attrs)[slot])
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("xp", _modules())
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_out_of_range_indices_raise_naming_value_and_range(xp, case):
    op, inputs, attrs, _, index_slot, valid, _, bads, rule = case
    for bad in bads:
        index = _bad_index(valid, bad)
        with pytest.raises(IndexRangeError) as info:
            _call(xp, op, inputs, index_slot, index, attrs)
        message = str(info.value)
        value = bad if np.ndim(bad) == 0 else next(b for b in bad if b not in (0,))
        assert message.startswith(f"{op}: {index_slot}") and f"= {value} is out of range" in message, message
        if rule is not None:
            assert f"valid values are {rule}" in message, message


def test_gather_nd_names_the_component_and_its_range():
    with pytest.raises(IndexRangeError, match=r"gather_nd: Index\[1, 1\] = 4 is out of range: "
                                              r"valid values are \[-4, 4\)"):
        call_kernel("gather_nd", {"X": _ND, "Index": np.array([[0, 0], [1, 4]])})
    with pytest.raises(IndexRangeError, match=r"Index\[0, 0\] = -4 .*\[-3, 3\)"):
        call_kernel("gather_nd", {"X": _ND, "Index": np.array([[-4, 0]])})


def test_index_errors_are_index_and_value_errors():
    """Callers catching numpy's IndexError, or the ValueError one_hot_v2 raised, still do."""
    for exc in (IndexError, ValueError):
        with pytest.raises(exc):
            call_kernel("one_hot_v2", {"X": np.array([1, 5])}, {"depth": 3})
        with pytest.raises(exc):
            call_kernel("gather", {"X": _X, "Index": np.array([7])})


def test_embedding_padding_id_passes_and_the_rest_is_checked():
    """padding_idx -1 means no padding: then -1 is an ordinary (bad) id; a padding id gives
    zeros whatever its value, as PaddlePaddle's kernel."""
    with pytest.raises(IndexRangeError, match=r"Ids\[0\] = -1 .*\[0, 10\) \(an embedding table of 10 rows\)"):
        call_kernel("lookup_table_v2", {"W": _W, "Ids": np.array([-1, 2])}, {"padding_idx": -1})
    out = call_kernel("lookup_table_v2", {"W": _W, "Ids": np.array([2, 9])}, {"padding_idx": 9})["Out"]
    np.testing.assert_array_equal(out, np.stack([_W[2], np.zeros(4, np.float32)]))


def test_executor_reports_the_op_and_the_index():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        x = pg.data("x", [5, 3])
        i = pg.data("i", [2], "int64")
        y = pg.gather(x, i)
    exe = Executor()
    got, = exe.run(main, feed={"x": _X.astype(np.float32), "i": np.array([-1, 2])}, fetch_list=[y], scope=Scope())
    np.testing.assert_array_equal(got, _X[[4, 2]].astype(np.float32))
    with pytest.raises(ExecutionError, match=r"gather \(op \d+\).*gather: Index\[1\] = -6 is out of range: "
                                             r"valid values are \[-5, 5\)"):
        exe.run(main, feed={"x": _X.astype(np.float32), "i": np.array([0, -6])}, fetch_list=[y], scope=Scope())
