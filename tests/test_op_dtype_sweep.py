"""The dtype sweep (issue 32; tests/dtype_sweep.py says how inputs and references are
made): every op with a sample (every differentiable op, from tests/test_grad_*.py), every
dtype PaddlePaddle's CPU kernel registers for it, plus 0-D, empty and (in the samples)
broadcast shapes. Each run is refused when the program is built with a DTypeError, or its
outputs have the dtypes and shapes the op's shape rule declared and the reference's values;
a complex input never loses its imaginary part; gradients of the ops that run on complex128
are checked by finite differences there (float64's are the tests/test_grad_*.py checks)."""
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

from dtype_sweep import (OWN_BOOL_SEMANTICS, OWN_INTEGER_SEMANTICS, REAL_FROM_COMPLEX, SWEPT_DTYPES, as_float64,
                         NOT_SWEPT, case_attrs, float_slots, gradient_cases, real_parts, reference_attrs, refuses_dtype, tolerance,
                         with_dtype)
from keel.executor import CPUPlace, Executor, Scope
from keel.program import dtypes
from keel.executor.errors import ExecutionError
from keel.kernels.tensor import IndexRangeError
from keel.program.errors import AttrError, DTypeError, ShapeError
from keel.program.ops import registry
from gradcheck import run_case
from oprun import build, check_grads

PADDLE = json.loads((Path(__file__).parent / "fixtures" / "paddle_cpu_dtypes.json").read_text())
CASES = gradient_cases()
pytestmark = pytest.mark.slow


def paddle_dtypes(op_type, which="forward"):
    return [d for d in PADDLE.get(op_type, {}).get(which, []) if d in SWEPT_DTYPES]


def run_declared(case, inputs, attrs=None):
    """{output slot: (array, declared numpy dtype or None, declared shape)} of one run."""
    main, feed, outs, _ = build(case.op_type, inputs, case_attrs(case, "float64") if attrs is None else attrs,
                                case.outputs or None, case.inplace)
    slots = list(outs)
    fetched = Executor(CPUPlace()).run(main, feed=feed, fetch_list=[outs[s][0] for s in slots], scope=Scope())
    result = {}
    for slot, value in zip(slots, fetched):
        var = outs[slot][0]
        declared = None if var.dtype == dtypes.to_code("bfloat16") else dtypes.to_numpy(var.dtype)
        result[slot] = (value, declared, tuple(var.shape))
    return result


def check_declared(op_type, dtype, result):
    """No output of another dtype or shape than the op's shape rule declared."""
    for slot, (value, declared, shape) in result.items():
        if declared is not None:
            assert value.dtype == declared, f"{op_type} {dtype}: {slot} is {value.dtype}, declared {declared}"
        assert value.ndim == len(shape) and all(d < 0 or d == v for d, v in zip(shape, value.shape)), \
            f"{op_type} {dtype}: {slot} has shape {value.shape}, declared {list(shape)}"


def _values_match(op_type, dtype, slot, got, ref):
    assert got.shape == ref.shape, f"{op_type} {dtype}: {slot} {got.shape} vs reference {ref.shape}"
    if got.size == 0 or got.dtype.kind not in "fiub" or ref.dtype.kind not in "fiub":
        return
    g, r = got.astype(np.float64), ref.astype(np.float64)
    finite = np.isfinite(r)
    if got.dtype.kind in "iub" and np.dtype(dtype).kind in "iub":
        # a truncated float result, wrapped around as C++'s integers do (uint8: 765 -> 253)
        span = 2.0 ** (8 * got.dtype.itemsize) if got.dtype.kind != "b" else np.inf
        diff = np.abs(g - r) if np.isinf(span) else np.mod(g - r, span)
        bad = finite & ~((diff <= 1 + 1e-9 * np.abs(r)) | (span - diff <= 1))
    else:
        tol = tolerance(dtype, float(np.max(np.abs(r[finite]))) if finite.any() else 1.0)
        bad = ~np.isclose(g, r, rtol=0, atol=tol, equal_nan=True)
    assert not bad.any(), (f"{op_type} {dtype}: {slot} differs from the float64 reference at "
                           f"{int(bad.sum())} of {got.size}: {g[bad][:3]} vs {r[bad][:3]}")


SWEEP = [(op, d) for op in sorted(CASES) for d in paddle_dtypes(op)]

# Ops swept for their outputs' dtypes and shapes only: their values are random draws (whose
# distributions tests/test_random_state.py and tests/test_kernels_tensor.py check).
DTYPE_SHAPE_ONLY = {"gaussian_random", "uniform_random", "truncated_gaussian_random", "randint"}

def test_every_op_is_swept_or_listed():
    forward = {t for t, d in registry.all_ops().items() if not d.grad_of}
    unswept = sorted(forward - set(CASES) - set(NOT_SWEPT))
    assert not unswept, f"ops neither swept (a sample in tests/dtype_sweep.py) nor in NOT_SWEPT: {unswept}"
    assert not set(NOT_SWEPT) & set(CASES), "an op in NOT_SWEPT has a sweep case: take it off the list"
    assert set(NOT_SWEPT) <= forward, sorted(set(NOT_SWEPT) - forward)


