"""Shared fixtures."""
import pytest


@pytest.fixture
def fake_cupy(monkeypatch):
    """The cupy stand-in (tests/fake_cupy) installed as `cupy` and `cupyx` for this test
    (tests/standin.py); gone again when the test ends."""
    import standin
    return standin.install(monkeypatch)
