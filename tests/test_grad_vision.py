"""Gradient checks of the vision ops (program/ops/vision.py, kernels/vision.py): analytic
gradients from the appended `<op>_grad` ops against central finite differences, plus the
gradient ops' slots against what PaddlePaddle 3.3.1 emits
(tests/fixtures/paddle_grad_signatures.json).

Inputs keep away from the kinks a finite difference cannot straddle: max-pooled values are
spaced apart, grid_sampler and deformable_conv sample points sit between integer
coordinates (bilinear weights switch corners at integers), nearest sampling away from
half-integers."""
import json
from pathlib import Path

import numpy as np
import pytest

from gradcheck import Case, rand, run_case
from keel.program.ops import registry

_CONV3 = dict(strides=[1, 1, 1], paddings=[0, 0, 0], padding_algorithm="EXPLICIT", dilations=[1, 1, 1],
              groups=1, data_format="NCDHW")
_TCONV3 = dict(_CONV3, output_padding=[], output_size=[], data_format="NCHW")
_POOL3 = dict(pooling_type="max", ksize=[2, 2, 2], strides=[2, 2, 2], paddings=[0, 0, 0], global_pooling=False,
              exclusive=True, adaptive=False, ceil_mode=False, data_format="NCDHW", padding_algorithm="EXPLICIT",
              use_cudnn=False)
_WI = dict(global_pooling=False, adaptive=False, ceil_mode=False)
_DEF = dict(strides=[1, 1], paddings=[1, 1], dilations=[1, 1], groups=1, deformable_groups=1, im2col_step=1)


def spaced(*shape, seed=0, gap=0.05):
    """Distinct values at least `gap` apart (a shuffled ramp): max pooling's argmax stays put
    under a finite-difference step."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n) * gap - n * gap / 2).reshape(shape)


def grid_points(n, out, sizes, align_corners, low=-2, nearest=False, seed=0):
    """A Grid [n, *out, nd] whose source coordinates are k + f, k an integer in [low, size+1],
    f in [0.25, 0.75] (bilinear: away from the integers where corners switch) or in
    [0.1, 0.35] U [0.65, 0.9] (nearest: away from the half-integers where rounding switches)."""
    r = np.random.default_rng(seed)
    nd = len(sizes)
    comps = []
    for i in reversed(range(nd)):     # grid component 0 is x (the last axis)
        size = sizes[i]
        k = r.integers(low, size + 1, (n, *out))
        if nearest:
            f = r.uniform(0.1, 0.35, (n, *out)) + 0.55 * r.integers(0, 2, (n, *out))
        else:
            f = r.uniform(0.25, 0.75, (n, *out))
        c = k + f
        comps.append(c * 2 / (size - 1) - 1 if align_corners else (2 * c + 1) / size - 1)
    return np.stack(comps, axis=-1)


def deform_offsets(n, dg, kh, kw, oh, ow, seed=0):
    """Offsets whose fractional parts lie in [0.2, 0.8]: every sample point sits between
    integer rows and columns (and off the -1 / H, W limits, which are integers too)."""
    r = np.random.default_rng(seed)
    shape = (n, 2 * dg * kh * kw, oh, ow)
    return r.integers(-2, 3, shape) + r.uniform(0.2, 0.8, shape)


def _unpool_case(op, x_shape, out_size, ksize, seed):
    """Indices without repeats (each output cell written once), from a max pool's argmax."""
    nd = len(out_size)
    r = np.random.default_rng(seed)
    plane = int(np.prod(out_size))
    k = int(np.prod(x_shape[2:]))
    idx = np.stack([r.permutation(plane)[:k] for _ in range(x_shape[0] * x_shape[1])]).reshape(x_shape)
    attrs = dict(ksize=ksize, strides=ksize, paddings=[0] * nd, output_size=out_size,
                 data_format="NCHW" if nd == 2 else "NCDHW")
    if op == "unpool":
        attrs["unpooling_type"] = "max"
    return Case(op, {"X": rand(*x_shape, seed=seed), "Indices": idx.astype(np.int32)}, attrs, id=f"{op} {out_size}")


def _grid_case(mode, padding_mode, align_corners, nd=2, seed=0):
    sizes = [4, 5] if nd == 2 else [3, 4, 3]
    out = [3, 4] if nd == 2 else [2, 2, 3]
    grid = grid_points(2 if nd == 2 else 1, out, sizes, align_corners, nearest=mode == "nearest", seed=seed)
    x = rand(grid.shape[0], 2, *sizes, seed=seed + 1)
    return Case("grid_sampler", {"X": x, "Grid": grid},
                dict(mode=mode, padding_mode=padding_mode, align_corners=align_corners),
                id=f"grid_sampler {nd}-d {mode} {padding_mode} align_corners={align_corners}")


