"""The eager engine: ops run as they are called, and a tape records what backward needs.

Eager mode is a second way to run the ops a program holds, not a second framework: a
layer function appends its op to `EagerBlock`, which runs the op's kernel at once
(kernels/, bound as the executor binds them) on the input Tensors' arrays. Where an input
needs a gradient, the op is recorded on a tape. `backward()` walks the tape from the last
op back and asks each op's gradient rule (program/ops/registry.py, the rules that
program/backward.py appends to static programs) for its gradient ops, which it runs with
the same kernels. So an eager gradient is the static program's, bit for bit.

Memory: each tape entry holds its input and output Tensors until backward has run its
gradient ops; then (without retain_graph) it lets them go, so activations are freed as
backward passes them.
"""
from __future__ import annotations

import contextlib
import functools
import itertools
import weakref

import numpy as np

from keel.executor import eager_places
from keel.executor.kernel_call import bind
from keel.executor.random_state import RandomState
from keel.executor.place import default_place
from keel.program import attrs as attr_codec, callsite, dtypes, dygraph
from keel.program.amp.eager import cast_inputs
from keel.program.backward import EMPTY, GradNames, _make_default
from keel.program.block import Block
from keel.program.errors import OpError
from keel.program.layers.math import scalar_as_scale
from keel.program.ops import registry
from keel.program.ops.registry import GRAD_SUFFIX, NOT_DIFFERENTIABLE, GradRule
from keel.program.tensor import Tensor
from keel.program.variable import Variable


_FAST_DTYPES = frozenset(dtypes.to_code(d) for d in ("float16", "float32", "float64"))
_ELEMENTWISE = frozenset({"elementwise_add", "elementwise_sub", "elementwise_mul", "elementwise_div"})


class EagerError(OpError):
    """An eager op or backward failed; names the op and the user's line."""


def _freeze(value):
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def _lookup(cache: dict, op_type: str, attrs: dict, rest: tuple):
    """(key, what `cache` holds for the op type, attributes and `rest`, or None). The
    attributes key as their items when all are hashable (the common case, the cheapest),
    frozen when a list is among them; with an array among them the key is None (bound for
    this call only)."""
    key = (op_type, tuple(attrs.items()), *rest)
    try:
        return key, cache.get(key)
    except TypeError:  # a list among the attribute values: most often of numbers (strides)
        pass
    for freeze in (_freeze_lists, _freeze):
        key = (op_type, freeze(attrs), *rest)
        try:
            return key, cache.get(key)
        except TypeError:  # a nested list; then an array
            continue
    return None, None


def _freeze_lists(attrs: dict) -> tuple:
    """The attributes as items, their lists as tuples (one level: _freeze goes deeper)."""
    return tuple([(k, tuple(v) if type(v) is list else v) for k, v in attrs.items()])


def _remember(cache: dict, key, value):
    """`value` kept under `key` (None: not kept); the cache is bounded, so a loop using ever
    new attributes (scaling by ever new numbers) does not grow it without end."""
    if key is not None:
        if len(cache) > 8192:
            cache.clear()
        cache[key] = value
    return value


class _Node:
    """One recorded op: what its gradient rule reads (inputs and outputs by slot), and the
    inputs' versions when it read them, in the order of `inputs` (a tuple: the cheapest
    record, made once per op)."""
    __slots__ = ("type", "attrs", "inputs", "outputs", "seq", "versions", "released")

    def __init__(self, type_, attrs, inputs, outputs, seq, versions=None):
        self.type, self.attrs, self.inputs, self.outputs, self.seq = type_, attrs, inputs, outputs, seq
        self.versions = versions if versions is not None else tuple(
            [t._version for ts in inputs.values() for t in ts])
        self.released = False


class _OpView:
    """What a gradient rule reads of an op (program/operator.py's reading methods), over
    a tape entry: variable names are the tensors' tape names."""

    def __init__(self, node: _Node, names: "_Names"):
        self._node, self._names = node, names
        self.type = node.type
        self.attrs = node.attrs
        self.opdef = registry.lookup(node.type)
        self.callstack: list[str] = []
        self.callsite = None

    @property
    def block(self):
        """Itself (cast's rule looks its input up: find_var). A property, not an attribute:
        a view referring to itself would live until the cyclic GC ran, and with it, through
        _Names, every tensor of the backward pass (a CNN step's RSS grew 80 -> 256 MB)."""
        return self

    def input(self, slot):
        return [self._names.of(t) for t in self._node.inputs.get(slot, ())]

    def output(self, slot):
        return [self._names.of(t) for t in self._node.outputs.get(slot, ())]

    def attr(self, name, default=None):
        return self.attrs.get(name, default)

    def find_var(self, name):
        return self._names.tensor(name)


