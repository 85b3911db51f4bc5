"""The detection ops in programs: shape/dtype inference and build-time checks
(program/ops/detection.py), and a YOLO-style head exported by PaddlePaddle 3.3.1
(tests/fixtures/detection/yolo_head.*: conv2d -> yolo_box -> transpose2 ->
multiclass_nms3, saved with save_inference_model) run by Keel's Predictor, whose outputs
must equal PaddlePaddle's exactly (NMS rows, Index, NmsRoisNum)."""
from pathlib import Path

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.executor.inference import Config, create_predictor
from keel.program.io.inference_model import load_inference_model
from keel.program import dtypes
from keel.program.errors import AttrError, ShapeError

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "detection"
F32, I32, I64 = "float32", "int32", "int64"


def build(op_type, inputs, outputs, attrs=None):
    """Append op_type in a fresh program (inputs: slot -> (shape, dtype), outputs: slot ->
    number of variables or 0 for one); the program must round-trip through its bytes.
    Returns slot -> (shape, dtype name), a list for a duplicable slot."""
    p = pg.Program()
    b = p.global_block()
    ins = {slot: b.create_var(f"in_{slot}", shape, dtype) for slot, (shape, dtype) in inputs.items()}
    outs = {slot: ([b.create_var(f"out_{slot}_{i}") for i in range(n)] if n else b.create_var(f"out_{slot}"))
            for slot, n in outputs.items()}
    b.append_op(op_type, ins, outs, attrs or {})
    assert pg.Program.parse_from_string(p.serialize_to_string()) == p

    def info(v):
        return list(v.shape), dtypes.name(v.dtype)
    return {s: ([info(x) for x in v] if isinstance(v, list) else info(v)) for s, v in outs.items()}


YOLO = dict(anchors=[10, 13, 16, 30, 33, 23], class_num=4)


def test_yolo_box_shapes():
    got = build("yolo_box", {"X": ([-1, 27, 5, 6], F32), "ImgSize": ([-1, 2], I32)},
                {"Boxes": 0, "Scores": 0}, YOLO)
    assert got == {"Boxes": ([-1, 90, 4], F32), "Scores": ([-1, 90, 4], F32)}
    got = build("yolo_box", {"X": ([2, 30, 5, 6], F32), "ImgSize": ([2, 2], I32)},
                {"Boxes": 0, "Scores": 0}, dict(YOLO, iou_aware=True))
    assert got["Boxes"] == ([2, 90, 4], F32)


def test_yolo_box_channel_check():
    with pytest.raises(ShapeError, match=r"X's channels \(28\)"):
        build("yolo_box", {"X": ([1, 28, 5, 6], F32), "ImgSize": ([1, 2], I32)}, {"Boxes": 0, "Scores": 0}, YOLO)
    with pytest.raises(AttrError, match="anchors"):
        build("yolo_box", {"X": ([1, 27, 5, 6], F32), "ImgSize": ([1, 2], I32)}, {"Boxes": 0, "Scores": 0},
              dict(YOLO, anchors=[10, 13, 16]))


NMS = dict(score_threshold=0.05, nms_top_k=100, keep_top_k=10)


def test_multiclass_nms3_shapes_both_layouts():
    got = build("multiclass_nms3", {"BBoxes": ([3, 50, 4], F32), "Scores": ([3, 5, 50], F32)},
                {"Out": 0, "Index": 0, "NmsRoisNum": 0}, NMS)
    assert got == {"Out": ([-1, 6], F32), "Index": ([-1, 1], I32), "NmsRoisNum": ([3], I32)}
    got = build("multiclass_nms3", {"BBoxes": ([-1, 5, 4], F32), "Scores": ([-1, 5], F32),
                                    "RoisNum": ([2], I32)}, {"Out": 0, "Index": 0, "NmsRoisNum": 0}, NMS)
    assert got == {"Out": ([-1, 6], F32), "Index": ([-1, 1], I32), "NmsRoisNum": ([2], I32)}
    with pytest.raises(ShapeError, match="disagree"):
        build("multiclass_nms3", {"BBoxes": ([3, 50, 4], F32), "Scores": ([3, 5, 40], F32)},
              {"Out": 0, "Index": 0}, NMS)


