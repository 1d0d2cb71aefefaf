"""The `cascade` command: a thin layer that parses arguments and calls the library.

cascade run RECIPE        run a Cascade RL recipe (SFT -> RM -> RLHF -> IF-RL -> Math -> Code -> SWE)
cascade score IN.jsonl    score responses with the reward verifiers
cascade swe ...           the Agentless SWE pipeline (localise, repair, validate, rank, build data)
cascade tts ...           test-time scaling for competitive programming (IOI-style loop, judge)
cascade elo C S.jsonl     Codeforces Elo per contest and the mean (appendix E)
cascade data ...          data curation: convert, dedup, decontaminate, check-disjoint, difficulty, offtopic
cascade serve ...         serve a reward model (vLLM's Pooling API) or a distillation teacher (prompt_logprobs)
cascade compare A B ...   runs side by side: final values, gains over SFT, largest falls, cost
cascade model import SRC  a GGUF file or Hugging Face directory -> plain checkpoint with tokenizer and template
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


def _mount_tts() -> None:
    from cascade_rl.tts.cli import app as tts_app
    from cascade_rl.tts.cli import elo_command

    app.add_typer(tts_app, name="tts")
    app.command("elo")(elo_command)


def _mount_data() -> None:
    from cascade_rl.data.cli import app as data_app

    app.add_typer(data_app, name="data")


def _mount_serve() -> None:
    from cascade_rl.serve.cli import app as serve_app

    app.add_typer(serve_app, name="serve")


model_app = typer.Typer(
    help="Bring a model in: GGUF file or Hugging Face directory -> plain checkpoint.", no_args_is_help=True
)


@model_app.command("import")
def model_import(
    source: Path = typer.Argument(..., help="A .gguf file, a directory holding one, or a Hugging Face directory."),
    out: Path = typer.Option(..., "--out", "-o", help="Checkpoint directory to write (safetensors + tokenizer)."),
    dtype: str = typer.Option("float32", "--dtype", help="Weights dtype: float32 or bfloat16."),
    force: bool = typer.Option(False, "--force", help="Replace whatever --out holds."),
) -> None:
    """Import a model as a plain safetensors checkpoint with its tokenizer and chat template.

    GGUF weights are de-quantised to float; the logits of the imported model are compared with
    the source's on a probe. Importing the same source again into the same --out does nothing.
    """
    from cascade_rl.llm.model_import import ModelImportError, import_model

    try:
        import_model(source, out, dtype=dtype, force=force, echo=lambda text: console.print(text, highlight=False))
    except ModelImportError as error:
        console.print(f"[red]error[/red] {error}", highlight=False)
        raise typer.Exit(2) from None


def _mount_model() -> None:
    app.add_typer(model_app, name="model")


def _mount_compare() -> None:
    from cascade_rl.eval.compare import compare_command

    app.command("compare")(compare_command)


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
    dry_run: bool = typer.Option(
        False, "--dry-run", help="Validate, print the plan and where each setting comes from; train nothing."
    ),
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
        from cascade_rl.plan import describe_plan, describe_sources
        from cascade_rl.recipe import read_recipe_file

        if as_json:
            print(json.dumps(parsed.model_dump(mode="json"), indent=2))
            return
        Console().print(describe_plan(parsed, out))
        for table in describe_sources(read_recipe_file(recipe), parsed):
            Console().print(table)
        return
    import logging

    from cascade_rl.train import distributed
    from cascade_rl.train.cascade import Cascade

    logging.basicConfig(level=logging.INFO, format="%(message)s")
    try:
        report = Cascade(parsed, out, echo=lambda text: console.print(text)).run(
            resume=resume, only=only, start_from=start_from
        )
    except RecipeError as error:
        console.print(f"[red]error[/red] {error}")
        raise typer.Exit(2) from None
    except distributed.MainProcessError as error:  # this process waited; the main one says why
        console.print(f"[red]error[/red] process {distributed.rank()}: {error}")
        raise typer.Exit(1) from None
    if not distributed.is_main():
        return
    from cascade_rl.eval.report import print_summary

    print_summary(json.loads(report.with_suffix(".json").read_text()))
    console.print(f"report: {report}")


@app.command("eval")
def evaluate(
    model: str | None = typer.Argument(
        None, help="Local checkpoint directory, or http://HOST:PORT/v1#MODEL (an OpenAI-compatible server)."
    ),
    recipe: Path = typer.Option(..., "--recipe", "-r", exists=True, help="Recipe whose eval.benchmarks to run."),
    generator: str | None = typer.Option(
        None, "--generator", "-g", help="Instead of MODEL: http://HOST:PORT/v1#MODEL (vLLM, SGLang, transformers)."
    ),
    benchmark: list[str] = typer.Option([], "--benchmark", "-b", help="Only these benchmarks (repeatable)."),
    out: Path = typer.Option(Path("eval-out"), "--out", help="Where eval.json and the samples go."),
    judge: str | None = typer.Option(
        None, "--judge", help="Judge of arena benchmarks (overrides theirs): http://HOST:PORT/v1#MODEL or a directory."
    ),
    reward_model: str | None = typer.Option(
        None, "--reward-model", help="Reward model (directory or server) for arena benchmarks without a judge."
    ),
    concurrency: int | None = typer.Option(
        None, "--concurrency", min=1, help="Requests in flight to a server [default: recipe eval.max_concurrency]."
    ),
    timeout: float = typer.Option(3600.0, "--timeout", min=1.0, help="Seconds one server request may take."),
    run: Path | None = typer.Option(
        None,
        "--run",
        help="Run directory for ${run} / ${world} in benchmark paths "
        "[default: the recipe's output_dir or runs/<name>].",
    ),
) -> None:
    """Evaluate a model on a recipe's benchmarks (avg@k, pass@k, win rates; samples written beside eval.json).

    The model is a local checkpoint (transformers generate) or an OpenAI-compatible server; an
    interrupted evaluation into the same --out resumes where it stopped.
    """
    import logging

    from cascade_rl.eval.benchmarks import evaluate as run_benchmarks
    from cascade_rl.llm.base import GenerationError
    from cascade_rl.recipe import RecipeError, load_recipe, run_variables

    if (model is None) == (generator is None):
        console.print("[red]error[/red] give the model to evaluate: MODEL_DIR or --generator http://HOST:PORT/v1#MODEL")
        raise typer.Exit(2)
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
    target = model if model is not None else generator
    try:
        results = run_benchmarks(
            target,
            chosen,
            out,
            variables=run_variables(run or parsed.run_dir),
            reward_model=reward_model,
            judge=judge,
            batch_size=parsed.eval.batch_size,
            max_concurrency=concurrency or parsed.eval.max_concurrency,
            timeout=timeout,
            workers=parsed.runtime.reward_workers,
            seed=parsed.seed,
            dtype=parsed.model.sampling_dtype,
        )
    except (ValueError, FileNotFoundError) as error:
        console.print(f"[red]error[/red] {error}")
        raise typer.Exit(2) from None
    except GenerationError as error:
        console.print(f"[red]generation failed[/red] {error}")
        raise typer.Exit(1) from None
    Console().print(_eval_table(results, f"{target} -> {out / 'eval.json'}"))


def _eval_table(results: dict[str, dict], title: str) -> Table:
    """Headline value, its standard error over prompts, and the extra numbers of each benchmark."""
    table = Table(title=title)
    for column in ("benchmark", "metric", "k", "prompts", "value", "± s.e.", "more"):
        table.add_column(column, justify="left" if column in ("benchmark", "metric", "more") else "right")
    for name, result in results.items():
        extra = dict(result.get("extra") or {})
        stderr = extra.pop("stderr", None)
        value = "-" if result["value"] is None else f"{result['value']:.1f}"
        more = ", ".join(f"{key} {number:.1f}" for key, number in extra.items() if key not in ("mean_reward", "pass@k"))
        table.add_row(
            name,
            result["metric"],
            str(result["k"]),
            str(result["prompts"]),
            value,
            "-" if stderr is None else f"{stderr:.1f}",
            more,
        )
    return table


@app.command()
def report(
    run_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="A run directory (runs/<run>)."),
) -> None:
    """Rebuild a run's report.md / report.json / plots from its stage directories and print it."""
    from cascade_rl.eval.report import build_report, print_summary

    path = build_report(run_dir)
    print_summary(json.loads(path.with_suffix(".json").read_text()))
    console.print(f"report: {path}")


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
    wait: float = typer.Option(
        60.0, "--wait", min=0.0, help="Seconds to wait for reward servers named in --option to answer."
    ),
    allow_errors: bool = typer.Option(
        False, "--allow-errors", help="Exit 0 even when a scorer could not score some lines (reward 0 written)."
    ),
) -> None:
    """Score responses with the reward verifiers (math, ifeval, code, swe, preference, if_rm).

    Writes every line back with `reward` and `details` and prints a summary per domain. Bad lines
    are reported with their line number and get `reward: null`; the exit code is 1 if any. Lines a
    scorer could not score (`details.error`: an unknown instruction id, a malformed reference, a
    failed sandbox or server) keep reward 0 and are summarised by error with their line numbers;
    the exit code is 1 if any, unless --allow-errors. Reward servers named in --option (a reward
    model, the SWE judge) must answer first (exit code 2).
    """
    from cascade_rl.rewards.registry import REGISTRY, PreflightError, preflight
    from cascade_rl.scoring import score_file

    target = output or source.with_suffix(".scored.jsonl")
    options = _parse_options(option)
    try:
        for name, values in options.items():
            if name in REGISTRY:
                preflight(name, values, timeout=wait)
    except PreflightError as error:
        from rich.markup import escape

        console.print(f"[red]error[/red]: {escape(str(error))}", highlight=False)
        raise typer.Exit(2) from None
    report = score_file(source, target, workers=workers, options=options)
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
    if report.errored:
        _print_scoring_errors(report.errored, allowed=allow_errors)
    if report.bad_lines:
        console.print(f"[red]{len(report.bad_lines)} bad line(s)[/red] written with reward null")
        raise typer.Exit(1)
    if report.errored and not allow_errors:
        raise typer.Exit(1)


def _print_scoring_errors(errored: dict[str, list[int]], *, allowed: bool, shown: int = 5) -> None:
    """`cascade score`'s summary of the lines a scorer could not score, most frequent error first."""
    from rich.markup import escape

    total = sum(len(lines) for lines in errored.values())
    outcome = "counted with reward 0 (--allow-errors)" if allowed else "written with reward 0"
    console.print(f"[red]{total} line(s) could not be scored[/red], {outcome}:", highlight=False)
    for error, lines in sorted(errored.items(), key=lambda item: (-len(item[1]), item[1][0])):
        more = f" (+{len(lines) - shown} more)" if len(lines) > shown else ""
        where = ", ".join(str(n) for n in lines[:shown]) + more
        console.print(f"  {len(lines)} x {escape(error)} -- line(s) {where}", highlight=False)


# Order of `cascade --help`: the cascade's own commands first, then the tools around it.
_mount_compare()
_mount_model()
_mount_tts()  # also `cascade elo`
_mount_data()
_mount_swe()
_mount_serve()


def main() -> None:
    app()


if __name__ == "__main__":
    main()
