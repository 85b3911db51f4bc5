"""What each op's attribute values may be, by what they mean: one declarative table.

`RULES[op_type][attr]` is a rule; the verifier (program/verify.py) runs every rule of every
op and reports each value out of range naming the op, the attribute, the value and what is
allowed. Types are checked before (a rule sees a value of the declared type); an attribute
missing from the file is checked at its default.

Rules:
- `Ints(lo, hi, lengths)`: an int, or every element of an int list, in [lo, hi]; a list's
  length among `lengths`.
- `Floats(lo, hi)`: a finite float in [lo, hi].
- `OneOf(...)`: a string among the given ones.
- `Axis(slot, extra)`: an axis of input `slot`'s rank r (plus `extra` for ops that add an
  axis): [-(r+extra), r+extra). Lists: every element. Unknown rank: not checked.
- `NumColDims(slot)`: `*_num_col_dims`: in [1, r-1] (the input is flattened to a matrix of
  its first k dims by the rest).
- `Permutation(slot)`: a permutation of the input's axes.
- `DType(unset)`: a data type code Keel has (`unset` also allows -1, "same as the input").
- `Count(slot)`: `num` of split/unstack: 0 or the number of outputs in `slot`.
- `Alloc(kind)`: a size fixed at load: the tensor the op will allocate must fit in
  program.limits.max_tensor_bytes(); see `_alloc_dims` for how each kind sizes it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from keel.program import dtypes, limits

_INT64 = (-(2**63), 2**63 - 1)


class Context:
    """What a rule may look at: the op, its block, its attributes (file values over defaults)."""

    def __init__(self, op, block, values: dict):
        self.op, self.block, self.values = op, block, values

    def var(self, slot: str, index: int = 0, output: bool = False):
        names = self.op.output(slot) if output else self.op.input(slot)
        if len(names) <= index:
            return None
        return self.block.find_var(names[index])

    def shape(self, slot: str, output: bool = False):
        v = self.var(slot, output=output)
        return None if v is None else v.shape

    def rank(self, slot: str) -> int | None:
        shape = self.shape(slot)
        return None if shape is None else len(shape)

    def itemsize(self, slot: str | None = None, attr: str | None = None, output: bool = False) -> int:
        code = None
        if attr is not None:
            code = self.values.get(attr)
        if (code is None or code < 0) and slot is not None:
            v = self.var(slot, output=output)
            code = v.dtype if v is not None else None
        try:
            return dtypes.to_numpy(code).itemsize
        except (TypeError, KeyError, ValueError):
            return 4


def _as_list(value):
    return list(value) if isinstance(value, (list, tuple)) else [value]


@dataclass(frozen=True)
class Ints:
    lo: int | None = None
    hi: int | None = None
    lengths: tuple[int, ...] | None = None

    def check(self, value, ctx) -> str | None:
        values = _as_list(value)
        if isinstance(value, (list, tuple)) and self.lengths is not None and len(values) not in self.lengths:
            return f"has {len(values)} element(s); allowed: {' or '.join(map(str, self.lengths))}"
        bad = [v for v in values if not isinstance(v, int) or isinstance(v, bool)
               or (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi)]
        if bad:
            return f"allowed: {_range(self.lo, self.hi)}{' for each element' if isinstance(value, (list, tuple)) else ''}"
        return None


def _range(lo, hi) -> str:
    if lo is not None and hi is not None:
        return f"[{lo}, {hi}]"
    if lo is not None:
        return f">= {lo}"
    return f"<= {hi}"


@dataclass(frozen=True)
class Unless:
    """`rule`, except when attribute `attr` is true (pool2d's ksize under global_pooling)."""
    attr: str
    rule: object

    def check(self, value, ctx) -> str | None:
        if ctx.values.get(self.attr):
            return None
        reason = self.rule.check(value, ctx)
        return reason and f"{reason} (unless {self.attr} is true)"


@dataclass(frozen=True)
class IfInput:
    """`when_given` if input `slot` names a variable, else `rule` (expand_v2's `shape` holds
    -2 for each dim that its expand_shapes_tensor input gives, as PaddlePaddle writes it)."""
    slot: str
    rule: object
    when_given: object

    def check(self, value, ctx) -> str | None:
        return (self.when_given if ctx.op.input(self.slot) else self.rule).check(value, ctx)


@dataclass(frozen=True)
class NumberText:
    """A number written as text (fill_constant's `str_value`), or empty."""

    def check(self, value, ctx) -> str | None:
        if value == "":
            return None
        try:
            float(value)
        except ValueError:
            return "allowed: '' or a number written as text ('1.5', 'inf', '-3')"
        return None


@dataclass(frozen=True)
class Floats:
    lo: float | None = None
    hi: float | None = None

    def check(self, value, ctx) -> str | None:
        for v in _as_list(value):
            if not math.isfinite(v) or (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
                return "allowed: a finite number" + (f" {_range(self.lo, self.hi)}" if (self.lo, self.hi) != (None, None) else "")
        return None


@dataclass(frozen=True)
class OneOf:
    choices: tuple[str, ...]

    def __init__(self, *choices):
        object.__setattr__(self, "choices", choices)

    def check(self, value, ctx) -> str | None:
        if value not in self.choices:
            return f"allowed: {', '.join(repr(c) for c in self.choices)}"
        return None


@dataclass(frozen=True)
class Axis:
    slot: str
    extra: int = 0

    def check(self, value, ctx) -> str | None:
        rank = ctx.rank(self.slot)
        if rank is None:
            return None
        n = max(rank + self.extra, 1)  # a 0-d input still takes axis 0 / -1
        for v in _as_list(value):
            if not -n <= v < n:
                return f"allowed: [{-n}, {n - 1}] (input {self.slot!r} has rank {rank})"
        return None


@dataclass(frozen=True)
class ElementwiseAxis:
    """elementwise_*'s `axis`: -1 (numpy broadcasting), or where Y's dims start in X."""

    def check(self, value, ctx) -> str | None:
        rank = ctx.rank("X")
        if rank is None:
            return None
        if not -1 <= value <= max(rank, ctx.rank("Y") or 0):
            return f"allowed: -1, or [0, {max(rank, ctx.rank('Y') or 0)}] (input 'X' has rank {rank})"
        return None


@dataclass(frozen=True)
class NumColDims:
    slot: str

    def check(self, value, ctx) -> str | None:
        rank = ctx.rank(self.slot)
        if rank is None or rank < 2:
            return None if 1 <= value <= 64 else f"allowed: [1, rank of {self.slot!r} - 1]"
        if not 1 <= value <= rank - 1:
            return f"allowed: [1, {rank - 1}] (input {self.slot!r} has rank {rank})"
        return None


@dataclass(frozen=True)
class Permutation:
    slot: str

    def check(self, value, ctx) -> str | None:
        rank = ctx.rank(self.slot)
        n = len(value) if rank is None else rank
        if sorted(v % n if n and -n <= v < n else v for v in value) != list(range(n)):
            return f"allowed: a permutation of 0..{n - 1}" + (f" (input {self.slot!r} has rank {rank})"
                                                              if rank is not None else "")
        return None


@dataclass(frozen=True)
class DType:
    unset: bool = False

    def check(self, value, ctx) -> str | None:
        if self.unset and value == -1:
            return None
        try:
            dtypes.to_numpy(value)
        except (TypeError, KeyError, ValueError):
            return "allowed: a data type code Keel has (" + ", ".join(
                f"{c} {dtypes.name(c)}" for c in dtypes.codes()) + (
                ", or -1" if self.unset else "") + ")"
        return None


@dataclass(frozen=True)
class Count:
    slot: str

    def check(self, value, ctx) -> str | None:
        n = len(ctx.op.output(self.slot))
        if value not in (0, n):
            return f"allowed: 0 or {n} (the number of {self.slot!r} outputs)"
        return None


@dataclass(frozen=True)
class Alloc:
    """A tensor sized by attributes at load. `kind` says how (see `_alloc_dims`)."""
    kind: str

    def check(self, value, ctx) -> str | None:
        found = _alloc_dims(self.kind, value, ctx)
        if found is None:
            return None
        dims, itemsize = found
        if len(dims) > limits.MAX_RANK:
            return f"has {len(dims)} dimensions; allowed: at most {limits.MAX_RANK}"
        size = limits.tensor_bytes(dims, itemsize)
        limit = limits.max_tensor_bytes()
        if size > limit:
            return (f"asks for a tensor of {limits.describe_bytes(size)} (dims {list(dims)}); allowed: at most "
                    f"{limits.describe_bytes(limit)} (KEEL_MAX_TENSOR_BYTES)")
        return None


def _static(ctx, *slots) -> bool:
    """No input tensor overrides the attribute."""
    return not any(ctx.op.input(s) for s in slots)


def _alloc_dims(kind, value, ctx):
    """(dims, itemsize) of the tensor an attribute value makes the op allocate, or None when
    the size is not fixed at load."""
    if kind == "shape":       # fill_constant, the random ops, assign_value: `shape` is the output
        if not _static(ctx, "ShapeTensor", "ShapeTensorList"):
            return None
        return list(value), ctx.itemsize("Out", attr="dtype", output=True)
    if kind == "batch_like":  # fill_constant_batch_size_like: one dim comes from the input
        return list(value), ctx.itemsize("Out", attr="dtype", output=True)
    if kind in ("conv", "pool"):  # paddings: the padded input and the output grow with them
        x = ctx.shape("Input" if kind == "conv" else "X")
        if x is None or len(x) != 4 or len(value) not in (2, 4):
            return None
        # [pad_h, pad_w] pads both sides; [top, bottom, left, right] each side once
        pads = [value[0], value[0], value[1], value[1]] if len(value) == 2 else list(value)
        nhwc = ctx.values.get("data_format") == "NHWC"
        h, w = (x[1], x[2]) if nhwc else (x[2], x[3])
        h = max(h, 1) + pads[0] + pads[1]
        w = max(w, 1) + pads[2] + pads[3]
        c = x[3] if nhwc else x[1]
        return [x[0], c, h, w], ctx.itemsize("Input" if kind == "conv" else "X")
    x = ctx.shape("X")
    if x is None:
        return None
    if kind == "expand":      # expand_v2 `shape`: -1 keeps the input's dim
        if not _static(ctx, "Shape", "expand_shapes_tensor"):
            return None
        x = [1] * (len(value) - len(x)) + list(x)
        dims = [xd if v == -1 else v for v, xd in zip(value, x)]
        return dims, ctx.itemsize("X")
    if kind == "tile":        # tile `repeat_times`
        if not _static(ctx, "RepeatTimes", "repeat_times_tensor"):
            return None
        n = max(len(value), len(x))
        reps = [1] * (n - len(value)) + list(value)
        x = [1] * (n - len(x)) + list(x)
        return [max(a, 1) * max(r, 1) for a, r in zip(x, reps)], ctx.itemsize("X")
    if kind == "reshape":     # reshape2 `shape`: 0 copies the input's dim, -1 is inferred
        if not _static(ctx, "Shape", "ShapeTensor"):
            return None
        dims = [x[i] if v == 0 and i < len(x) else v for i, v in enumerate(value)]
        return dims, ctx.itemsize("X")
    if kind == "one_hot":     # one_hot_v2 `depth`: the input's dims and a new one of `depth`
        if ctx.op.input("depth_tensor"):
            return None
        return list(x) + [value], ctx.itemsize("Out", attr="dtype", output=True)
    if kind == "pad":         # pad `paddings`: before/after per dim
        if len(value) != 2 * len(x):
            return None
        return [d + value[2 * i] + value[2 * i + 1] if d >= 0 else -1 for i, d in enumerate(x)], ctx.itemsize("X")
    if kind == "interp":      # out_h/out_w/out_d: the spatial dims of the output
        if not _static(ctx, "OutSize", "SizeTensor", "Scale"):
            return None
        dims = list(x[:2]) + [max(int(ctx.values.get(a, 0) or 0), 1) for a in ("out_d", "out_h", "out_w")]
        return dims, ctx.itemsize("X")
    raise ValueError(f"unknown allocation kind {kind!r}")


# -- the table -----------------------------------------------------------------------------
_POS2 = Ints(1, 2**31 - 1, lengths=(2,))
_PAD = Ints(0, 2**31 - 1, lengths=(2, 4))
_DATA_FORMAT = OneOf("NCHW", "NHWC", "AnyLayout")
_PADDING_ALGORITHM = OneOf("EXPLICIT", "SAME", "VALID")

_CONV = {"strides": _POS2, "dilations": _POS2, "groups": Ints(1, 2**31 - 1), "paddings": _PAD,
         "padding_algorithm": _PADDING_ALGORITHM, "data_format": _DATA_FORMAT}
_INTERP = {"out_d": Ints(-1), "out_h": Ints(-1), "out_w": Ints(-1), "align_mode": Ints(0, 1),
           "interp_method": OneOf("bilinear", "nearest", "linear", "trilinear", "bicubic"),
           "data_layout": _DATA_FORMAT}
_REDUCE = {"dim": Axis("X"), "in_dtype": DType(unset=True), "out_dtype": DType(unset=True)}
_RANDOM = {"shape": Alloc("shape"), "dtype": DType()}

RULES: dict[str, dict[str, object]] = {
    "conv2d": _CONV,
    "depthwise_conv2d": _CONV,
    "conv2d_transpose": {**_CONV, "output_padding": Ints(0), "output_size": Ints(1)},
    "pool2d": {"ksize": Unless("global_pooling", _POS2), "strides": _POS2, "paddings": _PAD, "pooling_type": OneOf("max", "avg"),
               "padding_algorithm": _PADDING_ALGORITHM, "data_format": _DATA_FORMAT},
    "mul": {"x_num_col_dims": NumColDims("X"), "y_num_col_dims": NumColDims("Y")},
    "fc": {"in_num_col_dims": NumColDims("Input")},
    "matmul": {"head_number": Ints(1)},
    "batch_norm": {"epsilon": Floats(0), "momentum": Floats(), "data_layout": _DATA_FORMAT},
    "layer_norm": {"epsilon": Floats(0), "begin_norm_axis": Axis("X")},
    "group_norm": {"epsilon": Floats(0), "groups": Ints(1), "data_layout": _DATA_FORMAT},
    "instance_norm": {"epsilon": Floats(0)},
    "lrn": {"n": Ints(1)},
    "pixel_shuffle": {"upscale_factor": Ints(1)},
    "dropout": {"dropout_prob": Floats(0, 1)},
    "softmax": {"axis": Axis("X")},
    "log_softmax": {"axis": Axis("X")},
    "softmax_with_cross_entropy": {"axis": Axis("Logits")},
    "concat": {"axis": Axis("X")},
    "split": {"axis": Axis("X"), "num": Count("Out"), "sections": Ints(-1)},
    "stack": {"axis": Axis("X", extra=1)},
    "unstack": {"axis": Axis("X"), "num": Count("Y")},
    "gather": {"axis": Axis("X")},
    "cumsum": {"axis": Axis("X")},
    "arg_max": {"axis": Axis("X"), "dtype": DType()},
    "arg_min": {"axis": Axis("X"), "dtype": DType()},
    "top_k_v2": {"axis": Axis("X"), "k": Ints(0)},
    "p_norm": {"axis": Axis("X")},
    "flatten_contiguous_range": {"start_axis": Axis("X"), "stop_axis": Axis("X")},
    "transpose2": {"axis": Permutation("X")},
    "squeeze2": {"axes": Axis("X")},
    "unsqueeze2": {"axes": Ints(-(limits.MAX_RANK), limits.MAX_RANK - 1)},
    "slice": {"axes": Axis("Input")},
    "strided_slice": {"axes": Axis("Input"), "strides": Ints(lo=None)},
    "reduce_sum": _REDUCE, "reduce_mean": _REDUCE, "reduce_max": _REDUCE, "reduce_min": _REDUCE,
    "reduce_prod": _REDUCE, "reduce_all": _REDUCE, "reduce_any": _REDUCE,
    "cast": {"in_dtype": DType(), "out_dtype": DType()},
    "fill_any_like": {"dtype": DType(unset=True)},
    "fill_constant": {**_RANDOM, "str_value": NumberText()},
    "uniform_random": _RANDOM,
    "gaussian_random": _RANDOM,
    "truncated_gaussian_random": _RANDOM,
    "randint": _RANDOM,
    "assign_value": {"shape": Alloc("shape"), "dtype": DType()},
    "fill_constant_batch_size_like": {"shape": Alloc("batch_like"), "dtype": DType(),
                                      "input_dim_idx": Axis("Input")},
    "expand_v2": {"shape": IfInput("expand_shapes_tensor", Ints(-1), Ints(-2))},
    "tile": {"repeat_times": Ints(1)},
    "reshape2": {"shape": Ints(-1)},
    "one_hot_v2": {"depth": Ints(-1), "dtype": DType()},
    "pad": {"paddings": Ints(0)},
    "pad3d": {"paddings": Ints(0, lengths=(6,)),
              "mode": OneOf("constant", "reflect", "replicate", "circular"),
              "data_format": OneOf("NCDHW", "NDHWC")},
    "bilinear_interp_v2": _INTERP,
    "nearest_interp_v2": _INTERP,
    "lookup_table_v2": {"padding_idx": Ints(-(2**63), 2**63 - 1)},
    "linspace": {"dtype": DType()},
    "elementwise_add": {"axis": ElementwiseAxis()},
}
for _op in ("elementwise_sub", "elementwise_mul", "elementwise_div", "elementwise_max", "elementwise_min",
            "elementwise_pow", "elementwise_mod", "elementwise_floordiv", "equal", "not_equal",
            "less_than", "less_equal", "greater_than", "greater_equal"):
    RULES[_op] = RULES["elementwise_add"]

# Size rules run after the range rules of the same op pass: a size is only meaningful once
# its dims are in range. (attr, rule) per op.
ALLOC_RULES: dict[str, list[tuple[str, Alloc]]] = {
    "expand_v2": [("shape", Alloc("expand"))],
    "tile": [("repeat_times", Alloc("tile"))],
    "reshape2": [("shape", Alloc("reshape"))],
    "one_hot_v2": [("depth", Alloc("one_hot"))],
    "conv2d": [("paddings", Alloc("conv"))],
    "depthwise_conv2d": [("paddings", Alloc("conv"))],
    "pool2d": [("paddings", Alloc("pool"))],
    "pad": [("paddings", Alloc("pad"))],
    "bilinear_interp_v2": [("out_w", Alloc("interp"))],
    "nearest_interp_v2": [("out_w", Alloc("interp"))],
}


# -- shapes the parameters of an op must agree on ---------------------------------------------
def _channel_dim(ctx, slot: str, layout_attr: str):
    shape = ctx.shape(slot)
    if not shape or len(shape) < 2:
        return None
    layout = ctx.values.get(layout_attr, "NCHW")
    return shape[-1] if layout == "NHWC" else shape[1]


@dataclass(frozen=True)
class PerChannel:
    """Each of `slots` (those present) is a vector of one length: the channel dim of input
    `of` (dim 1, or the last with `layout_attr` = NHWC) when that is known."""
    slots: tuple[str, ...]
    of: str
    layout_attr: str

    def check(self, ctx) -> str | None:
        c = _channel_dim(ctx, self.of, self.layout_attr)
        found = {s: ctx.shape(s) for s in self.slots if ctx.op.input(s) and ctx.shape(s) is not None}
        sizes = {s: _numel(shape) for s, shape in found.items()}
        want = c if c is not None and c >= 0 else next(iter(sizes.values()), None)
        bad = {s: list(found[s]) for s, n in sizes.items() if n is not None and want is not None and n != want}
        if bad:
            return (f"parameters {', '.join(f'{s!r} {d}' for s, d in bad.items())} disagree with the "
                    f"{want} channels of {(self.of if c is not None and c >= 0 else next(iter(sizes)))!r}; "
                    f"allowed: {', '.join(repr(s) for s in self.slots)} each of {want} elements")
        return None


def _numel(shape):
    n = 1
    for d in shape:
        if d < 0:
            return None
        n *= d
    return n


@dataclass(frozen=True)
class ConvChannels:
    """conv2d's Filter [out, in/groups, kh, kw]: in/groups * groups is Input's channel count
    and out is a multiple of groups (conv2d_transpose: Filter [in, out/groups, kh, kw])."""
    transpose: bool = False

    def check(self, ctx) -> str | None:
        f = ctx.shape("Filter")
        groups = ctx.values.get("groups", 1)
        if f is None or len(f) != 4:
            return f"allowed: a 4-D 'Filter', got dims {list(f) if f is not None else None}" if f is not None else None
        c = _channel_dim(ctx, "Input", "data_format")
        if self.transpose:
            if c is not None and c >= 0 and f[0] >= 0 and f[0] != c:
                return f"'Filter' {list(f)} has {f[0]} input channels, 'Input' has {c}; allowed: equal"
            return None
        if f[0] >= 0 and f[0] % groups:
            return f"'Filter' {list(f)} has {f[0]} output channels, not a multiple of groups = {groups}"
        if c is not None and c >= 0 and f[1] >= 0 and f[1] * groups != c:
            return (f"'Filter' {list(f)} takes {f[1]} x groups {groups} = {f[1] * groups} input channels, "
                    f"'Input' has {c}; allowed: equal")
        return None


MAX_WINDOW = 1 << 20
"""The largest dilated window (dilation * (kernel - 1) + 1) a conv may have when the input's
spatial size is unknown at load; a known size bounds it exactly."""


@dataclass(frozen=True)
class ConvWindow:
    """The dilated filter (conv) or the pooling window fits in the padded input: else the
    output would have no rows, and a strided window view would reach past the input."""
    pool: bool = False

    def check(self, ctx) -> str | None:
        v = ctx.values
        if self.pool:
            if v.get("global_pooling") or v.get("adaptive"):
                return None
            x, kernel, dil = ctx.shape("X"), list(v.get("ksize") or []), [1, 1]
        else:
            x, f = ctx.shape("Input"), ctx.shape("Filter")
            if f is None or len(f) != 4:
                return None
            kernel, dil = [f[2], f[3]], list(v.get("dilations") or [1, 1])
        if x is None or len(x) != 4 or len(kernel) != 2 or len(dil) != 2:
            return None
        pads = list(v.get("paddings") or [0, 0])
        pads = [pads[0], pads[0], pads[1], pads[1]] if len(pads) == 2 else pads
        nhwc = v.get("data_format") == "NHWC"
        size = (x[1], x[2]) if nhwc else (x[2], x[3])
        if v.get("padding_algorithm") in ("SAME", "VALID"):  # paddings ignored; SAME pads as needed
            pads = [0, 0, 0, 0] if v.get("padding_algorithm") == "VALID" else None
        for axis, name in ((0, "height"), (1, "width")):
            extent = dil[axis] * (kernel[axis] - 1) + 1
            if size[axis] < 0 or pads is None:
                if extent > MAX_WINDOW:
                    return (f"the {name} window spans {extent} (dilation {dil[axis]}, kernel {kernel[axis]}); "
                            f"allowed: at most {MAX_WINDOW} when the input size is unknown")
                continue
            padded = size[axis] + pads[2 * axis] + pads[2 * axis + 1]
            if extent > padded:
                what = "pooling window" if self.pool else f"dilated filter (dilation {dil[axis]}, kernel {kernel[axis]})"
                return (f"the {what} spans {extent} in {name}, more than the padded input's {padded}; "
                        f"allowed: at most {padded}")
            # a gradient op: the output gradient it reads must have the size these strides give
            dy = ctx.shape("Out@GRAD" if self.pool else "Output@GRAD")
            strides = list(v.get("strides") or [1, 1])
            if dy is not None and len(dy) == 4 and len(strides) == 2 and strides[axis] > 0 and not v.get("ceil_mode"):
                out = (padded - extent) // strides[axis] + 1
                have = dy[1 + axis] if nhwc else dy[2 + axis]
                if have >= 0 and have != out:
                    return (f"strides {strides} give an output {name} of {out}, but the output gradient it "
                            f"reads has {have}; allowed: the forward op's strides")
        return None


SHAPE_RULES: dict[str, tuple] = {
    "batch_norm": (PerChannel(("Scale", "Bias", "Mean", "Variance"), "X", "data_layout"),),
    "conv2d": (ConvChannels(), ConvWindow()),
    "depthwise_conv2d": (ConvChannels(), ConvWindow()),
    "pool2d": (ConvWindow(pool=True),),
    "conv2d_transpose": (ConvChannels(transpose=True),),
}


# A gradient op carries its forward op's attributes and reads its inputs (X, Input, Filter)
# under the same slot names: the same ranges, shape agreements and sizes hold for it.
_MIRRORED = ("conv2d", "depthwise_conv2d", "conv2d_transpose", "pool2d", "mul", "matmul", "batch_norm",
             "layer_norm", "group_norm", "softmax", "log_softmax", "flatten_contiguous_range", "transpose2",
             "cumsum", "gather", "elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div",
             "elementwise_max", "elementwise_min", "elementwise_pow", "pad", "pad3d", "expand_v2", "tile",
             "bilinear_interp_v2", "nearest_interp_v2", "lrn", "pixel_shuffle", "dropout")
for _op in _MIRRORED:
    for _table in (RULES, ALLOC_RULES, SHAPE_RULES):
        if _op in _table:
            _table.setdefault(_op + "_grad", _table[_op])


def op_problems(op, block, where: str) -> list[str]:
    """Every attribute value of `op` out of its range, as 'where: attribute ...' lines."""
    table = RULES.get(op.type)
    allocs = ALLOC_RULES.get(op.type, ())
    shapes = SHAPE_RULES.get(op.type, ())
    if not table and not allocs and not shapes:
        return []
    opdef = op.opdef
    values = dict(opdef.default_attrs()) if opdef is not None else {}
    values.update(op.attrs)
    ctx = Context(op, block, values)
    problems = []
    for name, rule in (table or {}).items():
        if name not in values or values[name] is None:
            continue
        reason = _run(rule, values[name], ctx)
        if reason:
            problems.append(f"{where}: attribute {name!r} = {_show(values[name])} {reason}")
    if problems:
        return problems
    for rule in shapes:
        try:
            reason = rule.check(ctx)
        except (TypeError, ValueError, OverflowError, ZeroDivisionError):
            reason = "has inputs whose shapes cannot be read"
        if reason:
            problems.append(f"{where}: {reason}")
    for name, rule in allocs:
        if name in values and values[name] is not None:
            reason = _run(rule, values[name], ctx)
            if reason:
                problems.append(f"{where}: attribute {name!r} = {_show(values[name])} {reason}")
    return problems


def _run(rule, value, ctx) -> str | None:
    try:
        return rule.check(value, ctx)
    except (TypeError, ValueError, OverflowError):
        return "cannot be read as this attribute's kind of value"


def _show(value) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
