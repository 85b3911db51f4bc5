"""The model zoo (tests/fixtures/zoo/): small models of PaddlePaddle's suites (classification,
OCR, detection with NMS, segmentation, NLP, a spatial transformer) exported by PaddlePaddle
3.3.1 in legacy mode, by paddle.jit.save and by save_inference_model (generate.py there).

For each model, Keel's Predictor, with its graph passes off and on, must give Paddle
Inference's outputs, both those recorded with `switch_ir_optim(False)` and with
`switch_ir_optim(True)`: max|keel - paddle| <= 1e-4 + 1e-4 * max|paddle|, same shapes and
dtypes. `tools/inspect_model.py --check` must say Keel runs each file, and must say it does
not when a file holds an op Keel lacks."""
import contextlib
import io
import sys
from pathlib import Path

import numpy as np
import pytest

from keel.executor.inference import Config, create_predictor

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "zoo"))
try:
    from zoo_files import NAMES, ZOO, feeds, unpack, unzip_program
finally:
    sys.path.pop(0)

from keel.tools import inspect_model  # noqa: E402


def recorded_outputs(recorded, setting):
    n = len(recorded["output_names"])
    return [recorded[f"{setting}:{i}"] for i in range(n)]


def assert_matches(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} outputs, PaddlePaddle gave {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        assert g.dtype == w.dtype and g.shape == w.shape, (what, i, g.dtype, g.shape, w.dtype, w.shape)
        if w.size:
            scale = float(np.abs(w).max())
            err = float(np.abs(g.astype(np.float64) - w).max())
            assert err <= 1e-4 + 1e-4 * scale, f"{what} output {i}: max|keel - paddle| = {err:.3g} (max|paddle| {scale:.3g})"


def test_the_zoo_has_forty_architectures_of_every_family():
    families = {}
    exports = set()
    for name in NAMES:
        recorded = np.load(ZOO / f"{name}.io.npz", allow_pickle=False)
        families.setdefault(str(recorded["family"]), []).append(name)
        exports.add(str(recorded["export"]))
    assert len(NAMES) >= 40
    assert {"classification", "OCR", "detection", "segmentation", "NLP"} <= set(families)
    assert exports == {"jit.save", "save_inference_model"}


@pytest.mark.parametrize("name", NAMES)
def test_keel_gives_paddle_inference_outputs(name, tmp_path):
    prefix, recorded = unpack(name, tmp_path)
    inputs = feeds(recorded)
    for keel_passes in (False, True):
        config = Config(str(prefix.with_suffix(".pdmodel")), str(prefix.with_suffix(".pdiparams")))
        config.switch_ir_optim(keel_passes)
        predictor = create_predictor(config)
        assert predictor.get_output_names() == list(recorded["output_names"])
        got = predictor.run([inputs[n] for n in predictor.get_input_names()])
        for setting in ("ir_off", "ir_on"):
            assert_matches(got, recorded_outputs(recorded, setting),
                           f"{name} (Keel passes {'on' if keel_passes else 'off'}, Paddle {setting})")


def check(path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = inspect_model.main([str(path), "--check"])
    return code, out.getvalue()


@pytest.mark.parametrize("name", NAMES)
def test_inspect_check_says_keel_runs_it(name, tmp_path):
    code, text = check(unzip_program(name, tmp_path))
    assert code == 0 and text.strip().endswith("OK, Keel runs it"), text


def test_inspect_check_says_a_file_with_an_unknown_op_is_not_runnable(tmp_path):
    """The GPT decoder with its tril_triu renamed to an op type no PaddlePaddle has."""
    data = unzip_program("nlp_gpt", tmp_path).read_bytes()
    op_type = b"\x1a\x09tril_triu"   # OpDesc.type (field 3, length 9)
    assert data.count(op_type) == 1
    broken = tmp_path / "broken.pdmodel"
    broken.write_bytes(data.replace(op_type, b"\x1a\x09tril_trix"))
    code, text = check(broken)
    assert code == 1, text
    assert "tril_trix" in text and "cannot run: 1 problem(s)" in text, text


def test_expand_v2_takes_minus_two_for_dims_given_by_tensors():
    """PaddlePaddle writes expand_v2's `shape` with -2 for each dim given by an
    expand_shapes_tensor input (paddle.expand(x, [paddle.shape(t)[0], 1, 16]), as in the ViT's
    class token): valid with that input, refused without it."""
    import keel.program as pg
    from keel.executor import Executor, Scope
    from keel.program.verify import program_problems

    def build(with_tensors):
        p = pg.Program()
        b = p.global_block()
        x = b.create_var("x", [1, 1, 4], "float32")
        dims = [b.create_var(f"d{i}", [1], "int32") for i in range(3)]
        out = b.create_var("out")
        inputs = {"X": x, "expand_shapes_tensor": dims} if with_tensors else {"X": x}
        b.append_op("expand_v2", inputs, {"Out": out}, {"shape": [-2, 3, 4]})
        return p

    p = build(True)
    assert program_problems(p) == []
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 4)
    feed = {"x": x, "d0": np.array([2], np.int32), "d1": np.array([3], np.int32), "d2": np.array([4], np.int32)}
    got, = Executor().run(p, feed=feed, fetch_list=["out"], scope=Scope())
    np.testing.assert_array_equal(got, np.broadcast_to(x, (2, 3, 4)))
    problems = program_problems(build(False))
    assert len(problems) == 1 and "(expand_v2): attribute 'shape' = [-2, 3, 4] allowed: >= -1" in problems[0]
