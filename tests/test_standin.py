"""The cupy stand-in itself (tests/fake_cupy, tests/fake_cupyx): it has only cupy's names and
imitates the cupy behaviour that tells GPU-path bugs apart (tests/fake_cupy/__init__.py)."""
import threading

import numpy as np
import pytest

import fake_cupyx
import standin
from fake_cupy import _names


@pytest.fixture
def cp(fake_cupy):
    return fake_cupy


def _public(module):
    return {n for n in dir(module) if not n.startswith("_")}


# -- names -----------------------------------------------------------------------------------

def test_it_exposes_only_names_cupy_has(cp):
    assert _public(cp) <= set(_names.CUPY)
    assert _public(cp.random) <= set(_names.CUPY_RANDOM)
    assert _public(cp.cuda) <= set(_names.CUPY_CUDA)
    assert _public(cp.cuda.runtime) <= set(_names.CUPY_CUDA_RUNTIME)
    assert _public(cp.lib.stride_tricks) <= set(_names.CUPY_LIB_STRIDE_TRICKS)
    assert _public(fake_cupyx) <= set(_names.CUPYX)
    assert _public(cp.ndarray) <= set(_names.NDARRAY_METHODS + _names.NDARRAY_PROPERTIES)
    assert _public(cp.random.Generator) <= set(_names.GENERATOR_METHODS) | {"bit_generator"}
    assert len(_public(cp)) > 350  # and most of them


def test_names_cupy_lacks_or_the_stand_in_does_not_imitate_raise(cp):
    with pytest.raises(AttributeError, match="has no attribute 'errstate'"):
        cp.errstate  # numpy's, not cupy's
    with pytest.raises(AttributeError, match="does not imitate"):
        cp.ElementwiseKernel
    x = cp.zeros(3)
    with pytest.raises(AttributeError, match="has no attribute 'resize'"):
        x.resize(4)
    with pytest.raises(AttributeError):
        x.flags.writeable  # cupy's flags have c_contiguous, f_contiguous and owndata only
    for method in ("normal", "choice", "permutation", "shuffle", "spawn"):
        assert not hasattr(cp.random.default_rng(0), method)


def test_numpy_keywords_cupy_lacks_are_refused(cp):
    x = cp.arange(6.0)
    with pytest.raises(TypeError, match="where"):
        cp.sum(x, where=x > 2)
    with pytest.raises(TypeError, match="initial"):
        x.max(initial=0.0)
    with pytest.raises(TypeError, match="Wrong arguments"):
        cp.add(x, 1, where=x > 2)
    with pytest.raises(ValueError, match="kind"):
        cp.argsort(x, kind="quicksort")
    assert cp.sum(x, axis=0, keepdims=True).shape == (1,)


# -- device arrays and numpy -------------------------------------------------------------------

def test_implicit_conversion_to_numpy_is_refused(cp):
    x = cp.asarray(np.arange(4.0))
    for convert in (np.asarray, np.array, np.ascontiguousarray):
        with pytest.raises(TypeError, match="Implicit conversion to a NumPy array is not allowed"):
            convert(x)
    with pytest.raises(TypeError):
        np.sum(x)
    with pytest.raises(TypeError):
        np.exp(x)
    with pytest.raises(TypeError):
        np.concatenate([x, x])
    assert not isinstance(x, np.ndarray)


def test_host_arrays_are_refused_where_cupy_takes_device_arrays(cp):
    x, h = cp.ones(3), np.ones(3)
    for call in (lambda: cp.add(x, h), lambda: x + h, lambda: h + x, lambda: x * h, lambda: x < h,
                 lambda: cp.maximum(h, x), lambda: cp.where(x > 0, h, x), lambda: cp.concatenate([x, h]),
                 lambda: cp.exp(h), lambda: cp.add(x, [1, 2, 3]), lambda: cp.ascontiguousarray(h)):
        with pytest.raises(TypeError):
            call()
    with pytest.raises(TypeError):
        x[0:3] = h
    with pytest.raises(TypeError):
        cp.add(x, x, out=np.empty(3))


def test_scalars_are_fine_and_results_stay_on_the_device(cp):
    x = cp.asarray(np.array([1.0, 2.0], np.float32))
    for y in (x + 1, 2.5 * x, np.float32(2) * x, x * np.float64(0.5), -x, abs(x), x ** 2, x @ x, x.sum(),
              cp.sum(x), x[0], cp.exp(x), x > 1):
        assert standin.is_device(y)
    assert (x + 1).dtype == np.float32 and (x * np.float64(0.5)).dtype == np.float64  # numpy 2 promotion
    assert x.sum().shape == () and x[1].shape == ()  # 0-d device arrays, not numpy scalars


def test_asarray_copies_host_data_and_keeps_device_arrays(cp):
    h = np.arange(3.0)
    x = cp.asarray(h)
    h[0] = 7  # device memory is not the host's
    assert standin.to_host(x)[0] == 0
    assert cp.asarray(x) is x and cp.asarray(x, dtype=x.dtype) is x
    assert cp.asarray(x, dtype=np.float32) is not x
    assert cp.ascontiguousarray(x) is x and x.astype(x.dtype, copy=False) is x
    assert cp.add(x, 1, out=x) is x
    y = cp.asarray([x, x])  # a list of device arrays
    assert y.shape == (2, 3)


