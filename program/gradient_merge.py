"""Gradient accumulation: PaddlePaddle's `paddle.incubate.optimizer.GradientMergeOptimizer`.

    opt = GradientMergeOptimizer(pg.optimizer.Adam(1e-3), k_steps=4, avg=True)
    opt.minimize(loss)     # run the program once per micro-batch; every 4th run updates

Each run adds the micro-batch's gradients into persistable `<param>@GRAD@GradientMerge`
variables and counts the run in `gradient_merge_step` (increment, then mod k). On every
k-th run the inner optimizer updates from the merged gradients (divided by k with `avg`),
and the merged gradients are zeroed. So k micro-batches of a mean loss give the update of
one k-times-larger batch.

PaddlePaddle puts the update in a `conditional_block` on `gradient_merge_cond`. Keel's
executor has no control flow yet, so the update here is written with ordinary ops that
compute the same values: the state every update op writes (parameters, moments, beta
powers, master weights) is copied before the update, the update runs on every step, and
each state variable is then blended back as `new * c + old * (1 - c)` with c the condition
as 0.0 or 1.0. Multiplying by exactly 1 or 0 and adding an exact zero is exact in IEEE
arithmetic, so on the k-th run the result is the update itself and on the others the old
state itself, bit for bit (for finite state; an Inf or NaN would spread through `x * 0`).
The cost is one copy and three elementwise ops per state tensor per run; the program uses
only ops PaddlePaddle has, so it also runs in PaddlePaddle's executor.
"""
from __future__ import annotations

from program import dtypes, op_role
from program.global_var import create_global_var
from program.optimizer import update_context
from program.variable import Variable

__all__ = ["GradientMergeOptimizer"]

MERGED_SUFFIX = "@GRAD@GradientMerge"  # PaddlePaddle's name for a parameter's merged gradient


class GradientMergeOptimizer:
    """Accumulate gradients over `k_steps` runs, then update once with `inner_optimizer`
    (their mean when `avg`, else their sum)."""

    def __init__(self, inner_optimizer, k_steps: int = 1, avg: bool = True):
        if inner_optimizer is None:
            raise ValueError("GradientMergeOptimizer: inner_optimizer can not be None")
        if not isinstance(k_steps, int) or isinstance(k_steps, bool) or k_steps <= 0:
            raise ValueError(f"GradientMergeOptimizer: k_steps should be a positive integer, got {k_steps!r}")
        self.inner_optimizer = inner_optimizer
        self.k_steps = k_steps
        self.avg = bool(avg)
        self.type = "gradient_merge"

    def _set_k_steps(self, k_steps: int) -> None:
        self.k_steps = k_steps

    def _set_avg(self, avg: bool) -> None:
        self.avg = bool(avg)

    def backward(self, loss: Variable, startup_program=None, parameter_list=None, no_grad_set=None):
        if parameter_list is not None or no_grad_set is not None:
            raise ValueError("GradientMergeOptimizer: parameter_list and no_grad_set must be None "
                             "(as PaddlePaddle's): every trainable parameter is merged")
        return self.inner_optimizer.backward(loss, startup_program)

    def apply_gradients(self, params_grads, startup_program=None):
        block, program, startup = update_context(params_grads, startup_program)
        cond = _merge_condition(block, startup, self.k_steps)
        merged_pairs = []
        with op_role.role_guard(program, op_role.BACKWARD):
            for param, grad in params_grads:
                merged = create_global_var(param.shape, 0, param.dtype, True, name=param.name + MERGED_SUFFIX,
                                           main_program=program, startup_program=startup)
                op = block.append_op("elementwise_add", {"X": [grad], "Y": [merged]}, {"Out": [merged]},
                                     {"axis": -1})
                op.set_attr("op_role_var", [param.name, merged.name])
                merged_pairs.append((param, merged))
        with op_role.role_guard(program, op_role.OPTIMIZE):
            if self.avg:
                merged_pairs = [(p, _scaled(block, g, 1.0 / self.k_steps)) for p, g in merged_pairs]
            factors = _Factors(block, cond, len(block.ops))
            ops = self.inner_optimizer.apply_gradients(merged_pairs, startup)
            _blend_state(block, factors)
            for param, _ in params_grads:  # the merged sums start again after an update
                merged = block.var(param.name + MERGED_SUFFIX)
                block.append_op("elementwise_mul", {"X": [merged], "Y": [factors.keep(merged.dtype)]},
                                {"Out": [merged]}, {"axis": -1})
        return ops

    def apply_optimize(self, loss, startup_program, params_grads):
        return self.apply_gradients(params_grads, startup_program)

    def minimize(self, loss, startup_program=None, parameter_list=None, no_grad_set=None):
        params_grads = self.backward(loss, startup_program, parameter_list, no_grad_set)
        return self.apply_optimize(loss, startup_program, params_grads), params_grads


