"""``cascade swe``: the Agentless SWE pipeline from the command line (SPEC section 7; docs/swe.md).

    cascade swe localize   --instances I.jsonl --checkout owner/repo=PATH   recall@{1,3,5,10}
    cascade swe repair     ... --generator SPEC                              candidate patches
    cascade swe evaluate   ... --generator SPEC                              + validation, ranking
    cascade swe build-data --traces RUN/traces --instances I.jsonl ...       SFT data, RL set per context limit
    cascade swe headline RUN1.json RUN2.json ... [--best BEST.json]          pass@1 over runs from harness reports

``--fixtures`` runs on the small repositories shipped with the package instead of
``--instances`` (their checkouts are created under the output directory).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table

from cascade_rl.cli.common import (
    EXIT_PROBLEMS,
    GENERATOR_HELP,
    command_group,
    console,
    fail,
    open_generator,
    option_groups,
    parse_pairs,
    sampling_options,
    say,
    stdout,
)

app = command_group("The Agentless SWE pipeline: localise, repair, validate, rank; SWE data.")


# ---------------------------------------------------------------------------- option groups
@dataclass
class Instances:
    """The SWE-bench instances a command works on and where their repositories are checked out."""

    instances: Path | None = typer.Option(None, "--instances", "-i", help="SWE-bench instances, JSON list or JSONL.")
    fixtures: bool = typer.Option(False, "--fixtures", help="Use the fixture repositories shipped with cascade_rl.")
    checkout: list[str] = typer.Option(
        [], "--checkout", help="REPO=PATH: local git checkout of a repository (repeatable)."
    )
    checkouts_dir: Path | None = typer.Option(
        None, "--checkouts-dir", help="Directory of checkouts named owner__name or name."
    )

    def load(self, output: Path) -> tuple[list[dict], dict[str, Path], list[tuple[str, str]]]:
        """Instance rows, their checkouts, and the unreadable lines of the instances file."""
        from cascade_rl.swe.fixtures import FIXTURES, materialize
        from cascade_rl.swe.pipeline import load_instances

        if self.fixtures == (self.instances is not None):
            raise fail("give exactly one of --instances FILE and --fixtures")
        if self.fixtures:
            root = output / "fixture-checkouts"
            shutil.rmtree(root, ignore_errors=True)
            made = [materialize(name, root / name) for name in FIXTURES]
            return [row for _, row in made], {row["repo"]: path for path, row in made}, []
        assert self.instances is not None
        if not self.instances.is_file():
            raise fail(f"instances file {self.instances} does not exist")
        rows, bad = load_instances(self.instances)
        return rows, self.checkouts(rows), bad

    def checkouts(self, rows: list[dict]) -> dict[str, Path]:
        """Each repository's checkout: named by --checkout, else found in --checkouts-dir."""
        named = parse_pairs(self.checkout, "REPO=PATH, e.g. django/django=~/src/django", "--checkout")
        checkouts = {repo: Path(path).expanduser() for repo, path in named.items()}
        for row in rows if self.checkouts_dir is not None else []:
            repo = row.get("repo") if isinstance(row, dict) else None
            if not isinstance(repo, str) or repo in checkouts:
                continue
            for name in (repo.replace("/", "__"), repo.split("/")[-1]):
                if (self.checkouts_dir / name).is_dir():  # type: ignore[operator]
                    checkouts[repo] = self.checkouts_dir / name  # type: ignore[operator]
                    break
        return checkouts


@dataclass
class RepairOptions(sampling_options(4096, top_k=False)):
    """How repairs are sampled (``repair`` and ``evaluate``): the shared sampling flags, and the
    samples, files and rollouts of the pipeline."""

    samples: int = typer.Option(8, min=1, help="Repair samples per instance (k).")
    files: int = typer.Option(4, min=1, help="Top localised files shown to the model.")
    budget: int = typer.Option(16_000, min=1, help="Token budget of the files in the repair prompt.")
    rollouts: int = typer.Option(4, min=1, help="Localisation rollouts.")
    model_name: str = typer.Option("", help="model_name_or_path written in predictions.jsonl.")

    def settings(self) -> dict[str, Any]:
        """The :class:`~cascade_rl.swe.pipeline.PipelineConfig` fields these options set."""
        return {
            "repair_samples": self.samples,
            "repair_files": self.files,
            "context_budget": self.budget,
            "localization_rollouts": self.rollouts,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "max_tokens": self.max_tokens,
        }