class _Names:
    """Tape names for the tensors of one backward pass (`t<k>`; gradients `t<k>@GRAD`)."""

    def __init__(self):
        self._by_id: dict[int, str] = {}
        self._tensors: dict[str, Tensor] = {}
        self._count = itertools.count()  # not len(): forget() shrinks the tables

    def of(self, t: Tensor) -> str:
        name = self._by_id.get(id(t))
        if name is None:
            name = self._by_id[id(t)] = f"t{next(self._count)}"
            self._tensors[name] = t
        return name

    def tensor(self, name: str):
        return self._tensors.get(name)

    def forget(self, t: Tensor) -> None:
        """Drop `t` (a released op's output: backward is done with it), so its memory goes
        as soon as nothing else holds it, not at the end of the pass."""
        name = self._by_id.pop(id(t), None)
        if name is not None:
            del self._tensors[name]


class EagerBlock:
    """The block layer functions append to in dynamic mode: `create_var` makes an empty
    Tensor, `append_op` runs the op. It is its own program (`x.block.program.current_block()`)."""
    idx = 0
    parent_idx = -1

    def __init__(self, engine: "Engine"):
        self._engine = engine
        self.program = self
        self.random_seed = 0

    def current_block(self):
        return self

    def global_block(self):
        return self

    def create_var(self, name=None, shape=None, dtype=None, persistable=False, stop_gradient=False, **_):
        return Tensor(None, dtype, name=name, stop_gradient=stop_gradient, persistable=persistable)

    def append_op(self, type, inputs=None, outputs=None, attrs=None, **_):
        return self._engine.run_op(type, inputs or {}, outputs or {}, attrs or {})

    def create_parameter(self, name, *args, **kwargs):
        raise RuntimeError(f"{name}: a layer function that creates parameters (static.nn.fc, ...) builds "
                           "a program; in eager mode use a Layer (nn.Linear, nn.Conv2D, ...), or build "
                           "inside program_guard / after keel.enable_static()")

    def find_var(self, name):
        return None

    def has_var(self, name) -> bool:
        return False

    def var(self, name):
        raise KeyError(f"eager mode has no variables by name ({name!r}): pass the Tensor itself")

    def _mutated(self):
        pass