def _merge_condition(block, startup, k_steps):
    """gradient_merge_step = (step + 1) mod k; gradient_merge_cond = (step == 0): PaddlePaddle's ops."""
    made = {"main_program": block.program, "startup_program": startup}
    k = create_global_var([1], k_steps, "int32", True, name="gradient_merge_k", **made)
    zero = create_global_var([1], 0, "int32", True, name="gradient_merge_zero", **made)
    step = create_global_var([1], 0, "int32", True, name="gradient_merge_step", **made)
    cond = block.create_var("gradient_merge_cond", [1], "bool", stop_gradient=True)
    block.append_op("increment", {"X": [step]}, {"Out": [step]}, {"step": 1.0})
    block.append_op("elementwise_mod", {"X": [step], "Y": [k]}, {"Out": [step]}, {"axis": -1})
    block.append_op("equal", {"X": [step], "Y": [zero]}, {"Out": [cond]})
    return cond


class _Factors:
    """The condition as a number, 1.0 on an update step (`take`) and its complement (`keep`),
    one pair per dtype of the state that needs them, made by ops inserted at `at` (before
    the update ops; `at` moves past what is inserted)."""

    def __init__(self, block, cond, at: int):
        self._block, self._cond, self._made = block, cond, {}
        self.at = at

    def insert(self, *args):
        self._block.insert_op(self.at, *args)
        self.at += 1

    def _pair(self, dtype):
        code = dtypes.to_code(dtype)
        if code not in self._made:
            suffix = "" if code == dtypes.to_code("float32") else "_" + dtypes.name(code)
            take = self._block.create_var(f"gradient_merge_take{suffix}", [1], code, stop_gradient=True)
            keep = self._block.create_var(f"gradient_merge_keep{suffix}", [1], code, stop_gradient=True)
            self.insert("cast", {"X": [self._cond]}, {"Out": [take]},
                        {"in_dtype": self._cond.dtype, "out_dtype": code})
            self.insert("scale", {"X": [take]}, {"Out": [keep]},
                        {"scale": -1.0, "bias": 1.0, "bias_after_scale": True})
            self._made[code] = (take, keep)
        return self._made[code]

    def take(self, dtype):
        return self._pair(dtype)[0]

    def keep(self, dtype):
        return self._pair(dtype)[1]


def _scaled(block, var, factor):
    out = block.create_var(var.name + "@AVG", var.shape, var.dtype, stop_gradient=True)
    block.append_op("scale", {"X": [var]}, {"Out": [out]}, {"scale": factor, "bias": 0.0, "bias_after_scale": False})
    return out


def _blend_state(block, factors):
    """Make the ops from `factors.at` on (the inner optimizer's) take effect only on an
    update step: copy every persistable float variable they write before them, and after
    them set each to `new * take + old * keep`."""
    state = []
    for op in block.ops[factors.at:]:
        for name in op.output_arg_names:
            var = block.find_var(name)
            if var is not None and var.persistable and dtypes.is_floating(var.dtype) and name not in state:
                state.append(name)
    for name in state:
        var = block.var(name)
        factors.take(var.dtype)
        old = block.create_var(name + "@GradientMerge@OLD", var.shape, var.dtype, stop_gradient=True)
        factors.insert("assign", {"X": [var]}, {"Out": [old]})
    for name in state:
        var = block.var(name)
        old = block.var(name + "@GradientMerge@OLD")
        new_part = block.create_var(name + "@GradientMerge@NEW", var.shape, var.dtype, stop_gradient=True)
        block.append_op("elementwise_mul", {"X": [var], "Y": [factors.take(var.dtype)]}, {"Out": [new_part]},
                        {"axis": -1})
        block.append_op("elementwise_mul", {"X": [old], "Y": [factors.keep(var.dtype)]}, {"Out": [old]},
                        {"axis": -1})
        block.append_op("elementwise_add", {"X": [new_part], "Y": [old]}, {"Out": [var]}, {"axis": -1})
