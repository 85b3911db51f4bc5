"""Mobile CNNs of the OCR family, built with Keel's program layers, for the inference
benchmark, the profiler's examples and the convolution work (issue 15).

The shapes follow PaddleOCR's mobile models (their configs, not their weights):
- `detector`: text detection at 320x480. A MobileNetV3-large backbone at scale 0.5 (stem
  conv3x3/2 and 15 bottlenecks: 1x1 expand, depthwise 3x3 or 5x5, squeeze-excitation on
  some, 1x1 project, residual where the shape allows; relu then hard_swish), an FPN-style
  neck on its 1/4, 1/8, 1/16 and 1/32 maps (1x1 to 96 channels, nearest upsampling and adds
  top-down, 3x3 to 24 channels, upsampled to 1/4 and concatenated) and a DB-style head
  (3x3 conv, two 2x2 stride-2 transposed convs, sigmoid): a 1x1x320x480 probability map.
- `recognizer`: text recognition at 48x320. A MobileNetV3-small backbone at scale 0.5
  strided in height only ((2, 1) strides: the width stays the sequence), 2x2 max pool, the
  H=1 map squeezed to a [N, 80, 288] sequence, an fc encoder (96) and a CTC-style fc head
  over 6625 classes with softmax.
- `classifier`: text direction at 48x192. The same backbone at scale 0.35, global average
  pool, fc to 2 classes, softmax.
Batch norms are in inference form (is_test) with random statistics, so that folding them
changes numbers. Every builder returns (input variable, output variable) and is called
inside a program guard; `save` writes one as an inference model, and

    python benchmarks/mobile_cnns.py DIR [--models detector recognizer classifier] [--seed 1]

writes them to DIR (DIR/detector.pdmodel + .pdiparams, ...), e.g. for tools/profile_model.py.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np


import keel.program as pg  # noqa: E402

# MobileNetV3 bottlenecks: kernel, expanded channels, out channels, squeeze-excitation,
# activation, stride (an int, or (h, w) for the recognizers' height-only strides)
LARGE = [(3, 16, 16, False, "relu", 1), (3, 64, 24, False, "relu", 2), (3, 72, 24, False, "relu", 1),
         (5, 72, 40, True, "relu", 2), (5, 120, 40, True, "relu", 1), (5, 120, 40, True, "relu", 1),
         (3, 240, 80, False, "hard_swish", 2), (3, 200, 80, False, "hard_swish", 1),
         (3, 184, 80, False, "hard_swish", 1), (3, 184, 80, False, "hard_swish", 1),
         (3, 480, 112, True, "hard_swish", 1), (3, 672, 112, True, "hard_swish", 1),
         (5, 672, 160, True, "hard_swish", 2), (5, 960, 160, True, "hard_swish", 1),
         (5, 960, 160, True, "hard_swish", 1)]
SMALL_TALL = [(3, 16, 16, True, "relu", (2, 1)), (3, 72, 24, False, "relu", (2, 1)),
              (3, 88, 24, False, "relu", 1), (5, 96, 40, True, "hard_swish", (2, 1)),
              (5, 240, 40, True, "hard_swish", 1), (5, 240, 40, True, "hard_swish", 1),
              (5, 120, 48, True, "hard_swish", 1), (5, 144, 48, True, "hard_swish", 1),
              (5, 288, 96, True, "hard_swish", (2, 1)), (5, 576, 96, True, "hard_swish", 1),
              (5, 576, 96, True, "hard_swish", 1)]
SHAPES = {"detector": (3, 320, 480), "recognizer": (3, 48, 320), "classifier": (3, 48, 192)}


def divisible(v, divisor=8):
    """Channels rounded to a multiple of 8, never below 90% of v (MobileNet's rule)."""
    out = max(divisor, int(v + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * v else out


def conv_bn(x, channels, k, stride=1, groups=1, act=None):
    h = pg.nn.conv2d(x, channels, k, stride=stride, padding=(k - 1) // 2, groups=groups, bias_attr=False)
    h = pg.nn.batch_norm(h, is_test=True)
    return _act(h, act)


def _act(h, act):
    if act == "relu":
        return pg.nn.relu(h)
    if act == "hard_swish":
        return pg.hard_swish(h)
    return h


def squeeze_excite(x, channels, reduction=4):
    s = pg.nn.adaptive_avg_pool2d(x, 1)
    s = pg.nn.conv2d(s, channels // reduction, 1, act="relu")
    s = pg.hard_sigmoid(pg.nn.conv2d(s, channels, 1), slope=0.2, offset=0.5)
    return pg.multiply(x, s)


def bottleneck(x, in_c, k, exp, out, se, act, stride):
    h = conv_bn(x, exp, 1, act=act)
    h = conv_bn(h, exp, k, stride=stride, groups=exp, act=act)
    if se:
        h = squeeze_excite(h, exp)
    h = conv_bn(h, out, 1)
    return x + h if stride == 1 and in_c == out else h


def backbone(x, config, scale, taps=()):
    """Stem, bottlenecks, last 1x1 conv; the outputs of the bottlenecks listed in `taps`
    (with their channels), and the last map."""
    c = divisible(16 * scale)
    h = conv_bn(x, c, 3, stride=2, act="hard_swish")
    tapped = []
    for i, (k, exp, out, se, act, stride) in enumerate(config):
        exp, out = divisible(scale * exp), divisible(scale * out)
        h = bottleneck(h, c, k, exp, out, se, act, stride)
        c = out
        if i in taps:
            tapped.append((h, c))
    last = divisible(scale * config[-1][1])
    return tapped, conv_bn(h, last, 1, act="hard_swish"), last


def detector():
    x = pg.data("x", [-1, *SHAPES["detector"]])
    # the ends of the 1/4, 1/8 and 1/16 stages, and the 1/32 map after the last conv
    tapped, last, _ = backbone(x, LARGE, 0.5, taps=(2, 5, 11))
    inner = [pg.nn.conv2d(h, 96, 1, bias_attr=False) for h in [t for t, _ in tapped] + [last]]
    for i in range(3, 0, -1):  # top-down: upsample the coarser map and add
        inner[i - 1] = inner[i - 1] + pg.nn.interpolate(inner[i], scale_factor=2)
    maps = [pg.nn.conv2d(h, 24, 3, padding=1, bias_attr=False) for h in inner]
    maps = [maps[0]] + [pg.nn.interpolate(m, scale_factor=2 ** i) for i, m in enumerate(maps[1:], 1)]
    h = conv_bn(pg.concat(maps[::-1], axis=1), 24, 3, act="relu")
    h = pg.nn.relu(pg.nn.batch_norm(pg.nn.conv2d_transpose(h, 24, filter_size=2, stride=2), is_test=True))
    return x, pg.sigmoid(pg.nn.conv2d_transpose(h, 1, filter_size=2, stride=2))


def _tall_backbone(x, scale):
    _, h, c = backbone(x, SMALL_TALL, scale)
    return pg.nn.pool2d(h, 2, "max", 2), c


def recognizer():
    x = pg.data("x", [-1, *SHAPES["recognizer"]])
    h, c = _tall_backbone(x, 0.5)                       # [N, C, 1, W/4]
    seq = pg.transpose(pg.squeeze(h, [2]), [0, 2, 1])   # [N, W/4, C]
    seq = pg.nn.fc(seq, 96, num_flatten_dims=2)
    return x, pg.softmax(pg.nn.fc(seq, 6625, num_flatten_dims=2))


def classifier():
    x = pg.data("x", [-1, *SHAPES["classifier"]])
    h, c = _tall_backbone(x, 0.35)
    h = pg.flatten(pg.nn.adaptive_avg_pool2d(h, 1), 1)
    return x, pg.softmax(pg.nn.fc(h, 2))


MODELS = {"detector": detector, "recognizer": recognizer, "classifier": classifier}


def randomize_batch_norms(program, scope, rng):
    """Give every batch_norm non-trivial statistics and affine parameters (a startup program
    makes them 1 and 0, which folding would leave unchanged)."""
    for op in program.global_block().ops:
        if op.type != "batch_norm":
            continue
        c = scope.get(op.input("Scale")[0]).shape
        scope.set(op.input("Scale")[0], rng.uniform(0.5, 1.5, c).astype(np.float32))
        scope.set(op.input("Bias")[0], (0.1 * rng.standard_normal(c)).astype(np.float32))
        scope.set(op.input("Mean")[0], (0.1 * rng.standard_normal(c)).astype(np.float32))
        scope.set(op.input("Variance")[0], rng.uniform(0.5, 1.5, c).astype(np.float32))


def save(name: str, directory: str, seed: int = 1) -> str:
    """Build model `name`, initialize it (seeded) and save it as an inference model in
    `directory`; the path prefix (prefix.pdmodel, prefix.pdiparams)."""
    from keel.executor import Executor, Scope
    main, startup = pg.Program(), pg.Program()
    startup.random_seed = seed
    with pg.unique_name.guard(), pg.program_guard(main, startup):
        x, out = MODELS[name]()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    randomize_batch_norms(main, scope, np.random.default_rng(seed))
    prefix = os.path.join(directory, name)
    pg.io.save_inference_model(prefix, [x], [out], exe, program=main, scope=scope)
    return prefix


def main(argv=None):
    parser = argparse.ArgumentParser(description="Save the OCR-family mobile CNNs as inference models.")
    parser.add_argument("directory", help="where to write NAME.pdmodel and NAME.pdiparams")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--seed", type=int, default=1, help="of the weights and batch norm statistics")
    args = parser.parse_args(argv)
    os.makedirs(args.directory, exist_ok=True)
    for name in args.models:
        prefix = save(name, args.directory, args.seed)
        print(f"{name}: input x float32[-1, {', '.join(map(str, SHAPES[name]))}] -> {prefix}.pdmodel")


if __name__ == "__main__":
    main()
