"""Files written by older PaddlePaddle releases (2.0 - 3.3): their extra slots and
attributes, their op versions, and what Keel does with each.

PaddlePaddle's ops carried, besides the attributes that define them, "extra" ones: switches
for a kernel library (`use_mkldnn`, `use_cudnn`, `mkldnn_data_type`, `workspace_size_MB`)
and fields that its oneDNN/CUDA fusion passes fill when they fold one op into another
(`fuse_activation`, `fuse_residual_connection` and the `Bias`/`ResidualData` inputs of
conv2d, `fused_reshape_X` of matmul). Until 2.4 every exporter wrote all of them into each op
(paddle/fluid/operators/*_op.cc, `AddAttr(...).AsExtra()`); 2.5+ lists them in
`paddle/phi/ops/yaml/op_compat.yaml` and strips them when saving. Keel keeps one table of them:

- `HINTS`: runtime choices that never change a result; any value is accepted.
- `EXTRA_ATTRS` / `EXTRA_SLOTS`: fields whose *neutral* value (the default PaddlePaddle's
  builder writes: `fuse_activation=""`, `Scale_in=1.0`, an empty `Bias`) asks for nothing.
  Any other value asks for a computation: Keel either writes that computation out as
  ordinary ops when the program is read (`LOWERINGS`: conv2d's bias, residual add and
  fused activation, batch_norm's fused ReLU, matmul's fused reshape/transpose) or refuses
  the file naming op, attribute and value. An attribute with a `gate` only matters when its
  gate is not neutral (`fuse_alpha` without `fuse_activation`).

Op versions (`ProgramDesc.op_version_map`): PaddlePaddle registers a checkpoint
(`REGISTER_OP_VERSION`) each time an op gains an attribute or input or changes meaning, and
writes the registry into every file. `CHECKPOINTS` holds those of the ops Keel runs: an op a
file wrote at an older version gets the attributes added since (with the value that keeps
its old meaning) and, where the meaning changed (leaky_relu before version 1), the old
computation. An op written at a version newer than Keel knows is refused: a later checkpoint
may have changed what it computes. PaddlePaddle 3.3.1 itself runs such files without a word,
but it only skips its graph passes for them; Keel cannot tell a benign bump from a changed
formula, so it says so instead of guessing.

`ProgramDesc.version` is the writing release (major*10^6 + minor*10^3 + patch).
PaddlePaddle never refuses a file over it (`IsProgramVersionSupported` returns true: "the
compatibility judgment cannot be made only by the version number"); op versions carry the
meaning. Keel warns (`NewerFileWarning`) for a release after 3.3.1 within major version 3,
and refuses a later major version (4.0+, e.g. 99999999), which Keel cannot claim to read.

`upgrade_program` applies all of this to a parsed program (the loaders call it before
verifying); `legacy_problems` says, for the verifier, what stays unsupported.
"""
from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Callable

from keel.program import attrs as attr_codec
from keel.program.errors import ProgramError, UnsupportedProgramError
from keel.program.op_versions import OP_VERSIONS
from keel.proto import pb

A = pb.AttrType

KEEL_RELEASE = 3003001
"""The PaddlePaddle release whose op semantics Keel implements (3.3.1)."""


class NewerFileWarning(UserWarning):
    """A program file written by a PaddlePaddle release after the one Keel follows."""


def release_name(version: int) -> str:
    return f"{version // 1000000}.{version // 1000 % 1000}.{version % 1000}"


# ---------------------------------------------------------------------------------- extras
HINTS = frozenset({
    # kernel library and data-type choices (oneDNN, cuDNN); Keel has one kernel per op
    "use_mkldnn", "use_onednn", "mkldnn_data_type", "onednn_data_type", "use_quantizer",
    "use_cudnn", "workspace_size_MB", "exhaustive_search",
    # cuDNN's gradient accumulation strategy (backward only); int8 output type switch (int8
    # kernels only; a float32 kernel's output is float32 either way)
    "use_addto", "force_fp32_output",
    # an elementwise op's input layouts, "no longer used" since 1.x (elementwise_op.h)
    "x_data_format", "y_data_format",
    # distributed training and parameter-server placement
    "epmap", "height_sections", "is_distributed", "is_sparse", "remote_prefetch", "slot",
    "table_names", "trainer_id", "skip_eager_deletion_vars",
})


