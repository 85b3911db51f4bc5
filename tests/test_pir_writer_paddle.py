"""PIR JSON files Keel writes (save_inference_model / jit.save format="pir", keel-convert) load in
PaddlePaddle 3.3.1, through Paddle Inference with PIR on (3.3.1's default) and through
`paddle.jit.load`, and give the outputs Keel and PaddlePaddle recorded (issue 28, Must 3).
Needs PaddlePaddle (an oracle; skipped without it); Paddle runs in a child process."""
import importlib.util
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import keel.program as pg
from keel.executor import Executor, Scope
from keel.program.io import load_program
from keel.program.io.pir.write import write_pir_program
from test_pir_writer import (CONTROL_FLOW, LEGACY_CONTROL_FLOW, feeds, pir_fixture, pir_fixture_io,
                             run_model, unpack)

pytestmark = [pytest.mark.paddle,
              pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="needs PaddlePaddle")]

# one of each kind the zoo holds: convolutions with batch norm, attention, detection with NMS,
# recurrent layers (rnn's dropout-state operand), segmentation, interpolation, the volume models
LEGACY_MODELS = ["lenet", "mobilenet_v3_small", "nlp_bert", "nlp_lstm", "nlp_bigru", "det_yolo", "det_ssd",
                 "det_two_stage", "ocr_crnn_gru", "ocr_db_det", "seg_pp_liteseg", "vit_tiny", "spatial_transformer"]
PIR_MODELS = ["control_flow", "nested_control_flow", "tensor_array", "control_flow_dy2static_list_append",
              "control_flow_paddle_rnn", "lstm", "more_ops", "paddle_ops_zoo", "vision_models_volume",
              "vision_models_spatial"]

RUN = """
import os, sys
import numpy as np
prefix, inputs, how = sys.argv[1], np.load(sys.argv[2]), sys.argv[4]
if how == "inference":
    import paddle.inference as pi
    config = pi.Config()
    config.set_prog_file(prefix + ".json")
    if os.path.exists(prefix + ".pdiparams"):
        config.set_params_file(prefix + ".pdiparams")
    config.enable_new_ir(True)
    config.disable_glog_info(); config.switch_ir_optim(False); config.disable_mkldnn()
    predictor = pi.create_predictor(config)
    for name in predictor.get_input_names():
        predictor.get_input_handle(name).copy_from_cpu(inputs[name])
    predictor.run()
    outputs = [predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()]
else:
    import paddle
    layer = paddle.jit.load(prefix)
    layer.eval()
    result = layer(*[paddle.to_tensor(inputs[n]) for n in sys.argv[5].split(",")])
    outputs = [t.numpy() for t in (result if isinstance(result, (list, tuple)) else [result])]
np.savez(sys.argv[3], *outputs)
"""


