"""The dtype sweep over the op registry (issue 32), shared by tests/test_op_dtype_sweep.py.

Every op with a gradient check has valid float64 inputs and attributes in some
tests/test_grad_*.py CASES; the sweep reuses them (SAMPLES adds ops without a gradient).
For each op and each dtype PaddlePaddle 3.3.1's CPU kernel registers for it
(tests/fixtures/paddle_cpu_dtypes.json), the case's float inputs are converted to that
dtype and the op is built and run. It must either be refused when the program is built,
with a DTypeError, or give the reference: the op's float64 result on the same (converted)
values, whose kernels tests/test_kernels_*.py check against independent references, in the
output dtype the float64 run implies (within the dtype's precision; integers within the
truncation of one step). Complex dtypes get imaginary parts; their reference is the op
applied to the real and imaginary parts apart, for the ops that are linear (LINEAR), and
otherwise the complex references of tests/test_op_complex.py."""
from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent


# Outputs that must be their input's variable (running statistics updated in place), which
# tests/test_grad_nn.py adds to its batch_norm cases when it runs them.
IN_PLACE = {"batch_norm": {"MeanOut": "Mean", "VarianceOut": "Variance"},
            "sync_batch_norm": {"MeanOut": "Mean", "VarianceOut": "Variance"}}


def _samples():
    """Cases of ops without a gradient (so without a tests/test_grad_*.py case)."""
    from gradcheck import Case, rand
    x, y = rand(2, 3), rand(2, 3, seed=7)
    pair = {"X": x, "Y": y}
    ids = np.array([[1], [0]], np.int64)
    samples = [Case(op, pair, {"axis": -1}) for op in
               ("equal", "not_equal", "less_than", "less_equal", "greater_than", "greater_equal",
                "elementwise_floordiv", "elementwise_mod")]
    samples += [Case(op, pair) for op in ("logical_and", "logical_or", "logical_xor")]
    samples += [Case(op, {"X": x}) for op in ("logical_not", "isfinite_v2", "isinf_v2", "isnan_v2")]
    samples += [Case("shape", {"Input": x}), Case("size", {"Input": x})]
    samples += [
        Case("arg_max", {"X": x}, {"axis": 1, "keepdims": False, "flatten": False, "dtype": 3}),
        Case("arg_min", {"X": x}, {"axis": 0, "keepdims": True, "flatten": False, "dtype": 2}),
        Case("increment", {"X": rand(1)}, {"step": 2.0}),
        Case("clip_by_norm", {"X": x}, {"max_norm": 0.5}),
        Case("fill_any_like", {"X": x}, {"value": 1.5, "dtype": -1}),
        Case("reduce_all", {"X": x}, {"dim": [1], "keep_dim": False, "reduce_all": False}),
        Case("reduce_any", {"X": x}, {"dim": [0], "keep_dim": True, "reduce_all": False}),
        Case("where_index", {"Condition": x}),
        Case("one_hot_v2", {"X": ids}, {"depth": 3, "dtype": 5, "allow_out_of_range": False}),
        Case("fc", {"Input": x, "W": rand(3, 4, seed=2), "Bias": rand(4, seed=3)}, {"in_num_col_dims": 1}),
        Case("sgd", {"Param": x, "LearningRate": np.array([0.1]), "Grad": y}, inplace={"ParamOut": "Param"}),
    ]
    return samples


