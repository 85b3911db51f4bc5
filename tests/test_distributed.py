"""Data-parallel training on MPI: 2-rank runs on localhost through the launcher
(`python -m keel.distributed.launch`), each bounded in time, against 1-process references.

The ranks run tests/distributed_script.py and write their results to .npz files. These
tests need mpi4py and an mpiexec (the mpich wheel of the "test" and "dist" extras) and are
skipped without them. The NCCL tests (each rank on a GPU of its own: NCCL refuses two ranks
on one device) also need cupy and 2 CUDA devices (one, for the one-rank test), and are
skipped without them; they have not run yet (no GPU here: tests/test_nccl_communicator.py
checks NCCLCommunicator against a stand-in of cupy.cuda.nccl).
"""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import distributed_script as script

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "distributed_script.py"
RUN_LIMIT_S = 120  # no launch may take longer, hang or not

mpi4py = pytest.importorskip("mpi4py", reason="needs mpi4py and mpich (the test extra)")
try:
    from keel.distributed.launch import find_mpiexec
    find_mpiexec()
except SystemExit:
    pytest.skip("no mpiexec (pip install -e '.[dist]')", allow_module_level=True)


def _env():
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), str(HERE)])
    return env


def launch(tmp_path, *args, nproc=2, timeout=30.0):
    """Run the script on `nproc` ranks through the launcher; (result, seconds)."""
    cmd = [sys.executable, "-m", "keel.distributed.launch", "--nproc_per_node", str(nproc),
           "--log_dir", str(tmp_path / "log"), "--timeout", str(timeout), str(SCRIPT), *map(str, args)]
    start = time.monotonic()
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=_env(), cwd=tmp_path)
    return r, time.monotonic() - start


def single(tmp_path, *args):
    r = subprocess.run([sys.executable, str(SCRIPT), *map(str, args), "--single"], capture_output=True,
                       text=True, timeout=RUN_LIMIT_S, env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    return r


def results(prefix, rank=0):
    with np.load(f"{prefix}.{rank}.npz", allow_pickle=False) as f:
        return dict(f)


# -- every collective op and dtype ---------------------------------------------------------------

def _reference(key, n):
    op, dtype = key.split("/")[:2]
    xs = [script.rank_input(r, dtype, () if key.endswith("/0d") else (2, 3)) for r in range(n)]
    if op.startswith("reduce_"):  # rank 0 is not the root (rank n - 1): its own X
        return xs[0]
    if op in script.REDUCE:
        return {"sum": np.sum, "max": np.max, "min": np.min, "prod": np.prod}[op](np.stack(xs), axis=0).astype(dtype)
    if op == "broadcast":
        return xs[n - 1]
    if op == "allgather":
        return np.stack(xs) if key.endswith("/0d") else np.concatenate(xs)
    if op == "reducescatter":
        big = sum(script.rank_input(r, dtype, (2 * n, 3)).astype(np.float64) for r in range(n)).astype(dtype)
        return big[:2]  # rank 0's part
    return xs[0]  # identity, barrier: rank 0's own


def _gpus() -> int:
    from keel.kernels.array_module import cupy_available
    if not cupy_available():
        return 0
    import cupy
    return cupy.cuda.runtime.getDeviceCount()


two_gpus = [pytest.mark.gpu, pytest.mark.skipif(_gpus() < 2, reason="NCCL: a GPU per rank (2 CUDA devices, cupy)")]


@pytest.mark.parametrize("place", ["cpu", pytest.param("gpu", marks=two_gpus)])
def test_every_collective_op_and_dtype_on_two_ranks(tmp_path, place):
    r, _ = launch(tmp_path, "collectives", tmp_path / "out", *(["--gpu"] if place == "gpu" else []))
    assert r.returncode == 0, r.stderr
    got0, got1 = results(tmp_path / "out", 0), results(tmp_path / "out", 1)
    assert len(got0) == len(script.DTYPES) * (4 * len(script.REDUCE) + 7)
    for key, value in got0.items():
        want = _reference(key, 2)
        assert value.dtype == want.dtype and value.shape == want.shape, key
        np.testing.assert_array_equal(value, want, err_msg=key)
        if key.startswith("reduce_"):  # the root, rank 1, has the reduction
            want = _reference(key[len("reduce_"):], 2)
            assert got1[key].dtype == want.dtype, key
            np.testing.assert_array_equal(got1[key], want, err_msg=f"{key} on rank 1")
        elif not key.startswith(("reducescatter", "identity", "barrier")):
            np.testing.assert_array_equal(got1[key], want, err_msg=f"{key} on rank 1")
    np.testing.assert_array_equal(got1["reducescatter/int64"], _full_reducescatter("int64", 2)[2:])


@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 1, reason="needs cupy and a CUDA device")
def test_every_collective_op_and_dtype_through_nccl_on_one_gpu_rank(tmp_path):
    """One rank on one GPU (what a one-GPU machine can run: NCCL refuses two ranks on one
    device): cupy's NCCL binding called as Keel calls it, every op and dtype, each result the
    rank's own input reduced, gathered or scattered over one rank."""
    r, _ = launch(tmp_path, "collectives", tmp_path / "out", "--gpu", nproc=1)
    assert r.returncode == 0, r.stderr
    got = results(tmp_path / "out", 0)
    assert len(got) == len(script.DTYPES) * (4 * len(script.REDUCE) + 7)
    for key, value in got.items():
        want = _reference(key, 1)
        assert value.dtype == want.dtype and value.shape == want.shape, key
        np.testing.assert_array_equal(value, want, err_msg=key)


