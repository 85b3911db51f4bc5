"""The kernel tests again, on the cupy stand-in (tests/fake_cupy): every kernel on `xp = cupy`.

- The kernel-level test modules are collected a second time here, one class per module
  (`TestOnDevice_<module>`), with the stand-in installed and the module's `call_kernel`
  replaced by `device_call_kernel`: the inputs are copied to the device, the kernel runs on
  `xp = cupy` (a numpy Generator given as `rng` becomes a cupy Generator seeded from it),
  every output must be a device array, and the outputs come back to the host for the
  test's own assertions. An output that is an input array (the in-place optimizer and
  batch-norm outputs) is copied back into the host input, which is what the test gets.
  Unless the kernel draws random numbers, the device outputs must also equal a numpy run
  of the same call: same dtypes and shapes, values equal to a few ulps. And the kernel
  must not read values back to the host (the stand-in counts every read back) unless
  READS_BACK lists it with the reason.
- The gradient kernels run through the executor: each gradient-check case of
  tests/test_grad_*.py is built once (gradcheck.build_case) and run by Executor(CPUPlace())
  and by Executor(CUDAPlace(0)) on the stand-in, and the loss and every gradient must agree.
- test_every_kernel_ran_on_the_device: each registered kernel ran on the stand-in above,
  except those in NOT_ON_DEVICE, listed with the reason.
"""
from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

import gradcheck
import standin
import test_conv_depthwise
import test_conv_grad_paths
import test_conv_paths
import test_fuse_conv
import test_fused_conv_plans
import test_kernel_plans
import test_fused_ops
import test_kernels_control_flow
import test_grad_activation
import test_grad_added_ops
import test_grad_collective
import test_grad_detection
import test_grad_elementwise
import test_grad_linalg
import test_grad_loss
import test_grad_manip
import test_grad_math
import test_grad_nn
import test_grad_rnn
import test_grad_set_value
import test_grad_sum_paths
import test_grad_tensor
import test_grad_vision
import test_kernels_adam_chunked
import test_kernels_detection
import test_kernels_in_place
import test_kernels_lars_momentum
import test_kernels_linalg
import test_kernels_manip
import test_kernels_math
import test_kernels_multiclass_nms
import test_kernels_nn
import test_kernels_optimizer
import test_kernels_rnn
import test_kernels_rows
import test_kernels_stat
import test_kernels_tensor
import test_kernels_vision
import test_pool_paths
from keel.executor import kernel_call
from keel.kernels import registry as kernel_registry

KERNEL_TEST_MODULES = [test_kernels_math, test_kernels_nn, test_kernels_tensor, test_kernels_optimizer,
                       test_fused_ops, test_grad_activation, test_grad_elementwise, test_grad_loss,
                       test_grad_math, test_grad_nn, test_grad_tensor, test_kernels_rnn, test_grad_rnn,
                       test_kernels_detection, test_grad_detection, test_kernels_vision, test_grad_vision,
                       test_kernels_manip, test_grad_manip, test_conv_paths, test_conv_depthwise,
                       test_conv_grad_paths, test_fuse_conv, test_kernels_control_flow, test_grad_collective,
                       test_grad_sum_paths, test_kernel_plans, test_kernels_adam_chunked, test_kernels_in_place,
                       test_fused_conv_plans, test_kernels_rows, test_grad_added_ops, test_kernels_lars_momentum,
                       test_kernels_multiclass_nms, test_grad_set_value, test_kernels_linalg, test_kernels_stat,
                       test_pool_paths]
GRAD_MODULES = [test_grad_activation, test_grad_elementwise, test_grad_loss, test_grad_math, test_grad_nn,
                test_grad_tensor, test_grad_rnn, test_grad_detection, test_grad_vision, test_grad_manip,
                test_grad_collective, test_grad_added_ops, test_grad_set_value, test_grad_linalg]

# Kernels that never run on the device here, and why.
_NO_NCCL = ("communicates through NCCL, which has no stand-in: on a device it is untested without a GPU "
            "(its MPI path runs in tests/test_distributed.py)")
NOT_ON_DEVICE: dict = {
    "select_output": "how many outputs it has comes from the op (the kernel's `counts`), which a "
                     "kernel call outside a program does not carry; test_kernels_control_flow.py binds it with its counts",
    **dict.fromkeys(["c_allreduce_sum", "c_allreduce_max", "c_allreduce_min", "c_allreduce_prod",
                     "c_reduce_sum", "c_reduce_max", "c_reduce_min", "c_reduce_prod", "c_broadcast",
                     "c_allgather", "c_reducescatter", "c_sync_comm_stream", "barrier"], _NO_NCCL),
}

