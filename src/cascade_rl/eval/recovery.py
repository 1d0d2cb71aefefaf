"""What a distillation stage won back (Nemotron-Cascade 2's multi-domain on-policy distillation;
docs/mopd.md): for every teacher that is a stage checkpoint, its own benchmark's value after that
stage (the teacher), after the stage the student started from, and after distillation, each with
its standard error over prompts; what was lost and what distillation changed, with errors paired
over prompts; whether the loss came back; plus what the stage cost.

Inputs, as the engine writes them: the distill stage's ``distill.json`` (the student's starting
checkpoint and each domain's teacher with its stage directory), every stage's ``eval.json``,
evaluation samples and ``stage.json``, and the ``recipe.json`` of the run a teacher stage belongs
to (its ``eval.targets`` say which benchmark is that stage's own). :func:`add_recovery` appends
the section to ``report.md`` (with a plot of the per-domain reverse KL) and a ``recovery`` list to
``report.json``; :func:`print_recovery` prints the table after a run.

Every stage is evaluated on the same prompts, so each difference has the *paired* standard error
of the report (:func:`cascade_rl.eval.forgetting.change`; the two errors combined as if independent
where the samples are missing). A difference is **significant** when it exceeds twice its error,
the report's rule for forgetting. Verdicts:

* **nothing lost** -- the start value is not below the teacher's;
* **lost within noise** -- below, but not significantly;
* **recovered** -- significantly lost, and after distillation not significantly below the teacher;
* **partly recovered** -- still significantly below the teacher, but significantly raised;
* **not recovered** -- neither.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cascade_rl.eval.forgetting import Change, change
from cascade_rl.eval.runs import StageRecord, load_stages, read_metrics, recipe_targets
from cascade_rl.eval.tables import format_duration, format_table


@dataclass
class Measured:
    """A benchmark value after some stage, in percent, and its standard error (None: not recorded)."""

    stage: str
    value: float | None
    stderr: float | None

    def text(self) -> str:
        if self.value is None:
            return "—"
        return f"{self.value:.1f}" + (f" ± {self.stderr:.1f}" if self.stderr is not None else "")


@dataclass
class RecoveryRow:
    """One teacher's own benchmark across the three checkpoints; ``lost`` is teacher - start,
    ``changed`` distillation - start, ``gap`` distillation - teacher."""

    benchmark: str
    domain: str
    teacher: Measured
    start: Measured
    after: Measured
    lost: Change | None = None
    changed: Change | None = None
    gap: Change | None = None

    @property
    def verdict(self) -> str:
        if self.lost is None or self.changed is None or self.gap is None:
            return "not measured"
        if self.lost.delta <= 0:
            return "nothing lost"
        if not significant(self.lost):
            return "lost within noise"
        if not significant(Change(-self.gap.delta, self.gap.stderr)):
            return "recovered"
        return "partly recovered" if significant(self.changed) else "not recovered"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "verdict": self.verdict}


def significant(difference: Change) -> bool:
    """Above zero by more than twice its standard error (any positive value when it is unknown)."""
    return difference.delta > 2.0 * (difference.stderr or 0.0)


@dataclass
class Recovery:
    """One distill stage: its rows, what it cost and its directory."""

    stage: str
    rows: list[RecoveryRow]
    cost: dict[str, Any]
    directory: Path | None = None
    plot: str | None = None

    def to_json(self) -> dict[str, Any]:
        rows = [row.to_json() for row in self.rows]
        return {"stage": self.stage, "rows": rows, "cost": self.cost, "plot": self.plot}


# ---------------------------------------------------------------------------- reading


class Stages:
    """Finished stages (with their evaluation samples) by directory, each run read once."""

    def __init__(self) -> None:
        self.records: dict[Path, StageRecord] = {}
        self.runs: set[Path] = set()

    def get(self, stage_dir: Path | None) -> StageRecord | None:
        if stage_dir is None:
            return None
        stage_dir = Path(stage_dir).resolve()
        if stage_dir.parent not in self.runs:
            self.runs.add(stage_dir.parent)
            for record in load_stages(stage_dir.parent, samples=True)[0]:
                self.records[record.directory.resolve()] = record
        return self.records.get(stage_dir)


def measured(record: StageRecord | None, benchmark: str) -> Measured:
    if record is None:
        return Measured("—", None, None)
    return Measured(record.name, record.eval.get(benchmark), record.eval_stderr.get(benchmark))


def difference(before: StageRecord | None, after: StageRecord | None, benchmark: str) -> Change | None:
    """``after - before`` with its paired standard error (combined errors without samples)."""
    if before is None or after is None:
        return None
    found = change(before, after, benchmark)
    if found is None or found.stderr is not None:
        return found
    errors = [record.eval_stderr.get(benchmark) for record in (before, after)]
    combined = math.sqrt(sum(e * e for e in errors)) if all(e is not None for e in errors) else None
    return Change(found.delta, combined)


def stage_recovery(stage_dir: Path, stages: Stages | None = None) -> Recovery | None:
    """The recovery of the distill stage in ``stage_dir`` (None when it has no ``distill.json``)."""
    record_path = stage_dir / "distill.json"
    if not record_path.exists():
        return None
    stages = stages or Stages()
    record = json.loads(record_path.read_text())
    start = stages.get(Path(record["student_stage_dir"]) if record.get("student_stage_dir") else None)
    after = stages.get(stage_dir)
    rows = []
    for domain, teacher in record["teachers"].items():
        if not teacher.get("stage_dir"):
            continue  # a checkpoint from outside any run, or a server: no evaluation to compare with
        taught_by = stages.get(Path(teacher["stage_dir"]))
        benchmark = recipe_targets(Path(teacher["stage_dir"]).parent)[0].get(taught_by.name) if taught_by else None
        if benchmark is None:
            continue
        rows.append(
            RecoveryRow(
                benchmark,
                domain,
                measured(taught_by, benchmark),
                measured(start, benchmark),
                measured(after, benchmark),
                lost=difference(start, taught_by, benchmark),
                changed=difference(start, after, benchmark),
                gap=difference(taught_by, after, benchmark),
            )
        )
    name = after.name if after else stage_dir.name
    return Recovery(name, rows, stage_cost(stage_dir), stage_dir)


def stage_cost(stage_dir: Path) -> dict[str, Any]:
    """Steps, wall time (training, evaluation) and the share spent scoring with teachers."""
    status = json.loads((stage_dir / "stage.json").read_text()) if (stage_dir / "stage.json").exists() else {}
    metrics, _ = read_metrics(stage_dir / "metrics.jsonl")
    return {
        "steps": len(metrics),
        "train_s": status.get("train_s"),
        "eval_s": status.get("eval_s"),
        "teacher_s": sum(float(m.get("time/teacher", 0.0)) for m in metrics),
        "student_scoring_s": sum(float(m.get("time/student", 0.0)) for m in metrics),
        "generation_s": sum(float(m.get("time/generation", 0.0)) for m in metrics),
        "step_s": sum(float(m.get("time/step", 0.0)) for m in metrics),
    }


def run_recovery(run_dir: Path) -> list[Recovery]:
    """Every finished distill stage of the run, in order."""
    stages, found = Stages(), []
    for stage_dir in sorted(path for path in Path(run_dir).iterdir() if path.is_dir()):
        status_path = stage_dir / "stage.json"
        if status_path.exists() and json.loads(status_path.read_text()).get("status") == "done":
            recovery = stage_recovery(stage_dir, stages)
            if recovery is not None:
                found.append(recovery)
    return found


# ---------------------------------------------------------------------------- writing

COLUMNS = (
    "benchmark",
    "teacher",
    "after own stage",
    "student start",
    "after distillation",
    "lost",
    "distillation changed",
    "verdict",
)


def table_rows(recovery: Mapping[str, Any] | Recovery) -> list[list[str]]:
    rows = recovery.rows if isinstance(recovery, Recovery) else [_row_from_json(r) for r in recovery["rows"]]
    return [
        [
            row.benchmark,
            f"{row.domain} <- {row.teacher.stage}",
            row.teacher.text(),
            f"{row.start.text()} ({row.start.stage})",
            row.after.text(),
            row.lost.text() if row.lost else "—",
            row.changed.text() if row.changed else "—",
            row.verdict,
        ]
        for row in rows
    ]


def _row_from_json(data: Mapping[str, Any]) -> RecoveryRow:
    changes = {key: Change(**data[key]) if data.get(key) else None for key in ("lost", "changed", "gap")}
    measures = {key: Measured(**data[key]) for key in ("teacher", "start", "after")}
    return RecoveryRow(data["benchmark"], data["domain"], **measures, **changes)


def summary_sentence(recovery: Recovery) -> str:
    """The verdicts in words: what had been lost, what came back, what distillation lowered."""
    lost = [row for row in recovery.rows if row.verdict in ("recovered", "partly recovered", "not recovered")]
    noise = [row.benchmark for row in recovery.rows if row.verdict == "lost within noise"]
    if lost:
        words = [f"{row.benchmark} {row.verdict}" for row in lost]
        text = f"Significantly below its teacher when distillation started: {len(lost)} ({'; '.join(words)})."
    else:
        text = "No teacher's own benchmark was significantly below the teacher when distillation started."
    if noise:
        text += f" Below it within noise: {', '.join(noise)}."
    lowered = [
        row.benchmark
        for row in recovery.rows
        if row.changed and significant(Change(-row.changed.delta, row.changed.stderr))
    ]
    if lowered:
        text += f" Distillation significantly lowered: {', '.join(lowered)}."
    return text


def cost_sentence(cost: Mapping[str, Any]) -> str:
    parts = [f"{cost['steps']} steps"]
    if cost.get("train_s") is not None:
        parts.append(f"training {format_duration(cost['train_s'])}")
    if cost.get("step_s"):
        shares = ", ".join(
            f"{name} {100 * cost[key] / cost['step_s']:.0f}%"
            for name, key in (
                ("generation", "generation_s"),
                ("teacher scoring", "teacher_s"),
                ("student scoring", "student_scoring_s"),
            )
        )
        parts.append(f"of the step time: {shares}")
    if cost.get("eval_s") is not None:
        parts.append(f"evaluation {format_duration(cost['eval_s'])}")
    return "Cost: " + "; ".join(parts) + "."


def markdown(recoveries: Sequence[Recovery]) -> str:
    lines: list[str] = []
    for recovery in recoveries:
        lines += [
            f"## What distillation recovered ({recovery.stage})",
            "",
            "Per teacher, its own benchmark after its own stage, after the stage the student started from, and "
            "after distillation (percent ± standard error over prompts); lost = own stage - start and "
            "distillation changed = after distillation - start, in points ± their standard error paired over "
            "prompts. A difference counts when it exceeds twice its error.",
            "",
            format_table(table_rows(recovery), COLUMNS) if recovery.rows else "(no teacher is an evaluated stage)",
            "",
            summary_sentence(recovery) + " " + cost_sentence(recovery.cost),
            "",
        ]
        if recovery.plot:
            lines += [f"![{recovery.stage}: reverse KL and response length per domain]({recovery.plot})", ""]
    return "\n".join(lines)


def plot_domains(stage_dir: Path, name: str, path: Path) -> Path | None:
    """Per domain and step: the mean reverse KL to its teacher and the response length."""
    metrics, _ = read_metrics(stage_dir / "metrics.jsonl")
    domains = sorted({key.split("/")[1] for row in metrics for key in row if _is_domain_kl(key)})
    if not domains:
        return None
    from matplotlib.figure import Figure

    figure = Figure(figsize=(11, 4), dpi=100)
    kl_axes, length_axes = figure.subplots(1, 2)
    for domain in domains:
        for axes, key in ((kl_axes, f"distill/{domain}/reverse_kl"), (length_axes, f"response_length/{domain}")):
            points = [(row["step"], row[key]) for row in metrics if key in row]
            axes.plot([x for x, _ in points], [y for _, y in points], label=domain)
    for axes, title in ((kl_axes, "reverse KL to the teacher per token"), (length_axes, "response length (tokens)")):
        axes.set_title(f"{name}: {title}")
        axes.set_xlabel("step")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(path)
    return path


def _is_domain_kl(key: str) -> bool:
    return key.startswith("distill/") and key.endswith("/reverse_kl") and key.count("/") == 2


def add_recovery(run_dir: Path, report_path: Path) -> None:
    """Append each distill stage's recovery to ``report.md`` and ``report.json`` (no-op without one)."""
    recoveries = run_recovery(Path(run_dir))
    if not recoveries:
        return
    (Path(run_dir) / "plots").mkdir(exist_ok=True)
    for recovery in recoveries:
        assert recovery.directory is not None
        plot = plot_domains(
            recovery.directory, recovery.stage, Path(run_dir) / "plots" / f"{recovery.directory.name}-domains.png"
        )
        recovery.plot = str(plot.relative_to(run_dir)) if plot else None
    with open(report_path, "a", encoding="utf-8") as handle:
        handle.write("\n" + markdown(recoveries))
    json_path = Path(report_path).with_suffix(".json")
    report = json.loads(json_path.read_text())
    report["recovery"] = [recovery.to_json() for recovery in recoveries]
    json_path.write_text(json.dumps(report, indent=2) + "\n")


def print_recovery(report: Mapping[str, Any], console: Any) -> None:
    """The recovery table(s) of ``report.json`` on a rich console."""
    from rich.table import Table

    for recovery in report.get("recovery", []):
        table = Table(title=f"What distillation recovered ({recovery['stage']})")
        for column in COLUMNS:
            table.add_column(column, justify="left" if column in ("benchmark", "teacher", "verdict") else "right")
        for row in table_rows(recovery):
            table.add_row(*row)
        console.print(table)
        rows = [_row_from_json(row) for row in recovery["rows"]]
        console.print(summary_sentence(Recovery(recovery["stage"], rows, recovery["cost"])))
        console.print(cost_sentence(recovery["cost"]))
