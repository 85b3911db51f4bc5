"""NCCLCommunicator (kernels/communicators.py) without a GPU, against a stand-in of
cupy.cuda.nccl that keeps cupy's contract: `get_unique_id()` gives the id as a tuple of C
chars (-128..127 where char is signed, x86; 0..255 where it is not, ARM), and
`NcclCommunicator(ndev, commId, rank)` refuses a value its char cannot hold with an
OverflowError (Cython's conversion) before NCCL is called. The collectives themselves need
a GPU (tests/test_gpu.py); here, which operands a non-blocking collective keeps alive."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from keel.kernels import communicators

# an id with bytes of either sign, as NCCL's (a socket address and a magic number) has
ID_BYTES = bytes(range(0, 256, 2))


class FakeNccl:
    def __init__(self, signed_char: bool):
        self.signed = signed_char
        self.made = []          # (ndev, the id as bytes, rank) per communicator

    def get_unique_id(self):
        return tuple(b - 256 if self.signed and b > 127 else b for b in ID_BYTES)

    def NcclCommunicator(self, ndev, comm_id, rank):  # noqa: N802 (cupy's name)
        lo, hi = (-128, 127) if self.signed else (0, 255)
        if any(not lo <= v <= hi for v in comm_id):
            raise OverflowError("value too large to convert to char")
        self.made.append((ndev, bytes(v & 0xFF for v in comm_id), rank))
        comm = types.SimpleNamespace(calls=[])
        comm.allReduce = lambda *args: comm.calls.append(("allReduce", args))
        return comm


class FakeStream:
    ptr = 7

    def __init__(self, non_blocking=False):
        self.waited = 0

    def record(self):
        return object()

    def wait_event(self, event):
        self.waited += 1


class FakeArray:
    def __init__(self, size):
        self.size, self.dtype = size, np.dtype(np.float32)
        self.data = types.SimpleNamespace(ptr=id(self))


def install(monkeypatch, nccl):
    current = FakeStream()
    cuda = types.ModuleType("cupy.cuda")
    cuda.nccl, cuda.Stream, cuda.get_current_stream = nccl, FakeStream, lambda: current
    cupy = types.ModuleType("cupy")
    cupy.cuda = cuda
    cupy.ascontiguousarray = lambda x: x
    cupy.empty_like = lambda x: FakeArray(x.size)
    for name, module in (("cupy", cupy), ("cupy.cuda", cuda), ("cupy.cuda.nccl", nccl)):
        monkeypatch.setitem(sys.modules, name, module)


class Bootstrap:
    """Two ranks' MPI bootstrap in one process: rank 0's bytes reach rank 1."""
    sent: dict = {}

    def __init__(self, rank):
        self.rank, self.size = rank, 2

    def bcast_bytes(self, data, root, what):
        assert what == "c_gen_nccl_id" and root == 0
        if self.rank == root:
            assert isinstance(data, bytes)
            Bootstrap.sent["id"] = data
        return Bootstrap.sent["id"]


@pytest.mark.parametrize("signed_char", [True, False], ids=["signed-char", "unsigned-char"])
def test_both_ranks_init_nccl_with_rank_0s_id(monkeypatch, signed_char):
    nccl = FakeNccl(signed_char)
    install(monkeypatch, nccl)
    comms = [communicators.NCCLCommunicator(Bootstrap(rank)) for rank in (0, 1)]
    assert nccl.made == [(2, ID_BYTES, 0), (2, ID_BYTES, 1)]
    assert [c.rank for c in comms] == [0, 1] and all(c.size == 2 for c in comms)


def test_a_non_blocking_collective_keeps_its_operands_until_wait_all(monkeypatch):
    install(monkeypatch, FakeNccl(True))
    comm = communicators.NCCLCommunicator(Bootstrap(0))
    x = FakeArray(5)
    comm.allreduce(x, "sum", "c_allreduce_sum", wait=True)
    assert comm._held == []                         # on the current stream: ordered already
    out = comm.allreduce(x, "sum", "c_allreduce_sum", wait=False)
    assert comm._held == [x, out] and comm.stream.waited == 1
    name, args = comm.comm.calls[-1]
    assert name == "allReduce" and args[:5] == (x.data.ptr, out.data.ptr, 5, 7, 0) and args[5] == comm.stream.ptr
    comm.wait_all()
    assert comm._held == []