def paddle_outputs(prefix, inputs, how="inference", order=None) -> list[np.ndarray]:
    directory = os.path.dirname(prefix)
    np.savez(os.path.join(directory, "in.npz"), **inputs)
    env = dict(os.environ, FLAGS_enable_pir_api="1")  # (3.3.1's default; other tests' imports may set legacy)
    done = subprocess.run([sys.executable, "-c", RUN, prefix, os.path.join(directory, "in.npz"),
                           os.path.join(directory, "out.npz"), how, ",".join(order or inputs)],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    got = np.load(os.path.join(directory, "out.npz"))
    return [got[f"arr_{i}"] for i in range(len(got.files))]


def assert_close(got, want, what):
    assert len(got) == len(want), (what, len(got), len(want))
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.shape == w.shape and g.dtype == w.dtype, (what, i, g.shape, g.dtype, w.shape, w.dtype)
        if w.size:
            scale = float(np.abs(w).max())
            err = float(np.abs(g.astype(np.float64) - w).max())
            assert err <= 1e-4 + 1e-4 * scale, f"{what} output {i}: max|paddle - expected| = {err:.3g}"


@pytest.mark.parametrize("name", LEGACY_MODELS)
def test_a_legacy_model_keel_writes_as_pir_runs_in_paddle_inference(name, tmp_path):
    prefix, recorded = unpack(name, tmp_path)
    inputs = feeds(recorded)
    (tmp_path / "m.json").write_bytes(write_pir_program(load_program(f"{prefix}.pdmodel"), name))
    if os.path.exists(f"{prefix}.pdiparams"):
        shutil.copy(f"{prefix}.pdiparams", tmp_path / "m.pdiparams")
    want = [recorded[f"ir_off:{i}"] for i in range(len(recorded["output_names"]))]
    assert_close(paddle_outputs(str(tmp_path / "m"), inputs), want, name)


@pytest.mark.parametrize("name", PIR_MODELS)
def test_a_pir_model_keel_reads_and_writes_runs_in_paddle_inference(name, tmp_path):
    params, inputs, want = pir_fixture_io(name, tmp_path)
    (tmp_path / "m.json").write_bytes(write_pir_program(load_program(pir_fixture(name, tmp_path)), name))
    if params:
        shutil.copy(params, tmp_path / "m.pdiparams")
    assert_close(paddle_outputs(str(tmp_path / "m"), inputs), want, name)


@pytest.mark.parametrize("name", LEGACY_CONTROL_FLOW)
def test_legacy_control_flow_keel_writes_as_pir_runs_in_paddle_inference(name, tmp_path):
    (tmp_path / "m.json").write_bytes(write_pir_program(load_program(CONTROL_FLOW / f"{name}.pdmodel"), name))
    if (CONTROL_FLOW / f"{name}.pdiparams").exists():
        shutil.copy(CONTROL_FLOW / f"{name}.pdiparams", tmp_path / "m.pdiparams")
    io = np.load(CONTROL_FLOW / f"{name}.io.npz")
    cases = sorted({key.split(":")[0][3:] for key in io.files if key.startswith("out")})
    for k in cases:
        inputs = {key.split(":", 1)[1]: io[key] for key in io.files if key.startswith(f"in{k}:")}
        want = [io[f"out{k}:{j}"] for j in range(sum(1 for key in io.files if key.startswith(f"out{k}:")))]
        assert_close(paddle_outputs(str(tmp_path / "m"), inputs), want, f"{name} case {k}")


def test_jit_save_format_pir_loads_in_paddle_jit_load(tmp_path):
    net = pg.nn.Sequential(pg.nn.Linear(4, 8), pg.nn.ReLU(), pg.nn.Linear(8, 3))
    net.state_dict()  # (its own values now: a same-named one another test left in the global scope stays out)
    pg.jit.save(net, str(tmp_path / "net"), input_spec=[pg.static.InputSpec([None, 4], "float32", "x")],
                format="pir")
    xv = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    want = [np.asarray(pg.jit.load(str(tmp_path / "net"))(xv))]
    assert_close(paddle_outputs(str(tmp_path / "net"), {"x": xv}, how="jit"), want, "jit.load")
    assert_close(paddle_outputs(str(tmp_path / "net"), {"x": xv}), want, "Paddle Inference")


@pytest.mark.parametrize("shift", [1.5, -1.5])
def test_save_inference_model_format_pir_with_control_flow_loads_in_paddle(shift, tmp_path):
    from test_pir_writer import keel_control_flow_run
    main, feed_vars, fetches, exe, scope, inputs, want = keel_control_flow_run(shift)
    pg.io.save_inference_model(str(tmp_path / "cf"), feed_vars, fetches, exe, program=main, scope=scope,
                               format="pir")
    assert_close(paddle_outputs(str(tmp_path / "cf"), inputs), want, "Paddle Inference")
    assert_close(paddle_outputs(str(tmp_path / "cf"), inputs, how="jit", order=["x", "n"]), want, "jit.load")


@pytest.mark.parametrize("name", ["mobilenet_v3_small", "nlp_bert", "det_yolo"])
def test_keel_convert_output_loads_in_paddle_jit_load(name, tmp_path):
    from keel.tools import convert_program
    prefix, recorded = unpack(name, tmp_path)
    inputs = feeds(recorded)
    assert convert_program.main([f"{prefix}.pdmodel", str(tmp_path / "out" / "m.json")]) == 0
    block = load_program(f"{prefix}.pdmodel").global_block()
    order = [op.output("Out")[0] for op in sorted((op for op in block.ops if op.type == "feed"),
                                                   key=lambda op: op.attr("col"))]
    want = run_model(f"{prefix}.pdmodel", f"{prefix}.pdiparams", inputs)
    assert_close(paddle_outputs(str(tmp_path / "out" / "m"), inputs, how="jit", order=order), want, name)


def test_ops_with_signatures_from_3_3_1_run_in_paddle_inference(tmp_path):
    """The ops whose signatures only signatures_3_3_1.json.gz shows, written by Keel, run in
    PaddlePaddle 3.3.1 and give Keel's outputs."""
    from test_pir_writer import _ops_program, ops_program_inputs
    main, startup, feed_vars, fetches = _ops_program()
    exe, scope = Executor(seed=3), Scope()
    exe.run(startup, scope=scope)
    inputs = ops_program_inputs()
    want = exe.run(main, feed=inputs, fetch_list=fetches, scope=scope)
    pg.io.save_inference_model(str(tmp_path / "ops"), feed_vars, fetches, exe, program=main, scope=scope,
                               format="pir")
    assert_close(paddle_outputs(str(tmp_path / "ops"), inputs), want, "ops")
