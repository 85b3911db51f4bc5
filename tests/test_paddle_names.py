"""PaddlePaddle 3.x names at Keel's top level and in its namespaces (issue 30): dtype
objects, get/set_default_dtype, paddle.io's samplers, jit.not_to_static, metric.accuracy,
DataParallel and nn.initializer."""
import pickle

import numpy as np
import pytest

import keel as paddle
import keel.program as pg
from keel.executor import CPUPlace, Executor, Scope
from keel.proto import pb


# -- dtypes ----------------------------------------------------------------------------------------

def test_dtype_names_compare_with_what_tensors_report():
    x = paddle.to_tensor(np.ones(2, np.float32))
    assert x.dtype == paddle.float32 and x.dtype != paddle.float64
    assert x.dtype == pb.VarType.FP32 == pg.dtypes.to_code("float32")   # codes and names agree
    assert str(x.dtype) == "paddle.float32" and repr(paddle.int64) == "paddle.int64"
    assert paddle.float32 != "float32"                 # as PaddlePaddle's: a dtype is not its name
    assert isinstance(x.dtype, paddle.dtype)
    for name in ("bool", "int8", "uint8", "int16", "int32", "int64", "float16", "bfloat16", "float32",
                 "float64", "complex64", "complex128"):
        d = getattr(paddle, name)
        assert str(d) == f"paddle.{name}" and d == pg.dtypes.to_code(name)
    assert paddle.float is paddle.float32 and paddle.cfloat is paddle.complex64
    assert paddle.uint16 is paddle.bfloat16            # PaddlePaddle's uint16 is bfloat16's bits
    assert {paddle.float32: "f"}[pb.VarType.FP32] == "f"    # hashes as its code
    assert pickle.loads(pickle.dumps(paddle.int32)) == paddle.int32


def test_dtypes_are_accepted_wherever_a_dtype_is():
    x = paddle.to_tensor(np.arange(3, dtype=np.float32))
    assert paddle.cast(x, paddle.float64).numpy().dtype == np.float64
    assert paddle.zeros([2], paddle.int32).numpy().dtype == np.int32
    assert paddle.to_tensor([1, 2], dtype=paddle.float16).numpy().dtype == np.float16
    assert x.astype(paddle.int64).dtype == paddle.int64
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        v = pg.data("v", [2, 3], paddle.float16)
        assert v.dtype == paddle.float16 and str(v.dtype) == "paddle.float16"
        assert main.global_block().var("v").desc.type.dense_tensor.tensor.data_type == pb.VarType.FP16


def test_default_dtype():
    assert paddle.get_default_dtype() == "float32"
    try:
        paddle.set_default_dtype("float64")
        assert paddle.get_default_dtype() == "float64"
        assert paddle.eye(2).dtype == paddle.float64 and paddle.empty([1]).dtype == paddle.float64
        paddle.set_default_dtype(paddle.float16)
        assert paddle.get_default_dtype() == "float16"
        with pytest.raises(TypeError, match="only supports"):
            paddle.set_default_dtype("int32")
    finally:
        paddle.set_default_dtype("float32")
    assert paddle.eye(2).dtype == paddle.float32


# -- paddle.io samplers ------------------------------------------------------------------------------

def test_samplers():
    data = list(range(10))
    assert list(paddle.io.SequenceSampler(data)) == data
    np.random.seed(0)
    drawn = list(paddle.io.RandomSampler(data))
    assert sorted(drawn) == data and drawn != data
    with_replacement = list(paddle.io.RandomSampler(data, replacement=True, num_samples=25))
    assert len(with_replacement) == 25 and set(with_replacement) <= set(data)
    assert list(paddle.io.RandomSampler(data, generator=iter([3, 1, 2]))) == [3, 1, 2]
    with pytest.raises(ValueError, match="replacement is False"):
        paddle.io.RandomSampler(data, num_samples=3)
    weighted = list(paddle.io.WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 200))
    assert set(weighted) == {1, 3} and 100 < weighted.count(3) < 190
    assert sorted(paddle.io.WeightedRandomSampler([1, 1, 1, 0], 3, replacement=False)) == [0, 1, 2]
    with pytest.raises(ValueError, match="only 3 weights are positive"):
        paddle.io.WeightedRandomSampler([1, 1, 1, 0], 4, replacement=False)
    subset = list(paddle.io.SubsetRandomSampler([7, 3, 5]))
    assert sorted(subset) == [3, 5, 7]
    with pytest.raises(NotImplementedError, match="__iter__"):
        iter(paddle.io.Sampler(data))


