"""`paddle.flops(net, input_size)`: the multiply-adds of one forward pass, per leaf layer,
found by running the layer once in eval mode; PaddlePaddle's counting rules per layer
type (`COUNTERS`) and its printout. A leaf of another type counts zero, and says so, as
PaddlePaddle's does; `custom_ops={LayerType: fn(layer, inputs, output)}` adds rules (fn
adds to `layer.total_ops`, PaddlePaddle's convention)."""
from __future__ import annotations

import numpy as np

from keel.hapi.layer_trace import inputs_for, numel, shape_of, trace
from keel.program import nn


def _conv(layer, ins, out):
    kernel = int(np.prod(layer.weight.shape[2:]))
    bias = 1 if layer._parameters.get("bias") is not None else 0
    groups = layer._config.get("groups", 1)
    return numel(out) * (ins[0].shape[1] / groups * kernel + bias)


def _batch_norm(layer, ins, out):
    return 2 * numel(ins[0])   # eval mode: scale and shift


def _linear(layer, ins, out):
    return layer.weight.shape[0] * numel(out)


def _per_input_element(layer, ins, out):
    return numel(ins[0])


def _per_output_element(layer, ins, out):
    return numel(out)


def _adaptive_avg_pool(layer, ins, out):
    kernel = np.array(ins[0].shape[2:]) // np.array(out.shape[2:])
    return (int(np.prod(kernel)) + 1) * numel(out)   # the window's additions and one division


def _zero(layer, ins, out):
    return 0


COUNTERS = {
    nn.Conv2D: _conv, nn.Conv3D: _conv, nn.Conv2DTranspose: _conv,
    nn.BatchNorm2D: _batch_norm, nn.BatchNorm: _batch_norm,
    nn.ReLU: _zero, nn.ReLU6: _zero, nn.Dropout: _zero, nn.LeakyReLU: _per_input_element,
    nn.Linear: _linear,
    nn.AvgPool2D: _per_output_element, nn.AdaptiveAvgPool2D: _adaptive_avg_pool,
}


def flops(net, input_size, custom_ops=None, print_detail: bool = False) -> int:
    """Total multiply-adds of `net` on inputs of `input_size` (one shape or a list); prints
    the total (and with `print_detail` a row per leaf layer).

    Examples:
        >>> import keel as paddle
        >>> net = paddle.nn.Sequential(paddle.nn.Conv2D(3, 8, 3, padding=1), paddle.nn.ReLU(), paddle.nn.Linear(32, 10))
        >>> paddle.flops(net, [1, 3, 32, 32])
        <class 'keel.program.nn.layers.Conv2D'>'s flops has been counted
        <class 'keel.program.nn.layers.ReLU'>'s flops has been counted
        <class 'keel.program.nn.layers.Linear'>'s flops has been counted
        Total Flops: 311296     Total Params: 554
        311296
    """
    custom_ops = dict(custom_ops or {})
    rows, announced = [], set()
    training = net.training
    net.eval()

    def count(layer, ins, out):
        kind = type(layer)
        rule = custom_ops.get(kind) or COUNTERS.get(kind)
        if kind not in announced:
            announced.add(kind)
            print(f"Customize Function has been applied to {kind}" if kind in custom_ops else
                  f"{kind}'s flops has been counted" if rule else
                  f"Cannot find suitable count function for {kind}. Treat it as zero FLOPs.")
        if kind in custom_ops:
            layer.total_ops = 0
            rule(layer, ins, out)
            ops = layer.__dict__.pop("total_ops")
        else:
            ops = rule(layer, ins, out) if rule else 0
        rows.append((layer.full_name(), shape_of(ins[0]), shape_of(out),
                     sum(int(np.prod(p.shape)) for p in layer._parameters.values()), abs(int(ops))))

    try:
        trace(net, inputs_for(input_size), count, lambda layer: not layer.sublayers())
    finally:
        net.train() if training else net.eval()
    total_ops, total_params = sum(r[4] for r in rows), sum(r[3] for r in rows)
    if print_detail:
        print(_grid(["Layer Name", "Input Shape", "Output Shape", "Params", "Flops"], rows))
    print(f"Total Flops: {total_ops}     Total Params: {total_params}")
    return total_ops


def _grid(header, rows) -> str:
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) + 4 for i in range(len(header))]
    rule = "+" + "+".join("-" * w for w in widths) + "+"
    lines = [rule, "|" + "|".join(f"{h:^{w}}" for h, w in zip(header, widths)) + "|", rule]
    lines += ["|" + "|".join(f"{c:^{w}}" for c, w in zip(row, widths)) + "|" for row in cells[1:]]
    return "\n".join(lines + [rule])
