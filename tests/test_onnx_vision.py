"""ONNX export of the vision sampling ops (program/onnx/ops_vision.py): interpolation in
every mode and size form, grid_sampler, affine_grid and lookup_table_v2,
run in ONNX Runtime against Keel's executor (other batch sizes too, where the size is
dynamic)."""
import numpy as np
import pytest

pytest.importorskip("onnx", reason="ONNX export needs the optional onnx package (pip install -e '.[onnx]' in the Keel checkout)")
pytest.importorskip("onnxruntime", reason="the exported models are checked by running them in onnxruntime")

from keel.program.onnx import OnnxExportError  # noqa: E402
from onnx_oracle import op_case, zoo_case  # noqa: E402

rng = np.random.default_rng(0)
MODES = [dict(align_corners=True, align_mode=1), dict(align_corners=False, align_mode=0),
         dict(align_corners=False, align_mode=1)]
_LINEAR = {3: ("linear_interp_v2", "linear"), 4: ("bilinear_interp_v2", "bilinear"),
           5: ("trilinear_interp_v2", "trilinear")}
_NAMES = ["out_d", "out_h", "out_w"]


def _x(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape,sizes", [((2, 3, 7), (11,)), ((1, 2, 5, 7), (9, 4)), ((2, 2, 6, 6), (1, 3)),
                                         ((1, 2, 3, 5, 4), (5, 3, 7))])
def test_linear_interp_sizes_in_every_coordinate_mode(mode, shape, sizes):
    op, method = _LINEAR[len(shape)]
    attrs = {"interp_method": method, **dict(zip(_NAMES[3 - len(sizes):], sizes)), **mode}
    op_case(op, {"X": _x(*shape)}, attrs)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("shape,sizes", [((2, 3, 7), (11,)), ((1, 2, 5, 7), (10, 14)), ((1, 2, 8, 6), (3, 5)),
                                         ((1, 2, 3, 5, 4), (6, 10, 8))])
def test_nearest_interp_sizes(align_corners, shape, sizes):
    attrs = {"interp_method": "nearest", **dict(zip(_NAMES[3 - len(sizes):], sizes)),
             "align_corners": align_corners}
    op_case("nearest_interp_v2", {"X": _x(*shape)}, attrs)


@pytest.mark.parametrize("method,op", [("nearest", "nearest_interp_v2"), ("bilinear", "bilinear_interp_v2")])
@pytest.mark.parametrize("mode", MODES)
def test_interp_by_scale_attribute_at_other_batch_sizes(method, op, mode):
    attrs = {"interp_method": method, "scale": [2.0, 1.5], **mode}
    op_case(op, {"X": _x(2, 3, 6, 4)}, attrs, dynamic_batch=True, feeds_after=[{"x0": _x(5, 3, 6, 4)}])


def test_interp_by_sizes_at_other_batch_sizes():
    op_case("bilinear_interp_v2", {"X": _x(2, 3, 6, 4)}, {"interp_method": "bilinear", "out_h": 3, "out_w": 7},
            dynamic_batch=True, feeds_after=[{"x0": _x(1, 3, 6, 4)}])


@pytest.mark.parametrize("mode", MODES)
def test_interp_by_size_and_scale_tensors(mode):
    x = _x(1, 2, 5, 6)
    op_case("bilinear_interp_v2", {"X": x, "OutSize": np.array([7, 9], np.int32)},
            {"interp_method": "bilinear", **mode})
    op_case("bilinear_interp_v2", {"X": x, "SizeTensor": [np.array([3], np.int64), np.array([8], np.int64)]},
            {"interp_method": "bilinear", **mode})
    op_case("nearest_interp_v2", {"X": x, "Scale": np.array([2.0], np.float32)},
            {"interp_method": "nearest", **mode})


def test_interp_channel_last_and_integer_images():
    op_case("bilinear_interp_v2", {"X": _x(1, 5, 6, 3)},
            {"interp_method": "bilinear", "out_h": 9, "out_w": 4, "data_layout": "NHWC", "align_corners": False,
             "align_mode": 0})
    image = rng.integers(0, 255, (1, 3, 5, 6)).astype(np.uint8)
    op_case("bilinear_interp_v2", {"X": image}, {"interp_method": "bilinear", "out_h": 9, "out_w": 11,
                                                 "align_corners": True}, atol=1)
    op_case("nearest_interp_v2", {"X": image.astype(np.int32)}, {"interp_method": "nearest", "out_h": 10,
                                                                 "out_w": 12, "align_corners": False})


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [True, False])
def test_grid_sampler(mode, padding_mode, align_corners):
    grid = rng.uniform(-1.3, 1.3, (2, 5, 4, 2)).astype(np.float32)
    op_case("grid_sampler", {"X": _x(2, 3, 6, 7), "Grid": grid},
            {"mode": mode, "padding_mode": padding_mode, "align_corners": align_corners})


def test_grid_sampler_of_5d_input_needs_opset_20():
    grid = rng.uniform(-1, 1, (1, 3, 4, 2, 3)).astype(np.float32)
    inputs = {"X": _x(1, 2, 4, 5, 3), "Grid": grid}
    with pytest.raises(OnnxExportError, match="grid_sampler.*opset 20"):
        op_case("grid_sampler", inputs, {"mode": "bilinear"}, opset=17)
    op_case("grid_sampler", inputs, {"mode": "bilinear", "padding_mode": "border", "align_corners": False},
            opset=20)


@pytest.mark.parametrize("align_corners", [True, False])
@pytest.mark.parametrize("shape", [[2, 3, 5, 7], [2, 1, 3, 4, 5]])
def test_affine_grid(align_corners, shape):
    nd = len(shape) - 2
    theta = _x(2, nd, nd + 1)
    op_case("affine_grid", {"Theta": theta}, {"output_shape": shape, "align_corners": align_corners})


def test_affine_grid_with_a_shape_tensor_is_refused_naming_why():
    with pytest.raises(OnnxExportError, match="affine_grid.*OutputShape"):
        op_case("affine_grid", {"Theta": _x(2, 2, 3), "OutputShape": np.array([2, 3, 5, 7], np.int32)},
                {"align_corners": True})


@pytest.mark.parametrize("padding_idx", [-1, 0, 3])
@pytest.mark.parametrize("ids_dtype", [np.int32, np.int64])
def test_lookup_table_v2_zeros_the_padding_rows(padding_idx, ids_dtype):
    w = _x(6, 4)
    w[3] = 7.0  # the padding row's own values never reach the output
    ids = np.array([[0, 3, 5], [3, 1, 0]], ids_dtype)
    op_case("lookup_table_v2", {"W": w, "Ids": ids}, {"padding_idx": padding_idx}, params=["W"])


@pytest.mark.parametrize("name", ["seg_deeplab_aspp", "seg_pp_liteseg", "ocr_db_det", "spatial_transformer",
                                  "nlp_textcnn", "nlp_bert"])
def test_zoo_models_of_these_ops_give_paddles_outputs(name, tmp_path):
    zoo_case(name, tmp_path)
