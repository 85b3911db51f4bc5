"""The op registry: one declarative definition per op type.

A definition (`OpDef`) holds everything the framework knows about an op type apart
from its kernels: input and output slots, attributes with types and defaults, the
shape/dtype inference rule that runs when the op is appended, and the gradient rule.
Names and meanings of slots and attributes follow PaddlePaddle's legacy ops, so
program files interoperate both ways. Kernels live in `kernels/` under the same op
type name; they never import this module.

Defining an op (see program/ops/*.py for real ones):

    define("matmul_v2",
           inputs=["X", "Y"], outputs=["Out"],
           attrs={"trans_x": BOOL(False), "trans_y": BOOL(False)},
           infer=_infer_matmul_v2,
           grad=...)        # the gradient rule lives here, next to the shape rule
"""
from __future__ import annotations

import difflib
from dataclasses import dataclass, field, replace
from typing import Any, Callable

from keel.program import legacy
from keel.program.errors import UnknownOpError
from keel.proto import pb

A = pb.AttrType


class _Required:
    def __repr__(self):
        return "REQUIRED"


REQUIRED = _Required()
"""Default of an attribute the user must always give."""


@dataclass(frozen=True)
class AttrSpec:
    type: int  # pb.AttrType number
    default: Any = REQUIRED
    name: str = ""

    @property
    def required(self) -> bool:
        return self.default is REQUIRED


def INT(default=REQUIRED): return AttrSpec(A.INT, default)
def LONG(default=REQUIRED): return AttrSpec(A.LONG, default)
def FLOAT(default=REQUIRED): return AttrSpec(A.FLOAT, default)
def FLOAT64(default=REQUIRED): return AttrSpec(A.FLOAT64, default)
def STRING(default=REQUIRED): return AttrSpec(A.STRING, default)
def BOOL(default=REQUIRED): return AttrSpec(A.BOOLEAN, default)
def INTS(default=REQUIRED): return AttrSpec(A.INTS, default)
def LONGS(default=REQUIRED): return AttrSpec(A.LONGS, default)
def FLOATS(default=REQUIRED): return AttrSpec(A.FLOATS, default)
def FLOAT64S(default=REQUIRED): return AttrSpec(A.FLOAT64S, default)
def STRINGS(default=REQUIRED): return AttrSpec(A.STRINGS, default)
def BOOLS(default=REQUIRED): return AttrSpec(A.BOOLEANS, default)
def BLOCK(default=REQUIRED): return AttrSpec(A.BLOCK, default)
def SCALAR(default=REQUIRED): return AttrSpec(A.SCALAR, default)
def SCALARS(default=REQUIRED): return AttrSpec(A.SCALARS, default)


@dataclass(frozen=True)
class Slot:
    """An input or output slot. `duplicable`: takes a list of variables. `dispensable`:
    may be empty. `intermediate`: an output kept for the gradient (XShape, SavedMean).
    `extra`: a slot PaddlePaddle strips when saving for inference (dropout's Mask)."""
    name: str
    duplicable: bool = False
    dispensable: bool = False
    intermediate: bool = False
    extra: bool = False


def opt(name: str) -> Slot:
    """An optional (dispensable) slot."""
    return Slot(name, dispensable=True)


def many(name: str, optional: bool = False) -> Slot:
    """A slot that takes a list of variables."""
    return Slot(name, duplicable=True, dispensable=optional)


def side(name: str, extra: bool = False) -> Slot:
    """An intermediate output the gradient reads (XShape, Mask, SavedMean). `extra`: one
    PaddlePaddle strips when saving for inference (dropout's Mask)."""
    return Slot(name, intermediate=True, extra=extra)


class _NotDifferentiable:
    def __repr__(self):
        return "NOT_DIFFERENTIABLE"


NOT_DIFFERENTIABLE = _NotDifferentiable()
"""`grad=NOT_DIFFERENTIABLE`: the op has no gradient (comparisons, random ops, integer ops)."""

GRAD_SUFFIX = "@GRAD"


def grad_name(name: str) -> str:
    """The gradient of variable or slot `name`: `x` -> `x@GRAD`, `Out` -> `Out@GRAD`."""
    return name + GRAD_SUFFIX


