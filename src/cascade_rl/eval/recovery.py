"""What a distillation stage won back (Nemotron-Cascade 2's multi-domain on-policy distillation;
docs/mopd.md): for every teacher that is a stage checkpoint, its own benchmark's value after that
stage (the teacher), after the stage the student started from, and after distillation, each with
its standard error over prompts, and whether what was lost came back; plus what the stage cost.

Inputs, as the engine writes them: the distill stage's ``distill.json`` (the student's starting
checkpoint and each domain's teacher with its stage directory), every stage's ``eval.json`` and
``stage.json``, and the ``recipe.json`` of the run a teacher stage belongs to (its
``eval.targets`` say which benchmark is that stage's own). :func:`add_recovery` appends the
section to ``report.md`` and a ``recovery`` list to ``report.json``; :func:`print_recovery`
prints the table after a run.

Verdicts (differences of values measured on the same prompts; their standard errors are
combined as if independent, which overstates the noise):

* **nothing lost** -- the start value is not below the teacher's;
* **recovered** -- something was lost, distillation raised the benchmark, and its value is at
  least the teacher's minus one standard error of that difference;
* **partly recovered** -- raised, but less than that;
* **not recovered** -- something was lost and distillation did not raise it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from cascade_rl.eval.report import format_duration, format_table, read_eval, read_metrics, recipe_targets


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
    """One teacher's own benchmark across the three checkpoints."""

    benchmark: str
    domain: str
    teacher: Measured
    start: Measured
    after: Measured

    @property
    def lost(self) -> float | None:
        return _difference(self.teacher, self.start)

    @property
    def regained(self) -> float | None:
        return _difference(self.after, self.start)

    @property
    def verdict(self) -> str:
        lost, regained, gap = self.lost, self.regained, _difference(self.after, self.teacher)
        if lost is None or regained is None or gap is None:
            return "not measured"
        if lost <= 0:
            return "nothing lost"
        if regained <= 0:
            return "not recovered"
        return "recovered" if gap >= -_combined(self.after, self.teacher) else "partly recovered"

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "lost": self.lost, "regained": self.regained, "verdict": self.verdict}


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


def _difference(a: Measured, b: Measured) -> float | None:
    return None if a.value is None or b.value is None else a.value - b.value


def _combined(a: Measured, b: Measured) -> float:
    return math.sqrt((a.stderr or 0.0) ** 2 + (b.stderr or 0.0) ** 2)


# ---------------------------------------------------------------------------- reading


def _stage_name(stage_dir: Path) -> str:
    path = stage_dir / "stage.json"
    return str(json.loads(path.read_text()).get("name", stage_dir.name)) if path.exists() else stage_dir.name


def measured(stage_dir: Path | None, benchmark: str) -> Measured:
    if stage_dir is None:
        return Measured("—", None, None)
    values, _, stderr = read_eval(stage_dir / "eval.json")
    return Measured(_stage_name(stage_dir), values.get(benchmark), stderr.get(benchmark))


def stage_recovery(stage_dir: Path) -> Recovery | None:
    """The recovery of the distill stage in ``stage_dir`` (None when it has no ``distill.json``)."""
    record_path = stage_dir / "distill.json"
    if not record_path.exists():
        return None
    record = json.loads(record_path.read_text())
    start_dir = Path(record["student_stage_dir"]) if record.get("student_stage_dir") else None
    rows = []
    for domain, teacher in record["teachers"].items():
        if not teacher.get("stage_dir"):
            continue  # a checkpoint from outside any run, or a server: no evaluation to compare with
        teacher_dir = Path(teacher["stage_dir"])
        benchmark = recipe_targets(teacher_dir.parent)[0].get(_stage_name(teacher_dir))
        if benchmark is None:
            continue
        rows.append(
            RecoveryRow(
                benchmark,
                domain,
                measured(teacher_dir, benchmark),
                measured(start_dir, benchmark),
                measured(stage_dir, benchmark),
            )
        )
    return Recovery(_stage_name(stage_dir), rows, stage_cost(stage_dir), stage_dir)


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
    found = []
    for stage_dir in sorted(path for path in Path(run_dir).iterdir() if path.is_dir()):
        status_path = stage_dir / "stage.json"
        if status_path.exists() and json.loads(status_path.read_text()).get("status") == "done":
            recovery = stage_recovery(stage_dir)
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
    "regained",
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
            _signed(row.lost),
            _signed(row.regained),
            row.verdict,
        ]
        for row in rows
    ]


def _row_from_json(data: Mapping[str, Any]) -> RecoveryRow:
    return RecoveryRow(
        data["benchmark"],
        data["domain"],
        Measured(**data["teacher"]),
        Measured(**data["start"]),
        Measured(**data["after"]),
    )


def _signed(value: float | None) -> str:
    return "—" if value is None else f"{value:+.1f}"


def summary_sentence(recovery: Recovery) -> str:
    lost = [row for row in recovery.rows if row.verdict not in ("nothing lost", "not measured")]
    back = [row for row in lost if row.verdict == "recovered"]
    partly = [row for row in lost if row.verdict == "partly recovered"]
    if not lost:
        text = "No teacher's own benchmark had fallen below the teacher's value when distillation started."
    else:
        text = (
            f"{len(lost)} benchmark(s) had fallen below their teacher's value; distillation recovered "
            f"{len(back)} ({', '.join(r.benchmark for r in back) or 'none'}), partly {len(partly)}"
            f"{' (' + ', '.join(r.benchmark for r in partly) + ')' if partly else ''}."
        )
    noisy = [
        row.benchmark
        for row in recovery.rows
        if row.lost is not None and abs(row.lost) < _combined(row.teacher, row.start)
    ]
    if noisy:
        text += f" Within one standard error, so not conclusive: the loss on {', '.join(noisy)}."
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
            "after distillation (percent ± standard error over prompts); lost = own stage - start, "
            "regained = distillation - start, in points.",
            "",
            format_table(table_rows(recovery), COLUMNS) if recovery.rows else "(no teacher is an evaluated stage)",
            "",
            summary_sentence(recovery) + " " + cost_sentence(recovery.cost),
            "",
        ]
        if recovery.plot:
            lines += [f"![{recovery.stage}: reverse KL and response length per domain]({recovery.plot})", ""]
    return "\n".join(lines)


def plot_domains(stage_dir: Path, path: Path) -> Path | None:
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
        axes.set_title(f"{_stage_name(stage_dir)}: {title}")
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
        plot = plot_domains(recovery.directory, Path(run_dir) / "plots" / f"{recovery.directory.name}-domains.png")
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
        console.print(cost_sentence(recovery["cost"]))
