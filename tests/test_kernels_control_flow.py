"""Kernels of the control-flow ops that are plain functions (branch selection, tensor arrays)
against numpy written out here. (conditional_block and while are compiled by the executor:
tests/test_control_flow.py.)"""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel

RNG = np.random.default_rng(0)


def _i(k):
    return np.array([k], np.int64)


@pytest.mark.parametrize("mask", [0, 1, 2])
def test_select_input_picks_the_masked_branch(mask):
    xs = [RNG.standard_normal((2, 3)).astype(np.float32) for _ in range(3)]
    got = call_kernel("select_input", {"X": xs, "Mask": np.array([mask], np.int32)})["Out"]
    np.testing.assert_array_equal(got, xs[mask])


def test_select_input_refuses_a_mask_out_of_range():
    with pytest.raises(IndexError, match=r"Mask 2 is out of range \[0, 2\)"):
        call_kernel("select_input", {"X": [np.zeros(1), np.ones(1)], "Mask": np.array([2], np.int32)})


def test_write_to_array_grows_and_keeps_the_old_list():
    a, b = np.ones((2, 2), np.float32), np.full((2, 2), 2.0, np.float32)
    first = call_kernel("write_to_array", {"X": a, "I": _i(0), "Out": None})["Out"]
    second = call_kernel("write_to_array", {"X": b, "I": _i(2), "Out": first})["Out"]
    assert len(first) == 1 and len(second) == 3 and second[1] is None
    np.testing.assert_array_equal(second[0], a)
    np.testing.assert_array_equal(second[2], b)
    with pytest.raises(IndexError, match="negative"):
        call_kernel("write_to_array", {"X": a, "I": _i(-1), "Out": first})


def test_read_from_array_and_length():
    entries = [RNG.standard_normal((3,)).astype(np.float32) for _ in range(3)]
    got = call_kernel("read_from_array", {"X": entries, "I": _i(1)})["Out"]
    np.testing.assert_array_equal(got, entries[1])
    assert got is not entries[1]  # a copy: later ops may write into it
    assert call_kernel("lod_array_length", {"X": entries})["Out"].tolist() == [3]
    with pytest.raises(IndexError, match=r"index 3 is out of range \[0, 3\)"):
        call_kernel("read_from_array", {"X": entries, "I": _i(3)})


@pytest.mark.parametrize("use_stack,axis", [(True, 0), (True, 1), (False, 0), (False, 1)])
def test_tensor_array_to_tensor(use_stack, axis):
    entries = [RNG.standard_normal((2, k + 1)).astype(np.float32) if not use_stack and axis == 1
               else RNG.standard_normal((2, 3)).astype(np.float32) for k in range(3)]
    got = call_kernel("tensor_array_to_tensor", {"X": entries}, {"axis": axis, "use_stack": use_stack})
    want = np.stack(entries, axis) if use_stack else np.concatenate(entries, axis)
    np.testing.assert_array_equal(got["Out"], want)
    sizes = [1] * 3 if use_stack else [e.shape[axis] for e in entries]
    assert got["OutIndex"].tolist() == sizes


@pytest.mark.parametrize("mask", [0, 2])
def test_select_output_routes_x_to_the_masked_output(mask):
    from keel.executor.kernel_call import bind
    fn, _ = bind("select_output", {}, counts={"Out": 3})  # the op binds three outputs
    x = RNG.standard_normal((2,)).astype(np.float32)
    out = fn(x, np.array([mask], np.int32))
    assert len(out) == 3 and all(o is None for k, o in enumerate(out) if k != mask)
    np.testing.assert_array_equal(out[mask], x)


def test_read_from_array_with_x_w_gives_zeros_for_unwritten_entries():
    like = np.ones((2, 2), np.float32)
    entries = [None, np.full((2, 2), 3.0, np.float32)]
    for k, want in ((0, np.zeros((2, 2))), (1, entries[1]), (5, np.zeros((2, 2)))):
        got = call_kernel("read_from_array", {"X": entries, "I": _i(k), "X_W": like})["Out"]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("use_stack,axis", [(True, 1), (False, 1), (False, 0)])
def test_tensor_array_to_tensor_grad_cuts_the_gradient_back(use_stack, axis):
    entries = [RNG.standard_normal((2, k + 1) if not use_stack and axis == 1 else (2, 3)).astype(np.float32)
               for k in range(3)]
    out = np.stack(entries, axis) if use_stack else np.concatenate(entries, axis)
    dout = RNG.standard_normal(out.shape).astype(np.float32)
    got = call_kernel("tensor_array_to_tensor_grad", {"X": entries, "Out@GRAD": dout},
                      {"axis": axis, "use_stack": use_stack})["X@GRAD"]
    assert [g.shape for g in got] == [e.shape for e in entries]
    np.testing.assert_array_equal(np.stack(got, axis) if use_stack else np.concatenate(got, axis), dout)


def test_sum_of_tensor_arrays_adds_entry_by_entry():
    """`sum` of tensor arrays (several reads' gradients of one array), as PaddlePaddle's: the
    longest array's length, entry k the sum of the entries k present, None where none is."""
    a = [RNG.standard_normal((2,)).astype(np.float32), None, RNG.standard_normal((2,)).astype(np.float32)]
    b = [RNG.standard_normal((2,)).astype(np.float32)]
    c = [None, None, RNG.standard_normal((2,)).astype(np.float32), None]
    got = call_kernel("sum", {"X": [a, b, c]})["Out"]
    assert len(got) == 4 and got[1] is None and got[3] is None
    np.testing.assert_array_equal(got[0], a[0] + b[0])
    np.testing.assert_array_equal(got[2], a[2] + c[2])
