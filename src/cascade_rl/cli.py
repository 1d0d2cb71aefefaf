"""The `cascade` command: a thin layer that parses arguments and calls the library.

cascade run RECIPE        run a Cascade RL recipe (SFT -> RM -> RLHF -> IF-RL -> Math -> Code -> SWE)
cascade score IN.jsonl    score responses with the reward verifiers
cascade swe ...           the Agentless SWE pipeline (localise, repair, validate, rank, build data)
cascade tts ...           test-time scaling for competitive programming (IOI-style loop, judge)
cascade elo C S.jsonl     Codeforces Elo per contest and the mean (appendix E)
"""

from __future__ import annotations

import json
from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

app = typer.Typer(
    help="Cascade RL: cascaded, domain-wise RL post-training for reasoning models (Nemotron-Cascade).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True, soft_wrap=True)


def _mount_swe() -> None:
    from cascade_rl.swe.cli import app as swe_app

    app.add_typer(swe_app, name="swe")


_mount_swe()


def _mount_tts() -> None:
    from cascade_rl.tts.cli import app as tts_app
    from cascade_rl.tts.cli import elo_command

    app.add_typer(tts_app, name="tts")
    app.command("elo")(elo_command)


_mount_tts()


def _parse_options(pairs: list[str]) -> dict[str, dict]:
    """``domain.key=value`` pairs into ``{domain: {key: value}}`` (values parsed as JSON when
    they are JSON, else kept as strings)."""
    options: dict[str, dict] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        domain, dot, name = key.partition(".")
        if not sep or not dot:
            raise typer.BadParameter(f"{pair!r}: expected DOMAIN.KEY=VALUE, e.g. math.language_penalty=-1")
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            parsed = value
        options.setdefault(domain, {})[name] = parsed
    return options


@app.command()
def score(
    source: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="JSONL: domain, prompt?, response, reference fields."
    ),
    output: Path | None = typer.Option(
        None, "-o", "--output", help="Where to write the scored lines [default: IN.scored.jsonl]."
    ),
    workers: int = typer.Option(
        4, "--workers", "-w", min=1, help="Parallel scorers (code runs in a sandbox pool of this size)."
    ),
    option: list[str] = typer.Option(
        [], "--option", help="Scorer option DOMAIN.KEY=VALUE, e.g. math.language_penalty=-1 (repeatable)."
    ),
) -> None:
    """Score responses with the reward verifiers (math, ifeval, code, swe, preference, if_rm).

    Writes every line back with `reward` and `details` and prints a summary per domain. Bad lines
    are reported with their line number and get `reward: null`; the exit code is 1 if any.
    """
    from cascade_rl.scoring import score_file

    target = output or source.with_suffix(".scored.jsonl")
    report = score_file(source, target, workers=workers, options=_parse_options(option))
    table = Table(title=f"scored {report.total} lines -> {target}")
    for column in ("domain", "count", "mean reward", "errors", "timeouts", "lines/s"):
        table.add_column(column, justify="left" if column == "domain" else "right")
    for name, summary in sorted(report.domains.items()):
        table.add_row(
            name,
            str(summary.count),
            f"{summary.mean_reward:.3f}",
            str(summary.errors),
            str(summary.timeouts),
            f"{summary.lines_per_second:.1f}",
        )
    Console().print(table)
    for number, problem in report.bad_lines:
        console.print(f"[red]line {number}[/red]: {problem}")
    if report.bad_lines:
        console.print(f"[red]{len(report.bad_lines)} bad line(s)[/red] written with reward null")
        raise typer.Exit(1)


