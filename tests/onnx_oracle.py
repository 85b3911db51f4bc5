"""The independent reference the ONNX converter tests share: a Keel program exported with
`program_to_onnx` (checker full check included) and run in ONNX Runtime must give what Keel's
Executor gives on the same program and inputs. Needs onnx and onnxruntime: the test modules
call `pytest.importorskip` for both before importing this."""
from __future__ import annotations

import numpy as np

from keel.executor import CPUPlace, Executor, Scope
from keel.program.onnx import program_to_onnx, untranslatable_ops
from oprun import build


def require_converters(program) -> None:
    """Skip (naming them) where the program holds ops whose converters another part of the
    exporter provides and this checkout lacks yet."""
    import pytest
    missing = sorted({op.type for op in untranslatable_ops(program)})
    if missing:
        pytest.skip(f"awaiting ONNX converters of {', '.join(missing)}")


def ort_run(model, feed: dict) -> list[np.ndarray]:
    """The outputs of ONNX model `model` (a ModelProto) on `feed`, in graph output order."""
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), options, providers=["CPUExecutionProvider"])
    return session.run(None, feed)


def keel_run(program, feed: dict, fetch_names, params=None) -> list[np.ndarray]:
    scope = Scope()
    for name, value in (params or {}).items():
        scope.var(name).set(value)
    return Executor(CPUPlace()).run(program, feed=feed, fetch_list=list(fetch_names), scope=scope)


def assert_close(got, want, what, rtol=1e-5, atol=1e-5):
    assert len(got) == len(want), f"{what}: {len(got)} outputs, want {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        w = np.asarray(w)
        assert g.shape == w.shape, f"{what} output {i}: shape {g.shape}, want {w.shape}"
        assert g.dtype == w.dtype, f"{what} output {i}: dtype {g.dtype}, want {w.dtype}"
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"{what} output {i}")


def export_and_compare(program, feed: dict, fetch_names, params=None, *, feeds_after=(), opset=17,
                       dynamic_batch=False, rtol=1e-5, atol=1e-5, what="program"):
    """Export `program` (feeds: `feed`'s keys), check ORT == Keel on `feed` and on each
    feed of `feeds_after` (other inputs, e.g. another batch size). Returns the model."""
    model = program_to_onnx(program, params or {}, list(feed), list(fetch_names), opset_version=opset,
                            dynamic_batch=dynamic_batch)
    for i, inputs in enumerate([feed, *feeds_after]):
        want = keel_run(program, inputs, fetch_names, params)
        assert_close(ort_run(model, inputs), want, f"{what} (feed {i})", rtol, atol)
    return model


def op_case(op_type, inputs, attrs=None, *, params=(), outputs=None, fetch=None, **compare):
    """One op (tests/oprun.build) exported and compared: the input slots named in `params`
    are initializers (the program's parameters), the others graph inputs. `fetch`: output
    slots to compare (default every output the op writes). `dynamic_batch`: the fed inputs'
    first dimension is left open, for `feeds_after` of other batch sizes. Returns the model."""
    program, feed, outs, ins = build(op_type, inputs, attrs, outputs)
    values = {}
    for slot in params:
        for var in ins[slot]:
            var.persistable = True
            values[var.name] = feed.pop(var.name)
    if compare.get("dynamic_batch"):  # feeds of any batch size (the op was built at the recorded one)
        for var in (v for vs in ins.values() for v in vs if v.name in feed):
            var.shape = [-1, *var.shape[1:]]
    slots = fetch or list(outs)
    fetch_names = [var.name for s in slots for var in outs[s]]
    return export_and_compare(program, feed, fetch_names, values, what=op_type, **compare)


def zoo_case(name, directory, batch_sizes=(1, 2)):
    """Zoo model `name` (tests/fixtures/zoo) exported with a dynamic batch: Paddle
    Inference's recorded outputs at the zoo's tolerance (max|onnx - paddle| <= 1e-4 +
    1e-4 * max|paddle|), and Keel's executor's at other batch sizes (the recorded inputs'
    first rows, repeated as needed) where the program's feeds all have a dynamic batch."""
    import sys
    from pathlib import Path
    from keel.program.io import load_params, load_program
    from keel.program.onnx import io_names
    sys.path.insert(0, str(Path(__file__).resolve().parent / "fixtures" / "zoo"))
    try:
        from zoo_files import feeds, unpack
    finally:
        sys.path.pop(0)
    prefix, recorded = unpack(name, directory)
    program = load_program(prefix.with_suffix(".pdmodel"))
    require_converters(program)
    params = load_params(program, prefix.with_suffix(".pdiparams"))
    model = program_to_onnx(program, params, dynamic_batch=True)
    feed_names, fetch_names = io_names(program)
    inputs = {n: feeds(recorded)[n] for n in feed_names}
    for i, got in enumerate(ort_run(model, inputs)):
        want = recorded[f"ir_off:{i}"]
        assert got.shape == want.shape and got.dtype == want.dtype, (name, i, got.shape, want.shape)
        err = float(np.abs(got.astype(np.float64) - want).max()) if want.size else 0.0
        assert err <= 1e-4 + 1e-4 * (float(np.abs(want).max()) if want.size else 0.0), (name, i, err)
    block = program.global_block()
    if not all(block.var(n).shape and block.var(n).shape[0] == -1 for n in feed_names):
        return
    for batch in batch_sizes:
        other = {n: np.resize(v, (batch, *v.shape[1:])) for n, v in inputs.items()}
        assert_close(ort_run(model, other), keel_run(program, other, fetch_names, params),
                     f"{name} at batch {batch}", rtol=1e-4, atol=1e-4)
