"""The environment of a test's child process (``cascade`` under torchrun, a resumed run): the
caller's, with tests/ on the path for the toy reward domains (``tiny_assets:...``) and the
caller's own ``PYTHONPATH`` kept after it, so a worktree's sources stay the ones under test."""

from __future__ import annotations

import os
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def child_environment(**extra: str) -> dict[str, str]:
    """``os.environ`` with tests/ first on ``PYTHONPATH``, one thread per process and a wide
    console (tables are not cut), then ``extra``."""
    paths = os.pathsep.join(filter(None, [str(TESTS), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": paths, "OMP_NUM_THREADS": "1", "COLUMNS": "200", **extra}
