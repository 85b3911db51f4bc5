"""The process group: `init_parallel_env`, `get_rank`, `get_world_size`.

Ranks are MPI's: a script started by `python -m keel.distributed.launch --nproc_per_node N`
(which runs mpiexec) or directly by `mpirun -n N python script.py` finds its rank and the
world size in MPI_COMM_WORLD. `init_parallel_env` makes ring 0 (the global communicator
of the collective ops) for the CPU (MPI) and, where cupy sees a GPU for every local rank,
for the GPU (NCCL, device `local rank % device count`: run the program on
`CUDAPlace(env.device_id)`), and exports PaddlePaddle's environment variables
(PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM, PADDLE_RANK_IN_NODE, PADDLE_LOCAL_SIZE,
FLAGS_selected_gpus) so code written for `paddle.distributed.launch` finds them.
"""
from __future__ import annotations

import hashlib
import os
import socket
import sys
import traceback
from dataclasses import dataclass, field

import numpy as np

from keel.kernels import communicators
from keel.kernels.array_module import cupy_available


def _env_int(name: str, default: int) -> int:
    return int(os.environ.get(name, default))


def _selected_gpu() -> int:
    """The GPU FLAGS_selected_gpus names (init_parallel_env sets it), else 0 where cupy finds
    a device and -1 (the CPU) where it finds none."""
    selected = os.environ.get("FLAGS_selected_gpus", "")
    return int(selected.split(",")[0]) if selected else (0 if cupy_available() else -1)


@dataclass(frozen=True)
class ParallelEnv:
    """This process's place in the group. `ParallelEnv()` reads it from the environment the
    launcher and init_parallel_env set (PADDLE_TRAINER_ID, PADDLE_TRAINERS_NUM,
    PADDLE_RANK_IN_NODE, FLAGS_selected_gpus), as PaddlePaddle's does; a single process is
    rank 0 of 1.

    Examples:
        >>> import keel.distributed as dist
        >>> env = dist.ParallelEnv()          # from the launcher's environment; a lone process is rank 0 of 1
        >>> env.rank, env.world_size, env.local_rank
        (0, 1, 0)
    """
    rank: int = field(default_factory=lambda: _env_int("PADDLE_TRAINER_ID", 0))
    world_size: int = field(default_factory=lambda: _env_int("PADDLE_TRAINERS_NUM", 1))
    local_rank: int = field(default_factory=lambda: _env_int("PADDLE_RANK_IN_NODE", 0))
    device_id: int = field(default_factory=_selected_gpu)  # the GPU this rank uses, -1 on the CPU

    @property
    def nranks(self) -> int:
        return self.world_size

    @property
    def dev_id(self) -> int:
        """PaddlePaddle's other name of device_id."""
        return self.device_id


_ENV: ParallelEnv | None = None


def init_parallel_env(backend: str = "auto") -> ParallelEnv:
    """Join the process group (idempotent). `backend`: "auto" (MPI, plus NCCL where there
    is a GPU for every rank of this machine: NCCL refuses two ranks on one device), "mpi"
    or "nccl".

    Examples:
        >>> import keel.distributed as dist
        >>> if dist.get_world_size() > 1:      # under python -m keel.distributed.launch
        ...     env = dist.init_parallel_env()
        ...     print(env.rank == dist.get_rank())
        >>> dist.get_world_size()
        1
    """
    global _ENV
    if _ENV is not None:
        return _ENV
    if backend not in ("auto", "mpi", "nccl"):
        raise ValueError(f"init_parallel_env: backend must be 'auto', 'mpi' or 'nccl', got {backend!r}")
    MPI = communicators.mpi()
    world = MPI.COMM_WORLD
    rank, size = world.Get_rank(), world.Get_size()
    declared = os.environ.get("PADDLE_TRAINERS_NUM")
    if declared is not None and int(declared) != size:
        raise communicators.CommError(
            f"init_parallel_env: PADDLE_TRAINERS_NUM={declared} but MPI started {size} process(es); start "
            f"the script with `python -m keel.distributed.launch --nproc_per_node {declared} ...` or `mpirun -n "
            f"{declared} ...`")
    # no blocking MPI call from here on: a peer that died or hangs must end in a timeout
    ring, request = world.Idup()
    mpi_ring = communicators.MPICommunicator(ring)
    mpi_ring.wait_for(request, "init_parallel_env (MPI_Comm_idup)")
    communicators.register(0, mpi_ring)
    local_rank, local_size = _local_rank(mpi_ring)
    device_id = -1
    if backend == "nccl" or (backend == "auto" and cupy_available() and local_size <= _device_count()):
        device_id = local_rank % _device_count()
        import cupy
        with cupy.cuda.Device(device_id):
            communicators.register(0, communicators.NCCLCommunicator(mpi_ring))
    os.environ.update(PADDLE_TRAINER_ID=str(rank), PADDLE_TRAINERS_NUM=str(size),
                      PADDLE_RANK_IN_NODE=str(local_rank), PADDLE_LOCAL_SIZE=str(local_size))
    if device_id >= 0:
        os.environ["FLAGS_selected_gpus"] = str(device_id)
    if size > 1:
        _abort_group_on_uncaught_exception(world)
    _ENV = ParallelEnv(rank, size, local_rank, device_id)
    return _ENV