class Engine:
    """Runs ops on Tensors and differentiates them (one per process; thread-safe tape order)."""

    def __init__(self):
        self.block = EagerBlock(self)
        self.grad_enabled = True
        self.rng = RandomState(np, 0)
        self._seq = itertools.count()
        self._calls: dict = {}       # (op type, attributes, array module, outputs) -> _Call
        self._grad_calls: dict = {}  # the same for gradient ops: (fn, kdef, input and output plans)
        self._operators: dict = {}   # the Python operators' common cases (operator())
        self._updaters = weakref.WeakKeyDictionary()  # optimizer -> its eager update plan

    # -- places ----------------------------------------------------------------------------
    @staticmethod
    def array_module(array):
        return np if isinstance(array, np.ndarray) or np.isscalar(array) else _cupy_of(array)

    place_of = staticmethod(eager_places.place_of_array)

    # Tensor.place / cpu() / cuda() / pin_memory() / to() (eager_places.py)
    tensor_place = staticmethod(eager_places.place_of)
    move = staticmethod(eager_places.moved)
    cuda_place = staticmethod(eager_places.cuda_place)

    @staticmethod
    def to(t: Tensor, args: tuple, kwargs: dict) -> Tensor:
        device, dtype = eager_places.to_arguments(args, kwargs)
        return eager_places.converted(t, device, dtype)

    @staticmethod
    def to_place(array, device):
        """`array` on `device` ("cpu", "gpu", "gpu:N" or a place): itself when it is there
        already, else a copy there."""
        from keel.executor.place import place_of_device
        place = place_of_device(device)
        if place.xp is np:
            return array if isinstance(array, np.ndarray) else array.get()
        with place.device_context():
            return place.xp.asarray(array)

    def as_array(self, data, like=None, dtype=None):
        xp = np if like is None else self.array_module(like)
        if isinstance(data, Tensor):
            data = data.value
        array = xp.asarray(data)
        if dtype is not None:
            array = array.astype(dtypes.to_numpy(dtypes.to_code(dtype)), copy=False)
        return array

    def seed(self, value: int) -> None:
        self.rng.seed(value)

    def optimizer_step(self, optimizer, params) -> None:
        """optimizer.step(): its update program run on the parameters (eager_update.py)."""
        updater = self._updaters.get(optimizer)
        if updater is None:
            from keel.executor.eager_update import EagerUpdater
            updater = self._updaters[optimizer] = EagerUpdater()
        updater.step(optimizer, params)

    def optimizer_state(self, optimizer) -> dict:
        """name -> array of the optimizer's eager state (accumulators, master weights)."""
        updater = self._updaters.get(optimizer)
        return {} if updater is None else updater.state()

    def load_optimizer_state(self, optimizer, state: dict) -> None:
        """Put what `state` (name -> array) names into the state the optimizer holds now;
        the rest stays in `state` for the plan a later step builds."""
        updater = self._updaters.get(optimizer)
        if updater is not None:
            updater.load(state)

    # -- running ops -----------------------------------------------------------------------
    def run_op(self, op_type: str, inputs: dict, outputs: dict, attrs: dict):
        if dygraph.autocast_state is not None:   # amp.auto_cast: inputs cast by the op lists
            inputs = cast_inputs(op_type, inputs, dygraph.autocast_state, self._cast)
        # (a slot holding one Tensor, the common case, skips _tensors' checks)
        ins = {slot: [v] if type(v) is Tensor else _tensors(op_type, slot, v) for slot, v in inputs.items()}
        outs = {slot: [v] if type(v) is Tensor else _tensors(op_type, slot, v) for slot, v in outputs.items()}
        device = next((t._value for ts in ins.values() for t in ts
                       if t._value is not None and type(t._value) is not np.ndarray), None)
        xp = np if device is None or np.isscalar(device) else self.array_module(device)
        layout = tuple((slot, len(ts)) for slot, ts in outs.items())
        key, call = _lookup(self._calls, op_type, attrs, (xp, layout))
        if call is None:
            call = _remember(self._calls, key, _Call(self, op_type, attrs, xp, layout))
        args = []
        for slot, read_back, duplicable in call.in_plan:
            ts = outs.get(slot) if read_back else ins.get(slot)
            if not ts:
                args.append([] if duplicable else None)
            elif read_back:  # an output's current value (None before anything wrote it)
                args.append([t._value for t in ts] if duplicable else ts[0]._value)
            elif duplicable:
                args.append([t.value if t._value is None else t._value for t in ts])
            else:  # .value: a parameter's first read runs its initializer; an empty tensor is an error
                args.append(ts[0].value if ts[0]._value is None else ts[0]._value)
        if xp is not np:  # host inputs of a GPU op (constants, labels) go to its device, as in PaddlePaddle
            args = [_to_device(xp, a) for a in args]
        try:
            result = call.fn(*args)
        except Exception as e:  # noqa: BLE001 - every kernel failure gets the op and the user's line
            raise _op_error(op_type, ins, e) from e
        if call.single_output:
            result = (result,)
        if not any(ins.values()) and default_place().device != "cpu":
            # an op of no input (a parameter's initializer, zeros, rand) runs on the CPU, the
            # same random stream whatever the device, and its results go to set_device's place
            result = _onto(default_place(), result)
        for (slot, duplicable), value in zip(call.out_plan, result):
            ts = outs.get(slot)
            if not ts or value is None:
                continue
            if duplicable or isinstance(value, list) and len(ts) > 1:
                for t, v in zip(ts, value):
                    t._set_value_from_op(v)
            else:
                ts[0]._set_value_from_op(value)
        self._record(call, ins, outs)
        return None

    def operator(self, x: Tensor, other, op_type: str, reverse: bool):
        """`x <op> other` for a Python operator in its common cases, or None for the caller to
        take the layer path (program/layers/math.py binary_operator). The ops are the ones
        that path appends, bound the same way (the _Call cache): a float tensor and a
        number make one scale op; two tensors of one float dtype, the elementwise op."""
        value = x._value
        if value is None or x._dtype not in _FAST_DTYPES or dygraph.autocast_state is not None:
            return None
        kind = type(other)
        if kind is float or kind is int:
            # keyed on the number itself (its text for a zero: -0.0 == 0.0 but scales differently)
            key = (op_type, other if other else repr(float(other)), reverse, type(value))
            call = self._operators.get(key)
            if call is None:
                as_scale = scalar_as_scale(op_type, float(other), reverse)
                if as_scale is None:
                    return None
                call = _remember(self._operators, key, _Call(self, "scale", {"scale": as_scale[0],
                                                                             "bias": as_scale[1]},
                                                             self.array_module(value), (("Out", 1),)))
            result, a, b = call.fn(value, None, None), x, None
        elif isinstance(other, Tensor) and other._dtype == x._dtype and other._value is not None \
                and op_type in _ELEMENTWISE:
            a, b = (other, x) if reverse else (x, other)
            key = (op_type, type(value))
            call = self._operators.get(key)
            if call is None:
                call = _remember(self._operators, key, _Call(self, op_type, {"axis": -1},
                                                             self.array_module(value), (("Out", 1),)))
            try:
                result = call.fn(a._value, b._value)
            except Exception:  # noqa: BLE001 - the layer path raises the op's error with the user's line
                return None
        else:
            return None
        out = Tensor.__new__(Tensor)
        out._value = result if type(result) is np.ndarray or not isinstance(result, np.generic) \
            else np.asarray(result)
        out._dtype = x._dtype
        if self.grad_enabled and not (a._stop_gradient and (b is None or b._stop_gradient)) \
                and call.wanted is not None:
            # _record's work for this one case (the rule carries Out's gradient; the dtype is
            # floating), written out: this line runs once per operator in a training loop
            out._stop_gradient = False
            if b is None:
                out._node = _Node(call.op_type, call.attrs, {"X": [a]}, {"Out": [out]}, next(self._seq),
                                  (a._version,))
            else:
                out._node = _Node(call.op_type, call.attrs, {"X": [a], "Y": [b]}, {"Out": [out]},
                                  next(self._seq), (a._version, b._version))
        else:
            out._stop_gradient = True
        return out

    def _cast(self, t: Tensor, dtype: int) -> Tensor:
        """`t` cast to `dtype` by a (recorded) cast op."""
        out = Tensor(None, dtype)
        self.run_op("cast", {"X": [t]}, {"Out": [out]}, {"in_dtype": t._dtype, "out_dtype": dtype})
        return out

    def _bind(self, op_type, attrs, xp, need, counts):
        """(kernel with its attributes bound, its KernelDef, the attributes as a program holds
        them). The attributes are checked and completed as Block.append_op does (defaults
        filled in, FLOAT rounded to float32), so the kernel and the gradient rule see what
        they see in a program."""
        where = callsite.describe(callsite.user_frame_lines())
        opdef = registry.get(op_type)
        values = Block._check_attrs(opdef, dict(attrs), where)
        for name, spec in opdef.attrs.items():  # defaults as a program file stores them (float32)
            if name not in attrs and values[name] is not None and not spec.required:
                values[name] = attr_codec.check(spec.type, values[name])
        fn, kdef = bind(op_type, values, xp, self.rng, need=need, counts=dict(counts))
        return fn, kdef, values

    def _record(self, call: "_Call", ins, outs) -> None:
        if call.wanted is None or not self.grad_enabled or not any(
                not t._stop_gradient for s in (call.wanted or ins) for t in ins.get(s, ())):
            _no_grad(outs)
            return
        node = _Node(call.op_type, call.attrs, ins, outs, next(self._seq))  # attrs: never changed after binding
        carried = call.carried if call.carried is not None else tuple(outs)
        for slot, ts in outs.items():
            for t in ts:
                if slot in carried and dtypes.is_floating(t._dtype) or slot in carried and _complex(t):
                    t._stop_gradient, t._node = False, node
                else:
                    t._stop_gradient = True

    # -- backward --------------------------------------------------------------------------
    def backward(self, roots, root_grads, retain_graph=False) -> None:
        grads = self._differentiate(roots, root_grads, retain_graph, keep=())
        for t, g in grads.items():
            if t.grad is None:
                t.grad = Tensor(g, t._dtype)
            elif t._grad_cleared:   # clear_gradient ran: the gradient replaces its zeros, as PaddlePaddle's
                t.grad._value = g
                t._grad_cleared = False
            else:
                t.grad._value = t.grad.value + g

    def grad(self, outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
             allow_unused=False, no_grad_vars=None):
        """keel.grad: gradients of `outputs` with respect to `inputs`, returned (not
        accumulated into .grad)."""
        if create_graph:
            raise NotImplementedError("keel.grad(create_graph=True): gradients of gradients are not "
                                      "recorded in eager mode")
        outputs, inputs = _listed(outputs), _listed(inputs)
        grad_outputs = _listed(grad_outputs) if grad_outputs is not None else [None] * len(outputs)
        blocked = {id(t) for t in _listed(no_grad_vars or [])}
        grads = self._differentiate(outputs, grad_outputs, bool(retain_graph), keep=inputs, blocked=blocked,
                                    leaves=False)
        by_id = {id(t): g for t, g in grads.items()}
        result = []
        for t in inputs:
            g = by_id.get(id(t))
            if g is None and not allow_unused:
                raise RuntimeError(f"keel.grad: input {t.name} is not reached from the outputs "
                                   "(pass allow_unused=True to get None for it)")
            result.append(None if g is None else Tensor(g, t._dtype))
        return result

    def _differentiate(self, roots, root_grads, retain_graph, keep, blocked=frozenset(), leaves=True):
        """Run the gradient ops of every recorded op between the roots and the leaves;
        return {tensor: gradient array} for the leaves (or, with leaves=False, for `keep`)."""
        names = _Names()
        grads: dict[str, object] = {}   # gradient name -> array
        for root, seed in zip(roots, root_grads):
            if root._stop_gradient:
                raise RuntimeError(f"backward: tensor {root.name} does not need a gradient (stop_gradient=True: "
                                   "nothing it was computed from needs one)")
            if seed is None:  # ones, for a non-scalar root too (as PaddlePaddle seeds it)
                value = self.array_module(root.value).ones(root.value.shape, root.value.dtype)
            else:
                value = self.as_array(seed, like=root.value, dtype=root._dtype)
                if tuple(value.shape) != tuple(root.value.shape):
                    raise ValueError(f"backward: grad_tensor shape {list(value.shape)} does not match "
                                     f"{root.name}'s {root.shape}")
            _accumulate(grads, names.of(root) + GRAD_SUFFIX, value)
        order = self._tape(roots)
        keep_names = {names.of(t) for t in keep}
        for node in order:
            self._run_gradient(node, names, grads, blocked)
            _release(node, names, grads, keep_names, keep_tape=retain_graph)
        result = {}
        for name, g in grads.items():
            t = names.tensor(name[:-len(GRAD_SUFFIX)]) if name.endswith(GRAD_SUFFIX) else None
            if t is None:
                continue
            if leaves and not (t._node is None and not t._stop_gradient):
                continue
            if not leaves and names.of(t) not in keep_names:
                continue
            result[t] = _run_hooks(t, g)
        return result

    def _tape(self, roots) -> list[_Node]:
        """The recorded ops the roots depend on, last first."""
        seen, stack = {}, [r._node for r in roots if r._node is not None]
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            if node.released:
                raise RuntimeError(f"backward through op {node.type} a second time: its tape entry was freed by "
                                   "the first backward; call backward(retain_graph=True) the first time")
            seen[id(node)] = node
            stack.extend(t._node for ts in node.inputs.values() for t in ts if t._node is not None)
        return sorted(seen.values(), key=lambda n: n.seq, reverse=True)

    def _run_gradient(self, node: _Node, names: _Names, grads: dict, blocked) -> None:
        rule, reads, differentiable = _rule_slots(node.type)
        for t, version in zip([t for ts in node.inputs.values() for t in ts], node.versions):
            if version != t._version:
                raise EagerError(f"input {t.name} was changed in place after this op read it, and its "
                                 "gradient needs the old value (clone it before changing it)", op_type=node.type)
        view = _OpView(node, names)
        out_grads = {}
        zero_fills = []
        for slot in reads:
            listed = []
            for t in node.outputs.get(slot, ()):
                g = names.of(t) + GRAD_SUFFIX
                if g not in grads:
                    zero_fills.append(t)
                elif t._hooks:
                    grads[g] = _run_hooks(t, grads[g])
                listed.append(g)
            out_grads[slot] = listed
        for t in zero_fills:
            grads[names.of(t) + GRAD_SUFFIX] = self.array_module(t.value).zeros_like(t.value)
        in_grads = {slot: [names.of(t) + GRAD_SUFFIX if not t._stop_gradient and id(t) not in blocked else ""
                           for t in node.inputs.get(slot, ())]
                    for slot in differentiable}
        g = GradNames(out_grads, in_grads)
        specs = rule.maker(view, g) if rule.maker else [_make_default(view, rule, g)]
        scratch: dict[str, object] = {}
        for spec in specs:
            self._run_grad_op(spec, names, grads, scratch)

    def _run_grad_op(self, spec, names: _Names, grads: dict, scratch: dict) -> None:
        def value(name):
            if name in scratch:
                return scratch[name]
            if name.endswith(GRAD_SUFFIX) and name in grads:
                return grads[name]
            t = names.tensor(name)
            if t is None:
                raise EagerError(f"gradient op {spec.type} reads {name!r}, which backward has not computed",
                                 op_type=spec.type)
            return t._value  # None for an output the forward kernel did not produce (ReserveSpace)

        opdef = registry.get(spec.type)
        outs = {slot: [n for n in ns] for slot, ns in spec.outputs.items()}
        arrays = {slot: [value(n) for n in ns if n and n != EMPTY] for slot, ns in spec.inputs.items()}
        xs = [a for vs in arrays.values() for a in vs if a is not None and not isinstance(a, list)]
        xp = self.array_module(xs[0]) if xs else np
        need = tuple(sorted(s for s, ns in outs.items() if any(n and n != EMPTY for n in ns)))
        counts = tuple(sorted((s, len(ns)) for s, ns in outs.items()))
        key, found = _lookup(self._grad_calls, spec.type, spec.attrs, (xp, need, counts))
        if found is None:
            fn, kdef, _ = self._bind(spec.type, spec.attrs, xp, need, counts)
            plans = ([(slot, _duplicable(opdef, slot)) for slot in kdef.inputs],
                     [(slot, _duplicable(opdef, slot)) for slot in kdef.outputs])
            found = _remember(self._grad_calls, key, (fn, kdef, *plans))
        fn, kdef, in_plan, out_plan = found
        args = []
        for slot, duplicable in in_plan:
            vs = arrays.get(slot)
            if not vs:
                args.append([] if duplicable else None)
            else:
                args.append(vs if duplicable else vs[0])
        try:
            result = fn(*args)
        except Exception as e:  # noqa: BLE001
            raise EagerError(f"gradient op {spec.type} failed: {type(e).__name__}: {e}", op_type=spec.type) from e
        if len(kdef.outputs) == 1:
            result = (result,)
        for (slot, duplicable), produced in zip(out_plan, result):
            ns = outs.get(slot, ())
            if produced is None or not ns:
                continue
            values = produced if duplicable else [produced]
            for n, v in zip(ns, values):
                if not n or n == EMPTY or v is None:
                    continue
                if n.endswith(GRAD_SUFFIX) and names.tensor(n[:-len(GRAD_SUFFIX)]) is not None:
                    _accumulate(grads, n, v)
                else:
                    scratch[n] = v

    # -- no_grad -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def set_grad_enabled(self, enabled: bool):
        previous, self.grad_enabled = self.grad_enabled, bool(enabled)
        try:
            yield
        finally:
            self.grad_enabled = previous


