"""paddle.summary / Model.summary: a table of a network's layers (type, input and output
shapes, parameter count), the parameter totals and size estimates, as PaddlePaddle prints
them; returns {'total_params': N, 'trainable_params': M}.

The shapes come from building the network once in a scratch program on inputs of the given
shapes (a free batch dim, -1 or None, becomes 1, as PaddlePaddle's summary feeds one
sample): nothing runs and the network's parameters keep their values."""
from __future__ import annotations

import numpy as np

import keel.program as pg
from keel.program.static import InputSpec

__all__ = ["summary"]

_MB = 4.0 / 1024 ** 2          # float32 bytes, as PaddlePaddle estimates every size


def summary(net, input_size=None, dtypes=None, input=None) -> dict:
    """Print `net`'s layer table for inputs of `input_size` (a shape, an InputSpec, or a
    list of them for several inputs; `dtypes` one dtype or one per input, float32 by
    default) or for the tensors `input`, and return the parameter totals.

    Examples:
        >>> import keel as paddle
        >>> from keel.hapi import summary
        >>> net = paddle.nn.Sequential(paddle.nn.Conv2D(1, 6, 3, padding=1), paddle.nn.ReLU(),
        ...                            paddle.nn.Flatten(), paddle.nn.Linear(6 * 28 * 28, 10))
        >>> summary(net, (-1, 1, 28, 28))
        -------------------------------------------------------------------------
         Layer (type)       Input Shape          Output Shape         Param #
        =========================================================================
           Conv2D-1       [[1, 1, 28, 28]]      [1, 6, 28, 28]          60
            ReLU-1        [[1, 6, 28, 28]]      [1, 6, 28, 28]           0
           Flatten-1      [[1, 6, 28, 28]]        [1, 4704]              0
           Linear-1          [[1, 4704]]            [1, 10]           47,050
        =========================================================================
        Total params: 47,110
        Trainable params: 47,110
        Non-trainable params: 0
        -------------------------------------------------------------------------
        Input size (MB): 0.00
        Forward/backward pass size (MB): 0.11
        Params size (MB): 0.18
        Estimated Total Size (MB): 0.29
        -------------------------------------------------------------------------
        {'total_params': 47110, 'trainable_params': 47110}
    """
    specs = _input_specs(input_size, dtypes, input)
    rows = _layer_rows(net, specs)
    total = sum(row["params"] for row in rows.values())
    trainable = sum(row["trainable"] for row in rows.values())
    outputs = sum(int(np.prod(shape)) for row in rows.values() for shape in _shapes(row["output"]))
    inputs = sum(int(np.prod(spec.shape)) for spec in specs)
    sizes = {"Input size (MB)": inputs * _MB, "Forward/backward pass size (MB)": 2 * outputs * _MB,
             "Params size (MB)": total * _MB}
    sizes["Estimated Total Size (MB)"] = sum(sizes.values())
    print(_table(rows, total, trainable, sizes))
    return {"total_params": total, "trainable_params": trainable}


def _input_specs(input_size, dtypes, input) -> list[InputSpec]:
    """One InputSpec per network input, its free batch dim set to 1."""
    if input is not None:
        tensors = input if isinstance(input, (list, tuple)) else [input]
        return [InputSpec(list(t.shape), t.numpy().dtype.name) for t in tensors]
    if input_size is None:
        raise ValueError("summary: give input_size (a shape, an InputSpec or a list of them) or input")
    is_dim = lambda d: d is None or isinstance(d, (int, np.integer))  # noqa: E731
    single = isinstance(input_size, InputSpec) or (
        isinstance(input_size, (list, tuple)) and all(is_dim(d) for d in input_size))
    sizes = [input_size] if single else list(input_size)
    kinds = dtypes if isinstance(dtypes, (list, tuple)) else [dtypes] * len(sizes)
    if len(kinds) != len(sizes):
        raise ValueError(f"summary: {len(sizes)} inputs but {len(kinds)} dtypes")
    specs = []
    for size, dtype in zip(sizes, kinds):
        shape = size.shape if isinstance(size, InputSpec) else list(size)
        dtype = dtype or (size.dtype if isinstance(size, InputSpec) else "float32")
        free = [i for i, d in enumerate(shape) if d is None or d == -1]
        if len(free) > 1:
            raise ValueError(f"summary: only the batch dim of input_size may be None or -1, got {list(shape)}")
        if any(d is not None and d != -1 and d <= 0 for d in shape):
            raise ValueError(f"summary: input_size dims must be positive (or the batch dim -1), got {list(shape)}")
        specs.append(InputSpec([1 if i in free else int(d) for i, d in enumerate(shape)], dtype))
    return specs


