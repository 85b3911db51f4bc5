"""`keel.static`: PaddlePaddle's `paddle.static`, gathered from keel.program (building:
`data`, `InputSpec`, `Program`, `program_guard`, `nn`, `append_backward`, `amp`, ...) and
keel.executor (running: `Executor`, `global_scope`, `scope_guard`, `save`/`load`,
`CompiledProgram`, `cpu_places`)."""
from keel.executor import Executor, Scope, global_scope, scope_guard
from keel.executor.place import CPUPlace, CUDAPlace
from keel.executor.static_program import (BuildStrategy, CompiledProgram, ExecutionStrategy, cpu_places,
                                          cuda_places, load, load_program_state, save, set_program_state)
from keel.program import static as _static
from keel.program.static import *  # noqa: F401,F403
from keel.static import amp, nn  # noqa: F811  (the facades, in place of program.static's own modules)

__all__ = [*_static.__all__, "Executor", "Scope", "global_scope", "scope_guard", "CPUPlace", "CUDAPlace",
           "CompiledProgram", "BuildStrategy", "ExecutionStrategy", "cpu_places", "cuda_places", "save", "load",
           "load_program_state", "set_program_state"]