def test_reads_back_to_the_host_work_and_are_counted(cp):
    x = cp.asarray(np.array([1.5, 2.5]))
    standin.reset_counts()
    y = (x * 2 + 1).sum()
    assert standin.host_syncs() == 0
    assert float(y) == 10.0 and int(x[0]) == 1 and bool(x[1] > 2) and x[0].item() == 1.5
    assert x.tolist() == [1.5, 2.5]
    assert isinstance(x.get(), np.ndarray) and isinstance(cp.asnumpy(x), np.ndarray)
    assert standin.syncs() == {"float": 1, "int": 1, "bool": 1, "item": 1, "tolist": 1, "get": 2}
    standin.reset_counts()
    cp.nonzero(x > 2)
    x[x > 2]
    assert standin.syncs() == {"shape": 2}  # shapes that depend on the values are read back too
    host = x.get()
    host[0] = 0  # get() gives a copy
    assert standin.to_host(x)[0] == 1.5


# -- indexing: a GPU does not check bounds of index arrays --------------------------------------

def test_index_arrays_wrap_around(cp):
    x = cp.asarray(np.arange(10.0).reshape(2, 5))
    i = cp.asarray(np.array([5, -6, 7]))
    np.testing.assert_array_equal(x[:, i].get(), [[0, 4, 2], [5, 9, 7]])
    np.testing.assert_array_equal(x[1, np.array([6])].get(), [6])  # a host index array is copied in
    np.testing.assert_array_equal(cp.take(x, i).get(), [5, 4, 7])
    np.testing.assert_array_equal(x.take(i, axis=1).get(), [[0, 4, 2], [5, 9, 7]])
    ti = cp.asarray(np.array([[5], [-1]]))
    np.testing.assert_array_equal(cp.take_along_axis(x, ti, axis=1).get(), [[0], [9]])
    y = cp.zeros((2, 5))
    cp.put_along_axis(y, ti, 1.0, axis=1)
    y[0, cp.asarray(np.array([11]))] = 2.0
    np.testing.assert_array_equal(y.get(), [[1, 2, 0, 0, 0], [0, 0, 0, 0, 1]])
    with pytest.raises(IndexError):
        x[2]  # scalar indices are checked, as in cupy
    with pytest.raises(IndexError):
        x[0, -6]


def test_scatters_accumulate_wrap_and_take_only_atomic_dtypes(cp):
    idx = cp.asarray(np.array([0, 0, 4, -1]))
    for scatter in (lambda a, v: cp.add.at(a, idx, v), lambda a, v: fake_cupyx.scatter_add(a, idx, v)):
        a = cp.zeros(3, dtype=np.float32)
        scatter(a, cp.ones(4, dtype=np.float32))
        np.testing.assert_array_equal(a.get(), [2, 1, 1])
        with pytest.raises(TypeError, match="int64"):
            scatter(cp.zeros(3, dtype=np.int64), 1)  # CUDA has no atomicAdd for int64
    with pytest.raises(NotImplementedError):
        cp.multiply.at(cp.ones(3), idx, 2.0)
    with pytest.raises(NotImplementedError):
        cp.maximum.reduce(cp.ones(3))


# -- random ------------------------------------------------------------------------------------

def test_generators_are_cupys(cp):
    a, b = cp.random.default_rng(3), cp.random.default_rng(3)
    x = a.random((2, 3), dtype=np.float32)
    assert standin.is_device(x) and x.dtype == np.float32
    np.testing.assert_array_equal(x.get(), b.random((2, 3), dtype=np.float32).get())
    assert not np.array_equal(cp.random.default_rng(3).random(6).get(), np.random.default_rng(3).random(6))
    assert standin.is_device(a.standard_normal()) and a.standard_normal().shape == ()  # arrays for size=None
    n = a.integers(0, 10, size=1000, dtype=np.int32)
    assert n.dtype == np.int32 and 0 <= int(n.min()) and int(n.max()) <= 9
    u = a.uniform(-2.0, 3.0, size=(100,))
    assert float(u.min()) >= -2.0 and float(u.max()) < 3.0
    assert callable(a.bit_generator.state)  # a device pointer, not numpy's serializable dict
    with pytest.raises(TypeError):
        dict(a.bit_generator.state)


# -- devices and streams -------------------------------------------------------------------------

def test_devices_are_per_thread_and_arrays_remember_theirs(monkeypatch):
    cp = standin.install(monkeypatch, device_count=2)
    assert cp.cuda.runtime.getDeviceCount() == 2
    with pytest.raises(cp.cuda.runtime.CUDARuntimeError):
        cp.cuda.Device(2).use()
    cp.cuda.Device(1).use()
    x = cp.ones(3)
    assert x.device == cp.cuda.Device(1) and cp.cuda.get_device_id() == 1
    seen = []
    t = threading.Thread(target=lambda: seen.append(cp.cuda.get_device_id()))
    t.start()
    t.join()
    assert seen == [0]  # a new thread starts on device 0, as with cupy
    with cp.cuda.Device(0):
        y = cp.ones(3)
        with pytest.raises(ValueError, match="different from the current device"):
            x + y
    assert cp.cuda.get_device_id() == 1
    with pytest.raises(RuntimeError, match="different device"):
        with cp.cuda.Device(0):
            gen = cp.random.default_rng(0)
        gen.random(3)  # a generator's state lives on its device
    with cp.cuda.Stream() as s:
        assert cp.cuda.get_current_stream() is s
    assert cp.cuda.get_current_stream() is cp.cuda.Stream.null
