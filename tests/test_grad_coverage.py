"""Every op has a gradient rule or is declared not differentiable, and every
differentiable op has at least one gradient check in some tests/test_grad_*.py."""
import importlib.util
from pathlib import Path

from keel import program  # noqa: F401  (registers the ops)
from keel.program.ops import registry

HERE = Path(__file__).resolve().parent


def _checked_ops() -> set[str]:
    ops = set()
    for path in sorted(HERE.glob("test_grad_*.py")):
        if path.name == Path(__file__).name:
            continue
        spec = importlib.util.spec_from_file_location(f"_gradcases_{path.stem}", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        # (a module may use the name CASES for other parameters: test_grad_sum_paths's shapes)
        ops.update(case.op_type for case in getattr(module, "CASES", ()) if hasattr(case, "op_type"))
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
