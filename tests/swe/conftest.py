"""Fixtures of the SWE pipeline tests: materialised fixture checkouts and evaluated pipeline runs
(the helpers they use are in swe_assets.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from swe_assets import (
    GARBAGE,
    SHAPES_BUG,
    SHAPES_FIX,
    SHAPES_FIX_LINE,
    SHAPES_ISSUE,
    ScriptedGenerator,
    git_state,
    make_repository,
    pipeline_generator,
    shapes_files,
)

from cascade_rl.swe.fixtures import FIXTURES, materialize


@pytest.fixture(scope="session")
def fixture_checkouts(tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """Every shipped fixture as a git checkout: name -> (path, instance with base_commit)."""
    root = tmp_path_factory.mktemp("swe-fixtures")
    return {name: materialize(name, root / name) for name in FIXTURES}


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
