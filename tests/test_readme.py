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


def readme_cascade_invocations() -> list[list[str]]:
    """Every ``cascade ...`` invocation in the README's code blocks (``\\``-continued lines
    joined), as words after ``cascade``."""
    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    invocations = []
    for line in text.splitlines():
        line = line.split("  #")[0].strip()
        for marker in ("-m cascade_rl.cli ", ".venv/bin/cascade ", "cascade "):
            if line.startswith(marker) or f" {marker}" in line and marker != "cascade ":
                invocations.append(shlex.split(line.split(marker, 1)[1]))
                break
    return invocations


def test_readme_commands_use_flags_that_exist():
    """Each ``--flag`` the README shows exists on the command it is given to (the SWE example
    once showed ``cascade swe evaluate ... --out``; the flag is ``--output``)."""
    import typer

    from cascade_rl.cli import app

    root = typer.main.get_command(app)
    invocations = readme_cascade_invocations()
    assert any(words[:2] == ["swe", "evaluate"] for words in invocations)
    for words in invocations:
        command, rest = root, list(words)
        while hasattr(command, "commands") and rest and rest[0] in command.commands:
            command = command.commands[rest.pop(0)]
        if hasattr(command, "commands"):
            continue  # a synopsis such as `cascade swe localize|repair|...`
        known = {name for param in command.params for name in getattr(param, "opts", [])}
        flags = [word.strip("[]").split("=")[0] for word in rest if word.strip("[").startswith("--")]
        unknown = [flag for flag in flags if flag not in known]
        assert not unknown, f"cascade {' '.join(words)}: no such option {unknown}"