def test_matrix_nms_and_prior_shapes():
    got = build("matrix_nms", {"BBoxes": ([2, 30, 4], F32), "Scores": ([2, 4, 30], F32)},
                {"Out": 0, "Index": 0, "RoisNum": 0}, dict(score_threshold=0.1, nms_top_k=10, keep_top_k=5))
    assert got == {"Out": ([-1, 6], F32), "Index": ([-1, 1], I32), "RoisNum": ([2], I32)}
    pb = dict(min_sizes=[4.0, 9.0], max_sizes=[8.0, 15.0], aspect_ratios=[2.0, 3.0],
              variances=[0.1, 0.1, 0.2, 0.2])
    got = build("prior_box", {"Input": ([1, 8, 3, 4], F32), "Image": ([1, 3, 30, 40], F32)},
                {"Boxes": 0, "Variances": 0}, pb)
    assert got["Boxes"] == ([3, 4, 12, 4], F32)   # (1, 2, 1/2, 3, 1/3) * 2 sizes + 2 max sizes
    got = build("density_prior_box", {"Input": ([1, 8, 3, 4], F32), "Image": ([1, 3, 30, 40], F32)},
                {"Boxes": 0, "Variances": 0}, dict(variances=[0.1, 0.1, 0.2, 0.2], fixed_sizes=[8.0, 16.0],
                                                   fixed_ratios=[1.0, 2.0], densities=[2, 1], flatten_to_2d=True))
    assert got["Boxes"] == ([3 * 4 * 10, 4], F32)
    got = build("anchor_generator", {"Input": ([1, 8, 3, 4], F32)}, {"Anchors": 0, "Variances": 0},
                dict(anchor_sizes=[32.0, 64.0], aspect_ratios=[0.5, 1.0, 2.0], variances=[0.1, 0.1, 0.2, 0.2]))
    assert got["Anchors"] == ([3, 4, 6, 4], F32)


def test_box_coder_roi_and_proposal_shapes():
    enc = build("box_coder", {"PriorBox": ([5, 4], F32), "TargetBox": ([3, 4], F32)}, {"OutputBox": 0}, {})
    assert enc["OutputBox"] == ([3, 5, 4], F32)
    dec = build("box_coder", {"PriorBox": ([3, 4], F32), "TargetBox": ([3, 5, 4], F32)}, {"OutputBox": 0},
                dict(code_type="decode_center_size", axis=1))
    assert dec["OutputBox"] == ([3, 5, 4], F32)
    with pytest.raises(ShapeError, match="axis 0"):
        build("box_coder", {"PriorBox": ([3, 4], F32), "TargetBox": ([3, 5, 4], F32)}, {"OutputBox": 0},
              dict(code_type="decode_center_size", axis=0))
    ra = build("roi_align", {"X": ([2, 8, 10, 10], F32), "ROIs": ([-1, 4], F32), "RoisNum": ([2], I32)},
               {"Out": 0}, dict(pooled_height=7, pooled_width=5))
    assert ra["Out"] == ([-1, 8, 7, 5], F32)
    rp = build("roi_pool", {"X": ([2, 8, 10, 10], F32), "ROIs": ([6, 4], F32)}, {"Out": 0, "Argmax": 0},
               dict(pooled_height=2, pooled_width=2))
    assert rp == {"Out": ([6, 8, 2, 2], F32), "Argmax": ([6, 8, 2, 2], I64)}
    gp = build("generate_proposals_v2",
               {"Scores": ([2, 3, 4, 5], F32), "BboxDeltas": ([2, 12, 4, 5], F32), "ImShape": ([2, 2], F32),
                "Anchors": ([4, 5, 3, 4], F32), "Variances": ([4, 5, 3, 4], F32)},
               {"RpnRois": 0, "RpnRoiProbs": 0, "RpnRoisNum": 0},
               dict(pre_nms_topN=100, post_nms_topN=10, nms_thresh=0.5, min_size=1.0, eta=1.0))
    assert gp == {"RpnRois": ([-1, 4], F32), "RpnRoiProbs": ([-1, 1], F32), "RpnRoisNum": ([2], I32)}
    fpn = build("distribute_fpn_proposals", {"FpnRois": ([9, 4], F32), "RoisNum": ([2], I32)},
                {"MultiFpnRois": 3, "MultiLevelRoIsNum": 3, "RestoreIndex": 0},
                dict(min_level=2, max_level=4, refer_level=3, refer_scale=56))
    assert fpn == {"MultiFpnRois": [([-1, 4], F32)] * 3, "MultiLevelRoIsNum": [([2], I32)] * 3,
                   "RestoreIndex": ([9, 1], I32)}
    with pytest.raises(ShapeError, match="3 variables"):
        build("distribute_fpn_proposals", {"FpnRois": ([9, 4], F32)}, {"MultiFpnRois": 2, "RestoreIndex": 0},
              dict(min_level=2, max_level=4, refer_level=3, refer_scale=56))


# -- the YOLO head exported by PaddlePaddle --------------------------------------------------

