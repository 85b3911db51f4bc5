"""`paddle.inference`: the Predictor and its Config (keel.executor.inference, the same
objects), every name PaddlePaddle 3.3.1's module has (tests/test_inference_config.py)."""
from keel.executor.inference import (Config, DataType, InternalUtils, PlaceType, PrecisionType, Predictor,
                                     PredictorError, PredictorPool, Tensor, XpuConfig, convert_to_mixed_precision,
                                     create_predictor, get_num_bytes_of_data_type, get_trt_compile_version,
                                     get_trt_runtime_version, get_version, wrapper)

__all__ = ["Config", "DataType", "InternalUtils", "PlaceType", "PrecisionType", "Predictor", "PredictorError",
           "PredictorPool", "Tensor", "XpuConfig", "convert_to_mixed_precision", "create_predictor",
           "get_num_bytes_of_data_type", "get_trt_compile_version", "get_trt_runtime_version", "get_version",
           "wrapper"]
