"""Evaluating models and runs (SPEC section 9): ``cascade eval`` (a checkpoint or a served model
on a recipe's benchmarks), ``cascade report`` (a run's report rebuilt), ``cascade compare``
(runs side by side) and ``cascade elo`` (Codeforces Elo from simulated participation, appendix E).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from cascade_rl.cli.common import EXIT_PROBLEMS, fail, note, say, split_format, stdout


def evaluate(
    model: str | None = typer.Argument(
        None, help="Local checkpoint directory, or http://HOST:PORT/v1#MODEL (an OpenAI-compatible server)."
    ),
    recipe: Path | None = typer.Option(
        None,
        "--recipe",
        "-r",
        exists=True,
        dir_okay=False,
        help="Recipe whose eval.benchmarks to run (an evaluation-only recipe needs no stages).",
    ),
    generator: str | None = typer.Option(
        None, "--generator", "-g", help="Instead of MODEL: http://HOST:PORT/v1#MODEL (vLLM, SGLang, transformers)."
    ),
    benchmark: list[str] = typer.Option(
        [],
        "--benchmark",
        "-b",
        help="A benchmark of the recipe by NAME, or NAME=FILE[:FORMAT[,KEY=VALUE...]] for a file (FORMAT and its "
        "options: as `cascade data convert`, e.g. gsm8k or mbpp,split=test; without one the rows carry `domain`); "
        "repeatable [default: every benchmark of the recipe].",
    ),
    limit: int | None = typer.Option(None, "--limit", min=1, help="Evaluate at most N prompts of each benchmark."),
    max_new_tokens: int | None = typer.Option(
        None, "--max-new-tokens", min=1, help="Generation budget per sample [default: the benchmark's; 65536]."
    ),
    k: int | None = typer.Option(None, "-k", min=1, help="Samples per prompt [default: the benchmark's; 4]."),
    temperature: float | None = typer.Option(
        None, "--temperature", min=0.0, help="Sampling temperature [default: the benchmark's; 0.6]."
    ),
    top_p: float | None = typer.Option(None, "--top-p", min=0.0, max=1.0, help="Nucleus sampling [default: 0.95]."),
    mode: str | None = typer.Option(None, "--mode", help="Thinking mode of the prompts: think or no_think."),
    batch_size: int | None = typer.Option(
        None, "--batch-size", min=1, help="Prompts generated together [default: the recipe's eval.batch_size; 64]."
    ),
    out: Path = typer.Option(Path("eval-out"), "--out", help="Where eval.json and the samples go."),
    judge: str | None = typer.Option(
        None, "--judge", help="Judge of arena benchmarks (overrides theirs): http://HOST:PORT/v1#MODEL or a directory."
    ),
    reward_model: str | None = typer.Option(
        None, "--reward-model", help="Reward model (directory or server) for arena benchmarks without a judge."
    ),
    concurrency: int | None = typer.Option(
        None,
        "--concurrency",
        min=1,
        help="Requests in flight to a server [default: the recipe's eval.max_concurrency].",
    ),
    timeout: float = typer.Option(3600.0, "--timeout", min=1.0, help="Seconds one server request may take."),
    run: Path | None = typer.Option(
        None,
        "--run",
        help="Run directory for ${run} / ${world} in benchmark paths [default: the recipe's output_dir or runs/NAME].",
    ),
) -> None:
    """Evaluate a model on benchmarks: avg@k, pass@k, win rates, with their errors.

    The benchmarks are a recipe's (--recipe, all or those named with -b NAME) or files named with
    -b NAME=FILE[:FORMAT]; --limit, --max-new-tokens, -k, --temperature, --top-p and --mode
    override every chosen benchmark's own setting (docs/evaluation.md lists them all). The model is
    a local checkpoint (sampled with vLLM where it is installed, else the project's sampling loop)
    or an OpenAI-compatible server. An interrupted evaluation into the same --out resumes where it
    stopped; with -b, the other results already in --out's eval.json are kept.
    """
    import logging

    from cascade_rl.eval.benchmarks import EvalSettings
    from cascade_rl.eval.benchmarks import evaluate as run_benchmarks
    from cascade_rl.llm.base import GenerationError
    from cascade_rl.recipe import run_variables

    target = _one_model(model, generator)
    parsed = _recipe(recipe, model)
    overrides = {"limit": limit, "max_new_tokens": max_new_tokens, "k": k, "temperature": temperature}
    overrides.update(top_p=top_p, mode=mode)
    chosen = _overridden(_benchmarks(parsed, benchmark), overrides)
    variables = run_variables(run or parsed.run_dir)
    _check(chosen, variables, judge)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parsed, engine = _settled(parsed, model)
    settings = EvalSettings(
        batch_size=batch_size or parsed.eval.batch_size,
        max_concurrency=concurrency or parsed.eval.max_concurrency,
        timeout=timeout,
        workers=parsed.runtime.reward_workers,
        seed=parsed.seed,
        dtype=parsed.model.sampling_dtype,
        engine=engine,
    )
    earlier = _earlier_results(out / "eval.json") if benchmark else {}
    try:
        results = run_benchmarks(
            target, chosen, out, variables=variables, reward_model=reward_model, judge=judge, settings=settings
        )
    except (ValueError, FileNotFoundError) as error:
        raise fail(error) from None
    except GenerationError as error:
        raise fail(f"generation failed: {error}", EXIT_PROBLEMS) from None
    kept = {name: result for name, result in earlier.items() if name not in results}
    if kept:
        (out / "eval.json").write_text(json.dumps({**kept, **results}, indent=1))
        note(f"kept the earlier results in {out / 'eval.json'} of: {', '.join(kept)}")
    stdout.print(eval_table(results, f"{target} -> {out / 'eval.json'}"))


def _earlier_results(path: Path) -> dict[str, Any]:
    """The results an eval.json already holds (none when it is missing or not a results file)."""
    try:
        earlier = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return earlier if isinstance(earlier, dict) else {}


def _one_model(model: str | None, generator: str | None) -> str:
    if (model is None) == (generator is None):
        raise fail("give the model to evaluate: MODEL_DIR or --generator http://HOST:PORT/v1#MODEL")
    return model if model is not None else generator  # type: ignore[return-value]


def _settled(recipe, model: str | None):
    """The recipe with its ``auto`` sampling settings decided for a local checkpoint (said once),
    and the engine that samples it; a served model samples on its server."""
    if model is None or model.startswith(("http://", "https://", "openai:")):
        return recipe, "transformers"  # unused: a server samples on its own
    from cascade_rl.recipe import RecipeError
    from cascade_rl.train import machine

    try:
        decided = machine.decide(recipe, Path(model))
    except RecipeError as error:
        raise fail(error) from None
    say(machine.summary(decided))
    settled = machine.apply(recipe, decided)
    return settled, machine.local_engine(settled.runtime)


def _recipe(path: Path | None, model: str | None):
    """The recipe of --recipe (an evaluation-only one names no model: the evaluated one stands in
    for its settings), or an empty one for benchmarks given as files."""
    from cascade_rl.recipe import ModelSpec, RecipeError, load_recipe, parse_recipe

    try:
        recipe = load_recipe(path) if path is not None else parse_recipe({"name": "eval"})
    except RecipeError as error:
        raise fail(error) from None
    if recipe.model is None:
        recipe = recipe.model_copy(update={"model": ModelSpec(path=model or "served")})
    return recipe


def _benchmarks(recipe, specs: list[str]) -> list:
    """The benchmarks ``-b`` names: NAME of the recipe's, or NAME=FILE[:FORMAT]; every benchmark
    of the recipe when none is named. An unknown name fails naming the recipe's."""
    from cascade_rl.recipe import Benchmark

    known = {b.name: b for b in recipe.eval.benchmarks}
    if not specs:
        if not known:
            raise fail("name a benchmark: -b NAME=FILE[:FORMAT], or --recipe with eval.benchmarks")
        return list(known.values())
    chosen = []
    for spec in specs:
        name, sep, where = (part.strip() for part in spec.partition("="))
        if sep:
            path, fmt, options = split_format(where, "--benchmark")
            given = {"name": name, "data": str(path.resolve()), "format": fmt, "format_options": options}
            chosen.append(_validated(Benchmark, given, spec))
        elif name in known:
            chosen.append(known[name])
        else:
            names = ", ".join(known) or "none (give NAME=FILE[:FORMAT])"
            raise fail(f"--benchmark {name}: not a benchmark of the recipe; it has: {names}")
    return chosen


def _overridden(benchmarks: list, overrides: dict[str, Any]) -> list:
    """Each benchmark with the settings given on the command line (validated as the recipe's)."""
    given = {key: value for key, value in overrides.items() if value is not None}
    if not given:
        return benchmarks
    from cascade_rl.recipe import Benchmark

    flags = " ".join(f"--{key.replace('_', '-')} {value}" for key, value in given.items())
    return [_validated(Benchmark, {**b.model_dump(), **given}, flags) for b in benchmarks]


def _validated(model: type, data: dict[str, Any], given: str):
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as error:
        problem = error.errors()[0]
        where = ".".join(str(part) for part in problem["loc"])
        raise fail(f"{given}: {where + ': ' if where else ''}{problem['msg'].removeprefix('Value error, ')}") from None


def _check(benchmarks: list, variables: dict[str, str], judge: str | None) -> None:
    """What the run checks of its benchmarks (files, formats, judges), before a model loads."""
    from cascade_rl.recipe import RecipeError
    from cascade_rl.train.preflight import check_benchmarks

    try:
        check_benchmarks(benchmarks, variables, judge)
    except RecipeError as error:
        raise fail(error) from None


def eval_table(results: dict[str, dict], title: str) -> Table:
    """Headline value, its standard error over prompts, and the extra numbers of each benchmark."""
    table = Table(title=title)
    for column in ("benchmark", "metric", "k", "prompts", "value", "± s.e.", "more"):
        table.add_column(column, justify="left" if column in ("benchmark", "metric", "more") else "right")
    for name, result in results.items():
        extra = dict(result.get("extra") or {})
        stderr = extra.pop("stderr", None)
        value = "-" if result["value"] is None else f"{result['value']:.1f}"
        more = ", ".join(f"{key} {number:.1f}" for key, number in extra.items() if key not in ("mean_reward", "pass@k"))
        stderr_text = "-" if stderr is None else f"{stderr:.1f}"
        table.add_row(name, result["metric"], str(result["k"]), str(result["prompts"]), value, stderr_text, more)
    return table


def report(
    run_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="A run directory (runs/NAME)."),
) -> None:
    """Rebuild and print a run's report (report.md, report.json, plots); a directory that is not
    a run is refused and nothing is written into it."""
    from cascade_rl.eval.report import NotARunError, build_report, print_summary

    try:
        path = build_report(run_dir)
    except NotARunError as error:
        raise fail(error) from None
    print_summary(json.loads(path.with_suffix(".json").read_text()))
    say(f"report: {path}")


