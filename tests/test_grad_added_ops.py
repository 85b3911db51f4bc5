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
