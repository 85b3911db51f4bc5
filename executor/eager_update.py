"""`optimizer.step()` in eager mode: the optimizer's own update program, run on the
parameters' values.

An optimizer knows how to append its update (clipping, regularization, the learning rate
and its schedule, accumulators, master weights, the update op) to a program
(program/optimizer.py `apply_gradients`). Eager mode reuses exactly that: the first step
builds a small program whose parameters and gradients are the eager parameters', runs its
startup program once (accumulators), and every step then puts the parameters' values and
gradients into the plan's scope, runs the update program (the same update kernels as a
static program) and takes the new values back.
"""
from __future__ import annotations

from keel.executor.executor import Executor
from keel.program import dygraph
from keel.executor.scope import Scope
from keel.program.default import program_guard
from keel.program.ops.registry import grad_name
from keel.program.program import Program


def _loaded_value(name: str, value, var, current, place):
    """A value given by `optimizer.set_state_dict` for the state `var` (now `current`): its
    shape checked, in the state's dtype, on the parameters' place."""
    if tuple(value.shape) != tuple(var.shape):
        raise ValueError(f"optimizer.set_state_dict: {name!r} has shape {list(value.shape)}, the optimizer's "
                         f"state there has {list(var.shape)}")
    return dygraph.engine().to_place(value.astype(current.dtype, copy=False), place)


class _Plan:
    """The update program of one set of parameters, and the scope its state lives in."""

    def __init__(self, optimizer, params, scope: Scope):
        self.names = tuple(p.name for p in params)
        self.main, startup = Program(), Program()
        self.scope = scope
        with program_guard(self.main, startup):
            block = self.main.global_block()
            pairs = []
            for p in params:
                # declared in the startup program too: master weights (amp O2) are cast from it
                startup.global_block().create_var(p.name, p.shape, p.dtype, persistable=True)
                param = block.create_parameter(p.name, p.shape, p.dtype, trainable=True, regularizer=p.regularizer,
                                               learning_rate=p.optimize_attr["learning_rate"],
                                               need_clip=p.need_clip)
                pairs.append((param, block.create_var(grad_name(p.name), p.shape, p.dtype)))
            saved = dict(optimizer._accumulators), dict(optimizer._master_weights)
            optimizer._accumulators, optimizer._master_weights = {}, {}
            try:
                optimizer.apply_gradients(pairs, startup)
                self.accumulators = dict(optimizer._accumulators)
                self.master_weights = dict(optimizer._master_weights)
            finally:
                optimizer._accumulators, optimizer._master_weights = saved
        for p in params:  # the startup program's casts (master weights) read the values
            scope.set(p.name, p.value)
        self.startup = startup

    def state(self) -> dict:
        """The state so far, as PaddlePaddle's optimizer.state_dict() names it: accumulator
        name -> array, and "master_weights": param name -> array."""
        state = {var.name: self.scope.get(var.name) for var in self.accumulators.values()
                 if self.scope.has(var.name)}
        masters = {param: self.scope.get(var.name) for param, var in self.master_weights.items()
                   if self.scope.has(var.name)}
        if masters:
            state["master_weights"] = masters
        return state

    def take_loaded(self, loaded: dict, place) -> dict:
        """variable name -> value of what `loaded` (state() shaped, from set_state_dict) gives
        for this plan's state, removed from `loaded`; the rest stays for a later plan."""
        values = {}
        for var in self.accumulators.values():
            if var.name in loaded:
                values[var.name] = _loaded_value(var.name, loaded.pop(var.name), var, self.scope.get(var.name), place)
        masters = loaded.get("master_weights", {})
        for param, var in self.master_weights.items():
            if param in masters:
                values[var.name] = _loaded_value(var.name, masters.pop(param), var, self.scope.get(var.name), place)
        if "master_weights" in loaded and not masters:
            del loaded["master_weights"]
        return values

    def _check_loaded_names(self, loaded: dict, carried: dict) -> None:
        """Each piece of state this plan creates must be in a given state dict, as
        PaddlePaddle asserts: names that do not match mean the dict is another model's (or
        this one built under other names) and would otherwise be ignored silently."""
        masters = loaded.get("master_weights")
        missing = [var.name for var in self.accumulators.values() if var.name not in carried
                   and var.name not in loaded]
        missing += [f"master_weights[{param!r}]" for param, var in self.master_weights.items()
                    if masters is not None and var.name not in carried and param not in masters]
        if missing:
            given = sorted(name for name in loaded if name != "master_weights")
            raise ValueError(f"optimizer.set_state_dict: the state dict has no {', '.join(missing[:4])}"
                             f"{' ...' if len(missing) > 4 else ''} (it holds {', '.join(given[:4])}"
                             f"{' ...' if len(given) > 4 else ''}). Accumulators are named after the parameters: "
                             f"build the model as the saved one was built (in a fresh process, or under "
                             f"paddle.utils.unique_name.guard())")

    def initialize(self, executor: Executor, previous: "_Plan | None", loaded: dict) -> None:
        """Run the startup program; state an earlier plan already holds keeps its values, and
        state given by `optimizer.set_state_dict` (`loaded`) is taken by name, as
        PaddlePaddle's accumulators take it when they are created."""
        kept = {}
        if previous is not None:
            for mine, theirs in ((self.accumulators, previous.accumulators),
                                 (self.master_weights, previous.master_weights)):
                for key, var in mine.items():
                    old = theirs.get(key)
                    if old is not None and self.scope.find_var(old.name) is not None:
                        kept[var.name] = self.scope.get(old.name)
        executor.run(self.startup, scope=self.scope)
        if loaded:
            self._check_loaded_names(loaded, carried=kept)
        kept.update(self.take_loaded(loaded, executor.place))
        for name, value in kept.items():
            self.scope.set(name, value)