def test_a_sampler_drives_a_batch_sampler_and_loader():
    class Squares(paddle.io.Dataset):
        def __len__(self):
            return 6

        def __getitem__(self, i):
            return np.array([i * i], np.float32)

    batches = paddle.io.BatchSampler(sampler=paddle.io.SequenceSampler(Squares()), batch_size=4)
    assert list(batches) == [[0, 1, 2, 3], [4, 5]]
    loader = paddle.io.DataLoader(Squares(), batch_sampler=batches)
    got = [np.asarray(b[0].numpy() if isinstance(b, (list, tuple)) else b.numpy()).ravel().tolist() for b in loader]
    assert got == [[0, 1, 4, 9], [16, 25]]


# -- jit.not_to_static, metric.accuracy --------------------------------------------------------------

def test_not_to_static_marks_and_returns_the_function():
    from keel.program.jit_marks import is_not_to_static

    @paddle.jit.not_to_static
    def helper(x):
        return x + 1

    @paddle.jit.not_to_static()
    def other(x):
        return x

    assert helper(1) == 2 and is_not_to_static(helper) and is_not_to_static(other)
    assert not is_not_to_static(lambda x: x)


def test_metric_accuracy_eager_and_static():
    scores = np.array([[0.1, 0.9], [0.8, 0.2], [0.3, 0.7]], np.float32)
    labels = np.array([[1], [1], [1]], np.int64)
    top1 = paddle.metric.accuracy(paddle.to_tensor(scores), paddle.to_tensor(labels))
    assert top1.shape == [] and abs(float(top1) - 2 / 3) < 1e-6       # PaddlePaddle 3.3.1's value
    assert float(paddle.metric.accuracy(paddle.to_tensor(scores), paddle.to_tensor(labels), k=2)) == 1.0
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        acc = paddle.metric.accuracy(pg.data("s", [-1, 2]), pg.data("l", [-1, 1], "int64"))
    got, = Executor(CPUPlace()).run(main, feed={"s": scores, "l": labels}, fetch_list=[acc], scope=Scope())
    assert abs(float(got) - 2 / 3) < 1e-6
    from keel.hapi import metrics
    assert paddle.metric.Accuracy is metrics.Accuracy


# -- DataParallel, nn.initializer -------------------------------------------------------------------

def test_data_parallel_in_one_process_is_the_wrapped_layer():
    paddle.seed(1)
    net = paddle.nn.Linear(3, 2)
    model = paddle.DataParallel(net)
    x = paddle.to_tensor(np.ones((4, 3), np.float32))
    np.testing.assert_array_equal(model(x).numpy(), net(x).numpy())
    assert list(model.state_dict()) == list(net.state_dict()) == ["weight", "bias"]
    assert {id(p) for p in model.parameters()} == {id(p) for p in net.parameters()}
    loss = paddle.mean(model.scale_loss(model(x)))
    loss.backward()
    assert net.weight.grad is not None
    with pytest.raises(TypeError, match="expects a Layer"):
        paddle.DataParallel(lambda x: x)


def test_data_parallel_refuses_eager_multi_process_training(monkeypatch):
    monkeypatch.setenv("PADDLE_TRAINERS_NUM", "2")
    with pytest.raises(NotImplementedError, match="fleet.distributed_optimizer"):
        paddle.DataParallel(paddle.nn.Linear(2, 2))


def test_nn_initializer_namespace():
    import keel.nn.initializer as init
    for name in ("Assign", "Constant", "KaimingNormal", "KaimingUniform", "Normal", "TruncatedNormal", "Uniform",
                 "XavierNormal", "XavierUniform"):
        assert getattr(paddle.nn.initializer, name) is getattr(pg.initializer, name) is getattr(init, name)
    layer = paddle.nn.Linear(2, 3, weight_attr=paddle.ParamAttr(initializer=paddle.nn.initializer.Constant(0.5)))
    np.testing.assert_array_equal(layer.weight.numpy(), np.full((2, 3), 0.5, np.float32))


# -- paddle.amp ---------------------------------------------------------------------------------------

def test_amp_namespace_is_the_eager_one():
    assert paddle.amp.decorate is not pg.static.amp.decorate
    assert paddle.amp.auto_cast is pg.amp.auto_cast and paddle.amp.GradScaler is pg.amp.GradScaler
    net = paddle.nn.Linear(2, 2)
    opt = paddle.optimizer.SGD(0.1, parameters=net.parameters())
    assert paddle.amp.decorate(net, opt, level="O1") == (net, opt)
    assert paddle.amp.decorate(net) is net and net.weight.dtype == paddle.float32
    with pytest.raises(ValueError, match="level"):
        paddle.amp.decorate(net, level="O3")


