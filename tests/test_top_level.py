"""PaddlePaddle's top-level names over Keel (issue 30): version, utils.run_check, the default
device, device.cuda, flags, summary, flops, optimizer.lr. The scripts are PaddlePaddle's
documented ones with the import line changed."""
import importlib.metadata
import os
import re

import numpy as np
import pytest

import keel as paddle
from keel.executor import CPUPlace, CUDAPlace, Executor
from keel.executor import place as places
from keel.kernels import parallel
from keel.utils import install_check


@pytest.fixture
def cpu_default():
    """Whatever a test sets with set_device, the next test starts on the CPU."""
    yield
    places._default_place = None


# -- version ---------------------------------------------------------------------------------
def test_version_comes_from_one_place():
    assert paddle.__version__ == paddle.version.full_version == importlib.metadata.version("keel")
    assert ".".join([paddle.version.major, paddle.version.minor, paddle.version.patch]) == paddle.__version__
    assert paddle.version.cuda() is False and paddle.version.cudnn() is False


# -- run_check ---------------------------------------------------------------------------------
RUN_CHECK_SCRIPT = """
import keel as paddle          # was: import paddle
paddle.utils.run_check()
"""


def test_run_check_script_trains_on_the_cpu_and_says_why_no_gpu(capsys):
    exec(compile(RUN_CHECK_SCRIPT, "run_check_script.py", "exec"), {})  # noqa: S102
    lines = capsys.readouterr().out.splitlines()
    assert lines == ["Running verify Keel program ... ", "Keel works well on 1 CPU.",
                     'No GPU in use: cupy is not installed (pip install -e ".[gpu]" in the Keel checkout '
                     'for CUDA GPUs).',
                     "Keel is installed successfully! Let's start deep learning with Keel now."]


def test_run_check_trains_on_every_gpu_cupy_finds(monkeypatch, capsys):
    import standin
    standin.install(monkeypatch, device_count=2)
    trained = []
    real = install_check._train
    monkeypatch.setattr(install_check, "_train", lambda place: trained.append(place) or real(place))
    paddle.utils.run_check()
    assert trained == [CPUPlace(), CUDAPlace(0), CUDAPlace(1)]
    assert "Keel works well on 2 GPUs." in capsys.readouterr().out


def test_run_check_fails_loudly_naming_the_device(monkeypatch):
    monkeypatch.setattr(install_check, "_train", lambda place: (1.0, 2.0))
    with pytest.raises(RuntimeError, match=r"does not work on the CPU: 10 SGD steps took the loss from 1 to 2"):
        paddle.utils.run_check()


def test_training_losses_fall():
    first, last = install_check._train(CPUPlace())
    assert np.isfinite(last) and last < 0.5 * first


# -- devices ---------------------------------------------------------------------------------
def test_without_cupy_there_is_only_the_cpu(cpu_default):
    assert paddle.get_device() == "cpu" and paddle.device.cuda.device_count() == 0
    assert not paddle.is_compiled_with_cuda() and paddle.device.get_available_device() == ["cpu"]
    assert paddle.set_device("cpu") == CPUPlace()
    with pytest.raises(ValueError, match=r"finds 0 usable CUDA device"):
        paddle.set_device("gpu:0")
    with pytest.raises(ValueError, match="unknown device 'npu'"):
        paddle.set_device("npu")
    assert paddle.get_device() == "cpu"


def test_set_device_moves_executors_and_new_tensors(fake_cupy, cpu_default):
    import cupy
    assert paddle.is_compiled_with_cuda() and paddle.device.cuda.device_count() == 1
    assert paddle.set_device("gpu") == CUDAPlace(0) and paddle.get_device() == "gpu:0"
    assert Executor().place == CUDAPlace(0)
    t = paddle.to_tensor([1.0, 2.0])
    assert isinstance(t.value, cupy.ndarray)
    assert isinstance(paddle.to_tensor([1.0], place=CPUPlace()).value, np.ndarray)
    with pytest.raises(ValueError, match="finds 1 usable"):
        paddle.set_device("gpu:1")
    paddle.set_device("cpu")
    assert Executor().place == CPUPlace() and isinstance(paddle.to_tensor([1.0]).value, np.ndarray)


