"""Helpers of the SWE pipeline tests (imported by name: a scripted generator at the ``Generator``
protocol boundary, SEARCH/REPLACE answers, the shapes repository); their fixtures are in conftest.py."""

from __future__ import annotations

import subprocess
from pathlib import Path

from cascade_rl.llm.base import Sampling


class ScriptedGenerator:
    """Implements ``generate`` / ``agenerate`` of ``cascade_rl.llm.base.Generator`` by returning
    scripted responses, chosen by the kind of prompt (localisation, repair, reproduction test)
    and cycled to fill ``n``. A script is a list, or a dict {text in the prompt: list} to answer
    each instance differently. Records every call."""

    KINDS = {
        "localization": "Repository Structure",
        "reproduction": "reproduce the issue",
        "repair": "*SEARCH/REPLACE* edits",
    }

    def __init__(self, **scripts):
        self.scripts = scripts
        self.calls: list[tuple[str, int, dict]] = []

    def kind(self, messages: list[dict]) -> str:
        text = messages[-1]["content"]
        return next(kind for kind, marker in self.KINDS.items() if marker in text)

    def generate(self, messages, sampling=Sampling()):
        kind, n = self.kind(messages), sampling.n
        self.calls.append((kind, n, {"messages": messages, "temperature": sampling.temperature}))
        script = self.scripts.get(kind) or [""]
        if isinstance(script, dict):
            text = messages[-1]["content"]
            script = next((lines for key, lines in script.items() if key in text), [""])
        return [script[i % len(script)] for i in range(n)]

    async def agenerate(self, messages, sampling=Sampling()):
        return self.generate(messages, sampling)


def edit(path: str, search: str, replace: str) -> str:
    return f"```diff\n### {path}\n<<<<<<< SEARCH\n{search}=======\n{replace}>>>>>>> REPLACE\n```\n"


def repair_answer(*edits: str) -> str:
    return "<think>found it</think>\n<solution>\n" + "".join(edits) + "</solution>"


def git_state(checkout: Path) -> tuple[str, str, str]:
    """What must never change in a user's checkout: HEAD, status, worktree list."""

    def run(*args):
        return subprocess.run(["git", "-C", str(checkout), *args], capture_output=True, text=True, check=True).stdout

    return run("rev-parse", "HEAD"), run("status", "--porcelain", "--ignored"), run("worktree", "list")


# ---- one evaluated pipeline run shared by the pipeline, data and CLI tests -----------------

TEXTKIT_FIX = repair_answer(
    edit("textkit/words.py", '    return len(text.split(" "))\n', "    return len(text.split())\n")
)
TEXTKIT_NEAR = repair_answer(
    edit(
        "textkit/words.py",
        '    return len(text.split(" "))\n',
        '    return len([word for word in text.split(" ") if word])\n',
    )
)
INTERVALS_FIX = repair_answer(
    edit(
        "intervals/merge.py",
        "        if merged and interval.start < merged[-1].end:\n",
        "        if merged and interval.start <= merged[-1].end:\n",
    )
)
GARBAGE = "<think>no idea</think>Sorry, I cannot help with that."
UNFINISHED = "<think>let me think about this for a very long"
TEXTKIT_REPRO = """```python
from textkit.words import word_count

try:
    count = word_count("one  two\\nthree ")
except Exception:
    print("Other issues")
else:
    print("Issue resolved" if count == 3 else "Issue reproduced")
```"""
INTERVALS_REPRO = """```python
from intervals import Interval, merge

print("Issue resolved" if merge([Interval(1, 2), Interval(2, 3)]) == [Interval(1, 3)] else "Issue reproduced")
```"""


def pipeline_generator() -> ScriptedGenerator:
    return ScriptedGenerator(
        localization={
            "word_count": ["```\ntextkit/words.py\ntextkit/case.py\n```", "```\ntextkit/words.py\n```"],
            "merge()": ["```\nintervals/ops.py\nintervals/merge.py\n```"],
            "discount": ["```\ninventory/pricing.py\n```"],
        },
        repair={
            "word_count": [
                TEXTKIT_FIX,
                TEXTKIT_FIX,
                TEXTKIT_NEAR,
                TEXTKIT_FIX,
                GARBAGE,
                TEXTKIT_FIX,
                TEXTKIT_NEAR,
                UNFINISHED,
            ],
            "merge()": [GARBAGE, INTERVALS_FIX, GARBAGE, UNFINISHED],
            "discount": [GARBAGE, UNFINISHED, TEXTKIT_FIX],
        },
        reproduction={"word_count": [TEXTKIT_REPRO, "no test here"], "merge()": [INTERVALS_REPRO]},
    )


# ---- a repository of eight modules: room for more noise files than a mixed prompt takes ------

SHAPES_MODULES = ("area", "perimeter", "scale", "rotate", "translate", "bounds", "colour", "export")
SHAPES_ISSUE = (
    "rectangle_area() returns the perimeter\n\n"
    "`rectangle_area(2, 3)` returns 10 instead of 6: the area of a rectangle is width times height.\n"
)
SHAPES_BUG = "    return 2 * (width + height)\n"
SHAPES_FIX_LINE = "    return width * height\n"
SHAPES_FIX = repair_answer(edit("shapes/area.py", SHAPES_BUG, SHAPES_FIX_LINE))


def _shapes_module(name: str) -> str:
    """A module of a few small functions whose words differ from module to module."""
    functions = "".join(
        f"\n\ndef {name}_step_{i}(value, factor={i + 2}):\n"
        f'    """Apply {name} step {i} to a value: multiply, then offset by the step."""\n'
        f"    result = value * factor\n"
        f"    return result + {i}\n"
        for i in range(6)
    )
    return f'"""The {name} operations of the shapes package."""\n{functions}'


def shapes_files() -> dict[str, str]:
    files = {f"shapes/{name}.py": _shapes_module(name) for name in SHAPES_MODULES}
    files["shapes/area.py"] += f'\n\ndef rectangle_area(width, height):\n    """Area of a rectangle."""\n{SHAPES_BUG}'
    files["shapes/__init__.py"] = '"""Shapes."""\n'
    files["tests/test_area.py"] = "from shapes.area import rectangle_area\n\n\ndef test_area():\n"
    files["tests/test_area.py"] += "    assert rectangle_area(2, 3) == 6\n"
    return files


def make_repository(path: Path, files: dict[str, str]) -> str:
    """A git checkout of ``files`` at ``path``; returns its commit."""
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.com",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.com",
        "GIT_CONFIG_GLOBAL": "/dev/null",
        "PATH": "/usr/bin:/bin",
    }
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)

    def git(*args):
        return subprocess.run(["git", "-C", str(path), *args], capture_output=True, text=True, check=True, env=env)

    git("init", "-q", "-b", "main")
    git("add", "-A")
    git("commit", "-q", "-m", "base")
    return git("rev-parse", "HEAD").stdout.strip()
