"""Communicators: what a collective kernel talks through, keyed by `ring_id`.

The collective ops (`kernels/collective.py`) name a communicator by their `ring_id`
attribute, as PaddlePaddle's do. This module keeps the table ring_id -> communicator per
backend, and the two backends, each a thin layer over an existing engine:

- `MPICommunicator`: MPI through mpi4py, for arrays on the CPU (numpy);
- `NCCLCommunicator`: NCCL through cupy, for arrays on a GPU, bootstrapped over MPI
  (rank 0 makes the NCCL unique id and broadcasts it; PaddlePaddle sends it over its own
  sockets instead: `c_gen_nccl_id`'s endpoints).

A kernel picks the backend from its array module: numpy -> "mpi", cupy -> "nccl".

Nothing here waits forever: every MPI collective is started nonblocking and polled until
it completes or `timeout()` seconds pass (`KEEL_COMM_TIMEOUT`, default 300), when it
raises `CommTimeoutError` naming the collective, the ring, this rank and the world; the
launcher (distributed/launch.py) then tears the group down. A nonblocking collective
(`use_calc_stream=False`, PaddlePaddle's "communication stream") returns its output
buffer at once and completes at the ring's `wait_all` (the `c_sync_comm_stream` op).

This module imports neither `program` nor `executor` (it belongs to the kernels layer),
and mpi4py/cupy only when a communicator is made.
"""
from __future__ import annotations

import os
import time

import numpy as np


class CommError(RuntimeError):
    """A collective could not run: no communicator for the ring, mismatched shapes, a dead peer."""


class CommTimeoutError(CommError):
    """A collective did not complete within the timeout: a peer died, hangs or diverged."""


def timeout() -> float:
    """Seconds a collective may wait for its peers (KEEL_COMM_TIMEOUT, default 300)."""
    return float(os.environ.get("KEEL_COMM_TIMEOUT", "300"))


REDUCE_OPS = ("sum", "max", "min", "prod")

_RINGS: dict[tuple[str, int], object] = {}  # (backend, ring_id) -> communicator


def register(ring_id: int, comm) -> None:
    """Make `comm` the communicator of `ring_id` for its backend (replacing any earlier one)."""
    _RINGS[(comm.backend, int(ring_id))] = comm


def unregister_all() -> None:
    _RINGS.clear()


def backend_of(xp) -> str:
    return "mpi" if xp is np else "nccl"


def find(ring_id: int, xp):
    """The communicator of `ring_id` for xp's backend, or None (a single process)."""
    return _RINGS.get((backend_of(xp), int(ring_id)))


def lookup(ring_id: int, xp, op_type: str):
    """The communicator a kernel of `op_type` on array module `xp` uses for `ring_id`."""
    backend = backend_of(xp)
    comm = _RINGS.get((backend, int(ring_id)))
    if comm is None:
        known = sorted(r for b, r in _RINGS if b == backend)
        raise CommError(
            f"{op_type}: no {backend.upper()} communicator for ring_id {ring_id} (rings set up: "
            f"{known or 'none'}); call keel.distributed.init_parallel_env() (or fleet.init) first, "
            f"and start the script with `python -m keel.distributed.launch --nproc_per_node N` or mpirun")
    return comm


def mpi():
    """mpi4py's MPI module, with a clear error where the optional extra is missing."""
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise CommError('distributed training on the CPU needs MPI: pip install -e ".[dist]" '
                        "(mpi4py and the mpich wheel)") from e
    return MPI


class _Pending:
    """A started collective: its MPI request, what it was, what to do when it completes,
    and its buffers, kept alive until then (the executor drops its own references to a
    send buffer as soon as the kernel returns)."""

    def __init__(self, request, what: str, finish=None, buffers=()):
        self.request, self.what, self.finish, self.buffers = request, what, finish, buffers