class _Call:
    """What running one op type with given attributes on one array module needs, found once:
    the bound kernel, where each kernel argument comes from, and the gradient rule's slots."""
    __slots__ = ("op_type", "fn", "attrs", "in_plan", "out_plan", "single_output", "wanted", "carried")

    def __init__(self, engine: Engine, op_type: str, attrs: dict, xp, layout):
        opdef = registry.get(op_type)
        need = tuple(sorted(slot for slot, n in layout if n))
        self.op_type = op_type
        self.fn, kdef, self.attrs = engine._bind(op_type, attrs, xp, need, tuple(sorted(layout)))
        self.in_plan = [(slot, slot not in opdef.input_slots, _duplicable(opdef, slot)) for slot in kdef.inputs]
        self.out_plan = [(slot, _duplicable(opdef, slot)) for slot in kdef.outputs]
        self.single_output = len(kdef.outputs) == 1
        rule = opdef.grad
        # wanted: the inputs whose need of a gradient makes the op recorded (None: never;
        # () with no rule yet: any input, and backward says the rule is missing)
        self.wanted = None if rule is NOT_DIFFERENTIABLE else (
            rule.differentiable_inputs() if isinstance(rule, GradRule) else ())
        self.carried = rule.output_grads_read() if isinstance(rule, GradRule) else None