@dataclass(frozen=True)
class Extra:
    """A legacy attribute or slot: `neutral` values ask for nothing; any other value asks
    for `meaning`. `gate`: the attribute only matters when that other one is not neutral."""
    neutral: tuple
    meaning: str
    gate: str | None = None


_SCALE = "a oneDNN int8 quantization scale (Keel computes in float32)"
EXTRA_ATTRS: dict[str, Extra] = {
    "fuse_activation": Extra(("",), "an activation fused into the op's output (oneDNN)"),
    "fuse_alpha": Extra((0.0,), "the fused activation's alpha", gate="fuse_activation"),
    "fuse_beta": Extra((0.0,), "the fused activation's beta", gate="fuse_activation"),
    "fuse_relu": Extra((False,), "a ReLU fused into the op's output (oneDNN, 1.x)"),
    "fuse_brelu": Extra((False,), "a bounded ReLU fused into the op's output (oneDNN, 1.x)"),
    "fuse_brelu_threshold": Extra((6.0,), "the fused bounded ReLU's threshold", gate="fuse_brelu"),
    "fuse_residual_connection": Extra((False,), "ResidualData added to the output (oneDNN)"),
    "fuse_relu_before_depthwise_conv": Extra((False,), "a ReLU applied to Input first (CUDA)"),
    "fuse_with_relu": Extra((False,), "a ReLU fused into the op's output (oneDNN)"),
    "fused_output_scale": Extra((1.0,), "a scale fused into the output (oneDNN)"),
    "fused_reshape2_shape": Extra(([],), "a reshape fused into the output (oneDNN)"),
}
# 1.0 (FLOAT) on most ops; mul writes scale_y as FLOATS [1.0], conv2d Scale_weights too
for _name in ("Scale_in", "Scale_in_eltwise", "Scale_out", "Scale_weights", "Scale_x", "Scale_y",
              "scale_x", "scale_y", "scale_out"):
    EXTRA_ATTRS[_name] = Extra((1.0, [1.0]), _SCALE)
for _io in ("X", "Y", "Out"):
    EXTRA_ATTRS[f"fused_reshape_{_io}"] = Extra(([],), f"a reshape of {_io} fused into the matmul (oneDNN)")
    EXTRA_ATTRS[f"fused_transpose_{_io}"] = Extra(([],), f"a transpose of {_io} fused into the matmul (oneDNN)")

_CONV_SLOTS = {
    "Bias": Extra(([],), "a bias added to each output channel (oneDNN conv_bias fusion)"),
    "ResidualData": Extra(([],), "a tensor added to the output (oneDNN residual fusion)",
                          gate="fuse_residual_connection"),
}
EXTRA_SLOTS: dict[str, dict[str, Extra]] = {"conv2d": _CONV_SLOTS, "depthwise_conv2d": _CONV_SLOTS}
"""Input slots 2.x wrote that 3.3.1's op definitions no longer have."""


def _neutral(op, name: str, extra: Extra, seen=()) -> bool:
    if extra.gate is not None and extra.gate not in seen:
        gate = EXTRA_ATTRS.get(extra.gate)
        if gate is not None and (not op.has_attr(extra.gate) or _neutral(op, extra.gate, gate, seen + (name,))):
            return True
    value = op.attr(name) if op.has_attr(name) else op.input(name)
    return any(_same(value, n) for n in extra.neutral)


def _same(a, b) -> bool:
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, float) or isinstance(b, float):  # 1 and 1.0 match; a string never does
        numbers = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in (a, b))
        return numbers and float(a) == float(b)
    return type(a) is type(b) and a == b


def asks(op, opdef) -> dict[str, object]:
    """The legacy attributes and slots of `op` (those its definition lacks) whose values ask
    for a computation, name -> value."""
    found = {}
    slots = EXTRA_SLOTS.get(op.type, {})
    for name in op.inputs:
        if opdef is not None and name not in opdef.input_slots and name in slots:
            if not _neutral(op, name, slots[name]):
                found[name] = op.input(name)
    for name in op.attrs:
        if opdef is not None and opdef.attr_spec(name) is not None:
            continue
        extra = EXTRA_ATTRS.get(name)
        if extra is not None and not _neutral(op, name, extra):
            found[name] = op.attr(name)
    return found


def is_legacy_slot(op_type: str, slot: str) -> bool:
    return slot in EXTRA_SLOTS.get(op_type, {})