def compare(
    runs: list[Path] = typer.Argument(..., help="Two or more run directories (runs/NAME) of finished recipes."),
    out: Path | None = typer.Option(
        None,
        "--out",
        help="Where to write compare.md / .json / .png (default: runs/compare-A-vs-B beside the first run).",
    ),
    partial: bool = typer.Option(False, "--partial", help="Also compare runs that have not finished every stage."),
) -> None:
    """Compare runs side by side: final values, gains over SFT, largest falls and cost.

    Each difference comes with its standard error paired over prompts (e.g. recipes/tiny.yaml
    against recipes/tiny-joint.yaml).
    """
    from cascade_rl.eval.compare import CompareError, default_output, markdown, write_comparison
    from cascade_rl.eval.compare import compare as compare_runs

    try:
        comparison = compare_runs(runs, partial=partial)
    except (CompareError, ValueError) as error:
        raise fail(error) from None
    for line in comparison.notes():
        note(line)
    path = write_comparison(comparison, out or default_output(runs))
    print(markdown(comparison))
    say(f"comparison: {path}")


def elo(
    contests: Path = typer.Argument(..., help="Contest file (YAML/JSON): problems, standings, style."),
    samples: Path = typer.Argument(..., help="The model's samples (JSONL): problem id and correct, one per sample."),
    rank_equation: str = typer.Option(
        "as_written", help="as_written (appendix E) or codeforces (Codeforces' seed, 1 + the sum)."
    ),
    min_points_fraction: float = typer.Option(
        0.0, min=0.0, max=1.0, help="Floor on a solved problem's points (Codeforces: 0.3; appendix E: none)."
    ),
    output: Path | None = typer.Option(None, "--json", help="Also write the estimate as JSON."),
) -> None:
    """Codeforces Elo from simulated contests (appendix E): per contest and the mean."""
    from cascade_rl.eval.elo import ContestFileError, codeforces_elo, load_contests, load_samples

    if rank_equation not in ("as_written", "codeforces"):
        raise fail(f"--rank-equation must be as_written or codeforces, got {rank_equation!r}")
    try:
        loaded = load_contests(contests)
        results = load_samples(samples, loaded, contests)
    except ContestFileError as error:
        raise fail(error) from None
    estimate = codeforces_elo(results, rank_equation=rank_equation, min_points_fraction=min_points_fraction)
    stdout.print(_elo_table(results, estimate, rank_equation, min_points_fraction))
    if output is not None:
        record = {"rank_equation": rank_equation, "min_points_fraction": min_points_fraction}
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(_elo_record(results, estimate, record), indent=2) + "\n")