@pytest.mark.parametrize("ir_optim", [False, True])
def test_yolo_head_from_paddle_runs_exactly_as_paddle(ir_optim):
    io = np.load(FIXTURES / "yolo_head.io.npz", allow_pickle=False)
    config = Config(str(FIXTURES / "yolo_head"))
    config.switch_ir_optim(ir_optim)
    pred = create_predictor(config)
    assert pred.get_input_names() == ["image", "im_size"]
    assert pred.get_output_names() == ["nms_out", "nms_index", "nms_num"]
    got = pred.run([io[f"in:{n}"] for n in pred.get_input_names()])
    assert len(got) == 3
    for i, g in enumerate(got):
        want = io[f"out:{i}"]
        assert g.dtype == want.dtype and g.shape == want.shape, (i, g.dtype, g.shape, want.dtype, want.shape)
        np.testing.assert_array_equal(g, want, err_msg=f"output {i}")
    out, index, num = got
    assert num.sum() == len(out) == len(index) > 0


def test_yolo_head_index_names_the_yolo_box_rows():
    """Each NMS row is the yolo_box box its Index names (image * boxes + box), with the
    score of its class."""
    exe, scope = Executor(), Scope()
    program, feeds, fetches = load_inference_model(str(FIXTURES / "yolo_head"), exe, scope=scope)
    yolo = next(op for op in program.global_block().ops if op.type == "yolo_box")
    io = np.load(FIXTURES / "yolo_head.io.npz", allow_pickle=False)
    boxes, scores, out, index = exe.run(
        program, feed={n: io[f"in:{n}"] for n in feeds},
        fetch_list=[yolo.output("Boxes")[0], yolo.output("Scores")[0], fetches[0], fetches[1]], scope=scope)
    flat_boxes, flat_scores = boxes.reshape(-1, 4), scores.reshape(-1, scores.shape[-1])
    np.testing.assert_array_equal(out[:, 2:], flat_boxes[index[:, 0]])
    np.testing.assert_array_equal(out[:, 1], flat_scores[index[:, 0], out[:, 0].astype(int)])


