"""Shape/dtype inference and build-time checks of the vision ops (program/ops/vision.py).
Every case of the PaddlePaddle oracle fixture is also built here: the shapes Keel's rules
infer equal the shapes of PaddlePaddle's outputs."""
import json
from pathlib import Path

import numpy as np
import pytest

from keel.program.errors import AttrError, DTypeError, ShapeError
from shapecheck import build

F32, I32, I64 = "float32", "int32", "int64"
ORACLE = np.load(Path(__file__).parent / "fixtures" / "vision_oracle.npz")
ORACLE_IDS = sorted({k.split("/")[0] for k in ORACLE.files})


@pytest.mark.parametrize("cid", ORACLE_IDS)
def test_inferred_shapes_are_paddles(cid):
    meta = json.loads(str(ORACLE[f"{cid}/meta"]))
    prefix = f"{cid}/in/"
    ins = {k[len(prefix):]: ORACLE[k] for k in ORACLE.files if k.startswith(prefix)}
    if "OutputShape" in ins:
        pytest.skip("an OutputShape tensor: the size is known at run time only")
    got = build(meta["op"], {s: (list(a.shape), str(a.dtype)) for s, a in ins.items()},
                {s: 1 for s in meta["outputs"]}, meta["attrs"])
    for slot in meta["outputs"]:
        want = ORACLE[f"{cid}/out/{slot}"]
        assert got[slot] == (list(want.shape), str(want.dtype)), slot


def test_unknown_dims_stay_unknown():
    conv = dict(strides=[1, 1, 1], paddings=[1, 1, 1], dilations=[1, 1, 1], groups=1, data_format="NCDHW",
                padding_algorithm="EXPLICIT")
    got = build("conv3d", {"Input": ([-1, 3, -1, 8, 8], F32), "Filter": ([4, 3, 3, 3, 3], F32)},
                {"Output": 1}, conv)
    assert got["Output"] == ([-1, 4, -1, 8, 8], F32)
    got = build("pool3d", {"X": ([-1, 3, 8, -1, 8], F32)}, {"Out": 1},
                dict(pooling_type="avg", ksize=[2, 2, 2], strides=[2, 2, 2], data_format="NCDHW"))
    assert got["Out"] == ([-1, 3, 4, -1, 4], F32)
    got = build("affine_grid", {"Theta": ([-1, 2, 3], F32), "OutputShape": ([4], I32)}, {"Output": 1})
    assert got["Output"] == ([-1, -1, -1, 2], F32)
    got = build("grid_sampler", {"X": ([-1, 3, 8, 8], F32), "Grid": ([-1, 5, 6, 2], F32)}, {"Output": 1})
    assert got["Output"] == ([-1, 3, 5, 6], F32)
    got = build("max_pool2d_with_index", {"X": ([-1, 3, 8, 8], F32)}, {"Out": 1, "Mask": 1},
                dict(ksize=[2, 2], strides=[2, 2]))
    assert got["Out"] == ([-1, 3, 4, 4], F32) and got["Mask"] == ([-1, 3, 4, 4], I32)


def test_conv3d_transpose_layouts():
    """PaddlePaddle's layers write "NHWC" for a channel-last conv3d_transpose; the legacy op
    treats any other value, "NDHWC" included, as channel-first."""
    attrs = dict(strides=[2, 2, 2], paddings=[0, 0, 0], dilations=[1, 1, 1], groups=1,
                 padding_algorithm="EXPLICIT", output_size=[], output_padding=[])
    x, w = ([1, 2, 3, 4, 5], F32), ([5, 6, 2, 2, 2], F32)
    assert build("conv3d_transpose", {"Input": x, "Filter": w}, {"Output": 1},
                 dict(attrs, data_format="NHWC"))["Output"] == ([1, 4, 6, 8, 6], F32)
    x = ([1, 5, 3, 4, 5], F32)
    assert build("conv3d_transpose", {"Input": x, "Filter": w}, {"Output": 1},
                 dict(attrs, data_format="NDHWC"))["Output"] == ([1, 6, 6, 8, 10], F32)


def expect_error(cls, fn, *fragments):
    with pytest.raises(cls) as info:
        fn()
    for fragment in fragments:
        assert fragment in str(info.value), f"{fragment!r} not in {info.value}"


