"""Shared helpers for the SWE pipeline tests: materialised fixture checkouts and a scripted
generator at the ``Generator`` protocol boundary (deterministic candidates for unit tests)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from cascade_rl.llm.base import Sampling
from cascade_rl.swe.fixtures import FIXTURES, materialize


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


@pytest.fixture(scope="session")
def fixture_checkouts(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Every shipped fixture as a git checkout: name -> (path, instance with base_commit)."""
    root = tmp_path_factory.mktemp("swe-fixtures")
    return {name: materialize(name, root / name) for name in FIXTURES}


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


@pytest.fixture(scope="session")
def evaluated_run(fixture_checkouts, tmp_path_factory):
    """The whole pipeline (stages="evaluate") on the three fixtures plus three bad instances."""
    from cascade_rl.swe.pipeline import PipelineConfig, run_pipeline

    rows = [instance for _, instance in fixture_checkouts.values()]
    unknown_commit = dict(rows[0], instance_id="bad__unknown-commit", base_commit="f" * 40)
    no_checkout = dict(rows[0], instance_id="bad__no-checkout", repo="someone/elsewhere")
    missing_field = {"instance_id": "bad__missing-field", "repo": rows[0]["repo"]}
    rows = rows + [unknown_commit, no_checkout, missing_field]
    checkouts = {instance["repo"]: path for path, instance in fixture_checkouts.values()}
    states = {name: git_state(path) for name, (path, _) in fixture_checkouts.items()}
    generator = pipeline_generator()
    config = PipelineConfig(localization_rollouts=2, repair_samples=8, reproduction_tests=2, repair_files=2, workers=2)
    output = tmp_path_factory.mktemp("swe-run")
    report = run_pipeline(rows, checkouts, output, generator=generator, config=config, model_name="scripted")
    return {
        "report": report,
        "rows": rows,
        "checkouts": checkouts,
        "generator": generator,
        "states_before": states,
        "output": output,
    }


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


@pytest.fixture(scope="session")
def shapes_run(tmp_path_factory):
    """The shapes repository (8 modules), its instance, and a repair run whose samples make it an
    RL instance (1 of 8 samples fixes it, the others are not edits)."""
    from cascade_rl.rewards.swe_edits import unified_diff
    from cascade_rl.swe.pipeline import PipelineConfig, run_pipeline

    files = shapes_files()
    checkout = tmp_path_factory.mktemp("shapes") / "repo"
    commit = make_repository(checkout, files)
    fixed = files["shapes/area.py"].replace(SHAPES_BUG, SHAPES_FIX_LINE)
    patch = unified_diff({"shapes/area.py": files["shapes/area.py"]}, {"shapes/area.py": fixed})
    instance = {
        "instance_id": "shapes__shapes-1",
        "repo": "shapes/shapes",
        "base_commit": commit,
        "problem_statement": SHAPES_ISSUE,
        "patch": patch,
    }
    generator = ScriptedGenerator(
        localization=["```\nshapes/area.py\nshapes/perimeter.py\n```"], repair=[SHAPES_FIX] + [GARBAGE] * 7
    )
    config = PipelineConfig(localization_rollouts=1, repair_samples=8)
    output = tmp_path_factory.mktemp("shapes-run")
    report = run_pipeline(
        [instance], {"shapes/shapes": checkout}, output, generator=generator, config=config, stages="repair"
    )
    return {"traces": report.traces, "rows": [instance], "checkouts": {"shapes/shapes": checkout}, "output": output}
