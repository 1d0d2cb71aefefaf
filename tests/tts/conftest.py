"""Fixtures of the test-time-scaling tests (helpers in tts_helpers.py)."""

from __future__ import annotations

import pytest

from cascade_rl.tts.judge import Judge


@pytest.fixture(scope="module")
def judge():
    """A judge on two pooled sandboxes, shared by a test module."""
    with Judge(workers=2) as shared:
        yield shared
