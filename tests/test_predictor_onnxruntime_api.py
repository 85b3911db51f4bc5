"""tests/test_predictor.py's tests of the Predictor's API, run again with ONNX Runtime as the
engine: every Config the tests make has `enable_onnxruntime()` on, and a fallback to Keel's
engine (OrtFallbackWarning) fails the test, so each one below really ran on ONNX Runtime and
saw the same outputs, handles, clones and errors as on Keel's engine."""
import warnings

import pytest

pytest.importorskip("onnx", reason="the ONNX engine needs the onnx package (pip install onnx onnxruntime)")
pytest.importorskip("onnxruntime", reason="the ONNX engine needs onnxruntime (pip install onnx onnxruntime)")

import test_predictor  # noqa: E402
from keel.executor.inference_config import Config  # noqa: E402
from keel.executor.onnx_engine import OrtFallbackWarning  # noqa: E402

# test_predictor's tests of what a user sees through the API; the others test Keel's own
# engine (its passes and their report, the executor's threads, cupy, bfloat16 kernels) or,
# as test_model_saved_with_keel, bit-equality with Keel's executor, which ONNX Runtime's
# kernels round differently (within 2e-7 relative there; test_predictor_onnxruntime.py
# compares at the zoo's tolerance)
SAME_ON_BOTH = ["test_fixture_through_handles_and_run_list", "test_fixture_with_default_config",
                "test_names_follow_col_order_not_op_order", "test_handle_types_shapes_and_copies",
                "test_a_dtype_that_may_change_values_is_refused_like_an_executor_feed",
                "test_bool_and_int_outputs_are_exact",
                "test_parameter_free_model_needs_no_params_file", "test_clone_shares_parameter_arrays_but_not_state",
                "test_cloned_predictors_on_threads_match_serial_runs", "test_ir_optim_off_runs_the_program_as_loaded",
                "test_unknown_names_are_reported_with_suggestions", "test_run_before_every_input_is_set",
                "test_wrong_dtype_or_shape_names_the_input", "test_missing_files",
                "test_unsupported_ops_are_listed_at_once"]
for _name in SAME_ON_BOTH:
    globals()[_name] = getattr(test_predictor, _name)


@pytest.fixture(autouse=True)
def on_onnxruntime(monkeypatch):
    plain_init = Config.__init__

    def init(self, *args, **kwargs):
        plain_init(self, *args, **kwargs)
        self.enable_onnxruntime()
    monkeypatch.setattr(Config, "__init__", init)
    with warnings.catch_warnings():
        warnings.simplefilter("error", OrtFallbackWarning)
        yield
