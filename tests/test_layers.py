"""The layer map of DESIGN.md is kept by the code (issue 20): ``lint-imports`` checks the
contracts of ``.importlinter`` (every import, including those inside functions), a broken rule
is reported naming both modules, and DESIGN.md's map is the contract's."""

import configparser
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CONFIG = ROOT / ".importlinter"
PACKAGE = ROOT / "src" / "cascade_rl"


def lint_imports(config: Path, *, cwd: Path, pythonpath: Path | None = None) -> subprocess.CompletedProcess:
    """``lint-imports`` (import-linter, a dev dependency) in a fresh interpreter."""
    env = {**os.environ, "COLUMNS": "200", "NO_COLOR": "1"}
    if pythonpath is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(pythonpath), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    command = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run(
        [sys.executable, "-c", command, "--no-cache", "--no-logo", str(config)],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def contract_layers() -> list[str]:
    parser = configparser.ConfigParser(inline_comment_prefixes=(";",))
    parser.read(CONFIG)
    return [line.strip() for line in parser["importlinter:contract:layers"]["layers"].splitlines() if line.strip()]


def test_the_code_keeps_every_contract():
    result = lint_imports(CONFIG, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def copy_of_the_package(tmp_path: Path) -> Path:
    source = tmp_path / "src"
    skipped = shutil.ignore_patterns("__pycache__", "fixtures", "problems")  # data, not code
    shutil.copytree(PACKAGE, source / "cascade_rl", ignore=skipped)
    return source


def test_an_upward_import_inside_a_function_fails_naming_both_modules(tmp_path):
    source = copy_of_the_package(tmp_path)
    scorer = source / "cascade_rl" / "rewards" / "base.py"
    upward = "\n\ndef _upward():\n    from cascade_rl.train import cascade  # noqa: F401\n"
    scorer.write_text(scorer.read_text() + upward)
    result = lint_imports(CONFIG, cwd=tmp_path, pythonpath=source)
    assert result.returncode != 0
    assert "cascade_rl.rewards is not allowed to import cascade_rl.train" in result.stdout, result.stdout
    assert "cascade_rl.rewards.base -> cascade_rl.train.cascade" in result.stdout, result.stdout


def test_a_file_circle_inside_a_package_fails_naming_both_files(tmp_path):
    source = copy_of_the_package(tmp_path)
    reader = source / "cascade_rl" / "eval" / "runs.py"
    circle = "\n\ndef _circle():\n    from cascade_rl.eval import report  # noqa: F401\n"
    reader.write_text(reader.read_text() + circle)
    result = lint_imports(CONFIG, cwd=tmp_path, pythonpath=source)
    assert result.returncode != 0
    assert "No cycles are allowed in cascade_rl.eval" in result.stdout, result.stdout
    assert re.search(r"\.(report -> \.runs|runs -> \.report)", result.stdout), result.stdout


def test_design_md_shows_the_contracts_layers():
    """DESIGN.md's map (the block after "## Layers") lists the contract's layers, top first."""
    text = (ROOT / "DESIGN.md").read_text()
    block = text.split("## Layers", 1)[1].split("```", 2)[1]
    shown = [re.split(r"\s{2,}", line.strip())[0] for line in block.splitlines() if line.strip()]
    assert shown == contract_layers()


def test_the_registry_names_only_reward_modules():
    """Registry entries are dotted strings, which import-linter cannot see: they stay in the
    rewards layer, so loading a scorer never imports a layer above it."""
    from cascade_rl.rewards.registry import REGISTRY

    targets = [
        getattr(domain, kind)
        for domain in REGISTRY.values()
        for kind in ("scorer", "batch_scorer", "combine", "preflight")
        if getattr(domain, kind)
    ]
    assert targets and all(target.startswith("cascade_rl.rewards.") for target in targets), targets
