"""The README's copy-paste commands run as written.

Every line of the README that starts with ``.venv/bin/cascade`` is a command a new user can
paste after ``make install`` without a GPU, a server or a finished run; each one is run here
(``/tmp/...`` outputs redirected to the test's directory) and must succeed.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PREFIX = ".venv/bin/cascade "


def readme_commands() -> list[str]:
    lines = (ROOT / "README.md").read_text().splitlines()
    return [line.split("  #")[0].strip() for line in lines if line.startswith(PREFIX)]


def test_the_readme_has_local_commands():
    commands = readme_commands()
    assert len(commands) >= 3
    assert any(" score " in c for c in commands) and any(" --dry-run" in c for c in commands)


@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_runs(command, tmp_path):
    words = [word.replace("/tmp/", f"{tmp_path}/") for word in shlex.split(command)[1:]]
    env = {**os.environ, "COLUMNS": "160"}
    result = subprocess.run(
        [sys.executable, "-m", "cascade_rl.cli", *words], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    outputs = [Path(w) for w in words if w.startswith(str(tmp_path))]
    assert all(path.exists() for path in outputs), outputs
