"""Data-parallel training across processes and machines: PaddlePaddle's
`paddle.distributed` on Keel (docs/architecture.md, "Distributed training").

This package sits above `program`, `executor` and `kernels`: the collective ops live in
program/ops/collective.py, their kernels and the communicators (MPI, NCCL) in
kernels/collective.py and kernels/communicators.py; here are the process group, `fleet`,
paddle.distributed's collective functions for static programs (collective.py)
and the launcher (`python -m keel.distributed.launch`). mpi4py is imported only when a process
group is made (the optional extra: pip install -e ".[dist]")."""
from keel.distributed import fleet
from keel.distributed.collective import (ReduceOp, all_gather, all_reduce, broadcast, reduce, reduce_scatter,
                                    wait)
from keel.distributed.parallel import (ParallelEnv, barrier, get_rank, get_world_size, init_parallel_env,
                                  is_available, is_initialized)
from keel.program.io.data import DistributedBatchSampler

__all__ = ["ParallelEnv", "barrier", "get_rank", "get_world_size", "init_parallel_env", "is_available", "is_initialized",
           "fleet", "DistributedBatchSampler", "ReduceOp", "all_reduce", "reduce", "broadcast", "all_gather",
           "reduce_scatter", "wait"]