GENERATOR = typer.Option(None, "--generator", "-g", help=f"The model. {GENERATOR_HELP}")


# ---------------------------------------------------------------------------- commands
@app.command()
@option_groups(inputs=Instances)
def localize(
    generator: str | None = GENERATOR,
    output: Path = typer.Option(Path("runs/swe/localize"), "--output", "-o", help="Output directory."),
    rollouts: int = typer.Option(4, min=1, help="Generation rollouts aggregated by frequency (paper: 16)."),
    top_n: int = typer.Option(5, min=1, help="Files each rollout may list."),
    embedding_model: str | None = typer.Option(None, help="Local sentence-embedding model instead of BM25."),
    max_tokens: int = typer.Option(1024, min=1, help="Tokens per generated answer."),
    *,
    inputs: Instances,
) -> None:
    """Localise files (generation when --generator is given, retrieval, fusion); print recall@k."""
    settings = {"localization_rollouts": rollouts, "localization_top_n": top_n, "max_tokens": max_tokens}
    settings["embedding_model"] = embedding_model
    report = run_pipeline("localize", inputs, output, generator, settings, "")
    finish(report)


@app.command()
@option_groups(inputs=Instances, repair_options=RepairOptions)
def repair(
    generator: str | None = GENERATOR,
    output: Path = typer.Option(Path("runs/swe/repair"), "--output", "-o", help="Output directory."),
    *,
    inputs: Instances,
    repair_options: RepairOptions,
) -> None:
    """Localise and sample repairs; write traces and predictions (majority patch, no tests)."""
    report = run_pipeline("repair", inputs, output, generator, repair_options.settings(), repair_options.model_name)
    print_candidates(report.summary)
    finish(report)


@app.command()
@option_groups(inputs=Instances, repair_options=RepairOptions)
def evaluate(
    generator: str | None = GENERATOR,
    output: Path = typer.Option(Path("runs/swe/evaluate"), "--output", "-o", help="Output directory."),
    reproduction_tests: int = typer.Option(10, min=0, help="Generated reproduction tests (paper: 10, eval 40)."),
    workers: int = typer.Option(2, min=1, help="Sandboxes running tests in parallel."),
    test_timeout: float = typer.Option(300.0, min=1.0, help="Seconds per test-suite run."),
    *,
    inputs: Instances,
    repair_options: RepairOptions,
) -> None:
    """The whole pipeline: localise, repair, validate in the sandbox, rank (best@k prediction)."""
    settings = {**repair_options.settings(), "reproduction_tests": reproduction_tests, "workers": workers}
    settings["test_time_s"] = test_timeout
    report = run_pipeline("evaluate", inputs, output, generator, settings, repair_options.model_name)
    print_candidates(report.summary)
    print_curves(report.summary)
    finish(report)


def run_pipeline(stages: str, inputs: Instances, output: Path, spec: str | None, settings: dict, model_name: str):
    """Run the pipeline up to ``stages`` on the instances, with a spinner; print recall@k."""
    from cascade_rl.swe.pipeline import PipelineConfig
    from cascade_rl.swe.pipeline import run_pipeline as run

    rows, checkouts, unreadable = inputs.load(output)
    if spec is None and stages != "localize":
        raise fail("this command needs --generator (a model to sample from)")
    generator = open_generator(spec) if spec is not None else None
    config = PipelineConfig(**{k: v for k, v in settings.items() if v is not None})
    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=True) as progress:
        task = progress.add_task("starting", total=None)
        report = run(
            rows,
            checkouts,
            output,
            generator=generator,
            config=config,
            stages=stages,
            model_name=model_name or spec or "cascade_rl",
            progress=lambda instance, stage: progress.update(task, description=f"{instance}: {stage}"),
        )
    report.bad_instances[:0] = unreadable
    print_recall(report.summary)
    return report


def print_recall(summary: dict) -> None:
    recall = summary.get("recall") or {}
    if not recall:
        return
    ks = sorted({k for values in recall.values() for k in values})
    table = Table(title="localisation recall@k")
    table.add_column("method")
    for k in ks:
        table.add_column(f"@{k}", justify="right")
    for method, values in recall.items():
        table.add_row(method, *(f"{values[k]:.3f}" for k in ks))
    stdout.print(table)


