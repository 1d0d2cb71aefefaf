"""``cascade run RECIPE``: validate a recipe, print its plan (``--dry-run``) or run its stages
(SPEC sections 1-6; the engine is :class:`cascade_rl.train.cascade.Cascade`)."""

from __future__ import annotations

import json
from pathlib import Path

import typer

from cascade_rl.cli.common import EXIT_PROBLEMS, fail, say, stdout


def run(
    recipe: Path = typer.Argument(..., help="Recipe YAML (see recipes/ and docs/recipes.md)."),
    out: Path | None = typer.Option(
        None, "--out", help="Run directory [default: the recipe's output_dir or runs/NAME]."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Finish an interrupted run: skip finished stages, redo half-written ones."
    ),
    only: str | None = typer.Option(None, "--only", help="Run just this stage (earlier stages must have finished)."),
    start_from: str | None = typer.Option(None, "--from", help="Redo this stage and every later one."),
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Validate, print the plan and where each setting comes from; train nothing."
    ),
    as_json: bool = typer.Option(False, "--json", help="With --dry-run: print the fully resolved recipe as JSON."),
) -> None:
    """Run a recipe: SFT -> RM -> RLHF -> IF-RL -> Math -> Code -> SWE RL, or print its plan.

    Each stage starts from the previous stage's checkpoint and writes
    runs/NAME/NN-STAGE/ (model/, metrics.jsonl, eval.json); the run ends with report.md.
    """
    from cascade_rl.recipe import RecipeError, load_recipe

    try:
        parsed = load_recipe(recipe)
    except RecipeError as error:
        raise fail(error) from None
    if dry_run:
        if parsed.stages:
            print_plan(recipe, parsed, out, as_json=as_json)
        check_plan(parsed, out)
        return
    report = run_stages(parsed, out, resume=resume, only=only, start_from=start_from)
    if report is not None:
        from cascade_rl.eval.report import print_summary

        print_summary(json.loads(report.with_suffix(".json").read_text()))
        say(f"report: {report}")


def print_plan(path: Path, recipe, out: Path | None, *, as_json: bool) -> None:
    """The resolved recipe as JSON, or the plan and where each setting came from."""
    from cascade_rl.plan import describe_files, describe_plan, describe_sources
    from cascade_rl.recipe import merge_presets, read_recipe_file, run_variables

    if as_json:
        print(json.dumps(recipe.model_dump(mode="json"), indent=2))
        return
    written = read_recipe_file(path)
    stdout.print(describe_plan(recipe, out, merge_presets(written)))
    stdout.print(describe_files(recipe, run_variables(out or recipe.run_dir)), soft_wrap=True)
    for table in describe_sources(written, recipe):
        stdout.print(table)


def check_plan(recipe, out: Path | None) -> None:
    """What the run checks before any compute (:func:`cascade_rl.train.preflight.check_recipe`):
    the same refusal, message and exit code 2 as the run."""
    from cascade_rl.recipe import RecipeError, run_variables
    from cascade_rl.train.preflight import check_recipe

    try:
        check_recipe(recipe, run_variables(out or recipe.run_dir))
    except RecipeError as error:
        raise fail(error) from None
    say("dry run: the run would start (every check it makes before compute passed); nothing was trained")


def run_stages(recipe, out: Path | None, **where: str | bool | None) -> Path | None:
    """Run the recipe's stages (``where``: resume, only, start_from); the report's path on the
    main process, None on the others."""
    import logging

    from cascade_rl.recipe import RecipeError
    from cascade_rl.train import distributed
    from cascade_rl.train.cascade import Cascade
    from cascade_rl.train.rewards import VerifierFailure

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        report = Cascade(recipe, out, echo=say).run(**where)
    except RecipeError as error:
        raise fail(error) from None
    except distributed.MainProcessError as error:  # this process waited; the main one says why
        raise fail(f"process {distributed.rank()}: {error}", EXIT_PROBLEMS) from None
    except VerifierFailure as error:  # every process stops at the same step: the main one says why
        if distributed.is_main():
            raise fail(error, EXIT_PROBLEMS) from None
        raise typer.Exit(EXIT_PROBLEMS) from None
    return report if distributed.is_main() else None