def is_legacy_attr(name: str) -> bool:
    return name in HINTS or name in EXTRA_ATTRS


# ------------------------------------------------------------------------------- lowerings
class Refusal(Exception):
    """A legacy value Keel cannot compute; the message says why."""


@dataclass
class Step:
    """One op of a lowering: `type` reading `x` (the running value) and `other` inputs."""
    type: str
    attrs: dict = field(default_factory=dict)
    other: dict = field(default_factory=dict)  # slot -> var name, besides the running value
    x_slot: str = "X"
    out_slot: str = "Out"


@dataclass
class Lowering:
    """`plan(op) -> (before, after, handled)`: ops to run on the op's input (`before`, with
    the input slot they replace) and on its output (`after`), and the legacy names they
    implement. Raises Refusal for a value Keel does not compute."""
    plan: Callable
    in_slot: str
    out_slot: str


def _attr(op, name, default):
    return op.attr(name) if op.has_attr(name) else default


# oneDNN eltwise post-ops as PaddlePaddle's fusion passes fill them (fuse_alpha, fuse_beta):
# relu: x > 0 ? x : alpha*x; bounded_relu/clip: min(max(x, 0), threshold); swish:
# x*sigmoid(alpha*x); hard_sigmoid: linear(alpha, beta) then clip to [0, 1]
# (phi/backends/onednn/onednn_reuse.h AppendActivation, conv_activation_mkldnn_fuse_pass).
def _activation(name: str, alpha: float, beta: float) -> Step:
    if name == "relu":
        return Step("relu") if alpha == 0 else Step("leaky_relu", {"alpha": alpha})
    if name == "leaky_relu":
        return Step("leaky_relu", {"alpha": alpha})
    if name == "relu6":
        # bounded_relu(alpha) before oneDNN 3 (2.0-2.4); clip(0, beta) after (2.5+)
        if alpha > 0 and beta in (0.0, alpha):
            return Step("relu6", {"threshold": alpha})
        if alpha == 0 and beta > 0:
            return Step("relu6", {"threshold": beta})
        raise Refusal(f"relu6 with fuse_alpha={alpha}, fuse_beta={beta} names no one threshold")
    if name == "swish":
        return Step("swish", {"beta": alpha})
    if name in ("sigmoid", "tanh", "abs", "sqrt"):
        return Step(name)
    if name == "hard_sigmoid":
        return Step("hard_sigmoid", {"slope": alpha, "offset": beta})
    if name in ("gelu", "gelu_erf", "gelu_tanh"):
        return Step("gelu", {"approximate": name == "gelu_tanh"})
    if name == "clip":
        return Step("clip", {"min": alpha, "max": beta})
    raise Refusal(f"Keel does not implement the fused activation {name!r} (hard_swish's and mish's "
                  "oneDNN formulas changed between releases)")


def _plan_conv(op):
    """PaddlePaddle's oneDNN conv (conv_mkldnn_op.cc, 1.x-2.x): the bias inside the
    convolution, then the post-ops in order: sum (ResidualData, when
    fuse_residual_connection), then the activation (fuse_activation; in 1.x fuse_relu /
    fuse_brelu). fuse_relu_before_depthwise_conv (the CUDA depthwise kernel) applies ReLU
    to Input first."""
    before, after, handled = [], [], set()
    if _attr(op, "fuse_relu_before_depthwise_conv", False):
        before.append(Step("relu"))
        handled.add("fuse_relu_before_depthwise_conv")
    bias = [n for n in op.input("Bias") if n]
    if bias:
        axis = 3 if _attr(op, "data_format", "NCHW") == "NHWC" else 1
        after.append(Step("elementwise_add", {"axis": axis}, {"Y": bias[0]}))
        handled.add("Bias")
    if _attr(op, "fuse_residual_connection", False):
        residual = [n for n in op.input("ResidualData") if n]
        if not residual:
            raise Refusal("fuse_residual_connection=True needs a ResidualData input, and it is empty")
        after.append(Step("elementwise_add", {"axis": -1}, {"Y": residual[0]}))
        handled |= {"fuse_residual_connection", "ResidualData"}
    activation = _attr(op, "fuse_activation", "")
    relu, brelu = _attr(op, "fuse_relu", False), _attr(op, "fuse_brelu", False)
    if sum(map(bool, (activation, relu, brelu))) > 1:
        raise Refusal(f"fuse_activation={activation!r}, fuse_relu={relu}, fuse_brelu={brelu} ask for "
                      "more than one fused activation")
    if activation:
        after.append(_activation(activation, _attr(op, "fuse_alpha", 0.0), _attr(op, "fuse_beta", 0.0)))
        handled |= {"fuse_activation", "fuse_alpha", "fuse_beta"}
    if relu:
        after.append(Step("relu"))
        handled.add("fuse_relu")
    if brelu:
        after.append(Step("relu6", {"threshold": _attr(op, "fuse_brelu_threshold", 6.0)}))
        handled |= {"fuse_brelu", "fuse_brelu_threshold"}
    return [("Input", s) for s in before], after, handled


