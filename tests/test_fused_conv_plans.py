"""The specialized fused_conv2d (kernels/fused_conv.py `_specialize`): a plan per shape,
which must give the general kernel's numbers (bit for bit where the bias is added after the
convolution; within float32 rounding where a widening 1x1 convolution adds it inside its
GEMM, kernels/conv.py `pointwise_with_bias`) and a float64 reference's, take the bias-in-GEMM
form exactly where `bias_in_gemm` says, and fall back to the general kernel for inputs of
another dtype or with a wrong Bias size."""
import numpy as np
import pytest

from keel.executor.kernel_call import call_kernel, specialize
from keel.kernels import conv, fused_conv
from keel.kernels.registry import get as kernel_of

F32 = np.dtype(np.float32)

# (name, x shape, Filter shape, strides, paddings, groups, bias added inside the GEMM)
CASES = [
    ("1x1 widening", (1, 6, 4, 10), (20, 6, 1, 1), (1, 1), (0, 0, 0, 0), 1, True),
    ("1x1 widening batch 2 stride 2", (2, 5, 7, 9), (12, 5, 1, 1), (2, 2), (0, 0, 0, 0), 1, True),
    ("1x1 widening, fewer positions than channels", (1, 8, 2, 3), (16, 8, 1, 1), (1, 1), (0, 0, 0, 0), 1, False),
    ("1x1 narrowing", (1, 20, 4, 10), (6, 20, 1, 1), (1, 1), (0, 0, 0, 0), 1, False),
    ("1x1 grouped", (1, 6, 4, 10), (12, 3, 1, 1), (1, 1), (0, 0, 0, 0), 2, False),
    ("3x3", (2, 4, 7, 9), (6, 4, 3, 3), (1, 1), (1, 1, 1, 1), 1, False),
    ("depthwise 5x5 short plane", (1, 6, 2, 30), (6, 1, 5, 5), (1, 1), (2, 2, 2, 2), 6, False),
]
ACTS = [("", 0.0, 0.0), ("relu", 0.0, 0.0), ("sigmoid", 0.0, 0.0), ("hard_swish", 1 / 6, 0.5)]


def _attrs(strides, pads, groups, act, alpha, beta, residual):
    return {"strides": list(strides), "paddings": list(pads), "padding_algorithm": "EXPLICIT",
            "dilations": [1, 1], "groups": groups, "data_format": "NCHW", "fuse_activation": act,
            "fuse_alpha": alpha, "fuse_beta": beta, "fuse_residual_connection": residual}


def _reference(x, w, bias, residual, strides, pads, groups, act):
    """conv + bias + residual + activation in float64, from conv2d's general kernel."""
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    out = call_kernel("conv2d", {"Input": x64, "Filter": w64},
                      {"strides": list(strides), "paddings": list(pads), "padding_algorithm": "EXPLICIT",
                       "dilations": [1, 1], "groups": groups, "data_format": "NCHW"})["Output"]
    if bias is not None:
        out = out + bias.astype(np.float64)[None, :, None, None]
    if residual is not None:
        out = out + residual
    if act == "relu":
        out = np.maximum(out, 0)
    elif act == "sigmoid":
        out = 1 / (1 + np.exp(-out))
    elif act == "hard_swish":
        out = out * np.clip(out + 3, 0, 6) / 6
    return out


@pytest.mark.parametrize("act, alpha, beta", ACTS, ids=[a[0] or "none" for a in ACTS])
@pytest.mark.parametrize("with_bias, with_residual", [(True, False), (True, True), (False, True)])
@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_specialized_fused_conv2d_matches_general_kernel_and_reference(case, with_bias, with_residual, act, alpha,
                                                                       beta, monkeypatch):
    _, xs, ws, strides, pads, groups, folds = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    o = ws[0]
    oh = (xs[2] + pads[0] + pads[1] - ws[2]) // strides[0] + 1
    ow = (xs[3] + pads[2] + pads[3] - ws[3]) // strides[1] + 1
    bias = rng.standard_normal(o).astype(np.float32) if with_bias else None
    residual = rng.standard_normal((xs[0], o, oh, ow)).astype(np.float32) if with_residual else None
    attrs = _attrs(strides, pads, groups, act, alpha, beta, with_residual)
    present = (F32, F32, F32 if with_bias else None, F32 if with_residual else None)
    fast = specialize(kernel_of("fused_conv2d"), attrs, present, False)
    assert fast is not None
    folded, one_gemm = [], []
    real, real_one_gemm = fused_conv.pointwise_with_bias, fused_conv._one_gemm_plan

    def spy(*args):
        folded.append(True)
        return real(*args)

    def one_gemm_spy(*args):
        one_gemm.append(True)
        return real_one_gemm(*args)
    monkeypatch.setattr(fused_conv, "pointwise_with_bias", spy)
    monkeypatch.setattr(fused_conv, "_one_gemm_plan", one_gemm_spy)
    args = [a for a in (x, w, bias, residual) if a is not None]
    want = call_kernel("fused_conv2d", {"Input": x, "Filter": w, "Bias": bias, "ResidualData": residual},
                       attrs)["Output"]
    for _ in range(2):  # the plan made, then reused
        got = fast(*args)
        assert got.dtype == np.float32 and got.shape == want.shape and got.flags.c_contiguous
        if folded:
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
        else:
            np.testing.assert_array_equal(got, want)
    assert bool(folded) == (folds and with_bias)
    assert conv.bias_in_gemm(xs, ws, strides, pads, groups) == folds
    # one sample, one group, 1x1 at stride 1, bias (if any) after the GEMM: the direct plan
    assert one_gemm == ([True] if (xs[0] == 1 and groups == 1 and ws[2:] == (1, 1) and strides == (1, 1)
                                   and not (folds and with_bias)) else [])
    ref = _reference(x, w, bias, residual, strides, pads, groups, act)
    np.testing.assert_allclose(got, ref, rtol=0, atol=4e-6 * max(1.0, np.abs(ref).max()))


def test_specialized_fused_conv2d_falls_back_for_other_dtypes_and_bad_bias():
    attrs = _attrs((1, 1), (0, 0, 0, 0), 1, "relu", 0.0, 0.0, False)
    fast = specialize(kernel_of("fused_conv2d"), attrs, (F32, F32, F32, None), False)
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((1, 4, 5, 6)), rng.standard_normal((9, 4, 1, 1)), rng.standard_normal(9)
    got = fast(x, w, b)  # float64 arrays through the float32-specialized op
    want = call_kernel("fused_conv2d", {"Input": x, "Filter": w, "Bias": b}, attrs)["Output"]
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, want)
    x32, w32 = x.astype(np.float32), w.astype(np.float32)
    with pytest.raises(ValueError, match="Bias has 5 values for 9 output channels"):
        fast(x32, w32, np.ones(5, np.float32))