def test_amp_o2_trains_low_precision_parameters_through_float32_masters():
    paddle.seed(0)
    net = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.BatchNorm1D(8), paddle.nn.Linear(8, 1))
    opt = paddle.optimizer.Adam(1e-2, parameters=net.parameters())
    net, opt = paddle.amp.decorate(net, opt, level="O2")
    kinds = {name: p.dtype for name, p in net.named_parameters()}
    assert kinds["0.weight"] == kinds["2.bias"] == paddle.float16
    assert kinds["1.weight"] == kinds["1._mean"] == paddle.float32      # norm layers stay float32
    scaler = paddle.amp.GradScaler(init_loss_scaling=1024)
    rng = np.random.default_rng(0)
    x = paddle.to_tensor(rng.random((16, 4), np.float32))
    y = paddle.to_tensor(rng.random((16, 1), np.float32))
    losses = []
    for _ in range(30):
        with paddle.amp.auto_cast(level="O2"):
            loss = paddle.mean((paddle.cast(net(x), "float32") - y) ** 2)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.clear_grad()
        losses.append(float(loss))
    assert losses[-1] < 0.2 * losses[0]
    assert net[0].weight.dtype == paddle.float16 and net[0].weight.numpy().dtype == np.float16


def test_dirac_filters_pass_their_input_through():
    init = paddle.nn.initializer
    conv = paddle.nn.Conv2D(2, 4, 3, padding=1, bias_attr=False,
                            weight_attr=paddle.ParamAttr(initializer=init.Dirac(groups=2)))
    w = conv.weight.numpy()
    want = np.zeros((4, 2, 3, 3), np.float32)
    for g in range(2):
        for i in range(2):
            want[g * 2 + i, i, 1, 1] = 1.0
    np.testing.assert_array_equal(w, want)
    x = np.random.default_rng(0).random((1, 2, 5, 5), np.float32)
    np.testing.assert_array_equal(conv(paddle.to_tensor(x)).numpy()[0], np.concatenate([x[0], x[0]]))
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup):
        p = pg.create_parameter([3, 5, 3], "float32", default_initializer=init.Dirac())
    scope = Scope()
    Executor(CPUPlace()).run(startup, scope=scope)
    got = np.asarray(scope.get(p.name))
    assert got.sum() == 3 and got[0, 0, 1] == got[1, 1, 1] == got[2, 2, 1] == 1
    with pytest.raises(ValueError, match="do not split into 2 groups"):
        paddle.nn.Conv2D(2, 3, 3, weight_attr=paddle.ParamAttr(initializer=init.Dirac(groups=2))).weight.numpy()


def test_calculate_gain():
    gain = paddle.nn.initializer.calculate_gain
    assert gain("conv2d") == gain("sigmoid") == 1 and gain("tanh") == 5 / 3 and gain("selu") == 0.75
    assert gain("relu") == np.sqrt(2) and gain("leaky_relu", 0.2) == np.sqrt(2 / 1.04)
    assert abs(gain("leaky_relu") - 1.4141428569978354) < 1e-15          # PaddlePaddle 3.3.1's value
    with pytest.raises(ValueError, match="not one of"):
        gain("swish")


def test_bad_arguments_raise_pythons_exceptions_naming_the_function_and_line():
    """Layer functions that raise ValueError/TypeError for bad arguments (as PaddlePaddle
    does) name themselves and the user's line (they raised 'ValueError() takes no keyword
    arguments' before)."""
    with pytest.raises(ValueError, match=r"randint: low \(5\) must be less than high \(2\)") as info:
        paddle.randint(5, 2)
    assert "test_paddle_names.py" in str(info.value)
    with pytest.raises(TypeError, match="rand: dtype must be a floating-point type"):
        paddle.rand([2], "int32")


def test_to_tensor_of_python_floats_follows_the_default_dtype():
    assert paddle.to_tensor([1.5]).dtype == paddle.float32
    assert paddle.to_tensor(np.ones(2)).dtype == paddle.float64      # arrays keep theirs
    try:
        paddle.set_default_dtype("float64")
        assert paddle.to_tensor([1.5, 2.0]).dtype == paddle.float64
        assert paddle.to_tensor(2.5).numpy().dtype == np.float64
        assert paddle.to_tensor([1, 2]).dtype == paddle.int64
    finally:
        paddle.set_default_dtype("float32")