def test_build_time_errors():
    conv = dict(strides=[1, 1, 1], paddings=[0, 0, 0], dilations=[1, 1, 1], groups=2, data_format="NCDHW",
                padding_algorithm="EXPLICIT")
    expect_error(ShapeError, lambda: build(
        "conv3d", {"Input": ([1, 3, 4, 4, 4], F32), "Filter": ([4, 3, 2, 2, 2], F32)}, {"Output": 1}, conv),
        "input channels (3) must equal filter channels (3) * groups (2)")
    expect_error(ShapeError, lambda: build(
        "pool3d", {"X": ([1, 3, 4, 4], F32)}, {"Out": 1}, dict(pooling_type="max", ksize=[2, 2, 2])), "5-d")
    expect_error(AttrError, lambda: build(
        "grid_sampler", {"X": ([1, 3, 4, 4], F32), "Grid": ([1, 2, 2, 2], F32)}, {"Output": 1},
        dict(padding_mode="wrap")), "padding_mode", "wrap")
    expect_error(ShapeError, lambda: build(
        "grid_sampler", {"X": ([1, 3, 4, 4], F32), "Grid": ([1, 2, 2, 3], F32)}, {"Output": 1}),
        "Grid must be [N, *out, 2]")
    dcn = {"Input": ([1, 2, 5, 5], F32), "Offset": ([1, 9, 5, 5], F32), "Mask": ([1, 9, 5, 5], F32),
           "Filter": ([2, 2, 3, 3], F32)}
    expect_error(ShapeError, lambda: build("deformable_conv", dcn, {"Output": 1}, dict(paddings=[1, 1])),
                 "Offset must have 2 * deformable_groups * kh * kw = 18 channels")
    dcn = dict(dcn, Input=([3, 2, 5, 5], F32), Offset=([3, 18, 5, 5], F32), Mask=([3, 9, 5, 5], F32))
    expect_error(ShapeError, lambda: build("deformable_conv", dcn, {"Output": 1},
                                           dict(paddings=[1, 1], im2col_step=2)),
                 "batch size (3) must be at most im2col_step (2) or divisible by it")
    unpool = dict(unpooling_type="max", ksize=[2, 2], output_size=[6, 6])
    expect_error(ShapeError, lambda: build(
        "unpool", {"X": ([1, 2, 3, 3], F32), "Indices": ([1, 2, 3, 4], I32)}, {"Out": 1}, unpool),
        "Indices must have X's shape")
    expect_error(DTypeError, lambda: build(
        "unpool", {"X": ([1, 2, 3, 3], F32), "Indices": ([1, 2, 3, 3], F32)}, {"Out": 1}, unpool),
        "Indices must be int32 or int64")
    expect_error(AttrError, lambda: build(
        "affine_grid", {"Theta": ([2, 2, 3], F32)}, {"Output": 1}, dict(output_shape=[2, 3])), "output_shape")
    expect_error(ShapeError, lambda: build(
        "affine_grid", {"Theta": ([2, 2, 3], F32)}, {"Output": 1}, dict(output_shape=[2, 1, 3, 4, 5])),
        "needs Theta [N, 3, 4]")


@pytest.mark.parametrize("data_format", ["NCHW", "NHWC"])
def test_adaptive_max_pool2d_layer_writes_max_pool2d_with_index(data_format):
    """As PaddlePaddle's layer: its pool2d kernel runs max pooling with adaptive ignored.
    NHWC (not in PaddlePaddle's function) is transposed to NCHW and back."""
    import keel.program as pg
    from keel.executor import Executor, Scope
    nhwc = data_format == "NHWC"
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        x = pg.data("x", [-1, 7, 6, 2] if nhwc else [-1, 2, 7, 6])
        y = pg.nn.adaptive_max_pool2d(x, [3, 4], data_format=data_format)
    types = [op.type for op in main.global_block().ops]
    assert types == (["transpose2", "max_pool2d_with_index", "transpose2"] if nhwc else ["max_pool2d_with_index"])
    xv = np.random.default_rng(0).standard_normal((2, 2, 7, 6)).astype(np.float32)
    feed = xv.transpose(0, 2, 3, 1).copy() if nhwc else xv
    got = Executor().run(main, feed={"x": feed}, fetch_list=[y], scope=Scope())[0]
    if nhwc:
        got = got.transpose(0, 3, 1, 2)
    want = np.zeros((2, 2, 3, 4), np.float32)
    for i in range(3):
        for j in range(4):
            rows = slice((i * 7) // 3, -(-(i + 1) * 7 // 3))
            cols = slice((j * 6) // 4, -(-(j + 1) * 6 // 4))
            want[:, :, i, j] = xv[:, :, rows, cols].max(axis=(2, 3))
    np.testing.assert_array_equal(got, want)


def test_detection_inputs_that_disagree_are_refused_when_built():
    # (found by the dtype sweep's empty inputs: these reached the kernels, which failed with
    # an IndexError deep inside)
    yolo = dict(anchors=[10, 13, 16, 30], class_num=2, downsample_ratio=32)
    expect_error(ShapeError, lambda: build(
        "yolo_box", {"X": ([2, 14, 5, 6], F32), "ImgSize": ([3, 2], I32)}, {"Boxes": 1, "Scores": 1}, yolo),
        "ImgSize", "one row per image")
    nms = dict(score_threshold=0.1, nms_top_k=-1, keep_top_k=-1)
    outputs = {"multiclass_nms3": {"Out": 1, "Index": 1}, "matrix_nms": {"Out": 1, "Index": 1},
               "multiclass_nms": {"Out": 1}}
    for op_type, outs in outputs.items():
        expect_error(ShapeError, lambda: build(
            op_type, {"BBoxes": ([0, 12, 4], F32), "Scores": ([2, 3, 12], F32)}, outs, nms),
            "disagree on the number of images")
    expect_error(ShapeError, lambda: build(
        "multiclass_nms3", {"BBoxes": ([0, 3, 4], F32), "Scores": ([10, 3], F32)}, outputs["multiclass_nms3"], nms),
        "BBoxes must be [M, C, box_dim]")
    proposals = {"Scores": ([2, 3, 4, 5], F32), "BboxDeltas": ([2, 12, 4, 5], F32), "ImShape": ([2, 2], F32),
                 "Anchors": ([0, 5, 3, 4], F32), "Variances": ([4, 5, 3, 4], F32)}
    expect_error(ShapeError, lambda: build(
        "generate_proposals_v2", proposals, {"RpnRois": 1, "RpnRoiProbs": 1},
        dict(pre_nms_topN=10, post_nms_topN=5, nms_thresh=0.5, min_size=1.0, eta=1.0)),
        "must be [H, W, A, 4] = [4, 5, 3, 4]")
