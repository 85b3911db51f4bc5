"""Shared fixtures."""
import sys

import pytest


@pytest.fixture(autouse=True)
def _paddle_dynamic_mode_restored(request):
    """A paddle-marked test may switch PaddlePaddle to static mode (to run a legacy program);
    the tests after it in the process, some of which use its eager autograd, get PaddlePaddle's
    default dynamic mode back."""
    yield
    paddle = sys.modules.get("paddle")
    if paddle is not None and request.node.get_closest_marker("paddle") and not paddle.in_dynamic_mode():
        paddle.disable_static()


@pytest.fixture
def fake_cupy(monkeypatch):
    """The cupy stand-in (tests/fake_cupy) installed as `cupy` and `cupyx` for this test
    (tests/standin.py); gone again when the test ends."""
    import standin
    return standin.install(monkeypatch)