def _layer_rows(net, specs) -> dict:
    """The rows of the table, in the order the layers finish: every layer but the
    containers (and `net` itself when no sublayer ran), keyed `Type-N` as PaddlePaddle's."""
    rows, counted = {}, set()

    def record(layer, inputs, outputs):
        try:
            index = int(layer.full_name().split("_")[-1])
        except ValueError:
            index = len(rows)
        # its own parameters, and those of its sublayers that did not run as layers (an
        # LSTM's cells); a sublayer that ran finished first and has its own row
        params = [p for p in layer.parameters() if id(p) not in counted]
        counted.update(id(p) for p in params)
        rows[f"{type(layer).__name__}-{index + 1}"] = {
            "input": [list(x.shape) for x in inputs if hasattr(x, "shape")], "output": _output_shape(outputs),
            "params": sum(int(np.prod(p.shape)) for p in params),
            "trainable": sum(int(np.prod(p.shape)) for p in params if p.trainable)}

    handles = [layer.register_forward_post_hook(record) for layer in net.sublayers()
               if not isinstance(layer, (pg.nn.Sequential, pg.nn.LayerList))]
    own = {}
    handles.append(net.register_forward_post_hook(lambda layer, inputs, outputs: own.update(row=(inputs, outputs))))
    try:
        with pg.program_guard(pg.Program(), pg.Program()), pg.unique_name.guard():
            net(*[pg.static.data(f"input_{i}", spec.shape, spec.dtype) for i, spec in enumerate(specs)])
    finally:
        for handle in handles:
            handle.remove()
    if not rows:      # no sublayer was called (a plain layer; LSTM's cells are parameters only): net's own row
        record(net, *own["row"])
    return rows


def _output_shape(outputs):
    if isinstance(outputs, (list, tuple)):
        return [_output_shape(o) for o in outputs]
    return list(outputs.shape)


def _shapes(shape) -> list[list[int]]:
    """The flat shapes of one row's output (a shape, or nested lists of them)."""
    if shape and isinstance(shape[0], list):
        return [s for part in shape for s in _shapes(part)]
    return [shape]


def _table(rows, total, trainable, sizes) -> str:
    cells = [(name, str(row["input"]), str(_plain(row["output"])), f"{row['params']:,}")
             for name, row in rows.items()]
    header = ("Layer (type)", "Input Shape", "Output Shape", "Param #")
    widths = [max([least] + [len(c[i]) + 2 for c in cells]) for i, least in enumerate((15, 20, 20, 15))]
    width = sum(widths) + 3
    line = lambda items: " ".join(f"{item:^{w}}" for item, w in zip(items, widths)).rstrip()  # noqa: E731
    text = ["-" * width, line(header), "=" * width, *(line(c) for c in cells), "=" * width,
            f"Total params: {total:,}", f"Trainable params: {trainable:,}",
            f"Non-trainable params: {total - trainable:,}", "-" * width,
            *(f"{key}: {value:0.2f}" for key, value in sizes.items()), "-" * width]
    return "\n".join(text)


def _plain(shape):
    return shape[0] if isinstance(shape, list) and len(shape) == 1 and isinstance(shape[0], list) else shape