_RULES: dict = {}   # op type -> (its gradient rule, the output gradients it reads, its differentiable inputs)


def _rule_slots(op_type: str) -> tuple:
    """What backward asks of an op type's gradient rule, found once per rule (the registry's
    rule for the type, checked each time: a re-registered op gets its new rule)."""
    rule = registry.get(op_type).grad
    found = _RULES.get(op_type)
    if found is None or found[0] is not rule:
        if not isinstance(rule, GradRule):
            raise EagerError("has no gradient rule, so the loss cannot be differentiated through it "
                             "(compute its inputs under keel.no_grad() or detach them)", op_type=op_type)
        found = _RULES[op_type] = (rule, rule.output_grads_read(), rule.differentiable_inputs())
    return found


def _release(node: _Node, names: _Names, grads: dict, keep_names, keep_tape: bool) -> None:
    """Backward is done with `node`: its outputs' gradients are spent (kept in `.grad` where
    retain_grads asked) and freed, with retain_graph too; without it, the node lets go of
    its tensors, so each activation is freed once the last op that reads it has passed (a
    function of its own: a loop variable of the caller's would hold the last tensor)."""
    for ts in node.outputs.values():
        for t in ts:
            n = names.of(t)
            if n not in keep_names:
                g = grads.pop(n + GRAD_SUFFIX, None)
                if g is not None and t._retain_grad:
                    t.grad = Tensor(g, t._dtype)
                if not keep_tape:
                    names.forget(t)
    if not keep_tape:
        node.released = True
        node.inputs = node.outputs = {}


