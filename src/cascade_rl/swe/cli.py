"""``cascade swe ...``: the Agentless SWE pipeline from the command line (SPEC section 7).

    cascade swe localize   --instances I.jsonl --checkout owner/repo=PATH   recall@{1,3,5,10}
    cascade swe repair     ... --generator SPEC                              candidate patches
    cascade swe evaluate   ... --generator SPEC                              + validation, ranking
    cascade swe build-data --traces RUN/traces --instances I.jsonl ...       SFT / RL data

``--fixtures`` runs on the small repositories shipped with the package instead of
``--instances`` (their checkouts are created under the output directory). Generators are
given as for :func:`cascade_rl.llm.load_generator`: a local model directory,
``local:PATH``, or ``http://host:port/v1#MODEL`` for an OpenAI-compatible server.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import typer
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(
    help="The Agentless SWE pipeline: localise, repair, validate, rank; SWE data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console(stderr=True, soft_wrap=True)  # error lines keep file paths whole

INSTANCES = typer.Option(None, "--instances", "-i", help="SWE-bench instances, JSON list or JSONL.")
FIXTURES = typer.Option(False, "--fixtures", help="Use the fixture repositories shipped with cascade_rl.")
CHECKOUT = typer.Option([], "--checkout", help="REPO=PATH: local git checkout of a repository (repeatable).")
CHECKOUTS_DIR = typer.Option(None, "--checkouts-dir", help="Directory of checkouts named owner__name or name.")
GENERATOR = typer.Option(
    None, "--generator", "-g", help="Model: a local directory, local:PATH or http://HOST/v1#MODEL."
)


def _checkouts(pairs: list[str], directory: Path | None, rows: list[dict]) -> dict[str, Path]:
    checkouts: dict[str, Path] = {}
    for pair in pairs:
        repo, sep, path = pair.partition("=")
        if not sep or not repo or not path:
            raise typer.BadParameter(f"{pair!r}: expected REPO=PATH, e.g. django/django=~/src/django")
        checkouts[repo] = Path(path).expanduser()
    if directory is not None:
        for row in rows:
            repo = row.get("repo") if isinstance(row, dict) else None
            if not isinstance(repo, str) or repo in checkouts:
                continue
            for name in (repo.replace("/", "__"), repo.split("/")[-1]):
                if (directory / name).is_dir():
                    checkouts[repo] = directory / name
                    break
    return checkouts


def _inputs(
    instances: Path | None, fixtures: bool, checkout: list[str], checkouts_dir: Path | None, output: Path
) -> tuple[list[dict], dict[str, Path], list[tuple[str, str]]]:
    """Instance rows, checkouts, and unreadable lines of the instances file."""
    from cascade_rl.swe.fixtures import FIXTURES as NAMES
    from cascade_rl.swe.fixtures import materialize
    from cascade_rl.swe.pipeline import load_instances

    if fixtures == (instances is not None):
        raise typer.BadParameter("give exactly one of --instances FILE and --fixtures")
    if fixtures:
        root = output / "fixture-checkouts"
        shutil.rmtree(root, ignore_errors=True)
        made = [materialize(name, root / name) for name in NAMES]
        return [row for _, row in made], {row["repo"]: path for path, row in made}, []
    assert instances is not None
    if not instances.is_file():
        raise typer.BadParameter(f"instances file {instances} does not exist")
    rows, bad = load_instances(instances)
    return rows, _checkouts(checkout, checkouts_dir, rows), bad


def _generator(spec: str | None, required: bool):
    if spec is None:
        if required:
            raise typer.BadParameter("this command needs --generator (a model to sample from)")
        return None
    from cascade_rl.llm import load_generator

    return load_generator(spec)


def _run(
    stages: str, instances, fixtures, checkout, checkouts_dir, output: Path, generator_spec, config, model_name: str
):
    from cascade_rl.swe.pipeline import run_pipeline

    rows, checkouts, unreadable = _inputs(instances, fixtures, checkout, checkouts_dir, output)
    generator = _generator(generator_spec, required=stages != "localize")
    with Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True
    ) as progress:
        task = progress.add_task("starting", total=None)

        def report_progress(instance_id: str, stage: str) -> None:
            progress.update(task, description=f"{instance_id}: {stage}")

        report = run_pipeline(
            rows,
            checkouts,
            output,
            generator=generator,
            config=config,
            stages=stages,
            model_name=model_name or generator_spec or "cascade_rl",
            progress=report_progress,
        )
    report.bad_instances[:0] = unreadable
    _print_recall(report.summary)
    return report


def _print_recall(summary: dict) -> None:
    recall = summary.get("recall") or {}
    if not recall:
        return
    table = Table(title="localisation recall@k")
    table.add_column("method")
    ks = sorted({k for values in recall.values() for k in values})
    for k in ks:
        table.add_column(f"@{k}", justify="right")
    for method, values in recall.items():
        table.add_row(method, *(f"{values[k]:.3f}" for k in ks))
    Console().print(table)


def _print_candidates(summary: dict) -> None:
    counts = summary.get("candidates") or {}
    if counts:
        table = Table(title="repair candidates")
        for status in counts:
            table.add_column(status, justify="right")
        table.add_row(*(str(v) for v in counts.values()))
        Console().print(table)


def _print_curves(summary: dict) -> None:
    curve = summary.get("curves") or {}
    ks = sorted({k for values in curve.values() for k in values})
    if not ks:
        return
    table = Table(title="resolved by the gold tests")
    table.add_column("metric")
    for k in ks:
        table.add_column(f"k={k}", justify="right")
    for metric, values in curve.items():
        table.add_row(metric, *(f"{values[k]:.3f}" if k in values else "-" for k in ks))
    Console().print(table)
    if "resolved" in summary:
        Console().print(f"the best@k predictions resolve {summary['resolved']:.3f} of the instances")


def _finish(report) -> None:
    console.print(f"wrote {len(report.traces)} trace(s) and report.json to {report.output_dir}")
    for name, problem in report.bad_instances:
        console.print(f"[red]skipped {name}[/red]: {problem}")
    if report.bad_instances:
        raise typer.Exit(1)


def _config(**values):
    from cascade_rl.swe.pipeline import PipelineConfig

    return PipelineConfig(**{k: v for k, v in values.items() if v is not None})


@app.command()
def localize(
    instances: Path | None = INSTANCES,
    fixtures: bool = FIXTURES,
    checkout: list[str] = CHECKOUT,
    checkouts_dir: Path | None = CHECKOUTS_DIR,
    generator: str | None = GENERATOR,
    output: Path = typer.Option(Path("runs/swe/localize"), "--output", "-o", help="Output directory."),
    rollouts: int = typer.Option(4, min=1, help="Generation rollouts aggregated by frequency (paper: 16)."),
    top_n: int = typer.Option(5, min=1, help="Files each rollout may list."),
    embedding_model: str | None = typer.Option(None, help="Local sentence-embedding model instead of BM25."),
    max_tokens: int = typer.Option(1024, min=1, help="Tokens per generated answer."),
) -> None:
    """Localise files (generation when --generator is given, retrieval, fusion); print recall@k."""
    config = _config(
        localization_rollouts=rollouts, localization_top_n=top_n, embedding_model=embedding_model, max_tokens=max_tokens
    )
    report = _run("localize", instances, fixtures, checkout, checkouts_dir, output, generator, config, "")
    _finish(report)


@app.command()
def repair(
    instances: Path | None = INSTANCES,
    fixtures: bool = FIXTURES,
    checkout: list[str] = CHECKOUT,
    checkouts_dir: Path | None = CHECKOUTS_DIR,
    generator: str | None = GENERATOR,
    output: Path = typer.Option(Path("runs/swe/repair"), "--output", "-o", help="Output directory."),
    samples: int = typer.Option(8, min=1, help="Repair samples per instance."),
    files: int = typer.Option(4, min=1, help="Top localised files shown to the model."),
    budget: int = typer.Option(16_000, min=1, help="Token budget of the files in the repair prompt."),
    rollouts: int = typer.Option(4, min=1, help="Localisation rollouts."),
    temperature: float = typer.Option(0.6, min=0.0, help="Sampling temperature."),
    max_tokens: int = typer.Option(4096, min=1, help="Tokens per generated answer."),
    model_name: str = typer.Option("", help="model_name_or_path written in predictions.jsonl."),
) -> None:
    """Localise and sample repairs; write traces and predictions (majority patch, no tests)."""
    config = _config(
        repair_samples=samples,
        repair_files=files,
        context_budget=budget,
        localization_rollouts=rollouts,
        temperature=temperature,
        max_tokens=max_tokens,
    )
    report = _run("repair", instances, fixtures, checkout, checkouts_dir, output, generator, config, model_name)
    _print_candidates(report.summary)
    _finish(report)


@app.command()
def evaluate(
    instances: Path | None = INSTANCES,
    fixtures: bool = FIXTURES,
    checkout: list[str] = CHECKOUT,
    checkouts_dir: Path | None = CHECKOUTS_DIR,
    generator: str | None = GENERATOR,
    output: Path = typer.Option(Path("runs/swe/evaluate"), "--output", "-o", help="Output directory."),
    samples: int = typer.Option(8, min=1, help="Repair samples per instance (k)."),
    files: int = typer.Option(4, min=1, help="Top localised files shown to the model."),
    budget: int = typer.Option(16_000, min=1, help="Token budget of the files in the repair prompt."),
    rollouts: int = typer.Option(4, min=1, help="Localisation rollouts."),
    reproduction_tests: int = typer.Option(10, min=0, help="Generated reproduction tests (paper: 10, eval 40)."),
    workers: int = typer.Option(2, min=1, help="Sandboxes running tests in parallel."),
    test_timeout: float = typer.Option(300.0, min=1.0, help="Seconds per test-suite run."),
    temperature: float = typer.Option(0.6, min=0.0, help="Sampling temperature."),
    max_tokens: int = typer.Option(4096, min=1, help="Tokens per generated answer."),
    model_name: str = typer.Option("", help="model_name_or_path written in predictions.jsonl."),
) -> None:
    """The whole pipeline: localise, repair, validate in the sandbox, rank (best@k prediction)."""
    config = _config(
        repair_samples=samples,
        repair_files=files,
        context_budget=budget,
        localization_rollouts=rollouts,
        reproduction_tests=reproduction_tests,
        workers=workers,
        test_time_s=test_timeout,
        temperature=temperature,
        max_tokens=max_tokens,
    )
    report = _run("evaluate", instances, fixtures, checkout, checkouts_dir, output, generator, config, model_name)
    _print_candidates(report.summary)
    _print_curves(report.summary)
    _finish(report)


@app.command("build-data")
def build_data(
    traces: Path = typer.Option(..., "--traces", help="The traces/ directory of a pipeline run."),
    instances: Path | None = INSTANCES,
    fixtures: bool = FIXTURES,
    checkout: list[str] = CHECKOUT,
    checkouts_dir: Path | None = CHECKOUTS_DIR,
    output: Path = typer.Option(Path("runs/swe/data"), "--output", "-o", help="Output directory."),
    threshold: float = typer.Option(0.5, help="Similarity a repair sample must exceed."),
    sft_min_good: int = typer.Option(4, min=1, help="Samples above the threshold for SFT (of --samples)."),
    samples: int = typer.Option(8, min=1, help="Repair samples considered per instance."),
    max_prompt_tokens: int = typer.Option(24_000, min=1, help="RL prompt limit l (16K -> 24K curriculum)."),
    min_prompt_tokens: int = typer.Option(8_000, min=0, help="RL prompts shorter than this are dropped."),
    max_files: int = typer.Option(5, min=1, help="Files in a mixed-localisation RL prompt."),
    tokenizer: str | None = typer.Option(None, help="Local tokenizer for exact token counts."),
    seed: int = typer.Option(0, help="Seed of the file shuffling."),
) -> None:
    """Build SWE SFT data (localisation, repair, test generation) and RL prompts from traces."""
    from cascade_rl.swe.data import DataConfig, tokenizer_counter
    from cascade_rl.swe.data import build_data as build
    from cascade_rl.swe.repair import approx_tokens

    if not traces.is_dir():
        raise typer.BadParameter(f"traces directory {traces} does not exist")
    rows, checkouts, _ = _inputs(instances, fixtures, checkout, checkouts_dir, output)
    loaded = [json.loads(path.read_text()) for path in sorted(traces.glob("*.json"))]
    config = DataConfig(
        similarity_threshold=threshold,
        sft_min_good=sft_min_good,
        samples_per_prompt=samples,
        max_prompt_tokens=max_prompt_tokens,
        min_prompt_tokens=min_prompt_tokens,
        max_files=max_files,
        seed=seed,
    )
    counter = tokenizer_counter(tokenizer) if tokenizer else approx_tokens
    report = build(loaded, rows, checkouts, output, config=config, count_tokens=counter)
    table = Table(title=f"SWE data from {len(loaded)} trace(s) -> {output}")
    table.add_column("kind")
    table.add_column("rows", justify="right")
    for name, count in sorted(report.counts.items()):
        table.add_row(name, str(count))
    Console().print(table)
    for instance_id, reason in report.dropped.items():
        console.print(f"dropped {instance_id}: {reason}")


if __name__ == "__main__":
    app()