def _plan_batch_norm(op):
    """batch_norm's oneDNN kernel applies ReLU to Y when fuse_with_relu (fuse_norm_relu)."""
    return [], [Step("relu")] if _attr(op, "fuse_with_relu", False) else [], {"fuse_with_relu"}


def _plan_matmul(op):
    """PaddlePaddle's oneDNN matmul (matmul_mkldnn_op.cc): an input is first reshaped to
    fused_reshape_<X|Y> (0 copies the input's dim, as in reshape2), then transposed by
    fused_transpose_<X|Y>; the product is transposed by fused_transpose_Out, then reshaped to
    fused_reshape_Out (the reshape2/transpose2 pairs its fusion passes removed). Releases
    differ on a reshape without its transpose or the reverse, so only whole pairs are run."""
    before, after, handled = [], [], set()
    for io in ("X", "Y", "Out"):
        shape, axis = _attr(op, f"fused_reshape_{io}", []), _attr(op, f"fused_transpose_{io}", [])
        if not shape and not axis:
            continue
        if not shape or not axis:
            given = f"fused_reshape_{io}" if shape else f"fused_transpose_{io}"
            raise Refusal(f"{given}={shape or axis} without its "
                          f"fused_{'transpose' if shape else 'reshape'}_{io}: PaddlePaddle releases "
                          "differ on what that computes")
        handled |= {f"fused_reshape_{io}", f"fused_transpose_{io}"}
        reshape = Step("reshape2", {"shape": list(shape)})
        transpose = Step("transpose2", {"axis": list(axis)})
        if io == "Out":
            after += [transpose, reshape]
        else:
            before += [(io, reshape), (io, transpose)]
    return before, after, handled


LOWERINGS: dict[str, Lowering] = {
    "conv2d": Lowering(_plan_conv, "Input", "Output"),
    "depthwise_conv2d": Lowering(_plan_conv, "Input", "Output"),
    "batch_norm": Lowering(_plan_batch_norm, "X", "Y"),
    "matmul_v2": Lowering(_plan_matmul, "X", "Out"),
    "matmul": Lowering(_plan_matmul, "X", "Out"),
}


def refusal(op, opdef) -> str | None:
    """Why Keel cannot run `op`'s legacy values, or None when it can (nothing asked, or a
    lowering computes all of it)."""
    wanted = asks(op, opdef)
    if not wanted:
        return None
    lowering = LOWERINGS.get(op.type)
    if lowering is None:
        name, value = next(iter(wanted.items()))
        extra = EXTRA_SLOTS.get(op.type, {}).get(name) or EXTRA_ATTRS[name]
        return f"{name}={value!r} asks for {extra.meaning}, which Keel does not implement for {op.type}"
    try:
        _, _, handled = lowering.plan(op)
    except Refusal as e:
        return str(e)
    left = {n: v for n, v in wanted.items() if n not in handled}
    if left:
        name, value = next(iter(left.items()))
        extra = EXTRA_SLOTS.get(op.type, {}).get(name) or EXTRA_ATTRS[name]
        return f"{name}={value!r} asks for {extra.meaning}, which Keel does not implement for {op.type}"
    return None


def _fresh(block, base: str) -> str:
    k = 0
    while block.find_var(f"{base}.legacy_{k}") is not None:
        k += 1
    return f"{base}.legacy_{k}"