def print_candidates(summary: dict) -> None:
    counts = summary.get("candidates") or {}
    if counts:
        table = Table(title="repair candidates")
        for status in counts:
            table.add_column(status, justify="right")
        table.add_row(*(str(v) for v in counts.values()))
        stdout.print(table)


def print_curves(summary: dict) -> None:
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
    stdout.print(table)
    if "headline" in summary:
        print_headline(summary["headline"])
    elif "resolved" in summary:
        stdout.print(f"the best@k predictions resolve {summary['resolved']:.3f} of the instances")


def print_headline(result: dict) -> None:
    """The paper's SWE-bench headline, pass@1 averaged over runs, and best@k named beside it."""
    runs = result["runs"]
    stdout.print(
        f"SWE-bench headline: pass@1 {result['pass@1']:.1f} ± {result['pass@1_stderr']:.1f} "
        f"(mean of {runs} run(s), standard error over runs; {result['instances']} instances; "
        f"per run: {', '.join(f'{rate:.1f}' for rate in result['per_run'])})"
    )
    if f"best@{runs}" in result:
        stdout.print(
            f"best@{runs} (one patch of {runs} chosen by validation: test-time scaling, not pass@1): "
            f"{result[f'best@{runs}']:.1f}"
        )


def finish(report) -> None:
    """Where the traces went, and the instances skipped (exit code 1 if any)."""
    say(f"wrote {len(report.traces)} trace(s) and report.json to {report.output_dir}")
    for name, problem in report.bad_instances:
        console.print(f"[red]skipped {name}[/red]: {problem}", markup=True, highlight=False)
    if report.bad_instances:
        raise typer.Exit(EXIT_PROBLEMS)


@app.command()
def headline(
    runs: list[Path] = typer.Argument(
        ..., help="The SWE-bench harness's report (JSON with resolved_ids) of each predictions/run-J.jsonl."
    ),
    best: Path | None = typer.Option(None, "--best", help="The harness report of predictions.jsonl (best@k)."),
    instances: Path | None = typer.Option(
        None, "--instances", "-i", help="The evaluated instances (default: the reports' submitted_ids together)."
    ),
) -> None:
    """The paper's SWE-bench headline from the official harness: pass@1 averaged over the k
    runs with its standard error, best@k beside it (`cascade swe evaluate` writes the runs'
    predictions to predictions/run-J.jsonl and the best@k ones to predictions.jsonl)."""
    from cascade_rl.swe.pipeline import harness_headline, load_instances

    def read(path: Path) -> Any:
        try:
            report = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as error:
            raise fail(f"{path}: {error}") from None
        if not isinstance(report, dict) or not isinstance(report.get("resolved_ids"), list):
            raise fail(f"{path}: not a SWE-bench harness report (no resolved_ids list)")
        return report

    ids: list[str] = []
    if instances is not None:
        if not instances.is_file():
            raise fail(f"instances file {instances} does not exist")
        rows, bad = load_instances(instances)
        if bad:
            raise fail(f"{bad[0][0]}: {bad[0][1]}")
        ids = [str(row.get("instance_id")) for row in rows if isinstance(row, dict) and row.get("instance_id")]
    try:
        result = harness_headline([read(path) for path in runs], read(best) if best else None, ids)
    except ValueError as error:
        raise fail(error) from None
    print_headline(result)
    stdout.print_json(json.dumps(result))