def _to_device(xp, arg):
    if isinstance(arg, np.ndarray):
        return xp.asarray(arg)
    if isinstance(arg, list):
        return [_to_device(xp, a) for a in arg]
    return arg


def _accumulate(grads: dict, name: str, value) -> None:
    """A gradient written by several ops is their sum, in the order backward wrote them
    (the `sum` op a static program appends adds its parts in that order)."""
    have = grads.get(name)
    if have is None:
        grads[name] = value
    else:
        total = have + value
        grads[name] = total if total.dtype == have.dtype else total.astype(have.dtype)


def _run_hooks(t: Tensor, g):
    for hook in list((t._hooks or {}).values()):
        changed = hook(Tensor(g, t._dtype))
        if changed is not None:
            g = changed.value if isinstance(changed, Tensor) else changed
    return g


def _no_grad(outs) -> None:
    """Outputs of an op nothing differentiates need no gradient (a parameter or buffer an
    op writes in place keeps its own setting)."""
    for ts in outs.values():
        for t in ts:
            if not t._persistable:
                t._stop_gradient = True


def _complex(t) -> bool:
    return t._dtype in (dtypes.to_code("complex64"), dtypes.to_code("complex128"))


def _duplicable(opdef, slot) -> bool:
    s = opdef.input_slots.get(slot) or opdef.output_slots.get(slot)
    return bool(s and s.duplicable)