def _lower(block, op, lowering: Lowering) -> None:
    before, after, handled = lowering.plan(op)
    callstack = op.attr("op_callstack") if op.has_attr("op_callstack") else None

    def emit(at, step, src, dst):
        inputs = {step.x_slot: [src], **{k: [v] for k, v in step.other.items()}}
        new = block.insert_op(at, step.type, inputs, {step.out_slot: [dst]}, dict(step.attrs))
        if callstack is not None:  # errors name the line that built the original op
            new.set_attr("op_callstack", callstack)

    for slot, step in before:
        src = op.input(slot)[0]
        var = block.var(src)
        dst = block.create_var(_fresh(block, src), var.shape, var.dtype).name
        emit(block.ops.index(op), step, src, dst)
        op.set_input(slot, [dst])
    if after:
        out = op.output(lowering.out_slot)[0]
        var = block.var(out)
        src = block.create_var(_fresh(block, out), var.shape, var.dtype).name
        op.set_output(lowering.out_slot, [src])
        if before and op.opdef is not None and op.opdef.infer is not None:
            # its inputs changed shape (a fused reshape/transpose): infer its output again
            block._infer(op, op.opdef, op.inputs, op.outputs, op.attrs, op.callsite)
        at = block.ops.index(op) + 1
        for i, step in enumerate(after):
            last = i == len(after) - 1
            dst = out if last else block.create_var(_fresh(block, out), var.shape, var.dtype).name
            emit(at + i, step, src, dst)
            src = dst
    # The op itself now computes only what 3.3.1's definition says: what was written out
    # goes back to its neutral value.
    for name in handled:
        if name in EXTRA_SLOTS.get(op.type, {}):
            op.set_input(name, [])
        elif op.has_attr(name) and (op.opdef is None or op.opdef.attr_spec(name) is None):
            op.set_attr(name, EXTRA_ATTRS[name].neutral[0])


# ------------------------------------------------------------------------------ op versions
@dataclass(frozen=True)
class Checkpoint:
    """One REGISTER_OP_VERSION checkpoint: ops written before `version` lack `new_attrs`
    (filled with the value that keeps their old meaning) and, for a behaviour change, are
    rewritten by `upgrade(block, op)`."""
    version: int
    note: str
    new_attrs: dict = field(default_factory=dict)
    upgrade: Callable | None = None
    by_content: bool = False  # the upgrade recognizes the old form itself: run it whatever the map says


def _leaky_relu_v0(block, op) -> None:
    """Before version 1, leaky_relu computed max(x, alpha*x), which differs from
    `x if x > 0 else alpha*x` only for alpha < 0 or alpha > 1."""
    alpha = op.attr("alpha") if op.has_attr("alpha") else 0.02
    if 0.0 <= alpha <= 1.0:
        return
    x, out = op.input("X")[0], op.output("Out")[0]
    var = block.var(out)
    scaled = block.create_var(_fresh(block, out), var.shape, var.dtype).name
    index = block.ops.index(op)
    callstack = op.attr("op_callstack") if op.has_attr("op_callstack") else None
    block.remove_op(op)
    new = [block.insert_op(index, "scale", {"X": [x]}, {"Out": [scaled]}, {"scale": alpha}),
           block.insert_op(index + 1, "elementwise_max", {"X": [x], "Y": [scaled]}, {"Out": [out]},
                           {"axis": -1})]
    for o in new:
        if callstack is not None:
            o.set_attr("op_callstack", callstack)


_TYPED_VALUES = ("bool_values", "fp32_values", "int32_values", "int64_values", "fp64_values", "fp16_values")


def _typed_values_to_generic(block, op) -> None:
    """assign_value's version 1 and set_value's version 4 replaced the per-type value lists
    (fp32_values, int32_values, ...) by one generic `values` list (SCALARS)."""
    data = []
    for name in _TYPED_VALUES:
        if op.has_attr(name) and op.attr(name) and not data:
            data = list(op.attr(name))
    for name in _TYPED_VALUES:
        op.remove_attr(name)
    if data and not (op.has_attr("values") and op.attr("values")):
        op.remove_attr("values")
        attr_codec.encode(op.desc.attrs.add(), "values", A.SCALARS, data)
        op._changed()


