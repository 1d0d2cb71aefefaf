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
    writes into the run directory; a run whose recipe names no targets has no target check.

Conventions: only stages with ``status == "done"`` are reported (others are listed as
unfinished). An ``eval``-kind stage evaluates the checkpoint before it, so its numbers are
merged into the preceding training stage's row; one before any training stage is the
"base model" row (``baseline`` in report.json). ``total_wall_s`` sums every finished stage's
``wall_s``, evaluation stages included. Values are in percent; changes are in points.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

TRAINING_KINDS = ("sft", "reward_model", "grpo")
STAGE_KINDS = TRAINING_KINDS + ("eval",)
DEFAULT_MIN_GAIN = 10.0
DEFAULT_FORGETTING_LIMIT = 5.0
BASELINE_LABEL = "base model"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_STAGE_DIR = re.compile(r"^\d+-")  # <NN-stage>
_NUMBER_TEXT = re.compile(r"^(\*\*)?[+-]?\d+(\.\d+)?(\*\*)?$")


@dataclass
class StageRecord:
    """One finished stage as read from its directory."""

    directory: Path
    index: int
    name: str
    kind: str
    wall_s: float
    eval: dict[str, float] = field(default_factory=dict)
    eval_labels: dict[str, str] = field(default_factory=dict)
    eval_stderr: dict[str, float] = field(default_factory=dict)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    bad_metric_lines: int = 0


@dataclass
class TargetCheck:
    """The own-domain gain of one RL stage and whether its benchmark was later forgotten."""

    stage: str
    benchmark: str
    start: float | None
    end: float | None
    min_gain: float
    worst_later_value: float | None = None
    worst_later_stage: str | None = None
    forgetting_limit: float = DEFAULT_FORGETTING_LIMIT
    finished: bool = True  # False: the run has no finished stage of this name

    @property
    def delta(self) -> float | None:
        return None if self.start is None or self.end is None else self.end - self.start

    @property
    def gain_met(self) -> bool:
        return self.delta is not None and self.delta >= self.min_gain

    @property
    def later_fall(self) -> float | None:
        if self.end is None or self.worst_later_value is None:
            return None
        return max(0.0, self.end - self.worst_later_value)

    @property
    def forgetting_met(self) -> bool:
        return self.later_fall is None or self.later_fall <= self.forgetting_limit

    def problems(self) -> list[str]:
        """Plain sentences for every part of the target that is not met."""
        found = []
        if not self.finished:
            found.append(
                f"`{self.stage}`: no finished stage of that name in this run, so {self.benchmark} is unchecked"
            )
        elif self.end is None:
            found.append(f"`{self.stage}`: {self.benchmark} was not evaluated after the stage")
        elif self.start is None:
            found.append(
                f"`{self.stage}`: no {self.benchmark} value for the checkpoint it started from, so its gain is unknown"
            )
        elif not self.gain_met:
            found.append(
                f"`{self.stage}`: {self.benchmark} changed by {self.delta:+.1f} points "
                f"({self.start:.1f} -> {self.end:.1f}); target +{self.min_gain:.1f}, "
                f"short by {self.min_gain - self.delta:.1f}"
            )
        if not self.forgetting_met:
            found.append(
                f"{self.benchmark} fell {self.later_fall:.1f} points after `{self.stage}` "
                f"(lowest after `{self.worst_later_stage}`); limit {self.forgetting_limit:.1f}, "
                f"over by {self.later_fall - self.forgetting_limit:.1f}"
            )
        return found

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "benchmark": self.benchmark,
            "start": self.start,
            "end": self.end,
            "delta": self.delta,
            "min_gain": self.min_gain,
            "gain_met": self.gain_met,
            "later_fall": self.later_fall,
            "worst_later_stage": self.worst_later_stage,
            "forgetting_limit": self.forgetting_limit,
            "forgetting_met": self.forgetting_met,
            "finished": self.finished,
            "met": not self.problems(),
            "problems": self.problems(),
        }