@pytest.mark.parametrize("op_type,dtype", SWEEP)
def test_forward(op_type, dtype):
    for case in CASES[op_type]:
        inputs = with_dtype(case, dtype)
        try:
            got = run_declared(case, inputs, case_attrs(case, dtype))
        except (DTypeError, AttrError) as e:
            if refuses_dtype(case, e):
                continue                               # refused when built: allowed
            raise
        check_declared(op_type, dtype, got)
        if op_type in DTYPE_SHAPE_ONLY:
            continue
        if np.dtype(dtype).kind == "c":
            if op_type in REAL_FROM_COMPLEX or not float_slots(case):
                continue                               # (no input to carry an imaginary part)
            real = run_declared(case, real_parts(inputs), case_attrs(case, dtype))
            for slot, (value, _, _) in got.items():
                if value.dtype.kind in "fc" and value.size:
                    assert not np.allclose(value, real[slot][0]), \
                        f"{op_type} {dtype}: {slot} ignores the imaginary part of the input"
            continue
        if (np.dtype(dtype).kind in "iub" and op_type in OWN_INTEGER_SEMANTICS
                or dtype == "bool" and op_type in OWN_BOOL_SEMANTICS):
            continue
        ref = run_declared(case, as_float64(inputs, float_slots(case)),
                           reference_attrs(op_type, case_attrs(case, "float64"), dtype))
        for slot, (value, _, _) in got.items():
            _values_match(op_type, dtype, slot, value, ref[slot][0])


def _reshaped(case, make, slots=None):
    inputs = dict(case.inputs)
    for slot in float_slots(case) if slots is None else slots:
        value = inputs[slot]
        inputs[slot] = [make(v) for v in value] if isinstance(value, list) else make(value)
    return inputs


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_0d_inputs(op_type):
    """0-D float inputs: refused when built (a shape or dtype rule), or the result of the same
    values as 1-element arrays (and, for the differentiable ops, a gradient by finite
    differences)."""
    case = CASES[op_type][0]
    zero_d = _reshaped(case, lambda v: np.asarray(v).reshape(-1)[:1].reshape(()))
    try:
        got = run_declared(case, zero_d)
    except (ShapeError, DTypeError, AttrError):
        return                                         # refused when built
    check_declared(op_type, "float64 0-D", got)
    try:
        one = run_declared(case, _reshaped(case, lambda v: np.asarray(v).reshape(-1)[:1].reshape((1,) * np.ndim(v))))
    except (ShapeError, AttrError):
        return                                         # the case's attributes need more elements
    for slot, (value, _, _) in got.items():
        if value.size == one[slot][0].size:
            np.testing.assert_allclose(value.reshape(-1), one[slot][0].reshape(-1), rtol=1e-12,
                                       err_msg=f"{op_type} 0-D {slot}")
    if isinstance(registry.get(op_type).grad, registry.GradRule) and not case.outputs:
        zero_d_case = dataclasses.replace(case, inputs=zero_d, id=f"{case} 0-D")
        if any(np.asarray(v).dtype.kind == "f" and np.ndim(v) == 0 for v in zero_d.values()
               if not isinstance(v, list)):
            run_case(zero_d_case)


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_empty_inputs(op_type):
    """The first float input (the data: X, Input, Logits...) with a leading dim of 0:
    refused when built, an index out of the (now empty) range refused by name when run
    (IndexRangeError), or an output of the declared shape and dtype."""
    case = CASES[op_type][0]
    empty = _reshaped(case, lambda v: np.asarray(v)[:0] if np.ndim(v) else np.asarray(v),
                      float_slots(case)[:1])
    try:
        got = run_declared(case, empty)
    except (ShapeError, DTypeError, AttrError):
        return                                         # refused when built
    except ExecutionError as e:
        # a kernel's own check naming the op (the case's other inputs no longer fit), not an
        # accident inside numpy
        own = isinstance(e.__cause__, IndexRangeError) or str(e.__cause__).startswith(op_type + ":")
        assert own, f"{op_type} on an empty input: {e}"
        return
    check_declared(op_type, "float64 empty", got)


# softsign: PaddlePaddle's complex gradient is its own formula (tests/test_op_complex.py).
COMPLEX_GRADS = sorted(op for op in CASES if "complex128" in paddle_dtypes(op, "grad")
                       and isinstance(registry.get(op).grad, registry.GradRule) and op != "softsign")


@pytest.mark.parametrize("op_type", COMPLEX_GRADS)
def test_complex128_gradients(op_type):
    # (tests/oprun.py differentiates one variable per slot: the cases with lists of inputs or
    # outputs, concat's and stack's, are left to their float64 checks)
    for case in CASES[op_type]:
        if case.outputs or any(isinstance(v, list) for v in case.inputs.values()):
            continue
        inputs = with_dtype(case, "complex128")
        try:
            run_declared(case, inputs)
        except DTypeError:
            return                                     # refused when built
        wrt = [s for s in float_slots(case) if case.wrt is None or s in case.wrt]
        check_grads(op_type, inputs, wrt, case.attrs, rtol=1e-5, atol=1e-7)


def test_dtype_table_is_current():
    """tests/fixtures/keel_op_dtypes.json (docs/ops.md's dtype table) is what the ops do now:
    regenerate it with `python tests/dtype_sweep.py`, then `python tools/gen_ops_doc.py`."""
    from dtype_sweep import TABLE, dtype_table, render_table
    assert TABLE.read_text() == render_table(dtype_table(PADDLE)), \
        "tests/fixtures/keel_op_dtypes.json is stale: run python tests/dtype_sweep.py"
