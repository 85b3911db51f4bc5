"""Feeds with a LoD (executor/lod.py): roi_align, roi_pool, distribute_fpn_proposals, warpctc
and box_coder take the per-sequence split of their input from a fed level-1 LoD where their
lengths input is absent, as PaddlePaddle's kernels do. Each result is checked against the
op's numpy reference (tests/test_kernels_detection.py, tests/test_kernels_rnn.py) and equals
the same program's result with the lengths fed as RoisNum / LogitsLength + LabelLength;
gradients too. With PaddlePaddle installed, the same programs run there with LoD feeds."""
import numpy as np
import pytest

import keel
import keel.program as pg
from keel.executor import Executor, FeedError, LoDTensor, Scope, create_lod_tensor
from keel.executor.errors import ExecutionError
from keel.executor.inference import Config, create_predictor
from test_kernels_detection import box_coder_ref, distribute_fpn_proposals_ref, roi_align_ref, roi_pool_ref
from test_kernels_rnn import brute_force_ctc

ROI_ATTRS = {"pooled_height": 2, "pooled_width": 2, "spatial_scale": 0.5}
ALIGN_ATTRS = {**ROI_ATTRS, "sampling_ratio": 2, "aligned": False}
LENGTHS = [2, 3]


def _boxes(n, seed, scale=12.0):
    rng = np.random.default_rng(seed)
    xy = rng.uniform(0, scale, (n, 2))
    return np.concatenate([xy, xy + rng.uniform(1, scale / 2, (n, 2))], axis=1).astype(np.float32)


def _op(block, op_type, inputs, outputs, attrs, out_shapes):
    """Append `op_type`; `outputs`: slot -> [names], created float32 of `out_shapes[name]`."""
    for names in outputs.values():
        for name in names:
            block.create_var(name, out_shapes.get(name, [-1]), "float32")
    block.append_op(op_type, inputs, outputs, attrs)
    return [block.var(n) for names in outputs.values() for n in names]


def _roi_program(op_type, with_num):
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        block = main.global_block()
        x = pg.data("x", [2, 3, 8, 8])
        x.stop_gradient = False
        pg.data("rois", [-1, 4])
        inputs = {"X": ["x"], "ROIs": ["rois"]}
        if with_num:
            pg.data("num", [2], "int32")
            inputs["RoisNum"] = ["num"]
        outputs = {"Out": ["out"]} if op_type == "roi_align" else {"Out": ["out"], "Argmax": ["argmax"]}
        attrs = ALIGN_ATTRS if op_type == "roi_align" else ROI_ATTRS
        out = _op(block, op_type, inputs, outputs, attrs, {"out": [-1, 3, 2, 2], "argmax": [-1, 3, 2, 2]})[0]
        dx, = pg.gradients([out], [x])
    return main, out, dx


@pytest.mark.parametrize("op_type", ["roi_align", "roi_pool"])
def test_roi_ops_read_the_rois_per_image_from_the_lod(op_type):
    x = np.random.default_rng(0).uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    rois = _boxes(5, seed=1)
    exe = Executor()
    main, out, dx = _roi_program(op_type, with_num=False)
    got, got_dx = exe.run(main, feed={"x": x, "rois": create_lod_tensor(rois, [LENGTHS])},
                          fetch_list=[out, dx], scope=Scope())
    main_num, out_num, dx_num = _roi_program(op_type, with_num=True)
    want, want_dx = exe.run(main_num, feed={"x": x, "rois": rois, "num": np.array(LENGTHS, np.int32)},
                            fetch_list=[out_num, dx_num], scope=Scope())
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got_dx, want_dx)
    reference = (roi_align_ref if op_type == "roi_align" else roi_pool_ref)
    attrs = ALIGN_ATTRS if op_type == "roi_align" else ROI_ATTRS
    ref = reference({"X": x, "ROIs": rois, "RoisNum": np.array(LENGTHS)}, attrs)["Out"]
    np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-6)
    # without the LoD the 5 RoIs cannot be put on 2 images: said by name
    with pytest.raises(ExecutionError, match="RoisNum is needed"):
        exe.run(main, feed={"x": x, "rois": rois}, fetch_list=[out], scope=Scope())


