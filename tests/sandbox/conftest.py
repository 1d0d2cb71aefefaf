"""Fixtures for the sandbox tests: a one-worker pool (so that consecutive programs share one
sandbox, the case where one program could spoil the next) and the bwrap requirement."""

import pytest

from cascade_rl import sandbox


@pytest.fixture
def bwrap_only():
    """Skip a test of an isolation property where bubblewrap does not work."""
    if not sandbox.available():
        pytest.skip("bubblewrap is not usable here (make system-deps)")


@pytest.fixture(scope="module")
def pool():
    with sandbox.SandboxPool(1) as one_worker:
        yield one_worker
