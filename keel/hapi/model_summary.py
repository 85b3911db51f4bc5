"""`paddle.summary(layer, input_size)`: each sublayer's input and output shapes and
parameter count, found by running the layer once, printed as PaddlePaddle prints it."""
from __future__ import annotations

import numpy as np

from keel.hapi.layer_trace import inputs_for, numel, shape_of, trace
from keel.program.nn.layer import Layer


def summary(net: Layer, input_size=None, dtypes=None, input=None) -> dict:
    """Print the table and return {"total_params": n, "trainable_params": m}. `input_size`:
    one shape or a list of shapes (or `input=` tensors to run on instead); `dtypes`: their
    dtypes (float32 by default). Every sublayer but containers (Sequential, LayerList)
    gets a row; the whole layer gets one only when it has no sublayers.

    Examples:
        >>> import keel as paddle
        >>> net = paddle.nn.Sequential(paddle.nn.Linear(4, 8), paddle.nn.ReLU(), paddle.nn.Linear(8, 2))
        >>> info = paddle.summary(net, (1, 4))
        ---------------------------------------------------------------------------
         Layer (type)       Input Shape          Output Shape         Param #
        ===========================================================================
           Linear-1           [[1, 4]]              [1, 8]              40
            ReLU-1            [[1, 8]]              [1, 8]               0
           Linear-2           [[1, 8]]              [1, 2]              18
        ===========================================================================
        Total params: 58
        Trainable params: 58
        Non-trainable params: 0
        ---------------------------------------------------------------------------
        Input size (MB): 0.00
        Forward/backward pass size (MB): 0.00
        Params size (MB): 0.00
        Estimated Total Size (MB): 0.00
        ---------------------------------------------------------------------------
        >>> info
        {'total_params': 58, 'trainable_params': 58}
    """
    from keel.program.nn import LayerList, Sequential
    if input is None and input_size is None:
        raise ValueError("summary: give input_size (a shape or a list of shapes) or input (tensors)")
    inputs = (list(input) if isinstance(input, (list, tuple)) else [input]) if input is not None \
        else inputs_for(input_size, dtypes)
    rows, counts = [], {}
    leaf = not net.sublayers()

    def record(layer, ins, outs):
        kind = type(layer).__name__
        counts[kind] = counts.get(kind, 0) + 1
        params = list(layer._parameters.values())
        rows.append({"name": f"{kind}-{counts[kind]}", "input": shape_of(list(ins)), "output": shape_of(outs),
                     "params": sum(int(np.prod(p.shape)) for p in params),
                     "trainable": sum(int(np.prod(p.shape)) for p in params if p.trainable),
                     "out_numel": numel(outs)})

    trace(net, inputs, record,
          lambda layer: not isinstance(layer, (Sequential, LayerList)) and (layer is not net or leaf))
    print(_table(rows, sum(numel(x) for x in inputs)) + "\n")   # the blank line PaddlePaddle's printout ends with
    total = sum(r["params"] for r in rows)
    return {"total_params": total, "trainable_params": sum(r["trainable"] for r in rows)}


def _table(rows, input_numel) -> str:
    widths = {"name": 15, "input": 20, "output": 20, "params": 15}
    for r in rows:
        widths = {"name": max(widths["name"], len(r["name"])), "input": max(widths["input"], len(str(r["input"]))),
                  "output": max(widths["output"], len(str(r["output"]))),
                  "params": max(widths["params"], len(str(r["params"])))}
    width = max(75, sum(widths.values()) + 5)
    line = "{:^{}} {:^{}} {:^{}} {:^{}}".format
    out = ["-" * width, line("Layer (type)", widths["name"], "Input Shape", widths["input"], "Output Shape",
                             widths["output"], "Param #", widths["params"]), "=" * width]
    for r in rows:
        out.append(line(r["name"], widths["name"], str(r["input"]), widths["input"], str(r["output"]),
                        widths["output"], f"{r['params']:,}", widths["params"]))
    total = sum(r["params"] for r in rows)
    trainable = sum(r["trainable"] for r in rows)
    # PaddlePaddle's estimate: 4 bytes per number; activations twice (forward and backward)
    input_mb = input_numel * 4.0 / 1024 ** 2
    output_mb = 2.0 * sum(r["out_numel"] for r in rows) * 4.0 / 1024 ** 2
    params_mb = total * 4.0 / 1024 ** 2
    out += ["=" * width, f"Total params: {total:,}", f"Trainable params: {trainable:,}",
            f"Non-trainable params: {total - trainable:,}", "-" * width,
            f"Input size (MB): {input_mb:0.2f}", f"Forward/backward pass size (MB): {output_mb:0.2f}",
            f"Params size (MB): {params_mb:0.2f}",
            f"Estimated Total Size (MB): {input_mb + output_mb + params_mb:0.2f}", "-" * width]
    return "\n".join(out)