# Kernels that may read values back from the device (the stand-in counts every read back:
# float(), int(), bool(), .item(), .tolist(), a boolean mask's size, ...), and why. Any
# other kernel that does fails its test here.
_ATTRIBUTE_TENSOR = ("a tensor input standing for an attribute (shape, axes, sizes, scale, factor, "
                     "k, seed, SkipUpdate) is read on the host, as PaddlePaddle copies it to the CPU")
_VALIDATION = ("input validation (labels, ids, indices, probabilities in range) reads one bool back "
               "per call: an out-of-range index is an error on a GPU too, as in PaddlePaddle")
READS_BACK = {
    **dict.fromkeys(["adam", "bilinear_interp_v2", "bilinear_interp_v2_grad", "concat", "concat_grad",
                     "dropout", "expand_v2", "fill_constant", "gather", "gather_grad", "linspace",
                     "nearest_interp_v2", "nearest_interp_v2_grad", "pad3d", "pow", "range", "reduce_all",
                     "reduce_any", "reshape2", "scale", "slice", "slice_grad", "split", "strided_slice",
                     "strided_slice_grad", "tile", "top_k_v2", "uniform_random", "unsqueeze2", "affine_grid",
                     "roll", "roll_grad", "update_loss_scaling", "linear_interp_v2", "linear_interp_v2_grad",
                     "trilinear_interp_v2", "trilinear_interp_v2_grad", "nearest_interp", "nearest_interp_grad", "set_value", "set_value_grad"],
                    _ATTRIBUTE_TENSOR),
    "where_index": "its output's shape is the number of true elements",
    "unique": "its output's shape is the number of distinct values",
    "histogram": "the range [min, max] defaults to the input's, read back to place the bins",
    **dict.fromkeys(["select_input", "write_to_array", "read_from_array"],
                    "the Mask / index picks an entry of a Python list (branch results, a tensor "
                    "array), so its one element is read on the host, as PaddlePaddle reads it"),
    **dict.fromkeys(["bce_loss", "cross_entropy", "cross_entropy2", "lookup_table_v2", "one_hot_v2",
                     "softmax_with_cross_entropy", "gather_nd", "gather_nd_grad", "lookup_table_v2_grad",
                     "scatter", "scatter_grad", "unpool", "unpool_grad", "unpool3d", "unpool3d_grad",
                     "index_select", "index_select_grad", "take_along_axis", "take_along_axis_grad",
                     "put_along_axis", "put_along_axis_grad", "scatter_nd_add", "scatter_nd_add_grad"],
                    _VALIDATION),
    **dict.fromkeys(["multiclass_nms3", "multiclass_nms", "matrix_nms", "generate_proposals_v2", "distribute_fpn_proposals"],
                    "output-shaped: how many boxes survive (NMS, proposal filtering, per-level counts) "
                    "depends on the values, and the greedy selection is sequential, so the boxes and "
                    "scores are read back and selected on the host, as PaddlePaddle's CPU kernels do"),
    **dict.fromkeys(["roi_align", "roi_align_grad", "roi_pool"],
                    "each RoI's sampling grid or integer bins (their number depends on the RoI's size "
                    "with sampling_ratio <= 0) are computed on the host from the RoIs and RoisNum read "
                    "back; the feature-map gathers, sums and scatters run on the device"),
}

# Tests of the source modules not collected again here, and why.
NOT_RERUN = {
    ("test_kernels_math", "test_many_rows_by_a_read_only_column_major_weight_use_a_kept_row_major_copy"):
        "tests the row-major weight copies kernels/math.py's _gemm keeps on numpy only",
}
for _module in GRAD_MODULES:
    NOT_RERUN[_module.__name__, "test_gradient"] = "its cases run below: test_gradient_case_on_device_matches_cpu"

RAN = set()           # op types run on the device by this module's tests
_REAL_CALL_KERNEL = kernel_call.call_kernel


# -- running a kernel call on the device ----------------------------------------------------------

def _tolerance(want):
    """Equal to a few ulps of the largest magnitude: the device and numpy paths may sum in
    another order (kernels/math.py's _gemm takes BLAS shortcuts on numpy only)."""
    if want.dtype.kind not in "fc":
        return dict(rtol=0, atol=0)
    eps = {2: 1e-3, 4: 1e-5}.get(want.dtype.itemsize, 1e-12)
    finite = np.abs(want[np.isfinite(want)]) if want.size else want
    scale = max(1.0, float(finite.max())) if finite.size else 1.0
    return dict(rtol=eps, atol=eps * scale)


