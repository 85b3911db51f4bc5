"""Gradient checks: elementwise binary ops (Paddle's axis broadcasting) and reductions."""
import pytest

from gradcheck import Case, rand, run_case

_POS = dict(low=0.5, high=2.0)

CASES = [
    Case("elementwise_add", {"X": rand(2, 3, 4), "Y": rand(2, 3, 4, seed=1)}, id="add same shape"),
    Case("elementwise_add", {"X": rand(2, 3, 4), "Y": rand(3)}, {"axis": 1}, id="add axis=1"),
    Case("elementwise_add", {"X": rand(2, 3, 4), "Y": rand(3, 1)}, {"axis": 1}, id="add axis=1 trailing 1"),
    Case("elementwise_add", {"X": rand(2, 1, 4), "Y": rand(3, 1)}, id="add both broadcast"),
    Case("elementwise_sub", {"X": rand(4), "Y": rand(2, 3, 4)}, id="sub x broadcast"),
    Case("elementwise_sub", {"X": rand(2, 3, 4), "Y": rand(2, 3)}, {"axis": 0}, id="sub axis=0"),
    Case("elementwise_mul", {"X": rand(2, 3, 4), "Y": rand(4)}, id="mul"),
    Case("elementwise_mul", {"X": rand(2, 3), "Y": rand(1, 1, seed=2)}, id="mul size-1"),
    Case("elementwise_div", {"X": rand(2, 3), "Y": rand(2, 3, **_POS)}, id="div"),
    Case("elementwise_div", {"X": rand(2, 3, 4), "Y": rand(3, **_POS)}, {"axis": 1}, id="div axis=1"),
    Case("elementwise_pow", {"X": rand(2, 3, **_POS), "Y": rand(3)}, id="pow"),
    Case("elementwise_max", {"X": rand(2, 3, 4), "Y": rand(4, seed=3)}, id="max"),
    Case("elementwise_min", {"X": rand(2, 3, 4), "Y": rand(3, seed=4)}, {"axis": 1}, id="min axis=1"),
    Case("reduce_sum", {"X": rand(2, 3, 4)}, {"dim": [1]}, id="reduce_sum dim=1"),
    Case("reduce_sum", {"X": rand(2, 3, 4)}, {"dim": [0, -1], "keep_dim": True}, id="reduce_sum keep_dim"),
    Case("reduce_sum", {"X": rand(2, 3)}, {"reduce_all": True}, id="reduce_sum all"),
    Case("reduce_mean", {"X": rand(2, 3, 4)}, {"dim": [0, 2], "keep_dim": True}, id="reduce_mean keep_dim"),
    Case("reduce_mean", {"X": rand(2, 3, 4)}, {"dim": [-1]}, id="reduce_mean dim=-1"),
    Case("reduce_mean", {"X": rand(3, 4)}, {"reduce_all": True}, id="reduce_mean all"),
    Case("reduce_max", {"X": rand(2, 3, 4)}, {"dim": [-1]}, id="reduce_max"),
    Case("reduce_max", {"X": rand(2, 3, 4)}, {"dim": [0, 1], "keep_dim": True}, id="reduce_max keep_dim"),
    Case("reduce_min", {"X": rand(2, 3, 4)}, {"dim": [1]}, id="reduce_min"),
    Case("reduce_prod", {"X": rand(2, 3, 4, **_POS)}, {"dim": [1]}, id="reduce_prod"),
    Case("reduce_prod", {"X": rand(2, 3)}, {"reduce_all": True}, id="reduce_prod all"),
    Case("mean", {"X": rand(2, 3, 4)}, id="mean"),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_gradient(case):
    run_case(case)