def _fpn_program(with_num):
    """distribute_fpn_proposals over levels 2..3, then roi_align on each level (no RoisNum:
    each level's split of RoIs per image is the LoD distribute_fpn_proposals wrote)."""
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        block = main.global_block()
        pg.data("x", [2, 3, 8, 8])
        pg.data("rois", [-1, 4])
        inputs = {"FpnRois": ["rois"]}
        outputs = {"MultiFpnRois": ["lvl2", "lvl3"], "RestoreIndex": ["restore"]}
        if with_num:
            pg.data("num", [2], "int32")
            inputs["RoisNum"] = ["num"]
            outputs["MultiLevelRoIsNum"] = ["num2", "num3"]
        _op(block, "distribute_fpn_proposals", inputs, outputs,
            {"min_level": 2, "max_level": 3, "refer_level": 2, "refer_scale": 3, "pixel_offset": True},
            {"lvl2": [-1, 4], "lvl3": [-1, 4], "restore": [-1, 1]})
        pooled = []
        for level in ("lvl2", "lvl3"):
            ins = {"X": ["x"], "ROIs": [level]}
            if with_num:
                ins["RoisNum"] = ["num" + level[-1]]
            pooled += _op(block, "roi_align", ins, {"Out": ["pooled_" + level]}, ALIGN_ATTRS,
                          {"pooled_" + level: [-1, 3, 2, 2]})
    return main, pooled


def test_distribute_fpn_proposals_writes_each_levels_lod_for_roi_align():
    x = np.random.default_rng(3).uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    rois = np.concatenate([_boxes(4, seed=4, scale=6.0), _boxes(3, seed=5, scale=30.0)])
    lengths = [3, 4]
    exe = Executor()
    main, pooled = _fpn_program(with_num=False)
    got = exe.run(main, feed={"x": x, "rois": create_lod_tensor(rois, [lengths])}, fetch_list=pooled, scope=Scope())
    main_num, pooled_num = _fpn_program(with_num=True)
    want = exe.run(main_num, feed={"x": x, "rois": rois, "num": np.array(lengths, np.int32)},
                   fetch_list=pooled_num, scope=Scope())
    levels = distribute_fpn_proposals_ref(
        {"FpnRois": rois, "RoisNum": np.array(lengths)},
        {"min_level": 2, "max_level": 3, "refer_level": 2, "refer_scale": 3, "pixel_offset": True})
    assert all(len(levels[f"MultiFpnRois.{i}"]) for i in range(2)), "the case should fill both levels"
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_array_equal(g, w)
        ref = roi_align_ref({"X": x, "ROIs": levels[f"MultiFpnRois.{i}"],
                             "RoisNum": levels[f"MultiLevelRoIsNum.{i}"]}, ALIGN_ATTRS)["Out"]
        np.testing.assert_allclose(g, ref, rtol=1e-5, atol=1e-6)


# -- warpctc ----------------------------------------------------------------------------------
CTC_T, CTC_L = [5, 3, 4], [2, 1, 3]


def _ctc_data(seed=6, classes=4):
    rng = np.random.default_rng(seed)
    packed = rng.uniform(-2, 2, (sum(CTC_T), classes)).astype(np.float32)
    labels = rng.integers(1, classes, (sum(CTC_L), 1)).astype(np.int32)
    labels[-3:, 0] = [1, 2, 1]           # distinct neighbours: 3 labels fit 4 steps
    return packed, labels


def _ctc_program(packed_form, classes=4, norm_by_times=True):
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        block = main.global_block()
        if packed_form:
            logits = pg.data("logits", [-1, classes])
            pg.data("label", [-1, 1], "int32")
            inputs = {"Logits": ["logits"], "Label": ["label"]}
        else:
            logits = pg.data("logits", [-1, len(CTC_T), classes])
            pg.data("label", [len(CTC_T), -1], "int32")
            pg.data("logits_len", [len(CTC_T)], "int64")
            pg.data("label_len", [len(CTC_T)], "int64")
            inputs = {"Logits": ["logits"], "Label": ["label"], "LogitsLength": ["logits_len"],
                      "LabelLength": ["label_len"]}
        logits.stop_gradient = False
        loss, _ = _op(block, "warpctc", inputs, {"Loss": ["loss"], "WarpCTCGrad": ["ctc_grad"]},
                      {"blank": 0, "norm_by_times": norm_by_times}, {"loss": [-1, 1], "ctc_grad": [-1, -1, classes]})
        seed = pg.data("seed", [len(CTC_T), 1])
        dlogits, = pg.gradients([loss], [logits], target_gradients=[seed])
    return main, loss, dlogits


def _padded(packed, lengths):
    out = np.zeros((max(lengths), len(lengths)) + packed.shape[1:], packed.dtype)
    for b, (start, n) in enumerate(zip(np.cumsum([0] + lengths[:-1]), lengths)):
        out[:n, b] = packed[start:start + n]
    return out