def _compare(op_type, slot, got, want):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want), f"{op_type} {slot}: {len(got)} vs {len(want)}"
        for g, w in zip(got, want):
            _compare(op_type, slot, g, w)
        return
    if want is None:
        assert got is None, f"{op_type} {slot}: the device gave a value where numpy gives None"
        return
    assert got.dtype == want.dtype, f"{op_type} {slot}: dtype {got.dtype} on the device, {want.dtype} on numpy"
    assert got.shape == want.shape, f"{op_type} {slot}: shape {got.shape} on the device, {want.shape} on numpy"
    np.testing.assert_allclose(got, want, equal_nan=True, err_msg=f"{op_type} {slot}: device vs numpy",
                               **_tolerance(want))


def _assert_on_device(op_type, outputs):
    for slot, value in outputs.items():
        for v in value if isinstance(value, list) else [value]:
            assert v is None or standin.is_device(v), \
                f"{op_type} returned a {type(v).__name__} for {slot} on the device, not a device array"


def _device_rng(rng):
    """A cupy Generator standing for the test's numpy one (seeded from it, so the same
    numpy state gives the same device stream, and using it advances it)."""
    if rng is None:
        return None
    import cupy
    return cupy.random.default_rng(int(rng.integers(2 ** 63)))


def device_call_kernel(op_type, inputs, attrs=None, xp=np, rng=None):
    """call_kernel with the kernel on the stand-in (see the module docstring)."""
    import cupy
    if xp is not np:  # the test runs it on a device itself
        RAN.add(op_type)
        return _REAL_CALL_KERNEL(op_type, inputs, attrs, xp=xp, rng=rng)
    kdef = kernel_registry.get(op_type)
    want = None
    if kdef is not None and not kdef.rng:
        want = _REAL_CALL_KERNEL(op_type, copy.deepcopy(inputs), attrs)
    device_inputs = standin.to_device(inputs)
    before = standin.host_syncs()
    got = _REAL_CALL_KERNEL(op_type, device_inputs, attrs, xp=cupy, rng=_device_rng(rng))
    if op_type not in READS_BACK:
        assert standin.host_syncs() == before, \
            f"{op_type} read values back from the device: {standin.syncs()} (see READS_BACK)"
    RAN.add(op_type)
    _assert_on_device(op_type, got)
    result = {}
    for slot, value in got.items():
        host = standin.to_host(value)
        for in_slot, dev in device_inputs.items():  # an input updated in place: the host input, updated
            if value is dev and isinstance(inputs[in_slot], np.ndarray):
                inputs[in_slot][...] = host
                host = inputs[in_slot]
        result[slot] = host
    if want is not None:
        assert set(result) == set(want), f"{op_type}: outputs {sorted(result)} on the device, {sorted(want)} on numpy"
        for slot in want:
            _compare(op_type, slot, result[slot], want[slot])
    return result


# -- the kernel test modules, collected again -----------------------------------------------------

def _on_device_class(module):
    """A test class holding `module`'s test functions, run with the stand-in installed and
    the module's call_kernel on the device."""
    def install(self, monkeypatch):
        standin.install(monkeypatch)
        monkeypatch.setattr(module, "call_kernel", device_call_kernel, raising=False)
        monkeypatch.setattr(kernel_call, "call_kernel", device_call_kernel)  # for `from ... import` inside tests

    ns = {"_install": pytest.fixture(autouse=True)(install)}
    for name, obj in vars(module).items():
        if name.startswith("test_") and callable(obj) and getattr(obj, "__module__", None) == module.__name__:
            if (module.__name__, name) not in NOT_RERUN:
                ns[name] = staticmethod(obj)
    return type(f"TestOnDevice_{module.__name__}", (), ns)


for _module in KERNEL_TEST_MODULES:
    _cls = _on_device_class(_module)
    globals()[_cls.__name__] = _cls
del _module, _cls


# -- gradient kernels: the gradient-check cases through the executor, CPU and device ---------------

GRAD_CASES = [case for module in GRAD_MODULES for case in module.CASES]


def _with_inplace(case):
    """The case as its module's test_gradient runs it (test_grad_nn binds batch_norm's
    MeanOut/VarianceOut to Mean/Variance)."""
    inplace = case.inplace or test_grad_nn._INPLACE.get(case.op_type, {})
    return dataclasses.replace(case, inplace=inplace)