CASES = [
    # -- conv3d: padding (3 and 6 values), strides, dilations, groups, NDHWC, SAME/VALID
    Case("conv3d", {"Input": rand(2, 3, 4, 4, 3), "Filter": rand(4, 3, 2, 3, 2, seed=1)},
         dict(_CONV3, paddings=[1, 0, 1]), id="conv3d pad"),
    Case("conv3d", {"Input": rand(1, 4, 5, 4, 5), "Filter": rand(4, 2, 2, 2, 3, seed=1)},
         dict(_CONV3, strides=[2, 1, 2], paddings=[1, 0, 0, 1, 1, 0], dilations=[1, 2, 1], groups=2),
         id="conv3d stride asym-pad dilation groups"),
    Case("conv3d", {"Input": rand(1, 4, 3, 5, 2), "Filter": rand(3, 2, 3, 2, 2, seed=1)},
         dict(_CONV3, strides=[2, 2, 1], padding_algorithm="SAME", data_format="NDHWC"), id="conv3d SAME NDHWC"),
    # -- conv3d_transpose: output_size / output_padding, groups, channel-last ("NHWC")
    Case("conv3d_transpose", {"Input": rand(2, 3, 2, 3, 2), "Filter": rand(3, 2, 2, 3, 2, seed=1)},
         dict(_TCONV3, strides=[2, 1, 2], paddings=[1, 0, 0]), id="conv3d_transpose stride pad"),
    Case("conv3d_transpose", {"Input": rand(1, 4, 2, 2, 3), "Filter": rand(4, 1, 2, 2, 2, seed=1)},
         dict(_TCONV3, strides=[2, 2, 2], groups=2, dilations=[1, 2, 1], output_size=[5, 6, 7]),
         id="conv3d_transpose groups output_size"),
    Case("conv3d_transpose", {"Input": rand(1, 2, 3, 2, 2), "Filter": rand(2, 3, 2, 2, 2, seed=1)},
         dict(_TCONV3, strides=[3, 2, 2], paddings=[1, 1, 0], output_padding=[2, 1, 0], data_format="NHWC"),
         id="conv3d_transpose output_padding NHWC"),
    # -- pool3d: max/avg, overlap + padding, ceil_mode, inclusive avg, adaptive, global, NDHWC
    Case("pool3d", {"X": spaced(1, 2, 4, 4, 5)}, dict(_POOL3), id="pool3d max 2/2"),
    Case("pool3d", {"X": spaced(1, 2, 5, 4, 5, seed=1)},
         dict(_POOL3, ksize=[3, 2, 3], strides=[2, 1, 2], paddings=[1, 0, 1], ceil_mode=True),
         id="pool3d max overlap pad ceil"),
    Case("pool3d", {"X": rand(1, 2, 5, 4, 5)}, dict(_POOL3, pooling_type="avg", ksize=[3, 2, 3],
                                                    strides=[2, 1, 2], paddings=[1, 0, 1]),
         id="pool3d avg exclusive"),
    Case("pool3d", {"X": rand(1, 2, 4, 5, 3)}, dict(_POOL3, pooling_type="avg", ksize=[3, 3, 3],
                                                    strides=[2, 2, 2], paddings=[1, 1, 1], exclusive=False),
         id="pool3d avg inclusive"),
    Case("pool3d", {"X": rand(1, 2, 5, 6, 7)}, dict(_POOL3, pooling_type="avg", ksize=[3, 3, 3],
                                                    strides=[2, 2, 2], paddings=[1, 1, 1], ceil_mode=True,
                                                    exclusive=False), id="pool3d avg inclusive ceil"),
    Case("pool3d", {"X": rand(1, 2, 5, 6, 7)}, dict(_POOL3, pooling_type="avg", ksize=[2, 4, 3], adaptive=True),
         id="pool3d adaptive avg"),
    Case("pool3d", {"X": spaced(1, 2, 4, 3, 4, seed=2)},
         dict(_POOL3, ksize=[1, 1, 1], global_pooling=True, data_format="NDHWC"), id="pool3d global max NDHWC"),
    # -- max pooling with index (the gradient reads Mask)
    Case("max_pool2d_with_index", {"X": spaced(2, 2, 5, 6)},
         dict(_WI, ksize=[3, 3], strides=[2, 1], paddings=[1, 1]), id="max_pool2d_with_index overlap pad"),
    Case("max_pool2d_with_index", {"X": spaced(1, 2, 7, 6, seed=1)},
         dict(_WI, ksize=[3, 4], strides=[1, 1], paddings=[0, 0], adaptive=True), id="max_pool2d_with_index adaptive"),
    Case("max_pool3d_with_index", {"X": spaced(1, 2, 4, 5, 4, seed=2)},
         dict(_WI, ksize=[2, 3, 2], strides=[2, 2, 2], paddings=[1, 1, 0], ceil_mode=True),
         id="max_pool3d_with_index pad ceil"),
    # -- unpool
    _unpool_case("unpool", (2, 2, 3, 3), [6, 7], [2, 2], 0),
    _unpool_case("unpool3d", (1, 2, 2, 2, 2), [4, 4, 5], [2, 2, 2], 1),
    # -- affine_grid (attribute and tensor output shape, 2-D and 3-D)
    Case("affine_grid", {"Theta": rand(2, 2, 3)}, dict(output_shape=[2, 1, 4, 5], align_corners=True),
         id="affine_grid align_corners"),
    # (an OutputShape tensor leaves the output's size unknown when the program is built, which
    # the weighted-sum loss needs; that path's gradient is checked against PaddlePaddle's in
    # test_kernels_vision.py)
    Case("affine_grid", {"Theta": rand(2, 2, 3)}, dict(output_shape=[2, 1, 3, 4], align_corners=False),
         id="affine_grid"),
    Case("affine_grid", {"Theta": rand(1, 3, 4)}, dict(output_shape=[1, 1, 2, 3, 4], align_corners=False),
         id="affine_grid 3-d"),
    # -- grid_sampler: every mode x padding mode x align_corners (2-D), and 3-D
    *[_grid_case(m, p, a, seed=i) for i, (m, p, a) in enumerate(
        (m, p, a) for m in ("bilinear", "nearest") for p in ("zeros", "border", "reflection")
        for a in (True, False))],
    _grid_case("bilinear", "zeros", True, nd=3, seed=20),
    _grid_case("bilinear", "reflection", False, nd=3, seed=21),
    # -- deformable convolution
    Case("deformable_conv", {"Input": rand(2, 3, 4, 5), "Offset": deform_offsets(2, 1, 3, 3, 4, 5),
                             "Mask": rand(2, 9, 4, 5, low=0.1, high=1.0, seed=2), "Filter": rand(2, 3, 3, 3, seed=3)},
         dict(_DEF), id="deformable_conv"),
    Case("deformable_conv", {"Input": rand(1, 4, 5, 4), "Offset": deform_offsets(1, 2, 3, 2, 3, 2, seed=1),
                             "Mask": rand(1, 12, 3, 2, low=0.1, high=1.0, seed=4), "Filter": rand(4, 2, 3, 2, seed=5)},
         dict(_DEF, strides=[2, 1], paddings=[1, 0], dilations=[1, 2], groups=2, deformable_groups=2),
         id="deformable_conv stride dilation groups deformable_groups"),
    Case("deformable_conv_v1", {"Input": rand(2, 2, 4, 4), "Offset": deform_offsets(2, 1, 2, 2, 3, 3, seed=2),
                                "Filter": rand(3, 2, 2, 2, seed=6)},
         dict(_DEF, paddings=[0, 0]), id="deformable_conv_v1"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)


# ============================================================================ gradient op slots

SIGNATURES = json.loads((Path(__file__).parent / "fixtures" / "paddle_grad_signatures.json").read_text())
VISION_OPS = ["conv3d", "conv3d_transpose", "pool3d", "max_pool2d_with_index", "max_pool3d_with_index", "unpool",
              "unpool3d", "affine_grid", "grid_sampler", "deformable_conv", "deformable_conv_v1"]


@pytest.mark.parametrize("op_type", VISION_OPS)
def test_grad_op_slots_match_paddle(op_type):
    """The <op>_grad op reads and writes the slots PaddlePaddle's backward gives it."""
    want = SIGNATURES[op_type]["grad_ops"]
    assert len(want) == 1 and want[0]["type"] == op_type + "_grad"
    grad = registry.get(op_type + "_grad")
    assert set(grad.input_slots) == set(want[0]["inputs"])
    assert set(grad.output_slots) == set(want[0]["outputs"])
    rule = registry.get(op_type).grad
    assert set(rule.inputs) == set(want[0]["inputs"]) and set(rule.outputs) == set(want[0]["outputs"])