class MPICommunicator:
    """Collectives over an mpi4py communicator, on numpy arrays."""

    backend = "mpi"

    def __init__(self, mpi_comm):
        self.comm = mpi_comm
        self.rank = mpi_comm.Get_rank()
        self.size = mpi_comm.Get_size()
        self._pending: list[_Pending] = []
        MPI = mpi()
        self._ops = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}

    # -- waiting -----------------------------------------------------------------------
    def _wait(self, pending: _Pending) -> None:
        """Poll until the request completes; raise CommTimeoutError after timeout() seconds.
        Spins for the first milliseconds (a peer a step behind usually arrives by then),
        then sleeps between polls so a stuck peer costs no CPU."""
        start = time.monotonic()
        limit, pause = timeout(), 0.0
        while not pending.request.Test():
            waited = time.monotonic() - start
            if waited > limit:
                raise CommTimeoutError(
                    f"{pending.what}: rank {self.rank} of {self.size} waited {waited:.0f} s for its peers "
                    f"(KEEL_COMM_TIMEOUT={limit:g}); a peer has died, hangs, or runs a different program")
            if waited > 0.002:
                pause = min(0.001, pause + 0.00005)
                time.sleep(pause)
        if pending.finish is not None:
            pending.finish()

    def _run(self, request, what: str, wait: bool, finish=None, buffers=()) -> None:
        pending = _Pending(request, what, finish, buffers)
        if wait:
            self._wait(pending)
        else:
            self._pending.append(pending)

    def wait_for(self, request, what: str) -> None:
        """Wait, within the timeout, for an MPI request started outside this class."""
        self._wait(_Pending(request, what))

    def wait_all(self) -> None:
        """Complete every collective started without waiting (c_sync_comm_stream)."""
        pending, self._pending = self._pending, []
        for p in pending:
            self._wait(p)

    # -- collectives -------------------------------------------------------------------
    def _reduced(self, x: np.ndarray, shape, start, what: str, wait: bool) -> np.ndarray:
        """A fresh array of `shape` in x's dtype: what `start(send, recv)` (an MPI reduction
        started on x in its wire dtype) leaves in recv; float16/bfloat16 (which MPI has no
        type for) are reduced in float32 and rounded once, when the collective completes."""
        wire = _wire_dtype(x.dtype)
        send = x if wire == x.dtype else x.astype(wire)
        recv = np.empty(shape, wire)
        if wire == x.dtype:
            self._run(start(send, recv), what, wait, buffers=(send, recv))
            return recv
        out = np.empty(shape, x.dtype)
        self._run(start(send, recv), what, wait, finish=lambda: np.copyto(out, recv, casting="unsafe"),
                  buffers=(send, recv))
        return out

    def allreduce(self, x: np.ndarray, op: str, what: str, wait: bool = True) -> np.ndarray:
        """A fresh array: the elementwise `op` of x over the ranks."""
        x = _contiguous(x)
        return self._reduced(x, x.shape, lambda send, recv: self.comm.Iallreduce(send, recv, op=self._ops[op]),
                             what, wait)

    def reduce(self, x: np.ndarray, op: str, root: int, what: str, wait: bool = True) -> np.ndarray:
        """On `root`, a fresh array: the elementwise `op` of x over the ranks; elsewhere x
        itself, which the ring only reads."""
        self._check_root(root, what)
        x = _contiguous(x)
        if self.rank == root:
            return self._reduced(x, x.shape, lambda send, recv: self.comm.Ireduce(send, recv, op=self._ops[op],
                                                                                   root=root), what, wait)
        send = x if _wire_dtype(x.dtype) == x.dtype else x.astype(_wire_dtype(x.dtype))
        self._run(self.comm.Ireduce(send, None, op=self._ops[op], root=root), what, wait, buffers=(send,))
        return x

    def broadcast(self, x: np.ndarray, root: int, what: str, wait: bool = True) -> np.ndarray:
        """root's x on every rank: the root sends x itself (contiguous; the ring only reads
        it), the others receive into a fresh array."""
        self._check_root(root, what)
        buf = _contiguous(x) if self.rank == root else np.empty(x.shape, x.dtype)
        wire = _wire_dtype(buf.dtype)
        view = buf if wire == buf.dtype else buf.reshape(-1).view(np.uint8)  # bytes travel unchanged
        self._run(self.comm.Ibcast(view, root=root), what, wait, buffers=(buf,))
        return buf

    def allgather(self, x: np.ndarray, what: str, wait: bool = True) -> np.ndarray:
        """The ranks' x concatenated along axis 0 in rank order (stacked for a 0-d x)."""
        x = _contiguous(x)
        self._check_same_shape(x, what)
        out = np.empty((self.size,) + x.shape, x.dtype)
        self._run(self.comm.Iallgather(x.reshape(-1).view(np.uint8), out.reshape(-1).view(np.uint8)),
                  what, wait, buffers=(x, out))
        return out if x.ndim == 0 else out.reshape((self.size * x.shape[0],) + x.shape[1:])

    def reducescatter(self, x: np.ndarray, what: str, wait: bool = True) -> np.ndarray:
        """The sum over the ranks of x, split into `size` equal parts along axis 0: this
        rank's part."""
        if x.ndim == 0 or x.shape[0] % self.size:
            raise CommError(f"{what}: dim 0 of X {list(x.shape)} must be a multiple of nranks {self.size}")
        x = _contiguous(x)
        return self._reduced(x, (x.shape[0] // self.size,) + x.shape[1:],
                             lambda send, recv: self.comm.Ireduce_scatter_block(send, recv, op=self._ops["sum"]),
                             what, wait)

    def barrier(self, what: str) -> None:
        self._run(self.comm.Ibarrier(), what, True)

    def bcast_bytes(self, data: bytes | None, root: int, what: str) -> bytes:
        """Small host-side values (the NCCL id): `data` on the root, its copy everywhere."""
        n = np.array([len(data) if self.rank == root else 0], np.int64)
        self._run(self.comm.Ibcast(n, root=root), what, True)
        buf = np.frombuffer(data, np.uint8).copy() if self.rank == root else np.empty(int(n[0]), np.uint8)
        self._run(self.comm.Ibcast(buf, root=root), what, True)
        return buf.tobytes()

    def gather_bytes(self, data: bytes, root: int, what: str) -> list[bytes] | None:
        """Host-side records of any length (a checkpoint's shares): on the root, every
        rank's `data` in rank order; elsewhere None. Buffers only: nothing is pickled."""
        self._check_root(root, what)
        mine = np.array([len(data)], np.int64)
        sizes = np.empty(self.size, np.int64) if self.rank == root else None
        self._run(self.comm.Igather(mine, sizes, root=root), what, True)
        send = np.frombuffer(data, np.uint8)
        if self.rank != root:
            self._run(self.comm.Igatherv(send, None, root=root), what, True, buffers=(send,))
            return None
        offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
        recv = np.empty(int(sizes.sum()), np.uint8)
        MPI = mpi()
        self._run(self.comm.Igatherv(send, [recv, sizes, offsets, MPI.BYTE], root=root), what, True,
                  buffers=(send, recv))
        return [recv[o:o + s].tobytes() for o, s in zip(offsets, sizes)]

    # -- checks ------------------------------------------------------------------------
    def _check_root(self, root: int, what: str) -> None:
        if not 0 <= root < self.size:
            raise CommError(f"{what}: root {root} is not a rank of this ring (0..{self.size - 1})")

    def _check_same_shape(self, x, what: str) -> None:
        """Every rank must give the same shape (else MPI would read past the buffers)."""
        mine = np.array(list(x.shape) + [-1] * (8 - x.ndim) + [x.dtype.itemsize], np.int64)
        if x.ndim > 8:
            return
        lo, hi = np.empty_like(mine), np.empty_like(mine)
        self._run(self.comm.Iallreduce(mine, lo, op=self._ops["min"]), what, True)
        self._run(self.comm.Iallreduce(mine, hi, op=self._ops["max"]), what, True)
        if not np.array_equal(lo, hi):
            raise CommError(f"{what}: the ranks give X of different shapes or dtypes (this rank: "
                            f"{list(x.shape)} {x.dtype})")


def _contiguous(x: np.ndarray) -> np.ndarray:
    """x itself when C-contiguous, else a C-contiguous copy (0-d stays 0-d, unlike
    numpy's ascontiguousarray)."""
    return x if x.flags.c_contiguous else np.array(x, order="C")


def _wire_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype an array travels and is reduced in: float16 and bfloat16 (no MPI type) as
    float32, bool as uint8-compatible bool (MPI C_BOOL), the rest as themselves."""
    if dtype == np.float16 or dtype.name == "bfloat16":
        return np.dtype(np.float32)
    return dtype


class NCCLCommunicator:
    """Collectives over NCCL (cupy.cuda.nccl), on cupy arrays of the current device.

    Made by `init_parallel_env` on a CUDA place, bootstrapped over an MPICommunicator.
    Collectives are enqueued on the current stream (`use_calc_stream=True`) or, otherwise,
    on this communicator's own stream after an event recorded on the current one;
    `wait_all` makes the current stream wait for the communication stream.
    NCCL calls do not time out here (NCCL has no portable timeout): a dead peer shows up
    through MPI (the launcher), not through this class. Untested without a GPU."""

    backend = "nccl"
    _DTYPES = {"float16": 6, "float32": 7, "float64": 8, "int32": 2, "int64": 4, "uint8": 1, "int8": 0,
               "bfloat16": 9}
    _OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3}

    def __init__(self, bootstrap: MPICommunicator):
        import cupy
        from cupy.cuda import nccl
        self.cupy, self.nccl = cupy, nccl
        self.rank, self.size = bootstrap.rank, bootstrap.size
        # cupy gives the id as a tuple of C chars: -128..127 where char is signed (x86), 0..255
        # where it is not (ARM); bytes on the wire, each rank's own convention back
        uid = bytes(v & 0xFF for v in nccl.get_unique_id()) if self.rank == 0 else None
        uid = bootstrap.bcast_bytes(uid, 0, "c_gen_nccl_id")
        try:
            self.comm = nccl.NcclCommunicator(self.size, tuple(b - 256 if b > 127 else b for b in uid), self.rank)
        except OverflowError:   # char is unsigned here (the values are checked before NCCL is called)
            self.comm = nccl.NcclCommunicator(self.size, tuple(uid), self.rank)
        self.stream = cupy.cuda.Stream(non_blocking=True)
        # operands of collectives enqueued on self.stream: kept until `wait_all`, else the memory
        # pool could hand their memory to the current stream while NCCL still reads it (the
        # executor drops its references as soon as the kernel returns)
        self._held: list = []

    def _dtype(self, x, what: str) -> int:
        code = self._DTYPES.get(x.dtype.name)
        if code is None:
            raise CommError(f"{what}: NCCL has no type for {x.dtype}")
        return code

    def _stream(self, wait: bool, *inputs):
        current = self.cupy.cuda.get_current_stream()
        if wait:
            return current
        self.stream.wait_event(current.record())
        self._held.extend(inputs)
        return self.stream

    def allreduce(self, x, op: str, what: str, wait: bool = True):
        x = self.cupy.ascontiguousarray(x)
        out = self.cupy.empty_like(x)
        self.comm.allReduce(x.data.ptr, out.data.ptr, x.size, self._dtype(x, what), self._OPS[op],
                            self._stream(wait, x, out).ptr)
        return out

    def reduce(self, x, op: str, root: int, what: str, wait: bool = True):
        x = self.cupy.ascontiguousarray(x)
        out = self.cupy.empty_like(x) if self.rank == root else x
        self.comm.reduce(x.data.ptr, out.data.ptr, x.size, self._dtype(x, what), self._OPS[op], root,
                         self._stream(wait, x, out).ptr)
        return out

    def broadcast(self, x, root: int, what: str, wait: bool = True):
        out = self.cupy.array(x, copy=True, order="C")
        self.comm.bcast(out.data.ptr, out.size, self._dtype(out, what), root, self._stream(wait, out).ptr)
        return out

    def allgather(self, x, what: str, wait: bool = True):
        x = self.cupy.ascontiguousarray(x)
        out = self.cupy.empty((self.size,) + x.shape, x.dtype)
        self.comm.allGather(x.data.ptr, out.data.ptr, x.size, self._dtype(x, what),
                            self._stream(wait, x, out).ptr)
        return out if x.ndim == 0 else out.reshape((self.size * x.shape[0],) + x.shape[1:])

    def reducescatter(self, x, what: str, wait: bool = True):
        if x.ndim == 0 or x.shape[0] % self.size:
            raise CommError(f"{what}: dim 0 of X {list(x.shape)} must be a multiple of nranks {self.size}")
        x = self.cupy.ascontiguousarray(x)
        out = self.cupy.empty((x.shape[0] // self.size,) + x.shape[1:], x.dtype)
        self.comm.reduceScatter(x.data.ptr, out.data.ptr, out.size, self._dtype(x, what), self._OPS["sum"],
                                self._stream(wait, x, out).ptr)
        return out

    def barrier(self, what: str) -> None:
        one = self.cupy.ones((1,), self.cupy.float32)
        self.allreduce(one, "sum", what)
        self.cupy.cuda.get_current_stream().synchronize()

    def wait_all(self) -> None:
        """Make the current stream wait for every collective enqueued on this communicator's
        stream; their inputs may then be freed (what the current stream does next is
        ordered after them)."""
        self.cupy.cuda.get_current_stream().wait_event(self.stream.record())
        self._held.clear()