def test_paddle_distributed_functions_build_the_collectives_into_the_program(tmp_path):
    r, _ = launch(tmp_path, "api", tmp_path / "out")
    assert r.returncode == 0, r.stderr
    x = [script.rank_input(rank, "float32") for rank in range(2)]
    want = {"all_reduce_max": [np.maximum(*x)] * 2, "all_reduce_async": [x[0] + x[1]] * 2,
            "reduce_to_1": [x[0], x[0] + x[1]], "broadcast_from_1": [x[1]] * 2,
            "all_gather_0": [x[0]] * 2, "all_gather_1": [x[1]] * 2,
            # rank r's part of the sum of [x_rank, 10 x_rank] over the ranks
            "reduce_scatter": [x[0] + x[1], 10 * (x[0] + x[1])]}
    for rank in range(2):
        got = results(tmp_path / "out", rank)
        assert sorted(got) == sorted(want)
        for name, values in want.items():
            np.testing.assert_allclose(got[name], values[rank], rtol=1e-6, err_msg=f"{name} on rank {rank}")


def _full_reducescatter(dtype, n):
    return sum(script.rank_input(r, dtype, (2 * n, 3)) for r in range(n)).astype(dtype)


# -- training: N ranks x B/N == 1 process x B -----------------------------------------------------

def _assert_same_training(ref, ranks, tol=1e-5):
    np.testing.assert_allclose(np.mean([r["losses"] for r in ranks], axis=0), ref["losses"], rtol=tol, atol=tol)
    for key in (k for k in ref if k.startswith("param/")):
        for r in ranks:
            np.testing.assert_allclose(r[key], ref[key], rtol=tol, atol=tol, err_msg=key)


@pytest.mark.parametrize("model", ["mlp", "bn"])
def test_two_ranks_train_like_one_process_with_the_whole_batch(tmp_path, model):
    flags = ["--bn"] if model == "bn" else []  # bn: strategy.sync_batch_norm
    single(tmp_path, "train", tmp_path / "ref", *flags)
    r, _ = launch(tmp_path, "train", tmp_path / "dp", *flags)
    assert r.returncode == 0, r.stderr
    _assert_same_training(results(tmp_path / "ref"), [results(tmp_path / "dp", k) for k in range(2)])


@pytest.mark.parametrize("batch_norm", [False, True], ids=["mlp", "bn"])
@pytest.mark.gpu
@pytest.mark.skipif(_gpus() < 2, reason="NCCL: a GPU per rank (2 CUDA devices, cupy)")
def test_two_gpu_ranks_train_like_one_cpu_process_with_the_whole_batch(tmp_path, batch_norm):
    """Gradients all-reduced through NCCL (bn: sync_batch_norm's statistics too); cuBLAS
    rounds otherwise than OpenBLAS, hence the looser tolerance."""
    flags = ["--bn"] if batch_norm else []
    single(tmp_path, "train", tmp_path / "ref", *flags)
    r, _ = launch(tmp_path, "train", tmp_path / "dp", "--gpu", *flags)
    assert r.returncode == 0, r.stderr
    _assert_same_training(results(tmp_path / "ref"), [results(tmp_path / "dp", k) for k in range(2)], tol=1e-4)


def test_sharded_optimizer_state_same_trajectory_half_the_memory(tmp_path):
    single(tmp_path, "train", tmp_path / "ref")
    r, _ = launch(tmp_path, "train", tmp_path / "zero", "--sharding")
    assert r.returncode == 0, r.stderr
    ref, ranks = results(tmp_path / "ref"), [results(tmp_path / "zero", k) for k in range(2)]
    _assert_same_training(ref, ranks)
    shares = [int(r["optimizer_bytes"]) for r in ranks]
    assert sum(shares) == int(ref["optimizer_bytes"])
    assert max(shares) <= 0.6 * int(ref["optimizer_bytes"]), shares


