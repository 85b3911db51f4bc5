"""`paddle.incubate.optimizer`: optimizer wrappers that rewrite the training program
(gradient accumulation, activation recomputation)."""
from keel.program.gradient_merge import GradientMergeOptimizer  # noqa: F401
from keel.program.recompute import RecomputeOptimizer  # noqa: F401

__all__ = ["GradientMergeOptimizer", "RecomputeOptimizer"]
