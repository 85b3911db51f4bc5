"""Gradient checking: analytic gradients from appended backward ops vs central finite
differences, in float64, through the real builder, backward pass and executor.

A test module `tests/test_grad_<family>.py` lists its cases as `CASES = [Case(...)]` and
runs them with `run_case`; tests/test_grad_coverage.py fails when a differentiable op
has no case anywhere.

    Case("elementwise_add", {"X": rand(2, 3, 4), "Y": rand(3)}, {"axis": 1})

For each case a one-op program is built from the inputs (float arrays become variables
we differentiate with respect to; int arrays are plain inputs), the op's float outputs
are reduced to a scalar `loss = sum_k sum(out_k * w_k)` with fixed random weights `w_k`
(so every output element gets a different upstream gradient), `gradients(loss, inputs)`
appends the backward ops, and each input's analytic gradient is compared with
(loss(x + h) - loss(x - h)) / 2h on up to `max_elems` of its elements.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import pytest

import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope
from keel.program.ops import registry


@dataclass
class Case:
    op_type: str
    inputs: dict                 # slot -> array, or list of arrays for a duplicable slot
    attrs: dict = field(default_factory=dict)
    wrt: tuple | None = None     # input slots to check (default: every float input the rule differentiates)
    outputs: dict = field(default_factory=dict)  # duplicable output slot -> number of outputs
    inplace: dict = field(default_factory=dict)  # output slot -> the input slot it overwrites (MeanOut: Mean)
    rtol: float = 1e-5
    atol: float = 1e-8
    delta: float = 1e-6
    max_elems: int = 48
    id: str = ""

    def __str__(self):
        return self.id or f"{self.op_type}{self.attrs or ''}"


def rand(*shape, low=-1.0, high=1.0, seed=None):
    """A float64 array of uniform values (a fixed stream per shape unless `seed`)."""
    rng = np.random.default_rng(seed if seed is not None else hash(shape) % 2**32)
    return rng.uniform(low, high, shape)


def away_from(values, points, margin=0.05, seed=0):
    """Nudge `values` so none lies within `margin` of a kink (`points`), where finite
    differences straddle a discontinuity of the derivative (relu at 0, clip bounds)."""
    values = np.array(values, dtype=np.float64)
    for p in np.atleast_1d(points):
        close = np.abs(values - p) < margin
        values[close] = p + np.where(values[close] >= p, margin, -margin) * 2
    return values


def _listed(value):
    return value if isinstance(value, list) else [value]


@dataclass
class Built:
    """A case's one-op program with its loss and the gradients appended."""
    main: object
    feed: dict          # name -> array (the inputs and the loss weights)
    loss: object
    wrt_vars: list      # the inputs differentiated
    grads: list         # their gradient variables (None where there is none)

    @property
    def fetches(self) -> list:
        return [self.loss] + [g for g in self.grads if g is not None]

    @property
    def fetch_names(self) -> list:
        return [v.name for v in self.fetches]


def build_case(case: Case) -> Built:
    """The one-op program of `case`, its weighted-sum loss and the gradients of the loss
    with respect to the float inputs (see the module docstring)."""
    opdef = registry.get(case.op_type)
    rule = opdef.grad
    assert isinstance(rule, registry.GradRule), f"{case.op_type} has no gradient rule"
    main, startup = pg.Program(), pg.Program()
    feed, wrt_vars = {}, []
    wanted = set(case.wrt if case.wrt is not None else rule.differentiable_inputs())
    with pg.program_guard(main, startup), pg.unique_name.guard():
        block = main.global_block()
        ins = {}
        for slot, value in case.inputs.items():
            names = []
            for i, arr in enumerate(_listed(value)):
                arr = np.asarray(arr)
                name = f"{slot.lower()}{i}"
                var = block.create_var(name, arr.shape, str(arr.dtype), need_check_feed=True,
                                       stop_gradient=True)
                feed[name] = arr
                names.append(name)
                if slot in wanted and arr.dtype.kind == "f":
                    var.stop_gradient = False
                    wrt_vars.append(var)
            ins[slot] = names
        outs = {}
        for slot in opdef.outputs:
            if slot.name in case.inplace:
                outs[slot.name] = ins[case.inplace[slot.name]]
                continue
            n = case.outputs.get(slot.name, 1)
            outs[slot.name] = [block.create_var(f"{slot.name.lower()}_out{i}", dtype="float64").name
                               for i in range(n)]
        block.append_op(case.op_type, ins, outs, case.attrs)
        rng = np.random.default_rng(1234)
        terms = []
        for slot in rule.output_grads_read():
            for name in outs[slot]:
                var = block.var(name)
                if slot in case.inplace or not pg.dtypes.is_floating(var.dtype):
                    continue
                w = block.create_var(f"w_{name}", var.shape, var.dtype_name, need_check_feed=True,
                                     stop_gradient=True)
                feed[w.name] = rng.uniform(0.5, 1.5, var.shape).astype(var.dtype_name)
                terms.append(pg.reduce_sum(var * w))
        assert terms, f"{case.op_type}: no float output to differentiate"
        loss = terms[0]
        for t in terms[1:]:
            loss = loss + t
        assert wrt_vars, f"{case}: no float input to check"
        grads = pg.gradients([loss], wrt_vars)

    return Built(main, feed, loss, wrt_vars, grads)


