"""The run report: what each cascade stage did to every benchmark (SPEC sections 6 and 9-10).

``build_report(run_dir)`` reads the layout the engine writes::

    run_dir/<NN-stage>/stage.json     {"index", "name", "kind", "wall_s", "status"}
    run_dir/<NN-stage>/metrics.jsonl  one JSON object per training step (missing keys tolerated)
    run_dir/<NN-stage>/eval.json      {"<benchmark>": percent} or {"<benchmark>": {"value", "k", "metric"}}

and writes ``report.md``, ``report.json`` and PNG plots under ``plots/``:

(a) one table whose rows are "after stage X" and whose columns are the evaluated benchmarks
    (like the paper's tables 2 and 4-8);
(b) a stage x benchmark matrix of changes against the previous evaluation (forgetting), each
    RL stage's own benchmark highlighted;
(c) reward and response length per step for every ``grpo`` stage;
(d) a target check: per RL stage its own benchmark's start value (the checkpoint it started
    from), end value and gain, and whether that benchmark later fell by more than the
    forgetting limit (SPEC section 1: cascaded RL resists forgetting). Which stage owns which
    benchmark, the gain and the limit come from the recipe (``eval.targets``,
    ``eval.target_gain``, ``eval.forgetting_limit``), read from the ``recipe.json`` the engine
    writes into the run directory; a run whose recipe names no targets has no target check;
(e) response length on every benchmark after each stage, and the entropy and length of the
    rollouts during each RL stage (the paper: RLHF shortens responses, IF-RL lowers entropy);
(f) for benchmarks whose samples say whether an edit applied (SWE), the share that did beside
    the exact fixes;
(g) per ``grpo`` stage, the rollouts whose verifier reached no verdict (masked out of training,
    not scored 0), by reward domain and reason (``masked/<domain>/<reason>`` in metrics.jsonl).
(h) for RL stages mixing reward domains or playing multi-turn episodes (Cascade 2's multi-domain
    RL), each domain's reward, pass rate, turns and tool errors at the start and end of the stage
    (:mod:`cascade_rl.eval.domains`).

**Noise.** Each value comes with its standard error over prompts (``eval.json``
``extra.stderr``). Every stage is evaluated on the same prompts, so a change between two
evaluations has a *paired* standard error: that of the per-prompt differences, read from the
samples the evaluation wrote (``eval-samples/<benchmark>.jsonl``: a sample is correct when its
reward reaches the benchmark's ``pass_threshold``; an arena sample wins against the baseline's
reward-model score). A fall counts as **forgetting** only when it exceeds both the forgetting
limit and twice its paired standard error (a fall whose error is unknown: the limit alone).

**Modules.** This module writes the markdown and JSON; reading the run directory is
:mod:`cascade_rl.eval.runs`, changes, forgetting and targets :mod:`cascade_rl.eval.forgetting`,
tables :mod:`cascade_rl.eval.tables`, plots :mod:`cascade_rl.eval.plots`; what distillation
stages won back is :mod:`cascade_rl.eval.recovery`.

Conventions: only stages with ``status == "done"`` are reported (others are listed as
unfinished). An ``eval``-kind stage evaluates the checkpoint before it, so its numbers are
merged into the preceding training stage's row; one before any training stage is the
"base model" row (``baseline`` in report.json). ``total_wall_s`` sums every finished stage's
``wall_s``, evaluation stages included. Values are in percent; changes are in points.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cascade_rl.eval.domains import domain_trends, domains_section
from cascade_rl.eval.forgetting import (
    Change,
    TargetCheck,
    check_targets,
    is_forgetting,
    stage_changes,
    untargeted_falls,
)
from cascade_rl.eval.learning import idleness, learning_note
from cascade_rl.eval.levels import levels_section
from cascade_rl.eval.plots import plot_forgetting, plot_length_entropy, plot_training_curves
from cascade_rl.eval.recovery import add_recovery, print_recovery
from cascade_rl.eval.runs import (
    BASELINE_LABEL,
    DEFAULT_FORGETTING_LIMIT,
    SAMPLE_RATES,
    TREND_STEPS,
    RunSummary,
    StageRecord,
    evaluations,
    masked_rollouts,
    read_json,
    recipe_targets,
    summarize_run,
    trend,
)
from cascade_rl.eval.tables import column_title, format_cell, format_duration, format_table, signed, value_text


def _eval_table(summary: RunSummary) -> str:
    columns = ["after stage", "kind", "wall"] + [column_title(b, summary.labels) for b in summary.benchmarks]
    rows = []
    for record in evaluations(summary):
        wall = None if record.name == BASELINE_LABEL else format_duration(record.wall_s)
        kind = "—" if record.name == BASELINE_LABEL else record.kind
        rows.append([record.name, kind, wall] + [value_text(record, b) for b in summary.benchmarks])
    return format_table(rows, columns)


def _forgetting_table(summary: RunSummary, targets: Mapping[str, str], limit: float) -> str:
    names, changes = stage_changes(summary)
    rows = []
    for name, row in zip(names, changes):
        cells = []
        for benchmark, item in zip(summary.benchmarks, row):
            if item is None:
                cells.append(None)
                continue
            mark = " ⚠" if is_forgetting(-item.delta, item.stderr, limit) else ""
            cells.append(item.text(bold=targets.get(name) == benchmark) + mark)
        rows.append([name] + cells)
    return format_table(rows, ["after stage"] + summary.benchmarks)


def _targets_section(checks: Sequence[TargetCheck]) -> list[str]:
    if not checks:
        return ["No stage of this run has a target benchmark."]
    rows = [
        [
            c.stage,
            c.benchmark,
            c.start,
            c.end,
            None if c.delta is None else Change(c.delta, c.gain_stderr).text(),
            f"+{c.min_gain:.1f}",
            None if c.later_fall is None else f"{c.fall_text} (limit {c.forgetting_limit:.1f})",
            "met" if not c.problems() else "**not met**",
        ]
        for c in checks
    ]
    lines = [
        format_table(
            rows, ["stage", "own benchmark", "start", "end", "change", "target", "largest later fall", "status"]
        ),
        "",
    ]
    problems = [problem for check in checks for problem in check.problems()]
    if problems:
        lines += ["Targets not met:", ""] + [f"- {problem}" for problem in problems]
    else:
        lines.append(
            "All targets met: every RL stage raised its own benchmark by the target, "
            "and no later stage forgot what an RL stage had gained on its own benchmark."
        )
    noisy = [c for c in checks if c.within_noise()]
    if noisy:
        lines += [""] + [
            f"- {c.benchmark} fell {c.fall_text} points after `{c.stage}` (lowest after `{c.worst_later_stage}`): "
            f"over the limit {c.forgetting_limit:.1f} but within twice its standard error, so not counted as forgetting"
            for c in noisy
        ]
    return lines


def _noise_section(summary: RunSummary) -> list[str]:
    """The sampling noise: the largest standard error over prompts of any value and of any
    stage-to-stage change, per benchmark."""
    largest: dict[str, float] = {}
    for row in summary.rows:
        for benchmark, stderr in row.eval_stderr.items():
            largest[benchmark] = max(largest.get(benchmark, 0.0), stderr)
    if not largest:
        return []
    noise = ", ".join(f"{name} {value:.1f}" for name, value in largest.items())
    paired: dict[str, float] = {}
    for row in stage_changes(summary)[1]:
        for benchmark, item in zip(summary.benchmarks, row):
            if item is not None and item.stderr is not None:
                paired[benchmark] = max(paired.get(benchmark, 0.0), item.stderr)
    lines = [f"Sampling noise: the largest standard error over prompts of any value, in points: {noise}."]
    if paired:
        text = ", ".join(f"{name} {value:.1f}" for name, value in paired.items())
        lines.append(
            f"Of any stage-to-stage change (paired over prompts: every stage is evaluated on the same prompts): {text}."
        )
    else:
        lines.append("Stage-to-stage changes have no paired errors here (no per-sample results were found).")
    return [" ".join(lines), ""]


def _length_entropy_section(summary: RunSummary, plot: str | None) -> list[str]:
    records = [r for r in evaluations(summary) if r.response_length]
    rl_rows = [r for r in summary.rows if r.kind == "grpo" and r.metrics]
    if not records and not rl_rows:
        return []
    lines = [
        "## Response length and entropy",
        "",
        "The paper observes that RLHF shortens responses and that IF-RL lowers the policy's entropy. "
        f"Mean response length of each benchmark's samples after each stage ({summary.length_unit}):",
        "",
    ]
    if records:
        table = [[r.name] + [r.response_length.get(b) for b in summary.benchmarks] for r in records]
        lines += [format_table(table, ["after stage"] + summary.benchmarks), ""]
    if rl_rows:
        lines += [
            f"RL rollouts: entropy (nats per token) and length (tokens), mean of the first and last "
            f"{TREND_STEPS} steps of each stage:",
            "",
        ]
        table = []
        for row in rl_rows:
            entropy, length = trend(row.metrics, "entropy"), trend(row.metrics, "response_length/mean")
            table.append(
                [row.name]
                + ([entropy[0], entropy[1], signed(entropy[1] - entropy[0], digits=3)] if entropy else [None] * 3)
                + ([length[0], length[1], signed(length[1] - length[0])] if length else [None] * 3)
            )
        lines += [
            format_table(
                table, ["stage", "entropy first", "entropy last", "change", "length first", "length last", "change"]
            ),
            "",
        ]
    if plot:
        lines += [f"![response length and entropy]({plot})", ""]
    return lines


def _sample_rates_section(summary: RunSummary) -> list[str]:
    """Per benchmark whose samples carry edit flags (SWE): exact fixes beside edits that apply."""
    benchmarks = [b for b in summary.benchmarks if any(b in r.sample_rates for r in summary.rows)]
    lines = []
    for benchmark in benchmarks:
        rows = [
            [r.name, r.eval.get(benchmark)] + [r.sample_rates[benchmark].get(name) for name in SAMPLE_RATES]
            for r in summary.rows
            if benchmark in r.sample_rates
        ]
        lines += [
            f"## {benchmark}: edits that apply",
            "",
            "Percent of samples: the value (exact fixes), edits that parse and apply to the files, and "
            "edits identical to the golden patch.",
            "",
            format_table(rows, ["after stage", benchmark, *SAMPLE_RATES]),
            "",
        ]
    return lines


def _masked_section(summary: RunSummary) -> list[str]:
    """Per RL stage, the rollouts whose verifier reached no verdict, by domain and reason."""
    rl_rows = [row for row in summary.rows if row.kind == "grpo" and row.metrics]
    if not rl_rows:
        return []
    table = []
    for row in rl_rows:
        total = sum(float(m.get("rollouts/total", 0)) for m in row.metrics)
        for domain, reasons in masked_rollouts(row.metrics).items():
            for reason, count in reasons.items():
                table.append([row.name, domain, reason, count, f"{100 * count / total:.1f}" if total else None])
    lines = [
        "## Rollouts without a verdict",
        "",
        "A rollout whose verifier failed (a sandbox, reward-model or judge failure) is left out of the loss and "
        "of its group's statistics, not scored 0 (Nemotron-Cascade 2's mask_sample); a stage stops when more than "
        "its max_masked_share of a step is masked.",
        "",
    ]
    if not table:
        return lines + ["Every rollout of every RL stage had a verdict.", ""]
    return lines + [format_table(table, ["stage", "domain", "reason", "rollouts", "% of the stage's"]), ""]


def _curves_section(summary: RunSummary, plots: Mapping[str, str]) -> list[str]:
    lines = []
    for row in summary.rows:
        if row.directory.name not in plots:
            continue
        lines += [f"### {row.name}", "", f"![{row.name} training curves]({plots[row.directory.name]})", ""]
        last = row.metrics[-1] if row.metrics else {}
        facts = [f"{len(row.metrics)} logged steps"]
        for key in ("reward/mean", "response_length/mean", "truncation_ratio", "zero_variance_groups"):
            if isinstance(last.get(key), (int, float)):
                facts.append(f"last {key} = {last[key]:.3g}")
        if row.bad_metric_lines:
            facts.append(f"{row.bad_metric_lines} unreadable metrics line(s) skipped")
        lines += ["; ".join(facts) + ".", ""]
    return lines


def sandbox_record(run_dir: Path) -> dict[str, Any] | None:
    """What untrusted code ran in during the run (``machine.json``'s ``sandbox``), if recorded."""
    path = Path(run_dir) / "machine.json"
    return read_json(path).get("sandbox") if path.exists() else None


def sandbox_warning(record: Mapping[str, Any] | None) -> str | None:
    """One line when untrusted code ran without isolation (rlimits only), else None."""
    if not record or record.get("isolation") != "rlimits":
        return None
    return (
        f"Untrusted code (code rewards, SWE tests) ran with rlimits only, NO filesystem, network or process "
        f"isolation: {record.get('reason')} (opted in by {record.get('opted_in')})."
    )


def _markdown(
    summary: RunSummary,
    targets: Mapping[str, str],
    checks: Sequence[TargetCheck],
    plots: Mapping[str, str],
    forgetting_plot: str | None,
    length_plot: str | None = None,
    forgetting_limit: float = DEFAULT_FORGETTING_LIMIT,
    level_lines: Sequence[str] = (),
) -> str:
    lines = [
        f"# Cascade RL report: {summary.run_dir.name}",
        "",
        f"{len(summary.rows)} stage(s), total wall time {format_duration(summary.total_wall_s)}. "
        "Benchmark values in percent; changes in points.",
        "",
    ]
    warning = sandbox_warning(sandbox_record(summary.run_dir))
    if warning:
        lines += [f"**{warning}**", ""]
    if summary.unfinished:
        lines += [f"Unfinished stage(s), not reported: {', '.join(summary.unfinished)}.", ""]
    lines += [
        "## Evaluation after each stage",
        "",
        _eval_table(summary),
        "",
        "## Change against the previous evaluation (forgetting)",
        "",
        "Each cell: the benchmark's value after the stage minus its latest earlier value, ± the standard "
        "error of that change paired over prompts. **Bold**: the RL stage's own domain. ⚠: forgetting, "
        f"a fall of more than {forgetting_limit:.1f} points and more than twice its standard error.",
        "",
        _forgetting_table(summary, targets, forgetting_limit),
        "",
    ]
    if forgetting_plot:
        lines += [f"![forgetting matrix]({forgetting_plot})", ""]
    lines += list(level_lines)
    lines += _learning_lines(summary)
    lines += ["## Targets", ""] + _targets_section(checks) + [""]
    lines += _falls_lines(untargeted_falls(summary, targets, forgetting_limit)) + _noise_section(summary)
    lines += _sample_rates_section(summary) + domains_section(summary)
    lines += _length_entropy_section(summary, length_plot) + _masked_section(summary)
    if plots:
        lines += ["## Training curves (RL stages)", ""] + _curves_section(summary, plots)
    return "\n".join(lines).rstrip() + "\n"


def _learning_lines(summary: RunSummary) -> list[str]:
    """The RL stages, or stretches of them, that learned nothing (eval/learning.py)."""
    notes = [learning_note(row.name, row.metrics) for row in summary.rows if row.kind == "grpo"]
    if not any(notes):
        return []
    return ["## Steps that learned nothing", ""] + [f"- ⚠ {note}" for note in notes if note] + [""]


def _falls_lines(falls: Sequence[tuple[str, str, Change]]) -> list[str]:
    if not falls:
        return []
    lines = ["Forgetting on benchmarks no RL stage owns (⚠ above; no target covers them):", ""]
    for stage, benchmark, item in falls:
        error = f" ± {item.stderr:.1f}" if item.stderr is not None else ""
        lines.append(f"- `{stage}` lowered {benchmark} by {-item.delta:.1f}{error} points")
    return lines + [""]


def _stage_json(row: StageRecord) -> dict[str, Any]:
    entry: dict[str, Any] = {"stage": row.name, "kind": row.kind, "wall_s": row.wall_s, "eval": dict(row.eval)}
    for key, value in (
        ("stderr", row.eval_stderr),
        ("response_length", row.response_length),
        ("sample_rates", row.sample_rates),
    ):
        if value:
            entry[key] = dict(value)
    for key in ("entropy", "response_length/mean"):
        found = trend(row.metrics, key) if row.kind == "grpo" else None
        if found:
            entry.setdefault("rl_trend", {})[key] = {"first": found[0], "last": found[1]}
    if row.kind == "grpo":
        entry["learning"] = idleness(row.metrics).to_json()
        note = learning_note(row.name, row.metrics)
        if note:
            entry["learning"]["note"] = note
    if row.kind == "grpo" and row.metrics:
        entry["masked"] = masked_rollouts(row.metrics)  # per domain and reason; {} when every rollout had one
    domains = domain_trends(row) if row.kind == "grpo" else {}
    if domains:
        entry["rl_domains"] = domains
    return entry


def _report_json(
    summary: RunSummary,
    checks: Sequence[TargetCheck],
    plots: Mapping[str, str],
    forgetting_plot: str | None,
    length_plot: str | None = None,
    levels: Mapping[str, Any] | None = None,
    falls: Sequence[tuple[str, str, Change]] = (),
) -> dict[str, Any]:
    names, changes = stage_changes(summary)
    report: dict[str, Any] = {
        "total_wall_s": summary.total_wall_s,
        "stages": [_stage_json(row) for row in summary.rows],
        "benchmarks": summary.benchmarks,
        "metrics": summary.labels,
        "length_unit": summary.length_unit,
        "forgetting": {
            "stages": names,
            "benchmarks": summary.benchmarks,
            "deltas": [[None if c is None else c.delta for c in row] for row in changes],
            "stderr": [[None if c is None else c.stderr for c in row] for row in changes],
        },
        "targets": [check.to_json() for check in checks],
        "targets_met": all(not check.problems() for check in checks),
        "untargeted_falls": [
            {"stage": stage, "benchmark": benchmark, "delta": item.delta, "stderr": item.stderr}
            for stage, benchmark, item in falls
        ],
        "plots": [*plots.values(), *(p for p in (forgetting_plot, length_plot) if p)],
    }
    if summary.baseline:
        report["baseline"] = dict(summary.baseline)
    if levels:
        report["ifeval_levels"] = dict(levels)
    if summary.unfinished:
        report["unfinished"] = summary.unfinished
    sandbox = sandbox_record(summary.run_dir)
    if sandbox:
        report["sandbox"] = sandbox
    return report


class NotARunError(ValueError):
    """A directory that ``cascade run`` did not write (one line, naming it)."""


def check_run_directory(run_dir: Path) -> None:
    """``run_dir`` is a run: ``cascade run`` wrote its ``recipe.json`` or a stage's
    ``NN-stage/stage.json`` there. Anything else is refused before a file is written into it."""
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    stages = [path for path in run_dir.glob("[0-9]*-*/stage.json") if path.is_file()]
    if not (run_dir / "recipe.json").is_file() and not stages:
        raise NotARunError(
            f"{run_dir} is not a run directory: no recipe.json and no stage (NN-STAGE/stage.json) that "
            "`cascade run` writes; give the directory of a run, e.g. runs/NAME"
        )


def build_report(
    run_dir: Path,
    targets: Mapping[str, str] | None = None,
    *,
    min_gain: float | Mapping[str, float] | None = None,
    forgetting_limit: float | None = None,
) -> Path:
    """Write report.md, report.json and plots/ into ``run_dir``; return the report.md path.

    ``targets`` maps RL stage name -> its own benchmark; a stage meets its target when its
    benchmark rose by at least ``min_gain`` points and never fell more than ``forgetting_limit``
    points below its end value in a later stage. Each left out comes from the run's recipe
    (:func:`recipe_targets`).
    """
    run_dir = Path(run_dir)
    check_run_directory(run_dir)
    recipe_map, recipe_gain, recipe_limit = recipe_targets(run_dir)
    targets = recipe_map if targets is None else dict(targets)
    min_gain = recipe_gain if min_gain is None else min_gain
    forgetting_limit = recipe_limit if forgetting_limit is None else forgetting_limit
    summary = summarize_run(run_dir)
    plot_dir = run_dir / "plots"
    plot_dir.mkdir(exist_ok=True)
    plots = {
        row.directory.name: str(plot_training_curves(row, plot_dir / f"{row.directory.name}.png").relative_to(run_dir))
        for row in summary.rows
        if row.kind == "grpo" and row.metrics
    }
    heatmap = plot_forgetting(summary, targets, plot_dir / "forgetting.png")
    forgetting_plot = str(heatmap.relative_to(run_dir)) if heatmap else None
    lengths = plot_length_entropy(summary, plot_dir / "length-entropy.png")
    length_plot = str(lengths.relative_to(run_dir)) if lengths else None
    checks = check_targets(summary, targets, min_gain, forgetting_limit)
    level_lines, levels = levels_section(evaluations(summary), summary.benchmarks)  # IFEval's four levels
    report_path = run_dir / "report.md"
    report_path.write_text(
        _markdown(summary, targets, checks, plots, forgetting_plot, length_plot, forgetting_limit, level_lines),
        encoding="utf-8",
    )
    (run_dir / "report.json").write_text(
        json.dumps(
            _report_json(
                summary,
                checks,
                plots,
                forgetting_plot,
                length_plot,
                levels,
                falls=untargeted_falls(summary, targets, forgetting_limit),
            ),
            indent=2,
        )
        + "\n",
        encoding="utf-8",
    )
    add_recovery(run_dir, report_path)  # distill stages: what they won back (docs/mopd.md)
    return report_path


def print_summary(report: Mapping[str, Any] | Path, console: Any = None) -> None:
    """Print report.json (a dict or its path) as a rich table plus the target verdicts; used by
    ``cascade run`` at the end of a run."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    if isinstance(report, (str, Path)):
        report = read_json(Path(report))
    console = console or Console()
    if not console.is_terminal:  # piped or logged: rich would assume 80 columns and cut names
        console.width = max(console.width, 160)
    stages = report.get("stages", [])
    benchmarks = report.get("benchmarks") or list(dict.fromkeys(b for s in stages for b in s.get("eval", {})))
    table = Table(title=f"Cascade RL: {len(stages)} stage(s), {format_duration(report.get('total_wall_s', 0.0))}")
    for column in ["stage", "kind", "wall"] + list(benchmarks):
        table.add_column(column, justify="left" if column in ("stage", "kind") else "right")
    if report.get("baseline"):
        table.add_row(BASELINE_LABEL, "—", "—", *[format_cell(report["baseline"].get(b)) for b in benchmarks])
    for stage in stages:
        table.add_row(
            stage["stage"],
            stage["kind"],
            format_duration(stage.get("wall_s", 0.0)),
            *[format_cell(stage.get("eval", {}).get(b)) for b in benchmarks],
        )
    console.print(table)
    warning = sandbox_warning(report.get("sandbox"))
    if warning:
        console.print(f"[yellow]sandbox[/yellow]: {warning}")
    for check in report.get("targets", []):
        if check.get("met"):
            console.print(
                f"[green]target met[/green]: {check['stage']} {check['benchmark']} "
                f"{format_cell(check['start'])} -> {format_cell(check['end'])}"
            )
        for problem in check.get("problems", []):
            console.print(f"[red]target not met[/red]: {problem}")
    for stage in stages:
        note = (stage.get("learning") or {}).get("note")
        if note:
            console.print(f"[yellow]learned nothing[/yellow]: {escape(note)}", highlight=False)
    for fall in report.get("untargeted_falls", []):
        error = f" ± {fall['stderr']:.1f}" if fall.get("stderr") is not None else ""
        console.print(
            f"[yellow]forgetting[/yellow]: {fall['stage']} lowered {fall['benchmark']} by "
            f"{-fall['delta']:.1f}{error} points (no RL stage's own benchmark: no target covers it)"
        )
    print_recovery(report, console)