def _tensors(op_type, slot, value) -> list:
    items = value if isinstance(value, (list, tuple)) else [value]
    out = []
    for item in items:
        if isinstance(item, Tensor):
            out.append(item)
        elif item is None:
            continue
        elif isinstance(item, Variable):
            raise EagerError(f"slot {slot} got the static Variable {item.name}: a Variable of a program is "
                             "used in eager mode; build inside program_guard (or after keel.enable_static()), "
                             "or pass Tensors (keel.to_tensor)", op_type=op_type,
                             callsite=callsite.describe(callsite.user_frame_lines()))
        else:
            raise EagerError(f"slot {slot} got a {type(item).__name__}, not a Tensor", op_type=op_type,
                             callsite=callsite.describe(callsite.user_frame_lines()))
    return out


def _op_error(op_type, ins, error) -> EagerError:
    shapes = ", ".join(f"{slot} {dtypes.name(t._dtype)}{t.shape}" for slot, ts in ins.items() for t in ts)
    return EagerError(f"failed on inputs {shapes}: {type(error).__name__}: {error}", op_type=op_type,
                      callsite=callsite.describe(callsite.user_frame_lines()))


def _listed(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _cupy_of(array):
    import cupy
    return cupy


ENGINE = Engine()
dygraph.register_engine(ENGINE)


def no_grad(func=None):
    """`with keel.no_grad():` or `@keel.no_grad()`: ops inside record nothing for backward.

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> with paddle.no_grad():
        ...     y = x * 2
        >>> y.stop_gradient
        True
        >>> @paddle.no_grad()
        ... def double(t):
        ...     return t * 2
        >>> double(x).stop_gradient
        True
    """
    if func is not None and callable(func):
        @functools.wraps(func)
        def wrapper(*args, **kwargs):
            with ENGINE.set_grad_enabled(False):
                return func(*args, **kwargs)
        return wrapper
    return _NoGrad()


class _NoGrad(contextlib.ContextDecorator):
    def __enter__(self):
        self._previous, ENGINE.grad_enabled = ENGINE.grad_enabled, False
        return self

    def __exit__(self, *exc):
        ENGINE.grad_enabled = self._previous
        return False


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False, only_inputs=True,
         allow_unused=False, no_grad_vars=None):
    """paddle.grad: the gradients of `outputs` (seeded by `grad_outputs`, default ones) with
    respect to `inputs`, returned as Tensors (nothing is accumulated into .grad).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0, 3.0], stop_gradient=False)
        >>> y = (x * x).sum()
        >>> (dx,) = paddle.grad(y, x)
        >>> print(dx.numpy())
        [2. 4. 6.]
    """
    return ENGINE.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused, no_grad_vars)


