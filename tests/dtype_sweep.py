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
        Case("c_identity", {"X": x}),
        Case("share_data", {"X": x}),
        Case("range", {"Start": np.array([0.5]), "End": np.array([3.0]), "Step": np.array([0.5])}),
        Case("accuracy", {"Out": np.abs(x[:, :2]), "Indices": np.array([[2, 0], [1, 2]], np.int64),
                          "Label": np.array([[0], [1]], np.int64)}),
        Case("check_finite_and_unscale", {"X": [x, y], "Scale": np.array([2.0])}, outputs={"Out": 2}),
        Case("update_loss_scaling", {"X": [x], "FoundInfinite": np.array([False]),
                                     "PrevLossScaling": np.array([1024.0]), "InGoodSteps": np.array([1], np.int32),
                                     "InBadSteps": np.array([0], np.int32)},
             {"incr_every_n_steps": 2, "decr_every_n_nan_or_inf": 1, "incr_ratio": 2.0, "decr_ratio": 0.5},
             outputs={"Out": 1}),
        Case("ctc_align", {"Input": np.array([[0, 1, 1, 0, 2], [2, 2, 0, 1, 0]], np.int32),
                           "InputLength": np.array([[5], [4]], np.int32)}, {"blank": 0, "merge_repeated": True}),
        Case("fill_constant_batch_size_like", {"Input": x}, {"shape": [-1, 4], "value": 1.5, "dtype": SWEPT}),
        Case("fill_constant", {}, {"shape": [2, 3], "value": 1.5, "dtype": SWEPT}),
        Case("assign_value", {}, {"shape": [2], "dtype": SWEPT, "values": [1.5, 0.25]}),
        Case("linspace", {"Start": np.array([0.0], np.float32), "Stop": np.array([8.0], np.float32),
                          "Num": np.array([5], np.int32)}, {"dtype": SWEPT}),
        Case("coalesce_tensor", {"Input": [x, y[:1]]}, {"dtype": SWEPT, "copy_data": True, "use_align": False},
             outputs={"Output": 2}),
        Case("gaussian_random", {}, {"shape": [2, 3], "dtype": SWEPT, "seed": 1}),
        Case("uniform_random", {}, {"shape": [2, 3], "dtype": SWEPT, "seed": 1}),
        Case("truncated_gaussian_random", {}, {"shape": [2, 3], "dtype": SWEPT, "seed": 1}),
        Case("randint", {}, {"low": -3, "high": 5, "shape": [2, 3], "dtype": SWEPT, "seed": 1}),
        Case("histogram", {"X": x}, {"bins": 4}),
        Case("unique", {"X": np.concatenate([x, x[:1]])}, {"is_sorted": True, "return_index": True,
                                                           "return_inverse": True, "return_counts": True},
             outputs={"Indices": 1, "Counts": 1}),
    ]
    # cholesky and eigh: gradient-checked by hand along symmetric directions (test_grad_linalg.py);
    # eigh on a diagonal matrix, whose eigenvectors (the unit columns) have no sign to choose
    samples += [Case("cholesky", {"X": x.T @ x + 3 * np.eye(3)}, {"upper": False}),
                Case("eigh", {"X": np.diag([3.0, 1.0, 2.0])}, {"UPLO": "L"})]
    # bitwise ops take bool and integer tensors only: their float64 run is refused, so each
    # integer dtype is checked against Python's operators in tests/test_kernels_stat.py
    samples += [Case("bitwise_not", {"X": x})] + [Case(op, pair) for op in ("bitwise_and", "bitwise_or",
                                                                           "bitwise_xor")]
    return samples + _optimizer_samples(x, y) + _detection_samples()


