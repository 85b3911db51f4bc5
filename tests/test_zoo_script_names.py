"""What the model zoos' training and export scripts call on `paddle` beyond the names
tests/test_api_coverage.py checks from the recorded fixture: PaddleOCR's (not in the
fixture: its repository is too large to record whole here), and the calls whose behaviour a
script relies on (`ParallelEnv().dev_id`, `SyncBatchNorm.convert_sync_batchnorm`, ...)."""
import sys

import numpy as np

import keel as paddle
from keel.tools.api_coverage import resolve

# Read from PaddleOCR's tools/train.py (0619cc2), tools/program.py (006d84b),
# tools/export_model.py (0002349) and ppocr/utils/export_model.py (00639f6)
PADDLEOCR_SCRIPTS = {
    "paddle": ["set_device", "is_compiled_with_cuda", "set_flags", "DataParallel", "no_grad", "argmax"],
    "paddle.distributed": ["get_world_size", "get_rank", "init_parallel_env", "ParallelEnv"],
    "paddle.nn": ["SyncBatchNorm"],
    "paddle.amp": ["GradScaler", "decorate"],
    "paddle.static": ["InputSpec"],
    "paddle.jit": ["to_static", "save"],
}


def test_paddleocr_scripts_names_resolve():
    missing = [f"{ns}.{n}" for ns, names in PADDLEOCR_SCRIPTS.items() for n in names if resolve(ns, n) is None]
    assert not missing


def test_parallel_env_reads_the_launchers_environment(monkeypatch):
    for name in ("PADDLE_TRAINER_ID", "PADDLE_TRAINERS_NUM", "PADDLE_RANK_IN_NODE", "FLAGS_selected_gpus"):
        monkeypatch.delenv(name, raising=False)
    single = paddle.distributed.ParallelEnv()
    assert (single.rank, single.world_size, single.nranks, single.local_rank) == (0, 1, 1, 0)
    monkeypatch.setenv("PADDLE_TRAINER_ID", "3")
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "4")
    monkeypatch.setenv("PADDLE_RANK_IN_NODE", "1")
    monkeypatch.setenv("FLAGS_selected_gpus", "1,2")
    env = paddle.distributed.ParallelEnv()
    assert (env.rank, env.world_size, env.local_rank, env.device_id, env.dev_id) == (3, 4, 1, 1, 1)
    # PaddleOCR's tools/program.py: device = 'gpu:{}'.format(dist.ParallelEnv().dev_id)
    assert f"gpu:{env.dev_id}" == "gpu:1"


def test_convert_sync_batchnorm_keeps_the_parameters_and_the_result():
    net = paddle.nn.Sequential(paddle.nn.Conv2D(3, 4, 3), paddle.nn.BatchNorm2D(4),
                               paddle.nn.Sequential(paddle.nn.ReLU(), paddle.nn.BatchNorm2D(4, data_format="NCHW")))
    x = paddle.to_tensor(np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype("float32"))
    net(x)                                     # training mode: the running statistics move
    net.eval()
    before, keys = net(x).numpy(), list(net.state_dict())
    params = [id(p) for p in net.parameters()]
    converted = paddle.nn.SyncBatchNorm.convert_sync_batchnorm(net)
    assert converted is net                    # children replaced in place, as PaddlePaddle does
    assert [type(layer).__name__ for layer in (net[1], net[2][1])] == ["SyncBatchNorm"] * 2
    assert [id(p) for p in net.parameters()] == params and list(net.state_dict()) == keys
    assert not net[1].training
    np.testing.assert_array_equal(net(x).numpy(), before)   # one process: batch_norm's result


def test_convert_sync_batchnorm_of_a_batch_norm_without_affine_parameters():
    bn = paddle.nn.BatchNorm1D(3, weight_attr=False, bias_attr=False)
    converted = paddle.nn.SyncBatchNorm.convert_sync_batchnorm(bn)
    assert isinstance(converted, paddle.nn.SyncBatchNorm) and list(converted.state_dict()) == ["_mean", "_variance"]
    x = paddle.to_tensor(np.arange(12, dtype="float32").reshape(4, 3))
    np.testing.assert_allclose(converted(x).numpy(), bn(x).numpy(), rtol=1e-6)


def test_fleet_distributed_model_is_data_parallel_in_one_process():
    layer = paddle.nn.Linear(2, 3)
    wrapped = paddle.distributed.fleet.distributed_model(layer)
    assert isinstance(wrapped, paddle.DataParallel) and list(wrapped.state_dict()) == list(layer.state_dict())
    x = paddle.ones([1, 2])
    np.testing.assert_array_equal(wrapped(x).numpy(), layer(x).numpy())


def test_device_queries_of_devices_keel_lacks():
    assert paddle.is_compiled_with_xpu() is False and paddle.is_compiled_with_custom_device("npu") is False
    assert paddle.device.get_all_custom_device_type() == [] and paddle.get_cudnn_version() is None
    assert paddle.inverse is paddle.linalg.inv and paddle.cholesky is paddle.linalg.cholesky


def test_distributed_is_available_says_whether_mpi4py_is_there(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)     # as if it were not installed
    assert paddle.distributed.is_available() is False
