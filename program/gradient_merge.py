"""Gradient accumulation: PaddlePaddle's `paddle.incubate.optimizer.GradientMergeOptimizer`.

    opt = GradientMergeOptimizer(pg.optimizer.Adam(1e-3), k_steps=4, avg=True)
    opt.minimize(loss)     # run the program once per micro-batch; every 4th run updates

Each run adds the micro-batch's gradients into persistable `<param>@GRAD@GradientMerge`
variables and counts the run in `gradient_merge_step` (increment, then mod k). On every
k-th run the inner optimizer updates from the merged gradients (divided by k with `avg`),
and the merged gradients are zeroed. So k micro-batches of a mean loss give the update of
one k-times-larger batch.

As PaddlePaddle writes it, the update is a `conditional_block` on `gradient_merge_cond`
(`static.nn.cond` with a true branch only): inside it, with `avg`, each merged gradient is
scaled by 1/k in place, the inner optimizer's update ops (clipping, regularization, the
update; their state stays global persistable variables) follow, and a `fill_constant`
zeroes each merged gradient. Off steps run no update op at all.
"""
from __future__ import annotations

from keel.program import control_flow, op_role
from keel.program.global_var import create_global_var
from keel.program.layers.tensor import fill_constant
from keel.program.optimizer import update_context
from keel.program.variable import Variable

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
        update_ops = []

        def update():  # the conditional block's ops (update_context gives the inner optimizer this block)
            branch = program.current_block()
            if self.avg:
                with op_role.role_guard(program, op_role.BACKWARD):
                    for _, merged in merged_pairs:
                        branch.append_op("scale", {"X": [merged]}, {"Out": [merged]},
                                         {"scale": 1.0 / self.k_steps, "bias": 0.0, "bias_after_scale": False})
            update_ops.extend(self.inner_optimizer.apply_gradients(merged_pairs, startup))
            with op_role.role_guard(program, op_role.OPTIMIZE):
                for _, merged in merged_pairs:  # the merged sums start again after an update
                    fill_constant(list(merged.shape), merged.dtype, 0.0, out=merged)

        with op_role.role_guard(program, op_role.OPTIMIZE):
            control_flow.cond(cond, update)
        return update_ops

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