def test_checkpoint_from_two_ranks_resumes_on_one(tmp_path):
    single(tmp_path, "train", tmp_path / "ref", "--steps", 4)
    r, _ = launch(tmp_path, "train", tmp_path / "first", "--steps", 2, "--save", tmp_path / "ckpt.keel")
    assert r.returncode == 0, r.stderr
    single(tmp_path, "train", tmp_path / "rest", "--steps", 2, "--first-step", 2, "--load", tmp_path / "ckpt.keel")
    ref, rest = results(tmp_path / "ref"), results(tmp_path / "rest")
    np.testing.assert_allclose(rest["losses"], ref["losses"][2:], rtol=1e-5, atol=1e-5)
    for key in (k for k in ref if k.startswith("param/")):
        np.testing.assert_allclose(rest[key], ref[key], rtol=1e-5, atol=1e-5, err_msg=key)


def test_a_sharded_checkpoint_holds_every_ranks_state_and_resumes_on_one_or_two_ranks(tmp_path):
    """Every rank calls save_checkpoint; rank 0 writes the whole optimizer state (both
    ranks' moments), which resumes one process unsharded (strict: nothing missing) and two
    sharded ranks (each takes its own share) on the uninterrupted trajectory."""
    single(tmp_path, "train", tmp_path / "ref", "--steps", 4)
    r, _ = launch(tmp_path, "train", tmp_path / "first", "--steps", 2, "--sharding", "--save", tmp_path / "ckpt.keel")
    assert r.returncode == 0, r.stderr
    single(tmp_path, "train", tmp_path / "one", "--steps", 2, "--first-step", 2, "--load", tmp_path / "ckpt.keel")
    r, _ = launch(tmp_path, "train", tmp_path / "two", "--steps", 2, "--first-step", 2, "--sharding",
                  "--load", tmp_path / "ckpt.keel")
    assert r.returncode == 0, r.stderr
    ref = results(tmp_path / "ref")
    ref["losses"] = ref["losses"][2:]
    _assert_same_training(ref, [results(tmp_path / "one")])
    _assert_same_training(ref, [results(tmp_path / "two", k) for k in range(2)])


def test_sharding_under_amp_and_global_norm_clipping_follows_the_unsharded_run(tmp_path):
    """A rank of a sharded run holds only its share of the gradients: its overflow check
    and its part of the global norm are all-reduced, so every rank skips the same steps,
    keeps the same loss scale and clips by the same factor as without sharding. At this
    loss scale some steps overflow in one rank's share only (without the all-reduce, the
    ranks' scales part at step 5)."""
    flags = ["--amp", "O1", "--loss-scale", 65536, "--sgd", "--clip", 0.05, "--steps", 8]
    r, _ = launch(tmp_path, "train", tmp_path / "plain", *flags)
    assert r.returncode == 0, r.stderr
    r, _ = launch(tmp_path, "train", tmp_path / "zero", "--sharding", *flags)
    assert r.returncode == 0, r.stderr
    for rank in range(2):
        plain, zero = results(tmp_path / "plain", rank), results(tmp_path / "zero", rank)
        assert len(set(plain["loss_scales"])) > 1  # the scale moved: overflows happened
        np.testing.assert_array_equal(zero["loss_scales"], plain["loss_scales"])
        np.testing.assert_allclose(zero["losses"], plain["losses"], rtol=1e-6, atol=1e-7)
        for key in (k for k in plain if k.startswith("param/")):
            np.testing.assert_allclose(zero[key], plain[key], rtol=1e-6, atol=1e-7, err_msg=key)


def test_fleet_strategy_amp_and_gradient_merge_on_sharded_ranks(tmp_path):
    """strategy.gradient_merge on 2 sharded ranks follows one process merging the whole
    batch's gradients itself; strategy.amp runs exactly as the optimizer decorated by hand."""
    single(tmp_path, "train", tmp_path / "ref", "--merge", 2, "--steps", 6)
    r, _ = launch(tmp_path, "train", tmp_path / "merge", "--merge", 2, "--steps", 6, "--sharding", "--strategy-meta")
    assert r.returncode == 0, r.stderr
    _assert_same_training(results(tmp_path / "ref"), [results(tmp_path / "merge", k) for k in range(2)])
    for name, meta in (("hand", []), ("fleet", ["--strategy-meta"])):
        r, _ = launch(tmp_path, "train", tmp_path / name, "--amp", "O1", "--steps", 8, "--sharding", *meta)
        assert r.returncode == 0, r.stderr
    for rank in range(2):
        hand, by_fleet = results(tmp_path / "hand", rank), results(tmp_path / "fleet", rank)
        assert len(set(hand["loss_scales"])) > 1
        for key in hand:
            np.testing.assert_array_equal(by_fleet[key], hand[key], err_msg=key)


