"""A PIR program read by Keel and written as a legacy `.pdmodel` (tools/prune_for_inference.py,
the PIR -> legacy direction PaddlePaddle itself lacks) runs in PaddlePaddle 3.3.1's legacy-mode
Paddle Inference and gives the outputs Paddle Inference recorded for the PIR file (issue 28).
Needs PaddlePaddle (an oracle; skipped without it); Paddle runs in a child process, as the
legacy mode is fixed when paddle is imported."""
import gzip
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from keel.tools import prune_for_inference

pytestmark = [pytest.mark.paddle,
              pytest.mark.skipif(importlib.util.find_spec("paddle") is None, reason="needs PaddlePaddle")]
PIR = Path(__file__).resolve().parent / "fixtures" / "pir"
MODELS = ["cnn_bn", "ops_mix", "control_flow", "lstm", "transformer", "tensor_array", "more_ops",
          "control_flow_dy2static_while"]

RUN = """
import os, sys
import numpy as np, paddle.inference as pi
prefix, inputs = sys.argv[1], np.load(sys.argv[2])
config = pi.Config()
config.set_prog_file(prefix + ".pdmodel")
if os.path.exists(prefix + ".pdiparams"):  # (none is written for a model without parameters)
    config.set_params_file(prefix + ".pdiparams")
config.disable_glog_info(); config.switch_ir_optim(False); config.disable_mkldnn()
predictor = pi.create_predictor(config)
for name in predictor.get_input_names():
    predictor.get_input_handle(name).copy_from_cpu(inputs["in:" + name])
predictor.run()
np.savez(sys.argv[3], *[predictor.get_output_handle(n).copy_to_cpu() for n in predictor.get_output_names()])
"""


@pytest.mark.parametrize("name", MODELS)
def test_keel_written_legacy_file_runs_in_paddle_inference(name, tmp_path):
    source = PIR / name if (PIR / f"{name}.json").exists() else tmp_path / name
    if not (PIR / f"{name}.json").exists():
        (tmp_path / f"{name}.json").write_bytes(gzip.decompress((PIR / f"{name}.json.gz").read_bytes()))
    recorded = np.load(PIR / f"{name}.io.npz", allow_pickle=False)
    params = str(recorded["params"])
    args = ["--model", f"{source}.json"] + (["--params", str(PIR.parent / params)] if params else [])
    assert prune_for_inference.main(args + ["--out", str(tmp_path / "legacy")]) == 0
    np.savez(tmp_path / "in.npz", **{k: recorded[k] for k in recorded.files if k.startswith("in:")})
    env = dict(os.environ, FLAGS_enable_pir_api="0")
    done = subprocess.run([sys.executable, "-c", RUN, str(tmp_path / "legacy"), str(tmp_path / "in.npz"),
                           str(tmp_path / "out.npz")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    got = np.load(tmp_path / "out.npz")
    n_out = len(recorded["output_names"])
    assert len(got.files) == n_out
    for i in range(n_out):
        want = recorded[f"ir_off:{i}"]
        out = got[f"arr_{i}"]
        assert out.shape == want.shape and out.dtype == want.dtype, (name, i)
        err = float(np.abs(out.astype(np.float64) - want).max()) if want.size else 0.0
        assert err <= 1e-5 + 1e-5 * float(np.abs(want).max() if want.size else 0), (name, i, err)
