"""The kernel table: op type -> a pure function of arrays and attributes.

A kernel is written once against an array module `xp` (numpy on the CPU, cupy on a GPU)
and never imports `program` or `executor`. Its signature names what it consumes:

    @kernel("matmul_v2", inputs=["X", "Y"], outputs=["Out"], attrs=["trans_x", "trans_y"])
    def matmul_v2(xp, x, y, *, trans_x, trans_y):
        ...
        return out

- inputs arrive positionally in the order of `inputs` (a duplicable slot as a list, an
  empty optional slot as None);
- attrs arrive as keywords (an attribute whose name is a Python keyword, like `lambda`,
  is passed as `lambda_`);
- the result is one array for one output, else a tuple in the order of `outputs` (None
  for an output the op does not produce);
- `rng=True` kernels also get `rng=`, the executor's random stream (its `random`,
  `standard_normal` and `integers` are numpy's and cupy's Generator methods of those
  names, each call one draw), or a plain Generator, for random ops and dropout;
- a kernel with a keyword parameter `need` gets the set of output slots the op really
  binds, so a gradient kernel can skip work nobody reads (conv2d_grad's Input@GRAD for
  the first layer);
- a kernel with a keyword parameter `counts` gets {output slot: number of variables the
  op binds there}, for a duplicable output whose length only the op knows (select_output);
- a kernel listing one of the op's output slots among its `inputs` receives that
  variable's current value (None before anything wrote it): write_to_array's array;
- `specialize(xp, attrs, present, donated)` (optional) returns a faster callable for one
  op, or None: `attrs` are the bound attribute values, `present` gives per input slot the
  declared numpy dtype of what the op binds there (None: the slot is empty; the callable
  takes just the bound ones, in order), and `donated` says the first
  input is an intermediate nobody reads afterwards, so the result may be written into
  its buffer (`out=`) if the array owns its memory (`x.base is None`: a view, such as
  elementwise_add_grad's X@GRAD of Out@GRAD, may share its buffer with a live value),
  or be a view of it (the reshape family: kernels/tensor.py `_view_when_donated`).
  For a kernel with several outputs the hook is consulted only when the op binds just
  the first, and the callable returns that one array. Kernels never return an input object itself. The executor uses it for the cheap elementwise ops where the
  generic call's overhead and a fresh allocation cost as much as the arithmetic. Where
  the fast path is a single ufunc call, `specialize` returns a `UfuncCall` instead of a
  callable, and the executor's generated code makes that call itself (one Python call
  per op fewer). A callable with the attribute named KEEPS_INPUTS set true never writes
  into its inputs, donated or not: the executor then runs it beside the donated input's
  other readers instead of after them;
- `inplace` maps an output slot to the input slot whose buffer the kernel may reuse
  (optimizer ParamOut/Param, batch_norm MeanOut/Mean): the executor hands over the
  array and the kernel may write into it.

The executor resolves the kernel, binds the attributes once when it compiles a program,
and at run time the per-op cost is one Python call, a line of the block's generated
function.
"""
from __future__ import annotations

import inspect
import keyword
import threading
from dataclasses import dataclass, field
from typing import Callable

# The attribute a specialized callable sets true when it never writes into its inputs.
KEEPS_INPUTS = "keeps_inputs"


@dataclass(frozen=True)
class KernelDef:
    op_type: str
    fn: Callable
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple[str, ...] = ()
    rng: bool = False
    inplace: dict = field(default_factory=dict)
    specialize: Callable | None = None

    def input_params(self) -> list[str]:
        """The kernel function's parameter names for its inputs, in slot order."""
        params = list(inspect.signature(self.fn).parameters)[1:]  # skip xp
        return params[:len(self.inputs)]

    @property
    def takes_need(self) -> bool:
        return "need" in inspect.signature(self.fn).parameters

    @property
    def takes_counts(self) -> bool:
        return "counts" in inspect.signature(self.fn).parameters

    def kwarg(self, attr: str) -> str:
        """The keyword under which attribute `attr` is passed."""
        return attr + "_" if keyword.iskeyword(attr) else attr


@dataclass(frozen=True)
class UfuncCall:
    """A specialized op that is one ufunc call on its first input x: `ufunc(x)`,
    `ufunc(x, operand)` with a constant operand, or `ufunc(x, y)` with the op's second
    input y when `binary`; written into x's buffer when `into_input` (x donated), x owns
    its memory and the result has x's shape. Only for calls whose result has x's dtype."""
    ufunc: Callable
    operand: object = None
    into_input: bool = False
    binary: bool = False

    def __call__(self, x, y=None):
        """The same call, for callers that do not inline it (a 0-d result is a 0-d array,
        not a numpy scalar)."""
        args = (x, y) if self.binary else (x,) if self.operand is None else (x, self.operand)
        if self.into_input and x.base is None:
            try:
                return self.ufunc(*args, out=x)
            except ValueError:  # y broadcasts x to a bigger shape
                pass
        zero_d = x.ndim == 0 and (y is None or y.ndim == 0)
        return self.ufunc(*args, out=x.copy() if zero_d else None)


_KERNELS: dict[str, KernelDef] = {}

# The op families (kernels/__init__.py's load_families) are imported at the first lookup, not
# with the package: a script that builds or loads programs without running them, and
# `import keel`, skip ~100 ms of kernel modules.
_families_lock = threading.RLock()   # re-entrant: a family may look a kernel up while being imported
_families_loaded = False


def _load_families() -> None:
    global _families_loaded
    with _families_lock:
        if not _families_loaded:
            import keel.kernels as kernels
            kernels.load_families()
            _families_loaded = True


def kernel(op_type: str, *, inputs, outputs, attrs=(), rng: bool = False, inplace=None,
           specialize=None):
    """Register the decorated function as the kernel of `op_type`."""
    def register(fn):
        if op_type in _KERNELS:
            raise ValueError(f"kernel for {op_type!r} registered twice")
        _KERNELS[op_type] = KernelDef(op_type, fn, tuple(inputs), tuple(outputs), tuple(attrs), rng,
                                      dict(inplace or {}), specialize)
        return fn
    return register


def get(op_type: str) -> KernelDef | None:
    if not _families_loaded:
        _load_families()
    return _KERNELS.get(op_type)


def all_kernels() -> dict[str, KernelDef]:
    if not _families_loaded:
        _load_families()
    return dict(_KERNELS)