def _optimizer_samples(param, grad):
    """One update of each optimizer, its state outputs written in place as its programs do."""
    from gradcheck import Case, rand
    lr, moment = np.array([0.1]), np.abs(rand(2, 3, seed=11))
    adam_in = {"Param": param, "Grad": grad, "LearningRate": lr, "Moment1": rand(2, 3, seed=12) * 0.1,
               "Moment2": moment, "Beta1Pow": np.array([0.9]), "Beta2Pow": np.array([0.999])}
    adam_out = {"ParamOut": "Param", "Moment1Out": "Moment1", "Moment2Out": "Moment2",
                "Beta1PowOut": "Beta1Pow", "Beta2PowOut": "Beta2Pow"}
    velocity = {"Param": param, "Grad": grad, "Velocity": rand(2, 3, seed=13), "LearningRate": lr}
    return [
        Case("adagrad", {"Param": param, "Grad": grad, "Moment": moment, "LearningRate": lr},
             inplace={"ParamOut": "Param", "MomentOut": "Moment"}),
        Case("adam", dict(adam_in), inplace=dict(adam_out)),
        Case("adamw", dict(adam_in), {"coeff": 0.01, "with_decay": True}, inplace=dict(adam_out)),
        Case("lamb", dict(adam_in), {"weight_decay": 0.01}, inplace=dict(adam_out)),
        Case("momentum", dict(velocity), {"mu": 0.9, "use_nesterov": True},
             inplace={"ParamOut": "Param", "VelocityOut": "Velocity"}),
        Case("lars_momentum", {k: [v] for k, v in velocity.items()},
             {"mu": 0.9}, inplace={"ParamOut": "Param", "VelocityOut": "Velocity"}),
        Case("rmsprop", {"Param": param, "Grad": grad, "MeanSquare": moment, "MeanGrad": rand(2, 3, seed=14) * 0.1,
                         "Moment": rand(2, 3, seed=15), "LearningRate": lr}, {"centered": True, "momentum": 0.5},
             inplace={"ParamOut": "Param", "MomentOut": "Moment", "MeanSquareOut": "MeanSquare",
                      "MeanGradOut": "MeanGrad"}),
    ]


def _detection_samples():
    """The detection ops' first cases of tests/fixtures/detection (valid boxes, scores and
    attributes, checked against PaddlePaddle there); multiclass_nms (1.x) on
    multiclass_nms3's 3-D case."""
    from gradcheck import Case
    folder = HERE / "fixtures" / "detection"
    meta = json.loads((folder / "cases.json").read_text())
    data = np.load(folder / "cases.npz", allow_pickle=False)
    samples, seen = [], set()
    for name, case in meta.items():
        op_type = case["op"]
        if op_type in seen or op_type not in SAMPLED_DETECTION_OPS:
            continue
        seen.add(op_type)
        inputs = {slot: data[f"{name}/in/{slot}"] for slot, n in case["inputs"].items() if not n}
        levels = case["attrs"]["max_level"] - case["attrs"]["min_level"] + 1 if "max_level" in case["attrs"] else 0
        outputs = {"MultiFpnRois": levels, "MultiLevelRoIsNum": levels} if levels else {}
        samples.append(Case(op_type, inputs, dict(case["attrs"]), outputs=outputs))
    nms = meta["nms3_3d_basic"]
    samples.append(Case("multiclass_nms", {slot: data[f"nms3_3d_basic/in/{slot}"] for slot in nms["inputs"]},
                        dict(nms["attrs"])))
    return samples


SAMPLED_DETECTION_OPS = {"yolo_box", "multiclass_nms3", "matrix_nms", "prior_box", "anchor_generator",
                         "box_coder", "generate_proposals_v2", "distribute_fpn_proposals"}


def gradient_cases() -> dict:
    """{op type: [Case]} from every tests/test_grad_*.py CASES, and _samples()."""
    from gradcheck import case_modules  # (leaves out a module whose oracle is missing, not the sweep)
    found: dict = {}
    for module in case_modules():
        if module.__name__.endswith("test_grad_coverage"):
            continue
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


# An attribute value standing for the dtype being swept (the `dtype` attribute of the ops
# that make their output's dtype from it: fill_constant, linspace, the random ops, ...):
# `case_attrs` puts the swept dtype's code there.
SWEPT = "<the swept dtype>"


def refuses_dtype(case, error) -> bool:
    """Whether `error`, raised building the case's op, is its refusal of the swept dtype: a
    DTypeError, or an AttrError about the `dtype` attribute the case sets to it."""
    from keel.program.errors import AttrError, DTypeError
    if isinstance(error, DTypeError):
        return True
    return isinstance(error, AttrError) and SWEPT in case.attrs.values() and "dtype" in str(error)


def case_attrs(case, dtype):
    """The case's attributes, SWEPT replaced by `dtype`'s code."""
    from keel.program import dtypes
    return {k: (dtypes.to_code(dtype) if v == SWEPT else v) for k, v in case.attrs.items()}


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
OWN_INTEGER_SEMANTICS = {"linear_interp_v2": "tests/test_op_interp.py (its integer weights)",
                         **dict.fromkeys(["bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"],
                                         "tests/test_kernels_stat.py (no float result to compare with)")}
OWN_BOOL_SEMANTICS = set(ATTRS_CAST_FOR_INTEGERS) | {"bitwise_not", "bitwise_and", "bitwise_or", "bitwise_xor"}
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