def test_eager_layers_made_after_set_device_train_there(fake_cupy, cpu_default):
    """Parameters initialize on the CPU's random stream (the same values either way) and
    live on the chosen device; the forward, backward and update run there."""
    import cupy
    paddle.seed(5)
    want = paddle.nn.Linear(3, 2).weight.numpy()
    paddle.set_device("gpu:0")
    paddle.seed(5)
    net = paddle.nn.Linear(3, 2)
    assert isinstance(net.weight.value, cupy.ndarray)
    np.testing.assert_array_equal(net.weight.numpy(), want)
    opt = paddle.optimizer.SGD(learning_rate=0.1, parameters=net.parameters())
    net(paddle.to_tensor(np.ones((4, 3), "float32"))).sum().backward()
    opt.step()
    assert isinstance(net.weight.value, cupy.ndarray)
    np.testing.assert_allclose(net.weight.numpy(), want - 0.1 * 4, rtol=1e-6)   # d sum(x W + b) / dW = 4
    assert isinstance(paddle.zeros([2, 3]).value, cupy.ndarray)


# -- flags ---------------------------------------------------------------------------------------
def test_flags_are_keels_environment_variables(monkeypatch):
    for flag in paddle.executor.flags.FLAGS.values():   # unset here, as they were after the test
        monkeypatch.setenv(flag.env, "")
        monkeypatch.delenv(flag.env)
    assert paddle.get_flags(["FLAGS_check_nan_inf", "FLAGS_paddle_num_threads"]) == {
        "FLAGS_check_nan_inf": False, "FLAGS_paddle_num_threads": 1}
    assert not Executor().check_nan_inf
    paddle.set_flags({"FLAGS_check_nan_inf": True, "FLAGS_paddle_num_threads": 2})
    assert os.environ["KEEL_CHECK_NAN_INF"] == "1" and Executor().check_nan_inf
    assert parallel.threads() == 2 and paddle.get_flags("FLAGS_paddle_num_threads") == {"FLAGS_paddle_num_threads": 2}
    paddle.set_flags({"FLAGS_keel_max_tensor_bytes": 1 << 20})
    from keel.program import limits
    assert limits.max_tensor_bytes() == 1 << 20


def test_unknown_flags_and_bad_values_are_named(monkeypatch):
    monkeypatch.setenv("KEEL_CHECK_NAN_INF", "")   # unset here, as it was after the test
    monkeypatch.delenv("KEEL_CHECK_NAN_INF")
    with pytest.raises(ValueError, match=r"no flag 'FLAGS_cudnn_deterministic'.*FLAGS_check_nan_inf"):
        paddle.get_flags("FLAGS_cudnn_deterministic")
    with pytest.raises(ValueError, match="no flag 'FLAGS_nope'"):
        paddle.set_flags({"FLAGS_check_nan_inf": True, "FLAGS_nope": 1})
    assert "KEEL_CHECK_NAN_INF" not in os.environ   # nothing set when one name is wrong
    with pytest.raises(ValueError, match="FLAGS_paddle_num_threads takes an integer"):
        paddle.set_flags({"FLAGS_paddle_num_threads": 1.5})
    with pytest.raises(ValueError, match="True or False"):
        paddle.set_flags({"FLAGS_check_nan_inf": "yes"})


