"""An inference model file (.pdmodel + .pdiparams) written as ONNX, op by op with
onnx.helper, for the ONNX Runtime peer of the mobile CNN benchmark: the peer then runs the
very file Keel and Paddle Inference load, weights included, and the benchmark checks the
three agree before timing (so a mistake here shows as a mismatch, not as a wrong ratio).

Covers the ops of benchmarks/mobile_cnns.py's programs (convolutions, batch norm,
activations, pools, nearest upsampling, elementwise ops with a bias-style axis, fc's `mul`,
squeeze/transpose/flatten, concat, softmax); anything else is an error naming the op.
Benchmark-only: needs the `onnx` package (imported when used), which Keel does not depend on.
"""
from __future__ import annotations

import numpy as np

import keel.program as pg

SKIPPED = ("feed", "fetch")


class Converter:
    def __init__(self, block, weights):
        import onnx
        self.onnx = onnx
        self.block, self.weights = block, weights
        self.nodes, self.inits, self.n = [], {}, 0

    def rank(self, name):
        return len(self.block.var(name).shape)

    def const(self, name, value=None):
        """An initializer: a weight of the file (by name), or a given value."""
        if value is None:
            value = self.weights[name]
        else:
            self.n += 1
            name = f"{name}__{self.n}"
        self.inits[name] = self.onnx.numpy_helper.from_array(np.asarray(value), name)
        return name

    def node(self, kind, inputs, outputs, **attrs):
        self.nodes.append(self.onnx.helper.make_node(kind, list(inputs), list(outputs), **attrs))

    def convert(self, op):
        a, ins, out = op.attrs, op.inputs, op.outputs
        x = lambda slot="X": ins[slot][0]  # noqa: E731
        y = lambda slot="Out": out[slot][0]  # noqa: E731
        t = op.type
        if t in ("conv2d", "depthwise_conv2d", "conv2d_transpose"):
            if a.get("padding_algorithm", "EXPLICIT") != "EXPLICIT" or a.get("data_format") != "NCHW":
                raise NotImplementedError(f"{t}: only explicit paddings in NCHW")
            p = list(a["paddings"])
            pads = p * 2 if len(p) == 2 else [p[0], p[2], p[1], p[3]]
            inputs = [x("Input"), self.const(ins["Filter"][0])]
            if ins.get("Bias"):
                inputs.append(self.const(ins["Bias"][0]))
            kind = "ConvTranspose" if t == "conv2d_transpose" else "Conv"
            if t == "conv2d_transpose" and (a.get("output_padding") or a.get("output_size")):
                raise NotImplementedError(f"{t}: output_padding/output_size")
            self.node(kind, inputs, [y("Output")], strides=list(a["strides"]), pads=pads,
                      dilations=list(a["dilations"]), group=int(a["groups"]))
        elif t == "batch_norm":
            stats = [self.const(ins[s][0]) for s in ("Scale", "Bias", "Mean", "Variance")]
            self.node("BatchNormalization", [x(), *stats], [y("Y")], epsilon=float(a["epsilon"]))
        elif t in ("relu", "sigmoid"):
            self.node(t.capitalize(), [x()], [y()])
        elif t == "hard_swish":
            if (a["threshold"], a["scale"], a["offset"]) != (6.0, 6.0, 3.0):
                raise NotImplementedError("hard_swish with other than the default attributes")
            self.node("HardSwish", [x()], [y()])
        elif t == "hard_sigmoid":
            self.node("HardSigmoid", [x()], [y()], alpha=float(a["slope"]), beta=float(a["offset"]))
        elif t in ("elementwise_add", "elementwise_mul"):
            self.node("Add" if t == "elementwise_add" else "Mul", [x(), self.broadcast_y(op)], [y()])
        elif t == "pool2d":
            self.pool(op)
        elif t == "nearest_interp_v2":
            if ins.get("OutSize") or ins.get("SizeTensor") or ins.get("Scale") or len(a["scale"]) != 2:
                raise NotImplementedError(f"{t}: only a constant scale")
            scales = self.const("scales", np.array([1, 1, *a["scale"]], np.float32))
            self.node("Resize", [x(), "", scales], [y()], mode="nearest",
                      coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        elif t == "concat":
            self.node("Concat", ins["X"], [y()], axis=int(a["axis"]))
        elif t == "mul":
            if a["x_num_col_dims"] != self.rank(x()) - 1 or a["y_num_col_dims"] != 1:
                raise NotImplementedError("mul: only X's last axis contracted with a 2-d Y")
            self.node("MatMul", [x(), self.const(ins["Y"][0])], [y()])
        elif t == "softmax":
            self.node("Softmax", [x()], [y()], axis=int(a["axis"]))
        elif t == "squeeze2":
            self.node("Squeeze", [x(), self.const("axes", np.array(a["axes"], np.int64))], [y()])
        elif t == "transpose2":
            self.node("Transpose", [x()], [y()], perm=list(a["axis"]))
        elif t == "flatten_contiguous_range":
            if a["stop_axis"] not in (-1, self.rank(x()) - 1):
                raise NotImplementedError(f"{t}: only flattening to the last axis")
            self.node("Flatten", [x()], [y()], axis=int(a["start_axis"]))
        else:
            raise NotImplementedError(f"no ONNX conversion for op {t!r}")

    def broadcast_y(self, op):
        """Y as ONNX broadcasts it: Paddle's `axis` aligns Y's dims with X's from `axis` on
        (a conv bias [C] at axis 1), ONNX aligns trailing dims."""
        name, axis, rx = op.input("Y")[0], op.attr("axis"), self.rank(op.input("X")[0])
        ry = self.rank(name)
        trailing = 0 if axis == -1 else rx - axis - ry
        if name in self.weights:
            value = self.weights[name]
            return self.const(name, value.reshape(value.shape + (1,) * trailing)) if trailing else self.const(name)
        if trailing:
            raise NotImplementedError(f"{op.type}: a computed Y broadcast at axis {axis}")
        return name

    def pool(self, op):
        a, x, y = op.attrs, op.input("X")[0], op.output("Out")[0]
        avg = a["pooling_type"] == "avg"
        if a["global_pooling"] or (a["adaptive"] and list(a["ksize"]) == [1, 1]):
            self.node("GlobalAveragePool" if avg else "GlobalMaxPool", [x], [y])
            return
        if a["adaptive"] or a.get("padding_algorithm", "EXPLICIT") != "EXPLICIT":
            raise NotImplementedError("pool2d: adaptive pooling to more than 1x1, or padding_algorithm")
        p = list(a["paddings"])
        attrs = dict(kernel_shape=list(a["ksize"]), strides=list(a["strides"]),
                     pads=p * 2 if len(p) == 2 else [p[0], p[2], p[1], p[3]], ceil_mode=int(a["ceil_mode"]))
        if avg:
            attrs["count_include_pad"] = int(not a["exclusive"])
        self.node("AveragePool" if avg else "MaxPool", [x], [y], **attrs)


def export(prefix: str) -> bytes:
    """The inference model at `prefix` (.pdmodel, .pdiparams) as a serialized ONNX model
    (opset 17), its inputs and outputs named as the program's feeds and fetches."""
    from onnx import TensorProto, checker, helper
    program = pg.io.load_program(prefix + ".pdmodel")
    weights = pg.io.load_params(program, prefix + ".pdiparams")
    block = program.global_block()
    conv = Converter(block, weights)
    for op in block.ops:
        if op.type not in SKIPPED:
            conv.convert(op)

    def value_info(name):
        var = block.var(name)
        shape = ["N" if d < 0 else d for d in var.shape]
        return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)
    feeds = [op.output("Out")[0] for op in block.ops if op.type == "feed"]
    fetches = [op.input("X")[0] for op in block.ops if op.type == "fetch"]
    graph = helper.make_graph(conv.nodes, "keel_export", [value_info(n) for n in feeds],
                              [value_info(n) for n in fetches], list(conv.inits.values()))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    checker.check_model(model)
    return model.SerializeToString()