def is_grad_enabled() -> bool:
    """True unless inside no_grad() or set_grad_enabled(False): whether eager ops record for backward.

    Examples:
        >>> import keel as paddle
        >>> paddle.is_grad_enabled()
        True
        >>> with paddle.no_grad():
        ...     print(paddle.is_grad_enabled())
        False
    """
    return ENGINE.grad_enabled


def set_grad_enabled(mode: bool):
    """`with keel.set_grad_enabled(False):` (a context manager, as PaddlePaddle's).

    Examples:
        >>> import keel as paddle
        >>> x = paddle.to_tensor([1.0, 2.0], stop_gradient=False)
        >>> with paddle.set_grad_enabled(False):
        ...     y = x * 2
        >>> y.stop_gradient, (x * 2).stop_gradient
        (True, False)
    """
    return ENGINE.set_grad_enabled(mode)


def _onto(place, values) -> tuple:
    """Kernel results (arrays, lists of arrays, None) copied onto `place`'s device."""
    return tuple(None if v is None else [Engine.to_place(a, place) for a in v] if isinstance(v, list)
                 else Engine.to_place(v, place) for v in values)


def to_tensor(data, dtype=None, place=None, stop_gradient: bool = True) -> Tensor:
    """paddle.to_tensor: a Tensor of `data` (a number, list, numpy array or Tensor); floats
    default to float32 and ints to int64, as PaddlePaddle's. `place`: CPUPlace() or
    CUDAPlace(i); by default the one `set_device` chose.

    Examples:
        >>> import keel as paddle
        >>> import numpy as np
        >>> t = paddle.to_tensor([[1, 2], [3, 4]])
        >>> t.shape, t.dtype
        ([2, 2], paddle.int64)
        >>> paddle.to_tensor(1.5).dtype, paddle.to_tensor(np.ones(2, "float64")).dtype
        (paddle.float32, paddle.float64)
        >>> paddle.to_tensor([1.0, 2.0], dtype="float16", stop_gradient=False).stop_gradient
        False
    """
    if isinstance(data, Tensor):
        array = data.value
    else:
        array = np.asarray(data)
        if dtype is None and not isinstance(data, np.ndarray):  # Python data: PaddlePaddle's defaults
            if array.dtype == np.float64:
                dtype = dtypes.get_default_dtype()    # float32 unless set_default_dtype changed it
            elif array.dtype.kind == "i":
                array = array.astype(np.int64)
    if dtype is not None:
        array = array.astype(dtypes.to_numpy(dtypes.to_code(dtype)))    # a copy
    elif array is data or isinstance(data, Tensor):
        array = array.copy()                                            # never the caller's buffer
    array = dygraph.engine().to_place(array, place if place is not None else default_place())  # set_device's
    return Tensor(array, stop_gradient=stop_gradient)
