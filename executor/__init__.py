"""Running programs: Scope, places, the compiled-plan Executor, the inference Predictor.

    from keel.executor import Executor, CPUPlace
    exe = Executor(CPUPlace())
    exe.run(startup)
    out, = exe.run(main, feed={"x": xb}, fetch_list=[logits])
"""
from keel.executor import eager  # noqa: F401  (registers the eager engine: layer calls on Tensors run at once)
from keel.executor.checkpoint import CheckpointError, load_checkpoint, save_checkpoint
from keel.executor.errors import ExecutionError, FeedError, NonFiniteError
from keel.executor.executor import Executor
from keel.executor.lod import LoDTensor, create_lod_tensor
from keel.executor.place import CPUPlace, CUDAPinnedPlace, CUDAPlace
from keel.executor.profiler import Profiler
from keel.executor.scope import Scope, global_scope, scope_guard
from keel.executor import static_program  # noqa: F401  (paddle.static's CompiledProgram, save/load, cpu_places)

def _run_program(program, feed, fetch_names, scope, _executors={}):
    """program.default's runner (jit.load's layers called on arrays): one Executor per thread."""
    import threading
    exe = _executors.get(threading.get_ident())
    if exe is None:
        exe = _executors[threading.get_ident()] = Executor()
    return exe.run(program, feed=feed, fetch_list=list(fetch_names), scope=scope)


from keel.program import default as _default  # noqa: E402
_default.register_runner(_run_program)

# The Predictor (inference.py, with the inference passes it runs) loads when first named:
# training and eager scripts never do.
_INFERENCE_NAMES = ("Config", "PrecisionType", "PredictorError", "create_predictor")


def __getattr__(name: str):
    if name not in _INFERENCE_NAMES:
        raise AttributeError(f"module 'keel.executor' has no attribute {name!r}")
    from keel.executor import inference
    return getattr(inference, name)

__all__ = ["Executor", "CPUPlace", "CUDAPlace", "CUDAPinnedPlace", "Scope", "global_scope", "scope_guard",
           "ExecutionError", "FeedError", "NonFiniteError", "save_checkpoint", "load_checkpoint",
           "CheckpointError", "Config", "create_predictor", "PredictorError", "PrecisionType", "Profiler",
           "LoDTensor", "create_lod_tensor"]
