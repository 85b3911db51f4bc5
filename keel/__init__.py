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
`keel.tools` does.
"""
__version__ = "0.2.0"

import sys as _sys

from keel.program import *  # noqa: F401,F403  (Program, data, nn, io, jit, static, optimizer, lr, seed, save, load, ...)

# The star import copied keel.program's module `program` (where Program is defined) over the
# package's own name here: put the package back, before anything below imports keel.program.
program = _sys.modules["keel.program"]
from keel.program import incubate, io, jit, linalg, lr, optimizer, regularizer  # noqa: F401
from keel.executor import CPUPlace, CUDAPinnedPlace, CUDAPlace, Executor, Scope, global_scope, scope_guard  # noqa: F401
from keel.executor import LoDTensor, create_lod_tensor  # noqa: F401  (feeds with a LoD: executor/lod.py)
from keel.executor import inference  # noqa: F401  (Config, create_predictor, PrecisionType)
from keel.executor.eager import grad, is_grad_enabled, no_grad, set_grad_enabled, to_tensor  # noqa: F401
from keel.hapi import Model, callbacks  # noqa: F401
from keel import metric  # noqa: F401,E402  (keel.hapi.metrics' classes and accuracy)
from keel import distributed  # noqa: F401,E402  (paddle.distributed: init_parallel_env, fleet, ...; mpi4py only when used)

from keel.program import vision  # noqa: E402,F401
from keel import device, utils, version  # noqa: E402,F401  (paddle.device, paddle.utils.run_check, paddle.version)
from keel.device import get_device, is_compiled_with_cuda, set_device  # noqa: E402,F401
from keel.executor.flags import get_flags, set_flags  # noqa: E402,F401
from keel.hapi.flops import flops  # noqa: E402,F401
from keel.hapi.model_summary import summary  # noqa: E402,F401
from keel.program.dtype_names import *  # noqa: E402,F401,F403  (paddle.float32, paddle.int64, paddle.bool, ...)
from keel.program.dtypes import get_default_dtype, set_default_dtype  # noqa: E402,F401

# paddle.nn and paddle.static as PaddlePaddle 3.x has them (keel/nn.py, keel/static.py), in
# place of the star import's keel.program.nn (Keel's static builders, fluid's cross_entropy
# among them) and keel.program.static
del nn, static  # the star import's; importing the submodules below binds them again
from keel import nn, static  # noqa: E402

# `from keel.static import InputSpec`, `import keel.nn as nn`: the submodules are the
# packages' own modules under a second name (the same objects, not copies)
for _name, _module in {"nn": nn, "static": static, "io": io, "jit": jit, "optimizer": optimizer, "lr": lr,
                       "regularizer": regularizer, "vision": vision, "inference": inference,
                       "metric": metric, "callbacks": callbacks, "optimizer.lr": lr, "linalg": linalg,
                       "static.amp": static.amp, "static.nn": static.nn,
                       "nn.functional": nn.functional, "nn.initializer": nn.initializer, "nn.utils": nn.utils,
                       "incubate": incubate,
                       "incubate.optimizer": incubate.optimizer}.items():
    _sys.modules[f"{__name__}.{_name}"] = _module
# paddle.vision.transforms, paddle.DataParallel, paddle.amp (a line each, apart from the table above)
_sys.modules[f"{__name__}.vision.transforms"] = vision.transforms
from keel.distributed.data_parallel import DataParallel  # noqa: E402,F401
import keel.amp as amp  # noqa: E402  (paddle.amp, eager decorate: `from keel import amp` would find the star import's static one)