@pytest.mark.parametrize("norm_by_times", [False, True])
def test_warpctc_reads_packed_sequences_split_by_their_lods(norm_by_times):
    packed, labels = _ctc_data()
    seed = np.array([[1.0], [0.5], [2.0]], np.float32)
    exe = Executor()
    main, loss, dlogits = _ctc_program(True, norm_by_times=norm_by_times)
    got_loss, got_grad = exe.run(main, feed={"logits": create_lod_tensor(packed, [CTC_T]),
                                             "label": create_lod_tensor(labels, [CTC_L]), "seed": seed},
                                 fetch_list=[loss, dlogits], scope=Scope())
    padded_labels = _padded(labels[:, 0], CTC_L).T
    main_pad, loss_pad, dlogits_pad = _ctc_program(False, norm_by_times=norm_by_times)
    want_loss, want_grad = exe.run(main_pad, feed={
        "logits": _padded(packed, CTC_T), "label": padded_labels, "seed": seed,
        "logits_len": np.array(CTC_T, np.int64), "label_len": np.array(CTC_L, np.int64)},
        fetch_list=[loss_pad, dlogits_pad], scope=Scope())
    np.testing.assert_array_equal(got_loss, want_loss)
    assert got_grad.shape == packed.shape
    starts = np.cumsum([0] + CTC_T[:-1])
    for b, (start, t) in enumerate(zip(starts, CTC_T)):
        np.testing.assert_array_equal(got_grad[start:start + t], want_grad[:t, b])
        label = labels[sum(CTC_L[:b]):sum(CTC_L[:b + 1]), 0]
        np.testing.assert_allclose(got_loss[b, 0], brute_force_ctc(packed[start:start + t], label, t, 0),
                                   rtol=1e-5)


def test_warpctc_without_lengths_or_lod_is_refused_by_name():
    packed, labels = _ctc_data()
    main, loss, _ = _ctc_program(True)
    with pytest.raises(ExecutionError, match="fed with a LoD"):
        Executor().run(main, feed={"logits": packed, "label": labels, "seed": np.ones((3, 1), np.float32)},
                       fetch_list=[loss], scope=Scope())
    with pg.program_guard(pg.Program(), pg.Program()):
        block = pg.default_main_program().global_block()
        pg.data("logits3", [4, 3, 5])
        pg.data("label3", [3, 2], "int32")
        with pytest.raises(keel.program.errors.ShapeError, match="total_time, classes"):
            _op(block, "warpctc", {"Logits": ["logits3"], "Label": ["label3"]},
                {"Loss": ["l3"], "WarpCTCGrad": ["g3"]}, {}, {})


# -- box_coder --------------------------------------------------------------------------------
def test_box_coder_takes_a_lod_that_changes_no_value():
    prior, target = _boxes(3, seed=7), _boxes(5, seed=8)
    attrs = {"code_type": "encode_center_size", "box_normalized": False, "axis": 0,
             "variance": [0.1, 0.1, 0.2, 0.2]}
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        block = main.global_block()
        pg.data("prior", [3, 4])
        pg.data("target", [-1, 4])
        out, = _op(block, "box_coder", {"PriorBox": ["prior"], "TargetBox": ["target"]},
                   {"OutputBox": ["out"]}, attrs, {"out": [-1, 3, 4]})
    exe = Executor()
    got, = exe.run(main, feed={"prior": prior, "target": create_lod_tensor(target, [[2, 3]])}, fetch_list=[out])
    plain, = exe.run(main, feed={"prior": prior, "target": target}, fetch_list=[out])
    np.testing.assert_array_equal(got, plain)
    np.testing.assert_allclose(got, box_coder_ref({"PriorBox": prior, "TargetBox": target}, attrs)["OutputBox"],
                               rtol=1e-5, atol=1e-5)


# -- the LoDTensor itself, and its errors --------------------------------------------------------
def test_lod_tensor_forms_and_errors():
    t = LoDTensor()
    t.set(np.zeros((5, 4), np.float32), keel.CPUPlace())
    t.set_recursive_sequence_lengths([[2, 3]])
    assert t.lod() == [[0, 2, 5]] and t.recursive_sequence_lengths() == [[2, 3]] and t.shape() == [5, 4]
    t.set_lod([[0, 1, 5]])
    assert t.recursive_sequence_lengths() == [[1, 4]]
    with pytest.raises(FeedError, match="level-1"):
        t.set_lod([[0, 1], [0, 2, 5]])
    with pytest.raises(FeedError, match="start at 0 and not decrease"):
        t.set_lod([[0, 3, 2]])
    with pytest.raises(FeedError, match=">= 0"):
        create_lod_tensor(np.zeros((5, 4)), [[6, -1]])
    main, out, _ = _roi_program("roi_align", with_num=False)
    x = np.zeros((2, 3, 8, 8), np.float32)
    with pytest.raises(FeedError, match=r"'rois'.*covers 4 rows"):
        Executor().run(main, feed={"x": x, "rois": create_lod_tensor(_boxes(5, 1), [[1, 3]])},
                       fetch_list=[out], scope=Scope())


