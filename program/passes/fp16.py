"""Half-precision inference: float16 weights and activations, float32 where it matters."""
from __future__ import annotations

import numpy as np

from keel.program.errors import ProgramError
from keel.program.passes.graph import FEED, FETCH
from keel.proto import pb

_T = pb.VarType

# Ops that run in float16 whenever they have a float32 input or output: the products and
# convolutions, where the weights (most of a model's bytes) live, and the embedding
# lookup. Their float16 result is within float16 round-off of the float32 one.
FP16_OPS = frozenset({
    "conv2d", "depthwise_conv2d", "conv2d_transpose", "matmul_v2", "matmul", "mul", "fc", "bmm",
    "lookup_table_v2", "fused_conv2d",
})

# Ops that follow their inputs (PaddlePaddle AMP's "gray" list): float16 when one of their
# float inputs already is, float32 otherwise. Elementwise ops, activations and data
# movement keep the precision of what they are given, so a value compared or selected in
# float32 (a slice of a float32 input compared with that input) is not rounded first.
FP16_FOLLOW_OPS = frozenset({
    "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
    "elementwise_max", "elementwise_min",
    "relu", "relu6", "leaky_relu", "gelu", "tanh", "sigmoid", "silu", "swish", "hard_swish",
    "hard_sigmoid", "prelu", "clip", "scale", "dropout",
    "pool2d", "reshape2", "transpose2", "flatten_contiguous_range", "squeeze2", "unsqueeze2",
    "concat", "split", "slice", "strided_slice", "stack", "unstack", "gather", "expand_v2",
    "tile", "pad", "pad3d", "pixel_shuffle", "nearest_interp_v2", "bilinear_interp_v2", "assign",
    "fused_elemwise_activation",
})

# The fused ops that stand for a listed op (the fusion passes run first): keeping conv2d
# in float32 keeps the fused_conv2d a conv2d became.
FUSED_FORMS = {"conv2d": "fused_conv2d", "depthwise_conv2d": "fused_conv2d"}


def with_fused_forms(op_types) -> frozenset:
    return frozenset(op_types) | {FUSED_FORMS[t] for t in op_types if t in FUSED_FORMS}


# Ops kept in float32 even when listed above (override with keep_fp32=...): they
# normalize, exponentiate or accumulate, where float16's range (65504) and 11-bit
# mantissa lose too much: softmax/log_softmax (exp and a sum), the norms (mean and
# variance over many elements), reductions and mean, exp/log and powers, and losses.
# Every op in neither list stays float32 as well.
DEFAULT_KEEP_FP32 = frozenset({
    "softmax", "log_softmax", "layer_norm", "batch_norm", "group_norm", "instance_norm",
    "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "mean", "sum",
    "cumsum", "p_norm", "squared_l2_norm", "l1_norm",
    "exp", "expm1", "log", "log2", "log10", "log1p", "pow", "elementwise_pow", "softplus",
    "softmax_with_cross_entropy", "cross_entropy", "cross_entropy2",
    "sigmoid_cross_entropy_with_logits", "bce_loss", "huber_loss", "kldiv_loss",
})


class _Versions:
    """Each value's variable per dtype: `get(name, dtype)` returns the variable holding
    `name`'s value in `dtype`, adding a parameter copy or a `cast` op the first time."""

    def __init__(self, graph, half_params: set):
        self.graph = graph
        self.half_params = half_params  # parameters every reader of which runs in float16
        self.table: dict[str, dict[int, str]] = {}
        self.casts = 0
        self.params_converted = 0

    def of(self, name: str) -> dict[int, str]:
        return self.table.setdefault(name, {self.graph.var(name).dtype: name})

    def get(self, name: str, dtype: int, before) -> str:
        versions = self.of(name)
        if dtype in versions:
            return versions[dtype]
        g = self.graph
        src_dtype, src = next(iter(versions.items()))
        if g.is_const(src) and src_dtype == _T.FP32 and dtype == _T.FP16:
            value = g.const(src).astype(np.float16)
            if src in self.half_params:
                g.make_const(src, value)
                self.table[name] = versions = {}
                new = src
            else:
                new = g.add_param(src + ".fp16", value)
            self.params_converted += 1
        else:
            suffix = ".cast_fp16" if dtype == _T.FP16 else ".cast_fp32"
            var = g.var(src)
            new = g.fresh_name(name + suffix)
            g.block.create_var(new, list(var.shape or ()), dtype)
            g.insert_op(g.index(before), "cast", {"X": [src]}, {"Out": [new]},
                        {"in_dtype": src_dtype, "out_dtype": dtype}, like=before)
            self.casts += 1
        versions[dtype] = new
        return new


UNDERFLOW_SHARE = 1e-3


def _float16_problem(value: np.ndarray) -> str | None:
    """Why a float32 weight cannot be stored in float16, or None: a finite value that would
    become infinite (|x| >= 65520), or values that would round to zero (|x| < 2**-25) and
    carry more than UNDERFLOW_SHARE of the weight's total magnitude (a weight of tiny values
    would vanish; a few decayed-to-nothing entries of an ordinary weight, which trained
    models with weight decay have by the thousand, change nothing measurable)."""
    with np.errstate(over="ignore"):
        half = value.astype(np.float16)
    finite = np.isfinite(value)
    if (np.isinf(half) & finite).any():
        return f"overflows float16 (max |x| {float(np.abs(value[finite]).max()):.6g} > 65504)"
    lost = (half == 0) & (value != 0)
    if lost.any():
        magnitude = np.abs(value[finite].astype(np.float64))
        share = float(np.abs(value[lost].astype(np.float64)).sum() / magnitude.sum())
        if share > UNDERFLOW_SHARE:
            return (f"underflows float16 ({int(lost.sum())} non-zero values round to zero, "
                    f"{share:.1%} of its magnitude)")
    return None


