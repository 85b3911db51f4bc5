"""Keel-built control-flow programs (cond, while_loop, an RNN over a tensor array) run in
PaddlePaddle (optional: needs `paddle`, skipped without it).

    FLAGS_enable_pir_api=0 PYTHONPATH=.:tests $PADDLE_PYTHON -m pytest -q -m paddle tests/test_control_flow_paddle.py
"""
import os

import numpy as np
import pytest

os.environ.setdefault("FLAGS_enable_pir_api", "0")
paddle = pytest.importorskip("paddle")

import keel.program as pg  # noqa: E402
from keel.executor import Executor, Scope  # noqa: E402
from test_control_flow import _cond_program, _power_program, _rnn_program  # noqa: E402

pytestmark = pytest.mark.paddle


def _in_paddle(prefix, feed):
    paddle.enable_static()
    try:
        exe = paddle.static.Executor(paddle.CPUPlace())
        prog, feeds, fetches = paddle.static.load_inference_model(prefix, exe)
        return exe.run(prog, feed=feed, fetch_list=fetches)
    finally:
        paddle.disable_static()


def _check(tmp_path, main, startup, feed_vars, fetch_vars, feeds):
    exe, scope = Executor(seed=5), Scope()
    if startup is not None:
        exe.run(startup, scope=scope)
    prefix = str(tmp_path / "model")
    pg.io.save_inference_model(prefix, feed_vars, fetch_vars, exe, program=main, scope=scope)
    for feed in feeds:
        want = exe.run(main, feed=feed, fetch_list=fetch_vars, scope=scope)
        got = _in_paddle(prefix, feed)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_our_cond_runs_in_paddle(tmp_path):
    main, x, y = _cond_program()
    rng = np.random.default_rng(0)
    _check(tmp_path, main, None, [x], [y],
           [{"x": rng.standard_normal((2, 3)).astype(np.float32) + s} for s in (2.0, -2.0)])


def test_our_while_loop_runs_in_paddle(tmp_path):
    main, x, n, i, y = _power_program()
    rng = np.random.default_rng(1)
    _check(tmp_path, main, None, [x, n], [y],
           [{"x": rng.standard_normal((2, 3)).astype(np.float32), "n": np.array([k])} for k in (0, 1, 4)])


def test_our_rnn_over_a_tensor_array_runs_in_paddle(tmp_path):
    main, startup, x, out = _rnn_program()
    rng = np.random.default_rng(2)
    _check(tmp_path, main, startup, [x], [out], [{"x": rng.standard_normal((2, 4, 3)).astype(np.float32)}])


def test_exported_decoding_programs_run_in_paddle(tmp_path):
    """examples/decode.py's greedy and beam-search programs give PaddlePaddle the same tokens."""
    import sys
    from pathlib import Path
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
    try:
        import decode
    finally:
        sys.path.pop(0)
    start = np.array([[1], [5]], np.int64)
    for name, build in (("greedy", decode.greedy_program), ("beam", decode.beam_program)):
        ours = decode.export_and_run(build, tmp_path, name, start)
        theirs = _in_paddle(str(tmp_path / name), {"start": start})
        np.testing.assert_array_equal(theirs[0], ours[0])
        for g, w in zip(theirs[1:], ours[1:]):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