@dataclass(frozen=True)
class GradRule:
    """How an op is differentiated: the gradient op it emits, in PaddlePaddle's terms.

    `inputs` names what the gradient op reads: forward slots ("X", "Out", "XShape") and
    gradients of forward outputs ("Out@GRAD"). `outputs` names the gradients it writes
    ("X@GRAD"); a forward input without one here gets no gradient (labels, indices).
    Registering the forward op also registers the gradient op `<type>_grad` (or `type`),
    with these slots, the forward op's attributes plus `attrs`, and `infer` (default: each
    "S@GRAD" gets the shape and dtype of forward slot S, or of `like[S@GRAD]`).

    `maker`, for the few ops whose gradient is other forward ops (scale's is a scale):
    `maker(op, g)` returns a list of `GradOp`s, where `g.out("Out")` / `g.inp("X")` give
    the gradient variable names (see program/backward.py)."""
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    type: str | None = None
    attrs: dict | None = None
    infer: Callable | None = None
    like: dict | None = None
    maker: Callable | None = None

    def differentiable_inputs(self) -> tuple[str, ...]:
        return tuple(s[:-len(GRAD_SUFFIX)] for s in self.outputs)

    def output_grads_read(self) -> tuple[str, ...]:
        return tuple(s[:-len(GRAD_SUFFIX)] for s in self.inputs if s.endswith(GRAD_SUFFIX))


@dataclass
class GradOp:
    """One op a gradient maker emits (program/backward.py appends it as a backward op)."""
    type: str
    inputs: dict[str, list[str]]
    outputs: dict[str, list[str]]
    attrs: dict = field(default_factory=dict)
    forward: Any = None  # the forward Operator it differentiates (for its source line)


def grad_op(inputs, outputs, *, type=None, attrs=None, infer=None, like=None) -> GradRule:
    """A gradient rule that emits one `<op>_grad` op (see GradRule)."""
    return GradRule(tuple(inputs), tuple(outputs), type, attrs, infer, like)


def grad_maker(fn: Callable, *, inputs=(), outputs=()) -> GradRule:
    """A gradient rule written as a function emitting ops (see GradRule.maker). `inputs`
    lists the output gradients it reads, `outputs` the input gradients it writes."""
    return GradRule(tuple(inputs), tuple(outputs), maker=fn)

# Attributes every op may carry (PaddlePaddle adds them to every op; our builder emits them).
COMMON_ATTRS: dict[str, AttrSpec] = {
    "op_role": INT(0),
    "op_role_var": STRINGS([]),
    "op_namescope": STRING("/"),
    "op_callstack": STRINGS([]),
    "op_device": STRING(""),
    "with_quant_attr": BOOL(False),
}
COMMON_ATTRS = {n: replace(s, name=n) for n, s in COMMON_ATTRS.items()}

# PaddlePaddle's extra attributes (kernel-library switches, fusion fields, quantization
# scales, distributed-training hints) that files written by PaddlePaddle carry on many ops.
# Any op may carry them: the hints with any value, the fusion fields and scales only at
# their neutral value, or where Keel writes out what they ask for (program/legacy.py;
# the verifier reports the rest).
RUNTIME_EXTRA_ATTRS = legacy.HINTS | frozenset(legacy.EXTRA_ATTRS)


@dataclass
class OpDef:
    type: str
    inputs: tuple[Slot, ...]
    outputs: tuple[Slot, ...]
    attrs: dict[str, AttrSpec]
    # Runtime-only attributes of PaddlePaddle (use_mkldnn, use_cudnn, ...): accepted when
    # reading files, never needed by our kernels, not emitted by our builder.
    extra_attrs: dict[str, AttrSpec]
    infer: Callable | None
    grad: Any = None  # gradient rule; None: not written yet; NOT_DIFFERENTIABLE: none exists
    doc: str = ""
    grad_of: str = ""  # for a gradient op: the forward op type it differentiates
    # What the op reads or writes as a level-1 LoD (PaddlePaddle's per-sequence split of a
    # tensor's first dim), where its lengths slot is empty: {data slot: lengths slot}. An
    # input pair: the data variable's LoD, when it has one, stands in for the lengths input
    # (roi_align's ROIs -> RoisNum). An output pair: with an input's LoD read, the lengths
    # are written as the data output's LoD (distribute_fpn_proposals). executor/lod.py.
    lod_lengths: dict[str, str] = field(default_factory=dict)
    input_slots: dict[str, Slot] = field(init=False, repr=False)
    output_slots: dict[str, Slot] = field(init=False, repr=False)

    def __post_init__(self):
        self.input_slots = {s.name: s for s in self.inputs}
        self.output_slots = {s.name: s for s in self.outputs}

    def attr_spec(self, name: str) -> AttrSpec | None:
        return self.attrs.get(name) or COMMON_ATTRS.get(name) or self.extra_attrs.get(name)

    def default_attrs(self) -> dict[str, Any]:
        """The non-extra attributes that have defaults (what a writer must emit)."""
        return {n: s.default for n, s in self.attrs.items() if not s.required}