def _elo_table(results: list, estimate: Any, rank_equation: str, min_points_fraction: float) -> Table:
    departures = [f"rank equation {rank_equation}"] if rank_equation != "as_written" else []
    departures += [f"points floor {min_points_fraction:g}"] if min_points_fraction else []
    table = Table(title=f"Codeforces Elo (appendix E{'; ' + ', '.join(departures) if departures else ''})")
    for column in ("contest", "style", "solved", "result", "samples", "rank m", "humans n", "rating"):
        table.add_column(column, justify="left" if column in ("contest", "style") else "right")
    for result, performance in zip(results, estimate.contests):
        standing = performance.standing
        score = f"{standing.points:g} pts" if performance.style == "regular" else f"{standing.penalty_minutes:g} min"
        table.add_row(
            performance.name,
            performance.style,
            f"{standing.solved}/{len(result.contest.problems)}",
            score,
            "/".join(str(n) for n in sorted(set(result.attempts))),
            f"{performance.rank:g}",
            str(performance.contestants),
            f"{performance.rating:.1f}",
        )
    table.add_row("mean", "", "", "", "", "", "", f"[bold]{estimate.elo:.1f}[/bold]")
    return table


def _elo_record(results: list, estimate: Any, settings: dict[str, Any]) -> dict[str, Any]:
    contests = [
        {
            "name": p.name,
            "style": p.style,
            "solved": p.standing.solved,
            "points": p.standing.points,
            "penalty_minutes": p.standing.penalty_minutes,
            "rank": p.rank,
            "contestants": p.contestants,
            "rating": p.rating,
            "correct": list(r.correct),
            "samples": list(r.attempts),
        }
        for p, r in zip(estimate.contests, results)
    ]
    return {"elo": estimate.elo, **settings, "contests": contests}
