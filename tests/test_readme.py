"""The README's copy-paste commands run as written, and the docs' claims that can be checked are
true (issue 42).

Every line of the README that starts with ``.venv/bin/cascade`` is a command a new user can
paste after ``make install`` without a GPU, a server or a finished run; each one is run here
(``/tmp/...`` outputs redirected to the test's directory) and must succeed, or exit with the code
its comment states (``# ... exits 2 here: ...``).
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PREFIX = ".venv/bin/cascade "


def readme_commands() -> list[tuple[str, int]]:
    """Each ``.venv/bin/cascade`` line: the command and the exit code its comment states (0)."""
    lines = (ROOT / "README.md").read_text().splitlines()
    commands = []
    for line in lines:
        if line.startswith(PREFIX):
            command, _, comment = line.partition("  #")
            stated = re.search(r"\bexits (\d+)\b", comment)
            commands.append((command.strip(), int(stated.group(1)) if stated else 0))
    return commands


def test_the_readme_has_local_commands():
    commands = [command for command, _ in readme_commands()]
    assert len(commands) >= 3
    assert any(" score " in c for c in commands) and any(" --dry-run" in c for c in commands)


@pytest.mark.parametrize("command, code", readme_commands(), ids=[c for c, _ in readme_commands()])
def test_readme_command_runs(command, code, tmp_path):
    words = [word.replace("/tmp/", f"{tmp_path}/") for word in shlex.split(command)[1:]]
    env = {**os.environ, "COLUMNS": "160"}
    result = subprocess.run(
        [sys.executable, "-m", "cascade_rl.cli", *words], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == code, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    assert "Traceback" not in result.stderr
    outputs = [Path(w) for w in words if w.startswith(str(tmp_path))]
    assert code or all(path.exists() for path in outputs), outputs


def test_the_quick_start_says_where_the_command_is_before_it_writes_it_bare():
    """After `make`, `cascade` is in .venv/bin, not on PATH: the Quick start used it bare."""
    text = (ROOT / "README.md").read_text()
    bare = re.search(r"^(make [^\n]*&& )?cascade ", text, flags=re.MULTILINE)
    said = text.find("`make` installs the `cascade` command into `.venv/bin/`")
    assert 0 <= said < bare.start(), "the README writes `cascade ...` before saying where it is"
    quick_start = text[text.index("## Quick start") :].split("```bash\n", 1)[1].split("```", 1)[0]
    runs = [line for line in quick_start.splitlines() if "cascade " in line.split("#")[0]]
    assert runs and all(".venv/bin/cascade " in line for line in runs), runs


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
        known = {name for param in command.params for name in getattr(param, "opts", [])} | {"--help"}
        flags = [word.strip("[]").split("=")[0] for word in rest if word.strip("[").startswith("--")]
        unknown = [flag for flag in flags if flag not in known]
        assert not unknown, f"cascade {' '.join(words)}: no such option {unknown}"


# ----------------------------------------------------------------------------- the docs' checkable claims
def test_the_recipes_table_says_what_each_shipped_recipe_runs():
    """docs/recipes.md once described smollm2-135m.yaml as "IF-RL then Math RL, LoRA over bfloat16
    weights" (it is SFT -> IF-RL -> Code RL, full fine-tuning in float32)."""
    from cascade_rl.recipe import load_recipe

    table = (ROOT / "docs" / "recipes.md").read_text().split("## Shipped recipes")[1].split("\n## ")[0]
    rows = {match[0]: match[1] for match in re.findall(r"^\| `recipes/([\w.-]+)` \| (.*) \|$", table, re.MULTILINE)}
    assert set(rows) == {path.name for path in (ROOT / "recipes").glob("*.yaml")}
    for name, row in rows.items():
        recipe = load_recipe(ROOT / "recipes" / name)
        stages = [stage.name for stage in recipe.stages]
        if len(stages) <= 4 and recipe.world is None and recipe.stages[0].kind != "eval":  # a real model's recipe
            assert " -> ".join(STAGE_WORDS.get(s, s) for s in stages) in row, (name, stages, row)
        uses_lora = any(getattr(stage, "lora", None) for stage in recipe.stages)
        assert ("LoRA" in row) == uses_lora, (name, row)
        if recipe.model is not None and recipe.model.dtype == "float32":
            assert "float32" in row, (name, row)


STAGE_WORDS = {"sft": "SFT", "ifrl": "IF-RL", "code": "Code RL", "math": "Math RL", "joint": "joint RL"}


def test_evaluation_docs_describe_every_benchmark_field():
    from cascade_rl.recipe import Benchmark

    text = (ROOT / "docs" / "evaluation.md").read_text()
    section = text.split("## Benchmark fields")[1].split("\n## ")[0]
    cells = re.findall(r"^\| (.*?) \|", section, re.MULTILINE)
    documented = {name for cell in cells for name in re.findall(r"`(\w+)`", re.sub(r"\(.*?\)", "", cell))}
    assert documented == set(Benchmark.model_fields), set(Benchmark.model_fields) ^ documented


def test_the_recipes_docs_list_every_reward_domains_options():
    """Each domain's options are declared once (rewards/registry.py); the docs list the same."""
    from cascade_rl.rewards.registry import REGISTRY

    text = (ROOT / "docs" / "recipes.md").read_text()
    section = text.split("### Reward options")[1].split("\n## ")[0]
    rows = dict(re.findall(r"^\| `(\w+)` \| (.*) \|$", section, re.MULTILINE))
    assert set(rows) == set(REGISTRY)
    for name, domain in REGISTRY.items():
        assert set(re.findall(r"`(\w+)`", rows[name])) == set(domain.options), name


def test_evaluation_is_not_said_to_use_transformers_generate():
    """`cascade eval --help` and docs/evaluation.md said evaluation samples with transformers'
    generate; it samples with vLLM where it is installed, else the project's loop."""
    from typer.testing import CliRunner

    from cascade_rl.cli import app

    help_text = " ".join(CliRunner().invoke(app, ["eval", "--help"], env={"COLUMNS": "200"}).output.split())
    assert "transformers generate" not in help_text and "vLLM where it is installed" in help_text
    docs = (ROOT / "docs" / "evaluation.md").read_text()
    assert "transformers generate" not in docs and "(transformers model, llm/decode.py loop)" not in docs
    assert "transformers generate" not in (ROOT / "recipes" / "eval-paper.yaml").read_text()