@dataclass
class RunSummary:
    """Everything the report shows, derived from the stage directories."""

    run_dir: Path
    rows: list[StageRecord]
    baseline: dict[str, float]
    benchmarks: list[str]
    labels: dict[str, str]
    total_wall_s: float
    unfinished: list[str]


# ---------------------------------------------------------------- reading the run directory


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error})") from error


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{where}: expected a finite number, got {value!r}")
    return float(value)


def read_stage_info(path: Path) -> dict[str, Any]:
    """stage.json, validated: index, name, kind, wall_s, status."""
    info = _read_json(path)
    if not isinstance(info, dict):
        raise ValueError(f"{path}: expected a JSON object")
    missing = [key for key in ("index", "name", "kind") if key not in info]
    if missing:
        raise ValueError(f"{path}: missing field(s) {missing}")
    if info["kind"] not in STAGE_KINDS:
        raise ValueError(f"{path}: kind {info['kind']!r} is not one of {list(STAGE_KINDS)}")
    info["wall_s"] = _number(info.get("wall_s", 0.0), f"{path} wall_s")
    info["index"] = int(_number(info["index"], f"{path} index"))
    return info


def read_eval(path: Path) -> tuple[dict[str, float], dict[str, str], dict[str, float]]:
    """eval.json as (benchmark -> percent, benchmark -> metric label such as 'avg@4',
    benchmark -> standard error over prompts where recorded in ``extra.stderr``)."""
    if not path.exists():
        return {}, {}, {}
    raw = _read_json(path)
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: expected an object mapping benchmark -> value")
    values: dict[str, float] = {}
    labels: dict[str, str] = {}
    stderr: dict[str, float] = {}
    for benchmark, entry in raw.items():
        if isinstance(entry, dict):
            if "value" not in entry:
                raise ValueError(f"{path}: benchmark {benchmark!r} has no 'value'")
            values[benchmark] = _number(entry["value"], f"{path} {benchmark!r}")
            label = entry.get("metric") or (f"avg@{entry['k']}" if entry.get("k") else None)
            if label:
                labels[benchmark] = str(label)
            extra = entry.get("extra")
            if isinstance(extra, dict) and isinstance(extra.get("stderr"), (int, float)):
                stderr[benchmark] = float(extra["stderr"])
        else:
            values[benchmark] = _number(entry, f"{path} {benchmark!r}")
    return values, labels, stderr


def read_metrics(path: Path) -> tuple[list[dict[str, Any]], int]:
    """metrics.jsonl rows and the number of unreadable lines (e.g. a line cut by a kill)."""
    if not path.exists():
        return [], 0
    rows, bad = [], 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if isinstance(row, dict):
            rows.append(row)
        else:
            bad += 1
    return rows, bad


#: Where ``cascade run`` builds the tiny base model: not a stage.
BASE_DIR = "00-base"


def load_stages(run_dir: Path) -> tuple[list[StageRecord], list[str]]:
    """Finished stages in index order, and the directory names of unfinished ones."""
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {run_dir} does not exist")
    stages, unfinished = [], []
    for directory in sorted(path for path in run_dir.iterdir() if path.is_dir()):
        info_path = directory / "stage.json"
        if not info_path.exists():
            if _STAGE_DIR.match(directory.name) and directory.name != BASE_DIR:
                unfinished.append(directory.name)
            continue
        info = read_stage_info(info_path)
        if info.get("status", "done") != "done":
            unfinished.append(directory.name)
            continue
        values, labels, stderr = read_eval(directory / "eval.json")
        metrics, bad = read_metrics(directory / "metrics.jsonl")
        stages.append(
            StageRecord(
                directory=directory,
                index=info["index"],
                name=str(info["name"]),
                kind=info["kind"],
                wall_s=info["wall_s"],
                eval=values,
                eval_labels=labels,
                eval_stderr=stderr,
                metrics=metrics,
                bad_metric_lines=bad,
            )
        )
    stages.sort(key=lambda stage: stage.index)
    return stages, unfinished