def test_prepared_runs_and_the_predictor_take_a_lod(tmp_path):
    main, out, _ = _roi_program("roi_align", with_num=False)
    x = np.random.default_rng(9).uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    rois = _boxes(5, seed=10)
    want, = Executor().run(main, feed={"x": x, "rois": create_lod_tensor(rois, [LENGTHS])}, fetch_list=[out],
                           scope=Scope())
    call = Executor().prepare(main, ["x", "rois"], [out], Scope())
    np.testing.assert_array_equal(call({"x": x, "rois": create_lod_tensor(rois, [LENGTHS])})[0], want)
    with pytest.raises(ExecutionError, match="RoisNum is needed"):  # the same prepared run, no LoD
        call({"x": x, "rois": rois})
    infer = main.clone(for_test=True)
    pg.io.save_inference_model(tmp_path / "roi", [infer.global_block().var("x"), infer.global_block().var("rois")],
                               [infer.global_block().var("out")], Executor(), program=infer, scope=Scope())
    pred = create_predictor(Config(str(tmp_path / "roi")))
    pred.get_input_handle("x").copy_from_cpu(x)
    rois_in = pred.get_input_handle("rois")
    rois_in.copy_from_cpu(rois)
    rois_in.set_lod([[0, 2, 5]])
    assert rois_in.lod() == [[0, 2, 5]]
    pred.run()
    np.testing.assert_array_equal(pred.get_output_handle("out").copy_to_cpu(), want)
    with pytest.raises(FeedError, match="level-1"):
        rois_in.set_lod([[0, 5], [0, 2, 5]])


# -- PaddlePaddle, with its own LoD feeds ---------------------------------------------------------
@pytest.mark.paddle
def test_paddle_gives_the_same_results_from_lod_feeds():
    paddle = pytest.importorskip("paddle")
    from paddle_static import legacy_ir          # the legacy IR, whose feeds carry a LoD
    paddle.enable_static()
    core = paddle.base.core

    def lod_tensor(array, lengths):
        t = core.LoDTensor()
        t.set(array, paddle.CPUPlace())
        t.set_recursive_sequence_lengths([lengths])
        return t

    def in_paddle(main, feed, fetch):
        with legacy_ir(paddle), paddle.static.scope_guard(paddle.static.Scope()):
            program = paddle.static.Program.parse_from_string(main.serialize_to_string())
            return [np.array(v) for v in paddle.static.Executor(paddle.CPUPlace()).run(
                program, feed=feed, fetch_list=fetch, return_numpy=False)]

    x = np.random.default_rng(11).uniform(-1, 1, (2, 3, 8, 8)).astype(np.float32)
    rois = _boxes(5, seed=12)
    for op_type in ("roi_align", "roi_pool"):
        main, out, _ = _roi_program(op_type, with_num=False)
        want, = in_paddle(main, {"x": x, "rois": lod_tensor(rois, LENGTHS)}, ["out"])
        got, = Executor().run(main, feed={"x": x, "rois": create_lod_tensor(rois, [LENGTHS])}, fetch_list=[out],
                              scope=Scope())
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=op_type)
    packed, labels = _ctc_data()
    seed = np.array([[1.0], [0.5], [2.0]], np.float32)
    main, loss, dlogits = _ctc_program(True)
    want = in_paddle(main, {"logits": lod_tensor(packed, CTC_T), "label": lod_tensor(labels, CTC_L), "seed": seed},
                     [loss.name, dlogits.name])
    got = Executor().run(main, feed={"logits": create_lod_tensor(packed, [CTC_T]),
                                     "label": create_lod_tensor(labels, [CTC_L]), "seed": seed},
                         fetch_list=[loss, dlogits], scope=Scope())
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, np.asarray(w), rtol=1e-5, atol=1e-6)


def test_the_warpctc_layer_writes_the_lod_form_without_lengths():
    packed, labels = _ctc_data()
    main = pg.Program()
    with pg.program_guard(main, pg.Program()):
        logits = pg.data("logits", [-1, 4], lod_level=1)
        label = pg.data("label", [-1, 1], "int32", lod_level=1)
        loss = pg.nn.warpctc(logits, label)
    op = main.global_block().ops[-1]
    assert op.type == "warpctc" and not op.input("LogitsLength") and not op.input("LabelLength")
    got, = Executor().run(main, feed={"logits": create_lod_tensor(packed, [CTC_T]),
                                      "label": create_lod_tensor(labels, [CTC_L])}, fetch_list=[loss])
    starts = np.cumsum([0] + CTC_T[:-1])
    for b, (start, t) in enumerate(zip(starts, CTC_T)):
        label_b = labels[sum(CTC_L[:b]):sum(CTC_L[:b + 1]), 0]
        np.testing.assert_allclose(got[b, 0], brute_force_ctc(packed[start:start + t], label_b, t, 0), rtol=1e-5)
