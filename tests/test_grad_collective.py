"""The collective ops' kernels on one process, and the gradient checks of the
differentiable one, sync_batch_norm. On one process (no communicator for ring 0, or a
ring of one rank) sync_batch_norm is batch_norm; its multi-rank forward and gradient are
checked end to end by tests/test_distributed.py (2 ranks train like 1 process with the
whole batch, 1e-5)."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel
from gradcheck import Case, rand, run_case
from keel.kernels.collective import coalesce_tensor as coalesce_kernel
from keel.kernels.communicators import CommError
from test_grad_nn import _bn_inputs

_INPLACE = {"MeanOut": "Mean", "VarianceOut": "Variance"}

CASES = [
    Case("sync_batch_norm", _bn_inputs((4, 3, 3, 2)), {}, inplace=_INPLACE, id="sync_batch_norm train"),
    Case("sync_batch_norm", _bn_inputs((6, 4)), {}, inplace=_INPLACE, id="sync_batch_norm train 2-D"),
    Case("sync_batch_norm", _bn_inputs((4, 3, 2, 2)), {"use_global_stats": True}, inplace=_INPLACE,
         id="sync_batch_norm global stats"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


_BN_ATTRS = {"is_test": False, "momentum": 0.9, "epsilon": 1e-5, "data_layout": "NCHW",
             "use_global_stats": False, "trainable_statistics": False}


def test_sync_batch_norm_on_one_process_is_batch_norm():
    inputs = _bn_inputs((4, 3, 2, 5), seed=3)
    sync = call_kernel("sync_batch_norm", {k: v.copy() for k, v in inputs.items()}, _BN_ATTRS)
    plain = call_kernel("batch_norm", {k: v.copy() for k, v in inputs.items()}, _BN_ATTRS)
    assert sorted(sync) == sorted(plain)
    for slot in plain:
        np.testing.assert_array_equal(sync[slot], plain[slot], err_msg=slot)
    dy = rand(4, 3, 2, 5, seed=9)
    grad_inputs = dict(inputs, SavedMean=plain["SavedMean"], SavedVariance=plain["SavedVariance"],
                       MeanOut=plain["MeanOut"], VarianceOut=plain["VarianceOut"], **{"Y@GRAD": dy})
    attrs = {k: _BN_ATTRS[k] for k in ("epsilon", "data_layout", "is_test", "use_global_stats")}
    got = call_kernel("sync_batch_norm_grad", grad_inputs, attrs)
    want = call_kernel("batch_norm_grad", grad_inputs, attrs)
    for slot in want:
        np.testing.assert_array_equal(got[slot], want[slot], err_msg=slot)


def test_identity_and_calc_stream_sync_pass_x_through():
    x = rand(3, 4)
    out = call_kernel("c_identity", {"X": x}, {"ring_id": 0})["Out"]
    np.testing.assert_array_equal(out, x)
    assert out is not x
    np.testing.assert_array_equal(call_kernel("c_sync_calc_stream", {"X": x})["Out"], x)


@pytest.mark.parametrize("op_type", ["c_allreduce_sum", "c_broadcast", "barrier", "c_sync_comm_stream"])
def test_a_collective_without_a_process_group_says_how_to_make_one(op_type):
    x = rand(2, 2)
    attrs = {"ring_id": 3, "use_calc_stream": True, "root": 0}
    with pytest.raises(CommError, match=rf"{op_type}: no (MPI|NCCL) communicator for ring_id 3 .*"
                                        r"init_parallel_env\(\).*distributed.launch"):
        call_kernel(op_type, {"X": [x] if op_type == "c_sync_comm_stream" else x}, attrs)


# -- coalesce_tensor: the buffer a bucket of gradients is all-reduced in ---------------------------
# Expected layouts as PaddlePaddle 3.3.1 gives them (a [3, 5] and b [7] float32 on the CPU).

def _two_inputs():
    return [np.arange(1, 16, dtype=np.float32).reshape(3, 5), np.arange(100, 107, dtype=np.float32)]


def _coalesce(inputs, **attrs):
    out = call_kernel("coalesce_tensor", {"Input": inputs}, {"dtype": 5, **attrs})
    return out["Output"], out["FusedOutput"]


def test_coalesce_tensor_copies_the_inputs_into_one_flat_buffer():
    a, b = _two_inputs()
    outputs, fused = _coalesce([a, b], copy_data=True, use_align=False)
    np.testing.assert_array_equal(fused, np.concatenate([a.ravel(), b]))
    for got, want in zip(outputs, [a, b]):
        assert got.shape == want.shape
        np.testing.assert_array_equal(got, want)


def test_coalesce_tensor_pads_each_input_to_the_alignment():
    a, b = _two_inputs()
    _, fused = _coalesce([a, b], copy_data=True, use_align=True, align_size=64)  # 16 floats per part
    want = np.zeros(32, np.float32)
    want[:15], want[16:23] = a.ravel(), b
    np.testing.assert_array_equal(fused, want)
    _, filled = _coalesce([a, b], set_constant=True, constant=2.5, use_align=False)
    np.testing.assert_array_equal(filled, np.full(22, 2.5, np.float32))
    _, zeros = _coalesce([a, b], use_align=False)  # neither copied nor set: PaddlePaddle leaves it unset
    np.testing.assert_array_equal(zeros, np.zeros(22, np.float32))


def test_coalesce_tensor_outputs_are_views_of_the_fused_buffer_aligned_to_4k_on_the_cpu():
    a, b = _two_inputs()
    outputs, fused = coalesce_kernel(np, [a, b], dtype=5, copy_data=True)  # numpy: CpuMinChunkSize
    assert fused.shape == (2048,)
    np.testing.assert_array_equal(fused[1024:1031], b)
    assert all(np.shares_memory(o, fused) for o in outputs)
    np.testing.assert_array_equal(outputs[0], a)


@pytest.mark.parametrize("inputs, attrs, message", [
    ([np.zeros(3, np.float64)], {}, r"Input 0 is float64, not the fused dtype float32"),
    ([np.zeros((2, 0), np.float32)], {}, r"Input 0 has no elements \(shape \[2, 0\]\)"),
    ([np.zeros((2, 3), np.float32)], {"concated_shapes": [3, 2], "concated_ranks": [2]},
     r"Input 0 has shape \[2, 3\], concated_shapes says \[3, 2\]"),
    ([np.zeros((2, 3), np.float32)], {"concated_shapes": [2, 3], "concated_ranks": [1]},
     r"concated_ranks \[1\] and concated_shapes \[2, 3\] do not describe 1 inputs"),
])
def test_coalesce_tensor_refuses_inputs_it_cannot_fuse(inputs, attrs, message):
    with pytest.raises((TypeError, ValueError), match=f"coalesce_tensor: {message}"):
        _coalesce(inputs, copy_data=True, **attrs)