def _plan(graph, always, follow, is_f32, half_feeds, kept: set) -> set:
    """ids of the ops that will run in float16, deciding in program order. An op reading a
    weight in `kept` (one float16 cannot hold) stays float32."""
    half_values = set(half_feeds)
    runs_half = set()
    for op in graph.ops:
        names = op.input_arg_names + op.output_arg_names
        if not any(is_f32(n) or n in half_values for n in names) or kept & set(op.input_arg_names):
            continue
        if op.type in always or (op.type in follow and any(n in half_values for n in op.input_arg_names)):
            runs_half.add(id(op))
            half_values.update(n for n in op.output_arg_names if is_f32(n))
    return runs_half


def convert_to_fp16(graph, options) -> dict:
    """Matches, in program order: every op of FP16_OPS (options.fp16_ops) with a float32
    input or output, and every op of FP16_FOLLOW_OPS one of whose float inputs is already
    float16, unless the op type is in the keep list (options.keep_fp32, default
    DEFAULT_KEEP_FP32). Such an op runs in float16: its float32 inputs are read through a
    float16 version (a float16 copy of a parameter, the parameter itself when every reader
    runs in float16 so the parameter file shrinks, or a `cast`), and its float32 outputs
    become float16.
    Every other op reads its originally-float32 inputs in float32, through a `cast` back
    where the value is now float16. One cast per value and direction, shared by readers.
    With keep_io_types (default) feeds stay float32 and each fetch target is float32 under
    its own name (the float16 result is renamed and cast back); without it, float32 feeds
    are declared float16 and fetch targets keep the dtype their producer gives them.

    A weight that float16 cannot hold (a finite value that would overflow to inf, or values
    rounding to zero that carry a noticeable share of it) stays float32 and so does every op reading it;
    the report names each (`weights_kept_fp32`, `kept_fp32_because`).

    Safe for the dtypes: every value is read in the dtype its reader was assigned, so no
    op sees mixed precision. Not exact: results differ from float32 by float16 round-off
    (about 1e-3 relative per op); callers state and check a tolerance."""
    g = graph
    if g.program.num_blocks > 1:
        # a sub-block reads block 0's values by name and runs float32 kernels: converting
        # them would need casts under those names, or the sub-blocks converted too
        raise ProgramError(f"fp16 conversion handles one-block programs; this one has control flow "
                           f"({g.program.num_blocks} blocks), whose sub-blocks read block 0's values "
                           "by name in float32")
    keep = with_fused_forms(options.keep_fp32 if options.keep_fp32 is not None else DEFAULT_KEEP_FP32)
    always = (options.fp16_ops if options.fp16_ops is not None else FP16_OPS) - keep
    follow = FP16_FOLLOW_OPS - keep
    original = {name: var.dtype for name, var in g.block.vars.items()}

    def is_f32(name):
        return original.get(name) == _T.FP32

    half_feeds = set() if options.keep_io_types else {n for n in g.feeds if is_f32(n)}
    for name in half_feeds:
        g.var(name).dtype = _T.FP16
    problems = {n: why for n in g.params if g.is_const(n) and is_f32(n)
                for why in [_float16_problem(np.asarray(g.const(n)))] if why}
    runs_half = _plan(g, always, follow, is_f32, half_feeds, set(problems))
    half_params = {n for n in g.params if g.is_const(n) and is_f32(n)
                   and all(id(op) in runs_half for op in g.readers(n))}
    versions = _Versions(g, half_params)
    converted = 0
    for op in list(g.ops):
        if op.type in (FEED, FETCH):
            continue
        half = id(op) in runs_half
        want = _T.FP16 if half else _T.FP32
        for name in dict.fromkeys(op.input_arg_names):
            if is_f32(name) and name in g.block.vars:
                use = versions.get(name, want, op)
                if use != name:
                    op.rename_input(name, use)
        if not half:
            continue
        converted += 1
        for name in dict.fromkeys(op.output_arg_names):
            if not is_f32(name):
                continue
            if options.keep_io_types and name in g.fetches:
                half_name = g.fresh_name(name + ".fp16")
                g.block.create_var(half_name, list(g.var(name).shape or ()), _T.FP16)
                op.rename_output(name, half_name)
                g.insert_op(g.index(op) + 1, "cast", {"X": [half_name]}, {"Out": [name]},
                            {"in_dtype": _T.FP16, "out_dtype": _T.FP32}, like=op)
                versions.table[name] = {_T.FP16: half_name, _T.FP32: name}
                versions.casts += 1
            else:
                g.var(name).dtype = _T.FP16
                versions.table[name] = {_T.FP16: name}
    changes = {"ops_fp16": converted, "casts_inserted": versions.casts,
               "params_fp16": versions.params_converted, "weights_kept_fp32": len(problems)}
    if problems:
        changes["kept_fp32_because"] = "; ".join(f"{n} {why}" for n, why in sorted(problems.items()))
    return changes