_ELEMENTWISE_V1 = Checkpoint(1, "added Scale_x/Scale_y/Scale_out (oneDNN int8 scales, neutral 1.0)")
CHECKPOINTS: dict[str, tuple[Checkpoint, ...]] = {
    "leaky_relu": (Checkpoint(1, "out = x if x > 0 else alpha*x (was max(x, alpha*x))",
                              upgrade=_leaky_relu_v0),),
    "assign_value": (Checkpoint(1, "generic `values` replaced bool/fp32/int32/int64_values",
                                upgrade=_typed_values_to_generic, by_content=True),),
    "set_value": (Checkpoint(1, "added steps and the Starts/Ends/StepsTensorList inputs", {"steps": []}),
                  Checkpoint(2, "added decrease_axes", {"decrease_axes": []}),
                  Checkpoint(3, "added none_axes", {"none_axes": []}),
                  Checkpoint(4, "generic `values` replaced bool/fp32/int32/int64/fp64/fp16_values",
                             upgrade=_typed_values_to_generic, by_content=True)),
    "softplus": (Checkpoint(1, "added beta and threshold (1.0 and 20.0 keep the old formula)",
                            {"beta": 1.0, "threshold": 20.0}),),
    "linspace": (Checkpoint(1, "added dtype (float32 before)", {"dtype": 5}),),
    "cumsum": (Checkpoint(1, "added flatten", {"flatten": False}),),
    "arg_max": (Checkpoint(1, "added flatten; dtype -1 and 3 both mean int64", {"flatten": False}),),
    "arg_min": (Checkpoint(1, "added flatten; dtype -1 and 3 both mean int64", {"flatten": False}),),
    "clip": (Checkpoint(1, "added the dispensable Min and Max inputs"),),
    "gather": (Checkpoint(1, "added the dispensable Axis input"),),
    "lookup_table_v2": (Checkpoint(1, "Ids may be int32 as well as int64"),),
    "conv2d": (Checkpoint(1, "added use_addto (cuDNN backward only)"),),
    "depthwise_conv2d": (Checkpoint(1, "added use_addto (cuDNN backward only)"),),
    "fill_constant": (Checkpoint(1, "added the dispensable ValueTensor input"),
                      Checkpoint(2, "added place_type", {"place_type": -1})),
    **{t: (_ELEMENTWISE_V1,) for t in ("elementwise_add", "elementwise_sub", "elementwise_mul",
                                        "elementwise_div", "elementwise_pow", "elementwise_max",
                                        "elementwise_min", "elementwise_floordiv", "elementwise_mod")},
}

# Checkpoints of ops that 3.x moved to its phi library and dropped from the registry it
# writes; 2.x files list them (seen in files exported by 2.3 and 2.4).
_RETIRED_VERSIONS = {
    "adam": 4, "arg_max": 1, "arg_min": 1, "elementwise_floordiv": 1, "elementwise_max": 1,
    "elementwise_min": 1, "elementwise_mod": 1, "expand_as_v2": 1, "gaussian_random": 1,
    "mish": 1, "softmax_with_cross_entropy": 1,
}
KNOWN_OP_VERSIONS: dict[str, int] = {**_RETIRED_VERSIONS, **dict(OP_VERSIONS)}
"""The newest version of each op whose meaning Keel implements (ops absent: version 0)."""


def file_op_versions(header) -> dict[str, int] | None:
    """The file's op_version_map, or None when it has none (1.x files, edited ones)."""
    if not header.HasField("op_version_map"):
        return None
    return {p.op_name: p.op_version.version for p in header.op_version_map.pair}


def version_problems(program) -> list[str]:
    """File-level problems: a later major release, ops written at versions Keel does not know."""
    problems = []
    version = program.header.version.version if program.header.HasField("version") else 0
    if version >= 4000000:
        problems.append(f"the file was written by PaddlePaddle {release_name(version)} (version {version}), "
                        f"a major release after {release_name(KEEL_RELEASE)}, whose ops Keel follows")
    versions = file_op_versions(program.header) or {}
    used = {op.type for block in program.blocks for op in block.ops}
    for op_type in sorted(used):
        have, known = versions.get(op_type, 0), KNOWN_OP_VERSIONS.get(op_type, 0)
        if have > known:
            problems.append(f"op {op_type!r} was written at op version {have}; Keel knows it up to version "
                            f"{known} (PaddlePaddle {release_name(KEEL_RELEASE)}), and a later checkpoint may "
                            "have changed what it computes")
    return problems


