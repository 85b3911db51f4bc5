"""Gradient checks (finite differences, tests/gradcheck.py) of the ops issue 32 added: the
1-D/3-D-spatial interpolations and the 1.x nearest_interp, ..."""
import pytest

from gradcheck import Case, away_from, rand, run_case

_INTERP = dict(data_layout="NCHW", out_d=0, out_h=0, out_w=0, scale=[], align_corners=True, align_mode=1)


def _interp(op, x, method, **attrs):
    return Case(op, {"X": x}, dict(_INTERP, interp_method=method, **attrs), id=f"{op} {attrs}")


CASES = [
    _interp("linear_interp_v2", rand(2, 3, 5), "linear", out_w=8, data_layout="NCHW"),
    _interp("linear_interp_v2", rand(2, 5, 3), "linear", out_w=3, data_layout="NHWC", align_corners=False,
            align_mode=0),
    _interp("trilinear_interp_v2", rand(1, 2, 3, 4, 3), "trilinear", out_d=4, out_h=3, out_w=5,
            data_layout="NCHW"),
    _interp("trilinear_interp_v2", rand(1, 2, 3, 4, 3), "trilinear", scale=[1.5, 0.8, 2.0],
            align_corners=False, align_mode=0, data_layout="NCHW"),
    _interp("nearest_interp_v2", rand(1, 2, 3, 4, 3), "nearest", out_d=5, out_h=2, out_w=4,
            align_corners=False, data_layout="NCHW"),
    _interp("nearest_interp", rand(2, 2, 3, 4), "nearest", out_h=5, out_w=7, scale=0.0),
    _interp("nearest_interp", rand(2, 2, 3, 4), "nearest", scale=1.7, align_corners=False),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)

_SMOOTH = rand(3, 4, low=-0.8, high=0.8)
CASES += [
    Case("tan", {"X": _SMOOTH}), Case("sinh", {"X": _SMOOTH}), Case("cosh", {"X": _SMOOTH}),
    Case("asinh", {"X": _SMOOTH}), Case("acosh", {"X": _SMOOTH + 2.0}), Case("atanh", {"X": _SMOOTH}),
    Case("hard_shrink", {"X": away_from(rand(3, 4, low=-2, high=2), [-0.5, 0.5])}, {"threshold": 0.5}),
    Case("softshrink", {"X": away_from(rand(3, 4, low=-2, high=2), [-0.3, 0.3])}, {"lambda": 0.3}),
    Case("frobenius_norm", {"X": rand(3, 4)}, {"dim": [1], "keep_dim": False, "reduce_all": False}),
    Case("frobenius_norm", {"X": rand(2, 3, 4)}, {"dim": [0, 2], "keep_dim": True, "reduce_all": False}),
    Case("frobenius_norm", {"X": rand(2, 3)}, {"dim": [0], "keep_dim": False, "reduce_all": True}),
]

_FUSED = dict(axis=-1, scale=0.0, save_intermediate_out=True)
# every functor pair PaddlePaddle implements, with equal shapes and a broadcast Y; X and Y
# kept away from relu's kink at 0 (of X + Y, and of Y)
_FX, _FY = rand(2, 3, low=0.1, high=1.0), rand(2, 3, low=0.1, high=1.0, seed=5)
CASES += [
    Case("fused_elemwise_activation", {"X": _FX, "Y": _FY},
         dict(_FUSED, functor_list=list(pair), scale=1.7), id=f"fused {pair}")
    for pair in [("relu", "elementwise_add"), ("scale", "elementwise_add"), ("tanh", "elementwise_add"),
                 ("gelu", "elementwise_add"), ("elementwise_add", "relu"), ("elementwise_add", "scale"),
                 ("elementwise_mul", "scale"), ("elementwise_mul", "tanh"), ("elementwise_mul", "sigmoid")]
] + [
    Case("fused_elemwise_activation", {"X": rand(2, 3, 4, low=0.1, high=1.0), "Y": rand(3, 4, low=0.1, high=1.0)},
         dict(_FUSED, functor_list=list(pair), scale=0.5), id=f"fused broadcast {pair}")
    for pair in [("relu", "elementwise_add"), ("gelu", "elementwise_add"), ("elementwise_mul", "tanh"),
                 ("elementwise_add", "scale")]
] + [
    Case("fused_elemwise_activation", {"X": rand(2, 3, 4), "Y": rand(3, seed=3)},
         dict(_FUSED, axis=1, functor_list=["elementwise_mul", "sigmoid"]), id="fused axis 1"),
    Case("fused_elemwise_activation", {"X": _FX, "Y": _FY},
         dict(_FUSED, save_intermediate_out=False, functor_list=["tanh", "elementwise_add"]), id="fused unsaved"),
]
