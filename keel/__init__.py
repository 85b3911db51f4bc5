"""`import keel as paddle`: PaddlePaddle's top-level names over Keel's packages, so a script
written as PaddlePaddle's documentation writes it runs with its import line changed.

    import keel as paddle
    from keel import nn
    from keel.static import InputSpec

    model = paddle.Model(Net(), inputs=[InputSpec([None, 784], "float32", "x")], labels=[...])
    model.prepare(paddle.optimizer.Adam(parameters=model.parameters()), nn.CrossEntropyLoss(),
                  paddle.metric.Accuracy())
    model.fit(train_dataset, epochs=2, batch_size=64)
    model.save("inference/net", training=False)
    predictor = paddle.inference.create_predictor(paddle.inference.Config("inference/net"))

It holds no code of its own: `keel.program` (the IR, builder API, layers, io, jit, optimizers),
`keel.executor` (running, inference), `keel.hapi` (Model, metrics, callbacks) and
`keel.distributed` (process group, fleet) do the work; this facade sits above them all, as
`keel.tools` does. Each PaddlePaddle namespace (`keel.nn`, `keel.static`, `keel.io`, ...) is
a module of this package holding that namespace's names and nothing else.

`import keel` loads what building and running a program needs. The namespaces few scripts
touch (`hapi`'s Model, `distributed`, `inference`, `vision`, `linalg`, `onnx`, ...) load on
first use (`_ON_FIRST_USE` below, through PEP 562's module `__getattr__`), so their imports
(mpi4py, the Predictor's passes, the dy2static transformer) cost nothing until then;
`import keel.X` and `from keel import X` work for them as for any submodule.
"""
__version__ = "0.2.0"

from keel import amp, device, io, jit, nn, optimizer, regularizer, static, utils, version
from keel.device import (get_cudnn_version, is_compiled_with_cuda, is_compiled_with_custom_device,
                         is_compiled_with_xpu)
from keel.executor import (CPUPlace, CUDAPinnedPlace, CUDAPlace, Executor, LoDTensor, Scope, create_lod_tensor,
                           global_scope, scope_guard)
from keel.executor.eager import grad, is_grad_enabled, no_grad, set_grad_enabled, to_tensor
from keel.executor.flags import get_flags, set_flags
from keel.executor.place import get_device, set_device
from keel.program import (AttrError, DTypeError, DuplicateNameError, KeelError, OpError, Parameter, ParamAttr,
                          ParseError, Program, ProgramError, ShapeError, SlotError, Tensor, UndefinedVariableError,
                          UnknownOpError, UnsupportedProgramError, Variable, append_backward, create_parameter, data,
                          default_main_program, default_startup_program, disable_static, enable_static, gradients,
                          in_dynamic_mode, load, name_scope, program_guard, save, seed, unique_name)
from keel.program.dtype_names import (bfloat16, bool, cfloat, complex64, complex128, dtype, float, float16, float32,
                                      float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64)
from keel.optimizer import lr
from keel.program.dtypes import get_default_dtype, set_default_dtype
from keel.program.layers.math import relu  # noqa: F401  (Keel's own beside paddle.nn.functional.relu)
from keel.program.layers.tensor import one_hot, pad  # noqa: F401  (the same: paddle.nn.functional's)
from keel import tensor
from keel.tensor import *  # noqa: F401,F403  (the tensor functions: keel.tensor.__all__)

# The names few scripts use load at their first use. Each loader imports one package and
# returns the names it gives; the imports are written out, as Keel's shipped code imports
# nothing by a name computed at run time (tests/test_untrusted_models.py). `import keel.X as X`,
# not `from keel import X`: the latter asks this module for X, which is what is being loaded.
def _hapi() -> dict:
    import keel.callbacks as callbacks
    import keel.hapi as hapi
    import keel.metric as metric
    from keel.hapi.flops import flops
    from keel.hapi.model import Model
    from keel.hapi.model_summary import summary
    return {"hapi": hapi, "callbacks": callbacks, "metric": metric, "Model": Model, "summary": summary,
            "flops": flops}