# -- summary and flops -----------------------------------------------------------------------
def _conv_net():
    nn = paddle.nn
    return nn.Sequential(nn.Conv2D(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(4 * 6 * 6, 10))


# What PaddlePaddle 3.3.1's paddle.summary printed for the same network (its layers, Keel's)
PADDLE_SUMMARY = """\
---------------------------------------------------------------------------
 Layer (type)       Input Shape          Output Shape         Param #    
===========================================================================
   Conv2D-1        [[1, 1, 8, 8]]        [1, 4, 6, 6]           40       
    ReLU-1         [[1, 4, 6, 6]]        [1, 4, 6, 6]            0       
   Flatten-1       [[1, 4, 6, 6]]          [1, 144]              0       
   Linear-1          [[1, 144]]            [1, 10]             1,450     
===========================================================================
Total params: 1,490
Trainable params: 1,490
Non-trainable params: 0
---------------------------------------------------------------------------
Input size (MB): 0.00
Forward/backward pass size (MB): 0.00
Params size (MB): 0.01
Estimated Total Size (MB): 0.01
---------------------------------------------------------------------------

"""


def test_summary_prints_paddles_table(capsys):
    assert paddle.summary(_conv_net(), (1, 1, 8, 8)) == {"total_params": 1490, "trainable_params": 1490}
    assert capsys.readouterr().out == PADDLE_SUMMARY


def test_summary_counts_frozen_parameters_and_several_inputs(capsys):
    class Two(paddle.nn.Layer):
        def __init__(self):
            super().__init__()
            self.a, self.b = paddle.nn.Linear(3, 2), paddle.nn.Linear(5, 2)

        def forward(self, x, y):
            return self.a(x) + self.b(y)
    net = Two()
    net.b.weight.trainable = False
    assert paddle.summary(net, [(2, 3), (2, 5)]) == {"total_params": 8 + 12, "trainable_params": 8 + 2}
    out = capsys.readouterr().out
    assert "Linear-2" in out and "Non-trainable params: 10" in out
    with pytest.raises(ValueError, match="positive integer"):
        paddle.summary(net, [(-1, 3), (2, 5)])


def test_flops_counts_paddles_rules(capsys):
    nn = paddle.nn
    assert paddle.flops(_conv_net(), [1, 1, 8, 8], print_detail=True) == 1440 + 1440
    out = capsys.readouterr().out
    assert "Cannot find suitable count function for" in out and "Flatten" in out
    assert out.rstrip().endswith("Total Flops: 2880     Total Params: 1490")
    assert re.search(r"\|\s+conv2d_\d+\s+\|", out) and "|  1440   |" in out  # (the layer's number varies)
    net = nn.Sequential(nn.Conv2D(2, 4, 3, groups=2), nn.BatchNorm2D(4), nn.AvgPool2D(2), nn.Flatten(),
                        nn.Linear(36, 10), nn.ReLU())
    net.train()
    # conv: 288 outputs x (2/2 * 9 + 1); bn: 2 x 288; avg pool: 72 outputs; linear: 36 x 20
    assert paddle.flops(net, [2, 2, 8, 8]) == 2880 + 576 + 72 + 720
    assert net.training   # the mode is put back
    pool = nn.Sequential(nn.AdaptiveAvgPool2D(2))
    assert paddle.flops(pool, [1, 3, 8, 8]) == (16 + 1) * 12


def test_flops_custom_ops(capsys):
    def count_flatten(layer, inputs, output):
        layer.total_ops += int(np.prod(output.shape))
    assert paddle.flops(_conv_net(), [1, 1, 8, 8], custom_ops={paddle.nn.Flatten: count_flatten}) == 2880 + 144
    assert "Customize Function has been applied" in capsys.readouterr().out


@pytest.mark.paddle
def test_summary_matches_paddles_own(capsys):
    real = pytest.importorskip("paddle")
    if not real.in_dynamic_mode():
        real.disable_static()
    nn = real.nn
    theirs = real.summary(nn.Sequential(nn.Conv2D(1, 4, 3), nn.ReLU(), nn.Flatten(), nn.Linear(144, 10)),
                          (1, 1, 8, 8))
    printed = capsys.readouterr().out
    ours = paddle.summary(_conv_net(), (1, 1, 8, 8))
    assert capsys.readouterr().out == printed
    assert ours == {k: int(v) for k, v in theirs.items()}


# -- optimizer.lr ------------------------------------------------------------------------------
def test_optimizer_lr_is_keels_lr_module():
    import keel.optimizer.lr as lr
    assert lr is paddle.optimizer.lr is paddle.lr
    scheduler = paddle.optimizer.lr.StepDecay(learning_rate=0.1, step_size=2, gamma=0.5)
    rates = []
    for _ in range(4):
        rates.append(scheduler())
        scheduler.step()
    assert rates == [0.1, 0.1, 0.05, 0.05]