@pytest.mark.parametrize("case", GRAD_CASES, ids=str)
def test_gradient_case_on_device_matches_cpu(case, fake_cupy):
    """The case's loss and analytic gradients on the device equal the CPU's. A random op
    (dropout) draws other numbers on the device, so there the whole gradient check (finite
    differences included) runs on the device instead."""
    from keel.executor import CPUPlace, CUDAPlace, Executor, Scope

    case = _with_inplace(case)
    built = gradcheck.build_case(case)
    RAN.update(op.type for op in built.main.global_block().ops)
    if any(kernel_registry.get(op.type).rng for op in built.main.global_block().ops):
        gradcheck.run_case(case, place=CUDAPlace(0))
        return
    feed = built.feed
    want = Executor(CPUPlace()).run(built.main, feed={k: v.copy() for k, v in feed.items()},
                                    fetch_list=built.fetches, scope=Scope())
    got = Executor(CUDAPlace(0)).run(built.main, feed={k: v.copy() for k, v in feed.items()},
                                     fetch_list=built.fetches, scope=Scope())
    for name, g, w in zip(built.fetch_names, got, want):
        assert isinstance(g, np.ndarray) and g.dtype == w.dtype and g.shape == w.shape, name
        np.testing.assert_allclose(g, w, rtol=1e-9, atol=1e-12, err_msg=f"{case}: {name} on the device")


# -- kernels no kernel-level test covers (tests/test_layers_math.py runs them on the CPU) ---------

_FLOORDIV_MOD_CASES = [
    (np.array([7, -7, 7, -7, 0], np.int64), np.array([2, 2, -2, -2, 3], np.int64), -1),
    (np.array([7.5, -7.5, 7.5, -7.5, 0.0], np.float32), np.array([2.0, 2.0, -2.0, -2.0, 3.0], np.float32), -1),
    (np.arange(-12, 12, dtype=np.int32).reshape(2, 3, 4), np.array([5, -3, 7], np.int32), 1),
]


@pytest.mark.parametrize("x, y, axis", _FLOORDIV_MOD_CASES, ids=["int64", "float32", "int32 axis=1"])
def test_floordiv_and_mod_on_the_device(x, y, axis, fake_cupy):
    """Python's // and % (floor division, the remainder taking the divisor's sign)."""
    yb = y.reshape((1,) * axis + y.shape + (1,) * (x.ndim - axis - y.ndim)) if axis != -1 else y
    pairs = list(zip(x.reshape(-1).tolist(), np.broadcast_to(yb, x.shape).reshape(-1).tolist()))
    for op_type, fn in (("elementwise_floordiv", lambda a, b: a // b), ("elementwise_mod", lambda a, b: a % b)):
        out = device_call_kernel(op_type, {"X": x, "Y": y}, {"axis": axis})["Out"]
        assert out.dtype == x.dtype
        np.testing.assert_array_equal(out, np.array([fn(a, b) for a, b in pairs], x.dtype).reshape(x.shape))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_clip_by_norm_on_the_device(dtype, fake_cupy):
    x = np.array([[3.0, 0.0], [0.0, -4.0]], dtype)  # L2 norm 5
    for max_norm, want in ((1.0, [[0.6, 0.0], [0.0, -0.8]]), (5.0, x), (10.0, x)):
        out = device_call_kernel("clip_by_norm", {"X": x}, {"max_norm": max_norm})["Out"]
        assert out.dtype == dtype and out is not x
        np.testing.assert_allclose(out, np.array(want, dtype), rtol=1e-3 if dtype == np.float16 else 1e-6)


# -- coverage ------------------------------------------------------------------------------------

def _collected_ids(module_node):
    ids = []
    for child in module_node.collect():
        if isinstance(child, pytest.Class):
            ids.extend(item.nodeid for item in child.collect())
        else:
            ids.append(child.nodeid)
    return set(ids)


def test_every_kernel_ran_on_the_device(request):
    """Runs last in this module: every registered kernel ran on the stand-in in the tests
    above (or is listed in NOT_ON_DEVICE). Skipped when only part of the module is selected."""
    selected = {item.nodeid for item in request.session.items if item.module is request.module}
    if selected != _collected_ids(request.node.parent):
        pytest.skip("only part of this module was selected; the coverage check needs all of it")
    missing = sorted(set(kernel_registry.all_kernels()) - RAN - set(NOT_ON_DEVICE))
    assert not missing, f"kernels no test ran on the cupy stand-in: {missing}"
