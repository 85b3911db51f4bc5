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
            finally:
                optimizer._accumulators, optimizer._master_weights = saved
        for p in params:  # the startup program's casts (master weights) read the values
            scope.set(p.name, p.value)
        self.startup = startup

    def initialize(self, executor: Executor, previous: "_Plan | None") -> None:
        """Run the startup program; accumulators an earlier plan already holds keep their values."""
        kept = {}
        if previous is not None:
            for key, var in self.accumulators.items():
                old = previous.accumulators.get(key)
                if old is not None and self.scope.find_var(old.name) is not None:
                    kept[var.name] = self.scope.get(old.name)
        executor.run(self.startup, scope=self.scope)
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

    def step(self, optimizer, params) -> None:
        self._run_on(params)
        names = tuple(p.name for p in params)
        if self.plan is None or self.plan.names != names:
            plan = _Plan(optimizer, params, self.scope)
            plan.initialize(self.executor, self.plan)
            self.plan = plan
        for p in params:
            self.scope.set(p.name, p.value)
            self.scope.set(grad_name(p.name), p.grad.value)
        self.executor.run(self.plan.main, scope=self.scope)
        for p in params:
            p._value = self.scope.get(p.name)
            p._version += 1
        self.scope.erase([grad_name(p.name) for p in params])