def gradient_cases() -> dict:
    """{op type: [Case]} from every tests/test_grad_*.py CASES, and _samples()."""
    found: dict = {}
    for path in sorted(HERE.glob("test_grad_*.py")):
        if path.name == "test_grad_coverage.py":
            continue
        spec = importlib.util.spec_from_file_location(f"_sweep_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        for case in getattr(module, "CASES", ()):
            if hasattr(case, "op_type"):
                case.inplace = case.inplace or IN_PLACE.get(case.op_type, {})
                found.setdefault(case.op_type, []).append(case)
    for case in _samples():
        found.setdefault(case.op_type, []).append(case)
    return found


def _listed(value):
    return value if isinstance(value, list) else [value]


def convert(arr, dtype, salt=0):
    """A float64 case input as `dtype`: integers from a scaled rounding (so values are not
    all 0), unsigned ones from its magnitude, bool as > 0, complex with an imaginary part."""
    dtype = np.dtype(dtype)
    arr = np.asarray(arr)
    if dtype.kind == "b":
        return arr > 0
    if dtype.kind in "iu":
        scaled = np.round(arr * 4)
        return (np.abs(scaled) if dtype.kind == "u" else scaled).astype(dtype)
    if dtype.kind == "c":
        imag = np.roll(arr.reshape(-1), 1 + salt).reshape(arr.shape) * 0.5 if arr.size else arr
        return (arr + 1j * imag).astype(dtype)
    return arr.astype(dtype)


# Float inputs that stand for attributes (PaddlePaddle takes them as float32 whatever the
# data's dtype): they keep their dtype.
ATTRIBUTE_TENSORS = {"FactorTensor", "ScaleTensor", "BiasTensor", "Min", "Max"}
_INTERP_OPS = {"linear_interp_v2", "bilinear_interp_v2", "trilinear_interp_v2", "nearest_interp_v2",
               "nearest_interp"}


def float_slots(case) -> list[str]:
    """The case's float data inputs (not the ones in ATTRIBUTE_TENSORS, nor the interpolation
    ops' Scale)."""
    keep = ATTRIBUTE_TENSORS | ({"Scale"} if case.op_type in _INTERP_OPS else set())
    return [slot for slot, value in case.inputs.items()
            if all(np.asarray(v).dtype.kind == "f" for v in _listed(value)) and slot not in keep]


def with_dtype(case, dtype):
    """The case's inputs with every float input converted to `dtype`."""
    inputs = {}
    for i, (slot, value) in enumerate(case.inputs.items()):
        if slot in float_slots(case):
            converted = [convert(v, dtype, salt=i + j) for j, v in enumerate(_listed(value))]
            inputs[slot] = converted if isinstance(value, list) else converted[0]
        else:
            inputs[slot] = value
    return inputs


# The dtypes swept: the list less bfloat16, which numpy cannot compute in (Keel
# carries it as its uint16 bit pattern; the fp16/bf16 passes are tested on their own).
SWEPT_DTYPES = ("float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
                "complex64", "complex128")
# PaddlePaddle's integer kernels of these ops cast their float attributes to the integer
# type first (static_cast<T>: scale 2.5 -> 2): their reference runs with those truncated.
ATTRS_CAST_FOR_INTEGERS = {"scale": ("scale", "bias"), "pow": ("factor",), "clip": ("min", "max")}
# Integer semantics of PaddlePaddle's that are not the float result truncated, tested on
# their own; and bool for the ops above (every attribute and attribute tensor becomes a
# bool, 2.5 true: tests/test_kernels_math.py).
OWN_INTEGER_SEMANTICS = {"linear_interp_v2": "tests/test_op_interp.py (its integer weights)"}
OWN_BOOL_SEMANTICS = set(ATTRS_CAST_FOR_INTEGERS)
# Ops whose result is real for a complex input by definition, or does not depend on the
# input's values at all.
REAL_FROM_COMPLEX = {"cast", "abs", "fill_any_like"}


def reference_attrs(op_type, attrs, dtype):
    """The attributes the float64 reference runs with for inputs of `dtype`."""
    names = ATTRS_CAST_FOR_INTEGERS.get(op_type, ())
    if np.dtype(dtype).kind not in "iu" or not names:
        return attrs
    def cast(value):  # C++'s static_cast<T>, wrapping as the CPU does (-1.0 -> 255 for uint8)
        with np.errstate(invalid="ignore", over="ignore"):
            return float(np.array(value).astype(np.int64).astype(dtype))
    return {k: (cast(v) if k in names and isinstance(v, float) else v) for k, v in attrs.items()}


def as_float64(inputs, slots):
    """The converted inputs as float64 (the reference's inputs: the same values)."""
    out = {}
    for slot, value in inputs.items():
        if slot in slots:
            out[slot] = ([np.asarray(v).astype(np.float64) for v in value] if isinstance(value, list)
                         else np.asarray(value).astype(np.float64))
        else:
            out[slot] = value
    return out


def real_parts(inputs):
    return {slot: ([np.real(v).copy() for v in value] if isinstance(value, list) else np.real(value).copy())
            for slot, value in inputs.items()}


def tolerance(dtype, scale):
    """Absolute tolerance against the float64 reference: a few ulp of the dtype at the
    result's magnitude (float16 and bfloat16-free float32 kernels round each step)."""
    eps = {"float16": 4e-3, "float32": 3e-6, "float64": 1e-12}.get(dtype, 0.0)
    return eps * max(1.0, scale)


# -- the dtype table of docs/ops.md ----------------------------------------------------------
TABLE = HERE / "fixtures" / "keel_op_dtypes.json"


def refused_when_built(case, dtype) -> bool:
    """Whether building the case's op on inputs of `dtype` raises a DTypeError."""
    from keel.program.errors import DTypeError
    from oprun import build
    try:
        build(case.op_type, with_dtype(case, dtype), case.attrs, case.outputs or None, case.inplace)
    except DTypeError:
        return True
    return False


def dtype_table(paddle: dict) -> dict:
    """{op type: {"runs": [dtypes], "refused": [dtypes]}} over the swept dtypes PaddlePaddle's
    CPU kernel registers for each op with a case (refused: a DTypeError when built, for
    every case of the op; tests/test_op_dtype_sweep.py checks the runs)."""
    table = {}
    for op_type, cases in sorted(gradient_cases().items()):
        swept = [d for d in paddle.get(op_type, {}).get("forward", []) if d in SWEPT_DTYPES]
        refused = [d for d in swept if all(refused_when_built(c, d) for c in cases)]
        table[op_type] = {"runs": [d for d in swept if d not in refused], "refused": refused}
    return table


def render_table(table: dict) -> str:
    lines = [f"{json.dumps(op)}: {json.dumps(entry)}" for op, entry in sorted(table.items())]
    return "{\n" + ",\n".join(lines) + "\n}\n"


if __name__ == "__main__":  # python tests/dtype_sweep.py: rewrite tests/fixtures/keel_op_dtypes.json
    import sys
    sys.path.insert(0, str(HERE))
    TABLE.write_text(render_table(dtype_table(json.loads((HERE / "fixtures" / "paddle_cpu_dtypes.json")
                                                         .read_text()))))
    print(f"wrote {TABLE}")