def summarize_run(run_dir: Path) -> RunSummary:
    """Merge evaluation stages into the rows they evaluate and collect benchmark order."""
    stages, unfinished = load_stages(run_dir)
    rows: list[StageRecord] = []
    baseline: dict[str, float] = {}
    labels: dict[str, str] = {}
    benchmarks: list[str] = []
    for stage in stages:
        labels.update(stage.eval_labels)
        benchmarks += [name for name in stage.eval if name not in benchmarks]
        if stage.kind != "eval":
            rows.append(stage)
        elif rows:
            rows[-1].eval.update(stage.eval)
        else:
            baseline.update(stage.eval)
    return RunSummary(
        run_dir=run_dir,
        rows=rows,
        baseline=baseline,
        benchmarks=benchmarks,
        labels=labels,
        total_wall_s=sum(stage.wall_s for stage in stages),
        unfinished=unfinished,
    )


# ---------------------------------------------------------------- derived numbers


def _evaluations(summary: RunSummary) -> list[tuple[str, dict[str, float]]]:
    """(row label, eval values) in order, the base model first when it was evaluated."""
    ordered = [(BASELINE_LABEL, summary.baseline)] if summary.baseline else []
    return ordered + [(row.name, row.eval) for row in summary.rows]


def forgetting_matrix(summary: RunSummary) -> tuple[list[str], list[list[float | None]]]:
    """Per evaluated stage, each benchmark's change against its latest earlier value (None
    where either value is missing)."""
    latest: dict[str, float] = dict(summary.baseline)
    names, deltas = [], []
    for row in summary.rows:
        if not row.eval:
            continue
        names.append(row.name)
        deltas.append([row.eval[b] - latest[b] if b in row.eval and b in latest else None for b in summary.benchmarks])
        latest.update(row.eval)
    return names, deltas


def check_targets(
    summary: RunSummary, targets: Mapping[str, str], min_gain: float, forgetting_limit: float
) -> list[TargetCheck]:
    """One check per stage named in ``targets`` (stage name -> own benchmark), in run order;
    targets naming no finished stage come last, marked unfinished."""
    evaluations = _evaluations(summary)
    checks = []
    first_stage = 1 if summary.baseline else 0
    for position, (label, values) in enumerate(evaluations):
        if position < first_stage or label not in targets:
            continue
        benchmark = targets[label]
        earlier = [v[benchmark] for _, v in evaluations[:position] if benchmark in v]
        later = [(name, v[benchmark]) for name, v in evaluations[position + 1 :] if benchmark in v]
        worst = min(later, key=lambda item: item[1]) if later else (None, None)
        checks.append(
            TargetCheck(
                stage=label,
                benchmark=benchmark,
                start=earlier[-1] if earlier else None,
                end=values.get(benchmark),
                min_gain=min_gain,
                worst_later_stage=worst[0],
                worst_later_value=worst[1],
                forgetting_limit=forgetting_limit,
            )
        )
    checked = {check.stage for check in checks}
    for stage, benchmark in targets.items():
        if stage not in checked:
            checks.append(TargetCheck(stage, benchmark, None, None, min_gain, finished=False))
    return checks


def recipe_targets(run_dir: Path) -> tuple[dict[str, str], float, float]:
    """(targets, min gain, forgetting limit) of the recipe the run was made with, read from
    ``run_dir/recipe.json``; no targets when the run has no recipe.json."""
    path = Path(run_dir) / "recipe.json"
    spec = (_read_json(path).get("eval") or {}) if path.exists() else {}
    targets = spec.get("targets") or {}
    if not isinstance(targets, dict) or not all(isinstance(v, str) for v in targets.values()):
        raise ValueError(f"{path}: eval.targets must map stage names to benchmark names, got {targets!r}")
    return (
        dict(targets),
        float(spec.get("target_gain", DEFAULT_MIN_GAIN)),
        float(spec.get("forgetting_limit", DEFAULT_FORGETTING_LIMIT)),
    )


# ---------------------------------------------------------------- formatting


