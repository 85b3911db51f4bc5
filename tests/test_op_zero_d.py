"""0-D tensors (issue 32): the unary activations and the binary elementwise ops run forward
and backward on 0-D inputs (a 0-D result, gradients by finite differences); numpy makes
scalars, not arrays, of 0-d temporaries, which in-place formulas cannot write into."""
import numpy as np
import pytest

from keel.program.ops import registry
from oprun import check_grads, run

# x where every unary op here is smooth and defined (log, sqrt, acos, atanh, acosh...)
X0 = {"acosh": 1.7}


def _family(module):
    return sorted(t for t, d in registry.all_ops().items()
                  if not d.grad_of and d.infer is not None and d.infer.__module__ == module)


UNARY = [t for t in _family("keel.program.ops.activation") if t not in ("softmax", "log_softmax")]


@pytest.mark.parametrize("op_type", UNARY)
def test_unary_forward_and_gradient_on_0d(op_type):
    x = np.array(X0.get(op_type, 0.43))
    out = run(op_type, {"X": x})["Out"]
    assert out.shape == () and out.dtype == np.float64
    if isinstance(registry.get(op_type).grad, registry.GradRule):
        check_grads(op_type, {"X": x}, ["X"], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("op_type", ["softmax", "log_softmax"])
def test_softmax_on_0d(op_type):
    out = run(op_type, {"X": np.array(0.43)})["Out"]
    assert out.shape == () and out == (1.0 if op_type == "softmax" else 0.0)
    check_grads(op_type, {"X": np.array(0.43)}, ["X"])


@pytest.mark.parametrize("op_type", [t for t in _family("keel.program.ops.elementwise")
                                     if isinstance(registry.get(t).grad, registry.GradRule)])
def test_elementwise_on_0d(op_type):
    x, y = np.array(0.8), np.array(0.35)
    assert run(op_type, {"X": x, "Y": y})["Out"].shape == ()
    check_grads(op_type, {"X": x, "Y": y}, ["X", "Y"], rtol=1e-6, atol=1e-9)
    check_grads(op_type, {"X": np.array([0.8, 1.3]), "Y": y}, ["X", "Y"], rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("op_type", ["gelu", "tanh", "reciprocal", "softsign"])
def test_issue_cases_complex_free(op_type):
    # the issue's crashes ("return arrays must be of ArrayType"), with float32 too
    for dtype in (np.float32, np.float64):
        out = run(op_type, {"X": np.array(0.5, dtype)})["Out"]
        assert out.shape == () and out.dtype == dtype
