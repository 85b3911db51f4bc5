"""Binding a kernel to one op: attributes resolved once, then a plain call per run."""
from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from keel.kernels import registry as kernel_registry
from keel.program.ops import registry as op_registry


class MissingKernelError(LookupError):
    pass


def bind(op_type: str, attrs: dict, xp=np, rng=None, need=None, counts=None) -> tuple[Callable, kernel_registry.KernelDef]:
    """Return (fn, kdef): `fn(*inputs)` runs the kernel with the op's attributes (registry
    defaults filled in for any the op does not carry). `need`: the output slots the op
    binds (default: all), for kernels that skip the others; `counts`: {output slot: number
    of variables bound}, for kernels that take it."""
    kdef = kernel_registry.get(op_type)
    if kdef is None:
        raise MissingKernelError(f"no kernel for op type {op_type!r}")
    opdef = op_registry.lookup(op_type)
    bound = {}
    for name in kdef.attrs:
        if name in attrs:
            value = attrs[name]
        else:
            spec = opdef.attr_spec(name) if opdef else None
            if spec is None or spec.required:
                raise KeyError(f"{op_type}: attribute {name!r} is required by the kernel but not set")
            value = spec.default
        bound[kdef.kwarg(name)] = value
    if kdef.rng:
        bound["rng"] = rng
    if kdef.takes_need:
        bound["need"] = frozenset(kdef.outputs if need is None else need)
    if kdef.takes_counts:
        bound["counts"] = dict(counts or {})
    return functools.partial(kdef.fn, xp, **bound), kdef


def specialize(kdef, attrs: dict, present: tuple, donated: bool, xp=np):
    """The kernel's specialized callable for one op (see kernels/registry.py), or None."""
    opdef = op_registry.lookup(kdef.op_type)
    values = {}
    for name in kdef.attrs:
        if name in attrs:
            values[name] = attrs[name]
        else:
            spec = opdef.attr_spec(name) if opdef else None
            if spec is None or spec.required:
                return None
            values[name] = spec.default
    return kdef.specialize(xp, values, present, donated)


def call_kernel(op_type: str, inputs: dict, attrs: dict | None = None, xp=np, rng=None) -> dict:
    """Run one kernel outside any program (tests, constant folding): slot -> array(s) in,
    slot -> array(s) out."""
    fn, kdef = bind(op_type, attrs or {}, xp, rng)
    result = fn(*[inputs.get(slot) for slot in kdef.inputs])
    if len(kdef.outputs) == 1:
        result = (result,)
    return {slot: value for slot, value in zip(kdef.outputs, result) if value is not None}