@app.command()
def run(
    recipe: Path = typer.Argument(..., help="Recipe YAML (see recipes/ and docs/recipes.md)."),
    out: Path | None = typer.Option(
        None, "--out", help="Run directory [default: the recipe's output_dir or runs/<name>]."
    ),
    resume: bool = typer.Option(
        False, "--resume", help="Finish an interrupted run: skip finished stages, redo half-written ones."
    ),
    only: str | None = typer.Option(None, "--only", help="Run just this stage (earlier stages must have finished)."),
    start_from: str | None = typer.Option(None, "--from", help="Redo this stage and every later one."),
    dry_run: bool = typer.Option(False, "--dry-run", help="Validate and print the plan; train nothing."),
    as_json: bool = typer.Option(False, "--json", help="With --dry-run: print the fully resolved recipe as JSON."),
) -> None:
    """Run a Cascade RL recipe: SFT -> reward model -> RLHF -> IF-RL -> Math RL -> Code RL -> SWE RL.

    Each stage starts from the previous stage's checkpoint and writes
    runs/<run>/<NN-stage>/{model/, metrics.jsonl, eval.json}; the run ends with report.md.
    """
    from cascade_rl.recipe import RecipeError, load_recipe

    try:
        parsed = load_recipe(recipe)
    except RecipeError as error:
        console.print(f"[red]invalid recipe[/red] {error}")
        raise typer.Exit(2) from None
    if dry_run:
        from cascade_rl.plan import describe_plan

        if as_json:
            print(json.dumps(parsed.model_dump(mode="json"), indent=2))
        else:
            Console().print(describe_plan(parsed, out))
        return
    import logging

    from cascade_rl.train.cascade import Cascade

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        report = Cascade(parsed, out, echo=lambda text: console.print(text)).run(
            resume=resume, only=only, start_from=start_from
        )
    except RecipeError as error:
        console.print(f"[red]error[/red] {error}")
        raise typer.Exit(2) from None
    from cascade_rl.eval.report import print_summary

    print_summary(json.loads(report.with_suffix(".json").read_text()))
    console.print(f"report: {report}")


@app.command("eval")
def evaluate(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Local checkpoint directory to evaluate."),
    recipe: Path = typer.Option(..., "--recipe", "-r", exists=True, help="Recipe whose eval.benchmarks to run."),
    benchmark: list[str] = typer.Option([], "--benchmark", "-b", help="Only these benchmarks (repeatable)."),
    out: Path = typer.Option(Path("eval-out"), "--out", help="Where eval.json and the samples go."),
    reward_model: Path | None = typer.Option(None, "--reward-model", help="Reward model for arena benchmarks."),
    run: Path | None = typer.Option(
        None,
        "--run",
        help="Run directory for ${run} / ${world} in benchmark paths "
        "[default: the recipe's output_dir or runs/<name>].",
    ),
) -> None:
    """Evaluate a checkpoint on a recipe's benchmarks (avg@k, pass@k; samples written beside eval.json)."""
    import logging

    from cascade_rl.eval.benchmarks import evaluate as run_benchmarks
    from cascade_rl.recipe import RecipeError, load_recipe, run_variables

    try:
        parsed = load_recipe(recipe)
    except RecipeError as error:
        console.print(f"[red]invalid recipe[/red] {error}")
        raise typer.Exit(2) from None
    known = {b.name: b for b in parsed.eval.benchmarks}
    unknown = [name for name in benchmark if name not in known]
    if unknown:
        console.print(
            f"[red]unknown benchmark(s)[/red] {', '.join(unknown)}; the recipe has: {', '.join(known) or 'none'}"
        )
        raise typer.Exit(2)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    chosen = [known[name] for name in benchmark] if benchmark else list(known.values())
    results = run_benchmarks(
        model,
        chosen,
        out,
        variables=run_variables(run or parsed.run_dir),
        reward_model=str(reward_model) if reward_model else None,
        batch_size=parsed.eval.batch_size,
        workers=parsed.runtime.reward_workers,
        seed=parsed.seed,
    )
    table = Table(title=f"{model} -> {out / 'eval.json'}")
    for column in ("benchmark", "metric", "k", "prompts", "value"):
        table.add_column(column, justify="left" if column in ("benchmark", "metric") else "right")
    for name, result in results.items():
        value = "-" if result["value"] is None else f"{result['value']:.1f}"
        table.add_row(name, result["metric"], str(result["k"]), str(result["prompts"]), value)
    Console().print(table)


@app.command()
def report(
    run_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="A run directory (runs/<run>)."),
) -> None:
    """Rebuild a run's report.md / report.json / plots from its stage directories and print it."""
    from cascade_rl.eval.report import build_report, print_summary

    path = build_report(run_dir)
    print_summary(json.loads(path.with_suffix(".json").read_text()))
    console.print(f"report: {path}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