class EagerUpdater:
    """One optimizer's eager state: its update plan (rebuilt when the set of parameters
    with gradients changes, accumulators carried over) and the scope holding its state."""

    def __init__(self):
        self.scope = Scope()
        self.executor: Executor | None = None
        self.plan: _Plan | None = None

    def _run_on(self, params) -> None:
        """The executor of the parameters' place (a GPU's when they live there); the state
        kept so far (accumulators) moves with them when they move."""
        engine = dygraph.engine()
        places = {p.name: engine.place_of(p.value) for p in params}
        place = places[params[0].name]
        if any(q != place for q in places.values()):
            raise ValueError("optimizer.step: the parameters live on different places "
                             f"({', '.join(f'{n}: {q}' for n, q in places.items())}); move them to one")
        if self.executor is None or self.executor.place != place:
            self.executor = Executor(place)
            for name in list(self.scope):
                self.scope.set(name, engine.to_place(self.scope.get(name), place))

    def state(self) -> dict:
        """The optimizer's state so far (_Plan.state; empty before the first step)."""
        return {} if self.plan is None else self.plan.state()

    def load(self, state: dict) -> None:
        """Put what `state` gives into the state the plan holds now; the rest stays in `state`."""
        if self.plan is not None:
            for name, value in self.plan.take_loaded(state, self.executor.place).items():
                self.scope.set(name, value)

    def step(self, optimizer, params) -> None:
        self._run_on(params)
        names = tuple(p.name for p in params)
        if self.plan is None or self.plan.names != names:
            plan = _Plan(optimizer, params, self.scope)
            plan.initialize(self.executor, self.plan, optimizer._loaded_state)
            self.plan = plan
        for p in params:
            self.scope.set(p.name, p.value)
            self.scope.set(grad_name(p.name), p.grad.value)
        self.executor.run(self.plan.main, scope=self.scope)
        for p in params:
            p._value = self.scope.get(p.name)
            p._version += 1
        self.scope.erase([grad_name(p.name) for p in params])