@app.command("build-data")
@option_groups(inputs=Instances)
def build_data(
    traces: Path = typer.Option(..., "--traces", help="The traces/ directory of a pipeline run."),
    output: Path = typer.Option(Path("runs/swe/data"), "--output", "-o", help="Output directory."),
    threshold: float = typer.Option(0.5, help="Similarity a repair sample must exceed."),
    sft_min_good: int = typer.Option(4, min=1, help="Samples above the threshold for SFT (of --samples)."),
    samples: int = typer.Option(8, min=1, help="Repair samples considered per instance."),
    context_limits: str = typer.Option(
        "16384,24576",
        "--context-limits",
        help="Input-context limits l of the SWE RL curriculum, comma-separated: one RL set per l, "
        "written to context-L.jsonl (paper: 16K then 24K).",
    ),
    min_prompt_tokens: int | None = typer.Option(
        None, min=0, help="RL prompts shorter than this are dropped (default: half the smallest limit; paper 8K)."
    ),
    max_files: int = typer.Option(5, min=1, help="Files in a mixed-localisation RL prompt (gold files included)."),
    tokenizer: str | None = typer.Option(None, help="The policy's tokenizer (a local model directory)."),
    recipe: Path | None = typer.Option(None, help="Count with the tokenizer of this recipe's model."),
    approximate_tokens: bool = typer.Option(
        False, "--approximate-tokens", help="Estimate lengths without a tokenizer (not the policy's count)."
    ),
    mode: str = typer.Option("think", help="Thinking mode the SWE stage trains in (think / no_think)."),
    seed: int = typer.Option(0, help="Seed of the file order in each prompt."),
    *,
    inputs: Instances,
) -> None:
    """Build SWE SFT data (localisation, repair, test generation) and, from the same traces, one
    RL set per input-context limit (ground-truth and mixed-localisation prompts) for the SWE RL
    curriculum."""
    from cascade_rl.swe.data import DataConfig, prompt_counter, rl_file
    from cascade_rl.swe.data import build_data as build

    if not traces.is_dir():
        raise fail(f"traces directory {traces} does not exist")
    try:
        config = DataConfig(
            similarity_threshold=threshold,
            sft_min_good=sft_min_good,
            samples_per_prompt=samples,
            context_limits=tuple(parse_limits(context_limits)),
            min_prompt_tokens=min_prompt_tokens,
            max_files=max_files,
            seed=seed,
        )
    except ValueError as error:
        raise fail(error) from None
    if mode not in ("think", "no_think"):
        raise fail(f"--mode must be think or no_think, got {mode!r}")
    policy = policy_tokenizer(tokenizer, recipe, approximate_tokens)
    rows, checkouts, _ = inputs.load(output)
    loaded = [json.loads(path.read_text()) for path in sorted(traces.glob("*.json"))]
    counter = prompt_counter(policy, mode) if policy is not None else None
    report = build(loaded, rows, checkouts, output, config=config, count_tokens=counter)
    table = Table(title=f"SWE data from {len(loaded)} trace(s) -> {output}")
    table.add_column("kind")
    table.add_column("rows", justify="right")
    for name, count in sorted(report.counts.items()):
        table.add_row(name, str(count))
    for limit in config.context_limits:
        for name, count in sorted(report.rl_counts.get(limit, {}).items()):
            table.add_row(f"{rl_file(limit)}: {name}", str(count))
    stdout.print(table)
    for instance_id, reason in report.dropped.items():
        say(f"dropped {instance_id}: {reason}")


def parse_limits(text: str) -> list[int]:
    """``"16384,24576"`` -> ``[16384, 24576]``; anything else is a one-line error."""
    try:
        limits = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise fail(f"--context-limits takes token counts separated by commas, e.g. 16384,24576; got {text!r}") from None
    if not limits or min(limits) < 1:
        raise fail(f"--context-limits takes positive token counts, got {text!r}")
    return limits


def policy_tokenizer(path: str | None, recipe: Path | None, approximate: bool) -> Any:
    """The tokenizer lengths are counted with: ``--tokenizer``, else the ``--recipe``'s model
    (its chat template setting applied), else None with ``--approximate-tokens``."""
    from cascade_rl.swe.data import load_tokenizer

    if sum(bool(x) for x in (path, recipe, approximate)) != 1:
        raise fail("give one of --tokenizer PATH, --recipe RECIPE (its model's tokenizer) or --approximate-tokens")
    if approximate:
        say("prompt lengths are estimates (--approximate-tokens), not the policy tokenizer's counts")
        return None
    cascade_template = True
    if recipe is not None:
        path, cascade_template = recipe_tokenizer(recipe)
    try:
        return load_tokenizer(path, cascade_template=cascade_template)
    except (OSError, ValueError) as error:
        raise fail(f"cannot load the tokenizer of {path}: {error}") from None


def recipe_tokenizer(recipe: Path) -> tuple[str, bool]:
    """The local model directory of a recipe's model and whether it installs the Cascade template."""
    from cascade_rl.recipe import RecipeError, expand, load_recipe

    try:
        loaded = load_recipe(recipe)
        path = expand(loaded.model.path) if loaded.model.path is not None else None
    except (RecipeError, OSError) as error:
        raise fail(error) from None
    if path is None:
        raise fail(f"{recipe}: model.tiny builds its tokenizer with the toy world; give --tokenizer instead")
    return str(Path(path).expanduser()), loaded.model.chat_template == "cascade"