def _distributed() -> dict:
    import keel.distributed as distributed
    from keel.distributed.data_parallel import DataParallel
    return {"distributed": distributed, "DataParallel": DataParallel}


def _inference() -> dict:
    import keel.inference as inference
    return {"inference": inference}


def _vision() -> dict:
    import keel.vision as vision
    return {"vision": vision}


def _linalg() -> dict:
    import keel.linalg as linalg
    return {"linalg": linalg, "inverse": linalg.inv, "cholesky": linalg.cholesky}


def _incubate() -> dict:
    import keel.incubate as incubate
    return {"incubate": incubate}


def _onnx() -> dict:
    import keel.onnx as onnx
    return {"onnx": onnx}


_ON_FIRST_USE = {"hapi": _hapi, "callbacks": _hapi, "metric": _hapi, "Model": _hapi, "summary": _hapi,
                 "flops": _hapi, "distributed": _distributed, "DataParallel": _distributed,
                 "inference": _inference, "vision": _vision, "linalg": _linalg, "inverse": _linalg,
                 "cholesky": _linalg, "incubate": _incubate, "onnx": _onnx}


def __getattr__(name: str):
    """PEP 562: a name of `_ON_FIRST_USE`, loaded with the others of its package and kept
    (so this runs once a package)."""
    loader = _ON_FIRST_USE.get(name)
    if loader is None:
        raise AttributeError(f"module 'keel' has no attribute {name!r}")
    try:
        loaded = loader()
    except ModuleNotFoundError as e:
        if e.name != f"keel.{name}":
            raise
        raise AttributeError(f"module 'keel' has no attribute {name!r}: keel.{name} is not in this build") from e
    globals().update(loaded)
    return loaded[name]


def __dir__() -> list[str]:
    return sorted(set(__all__) | {n for n in globals() if n.startswith("__")})


# PaddlePaddle 3.3.1's top-level names that Keel has (the tensor functions, keel.tensor's, and
# the rest), and Keel's own: building and running programs (paddle.static's, kept at the top
# as Keel's documentation writes them), LoD feeds, `lr` (paddle.optimizer.lr), `relu`/`one_hot`/
# `pad` (paddle.nn.functional's), Keel's errors, `onnx` (paddle.onnx.export; the onnx package
# itself is imported only when a model is exported).
__all__ = [*tensor.__all__,
           "amp", "append_backward", "AttrError", "bfloat16", "bool", "callbacks", "cfloat", "cholesky",
           "complex128", "complex64", "CPUPlace", "create_lod_tensor", "create_parameter", "CUDAPinnedPlace", "CUDAPlace",
           "data", "DataParallel", "default_main_program", "default_startup_program", "device",
           "disable_static", "distributed", "dtype", "DTypeError", "DuplicateNameError",
           "enable_static", "Executor", "float", "float16", "float32", "float64", "flops",
           "get_cudnn_version", "get_default_dtype", "get_device", "get_flags", "global_scope", "grad",
           "gradients", "hapi", "in_dynamic_mode", "incubate", "inference", "int16", "int32", "int64",
           "int8", "inverse", "io", "is_compiled_with_cuda", "is_compiled_with_custom_device",
           "is_compiled_with_xpu", "is_grad_enabled", "jit", "KeelError", "linalg", "load", "LoDTensor",
           "lr", "metric", "Model", "name_scope", "nn", "no_grad", "one_hot", "onnx", "OpError", "optimizer",
           "pad", "ParamAttr", "Parameter", "ParseError", "Program", "program_guard", "ProgramError",
           "regularizer", "relu", "save", "Scope", "scope_guard", "seed", "set_default_dtype",
           "set_device", "set_flags", "set_grad_enabled", "ShapeError", "SlotError", "static",
           "summary", "Tensor", "tensor", "to_tensor", "uint16", "uint32", "uint64", "uint8",
           "UndefinedVariableError", "unique_name", "UnknownOpError", "UnsupportedProgramError",
           "utils", "Variable", "version", "vision"]