_REGISTRY: dict[str, OpDef] = {}


def _slot(s) -> Slot:
    return s if isinstance(s, Slot) else Slot(s)


def define(type: str, *, inputs=(), outputs=(), attrs=None, extra_attrs=None,
           infer: Callable | None = None, grad=None, doc: str = "", grad_of: str = "",
           lod_lengths=None) -> OpDef:
    """Register the definition of op `type`. Each type is defined exactly once."""
    if type in _REGISTRY:
        raise ValueError(f"op {type!r} is defined twice")
    opdef = OpDef(
        type=type,
        inputs=tuple(_slot(s) for s in inputs),
        outputs=tuple(_slot(s) for s in outputs),
        attrs={n: replace(s, name=n) for n, s in (attrs or {}).items()},
        extra_attrs={n: replace(s, name=n) for n, s in (extra_attrs or {}).items()},
        infer=infer,
        grad=grad,
        doc=doc,
        grad_of=grad_of,
        lod_lengths=dict(lod_lengths or {}),
    )
    _REGISTRY[type] = opdef
    if isinstance(grad, GradRule) and grad.maker is None:
        _define_grad_op(opdef, grad)
    return opdef


def _define_grad_op(fwd: OpDef, rule: GradRule) -> None:
    """Register the `<type>_grad` op a GradRule emits: slots derived from the forward op's,
    the forward attributes, and a shape rule giving each input gradient its variable's
    shape."""
    fwd_slots = {**fwd.output_slots, **fwd.input_slots}

    def in_slot(name):
        base = name[:-len(GRAD_SUFFIX)] if name.endswith(GRAD_SUFFIX) else name
        src = fwd_slots.get(base)
        if src is None:
            raise ValueError(f"{fwd.type}: gradient input {name!r} names no slot of the op")
        return Slot(name, duplicable=src.duplicable, dispensable=src.dispensable)

    def out_slot(name):
        src = fwd.input_slots.get(name[:-len(GRAD_SUFFIX)])
        if src is None or not name.endswith(GRAD_SUFFIX):
            raise ValueError(f"{fwd.type}: gradient output {name!r} is not the gradient of an input")
        return Slot(name, duplicable=src.duplicable, dispensable=True)

    like = {o: o[:-len(GRAD_SUFFIX)] for o in rule.outputs}
    like.update(rule.like or {})
    missing = [o for o, src in like.items() if src not in rule.inputs]
    if rule.infer is None and missing:
        raise ValueError(f"{fwd.type}: gradient op cannot infer {missing}: give `like` or `infer`")
    define(rule.type or fwd.type + "_grad",
           inputs=[in_slot(n) for n in rule.inputs], outputs=[out_slot(n) for n in rule.outputs],
           attrs={**fwd.attrs, **(rule.attrs or {})}, extra_attrs=fwd.extra_attrs,
           infer=rule.infer or _like_infer(like), grad=NOT_DIFFERENTIABLE,
           doc=f"The gradient of {fwd.type}.", grad_of=fwd.type,
           # the gradient reads the LoDs its forward op read, of the inputs it is given too
           lod_lengths={d: n for d, n in fwd.lod_lengths.items()
                        if d in fwd.input_slots and d in rule.inputs and n in rule.inputs})


def _like_infer(like: dict):
    def infer(ctx):
        for out, src in like.items():
            names = ctx.output_names(out)
            sources = ctx.inputs(src)
            for name, var in zip(names, sources):
                if name and name != "@EMPTY@":
                    ctx.set_var(name, var.shape, var.dtype)
    return infer


def get(type: str) -> OpDef:
    """The definition of op `type`; UnknownOpError (with the nearest known names) if none."""
    try:
        return _REGISTRY[type]
    except KeyError:
        raise UnknownOpError(f"unknown op type{suggest(type)}", op_type=type) from None


def lookup(type: str) -> OpDef | None:
    return _REGISTRY.get(type)


def suggest(type: str) -> str:
    """` (did you mean a, b?)`: up to three registered types close to `type`. Unless `type`
    is itself a gradient op type (`..._grad`), a gradient op that comes close stands for
    its forward op (`pool3d_fancy`: pool2d, not pool2d_grad)."""
    close = difflib.get_close_matches(type, _REGISTRY.keys(), n=6, cutoff=0.6)
    if "_grad" not in type:
        close = [_REGISTRY[name].grad_of or name for name in close]
    close = list(dict.fromkeys(close))[:3]
    return f" (did you mean {', '.join(close)}?)" if close else ""


def all_ops() -> dict[str, OpDef]:
    return dict(_REGISTRY)