def _local_rank(ring) -> tuple[int, int]:
    """(rank on this machine, ranks on this machine): from the process manager (MPICH's
    hydra, Open MPI), else from every rank's host name."""
    for rank_var, size_var in (("MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
                               ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")):
        if rank_var in os.environ and size_var in os.environ:
            return int(os.environ[rank_var]), int(os.environ[size_var])
    digest = hashlib.sha256(socket.gethostname().encode()).digest()[:8]
    hosts = ring.allgather(np.frombuffer(digest, np.int64).copy(), "init_parallel_env (host names)")
    mine = [r for r in range(ring.size) if hosts[r] == hosts[ring.rank]]
    return mine.index(ring.rank), len(mine)


def _device_count() -> int:
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


def _abort_group_on_uncaught_exception(world) -> None:
    """An uncaught exception on one rank ends the whole group (MPI_Abort), as
    `python -m mpi4py` does: the others would otherwise wait in their next collective
    until the timeout."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        try:
            previous(kind, value, tb)
        except Exception:  # pragma: no cover - a broken previous hook
            traceback.print_exception(kind, value, tb)
        sys.stdout.flush()
        sys.stderr.flush()
        world.Abort(1)
    sys.excepthook = hook


def is_available() -> bool:
    """Whether processes can form a group here: Keel's collectives between processes run
    over MPI, through the optional mpi4py (`pip install -e ".[dist]"`).

    Examples:
        >>> import keel.distributed as dist
        >>> isinstance(dist.is_available(), bool)    # True where mpi4py is installed
        True
    """
    try:
        import mpi4py  # noqa: F401  (the package alone: MPI itself starts when a group is made)
    except ImportError:
        return False
    return True


def is_initialized() -> bool:
    """Whether init_parallel_env has joined this process to a group.

    Examples:
        >>> import keel.distributed as dist
        >>> dist.is_initialized()              # a lone process that has not called init_parallel_env
        False
    """
    return _ENV is not None


def get_rank() -> int:
    """This process's rank: MPI's once init_parallel_env ran, else PADDLE_TRAINER_ID (0).

    Examples:
        >>> import keel.distributed as dist
        >>> dist.get_rank()            # a single process; under `python -m keel.distributed.launch` its rank
        0
    """
    return _ENV.rank if _ENV is not None else int(os.environ.get("PADDLE_TRAINER_ID", "0"))


def get_world_size() -> int:
    """The number of ranks: MPI's once init_parallel_env ran, else PADDLE_TRAINERS_NUM (1).

    Examples:
        >>> import keel.distributed as dist
        >>> dist.get_world_size()      # a single process; under the launcher, the number of ranks
        1
    """
    return _ENV.world_size if _ENV is not None else int(os.environ.get("PADDLE_TRAINERS_NUM", "1"))


def barrier() -> None:
    """Wait until every rank gets here (on ring 0, CPU).

    Examples:
        >>> import keel.distributed as dist
        >>> dist.barrier()                     # returns once every rank has called it (at once in one process)
    """
    if _ENV is not None and _ENV.world_size > 1:
        communicators.lookup(0, communicators.np, "barrier").barrier("distributed.barrier")