# The ops not swept, and why: no dtype to vary, nothing to run in one process, or no
# PaddlePaddle CPU kernel whose dtypes the sweep would follow.
NOT_SWEPT = {
    "feed": "the executor's own input: a feed's dtype rule is executor/feeds.py's (tests/test_executor.py)",
    "fetch": "the executor's own output: returns what it is given",
    "conditional_block": "control flow: runs a sub-block, whose ops are swept (tests/test_control_flow*.py)",
    "while": "control flow: runs a sub-block, whose ops are swept (tests/test_control_flow*.py)",
    "select_input": "control flow: forwards the selected variable unchanged, any dtype",
    "select_output": "control flow: forwards its input unchanged, any dtype",
    "read_from_array": "tensor arrays: moves a tensor in or out of an array unchanged, any dtype",
    "write_to_array": "tensor arrays: moves a tensor in or out of an array unchanged, any dtype",
    "lod_array_length": "tensor arrays: an int64 count, whatever the array holds",
    "tensor_array_to_tensor": "tensor arrays: concatenates or stacks the array's tensors (concat's, stack's "
                              "kernels, which are swept)",
    "fused_conv2d": "PaddlePaddle registers it for oneDNN only (no CPU dtype list); conv2d, which it "
                    "computes, is swept, and tests/test_fused_ops.py compares the two",
    "density_prior_box": "PaddlePaddle 3.3.1's CPU build registers no kernel (no dtype list); "
                         "tests/test_kernels_detection.py checks it against an independent reference",
    "barrier": "a collective: waits for the other processes (tests/test_distributed*.py)",
    "c_sync_calc_stream": "a stream synchronization of the collectives: returns its input; PaddlePaddle "
                          "3.3.1's CPU build registers no kernel for it",
    "c_sync_comm_stream": "a stream synchronization of the collectives: returns its input; PaddlePaddle "
                          "3.3.1's CPU build registers no kernel for it",
    "c_comm_init": "communicator set-up: no tensor computed",
    "c_gen_nccl_id": "communicator set-up: no tensor computed",
    **{op: "a collective: needs other processes (tests/test_distributed*.py run it across processes), and "
           "PaddlePaddle 3.3.1's CPU build registers no kernel for it"
       for op in ("c_allgather", "c_allreduce_max", "c_allreduce_min", "c_allreduce_prod", "c_allreduce_sum",
                  "c_broadcast", "c_reduce_max", "c_reduce_min", "c_reduce_prod", "c_reduce_sum",
                  "c_reducescatter")},
}


# -- the dtype table of docs/ops.md ----------------------------------------------------------
TABLE = HERE / "fixtures" / "keel_op_dtypes.json"


def refused_when_built(case, dtype) -> bool:
    """Whether building the case's op on inputs of `dtype` raises a DTypeError."""
    from keel.program.errors import AttrError, DTypeError
    from oprun import build
    try:
        build(case.op_type, with_dtype(case, dtype), case_attrs(case, dtype), case.outputs or None, case.inplace)
    except (DTypeError, AttrError) as e:
        if refuses_dtype(case, e):
            return True
        raise
    return False


def dtype_table(paddle: dict) -> dict:
    """{op type: {"runs": [dtypes], "refused": [dtypes]}} over the swept dtypes PaddlePaddle's
    CPU kernel registers for each op with a case (refused: a DTypeError when built, for
    every case of the op; tests/test_op_dtype_sweep.py checks the runs), and {"not_swept":
    why} for the ops of NOT_SWEPT."""
    table = {}
    for op_type, cases in sorted(gradient_cases().items()):
        swept = [d for d in paddle.get(op_type, {}).get("forward", []) if d in SWEPT_DTYPES]
        refused = [d for d in swept if all(refused_when_built(c, d) for c in cases)]
        table[op_type] = {"runs": [d for d in swept if d not in refused], "refused": refused}
    table.update((op_type, {"not_swept": why}) for op_type, why in NOT_SWEPT.items())
    return dict(sorted(table.items()))


def render_table(table: dict) -> str:
    lines = [f"{json.dumps(op)}: {json.dumps(entry)}" for op, entry in sorted(table.items())]
    return "{\n" + ",\n".join(lines) + "\n}\n"


if __name__ == "__main__":  # python tests/dtype_sweep.py: rewrite tests/fixtures/keel_op_dtypes.json
    import sys
    sys.path.insert(0, str(HERE))
    TABLE.write_text(render_table(dtype_table(json.loads((HERE / "fixtures" / "paddle_cpu_dtypes.json")
                                                         .read_text()))))
    print(f"wrote {TABLE}")