# -- faults: a rank that dies, hangs or fails ends the run with a clear error -----------------------

@pytest.mark.parametrize("fault", ["kill", "hang", "raise"])
def test_a_failing_rank_ends_the_run_with_a_clear_error(tmp_path, fault):
    r, seconds = launch(tmp_path, "train", tmp_path / "out", "--steps", 5, "--fault", fault, timeout=4)
    assert r.returncode != 0
    assert seconds < 40, f"took {seconds:.0f} s"
    # rank 0's output reached the terminal: step 0's line surely (rank 1 reaches step 2 only
    # after rank 0 printed it and joined step 1's all-reduce; MPI may kill rank 0 before it
    # prints step 1's, as Open MPI does within milliseconds)
    assert "step 0 loss" in r.stdout
    if fault != "raise":
        assert "rank 1 misbehaves at step 2" in r.stderr   # the failing rank's last output
    if fault == "kill":
        assert "rank 1 died first: Killed (signal 9)" in r.stderr
    elif fault == "hang":
        assert "rank 0 failed first: ExecutionError: c_sync_comm_stream" in r.stderr
        assert "CommTimeoutError: c_allreduce_sum (ring 0): rank 0 of 2 waited 4 s" in r.stderr
        assert "rank(s) [1] did not finish" in r.stderr
    else:
        assert r.returncode == 1
        assert "rank 1 failed first: RuntimeError: rank 1 fails on purpose at step 2" in r.stderr
        tail = r.stderr.split("--- last output of rank 1 (workerlog.1) ---")[1]
        assert "RuntimeError: rank 1 fails on purpose at step 2" in tail


def test_exit_code_is_the_failing_ranks(tmp_path):
    (tmp_path / "exit3.py").write_text(
        "import sys, distributed as dist\n"
        "dist.init_parallel_env()\n"
        "print('rank', dist.get_rank(), 'of', dist.get_world_size(), flush=True)\n"
        "sys.exit(3 if dist.get_rank() == 1 else 0)\n")
    cmd = [sys.executable, "-m", "keel.distributed.launch", "--nproc_per_node", "2", "--log_dir", str(tmp_path / "log"),
           "--timeout", "5", str(tmp_path / "exit3.py")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=_env(), cwd=tmp_path)
    assert r.returncode == 3, r.stderr
    assert "rank 1 failed first: SystemExit(3)" in r.stderr
    assert r.stdout.strip() == "rank 0 of 2"
    assert (tmp_path / "log" / "workerlog.1").read_text().startswith("rank 1 of 2\n")


def test_a_hostfile_starts_nproc_per_node_ranks_on_each_machine(tmp_path):
    (tmp_path / "hello.py").write_text(
        "import keel.distributed as dist\n"
        "dist.init_parallel_env()\n"
        "print('rank', dist.get_rank(), 'of', dist.get_world_size(), flush=True)\n")
    (tmp_path / "hosts").write_text("localhost slots=2\n")   # Open MPI's syntax, whatever the MPI
    cmd = [sys.executable, "-m", "keel.distributed.launch", "--nproc_per_node", "2", "--hostfile",
           str(tmp_path / "hosts"), "--log_dir", str(tmp_path / "log"), "--timeout", "30", str(tmp_path / "hello.py")]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_LIMIT_S, env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "rank 0 of 2"
    assert (tmp_path / "log" / "workerlog.1").read_text() == "rank 1 of 2\n"


def test_train_digits_example_trains_on_two_processes(tmp_path):
    pytest.importorskip("sklearn")
    r = subprocess.run([sys.executable, str(HERE.parent / "examples" / "train_digits.py"), "--nproc", "2",
                        "--epochs", "3", "--out", str(tmp_path / "digits")],
                       capture_output=True, text=True, timeout=RUN_LIMIT_S, env=_env(), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.strip().splitlines()
    assert lines[0].startswith("digits: 1438 training and 359 test images")
    assert lines[-1].startswith("test accuracy: ") and float(lines[-1].split(": ")[1]) >= 0.9
    assert (tmp_path / "digits.pdmodel").exists()                    # rank 0 exported the model
    assert "epoch  3  loss" in (tmp_path / "log" / "workerlog.1").read_text()   # rank 1 trained too