# --------------------------------------------------------------------------------- upgrading
def upgrade_program(program, source: str = "program") -> list[str]:
    """Bring a parsed program to the semantics Keel implements: attributes added by later op
    versions filled in, old formulas written out, and the computations legacy attributes ask
    for (that Keel implements) made ordinary ops. Returns a line per change (empty for a file
    Keel or 3.3.1 wrote). Warns for a release after 3.3.1; what cannot be run is left for
    the verifier to report."""
    from keel.program.ops import registry

    notes = []
    version = program.header.version.version if program.header.HasField("version") else 0
    if KEEL_RELEASE < version < 4000000:
        warnings.warn(f"{source} was written by PaddlePaddle {release_name(version)}, after "
                      f"{release_name(KEEL_RELEASE)} whose ops Keel follows; its op versions are "
                      "checked, but other changes would go unnoticed", NewerFileWarning, stacklevel=3)
    versions = file_op_versions(program.header)
    problems = []
    for block in program.blocks:
        for op in list(block.ops):
            opdef = registry.lookup(op.type)
            if opdef is None:
                continue
            if not _upgradable(block, op, opdef):
                continue  # slots the upgrades rely on are damaged: the verifier reports them
            try:
                _upgrade_op(block, op, opdef, versions, notes)
            except (KeyError, IndexError, TypeError, ValueError, AttributeError, ProgramError) as e:
                index = block.ops.index(op) if op in block.ops else "?"
                problems.append(f"block {block.idx} op {index} ({op.type}): cannot be brought to "
                                f"PaddlePaddle {release_name(KEEL_RELEASE)}'s form: {type(e).__name__}: {e}")
    if problems:
        raise UnsupportedProgramError(problems, source)
    return notes


def _upgradable(block, op, opdef) -> bool:
    """Every slot of `op` the definition declares non-duplicable names at most one variable,
    and every variable it names exists: what the upgrades and lowerings assume."""
    for kind, given, slots in (("input", op.inputs, opdef.input_slots), ("output", op.outputs, opdef.output_slots)):
        for slot, names in given.items():
            spec = slots.get(slot)
            if spec is not None and not spec.duplicable and len(names) > 1:
                return False
            if any(n != "@EMPTY@" and block.find_var(n) is None for n in names):
                return False
    return True


def _upgrade_op(block, op, opdef, versions, notes) -> None:
    """One op's upgrades: attributes later op versions added, changed formulas, legacy
    slots nothing reads unbound, fused computations written out as ops."""
    written = "?" if versions is None else versions.get(op.type, 0)
    for cp in CHECKPOINTS.get(op.type, ()):
        old = versions is None or versions.get(op.type, 0) < cp.version
        for name, value in cp.new_attrs.items():
            # a file without a map: fill only what is missing (the old meaning)
            if old and not op.has_attr(name):
                op.set_attr(name, value)
                notes.append(f"{op.type}: op version {written} -> {cp.version}: {name}={value!r} "
                             f"({cp.note})")
        # A behaviour change needs the map to say the op is old (a file without one
        # is read as PaddlePaddle 3.3.1 reads it), unless the old form shows itself.
        if cp.upgrade is not None and (cp.by_content or (versions is not None and old)):
            before = (len(block.ops), op.desc.SerializeToString())
            cp.upgrade(block, op)
            if before != (len(block.ops), op.desc.SerializeToString()):
                notes.append(f"{op.type}: op version {written} -> {cp.version}: {cp.note}")
    if op not in block.ops:
        return
    for slot, extra in EXTRA_SLOTS.get(op.type, {}).items():
        # given but not read (ResidualData without fuse_residual_connection): unbind it,
        # so nothing has to feed or compute it
        if op.input(slot) and slot not in opdef.input_slots and _neutral(op, slot, extra):
            notes.append(f"{op.type}: {slot}={op.input(slot)} is not read ({extra.gate} is off); unbound")
            op.set_input(slot, [])
    lowering = LOWERINGS.get(op.type)
    if (lowering is not None and asks(op, opdef) and refusal(op, opdef) is None
            and len(op.output(lowering.out_slot)) == 1):  # else the verifier names what is missing
        wanted = asks(op, opdef)
        _lower(block, op, lowering)
        notes.append(f"{op.type} -> {op.output(lowering.out_slot)[0]}: "
                     + ", ".join(f"{k}={v!r}" for k, v in wanted.items())
                     + " written out as ops")


def legacy_problems(op, opdef) -> list[str]:
    """For the verifier: what about `op`'s legacy slots and attributes Keel cannot run."""
    reason = refusal(op, opdef)
    return [reason] if reason else []