def run_case(case: Case, place=None) -> None:
    """Check the case's analytic gradients against finite differences, both computed on
    `place` (default CPUPlace())."""
    built = build_case(case)
    main, feed, loss, wrt_vars, grads = built.main, built.feed, built.loss, built.wrt_vars, built.grads
    exe = Executor(place or CPUPlace())
    scope = Scope()

    def run(f, fetch_list):  # fresh copies: in-place outputs (MeanOut = Mean) update their input
        return exe.run(main, feed={k: v.copy() for k, v in f.items()}, fetch_list=fetch_list, scope=scope)

    fetched = run(feed, [loss] + [g for g in grads if g is not None])
    analytic = dict(zip([v.name for v, g in zip(wrt_vars, grads) if g is not None], fetched[1:]))

    def loss_at(name, flat_index, offset):
        f = dict(feed)
        arr = feed[name].copy()
        arr.flat[flat_index] += offset
        f[name] = arr
        return float(run(f, [loss])[0])

    pick = np.random.default_rng(0)
    for var, g in zip(wrt_vars, grads):
        assert g is not None, f"{case}: no gradient for input {var.name}"
        got = analytic[var.name]
        assert got.shape == feed[var.name].shape, \
            f"{case}: gradient of {var.name} has shape {got.shape}, input {feed[var.name].shape}"
        size = got.size
        idx = np.arange(size) if size <= case.max_elems else pick.choice(size, case.max_elems, replace=False)
        numeric = np.array([(loss_at(var.name, i, case.delta) - loss_at(var.name, i, -case.delta))
                            / (2 * case.delta) for i in idx])
        np.testing.assert_allclose(got.reshape(-1)[idx], numeric, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case}: d loss / d {var.name}")


def case_modules():
    """The modules tests/test_grad_*.py, loaded; one that needs an optional oracle which is
    missing (PaddlePaddle: its module-level importorskip) is left out, not allowed to skip
    the caller. Their gradient cases: `grad_cases()`."""
    modules = []
    for path in sorted(Path(__file__).resolve().parent.glob("test_grad_*.py")):
        spec = importlib.util.spec_from_file_location(f"_gradcases_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except pytest.skip.Exception:
            continue
        modules.append(module)
    return modules


def grad_cases() -> list[Case]:
    """Every `Case` in the CASES lists of tests/test_grad_*.py (some modules list other
    parameters under that name)."""
    return [c for module in case_modules() for c in getattr(module, "CASES", ()) if isinstance(c, Case)]


def check_function_grads(fn, inputs: dict, wrt, rtol=1e-5, atol=1e-8, delta=1e-6, max_elems=24):
    """Gradient check of a function composed of ops (keel.nn.functional's): a static
    program computing `fn(**variables)` on float64/int `inputs`, loss = sum(out * w) with
    fixed random weights, its appended gradients w.r.t. the inputs named in `wrt` compared
    with central finite differences."""
    main, startup = pg.Program(), pg.Program()
    feed = {}
    with pg.program_guard(main, startup), pg.unique_name.guard():
        block = main.global_block()
        variables = {}
        for name, arr in inputs.items():
            arr = np.asarray(arr)
            var = block.create_var(name, arr.shape, str(arr.dtype), need_check_feed=True, stop_gradient=name not in wrt)
            variables[name] = var
            feed[name] = arr
        out = fn(**variables)
        w = block.create_var("w_out", out.shape, out.dtype_name, need_check_feed=True, stop_gradient=True)
        feed["w_out"] = np.random.default_rng(1234).uniform(0.5, 1.5, out.shape).astype(out.dtype_name)
        loss = pg.reduce_sum(out * w)
        grads = pg.gradients([loss], [variables[n] for n in wrt])
    exe, scope = Executor(CPUPlace()), Scope()

    def run(f, fetch):
        return exe.run(main, feed=f, fetch_list=fetch, scope=scope)

    analytic = run(feed, grads)
    pick = np.random.default_rng(0)
    for name, got in zip(wrt, analytic):
        size = got.size
        idx = np.arange(size) if size <= max_elems else pick.choice(size, max_elems, replace=False)
        numeric = []
        for i in idx:
            values = []
            for sign in (1, -1):
                f = dict(feed)
                arr = feed[name].copy()
                arr.flat[i] += sign * delta
                f[name] = arr
                values.append(float(run(f, [loss])[0]))
            numeric.append((values[0] - values[1]) / (2 * delta))
        np.testing.assert_allclose(got.reshape(-1)[idx], numeric, rtol=rtol, atol=atol, err_msg=f"d loss / d {name}")
