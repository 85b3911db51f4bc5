"""Running programs: Scope, places, the compiled-plan Executor, the inference Predictor.

    from executor import Executor, CPUPlace
    exe = Executor(CPUPlace())
    exe.run(startup)
    out, = exe.run(main, feed={"x": xb}, fetch_list=[logits])
"""
from executor.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from executor.errors import ExecutionError, FeedError, NonFiniteError
from executor.executor import Executor
from executor.inference import Config, PrecisionType, PredictorError, create_predictor
from executor.place import CPUPlace, CUDAPlace
from executor.scope import Scope, global_scope, scope_guard

__all__ = ["Executor", "CPUPlace", "CUDAPlace", "Scope", "global_scope", "scope_guard",
           "ExecutionError", "FeedError", "NonFiniteError", "save_checkpoint", "load_checkpoint",
           "CheckpointError", "Config", "create_predictor", "PredictorError", "PrecisionType"]
