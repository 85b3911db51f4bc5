"""Every op has a gradient rule or is declared not differentiable, and every
differentiable op has at least one gradient check in some tests/test_grad_*.py."""
from keel import program  # noqa: F401  (registers the ops)
from keel.program.ops import registry

from gradcheck import case_modules, grad_cases


def _checked_ops() -> set[str]:
    ops = {case.op_type for case in grad_cases()}
    for module in case_modules():
        ops.update(getattr(module, "CHECKED_BY_HAND", ()))  # programs with sub-blocks, checked by hand
    return ops


def _forward_ops():
    return {t: d for t, d in registry.all_ops().items() if not d.grad_of}


def test_every_op_declares_its_gradient():
    undecided = sorted(t for t, d in _forward_ops().items()
                       if d.grad is None and t not in ("feed", "fetch"))
    assert not undecided, f"ops with neither a gradient rule nor NOT_DIFFERENTIABLE: {undecided}"


def test_every_differentiable_op_has_a_gradient_check():
    differentiable = {t for t, d in _forward_ops().items() if isinstance(d.grad, registry.GradRule)}
    missing = sorted(differentiable - _checked_ops())
    assert not missing, f"differentiable ops without a gradient check: {missing}"


def test_every_gradient_op_has_a_kernel():
    from keel.kernels import registry as kernels
    grad_types = {t for t, d in registry.all_ops().items() if d.grad_of}
    from keel.program.ops.control_flow import CONTROL_FLOW_OPS  # compiled by the executor, no kernel
    missing = sorted(t for t in grad_types if kernels.get(t) is None and t not in CONTROL_FLOW_OPS)
    assert not missing, f"gradient ops without a kernel: {missing}"
