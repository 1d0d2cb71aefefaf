"""Shared helpers for the SWE pipeline tests: materialised fixture checkouts and a scripted
generator at the ``Generator`` protocol boundary (deterministic candidates for unit tests)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cascade_rl.swe.fixtures import FIXTURES, materialize


class ScriptedGenerator:
    """Implements ``generate`` / ``agenerate`` of ``cascade_rl.llm.base.Generator`` by returning
    scripted responses, chosen by the kind of prompt (localisation, repair, reproduction test)
    and cycled to fill ``n``. Records every call."""

    KINDS = {"localization": "Repository Structure", "reproduction": "reproduce the issue",
             "repair": "*SEARCH/REPLACE* edits"}

    def __init__(self, **scripts: list[str]):
        self.scripts = scripts
        self.calls: list[tuple[str, int, dict]] = []

    def kind(self, messages: list[dict]) -> str:
        text = messages[-1]["content"]
        return next(kind for kind, marker in self.KINDS.items() if marker in text)

    def generate(self, messages, *, n=1, temperature=0.6, top_p=0.95, max_tokens=1024):
        kind = self.kind(messages)
        self.calls.append((kind, n, {"messages": messages, "temperature": temperature}))
        script = self.scripts.get(kind) or [""]
        return [script[i % len(script)] for i in range(n)]

    async def agenerate(self, messages, *, n=1, temperature=0.6, top_p=0.95, max_tokens=1024):
        return self.generate(messages, n=n, temperature=temperature, top_p=top_p, max_tokens=max_tokens)


def edit(path: str, search: str, replace: str) -> str:
    return f"```diff\n### {path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```\n"


def repair_answer(*edits: str) -> str:
    return "<think>found it</think>\n<solution>\n" + "".join(edits) + "</solution>"


def git_state(checkout: Path) -> tuple[str, str, str]:
    """What must never change in a user's checkout: HEAD, status, worktree list."""
    def run(*args):
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True,
                              text=True, check=True).stdout
    return run("rev-parse", "HEAD"), run("status", "--porcelain", "--ignored"), run("worktree", "list")


@pytest.fixture(scope="session")
def fixture_checkouts(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Every shipped fixture as a git checkout: name -> (path, instance with base_commit)."""
    root = tmp_path_factory.mktemp("swe-fixtures")
    return {name: materialize(name, root / name) for name in FIXTURES}
