"""`paddle.amp`: eager mixed precision. `auto_cast` and `GradScaler` are
program/amp/eager.py's; `decorate` here is PaddlePaddle 3's eager one (over Layers and
optimizers), not `paddle.static.amp.decorate` (over a static optimizer, program/amp)."""
from keel.program.dtypes import is_floating, to_code, to_numpy
from keel.program.amp.eager import GradScaler, auto_cast  # noqa: F401
from keel.program.nn import layers as _layers
from keel.program.nn.layer import Layer

__all__ = ["auto_cast", "GradScaler", "decorate", "is_float16_supported", "is_bfloat16_supported"]

# Layers whose parameters stay float32 under O2, as PaddlePaddle keeps its norm layers
_KEPT_FLOAT32 = tuple(getattr(_layers, name) for name in (
    "BatchNorm", "BatchNorm1D", "BatchNorm2D", "BatchNorm3D", "LayerNorm", "GroupNorm", "InstanceNorm1D",
    "InstanceNorm2D", "InstanceNorm3D", "SyncBatchNorm") if hasattr(_layers, name))


def decorate(models, optimizers=None, level="O1", dtype="float16", master_weight=None, save_dtype=None,
             master_grad=False, excluded_layers=None):
    """O1: the models and optimizers as they are (auto_cast picks each op's precision).
    O2: the models' parameters cast to `dtype` in place, except norm layers' and
    `excluded_layers`' (instances or classes), and the optimizers updating them through
    float32 master copies (unless master_weight=False). Returns what was given: a model,
    or (models, optimizers).

    Examples:
        >>> import keel as paddle
        >>> model = paddle.nn.Sequential(paddle.nn.Linear(4, 4), paddle.nn.BatchNorm1D(4))
        >>> opt = paddle.optimizer.SGD(parameters=model.parameters())
        >>> model, opt = paddle.amp.decorate(models=model, optimizers=opt, level="O2")
        >>> model[0].weight.dtype, model[1].weight.dtype           # norm layers stay float32
        (paddle.float16, paddle.float32)
    """
    if level not in ("O1", "O2"):
        raise ValueError(f"amp.decorate: level must be 'O1' or 'O2', got {level!r}")
    code = to_code(dtype)
    if code not in (to_code("float16"), to_code("bfloat16")):
        raise ValueError(f"amp.decorate: dtype must be 'float16' or 'bfloat16', got {dtype!r}")
    if save_dtype is not None or master_grad:
        raise NotImplementedError("amp.decorate: save_dtype and master_grad are not supported in Keel")
    model_list = list(models) if isinstance(models, (list, tuple)) else [models]
    for model in model_list:
        if not isinstance(model, Layer):
            raise TypeError(f"amp.decorate: models must be Layers, got {type(model).__name__}")
    if level == "O2":
        excluded = _excluded(excluded_layers)
        for model in model_list:
            _cast_layers(model, code, excluded)
        optimizer_list = [] if optimizers is None else (
            list(optimizers) if isinstance(optimizers, (list, tuple)) else [optimizers])
        for optimizer in optimizer_list:
            optimizer._multi_precision = master_weight is not False
    return models if optimizers is None else (models, optimizers)


def _excluded(excluded_layers):
    items = [] if excluded_layers is None else (
        list(excluded_layers) if isinstance(excluded_layers, (list, tuple)) else [excluded_layers])
    classes = tuple(i for i in items if isinstance(i, type)) + _KEPT_FLOAT32
    instances = {id(i) for i in items if isinstance(i, Layer)}
    return lambda layer: isinstance(layer, classes) or id(layer) in instances


def _cast_layers(model, code, excluded) -> None:
    """Cast each sublayer's own parameters (not its children's) unless it is excluded."""
    for layer in model.sublayers(include_self=True):
        if excluded(layer):
            continue
        for param in layer.parameters(include_sublayers=False):
            if is_floating(param.dtype):
                param._value = param.value.astype(to_numpy(code))
                param._dtype = code
                param._version += 1


def is_float16_supported(device=None) -> bool:
    """float16 computes on every place Keel runs (on the CPU through numpy, slowly).

    Examples:
        >>> import keel as paddle
        >>> isinstance(paddle.amp.is_float16_supported(), bool)     # on the current device
        True
    """
    return True


def is_bfloat16_supported(device=None) -> bool:
    """bfloat16 computes in float32 with each result rounded (docs/compatibility.md).

    Examples:
        >>> import keel as paddle
        >>> isinstance(paddle.amp.is_bfloat16_supported(), bool)    # on the current device
        True
    """
    return True