def test_yolo_head_built_with_keel_layers_equals_paddles():
    """The same head built with pg.nn.conv2d, pg.vision.yolo_box and
    pg.vision.multiclass_nms: the same op types and parameter names as PaddlePaddle's
    export, and with its parameters, the same outputs bit for bit."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        image = pg.data("image", [-1, 4, 8, 8])
        im_size = pg.data("im_size", [-1, 2], "int32")
        head = pg.nn.conv2d(image, 3 * (5 + 3), 3, padding=1)
        boxes, scores = pg.vision.yolo_box(head, im_size, anchors=[10, 13, 16, 30, 33, 23], class_num=3,
                                           conf_thresh=0.05, downsample_ratio=8, clip_bbox=True, scale_x_y=1.05)
        out, index, num = pg.vision.multiclass_nms(boxes, pg.transpose(scores, [0, 2, 1]), score_threshold=0.1,
                                                   nms_top_k=40, keep_top_k=12, nms_threshold=0.45,
                                                   normalized=False)
    ref_scope = Scope()
    ref, _, _ = load_inference_model(str(FIXTURES / "yolo_head"), Executor(), scope=ref_scope)
    assert [op.type for op in main.global_block().ops] == \
        [op.type for op in ref.global_block().ops if op.type not in ("feed", "fetch")]
    scope = Scope()
    for name in ("conv2d_0.w_0", "conv2d_0.b_0"):
        scope.set(name, np.asarray(ref_scope.get(name)))
    io = np.load(FIXTURES / "yolo_head.io.npz", allow_pickle=False)
    got = Executor().run(main, feed={"image": io["in:image"], "im_size": io["in:im_size"]},
                         fetch_list=[out, index, num], scope=scope)
    for i, g in enumerate(got):
        np.testing.assert_array_equal(g, io[f"out:{i}"], err_msg=f"output {i}")


def test_vision_layers_build_their_ops():
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        feat = pg.data("feat", [2, 8, 6, 6])
        image = pg.data("image", [2, 3, 48, 48])
        rois = pg.data("rois", [-1, 4])
        rois_num = pg.data("rois_num", [2], "int32")
        priors, pvar = pg.vision.prior_box(feat, image, [8.0], [16.0], [2.0], flip=True, clip=True)
        dens, _ = pg.vision.density_prior_box(feat, image, [2], [8.0], [1.0])
        anchors, avar = pg.vision.anchor_generator(feat, [32.0], [0.5, 1.0, 2.0], stride=[8.0, 8.0])
        dec = pg.vision.box_coder(pg.reshape(priors, [-1, 4]), [0.1, 0.1, 0.2, 0.2],
                                  pg.data("deltas", [5, 6 * 6 * 4, 4]), "decode_center_size")
        ra = pg.vision.roi_align(feat, rois, rois_num, 3, spatial_scale=0.25)
        rp = pg.vision.roi_pool(feat, rois, rois_num, (2, 3))
        mrois, restore, mnum = pg.vision.distribute_fpn_proposals(rois, 2, 4, 3, 56, rois_num=rois_num)
    assert priors.shape == (6, 6, 4, 4) and dens.shape == (6, 6, 4, 4) and anchors.shape == (6, 6, 3, 4)
    assert dec.shape == (5, 144, 4) and ra.shape == (-1, 8, 3, 3) and rp.shape == (-1, 8, 2, 3)
    assert len(mrois) == len(mnum) == 3 and restore.shape == (-1, 1)
    assert not ra.stop_gradient and mnum[0].stop_gradient


# -- PaddlePaddle runs Keel's file (optional: needs `paddle`) -----------------------------------

def _detection_zoo():
    """A program using every detection op PaddlePaddle 3.3.1 registers, built with pg.vision."""
    main, startup = pg.Program(), pg.Program()
    with pg.program_guard(main, startup), pg.unique_name.guard():
        image = pg.data("image", [-1, 4, 8, 8])
        im_size = pg.data("im_size", [-1, 2], "int32")
        rois = pg.data("rois", [-1, 4])
        rois_num = pg.data("rois_num", [-1], "int32")
        rpn_scores = pg.data("rpn_scores", [-1, 6, 8, 8])
        rpn_deltas = pg.data("rpn_deltas", [-1, 24, 8, 8])
        head = pg.nn.conv2d(image, 3 * (5 + 2), 3, padding=1)
        boxes, scores = pg.vision.yolo_box(head, im_size, anchors=[10, 13, 16, 30, 33, 23], class_num=2,
                                           conf_thresh=0.05, downsample_ratio=8, scale_x_y=1.05)
        tscores = pg.transpose(scores, [0, 2, 1])
        nms = pg.vision.multiclass_nms(boxes, tscores, 0.1, 40, 12, 0.45, normalized=False)
        mnms = pg.vision.matrix_nms(boxes, tscores, 0.1, 0.05, 40, 12, background_label=-1, normalized=False,
                                    return_index=True)   # (out, rois_num, index), PaddlePaddle's order
        priors, pvar = pg.vision.prior_box(head, image, [2.0], [5.0], [2.0], flip=True, clip=True)
        anchors, avar = pg.vision.anchor_generator(head, [16.0, 32.0], [0.5, 1.0, 2.0], stride=[8.0, 8.0])
        flat_priors = pg.reshape(priors, [-1, 4])
        enc = pg.vision.box_coder(flat_priors, pg.reshape(pvar, [-1, 4]), rois)
        ra = pg.vision.roi_align(image, rois, rois_num, (2, 3), spatial_scale=0.5, sampling_ratio=-1, aligned=False)
        rp = pg.vision.roi_pool(image, rois, rois_num, 2, spatial_scale=0.5)
        rpn = pg.vision.generate_proposals(rpn_scores, rpn_deltas, pg.cast(im_size, "float32"), anchors, avar,
                                           50, 10, 0.5, 1.0, pixel_offset=True, return_rois_num=True)
        fpn_rois, restore, fpn_num = pg.vision.distribute_fpn_proposals(rois, 2, 3, 2, 4, pixel_offset=True,
                                                                       rois_num=rois_num)
    fetches = [*nms, *mnms, priors, anchors, enc, ra, rp, *rpn, *fpn_rois, restore, *fpn_num]
    return main, startup, [image, im_size, rois, rois_num, rpn_scores, rpn_deltas], fetches


def _zoo_feed(rng, dyadic):
    """RPN scores without ties: which of equal scores std::nth_element keeps is libstdc++'s
    business (see generate_proposals_v2 in kernels/detection.py)."""
    image = rng.normal(size=(2, 4, 8, 8))
    return {"image": (np.round(image * 8) / 8 if dyadic else image).astype(np.float32),
            "im_size": np.array([[64, 64], [48, 80]], np.int32),
            "rois": (rng.uniform(0, 6, (5, 4)) + np.array([0, 0, 4, 4])).astype(np.float32),
            "rois_num": np.array([3, 2], np.int32),
            "rpn_scores": rng.permutation(np.arange(2 * 6 * 64)).reshape(2, 6, 8, 8).astype(np.float32) / 768,
            "rpn_deltas": rng.normal(0, 0.3, (2, 24, 8, 8)).astype(np.float32)}


@pytest.mark.paddle
def test_paddle_runs_keels_detection_program_with_the_same_outputs(tmp_path):
    import os
    os.environ.setdefault("FLAGS_enable_pir_api", "0")
    paddle = pytest.importorskip("paddle")
    main, startup, feeds, fetches = _detection_zoo()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    rng = np.random.default_rng(3)
    for name in ("conv2d_0.w_0", "conv2d_0.b_0"):
        shape = np.asarray(scope.get(name)).shape   # on a dyadic grid: the convs are exact
        scope.set(name, (np.round(rng.normal(0, 0.4, shape) * 16) / 16).astype(np.float32))
    feed = _zoo_feed(rng, dyadic=True)
    want = exe.run(main, feed=feed, fetch_list=fetches, scope=scope)
    prefix = str(tmp_path / "zoo")
    pg.io.save_inference_model(prefix, feeds, fetches, exe, program=main, scope=scope)
    paddle.enable_static()
    from paddle_static import legacy_ir
    pexe = paddle.static.Executor(paddle.CPUPlace())
    with legacy_ir(paddle), paddle.static.scope_guard(paddle.static.Scope()):
        program, names, targets = paddle.static.load_inference_model(prefix, pexe)
        got = pexe.run(program, feed={n: feed[n] for n in names}, fetch_list=targets, return_numpy=False)
    assert len(got) == len(want)
    bad = []
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.array(g)
        if not (g.dtype == w.dtype and g.shape == w.shape and np.array_equal(g, w, equal_nan=True)):
            bad.append((i, fetches[i].name, g.dtype, g.shape, w.dtype, w.shape))
    assert not bad, bad


def test_detection_zoo_runs_in_keel():
    main, startup, feeds, fetches = _detection_zoo()
    exe, scope = Executor(), Scope()
    exe.run(startup, scope=scope)
    got = exe.run(main, feed=_zoo_feed(np.random.default_rng(3), dyadic=False), fetch_list=fetches, scope=scope)
    nms, mnms, rpn, fpn = got[0:3], got[3:6], got[11:14], got[14:]
    assert nms[2].sum() == len(nms[0]) == len(nms[1]) and mnms[1].sum() == len(mnms[0]) == len(mnms[2])
    assert rpn[2].sum() == len(rpn[0]) == len(rpn[1])
    assert sum(len(r) for r in fpn[0:2]) == 5 and sorted(fpn[2].ravel()) == list(range(5))
    assert [int(n.sum()) for n in fpn[3:]] == [len(r) for r in fpn[0:2]]


def test_matrix_nms_and_generate_proposals_return_paddles_tuples():
    """PaddlePaddle's order and Nones: matrix_nms -> (out, rois_num, index), rois_num unless
    return_rois_num=False and index only with return_index; generate_proposals -> (rois,
    probs, rois_num) with rois_num only with return_rois_num."""
    boxes = np.array([[[0, 0, 10, 10], [0, 0, 10, 9], [20, 20, 30, 30]]], np.float32)
    scores = np.array([[[0, 0, 0], [0.9, 0.8, 0.7]]], np.float32)
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        b, s = pg.assign(boxes), pg.assign(scores)
        full = pg.vision.matrix_nms(b, s, 0.1, 0.5, 10, 10, return_index=True)
        plain = pg.vision.matrix_nms(b, s, 0.1, 0.5, 10, 10)
        bare = pg.vision.matrix_nms(b, s, 0.1, 0.5, 10, 10, return_rois_num=False)
        rpn_args = (pg.assign(np.ones((1, 1, 2, 2), np.float32)), pg.assign(np.zeros((1, 4, 2, 2), np.float32)),
                    pg.assign(np.array([[16, 16]], np.float32)),
                    pg.assign(np.tile(np.array([0, 0, 8, 8], np.float32), (2, 2, 1, 1))),
                    pg.assign(np.ones((2, 2, 1, 4), np.float32)))
        with_num = pg.vision.generate_proposals(*rpn_args, return_rois_num=True)
        without = pg.vision.generate_proposals(*rpn_args)
    assert plain[2] is None and bare[1] is None and bare[2] is None and without[2] is None
    out, num, index, rois = Executor().run(main, fetch_list=[*full, with_num[0]], scope=Scope())[:4]
    assert num.tolist() == [2] and index.ravel().tolist() == [0, 2]      # box 1 decays below post_threshold
    np.testing.assert_allclose(out[:, :2], [[1, 0.9], [1, 0.7]], rtol=1e-6)
    assert rois.shape[1] == 4