def format_cell(value: Any) -> str:
    """Markdown cell text: None -> '—', floats with one decimal, pipes escaped."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value).replace("|", "\\|").replace("\n", " ")


def _looks_numeric(cell: Any) -> bool:
    if isinstance(cell, bool):
        return False
    return isinstance(cell, (int, float)) or bool(_NUMBER_TEXT.match(str(cell)))


def format_table(rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> str:
    """A GitHub-markdown table; numeric columns are right-aligned."""
    if any(len(row) != len(columns) for row in rows):
        raise ValueError(f"every row needs {len(columns)} cells ({list(columns)})")

    def numeric(index: int) -> bool:
        cells = [row[index] for row in rows if row[index] is not None]
        return bool(cells) and all(_looks_numeric(cell) for cell in cells)

    aligns = ["---:" if numeric(i) else "---" for i in range(len(columns))]
    lines = ["| " + " | ".join(format_cell(c) for c in columns) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(format_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def format_duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f}s"
    minutes, secs = divmod(int(round(seconds)), 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


def _signed(value: float | None, bold: bool = False) -> str | None:
    if value is None:
        return None
    text = f"{value:+.1f}"
    return f"**{text}**" if bold else text


def _column_title(benchmark: str, labels: Mapping[str, str]) -> str:
    return f"{benchmark} ({labels[benchmark]})" if benchmark in labels else benchmark


# ---------------------------------------------------------------- plots


def _step_axis(metrics: Sequence[Mapping[str, Any]]) -> tuple[list[int], list[int]]:
    """x positions (cumulative step) and the positions where a new sub-stage starts (its step
    counter restarts or its ``substage`` key changes)."""
    positions, boundaries = [], []
    for position, row in enumerate(metrics, start=1):
        if position > 1:
            previous = metrics[position - 2]
            restarted = (
                isinstance(row.get("step"), (int, float))
                and isinstance(previous.get("step"), (int, float))
                and row["step"] <= previous["step"]
            )
            if restarted or row.get("substage") != previous.get("substage"):
                boundaries.append(position)
        positions.append(position)
    return positions, boundaries


def _series(metrics: Sequence[Mapping[str, Any]], key: str, positions: Sequence[int]) -> tuple[list[int], list[float]]:
    pairs = [
        (x, float(row[key]))
        for x, row in zip(positions, metrics)
        if isinstance(row.get(key), (int, float)) and not isinstance(row.get(key), bool)
    ]
    return [x for x, _ in pairs], [y for _, y in pairs]


def plot_training_curves(stage: StageRecord, path: Path) -> Path:
    """Reward (mean, ±std band, per domain) and response length (mean, think, no_think) per step."""
    metrics = stage.metrics
    positions, boundaries = _step_axis(metrics)
    figure = Figure(figsize=(11, 4), dpi=100)
    reward_axes, length_axes = figure.subplots(1, 2)
    xs, mean = _series(metrics, "reward/mean", positions)
    reward_axes.plot(xs, mean, color="black", linewidth=2, label="reward/mean")
    std_xs, std = _series(metrics, "reward/std", positions)
    if std_xs == xs and xs:
        reward_axes.fill_between(
            xs,
            [m - s for m, s in zip(mean, std)],
            [m + s for m, s in zip(mean, std)],
            color="grey",
            alpha=0.25,
            label="± std",
        )
    domain_keys = sorted(
        {
            key
            for row in metrics
            for key in row
            if key.startswith("reward/") and key.endswith("/mean") and key.count("/") == 2
        }
    )
    for key in domain_keys:
        reward_axes.plot(*_series(metrics, key, positions), linewidth=1, label=key)
    for key, style in (
        ("response_length/mean", "-"),
        ("response_length/think", "--"),
        ("response_length/no_think", ":"),
    ):
        length_axes.plot(*_series(metrics, key, positions), linestyle=style, label=key)
    for axes, title in ((reward_axes, "reward per step"), (length_axes, "response length per step (tokens)")):
        for boundary in boundaries:
            axes.axvline(boundary - 0.5, color="grey", linestyle="--", linewidth=0.8)
        axes.set_title(f"{stage.name}: {title}")
        axes.set_xlabel("step" + (" (sub-stages separated)" if boundaries else ""))
        axes.grid(alpha=0.3)
        if axes.get_legend_handles_labels()[0]:
            axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def plot_forgetting(summary: RunSummary, targets: Mapping[str, str], path: Path) -> Path | None:
    """Heat map of the forgetting matrix; own-domain cells outlined."""
    names, deltas = forgetting_matrix(summary)
    if not names or not summary.benchmarks:
        return None
    grid = [[math.nan if d is None else d for d in row] for row in deltas]
    limit = max([abs(d) for row in deltas for d in row if d is not None] + [1.0])
    figure = Figure(figsize=(1.3 * len(summary.benchmarks) + 2.5, 0.55 * len(names) + 1.8), dpi=100)
    axes = figure.subplots()
    image = axes.imshow(grid, cmap="RdYlGn", vmin=-limit, vmax=limit, aspect="auto")
    axes.set_xticks(range(len(summary.benchmarks)), summary.benchmarks, rotation=30, ha="right")
    axes.set_yticks(range(len(names)), [f"after {name}" for name in names])
    for r, row in enumerate(deltas):
        for c, delta in enumerate(row):
            own = targets.get(names[r]) == summary.benchmarks[c]
            axes.text(
                c,
                r,
                "—" if delta is None else f"{delta:+.1f}",
                ha="center",
                va="center",
                fontsize=9,
                fontweight="bold" if own else "normal",
            )
            if own:
                axes.add_patch(_outline(c, r))
    axes.set_title("change vs previous evaluation (points)\noutlined: the stage's own domain", fontsize=10)
    figure.colorbar(image, ax=axes)
    figure.tight_layout()
    figure.savefig(path, format="png")
    return path


def _outline(column: int, row: int):
    from matplotlib.patches import Rectangle

    return Rectangle((column - 0.5, row - 0.5), 1, 1, fill=False, edgecolor="black", linewidth=2)


# ---------------------------------------------------------------- report


def _eval_table(summary: RunSummary) -> str:
    columns = ["after stage", "kind", "wall"] + [_column_title(b, summary.labels) for b in summary.benchmarks]
    rows = []
    if summary.baseline:
        rows.append([BASELINE_LABEL, "—", None] + [summary.baseline.get(b) for b in summary.benchmarks])
    for row in summary.rows:
        rows.append([row.name, row.kind, format_duration(row.wall_s)] + [row.eval.get(b) for b in summary.benchmarks])
    return format_table(rows, columns)


def _forgetting_table(summary: RunSummary, targets: Mapping[str, str]) -> str:
    names, deltas = forgetting_matrix(summary)
    rows = [
        [name] + [_signed(d, bold=targets.get(name) == b) for b, d in zip(summary.benchmarks, row)]
        for name, row in zip(names, deltas)
    ]
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
            _signed(c.delta),
            f"+{c.min_gain:.1f}",
            None if c.later_fall is None else f"{c.later_fall:.1f} (limit {c.forgetting_limit:.1f})",
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
            "and no earlier domain fell by more than the forgetting limit later."
        )
    return lines


def _noise_section(summary: RunSummary) -> list[str]:
    """The sampling noise of the values: the largest standard error over prompts per benchmark."""
    largest: dict[str, float] = {}
    for row in summary.rows:
        for benchmark, stderr in row.eval_stderr.items():
            largest[benchmark] = max(largest.get(benchmark, 0.0), stderr)
    if not largest:
        return []
    noise = ", ".join(f"{name} {value:.1f}" for name, value in largest.items())
    return [
        "Sampling noise: the largest standard error over prompts of any value, in points: "
        f"{noise}. Stages are compared on the same prompts, so a change between two stages "
        "is less noisy than that, but a change of a few points in one run is not conclusive.",
        "",
    ]


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


def _markdown(
    summary: RunSummary,
    targets: Mapping[str, str],
    checks: Sequence[TargetCheck],
    plots: Mapping[str, str],
    forgetting_plot: str | None,
) -> str:
    lines = [
        f"# Cascade RL report: {summary.run_dir.name}",
        "",
        f"{len(summary.rows)} stage(s), total wall time {format_duration(summary.total_wall_s)}. "
        "Benchmark values in percent; changes in points.",
        "",
    ]
    if summary.unfinished:
        lines += [f"Unfinished stage(s), not reported: {', '.join(summary.unfinished)}.", ""]
    lines += [
        "## Evaluation after each stage",
        "",
        _eval_table(summary),
        "",
        "## Change against the previous evaluation (forgetting)",
        "",
        "Each cell: the benchmark's value after the stage minus its latest earlier value. "
        "**Bold**: the RL stage's own domain.",
        "",
        _forgetting_table(summary, targets),
        "",
    ]
    if forgetting_plot:
        lines += [f"![forgetting matrix]({forgetting_plot})", ""]
    lines += ["## Targets", ""] + _targets_section(checks) + [""] + _noise_section(summary)
    if plots:
        lines += ["## Training curves (RL stages)", ""] + _curves_section(summary, plots)
    return "\n".join(lines).rstrip() + "\n"


def _report_json(
    summary: RunSummary, checks: Sequence[TargetCheck], plots: Mapping[str, str], forgetting_plot: str | None
) -> dict[str, Any]:
    names, deltas = forgetting_matrix(summary)
    report: dict[str, Any] = {
        "total_wall_s": summary.total_wall_s,
        "stages": [
            {"stage": row.name, "kind": row.kind, "wall_s": row.wall_s, "eval": dict(row.eval)} for row in summary.rows
        ],
        "benchmarks": summary.benchmarks,
        "metrics": summary.labels,
        "forgetting": {"stages": names, "benchmarks": summary.benchmarks, "deltas": deltas},
        "targets": [check.to_json() for check in checks],
        "targets_met": all(not check.problems() for check in checks),
        "plots": [*plots.values(), *([forgetting_plot] if forgetting_plot else [])],
    }
    if summary.baseline:
        report["baseline"] = dict(summary.baseline)
    if summary.unfinished:
        report["unfinished"] = summary.unfinished
    return report


def build_report(
    run_dir: Path,
    targets: Mapping[str, str] | None = None,
    *,
    min_gain: float | None = None,
    forgetting_limit: float | None = None,
) -> Path:
    """Write report.md, report.json and plots/ into ``run_dir``; return the report.md path.

    ``targets`` maps RL stage name -> its own benchmark; a stage meets its target when its
    benchmark rose by at least ``min_gain`` points and never fell more than ``forgetting_limit``
    points below its end value in a later stage. Each left out comes from the run's recipe
    (:func:`recipe_targets`).
    """
    run_dir = Path(run_dir)
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
    checks = check_targets(summary, targets, min_gain, forgetting_limit)
    report_path = run_dir / "report.md"
    report_path.write_text(_markdown(summary, targets, checks, plots, forgetting_plot), encoding="utf-8")
    (run_dir / "report.json").write_text(
        json.dumps(_report_json(summary, checks, plots, forgetting_plot), indent=2) + "\n", encoding="utf-8"
    )
    return report_path


def print_summary(report: Mapping[str, Any] | Path, console: Any = None) -> None:
    """Print report.json (a dict or its path) as a rich table plus the target verdicts; used by
    ``cascade run`` at the end of a run."""
    from rich.console import Console
    from rich.table import Table

    if isinstance(report, (str, Path)):
        report = _read_json(Path(report))
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
    for check in report.get("targets", []):
        if check.get("met"):
            console.print(
                f"[green]target met[/green]: {check['stage']} {check['benchmark']} "
                f"{format_cell(check['start'])} -> {format_cell(check['end'])}"
            )
        for problem in check.get("problems", []):
            console.print(f"[red]target not met[/red]: {problem}")
